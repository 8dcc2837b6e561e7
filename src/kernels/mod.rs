//! The compute kernels (one WGSL file each under `shaders/`), their typed pipeline keys, and the
//! cache that compiles each (kernel, variant) once.
//!
//! A [`PipelineKey`] names everything that changes a kernel's WGSL: the GGML format of the weights
//! it reads, its geometry (threads per row and tokens per dispatch for the matrix-vector kernels,
//! the tile shape of the matrix-matrix kernel, the head dim and threads per query of attention,
//! the KV cache's element type for the kernels that write and read it),
//! and the optional device features it uses. [`compose`] turns a key into WGSL: `const`
//! declarations for the geometry, then for weight kernels `shaders/formats/common.wgsl` and the
//! format's file (its `dq4s` decoder: the only per-format code), then the kernel's file(s).
//!
//! A module per family, re-exported here: the matrix-vector kernel's forms and shapes
//! (`matvec.rs`: [`MatvecForm`], [`matvec_workgroup`], [`QuantOut`]), the matrix-matrix tiles (`matmul.rs`:
//! [`Tile`], [`CpuTile`], [`CoopTile`]), attention's limits and shapes (`attention.rs`:
//! [`MAX_SPLITS`]), the weight formats (`format.rs`: [`Format`]); `key.rs` the keys,
//! `compose.rs` the WGSL of a key with its bindings numbered, `bind.rs` the bind group entries by
//! name ([`bound`]). The pipelines are compiled and cached by [`crate::pipelines`]. This module
//! uses no other of the crate's but [`crate::ggml`]: the layers that pick kernels
//! ([`crate::linear`], [`crate::attention`], ...) import it, never the other way.

mod attention;
mod bind;
mod compose;
mod format;
mod key;
mod matmul;
mod matvec;

pub use attention::*;
pub use bind::*;
pub use compose::*;
pub use format::*;
pub use key::*;
pub use matmul::*;
pub use matvec::*;

use crate::ggml::GgmlType;

