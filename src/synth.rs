//! Synthetic GGUFs: real models' shapes with random weights, for tests on odd shapes and for
//! benchmarks on GPU-sized models that cannot be downloaded here. Quantisation is this crate's own
//! ([`crate::ggml::quantize`], ggml's block layouts). Each file carries a minimal SentencePiece-style
//! tokenizer ([`tokenizer`]) so that llama.cpp loads the same file for side-by-side benchmarks.

use crate::error::{Error, Result};
use crate::family::Family;
use crate::ggml::{quantize, GgmlType};
use crate::gguf::{GgufWriter, Value};

/// The hyperparameters of a synthetic model.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Width.
    pub d: u32,
    /// Blocks.
    pub n_layers: u32,
    /// Query heads.
    pub n_heads: u32,
    /// KV heads.
    pub n_kv_heads: u32,
    /// Head dim (`<arch>.attention.key_length` and `value_length`; `None` = d / n_heads, key not written).
    pub head_dim: Option<u32>,
    /// RoPE dims (`<arch>.rope.dimension_count`; `None` = not written).
    pub n_rot: Option<u32>,
    /// FFN width (per expert for MoE).
    pub ff: u32,
    /// Vocabulary: the token embedding's rows and the [`tokenizer`]'s tokens.
    pub vocab: u32,
    /// Experts (0 = dense) and experts used per token.
    pub experts: u32,
    /// See `experts`.
    pub topk: u32,
    /// No `output.weight`: the embedding is the output head.
    pub tied: bool,
    /// Write a Llama-3 style `rope_freqs.weight`.
    pub rope_freqs: bool,
    /// Linear RoPE scaling factor (`None` = not written).
    pub rope_scale: Option<f32>,
    /// RoPE base.
    pub theta: f32,
    /// `<arch>.context_length`.
    pub ctx: u32,
    /// RMSNorm epsilon (`<arch>.attention.layer_norm_rms_epsilon`).
    pub eps: f32,
    /// Sliding-window length (`<arch>.attention.sliding_window`; 0 = not written).
    pub sliding_window: u32,
    /// `<arch>.attention.sliding_window_pattern` as a period n (layer l local unless
    /// l % n == n - 1; `None` = not written: llama.cpp's default, 6 for Gemma 3, 2 for Gemma 2).
    pub swa_pattern: Option<u32>,
    /// RoPE base of the sliding-window layers (`<arch>.rope.freq_base_swa`; `None` = not written).
    pub theta_swa: Option<f32>,
    /// Attention-score soft-cap (`<arch>.attn_logit_softcapping`; `None` = not written).
    pub attn_softcap: Option<f32>,
    /// Final-logit soft-cap (`<arch>.final_logit_softcapping`; `None` = not written).
    pub final_softcap: Option<f32>,
    /// The GGUF architecture: its metadata prefix and the tensors it adds (Qwen2's q/k/v
    /// biases, Qwen3's and Gemma 3's q/k norms, Gemma's post-attention and post-FFN norms,
    /// Phi-3's fused q/k/v and gate/up matrices and LongRoPE tables). Llama, Qwen2, Qwen3,
    /// Phi-3, Gemma 2 and Gemma 3 only (the dense block of each; MoE on llama only).
    pub family: Family,
}

impl Shape {
    /// A dense model with the common defaults (untied, theta 10000, eps 1e-5, ctx 2048, no
    /// sliding window or soft-cap).
    pub fn dense(d: u32, n_layers: u32, n_heads: u32, n_kv_heads: u32, ff: u32, vocab: u32) -> Shape {
        Shape {
            d,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim: None,
            n_rot: None,
            ff,
            vocab,
            experts: 0,
            topk: 0,
            tied: false,
            rope_freqs: false,
            rope_scale: None,
            theta: 10000.0,
            ctx: 2048,
            eps: 1e-5,
            sliding_window: 0,
            swa_pattern: None,
            theta_swa: None,
            attn_softcap: None,
            final_softcap: None,
            family: Family::Llama,
        }
    }

