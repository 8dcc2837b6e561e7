#!/usr/bin/env bash
# The H200 benchmark run behind BENCHMARKS.md (native Vulkan through wgpu): for each model, write a
# random-weight GGUF of that shape to /tmp (`webgpu-llama gen`) and bench it (pp512 / tg128, 3
# repeats), one text report per model in OUT. BIN is the release binary
# (`cargo build --release` -> target/release/webgpu-llama). On a machine without a Vulkan loader,
# put the loader's Debian packages (libvulkan1 and the GL/EGL ones) in .gl/ and run as root: they
# are unpacked into / first; NVIDIA's ICD is used unless VK_DRIVER_FILES says otherwise.
#   usage: scripts/bench-h200.sh BIN OUT [MODELS...]   MODELS like llama-3.2-1b:q8_0 smollm2-135m:q4_1
set -euo pipefail
BIN=$1 OUT=$2
shift 2
models=("$@")
((${#models[@]})) || models=(llama-3.2-1b:q8_0 llama-3.2-1b:f16 llama-3.2-1b:q4_k_m smollm2-135m:q4_1)
if compgen -G '.gl/*.deb' >/dev/null; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[[ -n ${VK_DRIVER_FILES:-} || ! -f $nvidia_icd ]] || export VK_DRIVER_FILES=$nvidia_icd
mkdir -p "$OUT"
for m in "${models[@]}"; do
    shape=${m%%:*} ty=${m##*:}
    file=/tmp/$shape-$ty.gguf
    [[ -f $file ]] || "$BIN" gen --shape "$shape" --type "$ty" "$file"
    timeout 200 "$BIN" bench "$file" --prompt 512 --gen 128 --repeats 3 --peak-gbs 4800 | tee "$OUT/$shape-$ty.txt"
done
