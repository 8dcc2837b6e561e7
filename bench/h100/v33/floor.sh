#!/bin/bash
# Device call 1 of stop 43 (issue 9): the decode step's dispatch floor (`bench --hollow`: every
# kernel returns at entry, over its planned grid or one workgroup) beside the real step, at 512
# keys and after 4096 (f16 cache), for the 1B files and the 8B; the GPU's share (the profile's
# whole batch in one pass) for Q8_0 and the 8B; the measured read bandwidth (`--stream`).
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; chmod +x $B
models $B Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-540}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 40 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg|dispatches|kernels|measured|bandwidth bound|wait for|CPU record)|whole batch in one pass"; }
$B bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for m in Q8_0 Q4_K_M F16; do
  for h in off grids one; do run $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2 --peak-gbs 4800 --hollow $h; done
  run $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2 --random-next --hollow grids
  for h in off grids; do run $M/l1b-$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv f16 --hollow $h; done
done
for h in off grids; do run $M/l1b-Q8_0.gguf --prompt 512 --gen 8 --repeats 1 --profile --hollow $h; done
wait
for h in off grids one; do run $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 --peak-gbs 4800 --hollow $h; done
for h in off grids; do run $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv f16 --hollow $h; done
run $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --profile --stream --peak-gbs 4800
run $M/l8b.gguf --prompt 512 --gen 8 --repeats 1 --profile --hollow grids
echo "done at t=$(el)"
