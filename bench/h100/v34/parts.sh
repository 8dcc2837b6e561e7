#!/bin/bash
# Device call of stop 44: the one-token attention's parts, as the step runs. .bin/cur (this
# stop's code), .bin/nomerge (the same with the key splits' merge skipped: no ticket, no merged
# output), .bin/noloop (the chunk loop skipped: q, the own key, the partials' writes and the merge
# only); the figures of the two cut binaries are timings of wrong outputs. tg128 (f16 cache)
# after 512 and 4096 keys, the 1B Q8_0 and the 8B, alternated, with attention hollow beside them.
source bench/h100/v30/common.sh
chmod +x .bin/*
models .bin/cur Q8_0 8b
LIMIT=${LIMIT:-300}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((LIMIT + 30 - $(el))) $b bench "$@" 2>&1 | grep -E "^(decode tg)"; }
.bin/cur bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2; do for p in 512 4096; do
  for b in .bin/cur .bin/nomerge .bin/noloop; do run $b $M/l1b-Q8_0.gguf --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16; done
  run .bin/cur $M/l1b-Q8_0.gguf --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16 --hollow only:attention_decode
done; done
wait
for p in 512 4096; do
  for b in .bin/cur .bin/nomerge .bin/noloop; do run $b $M/l8b.gguf --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16; done
  run .bin/cur $M/l8b.gguf --prompt $p --ctx 4352 --gen 128 --repeats 2 --kv f16 --hollow only:attention_decode_wide
done
echo "done at t=$(el)"
