#!/bin/bash
# Device A/B for issue 9 (stop 40), second call: attention_decode_wide.wgsl with chunks of 128
# keys where a split holds an even number of 64-key chunks (after 4096 keys), against
# attention_decode.wgsl; and the wide kernel's key splits and query heads a workgroup at 512.
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; chmod +x $B
models $B Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-560}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 20 - $(el))) $B bench "$@" 2>&1 | grep -E "^(decode tg)|attention_decode|whole batch in one pass.*(83|82|99|195) "; }
$B bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
L1="$M/l1b-Q8_0.gguf $M/l1b-Q4_K_M.gguf $M/l1b-F16.gguf"
for r in 1 2; do for m in $L1; do for o in "--attn-wide false" "--attn-wide true"; do run $m --prompt 4096 --ctx 4352 --gen 128 --repeats 1 $o; done; done; done
for r in 1 2; do for m in $L1; do for o in "--attn-wide false" "--attn-wide true" "--attn-wide true --splits 5" "--attn-wide true --attn-heads 4" "--attn-wide true --attn-heads 1"; do run $m --prompt 512 --gen 128 --repeats 2 $o; done; done; done
run $M/l1b-Q8_0.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --attn-wide true --splits 16
run $M/l1b-Q8_0.gguf --prompt 4096 --ctx 4352 --gen 8 --repeats 1 --profile --attn-wide false
run $M/l1b-Q8_0.gguf --prompt 4096 --ctx 4352 --gen 8 --repeats 1 --profile --attn-wide true
wait
for r in 1 2; do for o in "--attn-wide false" "--attn-wide true"; do run $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 $o; done; done
for r in 1 2; do for o in "--attn-wide false" "--attn-wide true" "--attn-wide true --splits 5" "--attn-wide true --attn-heads 4" "--attn-wide true --attn-heads 1"; do run $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 $o; done; done
run $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 8 --repeats 1 --profile --attn-wide true
echo "done at t=$(el)"
