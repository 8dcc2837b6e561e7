#!/bin/bash
# Device call of stop 42 (issue 9): a decode step's CPU side between tokens.
# 1. Where it goes: .bin/timing (0b88cd7 with temporary timers, gap-timers.diff) prints per
#    token queue.write_buffer of the inputs, queue.submit, and the readback's map_async, wait,
#    mapped range, read (the argmax), unmap and error check (medians below, us).
# 2. old (0b88cd7) against new (the step's inputs through mapped staging slots, inputs.rs),
#    tg128 after 512, alternated; new with --random-next (llama-bench's tg: no argmax).
source bench/h100/v30/common.sh
chmod +x .bin/timing .bin/old/webgpu-llama .bin/new/webgpu-llama
B=.bin/new/webgpu-llama
models $B Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-480}
med() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { grep "^TIMING $1" /tmp/o.txt | awk -v k=$2 '{for(i=1;i<=NF;i++) if($i==k) print $(i+1)}' | med; }
$B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for m in l1b-Q8_0 l1b-Q4_K_M l1b-F16; do
  echo "### t=$(el) timing $m --prompt 512 --gen 128 --repeats 1"
  .bin/timing bench $M/$m.gguf --prompt 512 --gen 128 --repeats 1 > /tmp/o.txt 2>&1
  echo "write $(col write write) submit $(col write submit) map_async $(col read map_async) wait $(col read wait) range $(col read range) f $(col read f) unmap $(col read unmap) check $(col read check) (medians, us)"
  grep -E "^decode tg|^CPU record|^wait for" /tmp/o.txt
done
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b $*"; timeout $((LIMIT + 40 - $(el))) .bin/$b/webgpu-llama bench "$@" 2>&1 | grep -E "^decode tg|^CPU record|^wait for|staged"; }
for r in 1 2; do for m in l1b-Q8_0 l1b-Q4_K_M l1b-F16; do
  run old $M/$m.gguf --prompt 512 --gen 128 --repeats 2
  run new $M/$m.gguf --prompt 512 --gen 128 --repeats 2
  run new $M/$m.gguf --prompt 512 --gen 128 --repeats 2 --random-next
done; done
wait
echo "### t=$(el) timing l8b --prompt 512 --gen 128 --repeats 1"
.bin/timing bench $M/l8b.gguf --prompt 512 --gen 128 --repeats 1 > /tmp/o.txt 2>&1
echo "write $(col write write) submit $(col write submit) map_async $(col read map_async) wait $(col read wait) range $(col read range) f $(col read f) unmap $(col read unmap) check $(col read check) (medians, us)"
grep -E "^decode tg|^CPU record|^wait for" /tmp/o.txt
for r in 1 2; do
  run old $M/l8b.gguf --prompt 512 --gen 128 --repeats 2
  run new $M/l8b.gguf --prompt 512 --gen 128 --repeats 2
  run new $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 --random-next
done
echo "done at t=$(el)"
