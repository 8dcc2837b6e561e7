//! Block quantisers (the inverse of `dequant.rs`).
//!
//! `Q4_0 .. Q8_0` transcribe ggml's `quantize_row_*_ref` (`ggml-quants.c`), including its
//! truncating casts and clamps, so they produce ggml's bytes. The K-quants pack ggml's layouts but
//! pick scales with a plain min/max rule instead of ggml's iterative search: an affine K-quant
//! (Q2_K, Q4_K, Q5_K) covers each sub-block's `[min(0, lo), hi]`; a symmetric one (Q3_K, Q6_K)
//! maps each sub-block's largest-magnitude value to `-nmax`, as ggml's `make_qx_quants` starts.
// The loops mirror ggml-quants.c index by index (several arrays per index), for checking.
#![allow(clippy::needless_range_loop)]

use super::dequant::scale_min_k4;
use super::{GgmlType, QK_K};
use half::{bf16, f16};

/// Quantises `x` (whole blocks) into `y` (exactly the tensor's bytes).
pub(super) fn tensor(ty: GgmlType, x: &[f32], y: &mut [u8]) {
    let block: fn(&[f32], &mut [u8]) = match ty {
        GgmlType::F32 => |x, y| y.copy_from_slice(&x[0].to_le_bytes()),
        GgmlType::F16 => |x, y| y.copy_from_slice(&f16::from_f32(x[0]).to_bits().to_le_bytes()),
        GgmlType::BF16 => |x, y| y.copy_from_slice(&bf16::from_f32(x[0]).to_bits().to_le_bytes()),
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
    for (x, y) in x.chunks_exact(bs).zip(y.chunks_exact_mut(bb)) {
        block(x, y);
    }
}

/// Stores `v` as a little-endian f16 at byte `i`.
fn put_f16(y: &mut [u8], i: usize, v: f32) {
    y[i..i + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// ggml's `nearest_int`: round half to even.
fn nearest_int(v: f32) -> i32 {
    v.round_ties_even() as i32
}

/// The value of largest magnitude (the first one on ties), keeping its sign.
fn signed_amax(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |m, &v| if v.abs() > m.abs() { v } else { m })
}

/// Reciprocal, or 0 for a zero scale (ggml's `id = d ? 1.0f/d : 0.0f`).
fn inv(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// `quantize_row_q4_0_ref`: `d = max / -8` where `max` is the signed largest-magnitude value.
fn q4_0(x: &[f32], y: &mut [u8]) {
    let d = signed_amax(x) / -8.0;
    let id = inv(d);
    put_f16(y, 0, d);
    for j in 0..16 {
        let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
        let q1 = ((x[j + 16] * id + 8.5) as i8).min(15) as u8;
        y[2 + j] = q0 | (q1 << 4);
    }
}

/// `quantize_row_q4_1_ref`: `d = (max - min) / 15`, `m = min`.
fn q4_1(x: &[f32], y: &mut [u8]) {
    let (lo, hi) = min_max(x);
    let d = (hi - lo) / 15.0;
    let id = inv(d);
    put_f16(y, 0, d);
    put_f16(y, 2, lo);
    for j in 0..16 {
        let q0 = (((x[j] - lo) * id + 0.5) as i8).min(15) as u8;
        let q1 = (((x[j + 16] - lo) * id + 0.5) as i8).min(15) as u8;
        y[4 + j] = q0 | (q1 << 4);
    }
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter().fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

/// Packs 32 five-bit values as `qh` (bit `j` = fifth bit of element `j`) and nibbles `qs`.
fn pack_q5(q: &[u8; 32], y: &mut [u8]) {
    let mut qh = 0u32;
    for j in 0..16 {
        y[4 + j] = (q[j] & 0xF) | ((q[j + 16] & 0xF) << 4);
        qh |= (((q[j] & 0x10) >> 4) as u32) << j;
        qh |= (((q[j + 16] & 0x10) >> 4) as u32) << (j + 16);
    }
    y[..4].copy_from_slice(&qh.to_le_bytes());
}

/// `quantize_row_q5_0_ref`: `d = max / -16`, `q = min(31, (i8)(x / d + 16.5))`.
fn q5_0(x: &[f32], y: &mut [u8]) {
    let d = signed_amax(x) / -16.0;
    let id = inv(d);
    put_f16(y, 0, d);
    let q: [u8; 32] = std::array::from_fn(|j| ((x[j] * id + 16.5) as i8).min(31) as u8);
    pack_q5(&q, &mut y[2..22]);
}

/// `quantize_row_q5_1_ref`: `d = (max - min) / 31`, `m = min`, `q = (u8)((x - min) / d + 0.5)`.
fn q5_1(x: &[f32], y: &mut [u8]) {
    let (lo, hi) = min_max(x);
    let d = (hi - lo) / 31.0;
    let id = inv(d);
    put_f16(y, 0, d);
    put_f16(y, 2, lo);
    let q: [u8; 32] = std::array::from_fn(|j| ((x[j] - lo) * id + 0.5) as u8);
    pack_q5(&q, &mut y[4..24]);
}

/// `quantize_row_q8_0_ref`: `d = amax / 127`, `q = roundf(x / d)` (half away from zero).
fn q8_0(x: &[f32], y: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = inv(d);
    put_f16(y, 0, d);
    for j in 0..32 {
        y[2 + j] = ((x[j] * id).round() as i8) as u8;
    }
}

/// An affine K-quant of one super-block: `x ≈ d * sc[j] * L - dmin * m[j]` for sub-block `j`.
struct Affine {
    d: f32,
    dmin: f32,
    sc: Vec<u8>,
    m: Vec<u8>,
    l: [u8; QK_K],
}

/// The f16 nearest to `v` that is at least as far from zero, as an f32 (a scale rounded this
/// way never makes a sub-block scale overflow its bits).
fn round_f16_away(v: f32) -> f32 {
    let h = f16::from_f32(v);
    if h.to_f32().abs() >= v.abs() {
        return h.to_f32();
    }
    f16::from_bits(h.to_bits() + 1).to_f32() // the next magnitude up, same sign
}

/// Chooses an affine K-quant for `x` with sub-blocks of `sub` elements, levels `0..=nmax` and
/// sub-block scales/mins of `0..=smax`. `dmin`, the mins, `d` and the scales are all rounded up,
/// so every value lies inside its sub-block's representable range and the error is at most half
/// a step (a step is at most `(range + dmin) / nmax + d`).
fn affine(x: &[f32], sub: usize, nmax: u8, smax: u8) -> Affine {
    let n = QK_K / sub;
    let (mut his, mut mins) = (vec![0.0f32; n], vec![0.0f32; n]);
    for j in 0..n {
        let (lo, hi) = min_max(&x[sub * j..sub * (j + 1)]);
        (his[j], mins[j]) = (hi, -lo.min(0.0));
    }
    let fit = |v: f32, step: f32| if step > 0.0 { (v / step).ceil().clamp(0.0, smax as f32) as u8 } else { 0 };
    let dmin = round_f16_away(mins.iter().fold(0.0f32, |a, &b| a.max(b)) / smax as f32);
    let m: Vec<u8> = mins.iter().map(|&mn| fit(mn, dmin)).collect();
    let need: Vec<f32> = (0..n).map(|j| (his[j] + dmin * m[j] as f32) / nmax as f32).collect();
    let d = round_f16_away(need.iter().fold(0.0f32, |a, &b| a.max(b)) / smax as f32);
    let sc: Vec<u8> = need.iter().map(|&s| fit(s, d)).collect();
    let mut l = [0u8; QK_K];
    for (i, li) in l.iter_mut().enumerate() {
        let (step, off) = (d * sc[i / sub] as f32, dmin * m[i / sub] as f32);
        if step > 0.0 {
            *li = nearest_int((x[i] + off) / step).clamp(0, nmax as i32) as u8;
        }
    }
    Affine { d, dmin, sc, m, l }
}

/// Packs Q4_K/Q5_K's eight 6-bit scales and mins into 12 bytes (inverse of `scale_min_k4`).
fn pack_scale_min_k4(sc: &[u8], m: &[u8], out: &mut [u8]) {
    out.fill(0);
    for j in 0..8 {
        if j < 4 {
            out[j] = sc[j];
            out[j + 4] = m[j];
        } else {
            out[j + 4] = (sc[j] & 0xF) | ((m[j] & 0xF) << 4);
            out[j - 4] |= (sc[j] >> 4) << 6;
            out[j] |= (m[j] >> 4) << 6;
        }
    }
    debug_assert!((0..8).all(|j| scale_min_k4(j, out) == (sc[j], m[j])));
}

/// Q2_K: sixteen 16-element sub-blocks, 2-bit levels, 4-bit scale and min per sub-block.
fn q2_k(x: &[f32], y: &mut [u8]) {
    let a = affine(x, 16, 3, 15);
    put_f16(y, 80, a.d);
    put_f16(y, 82, a.dmin);
    for j in 0..16 {
        y[j] = a.sc[j] | (a.m[j] << 4);
    }
    pack_2bit(&a.l, &mut y[16..80]);
}

/// Packs 256 two-bit values as Q2_K/Q3_K `qs`: per 128 elements, 32 bytes whose bit pair `k`
/// holds element `32k + l`.
fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8]) {
    for n in 0..QK_K / 128 {
        for i in 0..32 {
            let e = |k: usize| (l[128 * n + 32 * k + i] & 3) << (2 * k);
            qs[32 * n + i] = e(0) | e(1) | e(2) | e(3);
        }
    }
}

/// Q4_K: eight 32-element sub-blocks, 4-bit levels, 6-bit scales and mins.
fn q4_k(x: &[f32], y: &mut [u8]) {
    let a = affine(x, 32, 15, 63);
    put_f16(y, 0, a.d);
    put_f16(y, 2, a.dmin);
    pack_scale_min_k4(&a.sc, &a.m, &mut y[4..16]);
    pack_nibbles(&a.l, &mut y[16..144]);
}

/// Packs the low nibbles of 256 values: per 64 elements, 32 bytes, element `l` low and `l + 32`
/// high (the Q4_K/Q5_K `qs` order).
fn pack_nibbles(l: &[u8; QK_K], qs: &mut [u8]) {
    for i in 0..QK_K / 64 {
        for k in 0..32 {
            qs[32 * i + k] = (l[64 * i + k] & 0xF) | ((l[64 * i + k + 32] & 0xF) << 4);
        }
    }
}

/// Q5_K: as Q4_K with 5-bit levels; the fifth bits go to `qh` (bit `2i` / `2i + 1` of byte `k`
/// for elements `64i + k` / `64i + 32 + k`).
fn q5_k(x: &[f32], y: &mut [u8]) {
    let a = affine(x, 32, 31, 63);
    put_f16(y, 0, a.d);
    put_f16(y, 2, a.dmin);
    pack_scale_min_k4(&a.sc, &a.m, &mut y[4..16]);
    let qh = &mut y[16..48];
    qh.fill(0);
    for i in 0..QK_K / 64 {
        for k in 0..32 {
            qh[k] |= ((a.l[64 * i + k] >> 4) << (2 * i)) | ((a.l[64 * i + 32 + k] >> 4) << (2 * i + 1));
        }
    }
    pack_nibbles(&a.l, &mut y[48..176]);
}

/// A symmetric K-quant of one super-block: `x ≈ d * sc[j] * q` for sub-block `j` of 16, `q` in
/// `-nmax..nmax`, returned as `L = q + nmax`.
fn symmetric(x: &[f32], nmax: i32, smax: i32) -> (f32, [i8; 16], [u8; QK_K]) {
    let scales: [f32; 16] = std::array::from_fn(|j| signed_amax(&x[16 * j..16 * j + 16]) / -(nmax as f32));
    let d = round_f16_away(signed_amax(&scales) / -(smax as f32));
    let sc: [i8; 16] = std::array::from_fn(|j| nearest_int(scales[j] * inv(d)).clamp(-smax, smax - 1) as i8);
    let mut l = [0u8; QK_K];
    for (i, li) in l.iter_mut().enumerate() {
        let step = d * sc[i / 16] as f32;
        let q = if step != 0.0 { nearest_int(x[i] / step).clamp(-nmax, nmax - 1) } else { 0 };
        *li = (q + nmax) as u8;
    }
    (d, sc, l)
}

/// Q3_K: 3-bit levels (`q` in -4..4: two bits in `qs`, the third in `hmask`), 6-bit signed
/// scales stored `+ 32` in 12 bytes (inverse of `q3_k_scales`).
fn q3_k(x: &[f32], y: &mut [u8]) {
    let (d, sc, l) = symmetric(x, 4, 32);
    put_f16(y, 108, d);
    let hm = &mut y[0..32];
    hm.fill(0);
    for (i, &v) in l.iter().enumerate() {
        hm[i % 32] |= (v >> 2) << (i / 32);
    }
    pack_2bit(&l, &mut y[32..96]);
    pack_q3_k_scales(&sc, &mut y[96..108]);
}

/// Packs 16 signed 6-bit scales into Q3_K's 12 bytes (inverse of `q3_k_scales`): low nibbles
/// of scales 0..8 then 8..16 in bytes 0..8, high bit pairs in bytes 8..12.
fn pack_q3_k_scales(sc: &[i8; 16], s: &mut [u8]) {
    s.fill(0);
    for (j, &v) in sc.iter().enumerate() {
        let v = (v as i32 + 32) as u8;
        s[j % 8] |= (v & 0xF) << (4 * (j / 8));
        s[8 + j % 4] |= (v >> 4) << (2 * (j / 4));
    }
}

/// Q6_K: 6-bit levels (low nibbles in `ql`, top two bits in `qh`), 8-bit signed scales.
fn q6_k(x: &[f32], y: &mut [u8]) {
    let (d, sc, l) = symmetric(x, 32, 128);
    put_f16(y, 208, d);
    for n in 0..QK_K / 128 {
        let l = &l[128 * n..128 * n + 128];
        for i in 0..32 {
            y[64 * n + i] = (l[i] & 0xF) | ((l[i + 64] & 0xF) << 4);
            y[64 * n + i + 32] = (l[i + 32] & 0xF) | ((l[i + 96] & 0xF) << 4);
            y[128 + 32 * n + i] = (l[i] >> 4) | ((l[i + 32] >> 4) << 2) | ((l[i + 64] >> 4) << 4) | ((l[i + 96] >> 4) << 6);
        }
    }
    for (j, &s) in sc.iter().enumerate() {
        y[192 + j] = s as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml::dequant::q3_k_scales;

    #[test]
    fn scale_min_k4_packing_round_trips_every_value() {
        for j in 0..8 {
            for v in 0..64u8 {
                for w in 0..64u8 {
                    // Position j gets (v, w); the others get values that set every bit.
                    let sc: Vec<u8> = (0..8).map(|i| if i == j { v } else { 63 - i as u8 }).collect();
                    let m: Vec<u8> = (0..8).map(|i| if i == j { w } else { 42 + i as u8 }).collect();
                    let mut packed = [0u8; 12];
                    pack_scale_min_k4(&sc, &m, &mut packed);
                    for i in 0..8 {
                        assert_eq!(scale_min_k4(i, &packed), (sc[i], m[i]), "j {j} v {v} w {w} i {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn q3_k_scale_packing_round_trips_every_value() {
        for j in 0..16 {
            for v in -32..32i8 {
                let sc: [i8; 16] = std::array::from_fn(|i| if i == j { v } else { (i as i8 * 5) % 32 - (i as i8 % 3) * 10 });
                let mut packed = [0u8; 12];
                pack_q3_k_scales(&sc, &mut packed);
                assert_eq!(q3_k_scales(&packed), sc, "j {j} v {v}");
            }
        }
    }

    #[test]
    fn rounding_away_never_shrinks() {
        for v in [1e-7f32, 3.3e-6, 0.1, 1.0 / 3.0, 1000.1, -0.1, -1.0 / 3.0, 2.0] {
            let r = round_f16_away(v);
            assert!(r.abs() >= v.abs() && (r - v).abs() <= v.abs() * 2f32.powi(-10) + 2f32.powi(-24), "{v} -> {r}");
            assert_eq!(f16::from_f32(r).to_f32(), r, "{r} is an f16");
        }
    }
}
