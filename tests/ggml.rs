#![cfg(not(target_arch = "wasm32"))]
//! GGML type tests: the type table, hand-built blocks of all 13 types checked against values
//! computed here from the documented formulas (ggml-common.h / ggml-quants.c), quantise ->
//! dequantise error bounds, and the real models in `../shared/models`.
// Reference loops index several arrays per index, as ggml-quants.c does.
#![allow(clippy::needless_range_loop)]

use half::f16;
use std::path::PathBuf;
use webgpu_llama::error::Error;
use webgpu_llama::ggml::{dequantize, quantize, GgmlType, GgmlType::*};
use webgpu_llama::gguf::{Gguf, TensorInfo};

// ---------------------------------------------------------------------------------------------
// Helpers

fn deq(ty: GgmlType, bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() as u64 / ty.block_bytes() * ty.block_size();
    let mut out = vec![f32::NAN; n as usize];
    dequantize(ty, bytes, &mut out).unwrap();
    out
}

fn h(v: f32) -> [u8; 2] {
    f16::from_f32(v).to_le_bytes()
}

fn f16v(b: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([b[i], b[i + 1]]).to_f32()
}

/// Deterministic pseudo-random bytes/values (64-bit LCG, top bits).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        self.next() as f32 / (1u64 << 30) as f32 - 1.0
    }
}

/// A random block of `ty` with its f16 fields set to the given (finite) values.
fn random_block(rng: &mut Rng, ty: GgmlType, halves: &[(usize, f32)]) -> Vec<u8> {
    let mut b: Vec<u8> = (0..ty.block_bytes()).map(|_| rng.byte()).collect();
    for &(i, v) in halves {
        b[i..i + 2].copy_from_slice(&h(v));
    }
    b
}

/// Checks every element of random blocks against `spec(block, element)`, bit for bit.
fn check_against_spec(ty: GgmlType, halves: &[(usize, f32)], spec: fn(&[u8], usize) -> f32) {
    let mut rng = Rng(ty as u64 + 1);
    for _ in 0..20 {
        let b = random_block(&mut rng, ty, halves);
        let got = deq(ty, &b);
        for (e, g) in got.iter().enumerate() {
            let want = spec(&b, e);
            assert!(g.to_bits() == want.to_bits() || *g == want, "{ty:?} element {e}: got {g}, spec says {want}");
        }
    }
}

fn models_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/models"));
    assert!(
        dir.is_dir(),
        "MISSING TEST DATA: the model directory {} does not exist; these tests need ../shared/models \
         (stories260K*.gguf) next to the crate",
        dir.display()
    );
    dir
}

struct Model {
    gguf: Gguf,
    bytes: Vec<u8>,
}

