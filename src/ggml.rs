//! GGML tensor types and their CPU (de)quantisation.
//!
//! Block layouts follow ggml's `ggml-common.h`; the dequantisers follow ggml's
//! `dequantize_row_*` loops in `ggml-quants.c` element for element (and, where it matters for
//! bit-exact results, in the same floating-point operation order). This module is the reference
//! for the GPU kernels and the CPU fallback when a type has no kernel.
//!
//! All tensors are flat: a tensor of `n` elements of a block type is `n / block_size` blocks laid
//! end to end, each `block_bytes` long, little-endian.

mod dequant;
mod quant;

use crate::error::{Error, Result};

/// Elements in a K-quant super-block (`QK_K` in `ggml-common.h`).
pub const QK_K: usize = 256;
/// Bytes of packed 6-bit scales and mins in `block_q4_K` / `block_q5_K` (`K_SCALE_SIZE`).
pub const K_SCALE_SIZE: usize = 12;

/// A GGML tensor type this crate can read, with ggml's numeric id (`enum ggml_type` in `ggml.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// 32-bit IEEE float.
    F32 = 0,
    /// 16-bit IEEE half float.
    F16 = 1,
    /// Blocks of 32: `f16 d; u8 qs[16]`, value `(q - 8) * d` (18 bytes).
    Q4_0 = 2,
    /// Blocks of 32: `f16 d, m; u8 qs[16]`, value `q * d + m` (20 bytes).
    Q4_1 = 3,
    /// Blocks of 32: `f16 d; u8 qh[4]; u8 qs[16]`, 5-bit `q`, value `(q - 16) * d` (22 bytes).
    Q5_0 = 6,
    /// Blocks of 32: `f16 d, m; u8 qh[4]; u8 qs[16]`, value `q * d + m` (24 bytes).
    Q5_1 = 7,
    /// Blocks of 32: `f16 d; i8 qs[32]`, value `q * d` (34 bytes).
    Q8_0 = 8,
    /// Super-blocks of 256: `u8 scales[16]; u8 qs[64]; f16 d, dmin` (84 bytes).
    Q2_K = 10,
    /// Super-blocks of 256: `u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d` (110 bytes).
    Q3_K = 11,
    /// Super-blocks of 256: `f16 d, dmin; u8 scales[12]; u8 qs[128]` (144 bytes).
    Q4_K = 12,
    /// Super-blocks of 256: `f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]` (176 bytes).
    Q5_K = 13,
    /// Super-blocks of 256: `u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d` (210 bytes).
    Q6_K = 14,
    /// bfloat16: the upper 16 bits of an f32.
    BF16 = 30,
}

/// ggml's type names indexed by id (`ggml.h`; ids 4, 5, 31..=33 and 36..=38 were removed).
const NAMES: [&str; 40] = [
    "F32",
    "F16",
    "Q4_0",
    "Q4_1",
    "Q4_2 (removed)",
    "Q4_3 (removed)",
    "Q5_0",
    "Q5_1",
    "Q8_0",
    "Q8_1",
    "Q2_K",
    "Q3_K",
    "Q4_K",
    "Q5_K",
    "Q6_K",
    "Q8_K",
    "IQ2_XXS",
    "IQ2_XS",
    "IQ3_XXS",
    "IQ1_S",
    "IQ4_NL",
    "IQ3_S",
    "IQ2_S",
    "IQ4_XS",
    "I8",
    "I16",
    "I32",
    "I64",
    "F64",
    "IQ1_M",
    "BF16",
    "Q4_0_4_4 (removed)",
    "Q4_0_4_8 (removed)",
    "Q4_0_8_8 (removed)",
    "TQ1_0",
    "TQ2_0",
    "IQ4_NL_4_4 (removed)",
    "IQ4_NL_4_8 (removed)",
    "IQ4_NL_8_8 (removed)",
    "MXFP4",
];

