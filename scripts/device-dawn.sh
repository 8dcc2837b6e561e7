#!/bin/bash
# The device call of issue 47's table (BENCHMARKS.md v37): every reference case through the package
# on Dawn (../shared/gpu-web/cases.sh), then on the llama-3.2-1b shape (`webgpu-llama gen`, random
# weights; TYPES, default q4_k_m q8_0 f16) the package on Dawn (scripts/bench-dawn.mjs: prefill, the
# forward loop, generate; with the device deviceDescriptor gives and, for Q4_K_M, only the buffer
# limits raised) and the native CLI (loop and --generate 16) on the same file, and depth 4096 on
# Q4_K_M. Stops starting steps DEADLINE seconds (default 540) after its start.
#
# Here, once: bash ../shared/gpu-web/prepare.sh . (builds pkg/ and the binary into .gpuweb/), then
#   mkdir -p .gpuweb/cases && cp ../shared/reference/stories*.{json,logits.f32} ../shared/models/*.gguf .gpuweb/cases/
#   cp ../shared/gpu-web/cases.sh .gpuweb/ && git rev-parse --short HEAD > .gpuweb/COMMIT
# and .gl/ as the device tool's README says. Device call: `bash scripts/device-dawn.sh`, carry
# [".gpuweb", ".gl"] (about 55 MiB: drop .gpuweb/models, which run.sh alone reads).
T0=$(date +%s); left() { echo $((${DEADLINE:-540} - $(date +%s) + T0)); }
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
cat .gpuweb/COMMIT 2>/dev/null; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R=/tmp/gpuweb-rt/rt
[ -x $R/node/bin/node ] || { mkdir -p /tmp/gpuweb-rt && tar -xJf .gpuweb/runtime.tar.xz -C /tmp/gpuweb-rt; }
xz -dc .gpuweb/webgpu-llama.xz > /tmp/wl && chmod +x /tmp/wl
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_DRIVER_FILES=$ICD VK_ICD_FILENAMES=$ICD XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m 700 /tmp/xdg
OUT=${OUT:-/tmp/device-dawn-out}; mkdir -p "$OUT"
if [ -d .gpuweb/cases ]; then
  echo "== cases (t=$(($(date +%s) - T0)))"
  GPUWEB_RT=/tmp/gpuweb-rt timeout 170 bash .gpuweb/cases.sh 2>&1 | tee "$OUT/cases.log"
fi
D="env LD_LIBRARY_PATH=$R/lib $R/node/bin/node scripts/bench-dawn.mjs --webgpu $R/node_modules/webgpu --pkg .gpuweb/pkg --json $OUT/dawn.jsonl"
N="/tmp/wl bench --prompt 512 --gen 128 --repeats 3"
for t in ${TYPES:-q4_k_m q8_0 f16}; do
  (( $(left) > 100 )) || { echo "== $t: skipped, $(left) s left"; continue; }
  m=/tmp/l1b-$t.gguf; [ -f $m ] || /tmp/wl gen --shape llama-3.2-1b --type $t $m >/dev/null
  echo "== 1B $t (t=$(($(date +%s) - T0)))"
  timeout 120 $D --model $m --label "1B $t" --repeats 2 2>&1 | grep -E '^\[dawn\]|Error'
  [ $t = q4_k_m ] && timeout 60 $D --model $m --label "1B $t" --repeats 1 --limits buffers 2>&1 | grep -E '^\[dawn\] 1B|Error'
  timeout 60 $N $m 2>&1 | grep -E 'prefill pp|decode tg'
  timeout 60 $N $m --generate 16 2>&1 | grep -E 'decode tg'
  if [ $t = q4_k_m ] && (( $(left) > 150 )); then
    echo "== 1B $t depth 4096 (t=$(($(date +%s) - T0)))"
    timeout 100 $D --model $m --label "1B $t" --depth 4096 --ctx 4736 --repeats 2 2>&1 | grep -E '^\[dawn\] 1B|Error'
    timeout 60 /tmp/wl bench $m --prompt 512 --gen 128 --repeats 2 --depth 4096 --ctx 4736 --generate 16 2>&1 | grep -E 'decode tg'
  fi
done
echo "== done (t=$(($(date +%s) - T0)))"
