//! Linear ops `Y (+)= W X` over a batch of tokens: the one place that picks, per batch, between
//! the matrix-vector kernel (a few tokens: each weight is read once and multiplied into every
//! token, the decode path) and the tiled matrix-matrix kernel (many tokens: prefill). Both read
//! the weights in their GGUF storage format through the format's `dq4` decoder
//! (`shaders/formats/*.wgsl`) and share one parameter block ([`LinearParams`], `shaders/linear.wgsl`).

use bytemuck::{Pod, Zeroable};

use crate::ggml::GgmlType;
use crate::gpu::Gpu;
use crate::kernels::{format_chunk, CpuTile, Geometry, Kernel, PipelineKey, Tile};
use crate::program::{grid, Builder};
use crate::weights::Matrix;

/// Token vectors per dispatch of the matrix-vector kernel's multi-token form (batches of 2 up to
/// this many tokens; 1 has its own form).
pub const MATVEC_TOKENS: u32 = 8;

/// `struct Linear` of `shaders/linear.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct LinearParams {
    /// Rows of this part of W.
    pub rows: u32,
    /// Columns (the input width).
    pub cols: u32,
    /// Floats between consecutive tokens' inputs in X.
    pub x_stride: u32,
    /// Floats between consecutive tokens' outputs in Y.
    pub y_stride: u32,
    /// Where in a token's output row this part's first row goes.
    pub y0: u32,
    /// 1: add to Y (the residual stream); 0: overwrite.
    pub accumulate: u32,
    /// 1: only the batch's last token (read from X row n - 1, written to Y row 0).
    pub last_only: u32,
    /// Padding to 32 bytes.
    pub pad: u32,
}

/// Where a linear op reads and writes.
#[derive(Clone, Copy)]
pub struct Io<'a> {
    /// Input activations `[tokens][x_stride]`.
    pub x: &'a wgpu::Buffer,
    /// See [`LinearParams::x_stride`].
    pub x_stride: u32,
    /// Output `[tokens][y_stride]`.
    pub y: &'a wgpu::Buffer,
    /// See [`LinearParams::y_stride`].
    pub y_stride: u32,
    /// First output column of the matrix's row 0 (fused projections write side by side).
    pub y0: u32,
    /// Add to Y instead of overwriting it.
    pub accumulate: bool,
}

/// Threads per row (TPR) of the matrix-vector kernel for rows of `cols` weights of format `ty`
/// (`rows`: see [`expert_threads_per_row`]); a workgroup then holds 64 / TPR rows.
///
/// * On a GPU, 64 (fewer when the row has fewer than 64 groups of 4 weights): the threads of a row read
///   side by side (`shaders/matvec.wgsl`), and more threads keep more loads in flight. Measured
///   on an H200, decode of the Llama-3.2-1B shape (Q8_0 / Q4_K_M / F16 tok/s) with 8, 16, 32, 64
///   threads per row: 256 / 308 / 344 / 351, 188 / 226 / 253 / 265, 252 / 309 / 370 / 380.
/// * On a CPU implementation ([`Gpu::is_cpu`]: lavapipe, SwiftShader), 1: each invocation takes
///   a whole row, so the SIMD lanes of a workgroup read the same `X` elements in step (a uniform
///   address: one load instead of one per lane) and no reduction is needed.
///
/// [`crate::gpu::Tuning::tpr`] overrides both.
pub fn threads_per_row(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32) -> u32 {
    if gpu.tuning().tpr.is_some() || gpu.is_cpu() {
        return expert_threads_per_row(gpu, ty, rows, cols);
    }
    let _ = ty;
    (cols / 4).max(1).next_power_of_two().clamp(4, 64)
}

/// Threads per row of the expert kernels (`matvec_exp`, `moe_down`: each thread takes runs of
/// CHUNK weights) over `rows` rows (all picks together) of `cols` weights of format `ty`: on a
/// GPU the fewest threads per row, from 64 (or the row's chunks rounded up to a power of two,
/// if fewer) down to 4, that still give about 128k threads in all (enough to fill a large GPU);
/// 1 on a CPU implementation; [`crate::gpu::Tuning::tpr`] overrides both.
pub fn expert_threads_per_row(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32) -> u32 {
    if let Some(t) = gpu.tuning().tpr {
        return t;
    }
    if gpu.is_cpu() {
        return 1;
    }
    const THREADS: u64 = 128 * 1024;
    let chunks = (cols / format_chunk(ty)).max(1);
    let mut t = chunks.next_power_of_two().clamp(4, 64);
    while t > 4 && rows as u64 * (t as u64 / 2) >= THREADS {
        t /= 2;
    }
    t
}

