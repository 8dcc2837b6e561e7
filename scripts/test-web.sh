#!/usr/bin/env bash
# Browser tests of the web front door, in headless Chromium with WebGPU on SwiftShader:
#   1. wasm-bindgen tests (tests/web.rs: the API as a page uses it; tests/web_gpu.rs: every
#      reference case with the GPU kernel forms forced, so that Tint compiles and runs them;
#      tests/web_hardening.rs: leaks, calls in flight, out of memory and device loss):
#      cargo test --target wasm32-unknown-unknown --test web --test web_gpu --test web_hardening
#      (the runner is wasm-bindgen-test-runner, from .cargo/config.toml; flags in webdriver.json)
#   2. the npm page test (tests/page.test.mjs): builds and packs the package, installs the tarball
#      in a temp dir and checks the reference logits from a plain module page; with it the chat
#      demo's tokenizer test (tests/tokenizer.test.mjs: llama.cpp's token ids and chat prompts).
# Exits non-zero on any failure; the last line counts tests: "test-web: N passed, M failed ...".
#
#   scripts/test-web.sh            both
#   scripts/test-web.sh --wasm     only 1
#   scripts/test-web.sh --page     only 2
# Needs scripts/setup.sh (wasm32 target, wasm-bindgen-cli 0.2.130, chromium, chromedriver, npm ci)
# and ../shared (the reference models and logits, compiled into the tests).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
# The runner's limit is for the whole tests/web.rs run (17 tests, ~8 minutes on 2 CPU cores with
# SwiftShader: each createLlama compiles the CPU-adapter kernel forms too).
export WASM_BINDGEN_TEST_TIMEOUT="${WASM_BINDGEN_TEST_TIMEOUT:-1800}"
export CHROMEDRIVER="${CHROMEDRIVER:-/usr/bin/chromedriver}"
export WASM_BINDGEN_TEST_WEBDRIVER_JSON="$ROOT/webdriver.json"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

run_wasm=1 run_page=1
case "${1:-}" in
    --wasm) run_page=0 ;;
    --page) run_wasm=0 ;;
    "") ;;
    *) echo "usage: $0 [--wasm|--page]" >&2; exit 2 ;;
esac

START=$SECONDS
LOG_DIR="$CARGO_TARGET_DIR/test-web"
mkdir -p "$LOG_DIR"
passed=0 failed=0 status=0 parts=()


if ((run_wasm)); then
    echo "[test-web] wasm-bindgen tests (tests/web.rs, tests/web_gpu.rs, tests/web_hardening.rs) in headless Chromium"
    t0=$SECONDS
    # --no-fail-fast: both targets run and report, whichever fails.
    nice cargo test --no-fail-fast --target wasm32-unknown-unknown --test web --test web_gpu --test web_hardening 2>&1 | tee "$LOG_DIR/wasm.log"
    rc=${PIPESTATUS[0]}
    p=$(grep -E '^test result: ' "$LOG_DIR/wasm.log" | sed -nE 's/.* ([0-9]+) passed.*/\1/p' | awk '{s+=$1} END {print s+0}')
    f=$(grep -E '^test result: ' "$LOG_DIR/wasm.log" | sed -nE 's/.* ([0-9]+) failed.*/\1/p' | awk '{s+=$1} END {print s+0}')
    if ((rc != 0 && f == 0)); then f=1; fi # build or runner failure
    passed=$((passed + p)); failed=$((failed + f))
    parts+=("wasm-bindgen $p passed/$f failed in $((SECONDS - t0)) s")
    ((rc == 0)) || status=1
fi

if ((run_page)); then
    echo "[test-web] page test (tests/page.test.mjs) and the demo's tokenizer test (tests/tokenizer.test.mjs)"
    t0=$SECONDS
    node --test --test-reporter=spec tests/page.test.mjs tests/tokenizer.test.mjs 2>&1 | tee "$LOG_DIR/page.log"
    rc=${PIPESTATUS[0]}
    p=$(sed -nE 's/^[^a-z]*pass ([0-9]+).*/\1/p' "$LOG_DIR/page.log" | tail -n 1)
    f=$(sed -nE 's/^[^a-z]*fail ([0-9]+).*/\1/p' "$LOG_DIR/page.log" | tail -n 1)
    s=$(sed -nE 's/^[^a-z]*skipped ([0-9]+).*/\1/p' "$LOG_DIR/page.log" | tail -n 1)
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    if ((rc != 0 && f == 0)); then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    parts+=("page $p passed/$f failed/$s skipped in $((SECONDS - t0)) s")
    ((rc == 0)) || status=1
fi

summary=$(IFS=';'; echo "${parts[*]}")
echo "test-web: $passed passed, $failed failed (${summary//;/, }) in $((SECONDS - START)) s"
exit $status
