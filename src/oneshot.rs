//! One weight kernel on one tensor, outside the forward program, for kernel tests and the
//! browser's `testMatvecQ8` ([`crate::probe`]): the tensor is uploaded exactly as
//! [`crate::llama::Llama::load`] uploads weights (its stored bytes, split into parts when
//! [`Gpu::max_binding`] asks), the kernel is composed for its format and recorded as the forward
//! program records it, and the output is read back. Every GPU buffer made is destroyed before
//! returning.
//!
//! A matrix is `rows` rows of `cols` weights of type `ty` stored row-major at byte `offset` of
//! `src` (any byte offset); an expert stack is `experts` such matrices back to back.

use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use crate::gpu::{record, Gpu, Kernels};
use crate::llama::Builder;
use crate::weights::{Loader, TensorSource};

fn check_len(what: &str, got: usize, want: u64) -> Result<()> {
    if got as u64 != want {
        return Err(Error::Input(format!("{what} has {got} values, expected {want}")));
    }
    Ok(())
}

/// Uploads with `fill`, records with `build`, runs, reads `out_len` f32 values of the buffer
/// `build` returns, and frees everything.
async fn run(
    gpu: &Gpu,
    src: &dyn TensorSource,
    out_len: u64,
    build: impl FnOnce(&mut Loader, &mut Builder) -> Result<wgpu::Buffer>,
) -> Result<Vec<f32>> {
    let mut ld = Loader::new(gpu, src);
    let mut kernels = Kernels::new();
    let mut b = Builder { gpu, kernels: &mut kernels, out: Vec::new(), buffers: Vec::new() };
    let built = build(&mut ld, &mut b);
    let result = async {
        let out = built?;
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            record(&mut pass, &b.out);
        }
        gpu.queue.submit([enc.finish()]);
        let bytes = gpu.read(&out, out_len * 4).await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
    .await;
    for buf in ld.buffers.iter().chain(&b.buffers) {
        buf.destroy();
    }
    result
}

/// A storage buffer holding `data`, remembered by the builder for freeing.
fn vector(b: &mut Builder, label: &str, data: &[u8]) -> wgpu::Buffer {
    let buf = b.gpu.storage_with(label, data);
    b.buffers.push(buf.clone());
    buf
}

/// `y = W x` through the `matvec` kernel for `ty` (`x`: `cols` values; returns `rows`).
///
/// # Errors
/// [`Error::Input`] for a wrong `x` length; [`Error::Malformed`] when `cols` is not whole blocks;
/// [`Error::TooLarge`] when a row exceeds one binding; read errors of `src`; [`Error::Gpu`].
pub async fn matvec(gpu: &Gpu, src: &dyn TensorSource, ty: GgmlType, offset: u64, rows: u32, cols: u32, x: &[f32]) -> Result<Vec<f32>> {
    check_len("x", x.len(), cols as u64)?;
    run(gpu, src, rows as u64, |ld, b| {
        let w = ld.matrix("oneshot W", ty, offset, rows, cols)?;
        let xb = vector(b, "oneshot x", bytemuck::cast_slice(x));
        let y = vector(b, "oneshot y", &vec![0u8; rows as usize * 4]);
        b.matvec(&w, &xb, &y, false);
        Ok(y)
    })
    .await
}

/// Row `token` of the table through the `embed` kernel for `ty` (returns `cols` values).
///
/// # Errors
/// As [`matvec`]; [`Error::Input`] when `token >= rows`.
pub async fn embed(gpu: &Gpu, src: &dyn TensorSource, ty: GgmlType, offset: u64, rows: u32, cols: u32, token: u32) -> Result<Vec<f32>> {
    if token >= rows {
        return Err(Error::Input(format!("token {token} is not below {rows} rows")));
    }
    run(gpu, src, cols as u64, |ld, b| {
        let e = ld.matrix("oneshot E", ty, offset, rows, cols)?;
        let x = vector(b, "oneshot x", &vec![0u8; cols as usize * 4]);
        let step = b.uniform([0, token, cols, 0]);
        b.embed(&e, &step, &x);
        Ok(x)
    })
    .await
}

/// `y[j] = W[sel[j]] x` through the `matvec_exp` kernel for `ty` over an expert stack
/// (returns `sel.len() * rows` values, pick-major).
///
/// # Errors
/// As [`matvec`]; [`Error::Input`] when a pick is not below `experts`.
#[allow(clippy::too_many_arguments)]
pub async fn matvec_exp(
    gpu: &Gpu, src: &dyn TensorSource, ty: GgmlType, offset: u64, experts: u32, rows: u32, cols: u32, sel: &[u32], x: &[f32],
) -> Result<Vec<f32>> {
    check_len("x", x.len(), cols as u64)?;
    if sel.is_empty() || sel.iter().any(|&e| e >= experts) {
        return Err(Error::Input(format!("picks {sel:?} must be a non-empty list below {experts}")));
    }
    let k = sel.len() as u32;
    run(gpu, src, (k * rows) as u64, |ld, b| {
        let w = ld.experts("oneshot W", ty, offset, experts, rows, cols)?;
        let s = vector(b, "oneshot sel", bytemuck::cast_slice(sel));
        let xb = vector(b, "oneshot x", bytemuck::cast_slice(x));
        let y = vector(b, "oneshot y", &vec![0u8; (k * rows) as usize * 4]);
        b.matvec_exp(&w, k, &s, &xb, &y, 0);
        Ok(y)
    })
    .await
}

