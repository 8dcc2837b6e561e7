//! Uploads a GGUF's tensors to GPU buffers in the layouts the kernels read.
//!
//! Every weight matrix (token embedding, projections, output head, MoE router and expert stacks)
//! stays in its file's storage format: its bytes are uploaded unchanged, straight from the source
//! ([`TensorSource::upload`]), and the kernels decode the GGML blocks themselves
//! (`shaders/formats/*.wgsl`). A matrix larger than one storage binding is split by rows into
//! parts (an expert stack by whole experts), each its own buffer holding its rows' bytes from
//! byte 0, plus one spare word (the kernels' unaligned loads read one word ahead), rounded up to
//! a multiple of 16 bytes. So GPU weight bytes = file tensor bytes + at most 19 bytes per buffer.
//! Q8_0 rows of 64k weights and Q6_K rows of 2048k are then regrouped in place on the GPU, the same bytes in another
//! order ([`crate::repack`]): the loader lists those buffers ([`Weights::repacks`]) for the
//! program's setup.
//! Only the small 1-D tensors (norm weights) are widened to f32 when not stored as F32.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::ggml::{self, GgmlType};
use crate::gguf::{ByteSource, Gguf, TensorInfo};
use crate::gpu::Gpu;
use crate::repack::{regrouped, Repack};

mod order;
pub use order::RowOrder;

/// Most rows per expert the expert kernels dispatch: `matvec_exp` and `moe_down` run a
/// workgroup per 64 / TPR rows in x, at most 65535.
pub const MAX_EXPERT_ROWS: u32 = 65535;

/// Bytes of raw tensor data handled per CPU transform step (bounds the scratch memory).
const CHUNK_BYTES: u64 = 4 << 20;

/// Where tensor bytes come from, and how they reach a GPU buffer. The default `upload` reads
/// through a bounded scratch; a source that can write straight to the GPU (the browser's
/// ArrayBuffer, a native slice) overrides it.
pub trait TensorSource: ByteSource {
    /// Copies `len` bytes at `src_offset` of the source to `buffer` at `dst_offset`
    /// (`len` and both offsets multiples of 4).
    fn upload(&self, gpu: &Gpu, buffer: &wgpu::Buffer, dst_offset: u64, src_offset: u64, len: u64) -> Result<()> {
        let mut scratch = vec![0u8; len.min(CHUNK_BYTES) as usize];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(CHUNK_BYTES) as usize;
            self.read_at(src_offset + done, &mut scratch[..n])?;
            gpu.queue.write_buffer(buffer, dst_offset + done, &scratch[..n]);
            done += n as u64;
        }
        Ok(())
    }

    /// Writes the 1-D tensor `t` (not stored as F32) widened to f32 into `buffer` from byte 0.
    /// The default reads it in bounded chunks and dequantises them on the CPU; a source that
    /// streams its bytes later (the browser's `Blob` or `ReadableStream`) records the write
    /// and performs it when the bytes arrive.
    fn upload_f32(&self, gpu: &Gpu, buffer: &wgpu::Buffer, t: &TensorInfo) -> Result<()> {
        let block = t.ggml_type.block_size();
        let step = ((CHUNK_BYTES / 4) / block).max(1) * block;
        let mut done = 0;
        while done < t.n_elements {
            let m = (t.n_elements - done).min(step);
            let vals = elements_f32(self, t, done, m)?;
            gpu.queue.write_buffer(buffer, done * 4, bytemuck::cast_slice(&vals));
            done += m;
        }
        Ok(())
    }

    /// Writes the last `len < 4` bytes of the source, from `src_offset`, zero-padded to one word
    /// at `dst_offset` of `buffer` (a tensor ending within 4 bytes of the end of the file).
    fn upload_tail(&self, gpu: &Gpu, buffer: &wgpu::Buffer, dst_offset: u64, src_offset: u64, len: u64) -> Result<()> {
        let mut word = [0u8; 4];
        self.read_at(src_offset, &mut word[..len.min(4) as usize])?;
        gpu.queue.write_buffer(buffer, dst_offset, &word);
        Ok(())
    }
}

