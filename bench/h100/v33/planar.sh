#!/bin/bash
# Device call 2 of stop 43 (issue 9): .bin/old (36c3abc with --hollow: each activation half's
# three digit words side by side) against .bin/new (the digits in three planes, so that a load
# instruction's lanes read neighbouring words), alternated; then both binaries' per-kernel
# profiles of the 8B at 512 keys.
source bench/h100/v30/common.sh
chmod +x .bin/old .bin/new
models .bin/new Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-540}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((LIMIT + 20 - $(el))) $b bench "$@" 2>&1 | grep -E "^(decode tg)|^  (matvec|attention_decode|quantize)|whole batch in one pass"; }
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do for m in Q8_0 Q4_K_M; do for b in .bin/old .bin/new; do run $b $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
wait
for r in 1 2 3; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2; done; done
for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --profile; done
for b in .bin/old .bin/new; do run $b $M/l1b-Q4_K_M.gguf --prompt 512 --gen 8 --repeats 1 --profile; done
echo "done at t=$(el)"
