#!/bin/bash
# Device A/B for issue 9 (stop 40): one binary, --attn-wide false / true alternated
# (attention_decode_wide.wgsl against attention_decode.wgsl) on `webgpu-llama gen` files:
# per-kernel profiles at 512 and after 4096 keys, tg128 after pp512 and after a 4096-token prompt.
source bench/h100/v30/common.sh
B=.bin/webgpu-llama; chmod +x $B
models $B Q8_0 Q4_K_M F16 8b
LIMIT=${LIMIT:-560}
run() { (($(el) < LIMIT)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout $((LIMIT + 20 - $(el))) $B bench "$@" 2>&1 | grep -E "^(prefill|decode tg|dispatches)|attention|whole batch"; }
prof() { run "$@" --gen 8 --repeats 1 --profile | grep -v "prefill\|attention_tiled"; }
$B bench $M/l1b-Q8_0.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for m in Q8_0 Q4_K_M F16; do for o in false true; do prof $M/l1b-$m.gguf --prompt 512 --attn-wide $o; done; done
for r in 1 2 3; do for m in Q8_0 Q4_K_M F16; do for o in false true; do run $M/l1b-$m.gguf --prompt 512 --gen 128 --repeats 2 --attn-wide $o; done; done; done
for r in 1 2; do for m in Q8_0 Q4_K_M F16; do for o in false true; do run $M/l1b-$m.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --attn-wide $o; done; done; done
wait
for o in false true; do prof $M/l8b.gguf --prompt 512 --attn-wide $o; done
for r in 1 2 3; do for o in false true; do run $M/l8b.gguf --prompt 512 --gen 128 --repeats 2 --attn-wide $o; done; done
for r in 1 2; do for o in false true; do run $M/l8b.gguf --prompt 4096 --ctx 4352 --gen 128 --repeats 1 --attn-wide $o; done; done
for o in false true; do prof $M/l8b.gguf --prompt 4096 --ctx 4352 --attn-wide $o; done
echo "done at t=$(el)"