    /// Llama-3.2-1B: d 2048, 16 layers, 32/8 heads, ff 8192, vocab 128256, tied output, theta 500000.
    pub fn llama32_1b() -> Shape {
        Shape { tied: true, theta: 500000.0, ctx: 131072, ..Shape::dense(2048, 16, 32, 8, 8192, 128256) }
    }

    /// Llama-3-8B: d 4096, 32 layers, 32/8 heads, ff 14336, vocab 128256, theta 500000.
    pub fn llama3_8b() -> Shape {
        Shape { theta: 500000.0, ctx: 8192, ..Shape::dense(4096, 32, 32, 8, 14336, 128256) }
    }

    /// TinyLlama-1.1B: d 2048, 22 layers, 32/4 heads, ff 5632, vocab 32000.
    pub fn tinyllama() -> Shape {
        Shape::dense(2048, 22, 32, 4, 5632, 32000)
    }

    /// A Mixtral-style MoE of about 1.3B parameters: d 1024, 16 layers, 16/4 heads, 8 experts of
    /// ff 2816, top-2, vocab 32000.
    pub fn moe_1b() -> Shape {
        Shape { experts: 8, topk: 2, ..Shape::dense(1024, 16, 16, 4, 2816, 32000) }
    }

    /// SmolLM2-135M: d 576, 30 layers, 9/3 heads, ff 1536, vocab 49152, tied output, theta 100000.
    pub fn smollm2_135m() -> Shape {
        Shape { tied: true, theta: 100000.0, ctx: 8192, ..Shape::dense(576, 30, 9, 3, 1536, 49152) }
    }

    /// Qwen2.5-0.5B: d 896, 24 layers, 14/2 heads, ff 4864, vocab 151936, q/k/v biases, tied
    /// output, theta 1e6, eps 1e-6.
    pub fn qwen25_05b() -> Shape {
        Shape { family: Family::Qwen2, tied: true, theta: 1e6, eps: 1e-6, ctx: 32768, ..Shape::dense(896, 24, 14, 2, 4864, 151936) }
    }

    /// Qwen3-0.6B: d 1024, 28 layers, 16/8 heads of 128 (q width 2048), ff 3072, vocab 151936,
    /// q/k norms, tied output, theta 1e6, eps 1e-6.
    pub fn qwen3_06b() -> Shape {
        Shape { family: Family::Qwen3, head_dim: Some(128), tied: true, theta: 1e6, eps: 1e-6, ctx: 40960, ..Shape::dense(1024, 28, 16, 8, 3072, 151936) }
    }

    /// Qwen3-4B: d 2560, 36 layers, 32/8 heads of 128 (q width 4096), ff 9728, vocab 151936,
    /// q/k norms, tied output, theta 1e6, eps 1e-6.
    pub fn qwen3_4b() -> Shape {
        Shape { family: Family::Qwen3, head_dim: Some(128), tied: true, theta: 1e6, eps: 1e-6, ctx: 40960, ..Shape::dense(2560, 36, 32, 8, 9728, 151936) }
    }

    /// Phi-3.5-mini: d 3072, 32 layers, 32/32 heads of 96, ff 8192, vocab 32064, fused q/k/v and
    /// gate/up, LongRoPE (original context 4096), theta 10000.
    pub fn phi35_mini() -> Shape {
        Shape { family: Family::Phi3, ctx: 131072, ..Shape::dense(3072, 32, 32, 32, 8192, 32064) }
    }

    /// Gemma-3-1B (google/gemma-3-1b-pt's config.json, as llama.cpp's converter writes it): d 1152,
    /// 26 layers, 4/1 heads of 256 (q width 1024), ff 6912, vocab 262144, tied output, q/k norms,
    /// post-attention and post-FFN norms, eps 1e-6, sliding window 512 on 5 of every 6 layers
    /// (llama.cpp's default pattern, no key) with RoPE base 10000 there and 1e6 on the global
    /// layers, context 32768.
    pub fn gemma3_1b() -> Shape {
        Shape {
            family: Family::Gemma3,
            head_dim: Some(256),
            tied: true,
            theta: 1e6,
            theta_swa: Some(10000.0),
            sliding_window: 512,
            eps: 1e-6,
            ctx: 32768,
            ..Shape::dense(1152, 26, 4, 1, 6912, 262144)
        }
    }