impl Model {
    fn load(file: &str) -> Model {
        let bytes = std::fs::read(models_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        Model { gguf: Gguf::parse(&bytes).unwrap(), bytes }
    }
    fn raw(&self, t: &TensorInfo) -> &[u8] {
        &self.bytes[t.offset as usize..(t.offset + t.n_bytes) as usize]
    }
    fn f32s(&self, name: &str) -> Vec<f32> {
        let t = self.gguf.tensor(name).unwrap_or_else(|| panic!("no tensor {name}"));
        let mut out = vec![0.0; t.n_elements as usize];
        dequantize(t.ggml_type, self.raw(t), &mut out).unwrap();
        out
    }
}

fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn max_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

// ---------------------------------------------------------------------------------------------
// The type table

#[test]
fn type_table_matches_ggml() {
    // (id, name, block size, bytes per block) from ggml.h / ggml-common.h.
    let table = [
        (0, "F32", 1, 4),
        (1, "F16", 1, 2),
        (2, "Q4_0", 32, 18),
        (3, "Q4_1", 32, 20),
        (6, "Q5_0", 32, 22),
        (7, "Q5_1", 32, 24),
        (8, "Q8_0", 32, 34),
        (10, "Q2_K", 256, 84),
        (11, "Q3_K", 256, 110),
        (12, "Q4_K", 256, 144),
        (13, "Q5_K", 256, 176),
        (14, "Q6_K", 256, 210),
        (30, "BF16", 1, 2),
    ];
    assert_eq!(GgmlType::ALL.len(), table.len());
    for (ty, (id, name, bs, bb)) in GgmlType::ALL.into_iter().zip(table) {
        assert_eq!((ty as u32, ty.name(), ty.block_size(), ty.block_bytes()), (id, name, bs, bb));
        assert_eq!(GgmlType::from_u32(id), Some(ty));
        assert_eq!(GgmlType::name_of(id), name);
        assert_eq!(GgmlType::from_name(name), Some(ty));
        assert_eq!(GgmlType::from_name(&name.to_lowercase()), Some(ty));
        assert_eq!(ty.to_string(), name);
    }
    for id in [4, 5, 9, 15, 16, 23, 24, 28, 29, 31, 34, 39, 40, 99, u32::MAX] {
        assert_eq!(GgmlType::from_u32(id), None, "id {id}");
    }
    let others = [
        (9, "Q8_1"),
        (15, "Q8_K"),
        (16, "IQ2_XXS"),
        (17, "IQ2_XS"),
        (18, "IQ3_XXS"),
        (19, "IQ1_S"),
        (20, "IQ4_NL"),
        (21, "IQ3_S"),
        (22, "IQ2_S"),
        (23, "IQ4_XS"),
        (24, "I8"),
        (25, "I16"),
        (26, "I32"),
        (27, "I64"),
        (28, "F64"),
        (29, "IQ1_M"),
        (34, "TQ1_0"),
        (35, "TQ2_0"),
        (39, "MXFP4"),
    ];
    for (id, name) in others {
        assert_eq!(GgmlType::name_of(id), name);
    }
    assert!(GgmlType::name_of(4).starts_with("Q4_2"));
    assert!(GgmlType::name_of(31).starts_with("Q4_0_4_4"));
    assert_eq!(GgmlType::name_of(40), "unknown");
    assert_eq!(GgmlType::name_of(u32::MAX), "unknown");
    assert_eq!(GgmlType::from_name("iq2_xxs"), None);
    assert_eq!(GgmlType::from_name("q4_k_m"), None);
}

#[test]
fn tensor_bytes_checks_blocks_and_overflow() {
    assert_eq!(F32.tensor_bytes(7), Some(28));
    assert_eq!(F16.tensor_bytes(7), Some(14));
    assert_eq!(BF16.tensor_bytes(0), Some(0));
    assert_eq!(Q4_0.tensor_bytes(64), Some(36));
    assert_eq!(Q4_0.tensor_bytes(48), None);
    assert_eq!(Q8_0.tensor_bytes(256 * 512), Some(256 * 512 / 32 * 34));
    assert_eq!(Q4_K.tensor_bytes(256 * 512), Some(73728)); // token_embd of the pad256 Q4_K_M file
    assert_eq!(Q6_K.tensor_bytes(256), Some(210));
    assert_eq!(Q2_K.tensor_bytes(255), None);
    assert_eq!(Q3_K.tensor_bytes(512), Some(220));
    assert_eq!(Q5_K.tensor_bytes(1 << 20), Some((1 << 12) * 176));
    assert_eq!(F32.tensor_bytes(u64::MAX / 2), None);
    // 144/256 bytes per element cannot overflow; 34/32 can.
    assert_eq!(Q4_K.tensor_bytes(u64::MAX - 255), Some(((1 << 56) - 1) * 144));
    assert_eq!(Q8_0.tensor_bytes(u64::MAX - 31), None);
    assert_eq!(Q4_K.tensor_bytes(1 << 56), Some((1 << 48) * 144));
}

#[test]
fn size_mismatches_are_errors() {
    let mut out = [0.0f32; 32];
    let err = dequantize(Q8_0, &[0; 33], &mut out).unwrap_err();
    assert!(matches!(&err, Error::Malformed(m) if m.contains("Q8_0") && m.contains("33 bytes")), "{err}");
    let mut odd = [0.0f32; 31];
    assert!(matches!(dequantize(Q4_0, &[0; 18], &mut odd), Err(Error::Malformed(_))));
    let err = quantize(Q4_K, &[0.0; 255]).unwrap_err();
    assert!(matches!(&err, Error::Input(m) if m.contains("block size 256")), "{err}");
    let mut v = [0.0f32; 32];
    v[7] = f32::NAN;
    let err = quantize(Q4_0, &v).unwrap_err();
    assert!(matches!(&err, Error::Input(m) if m.contains("index 7")), "{err}");
    // Float types carry NaN and infinity through.
    assert!(deq(F16, &quantize(F16, &[f32::INFINITY]).unwrap())[0].is_infinite());
}

// ---------------------------------------------------------------------------------------------
// Hand-built blocks, values computed from the formulas

#[test]
fn f32_f16_bf16_elements() {
    let mut b = Vec::new();
    for v in [1.5f32, -2.25, f32::MIN_POSITIVE] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(deq(F32, &b), [1.5, -2.25, f32::MIN_POSITIVE]);

    let bits: [u16; 5] = [0x3C00, 0xC000, 0x7BFF, 0x0001, 0x7C00];
    let b: Vec<u8> = bits.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(deq(F16, &b), [1.0, -2.0, 65504.0, 2f32.powi(-24), f32::INFINITY]);

    // BF16 is the top half of an f32.
    let bits: [u16; 3] = [0x3F80, 0xC049, 0x0001];
    let b: Vec<u8> = bits.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert_eq!(deq(BF16, &b), [1.0, -3.140625, 2f32.powi(-133)]);
    // Rounding to BF16 is to nearest, ties to even: 1 + 2^-8 is halfway between 0x3F80 and
    // 0x3F81 (goes down to even), 1 + 3 * 2^-8 halfway between 0x3F81 and 0x3F82 (up to even).
    let q = quantize(BF16, &[1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), -3.140625]).unwrap();
    assert_eq!(q, [0x80, 0x3F, 0x82, 0x3F, 0x49, 0xC0]);
    // F16: 1 + 2^-11 ties to 1.0, 1 + 3 * 2^-11 ties up to 1 + 2^-9.
    let q = quantize(F16, &[1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11)]).unwrap();
    assert_eq!(q, [0x00, 0x3C, 0x02, 0x3C]);
}

#[test]
fn q4_0_elements() {
    // d = 0.5; byte j holds element j (low nibble j) and element j + 16 (high nibble 15 - j).
    let mut b = h(0.5).to_vec();
    b.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let y = deq(Q4_0, &b);
    assert_eq!((y[0], y[8], y[15], y[16], y[31]), (-4.0, 0.0, 3.5, 3.5, -4.0));
    for j in 0..16 {
        assert_eq!(y[j], (j as f32 - 8.0) * 0.5);
        assert_eq!(y[j + 16], (7.0 - j as f32) * 0.5);
    }
}

