#!/bin/bash
# On the device machine (one H100 or H200, 16 cores), in one call: the model-family shapes side by
# side with llama.cpp on THE SAME GGUF files (issue 49's targets: our decode >= 1.2x llama.cpp
# CUDA tg128, our prefill >= 2x llama.cpp Vulkan pp512).
#   usage: bash scripts/device-families.sh [SHAPE:TYPE ...]
#          (default: qwen3-0.6b, qwen3-4b, gemma-3-1b, phi-3.5-mini, each Q4_K_M and Q8_0)
#   device tool: command `set -o pipefail; bash scripts/device-families.sh 2>&1 | tee $OUT/log`,
#                carry [".bin", ".gl", ".devcarry"]
#   made here by scripts/side-by-side-carry.sh: .bin/webgpu-llama (release build), .gl/*.deb (the
#   Vulkan loader), .devcarry/llama-src.tar.xz (llama.cpp's source, pinned) and .devcarry/vkdeb/
#   (glslc, shaderc, Vulkan and SPIR-V headers for llama.cpp's Vulkan build).
# Steps:
#   1. llama.cpp's llama-bench built twice at once, CUDA (sm_90, flash-attention kernels off, as
#      ../shared/bench/side_by_side.sh builds it) and Vulkan, at normal priority: they take most
#      of the 16 cores for about 3-5 minutes. Beside them, at the lowest priority, `webgpu-llama
#      gen` writes the files (random weights, with the minimal tokenizer llama.cpp needs).
#   2. Then, one process at a time, per file: llama-bench CUDA `-p 512 -n 128 -ngl 99 -fa 0 -r 3`,
#      llama-bench Vulkan `-p 512 -n 0 -ngl 99 -fa 0 -r 3` (prefill only), and `webgpu-llama bench
#      FILE --prompt 512 --gen 128 --repeats 2`; each one's raw lines are printed.
#   3. One table: the numbers parsed from those lines and the two ratios.
# A failed build or a refused file skips only its own runs, saying why; nothing starts past
# DEADLINE seconds (default 560) after the start, and each run is cut off there. Work files stay in
# /tmp/fam (builds, models, llama-bench outputs): a second call on the still-warm machine skips the
# builds and the files already written, and keeps llama.cpp's numbers for files it already measured
# (ours are measured again). FRESH=1 drops the models and numbers first (keeps the builds).
CASES=${*:-qwen3-0.6b:Q4_K_M qwen3-0.6b:Q8_0 qwen3-4b:Q4_K_M qwen3-4b:Q8_0 gemma-3-1b:Q4_K_M gemma-3-1b:Q8_0 phi-3.5-mini:Q4_K_M phi-3.5-mini:Q8_0}
DEADLINE=${DEADLINE:-560}
BIN=${BIN:-.bin/webgpu-llama}
W=/tmp/fam M=/tmp/fam/models O=/tmp/fam/out SRC=/tmp/fam/src/llama.cpp
T0=$(date +%s)
el() { echo $(($(date +%s) - T0)); }
left() { echo $((DEADLINE - $(el))); }
say() { echo "[t=$(el) s] $*"; }
[[ ${FRESH:-0} == 1 ]] && rm -rf $M $O
mkdir -p $W/src $M $O
say "cases: $CASES; deadline $DEADLINE s"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
echo "cores: $(nproc)"; free -g | head -2
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp/xdg
mkdir -p -m 700 /tmp/xdg
chmod +x "$BIN" || { echo "error: no $BIN (cargo build --release; scripts/side-by-side-carry.sh copies it)"; exit 1; }

