//! The forward pass as a plan: the activations, the fusions decided once for the device
//! ([`Fusion`]), and the ops of the embedding, each layer ([`layer`]) and the output head, in
//! order. What one op hands the next (the integer form of a row, f16 halves: [`Derived`]) is
//! passed here explicitly, from the op that makes it to the op that reads it.
//!
//! The maths is llama.cpp's `llm_build_llama` (src/models/llama.cpp): per layer, `x += o(attn(
//! rope(q, k), v))` over `rmsnorm(x) * attn_norm`, then `x += down(silu(gate) * up)` over
//! `rmsnorm(x) * ffn_norm` (or the Mixtral experts), then the final norm and the output head.
//! Qwen2 adds biases to q, k and v (src/models/qwen2.cpp), Qwen3 RMSNorms each q and k head
//! before RoPE (src/models/qwen3.cpp); both rotate NEOX pairs, which the weights' row order
//! turns into llama's ([`crate::weights::RowOrder`]). Gemma 2/3 (src/models/gemma2-iswa.cpp,
//! gemma3.cpp) RMSNorm each branch's output before it joins the residual stream, gate the FFN
//! with GELU, soft-cap scores and logits (Gemma 2), and give their sliding-window layers a
//! window and a RoPE table of their own ([`Positions`]).

use std::fmt;

use crate::attention::{self, AttentionIo};
use crate::config::{Config, KvType};
use crate::gpu::Gpu;
use crate::linear::{quant_out, Fuse, Io, QuantNext, MATVEC_TOKENS};
use crate::program::Builder;
use crate::reuse::{Derived, Quantized};
use crate::weights::{Ffn, Layer, Matrix, Weights};

/// The decode fusions in force for a model on a device: which work the one-token kernels take
/// over from the ops around them. Decided once at load from [`crate::policy`] and the
/// [`crate::gpu::Switches`]; the batch plans of the ops then follow from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fusion {
    /// The matrix-vector forms RMSNorm their input themselves, and the dense gate/up projection
    /// applies SwiGLU when it is one matrix ([`crate::policy::fused`], [`crate::linear::Fuse`]).
    pub norm: bool,
    /// One-token attention applies RoPE and writes the KV cache itself
    /// ([`attention::fuses_rope`]).
    pub rope: bool,
    /// The value projection writes decode's value straight into the V cache
    /// ([`crate::linear::Fuse::cache_row`]).
    pub v_to_cache: bool,
    /// The residual stream's writers write the next linear op's integer activations
    /// ([`crate::linear::Fuse::quant_out`]): no quantize dispatch.
    pub quant_out: bool,
    /// The SwiGLU matrix-vector kernel does the same for the down projection.
    pub quant_out_glu: bool,
}

impl Fusion {
    /// The fusions `gpu` takes for a model of `cfg`.
    pub fn of(gpu: &Gpu, cfg: &Config) -> Fusion {
        let norm = crate::policy::fused(gpu);
        let rope = attention::fuses_rope(gpu, cfg);
        // Only where one-token attention then reads the value there (RoPE fused) and one-token
        // batches take the matrix-vector form.
        let v_to_cache = gpu.switches().v_to_cache.unwrap_or(true) && rope && crate::linear::matvec_tokens(gpu) >= 1;
        // (Only the integer forms write integers.)
        let int = norm && crate::policy::int_dot(gpu);
        Fusion { norm, rope, v_to_cache, quant_out: int && quant_out(gpu, false), quant_out_glu: int && quant_out(gpu, true) }
    }
}

impl fmt::Display for Fusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (self.norm, "rmsnorm+swiglu in matvec"),
            (self.rope, "rope+kv in attention"),
            (self.v_to_cache, "v to cache"),
            (self.quant_out, "quant out"),
            (self.quant_out_glu, "quant out after swiglu"),
        ];
        let on: Vec<&str> = names.iter().filter(|(on, _)| *on).map(|(_, n)| *n).collect();
        f.write_str(if on.is_empty() { "none".into() } else { on.join(", ") }.as_str())
    }
}

