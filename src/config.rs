//! Model hyperparameters from `<architecture>.*` GGUF metadata (`llama.*`, `qwen3.*` ...: the
//! families of [`crate::family`]), validated, and the tensor shapes they imply.
//!
//! Defaults follow the seed module (and llama.cpp's `llm_load_hparams`): KV heads = heads, RoPE
//! base 10000, vocab from `llama.vocab_size`, else the tokenizer's token count, else the token
//! embedding's largest dim. Every tensor's dims are checked against the ones the config implies, in
//! ggml's `ne` order (innermost first, as llama.cpp's `create_tensor` checks them): a matrix of
//! `rows` outputs over `cols` inputs is `[cols, rows]`, so a tensor whose dims are swapped is
//! rejected even when its element count matches ([`Config::expected_tensors`]). Per-layer keys (`head_count`,
//! `head_count_kv`, `feed_forward_length`) may be arrays of one value per layer, as llama.cpp
//! reads them; their values must then be equal.

use crate::error::{Error, Result};
pub use crate::family::{Family, FamilyParams};
use crate::gguf::{meta_f32, meta_u32, Gguf};

/// The most experts and the largest top-k the `moe_select` kernel handles.
pub const MAX_EXPERTS: u32 = 256;
/// See [`MAX_EXPERTS`].
pub const MAX_TOPK: u32 = 16;
/// Default KV-cache length cap, as the seed's.
pub const DEFAULT_MAX_CTX: u32 = 2048;

/// The KV cache's element type (chosen at load: `LoadOptions::kv`, the CLI's `--kv`, the JS
/// option `kvType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvType {
    /// 32-bit floats (the default).
    #[default]
    F32,
    /// IEEE binary16, two per `u32` (WGSL's `pack2x16float` / `unpack2x16float`, so no
    /// `shader-f16` feature is needed): half the cache's bytes, keys and values rounded to 11
    /// significant bits when written (attention still computes in f32).
    F16,
}

impl KvType {
    /// Bytes per cached value: 4 or 2.
    pub fn bytes(self) -> u32 {
        match self {
            KvType::F32 => 4,
            KvType::F16 => 2,
        }
    }

    /// `"f32"` or `"f16"` (the CLI's and JS's spelling).
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
        }
    }
}

impl std::fmt::Display for KvType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KvType {
    type Err = String;

    /// `f32` or `f16`.
    fn from_str(s: &str) -> std::result::Result<KvType, String> {
        match s {
            "f32" => Ok(KvType::F32),
            "f16" => Ok(KvType::F16),
            _ => Err(format!("KV-cache type {s:?}: expected f32 or f16")),
        }
    }
}

/// A LLaMA model's hyperparameters. Field names follow the seed's `config` object.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Model width (`llama.embedding_length`).
    pub d: u32,
    /// Number of transformer blocks (`llama.block_count`).
    pub n_layers: u32,
    /// Feed-forward width: `llama.feed_forward_length`, or the per-expert width for MoE models.
    pub ff: u32,
    /// Query heads (`llama.attention.head_count`).
    pub n_heads: u32,
    /// KV heads (`llama.attention.head_count_kv`, default `n_heads`); GQA when fewer.
    pub n_kv_heads: u32,
    /// Head dim (`llama.attention.key_length`, default `d / n_heads`).
    pub head_dim: u32,
    /// Dims rotated by RoPE per head (`llama.rope.dimension_count`, default `head_dim`).
    pub n_rot: u32,
    /// KV-cache length in positions: `min(llama.context_length, 2048)` unless set at load.
    pub ctx: u32,
    /// Trained context length (`llama.context_length`).
    pub train_ctx: u32,
    /// Vocabulary size: rows of the token embedding and of the logits.
    pub vocab: u32,
    /// RMSNorm epsilon (`llama.attention.layer_norm_rms_epsilon`).
    pub eps: f32,
    /// RoPE base (`llama.rope.freq_base`, default 10000).
    pub theta: f32,
    /// Linear RoPE scaling factor (`llama.rope.scaling.factor` when the type is linear, else 1).
    pub rope_scale: f32,
    /// Experts per MoE layer (0 for dense models).
    pub experts: u32,
    /// Experts used per token (0 for dense models).
    pub topk: u32,
    /// True when `output.weight` is absent and the token embedding doubles as the output head.
    pub tied_output: bool,
    /// True when `rope_freqs.weight` (Llama-3 per-frequency divisors) is present.
    pub has_rope_freqs: bool,
    /// The KV cache's element type: [`KvType::F32`] unless set at load.
    pub kv: KvType,
    /// `general.architecture`; metadata keys are read under its name (`qwen3.block_count` ...).
    pub architecture: Family,
    /// What the family adds to llama's forward pass (all off for llama).
    pub family: FamilyParams,
}

