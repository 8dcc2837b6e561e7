#!/bin/bash
# Device call 4 of stop 41 (issue 9): one-token attention's key splits and query heads per
# workgroup re-measured at 512 keys and after 4096, f32 and f16 caches (per-kernel profile:
# the attention row and the whole step in one pass), on the new build.
source bench/h100/v30/common.sh
B=.bin/new; chmod +x $B
models $B Q8_0 Q4_K_M 8b
LIMIT=${LIMIT:-540}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 40 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg)|^  attention_decode|whole batch in one pass.*(99|115|195|227) "; }
$B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
wait
for m in l8b l1b-Q8_0; do for kv in f32 f16; do
  for o in "" "--splits 2" "--splits 4" "--splits 6" "--attn-heads 4" "--attn-heads 1"; do run $M/$m.gguf --prompt 512 --gen 8 --repeats 1 --profile --kv $kv $o; done
  for o in "" "--splits 8" "--splits 16" "--splits 64" "--attn-heads 4" "--attn-heads 4 --splits 64" "--attn-heads 1"; do run $M/$m.gguf --prompt 4096 --ctx 4352 --gen 8 --repeats 1 --profile --kv $kv $o; done
done; done
echo "done at t=$(el)"