#[test]
fn q4_1_elements() {
    // d = 0.25, m = -1: value q * d + m.
    let mut b = [h(0.25), h(-1.0)].concat();
    b.extend((0..16u8).map(|j| j | ((j ^ 5) << 4)));
    let y = deq(Q4_1, &b);
    assert_eq!((y[0], y[15], y[16], y[31]), (-1.0, 2.75, 0.25, 1.5));
    for j in 0..16 {
        assert_eq!(y[j], j as f32 * 0.25 - 1.0);
        assert_eq!(y[j + 16], (j ^ 5) as f32 * 0.25 - 1.0);
    }
}

#[test]
fn q5_0_elements() {
    // d = 1; qh bits 0, 1, 16 and 31 set: elements 0, 1, 16 and 31 get the fifth bit.
    let qh: u32 = 0x8001_0003;
    let mut b = h(1.0).to_vec();
    b.extend_from_slice(&qh.to_le_bytes());
    b.extend((0..16u8).map(|j| j | (j << 4)));
    let y = deq(Q5_0, &b);
    // (q - 16) * d with q = nibble | fifth bit << 4.
    assert_eq!((y[0], y[1], y[2], y[15]), (0.0, 1.0, -14.0, -1.0));
    assert_eq!((y[16], y[17], y[30], y[31]), (0.0, -15.0, -2.0, 15.0));
    for j in 0..32 {
        let nib = if j < 16 { j } else { j - 16 } as u32;
        let q = nib | (((qh >> j) & 1) << 4);
        assert_eq!(y[j], q as f32 - 16.0, "element {j}");
    }
}

#[test]
fn q5_1_elements() {
    // d = 0.5, m = 1; the low half of qh set: elements 0..16 get +16.
    let mut b = [h(0.5), h(1.0)].concat();
    b.extend_from_slice(&0x0000_FFFFu32.to_le_bytes());
    b.extend((0..16u8).map(|j| j | (j << 4)));
    let y = deq(Q5_1, &b);
    assert_eq!((y[0], y[15], y[16], y[31]), (9.0, 16.5, 1.0, 8.5));
    for j in 0..16 {
        assert_eq!(y[j], (j + 16) as f32 * 0.5 + 1.0);
        assert_eq!(y[j + 16], j as f32 * 0.5 + 1.0);
    }
}

#[test]
fn q8_0_elements() {
    let mut b = h(0.125).to_vec();
    let qs: Vec<i8> = (0..32)
        .map(|j| {
            if j == 0 {
                -128
            } else if j == 1 {
                127
            } else {
                j as i8 - 16
            }
        })
        .collect();
    b.extend(qs.iter().map(|&q| q as u8));
    let y = deq(Q8_0, &b);
    assert_eq!((y[0], y[1], y[16], y[31]), (-16.0, 15.875, 0.0, 1.875));
    for j in 0..32 {
        assert_eq!(y[j], qs[j] as f32 * 0.125);
    }
}

/// Q2_K element `e`: 2 bits at shift `2 * ((e % 128) / 32)` of `qs[32 * (e / 128) + e % 32]`;
/// scale byte `e / 16`: low nibble scale, high nibble min; `d * sc * q - dmin * m`.
fn spec_q2_k(b: &[u8], e: usize) -> f32 {
    let (scales, qs, d, dmin) = (&b[0..16], &b[16..80], f16v(b, 80), f16v(b, 82));
    let q = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    let s = scales[e / 16];
    d * (s & 0xF) as f32 * q as f32 - dmin * (s >> 4) as f32
}

#[test]
fn q2_k_elements() {
    // Scale byte s: scale s % 8 + 1, min s / 2. d = 0.5, dmin = 0.25.
    let mut b: Vec<u8> = (0..16u8).map(|s| (s % 8 + 1) | ((s / 2) << 4)).collect();
    let mut qs = [0b11_10_01_00u8; 64]; // group j of each 128 has q = j
    qs[32 + 5] = 0b00_01_10_11; // elements 133 (q 3), 165 (q 2), 197 (q 1), 229 (q 0)
    b.extend_from_slice(&qs);
    b.extend_from_slice(&[h(0.5), h(0.25)].concat());
    let y = deq(Q2_K, &b);
    assert_eq!(y[0], 0.0); // sc 1, q 0, m 0
    assert_eq!(y[40], 1.25); // sub 2: sc 3, m 1, q 1: 0.5*3*1 - 0.25*1
    assert_eq!(y[100], 9.75); // sub 6: sc 7, m 3, q 3
    assert_eq!(y[130], -1.0); // sub 8: sc 1, m 4, q 0
    assert_eq!(y[133], 0.5); // sub 8, q 3: 1.5 - 1
    assert_eq!(y[165], 1.75); // sub 10: sc 3, m 5, q 2: 3 - 1.25
    assert_eq!(y[229], -1.75); // sub 14: sc 7, m 7, q 0
    assert_eq!(y[255], 10.25); // sub 15: sc 8, m 7, q 3: 12 - 1.75
    check_against_spec(Q2_K, &[(80, 0.75), (82, 0.125)], spec_q2_k);
}

