//! One weight matrix of a GGUF through the engine's matvec kernel, outside the forward program:
//! the browser's `testMatvecQ8` (and native kernel tests) compare the kernel composed for F32 on
//! the CPU-dequantised weights, the kernel composed for the tensor's stored format on the weights
//! as the engine keeps them, and an f64 CPU reference.
//!
//! A tensor with dims `[d0, d1, ...]` (innermost first, as ggml's `ne`) is seen as `rows =
//! d1 * d2 * ...` rows of `cols = d0` values, row-major, as the seed's `testMatvecQ8` does.
//! Tensor bytes are read through bounded chunks (never the whole tensor on the CPU at once, except
//! the f32 output vector).

use crate::error::{Error, Result};
use crate::ggml::{self, GgmlType};
use crate::gguf::{Gguf, TensorInfo};
use crate::gpu::{record, Gpu, Kernels};
use crate::llama::Builder;
use crate::weights::{Loader, MatPart, Matrix, TensorSource};

/// Raw tensor bytes handled per CPU step.
const CHUNK_BYTES: u64 = 4 << 20;

/// `(rows, cols)` of tensor `name` as a matrix: `cols = dims[0]`, `rows` the product of the other
/// dims (1 for a vector).
///
/// # Errors
/// [`Error::MissingTensor`] when there is no such tensor; [`Error::Input`] when a dimension does
/// not fit the kernels' `u32` indices.
pub fn shape(g: &Gguf, name: &str) -> Result<(u32, u32)> {
    let t = info(g, name)?;
    shape_of(t)
}

fn info<'a>(g: &'a Gguf, name: &str) -> Result<&'a TensorInfo> {
    g.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_string()))
}

fn shape_of(t: &TensorInfo) -> Result<(u32, u32)> {
    let cols = t.dims.first().copied().unwrap_or(1);
    let rows = t.n_elements / cols.max(1);
    match (u32::try_from(rows), u32::try_from(cols)) {
        (Ok(r), Ok(c)) if (r as u64) * (c as u64) <= u32::MAX as u64 => Ok((r, c)),
        _ => Err(Error::Input(format!("tensor {} ({rows} x {cols}) is too large for a matvec probe", t.name))),
    }
}

/// Whole rows of `t` per chunk of about [`CHUNK_BYTES`] raw bytes (at least one).
fn rows_per_chunk(t: &TensorInfo, cols: u32) -> Result<(u64, u64)> {
    let row_bytes = t.ggml_type.tensor_bytes(cols as u64).ok_or_else(|| {
        Error::Malformed(format!("tensor {}: rows of {cols} elements are not whole {} blocks", t.name, t.ggml_type.name()))
    })?;
    Ok((row_bytes, (CHUNK_BYTES / row_bytes.max(1)).max(1)))
}

/// Rows `r0 .. r0 + n` of `t` dequantised to f32 on the CPU.
fn rows_f32(src: &dyn TensorSource, t: &TensorInfo, cols: u32, row_bytes: u64, r0: u64, n: u64) -> Result<Vec<f32>> {
    let mut raw = vec![0u8; (n * row_bytes) as usize];
    src.read_at(t.offset + r0 * row_bytes, &mut raw)?;
    let mut out = vec![0f32; (n * cols as u64) as usize];
    ggml::dequantize(t.ggml_type, &raw, &mut out)?;
    Ok(out)
}

/// `y = W x` for tensor `name` on the GPU, `rows` f32 values, through the engine's own upload
/// and `matvec` dispatch code (`weights::Loader::matrix`, `llama::Builder::matvec`).
///
/// * `stored == false`: `W` is dequantised to f32 on the CPU (exactly as ggml) and multiplied by
///   the `matvec` kernel composed for F32.
/// * `stored == true`: `W` is uploaded as the engine keeps it (its GGUF storage format, split by
///   rows to fit a binding) and multiplied by the `matvec` kernel composed for that format.
///
/// `x` must have `cols` values. Every GPU buffer made here is destroyed before returning.
///
/// # Errors
/// [`Error::MissingTensor`]; [`Error::Input`] for a wrong `x` length; [`Error::TooLarge`] when one
/// row does not fit a storage binding of `gpu`; [`Error::Gpu`] when the readback fails.
pub async fn matvec(gpu: &Gpu, g: &Gguf, src: &dyn TensorSource, name: &str, x: &[f32], stored: bool) -> Result<Vec<f32>> {
    let t = info(g, name)?;
    let (rows, cols) = shape_of(t)?;
    if x.len() != cols as usize {
        return Err(Error::Input(format!("x has {} values but tensor {name} has {cols} columns", x.len())));
    }
    let mut made: Vec<wgpu::Buffer> = Vec::new();
    let out = run(gpu, t, src, rows, cols, x, stored, &mut made).await;
    for b in &made {
        b.destroy();
    }
    out
}

