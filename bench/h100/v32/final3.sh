#!/bin/bash
# Device call 3 of stop 42 (issue 9), on the machine of call 2 (still warm: its llama.cpp build
# and models): the 1B files at depth, llama.cpp CUDA (-d 512,4096) and ours after 4096 tokens,
# f32 and f16 caches, and the f16 cache at 512.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
M=/tmp/sbs/models; LB=/tmp/sbs/build-cuda/bin/llama-bench; LIMIT=${LIMIT:-170}
ls $M $LB 2>&1 | head -8
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 20 - $(el))) .bin/webgpu-llama bench "$@" 2>&1 | grep -E "^decode tg"; }
for m in l1b-q8_0 l1b-q4_k_m l1b-f16; do
  [[ -x $LB ]] && (($(el) < LIMIT - 30)) && { echo "### t=$(el) llama-bench $m -d 512,4096"; timeout 40 $LB -m $M/$m.gguf -p 512 -n 128 -ngl 99 -fa 0 -r 3 -d 512,4096 2>/dev/null | grep -E "tg128"; }
  run $M/$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1
  run $M/$m.gguf --prompt 512 --gen 128 --repeats 2 --kv f16
  run $M/$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv f16
done
echo "done at t=$(el)"
