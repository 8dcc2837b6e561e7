#!/bin/bash
# Device call 6 of stop 41 (issue 9): ../shared/bench/side_by_side.sh (llama.cpp CUDA and
# webgpu-llama on the same files: the 1B shape's F16, Q8_0, Q4_K_M, the 8B Q4_K_M; tg128 after
# pp512 and after 4096 tokens), this commit's binary; then on the same files the f16 cache
# (llama.cpp's own cache type) at 512 and after 4096 keys, and short steps' one query head a
# workgroup against two (--attn-heads-until 0), alternated.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
DEADLINE=${DEADLINE:-330} WG_LONG_REPEATS=2 bash bench-carry/side_by_side.sh cuda cuda-build models gen8b quant8b lc-cuda wg lc-cuda-long wg-long lc-cuda-8b wg-8b wg-8b-long
M=/tmp/sbs/models; B=.bin/webgpu-llama; LIMIT=${LIMIT:-440}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 30 - $(el))) $B bench "$@" 2>&1 | grep -E "^decode tg"; }
echo "## the f16 cache"
for m in l8b-q4_k_m l1b-q8_0 l1b-q4_k_m l1b-f16; do
  run $M/$m.gguf --prompt 512 --gen 128 --repeats 2 --kv f16
  run $M/$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv f16
done
echo "## one query head a workgroup up to 1024 keys (default) against two (--attn-heads-until 0)"
for r in 1 2; do for m in l1b-q4_k_m l1b-q8_0 l1b-f16; do for o in "" "--attn-heads-until 0"; do
  run $M/$m.gguf --prompt 512 --gen 128 --repeats 2 $o
done; done; done
echo "done at t=$(el)"