/// Q3_K's 16 signed scales, unpacked with ggml's `kmask1 / kmask2` word shuffle.
fn q3_k_scales_ggml(sc: &[u8]) -> [i8; 16] {
    let (k1, k2) = (0x0303_0303u32, 0x0f0f_0f0fu32);
    let w = |i: usize| u32::from_le_bytes([sc[4 * i], sc[4 * i + 1], sc[4 * i + 2], sc[4 * i + 3]]);
    let (a0, a1, tmp) = (w(0), w(1), w(2));
    let aux = [
        (a0 & k2) | ((tmp & k1) << 4),
        (a1 & k2) | (((tmp >> 2) & k1) << 4),
        ((a0 >> 4) & k2) | (((tmp >> 4) & k1) << 4),
        ((a1 >> 4) & k2) | (((tmp >> 6) & k1) << 4),
    ];
    let bytes: Vec<u8> = aux.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::array::from_fn(|i| bytes[i] as i8 - 32)
}

/// Q3_K element `e`: low 2 bits as Q2_K, bit `4 * (e / 128) + (e % 128) / 32` of `hmask[e % 32]`
/// clear means subtract 4; `d * scale[e / 16] * q`.
fn spec_q3_k(b: &[u8], e: usize) -> f32 {
    let (hmask, qs, d) = (&b[0..32], &b[32..96], f16v(b, 108));
    let (n, j, l) = (e / 128, (e % 128) / 32, e % 32);
    let low = (qs[32 * n + l] >> (2 * j)) & 3;
    let high = (hmask[l] >> (4 * n + j)) & 1;
    let q = low as i32 - if high == 1 { 0 } else { 4 };
    d * q3_k_scales_ggml(&b[96..108])[e / 16] as f32 * q as f32
}

#[test]
fn q3_k_elements() {
    let mut b = vec![0xFFu8; 32]; // hmask: no subtraction ...
    b[0] = 0xFE; // ... except element 0 (bit 0 of hmask[0])
    b[5] = 0x7F; // ... and element 229 (bit 7 of hmask[5]: half 1, group 3)
    b.extend_from_slice(&[0b11_10_01_00u8; 64]); // group j: low bits = j
    let scales = [0x21, 0x43, 0x65, 0x87, 0xA9, 0xCB, 0xED, 0x0F, 0xE4, 0x00, 0xFF, 0x1B];
    b.extend_from_slice(&scales);
    b.extend_from_slice(&h(0.5));
    // Scales by hand: 6-bit value = low nibble | high 2 bits << 4, minus 32.
    // s0: 1 | 0 -> -31; s2: 5 | 3<<4 -> 21; s6: 13 | 3<<4 -> 29; s10: 6 | 3<<4 -> 22;
    // s14: 14 | 3<<4 -> 30; s15: 0 | 0 -> -32.
    let s = q3_k_scales_ggml(&scales);
    assert_eq!((s[0], s[2], s[6], s[10], s[14], s[15]), (-31, 21, 29, 22, 30, -32));
    let y = deq(Q3_K, &b);
    assert_eq!(y[0], 62.0); // 0.5 * -31 * (0 - 4)
    assert_eq!(y[1], 0.0); // q 0
    assert_eq!(y[40], 10.5); // 0.5 * 21 * 1
    assert_eq!(y[100], 43.5); // 0.5 * 29 * 3
    assert_eq!(y[160], 11.0); // 0.5 * 22 * 1
    assert_eq!(y[229], -15.0); // 0.5 * 30 * (3 - 4)
    assert_eq!(y[255], -48.0); // 0.5 * -32 * 3
    check_against_spec(Q3_K, &[(108, -0.375)], spec_q3_k);
}

/// ggml's `get_scale_min_k4`.
fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// Q4_K element `e`: sub-block `e / 32`; byte `qs[32 * (e / 64) + e % 32]`, low nibble for the
/// first 32 of each 64, high for the second; `d * sc * q - dmin * m`.
fn spec_q4_k(b: &[u8], e: usize) -> f32 {
    let (d, dmin, scales, qs) = (f16v(b, 0), f16v(b, 2), &b[4..16], &b[16..144]);
    let byte = qs[32 * (e / 64) + e % 32];
    let q = if e % 64 < 32 { byte & 0xF } else { byte >> 4 };
    let (sc, m) = scale_min_k4(e / 32, scales);
    d * sc as f32 * q as f32 - dmin * m as f32
}

/// Scales (1, 2, 3, 4, 5, 40, 7, 63) and mins (0, 2, 4, 6, 8, 50, 12, 14) packed by hand.
const K4_SCALES: [u8; 12] = [1, 130, 3, 196, 0, 194, 4, 6, 133, 40, 199, 239];

#[test]
fn q4_k_elements() {
    for j in 0..8 {
        let want = [(1, 0), (2, 2), (3, 4), (4, 6), (5, 8), (40, 50), (7, 12), (63, 14)][j];
        assert_eq!(scale_min_k4(j, &K4_SCALES), want);
    }
    let mut b = [h(1.0), h(0.5)].concat();
    b.extend_from_slice(&K4_SCALES);
    let mut qs = [0x21u8; 128]; // low nibble 1, high nibble 2
    qs[0] = 0x5F; // element 0: 15, element 32: 5
    qs[127] = 0xE3; // element 223: 3, element 255: 14
    b.extend_from_slice(&qs);
    let y = deq(Q4_K, &b);
    assert_eq!(y[0], 15.0); // 1*1*15 - 0.5*0
    assert_eq!(y[17], 1.0);
    assert_eq!(y[31], 1.0);
    assert_eq!(y[32], 9.0); // sub 1: 2*5 - 0.5*2
    assert_eq!(y[100], 5.0); // sub 3, high nibble: 4*2 - 0.5*6
    assert_eq!(y[128], 1.0); // sub 4: 5*1 - 0.5*8
    assert_eq!(y[160], 55.0); // sub 5 (6-bit scale 40, min 50): 40*2 - 25
    assert_eq!(y[223], 15.0); // sub 6: 7*3 - 6
    assert_eq!(y[255], 875.0); // sub 7: 63*14 - 7
    check_against_spec(Q4_K, &[(0, 0.01), (2, -0.02)], spec_q4_k);
}

