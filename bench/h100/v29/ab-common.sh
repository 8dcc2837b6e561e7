# Shared by probe3.sh, probe5.sh and probe6.sh (sourced; the device calls of stop 39 ran them
# with these lines inline): the Vulkan loader, `webgpu-llama gen` files of the 1B shape in the
# types of $TYPES (the 8B in the background), and run BIN ARGS... (`bench`, 550 s in all).
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
chmod +x .bin/old .bin/new; M=/tmp/sbs/models; mkdir -p $M
nvidia-smi --query-gpu=name --format=csv,noheader
[[ -f $M/l8b.gguf ]] || (.bin/new gen --shape llama-3-8b --type Q4_K_M $M/l8b.gguf >/dev/null 2>&1; echo "8B written at t=$(el)") &
for t in $TYPES; do [[ -f $M/l1b-$t.gguf ]] || .bin/new gen --shape llama-3.2-1b --type $t $M/l1b-$t.gguf >/dev/null; done
echo "1B files at t=$(el)"
run() { (($(el) < 550)) || { echo "out of time: $*"; return; }; local b=$1; shift; echo "### t=$(el) $b bench $*"; timeout $((555 - $(el))) $b bench "$@" 2>&1 | grep -E "^(prefill|decode tg|dispatches)"; }
