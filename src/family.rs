//! Model families: the GGUF architectures this crate recognises and the hyperparameters each adds
//! to llama's, read from `<arch>.*` metadata and checked as llama.cpp's loaders check them
//! (`src/models/<family>.cpp`, the rope-type table in `src/llama-model.cpp`).
//!
//! A family is a [`Family`] value and a [`FamilyParams`] whose defaults are llama's, so the
//! forward pass (the GPU's and [`crate::reference`]'s) branches on a few flags, not on names.

use crate::error::{Error, Result};
use crate::gguf::{meta_f32, meta_u32, Gguf, Value};

/// A GGUF `general.architecture` this crate recognises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Family {
    /// `llama` (LLaMA 1-3, Mistral, SmolLM2, TinyLlama, and Mixtral's MoE).
    #[default]
    Llama,
    /// `qwen2` (Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen): NEOX RoPE, q/k/v biases.
    Qwen2,
    /// `qwen3`: NEOX RoPE, per-head RMSNorm of q and k before RoPE, free head dim.
    Qwen3,
    /// `qwen3moe` (Qwen3-30B-A3B): Qwen3's attention, every FFN a mixture of experts (no shared
    /// expert; gates = the softmax over all router logits renormalised over the top-k, which is
    /// the softmax over the selected logits that [`crate::reference::moe_select`] computes).
    Qwen3Moe,
    /// `gemma3`: embeddings scaled by sqrt(n_embd), q/k RMSNorm, post-attention and post-FFN
    /// RMSNorms, GELU-tanh gated FFN, sliding-window attention on the local layers (5 local : 1
    /// global by default) with their own RoPE base, NEOX RoPE, optional final-logit soft-cap.
    Gemma3,
    /// `phi3` (Phi-3/3.5-mini, Phi-4-mini): fused `attn_qkv` and fused gate|up `ffn_up`, NEOX
    /// RoPE (partial rotary on Phi-4-mini), LongRoPE short/long factor tables chosen by the context
    /// length, with a RoPE magnitude factor.
    Phi3,
    /// `smollm3`: llama's block with no RoPE on every 4th layer (NoPE; fixed in llama.cpp).
    Smollm3,
    /// `gemma2`: Gemma 3's block without q/k norms, attention-score and final-logit soft-caps,
    /// every other layer sliding (pattern 2, window 4096 by default), output always tied.
    Gemma2,
    /// `granite` (IBM Granite 3.x dense): llama's block with embedding, residual, attention and
    /// logit multipliers.
    Granite,
}

impl Family {
    /// Every recognised family, in the order error messages list them.
    pub const ALL: [Family; 9] =
        [Family::Llama, Family::Qwen2, Family::Qwen3, Family::Qwen3Moe, Family::Gemma2, Family::Gemma3, Family::Phi3, Family::Smollm3, Family::Granite];