/// A per-layer hyperparameter as llama.cpp's `get_key_or_arr` reads it: one number, or an array
/// of exactly `n_layers` numbers. This engine needs the same value in every layer, so an array
/// of unequal values is an [`Error::Config`] naming the key and the values.
fn meta_u32_per_layer(g: &Gguf, key: &str, n_layers: u32) -> Result<Option<u32>> {
    let Some(a) = g.get(key).and_then(|v| v.as_array()) else { return meta_u32(g, key) };
    if a.len() != n_layers as usize {
        return Err(Error::Config(format!("{key} is an array of {} values but there are {n_layers} layers", a.len())));
    }
    let vals = a
        .iter()
        .map(|v| v.as_u64().filter(|&x| x <= u32::MAX as u64).map(|x| x as u32))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(|| Error::Config(format!("{key} must hold non-negative integers below 2^32")))?;
    match vals.first() {
        Some(&v0) if vals.iter().all(|&v| v == v0) => Ok(Some(v0)),
        Some(_) => {
            let shown: Vec<String> = vals.iter().take(8).map(u32::to_string).collect();
            let more = if vals.len() > 8 { ", ..." } else { "" };
            Err(Error::Config(format!(
                "{key} differs between layers ([{}{more}]): models whose layers have different shapes are not supported",
                shown.join(", ")
            )))
        }
        None => Ok(None),
    }
}

fn required_u32(g: &Gguf, key: &str) -> Result<u32> {
    meta_u32(g, key)?.ok_or_else(|| Error::Config(format!("missing metadata {key}")))
}

