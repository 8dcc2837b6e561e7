#!/bin/bash
# Device A/B for issue 9 (stop 39): .bin/old (be5dff6; --quant-out-glu true on the 8B, the new
# default) against .bin/new (q+k and v of a Q4_K_M file as one dispatch when decoding).
TYPES="Q4_K_M Q8_0" . "$(dirname "$0")/ab-common.sh"
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2 3; do for b in .bin/old .bin/new; do run $b $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 2; done; done
for b in .bin/old .bin/new; do run $b $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 2; done
echo "### .bin/new profile"; .bin/new bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 8 --repeats 1 --profile 2>&1 | sed -n '/profile: decode/,/whole batch/p'
wait
for r in 1 2 3; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 --quant-out-glu true; done; done
for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 4096 --gen 128 --ctx 4352 --repeats 1 --quant-out-glu true; done
echo "done at t=$(el)"
