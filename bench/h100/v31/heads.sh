#!/bin/bash
# Device call 5 of stop 41 (issue 9): one query head a workgroup (--attn-heads 1) against the
# default two, head dim 64 (attention_decode.wgsl), tg128 at 512, 1024 and 2048 keys on the
# three 1B files, alternated; and 16 key splits after 4096 keys (--splits 16) against the
# default 32 on the 8B (attention_decode_wide.wgsl), f32 and f16 caches. New build.
source bench/h100/v30/common.sh
B=.bin/new; chmod +x $B
models $B Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-300}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 40 - $(el))) $B bench "$@" 2>&1 | grep -E "^decode tg"; }
$B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do for m in Q8_0 Q4_K_M F16; do for p in 512 1024 2048; do for o in "" "--attn-heads 1"; do
  run $M/l1b-$m.gguf --prompt $p --ctx 4352 --gen 128 --repeats 1 $o
done; done; done; done
wait
for r in 1 2; do for kv in f32 f16; do for o in "" "--splits 16"; do run $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv $kv $o; done; done; done
echo "done at t=$(el)"