impl Config {
    /// Reads and validates the config of a GGUF of any [`Family`] (its keys under
    /// `<architecture>.`). `ctx` overrides the KV-cache length.
    ///
    /// Errors: [`Error::UnsupportedArchitecture`] for other architectures, [`Error::Config`] for
    /// missing or inconsistent hyperparameters (including more than 256 experts or top-16),
    /// [`Error::MissingTensor`] / [`Error::TensorShape`] when a tensor disagrees with them.
    pub fn from_gguf(g: &Gguf, ctx: Option<u32>) -> Result<Config> {
        let architecture = Family::from_name(g.architecture().unwrap_or(""))?;
        let key = |k: &str| format!("{}.{k}", architecture.name());
        let d = required_u32(g, &key("embedding_length"))?;
        let n_layers = required_u32(g, &key("block_count"))?;
        let n_heads = meta_u32_per_layer(g, &key("attention.head_count"), n_layers)?
            .ok_or_else(|| Error::Config(format!("missing metadata {}", key("attention.head_count"))))?;
        let n_kv_heads = meta_u32_per_layer(g, &key("attention.head_count_kv"), n_layers)?.filter(|&x| x > 0).unwrap_or(n_heads);
        let eps = meta_f32(g, &key("attention.layer_norm_rms_epsilon"))?
            .ok_or_else(|| Error::Config(format!("missing metadata {}", key("attention.layer_norm_rms_epsilon"))))?;
        let theta = meta_f32(g, &key("rope.freq_base"))?.unwrap_or(10000.0);
        let train_ctx = meta_u32(g, &key("context_length"))?.unwrap_or(DEFAULT_MAX_CTX);
        if d == 0 || n_layers == 0 || n_heads == 0 {
            return Err(Error::Config(format!("width {d}, {n_layers} layers and {n_heads} heads must all be positive")));
        }
        if d % n_heads != 0 && g.get(&key("attention.key_length")).is_none() {
            return Err(Error::Config(format!("{n_heads} heads do not divide the width {d}")));
        }
        if n_heads % n_kv_heads != 0 {
            return Err(Error::Config(format!("{n_kv_heads} KV heads do not divide {n_heads} heads")));
        }
        let head_dim = meta_u32(g, &key("attention.key_length"))?.unwrap_or(d / n_heads);
        if let Some(v) = meta_u32(g, &key("attention.value_length"))? {
            if v != head_dim {
                return Err(Error::Config(format!("value_length {v} differs from key_length {head_dim}")));
            }
        }
        let n_rot = meta_u32(g, &key("rope.dimension_count"))?.unwrap_or(head_dim);
        if head_dim == 0 || head_dim % 2 != 0 || n_rot % 2 != 0 || n_rot > head_dim {
            return Err(Error::Config(format!("head dim {head_dim} must be even and rope dims {n_rot} even and at most it")));
        }
        check_widths(n_heads, n_kv_heads, head_dim)?;
        if eps.is_nan() || eps <= 0.0 || theta.is_nan() || theta <= 0.0 {
            return Err(Error::Config(format!("eps {eps} and rope base {theta} must be positive")));
        }
        let rope_scale = match g.get(&key("rope.scaling.type")).and_then(|v| v.as_str()) {
            // LongRoPE's tables are read by the family; llama.cpp still applies a factor key.
            Some("longrope") if architecture == Family::Phi3 => meta_f32(g, &key("rope.scaling.factor"))?.filter(|&f| f > 0.0).unwrap_or(1.0),
            Some("linear") | None => meta_f32(g, &key("rope.scaling.factor"))?.filter(|&f| f > 0.0).unwrap_or(1.0),
            Some("none") => 1.0,
            Some(other) => return Err(Error::Config(format!("rope scaling type {other:?} is not supported (linear, or longrope for phi3)"))),
        };

        let embd = g.tensor("token_embd.weight").ok_or_else(|| Error::MissingTensor("token_embd.weight".into()))?;
        let vocab = match meta_u32(g, &key("vocab_size"))? {
            Some(v) => v,
            None => match g.get("tokenizer.ggml.tokens").and_then(|v| v.as_array()) {
                Some(a) if !a.is_empty() => a.len() as u32,
                _ => embd.dims.iter().copied().max().unwrap_or(0).min(u32::MAX as u64) as u32,
            },
        };
        if vocab == 0 {
            return Err(Error::Config("vocabulary size is 0".into()));
        }

        // Llama: MoE when block 0 has a router (Mixtral); Qwen3-MoE: always.
        let moe = match architecture {
            Family::Llama => g.tensor("blk.0.ffn_gate_inp.weight").is_some(),
            Family::Qwen3Moe => true,
            _ => false,
        };
        let (experts, topk, ff) = if moe {
            let e = match meta_u32(g, &key("expert_count"))? {
                Some(e) if e > 0 => e,
                _ => (g.tensor("blk.0.ffn_gate_inp.weight").map_or(0, |t| t.n_elements) / d as u64) as u32,
            };
            let k = meta_u32(g, &key("expert_used_count"))?.filter(|&k| k > 0).unwrap_or(2);
            if e > MAX_EXPERTS || k > MAX_TOPK {
                return Err(Error::Config("at most 256 experts, top-16".into()));
            }
            if e == 0 || k > e {
                return Err(Error::Config(format!("top-{k} of {e} experts is not a valid MoE")));
            }
            let ff = match meta_u32(g, &key("expert_feed_forward_length"))? {
                Some(f) if f > 0 => f,
                _ => {
                    let name = "blk.0.ffn_gate_exps.weight";
                    let n = g.tensor(name).ok_or_else(|| Error::MissingTensor(format!("{name} (the experts of a MoE model)")))?.n_elements;
                    (n / (e as u64 * d as u64)) as u32
                }
            };
            (e, k, ff)
        } else {
            let ff = meta_u32_per_layer(g, &key("feed_forward_length"), n_layers)?;
            (0, 0, ff.ok_or_else(|| Error::Config(format!("missing metadata {}", key("feed_forward_length"))))?)
        };
        if ff == 0 {
            return Err(Error::Config("feed-forward length is 0".into()));
        }
        // The gate|up activations hold 2 * top-k * ff floats a token (2 * ff dense), as a u32.
        if 2 * topk.max(1) as u64 * ff as u64 > u32::MAX as u64 {
            return Err(Error::Config(format!("feed-forward length {ff} (x {} experts used, x 2 for gate and up) exceeds 2^32", topk.max(1))));
        }
        let ctx = ctx.unwrap_or_else(|| train_ctx.min(DEFAULT_MAX_CTX));
        if ctx == 0 {
            return Err(Error::Config("context length must be at least 1".into()));
        }
        let mut cfg = Config {
            d,
            n_layers,
            ff,
            n_heads,
            n_kv_heads,
            head_dim,
            n_rot,
            ctx,
            train_ctx,
            vocab,
            eps,
            theta,
            rope_scale,
            experts,
            topk,
            // Gemma 2's loader reads token_embd as the output even when output.weight exists.
            tied_output: architecture == Family::Gemma2 || g.tensor("output.weight").is_none(),
            has_rope_freqs: g.tensor("rope_freqs.weight").is_some(),
            kv: KvType::F32,
            architecture,
            family: FamilyParams::default(),
        };
        let dims = crate::family::Dims {
            d: cfg.d,
            n_layers: cfg.n_layers,
            n_heads: cfg.n_heads,
            head_dim: cfg.head_dim,
            n_rot: cfg.n_rot,
            train_ctx: cfg.train_ctx,
            theta: cfg.theta,
            rope_scale: cfg.rope_scale,
        };
        cfg.family = FamilyParams::read(g, cfg.architecture, &dims)?;
        cfg.check_tensors(g)?;
        Ok(cfg)
    }

