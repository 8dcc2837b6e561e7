//! Weights regrouped on the GPU once, after their upload, into a layout the kernels read faster
//! (the same bytes per row, so no larger than the file). Q8_0's 34-byte blocks (an f16 `d`, then
//! 32 int8 weights) put all but every eighth block off the 16-byte grid; regrouped, each row of
//! 256k weights holds groups of 8 blocks' weights (256 bytes) followed by their 8 `d` values
//! (`shaders/repack.wgsl`, read by `shaders/formats/q8_0.wgsl`), and the matrix-vector kernel
//! reads the weights as 16-byte pieces. Other Q8_0 rows of 64k weights (SmolLM2's 576, say) are
//! regrouped in pairs of blocks (64 bytes of weights, then the two `d` values): every word of
//! weights then starts on a word, where the file's layout puts every other block 2 bytes off, so
//! that each 4 weights take one load instead of two (on CPU adapters, where loads are most of a
//! matvec's cost). The
//! regrouping runs in place, in the buffer the file's bytes were uploaded to: no staging memory,
//! and any source works (the browser's streamed files included, whose bytes arrive after the load
//! is planned), as long as it runs after the upload and before the first kernel reads the buffer:
//! [`Builder::repack`] records it into the builder's setup program, which [`crate::Llama`] runs
//! before its first batch.
//!
//! Q6_K's 210-byte blocks (`d` last) are regrouped the same way in rows of 2048k weights (groups
//! of 8 blocks' other 208 bytes, then their `d` values) and read as pieces, which the integer
//! form of the matrix-vector kernel needs (and which the f32 form reads faster too).

pub use crate::kernels::group_blocks;
use bytemuck::{Pod, Zeroable};

use crate::ggml::GgmlType;
use crate::kernels::{Kernel, PipelineKey};
use crate::program::{grid, Builder};

/// A buffer of `rows` rows of `cols` Q8_0 or Q6_K weights to regroup (from byte 0, as uploaded).
#[derive(Clone)]
pub struct Repack {
    /// Q8_0 or Q6_K.
    pub ty: GgmlType,
    /// The rows, stored as the file holds them until regrouped.
    pub buffer: wgpu::Buffer,
    /// Rows in the buffer (all experts of an expert part together).
    pub rows: u32,
    /// Weights per row (whole groups: [`group_blocks`]).
    pub cols: u32,
}

/// Whether rows of `cols` weights of type `ty` are regrouped after upload ([`group_blocks`]).
pub fn regrouped(ty: GgmlType, cols: u32) -> bool {
    group_blocks(ty, cols) > 0
}

/// The uniform of `shaders/repack.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct RepackParams {
    groups: u32,
    /// 0: Q8_0, 1: Q6_K.
    kind: u32,
    /// Blocks per group ([`group_blocks`]).
    blocks: u32,
    /// Groups per workgroup: as many as its 420 words of workgroup memory hold.
    per: u32,
}

/// Words of workgroup memory `shaders/repack.wgsl` regroups a run of groups in.
const RUN_WORDS: u32 = 420;

impl Builder<'_> {
    /// Records the regrouping of `r` into the setup program: a workgroup per run of groups.
    pub fn repack(&mut self, r: &Repack) {
        let blocks = group_blocks(r.ty, r.cols);
        let groups = r.rows * (r.cols / (blocks * r.ty.block_size() as u32));
        let kind = (r.ty == GgmlType::Q6_K) as u32;
        let per = RUN_WORDS / (blocks * r.ty.block_bytes() as u32 / 4);
        let p = self.uniform("repack", &RepackParams { groups, kind, blocks, per });
        let v = self.variant(PipelineKey::plain(Kernel::Repack), &[("p", &p), ("W", &r.buffer)]);
        let runs = groups.div_ceil(per);
        self.setup.push(vec![v], move |_| Some((0, grid(runs))));
    }
}
