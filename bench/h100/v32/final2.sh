#!/bin/bash
# Device call 2 of stop 42 (issue 9): the 8B Q4_K_M side by side (../shared/bench/side_by_side.sh
# cuda: llama.cpp CUDA tg128 after pp512 and at -d 512,4096; ours after 512 and 4096 tokens),
# then ours as llama-bench's tg (--random-next) and with the f16 cache on the same file.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
DEADLINE=${DEADLINE:-460} WG_LONG_REPEATS=1 bash bench-carry/side_by_side.sh cuda cuda-build gen8b quant8b lc-cuda-8b wg-8b wg-8b-long
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
M8=/tmp/sbs/models/l8b-q4_k_m.gguf; LIMIT=${LIMIT:-500}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 30 - $(el))) .bin/webgpu-llama bench "$@" 2>&1 | grep -E "^decode tg|staged"; }
run $M8 --prompt 512 --gen 128 --repeats 3 --random-next
run $M8 --prompt 512 --gen 128 --repeats 2 --kv f16
run $M8 --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv f16
echo "done at t=$(el)"
