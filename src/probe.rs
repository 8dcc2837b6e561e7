//! One weight matrix of a GGUF through the engine's matvec kernel, outside the forward program:
//! the browser's `testMatvecQ8` (and native kernel tests) compare the kernel composed for F32 on
//! the CPU-dequantised weights, the kernel composed for the tensor's stored format on the weights
//! as the engine keeps them, and an f64 CPU reference.
//!
//! A tensor with dims `[d0, d1, ...]` (innermost first, as ggml's `ne`) is seen as `rows =
//! d1 * d2 * ...` rows of `cols = d0` values, row-major, as the seed's `testMatvecQ8` does.
//! Tensor bytes are read through bounded chunks (never the whole tensor on the CPU at once, except
//! the f32 output vector). The GPU side is [`crate::oneshot`]'s.

use crate::error::{Error, Result};
use crate::ggml::{self, GgmlType};
use crate::gguf::{ByteSource, Gguf, TensorInfo};
use crate::gpu::Gpu;
use crate::oneshot;
use crate::weights::TensorSource;

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
    let row_bytes = t
        .ggml_type
        .tensor_bytes(cols as u64)
        .ok_or_else(|| Error::Malformed(format!("tensor {}: rows of {cols} elements are not whole {} blocks", t.name, t.ggml_type.name())))?;
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

/// A tensor's rows dequantised to f32 on demand, as a byte source: the f32 path of [`matvec`]
/// uploads through it, so the f32 copy is made a bounded chunk at a time.
struct Dequantised<'a> {
    src: &'a dyn TensorSource,
    t: &'a TensorInfo,
    rows: u32,
    cols: u32,
}

impl ByteSource for Dequantised<'_> {
    fn len(&self) -> u64 {
        self.rows as u64 * self.cols as u64 * 4
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset + buf.len() as u64;
        if end > self.len() {
            return Err(Error::Truncated { what: format!("{} as f32", self.t.name), at: offset, need: buf.len() as u64, len: self.len() });
        }
        let (row_bytes, _) = rows_per_chunk(self.t, self.cols)?;
        let row_f32 = self.cols as u64 * 4;
        let (r0, r1) = (offset / row_f32, end.div_ceil(row_f32));
        let vals = rows_f32(self.src, self.t, self.cols, row_bytes, r0, r1 - r0)?;
        let skip = (offset - r0 * row_f32) as usize;
        buf.copy_from_slice(&bytemuck::cast_slice::<f32, u8>(&vals)[skip..skip + buf.len()]);
        Ok(())
    }
}

impl TensorSource for Dequantised<'_> {}

/// `y = W x` for tensor `name` on the GPU, `rows` f32 values, through the engine's own upload
/// and `matvec` dispatch code ([`crate::oneshot::linear`]).
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
    if stored {
        oneshot::linear(gpu, src, t.ggml_type, t.offset, rows, cols, x).await
    } else {
        oneshot::linear(gpu, &Dequantised { src, t, rows, cols }, GgmlType::F32, 0, rows, cols, x).await
    }
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
