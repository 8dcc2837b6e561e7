#!/bin/bash
# Device A/B for issue 9 (stop 40): .bin/old (attention_decode_wide.wgsl on for head dims past
# 64) against .bin/new (the same, and the integer form's 128 threads a row for rows of 4096
# weights or more without QOUT, 1 row per thread for the SwiGLU matvec of such rows), alternated.
source bench/h100/v30/common.sh
chmod +x .bin/old .bin/new
models .bin/new Q8_0 Q4_K_M 8b
LIMIT=${LIMIT:-300}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((LIMIT + 20 - $(el))) $b bench "$@" 2>&1 | grep -E "^(decode tg|dispatches)|^  (matvec|attention_decode)|whole batch in one pass.*(99|195) "; }
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do for m in Q8_0 Q4_K_M; do for b in .bin/old .bin/new; do run $b $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
wait
for r in 1 2 3; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2; done; done
for r in 1 2; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1; done; done
run .bin/new $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --profile
echo "done at t=$(el)"