/// The activations of a batch of up to `rows` tokens, and the buffers the program's ends read
/// and write.
pub struct Activations {
    /// The residual stream `[rows][d]`.
    pub x: wgpu::Buffer,
    /// Its normalised rows, for the matrix-matrix forms `[rows][d]`.
    pub xn: wgpu::Buffer,
    /// `[rows][q | k | v]`.
    pub qkv: wgpu::Buffer,
    /// Attention's output `[rows][q_dim]`.
    pub att: wgpu::Buffer,
    /// `[rows][gate | up]`, per expert pick for MoE.
    pub gu: wgpu::Buffer,
    /// `[logit_rows][vocab]`.
    pub logits: wgpu::Buffer,
    /// MoE: router logits `[rows][experts]`, the picks and their weights `[rows][top-k]`.
    pub router: wgpu::Buffer,
    /// The picked experts.
    pub sel: wgpu::Buffer,
    /// Their weights.
    pub gate: wgpu::Buffer,
    /// Key-split scratch ([`attention::partials_bytes`]).
    pub partials: wgpu::Buffer,
    /// Token ids `[rows]`.
    pub tokens: wgpu::Buffer,
    /// RoPE's cos/sin table ([`crate::rope::table`]).
    pub rope: wgpu::Buffer,
    /// The sliding-window layers' own table (their base and scaling,
    /// [`crate::FamilyParams::theta_swa`]), where the model has such layers and they rotate
    /// otherwise than the global ones.
    pub rope_swa: Option<wgpu::Buffer>,
}

impl Activations {
    /// Activations for batches of `batch` tokens (at least [`MATVEC_TOKENS`] rows: the
    /// multi-token matvec reads that many) and `logit_rows` rows of logits.
    pub fn new(b: &mut Builder, cfg: &Config, weights: &Weights, batch: u32, logit_rows: u32) -> Activations {
        let rows = batch.max(MATVEC_TOKENS) as u64;
        let (d, q, kv) = (cfg.d as u64, cfg.q_dim() as u64, cfg.kv_dim() as u64);
        let ffw = ffn_width(cfg) as u64;
        let rope = b.gpu.storage_with("rope", bytemuck::cast_slice(&crate::rope::table(cfg, weights.rope_freqs.as_deref(), cfg.ctx)));
        b.buffers.push(rope.clone());
        // (Gemma 2's sliding-window layers rotate as its global ones: one table serves both.)
        let swa = cfg.swa_rope();
        let own = crate::rope::frequencies(&swa, None) != crate::rope::frequencies(cfg, weights.rope_freqs.as_deref());
        let rope_swa = ((0..cfg.n_layers).any(|l| cfg.family.is_swa(l)) && own).then(|| {
            let table = crate::rope::table(&swa, None, cfg.ctx);
            let buf = b.gpu.storage_with("rope swa", bytemuck::cast_slice(&table));
            b.buffers.push(buf.clone());
            buf
        });
        Activations {
            x: b.storage("x", rows * d * 4),
            xn: b.storage("xn", rows * d * 4),
            qkv: b.storage("qkv", rows * (q + 2 * kv) * 4),
            att: b.storage("att", rows * q * 4),
            gu: b.storage("gate|up", rows * 2 * ffw * 4),
            logits: b.storage("logits", logit_rows as u64 * cfg.vocab as u64 * 4),
            router: b.storage("router", rows * cfg.experts.max(1) as u64 * 4),
            sel: b.storage("sel", rows * cfg.topk.max(1) as u64 * 4),
            gate: b.storage("gate", rows * cfg.topk.max(1) as u64 * 4),
            partials: b.storage("attention partials", attention::partials_bytes(cfg)),
            tokens: b.storage("tokens", rows * 4),
            rope,
            rope_swa,
        }
    }
}

