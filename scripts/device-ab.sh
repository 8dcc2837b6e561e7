#!/bin/bash
# On the device machine: two builds of webgpu-llama alternated on the same random-weight files
# (decode and prefill, `bench --prompt 512 --gen 128 --repeats 2`), two rounds: a change's A/B.
#   usage: bash scripts/device-ab.sh OLD_BIN NEW_BIN [SHAPE:TYPE ...]
#          (default: smollm2-135m:Q8_0 llama-3.2-1b:Q8_0 llama-3.2-1b:Q4_K_M)
#   e.g. build both here (`cargo build --release`, copied to .bin/old and .bin/new), then on the
#   device tool: command `bash scripts/device-ab.sh .bin/old .bin/new | tee $OUT/ab.txt`,
#   carry [".bin", ".gl"] (.gl from scripts/side-by-side-carry.sh: the Vulkan loader).
#   No round starts DEADLINE seconds (default 560) after the start.
OLD=$1 NEW=$2; shift 2
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
chmod +x "$OLD" "$NEW"
M=/tmp/sbs/models; mkdir -p $M
CASES=${*:-smollm2-135m:Q8_0 llama-3.2-1b:Q8_0 llama-3.2-1b:Q4_K_M}
for c in $CASES; do
    [[ -f $M/$c.gguf ]] || "$NEW" gen --shape "${c%%:*}" --type "${c##*:}" "$M/$c.gguf" || exit 1
done
echo "models ready at t=$(($(date +%s) - T0)) s"
for round in 1 2; do
    for c in $CASES; do
        for b in "$OLD" "$NEW"; do
            (($(date +%s) - T0 < ${DEADLINE:-560})) || { echo "out of time"; exit 0; }
            echo "### round $round $b $c"
            "$b" bench "$M/$c.gguf" --prompt 512 --gen 128 --repeats 2 --peak-gbs 4800 2>&1 | grep -E "^(adapter|prefill|decode tg)"
        done
    done
done
