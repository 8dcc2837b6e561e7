#!/bin/bash
# Device call 1 of stop 41 (issue 9): the output head's one-token matvec on its own profile row
# ("head:"), swept over threads per row x rows per thread on the four side-by-side models; then
# one-token attention's time by keys (profiles at 16, 512 and 4096 keys) and the f16 cache's
# decode beside the f32 cache's.
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; chmod +x $B
models $B Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-540}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 30 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg|dispatches)|^  (head|attention_decode|whole batch in one pass.*(99|115|82|195|227) )"; }
$B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
wait
for m in l8b l1b-Q8_0 l1b-Q4_K_M l1b-F16; do
  echo "## $m: head profile rows, --head-tpr x --head-rpt (default first)"
  run $M/$m.gguf --prompt 512 --gen 8 --repeats 1 --profile | grep -E "head|decode tg"
  for t in 16 32 64 128; do for r in 1 2 4 8; do
    echo "# tpr $t rpt $r: $(run $M/$m.gguf --prompt 512 --gen 8 --repeats 1 --profile --head-tpr $t --head-rpt $r | grep head | tr -s ' ')"
  done; done
done
echo "## one-token attention by keys"
for m in l8b l1b-Q8_0; do for p in 16 512 4096; do run $M/$m.gguf --prompt $p --ctx 4352 --gen 8 --repeats 1 --profile | grep -E "attention|whole|decode tg"; done; done
echo "## f16 cache against f32, tg128 at 512 and after 4096"
for m in l8b l1b-Q8_0 l1b-Q4_K_M; do for kv in f32 f16; do
  run $M/$m.gguf --prompt 512 --gen 128 --repeats 2 --kv $kv | grep "decode tg"
  run $M/$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv $kv | grep "decode tg"
done; done
echo "done at t=$(el)"