impl Builder<'_> {
    /// `Y (+)= W X` over every token of a batch, one op per part of `W`: the matrix-vector
    /// kernel for batches of up to [`crate::gpu::Tuning::matvec_max_tokens`] tokens, the tiled
    /// matrix-matrix kernel beyond (on CPU adapters its CPU form, [`crate::gpu::Tuning::cpu_tile`]).
    pub fn linear(&mut self, w: &Matrix, io: Io<'_>) {
        let mv_max = self.gpu.tuning().matvec_max_tokens;
        let coop = self.gpu.tuning().coop;
        let min_large = self.gpu.tuning().min_large_tiles;
        let sg = self.gpu.tuning().cpu_subgroup;
        // Subgroups must tile the workgroup.
        let cpu_tile =
            self.gpu.tuning().cpu_tile.filter(|_| self.gpu.is_cpu()).map(|t| CpuTile { subgroup: if t.lanes % sg.max(1) == 0 { sg } else { 0 }, ..t });
        // The matrix-unit kernel's fixed 64 x 64 tile (shaders/matmul_coop.wgsl).
        let tile = if coop { crate::kernels::Tile { bm: 64, bn: 64, tm: 4, tn: 4 } } else { self.gpu.tuning().tile };
        for part in &w.parts {
            let tpr = threads_per_row(self.gpu, w.ty, part.rows, w.cols);
            let params = LinearParams {
                rows: part.rows,
                cols: w.cols,
                x_stride: io.x_stride,
                y_stride: io.y_stride,
                y0: io.y0 + part.row_start,
                accumulate: io.accumulate as u32,
                last_only: 0,
                pad: 0,
            };
            let p = self.uniform("linear", &params);
            let bufs = [&p, &self.step.clone(), &part.buffer, io.x, io.y];
            let mut variants = vec![
                self.variant(PipelineKey::weights(Kernel::Matvec, w.ty, Geometry::Rows { tpr, tokens: 1 }), &bufs),
                self.variant(PipelineKey::weights(Kernel::Matvec, w.ty, Geometry::Rows { tpr, tokens: MATVEC_TOKENS }), &bufs),
                if coop {
                    self.variant(PipelineKey::weights(Kernel::MatmulCoop, w.ty, Geometry::Fixed), &bufs)
                } else {
                    self.variant(PipelineKey::weights(Kernel::Matmul, w.ty, Geometry::Tile(tile)), &bufs)
                },
            ];
            // A large tile leaves a GPU idle when it makes few workgroups (a narrow matrix, a short
            // batch): then the portable tile, four times the workgroups, takes over.
            let small = (!coop && tile != Tile::PORTABLE).then_some(Tile::PORTABLE);
            if let Some(t) = small {
                variants.push(self.variant(PipelineKey::weights(Kernel::Matmul, w.ty, Geometry::Tile(t)), &bufs));
            }
            let cpu = cpu_tile.map(|t| {
                variants.push(self.variant(PipelineKey::weights(Kernel::MatmulCpu, w.ty, Geometry::CpuTile(t)), &bufs));
                (variants.len() - 1, t)
            });
            let (rows, rpw) = (part.rows, 64 / tpr);
            self.op(variants, move |b| {
                Some(match b.n_tokens {
                    1 if mv_max >= 1 => (0, grid(rows.div_ceil(rpw))),
                    n if n <= mv_max.min(MATVEC_TOKENS) => (1, grid(rows.div_ceil(rpw))),
                    n => match (cpu, small) {
                        (Some((i, t)), _) => (i, [rows.div_ceil(t.bm()), n.div_ceil(t.tokens), 1]),
                        (None, Some(s)) if rows.div_ceil(tile.bm) * n.div_ceil(tile.bn) < min_large => (3, [rows.div_ceil(s.bm), n.div_ceil(s.bn), 1]),
                        _ => (2, [rows.div_ceil(tile.bm), n.div_ceil(tile.bn), 1]),
                    },
                })
            });
            let (wbytes, io) = (part.buffer.size(), (w.cols + (1 + io.accumulate as u32) * part.rows) as u64 * 4);
            self.traffic(move |b| wbytes + b.n_tokens as u64 * io);
        }
    }

    /// The output head `logits = W x`: for the batch's last token only (into logits row 0), or
    /// with [`crate::program::Batch::all_logits`] for every token (as [`Builder::linear`]).
    pub fn head(&mut self, w: &Matrix, x: &wgpu::Buffer, d: u32, logits: &wgpu::Buffer, vocab: u32) {
        let first = self.program.ops.len();
        self.linear(w, Io { x, x_stride: d, y: logits, y_stride: vocab, y0: 0, accumulate: false });
        for (i, part) in w.parts.iter().enumerate() {
            let tpr = threads_per_row(self.gpu, w.ty, part.rows, w.cols);
            let params = LinearParams { rows: part.rows, cols: w.cols, x_stride: d, y_stride: vocab, y0: part.row_start, accumulate: 0, last_only: 1, pad: 0 };
            let p = self.uniform("head", &params);
            let step = self.step.clone();
            let last = self.variant(PipelineKey::weights(Kernel::Matvec, w.ty, Geometry::Rows { tpr, tokens: 1 }), &[&p, &step, &part.buffer, x, logits]);
            let op = &mut self.program.ops[first + i];
            let last_index = op.variants.len();
            op.variants.push(last);
            let all = std::mem::replace(&mut op.plan, Box::new(|_| None));
            let rows = part.rows;
            op.plan = Box::new(move |b| if b.all_logits { all(b) } else { Some((last_index, grid(rows.div_ceil(64 / tpr)))) });
            let all = std::mem::replace(&mut op.traffic, Box::new(|_| 0));
            let last = part.buffer.size() + (w.cols + rows) as u64 * 4;
            op.traffic = Box::new(move |b| if b.all_logits { all(b) } else { last });
        }
    }
}