    /// Gemma-2-2B (google/gemma-2-2b's config.json, as llama.cpp's converter writes it): d 2304,
    /// 26 layers, 8/4 heads of 256 (q width 2048), ff 9216, vocab 256000, tied output, post
    /// norms, no q/k norms, eps 1e-6, attention soft-cap 50, final soft-cap 30, sliding window
    /// 4096 on every other layer (llama.cpp's default pattern, no key), RoPE base 10000 on all
    /// layers, context 8192.
    pub fn gemma2_2b() -> Shape {
        Shape {
            family: Family::Gemma2,
            head_dim: Some(256),
            tied: true,
            sliding_window: 4096,
            attn_softcap: Some(50.0),
            final_softcap: Some(30.0),
            eps: 1e-6,
            ctx: 8192,
            ..Shape::dense(2304, 26, 8, 4, 9216, 256000)
        }
    }

    /// Every name [`Shape::named`] knows, in the order help texts list them.
    pub const NAMES: [&'static str; 11] = [
        "llama-3.2-1b",
        "llama-3-8b",
        "tinyllama-1.1b",
        "moe-8x-1b",
        "smollm2-135m",
        "qwen2.5-0.5b",
        "qwen3-0.6b",
        "qwen3-4b",
        "phi-3.5-mini",
        "gemma-3-1b",
        "gemma-2-2b",
    ];

    /// A named shape, one of [`Shape::NAMES`].
    pub fn named(name: &str) -> Option<Shape> {
        match name {
            "qwen2.5-0.5b" => Some(Shape::qwen25_05b()),
            "qwen3-0.6b" => Some(Shape::qwen3_06b()),
            "qwen3-4b" => Some(Shape::qwen3_4b()),
            "phi-3.5-mini" => Some(Shape::phi35_mini()),
            "gemma-3-1b" => Some(Shape::gemma3_1b()),
            "gemma-2-2b" => Some(Shape::gemma2_2b()),
            "smollm2-135m" => Some(Shape::smollm2_135m()),
            "llama-3.2-1b" => Some(Shape::llama32_1b()),
            "llama-3-8b" => Some(Shape::llama3_8b()),
            "tinyllama-1.1b" => Some(Shape::tinyllama()),
            "moe-8x-1b" => Some(Shape::moe_1b()),
            _ => None,
        }
    }

    fn hd(&self) -> u32 {
        self.head_dim.unwrap_or(self.d / self.n_heads)
    }
}

/// How the weight matrices are stored (norms stay F32, as llama.cpp's quantiser leaves them). A
/// matrix whose rows do not fill whole blocks of its type takes llama.cpp's fallback type
/// ([`Scheme::fitted`]): Gemma-3-1B's width 1152 and Qwen2.5-0.5B's 896 are not multiples of 256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Every matrix in one type.
    All(GgmlType),
    /// llama.cpp's Q4_K_M mix, simplified: Q6_K for the output head, attn_v and ffn_down, Q4_K
    /// for the other matrices.
    Q4KM,
}

impl Scheme {
    /// `F16`, `Q8_0`, `Q4_K_M`, or any GGML type name.
    pub fn parse(s: &str) -> Option<Scheme> {
        if s.eq_ignore_ascii_case("q4_k_m") {
            return Some(Scheme::Q4KM);
        }
        GgmlType::from_name(s).map(Scheme::All)
    }

