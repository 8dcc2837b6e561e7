#!/usr/bin/env bash
# The H200 benchmark run behind BENCHMARKS.md (native Vulkan through wgpu). Runs on the device
# machine from the repo root with the release binary at BIN (built on x86-64 and carried there) and
# the Vulkan loader unpacked from .gl/*.deb (see /work/.library/device/README.md, "Headless
# rendering"). Writes the random-weight models to /tmp and one text report per model to OUT.
#   usage: scripts/bench-h200.sh BIN OUT [MODELS...]   MODELS like llama-3.2-1b:q8_0 smollm2-135m:q4_1
set -euo pipefail
BIN=$1 OUT=$2
shift 2
models=("$@")
((${#models[@]})) || models=(llama-3.2-1b:q8_0 llama-3.2-1b:f16 llama-3.2-1b:q4_k_m smollm2-135m:q4_1)
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
mkdir -p "$OUT"
for m in "${models[@]}"; do
    shape=${m%%:*} ty=${m##*:}
    file=/tmp/$shape-$ty.gguf
    [[ -f $file ]] || "$BIN" gen --shape "$shape" --type "$ty" "$file"
    timeout 200 "$BIN" bench "$file" --prompt 512 --gen 128 --repeats 3 --peak-gbs 4800 | tee "$OUT/$shape-$ty.txt"
done
