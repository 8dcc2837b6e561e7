#!/bin/bash
# Device probe 4 for issue 9 (stop 39): a decode step's fixed costs. SmolLM2-135M shape (30 layers
# of matrices under 1.2 MB: the step is nearly all fixed costs) against the 1B shape, after 16
# and after 512 tokens (attention's share), per-kernel profile and the whole batch in one pass.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=.bin/webgpu-llama; chmod +x $B; M=/tmp/sbs/models; mkdir -p $M
nvidia-smi --query-gpu=name --format=csv,noheader
for s in smollm2-135m llama-3.2-1b; do [[ -f $M/$s.gguf ]] || $B gen --shape $s --type Q8_0 $M/$s.gguf >/dev/null; done
run() { echo "### t=$(el) bench $*"; $B bench "$@" 2>&1 | grep -vE "^(model|load|weights on|GPU memory|decode readout|bandwidth bound|adapter)"; }
run $M/llama-3.2-1b.gguf --prompt 512 --gen 128 --repeats 2 >/dev/null   # clocks up
for s in smollm2-135m llama-3.2-1b; do for p in 16 512; do
  run $M/$s.gguf --prompt $p --gen 128 --repeats 2 | grep -E "^###|decode tg|dispatches"
  run $M/$s.gguf --prompt $p --gen 8 --repeats 1 --profile | sed -n '/profile: decode/,/whole batch/p'
done; done
echo "done at t=$(el)"