/// Q5_K element `e`: as Q4_K plus 16 if bit `2 * (e / 64) + (e % 64 >= 32)` of `qh[e % 32]`.
fn spec_q5_k(b: &[u8], e: usize) -> f32 {
    let (d, dmin, scales, qh, qs) = (f16v(b, 0), f16v(b, 2), &b[4..16], &b[16..48], &b[48..176]);
    let byte = qs[32 * (e / 64) + e % 32];
    let upper = e % 64 >= 32;
    let low = if upper { byte >> 4 } else { byte & 0xF };
    let bit = (qh[e % 32] >> (2 * (e / 64) + upper as usize)) & 1;
    let (sc, m) = scale_min_k4(e / 32, scales);
    d * sc as f32 * (low + 16 * bit) as f32 - dmin * m as f32
}

#[test]
fn q5_k_elements() {
    let mut b = [h(1.0), h(0.5)].concat();
    b.extend_from_slice(&K4_SCALES);
    let mut qh = [0u8; 32];
    qh[0] = 0b0000_0011; // elements 0 and 32
    qh[31] = 0b1100_0000; // elements 223 and 255
    b.extend_from_slice(&qh);
    b.extend_from_slice(&[0x21u8; 128]);
    let y = deq(Q5_K, &b);
    assert_eq!(y[0], 17.0); // 1*(1+16)
    assert_eq!(y[1], 1.0);
    assert_eq!(y[32], 35.0); // 2*(2+16) - 1
    assert_eq!(y[160], 55.0); // no fifth bit
    assert_eq!(y[223], 113.0); // 7*(1+16) - 6
    assert_eq!(y[255], 1127.0); // 63*(2+16) - 7
    check_against_spec(Q5_K, &[(0, 0.01), (2, 0.02)], spec_q5_k);
}

/// Q6_K element `e`: k = (e % 128) / 32, l = e % 32; nibble `k / 2` of
/// `ql[64 * (e / 128) + l + 32 * (k % 2)]`, bits `2k..2k+2` of `qh[32 * (e / 128) + l]`, minus
/// 32; times `d * scales[e / 16]`.
fn spec_q6_k(b: &[u8], e: usize) -> f32 {
    let (ql, qh, scales, d) = (&b[0..128], &b[128..192], &b[192..208], f16v(b, 208));
    let (n, k, l) = (e / 128, (e % 128) / 32, e % 32);
    let byte = ql[64 * n + l + 32 * (k % 2)];
    let low = if k < 2 { byte & 0xF } else { byte >> 4 };
    let high = (qh[32 * n + l] >> (2 * k)) & 3;
    let q = (low | (high << 4)) as i32 - 32;
    d * (scales[e / 16] as i8) as f32 * q as f32
}

#[test]
fn q6_k_elements() {
    let mut ql = [0x21u8; 128];
    ql[64 + 40] = 0x9F; // elements 168 (low 15) and 232 (high 9)
    let mut qh = [0u8; 64];
    qh[0] = 0b11_10_01_00; // elements 0, 32, 64, 96 get high bits 0, 1, 2, 3
    let scales: Vec<u8> = (0..16).map(|s| ((s - 8) * 3) as i8 as u8).collect(); // -24, -21, ... 21
    let b = [&ql[..], &qh[..], &scales[..], &h(0.25)[..]].concat();
    let y = deq(Q6_K, &b);
    assert_eq!(y[0], 186.0); // 0.25 * -24 * (1 - 32)
    assert_eq!(y[17], 162.75); // 0.25 * -21 * -31
    assert_eq!(y[32], 67.5); // 0.25 * -18 * (1 + 16 - 32)
    assert_eq!(y[64], -6.0); // 0.25 * -12 * (2 + 32 - 32)
    assert_eq!(y[96], -27.0); // 0.25 * -6 * (2 + 48 - 32)
    assert_eq!(y[168], -25.5); // 0.25 * 6 * (15 - 32)
    assert_eq!(y[232], -103.5); // 0.25 * 18 * (9 - 32)
    assert_eq!(y[255], -157.5); // 0.25 * 21 * (2 - 32)
    check_against_spec(Q6_K, &[(208, 0.003)], spec_q6_k);
}

#[test]
fn multi_block_tensors_keep_block_order() {
    // Two Q8_0 blocks with different scales: elements 32.. use the second block's d.
    let mut b = h(1.0).to_vec();
    b.extend([1u8; 32]);
    b.extend_from_slice(&h(-2.0));
    b.extend([3u8; 32]);
    let y = deq(Q8_0, &b);
    assert_eq!((y[0], y[31], y[32], y[63]), (1.0, 1.0, -6.0, -6.0));
    // Two Q4_K blocks: the second's d scales only elements 256..
    let mut b = [h(1.0), h(0.0)].concat();
    b.extend_from_slice(&K4_SCALES);
    b.extend([0x11u8; 128]);
    let mut second = b.clone();
    second[0..2].copy_from_slice(&h(3.0));
    b.extend(second);
    let y = deq(Q4_K, &b);
    assert_eq!((y[0], y[255], y[256], y[511]), (1.0, 63.0, 3.0, 189.0));
}

