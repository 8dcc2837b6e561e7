//! One op on given inputs, outside a model: the op-level tests (in the style of ggml's
//! test-backend-ops: every op against the CPU reference with a tokens axis), their perf mode, and
//! the browser's `testMatvecQ8` ([`crate::probe`]). Weights are uploaded exactly as
//! [`crate::llama::Llama::load`] uploads them (their stored bytes, split into parts when
//! [`Gpu::max_binding`] asks, regrouped where [`crate::repack`] says), the op is built by the same [`Builder`] methods as the forward
//! program, and run as one batch of `n` tokens (so the kernel variant is the one a model would pick
//! for that batch). Every GPU buffer made is destroyed before returning.
//!
//! A matrix is `rows` rows of `cols` weights of type `ty` stored row-major at byte `offset` of
//! `src` (any byte offset); an expert stack is `experts` such matrices back to back. Activations
//! are token-major: `n` rows of the op's width, `n` given by the input's length. KV caches are
//! passed and returned as f32 values; with `cfg.kv` = [`KvType::F16`] they are held on the GPU as
//! the model holds them (IEEE halves, two per u32: see [`pack_f16`]).

use crate::attention::{partials_bytes, AttentionIo};
use crate::config::{Config, KvType};
use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use crate::gpu::Gpu;
use crate::linear::{Fuse, Io, MATVEC_TOKENS};
use crate::program::{Batch, Builder, Step};
use crate::weights::{Loader, TensorSource};

/// The weight source of ops that read no weights.
const NO_WEIGHTS: &Vec<u8> = &Vec::new();

/// Tokens of a batch from the length of token-major data of `width` values per token.
fn tokens_of(what: &str, len: usize, width: u32) -> Result<u32> {
    if width == 0 || len == 0 || len % width as usize != 0 {
        return Err(Error::Input(format!("{what} has {len} values: not a whole number of rows of {width}")));
    }
    Ok((len / width as usize) as u32)
}

fn check_len(what: &str, got: usize, want: u64) -> Result<()> {
    if got as u64 != want {
        return Err(Error::Input(format!("{what} has {got} values, expected {want}")));
    }
    Ok(())
}

/// A storage buffer holding `data`, at least `min_len` values long (zero-padded: the
/// multi-token matvec reads [`MATVEC_TOKENS`] rows whatever the batch).
fn input<T: bytemuck::Pod>(b: &mut Builder, label: &str, data: &[T], min_len: u64) -> wgpu::Buffer {
    let buf = b.storage(label, (data.len() as u64).max(min_len) * 4);
    b.gpu.queue.write_buffer(&buf, 0, bytemuck::cast_slice(data));
    buf
}

/// `values` as IEEE halves (rounded to nearest, ties to even) packed two per u32, the first in the
/// low 16 bits: the layout of WGSL's `pack2x16float` and of a [`KvType::F16`] cache. An odd
/// length is padded with 0.
pub fn pack_f16(values: &[f32]) -> Vec<u32> {
    let h = |x: f32| half::f16::from_f32(x).to_bits() as u32;
    values.chunks(2).map(|p| h(p[0]) | h(p.get(1).copied().unwrap_or(0.0)) << 16).collect()
}

/// The values of [`pack_f16`]'s words, two per word.
pub fn unpack_f16(words: &[u32]) -> Vec<f32> {
    words.iter().flat_map(|&w| [w as u16, (w >> 16) as u16].map(|b| half::f16::from_bits(b).to_f32())).collect()
}

/// A KV-cache buffer holding `values` as `kv` stores them.
fn kv_input(b: &mut Builder, label: &str, values: &[f32], kv: KvType) -> wgpu::Buffer {
    match kv {
        KvType::F32 => input(b, label, values, 1),
        KvType::F16 => input(b, label, &pack_f16(values), 1),
    }
}

/// A KV cache read back (as f32 words, `kv` values) to its f32 values.
fn kv_output(words: Vec<f32>, kv: KvType) -> Vec<f32> {
    match kv {
        KvType::F32 => words,
        KvType::F16 => unpack_f16(&words.iter().map(|w| w.to_bits()).collect::<Vec<_>>()),
    }
}

/// Buffers to read back after the run, with their lengths in f32.
type Outputs = Vec<(wgpu::Buffer, u64)>;

/// A batch of `n` tokens at `pos0` (splits 1 unless given).
fn batch(n: u32, pos0: u32, splits: u32) -> Batch {
    Batch { n_tokens: n, pos0, splits, all_logits: false }
}

