#!/bin/bash
# Device A/B for issue 9 (stop 39): .bin/old (be5dff6; --quant-out-glu true on the 8B, 36d0333's
# default) against .bin/new (the INORM sums of squares loaded before the weights, added after).
TYPES="F16 Q4_K_M Q8_0" . "$(dirname "$0")/ab-common.sh"
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2 3; do for t in Q8_0 Q4_K_M F16; do for b in .bin/old .bin/new; do run $b $M/l1b-$t.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
wait
for r in 1 2 3; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 --quant-out-glu true; done; done
for b in .bin/old .bin/new; do echo "### $b profile"; $b bench $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --quant-out-glu true --profile 2>&1 | sed -n '/profile: decode/,/whole batch/p' | grep -E "norm|whole batch"; done
echo "done at t=$(el)"