    /// Query width `n_heads * head_dim`.
    pub fn q_dim(&self) -> u32 {
        self.n_heads * self.head_dim
    }

    /// KV width `n_kv_heads * head_dim`.
    pub fn kv_dim(&self) -> u32 {
        self.n_kv_heads * self.head_dim
    }

    /// The per-frequency RoPE divisor table the forward pass uses, if any: Llama-3's
    /// The config the sliding-window layers rotate with: their own RoPE base and linear scaling
    /// ([`FamilyParams::theta_swa`], [`FamilyParams::rope_scale_swa`]; llama.cpp's
    /// `freq_base_swa`, `freq_scale_swa`), and no frequency factors.
    pub fn swa_rope(&self) -> Config {
        Config { theta: self.family.theta_swa, rope_scale: self.family.rope_scale_swa, ..self.clone() }
    }

    /// `rope_freqs.weight`, or LongRoPE's long table when [`Config::ctx`] exceeds the original
    /// context ([`FamilyParams::rope_orig_ctx`]), else its short one (as llama.cpp picks by its
    /// context size).
    pub fn rope_factors(&self) -> Option<&'static str> {
        if self.has_rope_freqs {
            Some("rope_freqs.weight")
        } else if self.family.longrope {
            Some(if self.ctx > self.family.rope_orig_ctx { "rope_factors_long.weight" } else { "rope_factors_short.weight" })
        } else {
            None
        }
    }

    /// True for a mixture-of-experts model.
    pub fn is_moe(&self) -> bool {
        self.experts > 0
    }

    /// Every tensor the forward pass reads, with the dims the config implies in ggml's `ne` order
    /// (innermost first: a matrix of `rows` outputs over `cols` inputs is `[cols, rows]`, an
    /// expert stack `[cols, rows, experts]`, a bias or norm `[n]`), as llama.cpp's loader for the
    /// family creates them (`src/models/<family>.cpp`), the family's extras included.
    pub fn expected_tensors(&self) -> Vec<(String, Vec<u64>)> {
        let mut t: Vec<(String, Vec<u64>)> = self.global_tensors().into_iter().map(|(n, dims, _)| (n, dims)).collect();
        for l in 0..self.n_layers {
            t.extend(self.layer_tensors(l).into_iter().map(|(n, dims, _)| (n, dims)));
        }
        t
    }

    /// The tensors outside the blocks: name, dims, and what the dims are (for messages).
    fn global_tensors(&self) -> Vec<(String, Vec<u64>, &'static str)> {
        let (d, vocab) = (self.d as u64, self.vocab as u64);
        let mut t = vec![("token_embd.weight".to_string(), vec![d, vocab], "n_embd, vocab"), ("output_norm.weight".into(), vec![d], "n_embd")];
        if !self.tied_output {
            t.push(("output.weight".into(), vec![d, vocab], "n_embd, vocab"));
        }
        if self.has_rope_freqs {
            t.push(("rope_freqs.weight".into(), vec![self.n_rot as u64 / 2], "n_rot / 2"));
        }
        if self.family.longrope {
            t.push(("rope_factors_long.weight".into(), vec![self.n_rot as u64 / 2], "n_rot / 2"));
            t.push(("rope_factors_short.weight".into(), vec![self.n_rot as u64 / 2], "n_rot / 2"));
        }
        t
    }

    /// The tensors of block `l`: name, dims, and what the dims are (for messages).
    fn layer_tensors(&self, l: u32) -> Vec<(String, Vec<u64>, &'static str)> {
        let (d, q, kv, ff, e) = (self.d as u64, self.q_dim() as u64, self.kv_dim() as u64, self.ff as u64, self.experts as u64);
        let b = |s: &str| format!("blk.{l}.{s}.weight");
        let mut t = vec![(b("attn_norm"), vec![d], "n_embd")];
        if self.family.fused_qkv {
            t.push((b("attn_qkv"), vec![d, q + 2 * kv], "n_embd, (n_head + 2 n_head_kv) * head_dim"));
        } else {
            t.push((b("attn_q"), vec![d, q], "n_embd, n_head * head_dim"));
            t.push((b("attn_k"), vec![d, kv], "n_embd, n_head_kv * head_dim"));
            t.push((b("attn_v"), vec![d, kv], "n_embd, n_head_kv * head_dim"));
        }
        t.push((b("attn_output"), vec![q, d], "n_head * head_dim, n_embd"));
        t.push((b("ffn_norm"), vec![d], "n_embd"));
        let bias = |s: &str| format!("blk.{l}.{s}.bias");
        if self.family.qkv_bias {
            t.push((bias("attn_q"), vec![q], "n_head * head_dim"));
            t.push((bias("attn_k"), vec![kv], "n_head_kv * head_dim"));
            t.push((bias("attn_v"), vec![kv], "n_head_kv * head_dim"));
        }
        if self.family.qk_norm {
            t.push((b("attn_q_norm"), vec![self.head_dim as u64], "head_dim"));
            t.push((b("attn_k_norm"), vec![self.head_dim as u64], "head_dim"));
        }
        if self.family.post_norms {
            t.push((b("post_attention_norm"), vec![d], "n_embd"));
            t.push((b("post_ffw_norm"), vec![d], "n_embd"));
        }
        if self.is_moe() {
            t.push((b("ffn_gate_inp"), vec![d, e], "n_embd, n_expert"));
            t.push((b("ffn_gate_exps"), vec![d, ff, e], "n_embd, n_ff_exp, n_expert"));
            t.push((b("ffn_up_exps"), vec![d, ff, e], "n_embd, n_ff_exp, n_expert"));
            t.push((b("ffn_down_exps"), vec![ff, d, e], "n_ff_exp, n_embd, n_expert"));
        } else if self.family.fused_gate_up {
            t.push((b("ffn_up"), vec![d, 2 * ff], "n_embd, 2 n_ff"));
            t.push((b("ffn_down"), vec![ff, d], "n_ff, n_embd"));
        } else {
            t.push((b("ffn_gate"), vec![d, ff], "n_embd, n_ff"));
            t.push((b("ffn_up"), vec![d, ff], "n_embd, n_ff"));
            t.push((b("ffn_down"), vec![ff, d], "n_ff, n_embd"));
        }
        t
    }

    /// Checks every tensor the config needs against the file, block by block, stopping at the
    /// first missing or misshapen one (so a `block_count` far beyond the file's tensors fails at
    /// the first absent block, without listing them all).
    fn check_tensors(&self, g: &Gguf) -> Result<()> {
        for (name, dims, what) in self.global_tensors() {
            check_dims(g, &name, &dims, what)?;
        }
        for l in 0..self.n_layers {
            for (name, dims, what) in self.layer_tensors(l) {
                check_dims(g, &name, &dims, what)?;
            }
        }
        Ok(())
    }
}

