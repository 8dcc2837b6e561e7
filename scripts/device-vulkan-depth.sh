#!/bin/bash
# On the device machine (the H200): llama.cpp Vulkan and webgpu-llama on the same GGUF files in
# one call (../shared/bench/side_by_side.sh, copied to bench-carry/ by scripts/side-by-side-carry.sh),
# then webgpu-llama's pp512 / tg128 at depth 4096 on the same four files (llama-bench's -d 4096 is
# in the lc-vk-long and lc-vk-8b steps): issue 8's last item. Writes $OUT/log and $OUT/depth.
#   device tool: command `bash scripts/device-vulkan-depth.sh`, kind nvidia-h200,
#                carry [".bin", ".gl", ".whl", ".devcarry", "bench-carry"]
set -o pipefail
T0=$(date +%s)
DEADLINE=430 bash bench-carry/side_by_side.sh vulkan vk-build models gen8b quant8b lc-vk wg lc-vk-long lc-vk-8b wg-8b 2>&1 | tee "$OUT/log"
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
for m in l1b-q8_0 l1b-q4_k_m l1b-f16 l8b-q4_k_m; do
    f=/tmp/sbs/models/$m.gguf
    [[ -f $f ]] || { echo "### depth 4096 $m: no model"; continue; }
    left=$((585 - ($(date +%s) - T0)))
    ((left > 25)) || { echo "### depth 4096 $m: SKIPPED ($left s left)"; continue; }
    echo "### webgpu-llama bench $m --depth 4096 --prompt 512 --gen 128 (t=$(($(date +%s) - T0)) s)"
    timeout $((left - 3)) .bin/webgpu-llama bench "$f" --depth 4096 --prompt 512 --gen 128 --ctx 4736 --repeats 2 --peak-gbs 4800
done 2>&1 | tee "$OUT/depth"
