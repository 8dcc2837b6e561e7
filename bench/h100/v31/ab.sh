#!/bin/bash
# Device call 2 of stop 41 (issue 9): .bin/old (51caef7's kernels: call 1's binary, its profile
# rows tagged) against .bin/new (the head's integer form at most half a row's pieces a thread;
# the f16 cache's value projection writing its cache row in pairs; the token's own key and value
# rounded as an f16 cache holds them), alternated, tg128 at 512 keys and after a 4096-token
# prompt, f32 and f16 caches; then the new build's profiles.
source bench/h100/v30/common.sh
chmod +x .bin/old .bin/new
models .bin/new Q8_0 Q4_K_M 8b
LIMIT=${LIMIT:-520}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) $*"; timeout $((LIMIT + 40 - $(el))) "$1" bench "${@:2}" 2>&1 | grep -E "^(decode tg|dispatches)|^  (head|attention_decode|matvec Q6_K/g8 tpr.* \+norm)|whole batch in one pass.*(99|115|195|227) "; }
.bin/new bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
wait
for r in 1 2 3; do
  for m in l8b l1b-Q4_K_M; do for kv in f32 f16; do for b in .bin/old .bin/new; do
    run $b $M/$m.gguf --prompt 512 --gen 128 --repeats 2 --kv $kv
    run $b $M/$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --kv $kv
  done; done; done
  for b in .bin/old .bin/new; do run $b $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 2; done
done
for m in l8b l1b-Q4_K_M l1b-Q8_0; do for kv in f32 f16; do run .bin/new $M/$m.gguf --prompt 512 --gen 8 --repeats 1 --profile --kv $kv; done; done
echo "done at t=$(el)"
