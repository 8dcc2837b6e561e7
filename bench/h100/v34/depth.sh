#!/bin/bash
# Device call of stop 44 (issue 9, decode flat with context): where a decode step's extra time
# after 4096 keys goes. Per-kernel profiles (a pass per dispatch) at 512 and 4096 keys (f16
# cache) for the 1B Q8_0 and the 8B; tg128 with attention alone hollow (`--hollow
# only:KERNEL`: what it costs as the step runs); tg128 after 4096 with the attention knobs varied.
source bench/h100/v30/common.sh
B=.bin/cur; chmod +x $B
models $B Q8_0 8b
LIMIT=${LIMIT:-420}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 40 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg)|attention|rope|combine|whole batch in one pass.*(83|99|195|227) "; }
$B bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
F=$M/l1b-Q8_0.gguf
for p in 512 4096; do
  run $F --prompt $p --ctx 4352 --gen 8 --repeats 1 --kv f16 --profile
  run $F --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16
  run $F --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16 --hollow only:attention_decode
done
for k in "--splits 16" "--splits 64" "--attn-heads 1" "--attn-heads 4" "--attn-chunk 64" "--attn-wide true" "--attn-prefetch false"; do
  run $F --prompt 4096 --ctx 4352 --gen 128 --repeats 2 --kv f16 $k
done
wait
F=$M/l8b.gguf
for p in 512 4096; do
  run $F --prompt $p --ctx 4352 --gen 8 --repeats 1 --kv f16 --profile
  run $F --prompt $p --ctx 4352 --gen 128 --repeats 1 --kv f16
  run $F --prompt $p --ctx 4352 --gen 128 --repeats 1 --kv f16 --hollow only:attention_decode_wide
done
for k in "--splits 16" "--splits 64" "--attn-heads 4" "--attn-heads 1" "--attn-wide false"; do
  run $F --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv f16 $k
done
echo "done at t=$(el)"
