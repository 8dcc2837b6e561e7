//! Uploads a GGUF's tensors to GPU buffers in the layouts the kernels read.
//!
//! Q8_0 matrices stay quantised (repacked to packed int8 + f32 scales, as the seed); every other
//! type is dequantised to f32 at load through a bounded scratch (never the whole model in memory).
//! A matrix larger than one storage binding is split by rows into parts, each its own buffer.

use crate::config::Config;
use crate::error::{Error, Result};
use crate::ggml::{self, GgmlType};
use crate::gguf::{ByteSource, Gguf, TensorInfo};
use crate::gpu::Gpu;

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

/// How a matrix is stored on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatFormat {
    /// f32, row-major `[rows][cols]`; one buffer per part.
    F32,
    /// Q8_0 repacked: `[rows][cols/4]` u32 of four int8, then `[rows][cols/32]` f32 scales.
    Q8_0,
}

/// A run of rows of a matrix held in its own buffers.
pub struct MatPart {
    /// First row of the part.
    pub row_start: u32,
    /// Rows in the part.
    pub rows: u32,
    /// F32: `[W]`; Q8_0: `[Q, D]`.
    pub buffers: Vec<wgpu::Buffer>,
}

/// A `[rows][cols]` weight matrix on the GPU, split by rows to fit the binding limit.
pub struct Matrix {
    /// Storage format.
    pub format: MatFormat,
    /// Output rows.
    pub rows: u32,
    /// Input columns.
    pub cols: u32,
    /// Parts, in row order.
    pub parts: Vec<MatPart>,
}

/// The feed-forward weights of one block.
pub enum Ffn {
    /// SwiGLU MLP.
    Dense { gate: Matrix, up: Matrix, down: Matrix },
    /// Mixtral-style experts: router `[E][d]`, and f32 `[E][ff][d]`, `[E][ff][d]`, `[E][d][ff]`.
    Moe { router: Matrix, gate: wgpu::Buffer, up: wgpu::Buffer, down: wgpu::Buffer },
}

/// One transformer block's weights.
pub struct Layer {
    /// RMSNorm weight before attention, `[d]`.
    pub attn_norm: wgpu::Buffer,
    /// Projections: q `[q_dim][d]`, k and v `[kv_dim][d]`, o `[d][q_dim]`.
    pub q: Matrix,
    /// See `q`.
    pub k: Matrix,
    /// See `q`.
    pub v: Matrix,
    /// See `q`.
    pub o: Matrix,
    /// RMSNorm weight before the FFN, `[d]`.
    pub ffn_norm: wgpu::Buffer,
    /// The FFN.
    pub ffn: Ffn,
}

/// Every weight of the model on the GPU.
pub struct Weights {
    /// Token embedding `[vocab][d]` f32 (gathered by the `embed` kernel).
    pub embd: Matrix,
    /// Final RMSNorm weight `[d]`.
    pub out_norm: wgpu::Buffer,
    /// Output head `[vocab][d]` (the token embedding again when tied).
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
}

struct Loader<'a> {
    gpu: &'a Gpu,
    g: &'a Gguf,
    src: &'a dyn TensorSource,
    max_binding: u64,
    progress: &'a mut dyn FnMut(&Progress),
    p: Progress,
    buffers: Vec<wgpu::Buffer>,
    gpu_bytes: u64,
}

