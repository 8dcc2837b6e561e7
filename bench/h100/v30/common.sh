# Shared by this folder's device scripts (sourced from the repository root on the device; the
# calls of stop 40 ran them with these lines inline): the Vulkan loader, a timer, and
# `models BIN TYPE...`: `webgpu-llama gen` files of the 1B shape in each TYPE (and with `8b`
# the 8B Q4_K_M, in the background: `wait` for it) under $M.
T0=$(date +%s); el() { echo $(($(date +%s) - T0)); }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
M=/tmp/sbs/models; mkdir -p $M
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
models() {
  local b=$1 t; shift
  for t in "$@"; do
    if [[ $t == 8b ]]; then
      [[ -f $M/l8b.gguf ]] || ($b gen --shape llama-3-8b --type Q4_K_M $M/l8b.gguf >/dev/null 2>&1; echo "8B written at t=$(el)") &
    else
      [[ -f $M/l1b-$t.gguf ]] || $b gen --shape llama-3.2-1b --type $t $M/l1b-$t.gguf >/dev/null
    fi
  done
  echo "1B files at t=$(el)"
}
