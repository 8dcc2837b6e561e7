#!/usr/bin/env python3
"""llama.cpp's reference logits for the F32 family models, into tests/families/.

    python3 scripts/family-references.py FAMILY_LOGITS_BINARY [MODELS_DIR] [NAME...]

FAMILY_LOGITS_BINARY is scripts/family-logits.cpp built by scripts/family-llama-build.sh (llama.cpp's
CPU backend with exact GELU); MODELS_DIR holds scripts/families.py's output (default .families/).
For each case (all, or the NAMEs given) it writes NAME-f32.json and NAME-f32.logits.f32 in the
format of ../shared/reference: the prompt, the 20 greedy tokens, rows of logits after token i of
prompt ++ greedy[:-1], the model's sha256, the smallest top-two gap over the greedy steps.
"""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402

N_GREEDY = 20


def main():
    binary = sys.argv[1]
    models = sys.argv[2] if len(sys.argv) > 2 else os.path.join(families.ROOT, ".families")
    only = set(sys.argv[3:])
    out_dir = os.path.join(families.ROOT, "tests", "families")
    os.makedirs(out_dir, exist_ok=True)
    for case in families.CASES:
        if only and case["name"] not in only:
            continue
        name = f"{case['name']}-f32"
        model = os.path.join(models, name + ".gguf")
        logits_path = os.path.join(out_dir, name + ".logits.f32")
        args = [binary, model, logits_path, str(N_GREEDY)] + [str(t) for t in case["prompt"]]
        greedy = [int(x) for x in subprocess.run(args, check=True, capture_output=True, text=True).stdout.split()]
        vocab = case["hp"]["vocab"]
        rows = np.fromfile(logits_path, dtype="<f4").reshape(-1, vocab)
        n_prompt = len(case["prompt"])
        assert rows.shape[0] == n_prompt + N_GREEDY - 1 and len(greedy) == N_GREEDY
        steps = np.sort(rows[n_prompt - 1:], axis=1)
        margin = float(np.min(steps[:, -1] - steps[:, -2]))
        last = rows[n_prompt - 1].astype(np.float64)
        top5 = [[int(i), float(last[i])] for i in np.argsort(-last, kind="stable")[:5]]
        with open(model, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        quantised = {}
        for ty in families.QUANT_TYPES:
            with open(os.path.join(models, f"{case['name']}-{ty}.gguf"), "rb") as f:
                quantised[ty] = hashlib.sha256(f.read()).hexdigest()
        doc = {
            "model": name + ".gguf",
            "model_sha256": sha,
            # The quantised files' sha256 (the tests run the reference on them; no llama.cpp logits).
            "quantised_sha256": quantised,
            "model_source": f"scripts/families.py case {case['name']} (seed {case['seed']}): {case['note']}",
            "architecture": case["arch"],
            "prompt": case["prompt"],
            "greedy": greedy,
            "greedy_min_margin": margin,
            "logits_file": name + ".logits.f32",
            "logits_rows": int(rows.shape[0]),
            "vocab": vocab,
            # family-logits.cpp's context: the prompt and greedy steps rounded up to 256 (LongRoPE
            # picks its factor table by it).
            "n_ctx": (n_prompt + N_GREEDY + 255) // 256 * 256,
            "rows_are": "logits after token i of prompt + greedy[:-1], for i = 0 .. logits_rows-1",
            "top5_after_prompt": top5,
            "reference": "llama.cpp CPU backend (scripts/family-llama-build.sh: GELU exact, not through its f16 "
                         "table), f32 KV cache, flash attention off, prompt in one batch then one token a step",
        }
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"{name}: greedy {greedy[:6]}..., min margin {margin:.4f}")


if __name__ == "__main__":
    main()