/// How a layer's attention sees positions: its RoPE table and its sliding window
/// ([`crate::attention::window`]; 0: every earlier key).
#[derive(Clone, Copy)]
pub struct Positions<'a> {
    /// The cos/sin table.
    pub rope: &'a wgpu::Buffer,
    /// Keys per query at most.
    pub window: u32,
}

/// Width of a token's FFN activations: `ff`, or `top-k x ff` for MoE (one slot per pick).
fn ffn_width(cfg: &Config) -> u32 {
    if cfg.is_moe() {
        cfg.topk * cfg.ff
    } else {
        cfg.ff
    }
}

/// Records the whole forward pass: the embedding, every layer (each with its KV cache of
/// `kv_bytes` bytes a side), the final RMSNorm and the output head into `a.logits`.
pub fn build(b: &mut Builder, cfg: &Config, weights: &Weights, a: &Activations, fusion: Fusion, kv_bytes: u64) {
    b.embed(&weights.embd, &a.tokens, &a.x, cfg.family.embd_scale);
    let mut carry = Derived::default();
    // SmolLM3's NoPE layers rotate no dims.
    let no_rope = Config { n_rot: 0, ..cfg.clone() };
    for (l, lw) in weights.layers.iter().enumerate() {
        // The op after this layer reads the residual stream through its RMSNorm.
        let next = match weights.layers.get(l + 1) {
            Some(n) => Reader { m: n.qkv.first().map(|m| &m.0), norm: &n.attn_norm },
            None => Reader { m: Some(&weights.output), norm: &weights.out_norm },
        };
        let caches = (b.storage("k cache", kv_bytes), b.storage("v cache", kv_bytes));
        let cfg_l = if cfg.family.uses_rope(l as u32) { cfg } else { &no_rope };
        let window = crate::attention::window(cfg, l as u32);
        let rope = if window > 0 { a.rope_swa.as_ref().unwrap_or(&a.rope) } else { &a.rope };
        carry = layer(b, cfg_l, lw, a, Positions { rope, window }, fusion, &caches, carry, next);
    }
    b.rmsnorm(cfg.d, cfg.eps, &a.x, &weights.out_norm, &a.xn, fusion.norm);
    // Granite divides the logits by its logit scale.
    let io = Io { x: &a.xn, x_stride: cfg.d, y: &a.logits, y_stride: cfg.vocab, y0: 0, accumulate: false, scale: 1.0 / cfg.family.logit_scale };
    b.head(&weights.output, io, Some((&a.x, &weights.out_norm, cfg.eps)), &mut carry);
    if cfg.family.final_softcap > 0.0 {
        b.softcap(cfg.vocab, cfg.family.final_softcap, &a.logits);
    }
}

/// The linear op that reads the residual stream after a layer, through an RMSNorm.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    /// Its matrix (the next layer's first q/k/v matrix, or the output head).
    pub m: Option<&'a Matrix>,
    /// The RMSNorm weights it reads through.
    pub norm: &'a wgpu::Buffer,
}

