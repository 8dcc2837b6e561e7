#!/usr/bin/env python3
"""Seed corpora for the fuzz targets (fuzz/fuzz_targets/*.rs) from the shared models.

Writes fuzz/corpus/{parse,config,load_plan}/ (ignored by git; the models are never copied into
the repository): each model's header (everything before its data section, which the targets
serve as the head of a larger file) slimmed (metadata arrays cut to 8 elements: the tokenizer's
thousands of strings only slow the fuzzer down; one header is kept whole), that with the first
bytes of its data, and for
config/load_plan the header behind the mode byte and knob bytes the targets decode (fuzz/src/
lib.rs: mode 0 = raw header; knobs: context, binding limit, KV type, batch), plus structured
descriptions (mode 1) for the GGUF builder (fuzz/src/build.rs). Idempotent: files are
rewritten with the same content.

Usage: scripts/fuzz-corpus.py [MODELS_DIR] (default ../shared/models beside the checkout).
"""
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# Knob bytes (ctx selector, binding selector, kv, batch selector, u32): the defaults; a 64 KiB
# binding with f16 KV and a batch of 1; a 4 KiB binding with a 1-position context.
KNOBS = [bytes(8), bytes([0, 4, 1, 1, 0, 0, 0, 0]), bytes([1, 5, 0, 2, 0, 0, 0, 0])]
# Metadata arrays are cut to this many elements in the slim headers.
SLIM_ARRAY = 8
# Most data bytes kept after a header in the "cut" sample.
CUT_DATA = 4096


def data_offset(b: bytes) -> int:
    """The data section's offset, parsing the header as src/gguf.rs does (no validation)."""
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", b, 8)
    alignment = 32

    def string(p):
        n = struct.unpack_from("<Q", b, p)[0]
        return b[p + 8 : p + 8 + n], p + 8 + n

    def value(p, ty):
        if ty in SCALAR:
            return b[p : p + SCALAR[ty]], p + SCALAR[ty]
        if ty == 8:
            return string(p)
        et, n = struct.unpack_from("<IQ", b, p)
        p += 12
        for _ in range(n):
            _, p = value(p, et)
        return None, p

    for _ in range(n_kv):
        key, pos = string(pos)
        ty = struct.unpack_from("<I", b, pos)[0]
        raw, pos = value(pos + 4, ty)
        if key == b"general.alignment" and ty in (0, 2, 4, 10):
            alignment = int.from_bytes(raw, "little")
    for _ in range(n_tensors):
        _, pos = string(pos)
        n_dims = struct.unpack_from("<I", b, pos)[0]
        pos += 4 + 8 * n_dims + 4 + 8
    return -(-pos // alignment) * alignment


def slim(b: bytes, keep: int = SLIM_ARRAY) -> bytes:
    """The header with every metadata array cut to its first `keep` elements (the tokenizer's
    thousands of strings make an input slow to mutate and to parse), the tensor infos unchanged,
    padded to the alignment again."""
    n_tensors, n_kv = struct.unpack_from("<QQ", b, 8)
    out = bytearray(b[:24])
    pos = 24
    alignment = 32

    def skip(p, ty):
        if ty in SCALAR:
            return p + SCALAR[ty]
        if ty == 8:
            return p + 8 + struct.unpack_from("<Q", b, p)[0]
        et, n = struct.unpack_from("<IQ", b, p)
        p += 12
        for _ in range(n):
            p = skip(p, et)
        return p

    for _ in range(n_kv):
        key_end = pos + 8 + struct.unpack_from("<Q", b, pos)[0]
        key = b[pos + 8 : key_end]
        ty = struct.unpack_from("<I", b, key_end)[0]
        start = key_end + 4
        end = skip(start, ty)
        if ty == 9:
            et, n = struct.unpack_from("<IQ", b, start)
            p = start + 12
            for _ in range(min(n, keep)):
                p = skip(p, et)
            out += b[pos:start] + struct.pack("<IQ", et, min(n, keep)) + b[start + 12 : p]
        else:
            out += b[pos:end]
            if key == b"general.alignment" and ty in (0, 2, 4, 10):
                alignment = int.from_bytes(b[start:end], "little")
        pos = end
    for _ in range(n_tensors):
        n_dims = struct.unpack_from("<I", b, pos + 8 + struct.unpack_from("<Q", b, pos)[0])[0]
        end = pos + 8 + struct.unpack_from("<Q", b, pos)[0] + 4 + 8 * n_dims + 4 + 8
        out += b[pos:end]
        pos = end
    out += bytes(-len(out) % alignment)
    return bytes(out)


def main():
    models = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "models"
    paths = sorted(models.glob("*.gguf"))
    if not paths:
        sys.exit(f"fuzz-corpus: no *.gguf in {models} (../shared must be beside the checkout)")
    out = ROOT / "fuzz" / "corpus"
    for t in ("parse", "config", "load_plan"):
        (out / t).mkdir(parents=True, exist_ok=True)
    for p in paths:
        b = p.read_bytes()
        head = b[: data_offset(b)]
        small = slim(head)
        (out / "parse" / f"{p.stem}.slim").write_bytes(small)
        (out / "parse" / f"{p.stem}.slim-cut").write_bytes(small + b[len(head) : len(head) + CUT_DATA])
        if p.stem == "stories260K":  # one whole header, tokenizer and all
            (out / "parse" / f"{p.stem}.header").write_bytes(head)
        for t in ("config", "load_plan"):
            for i, k in enumerate(KNOBS):
                (out / t / f"{p.stem}.knobs{i}").write_bytes(b"\x00" + k + small)
    # Structured inputs (mode 1): fixed pseudo-random descriptions, so the builder runs from the
    # first execution on.
    x = 0x9E3779B97F4A7C15
    for i in range(16):
        desc = bytearray([1])
        for _ in range(64 + 16 * i):
            x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            desc.append(x >> 56)
        for t in ("config", "load_plan"):
            (out / t / f"structured{i:02}").write_bytes(bytes(desc))
    print(f"fuzz-corpus: seeds from {len(paths)} models in {out}")


if __name__ == "__main__":
    main()
