#!/bin/bash
# Device A/B for issue 9 (stop 39): one binary (q+k and v paired by default), --pair-matvecs
# false / true alternated on the 1B Q4_K_M and 8B Q4_K_M shapes: all logits and top 1, and the
# profile's whole batch in one pass for each.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=.bin/new; chmod +x $B; M=/tmp/sbs/models; mkdir -p $M
nvidia-smi --query-gpu=name --format=csv,noheader
[[ -f $M/l1b-Q4_K_M.gguf ]] || $B gen --shape llama-3.2-1b --type Q4_K_M $M/l1b-Q4_K_M.gguf >/dev/null
run() { (($(el) < 200)) || { echo "out of time: $*"; return; }; echo "### t=$(el) bench $*"; timeout 60 $B bench "$@" 2>&1 | grep -E "^(decode tg|dispatches|wait|CPU)"; }
$B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 1 >/dev/null 2>&1   # clocks up
for r in 1 2 3; do for o in false true; do run $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 3 --pair-matvecs $o; run $M/l1b-Q4_K_M.gguf --prompt 512 --gen 128 --repeats 3 --top-k 1 --pair-matvecs $o; done; done
for o in false true; do echo "### profile --pair-matvecs $o"; $B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 8 --repeats 1 --profile --pair-matvecs $o 2>&1 | sed -n '/profile: decode/,/whole batch/p' | grep -E "Q4_K|Q6_K|whole"; done
for o in false true; do echo "### profile --pair-matvecs $o (again)"; $B bench $M/l1b-Q4_K_M.gguf --prompt 512 --gen 8 --repeats 1 --profile --pair-matvecs $o 2>&1 | grep -E "whole batch" | head -1; done
echo "done at t=$(el)"
