#!/usr/bin/env bash
# Builds llama.cpp's CPU backend and scripts/family-logits.cpp against it, to regenerate the reference
# logits under tests/families/ (not part of CI: the build takes a long while on few cores).
#
#   bash scripts/family-llama-build.sh LLAMA_SRC_DIR [BUILD_DIR]
#
# LLAMA_SRC_DIR is an unpacked llama.cpp source tree (the one the project pins lives in
# .devcarry/llama-src.tar.xz of the main checkout). The tree is copied, never edited in place.
#
# One deliberate change to llama.cpp: its CPU backend computes GELU through a 16-bit lookup table
# (the GGML_GELU_FP16 define in ggml/src/ggml-cpu/vec.h), which rounds every GELU input to f16 and moves
# Gemma logits by about 1e-2. Its CUDA and Vulkan kernels compute GELU exactly, and so do we, so the
# copy built here has that define removed: GELU is then tanh-approximated in f32, as ggml_gelu_f32 does.
#
# Output: BUILD_DIR/family-logits (default BUILD_DIR: /tmp/family-llama).
set -euo pipefail
src=${1:?usage: family-llama-build.sh LLAMA_SRC_DIR [BUILD_DIR]}
out=${2:-/tmp/family-llama}
here=$(cd "$(dirname "$0")" && pwd)
jobs=${JOBS:-2}

mkdir -p "$out"
if [ ! -f "$out/src/CMakeLists.txt" ]; then
    rm -rf "$out/src"
    cp -a "$src" "$out/src"
fi
vec="$out/src/ggml/src/ggml-cpu/vec.h"
# Idempotent: the define line becomes a comment; fail loudly if the tree no longer has it.
if grep -q '^#define GGML_GELU_FP16' "$vec"; then
    sed -i 's|^#define GGML_GELU_FP16|// GGML_GELU_FP16 removed by family-llama-build.sh (exact GELU)|' "$vec"
fi
grep -q 'GGML_GELU_FP16 removed by family-llama-build.sh' "$vec" || {
    echo "error: could not find the GGML_GELU_FP16 define in $vec" >&2
    exit 1
}

cmake -S "$out/src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_CURL=OFF >"$out/cmake.log"
cmake --build "$out/build" --target llama -j "$jobs"

libs=$(find "$out/build" -name 'libllama.a' -o -name 'libggml*.a' | sort)
# The static archives reference each other; a linker group resolves them in any order.
g++ -O2 -std=c++17 -I "$out/src/include" -I "$out/src/ggml/include" "$here/family-logits.cpp" \
    -Wl,--start-group $libs -Wl,--end-group -lpthread -ldl -lm -o "$out/family-logits"
echo "built $out/family-logits"