/// Builds a single-op program with `build`, runs `batch` `repeats` times (0: once, untimed), reads
/// back what `build` returned, frees everything. Returns the outputs and, when timed, the wall
/// seconds per run (best of five timed passes after a 0.2 s warm-up) and the GPU seconds per run
/// from timestamp queries (when the device has them).
async fn run(
    gpu: &Gpu,
    src: &dyn TensorSource,
    batch: Batch,
    repeats: u32,
    build: impl FnOnce(&mut Loader, &mut Builder) -> Result<Outputs>,
) -> Result<(Vec<Vec<f32>>, Option<(f64, Option<f64>)>)> {
    crate::policy::check(gpu)?;
    let mut ld = Loader::new(gpu, src);
    let mut b = Builder::new(gpu);
    let built = build(&mut ld, &mut b);
    let result = async {
        let outputs = built?;
        // The weights' regrouping ([`crate::repack`]), once, before the timed runs.
        for r in std::mem::take(&mut ld.repacks) {
            b.repack(&r);
        }
        b.setup.submit(gpu, &batch);
        gpu.queue.write_buffer(&b.step, 0, bytemuck::bytes_of(&Step::of(&batch)));
        let timing = if repeats == 0 {
            b.program.submit(gpu, &batch);
            None
        } else {
            Some(time(gpu, &b, &batch, repeats)?)
        };
        let mut out = Vec::new();
        for (buf, n) in &outputs {
            out.push(bytemuck::pod_collect_to_vec(&gpu.read(buf, n * 4).await?));
        }
        gpu.check()?;
        Ok((out, timing))
    }
    .await;
    for buf in ld.buffers.iter().chain(&b.buffers) {
        buf.destroy();
    }
    result
}

#[cfg(target_arch = "wasm32")]
fn time(_: &Gpu, _: &Builder, _: &Batch, _: u32) -> Result<(f64, Option<f64>)> {
    Err(Error::Input("op timing is native only".into()))
}

#[cfg(not(target_arch = "wasm32"))]
fn time(gpu: &Gpu, b: &Builder, batch: &Batch, repeats: u32) -> Result<(f64, Option<f64>)> {
    let timed = gpu.device.features().contains(wgpu::Features::TIMESTAMP_QUERY);
    let queries =
        timed.then(|| gpu.device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("op timestamps"), ty: wgpu::QueryType::Timestamp, count: 2 }));
    let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("op timestamps"),
        size: 16,
        usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let (mut wall, mut on_gpu) = (f64::INFINITY, f64::INFINITY);
    let warm = std::time::Instant::now();
    let mut pass = 0;
    while pass < 6 {
        // Warm-up: about 0.2 s first, so that a GPU that idled is back at its working clocks.
        let warming = pass == 0 && warm.elapsed().as_secs_f64() < 0.2;
        let t = std::time::Instant::now();
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let timestamp_writes = queries.as_ref().map(|q| wgpu::ComputePassTimestampWrites {
                query_set: q,
                beginning_of_pass_write_index: Some(0),
                end_of_pass_write_index: Some(1),
            });
            let mut cp = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
            for _ in 0..repeats {
                b.program.record(&mut cp, batch);
            }
        }
        if let Some(q) = &queries {
            enc.resolve_query_set(q, 0..2, &resolve, 0);
        }
        gpu.queue.submit([enc.finish()]);
        gpu.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
        let elapsed = t.elapsed().as_secs_f64();
        if warming {
            continue;
        }
        pass += 1;
        if pass > 1 {
            wall = wall.min(elapsed / repeats as f64);
            if timed {
                let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&pollster::block_on(gpu.read(&resolve, 16))?);
                let ns = ticks[1].saturating_sub(ticks[0]) as f64 * gpu.queue.get_timestamp_period() as f64;
                on_gpu = on_gpu.min(ns * 1e-9 / repeats as f64);
            }
        }
    }
    resolve.destroy();
    Ok((wall, timed.then_some(on_gpu)))
}

