//! Activations as 24-bit integers for the integer form of the one-token matrix-vector product
//! (`shaders/quantize.wgsl`, read by `shaders/matvec_idot.wgsl`): each 16 values of a row
//! as `d * (65536 h + 256 m + l)` with signed bytes h, m and l and `d = max |v| / 8355711`, plus
//! their f32 sum. The error is at most about `1.5 d` a value (half a unit, plus f32's rounding of
//! `v / d` near 2^23): 1.8e-7 of its half's largest, near f32's own rounding, where llama.cpp's
//! integer paths quantise activations to 8 bits (Q8_1: 4e-3 of the block's largest). 16 bits
//! (1.5e-5) measured 2.03e-3 from `../shared/reference` on a decoded stories260K-pad256-Q4_K_M,
//! at the 2e-3 tolerance; the third digit costs a third more integer dot products.

use bytemuck::{Pod, Zeroable};

use crate::kernels::{Kernel, PipelineKey};
use crate::program::{Batch, Builder};
use crate::reuse::Quantized;

/// Values per quantisation block (one run of 16 weights in the matrix-vector kernel).
pub const HALF: u32 = 16;

/// Bytes of one half's integers: its three digits, 16 bytes each.
const HALF_BYTES: u64 = 48;

/// Bytes allocated per half for its scales: d and the sum (8), then, where a linear op writes them
/// for a fused RMSNorm (`INORM`), its sum of squares after the row's pairs (4); 16 keeps it simple.
const HALF_SCALE_BYTES: u64 = 16;

/// The largest integer magnitude: `0x7f7f7f`, so that every base-256 digit stays a signed byte.
pub const QMAX: f32 = 8355711.0;

/// `struct P` of `shaders/quantize.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct QuantizeParams {
    /// Values per row (a multiple of [`HALF`]).
    pub n: u32,
    /// RMSNorm epsilon (with `norm`).
    pub eps: f32,
    /// 1: RMSNorm the row with the weights bound at 3 first.
    pub norm: u32,
    /// Floats per token row of the input.
    pub x_stride: u32,
}

impl Builder<'_> {
    /// The last token row of `x` (`[tokens][x_stride]`, `cols` values; with `norm = (weights,
    /// eps)` RMSNorm'd first) in the integer form for the integer matrix-vector kernel: `given`
    /// where it is of exactly that row (handed on by the op that made it, [`crate::reuse::Derived`]), else a
    /// quantize op appended now (one-token batches only).
    pub fn quantized(&mut self, given: Option<&Quantized>, x: &wgpu::Buffer, x_stride: u32, cols: u32, norm: Option<(&wgpu::Buffer, f32)>) -> Quantized {
        let of = (x.clone(), norm.map(|n| n.0.clone()), x_stride, cols);
        if let Some(q) = given.filter(|q| q.of == of) {
            return q.clone();
        }
        let pair = self.quant_buffers((cols / HALF) as u64, None);
        self.quantize_into(pair, x, x_stride, cols, norm, |_| true)
    }

    /// [`Builder::quantized`]'s quantize op, into `(q, s)` (from [`Builder::quant_buffers`],
    /// taken earlier by an op that writes them on the other batches, bound before this op
    /// exists), run only on the one-token batches for which `when` holds.
    pub fn quantize_into(
        &mut self,
        (q, s): (wgpu::Buffer, wgpu::Buffer),
        x: &wgpu::Buffer,
        x_stride: u32,
        cols: u32,
        norm: Option<(&wgpu::Buffer, f32)>,
        when: impl Fn(&Batch) -> bool + 'static,
    ) -> Quantized {
        assert!(cols % HALF == 0 && x_stride % 4 == 0, "quantised rows are whole halves of vec4 rows");
        let of = (x.clone(), norm.map(|n| n.0.clone()), x_stride, cols);
        let halves = (cols / HALF) as u64;
        let params = QuantizeParams { n: cols, eps: norm.map_or(0.0, |n| n.1), norm: norm.is_some() as u32, x_stride };
        let p = self.uniform("quantize", &params);
        let step = self.step.clone();
        let v =
            self.variant(PipelineKey::plain(Kernel::Quantize), &[("p", &p), ("st", &step), ("x", x), ("w", norm.map_or(x, |n| n.0)), ("XQW", &q), ("XSW", &s)]);
        let groups = (cols / HALF).div_ceil(64);
        self.op(vec![v], move |b| (b.n_tokens == 1 && when(b)).then_some((0, [groups, 1, 1])));
        let reads = 1 + norm.is_some() as u64;
        self.traffic(move |_| reads * cols as u64 * 4 + halves * (HALF_BYTES + 8));
        Quantized { q, s, of, inorm: false }
    }

    /// Buffers for `halves` halves' integers and scales, other than `avoid` (the ones an op that
    /// writes them also reads): a pool of pairs, grown as needed.
    pub fn quant_buffers(&mut self, halves: u64, avoid: Option<&wgpu::Buffer>) -> (wgpu::Buffer, wgpu::Buffer) {
        let fits = |(q, _): &&(wgpu::Buffer, wgpu::Buffer)| q.size() >= halves * HALF_BYTES && Some(q) != avoid;
        if let Some((q, s)) = self.quant_pool.iter().find(fits) {
            return (q.clone(), s.clone());
        }
        let pair = (self.storage("xq", halves * HALF_BYTES), self.storage("xq scales", halves * HALF_SCALE_BYTES));
        self.quant_pool.push(pair.clone());
        pair
    }
}

/// The integer form of `y` (`[tokens][y_stride]`, `cols` values) that an op writes into `(q, s)`
/// for one-token batches; with `norm`, times those weights, each half's sum of squares of `y`
/// after the row's scales (see `quantize_half.wgsl`): the reader divides by the RMS (`INORM`).
pub fn written_by_op((q, s): (wgpu::Buffer, wgpu::Buffer), y: &wgpu::Buffer, y_stride: u32, cols: u32, norm: Option<&wgpu::Buffer>) -> Quantized {
    Quantized { q, s, of: (y.clone(), norm.cloned(), y_stride, cols), inorm: norm.is_some() }
}
