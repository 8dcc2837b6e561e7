//! Block dequantisers: one function per type, each a transcription of the matching
//! `dequantize_row_*` loop in ggml's `ggml-quants.c` for one block (same element order, same
//! float operation order, so results are bit-identical to ggml's scalar code).

use super::{GgmlType, QK_K};
use half::{bf16, f16};

/// Dequantises a tensor whose sizes the caller has checked (`bytes` is whole blocks for `y`).
pub(super) fn tensor(ty: GgmlType, bytes: &[u8], y: &mut [f32]) {
    let block: fn(&[u8], &mut [f32]) = match ty {
        GgmlType::F32 => f32_1,
        GgmlType::F16 => f16_1,
        GgmlType::BF16 => bf16_1,
        GgmlType::Q4_0 => q4_0,
        GgmlType::Q4_1 => q4_1,
        GgmlType::Q5_0 => q5_0,
        GgmlType::Q5_1 => q5_1,
        GgmlType::Q8_0 => q8_0,
        GgmlType::Q2_K => q2_k,
        GgmlType::Q3_K => q3_k,
        GgmlType::Q4_K => q4_k,
        GgmlType::Q5_K => q5_k,
        GgmlType::Q6_K => q6_k,
    };
    let bb = ty.block_bytes() as usize;
    let bs = ty.block_size() as usize;
    for (b, out) in bytes.chunks_exact(bb).zip(y.chunks_exact_mut(bs)) {
        block(b, out);
    }
}

/// Little-endian f16 at byte `i`, widened exactly.
pub(super) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

fn f32_1(b: &[u8], y: &mut [f32]) {
    y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
}

fn f16_1(b: &[u8], y: &mut [f32]) {
    y[0] = f16_at(b, 0);
}

fn bf16_1(b: &[u8], y: &mut [f32]) {
    y[0] = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
}

/// `block_q4_0 { f16 d; u8 qs[16] }`: low nibbles are elements 0..16, high nibbles 16..32.
fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = ((qs[j] & 0xF) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

/// `block_q4_1 { f16 d, m; u8 qs[16] }`.
fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = (qs[j] & 0xF) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

/// The fifth bits of a Q5 block: element `j < 16` uses bit `j`, element `j + 16` bit `j + 16`.
fn q5_high(qh: u32, j: usize) -> (u8, u8) {
    (((qh >> j) << 4) as u8 & 0x10, (qh >> (j + 12)) as u8 & 0x10)
}

/// `block_q5_0 { f16 d; u8 qh[4]; u8 qs[16] }`.
fn q5_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        let (h0, h1) = q5_high(qh, j);
        y[j] = (((qs[j] & 0xF) | h0) as i32 - 16) as f32 * d;
        y[j + 16] = (((qs[j] >> 4) | h1) as i32 - 16) as f32 * d;
    }
}

/// `block_q5_1 { f16 d, m; u8 qh[4]; u8 qs[16] }`.
fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let (h0, h1) = q5_high(qh, j);
        y[j] = ((qs[j] & 0xF) | h0) as f32 * d + m;
        y[j + 16] = ((qs[j] >> 4) | h1) as f32 * d + m;
    }
}

/// `block_q8_0 { f16 d; i8 qs[32] }`.
fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = (b[2 + j] as i8) as f32 * d;
    }
}

/// `block_q2_K { u8 scales[16]; u8 qs[64]; f16 d, dmin }`. Each 128-element half uses 32 bytes
/// of `qs`; shift `2 * j` selects the 32-element group `j`; each 16 elements have a scale byte
/// (low nibble scale, high nibble min).
fn q2_k(b: &[u8], y: &mut [f32]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let (d, min) = (f16_at(b, 80), f16_at(b, 82));
    let mut is = 0;
    let mut out = 0;
    for n in 0..QK_K / 128 {
        let q = &qs[32 * n..32 * n + 32];
        for j in 0..4 {
            let shift = 2 * j;
            for half in 0..2 {
                let sc = scales[is];
                is += 1;
                let dl = d * (sc & 0xF) as f32;
                let ml = min * (sc >> 4) as f32;
                for l in 0..16 {
                    y[out] = dl * ((q[16 * half + l] >> shift) & 3) as f32 - ml;
                    out += 1;
                }
            }
        }
    }
}

