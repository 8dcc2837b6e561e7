#!/bin/bash
# Issue 47's device call: the package on Dawn (Chrome's WebGPU), our native CLI and llama.cpp CUDA on
# the same GGUF files (../shared/bench's 1B-shape F16, Q8_0, Q4_K_M, quantised by llama-quantize), in
# two commands on one warm machine:
#   bash scripts/device-dawn.sh cuda   llama.cpp's CUDA build, the files, llama-bench pp512/tg128 at
#                                      depths 0, 512 and 4096, our CLI's bench on them; meanwhile every
#                                      reference case through the package on Dawn (../shared/gpu-web/cases.sh)
#   bash scripts/device-dawn.sh dawn   on the same files: the package on Dawn (scripts/bench-dawn.mjs:
#                                      prefill, the forward loop, generate; a per-kernel profile on
#                                      Q4_K_M; Q4_K_M also with only the buffer limits raised) and the
#                                      native CLI (loop and --generate 16); depth 4096 on Q4_K_M.
#                                      Without the cuda step first: on `webgpu-llama gen` files
# Stops starting steps DEADLINE seconds (default 540) after its start.
#
# Here, once: bash ../shared/gpu-web/prepare.sh . (builds pkg/ and the binary into .gpuweb/), then
#   rm -rf .gpuweb/models && mkdir -p .gpuweb/cases && cp ../shared/reference/stories*.{json,logits.f32} ../shared/models/*.gguf .gpuweb/cases/
#   cp ../shared/gpu-web/cases.sh .gpuweb/ && git rev-parse --short HEAD > .gpuweb/COMMIT
#   bash scripts/side-by-side-carry.sh (bench-carry/, .whl/, .devcarry/llama-src.tar.xz; leave out
#   .devcarry/vkdeb, which only the Vulkan build needs, to stay under the carry limit)
# and .gl/ as the device tool's README says. Carry [".gpuweb", ".gl", ".whl", ".devcarry", "bench-carry"].
MODE=${1:-dawn}
T0=$(date +%s); left() { echo $((${DEADLINE:-540} - $(date +%s) + T0)); }
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
cat .gpuweb/COMMIT 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=/tmp/gpuweb-rt/rt
[ -x $R/node/bin/node ] || { mkdir -p /tmp/gpuweb-rt && tar -xJf .gpuweb/runtime.tar.xz -C /tmp/gpuweb-rt; }
mkdir -p .bin && xz -dc .gpuweb/webgpu-llama.xz > .bin/webgpu-llama && chmod +x .bin/webgpu-llama
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_DRIVER_FILES=$ICD VK_ICD_FILENAMES=$ICD XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m 700 /tmp/xdg
OUT=${OUT:-/tmp/device-dawn-out}; mkdir -p "$OUT"
M=/tmp/sbs/models

if [ "$MODE" = cuda ]; then
  [ -d .gpuweb/cases ] && (GPUWEB_RT=/tmp/gpuweb-rt timeout 300 bash .gpuweb/cases.sh > "$OUT/cases.log" 2>&1) &
  DEADLINE=$(left) bash bench-carry/side_by_side.sh cuda cuda-build models lc-cuda lc-cuda-long wg 2>&1 | tee "$OUT/cuda.log"
  wait; echo "== cases"; cat "$OUT/cases.log"
  echo "== done (t=$(($(date +%s) - T0)))"; exit 0
fi

D="env LD_LIBRARY_PATH=$R/lib $R/node/bin/node scripts/bench-dawn.mjs --webgpu $R/node_modules/webgpu --pkg .gpuweb/pkg --json $OUT/dawn.jsonl"
N=".bin/webgpu-llama bench --prompt 512 --gen 128 --repeats 3"
for t in ${TYPES:-q4_k_m q8_0 f16}; do
  (( $(left) > 100 )) || { echo "== $t: skipped, $(left) s left"; continue; }
  # llama.cpp's files where the cuda step made them, else ours (`webgpu-llama gen`, same shape).
  m=$M/l1b-$t.gguf; [ -f $m ] || { m=/tmp/l1b-$t.gguf; [ -f $m ] || .bin/webgpu-llama gen --shape llama-3.2-1b --type $t $m >/dev/null; }
  echo "== 1B $t (t=$(($(date +%s) - T0)))"
  P=; [ $t = q4_k_m ] && P=--profile
  timeout 150 $D --model $m --label "1B $t" --repeats 2 $P 2>&1 | grep -E '^\[dawn\]|Error'
  [ $t = q4_k_m ] && timeout 60 $D --model $m --label "1B $t" --repeats 1 --limits buffers 2>&1 | grep -E '^\[dawn\] 1B|Error'
  timeout 60 $N $m 2>&1 | grep -E 'prefill pp|decode tg'
  timeout 60 $N $m --generate 16 2>&1 | grep -E 'decode tg'
  if [ $t = q4_k_m ] && (( $(left) > 150 )); then
    echo "== 1B $t depth 4096 (t=$(($(date +%s) - T0)))"
    timeout 100 $D --model $m --label "1B $t" --depth 4096 --ctx 4736 --repeats 2 2>&1 | grep -E '^\[dawn\] 1B|Error'
    timeout 60 .bin/webgpu-llama bench $m --prompt 512 --gen 128 --repeats 2 --depth 4096 --ctx 4736 --generate 16 2>&1 | grep -E 'prefill pp|decode tg'
  fi
done
echo "== done (t=$(($(date +%s) - T0)))"