# --- 1. builds and models -------------------------------------------------------------------
[[ -d $SRC ]] || tar -xJf .devcarry/llama-src.tar.xz -C $W/src || say "no llama.cpp source (.devcarry/llama-src.tar.xz): llama.cpp is skipped"
GEN=; command -v ninja >/dev/null && GEN="-G Ninja"
COMMON="-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF"
BC=$SRC/build-cuda/bin BV=$SRC/build-vk/bin
build_cuda() {
    [[ -x $BC/llama-bench ]] && { echo "already built"; return 0; }
    cmake -S $SRC -B $SRC/build-cuda $GEN $COMMON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_CUDA_NCCL=OFF >$W/cfg-cuda.log 2>&1 || { tail -30 $W/cfg-cuda.log; return 1; }
    cmake --build $SRC/build-cuda -j "$(nproc)" --target llama-bench >$W/build-cuda.log 2>&1 || { grep -E 'error' $W/build-cuda.log | sort -u | head -40; return 1; }
}
build_vk() {
    [[ -x $BV/llama-bench ]] && { echo "already built"; return 0; }
    mkdir -p /opt/vk && for f in .devcarry/vkdeb/*.deb; do dpkg -x "$f" /opt/vk; done
    export PATH=/opt/vk/usr/bin:$PATH LD_LIBRARY_PATH=/opt/vk/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
    command -v glslc >/dev/null || { echo "no glslc (.devcarry/vkdeb)"; return 1; }
    # Debian 12's Vulkan headers (1.3.239) predate VK_EXT_layer_settings, which llama.cpp uses only
    # to configure the validation layer: build without it (as side_by_side.sh does).
    python3 - "$SRC" <<'PY'
import sys
p = sys.argv[1] + '/ggml/src/ggml-vulkan/ggml-vulkan.cpp'; s = open(p).read()
if 'vk::LayerSettingEXT> settings' in s:
    a = s.index('    std::vector<vk::LayerSettingEXT> settings = {'); b = s.index('&layer_setting_info);', a)
    s = s[:a] + '    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);' + s[b + len('&layer_setting_info);'):]
    open(p, 'w').write(s)
PY
    cmake -S $SRC -B $SRC/build-vk $GEN $COMMON -DGGML_VULKAN=ON -DVulkan_INCLUDE_DIR=/opt/vk/usr/include \
        -DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so.1 -DVulkan_GLSLC_EXECUTABLE=/opt/vk/usr/bin/glslc \
        -DSPIRV-Headers_DIR=/opt/vk/usr/share/cmake/SPIRV-Headers >$W/cfg-vk.log 2>&1 || { tail -30 $W/cfg-vk.log; return 1; }
    cmake --build $SRC/build-vk -j "$(nproc)" --target llama-bench >$W/build-vk.log 2>&1 || { grep -E 'error' $W/build-vk.log | sort -u | head -40; return 1; }
}
pids=()
if [[ -d $SRC ]]; then
    for b in cuda vk; do
        (t=$(date +%s); build_$b >$W/build-$b.out 2>&1; echo "rc $? after $(($(date +%s) - t)) s" >>$W/build-$b.out) &
        pids+=($!)
    done
    say "llama.cpp CUDA and Vulkan builds started"
fi
# The files, written aside then moved (a cut-off run leaves no partial file to be kept), at the
# lowest priority so that the builds keep the cores; two at a time.
gen_lane() {
    local c
    for c in "$@"; do
        [[ -f $M/$c.gguf ]] && continue
        nice -n 19 "$BIN" gen --shape "${c%%:*}" --type "${c##*:}" "$M/$c.gguf.part" && mv "$M/$c.gguf.part" "$M/$c.gguf"
    done
}
read -ra all <<<"$CASES"
odd=() even=()
for i in "${!all[@]}"; do if ((i % 2)); then odd+=("${all[i]}"); else even+=("${all[i]}"); fi; done
gen_lane "${even[@]}" >$W/gen-0.out 2>&1 & pids+=($!)
gen_lane "${odd[@]}" >$W/gen-1.out 2>&1 & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done
for f in $W/build-cuda.out $W/build-vk.out $W/gen-0.out $W/gen-1.out; do [[ -f $f ]] && { echo "--- $(basename $f)"; cat "$f"; }; done
ls -la $M
say "builds and models done"

# --- 2. benchmarks, one process at a time ---------------------------------------------------
LB="-p 512 -ngl 99 -fa 0 -r 3"
why() { if (($1 == 124)); then echo "cut off"; else echo "rc $1"; fi; }   # a failed run's table cell
lb() {   # NAME BINDIR NEED_S MODEL CASE ARGS...: llama-bench into $O/CASE.NAME; prints the table rows
    local name=$1 b=$2 need=$3 m=$4 c=$5; shift 5
    local out=$O/$c.$name
    if grep -q ' pp512 ' "$out" 2>/dev/null; then echo "### llama-bench $name $c: kept from an earlier call"; grep -E '^\|' "$out"; return; fi
    rm -f "$out"
    [[ -x $b/llama-bench ]] || { echo "### llama-bench $name $c: SKIPPED (no $name build: see build-*.out above)"; echo "no build" >"$out.why"; return; }
    [[ -f $m ]] || { echo "### llama-bench $name $c: SKIPPED (no model)"; echo "no model" >"$out.why"; return; }
    (($(left) > need)) || { echo "### llama-bench $name $c: SKIPPED (time: $(left) s left)"; echo "no time" >"$out.why"; return; }
    say "### llama-bench $name $c $LB $*"
    timeout $(($(left) - 3)) $b/llama-bench -m "$m" $LB "$@" >"$out.part" 2>"$out.err"
    local rc=$?
    grep -hE 'ggml_vulkan: 0|Device 0:' "$out.err" | head -2
    grep -E '^\|' "$out.part"; grep -h '^build:' "$out.part" | head -1
    if ((rc == 0)); then mv "$out.part" "$out"; rm -f "$out.why"; else echo "llama-bench rc=$rc"; tail -5 "$out.err"; why $rc >"$out.why"; fi
}
ours() {   # NEED_S MODEL CASE: webgpu-llama bench into $O/CASE.ours
    local need=$1 m=$2 c=$3 out=$O/$3.ours
    rm -f "$out" "$out.why"
    [[ -f $m ]] || { echo "### webgpu-llama $c: SKIPPED (no model)"; echo "no model" >"$out.why"; return; }
    (($(left) > need)) || { echo "### webgpu-llama $c: SKIPPED (time: $(left) s left)"; echo "no time" >"$out.why"; return; }
    say "### webgpu-llama bench $c --prompt 512 --gen 128 --repeats 2"
    timeout $(($(left) - 3)) "$BIN" bench "$m" --prompt 512 --gen 128 --repeats 2 >"$out.part" 2>&1
    local rc=$?
    grep -E '^(adapter|load|prefill|decode tg)' "$out.part"
    if ((rc == 0)); then mv "$out.part" "$out"; else echo "webgpu-llama rc=$rc"; tail -3 "$out.part"; why $rc >"$out.why"; fi
}
for c in $CASES; do
    m=$M/$c.gguf
    lb cuda $BC 25 "$m" "$c" -n 128
    lb vk $BV 40 "$m" "$c" -n 0
    ours 30 "$m" "$c"
done
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv

# --- 3. the table ---------------------------------------------------------------------------
lbts() {   # FILE TEST: llama-bench's t/s for TEST (its markdown table's last column)
    [[ -f $1 ]] && awk -F'|' -v t="$2" 'NF > 3 { x = $(NF-2); gsub(/ /, "", x); if (x == t) { split($(NF-1), a, " "); print a[1]; exit } }' "$1"
}
ourts() {   # FILE WHAT: our median tok/s on the line "WHAT: X (min ..."
    [[ -f $1 ]] && sed -n "s/^$2: \([0-9.]*\) .*/\1/p" "$1" | head -1
}
cell() {   # VALUE FILE: the value, else why it is missing
    if [[ -n $1 ]]; then echo "$1"; elif [[ -f $2.why ]]; then echo "($(cat "$2.why"))"; else echo "(none)"; fi
}
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b }' || echo "-"; }
echo
echo "## $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): webgpu-llama vs llama.cpp on the same files (tok/s, medians; llama.cpp: means of 3)"
echo "| file | CUDA tg128 | ours tg128 | decode ours/CUDA (>= 1.2) | Vulkan pp512 | ours pp512 | prefill ours/Vulkan (>= 2) | CUDA pp512 |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|"
for c in $CASES; do
    ctg=$(lbts $O/$c.cuda tg128) cpp=$(lbts $O/$c.cuda pp512) vpp=$(lbts $O/$c.vk pp512)
    otg=$(ourts $O/$c.ours "decode tg128") opp=$(ourts $O/$c.ours "prefill pp512")
    echo "| $c | $(cell "$ctg" $O/$c.cuda) | $(cell "$otg" $O/$c.ours) | $(ratio "$otg" "$ctg") | $(cell "$vpp" $O/$c.vk) | $(cell "$opp" $O/$c.ours) | $(ratio "$opp" "$vpp") | $(cell "$cpp" $O/$c.cuda) |"
done
say "all done"
