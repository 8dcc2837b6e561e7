//! The forward pass's small ops over a batch of token rows: the embedding gather, RMSNorm, RoPE
//! with the KV-cache write, and SwiGLU (the linear ops: [`crate::linear`]; attention:
//! [`crate::attention`]; experts: [`crate::moe`]). Each has its parameter block, the
//! `#[repr(C)]` twin of the `struct P` of its shader.

use bytemuck::{Pod, Zeroable};

use crate::config::{Config, KvType};
use crate::kernels::{Geometry, Kernel, PipelineKey};
use crate::linear::matvec_tokens;
use crate::program::Builder;
use crate::weights::Matrix;

/// Token rows per workgroup of RMSNorm's CPU form (a row per invocation: 8 AVX2 lanes x 8).
const NORM_ROWS: u32 = 64;

/// `struct Part` of `shaders/embed.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct EmbedParams {
    /// First row (token id) held by this part of the table.
    pub row_start: u32,
    /// Rows in the part.
    pub rows: u32,
    /// Model width.
    pub d: u32,
    /// Multiplies each embedding (Gemma's sqrt(d), Granite's `embedding_scale`; 1 elsewhere).
    pub scale: f32,
}

/// `struct P` of `shaders/rmsnorm.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct NormParams {
    /// Row width.
    pub n: u32,
    /// RMSNorm epsilon.
    pub eps: f32,
    /// 1: add the normed row to `y` instead of writing it ([`Builder::post_norm`]).
    pub add: u32,
    /// Padding to 16 bytes.
    pub pad: u32,
}

/// `struct P` of `shaders/rope_kv.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct RopeParams {
    /// Query heads.
    pub n_heads: u32,
    /// KV heads.
    pub n_kv: u32,
    /// Head dim.
    pub head_dim: u32,
    /// Dims rotated per head.
    pub n_rot: u32,
    /// Floats per token row of `[q | k | v]`.
    pub qkv_stride: u32,
    /// Padding to 32 bytes.
    pub pad: [u32; 3],
}

/// `struct P` of `shaders/bias.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct BiasParams {
    /// Values of the bias (columns added per token row).
    pub n: u32,
    /// Floats per token row.
    pub stride: u32,
    /// Padding to 16 bytes.
    pub pad: [u32; 2],
}

/// `struct P` of `shaders/head_norm.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct HeadNormParams {
    /// Values per head.
    pub hd: u32,
    /// Query heads (the key heads follow them in a row).
    pub n_q: u32,
    /// Floats per token row.
    pub stride: u32,
    /// RMSNorm epsilon.
    pub eps: f32,
}

/// `struct P` of `shaders/swiglu.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SwigluParams {
    /// Values of g (and of u) per token.
    pub n: u32,
    /// Offset of u from g within a token row.
    pub u0: u32,
    /// Floats per token row.
    pub stride: u32,
    /// 1: GELU (tanh form) instead of SiLU (GEGLU: Gemma).
    pub gelu: u32,
}

/// `struct P` of `shaders/softcap.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SoftcapParams {
    /// Values per row.
    pub n: u32,
    /// The cap `c`.
    pub c: f32,
    /// Padding to 16 bytes.
    pub pad: [u32; 2],
}