    /// The `general.architecture` string, which is also the prefix of the family's metadata keys.
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Qwen3Moe => "qwen3moe",
            Family::Gemma3 => "gemma3",
            Family::Phi3 => "phi3",
            Family::Smollm3 => "smollm3",
            Family::Gemma2 => "gemma2",
            Family::Granite => "granite",
        }
    }

    /// Parses `general.architecture`.
    ///
    /// # Errors
    /// [`Error::UnsupportedArchitecture`] for any other string (its message lists [`Family::ALL`]).
    pub fn from_name(arch: &str) -> Result<Family> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == arch)
            .ok_or_else(|| Error::UnsupportedArchitecture { found: arch.to_string(), supported: Family::supported_list() })
    }

    /// The recognised architectures, comma-separated (for messages).
    pub fn supported_list() -> String {
        Family::ALL.map(Family::name).join(", ")
    }

    /// True when RoPE rotates pairs `(i, i + n_rot/2)` (llama.cpp's `LLAMA_ROPE_TYPE_NEOX`) rather
    /// than adjacent pairs `(2i, 2i+1)`.
    pub fn rope_neox(self) -> bool {
        !matches!(self, Family::Llama | Family::Smollm3 | Family::Granite)
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a family adds to llama's forward pass. [`FamilyParams::default`] is llama's (every
/// feature off), so a llama config's value changes nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyParams {
    /// RoPE pairs `(i, i + n_rot/2)` (NEOX) instead of adjacent ones; see [`Family::rope_neox`].
    pub rope_neox: bool,
    /// `blk.N.attn_{q,k,v}.bias` present (widths q_dim, kv_dim, kv_dim), added after each
    /// projection (Qwen2; optional in llama.cpp for every family, detected from block 0's
    /// `attn_q.bias` and then required in every block; not read for `llama`).
    pub qkv_bias: bool,
    /// `blk.N.attn_{q,k}_norm.weight` (`[head_dim]`): each head of q and of k is RMSNormed (same
    /// eps as the blocks') before RoPE (Qwen3, Gemma 3).
    pub qk_norm: bool,
    /// `blk.N.post_attention_norm.weight` and `blk.N.post_ffw_norm.weight` (`[n_embd]`): the
    /// attention's and the FFN's outputs are RMSNormed before each residual add (Gemma 2/3). The
    /// GGUF stores Gemma's norm weights as used (llama.cpp's converter adds Gemma's `1 +`), so
    /// every norm multiplies by the stored weight.
    pub post_norms: bool,
    /// The gated FFN's activation is GELU, tanh approximation
    /// (`0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`), instead of SiLU (Gemma).
    pub gelu: bool,
    /// Token embeddings are multiplied by this before the first block: 1, sqrt(n_embd) (Gemma,
    /// computed in f32 as llama.cpp's `sqrtf`), or `granite.embedding_scale`.
    pub embd_scale: f32,
    /// Scale of the attention scores `q . k`: `None` for 1/sqrt(head_dim); Gemma 3 27B (62
    /// layers) uses 1/sqrt(n_embd / n_head), as llama.cpp decides it from the layer count;
    /// Granite's `granite.attention.scale`.
    pub attn_scale: Option<f32>,
    /// Final-logit soft-cap `c`: logits become `c * tanh(logits / c)`; 0 for none
    /// (`<arch>.final_logit_softcapping`).
    pub final_softcap: f32,
    /// Attention-score soft-cap `c` (`<arch>.attn_logit_softcapping`, Gemma 2's default 50): each
    /// scaled score `s = scale * q . k` becomes `c * tanh(s / c)` before the softmax; 0 for none.
    pub attn_softcap: f32,
    /// Sliding-window length (`<arch>.attention.sliding_window`): on a layer whose
    /// [`FamilyParams::swa_layers`] entry is true, the token at position p attends to keys at
    /// positions p - sliding_window + 1 ..= p only (llama.cpp's `LLAMA_SWA_TYPE_STANDARD`); 0: none.
    pub sliding_window: u32,
    /// Which layers use the sliding window (empty without one): from
    /// `<arch>.attention.sliding_window_pattern`, either an array of one bool per layer or a
    /// period n (default 6 for Gemma 3) making layer l local unless l % n == n - 1.
    pub swa_layers: Vec<bool>,
    /// RoPE base of the sliding-window layers (`<arch>.rope.freq_base_swa`; default 10000 for
    /// Gemma 3, the global base for Gemma 2), whose scaling is [`FamilyParams::rope_scale_swa`];
    /// the global layers use [`crate::Config::theta`] and [`crate::Config::rope_scale`].
    pub theta_swa: f32,
    /// Linear RoPE factor of the sliding-window layers (positions divided by it): 1 for Gemma 3,
    /// the global [`crate::Config::rope_scale`] for Gemma 2 (llama.cpp's `rope_freq_scale_train_swa`).
    pub rope_scale_swa: f32,
    /// `blk.N.attn_qkv.weight` (`[n_embd, q_dim + 2 kv_dim]`, rows q then k then v) instead of
    /// separate q, k, v matrices (Phi-3; llama.cpp takes either, decided by block 0).
    pub fused_qkv: bool,
    /// `blk.N.ffn_up.weight` is `[n_embd, 2 n_ff]`: its first n_ff rows are the gate (SiLU'd),
    /// the next n_ff the up projection; there is no `ffn_gate` (Phi-3).
    pub fused_gate_up: bool,
    /// LongRoPE: `rope_factors_long.weight` and `rope_factors_short.weight` (`[n_rot / 2]` each)
    /// divide the RoPE frequencies, the long table when the context ([`crate::Config::ctx`])
    /// exceeds [`FamilyParams::rope_orig_ctx`], else the short one (llama.cpp's
    /// `get_rope_factors`; see [`crate::Config::rope_factors`]).
    pub longrope: bool,
    /// `<arch>.rope.scaling.original_context_length`, default the trained context: the LongRoPE
    /// table switch.
    pub rope_orig_ctx: u32,
    /// `<arch>.rope.scaling.attn_factor` (default 1): multiplies cos and sin of the rotated dims
    /// of q and k (so scores of rotated dims by its square; the unrotated dims of a partial
    /// rotary are copied unscaled), as ggml's RoPE applies it.
    pub rope_attn_factor: f32,
    /// NoPE layers: layer l takes no RoPE when (l + 1) % nope_interval == 0 (SmolLM3: 4; a
    /// Granite file with `granite.rope.scaling.finetuned` false: 1, no layer rotates); 0: none.
    /// See [`FamilyParams::uses_rope`].
    pub nope_interval: u32,
    /// Multiplies the attention's and the FFN's outputs before each residual add
    /// (`granite.residual_scale`; 1 when absent).
    pub residual_scale: f32,
    /// The logits are divided by this (`granite.logit_scale`, required for Granite; 1 otherwise).
    pub logit_scale: f32,
}

impl Default for FamilyParams {
    fn default() -> FamilyParams {
        FamilyParams {
            rope_neox: false,
            qkv_bias: false,
            qk_norm: false,
            post_norms: false,
            gelu: false,
            embd_scale: 1.0,
            attn_scale: None,
            final_softcap: 0.0,
            attn_softcap: 0.0,
            sliding_window: 0,
            swa_layers: Vec::new(),
            theta_swa: 10000.0,
            rope_scale_swa: 1.0,
            fused_qkv: false,
            fused_gate_up: false,
            longrope: false,
            rope_orig_ctx: 0,
            rope_attn_factor: 1.0,
            nope_interval: 0,
            residual_scale: 1.0,
            logit_scale: 1.0,
        }
    }
}

impl FamilyParams {
    /// True when layer `l` rotates q and k (false on NoPE layers).
    pub fn uses_rope(&self, l: u32) -> bool {
        self.nope_interval == 0 || (l + 1) % self.nope_interval != 0
    }

    /// True when layer `l` attends through the sliding window.
    pub fn is_swa(&self, l: u32) -> bool {
        self.sliding_window > 0 && self.swa_layers.get(l as usize).copied().unwrap_or(false)
    }
}

/// Whether block 0 holds tensor `blk.0.{suffix}`: optional tensors are detected there and then
/// required in every block by [`crate::config::Config::expected_tensors`].
fn in_block0(g: &Gguf, suffix: &str) -> bool {
    g.tensor(&format!("blk.0.{suffix}")).is_some()
}

/// The llama hyperparameters a family's features are read and checked against (already read
/// into the [`crate::Config`]).
#[derive(Debug, Clone, Copy)]
pub struct Dims {
    /// Width.
    pub d: u32,
    /// Blocks.
    pub n_layers: u32,
    /// Query heads.
    pub n_heads: u32,
    /// Head dim.
    pub head_dim: u32,
    /// RoPE dims per head.
    pub n_rot: u32,
    /// Trained context.
    pub train_ctx: u32,
    /// RoPE base of the global layers.
    pub theta: f32,
    /// Linear RoPE scaling of the global layers.
    pub rope_scale: f32,
}

impl Dims {
    /// Query width: heads x head dim.
    pub fn q_dim(&self) -> u32 {
        self.n_heads * self.head_dim
    }
}

impl FamilyParams {
    /// Reads the family-specific features of `family` from `g`, given the shapes already read
    /// (`cfg`).
    ///
    /// # Errors
    /// [`Error::Config`] for values out of range (a sliding-window pattern array whose length is
    /// not the layer count, a non-positive soft-cap or RoPE base), for shapes llama.cpp's graph for
    /// the family asserts against (Qwen2/3: RoPE over the whole head; Qwen2: query width = model
    /// width), and for tensors the family may carry that this crate does not compute
    /// (`output.bias`, k or v biases without q's).
    pub fn read(g: &Gguf, family: Family, cfg: &Dims) -> Result<FamilyParams> {
        let key = |k: &str| format!("{family}.{k}");
        let p = FamilyParams { rope_neox: family.rope_neox(), ..FamilyParams::default() };
        if family == Family::Llama {
            return Ok(p);
        }
        if g.tensor("output.bias").is_some() {
            return Err(Error::Config(format!("{family}: output.bias is not supported")));
        }
        // llama.cpp's create_tensor_qkv loads q/k/v biases when present, in every family.
        let qkv_bias = in_block0(g, "attn_q.bias");
        if !qkv_bias && (in_block0(g, "attn_k.bias") || in_block0(g, "attn_v.bias")) {
            return Err(Error::Config(format!("{family}: k or v biases without q biases are not supported")));
        }
        let p = FamilyParams { qkv_bias, ..p };
        let (d, head_dim, n_rot) = (cfg.d, cfg.head_dim, cfg.n_rot);
        match family {
            Family::Llama => Ok(p),
            Family::Qwen2 | Family::Qwen3 | Family::Qwen3Moe => {
                if n_rot != head_dim {
                    return Err(Error::Config(format!("{family}: rope dims {n_rot} must equal the head dim {head_dim} (llama.cpp asserts it)")));
                }
                if family == Family::Qwen2 && cfg.q_dim() != d {
                    return Err(Error::Config(format!("qwen2: heads x head dim = {} must equal the width {d} (attn_output is n_embd x n_embd)", cfg.q_dim())));
                }
                Ok(FamilyParams { qk_norm: family != Family::Qwen2, ..p })
            }
            Family::Gemma2 | Family::Gemma3 => {
                let gemma2 = family == Family::Gemma2;
                let final_softcap = positive_or_absent(g, &key("final_logit_softcapping"))?.unwrap_or(0.0);
                let attn_softcap = if gemma2 { positive_or_absent(g, &key("attn_logit_softcapping"))?.unwrap_or(50.0) } else { 0.0 };
                // Gemma 2 always slides (4096 unless set); Gemma 3 only with the key.
                let sliding_window = meta_u32(g, &key("attention.sliding_window"))?.unwrap_or(if gemma2 { 4096 } else { 0 });
                let (base_default, pattern_default) = if gemma2 { (cfg.theta, 2) } else { (10000.0, 6) };
                let (swa_layers, theta_swa) = if sliding_window > 0 {
                    let theta_swa = positive_or_absent(g, &key("rope.freq_base_swa"))?.unwrap_or(base_default);
                    (swa_pattern(g, &key("attention.sliding_window_pattern"), cfg.n_layers, pattern_default)?, theta_swa)
                } else {
                    (Vec::new(), 10000.0)
                };
                // llama.cpp: 1/sqrt(n_embd / n_head) for the 27B (Gemma 2: 46 layers, Gemma 3: 62),
                // else 1/sqrt(head_dim) (it does not read query_pre_attn_scalar).
                let attn_scale = (cfg.n_layers == if gemma2 { 46 } else { 62 }).then(|| 1.0 / ((d / cfg.n_heads) as f32).sqrt());
                Ok(FamilyParams {
                    qk_norm: !gemma2,
                    post_norms: true,
                    gelu: true,
                    embd_scale: (d as f32).sqrt(),
                    attn_scale,
                    final_softcap,
                    attn_softcap,
                    rope_scale_swa: if gemma2 { cfg.rope_scale } else { 1.0 },
                    sliding_window,
                    swa_layers,
                    theta_swa,
                    ..p
                })
            }
            Family::Phi3 => {
                if cfg.q_dim() != d {
                    return Err(Error::Config(format!("phi3: heads x head dim = {} must equal the width {d} (attn_output is n_embd x n_embd)", cfg.q_dim())));
                }
                let longrope = g.tensor("rope_factors_long.weight").is_some() || g.tensor("rope_factors_short.weight").is_some();
                let rope_orig_ctx = meta_u32(g, &key("rope.scaling.original_context_length"))?.unwrap_or(cfg.train_ctx);
                let rope_attn_factor = positive_or_absent(g, &key("rope.scaling.attn_factor"))?.unwrap_or(1.0);
                Ok(FamilyParams { fused_qkv: in_block0(g, "attn_qkv.weight"), fused_gate_up: true, longrope, rope_orig_ctx, rope_attn_factor, ..p })
            }
            Family::Smollm3 => Ok(FamilyParams { nope_interval: 4, ..p }),
            Family::Granite => {
                if n_rot != head_dim {
                    return Err(Error::Config(format!("granite: rope dims {n_rot} must equal the head dim {head_dim} (llama.cpp asserts it)")));
                }
                for extra in ["attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "ffn_gate_inp.weight"] {
                    if in_block0(g, extra) {
                        return Err(Error::Config(format!("granite: blk.0.{extra} is not supported (dense Granite without biases only)")));
                    }
                }
                let logit_scale =
                    positive_or_absent(g, &key("logit_scale"))?.ok_or_else(|| Error::Config(format!("missing metadata {}", key("logit_scale"))))?;
                let rope_on = match g.get(&key("rope.scaling.finetuned")) {
                    None | Some(Value::Bool(true)) => true,
                    Some(Value::Bool(false)) => false,
                    Some(v) => return Err(Error::Config(format!("{} must be a boolean, found {v}", key("rope.scaling.finetuned")))),
                };
                Ok(FamilyParams {
                    embd_scale: positive_or_absent(g, &key("embedding_scale"))?.unwrap_or(1.0),
                    residual_scale: positive_or_absent(g, &key("residual_scale"))?.unwrap_or(1.0),
                    attn_scale: positive_or_absent(g, &key("attention.scale"))?,
                    logit_scale,
                    nope_interval: if rope_on { 0 } else { 1 },
                    ..p
                })
            }
        }
    }
}

/// A float key that must be positive and finite when present.
fn positive_or_absent(g: &Gguf, key: &str) -> Result<Option<f32>> {
    match meta_f32(g, key)? {
        Some(v) if v.is_nan() || v <= 0.0 => Err(Error::Config(format!("{key} must be positive, found {v}"))),
        v => Ok(v),
    }
}

/// Which layers slide, as llama.cpp's `load_swa_pattern` reads `key`: an array of one bool per
/// layer, else a period n (`default` when absent) making layer l local unless l % n == n - 1
/// (n = 0: every layer local; n = 1: none; as llama.cpp's `set_swa_pattern` computes it).
fn swa_pattern(g: &Gguf, key: &str, n_layers: u32, default: u32) -> Result<Vec<bool>> {
    if let Some(a) = g.get(key).and_then(|v| v.as_array()) {
        if a.len() != n_layers as usize {
            return Err(Error::Config(format!("{key} is an array of {} values but there are {n_layers} layers", a.len())));
        }
        return a
            .iter()
            .map(|v| match v {
                Value::Bool(b) => Ok(*b),
                _ => Err(Error::Config(format!("{key} must hold booleans"))),
            })
            .collect();
    }
    let n = meta_u32(g, key)?.unwrap_or(default);
    Ok((0..n_layers).map(|l| n == 0 || l % n < n - 1).collect())
}