    /// `general.file_type`: llama.cpp's `llama_ftype` for the scheme (`include/llama.h`; a single
    /// K-quant type as its `_S` mix), which its loader prints as the model's type instead of a
    /// guess from the tensors.
    pub fn file_type(self) -> u32 {
        match self {
            Scheme::Q4KM => 15,
            Scheme::All(t) => match t {
                GgmlType::F32 => 0,
                GgmlType::F16 => 1,
                GgmlType::Q4_0 => 2,
                GgmlType::Q4_1 => 3,
                GgmlType::Q8_0 => 7,
                GgmlType::Q5_0 => 8,
                GgmlType::Q5_1 => 9,
                GgmlType::Q2_K => 10,
                GgmlType::Q3_K => 11,
                GgmlType::Q4_K => 14,
                GgmlType::Q5_K => 16,
                GgmlType::Q6_K => 18,
                GgmlType::BF16 => 32,
            },
        }
    }

    fn type_for(self, name: &str) -> GgmlType {
        match self {
            Scheme::All(t) => t,
            Scheme::Q4KM if name == "output.weight" || name.contains("attn_v") || name.contains("ffn_down") => GgmlType::Q6_K,
            Scheme::Q4KM => GgmlType::Q4_K,
        }
    }

    /// `ty` for a tensor whose rows hold `cols` values: `ty` itself when they fill whole blocks,
    /// else llama.cpp's fallback (`tensor_type_fallback` in `src/llama-quant.cpp`: Q4_K -> Q5_0,
    /// Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K and Q3_K -> Q4_0), and F16 where that does not fit either
    /// (ggml needs whole blocks in a row).
    pub fn fitted(ty: GgmlType, cols: u64) -> GgmlType {
        let fits = |t: GgmlType| cols % t.block_size() == 0;
        if fits(ty) {
            return ty;
        }
        let fallback = match ty {
            GgmlType::Q4_K => GgmlType::Q5_0,
            GgmlType::Q5_K => GgmlType::Q5_1,
            GgmlType::Q6_K => GgmlType::Q8_0,
            GgmlType::Q2_K | GgmlType::Q3_K => GgmlType::Q4_0,
            t => t,
        };
        if fits(fallback) {
            fallback
        } else {
            GgmlType::F16
        }
    }
}

/// xorshift64*: deterministic, dependency-free noise for weights and test inputs (not for
/// anything secret). The state must not be 0.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1), in steps of 2^-23.
    pub fn uniform(&mut self) -> f32 {
        (self.bits() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// `n` values of [`Rng::uniform`].
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform()).collect()
    }
}

