#!/usr/bin/env bash
# Prepares what ../shared/bench/side_by_side.sh needs on the device machine (llama.cpp and
# webgpu-llama on the same GGUF files in one device run, the comparison issues 8 and 9 ask for),
# as ignored folders of this checkout for the device tool's `carry` (64 MiB in all):
#   bench-carry/                   a copy of ../shared/bench (the script and make_model.py)
#   .bin/webgpu-llama              this checkout's release build
#   .gl/*.deb                      the Vulkan loader (libvulkan1) and the GL/EGL libraries wgpu loads
#   .whl/gguf-*.whl                gguf-py, for make_model.py (installed without its dependencies:
#                                  it imports numpy and PyYAML, which the device machine has)
#   .devcarry/llama-src.tar.xz     llama.cpp: the vendor/llama.cpp tree of the PyPI sdist
#                                  llama-cpp-python==0.3.36 (checked by its sha256), without docs,
#                                  models, tests, examples, the server and unused ggml backends
#   .devcarry/vkdeb/*.deb          glslc, shaderc, Vulkan and SPIR-V headers for llama.cpp's Vulkan build
# Idempotent: what is there is kept (but bench-carry/ and the binary, which are refreshed).
# Needs the network (PyPI, deb.debian.org through apt) and ../shared. Then, on the device tool:
#   run  command: bash bench-carry/side_by_side.sh cuda 2>&1 | tee $OUT/log   (or: vulkan)
#        carry:   [".bin", ".gl", ".whl", ".devcarry", "bench-carry"]
# (side_by_side.sh's header lists its steps; a second call only finds the models and builds of a
# machine that is still warm.) scripts/device-vulkan-depth.sh is issue 8's Vulkan call with the
# depth-4096 runs; scripts/device-ab.sh alternates two builds on the same files;
# scripts/device-families.sh (carry [".bin", ".gl", ".devcarry"]) runs the family shapes.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
SDIST=llama_cpp_python-0.3.36.tar.gz
SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
[[ -f $SHARED/bench/side_by_side.sh ]] || { echo "error: $SHARED/bench/side_by_side.sh not found (../shared is missing)" >&2; exit 1; }

rm -rf bench-carry && cp -r "$SHARED/bench" bench-carry && chmod -R u+w bench-carry

cargo build --release --bin webgpu-llama
mkdir -p .bin && cp target/release/webgpu-llama .bin/

debs() {   # DIR PACKAGE...: the packages' .deb files (no dependencies), unless DIR has all of them
    local dir=$1 p missing=(); shift
    for p in "$@"; do compgen -G "$dir/${p}_*.deb" >/dev/null || missing+=("$p"); done
    ((${#missing[@]})) || return 0
    mkdir -p "$dir" && (cd "$dir" && apt-get download "${missing[@]}")
}
debs .gl libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2
debs .devcarry/vkdeb glslc libshaderc1 libvulkan-dev spirv-headers

compgen -G '.whl/gguf-*.whl' >/dev/null || pip download --no-deps --only-binary :all: gguf==0.19.0 -d .whl

if [[ ! -f .devcarry/llama-src.tar.xz ]]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # The sdist's address from PyPI's simple index (pip download would also build its metadata).
    url=$(curl -fsSL https://pypi.org/simple/llama-cpp-python/ | grep -o "https://[^\"#]*/$SDIST" | head -1)
    curl -fsSL -o "$tmp/$SDIST" "$url"
    echo "$SDIST_SHA256  $tmp/$SDIST" | sha256sum -c -
    tar -xzf "$tmp/$SDIST" -C "$tmp"
    src=$tmp/${SDIST%.tar.gz}/vendor/llama.cpp
    # Kept: what CMake configures with tests, examples, the server and the app off (tools/ but
    # the server's UI), and the CPU, CUDA and Vulkan backends.
    rm -rf "$src"/{docs,models,media,benches,tests,examples,conversion,gguf-py,app,pocs,skills} "$src"/tools/{server,ui}
    (cd "$src/ggml/src" && rm -rf ggml-{blas,cann,et,hexagon,hip,metal,musa,opencl,openvino,rpc,sycl,virtgpu,webgpu,zdnn,zendnn})
    # Written aside, then moved: an interrupted run leaves no partial tarball to be kept.
    mkdir -p .devcarry && tar -cJf .devcarry/llama-src.tar.xz.part -C "$(dirname "$src")" llama.cpp
    mv .devcarry/llama-src.tar.xz.part .devcarry/llama-src.tar.xz
fi

du -shc bench-carry .bin .gl .whl .devcarry | tail -1 | sed 's/total/carried in all (the limit is 64 MiB)/'