/// `y0 + sum_j gate[j] W[sel[j]] h[j]` through the `moe_down` kernel for `ty` over an expert
/// stack (`h`: `sel.len() * cols` values, pick-major; `y0`: `rows` values; returns `rows`).
///
/// # Errors
/// As [`matvec_exp`]; [`Error::Input`] for wrong `gate`, `h` or `y0` lengths.
#[allow(clippy::too_many_arguments)]
pub async fn moe_down(
    gpu: &Gpu, src: &dyn TensorSource, ty: GgmlType, offset: u64, experts: u32, rows: u32, cols: u32, sel: &[u32], gate: &[f32],
    h: &[f32], y0: &[f32],
) -> Result<Vec<f32>> {
    if sel.is_empty() || sel.iter().any(|&e| e >= experts) {
        return Err(Error::Input(format!("picks {sel:?} must be a non-empty list below {experts}")));
    }
    let k = sel.len() as u32;
    check_len("gate", gate.len(), k as u64)?;
    check_len("h", h.len(), k as u64 * cols as u64)?;
    check_len("y0", y0.len(), rows as u64)?;
    run(gpu, src, rows as u64, |ld, b| {
        let w = ld.experts("oneshot W", ty, offset, experts, rows, cols)?;
        let s = vector(b, "oneshot sel", bytemuck::cast_slice(sel));
        let g = vector(b, "oneshot gate", bytemuck::cast_slice(gate));
        let hb = vector(b, "oneshot h", bytemuck::cast_slice(h));
        let y = vector(b, "oneshot y", bytemuck::cast_slice(y0));
        b.moe_down(&w, k, &s, &g, &hb, &y);
        Ok(y)
    })
    .await
}

/// Times `repeats` back-to-back `matvec` dispatches in one compute pass, after about 0.2 s of
/// warm-up, best of five passes: returns `y = W x`, the wall seconds per dispatch (recording, submit and
/// wait included) and, when the device has `TIMESTAMP_QUERY`, the GPU seconds per dispatch
/// between the pass's begin and end timestamps. Native only (a benchmark helper).
///
/// # Errors
/// As [`matvec`].
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
pub fn time_matvec(
    gpu: &Gpu, src: &dyn TensorSource, ty: GgmlType, offset: u64, rows: u32, cols: u32, x: &[f32], repeats: u32,
) -> Result<(Vec<f32>, f64, Option<f64>)> {
    check_len("x", x.len(), cols as u64)?;
    let (mut wall, mut on_gpu) = (f64::INFINITY, f64::INFINITY);
    let timed = gpu.device.features().contains(wgpu::Features::TIMESTAMP_QUERY);
    let out = pollster::block_on(run(gpu, src, rows as u64, |ld, b| {
        let w = ld.matrix("oneshot W", ty, offset, rows, cols)?;
        let xb = vector(b, "oneshot x", bytemuck::cast_slice(x));
        let y = vector(b, "oneshot y", &vec![0u8; rows as usize * 4]);
        b.matvec(&w, &xb, &y, false);
        let queries = timed.then(|| gpu.device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("oneshot timestamps"), ty: wgpu::QueryType::Timestamp, count: 2 }));
        let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("oneshot timestamps"),
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        b.buffers.push(resolve.clone());
        // Warm-up: about 0.2 s of these dispatches first, so that a GPU that idled (while the
        // caller computed its reference, say) is back at its working clocks.
        let warm = std::time::Instant::now();
        let mut pass = 0;
        while pass < 6 {
            let warming = pass == 0 && warm.elapsed().as_secs_f64() < 0.2;
            let n = repeats;
            let t = std::time::Instant::now();
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            {
                let timestamp_writes = queries.as_ref().map(|q| wgpu::ComputePassTimestampWrites { query_set: q, beginning_of_pass_write_index: Some(0), end_of_pass_write_index: Some(1) });
                let mut cp = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
                for _ in 0..n {
                    record(&mut cp, &b.out);
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
                wall = wall.min(elapsed / n as f64);
                if timed {
                    let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&pollster::block_on(gpu.read(&resolve, 16))?);
                    let ns = ticks[1].saturating_sub(ticks[0]) as f64 * gpu.queue.get_timestamp_period() as f64;
                    on_gpu = on_gpu.min(ns * 1e-9 / n as f64);
                }
            }
        }
        Ok(y)
    }))?;
    Ok((out, wall, timed.then_some(on_gpu)))
}
