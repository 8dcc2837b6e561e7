#!/bin/bash
# Device sweep for issue 9 (stop 40), with attention_decode_wide.wgsl on for head dims past 64:
# the one-token matvec's knobs re-measured on an H100 (per-kernel profile at 512 keys, then
# tg128), the 8B first; and the CPU side of a step (record, submit, wait) for both shapes.
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; chmod +x $B
models $B Q4_K_M 8b; wait
LIMIT=${LIMIT:-560}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 20 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg|CPU|wait)|^  (matvec|attention_decode|quantize)|whole batch in one pass.*(99|195) "; }
$B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
K=("" "--tpr 32" "--tpr 128" "--rpt 1" "--rpt 4" "--rpt-glu 1" "--rpt-glu 4" "--unroll 2" "--quant-out-tpr 32")
for o in "${K[@]}"; do run $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --profile $o; done
for r in 1 2; do for o in "${K[@]}"; do run $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 $o | grep "decode tg"; done; done
for o in "" "--top-k 1" "--spin-wait false"; do run $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 $o; run $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 2 $o; done
for r in 1 2; do for o in "${K[@]}"; do run $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 2 $o | grep "decode tg"; done; done
echo "done at t=$(el)"
