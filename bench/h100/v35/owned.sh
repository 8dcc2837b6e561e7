#!/bin/bash
# Stop 45's first call: the wide one-token attention's subgroups owning their keys (`--attn-owned`,
# off by default; stop 44's owned.sh, never run) and, in a second binary (.bin/packed, the diff
# beside this script), the same kernel holding the f16 cache rows it has in flight as stored (two
# words a vec4, widened where used: fewer registers carried across the wide kernel's chunk loop;
# in the 1B's default attention_decode.wgsl, the value rows prefetched through steps 1-2).
# Alternated, tg128 with the f16 cache after 4096 and 512 keys: the 1B Q8_0 (its default
# kernel, and packed; after 4096 also the wide kernel with and without owned subgroups, and
# packed) while the 8B is written; the 8B's greedy ids owned on and off and packed (a 300-token
# prompt, 20 one-token steps); the 8B the same four ways (after 4096 keys twice). Trimmed to
# fit what device time the session had left.
# Binaries (built here, carried as .bin with .gl): .bin/webgpu-llama from the tree as it is;
# .bin/packed: git apply bench/h100/v35/packed.diff && cargo build --release --bin webgpu-llama &&
#   cp target/release/webgpu-llama .bin/packed && git apply -R bench/h100/v35/packed.diff
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; P=.bin/packed; chmod +x $B $P
models $B Q8_0 8b
LIMIT=${LIMIT:-260}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 30 - $(el))) "$@" 2>&1 | grep -E "^(decode tg)|[Ee]rror|panic"; }
$B bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
F=$M/l1b-Q8_0.gguf
A="--ctx 4352 --gen 128 --kv f16"
for p in 4096 512; do
  for b in $B $P; do run $b bench $F --prompt $p $A --repeats 2; done
  [[ $p == 4096 ]] || continue
  for o in false true; do run $B bench $F --prompt $p $A --repeats 2 --attn-wide true --attn-owned $o; done
  run $P bench $F --prompt $p $A --repeats 2 --attn-wide true --attn-owned true
done
wait
# The greedy ids of a 300-token prompt's 20 one-token steps (--dump-logits would not do: its rows
# come from one batched forward, which never runs the one-token kernels), owned off and on and in
# the packed binary: the same ids are expected (packed is bit for bit the same maths).
TOK=$(python3 -c "print(','.join(str((i * 7919 + 3) % 128000) for i in range(300)))")
ids() { local b=$1; shift; timeout 40 $b run $M/l8b.gguf --tokens $TOK -n 20 --kv f16 "$@" 2>&1 | grep -E "^greedy ids|[Ee]rror|panic"; }
ids $B --attn-owned false > /tmp/ids-off; ids $B --attn-owned true > /tmp/ids-on; ids $P --attn-owned false > /tmp/ids-packed
cat /tmp/ids-off; cmp -s /tmp/ids-off /tmp/ids-on && echo "owned: same greedy ids" || { echo "owned: DIFFERENT"; cat /tmp/ids-on; }
cmp -s /tmp/ids-off /tmp/ids-packed && echo "packed: same greedy ids" || { echo "packed: DIFFERENT"; cat /tmp/ids-packed; }
for r in 1 2; do for p in 4096 512; do
  [[ $r == 2 && $p == 512 ]] && continue
  for o in false true; do for b in $B $P; do run $b bench $M/l8b.gguf --prompt $p $A --repeats 1 --attn-owned $o; done; done
done; done
echo "done at t=$(el)"