/// Dequantises elements `[e0, e0 + n)` of tensor `t` read from `src` to f32 (both multiples of
/// its block size).
pub(crate) fn elements_f32(src: &(impl ByteSource + ?Sized), t: &TensorInfo, e0: u64, n: u64) -> Result<Vec<f32>> {
    let off = t.ggml_type.tensor_bytes(e0).ok_or_else(|| bad_cols(&t.name, t.ggml_type, e0))?;
    let len = t.ggml_type.tensor_bytes(n).ok_or_else(|| bad_cols(&t.name, t.ggml_type, n))?;
    let mut raw = vec![0u8; len as usize];
    src.read_at(t.offset + off, &mut raw)?;
    let mut out = vec![0f32; n as usize];
    ggml::dequantize(t.ggml_type, &raw, &mut out)?;
    Ok(out)
}

impl TensorSource for [u8] {
    fn upload(&self, gpu: &Gpu, buffer: &wgpu::Buffer, dst_offset: u64, src_offset: u64, len: u64) -> Result<()> {
        let end = src_offset.checked_add(len).filter(|&e| e <= self.len() as u64).ok_or_else(|| Error::Truncated {
            what: "tensor data".into(),
            at: src_offset,
            need: len,
            len: self.len() as u64,
        })?;
        gpu.queue.write_buffer(buffer, dst_offset, &self[src_offset as usize..end as usize]);
        Ok(())
    }
}

impl TensorSource for Vec<u8> {
    fn upload(&self, gpu: &Gpu, buffer: &wgpu::Buffer, dst_offset: u64, src_offset: u64, len: u64) -> Result<()> {
        self.as_slice().upload(gpu, buffer, dst_offset, src_offset, len)
    }
}

/// Load progress, reported after each tensor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Tensor bytes (as stored in the file) uploaded so far.
    pub bytes_done: u64,
    /// Tensor bytes in all.
    pub bytes_total: u64,
    /// Tensors uploaded so far.
    pub tensors_done: u32,
    /// Tensors in all.
    pub tensors_total: u32,
}

/// A run of rows of a matrix held in its own buffer.
#[derive(Clone)]
pub struct MatPart {
    /// First row of the part.
    pub row_start: u32,
    /// Rows in the part.
    pub rows: u32,
    /// The rows' bytes as stored in the file (row `r` at byte `r * row_bytes`; Q8_0 and Q6_K regrouped
    /// within rows, [`crate::repack`]), padded.
    pub buffer: wgpu::Buffer,
}

/// A `[rows][cols]` weight matrix on the GPU in its GGUF storage format, split by rows to fit
/// the binding limit.
#[derive(Clone)]
pub struct Matrix {
    /// Storage format (the tensor's GGML type).
    pub ty: GgmlType,
    /// Output rows.
    pub rows: u32,
    /// Input columns.
    pub cols: u32,
    /// Parts, in row order.
    pub parts: Vec<MatPart>,
}

/// A run of whole experts of an expert stack held in its own buffer.
#[derive(Clone)]
pub struct ExpertPart {
    /// First expert of the part.
    pub expert_start: u32,
    /// Experts in the part.
    pub experts: u32,
    /// Their bytes as stored (expert `e` row `r` at byte `((e - expert_start) * rows + r) *
    /// row_bytes`; Q8_0 and Q6_K regrouped within rows, [`crate::repack`]).
    pub buffer: wgpu::Buffer,
}

/// An expert stack `[experts][rows][cols]` in its GGUF storage format, split by whole experts.
#[derive(Clone)]
pub struct Experts {
    /// Storage format.
    pub ty: GgmlType,
    /// Experts.
    pub experts: u32,
    /// Rows per expert.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// Parts, in expert order.
    pub parts: Vec<ExpertPart>,
}