/// `Y = W X` through the linear op for `ty` (`x`: n rows of `cols`; returns n rows of `rows`),
/// with the kernel the batch size picks ([`crate::policy`]). With `repeats > 0` also the
/// wall and GPU seconds per run (native only).
///
/// # Errors
/// [`Error::Input`] for a wrong `x` length; [`Error::Malformed`] when `cols` is not whole blocks;
/// [`Error::TooLarge`] when a row exceeds one binding; read errors of `src`; [`Error::Gpu`].
#[allow(clippy::too_many_arguments)]
pub async fn linear_timed(
    gpu: &Gpu,
    src: &dyn TensorSource,
    ty: GgmlType,
    offset: u64,
    rows: u32,
    cols: u32,
    x: &[f32],
    repeats: u32,
) -> Result<(Vec<f32>, Option<(f64, Option<f64>)>)> {
    let n = tokens_of("x", x.len(), cols)?;
    let (mut out, t) = run(gpu, src, batch(n, 0, 1), repeats, |ld, b| {
        let w = ld.matrix("oneshot W", ty, offset, rows, cols, crate::weights::RowOrder::Stored)?;
        let xb = input(b, "oneshot x", x, MATVEC_TOKENS as u64 * cols as u64);
        let y = b.storage("oneshot y", n as u64 * rows as u64 * 4);
        b.linear(&w, Io { x: &xb, x_stride: cols, y: &y, y_stride: rows, y0: 0, accumulate: false, scale: 1.0 });
        Ok(vec![(y, n as u64 * rows as u64)])
    })
    .await?;
    Ok((out.remove(0), t))
}

/// `Y = W X` through the linear op (see [`linear_timed`]).
///
/// # Errors
/// As [`linear_timed`].
pub async fn linear(gpu: &Gpu, src: &dyn TensorSource, ty: GgmlType, offset: u64, rows: u32, cols: u32, x: &[f32]) -> Result<Vec<f32>> {
    Ok(linear_timed(gpu, src, ty, offset, rows, cols, x, 0).await?.0)
}

/// A dense layer's input side as the forward program builds it, with the decode fusions where
/// [`crate::policy::fused`] allows: `Y = W rmsnorm(X)` with norm weights `norm = (w, eps)`
/// (else `W X`), and with `glu` (W is `[gate; up]`, `rows` even) `silu(gate . x) * (up . x)`
/// (with `gelu`, GELU's tanh form for SiLU), `rows / 2` values per token. The batch size picks the kernels, as in a model: the fused
/// matrix-vector forms, or `rmsnorm`, the tiled kernel and `swiglu`.
///
/// # Errors
/// As [`linear`]; [`Error::Input`] for a norm of other than `cols` values or an odd `rows` with `glu`.
#[allow(clippy::too_many_arguments)]
pub async fn linear_fused(
    gpu: &Gpu,
    src: &dyn TensorSource,
    ty: GgmlType,
    offset: u64,
    rows: u32,
    cols: u32,
    x: &[f32],
    norm: Option<(&[f32], f32)>,
    glu: bool,
    gelu: bool,
) -> Result<Vec<f32>> {
    let n = tokens_of("x", x.len(), cols)?;
    if let Some((w, _)) = norm {
        check_len("norm weights", w.len(), cols as u64)?;
    }
    if glu && rows % 2 != 0 {
        return Err(Error::Input(format!("glu needs an even number of rows, got {rows}")));
    }
    let fuse = crate::policy::fused(gpu);
    let (mut out, _) = run(gpu, src, batch(n, 0, 1), 0, |ld, b| {
        let w = ld.matrix("oneshot W", ty, offset, rows, cols, crate::weights::RowOrder::Stored)?;
        let xb = input(b, "oneshot x", x, MATVEC_TOKENS as u64 * cols as u64);
        let y = b.storage("oneshot y", n as u64 * rows as u64 * 4);
        let io = |x| Io { x, x_stride: cols, y: &y, y_stride: rows, y0: 0, accumulate: false, scale: 1.0 };
        let norm = match norm {
            Some((nw, eps)) => {
                let nwb = input(b, "oneshot norm", nw, 1);
                let xn = b.storage("oneshot xn", MATVEC_TOKENS.max(n) as u64 * cols as u64 * 4);
                b.rmsnorm(cols, eps, &xb, &nwb, &xn, fuse);
                Some((xn, nwb, eps))
            }
            None => None,
        };
        let fuse_glu = glu && fuse && w.parts.len() == 1;
        let (x_in, fused_norm) = match &norm {
            Some((xn, nwb, eps)) => (xn, Some((&xb, nwb, *eps))),
            None => (&xb, None),
        };
        let fused = b.linear_fused(&w, io(x_in), Fuse { norm: fused_norm, glu: fuse_glu, gelu, ..Default::default() }, &mut Default::default());
        debug_assert_eq!((fused.norm, fused.glu), (fused_norm.is_some() && fuse, fuse_glu));
        if glu {
            b.swiglu(rows / 2, rows / 2, rows, &y, gelu, fuse_glu);
        }
        Ok(vec![(y, n as u64 * rows as u64)])
    })
    .await?;
    let y = out.remove(0);
    let width = if glu { rows / 2 } else { rows } as usize;
    Ok(y.chunks(rows as usize).flat_map(|r| r[..width].to_vec()).collect())
}

