#!/usr/bin/env bash
# The project's test command: every native test (lavapipe), a short fuzz run of the file-input
# targets (scripts/fuzz.sh), then the browser tests (headless
# Chromium with WebGPU on SwiftShader) when scripts/test-web.sh exists. Needs ../shared beside the
# checkout and the models from scripts/fetch-models.sh (scripts/setup.sh installs everything).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/webgpu-llama-xdg}"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

if [[ ! -d ../shared/reference || ! -d ../shared/models ]]; then
    echo "ERROR: ../shared (reference models and logits) is missing beside $ROOT: the tests cannot run" >&2
    exit 1
fi
[[ -f .models/SmolLM2-135M-Instruct.Q4_1.gguf ]] || bash scripts/fetch-models.sh

echo "== gates: cargo fmt --check, cargo clippy --all-targets -D warnings (default and --features lab), cargo doc -D warnings"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
cargo clippy --all-targets --features lab -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet

echo "== the default build has no laboratory: bench takes no --set (numeric overrides, hollow), and at most 16 flags"
cargo build --bin webgpu-llama --quiet
bench_help=$(target/debug/webgpu-llama bench --help)
if grep -qE -- '--set|--stream|--copy-logits' <<<"$bench_help"; then
    echo "ERROR: the default build's bench has laboratory flags" >&2
    exit 1
fi
flags=$(grep -cE '^ +(-[a-z], )?--' <<<"$bench_help")
[[ $flags -le 16 ]] || { echo "ERROR: the default build's bench lists $flags flags" >&2; exit 1; }

echo "== native tests, default build (Vulkan: lavapipe on a machine without a GPU): the device's policy on every reference case"
cargo test --test reference 2>&1 | tee /tmp/webgpu-llama-native-tests.log
echo "== native tests with the laboratory (--features lab: every kernel form forced, the measuring modes)"
cargo test --all-targets --features lab 2>&1 | tee -a /tmp/webgpu-llama-native-tests.log
cargo test --doc 2>&1 | tee -a /tmp/webgpu-llama-native-tests.log # the crate docs' native example
native_pass=$(grep -Eo 'test result: [a-z]+\. [0-9]+ passed' /tmp/webgpu-llama-native-tests.log | awk '{s+=$4} END {print s+0}')
echo "== the wide one-token attention again at 16 lanes (lavapipe at 512 bits): subgroups that own their keys, 2 lanes a key"
LP_NATIVE_VECTOR_WIDTH=512 WEBGPU_LLAMA_EXPECT_LANES=16 cargo test --features lab --test kernels wide_decode_attention -- --nocapture 2>&1 | tee /tmp/webgpu-llama-lanes16.log
grep -q "head dim 64: 16 lanes, subgroups own their keys" /tmp/webgpu-llama-lanes16.log \
    || { echo "ERROR: the 16-lane run did not take the owned form at head dim 64" >&2; exit 1; }

echo "== fuzz: each target 5 s (scripts/fuzz.sh: GGUF parser, config, load plan; fails if cargo-fuzz or nightly is missing)"
bash scripts/fuzz.sh 5

web_pass=0
if [[ -x scripts/test-web.sh ]]; then
    echo "== browser tests (headless Chromium, WebGPU on SwiftShader)"
    bash scripts/test-web.sh 2>&1 | tee /tmp/webgpu-llama-web-tests.log
    web_pass=$(grep -Eo '^test-web: [0-9]+ passed' /tmp/webgpu-llama-web-tests.log | awk '{s+=$2} END {print s+0}')
fi
echo "all: $((native_pass + web_pass)) passed, 0 failed"