/// The feed-forward weights of one block.
pub enum Ffn {
    /// SwiGLU MLP: gate and up `[ff][d]` writing one `[g | u]` vector (fused like `Layer::qkv`),
    /// down `[d][ff]`.
    Dense { gate_up: Vec<(Matrix, u32)>, down: Matrix },
    /// Mixtral-style experts: router `[E][d]`, and stacks `[E][ff][d]`, `[E][ff][d]`, `[E][d][ff]`.
    Moe { router: Matrix, gate: Experts, up: Experts, down: Experts },
}

/// One transformer block's weights.
pub struct Layer {
    /// RMSNorm weight before attention, `[d]`.
    pub attn_norm: wgpu::Buffer,
    /// The q `[q_dim][d]`, k and v `[kv_dim][d]` projections, writing one `[q | k | v]` vector:
    /// one matrix per run of neighbours of one type (their rows uploaded back to back, so one
    /// dispatch serves the run: all three, or q and k of a Q4_K_M file whose v is Q6_K), each
    /// with its first output row.
    pub qkv: Vec<(Matrix, u32)>,
    /// The q/k/v biases as one `[q | k | v]` vector (Qwen2), if the model has them.
    pub qkv_bias: Option<wgpu::Buffer>,
    /// RMSNorm weights `[head_dim]` of each q head and each k head before RoPE (Qwen3), if the
    /// model has them.
    pub qk_norm: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// The output projection `[d][q_dim]`.
    pub o: Matrix,
    /// RMSNorm weight before the FFN, `[d]`.
    pub ffn_norm: wgpu::Buffer,
    /// The FFN.
    pub ffn: Ffn,
    /// RMSNorm weights `[d]` of the attention's and of the FFN's output before each joins the
    /// residual stream (`post_attention_norm`, `post_ffw_norm`: Gemma 2/3), if the model has them.
    pub post_norms: Option<(wgpu::Buffer, wgpu::Buffer)>,
}

/// Every weight of the model on the GPU.
pub struct Weights {
    /// Token embedding `[vocab][d]` (gathered by the `embed` kernel).
    pub embd: Matrix,
    /// Final RMSNorm weight `[d]`.
    pub out_norm: wgpu::Buffer,
    /// Output head `[vocab][d]` (the token embedding's buffers again when tied).
    pub output: Matrix,
    /// Blocks.
    pub layers: Vec<Layer>,
    /// `rope_freqs.weight` (Llama-3 frequency divisors), read back to the CPU for the RoPE table.
    pub rope_freqs: Option<Vec<f32>>,
    /// Every buffer made, for disposal.
    pub buffers: Vec<wgpu::Buffer>,
    /// Bytes of weights on the GPU.
    pub gpu_bytes: u64,
    /// Bytes of the tensors read from the file.
    pub file_bytes: u64,
    /// Buffers to regroup before the first kernel reads them ([`crate::repack`]); emptied by
    /// [`crate::Llama::load`], which records them into its setup program.
    pub repacks: Vec<Repack>,
}

/// Uploads bytes of a source to GPU buffers.
pub(crate) struct Loader<'a> {
    pub(crate) gpu: &'a Gpu,
    pub(crate) src: &'a dyn TensorSource,
    pub(crate) max_binding: u64,
    pub(crate) buffers: Vec<wgpu::Buffer>,
    pub(crate) gpu_bytes: u64,
    /// Buffers uploaded in a layout to regroup ([`crate::repack`]).
    pub(crate) repacks: Vec<Repack>,
}

/// Bytes of the buffer for `bytes` bytes of stored weights: one spare word that the kernels'
/// unaligned loads may read (and discard), rounded up to a multiple of 16 as every storage
/// buffer ([`Gpu::storage`]).
pub(crate) fn padded(bytes: u64) -> u64 {
    (bytes + 4).next_multiple_of(16)
}

/// The most stored bytes whose [`padded`] size fits `limit`.
fn fits(limit: u64) -> u64 {
    limit.saturating_sub(4 + 15)
}

/// Rows (or experts) of `bytes` bytes each that one part holds under a binding limit of `limit`
/// bytes (0: not even one fits).
pub fn per_binding(limit: u64, bytes: u64) -> u64 {
    fits(limit) / bytes.max(1)
}

