#!/usr/bin/env python3
"""Small random-weight GGUFs of each model family the engine knows, for tests.

    python3 scripts/families.py [OUT_DIR]      (default: .families/ at the repository root)

Each case is a tiny model with the real tensor names and metadata keys of its family as llama.cpp
reads them (src/llama-arch.cpp, src/models/<family>.cpp), exercising the family's features (GQA,
biases, q/k norms, tied or untied output, head dims whose product with the head count differs from
the width ...). Weights are drawn from a seeded numpy generator, so every file is byte-for-byte
the same on every run and machine: the reference jsons under tests/families/ pin their sha256.

Each case is written in F32 and in two quantised GGML types that gguf-py's numpy quantisers make
without llama.cpp: Q8_0 and Q4_0 (matrices only; norms, biases and factor tables stay F32).

Needs gguf-py 0.19.0 (scripts/families.sh installs it). The prompts and families live in CASES;
scripts/family-references.py reads them to make llama.cpp's reference logits.
"""
import os
import sys

import numpy as np

try:
    import gguf
    from gguf import GGMLQuantizationType as T
except ImportError:  # pragma: no cover - the message is the point
    sys.exit("families.py needs gguf-py 0.19.0: run `bash scripts/families.sh` (it installs it)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUANT_TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0}

# GPT-2's byte-level alphabet: every byte maps to one printable unicode character.
def byte_alphabet():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return [out[b] for b in range(256)]


def bpe_vocab(vocab, specials, pre):
    """A byte-level BPE tokenizer (tokenizer.ggml.model = gpt2) of exactly `vocab` tokens: the 256
    byte tokens, merges of lower-case letter pairs, then the special tokens (control type)."""
    base = byte_alphabet()
    n_merges = vocab - 256 - len(specials)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    merges, tokens = [], list(base)
    for a in letters:
        for b in letters:
            if len(merges) == n_merges:
                break
            merges.append(f"{a} {b}")
            tokens.append(a + b)
    assert len(merges) == n_merges, "vocab too large for the merge table"
    tokens += specials
    types = [1] * (vocab - len(specials)) + [3] * len(specials)
    return {"model": "gpt2", "pre": pre, "tokens": tokens, "types": types, "merges": merges}


def spm_vocab(vocab, specials):
    """A SentencePiece-style tokenizer (tokenizer.ggml.model = llama) of exactly `vocab` tokens:
    the specials (control), 256 byte tokens <0xNN> (byte type), then word pieces with scores."""
    tokens = list(specials) + [f"<0x{b:02X}>" for b in range(256)]
    types = [3] * len(specials) + [6] * 256
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    i = 0
    while len(tokens) < vocab:
        tokens.append("\u2581" + letters[i % 26] + letters[(i // 26) % 26])
        types.append(1)
        i += 1
    scores = [0.0] * len(specials) + [0.0] * 256 + [-float(k) for k in range(vocab - len(specials) - 256)]
    return {"model": "llama", "tokens": tokens, "types": types, "scores": scores}


class Builder:
    """Draws a case's tensors from one seeded generator, in a fixed order."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.tensors = []  # (name, numpy array in row-major order, is_matrix)

    def matrix(self, name, rows, cols, scale=1.0):
        """A `rows` x `cols` matrix (ggml dims [cols, rows]) ~ N(0, scale^2 / cols)."""
        w = self.rng.standard_normal((rows, cols)) * (scale / np.sqrt(cols))
        self.tensors.append((name, w.astype(np.float32), True))

    def experts(self, name, n, rows, cols):
        """An expert stack of `n` `rows` x `cols` matrices (ggml dims [cols, rows, n])."""
        w = self.rng.standard_normal((n, rows, cols)) / np.sqrt(cols)
        self.tensors.append((name, w.astype(np.float32), True))

    def vector(self, name, n, mean=0.0, std=0.1):
        """A 1-D tensor ~ N(mean, std^2): norms near 1, biases near 0."""
        v = mean + std * self.rng.standard_normal(n)
        self.tensors.append((name, v.astype(np.float32), False))


def dense_llama_like(b, c, layer_extra=None, fused=False):
    """Token embedding, blocks of attention + gated FFN, output norm, optional untied output."""
    d, hd, nh, nkv, ff, vocab = c["d"], c["head_dim"], c["n_head"], c["n_kv"], c["ff"], c["vocab"]
    # Elements ~ N(0, embd_std^2). A tied output reads the same rows, so a small embd_std keeps
    # the logits O(1) and the last token from dominating its own logit.
    b.matrix("token_embd.weight", vocab, d, scale=c.get("embd_std", 1.0) * np.sqrt(d))
    for l in range(c["n_layer"]):
        p = f"blk.{l}."
        b.vector(p + "attn_norm.weight", d, mean=1.0)
        b.matrix(p + "attn_q.weight", nh * hd, d)
        b.matrix(p + "attn_k.weight", nkv * hd, d)
        b.matrix(p + "attn_v.weight", nkv * hd, d)
        if c.get("qkv_bias"):
            b.vector(p + "attn_q.bias", nh * hd, std=0.5)
            b.vector(p + "attn_k.bias", nkv * hd, std=0.5)
            b.vector(p + "attn_v.bias", nkv * hd, std=0.5)
        if c.get("qk_norm"):
            b.vector(p + "attn_q_norm.weight", hd, mean=1.0, std=0.2)
            b.vector(p + "attn_k_norm.weight", hd, mean=1.0, std=0.2)
        b.matrix(p + "attn_output.weight", d, nh * hd)
        if c.get("post_norms"):
            b.vector(p + "post_attention_norm.weight", d, mean=1.0, std=0.2)
        b.vector(p + "ffn_norm.weight", d, mean=1.0)
        if c.get("experts"):
            n, ffe = c["experts"], c["ff_exp"]
            b.matrix(p + "ffn_gate_inp.weight", n, d, scale=3.0)
            b.experts(p + "ffn_gate_exps.weight", n, ffe, d)
            b.experts(p + "ffn_up_exps.weight", n, ffe, d)
            b.experts(p + "ffn_down_exps.weight", n, d, ffe)
        else:
            b.matrix(p + "ffn_gate.weight", ff, d)
            b.matrix(p + "ffn_up.weight", ff, d)
            b.matrix(p + "ffn_down.weight", d, ff)
        if c.get("post_norms"):
            b.vector(p + "post_ffw_norm.weight", d, mean=1.0, std=0.2)
    # Tied: norm weights of random sign decorrelate the output from the last token's own
    # embedding, which otherwise wins every step (a greedy loop of one token tests little).
    b.vector("output_norm.weight", d, mean=0.0 if c.get("tied") else 1.0, std=1.0 if c.get("tied") else 0.1)
    if not c.get("tied"):
        b.matrix("output.weight", vocab, d, scale=4.0)


def qwen_metadata(w, arch, c):
    w.add_context_length(c["ctx"])
    w.add_embedding_length(c["d"])
    w.add_block_count(c["n_layer"])
    w.add_feed_forward_length(c["ff"])
    w.add_head_count(c["n_head"])
    w.add_head_count_kv(c["n_kv"])
    w.add_rope_freq_base(c["theta"])
    w.add_layer_norm_rms_eps(c["eps"])
    if c["head_dim"] * c["n_head"] != c["d"]:
        w.add_key_length(c["head_dim"])
        w.add_value_length(c["head_dim"])


def gemma_metadata(w, arch, c):
    """Qwen's keys (key/value length always written, as Gemma's converter does) plus Gemma's:
    sliding window, its pattern and RoPE base, linear RoPE scaling of the global layers,
    optional final-logit soft-cap."""
    qwen_metadata(w, arch, c)
    if c["head_dim"] * c["n_head"] == c["d"]:
        w.add_key_length(c["head_dim"])
        w.add_value_length(c["head_dim"])
    w.add_sliding_window(c["window"])
    if "pattern" in c:
        w.add_sliding_window_pattern(c["pattern"])
    if "theta_swa" in c:
        w.add_rope_freq_base_swa(c["theta_swa"])
    if c.get("attn_softcap"):
        w.add_attn_logit_softcapping(c["attn_softcap"])
    if c.get("rope_linear"):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(c["rope_linear"])
    if c.get("final_softcap"):
        w.add_final_logit_softcapping(c["final_softcap"])


def phi3_tensors(b, c):
    """Phi-3: fused q|k|v and gate|up matrices, untied output, LongRoPE factor tables."""
    d, hd, nh, nkv, ff, vocab = c["d"], c["head_dim"], c["n_head"], c["n_kv"], c["ff"], c["vocab"]
    b.matrix("token_embd.weight", vocab, d, scale=np.sqrt(d))
    for l in range(c["n_layer"]):
        p = f"blk.{l}."
        b.vector(p + "attn_norm.weight", d, mean=1.0)
        b.matrix(p + "attn_qkv.weight", (nh + 2 * nkv) * hd, d)
        b.matrix(p + "attn_output.weight", d, nh * hd)
        b.vector(p + "ffn_norm.weight", d, mean=1.0)
        b.matrix(p + "ffn_up.weight", 2 * ff, d)
        b.matrix(p + "ffn_down.weight", d, ff)
    b.vector("output_norm.weight", d, mean=1.0)
    b.matrix("output.weight", vocab, d, scale=4.0)
    half = c["n_rot"] // 2
    # Short factors near 1, long ones growing to 8 over the low frequencies, as LongRoPE's are.
    b.tensors.append(("rope_factors_short.weight", (1.0 + 0.05 * b.rng.random(half)).astype(np.float32), False))
    b.tensors.append(("rope_factors_long.weight", np.linspace(1.0, 8.0, half).astype(np.float32), False))


def phi3_metadata(w, arch, c):
    qwen_metadata(w, arch, c)
    w.add_rope_dimension_count(c["n_rot"])
    w.add_rope_scaling_type(gguf.RopeScalingType.LONGROPE)
    w.add_rope_scaling_orig_ctx_len(c["orig_ctx"])
    w.add_rope_scaling_attn_factors(c["attn_factor"])


def qwen3moe_metadata(w, arch, c):
    qwen_metadata(w, arch, c)
    w.add_expert_count(c["experts"])
    w.add_expert_used_count(c["experts_used"])
    w.add_expert_feed_forward_length(c["ff_exp"])


def smollm3_metadata(w, arch, c):
    qwen_metadata(w, arch, c)


def granite_metadata(w, arch, c):
    qwen_metadata(w, arch, c)
    w.add_embedding_scale(c["embedding_scale"])
    w.add_residual_scale(c["residual_scale"])
    w.add_logit_scale(c["logit_scale"])
    w.add_float32(f"{arch}.attention.scale", c["attention_scale"])


# Every case: name, architecture, seed, hyperparameters, prompt (token ids; no BOS for families
# whose tokenizer adds none). The prompts are longer than any sliding window below.
CASES = [
    {
        "name": "qwen2",
        "arch": "qwen2",
        "seed": 2002,
        "note": "Qwen2/2.5: NEOX RoPE, q/k/v biases, theta 1e6, GQA 4:2, untied output",
        "hp": {"d": 128, "n_layer": 3, "n_head": 4, "n_kv": 2, "head_dim": 32, "ff": 256, "vocab": 320,
               "ctx": 4096, "theta": 1000000.0, "eps": 1e-6, "qkv_bias": True, "tied": False},
        "tokenizer": ("bpe", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "qwen2"),
        "prompt": [317, 40, 71, 290, 110, 300, 99, 33, 270, 84, 260, 55],
    },
    {
        "name": "qwen3",
        "arch": "qwen3",
        "seed": 3004,
        "note": "Qwen3: NEOX RoPE, per-head q/k RMSNorm before RoPE, head dim 128 with n_head*head_dim "
                "(512) != n_embd (128), GQA 4:2, tied output",
        "hp": {"d": 128, "n_layer": 3, "n_head": 4, "n_kv": 2, "head_dim": 128, "ff": 192, "vocab": 320,
               "ctx": 40960, "theta": 1000000.0, "eps": 1e-6, "qk_norm": True, "tied": True,
               "embd_std": 0.5},
        "tokenizer": ("bpe", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "qwen2"),
        "prompt": [318, 72, 101, 280, 44, 262, 97, 310, 120, 36, 290, 66, 75],
    },
]

CASES.append({
    "name": "gemma3",
    "arch": "gemma3",
    "seed": 3303,
    "note": "Gemma 3: embeddings x sqrt(n_embd), q/k RMSNorm, post-attention and post-FFN norms, "
            "GELU-tanh, sliding window 4 (shorter than the prompt) on layers 0, 1, 3 (pattern 3) with "
            "RoPE base 10000, global layer 2 with base 1e6 and linear RoPE scaling 8, NEOX RoPE, "
            "MQA 4:1, head dim 64 with n_head*head_dim (256) != n_embd (128), tied output",
    "hp": {"d": 128, "n_layer": 4, "n_head": 4, "n_kv": 1, "head_dim": 64, "ff": 384, "vocab": 300,
           "ctx": 32768, "theta": 1000000.0, "eps": 1e-6, "qk_norm": True, "post_norms": True,
           "tied": True, "embd_std": 0.25, "window": 4, "pattern": 3, "theta_swa": 10000.0,
           "rope_linear": 8.0},
    "tokenizer": ("spm", ["<pad>", "<eos>", "<bos>", "<unk>"]),
    "prompt": [2, 280, 31, 77, 199, 4, 260, 150, 42, 291, 88, 133],
})

CASES.append({
    "name": "phi3",
    "arch": "phi3",
    "seed": 3501,
    "note": "Phi-3/Phi-4-mini: fused attn_qkv and gate|up, NEOX RoPE over 24 of 32 head dims (partial "
            "rotary 0.75), LongRoPE with original context 128 < the 256 llama.cpp runs with (so the "
            "long factors) and attn_factor sqrt(1 + ln 8 / ln 128), GQA 4:2, untied output",
    "hp": {"d": 128, "n_layer": 3, "n_head": 4, "n_kv": 2, "head_dim": 32, "n_rot": 24, "ff": 256,
           "vocab": 320, "ctx": 1024, "orig_ctx": 128, "attn_factor": float(np.sqrt(1 + np.log(8) / np.log(128))),
           "theta": 10000.0, "eps": 1e-5, "tied": False},
    "tokenizer": ("spm", ["<unk>", "<s>", "</s>", "<|endoftext|>"], {"unk": 0, "bos": 1, "eos": 2, "pad": 3}),
    "prompt": [1, 300, 45, 91, 210, 7, 255, 130, 64, 280, 19, 101],
})

CASES.append({
    "name": "smollm3",
    "arch": "smollm3",
    "seed": 3601,
    "note": "SmolLM3: llama's block with adjacent-pair RoPE, no RoPE on layer 3 (NoPE every 4th "
            "layer), GQA 4:1, tied output",
    "hp": {"d": 128, "n_layer": 4, "n_head": 4, "n_kv": 1, "head_dim": 32, "ff": 256, "vocab": 320,
           "ctx": 65536, "theta": 5000000.0, "eps": 1e-6, "tied": True, "embd_std": 0.5},
    "tokenizer": ("bpe", ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"], "smollm"),
    "prompt": [316, 40, 200, 61, 300, 11, 97, 250, 13, 180, 77, 299],
})
CASES.append({
    "name": "granite",
    "arch": "granite",
    "seed": 3701,
    "note": "Granite 3.x: llama's block with embedding multiplier 12, residual multiplier 0.22, "
            "attention multiplier 0.0078125 (not 1/sqrt(head_dim)), logits divided by 8, GQA 4:2, "
            "tied output",
    "hp": {"d": 128, "n_layer": 3, "n_head": 4, "n_kv": 2, "head_dim": 32, "ff": 256, "vocab": 320,
           "ctx": 4096, "theta": 10000000.0, "eps": 1e-5, "tied": True, "embd_std": 1.5,
           "embedding_scale": 12.0, "residual_scale": 0.22, "attention_scale": 0.0078125, "logit_scale": 8.0},
    "tokenizer": ("bpe", ["<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>"], "refact"),
    "prompt": [0, 40, 120, 61, 310, 11, 97, 250, 13, 180, 77, 299],
})

CASES.append({
    "name": "gemma2",
    "arch": "gemma2",
    "seed": 3205,
    "note": "Gemma 2: embeddings x sqrt(n_embd), post-attention and post-FFN norms, GELU-tanh, "
            "attention soft-cap 1.5 and final soft-cap 10 (small, so that both bite), sliding window 4 "
            "on even layers (the default pattern 2), one RoPE base, GQA 4:2, head dim 64 with "
            "n_head*head_dim (256) != n_embd (128), tied output",
    "hp": {"d": 128, "n_layer": 4, "n_head": 4, "n_kv": 2, "head_dim": 64, "ff": 384, "vocab": 300,
           "ctx": 8192, "theta": 10000.0, "eps": 1e-6, "post_norms": True, "tied": True,
           "embd_std": 0.25, "window": 4, "attn_softcap": 1.5, "final_softcap": 10.0},
    "tokenizer": ("spm", ["<pad>", "<eos>", "<bos>", "<unk>"]),
    "prompt": [2, 120, 31, 77, 199, 14, 260, 150, 42, 291, 88, 233],
})

CASES.append({
    "name": "qwen3moe",
    "arch": "qwen3moe",
    "seed": 3901,
    "note": "Qwen3-MoE (30B-A3B's structure): Qwen3's attention (NEOX RoPE, q/k norms, head dim 64 with "
            "n_head*head_dim (256) != n_embd (128)), every FFN 8 experts of width 64, top 3 with "
            "normalised weights, no shared expert, GQA 4:2, untied output",
    "hp": {"d": 128, "n_layer": 3, "n_head": 4, "n_kv": 2, "head_dim": 64, "ff": 192, "vocab": 320,
           "ctx": 40960, "theta": 1000000.0, "eps": 1e-6, "qk_norm": True, "tied": False,
           "experts": 8, "experts_used": 3, "ff_exp": 64},
    "tokenizer": ("bpe", ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "qwen2"),
    "prompt": [318, 52, 141, 280, 44, 262, 17, 310, 120, 36, 290, 66],
})

BUILDERS = {
    "qwen2": (dense_llama_like, qwen_metadata),
    "qwen3": (dense_llama_like, qwen_metadata),
    "qwen3moe": (dense_llama_like, qwen3moe_metadata),
    "gemma3": (dense_llama_like, gemma_metadata),
    "gemma2": (dense_llama_like, gemma_metadata),
    "phi3": (phi3_tensors, phi3_metadata),
    "smollm3": (dense_llama_like, smollm3_metadata),
    "granite": (dense_llama_like, granite_metadata),
}


def add_tokenizer(w, spec, vocab):
    kind = spec[0]
    if kind == "bpe":
        t = bpe_vocab(vocab, spec[1], spec[2])
        w.add_tokenizer_model(t["model"])
        w.add_tokenizer_pre(t["pre"])
        w.add_token_list(t["tokens"])
        w.add_token_types(t["types"])
        w.add_token_merges(t["merges"])
        first = vocab - len(spec[1])
        w.add_eos_token_id(first + len(spec[1]) - 1)
        w.add_pad_token_id(first)
        w.add_add_bos_token(False)
    else:
        t = spm_vocab(vocab, spec[1])
        w.add_tokenizer_model(t["model"])
        w.add_token_list(t["tokens"])
        w.add_token_types(t["types"])
        w.add_token_scores(t["scores"])
        ids = spec[2] if len(spec) > 2 else {"pad": 0, "eos": 1, "bos": 2, "unk": 3}
        w.add_pad_token_id(ids["pad"])
        w.add_eos_token_id(ids["eos"])
        w.add_bos_token_id(ids["bos"])
        w.add_unk_token_id(ids["unk"])
        w.add_add_bos_token(True)


def write_case(case, out_dir):
    """Writes NAME-f32.gguf, NAME-q8_0.gguf and NAME-q4_0.gguf; returns their paths."""
    hp = case["hp"]
    build_tensors, metadata = BUILDERS[case["arch"]]
    b = Builder(case["seed"])
    build_tensors(b, hp)
    paths = []
    for tname, qtype in [("f32", T.F32)] + list(QUANT_TYPES.items()):
        path = os.path.join(out_dir, f"{case['name']}-{tname}.gguf")
        w = gguf.GGUFWriter(path, case["arch"], use_temp_file=False)
        w.add_name(f"{case['name']} random weights (webgpu-llama scripts/families.py)")
        w.add_file_type(int({"f32": 0, "q8_0": 7, "q4_0": 2}[tname]))
        metadata(w, case["arch"], hp)
        add_tokenizer(w, case["tokenizer"], hp["vocab"])
        for name, arr, is_matrix in b.tensors:
            # The MoE router stays F32, as llama.cpp's quantizer leaves it.
            if qtype != T.F32 and is_matrix and arr.shape[-1] % 32 == 0 and "ffn_gate_inp" not in name:
                w.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
            else:
                w.add_tensor(name, arr)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        paths.append(path)
    return paths


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".families")
    os.makedirs(out_dir, exist_ok=True)
    for case in CASES:
        for p in write_case(case, out_dir):
            print(p)


if __name__ == "__main__":
    main()