/// The 16 six-bit scales of a Q3_K block from its 12 packed bytes: scale `i` has low nibble
/// `scales[i % 8]` (low half for `i < 8`, high half after) and high two bits
/// `scales[8 + i % 4] >> (2 * (i / 4))`. Same result as ggml's `kmask1/kmask2` shuffle.
pub(super) fn q3_k_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (i, o) in out.iter_mut().enumerate() {
        let low = if i < 8 { s[i] & 0xF } else { s[i - 8] >> 4 };
        let high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        *o = ((low | (high << 4)) as i32 - 32) as i8;
    }
    out
}

/// `block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }`: 2 low bits in `qs` (as
/// Q2_K), the third from `hmask` (bit clear means subtract 4), signed 6-bit scales.
fn q3_k(b: &[u8], y: &mut [f32]) {
    let (hm, qs) = (&b[0..32], &b[32..96]);
    let scales = q3_k_scales(&b[96..108]);
    let d_all = f16_at(b, 108);
    let mut m = 1u8;
    let mut is = 0;
    let mut out = 0;
    for n in 0..QK_K / 128 {
        let q = &qs[32 * n..32 * n + 32];
        for j in 0..4 {
            let shift = 2 * j;
            for half in 0..2 {
                let dl = d_all * scales[is] as f32;
                is += 1;
                for l in 16 * half..16 * half + 16 {
                    let low = ((q[l] >> shift) & 3) as i8;
                    let sub = if hm[l] & m != 0 { 0 } else { 4 };
                    y[out] = dl * (low - sub) as f32;
                    out += 1;
                }
            }
            m <<= 1;
        }
    }
}

/// ggml's `get_scale_min_k4`: scale and min `j` (0..8) from the 12 packed bytes of Q4_K/Q5_K.
/// For `j < 4` they are the low 6 bits of bytes `j` and `j + 4`; for `j >= 4` the low 4 bits
/// come from byte `j + 4` (scale low nibble, min high nibble) and the top 2 bits from the top
/// bits of bytes `j - 4` (scale) and `j` (min).
pub(super) fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// `block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }`: each 64 elements use 32 bytes of
/// `qs`, low nibbles first (sub-block `2i`), then high nibbles (sub-block `2i + 1`).
fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, min) = (f16_at(b, 0), f16_at(b, 2));
    let (scales, qs) = (&b[4..16], &b[16..144]);
    for i in 0..QK_K / 64 {
        let (sc1, m1) = scale_min_k4(2 * i, scales);
        let (sc2, m2) = scale_min_k4(2 * i + 1, scales);
        let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
        let q = &qs[32 * i..32 * i + 32];
        let y = &mut y[64 * i..64 * i + 64];
        for l in 0..32 {
            y[l] = d1 * (q[l] & 0xF) as f32 - m1;
            y[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

/// `block_q5_K { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }`: as Q4_K plus a fifth
/// bit per element from `qh`, bit `2i` for the low-nibble half of chunk `i`, `2i + 1` for the
/// high.
fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, min) = (f16_at(b, 0), f16_at(b, 2));
    let (scales, qh, ql) = (&b[4..16], &b[16..48], &b[48..176]);
    for i in 0..QK_K / 64 {
        let (sc1, m1) = scale_min_k4(2 * i, scales);
        let (sc2, m2) = scale_min_k4(2 * i + 1, scales);
        let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
        let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
        let (u1, u2) = (1u8 << (2 * i), 2u8 << (2 * i));
        let q = &ql[32 * i..32 * i + 32];
        let y = &mut y[64 * i..64 * i + 64];
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[l] = d1 * ((q[l] & 0xF) + h1) as f32 - m1;
            y[l + 32] = d2 * ((q[l] >> 4) + h2) as f32 - m2;
        }
    }
}

/// `block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }`: per 128 elements, 64 bytes of
/// `ql` and 32 of `qh`; element `l + 32k` (k = 0..4) takes nibble `k / 2` of `ql[l + 32 (k % 2)]`
/// and bits `2k..2k+2` of `qh[l]`, minus 32; scale index `l / 16 + 2k`.
fn q6_k(b: &[u8], y: &mut [f32]) {
    let (ql, qh, sc) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for n in 0..QK_K / 128 {
        let (ql, qh) = (&ql[64 * n..64 * n + 64], &qh[32 * n..32 * n + 32]);
        let sc = &sc[8 * n..8 * n + 8];
        let y = &mut y[128 * n..128 * n + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            y[l] = d * (sc[is] as i8) as f32 * q1 as f32;
            y[l + 32] = d * (sc[is + 2] as i8) as f32 * q2 as f32;
            y[l + 64] = d * (sc[is + 4] as i8) as f32 * q3 as f32;
            y[l + 96] = d * (sc[is + 6] as i8) as f32 * q4 as f32;
        }
    }
}
