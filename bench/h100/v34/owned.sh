#!/bin/bash
# Prepared in stop 44 and not run (the session's device time went on refused starts): the wide
# one-token attention's subgroups owning their keys (`--attn-owned`, off by default) against the
# default, one binary (.bin/webgpu-llama, this stop's code), alternated. tg128 (f16 cache) after
# 512 and 4096 keys: the 1B Q8_0 (its default kernel, and the wide one with and without owned
# subgroups) while the 8B is written; then the 8B's logits with and without (a 300-token prompt,
# 20 greedy steps, --dump-logits) and its tg128, with attention hollow beside each depth.
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; chmod +x $B
models $B Q8_0 8b
LIMIT=${LIMIT:-200}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 30 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg)"; }
$B bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
F=$M/l1b-Q8_0.gguf
for r in 1 2; do for p in 512 4096; do
  run $F --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16
  for o in false true; do run $F --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16 --attn-wide true --attn-owned $o; done
done; done
wait
TOK=$(python3 -c "print(','.join(str((i * 7919 + 3) % 128000) for i in range(300)))")
for o in false true; do timeout 40 $B run $M/l8b.gguf --tokens $TOK -n 20 --kv f16 --attn-owned $o --dump-logits /tmp/owned-$o.f32 2>&1 | grep -iE "greedy|error" | head -2; done
timeout 30 python3 -c "
import array
a, b = array.array('f'), array.array('f')
a.frombytes(open('/tmp/owned-false.f32', 'rb').read()); b.frombytes(open('/tmp/owned-true.f32', 'rb').read())
n = 128256; rows = len(a) // n
d = [max(abs(a[r * n + i] - b[r * n + i]) for i in range(n)) for r in range(rows - 20, rows)]
print('8B f16: owned against not, the last 20 rows: max |diff| %.3g (largest |logit| %.3g), rows %d' % (max(d), max(abs(x) for x in a[-n:]), rows))
"
for r in 1 2; do for p in 512 4096; do
  for o in false true; do run $M/l8b.gguf --prompt $p --ctx 4352 --gen 128 --repeats 1 --kv f16 --attn-owned $o; done
  [[ $r == 1 ]] && run $M/l8b.gguf --prompt $p --ctx 4352 --gen 128 --repeats 1 --kv f16 --hollow only:attention_decode_wide
done; done
echo "done at t=$(el)"
