#!/bin/bash
# Device A/B for issue 9 (stop 39): .bin/old (be5dff6) against .bin/new (K prefetch in one-token
# attention for head dims up to 64; the SwiGLU matvec's QOUT at every width).
TYPES="F16 Q4_K_M Q8_0" . "$(dirname "$0")/ab-common.sh"
for r in 1 2 3; do for t in Q8_0 Q4_K_M F16; do for b in .bin/old .bin/new; do run $b $M/l1b-$t.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
for r in 1 2; do for b in .bin/old .bin/new; do run $b $M/l1b-Q8_0.gguf --prompt 4096 --gen 128 --ctx 4352 --repeats 1; done; done
wait
for r in 1 2 3; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2; done; done
for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 4096 --gen 128 --ctx 4352 --repeats 1; done
echo "done at t=$(el)"
