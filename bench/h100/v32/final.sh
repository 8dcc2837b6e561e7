#!/bin/bash
# Device call 1 of stop 42 (issue 9), on an H200 (the binaries: "new" the working tree then,
# this commit's code plus --lead-dispatches, since dropped: lead-dispatches.diff):
# 1. ../shared/bench/side_by_side.sh cuda on the 1B shape's three files (llama.cpp CUDA and this
#    commit's webgpu-llama, tg128 after pp512), DEADLINE=330; meanwhile our `gen` 8B Q4_K_M.
# 2. Ours as llama-bench's tg measures (--random-next: the next token pseudo-random, the logits
#    read back and mapped each token but not read) on the same files.
# 3. Where the time between tokens goes: .bin/timing (0b88cd7 with the timers of
#    gap-timers.diff), medians in us.
# 4. old (0b88cd7) against new (the step's inputs through mapped staging slots) and new with
#    --lead-dispatches 12 (a step as two command buffers), alternated; the 8B the same.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
chmod +x .bin/timing .bin/old/webgpu-llama .bin/new/webgpu-llama .bin/webgpu-llama
M8=/tmp/sbs/l8b.gguf; mkdir -p /tmp/sbs
(for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
 VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json .bin/new/webgpu-llama gen --shape llama-3-8b --type Q4_K_M $M8 >/dev/null 2>&1; echo "8B gen done at t=$(el)") &
DEADLINE=${DEADLINE:-330} bash bench-carry/side_by_side.sh cuda cuda-build models lc-cuda wg
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
M=/tmp/sbs/models; LIMIT=${LIMIT:-560}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b $*"; timeout $((LIMIT + 30 - $(el))) .bin/$b/webgpu-llama bench "$@" 2>&1 | grep -E "^decode tg|^CPU record|^wait for|staged"; }
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { grep "^TIMING $1" /tmp/o.txt | awk -v k=$2 '{for(i=1;i<=NF;i++) if($i==k) print $(i+1)}' | med; }
timing() {
  (($(el) < LIMIT)) || return
  echo "### t=$(el) timing $(basename $1) --prompt 512 --gen 128 --repeats 1"
  timeout $((LIMIT + 35 - $(el))) .bin/timing bench $1 --prompt 512 --gen 128 --repeats 1 > /tmp/o.txt 2>&1
  echo "write $(col write write) submit $(col write submit) map_async $(col read map_async) wait $(col read wait) range $(col read range) f $(col read f) unmap $(col read unmap) check $(col read check)"
  grep -E "^decode tg|^CPU record|^wait for" /tmp/o.txt
}
echo "## ours as llama-bench's tg (--random-next), the same files"
for m in l1b-q8_0 l1b-q4_k_m l1b-f16; do run new $M/$m.gguf --prompt 512 --gen 128 --repeats 3 --random-next; done
echo "## where the time between tokens goes (0b88cd7 + timers, medians in us)"
timing $M/l1b-f16.gguf
echo "## old against new, and new with --lead-dispatches 12, alternated"
ab1b() { for m in l1b-q8_0 l1b-q4_k_m l1b-f16; do
  run old $M/$m.gguf --prompt 512 --gen 128 --repeats 2
  run new $M/$m.gguf --prompt 512 --gen 128 --repeats 2
  run new $M/$m.gguf --prompt 512 --gen 128 --repeats 2 --lead-dispatches 12
done; }
ab1b
wait
echo "## the 8B (webgpu-llama gen file)"
run old $M8 --prompt 512 --gen 128 --repeats 2
run new $M8 --prompt 512 --gen 128 --repeats 2
run new $M8 --prompt 512 --gen 128 --repeats 2 --lead-dispatches 12
run new $M8 --prompt 512 --gen 128 --repeats 2 --random-next
echo "## second round"
ab1b
timing $M8
echo "done at t=$(el)"