// ---------------------------------------------------------------------------------------------
// Quantisation

#[test]
fn reference_quantisers_produce_ggml_bytes() {
    // Q4_0 of x_j = j - 16: max-magnitude value -16, so d = -16 / -8 = 2 and
    // q_j = (i8)(x_j / 2 + 8.5) = (j + 1) / 2, clamped to 15 (only j = 31 is clamped).
    let x: Vec<f32> = (0..32).map(|j| j as f32 - 16.0).collect();
    let q = quantize(Q4_0, &x).unwrap();
    let qj = |j: usize| j.div_ceil(2).min(15) as u8;
    let mut want = h(2.0).to_vec();
    want.extend((0..16).map(|j| qj(j) | (qj(j + 16) << 4)));
    assert_eq!(q, want);

    // Q8_0: d = amax / 127 = 1, q = roundf(x): ties go away from zero (not to even).
    let x: Vec<f32> = (0..32).map(|j| if j == 5 { -127.0 } else { j as f32 * 0.5 - 8.0 }).collect();
    let q = quantize(Q8_0, &x).unwrap();
    let mut want = h(1.0).to_vec();
    want.extend(x.iter().map(|v| v.round() as i8 as u8));
    assert_eq!(q, want);
    assert_eq!(q[2 + 1] as i8, -8); // -7.5 -> -8
    assert_eq!(q[2 + 17] as i8, 1); // 0.5 -> 1
    assert_eq!(q[2 + 21] as i8, 3); // 2.5 -> 3
    assert_eq!(q[2 + 5] as i8, -127);

    // Q4_1: min -1, max 14: d = 1, m = -1, q = (i8)(x - min + 0.5).
    let x: Vec<f32> = (0..32).map(|j| (j % 16) as f32 - 1.0).collect();
    let q = quantize(Q4_1, &x).unwrap();
    let mut want = [h(1.0), h(-1.0)].concat();
    want.extend((0..16u8).map(|j| j | (j << 4)));
    assert_eq!(q, want);

    // Q5_0 of x_j = j - 16: d = -16 / -16 = 1, q_j = min(31, j): fifth bits for j >= 16.
    let x: Vec<f32> = (0..32).map(|j| j as f32 - 16.0).collect();
    let q = quantize(Q5_0, &x).unwrap();
    let mut want = h(1.0).to_vec();
    want.extend_from_slice(&0xFFFF_0000u32.to_le_bytes());
    want.extend((0..16u8).map(|j| j | (j << 4)));
    assert_eq!(q, want);

    // All-zero blocks: ggml's d = 0/-8 is -0.0 for Q4_0 and q = (i8)(0 + 8.5) = 8.
    let q = quantize(Q4_0, &[0.0; 32]).unwrap();
    assert_eq!(q[..2], [0x00, 0x80]);
    assert!(q[2..].iter().all(|&b| b == 0x88));
    assert!(deq(Q4_0, &q).iter().all(|&v| v == 0.0));
}

/// Worst-case |error| allowed for one block of `x`, from each format's step size.
fn error_bound(ty: GgmlType, x: &[f32]) -> f32 {
    let amax = max_abs(x);
    let lo = x.iter().fold(f32::MAX, |a, &b| a.min(b));
    let hi = x.iter().fold(f32::MIN, |a, &b| a.max(b));
    let range = hi - lo;
    // K-quants: the widest sub-block range with the min pinned to <= 0 (as ggml's K-quants do).
    let k_range = |sub: usize| x.chunks(sub).map(|c| c.iter().fold(f32::MIN, |a, &b| a.max(b)) - c.iter().fold(0.0f32, |a, &b| a.min(b))).fold(0.0, f32::max);
    // f16 rounding of d (and m): relative 2^-11 for normal f16, absolute 2^-25 once d is an
    // f16 subnormal (below 6.1e-5, i.e. blocks with amax under ~0.008 for Q8_0), times the
    // number of steps.
    let f16_err = |steps: f32| steps * (amax * 2f32.powi(-11) / steps.max(1.0) * 1.01 + 2f32.powi(-25));
    match ty {
        F32 => 0.0,
        F16 => amax * 2f32.powi(-11) + 2f32.powi(-25),
        BF16 => amax * 2f32.powi(-8),
        // Half a step of amax/127 (ggml's Q8_0 reference).
        Q8_0 => amax / 254.0 + f16_err(127.0),
        // d = amax/8; the value opposite the max is clamped from 8 to 7 steps: one whole step.
        Q4_0 => amax / 8.0 * 1.001 + f16_err(8.0),
        Q5_0 => amax / 16.0 * 1.001 + f16_err(16.0),
        // Half a step of range/15 (range/31), plus the rounding of d and of m.
        Q4_1 => range / 30.0 * 1.001 + 2.0 * f16_err(15.0),
        Q5_1 => range / 62.0 * 1.001 + 2.0 * f16_err(31.0),
        // Half a step; our steps are rounded up to at most (R + R/smax)/nmax + d with
        // d = (R + R/smax)/(nmax * smax): 0.190 R, 0.0344 R, 0.0167 R.
        Q2_K => k_range(16) * 0.19 * 1.01,
        Q4_K => k_range(32) * 0.0344 * 1.01,
        Q5_K => k_range(32) * 0.0167 * 1.01,
        // Symmetric: the value opposite the sub-block's max is clamped one step (amax/4 or
        // amax/32) short, plus up to 1.5 (15.5) halves of the scale unit d = amax/128
        // (amax/4096) from rounding the sub-block scale: 0.262 amax, 0.0350 amax.
        Q3_K => amax * (0.25 + 1.5 / 128.0) * 1.01,
        Q6_K => amax * (1.0 / 32.0 + 15.5 / 4096.0) * 1.01,
    }
}