impl Loader<'_> {
    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.g.tensor(name).ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    fn buffer(&mut self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        if size > self.max_binding {
            return Err(Error::TooLarge {
                tensor: label.to_string(),
                bytes: size,
                limit: self.max_binding,
                limit_name: "maxStorageBufferBindingSize",
            });
        }
        let b = self.gpu.storage(label, size);
        self.gpu_bytes += b.size();
        self.buffers.push(b.clone());
        Ok(b)
    }

    fn done(&mut self, t: &TensorInfo) {
        self.p.bytes_done += t.n_bytes;
        self.p.tensors_done += 1;
        (self.progress)(&self.p);
    }

    /// Dequantises elements `[e0, e0 + n)` of a tensor to f32 (both multiples of its block size).
    fn elements_f32(&self, t: &TensorInfo, e0: u64, n: u64) -> Result<Vec<f32>> {
        let off = t.ggml_type.tensor_bytes(e0).ok_or_else(|| bad_cols(t, e0))?;
        let len = t.ggml_type.tensor_bytes(n).ok_or_else(|| bad_cols(t, n))?;
        let mut raw = vec![0u8; len as usize];
        self.src.read_at(t.offset + off, &mut raw)?;
        let mut out = vec![0f32; n as usize];
        ggml::dequantize(t.ggml_type, &raw, &mut out)?;
        Ok(out)
    }

    /// A whole tensor as one f32 buffer (vectors, expert stacks).
    fn f32_tensor(&mut self, name: &str) -> Result<wgpu::Buffer> {
        let t = self.info(name)?.clone();
        let buf = self.buffer(name, t.n_elements * 4)?;
        if t.ggml_type == GgmlType::F32 {
            self.src.upload(self.gpu, &buf, 0, t.offset, t.n_elements * 4)?;
        } else {
            let block = t.ggml_type.block_size();
            let step = ((CHUNK_BYTES / 4) / block).max(1) * block;
            let mut done = 0;
            while done < t.n_elements {
                let m = (t.n_elements - done).min(step);
                let vals = self.elements_f32(&t, done, m)?;
                self.gpu.queue.write_buffer(&buf, done * 4, bytemuck::cast_slice(&vals));
                done += m;
            }
        }
        self.done(&t);
        Ok(buf)
    }

    /// A `[rows][cols]` matrix; Q8_0 stays quantised when `keep_q8`.
    fn matrix(&mut self, name: &str, rows: u32, cols: u32, keep_q8: bool) -> Result<Matrix> {
        let t = self.info(name)?.clone();
        let format = if keep_q8 && t.ggml_type == GgmlType::Q8_0 { MatFormat::Q8_0 } else { MatFormat::F32 };
        let row_gpu = match format {
            MatFormat::F32 => cols as u64 * 4,
            MatFormat::Q8_0 => cols as u64, // the int8 buffer is the larger of the two
        };
        if row_gpu > self.max_binding {
            return Err(Error::TooLarge { tensor: name.into(), bytes: row_gpu, limit: self.max_binding, limit_name: "maxStorageBufferBindingSize" });
        }
        let per_part = (self.max_binding / row_gpu).min(rows as u64) as u32;
        let mut parts = Vec::new();
        let mut r0 = 0u32;
        while r0 < rows {
            let n = per_part.min(rows - r0);
            let label = if n == rows { name.to_string() } else { format!("{name}[{r0}..{}]", r0 + n) };
            let buffers = match format {
                MatFormat::F32 => {
                    let b = self.buffer(&label, n as u64 * cols as u64 * 4)?;
                    self.fill_rows_f32(&t, &b, cols, r0, n)?;
                    vec![b]
                }
                MatFormat::Q8_0 => self.q8_part(&t, &label, cols, r0, n)?,
            };
            parts.push(MatPart { row_start: r0, rows: n, buffers });
            r0 += n;
        }
        self.done(&t);
        Ok(Matrix { format, rows, cols, parts })
    }

    fn fill_rows_f32(&mut self, t: &TensorInfo, buf: &wgpu::Buffer, cols: u32, r0: u32, n: u32) -> Result<()> {
        let cols = cols as u64;
        let row_bytes = row_bytes(t, cols)?;
        if t.ggml_type == GgmlType::F32 {
            return self.src.upload(self.gpu, buf, 0, t.offset + r0 as u64 * row_bytes, n as u64 * row_bytes);
        }
        let step = (CHUNK_BYTES / (cols * 4)).max(1);
        let mut done = 0u64;
        while done < n as u64 {
            let m = (n as u64 - done).min(step);
            let vals = self.elements_f32(t, (r0 as u64 + done) * cols, m * cols)?;
            self.gpu.queue.write_buffer(buf, done * cols * 4, bytemuck::cast_slice(&vals));
            done += m;
        }
        Ok(())
    }

    /// Repacks rows of a Q8_0 tensor (34-byte blocks: f16 d, 32 int8) into int8 and f32 scale buffers.
    fn q8_part(&mut self, t: &TensorInfo, label: &str, cols: u32, r0: u32, n: u32) -> Result<Vec<wgpu::Buffer>> {
        let cols = cols as u64;
        let row_bytes = row_bytes(t, cols)?;
        let nb = cols / 32;
        let q = self.buffer(&format!("{label}.q"), n as u64 * cols)?;
        let d = self.buffer(&format!("{label}.d"), n as u64 * nb * 4)?;
        let step = (CHUNK_BYTES / row_bytes).max(1);
        let mut done = 0u64;
        while done < n as u64 {
            let m = (n as u64 - done).min(step);
            let mut raw = vec![0u8; (m * row_bytes) as usize];
            self.src.read_at(t.offset + (r0 as u64 + done) * row_bytes, &mut raw)?;
            let mut qs = Vec::with_capacity((m * cols) as usize);
            let mut ds = Vec::with_capacity((m * nb) as usize);
            for blk in raw.chunks_exact(34) {
                ds.push(half::f16::from_le_bytes([blk[0], blk[1]]).to_f32());
                qs.extend_from_slice(&blk[2..]);
            }
            self.gpu.queue.write_buffer(&q, done * cols, &qs);
            self.gpu.queue.write_buffer(&d, done * nb * 4, bytemuck::cast_slice(&ds));
            done += m;
        }
        Ok(vec![q, d])
    }
}

