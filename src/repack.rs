//! Weights regrouped on the GPU once, after their upload, into a layout the kernels read faster
//! (the same bytes per row, so no larger than the file). Q8_0's 34-byte blocks (an f16 `d`, then
//! 32 int8 weights) put all but every eighth block off the 16-byte grid; regrouped, each row of
//! 256k weights holds groups of 8 blocks' weights (256 bytes) followed by their 8 `d` values
//! (`shaders/repack.wgsl`, read by `shaders/formats/q8_0.wgsl`), and the matrix-vector kernel
//! reads the weights as 16-byte pieces. The regrouping runs in place, in the buffer the file's
//! bytes were uploaded to: no staging memory, and any source works (the browser's streamed files
//! included, whose bytes arrive after the load is planned), as long as it runs after the upload
//! and before the first kernel reads the buffer: [`Builder::repack`] records it into the
//! builder's setup program, which [`crate::Llama`] runs before its first batch.
//!
//! Q6_K's 210-byte blocks (`d` last) are regrouped the same way in rows of 2048k weights (groups
//! of 8 blocks' other 208 bytes, then their `d` values) and read as pieces, which the integer
//! form of the matrix-vector kernel needs. (In v8, before the kernel's software pipelining, Q6_K
//! pieces measured no faster; in v10, with the f32 form, the 8B's down projection went from 1780
//! to 1293 us.)

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
    /// Weights per row (whole groups: [`group_weights`]).
    pub cols: u32,
}

/// Weights per group of 8 blocks of a regrouped type: Q8_0 256, Q6_K 2048; others 0.
pub fn group_weights(ty: GgmlType) -> u32 {
    match ty {
        GgmlType::Q8_0 => 256,
        GgmlType::Q6_K => 2048,
        _ => 0,
    }
}

/// Whether rows of `cols` weights of type `ty` are regrouped after upload: Q8_0 and Q6_K rows of
/// whole groups ([`group_weights`]). `shaders/formats/q8_0.wgsl` and `q6_k.wgsl` decide the same
/// way from the row width (`row_cols()`).
pub fn regrouped(ty: GgmlType, cols: u32) -> bool {
    let g = group_weights(ty);
    g > 0 && cols % g == 0
}

/// The uniform of `shaders/repack.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct RepackParams {
    groups: u32,
    /// 0: Q8_0, 1: Q6_K.
    kind: u32,
    pad: [u32; 2],
}

impl Builder<'_> {
    /// Records the regrouping of `r` into the setup program: a workgroup per group of 8 blocks.
    pub fn repack(&mut self, r: &Repack) {
        let groups = r.rows * (r.cols / group_weights(r.ty));
        let kind = (r.ty == GgmlType::Q6_K) as u32;
        let p = self.uniform("repack", &RepackParams { groups, kind, pad: [0; 2] });
        let v = self.variant(PipelineKey::plain(Kernel::Repack), &[&p, &r.buffer]);
        self.setup.push(vec![v], move |_| Some((0, grid(groups))));
    }
}
