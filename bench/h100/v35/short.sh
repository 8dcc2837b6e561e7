#!/bin/bash
# owned.sh cut to what the session's last device time could hold: tg128 with the f16 cache after
# 4096 keys only. The 1B Q8_0's default kernel, this stop's binary against .bin/packed (its f16
# rows held as stored: packed.diff), while the 8B is written; then the 8B with and without owned
# subgroups (--attn-owned), each in both binaries, alternated.
# Binaries (built here, carried as .bin with .gl): .bin/webgpu-llama from the tree as it is;
# .bin/packed: git apply bench/h100/v35/packed.diff && cargo build --release --bin webgpu-llama &&
#   cp target/release/webgpu-llama .bin/packed && git apply -R bench/h100/v35/packed.diff
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; P=.bin/packed; chmod +x $B $P
models $B Q8_0 8b
LIMIT=${LIMIT:-150}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 30 - $(el))) "$@" 2>&1 | grep -E "^(decode tg)|[Ee]rror|panic"; }
A="--prompt 4096 --ctx 4352 --gen 128 --kv f16"
for r in 1 2; do for b in $B $P; do run $b bench $M/l1b-Q8_0.gguf $A --repeats 2; done; done
wait
for o in false true; do for b in $B $P; do run $b bench $M/l8b.gguf $A --repeats 1 --attn-owned $o; done; done
echo "done at t=$(el)"