impl GgmlType {
    /// Every supported type, in id order.
    pub const ALL: [GgmlType; 13] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::BF16,
    ];

    /// The type with ggml id `t`, or `None` for ids this crate does not handle (or ggml never
    /// defined).
    pub fn from_u32(t: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|ty| *ty as u32 == t)
    }

    /// ggml's name for the type, upper case as llama.cpp prints it: `"Q4_K"`, `"BF16"`.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// ggml's name for any id ggml defines, supported here or not (`"IQ2_XXS"`, `"MXFP4"`,
    /// `"Q4_2 (removed)"`); `"unknown"` for ids ggml never used.
    pub fn name_of(t: u32) -> &'static str {
        NAMES.get(t as usize).copied().unwrap_or("unknown")
    }

    /// The supported type called `s`, ignoring ASCII case (`"q4_k"` gives `Q4_K`).
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|ty| ty.name().eq_ignore_ascii_case(s))
    }

    /// Elements per block: 1 for float types, 32 for the `Q*_0/1` types, 256 (`QK_K`) for K-quants.
    pub fn block_size(self) -> u64 {
        use GgmlType::*;
        match self {
            F32 | F16 | BF16 => 1,
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => 32,
            Q2_K | Q3_K | Q4_K | Q5_K | Q6_K => QK_K as u64,
        }
    }

    /// Bytes per block (`sizeof(block_*)` in `ggml-common.h`).
    pub fn block_bytes(self) -> u64 {
        use GgmlType::*;
        match self {
            F32 => 4,
            F16 | BF16 => 2,
            Q4_0 => 18,
            Q4_1 => 20,
            Q5_0 => 22,
            Q5_1 => 24,
            Q8_0 => 34,
            Q2_K => 84,
            Q3_K => 110,
            Q4_K => 144,
            Q5_K => 176,
            Q6_K => 210,
        }
    }

    /// Bytes of a tensor of `n_elements` elements, or `None` if `n_elements` is not a multiple
    /// of [`block_size`](Self::block_size) or the size overflows `u64`.
    pub fn tensor_bytes(self, n_elements: u64) -> Option<u64> {
        if n_elements % self.block_size() != 0 {
            return None;
        }
        (n_elements / self.block_size()).checked_mul(self.block_bytes())
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Dequantises a whole tensor of type `ty` into `out` (one f32 per element), exactly as ggml's
/// `dequantize_row_*` (`ggml-quants.c`) or, for F16/BF16, the exact widening conversion.
///
/// # Errors
/// [`Error::Malformed`] if `bytes.len()` is not `ty.tensor_bytes(out.len())` (which also rejects
/// an `out.len()` that is not a multiple of the block size).
pub fn dequantize(ty: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    let expected = ty.tensor_bytes(out.len() as u64);
    if expected != Some(bytes.len() as u64) {
        return Err(Error::Malformed(format!(
            "dequantize {}: {} bytes cannot hold {} elements (expected {}; block size {}, {} bytes per block)",
            ty.name(),
            bytes.len(),
            out.len(),
            expected.map_or_else(|| "a multiple of the block size".to_string(), |e| e.to_string()),
            ty.block_size(),
            ty.block_bytes(),
        )));
    }
    dequant::tensor(ty, bytes, out);
    Ok(())
}

/// Quantises `values` to `ty`, returning the tensor's bytes in ggml's layout.
///
/// F32/F16/BF16 convert with round-to-nearest-even (ggml's `GGML_FP32_TO_FP16` and
/// `ggml_compute_fp32_to_bf16`). `Q4_0 .. Q8_0` follow ggml's `quantize_row_*_ref` exactly. The
/// K-quants use ggml's layouts but a simpler scale choice than ggml's `make_qkx2_quants` /
/// `make_qx_quants` search (per sub-block min/max, then the sub-block scales quantised against
/// the super-block's largest), so their bytes differ from llama-quantize's and their error is
/// somewhat larger.
///
/// # Errors
/// [`Error::Input`] if `values.len()` is not a multiple of the block size, or a block type is
/// given a NaN or infinite value (ggml's maths has no meaning for those).
pub fn quantize(ty: GgmlType, values: &[f32]) -> Result<Vec<u8>> {
    let bytes = ty
        .tensor_bytes(values.len() as u64)
        .ok_or_else(|| Error::Input(format!("quantize {}: {} values is not a multiple of the block size {}", ty.name(), values.len(), ty.block_size())))?;
    if ty.block_size() > 1 {
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(Error::Input(format!("quantize {}: value {} at index {i} is not finite", ty.name(), values[i])));
        }
    }
    let mut out = vec![0u8; bytes as usize];
    // Blocks are independent: large tensors are split over the CPU's threads (whole blocks each).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (elems, block_bytes) = (ty.block_size() as usize, ty.block_bytes() as usize);
    let blocks = values.len() / elems;
    if threads == 1 || blocks < 1 << 16 {
        quant::tensor(ty, values, &mut out);
    } else {
        let per = blocks.div_ceil(threads);
        std::thread::scope(|s| {
            for (v, o) in values.chunks(per * elems).zip(out.chunks_mut(per * block_bytes)) {
                s.spawn(move || quant::tensor(ty, v, o));
            }
        });
    }
    Ok(out)
}
