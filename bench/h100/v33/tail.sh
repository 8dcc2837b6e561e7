#!/bin/bash
# Device call 3 of stop 43 (issue 9): the integer-form writers' tail (QOUT: the workgroup's 16
# rows quantised for the next op after a barrier). .bin/old (36c3abc with --hollow: one thread
# converts the 16 values), .bin/new (four threads, a word of digits each), .bin/notail (the tail
# skipped: wrong integers, timing only: what the tail costs at most), alternated; then each
# one's per-kernel profile of the 8B and the 1B Q4_K_M at 512 keys.
source bench/h100/v30/common.sh
chmod +x .bin/old .bin/new .bin/notail
models .bin/new Q8_0 Q4_K_M 8b
LIMIT=${LIMIT:-540}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((LIMIT + 20 - $(el))) $b bench "$@" 2>&1 | grep -E "^(decode tg)|^  (matvec|attention_decode|quantize)|whole batch in one pass.*(99|115|195|227) "; }
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do for m in Q8_0 Q4_K_M; do for b in .bin/old .bin/new .bin/notail; do run $b $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
wait
for r in 1 2; do for b in .bin/old .bin/new .bin/notail; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2; done; done
for b in .bin/old .bin/new .bin/notail; do run $b $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --profile; done
for b in .bin/old .bin/new .bin/notail; do run $b $M/l1b-Q4_K_M.gguf --prompt 512 --gen 8 --repeats 1 --profile; done
echo "done at t=$(el)"