/// Query, key/value and the fused `[q | k | v]` widths must fit the u32 the kernels index with.
fn check_widths(n_heads: u32, n_kv_heads: u32, head_dim: u32) -> Result<()> {
    let (q, kv) = (n_heads as u64 * head_dim as u64, n_kv_heads as u64 * head_dim as u64);
    if q + 2 * kv > u32::MAX as u64 {
        return Err(Error::Config(format!("{n_heads} query and {n_kv_heads} KV heads of {head_dim} dims: the q|k|v width {} exceeds 2^32", q + 2 * kv)));
    }
    Ok(())
}

/// `dims` without trailing 1s (ggml pads every tensor to 4 dims with 1s; a writer may record
/// some of them), at least one kept.
fn trimmed(dims: &[u64]) -> &[u64] {
    let n = dims.iter().rposition(|&x| x != 1).map_or(1, |i| i + 1);
    &dims[..n.min(dims.len())]
}

/// Fails unless tensor `name` is present with dims `want` (trailing 1s aside).
///
/// # Errors
/// [`Error::MissingTensor`]; [`Error::TensorShape`] naming the tensor, its dims and the expected
/// ones with their meaning (`what`), e.g. `tensor blk.0.attn_q.weight has dims [128, 64],
/// expected dims [64, 128] (n_embd, n_head * head_dim; ggml order, innermost first)`.
fn check_dims(g: &Gguf, name: &str, want: &[u64], what: &str) -> Result<()> {
    let t = g.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_string()))?;
    if trimmed(&t.dims) != trimmed(want) {
        return Err(Error::TensorShape {
            tensor: name.to_string(),
            expected: format!("dims {want:?} ({what}; ggml order, innermost first)"),
            found: format!("dims {:?}", t.dims),
        });
    }
    Ok(())
}