/// Builds a synthetic model: uniform weights scaled by 1/sqrt(fan-in), norms near 1, and the
/// [`tokenizer`] of `shape.vocab` tokens.
///
/// # Errors
/// [`Error::Input`] when a tensor's element count is not a multiple of its type's block size
/// (e.g. a Q4_K matrix of fewer than 256 elements).
pub fn model(shape: &Shape, scheme: Scheme, seed: u64) -> Result<GgufWriter> {
    let s = shape;
    let (d, hd) = (s.d as u64, s.hd() as u64);
    let (q, kv, ff, e) = (s.n_heads as u64 * hd, s.n_kv_heads as u64 * hd, s.ff as u64, s.experts as u64);
    let arch = s.family.name();
    let key = |k: &str| format!("{arch}.{k}");
    let mut w = GgufWriter::new(3);
    w.kv("general.architecture", Value::Str(arch.into()))
        .kv("general.name", Value::Str("synthetic".into()))
        .kv("general.file_type", Value::U32(scheme.file_type()))
        .kv(&key("embedding_length"), Value::U32(s.d))
        .kv(&key("block_count"), Value::U32(s.n_layers))
        .kv(&key("feed_forward_length"), Value::U32(s.ff))
        .kv(&key("attention.head_count"), Value::U32(s.n_heads))
        .kv(&key("attention.head_count_kv"), Value::U32(s.n_kv_heads))
        .kv(&key("attention.layer_norm_rms_epsilon"), Value::F32(s.eps))
        .kv(&key("rope.freq_base"), Value::F32(s.theta))
        .kv(&key("context_length"), Value::U32(s.ctx))
        .kv(&key("vocab_size"), Value::U32(s.vocab));
    if let Some(h) = s.head_dim {
        w.kv(&key("attention.key_length"), Value::U32(h)).kv(&key("attention.value_length"), Value::U32(h));
    }
    if let Some(r) = s.n_rot {
        w.kv(&key("rope.dimension_count"), Value::U32(r));
    }
    if let Some(f) = s.rope_scale {
        w.kv(&key("rope.scaling.type"), Value::Str("linear".into())).kv(&key("rope.scaling.factor"), Value::F32(f));
    }
    if s.sliding_window > 0 {
        w.kv(&key("attention.sliding_window"), Value::U32(s.sliding_window));
    }
    for (k, v) in [("attention.sliding_window_pattern", s.swa_pattern.map(Value::U32)), ("rope.freq_base_swa", s.theta_swa.map(Value::F32))] {
        if let Some(v) = v {
            w.kv(&key(k), v);
        }
    }
    for (k, v) in [("attn_logit_softcapping", s.attn_softcap), ("final_logit_softcapping", s.final_softcap)] {
        if let Some(v) = v {
            w.kv(&key(k), Value::F32(v));
        }
    }
    tokenizer(&mut w, s.vocab);
    if s.experts > 0 {
        w.kv(&key("expert_count"), Value::U32(s.experts)).kv(&key("expert_used_count"), Value::U32(s.topk));
    }
    let phi3 = s.family == Family::Phi3;
    let gemma = matches!(s.family, Family::Gemma2 | Family::Gemma3);
    if phi3 {
        // Phi-3.5-mini's LongRoPE: trained on 4096 positions, magnitude sqrt(1 + ln(32) / ln(4096)).
        let attn_factor = (1.0 + (s.ctx as f32 / 4096.0).ln() / 4096f32.ln()).sqrt();
        w.kv(&key("rope.scaling.original_context_length"), Value::U32(4096)).kv(&key("rope.scaling.attn_factor"), Value::F32(attn_factor));
    }
    // Each tensor draws from its own streams (seeded by the model's seed and the tensor's index).
    let mut index = 0u64;
    let mut tensor = |w: &mut GgufWriter, name: &str, dims: &[u64], ty: GgmlType, scale: f32, offset: f32| -> Result<()> {
        index += 1;
        let ty = Scheme::fitted(ty, dims[0]);
        w.tensor(name, dims, ty, random_tensor(ty, dims.iter().product(), scale, offset, mix(seed) ^ index)?);
        Ok(())
    };
    let mat = |cols: u64| 1.0 / (cols as f32).sqrt();
    tensor(&mut w, "token_embd.weight", &[d, s.vocab as u64], scheme.type_for("token_embd.weight"), 1.0, 0.0)?;
    tensor(&mut w, "output_norm.weight", &[d], GgmlType::F32, 0.2, 1.0)?;
    if !s.tied {
        tensor(&mut w, "output.weight", &[d, s.vocab as u64], scheme.type_for("output.weight"), mat(d), 0.0)?;
    }
    if phi3 {
        let half = s.n_rot.unwrap_or(s.hd()) as u64 / 2;
        for (name, top) in [("rope_factors_short.weight", 2.0f32), ("rope_factors_long.weight", 40.0)] {
            let f: Vec<f32> = (0..half).map(|j| 1.0 + (top - 1.0) * j as f32 / half.max(1) as f32).collect();
            w.tensor(name, &[half], GgmlType::F32, bytemuck::cast_slice(&f).to_vec());
        }
    }
    if s.rope_freqs {
        let n_rot = s.n_rot.unwrap_or(s.hd()) as u64;
        // Llama-3's factors run from 1 (high frequencies) up to 8 (low ones).
        let f: Vec<f32> = (0..n_rot / 2).map(|j| 1.0 + 7.0 * j as f32 / (n_rot / 2).max(1) as f32).collect();
        w.tensor("rope_freqs.weight", &[n_rot / 2], GgmlType::F32, bytemuck::cast_slice(&f).to_vec());
    }
    for l in 0..s.n_layers {
        let b = |x: &str| format!("blk.{l}.{x}.weight");
        let t = |x: &str| scheme.type_for(&b(x));
        tensor(&mut w, &b("attn_norm"), &[d], GgmlType::F32, 0.2, 1.0)?;
        if phi3 {
            tensor(&mut w, &b("attn_qkv"), &[d, q + 2 * kv], t("attn_qkv"), mat(d), 0.0)?;
        } else {
            tensor(&mut w, &b("attn_q"), &[d, q], t("attn_q"), mat(d), 0.0)?;
            tensor(&mut w, &b("attn_k"), &[d, kv], t("attn_k"), mat(d), 0.0)?;
            tensor(&mut w, &b("attn_v"), &[d, kv], t("attn_v"), mat(d), 0.0)?;
        }
        if s.family == Family::Qwen2 {
            for (x, n) in [("attn_q", q), ("attn_k", kv), ("attn_v", kv)] {
                tensor(&mut w, &format!("blk.{l}.{x}.bias"), &[n], GgmlType::F32, 0.1, 0.0)?;
            }
        }
        if matches!(s.family, Family::Qwen3 | Family::Gemma3) {
            tensor(&mut w, &b("attn_q_norm"), &[hd], GgmlType::F32, 0.2, 1.0)?;
            tensor(&mut w, &b("attn_k_norm"), &[hd], GgmlType::F32, 0.2, 1.0)?;
        }
        tensor(&mut w, &b("attn_output"), &[q, d], t("attn_output"), mat(q), 0.0)?;
        if gemma {
            tensor(&mut w, &b("post_attention_norm"), &[d], GgmlType::F32, 0.2, 1.0)?;
        }
        tensor(&mut w, &b("ffn_norm"), &[d], GgmlType::F32, 0.2, 1.0)?;
        if s.experts > 0 {
            tensor(&mut w, &b("ffn_gate_inp"), &[d, e], GgmlType::F32, mat(d), 0.0)?;
            tensor(&mut w, &b("ffn_gate_exps"), &[d, ff, e], t("ffn_gate_exps"), mat(d), 0.0)?;
            tensor(&mut w, &b("ffn_up_exps"), &[d, ff, e], t("ffn_up_exps"), mat(d), 0.0)?;
            tensor(&mut w, &b("ffn_down_exps"), &[ff, d, e], t("ffn_down_exps"), mat(ff), 0.0)?;
        } else if phi3 {
            tensor(&mut w, &b("ffn_up"), &[d, 2 * ff], t("ffn_up"), mat(d), 0.0)?;
            tensor(&mut w, &b("ffn_down"), &[ff, d], t("ffn_down"), mat(ff), 0.0)?;
        } else {
            tensor(&mut w, &b("ffn_gate"), &[d, ff], t("ffn_gate"), mat(d), 0.0)?;
            tensor(&mut w, &b("ffn_up"), &[d, ff], t("ffn_up"), mat(d), 0.0)?;
            tensor(&mut w, &b("ffn_down"), &[ff, d], t("ffn_down"), mat(ff), 0.0)?;
        }
        if gemma {
            tensor(&mut w, &b("post_ffw_norm"), &[d], GgmlType::F32, 0.2, 1.0)?;
        }
    }
    Ok(w)
}

