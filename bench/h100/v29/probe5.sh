#!/bin/bash
# Device A/B for issue 9 (stop 39): .bin/old (be5dff6; --quant-out-glu true on the 8B, 36d0333's
# default) against .bin/new (the INORM sums of squares loaded before the weights, added after).
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
chmod +x .bin/old .bin/new; M=/tmp/sbs/models; mkdir -p $M
nvidia-smi --query-gpu=name --format=csv,noheader
[[ -f $M/l8b.gguf ]] || (.bin/new gen --shape llama-3-8b --type Q4_K_M $M/l8b.gguf >/dev/null 2>&1; echo "8B written at t=$(el)") &
for t in F16 Q4_K_M Q8_0; do [[ -f $M/l1b-$t.gguf ]] || .bin/new gen --shape llama-3.2-1b --type $t $M/l1b-$t.gguf >/dev/null; done
echo "1B files at t=$(el)"
run() { (($(el) < 550)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((555 - $(el))) $b bench "$@" 2>&1 | grep -E "^(prefill|decode tg|dispatches)"; }
.bin/new bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2 3; do for t in Q8_0 Q4_K_M F16; do for b in .bin/old .bin/new; do run $b $M/l1b-$t.gguf --prompt 512 --gen 128 --repeats 2; done; done; done
wait
for r in 1 2 3; do for b in .bin/old .bin/new; do run $b $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 --quant-out-glu true; done; done
for b in .bin/old .bin/new; do echo "### $b profile"; $b bench $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --quant-out-glu true --profile 2>&1 | sed -n '/profile: decode/,/whole batch/p' | grep -E "norm|whole batch"; done
echo "done at t=$(el)"
