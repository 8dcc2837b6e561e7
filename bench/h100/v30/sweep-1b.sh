#!/bin/bash
# Device sweep for issue 9 (stop 40): the one-token matvec's knobs on the 1B shape's F16 and
# Q8_0 files (tg128 after pp512, two rounds), and the Q8_0 after 4096 keys with the splits.
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; chmod +x $B
models $B Q8_0 F16
LIMIT=${LIMIT:-300}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 20 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg)"; }
$B bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do
  for o in "" "--tpr 32" "--tpr 128" "--rpt 2" "--rpt 8" "--unroll 2" "--span 16" "--wide false"; do run $M/l1b-F16.gguf --prompt 512 --gen 128 --repeats 2 $o; done
  for o in "" "--tpr 32" "--tpr 128" "--rpt 1" "--rpt 4" "--unroll 2" "--int-dot false"; do run $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 2 $o; done
done
for r in 1 2; do for o in "" "--splits 16" "--splits 48" "--attn-wide true" "--attn-heads 1"; do run $M/l1b-Q8_0.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 $o; done; done
echo "done at t=$(el)"