/// One transformer block: attention, then the FFN, each added to the residual stream `a.x`.
/// `carry`: what the op before derived from the stream for this layer's q/k/v; returns what
/// this layer derives for `next`.
#[allow(clippy::too_many_arguments)]
pub fn layer(
    b: &mut Builder,
    cfg: &Config,
    lw: &Layer,
    a: &Activations,
    at: Positions<'_>,
    f: Fusion,
    (k_cache, v_cache): &(wgpu::Buffer, wgpu::Buffer),
    carry: Derived,
    next: Reader<'_>,
) -> Derived {
    let (d, q, qs) = (cfg.d, cfg.q_dim(), cfg.q_dim() + 2 * cfg.kv_dim());
    let kv = cfg.kv_dim();

    // Attention: q/k/v over the normalised stream, one op per run of matrices.
    b.rmsnorm(d, cfg.eps, &a.x, &lw.attn_norm, &a.xn, f.norm);
    let norm = Fuse { norm: Some((&a.x, &lw.attn_norm, cfg.eps)), ..Default::default() };
    let mut xn = carry;
    let mut v_cached = false;
    for (m, y0) in &lw.qkv {
        // A value projection of its own writes decode's value into the cache (not where a bias
        // is still to be added to it).
        let f16 = cfg.kv == KvType::F16;
        let v_alone = f.v_to_cache && lw.qkv_bias.is_none() && *y0 == q + kv && m.rows == kv && (!f16 || crate::linear::writes_f16_rows(b.gpu, m));
        let cache_row = v_alone.then_some((v_cache, kv, f16));
        b.linear_fused(m, Io { x: &a.xn, x_stride: d, y: &a.qkv, y_stride: qs, y0: *y0, accumulate: false, scale: 1.0 }, Fuse { cache_row, ..norm }, &mut xn);
        v_cached |= v_alone;
    }
    // Qwen2's biases; Qwen3's per-head norms of q and k, before RoPE.
    if let Some(bias) = &lw.qkv_bias {
        b.bias(qs, qs, bias, &a.qkv);
    }
    if let Some((wq, wk)) = &lw.qk_norm {
        b.head_norm(cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, qs, cfg.eps, wq, wk, &a.qkv);
    }
    b.rope_kv(cfg, &a.qkv, qs, at.rope, k_cache, v_cache, f.rope);
    let rope = f.rope.then_some(at.rope);
    let quantize = b.int_form(&lw.o);
    let window = at.window;
    let io = AttentionIo { qkv: &a.qkv, q_stride: qs, k_cache, v_cache, out: &a.att, partials: &a.partials, rope, quantize, v_cached, window };
    let mut att = Derived::quantized(b.attention(cfg, io));
    // With a post-norm the projection writes the branch's output apart (into `xn`, free until
    // the FFN's norm), and the norm adds it to the stream: no integers of the stream from it.
    let post = lw.post_norms.as_ref();
    let ffn_in = match &lw.ffn {
        Ffn::Dense { gate_up, .. } => quant_next(b, f.quant_out && post.is_none(), gate_up.first().map(|m| &m.0), Some(&lw.ffn_norm)),
        Ffn::Moe { .. } => None,
    };
    // Granite scales each residual branch before it is added.
    let o = match post {
        Some(_) => Io { x: &a.att, x_stride: q, y: &a.xn, y_stride: d, y0: 0, accumulate: false, scale: 1.0 },
        None => Io { x: &a.att, x_stride: q, y: &a.x, y_stride: d, y0: 0, accumulate: true, scale: cfg.family.residual_scale },
    };
    let written = b.linear_fused(&lw.o, o, Fuse { quant_out: ffn_in, ..Default::default() }, &mut att).out;
    if let Some((attn_post, _)) = post {
        b.post_norm(d, cfg.eps, &a.xn, attn_post, &a.x);
    }

    match &lw.ffn {
        Ffn::Dense { gate_up, down } => dense_ffn(b, cfg, lw, gate_up, down, a, f, written, next),
        Ffn::Moe { .. } => {
            moe_ffn(b, cfg, lw, a);
            Derived::default()
        }
    }
}

