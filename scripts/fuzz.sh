#!/usr/bin/env bash
# Runs each fuzz target (fuzz/: the GGUF parser, config validation, the load plan; libFuzzer via
# cargo-fuzz on nightly Rust) for SECONDS seconds (default 10) from the seed corpus that
# scripts/fuzz-corpus.py builds from ../shared/models, under a 512 MiB memory limit and a 10 s
# per-input timeout. Prints the executions and crashes per target; exits non-zero on a crash,
# hang, out-of-memory or a missing toolchain (scripts/setup.sh installs it), never silently.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 5 (the test command's run)
#   FUZZ_RUNS=1000000 scripts/fuzz.sh 0         each target until it has run 1M inputs
#
# Crashes land in fuzz/artifacts/TARGET/ (replay: cargo +nightly fuzz run TARGET FILE).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

SECONDS_PER_TARGET="${1:-10}"
shift || true
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=(parse config load_plan)
RUNS="${FUZZ_RUNS:-0}"

die() { echo "ERROR: fuzz: $*" >&2; exit 1; }
rustup toolchain list 2>/dev/null | grep -q '^nightly' || die "no nightly Rust toolchain (scripts/setup.sh installs it)"
command -v cargo-fuzz >/dev/null 2>&1 || die "cargo-fuzz is not installed (scripts/setup.sh installs it)"

python3 scripts/fuzz-corpus.py
echo "== fuzz: building the targets (nightly, AddressSanitizer)"
cargo +nightly fuzz build || die "the fuzz targets do not build"

# A small AddressSanitizer quarantine and no allocation stacks: the 512 MiB limit then measures
# the target's own memory, and inputs run several times faster.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16:malloc_context_size=0"
mkdir -p target/fuzz-logs
summary=()
failed=0
for t in "${TARGETS[@]}"; do
    log="target/fuzz-logs/$t.log"
    if [[ "$RUNS" != 0 ]]; then echo "== fuzz: $t for $RUNS inputs"; else echo "== fuzz: $t for ${SECONDS_PER_TARGET}s"; fi
    args=(-rss_limit_mb=512 -malloc_limit_mb=512 -timeout=10 -print_final_stats=1)
    if [[ "$RUNS" != 0 ]]; then args+=(-runs="$RUNS"); else args+=(-max_total_time="$SECONDS_PER_TARGET"); fi
    rc=0
    cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- "${args[@]}" >"$log" 2>&1 || rc=$?
    execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -n 1 || true)
    if [[ $rc != 0 || -z "$execs" ]]; then
        failed=1
        tail -n 40 "$log" >&2
        summary+=("$t: FAILED (exit $rc, ${execs:-no} executions; log $log)")
    else
        summary+=("$t: $execs executions, 0 crashes")
    fi
done
printf 'fuzz: %s\n' "${summary[@]}"
((failed == 0)) || die "a target crashed, hung, ran out of memory or did not run (see above; inputs in fuzz/artifacts/)"