/// Elements of one independently seeded piece of a tensor: a multiple of every GGML block size
/// (1, 32, 256), so each piece quantises on its own.
const PIECE: u64 = 1 << 18;

/// splitmix64's finaliser: distinct, well-spread seeds from consecutive integers.
fn mix(x: u64) -> u64 {
    let x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `n` values `offset + scale * u` (u from [`Rng::uniform`]) quantised to `ty`. Piece `i` of
/// [`PIECE`] elements draws from its own stream, seeded by `seed` and `i`, so the pieces are made
/// on every core while the bytes stay the same whatever their number (a multi-billion-parameter
/// shape is otherwise bound by one thread's random numbers).
///
/// # Errors
/// [`Error::Input`] when `n` is not a multiple of the type's block size.
fn random_tensor(ty: GgmlType, n: u64, scale: f32, offset: f32, seed: u64) -> Result<Vec<u8>> {
    let bytes =
        ty.tensor_bytes(n).ok_or_else(|| Error::Input(format!("{n} values of {} is not a multiple of its block size {}", ty.name(), ty.block_size())))?;
    let pieces = n.div_ceil(PIECE);
    let piece = |i: u64| {
        let mut rng = Rng(mix(seed ^ mix(i)) | 1);
        let vals: Vec<f32> = (i * PIECE..n.min((i + 1) * PIECE)).map(|_| offset + scale * rng.uniform()).collect();
        quantize(ty, &vals)
    };
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get() as u64).min(pieces);
    let parts: Vec<Result<Vec<u8>>> = if threads <= 1 {
        (0..pieces).map(piece).collect()
    } else {
        // Thread t makes pieces t, t + threads, ...; they are put back in order.
        let mut done: Vec<Vec<(u64, Result<Vec<u8>>)>> = Vec::new();
        std::thread::scope(|s| {
            let piece = &piece;
            let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || (t..pieces).step_by(threads as usize).map(|i| (i, piece(i))).collect())).collect();
            done = handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect();
        });
        let mut all: Vec<(u64, Result<Vec<u8>>)> = done.into_iter().flatten().collect();
        all.sort_by_key(|(i, _)| *i);
        all.into_iter().map(|(_, p)| p).collect()
    };
    let mut out = Vec::with_capacity(bytes as usize);
    for p in parts {
        out.extend_from_slice(&p?);
    }
    Ok(out)
}