/// The gated MLP: `x += down(silu(gate . xn) * (up . xn))` (GELU for SiLU where the family
/// says, and with a post-norm `x += post_norm(down(..))`). `written`: the integer form of its
/// input the output projection wrote; returns the one the down projection writes for `next`.
#[allow(clippy::too_many_arguments)]
fn dense_ffn(
    b: &mut Builder,
    cfg: &Config,
    lw: &Layer,
    gate_up: &[(Matrix, u32)],
    down: &Matrix,
    a: &Activations,
    f: Fusion,
    written: Option<Quantized>,
    next: Reader<'_>,
) -> Derived {
    let (d, ffw, gelu) = (cfg.d, ffn_width(cfg), cfg.family.gelu);
    b.rmsnorm(d, cfg.eps, &a.x, &lw.ffn_norm, &a.xn, f.norm);
    let glu = f.norm && matches!(gate_up, [(m, _)] if m.parts.len() == 1);
    let down_in = quant_next(b, f.quant_out_glu, Some(down).filter(|_| glu), None);
    let fuse = Fuse { norm: Some((&a.x, &lw.ffn_norm, cfg.eps)), glu, gelu, quant_out: down_in, cache_row: None };
    let mut xn = Derived::quantized(written);
    let mut gu_written = None;
    for (m, y0) in gate_up {
        gu_written = b.linear_fused(m, Io { x: &a.xn, x_stride: d, y: &a.gu, y_stride: 2 * ffw, y0: *y0, accumulate: false, scale: 1.0 }, fuse, &mut xn).out;
    }
    b.swiglu(ffw, ffw, 2 * ffw, &a.gu, gelu, glu);
    let post = lw.post_norms.as_ref().map(|(_, ffn_post)| ffn_post);
    let out = quant_next(b, f.quant_out && post.is_none(), next.m, Some(next.norm));
    let io = match post {
        Some(_) => Io { x: &a.gu, x_stride: 2 * ffw, y: &a.xn, y_stride: d, y0: 0, accumulate: false, scale: 1.0 },
        None => Io { x: &a.gu, x_stride: 2 * ffw, y: &a.x, y_stride: d, y0: 0, accumulate: true, scale: cfg.family.residual_scale },
    };
    let written = b.linear_fused(down, io, Fuse { quant_out: out, ..Default::default() }, &mut Derived::quantized(gu_written)).out;
    if let Some(ffn_post) = post {
        b.post_norm(d, cfg.eps, &a.xn, ffn_post, &a.x);
    }
    Derived::quantized(written)
}

/// Mixtral's experts: the router picks `top-k` experts a token, each computes its SwiGLU MLP,
/// and their outputs are added to the stream weighted by the softmax of the picked router
/// logits.
fn moe_ffn(b: &mut Builder, cfg: &Config, lw: &Layer, a: &Activations) {
    let Ffn::Moe { router, gate, up, down } = &lw.ffn else { return };
    let (d, e, ffw) = (cfg.d, cfg.experts, ffn_width(cfg));
    // The expert kernels read the normalised rows.
    b.rmsnorm(d, cfg.eps, &a.x, &lw.ffn_norm, &a.xn, false);
    b.linear(router, Io { x: &a.xn, x_stride: d, y: &a.router, y_stride: e, y0: 0, accumulate: false, scale: 1.0 });
    b.moe_select(e, cfg.topk, &a.router, &a.sel, &a.gate);
    b.matvec_exp(gate, cfg.topk, &a.sel, &a.xn, d, &a.gu, 2 * ffw, 0);
    b.matvec_exp(up, cfg.topk, &a.sel, &a.xn, d, &a.gu, 2 * ffw, ffw);
    b.swiglu(ffw, ffw, 2 * ffw, &a.gu, cfg.family.gelu, false);
    b.moe_down(down, cfg.topk, &a.sel, &a.gate, &a.gu, 2 * ffw, &a.x);
}

/// [`crate::linear::Fuse::quant_out`] for a linear op whose output the linear op on `m` reads
/// next (through the RMSNorm weights `norm`, if any): where it is `on` and `m`'s one-token form
/// is the integer one.
fn quant_next<'a>(b: &Builder, on: bool, m: Option<&Matrix>, norm: Option<&'a wgpu::Buffer>) -> Option<QuantNext<'a>> {
    m.filter(|m| on && b.int_form(m)).map(|_| QuantNext { norm })
}
