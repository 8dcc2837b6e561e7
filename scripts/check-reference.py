#!/usr/bin/env python3
"""Every ../shared/reference case through the CLI on whatever device this machine has (the H200
too, where the Rust tests do not run): `webgpu-llama run --dump-logits` writes every row from the
batched path; each row must be within TOL (max abs) of the float64 reference and the greedy
continuation identical. Extra arguments go to `run` (kernel choices, e.g. --switch coop=true).

  scripts/check-reference.py BIN SHARED_DIR [MODELS_DIR_FALLBACK] [-- RUN_ARGS...]
Exit status 1 when a case fails. Plain Python (no numpy).
"""
import json
import os
import subprocess
import sys
import tempfile

from array import array

TOL = 2e-3


def load_f32(path):
    a = array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return a


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    binary, shared = argv[0], argv[1]
    fallback = argv[2] if len(argv) > 2 else ".models"
    ref = os.path.join(shared, "reference")
    failed = 0
    for name in sorted(f[:-5] for f in os.listdir(ref) if f.endswith(".json")):
        case = json.load(open(os.path.join(ref, name + ".json")))
        model = os.path.join(shared, "models", case["model"])
        if not os.path.exists(model):
            model = os.path.join(fallback, os.path.basename(case["model"]))
        if not os.path.exists(model):
            print(f"{name}: SKIPPED (model {case['model']} not here)")
            continue
        vocab = case["vocab"]
        want = load_f32(os.path.join(ref, case["logits_file"]))
        with tempfile.NamedTemporaryFile(suffix=".f32") as out:
            cmd = [binary, "run", model, "--tokens", ",".join(map(str, case["prompt"])), "-n", str(len(case["greedy"])), "--dump-logits", out.name, *extra]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{name}: FAILED to run: {run.stderr.strip()[-500:]}")
                failed += 1
                continue
            got = load_f32(out.name)
        rows = len(want) // vocab
        err = [max(abs(a - b) for a, b in zip(got[r * vocab:(r + 1) * vocab], want[r * vocab:(r + 1) * vocab])) for r in range(rows)]
        p = len(case["prompt"])
        argmax = [max(range(vocab), key=lambda i: got[r * vocab + i]) for r in range(p - 1, min(rows, len(got) // vocab))]
        greedy = argmax[: len(case["greedy"])]
        worst = max(err)
        ok = len(got) == len(want) and worst <= TOL and greedy == case["greedy"]
        failed += not ok
        print(f"{name}: {'ok' if ok else 'FAILED'}: {rows} rows, max abs {worst:.3e} (worst row {err.index(worst)}), greedy {'identical' if greedy == case['greedy'] else 'DIFFERENT'}")
    print(f"check-reference: {'all ok' if not failed else f'{failed} FAILED'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