impl<'a> Loader<'a> {
    pub(crate) fn new(gpu: &'a Gpu, src: &'a dyn TensorSource) -> Loader<'a> {
        Loader { gpu, src, max_binding: gpu.max_binding(), buffers: Vec::new(), gpu_bytes: 0, repacks: Vec::new() }
    }

    fn buffer(&mut self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        let size = size.max(16).next_multiple_of(16);
        if size > self.max_binding {
            return Err(Error::TooLarge { tensor: label.to_string(), bytes: size, limit: self.max_binding, limit_name: "maxStorageBufferBindingSize" });
        }
        let b = self.gpu.storage(label, size);
        self.gpu_bytes += b.size();
        self.buffers.push(b.clone());
        Ok(b)
    }

    /// A whole 1-D tensor as one f32 buffer (norm weights).
    fn f32_tensor(&mut self, t: &TensorInfo) -> Result<wgpu::Buffer> {
        let buf = self.buffer(&t.name, t.n_elements * 4)?;
        if t.ggml_type == GgmlType::F32 {
            self.src.upload(self.gpu, &buf, 0, t.offset, t.n_elements * 4)?;
        } else {
            self.src.upload_f32(self.gpu, &buf, t)?;
        }
        Ok(buf)
    }

    /// A buffer holding `len` stored bytes from source offset `src_offset` (any byte offset),
    /// padded ([`padded`]). Every write is a 4-byte multiple at a 4-byte offset: the bulk goes
    /// through [`TensorSource::upload`]; a last partial word too when the source has 4 bytes
    /// there, else (the very end of the source) it is read and written zero-padded.
    fn raw(&mut self, label: &str, src_offset: u64, len: u64) -> Result<wgpu::Buffer> {
        let buf = self.buffer(label, padded(len))?;
        let bulk = len & !3;
        if bulk > 0 {
            self.src.upload(self.gpu, &buf, 0, src_offset, bulk)?;
        }
        let tail = len - bulk;
        if tail > 0 {
            let at = src_offset + bulk;
            if at + 4 <= self.src.len() {
                self.src.upload(self.gpu, &buf, bulk, at, 4)?;
            } else {
                self.src.upload_tail(self.gpu, &buf, bulk, at, tail)?;
            }
        }
        Ok(buf)
    }

    /// `count` items (rows, or whole experts) of `item_bytes` bytes each, stored from `offset`, in
    /// as few buffers as the binding limit allows: (first item, items, buffer) per part. `unit`
    /// names the items in part labels; `one` names a single item in the error when even one does
    /// not fit.
    /// `order` says which stored item each uploaded one is ([`RowOrder`]).
    #[allow(clippy::too_many_arguments)]
    fn parts(
        &mut self,
        name: &str,
        unit: &str,
        one: String,
        offset: u64,
        count: u32,
        item_bytes: u64,
        order: RowOrder,
    ) -> Result<Vec<(u32, u32, wgpu::Buffer)>> {
        let fit = per_binding(self.max_binding, item_bytes);
        if fit == 0 {
            return Err(Error::TooLarge { tensor: one, bytes: padded(item_bytes), limit: self.max_binding, limit_name: "maxStorageBufferBindingSize" });
        }
        let per_part = fit.min(count as u64) as u32;
        let mut out = Vec::new();
        let mut i0 = 0u32;
        while i0 < count {
            let n = per_part.min(count - i0);
            let label = if n == count { name.to_string() } else { format!("{name}[{unit}{i0}..{}]", i0 + n) };
            let buffer = match order {
                RowOrder::Stored => self.raw(&label, offset + i0 as u64 * item_bytes, n as u64 * item_bytes)?,
                _ => {
                    let buffer = self.buffer(&label, padded(n as u64 * item_bytes))?;
                    self.ordered(&buffer, 0, offset, item_bytes, (i0, n), order, &label)?;
                    buffer
                }
            };
            out.push((i0, n, buffer));
            i0 += n;
        }
        Ok(out)
    }

    /// 1-D tensors as f32 values back to back in one buffer, each in its `order` (q/k/v biases as
    /// one `[q | k | v]` vector; a head's norm weights).
    fn vectors(&mut self, label: &str, tensors: &[(&TensorInfo, RowOrder)]) -> Result<wgpu::Buffer> {
        let total: u64 = tensors.iter().map(|(t, _)| t.n_elements).sum();
        let buf = self.buffer(label, total * 4)?;
        let mut at = 0;
        for (t, order) in tensors {
            let n = u32::try_from(t.n_elements).map_err(|_| Error::Config(format!("{}: {} values", t.name, t.n_elements)))?;
            if t.ggml_type == GgmlType::F32 {
                self.ordered(&buf, at * 4, t.offset, 4, (0, n), *order, &t.name)?;
            } else {
                let v = elements_f32(self.src, t, 0, t.n_elements)?;
                let v: Vec<f32> = (0..n).map(|r| v[order.source(r) as usize]).collect();
                self.gpu.queue.write_buffer(&buf, at * 4, bytemuck::cast_slice(&v));
            }
            at += t.n_elements;
        }
        Ok(buf)
    }

    /// Uploads rows `first..first + n` (of `row_bytes` bytes, the tensor's rows from `offset`) in
    /// `order` to `buffer` from byte `dst`: a run of consecutive stored rows per upload.
    /// Errors: [`Error::Config`] when rows are not whole 4-byte words (each upload must be).
    #[allow(clippy::too_many_arguments)]
    fn ordered(&mut self, buffer: &wgpu::Buffer, dst: u64, offset: u64, row_bytes: u64, (first, n): (u32, u32), order: RowOrder, name: &str) -> Result<()> {
        if row_bytes % 4 != 0 {
            return Err(Error::Config(format!("{name}: rows of {row_bytes} bytes cannot be reordered for NEOX RoPE (not whole 4-byte words)")));
        }
        for (row, stored, rows) in order.runs(first, n) {
            self.src.upload(self.gpu, buffer, dst + (row - first) as u64 * row_bytes, offset + stored as u64 * row_bytes, rows as u64 * row_bytes)?;
        }
        Ok(())
    }

    /// Lists `buffer` (`rows` rows of `cols` weights of type `ty`) for regrouping, if its type is.
    fn regroup(&mut self, ty: GgmlType, buffer: &wgpu::Buffer, rows: u32, cols: u32) {
        if regrouped(ty, cols) {
            self.repacks.push(Repack { ty, buffer: buffer.clone(), rows, cols });
        }
    }

    /// A `[rows][cols]` matrix of type `ty` stored at `offset` in the source, its rows in `order`,
    /// each kept as stored (Q8_0 and Q6_K listed for regrouping).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn matrix(&mut self, name: &str, ty: GgmlType, offset: u64, rows: u32, cols: u32, order: RowOrder) -> Result<Matrix> {
        let row_bytes = row_bytes(name, ty, cols)?;
        let parts = self.parts(name, "", name.into(), offset, rows, row_bytes, order)?;
        let parts: Vec<MatPart> = parts.into_iter().map(|(row_start, rows, buffer)| MatPart { row_start, rows, buffer }).collect();
        for p in &parts {
            self.regroup(ty, &p.buffer, p.rows, cols);
        }
        Ok(Matrix { ty, rows, cols, parts })
    }

    /// Tensors `(info, rows, order)` of one type and width as one matrix, their rows back to back
    /// in one buffer; `None` when that cannot be (types differ, a tensor's bytes are not a
    /// multiple of 4, or the whole does not fit one binding): the caller loads them one by one.
    pub(crate) fn fused(&mut self, label: &str, ty: GgmlType, tensors: &[(&TensorInfo, u32, RowOrder)], cols: u32) -> Result<Option<Matrix>> {
        let Some(row_bytes) = ty.tensor_bytes(cols as u64).filter(|_| cols > 0) else { return Ok(None) };
        let rows: u32 = tensors.iter().map(|t| t.1).sum();
        let total = rows as u64 * row_bytes;
        let same = tensors.iter().all(|(t, _, _)| t.ggml_type == ty);
        let aligned = tensors.iter().all(|(_, r, _)| (*r as u64 * row_bytes) % 4 == 0);
        if !same || !aligned || padded(total) > self.max_binding {
            return Ok(None);
        }
        let buffer = self.buffer(label, padded(total))?;
        let mut at = 0;
        for (t, r, order) in tensors {
            let len = *r as u64 * row_bytes;
            match order {
                RowOrder::Stored => self.src.upload(self.gpu, &buffer, at, t.offset, len)?,
                _ => self.ordered(&buffer, at, t.offset, row_bytes, (0, *r), *order, &t.name)?,
            }
            at += len;
        }
        self.regroup(ty, &buffer, rows, cols);
        Ok(Some(Matrix { ty, rows, cols, parts: vec![MatPart { row_start: 0, rows, buffer }] }))
    }

    /// An expert stack `[experts][rows][cols]` of type `ty` at `offset`, split by whole experts.
    pub(crate) fn experts(&mut self, name: &str, ty: GgmlType, offset: u64, experts: u32, rows: u32, cols: u32) -> Result<Experts> {
        let row_bytes = row_bytes(name, ty, cols)?;
        if rows > MAX_EXPERT_ROWS {
            return Err(Error::Config(format!("{name}: {rows} rows per expert; the expert kernels handle at most {MAX_EXPERT_ROWS}")));
        }
        let parts = self.parts(name, "experts ", format!("{name} (one expert)"), offset, experts, rows as u64 * row_bytes, RowOrder::Stored)?;
        let parts: Vec<ExpertPart> = parts.into_iter().map(|(expert_start, experts, buffer)| ExpertPart { expert_start, experts, buffer }).collect();
        for p in &parts {
            self.regroup(ty, &p.buffer, p.experts * rows, cols);
        }
        Ok(Experts { ty, experts, rows, cols, parts })
    }
}

