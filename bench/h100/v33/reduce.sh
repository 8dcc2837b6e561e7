#!/bin/bash
# Prepared in stop 43, not run (no device time left): .bin/old (e804e44) against .bin/new (a row's subgroup
# sums, up to 8 of them, added by the row's thread 0 after one barrier instead of a tree with a
# barrier a level), alternated: tg128 after pp512 of the 1B Q8_0 and Q4_K_M, then the 1B
# Q4_K_M's profile with each. .bin/new is e804e44 with one-barrier-reduce.diff applied.
source bench/h100/v30/common.sh
chmod +x .bin/old .bin/new
models .bin/new Q8_0 Q4_K_M
LIMIT=${LIMIT:-110}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((LIMIT + 20 - $(el))) $b bench "$@" 2>&1 | grep -E "^(decode tg)|^  matvec|whole batch in one pass.*(99|115) "; }
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2 3; do for m in Q8_0 Q4_K_M; do for b in .bin/old .bin/new; do run $b $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
for b in .bin/old .bin/new; do run $b $M/l1b-Q4_K_M.gguf --prompt 512 --gen 8 --repeats 1 --profile; done
echo "done at t=$(el)"