#[allow(clippy::too_many_arguments)]
async fn run(
    gpu: &Gpu, t: &TensorInfo, src: &dyn TensorSource, rows: u32, cols: u32, x: &[f32], stored: bool, made: &mut Vec<wgpu::Buffer>,
) -> Result<Vec<f32>> {
    let w = if stored {
        let mut ld = Loader::new(gpu, src);
        let m = ld.matrix(&t.name, t.ggml_type, t.offset, rows, cols);
        made.append(&mut ld.buffers);
        m?
    } else {
        // f32 rows, split like the engine splits (parts of whole rows within one binding).
        let (row_bytes, step) = rows_per_chunk(t, cols)?;
        let row_f32 = cols as u64 * 4;
        let limit = gpu.max_binding();
        let per_part = (limit.saturating_sub(8) / row_f32).min(rows as u64);
        if per_part == 0 {
            return Err(Error::TooLarge { tensor: t.name.clone(), bytes: row_f32 + 4, limit, limit_name: "maxStorageBufferBindingSize" });
        }
        let mut parts = Vec::new();
        let mut r0 = 0u64;
        while r0 < rows as u64 {
            let n = per_part.min(rows as u64 - r0);
            let buffer = gpu.storage(&t.name, n * row_f32 + 4);
            made.push(buffer.clone());
            let mut done = 0u64;
            while done < n {
                let m = (n - done).min(step);
                let vals = rows_f32(src, t, cols, row_bytes, r0 + done, m)?;
                gpu.queue.write_buffer(&buffer, done * row_f32, bytemuck::cast_slice(&vals));
                done += m;
            }
            parts.push(MatPart { row_start: r0 as u32, rows: n as u32, buffer });
            r0 += n;
        }
        Matrix { ty: GgmlType::F32, rows, cols, parts }
    };
    let xb = gpu.storage("probe x", x.len() as u64 * 4);
    gpu.queue.write_buffer(&xb, 0, bytemuck::cast_slice(x));
    let y = gpu.storage("probe y", rows as u64 * 4);
    made.extend([xb.clone(), y.clone()]);

    let mut kernels = Kernels::new();
    let mut b = Builder { gpu, kernels: &mut kernels, out: Vec::new(), buffers: Vec::new() };
    b.matvec(&w, &xb, &y, false);
    let Builder { out: program, buffers, .. } = b;
    made.extend(buffers);
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        record(&mut pass, &program);
    }
    gpu.queue.submit([enc.finish()]);
    let out = gpu.read(&y, rows as u64 * 4).await?;
    Ok(bytemuck::pod_collect_to_vec(&out))
}

/// The CPU reference for [`matvec`]: `ref[r] = sum_c W[r][c] * x[c]` with `W` dequantised to f32
/// exactly as ggml and the products and sums in f64 (as the seed's JS reference).
///
/// # Errors
/// [`Error::MissingTensor`]; [`Error::Input`] for a wrong `x` length; read errors of `src`.
pub fn reference(g: &Gguf, src: &dyn TensorSource, name: &str, x: &[f32]) -> Result<Vec<f64>> {
    let t = info(g, name)?;
    let (rows, cols) = shape_of(t)?;
    if x.len() != cols as usize {
        return Err(Error::Input(format!("x has {} values but tensor {name} has {cols} columns", x.len())));
    }
    let (row_bytes, step) = rows_per_chunk(t, cols)?;
    let mut out = Vec::with_capacity(rows as usize);
    let mut r0 = 0u64;
    while r0 < rows as u64 {
        let n = (rows as u64 - r0).min(step);
        let w = rows_f32(src, t, cols, row_bytes, r0, n)?;
        for row in w.chunks_exact(cols as usize) {
            out.push(row.iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum());
        }
        r0 += n;
    }
    Ok(out)
}
