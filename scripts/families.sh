#!/usr/bin/env bash
# Makes the family test models (scripts/families.py) in .families/ (git-ignored), installing the
# pinned gguf-py first when it is missing. Idempotent and quick; scripts/setup.sh runs it and
# tests/families.rs asks for it when the files are absent. The files are byte-for-byte
# deterministic: tests/families/*.json pin their sha256.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
GGUF_VERSION="0.19.0"
log() { printf '[families] %s\n' "$*"; }

if [[ "$("$PYTHON" -c 'import gguf.metadata, importlib.metadata as m; print(m.version("gguf"))' 2>/dev/null)" != "$GGUF_VERSION" ]]; then
    wheel="$ROOT/.whl/gguf-$GGUF_VERSION-py3-none-any.whl"
    if [[ -f "$wheel" ]]; then req="$wheel"; else req="gguf==$GGUF_VERSION"; fi
    log "pip install --user $req"
    "$PYTHON" -m pip install --user --no-input --disable-pip-version-check --progress-bar off "$req" \
        || "$PYTHON" -m pip install --user --break-system-packages --no-input --disable-pip-version-check "$req"
fi
"$PYTHON" "$ROOT/scripts/families.py" "$ROOT/.families" >/dev/null
log "models in .families/"