/// Writes a minimal SentencePiece-style tokenizer of exactly `vocab` tokens, the keys llama.cpp's
/// `llama_vocab::impl::load` reads for `tokenizer.ggml.model = "llama"` (its SPM vocabulary; every
/// architecture loads it, and the token count must equal the embedding's rows): `<unk>` (0,
/// unknown), `<s>` (1, control, BOS), `</s>` (2, control, EOS), the 256 byte tokens `<0x00>` ..
/// `<0xFF>` (byte type: any text tokenises), then word pieces `▁a`, `▁b`, ... `▁aa` ... (normal,
/// scores falling with the id as SentencePiece ranks them). A vocabulary under 259 tokens keeps
/// the first `vocab` of these (llama.cpp then warns of the missing newline byte, and ignores
/// special ids past the end, which are not written).
pub fn tokenizer(w: &mut GgufWriter, vocab: u32) {
    const SPECIALS: [(&str, i32); 3] = [("<unk>", 2), ("<s>", 3), ("</s>", 3)];
    let n = vocab as usize;
    let mut tokens = Vec::with_capacity(n);
    let mut types = Vec::with_capacity(n);
    let mut scores = Vec::with_capacity(n);
    for (name, ty) in SPECIALS {
        tokens.push(Value::Str(name.into()));
        types.push(Value::I32(ty));
    }
    for b in 0..=255u8 {
        tokens.push(Value::Str(format!("<0x{b:02X}>")));
        types.push(Value::I32(6));
    }
    tokens.truncate(n);
    types.truncate(n);
    scores.resize(tokens.len(), Value::F32(0.0));
    for rank in 0..n - tokens.len() {
        tokens.push(Value::Str(format!("\u{2581}{}", letters(rank))));
        types.push(Value::I32(1));
        scores.push(Value::F32(-(rank as f32)));
    }
    w.kv("tokenizer.ggml.model", Value::Str("llama".into()))
        .kv("tokenizer.ggml.tokens", Value::Array(tokens))
        .kv("tokenizer.ggml.scores", Value::Array(scores))
        .kv("tokenizer.ggml.token_type", Value::Array(types));
    for (key, id) in [("tokenizer.ggml.unknown_token_id", 0), ("tokenizer.ggml.bos_token_id", 1), ("tokenizer.ggml.eos_token_id", 2)] {
        if id < vocab {
            w.kv(key, Value::U32(id));
        }
    }
}

/// `i` in bijective base 26 over `a..z` (`a`, ..., `z`, `aa`, `ab`, ...): distinct pieces for
/// distinct `i`.
fn letters(mut i: usize) -> String {
    let mut out = Vec::new();
    loop {
        out.push(b'a' + (i % 26) as u8);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}