/// Blocks of very different magnitudes, an outlier, a constant block, and all-negative and
/// all-positive blocks.
fn test_signal() -> Vec<f32> {
    let mut rng = Rng(42);
    let mut x = Vec::new();
    for (i, scale) in [1.0f32, 1e-3, 100.0, 0.5, 7.0, 1.0, 3.0, 0.01].into_iter().enumerate() {
        for k in 0..256 {
            let v = match i {
                3 => 0.25,                    // constant
                4 => -rng.unit().abs() - 0.5, // all negative
                6 => rng.unit().abs() + 2.0,  // all positive
                _ => rng.unit() + if k == 77 { 9.0 } else { 0.0 },
            };
            x.push(v * scale);
        }
    }
    x
}

#[test]
fn quantise_then_dequantise_stays_within_each_formats_error() {
    let x = test_signal();
    for ty in GgmlType::ALL {
        let q = quantize(ty, &x).unwrap();
        assert_eq!(q.len() as u64, ty.tensor_bytes(x.len() as u64).unwrap());
        let y = deq(ty, &q);
        let bs = if ty.block_size() == 1 { 256 } else { ty.block_size() as usize };
        for (b, (xb, yb)) in x.chunks(bs).zip(y.chunks(bs)).enumerate() {
            let (err, bound) = (max_err(xb, yb), error_bound(ty, xb));
            assert!(err <= bound, "{ty:?} block {b}: max error {err} > bound {bound}");
        }
    }
}

#[test]
fn typical_error_on_uniform_values_matches_the_step_size() {
    // For x uniform in [-1, 1) rounding error is uniform in half a step either way, so the RMS
    // error relative to the RMS value (1/sqrt(3)) is about step / 2.
    let mut rng = Rng(7);
    let x: Vec<f32> = (0..8192).map(|_| rng.unit()).collect();
    let signal = (x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / x.len() as f64).sqrt();
    for ty in GgmlType::ALL {
        let y = deq(ty, &quantize(ty, &x).unwrap());
        let rms = (x.iter().zip(&y).map(|(a, b)| ((a - b) as f64).powi(2)).sum::<f64>() / x.len() as f64).sqrt();
        let rel = rms / signal;
        // (expected step / 2, allowed): steps of 1/127, 1/8, 1/16, 2/15, 2/31 of the block's
        // amax or range; K-quant steps from the sub-block ranges.
        let (expected, limit) = match ty {
            F32 => (0.0, 0.0),
            F16 => (2f64.powi(-12), 0.0003),
            BF16 => (2f64.powi(-9), 0.0025),
            Q8_0 => (1.0 / 254.0, 0.0045),
            Q4_0 => (1.0 / 16.0, 0.07),
            Q5_0 => (1.0 / 32.0, 0.035),
            Q4_1 => (1.0 / 15.0, 0.075),
            Q5_1 => (1.0 / 31.0, 0.037),
            Q2_K => (1.0 / 3.0, 0.35),
            Q3_K => (1.0 / 8.0, 0.14),
            Q4_K => (1.0 / 15.0, 0.075),
            Q5_K => (1.0 / 31.0, 0.037),
            Q6_K => (1.0 / 64.0, 0.018),
        };
        eprintln!("{ty:?}: relative RMS error {rel:.5} (about {expected:.5} expected)");
        assert!(rel <= limit, "{ty:?}: relative RMS error {rel} > {limit}");
        assert!(rel >= expected * 0.5, "{ty:?}: relative RMS error {rel} is implausibly small");
    }
}