/// A load that stops half way (a bad tensor, a device limit) frees what it had uploaded: buffers
/// still held here when the loader goes are destroyed (the successful paths take them first).
impl Drop for Loader<'_> {
    fn drop(&mut self) {
        for b in self.buffers.drain(..) {
            b.destroy();
        }
    }
}

/// Bytes of one stored row of `cols` weights of type `ty`.
pub(crate) fn row_bytes(name: &str, ty: GgmlType, cols: u32) -> Result<u64> {
    ty.tensor_bytes(cols as u64).filter(|_| cols > 0).ok_or_else(|| bad_cols(name, ty, cols as u64))
}

fn bad_cols(name: &str, ty: GgmlType, cols: u64) -> Error {
    Error::Malformed(format!("tensor {name}: rows of {cols} elements are not whole {} blocks", ty.name()))
}

/// Reports progress after each tensor.
struct Tracker<'a> {
    g: &'a Gguf,
    progress: &'a mut dyn FnMut(&Progress),
    p: Progress,
}

impl Tracker<'_> {
    fn info(&self, name: &str) -> Result<TensorInfo> {
        self.g.tensor(name).cloned().ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    fn done(&mut self, t: &TensorInfo) {
        self.p.bytes_done += t.n_bytes;
        self.p.tensors_done += 1;
        (self.progress)(&self.p);
    }
}

