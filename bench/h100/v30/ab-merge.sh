#!/bin/bash
# Device A/B for issue 9 (stop 40): .bin/old (the side-by-side's binary: attention_decode_wide.wgsl
# for head dims past 64) against .bin/new (the same, and the merge of the key splits in split
# groups: one round of loads for up to 8 x MG splits), alternated, at 512 and after 4096 keys.
source bench/h100/v30/common.sh
chmod +x .bin/old .bin/new
models .bin/new Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-250}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((LIMIT + 20 - $(el))) $b bench "$@" 2>&1 | grep -E "^(decode tg)|^  attention_decode|whole batch in one pass.*(82|83|99|195) "; }
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do for m in Q8_0 Q4_K_M F16; do for b in .bin/old .bin/new; do run $b $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
for r in 1 2; do for m in Q8_0 Q4_K_M F16; do for b in .bin/old .bin/new; do run $b $M/l1b-$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1; done; done; done
wait
for r in 1 2; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2; done; done
for r in 1 2; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1; done; done
for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 8 --repeats 1 --profile; done
echo "done at t=$(el)"