#[test]
fn requantising_dequantised_blocks_is_stable() {
    // Quantising what a quantised tensor decodes to must give back codes that decode to the
    // same values (a fixed point), for every type.
    let x = test_signal();
    for ty in GgmlType::ALL {
        let once = deq(ty, &quantize(ty, &x).unwrap());
        let twice = deq(ty, &quantize(ty, &once).unwrap());
        let bound = x.chunks(256).map(|c| error_bound(ty, c)).fold(0.0, f32::max);
        assert!(max_err(&once, &twice) <= bound, "{ty:?}");
        if matches!(ty, F32 | F16 | BF16 | Q8_0 | Q4_0 | Q5_0) {
            assert_eq!(once, twice, "{ty:?}: the ggml reference quantiser is idempotent");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Real models

#[test]
fn f16_file_is_the_f32_file_rounded() {
    let f32m = Model::load("stories260K.gguf");
    let f16m = Model::load("stories260K-F16.gguf");
    let mut n_f16 = 0;
    for t in &f16m.gguf.tensors {
        let want = f32m.f32s(&t.name);
        let got = f16m.f32s(&t.name);
        match t.ggml_type {
            F32 => assert_eq!(got, want, "{}", t.name),
            F16 => {
                n_f16 += 1;
                let rounded: Vec<f32> = want.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
                assert_eq!(got, rounded, "{}: F16 must be the F32 weights rounded to nearest", t.name);
            }
            other => panic!("{}: unexpected {other:?}", t.name),
        }
    }
    assert_eq!(n_f16, 37);
}

#[test]
fn q8_0_file_matches_the_f32_file() {
    let f32m = Model::load("stories260K.gguf");
    let q8 = Model::load("stories260K-Q8_0.gguf");
    let mut n_q8 = 0;
    for t in &q8.gguf.tensors {
        let want = f32m.f32s(&t.name);
        let got = q8.f32s(&t.name);
        let amax = max_abs(&want);
        let err = max_err(&got, &want);
        match t.ggml_type {
            F32 => assert_eq!(got, want),
            // Rows of 172 cannot be Q8_0 blocks: llama.cpp falls back to F16 for ffn_down.
            F16 => assert!(err <= amax * 2f32.powi(-11), "{}: {err}", t.name),
            Q8_0 => {
                n_q8 += 1;
                assert!(err <= amax * (1.0 / 254.0 + 1.0 / 2048.0), "{}: {err} vs max {amax}", t.name);
                // Our reference quantiser is ggml's: quantising the F32 original reproduces
                // llama-quantize's bytes exactly.
                let ours = quantize(Q8_0, &want).unwrap();
                assert!(ours == q8.raw(t), "{}: Q8_0 bytes differ from the file", t.name);
            }
            other => panic!("{}: unexpected {other:?}", t.name),
        }
    }
    assert_eq!(n_q8, 32);
}

/// Quantised pad256 files against the pad256 F16 file: max abs error relative to the tensor's
/// max abs, per format.
#[test]
fn pad256_quantised_files_match_the_f16_file() {
    let f16m = Model::load("stories260K-pad256-F16.gguf");
    // (file, worst error allowed relative to the tensor's max abs, per type). llama.cpp's
    // quantisers search scales to minimise squared error, so they may clip a little; we allow:
    // Q8_0: half a step (amax/254) plus the F16 file's own rounding (2^-11 of the value) and
    // f16 rounding of d; Q6_K and Q4_0: one step (amax/32, amax/8; the value opposite a block's
    // max is clamped one step short); Q4_K: half a step of the widest possible sub-block range
    // (2 amax / 15). Observed here: 0.0043, 0.016, 0.103, 0.066.
    let cases = [
        ("stories260K-pad256-Q8_0.gguf", [(Q8_0, 1.0 / 254.0 + 1.0 / 1024.0)].as_slice()),
        ("stories260K-pad256-Q6_K.gguf", &[(Q6_K, 1.0 / 32.0)]),
        ("stories260K-pad256-Q4_0.gguf", &[(Q4_0, 1.0 / 8.0), (Q6_K, 1.0 / 32.0)]),
        ("stories260K-pad256-Q4_K_M.gguf", &[(Q4_K, 1.0 / 15.0), (Q6_K, 1.0 / 32.0)]),
    ];
    for (file, bounds) in cases {
        let m = Model::load(file);
        assert_eq!(m.gguf.tensors.len(), f16m.gguf.tensors.len());
        let mut checked = 0;
        for t in &m.gguf.tensors {
            let reference = f16m.f32s(&t.name);
            let got = m.f32s(&t.name);
            assert_eq!(t.dims, f16m.gguf.tensor(&t.name).unwrap().dims);
            let amax = max_abs(&reference);
            let err = max_err(&got, &reference);
            if t.ggml_type == F32 {
                assert_eq!(got, reference, "{file} {}", t.name);
                continue;
            }
            let &(_, rel) = bounds.iter().find(|(ty, _)| *ty == t.ggml_type).unwrap_or_else(|| panic!("{file} {}: {:?}", t.name, t.ggml_type));
            assert!(err <= amax * rel, "{file} {} ({:?}): max error {err} > {rel} x max {amax}", t.name, t.ggml_type);
            checked += 1;
        }
        assert!(checked >= 37, "{file}: {checked} quantised tensors");
    }
}

#[test]
fn requantising_file_blocks_reproduces_them_byte_for_byte() {
    // Q8_0 and Q4_0 ref quantisation is idempotent on decoded blocks: the largest-magnitude
    // element decodes to exactly 127 d (or -8 d), so d comes back unchanged, and every other
    // element decodes to q * d, which rounds (or truncates after +8.5) back to q.
    for (file, ty) in [
        ("stories260K-Q8_0.gguf", Q8_0),
        ("stories260K-pad256-Q8_0.gguf", Q8_0),
        ("stories260K-moe4x-top2-Q8_0.gguf", Q8_0),
        ("stories260K-pad256-Q4_0.gguf", Q4_0),
    ] {
        let m = Model::load(file);
        let mut n = 0;
        for t in m.gguf.tensors.iter().filter(|t| t.ggml_type == ty) {
            let again = quantize(ty, &m.f32s(&t.name)).unwrap();
            assert!(again == m.raw(t), "{file} {}: requantised bytes differ", t.name);
            n += 1;
        }
        assert!(n >= 32, "{file}: {n} {ty:?} tensors");
    }
}

#[test]
fn k_quant_files_decode_to_what_our_quantiser_can_reencode_closely() {
    // llama.cpp's K-quant scale search differs from ours, so bytes differ; but re-encoding the
    // decoded Q4_K / Q6_K tensors with our quantiser stays within our own error bound.
    let m = Model::load("stories260K-pad256-Q4_K_M.gguf");
    for t in m.gguf.tensors.iter().filter(|t| matches!(t.ggml_type, Q4_K | Q6_K)) {
        let x = m.f32s(&t.name);
        let y = deq(t.ggml_type, &quantize(t.ggml_type, &x).unwrap());
        for (xb, yb) in x.chunks(256).zip(y.chunks(256)) {
            assert!(max_err(xb, yb) <= error_bound(t.ggml_type, xb), "{}", t.name);
        }
    }
}
