#!/bin/bash
# Device probe 2 for issue 9 (stop 39): --v-to-cache, --attn-heads, --quant-out-glu A/Bs and profiles.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=.bin/webgpu-llama; chmod +x $B; M=/tmp/sbs/models; mkdir -p $M
[[ -f $M/l8b.gguf ]] || ($B gen --shape llama-3-8b --type Q4_K_M $M/l8b.gguf >/dev/null 2>&1; echo "8B written at t=$(el)") &
for t in F16 Q4_K_M Q8_0; do [[ -f $M/l1b-$t.gguf ]] || $B gen --shape llama-3.2-1b --type $t $M/l1b-$t.gguf >/dev/null; done
echo "1B files at t=$(el)"
run() { (($(el) < 550)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((555 - $(el))) $B bench "$@" --peak-gbs 4800 2>&1 | grep -vE "^(model|load|weights on|GPU memory|decode readout|bandwidth bound|adapter)"; }
prof() { run "$@" --prompt 512 --gen 8 --repeats 1 --profile | sed -n '/profile: decode/,/whole batch/p'; }
prof $M/l1b-Q8_0.gguf
prof $M/l1b-Q4_K_M.gguf --v-to-cache false
for r in 1 2; do
  for o in "" "--v-to-cache false"; do run $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 2 $o | grep -E "^###|decode tg|dispatches"; done
  for o in "" "--attn-heads 1"; do run $M/l1b-F16.gguf --prompt 512 --gen 128 --repeats 2 $o | grep -E "^###|decode tg"; done
done
wait
for r in 1 2; do for o in "" "--v-to-cache false" "--quant-out-glu true" "--quant-out-glu true --v-to-cache false"; do run $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 $o | grep -E "^###|decode tg|dispatches"; done; done
prof $M/l8b.gguf --v-to-cache false --quant-out-glu true
echo "done at t=$(el)"
