#!/bin/bash
# Device call 4 of stop 43 (issue 9): .bin/old (36c3abc with --hollow) against .bin/new (the
# integer-form writers' tail in four threads), alternated, tg128 after pp512 for issue 9's
# integer-form files (greedy, and as llama-bench's tg for the 1B Q4_K_M; F16 has no integer
# form, so no QOUT: unchanged), to carry v32's side by side forward.
source bench/h100/v30/common.sh
chmod +x .bin/old .bin/new
models .bin/new Q8_0 Q4_K_M 8b
LIMIT=${LIMIT:-200}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((LIMIT + 20 - $(el))) $b bench "$@" 2>&1 | grep -E "^(decode tg)"; }
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do for m in Q8_0 Q4_K_M; do for b in .bin/old .bin/new; do run $b $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
for b in .bin/old .bin/new; do run $b $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 2 --random-next; done
wait
for r in 1 2; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2; done; done
echo "done at t=$(el)"