impl Weights {
    /// Uploads every tensor `cfg` needs, reporting progress after each.
    pub fn load(gpu: &Gpu, g: &Gguf, src: &dyn TensorSource, cfg: &Config, progress: &mut dyn FnMut(&Progress)) -> Result<Weights> {
        let expected = cfg.expected_tensors();
        let mut p = Progress { tensors_total: expected.len() as u32, ..Default::default() };
        for (name, _) in &expected {
            p.bytes_total += g.tensor(name).map_or(0, |t| t.n_bytes);
        }
        let file_bytes = p.bytes_total;
        let mut tr = Tracker { g, progress, p };
        let mut ld = Loader::new(gpu, src);
        let matrix = |ld: &mut Loader, tr: &mut Tracker, name: &str, rows: u32, cols: u32| -> Result<Matrix> {
            let t = tr.info(name)?;
            let m = ld.matrix(name, t.ggml_type, t.offset, rows, cols, RowOrder::Stored)?;
            tr.done(&t);
            Ok(m)
        };
        let vector = |ld: &mut Loader, tr: &mut Tracker, name: &str| -> Result<wgpu::Buffer> {
            let t = tr.info(name)?;
            let b = ld.f32_tensor(&t)?;
            tr.done(&t);
            Ok(b)
        };
        // Several projections reading the same input, one [a | b | ...] output vector: each run of
        // neighbours of one type as one matrix where it can be (one dispatch instead of several;
        // a Q4_K_M file's q and k are Q4_K while its v may be Q6_K), else tensor by tensor.
        let group = |ld: &mut Loader, tr: &mut Tracker, label: &str, parts: &[(String, u32, RowOrder)], cols: u32| -> Result<Vec<(Matrix, u32)>> {
            let infos = parts.iter().map(|(n, _, _)| tr.info(n)).collect::<Result<Vec<_>>>()?;
            let with_rows: Vec<(&TensorInfo, u32, RowOrder)> = infos.iter().zip(parts).map(|(t, (_, r, o))| (t, *r, *o)).collect();
            let mut out = Vec::new();
            let mut row0 = 0;
            for run in with_rows.chunk_by(|a, b| a.0.ggml_type == b.0.ggml_type) {
                let fused = if run.len() > 1 {
                    let whole = if run.len() == parts.len() { label.to_string() } else { format!("{label}[{}..]", run[0].0.name) };
                    ld.fused(&whole, run[0].0.ggml_type, run, cols)?
                } else {
                    None
                };
                match fused {
                    Some(m) => out.push((m, row0)),
                    None => {
                        let mut r0 = row0;
                        for (t, rows, order) in run {
                            out.push((ld.matrix(&t.name, t.ggml_type, t.offset, *rows, cols, *order)?, r0));
                            r0 += rows;
                        }
                    }
                }
                run.iter().for_each(|(t, _, _)| tr.done(t));
                row0 += run.iter().map(|r| r.1).sum::<u32>();
            }
            Ok(out)
        };
        // NEOX RoPE's pairs made adjacent in q and k, their biases and head norms ([`RowOrder`]).
        let (d, q, kv, ff) = (cfg.d, cfg.q_dim(), cfg.kv_dim(), cfg.ff);
        let neox = |rows| if cfg.family.rope_neox { RowOrder::NeoxPairs { head_dim: cfg.head_dim, n_rot: cfg.n_rot, rows } } else { RowOrder::Stored };
        let qk = neox(u32::MAX);
        let embd = matrix(&mut ld, &mut tr, "token_embd.weight", cfg.vocab, d)?;
        let out_norm = vector(&mut ld, &mut tr, "output_norm.weight")?;
        let output = if cfg.tied_output { embd.clone() } else { matrix(&mut ld, &mut tr, "output.weight", cfg.vocab, d)? };
        // Llama-3's frequency divisors, or the LongRoPE table the context picks (the other one
        // is not read).
        let rope_freqs = match cfg.rope_factors() {
            Some(name) => {
                let t = tr.info(name)?;
                let v = elements_f32(ld.src, &t, 0, t.n_elements)?;
                tr.done(&t);
                Some(v)
            }
            None => None,
        };
        if cfg.family.longrope {
            let unused = if cfg.rope_factors() == Some("rope_factors_long.weight") { "rope_factors_short.weight" } else { "rope_factors_long.weight" };
            tr.done(&tr.info(unused)?);
        }
        let mut layers = Vec::with_capacity(cfg.n_layers as usize);
        for l in 0..cfg.n_layers {
            let b = |s: &str| format!("blk.{l}.{s}.weight");
            let attn_norm = vector(&mut ld, &mut tr, &b("attn_norm"))?;
            let qkv = if cfg.family.fused_qkv {
                // Phi-3's one [q | k | v] matrix: NEOX order for the q and k rows only.
                let t = tr.info(&b("attn_qkv"))?;
                let m = ld.matrix(&t.name, t.ggml_type, t.offset, q + 2 * kv, d, neox(q + kv))?;
                tr.done(&t);
                vec![(m, 0)]
            } else {
                let qkv_parts = [(b("attn_q"), q, qk), (b("attn_k"), kv, qk), (b("attn_v"), kv, RowOrder::Stored)];
                group(&mut ld, &mut tr, &format!("blk.{l}.attn_qkv"), &qkv_parts, d)?
            };
            // Optional per family: q/k/v biases (all three or none), q and k head norms.
            let bias = |s: &str| format!("blk.{l}.{s}.bias");
            let qkv_bias = match cfg.family.qkv_bias {
                true => {
                    let ts = [bias("attn_q"), bias("attn_k"), bias("attn_v")].map(|n| tr.info(&n)).into_iter().collect::<Result<Vec<_>>>()?;
                    let v = ld.vectors(&format!("blk.{l}.attn_qkv.bias"), &[(&ts[0], qk), (&ts[1], qk), (&ts[2], RowOrder::Stored)])?;
                    ts.iter().for_each(|t| tr.done(t));
                    Some(v)
                }
                false => None,
            };
            let qk_norm = match cfg.family.qk_norm {
                true => {
                    let (tq, tk) = (tr.info(&b("attn_q_norm"))?, tr.info(&b("attn_k_norm"))?);
                    let norms = (ld.vectors(&tq.name, &[(&tq, qk)])?, ld.vectors(&tk.name, &[(&tk, qk)])?);
                    tr.done(&tq);
                    tr.done(&tk);
                    Some(norms)
                }
                false => None,
            };
            let wo = matrix(&mut ld, &mut tr, &b("attn_output"), d, q)?;
            let attn_post = match cfg.family.post_norms {
                true => Some(vector(&mut ld, &mut tr, &b("post_attention_norm"))?),
                false => None,
            };
            let ffn_norm = vector(&mut ld, &mut tr, &b("ffn_norm"))?;
            let ffn = if cfg.is_moe() {
                let stack = |ld: &mut Loader, tr: &mut Tracker, name: &str, rows: u32, cols: u32| -> Result<Experts> {
                    let t = tr.info(name)?;
                    let e = ld.experts(name, t.ggml_type, t.offset, cfg.experts, rows, cols)?;
                    tr.done(&t);
                    Ok(e)
                };
                Ffn::Moe {
                    router: matrix(&mut ld, &mut tr, &b("ffn_gate_inp"), cfg.experts, d)?,
                    gate: stack(&mut ld, &mut tr, &b("ffn_gate_exps"), ff, d)?,
                    up: stack(&mut ld, &mut tr, &b("ffn_up_exps"), ff, d)?,
                    down: stack(&mut ld, &mut tr, &b("ffn_down_exps"), d, ff)?,
                }
            } else {
                // Phi-3's ffn_up holds the gate rows then the up rows: already one [gate | up].
                let gate_up = if cfg.family.fused_gate_up {
                    vec![(matrix(&mut ld, &mut tr, &b("ffn_up"), 2 * ff, d)?, 0)]
                } else {
                    let parts = [(b("ffn_gate"), ff, RowOrder::Stored), (b("ffn_up"), ff, RowOrder::Stored)];
                    group(&mut ld, &mut tr, &format!("blk.{l}.ffn_gate_up"), &parts, d)?
                };
                Ffn::Dense { gate_up, down: matrix(&mut ld, &mut tr, &b("ffn_down"), d, ff)? }
            };
            let post_norms = match attn_post {
                Some(attn_post) => Some((attn_post, vector(&mut ld, &mut tr, &b("post_ffw_norm"))?)),
                None => None,
            };
            layers.push(Layer { attn_norm, qkv, qkv_bias, qk_norm, o: wo, ffn_norm, ffn, post_norms });
        }
        gpu.check()?;
        let repacks = std::mem::take(&mut ld.repacks);
        Ok(Weights { embd, out_norm, output, layers, rope_freqs, buffers: std::mem::take(&mut ld.buffers), gpu_bytes: ld.gpu_bytes, file_bytes, repacks })
    }
}