/// The compute kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Token embedding gather (per weight format).
    Embed,
    /// RMSNorm per token row.
    RmsNorm,
    /// Matrix times a few token vectors, each weight read once (per weight format).
    Matvec,
    /// Tiled matrix-matrix product over a batch of tokens (per weight format).
    Matmul,
    /// The same on the matrix units (cooperative matrices, native only; opt-in).
    MatmulCoop,
    /// The same on CPU implementations of the API (lavapipe, SwiftShader): whole rows per
    /// invocation, shared token reads (per weight format).
    MatmulCpu,
    /// RoPE and KV-cache write.
    RopeKv,
    /// Causal GQA flash attention of a batch of tokens against the KV cache.
    Attention,
    /// Attention of a one-token batch (decoding): a key per thread, then a value dim per thread.
    AttentionDecode,
    /// The same with a chunk's key and value loads spread over 8 vectors a thread, all in flight
    /// at once ([`crate::attention::decode_wide`]).
    AttentionDecodeWide,
    /// Merges attention's key splits (flash-decoding).
    AttentionCombine,
    /// The same for many splits: 256 threads a head instead of 64.
    AttentionCombineWide,
    /// Causal GQA attention of a batch of tokens on CPU implementations of the API: a query row
    /// per invocation, every lane walking the same keys.
    AttentionCpu,
    /// MoE router top-k and gates per token.
    MoeSelect,
    /// Selected experts' gate/up projections per token (per weight format).
    MatvecExp,
    /// Selected experts' down projections, gated, into the residual (per weight format).
    MoeDown,
    /// The gated FFN's activation: SwiGLU, or GEGLU (Gemma).
    Swiglu,
    /// `y += b` over token rows (`shaders/bias.wgsl`).
    Bias,
    /// RMSNorm of each q and k head (`shaders/head_norm.wgsl`).
    HeadNorm,
    /// The final-logit soft-cap `c tanh(z / c)` (`shaders/softcap.wgsl`; Gemma 2).
    Softcap,
    /// Top-k of the logits (two stages).
    TopK,
    /// A plain read of a buffer: the bench's measured read bandwidth.
    Stream,
    /// Q8_0 and Q6_K rows regrouped in place at load, so that block weights start on 16-byte
    /// boundaries (Q8_0 rows of 64k but not 256k weights: on words).
    Repack,
    /// A token row of activations as 24-bit integers per 16 values (RMSNorm optionally fused),
    /// for the integer form of the matrix-vector kernel.
    Quantize,
    /// Causal GQA attention of a long batch (prefill) on GPUs: 64 query rows a workgroup, each
    /// thread a block of scores and of outputs.
    AttentionTiled,
    /// A batch's activations as f16 halves (hi + lo), the matrix-unit matmul's input.
    Split,
    /// The repetition penalty of a generation step, on its logits in place ([`crate::sample`]).
    Penalty,
    /// The next token of a generation step, from the top-k candidates ([`crate::sample`]).
    Pick,
    /// The next token of a greedy generation step: the top-k kernel's first candidate.
    PickGreedy,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 29] = [
        Kernel::Embed,
        Kernel::RmsNorm,
        Kernel::Matvec,
        Kernel::Matmul,
        Kernel::MatmulCoop,
        Kernel::MatmulCpu,
        Kernel::RopeKv,
        Kernel::Attention,
        Kernel::AttentionDecode,
        Kernel::AttentionDecodeWide,
        Kernel::AttentionCombine,
        Kernel::AttentionCombineWide,
        Kernel::AttentionCpu,
        Kernel::MoeSelect,
        Kernel::MatvecExp,
        Kernel::MoeDown,
        Kernel::Swiglu,
        Kernel::Bias,
        Kernel::HeadNorm,
        Kernel::Softcap,
        Kernel::TopK,
        Kernel::Stream,
        Kernel::Repack,
        Kernel::Quantize,
        Kernel::AttentionTiled,
        Kernel::Split,
        Kernel::Penalty,
        Kernel::Pick,
        Kernel::PickGreedy,
    ];

    /// The kernel's own WGSL (without its format, geometry or shared bindings: see [`compose`];
    /// the matrix-vector kernel's: what its forms share, each form's file after it,
    /// [`MatvecForm::source`]).
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Embed => include_str!("../../shaders/embed.wgsl"),
            Kernel::RmsNorm => include_str!("../../shaders/rmsnorm.wgsl"),
            Kernel::Matvec => include_str!("../../shaders/matvec.wgsl"),
            Kernel::Matmul => include_str!("../../shaders/matmul.wgsl"),
            Kernel::MatmulCoop => include_str!("../../shaders/matmul_coop.wgsl"),
            Kernel::MatmulCpu => include_str!("../../shaders/matmul_cpu.wgsl"),
            Kernel::RopeKv => include_str!("../../shaders/rope_kv.wgsl"),
            Kernel::Attention => include_str!("../../shaders/attention.wgsl"),
            Kernel::AttentionDecode => include_str!("../../shaders/attention_decode.wgsl"),
            Kernel::AttentionDecodeWide => include_str!("../../shaders/attention_decode_wide.wgsl"),
            Kernel::AttentionCombine => include_str!("../../shaders/attention_combine.wgsl"),
            Kernel::AttentionCombineWide => include_str!("../../shaders/attention_combine_wide.wgsl"),
            Kernel::AttentionCpu => include_str!("../../shaders/attention_cpu.wgsl"),
            Kernel::MoeSelect => include_str!("../../shaders/moe_select.wgsl"),
            Kernel::MatvecExp => include_str!("../../shaders/matvec_exp.wgsl"),
            Kernel::MoeDown => include_str!("../../shaders/moe_down.wgsl"),
            Kernel::Swiglu => include_str!("../../shaders/swiglu.wgsl"),
            Kernel::Bias => include_str!("../../shaders/bias.wgsl"),
            Kernel::HeadNorm => include_str!("../../shaders/head_norm.wgsl"),
            Kernel::Softcap => include_str!("../../shaders/softcap.wgsl"),
            Kernel::TopK => include_str!("../../shaders/topk.wgsl"),
            Kernel::Stream => include_str!("../../shaders/stream.wgsl"),
            Kernel::Repack => include_str!("../../shaders/repack.wgsl"),
            Kernel::Quantize => include_str!("../../shaders/quantize.wgsl"),
            Kernel::AttentionTiled => include_str!("../../shaders/attention_tiled.wgsl"),
            Kernel::Split => include_str!("../../shaders/split.wgsl"),
            Kernel::Penalty => include_str!("../../shaders/penalty.wgsl"),
            Kernel::Pick => include_str!("../../shaders/pick.wgsl"),
            Kernel::PickGreedy => include_str!("../../shaders/pick_greedy.wgsl"),
        }
    }

    /// The file stem, e.g. `matvec_exp`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Embed => "embed",
            Kernel::RmsNorm => "rmsnorm",
            Kernel::Matvec => "matvec",
            Kernel::Matmul => "matmul",
            Kernel::MatmulCoop => "matmul_coop",
            Kernel::MatmulCpu => "matmul_cpu",
            Kernel::RopeKv => "rope_kv",
            Kernel::Attention => "attention",
            Kernel::AttentionDecode => "attention_decode",
            Kernel::AttentionDecodeWide => "attention_decode_wide",
            Kernel::AttentionCombine => "attention_combine",
            Kernel::AttentionCombineWide => "attention_combine_wide",
            Kernel::AttentionCpu => "attention_cpu",
            Kernel::MoeSelect => "moe_select",
            Kernel::MatvecExp => "matvec_exp",
            Kernel::MoeDown => "moe_down",
            Kernel::Swiglu => "swiglu",
            Kernel::Bias => "bias",
            Kernel::HeadNorm => "head_norm",
            Kernel::Softcap => "softcap",
            Kernel::TopK => "topk",
            Kernel::Stream => "stream",
            Kernel::Repack => "repack",
            Kernel::Quantize => "quantize",
            Kernel::AttentionTiled => "attention_tiled",
            Kernel::Split => "split",
            Kernel::Penalty => "penalty",
            Kernel::Pick => "pick",
            Kernel::PickGreedy => "pick_greedy",
        }
    }

    /// Whether the kernel reads the per-batch [`crate::program::Step`] uniform (`st`), and so is
    /// composed with `shaders/step.wgsl`.
    pub fn reads_step(self) -> bool {
        !matches!(self, Kernel::TopK | Kernel::Stream | Kernel::Repack | Kernel::Softcap)
    }

    /// Whether the kernel is one of attention's, whose uniform is `shaders/attention_params.wgsl`'s
    /// [`crate::attention::AttentionParams`].
    pub fn is_attention(self) -> bool {
        matches!(self, Kernel::Attention | Kernel::AttentionCpu | Kernel::AttentionTiled | Kernel::AttentionDecode | Kernel::AttentionDecodeWide)
    }

    /// Whether the kernel may apply the gated FFN's activation (SwiGLU or GEGLU), and so is
    /// composed with `shaders/activation.wgsl`.
    pub fn gates(self) -> bool {
        matches!(self, Kernel::Swiglu | Kernel::Matvec)
    }

    /// Whether the kernel reads or writes the KV cache, and so is composed with
    /// `shaders/kv_cache.wgsl` (the cache's element types, f32 or f16 pairs by `KV16`).
    pub fn reads_kv_cache(self) -> bool {
        self == Kernel::RopeKv || self.is_attention()
    }

    /// Whether the kernel reads weights, and so is composed with a format file.
    pub fn reads_weights(self) -> bool {
        matches!(self, Kernel::Embed | Kernel::Matvec | Kernel::Matmul | Kernel::MatmulCoop | Kernel::MatmulCpu | Kernel::MatvecExp | Kernel::MoeDown)
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
