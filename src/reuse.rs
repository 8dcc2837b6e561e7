//! What a linear op derives from its input and hands on: the integers of the one-token integer
//! form ([`crate::quantize`]) and the f16 halves of the matrix-unit matmul ([`crate::split`]).
//! The forward plan ([`crate::forward`]) passes them explicitly, as values, from the op that
//! made them to the next op that reads the same input, so no op guesses from the program's
//! length what an earlier one left behind.

/// A token row in the integer form ([`crate::program::Builder::quantized`]): one row, written by
/// a quantize op or by the op before the reader (`QOUT`, [`crate::linear::Fuse::quant_out`]).
#[derive(Clone, Debug)]
pub struct Quantized {
    /// Integers: per half, its h, m and l digits (3 x 16 bytes).
    pub q: wgpu::Buffer,
    /// Per half: (d, sum) as two f32; after the row's pairs, with `inorm`, the halves' sums of
    /// squares.
    pub s: wgpu::Buffer,
    /// What they hold: input buffer, norm weights, row stride, values.
    pub(crate) of: (wgpu::Buffer, Option<wgpu::Buffer>, u32, u32),
    /// With a norm, whether they are of the row times its weights, each half with its sum of
    /// squares of the raw row (written by a linear op: the reading matrix-vector kernel
    /// divides by the RMS, its `INORM`), not of the normalised row (the quantize op).
    pub inorm: bool,
}

/// A batch's rows as f16 halves for the matrix-unit matmul ([`crate::program::Builder::halves`]).
#[derive(Clone, Debug)]
pub struct Halves {
    /// The rounded rows.
    pub hi: wgpu::Buffer,
    /// The remainders.
    pub lo: wgpu::Buffer,
    /// What they hold: input buffer, row stride, values, and whether they are split only for
    /// batches that want every token's logits (the output head's).
    pub(crate) of: (wgpu::Buffer, u32, u32, bool),
}

/// What the ops on one input have derived from it so far. The forward plan hands it from one
/// linear op to the next that reads the same input, with nothing between them that writes that
/// input (or the buffers these hold); an op uses a form only if it is of exactly its input
/// (same buffer, norm, stride and width), and otherwise makes its own.
#[derive(Clone, Debug, Default)]
pub struct Derived {
    /// The integer form of the input's last token row, where it was made.
    pub quant: Option<Quantized>,
    /// The f16 halves, where they were made.
    pub halves: Option<Halves>,
}

impl Derived {
    /// Only the integer form `q` (what a linear op or attention hands on for its output).
    pub fn quantized(q: Option<Quantized>) -> Derived {
        Derived { quant: q, halves: None }
    }
}
