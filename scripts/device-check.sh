#!/bin/bash
# On the device machine: correctness of the native binary on every reference case, and the family
# shapes' speed. (1) every ../shared/reference stories case (.gpuweb/cases, copied there as
# scripts/device-dawn.sh says) and every family case of tests/families whose family the GPU runs,
# through scripts/check-reference.py; the family models are regenerated here from
# scripts/families.py (the pinned gguf wheel in .whl/: the files are deterministic, and a
# different file would fail its case). (2) `bench` on `gen` files of the family shapes.
#   usage: bash scripts/device-check.sh BIN [SHAPE:TYPE ...]   (no shapes: no benchmark), e.g.
#          bash scripts/device-check.sh .bin/webgpu-llama qwen3-0.6b:Q4_K_M qwen3-4b:Q4_K_M
#   carry: [".gpuweb", ".gl", ".whl"] plus BIN's folder (e.g. .bin)
BIN=$1; shift
T0=$(date +%s); left() { echo $((${DEADLINE:-540} - $(date +%s) + T0)); }
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_DRIVER_FILES=$ICD VK_ICD_FILENAMES=$ICD XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m 700 /tmp/xdg
chmod +x "$BIN"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/gguf-*.whl 2>&1 | tail -1; export PYTHONPATH=/tmp/site
F=/tmp/families; mkdir -p $F/reference $F/models
python3 scripts/families.py $F/gen >/dev/null || echo "families.py failed"
for j in tests/families/*-f32.json; do
    n=$(basename "$j" .json); arch=${n%-f32}
    cp "$j" tests/families/$n.logits.f32 $F/reference/ && cp $F/gen/$n.gguf $F/models/
done
S=/tmp/shared; mkdir -p $S/reference $S/models
cp .gpuweb/cases/*.json .gpuweb/cases/*.logits.f32 $S/reference/ && cp .gpuweb/cases/*.gguf $S/models/
echo "## reference cases (native, $(nvidia-smi --query-gpu=name --format=csv,noheader))"
python3 scripts/check-reference.py "$BIN" $S
echo "## family cases (native)"
python3 scripts/check-reference.py "$BIN" $F
M=/tmp/sbs/models; mkdir -p $M
for c in "$@"; do
    (($(left) > 60)) || { echo "out of time"; break; }
    [[ -f $M/$c.gguf ]] || "$BIN" gen --shape "${c%%:*}" --type "${c##*:}" "$M/$c.gguf" >/dev/null || continue
    echo "### $c"
    "$BIN" bench "$M/$c.gguf" --prompt 512 --gen 128 --repeats 2 2>&1 | grep -E "^(adapter|prefill|decode tg)"
done