impl Builder<'_> {
    /// `x[i] = scale * E[tokens[i]]`, one op per part of the table (each writes only its own tokens).
    pub fn embed(&mut self, e: &Matrix, tokens: &wgpu::Buffer, x: &wgpu::Buffer, scale: f32) {
        let step = self.step.clone();
        for part in &e.parts {
            let p = self.uniform("embed", &EmbedParams { row_start: part.row_start, rows: part.rows, d: e.cols, scale });
            let key = PipelineKey::weights(Kernel::Embed, e.ty, e.cols, Geometry::Fixed);
            let groups = e.cols.div_ceil(64);
            self.plain(key, &[("part", &p), ("st", &step), ("tokens", tokens), ("W", &part.buffer), ("Y", x)], move |b| [groups, b.n_tokens, 1]);
            let row = part.buffer.size() / part.rows.max(1) as u64 + 4 * groups as u64 * 64;
            self.traffic(move |b| b.n_tokens as u64 * row);
        }
    }

    /// `y[i] = rmsnorm(x[i]) * w` for every token row of width `n`; with `fused`, only for
    /// batches the linear ops reading `y` take through their matrix-matrix forms (their
    /// matrix-vector forms normalise `x` themselves: [`crate::linear::Fuse::norm`]).
    pub fn rmsnorm(&mut self, n: u32, eps: f32, x: &wgpu::Buffer, w: &wgpu::Buffer, y: &wgpu::Buffer, fused: bool) {
        self.norm_op(n, eps, x, w, y, if fused { matvec_tokens(self.gpu) } else { 0 }, false);
    }

    /// `y[i] += rmsnorm(x[i]) * w` for every token row of width `n`: Gemma's post-attention and
    /// post-FFN norms, the branch's output `x` normed before it joins the residual stream `y`
    /// (llama.cpp's `llm_build_gemma2_iswa`, `src/models/gemma2-iswa.cpp`).
    pub fn post_norm(&mut self, n: u32, eps: f32, x: &wgpu::Buffer, w: &wgpu::Buffer, y: &wgpu::Buffer) {
        self.norm_op(n, eps, x, w, y, 0, true);
    }

    /// [`Builder::rmsnorm`] for batches of more than `skip` tokens; with `add`, added to `y`.
    #[allow(clippy::too_many_arguments)]
    fn norm_op(&mut self, n: u32, eps: f32, x: &wgpu::Buffer, w: &wgpu::Buffer, y: &wgpu::Buffer, skip: u32, add: bool) {
        let p = self.uniform("rmsnorm", &NormParams { n, eps, add: add as u32, pad: 0 });
        let step = self.step.clone();
        // On CPU adapters a row per invocation: the GPU form's 256-invocation tree (8 barriers a
        // row) serialises on a CPU adapter, where each barrier is a task switch.
        let rows = if self.gpu.is_cpu() { NORM_ROWS } else { 0 };
        let geometry = Geometry::NormRows { rows };
        let v = self.variant(PipelineKey::new(Kernel::RmsNorm, geometry), &[("p", &p), ("st", &step), ("x", x), ("w", w), ("y", y)]);
        self.op(vec![v], move |b| (b.n_tokens > skip).then_some((0, [if rows > 0 { b.n_tokens.div_ceil(rows) } else { b.n_tokens }, 1, 1])));
        self.traffic(move |b| ((2 + add as u64) * b.n_tokens as u64 + 1) * n as u64 * 4);
    }

    /// RoPE on each token's q and k (rows of `[q | k | v]` of `qkv_stride` floats, position
    /// pos0 + i) with the cos/sin table `rope`, and k, v into the cache (`cfg.kv` values); with
    /// `fused`, not for one-token batches (attention does it: [`crate::attention::fuses_rope`]).
    #[allow(clippy::too_many_arguments)]
    pub fn rope_kv(
        &mut self,
        cfg: &Config,
        qkv: &wgpu::Buffer,
        qkv_stride: u32,
        rope: &wgpu::Buffer,
        k_cache: &wgpu::Buffer,
        v_cache: &wgpu::Buffer,
        fused: bool,
    ) {
        let params = RopeParams { n_heads: cfg.n_heads, n_kv: cfg.n_kv_heads, head_dim: cfg.head_dim, n_rot: cfg.n_rot, qkv_stride, pad: [0; 3] };
        let p = self.uniform("rope_kv", &params);
        let step = self.step.clone();
        let groups = (cfg.q_dim() / 2).max(cfg.kv_dim()).div_ceil(64);
        let key = PipelineKey::new(Kernel::RopeKv, Geometry::RopeKv { kv_f16: cfg.kv == KvType::F16 });
        let v = self.variant(key, &[("p", &p), ("st", &step), ("cs", rope), ("q", qkv), ("kc", k_cache), ("vc", v_cache)]);
        self.op(vec![v], move |b| (!fused || b.n_tokens > 1).then_some((0, [groups, b.n_tokens, 1])));
        let per_token = (2 * cfg.q_dim() as u64 + 2 * cfg.kv_dim() as u64 + cfg.n_rot as u64) * 4 + 2 * cfg.kv_dim() as u64 * cfg.kv.bytes() as u64;
        self.traffic(move |b| b.n_tokens as u64 * per_token);
    }

    /// `g = silu(g) * u` (with `gelu`, GELU's tanh form for SiLU: GEGLU) in place for every
    /// token row of `[g | u]` (`n` values each, u at `u0`, rows of `stride` floats); with
    /// `fused`, only for batches the gate/up projection takes through its matrix-matrix forms
    /// ([`crate::linear::Fuse::glu`]).
    pub fn swiglu(&mut self, n: u32, u0: u32, stride: u32, gu: &wgpu::Buffer, gelu: bool, fused: bool) {
        let p = self.uniform("swiglu", &SwigluParams { n, u0, stride, gelu: gelu as u32 });
        let step = self.step.clone();
        let v = self.variant(PipelineKey::plain(Kernel::Swiglu), &[("p", &p), ("st", &step), ("gu", gu)]);
        let mv = if fused { matvec_tokens(self.gpu) } else { 0 };
        self.op(vec![v], move |b| (b.n_tokens > mv).then_some((0, [n.div_ceil(64), b.n_tokens, 1])));
        self.traffic(move |b| b.n_tokens as u64 * n as u64 * 12);
    }

    /// `y[t][i] += bias[i]` for `i < n` in every token row of `y` (rows of `stride` floats): a
    /// linear op's additive bias (Qwen2's q/k/v biases).
    pub fn bias(&mut self, n: u32, stride: u32, bias: &wgpu::Buffer, y: &wgpu::Buffer) {
        let p = self.uniform("bias", &BiasParams { n, stride, pad: [0; 2] });
        let step = self.step.clone();
        self.plain(PipelineKey::plain(Kernel::Bias), &[("p", &p), ("st", &step), ("b", bias), ("y", y)], move |b| [n.div_ceil(64), b.n_tokens, 1]);
        self.traffic(move |b| (2 * b.n_tokens as u64 + 1) * n as u64 * 4);
    }

    /// `z = c tanh(z / c)` in place over the logits the output head wrote (`logits`: rows of `n`;
    /// the last token's row, or every token's with [`crate::program::Batch::all_logits`]): Gemma
    /// 2's final-logit soft-cap.
    pub fn softcap(&mut self, n: u32, c: f32, logits: &wgpu::Buffer) {
        let p = self.uniform("softcap", &SoftcapParams { n, c, pad: [0; 2] });
        self.plain(PipelineKey::plain(Kernel::Softcap), &[("p", &p), ("z", logits)], move |b| [n.div_ceil(64), if b.all_logits { b.n_tokens } else { 1 }, 1]);
        self.traffic(move |b| 2 * n as u64 * 4 * if b.all_logits { b.n_tokens as u64 } else { 1 });
    }

    /// RMSNorm of each head in place (`hd` values; weights `wq` for the first `n_q` heads of a
    /// row, `wk` for the `n_kv` after them) in every token row of `y` (rows of `stride` floats):
    /// the per-head q and k norms before RoPE (Qwen3, Gemma 3).
    #[allow(clippy::too_many_arguments)]
    pub fn head_norm(&mut self, hd: u32, n_q: u32, n_kv: u32, stride: u32, eps: f32, wq: &wgpu::Buffer, wk: &wgpu::Buffer, y: &wgpu::Buffer) {
        let p = self.uniform("head_norm", &HeadNormParams { hd, n_q, stride, eps });
        let step = self.step.clone();
        let heads = n_q + n_kv;
        self.plain(PipelineKey::plain(Kernel::HeadNorm), &[("p", &p), ("st", &step), ("wq", wq), ("wk", wk), ("y", y)], move |b| [heads, b.n_tokens, 1]);
        self.traffic(move |b| (2 * b.n_tokens as u64 * heads as u64 + 2) * hd as u64 * 4);
    }
}
