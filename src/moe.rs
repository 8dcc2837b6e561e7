//! Mixtral-style mixture-of-experts feed-forward for a batch of tokens, each token choosing its
//! own experts: router logits (a linear op), top-k and gates per token (`moe_select.wgsl`, as
//! llama.cpp's llm_build_moe_ffn with softmax over the selected logits), each token's picked
//! experts' gate and up projections (`matvec_exp.wgsl`), SwiGLU, and their down projections
//! weighted by the gates into the residual (`moe_down.wgsl`). Expert stacks stay in their GGUF
//! storage format, split into parts of whole experts when larger than one binding.

use bytemuck::{Pod, Zeroable};

use crate::kernels::{Geometry, Kernel, PipelineKey};
use crate::linear::expert_threads_per_row;
use crate::program::Builder;
use crate::weights::Experts;

/// `struct P` of `shaders/moe_select.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SelectParams {
    /// Experts.
    pub experts: u32,
    /// Experts used per token.
    pub k: u32,
    /// Padding to 16 bytes.
    pub pad: [u32; 2],
}

/// `struct P` of `shaders/matvec_exp.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct ExpertParams {
    /// Rows per expert.
    pub rows: u32,
    /// Columns.
    pub cols: u32,
    /// First expert of this part in the low 16 bits, experts in the part in the high 16.
    pub experts: u32,
    /// Output column of pick 0's row 0 in a token's output row.
    pub y0: u32,
    /// Experts used per token.
    pub k: u32,
    /// Floats per token row of X.
    pub x_stride: u32,
    /// Floats per token row of Y.
    pub y_stride: u32,
    /// Padding to 32 bytes.
    pub pad: u32,
}

/// `struct P` of `shaders/moe_down.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct DownParams {
    /// Rows per expert (the model width).
    pub rows: u32,
    /// Columns (the expert FFN width).
    pub cols: u32,
    /// Experts used per token.
    pub k: u32,
    /// First expert of this part.
    pub e0: u32,
    /// Experts in this part.
    pub ne: u32,
    /// Floats per token row of H.
    pub h_stride: u32,
    /// Floats per token row of the residual.
    pub y_stride: u32,
    /// Padding to 32 bytes.
    pub pad: u32,
}

impl Builder<'_> {
    /// Top-k experts and gates per token: `router [tokens][E]` -> `sel`, `gate [tokens][k]`.
    pub fn moe_select(&mut self, experts: u32, k: u32, router: &wgpu::Buffer, sel: &wgpu::Buffer, gate: &wgpu::Buffer) {
        let p = self.uniform("moe_select", &SelectParams { experts, k, pad: [0; 2] });
        let step = self.step.clone();
        self.plain(PipelineKey::plain(Kernel::MoeSelect), &[("p", &p), ("st", &step), ("r", router), ("sel", sel), ("gate", gate)], |b| {
            [b.n_tokens.div_ceil(64), 1, 1]
        });
    }

    /// `y[i][y0 + j * rows ..] = W[sel[i][j]] x[i]` for each token's `k` picks, one op per part.
    #[allow(clippy::too_many_arguments)]
    pub fn matvec_exp(&mut self, w: &Experts, k: u32, sel: &wgpu::Buffer, x: &wgpu::Buffer, x_stride: u32, y: &wgpu::Buffer, y_stride: u32, y0: u32) {
        let tpr = expert_threads_per_row(self.gpu, w.ty, w.rows * k, w.cols);
        let step = self.step.clone();
        for part in &w.parts {
            // Experts <= 256 (config), so first and count share one word.
            let params = ExpertParams { rows: w.rows, cols: w.cols, experts: part.expert_start | part.experts << 16, y0, k, x_stride, y_stride, pad: 0 };
            let p = self.uniform("matvec_exp", &params);
            let key = PipelineKey::weights(Kernel::MatvecExp, w.ty, w.cols, Geometry::rows(tpr, 1));
            let rows = w.rows.div_ceil(64 / tpr);
            self.plain(key, &[("p", &p), ("st", &step), ("sel", sel), ("W", &part.buffer), ("X", x), ("Y", y)], move |b| [rows, k, b.n_tokens]);
            let (per_expert, ne, io) = (part.buffer.size() / part.experts.max(1) as u64, part.experts, (w.cols + w.rows) as u64 * 4);
            self.traffic(move |b| per_expert * (b.n_tokens * k).min(ne) as u64 + b.n_tokens as u64 * k as u64 * io);
        }
    }

    /// `x[i] += sum_j gate[i][j] W[sel[i][j]] h[i][j]` for each token's `k` picks, one op per part.
    #[allow(clippy::too_many_arguments)]
    pub fn moe_down(&mut self, w: &Experts, k: u32, sel: &wgpu::Buffer, gate: &wgpu::Buffer, h: &wgpu::Buffer, h_stride: u32, x: &wgpu::Buffer) {
        let tpr = expert_threads_per_row(self.gpu, w.ty, w.rows, w.cols);
        let step = self.step.clone();
        for part in &w.parts {
            let params = DownParams { rows: w.rows, cols: w.cols, k, e0: part.expert_start, ne: part.experts, h_stride, y_stride: w.rows, pad: 0 };
            let p = self.uniform("moe_down", &params);
            let key = PipelineKey::weights(Kernel::MoeDown, w.ty, w.cols, Geometry::rows(tpr, 1));
            let rows = w.rows.div_ceil(64 / tpr);
            self.plain(key, &[("p", &p), ("st", &step), ("sel", sel), ("gate", gate), ("W", &part.buffer), ("X", h), ("Y", x)], move |b| [rows, 1, b.n_tokens]);
            let (per_expert, ne, io) = (part.buffer.size() / part.experts.max(1) as u64, part.experts, (k * w.cols + 2 * w.rows) as u64 * 4);
            self.traffic(move |b| per_expert * (b.n_tokens * k).min(ne) as u64 + b.n_tokens as u64 * io);
        }
    }
}
