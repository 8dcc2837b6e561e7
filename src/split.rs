//! Activations as f16 halves for the matrix-unit matmul (`shaders/split.wgsl`, read by
//! `shaders/matmul_coop.wgsl`): each f32 `x = hi + lo`, `hi` rounded to f16's 11 bits and `lo =
//! f16(x - hi)` (Ootomo and Yokota 2022), rows padded with zeros to a multiple of 32 values.
//! Done once per linear op input, where the matmul used to convert its activation tiles in
//! every workgroup of weight rows (448 of them on the Llama-3-8B shape's gate/up matrix).

use bytemuck::{Pod, Zeroable};

use crate::kernels::{Kernel, PipelineKey};
use crate::program::{Batch, Builder};
use crate::reuse::Halves;

/// `struct P` of `shaders/split.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct SplitParams {
    /// Values per row.
    pub cols: u32,
    /// Floats per token row of the input.
    pub x_stride: u32,
    /// Padding.
    pub pad: [u32; 2],
}

/// Values per row of the halves of `cols`-wide activations (the matmul's K step).
pub fn halves_stride(cols: u32) -> u32 {
    cols.div_ceil(32) * 32
}

impl Builder<'_> {
    /// `x` (`[tokens][x_stride]`, `cols` values) as f16 halves `(hi, lo)`, each `[tokens][LD]`
    /// with LD = [`halves_stride`]: `given` where it is of exactly that input (handed on by the
    /// linear op before, [`crate::reuse::Derived`]), else a split op appended now, run on the
    /// batches `when` holds for (`head`: the output head's, whose `when` is narrower).
    pub fn halves(
        &mut self,
        given: Option<&Halves>,
        x: &wgpu::Buffer,
        x_stride: u32,
        cols: u32,
        head: bool,
        when: impl Fn(&Batch) -> bool + 'static,
    ) -> Halves {
        let of = (x.clone(), x_stride, cols, head);
        if let Some(h) = given.filter(|h| h.of == of) {
            return h.clone();
        }
        let ld = halves_stride(cols);
        // As many token rows as `x` has (the matmul reads no row past the batch).
        let rows = x.size().div_ceil(x_stride.max(1) as u64 * 4);
        let bytes = rows * ld as u64 * 2;
        let (hi, lo) = match self.halves_pool.iter().find(|(h, _)| h.size() >= bytes) {
            Some(pair) => pair.clone(),
            None => {
                let pair = (self.storage("x hi", bytes), self.storage("x lo", bytes));
                self.halves_pool.push(pair.clone());
                pair
            }
        };
        let p = self.uniform("split", &SplitParams { cols, x_stride, pad: [0; 2] });
        let step = self.step.clone();
        let v = self.variant(PipelineKey::plain(Kernel::Split), &[("p", &p), ("st", &step), ("x", x), ("hi", &hi), ("lo", &lo)]);
        let groups = (ld / 4).div_ceil(64);
        self.op(vec![v], move |b| when(b).then_some((0, [groups, b.n_tokens, 1])));
        self.traffic(move |b| b.n_tokens as u64 * (cols + ld) as u64 * 4);
        Halves { hi, lo, of }
    }
}
