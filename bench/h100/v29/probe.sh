#!/bin/bash
# Device probe for issue 9 (stop 39): profiles and knob A/Bs on `webgpu-llama gen` files.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=.bin/webgpu-llama; chmod +x $B; M=/tmp/sbs/models; mkdir -p $M
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
[[ -f $M/l8b.gguf ]] || ($B gen --shape llama-3-8b --type Q4_K_M $M/l8b.gguf >/dev/null 2>&1; echo "8B written at t=$(el)") &
for t in F16 Q4_K_M Q8_0; do [[ -f $M/l1b-$t.gguf ]] || $B gen --shape llama-3.2-1b --type $t $M/l1b-$t.gguf >/dev/null; done
echo "1B files at t=$(el)"
run() { (($(el) < 550)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((555 - $(el))) $B bench "$@" --peak-gbs 4800 2>&1 | grep -vE "^(model|load|weights on|GPU memory|decode readout|bandwidth bound)"; }
for m in Q4_K_M F16; do run $M/l1b-$m.gguf --prompt 512 --gen 8 --repeats 1 --profile | grep -v "^  matmul\|^  attention_tiled\|^  split\|^  swiglu\|^  rope_kv\|^  rmsnorm\|prefill of"; done
for r in 1 2; do
  for m in F16 Q4_K_M Q8_0; do for o in "" "--kv f16"; do run $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2 $o | grep -E "^###|decode tg|dispatches"; done; done
done
wait
for r in 1 2; do for o in "" "--quant-out-glu true" "--kv f16"; do run $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 $o | grep -E "^###|decode tg|dispatches"; done; done
for m in $M/l1b-Q8_0.gguf $M/l8b.gguf; do for o in "" "--kv f16"; do run $m --prompt 4096 --gen 128 --ctx 4352 --repeats 1 $o | grep -E "^###|decode tg|prefill"; done; done
run $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --profile | grep -v "^  matmul\|^  attention_tiled\|^  split\|^  swiglu\|^  rope_kv\|^  rmsnorm"
echo "done at t=$(el)"