/// Rows `tokens[i]` of the table through the `embed` op for `ty` (returns n rows of `cols`).
///
/// # Errors
/// As [`linear`]; [`Error::Input`] when a token is not below `rows`.
pub async fn embed(gpu: &Gpu, src: &dyn TensorSource, ty: GgmlType, offset: u64, rows: u32, cols: u32, tokens: &[u32]) -> Result<Vec<f32>> {
    if tokens.is_empty() || tokens.iter().any(|&t| t >= rows) {
        return Err(Error::Input(format!("tokens must be a non-empty list below {rows}")));
    }
    let n = tokens.len() as u32;
    let (mut out, _) = run(gpu, src, batch(n, 0, 1), 0, |ld, b| {
        let e = ld.matrix("oneshot E", ty, offset, rows, cols, crate::weights::RowOrder::Stored)?;
        let tb = input(b, "oneshot tokens", tokens, 1);
        let x = b.storage("oneshot x", n as u64 * cols as u64 * 4);
        b.embed(&e, &tb, &x, 1.0);
        Ok(vec![(x, n as u64 * cols as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// `y[i][j * rows ..] = W[sel[i][j]] x[i]` through the `matvec_exp` op for `ty` over an expert
/// stack, `k` picks per token (`sel`: n x k, `x`: n x cols; returns n x k x rows).
///
/// # Errors
/// As [`linear`]; [`Error::Input`] when a pick is not below `experts` or lengths disagree.
#[allow(clippy::too_many_arguments)]
pub async fn matvec_exp(
    gpu: &Gpu,
    src: &dyn TensorSource,
    ty: GgmlType,
    offset: u64,
    experts: u32,
    rows: u32,
    cols: u32,
    k: u32,
    sel: &[u32],
    x: &[f32],
) -> Result<Vec<f32>> {
    let n = tokens_of("x", x.len(), cols)?;
    check_len("sel", sel.len(), n as u64 * k as u64)?;
    if sel.iter().any(|&e| e >= experts) {
        return Err(Error::Input(format!("picks must be below {experts}")));
    }
    let (mut out, _) = run(gpu, src, batch(n, 0, 1), 0, |ld, b| {
        let w = ld.experts("oneshot W", ty, offset, experts, rows, cols)?;
        let s = input(b, "oneshot sel", sel, 1);
        let xb = input(b, "oneshot x", x, 1);
        let y = b.storage("oneshot y", n as u64 * (k * rows) as u64 * 4);
        b.matvec_exp(&w, k, &s, &xb, cols, &y, k * rows, 0);
        Ok(vec![(y, n as u64 * (k * rows) as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// `y0[i] + sum_j gate[i][j] W[sel[i][j]] h[i][j]` through the `moe_down` op for `ty` over an
/// expert stack (`sel`, `gate`: n x k; `h`: n x k x cols; `y0`: n x rows; returns n x rows).
///
/// # Errors
/// As [`matvec_exp`]; [`Error::Input`] for wrong `gate`, `h` or `y0` lengths.
#[allow(clippy::too_many_arguments)]
pub async fn moe_down(
    gpu: &Gpu,
    src: &dyn TensorSource,
    ty: GgmlType,
    offset: u64,
    experts: u32,
    rows: u32,
    cols: u32,
    k: u32,
    sel: &[u32],
    gate: &[f32],
    h: &[f32],
    y0: &[f32],
) -> Result<Vec<f32>> {
    let n = tokens_of("y0", y0.len(), rows)?;
    check_len("sel", sel.len(), n as u64 * k as u64)?;
    check_len("gate", gate.len(), n as u64 * k as u64)?;
    check_len("h", h.len(), n as u64 * k as u64 * cols as u64)?;
    if sel.iter().any(|&e| e >= experts) {
        return Err(Error::Input(format!("picks must be below {experts}")));
    }
    let (mut out, _) = run(gpu, src, batch(n, 0, 1), 0, |ld, b| {
        let w = ld.experts("oneshot W", ty, offset, experts, rows, cols)?;
        let s = input(b, "oneshot sel", sel, 1);
        let g = input(b, "oneshot gate", gate, 1);
        let hb = input(b, "oneshot h", h, 1);
        let y = input(b, "oneshot y", y0, 1);
        b.moe_down(&w, k, &s, &g, &hb, k * cols, &y);
        Ok(vec![(y, n as u64 * rows as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// RMSNorm of each row of `x` (n x d) with weight `w` (d values).
///
/// # Errors
/// [`Error::Input`] for inconsistent lengths; [`Error::Gpu`].
pub async fn rmsnorm(gpu: &Gpu, x: &[f32], w: &[f32], eps: f32) -> Result<Vec<f32>> {
    let d = w.len() as u32;
    let n = tokens_of("x", x.len(), d)?;
    let (mut out, _) = run(gpu, NO_WEIGHTS, batch(n, 0, 1), 0, |_, b| {
        let xb = input(b, "oneshot x", x, 1);
        let wb = input(b, "oneshot w", w, 1);
        let y = b.storage("oneshot y", x.len() as u64 * 4);
        b.rmsnorm(d, eps, &xb, &wb, &y, false);
        Ok(vec![(y, x.len() as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// `y + rmsnorm(x) * w` for each row of `x` and of `y` (n x d; `w`: d values): the post-norm
/// op ([`Builder::post_norm`]).
///
/// # Errors
/// [`Error::Input`] for inconsistent lengths; [`Error::Gpu`].
pub async fn post_norm(gpu: &Gpu, x: &[f32], w: &[f32], eps: f32, y: &[f32]) -> Result<Vec<f32>> {
    let d = w.len() as u32;
    let n = tokens_of("x", x.len(), d)?;
    check_len("y", y.len(), x.len() as u64)?;
    let (mut out, _) = run(gpu, NO_WEIGHTS, batch(n, 0, 1), 0, |_, b| {
        let xb = input(b, "oneshot x", x, 1);
        let wb = input(b, "oneshot w", w, 1);
        let yb = input(b, "oneshot y", y, 1);
        b.post_norm(d, eps, &xb, &wb, &yb);
        Ok(vec![(yb, y.len() as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// The final-logit soft-cap `c tanh(z / c)` over rows of `n` logits, as the forward pass runs it
/// after the output head for a batch of `rows` tokens: the last row's alone (the head writes
/// row 0), or with `all_logits` every row. Rows it does not cap come back as they went in.
///
/// # Errors
/// [`Error::Input`] for a length that is not `rows` rows of `n`; [`Error::Gpu`].
pub async fn softcap(gpu: &Gpu, logits: &[f32], n: u32, c: f32, all_logits: bool) -> Result<Vec<f32>> {
    let rows = tokens_of("logits", logits.len(), n)?;
    let (mut out, _) = run(gpu, NO_WEIGHTS, Batch { all_logits, ..batch(rows, 0, 1) }, 0, |_, b| {
        let z = input(b, "oneshot logits", logits, 1);
        b.softcap(n, c, &z);
        Ok(vec![(z, logits.len() as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// SwiGLU of each row `[g | u]` of `gu` (n x 2f): returns n x f values silu(g) * u (with
/// `gelu`, GELU's tanh form for SiLU: GEGLU).
///
/// # Errors
/// [`Error::Input`] for a length that is not rows of `2f`; [`Error::Gpu`].
pub async fn swiglu(gpu: &Gpu, gu: &[f32], f: u32, gelu: bool) -> Result<Vec<f32>> {
    let n = tokens_of("gu", gu.len(), 2 * f)?;
    let (mut out, _) = run(gpu, NO_WEIGHTS, batch(n, 0, 1), 0, |_, b| {
        let buf = input(b, "oneshot gu", gu, 1);
        b.swiglu(f, f, 2 * f, &buf, gelu, false);
        Ok(vec![(buf, gu.len() as u64)])
    })
    .await?;
    Ok(out.remove(0).chunks(2 * f as usize).flat_map(|r| r[..f as usize].to_vec()).collect())
}

/// `y + bias` for each row of `y` (n x `stride`), the bias over its first `bias.len()` values.
///
/// # Errors
/// [`Error::Input`] for a length that is not whole rows or a bias wider than a row; [`Error::Gpu`].
pub async fn bias(gpu: &Gpu, y: &[f32], stride: u32, bias: &[f32]) -> Result<Vec<f32>> {
    if bias.len() as u64 > stride as u64 {
        return Err(Error::Input(format!("a bias of {} values does not fit rows of {stride}", bias.len())));
    }
    let n = tokens_of("y", y.len(), stride)?;
    let (mut out, _) = run(gpu, NO_WEIGHTS, batch(n, 0, 1), 0, |_, b| {
        let yb = input(b, "oneshot y", y, 1);
        let bb = input(b, "oneshot bias", bias, 1);
        b.bias(bias.len() as u32, stride, &bb, &yb);
        Ok(vec![(yb, y.len() as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// Each row of `y` (n x `stride`) with its first `n_q` heads of `wq.len()` values RMSNorm'd
/// with weights `wq` and the `n_kv` after them with `wk` (`shaders/head_norm.wgsl`).
///
/// # Errors
/// [`Error::Input`] for weights of different lengths, heads that do not fit a row, or a length
/// that is not whole rows; [`Error::Gpu`].
pub async fn head_norm(gpu: &Gpu, y: &[f32], stride: u32, (n_q, n_kv): (u32, u32), wq: &[f32], wk: &[f32], eps: f32) -> Result<Vec<f32>> {
    let hd = wq.len() as u32;
    if wk.len() != wq.len() || (n_q as u64 + n_kv as u64) * hd as u64 > stride as u64 {
        return Err(Error::Input(format!("{n_q} + {n_kv} heads of {} and {} values in rows of {stride}", wq.len(), wk.len())));
    }
    let n = tokens_of("y", y.len(), stride)?;
    let (mut out, _) = run(gpu, NO_WEIGHTS, batch(n, 0, 1), 0, |_, b| {
        let yb = input(b, "oneshot y", y, 1);
        let (qb, kb) = (input(b, "oneshot wq", wq, 1), input(b, "oneshot wk", wk, 1));
        b.head_norm(hd, n_q, n_kv, stride, eps, &qb, &kb, &yb);
        Ok(vec![(yb, y.len() as u64)])
    })
    .await?;
    Ok(out.remove(0))
}

/// The first `cols` values of each row of `x` (`n x x_stride`) as the matrix-unit matmul's f16
/// halves (`shaders/split.wgsl`): `(hi, lo)`, each `n x` [`crate::split::halves_stride`]`(cols)`
/// values (the f16s widened to f32), rows padded with zeros.
///
/// # Errors
/// [`Error::Input`] if `x` is not whole rows, `cols` exceeds `x_stride`, or the device has no
/// f16 in shaders.
pub async fn split(gpu: &Gpu, x: &[f32], x_stride: u32, cols: u32) -> Result<(Vec<f32>, Vec<f32>)> {
    if !gpu.device.features().contains(wgpu::Features::SHADER_F16) {
        return Err(Error::Input(format!("{} has no f16 in shaders (split.wgsl needs it)", gpu.adapter_info)));
    }
    if cols > x_stride {
        return Err(Error::Input(format!("{cols} values a row do not fit a row stride of {x_stride}")));
    }
    let n = tokens_of("x", x.len(), x_stride)?;
    let words = n as u64 * crate::split::halves_stride(cols) as u64 / 2;
    let (mut out, _) = run(gpu, NO_WEIGHTS, batch(n, 0, 1), 0, |_, b| {
        let xb = input(b, "oneshot x", x, 1);
        let h = b.halves(None, &xb, x_stride, cols, false, |_| true);
        Ok(vec![(h.hi, words), (h.lo, words)])
    })
    .await?;
    // Read back as f32 words: two f16s each, low half first.
    let widen = |v: Vec<f32>| unpack_f16(bytemuck::cast_slice(&v));
    let lo = widen(out.pop().unwrap_or_default());
    Ok((widen(out.pop().unwrap_or_default()), lo))
}

/// Top-`k` experts and gates of each row of router logits `r` (n x experts): (sel, gate), n x k each.
///
/// # Errors
/// [`Error::Input`] for inconsistent lengths or k of 0 or above 16 or `experts` above 256.
pub async fn moe_select(gpu: &Gpu, r: &[f32], experts: u32, k: u32) -> Result<(Vec<u32>, Vec<f32>)> {
    if k == 0 || k > experts || k > crate::config::MAX_TOPK || experts > crate::config::MAX_EXPERTS {
        return Err(Error::Input(format!("top-{k} of {experts} experts is not supported")));
    }
    let n = tokens_of("router logits", r.len(), experts)?;
    let (mut out, _) = run(gpu, NO_WEIGHTS, batch(n, 0, 1), 0, |_, b| {
        let rb = input(b, "oneshot router", r, 1);
        let sel = b.storage("oneshot sel", n as u64 * k as u64 * 4);
        let gate = b.storage("oneshot gate", n as u64 * k as u64 * 4);
        b.moe_select(experts, k, &rb, &sel, &gate);
        Ok(vec![(sel, n as u64 * k as u64), (gate, n as u64 * k as u64)])
    })
    .await?;
    let gate = out.pop().unwrap_or_default();
    let sel = out.pop().unwrap_or_default().iter().map(|v| v.to_bits()).collect();
    Ok((sel, gate))
}

/// RoPE and the KV-cache write for a batch at positions `pos0 ..`: `qkv` is n rows of
/// `[q | k | v]` (`cfg`'s widths), the caches `cfg.ctx` positions (their initial contents; with
/// an f16 `cfg.kv` rounded to f16 on the way in). Returns (qkv with q rotated, k cache, v cache).
///
/// # Errors
/// [`Error::Input`] for inconsistent lengths or positions past `cfg.ctx`.
pub async fn rope_kv(gpu: &Gpu, cfg: &Config, freqs: Option<&[f32]>, qkv: &[f32], pos0: u32, k_cache: &[f32], v_cache: &[f32]) -> Result<[Vec<f32>; 3]> {
    let qs = cfg.q_dim() + 2 * cfg.kv_dim();
    let n = tokens_of("qkv", qkv.len(), qs)?;
    let cache = cfg.ctx as u64 * cfg.kv_dim() as u64;
    check_len("k cache", k_cache.len(), cache)?;
    check_len("v cache", v_cache.len(), cache)?;
    if pos0 + n > cfg.ctx {
        return Err(Error::Input(format!("positions {pos0}..{} past ctx {}", pos0 + n, cfg.ctx)));
    }
    let (out, _) = run(gpu, NO_WEIGHTS, batch(n, pos0, 1), 0, |_, b| {
        let table = crate::rope::table(cfg, freqs, cfg.ctx);
        let rope = input(b, "oneshot rope", &table, 1);
        let q = input(b, "oneshot qkv", qkv, 1);
        let kc = kv_input(b, "oneshot k cache", k_cache, cfg.kv);
        let vc = kv_input(b, "oneshot v cache", v_cache, cfg.kv);
        b.rope_kv(cfg, &q, qs, &rope, &kc, &vc, false);
        let words = cache * cfg.kv.bytes() as u64 / 4;
        Ok(vec![(q, qkv.len() as u64), (kc, words), (vc, words)])
    })
    .await?;
    let mut it = out.into_iter();
    let mut next = || it.next().unwrap_or_default();
    Ok([next(), kv_output(next(), cfg.kv), kv_output(next(), cfg.kv)])
}

/// An attention call's `[q | k | v]` row width, token count and cache length (floats), checked:
/// whole rows, caches of `cfg.ctx` positions, positions within it, 1 to `MAX_SPLITS` splits (one
/// only beyond `SPLIT_MAX_TOKENS` tokens).
fn attention_shape(cfg: &Config, qkv: &[f32], pos0: u32, k_cache: &[f32], v_cache: &[f32], splits: u32) -> Result<(u32, u32, u64)> {
    let qs = cfg.q_dim() + 2 * cfg.kv_dim();
    let n = tokens_of("qkv", qkv.len(), qs)?;
    let cache = cfg.ctx as u64 * cfg.kv_dim() as u64;
    check_len("k cache", k_cache.len(), cache)?;
    check_len("v cache", v_cache.len(), cache)?;
    if pos0 + n > cfg.ctx || splits == 0 || splits > crate::attention::MAX_SPLITS || (splits > 1 && n > crate::attention::SPLIT_MAX_TOKENS) {
        return Err(Error::Input(format!("{n} tokens at {pos0} with {splits} splits (ctx {})", cfg.ctx)));
    }
    Ok((qs, n, cache))
}

/// Attention of a batch of n queries at positions `pos0 ..` (`qkv`: n rows of `[q | k | v]`, q
/// used; layer 0's sliding window and the family's score soft-cap, [`crate::attention::window`]) over the caches (`cfg.ctx` positions, keys 0 .. pos0 + n used; with an f16 `cfg.kv`
/// rounded to f16 on the way in), with `splits` key splits (1: none). Returns n rows of `q_dim`. With `repeats > 0` also the timing (native only).
///
/// # Errors
/// [`Error::Input`] for inconsistent lengths, positions past `cfg.ctx`, or splits with more than
/// [`crate::attention::SPLIT_MAX_TOKENS`] tokens.
#[allow(clippy::too_many_arguments)]
pub async fn attention_timed(
    gpu: &Gpu,
    cfg: &Config,
    qkv: &[f32],
    pos0: u32,
    k_cache: &[f32],
    v_cache: &[f32],
    splits: u32,
    repeats: u32,
) -> Result<(Vec<f32>, Option<(f64, Option<f64>)>)> {
    let (qs, n, _) = attention_shape(cfg, qkv, pos0, k_cache, v_cache, splits)?;
    let (mut out, t) = run(gpu, NO_WEIGHTS, batch(n, pos0, splits), repeats, |_, b| {
        let q = input(b, "oneshot qkv", qkv, 1);
        let kc = kv_input(b, "oneshot k cache", k_cache, cfg.kv);
        let vc = kv_input(b, "oneshot v cache", v_cache, cfg.kv);
        let o = b.storage("oneshot o", n as u64 * cfg.q_dim() as u64 * 4);
        let partials = b.storage("oneshot partials", partials_bytes(cfg));
        b.attention(cfg, attention_io(cfg, qs, [&q, &kc, &vc, &o, &partials], None));
        Ok(vec![(o, n as u64 * cfg.q_dim() as u64)])
    })
    .await?;
    Ok((out.remove(0), t))
}

/// The attention op's buffers (`[qkv, k cache, v cache, out, partials]`, the RoPE table where it
/// is fused in) as a model's layer 0 hands them over: its sliding window, no integers out, the
/// value not written by the value projection.
fn attention_io<'a>(
    cfg: &Config,
    q_stride: u32,
    [qkv, k_cache, v_cache, out, partials]: [&'a wgpu::Buffer; 5],
    rope: Option<&'a wgpu::Buffer>,
) -> AttentionIo<'a> {
    AttentionIo { qkv, q_stride, k_cache, v_cache, out, partials, rope, quantize: false, v_cached: false, window: crate::attention::window(cfg, 0) }
}

/// RoPE + KV write then attention, as the forward pass records them for a batch of n tokens at
/// `pos0` (`qkv`: n rows of `[q | k | v]` before RoPE; `freqs`: Llama-3 `rope_freqs` factors):
/// one-token batches with RoPE and the cache write fused into attention where
/// [`crate::attention::fuses_rope`], else the `rope_kv` op first. Returns the attention output
/// (n rows of `q_dim`) and the k and v caches after.
///
/// # Errors
/// As [`rope_kv`] and [`attention_timed`].
#[allow(clippy::too_many_arguments)]
pub async fn rope_attention(
    gpu: &Gpu,
    cfg: &Config,
    freqs: Option<&[f32]>,
    qkv: &[f32],
    pos0: u32,
    k_cache: &[f32],
    v_cache: &[f32],
    splits: u32,
) -> Result<[Vec<f32>; 3]> {
    let (qs, n, cache) = attention_shape(cfg, qkv, pos0, k_cache, v_cache, splits)?;
    let fused = crate::attention::fuses_rope(gpu, cfg);
    let (out, _) = run(gpu, NO_WEIGHTS, batch(n, pos0, splits), 0, |_, b| {
        let rope = input(b, "oneshot rope", &crate::rope::table(cfg, freqs, cfg.ctx), 1);
        let q = input(b, "oneshot qkv", qkv, 1);
        let kc = kv_input(b, "oneshot k cache", k_cache, cfg.kv);
        let vc = kv_input(b, "oneshot v cache", v_cache, cfg.kv);
        let o = b.storage("oneshot o", n as u64 * cfg.q_dim() as u64 * 4);
        let partials = b.storage("oneshot partials", partials_bytes(cfg));
        b.rope_kv(cfg, &q, qs, &rope, &kc, &vc, fused);
        b.attention(cfg, attention_io(cfg, qs, [&q, &kc, &vc, &o, &partials], fused.then_some(&rope)));
        let words = cache * cfg.kv.bytes() as u64 / 4;
        Ok(vec![(o, n as u64 * cfg.q_dim() as u64), (kc, words), (vc, words)])
    })
    .await?;
    let mut it = out.into_iter();
    let mut next = || it.next().unwrap_or_default();
    Ok([next(), kv_output(next(), cfg.kv), kv_output(next(), cfg.kv)])
}

/// Attention (see [`attention_timed`]).
///
/// # Errors
/// As [`attention_timed`].
pub async fn attention(gpu: &Gpu, cfg: &Config, qkv: &[f32], pos0: u32, k_cache: &[f32], v_cache: &[f32], splits: u32) -> Result<Vec<f32>> {
    Ok(attention_timed(gpu, cfg, qkv, pos0, k_cache, v_cache, splits, 0).await?.0)
}
