//! Activations a linear op derives from its input and the next op may reuse, as the program
//! builder keeps them: the integers of the one-token integer form ([`crate::quantize`]) and the
//! f16 halves of the matrix-unit matmul ([`crate::split`]). Below the builder, which holds the
//! last of each, and the ops that make and read them.

/// The builder's quantised activations: one token row, reused by consecutive linear ops that
/// read the same input (q/k/v after one norm), written by a quantize op or by the linear op
/// before them (`QOUT`, [`crate::program::Builder::quantized_by`]).
pub struct Scratch {
    /// Integers: per half, its h, m and l digits (3 x 16 bytes).
    pub(crate) q: wgpu::Buffer,
    /// Per half: (d, sum) as two f32; after the row's pairs, with `inorm`, the halves' sums of
    /// squares.
    pub(crate) s: wgpu::Buffer,
    /// What they hold: input buffer, norm weights, row stride, values.
    pub(crate) key: (wgpu::Buffer, Option<wgpu::Buffer>, u32, u32),
    /// The program length after the last op that read or wrote them (or that
    /// [`crate::program::Builder::pass_quantized`] let through): they are reused only by the op right after
    /// (nothing in between can have written the input).
    pub(crate) at: usize,
    /// With a norm, whether they are of the row times its weights, each half with its sum of
    /// squares of the raw row ([`crate::program::Builder::quantized_by`]: the matrix-vector kernel divides by the
    /// RMS, its `INORM`), not of the normalised row (the quantize op).
    pub(crate) inorm: bool,
}

/// The builder's last halves, reused by consecutive linear ops on the same input (q+k and v).
pub struct Halves {
    pub(crate) hi: wgpu::Buffer,
    pub(crate) lo: wgpu::Buffer,
    /// What they hold: input buffer, row stride, values, and whether they are split only for
    /// batches that want every token's logits (the output head's).
    pub(crate) key: (wgpu::Buffer, u32, u32, bool),
    /// The program length after the last op that read them: they are reused only by the op
    /// right after (nothing in between can have written the input).
    pub(crate) at: usize,
}