fn bad_cols(t: &TensorInfo, cols: u64) -> Error {
    Error::Malformed(format!("tensor {}: rows of {cols} elements are not whole {} blocks", t.name, t.ggml_type.name()))
}

fn row_bytes(t: &TensorInfo, cols: u64) -> Result<u64> {
    t.ggml_type.tensor_bytes(cols).ok_or_else(|| bad_cols(t, cols))
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
        let mut ld = Loader { gpu, g, src, max_binding: gpu.max_binding(), progress, p, buffers: Vec::new(), gpu_bytes: 0 };
        let (d, q, kv, ff) = (cfg.d, cfg.q_dim(), cfg.kv_dim(), cfg.ff);
        let embd = ld.matrix("token_embd.weight", cfg.vocab, d, false)?;
        let out_norm = ld.f32_tensor("output_norm.weight")?;
        let out_name = if cfg.tied_output { "token_embd.weight" } else { "output.weight" };
        let output = ld.matrix(out_name, cfg.vocab, d, true)?;
        let rope_freqs = if cfg.has_rope_freqs {
            let t = ld.info("rope_freqs.weight")?.clone();
            let v = ld.elements_f32(&t, 0, t.n_elements)?;
            ld.done(&t);
            Some(v)
        } else {
            None
        };
        let mut layers = Vec::with_capacity(cfg.n_layers as usize);
        for l in 0..cfg.n_layers {
            let b = |s: &str| format!("blk.{l}.{s}.weight");
            let attn_norm = ld.f32_tensor(&b("attn_norm"))?;
            let wq = ld.matrix(&b("attn_q"), q, d, true)?;
            let wk = ld.matrix(&b("attn_k"), kv, d, true)?;
            let wv = ld.matrix(&b("attn_v"), kv, d, true)?;
            let wo = ld.matrix(&b("attn_output"), d, q, true)?;
            let ffn_norm = ld.f32_tensor(&b("ffn_norm"))?;
            let ffn = if cfg.is_moe() {
                Ffn::Moe {
                    router: ld.matrix(&b("ffn_gate_inp"), cfg.experts, d, true)?,
                    gate: ld.f32_tensor(&b("ffn_gate_exps"))?,
                    up: ld.f32_tensor(&b("ffn_up_exps"))?,
                    down: ld.f32_tensor(&b("ffn_down_exps"))?,
                }
            } else {
                Ffn::Dense {
                    gate: ld.matrix(&b("ffn_gate"), ff, d, true)?,
                    up: ld.matrix(&b("ffn_up"), ff, d, true)?,
                    down: ld.matrix(&b("ffn_down"), d, ff, true)?,
                }
            };
            layers.push(Layer { attn_norm, q: wq, k: wk, v: wv, o: wo, ffn_norm, ffn });
        }
        gpu.check()?;
        Ok(Weights { embd, out_norm, output, layers, rope_freqs, buffers: ld.buffers, gpu_bytes: ld.gpu_bytes, file_bytes })
    }
}
