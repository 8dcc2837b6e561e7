#![cfg(not(target_arch = "wasm32"))]
//! The stored-format weight kernels, one GGML type at a time, against the CPU dequantiser
//! (`ggml::dequantize`, a transcription of ggml's `dequantize_row_*`) and an f64 dot product:
//! `matvec` on odd row counts (1, 3, 67) and 1 to 3 blocks per row (256-wide blocks for the
//! K-quants) plus a wide row, with every workgroup shape (1 to 64 threads per row), rows split
//! across bindings so that parts start at byte offsets that are not
//! multiples of 4 in the file, tensors at odd source offsets and at the very end of the source;
//! the `embed` gather; the MoE kernels `matvec_exp` and `moe_down` over expert stacks, whole and
//! split by experts. Blocks are random bytes with sane f16 scales, so every bit pattern of the
//! quants occurs. Also: weights on the GPU stay within 10% of the file's tensor bytes.

mod common;

use common::*;
use pollster::block_on;
use webgpu_llama::ggml::{self, GgmlType};
use webgpu_llama::kernels::CoopTile;
#[cfg(feature = "lab")]
use webgpu_llama::kernels::{CpuTile, Tile};
use webgpu_llama::linear::{matvec_max_tokens, threads_per_row};
use webgpu_llama::synth::Rng;
use webgpu_llama::synth::{model, Scheme, Shape};
use webgpu_llama::weights::per_binding;
use webgpu_llama::{oneshot, policy, Gguf, Gpu, Llama, LoadOptions};

/// Byte offsets of the f16 scale fields (d, m, dmin) in a block of `ty` (ggml-common.h).
fn f16_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 => &[0],
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        F32 | F16 | BF16 => &[],
    }
}

/// `n` weights of type `ty`: random floats in [-1, 1) for the float types; for block types random
/// bytes (every quant and scale bit pattern) with each f16 scale field set to a random value of
/// magnitude 2^-8 to 2^-6 and random sign (never NaN, infinite or subnormal).
fn random_weights(ty: GgmlType, n: u64, rng: &mut Rng) -> Vec<u8> {
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
            let vals: Vec<f32> = (0..n).map(|_| rng.uniform()).collect();
            ggml::quantize(ty, &vals).unwrap()
        }
        _ => {
            let mut bytes: Vec<u8> = (0..ty.tensor_bytes(n).unwrap()).map(|_| rng.bits() as u8).collect();
            for block in bytes.chunks_exact_mut(ty.block_bytes() as usize) {
                for &at in f16_fields(ty) {
                    let v = (0.25 + 0.75 * rng.uniform().abs()) * 2f32.powi(-6) * if rng.bits() & 1 == 1 { -1.0 } else { 1.0 };
                    block[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
                }
            }
            bytes
        }
    }
}

/// The CPU reference: `W` dequantised exactly as ggml, `(sum_c w x, sum_c |w x|)` in f64 per row.
fn reference(ty: GgmlType, bytes: &[u8], rows: u32, cols: u32, x: &[f32]) -> Vec<(f64, f64)> {
    let mut w = vec![0f32; rows as usize * cols as usize];
    ggml::dequantize(ty, bytes, &mut w).unwrap();
    w.chunks_exact(cols as usize)
        .map(|row| {
            let dot = row.iter().zip(x).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mag = row.iter().zip(x).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
            (dot, mag)
        })
        .collect()
}

/// `got` agrees with the f64 reference to f32 rounding: within 1e-5 of the sum of |products|
/// per row (one mis-decoded weight moves a row by about 1/cols of it, far more).
fn assert_rows(what: &str, got: &[f32], want: &[(f64, f64)]) {
    assert_eq!(got.len(), want.len(), "{what}: output length");
    for (r, (&g, &(w, mag))) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(err <= 1e-5 * mag + 1e-30, "{what}: row {r}: GPU {g} vs CPU {w} (|err| {err:.3e}, sum |w x| {mag:.3e})");
    }
}

/// Column counts to test for `ty`: 1 to 3 blocks (and, for the float types whose block is one
/// weight, widths that leave a remainder after the kernel's work units), plus a wide row.
fn widths(ty: GgmlType) -> Vec<u32> {
    match ty.block_size() {
        // (2056: F16 and BF16 rows of 16-byte pieces with a partial last step.)
        1 => vec![1, 2, 3, 37, 64, 67, 2051, 2056],
        b => {
            let mut w = vec![b as u32, 2 * b as u32, 3 * b as u32, if b == 32 { 32 * 81 } else { 256 * 11 }];
            // Q8_0 rows of whole regrouped groups of 8 blocks (`webgpu_llama::repack`), read as
            // 16-byte pieces, and of pairs of blocks (64 and 576, SmolLM2's width: 18 blocks;
            // the odd block counts keep the file's layout).
            if ty == GgmlType::Q8_0 {
                w.extend([768, 576]);
            }
            // Q6_K rows of whole regrouped groups (2048k weights), read as 16-byte pieces.
            if ty == GgmlType::Q6_K {
                w.push(2048);
            }
            w
        }
    }
}

/// A source holding `bytes` at byte `lead` (odd offsets included) and `trail` bytes after it.
fn placed(bytes: &[u8], lead: usize, trail: usize, rng: &mut Rng) -> Vec<u8> {
    let mut src: Vec<u8> = (0..lead).map(|_| rng.bits() as u8).collect();
    src.extend_from_slice(bytes);
    src.extend((0..trail).map(|_| rng.bits() as u8));
    src
}

/// The linear op on `n` tokens against the reference, token by token.
#[allow(clippy::too_many_arguments)]
fn check_linear(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32, n: u32, lead: usize, trail: usize, rng: &mut Rng) {
    let w = random_weights(ty, rows as u64 * cols as u64, rng);
    let x: Vec<f32> = (0..n * cols).map(|_| rng.uniform()).collect();
    let src = placed(&w, lead, trail, rng);
    let got = block_on(oneshot::linear(gpu, &src, ty, lead as u64, rows, cols, &x)).unwrap();
    let tile = if policy::coop(gpu) { format!("matrix units {:?}", policy::coop_tile(gpu)) } else { format!("{:?}", policy::tile(gpu)) };
    let shape = format!(
        "binding {}, {} threads per row, matvec up to {} tokens, tile {tile}",
        gpu.max_binding(),
        threads_per_row(gpu, ty, rows, cols),
        matvec_max_tokens(gpu)
    );
    let want: Vec<(f64, f64)> = x.chunks(cols as usize).flat_map(|xi| reference(ty, &w, rows, cols, xi)).collect();
    assert_rows(&format!("{ty} linear {rows}x{cols}, {n} tokens, at +{lead} ({shape})"), &got, &want);
}

fn check_embed(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32, rng: &mut Rng) {
    let w = random_weights(ty, rows as u64 * cols as u64, rng);
    let src = placed(&w, 2, 0, rng);
    let mut all = vec![0f32; rows as usize * cols as usize];
    ggml::dequantize(ty, &w, &mut all).unwrap();
    let tokens = [0, rows / 2, rows - 1, rows / 2];
    let got = block_on(oneshot::embed(gpu, &src, ty, 2, rows, cols, &tokens)).unwrap();
    for (&token, got) in tokens.iter().zip(got.chunks(cols as usize)) {
        let want = &all[(token * cols) as usize..((token + 1) * cols) as usize];
        for (i, (&g, &e)) in got.iter().zip(want).enumerate() {
            // Exactly ggml's value; 1 ulp of slack where the GPU may fuse q * d + m into an fma.
            let ok = g == e || (g - e).abs() <= e.abs() * 2.4e-7;
            assert!(ok, "{ty} embed {rows}x{cols} token {token} element {i}: GPU {g} vs CPU {e}");
        }
    }
}

/// The MoE kernels on `n` tokens, each picking 3 experts (first, last, middle, rotated per token).
fn check_experts(gpu: &Gpu, ty: GgmlType, experts: u32, rows: u32, cols: u32, n: u32, rng: &mut Rng) {
    const K: u32 = 3;
    let per = rows as u64 * cols as u64;
    let w = random_weights(ty, experts as u64 * per, rng);
    let src = placed(&w, 6, 0, rng);
    let eb = ty.tensor_bytes(per).unwrap() as usize;
    let picks = [experts - 1, 0, experts / 2];
    let sel: Vec<u32> = (0..n).flat_map(|i| (0..K).map(move |j| picks[((i + j) % K) as usize])).collect();
    let expert = |e: u32| &w[e as usize * eb..(e as usize + 1) * eb];
    let what =
        format!("{ty} {experts} experts {rows}x{cols}, {n} tokens (binding {}, {} threads per row)", gpu.max_binding(), threads_per_row(gpu, ty, rows, cols));

    let x: Vec<f32> = (0..n * cols).map(|_| rng.uniform()).collect();
    let got = block_on(oneshot::matvec_exp(gpu, &src, ty, 6, experts, rows, cols, K, &sel, &x)).unwrap();
    let want: Vec<(f64, f64)> =
        sel.iter().enumerate().flat_map(|(i, &e)| reference(ty, expert(e), rows, cols, &x[i / K as usize * cols as usize..][..cols as usize])).collect();
    assert_rows(&format!("{what} matvec_exp"), &got, &want);

    let h: Vec<f32> = (0..n * K * cols).map(|_| rng.uniform()).collect();
    let gate: Vec<f32> = (0..n * K).map(|_| rng.uniform().abs()).collect();
    let y0: Vec<f32> = (0..n * rows).map(|_| rng.uniform()).collect();
    let got = block_on(oneshot::moe_down(gpu, &src, ty, 6, experts, rows, cols, K, &sel, &gate, &h, &y0)).unwrap();
    let mut want: Vec<(f64, f64)> = y0.iter().map(|&v| (v as f64, v.abs() as f64)).collect();
    for (j, &e) in sel.iter().enumerate() {
        let hj = &h[j * cols as usize..(j + 1) * cols as usize];
        let token = j / K as usize;
        for (r, (dot, mag)) in reference(ty, expert(e), rows, cols, hj).into_iter().enumerate() {
            let acc = &mut want[token * rows as usize + r];
            acc.0 += gate[j] as f64 * dot;
            acc.1 += gate[j] as f64 * mag;
        }
    }
    assert_rows(&format!("{what} moe_down"), &got, &want);
}

/// Forced threads-per-row shapes cycled through the checks (1 is the CPU policy's).
#[cfg(feature = "lab")]
const TPRS: [u32; 8] = [2, 4, 8, 16, 32, 64, 128, 256];

/// The one-token integer form (`MatvecForm::IntDot`, formats with `pint`) on `rows` x `cols` weights at +`lead`
/// against the reference, within the bound of its 24-bit activations: each off by at most 1.5 d
/// (d = max |x| of its 16 / 8355711: half a unit, plus the f32 rounding of v / d near 2^23), so a
/// row by sum |w| 1.5 d (plus 1e-6 of sum |w x| for the f32 sums); and not equal to the f32
/// form's result (so it ran). (Where a format's weight is a * n - b with b != 0, Q4_K's minimum
/// and Q6_K's offset of 32, b multiplies the half's raw sum, so the 1.5 d errors are weighted by
/// |a n| <= |w| + |b| instead: the 1e-6 term covers that difference here, where the measured
/// errors are about 1e-7 of sum |w x|.)
fn check_linear_int(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32, lead: usize, rng: &mut Rng) {
    let w = random_weights(ty, rows as u64 * cols as u64, rng);
    let x: Vec<f32> = (0..cols).map(|_| rng.uniform()).collect();
    let src = placed(&w, lead, 1, rng);
    let mut g = gpu.clone();
    (g.switches_mut().wide, g.switches_mut().int_dot) = (Some(true), Some(true));
    let got = block_on(oneshot::linear(&g, &src, ty, lead as u64, rows, cols, &x)).unwrap();
    g.switches_mut().int_dot = Some(false);
    assert_ne!(
        got,
        block_on(oneshot::linear(&g, &src, ty, lead as u64, rows, cols, &x)).unwrap(),
        "{ty}: the integer form gave the f32 form's values: did it run?"
    );
    let mut exact = vec![0f32; rows as usize * cols as usize];
    ggml::dequantize(ty, &w, &mut exact).unwrap();
    let d: Vec<f32> = x.chunks(16).flat_map(|h| vec![h.iter().fold(0f32, |m, v| m.max(v.abs())) / 8355711.0; h.len()]).collect();
    for (r, (row, &g)) in exact.chunks(cols as usize).zip(&got).enumerate() {
        let want: f64 = row.iter().zip(&x).map(|(&a, &b)| a as f64 * b as f64).sum();
        let bound: f64 = row.iter().zip(&d).zip(&x).map(|((&a, &d), &b)| (a as f64).abs() * (1.5 * d as f64 + 1e-6 * (b as f64).abs())).sum();
        let err = (g as f64 - want).abs();
        assert!(
            err <= bound,
            "{ty} integer form {rows}x{cols} at +{lead} (binding {}): row {r}: GPU {g} vs CPU {want} (|err| {err:.3e}, bound {bound:.3e})",
            gpu.max_binding()
        );
    }
}

/// Token counts cycled through the checks: the single-token and multi-token matrix-vector forms,
/// and tiled batches with partial tiles.
const TOKENS: [u32; 6] = [1, 2, 5, 8, 9, 33];

/// The kernel choices [`shaped`] makes (the matrix-unit ones only where the device has
/// cooperative matrices: [`shapes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// The GPU policy (coalescing, 4 to 64 threads per row by width).
    Gpu,
    /// The CPU policy (a row per thread) with the multi-token matvec kept up to 8 tokens (the CPU
    /// default sends 2 to 8 to `matmul_cpu`), `matmul_cpu` beyond (with subgroups where the
    /// device has them; the matrix-vector form's activations broadcast across subgroups, `MatvecForm::Broadcast`,
    /// on alternate calls, else its span form).
    Cpu,
    /// The GPU policy with forced shapes cycling with `i / 6` (`i` steps by 6 between this
    /// shape's calls) through [`TPRS`] and spans of 8, 16 and 12 weights (within and across the
    /// formats' scale groups: `dq4s` and `dq4`), 1 to 3 spans per step, and a row's partial sums
    /// added with subgroup shuffles where the device has subgroups of one size on about half the
    /// calls (else in workgroup memory), the weights read as 16-byte pieces on half the calls
    /// (`wide`, the formats that have them).
    GpuForced,
    /// The tiled matrix-matrix kernel for every batch (portable tile).
    Tiles,
    /// The same with the large tile.
    LargeTiles,
    /// The CPU matrix-matrix kernel for every batch (an odd tile, no subgroups).
    CpuTiles,
    /// The matrix-unit matmul for every batch (default tile and split precision, quantised
    /// weights as runs of 4).
    CoopRuns,
    /// The same with its 64 x 64 tile and the 16-byte pieces of F16, Q4_K and regrouped Q8_0 and
    /// Q6_K.
    CoopPieces,
    /// The same with the 128 x 128 tile in subgroups of 64 x 32 and (odd `i / 4`) 64 x 64.
    CoopLarge,
}

impl Choice {
    const ALL: [Choice; 9] = [
        Choice::Gpu,
        Choice::Cpu,
        Choice::GpuForced,
        Choice::Tiles,
        Choice::LargeTiles,
        Choice::CpuTiles,
        Choice::CoopRuns,
        Choice::CoopPieces,
        Choice::CoopLarge,
    ];
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Choice::Gpu => "GPU policy",
            Choice::Cpu => "CPU policy",
            Choice::GpuForced => "GPU forced shapes",
            Choice::Tiles => "portable tile",
            Choice::LargeTiles => "large tile",
            Choice::CpuTiles => "CPU tile",
            Choice::CoopRuns => "matrix-unit matmul, runs",
            Choice::CoopPieces => "matrix-unit matmul's 64 x 64 tile, pieces",
            Choice::CoopLarge => "matrix-unit matmul's 128 x 128 tile",
        })
    }
}

/// `base` with the kernel choices `shape` (see [`Choice`]; `i` varies them across calls) and, with
/// `cap`, a binding cap.
fn shaped(base: &Gpu, shape: Choice, i: usize, cap: Option<u64>) -> Gpu {
    let mut g = base.clone();
    // The f32 forms: the one-token integer form is checked against its own bound
    // (`check_linear_int`).
    g.switches_mut().int_dot = Some(false);
    match shape {
        Choice::Gpu => g.set_cpu(false),
        // Outside `lab` builds, the CPU policy as it is (its matvec up to 1 token).
        #[cfg(not(feature = "lab"))]
        Choice::Cpu => g.set_cpu(true),
        #[cfg(feature = "lab")]
        _ => lab_shaped(&mut g, shape, i),
        #[cfg(not(feature = "lab"))]
        _ => unreachable!("{shape} (call {i}) forces shapes through the lab's knobs: `lab` builds only"),
    }
    if let Some(c) = cap {
        g.cap_binding(c);
    }
    g
}

/// [`shaped`]'s variants 1 to 8, through the lab's knobs.
#[cfg(feature = "lab")]
fn lab_shaped(g: &mut Gpu, shape: Choice, i: usize) {
    let sw = *g.switches();
    let mut s = sw;
    let mut k = *g.lab();
    match shape {
        Choice::Gpu => g.set_cpu(false),
        Choice::Cpu => {
            g.set_cpu(true);
            k.matvec_max_tokens = Some(8);
            // Without subgroups on alternate calls: the span form in place of the broadcast
            // one (shaders/matvec_broadcast.wgsl, which needs them).
            s.reduce_subgroups = sw.reduce_subgroups && (i / 6) % 2 == 1;
        }
        Choice::GpuForced => {
            g.set_cpu(false);
            s.reduce_subgroups = sw.reduce_subgroups && (i / TPRS.len()) % 2 == 1;
            (k.tpr, k.span, k.unroll) = (Some(TPRS[(i / 6) % TPRS.len()]), Some([8, 16, 12][(i / 6) % 3]), Some(1 + (i as u32 / 3) % 3));
            // 16-byte pieces (formats that have them) on half the calls.
            s.wide = Some(i % 4 < 2);
        }
        Choice::Tiles => ((k.matvec_max_tokens, k.tile), s.cpu_kernels, s.coop) = ((Some(0), Some(Tile::PORTABLE)), false, Some(false)),
        Choice::LargeTiles => {
            ((k.matvec_max_tokens, k.tile, k.min_large_tiles), s.cpu_kernels, s.coop) = ((Some(0), Some(Tile::LARGE), Some(0)), false, Some(false))
        }
        Choice::CpuTiles => {
            ((k.matvec_max_tokens, k.cpu_tile), s.cpu_subgroups) = ((Some(0), Some(CpuTile { lanes: 8, rows: 3, tokens: 5, subgroup: 0 })), false)
        }
        // The matrix-unit matmul: with the quantised formats' weights as runs of 4, and (the 64
        // x 64 tile) as 16-byte pieces where the format and width have them (the default).
        Choice::CoopRuns => (s.coop, k.matvec_max_tokens, k.min_large_tiles, k.coop_quant_pieces) = (Some(true), Some(0), Some(0), Some(false)),
        Choice::CoopPieces => (s.coop, k.matvec_max_tokens, k.coop_tile, k.coop_quant_pieces) = (Some(true), Some(0), Some(CoopTile::SMALL), Some(true)),
        // Subgroups of 4 x 2 and (odd calls) 4 x 4 fragments, every op on the large tile.
        Choice::CoopLarge => {
            let tile = CoopTile { bm: 128, bn: 128, sm: 64, sn: [32, 64][(i / 4) % 2], ..CoopTile::DEFAULT };
            (s.coop, k.matvec_max_tokens, k.coop_tile, k.min_large_tiles, k.coop_quant_pieces) = (Some(true), Some(0), Some(tile), Some(0), Some(true))
        }
    }
    (*g.switches_mut(), *g.lab_mut()) = (s, k);
}

/// Every check for one type, with each workgroup shape, on the device's own binding limit and on
/// caps that split matrices into parts of 3 rows (2 for the wide rows; parts of odd byte counts
/// start at unaligned offsets of the file) and stacks into single experts.
/// The shapes of [`shaped`] this device runs: all but the matrix-unit matmul's where it has no
/// cooperative matrices (said once per format where it does not); outside `lab` builds the GPU
/// and CPU policies only.
fn shapes(base: &Gpu, ty: GgmlType) -> &'static [Choice] {
    if cfg!(not(feature = "lab")) {
        println!(
            "{ty}: the forced shapes (threads per row, spans, tiles, matrix units) and the CPU policy's multi-token matvec skipped: they need `--features lab`"
        );
        return &Choice::ALL[..2];
    }
    if base.has_coop() && policy::coop_fits(base, CoopTile { bm: 128, bn: 128, sm: 64, sn: 32, ..CoopTile::DEFAULT }) {
        return &Choice::ALL;
    }
    if base.has_coop() {
        println!("{ty}: {} skipped: more workgroup memory than {} has", Choice::CoopLarge, base.adapter_info);
        return &Choice::ALL[..8];
    }
    println!("{ty}: matrix-unit matmul skipped: {} has no cooperative matrices", base.adapter_info);
    &Choice::ALL[..6]
}

fn check_format(ty: GgmlType) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ty as u64);
    let base = gpu(false);
    let shapes = shapes(&base, ty);
    let nv = shapes.len();
    let mut i = 0;
    // The matrix-unit matmul's 16-byte pieces past its first workgroup of weight rows and of
    // tokens (131 rows and 150 tokens: two tiles of 128, three of 64) and past a row's first
    // group of 8 blocks (4096 columns: Q6_K's regrouped groups are 2048 wide), runs (6) and
    // pieces (and the large tile's in both subgroup blocks), where the device has cooperative
    // matrices.
    if shapes.contains(&Choice::CoopRuns) && matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K | GgmlType::Q8_0) {
        for (shape, i) in shapes[6..].iter().map(|&s| (s, 0)).chain(shapes.contains(&Choice::CoopLarge).then_some((Choice::CoopLarge, 4))) {
            check_linear(&shaped(&base, shape, i, None), ty, 131, 4096, 150, 0, 0, &mut rng);
        }
    }
    for cols in widths(ty) {
        let row_bytes = ty.tensor_bytes(cols as u64).unwrap();
        let rows_list: &[u32] = if cols > 1024 { &[1, 5] } else { &[1, 3, 67] };
        let per_part = if cols > 1024 { 2 } else { 3 };
        let cap = per_part * row_bytes + 19;
        assert_eq!(per_binding(cap, row_bytes), per_part);
        for &rows in rows_list {
            for (v, &shape) in shapes.iter().enumerate() {
                i += 1;
                // (The GPU, CPU and forced shapes each see every token count across a format's
                // rows and widths: 9 and 33 take the matrix-matrix kernel, matmul_cpu on CPU
                // adapters.)
                let n = if v < 3 { TOKENS[(i / nv + v) % TOKENS.len()] } else { [1, 9, 70, 130][i % 4] };
                check_linear(&shaped(&base, shape, i, None), ty, rows, cols, n, [0, 3, 1, 2, 5, 1, 2, 1, 2][v], [0, 1, 0, 3, 0, 2, 1, 0, 1][v], &mut rng);
                check_linear(&shaped(&base, shape, i, Some(cap)), ty, rows, cols, n, [1, 2, 0, 1, 3, 3, 0, 3, 0][v], [0, 5, 0, 0, 2, 1, 3, 2, 4][v], &mut rng);
            }
        }
        // The integer form where the row is 16-byte pieces (on a split matrix too).
        if webgpu_llama::kernels::Format::of(ty).int && (row_bytes % 16 == 0) {
            check_linear_int(&shaped(&base, Choice::Gpu, 0, None), ty, rows_list[rows_list.len() - 1], cols, 3, &mut rng);
            check_linear_int(&shaped(&base, Choice::Gpu, 0, Some(cap)), ty, rows_list[rows_list.len() - 1], cols, 5, &mut rng);
        }
        assert_eq!(per_binding(3 * row_bytes + 19, row_bytes), 3);
        check_embed(&base, ty, 67, cols, &mut rng);
        check_embed(&shaped(&base, Choice::Cpu, 0, Some(3 * row_bytes + 19)), ty, 67, cols, &mut rng);
        // Q6_K's regrouped rows (2048k weights) through the expert kernels too.
        if cols % 2048 == 0 && webgpu_llama::repack::regrouped(ty, cols) {
            for (v, &shape) in shapes[..3.min(nv)].iter().enumerate() {
                let n = [1u32, 5, 9][v];
                check_experts(&shaped(&base, shape, v, None), ty, 3, 5, cols, n, &mut rng);
                check_experts(&shaped(&base, shape, v, Some(5 * row_bytes + 19)), ty, 3, 5, cols, n, &mut rng);
            }
        }
        if cols <= 1024 {
            assert_eq!(per_binding(7 * row_bytes + 19, 7 * row_bytes), 1, "one expert per part");
            for &shape in &shapes[..3.min(nv)] {
                i += 1;
                let n = TOKENS[i % TOKENS.len()];
                check_experts(&shaped(&base, shape, i, None), ty, 5, 67, cols, n, &mut rng);
                check_experts(&shaped(&base, shape, i, Some(7 * row_bytes + 19)), ty, 5, 7, cols, n, &mut rng);
            }
        }
    }
}

macro_rules! format_tests {
    ($($name:ident => $ty:ident),* $(,)?) => { $( #[test] fn $name() { check_format(GgmlType::$ty); } )* };
}

format_tests! {
    f32_kernels => F32,
    f16_kernels => F16,
    bf16_kernels => BF16,
    q4_0_kernels => Q4_0,
    q4_1_kernels => Q4_1,
    q5_0_kernels => Q5_0,
    q5_1_kernels => Q5_1,
    q8_0_kernels => Q8_0,
    q2_k_kernels => Q2_K,
    q3_k_kernels => Q3_K,
    q4_k_kernels => Q4_K,
    q5_k_kernels => Q5_K,
    q6_k_kernels => Q6_K,
}

/// Every supported type has a test above.
#[test]
fn every_type_is_tested() {
    let src = include_str!("formats.rs");
    for ty in GgmlType::ALL {
        assert!(src.contains(&format!("=> {ty:?},")), "{ty} has no kernel test");
    }
}

/// `(gpu, file)` weight bytes of a loaded model.
fn weight_bytes(bytes: &Vec<u8>) -> (u64, u64) {
    let gpu = gpu(false);
    let llama = load(&gpu, bytes, Some(16));
    let wb = llama.weight_bytes();
    llama.dispose();
    wb
}

fn assert_within_10_percent(name: &str, (on_gpu, in_file): (u64, u64)) {
    println!("{name}: weights on GPU: {on_gpu} bytes (file tensors: {in_file} bytes), ratio {:.4}", on_gpu as f64 / in_file as f64);
    assert!(in_file > 0, "{name}: no tensor bytes");
    assert!(on_gpu * 10 <= in_file * 11, "{name}: {on_gpu} bytes of weights on the GPU for {in_file} bytes in the file (> 110%)");
}

#[test]
fn weights_within_10_percent_of_file_shared_models() {
    let dir = shared().join("models");
    let mut names: Vec<_> =
        std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "gguf")).collect();
    names.sort();
    assert!(names.len() >= 10, "expected the shared models in {}", dir.display());
    names.push(model_path("SmolLM2-135M-Instruct.Q4_1.gguf"));
    for p in names {
        let bytes = std::fs::read(&p).unwrap();
        assert_within_10_percent(&p.file_name().unwrap().to_string_lossy(), weight_bytes(&bytes));
    }
}

#[test]
fn weights_within_10_percent_of_file_synthetic() {
    let dense = Shape::dense(256, 2, 4, 2, 768, 1000);
    assert_within_10_percent("synthetic Q4_K_M", weight_bytes(&model(&dense, Scheme::Q4KM, 3).unwrap().to_bytes()));
    let moe = Shape { experts: 4, topk: 2, ..Shape::dense(256, 2, 4, 2, 512, 300) };
    assert_within_10_percent("synthetic MoE Q4_K_M", weight_bytes(&model(&moe, Scheme::Q4KM, 3).unwrap().to_bytes()));
    assert_within_10_percent("synthetic MoE Q8_0", weight_bytes(&model(&moe, Scheme::All(GgmlType::Q8_0), 3).unwrap().to_bytes()));
    // Tied output: the embedding's buffers serve as the output head (not uploaded twice).
    let tied = Shape { tied: true, ..Shape::dense(256, 1, 4, 2, 512, 2000) };
    assert_within_10_percent("synthetic tied Q6_K", weight_bytes(&model(&tied, Scheme::All(GgmlType::Q6_K), 3).unwrap().to_bytes()));
}

/// A model whose tensors exceed the (capped) binding loads in parts and stays within the bound.
#[test]
fn split_model_stays_compact() {
    let shape = Shape::dense(256, 1, 4, 2, 512, 3000);
    let bytes = model(&shape, Scheme::Q4KM, 5).unwrap().to_bytes();
    let mut gpu = gpu(false);
    gpu.cap_binding(20000);
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let llama = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(8), ..Default::default() }).unwrap();
    assert_within_10_percent("split Q4_K_M", llama.weight_bytes());
    assert!(llama.dispatches_per_token() > 40, "the 3000-row head should be split into many parts");
}

/// Not a check: matvec time per format on this adapter (`cargo test --release --test formats
/// bench -- --ignored --nocapture`), for tuning the kernels: SmolLM2-135M's shapes (1536 x 576,
/// 576 x 1536), 2048 x 2048, Llama-3.2-1B's FFN (8192 x 2048, 2048 x 8192) and a 32000-row head;
/// `BENCH_TPRS=0,4,16` times each with those threads per row (0: the device's policy), and
/// `BENCH_SHAPES=small` keeps the first four shapes, `BENCH_TYPES=Q4_K,Q8_0` these types,
/// `BENCH_REPEATS` sets the dispatches per timed pass (20). Times are GPU timestamps where the
/// device has them.
#[test]
#[ignore]
#[cfg(feature = "lab")]
fn bench_matvec_formats() {
    let base = gpu(false);
    println!("adapter: {}", base.adapter_info);
    let tprs: Vec<u32> = std::env::var("BENCH_TPRS").map_or(vec![0], |v| v.split(',').map(|t| t.parse().unwrap()).collect());
    let mut shapes = vec![(1u32, 256u32), (1536, 576), (576, 1536), (2048, 2048), (8192, 2048), (2048, 8192), (32000, 2048)];
    if std::env::var("BENCH_SHAPES").is_ok_and(|v| v == "small") {
        shapes.truncate(4);
    }
    let types: Vec<GgmlType> = std::env::var("BENCH_TYPES").map_or(GgmlType::ALL.to_vec(), |v| v.split(',').map(|t| GgmlType::from_name(t).unwrap()).collect());
    let mut rng = Rng(42);
    for ty in types {
        for &(rows, cols) in &shapes {
            if cols as u64 % ty.block_size() != 0 {
                continue;
            }
            let w = random_weights(ty, rows as u64 * cols as u64, &mut rng);
            let x: Vec<f32> = (0..cols).map(|_| rng.uniform()).collect();
            let want = reference(ty, &w, rows, cols, &x);
            for &t in &tprs {
                let mut g = base.clone();
                g.lab_mut().tpr = if t == 0 { None } else { Some(t) };
                let repeats = std::env::var("BENCH_REPEATS").map_or(20, |r| r.parse().unwrap());
                let (y, timing) = block_on(oneshot::linear_timed(&g, &w, ty, 0, rows, cols, &x, repeats)).unwrap();
                let (wall, on_gpu) = timing.expect("native runs are timed");
                let s = on_gpu.unwrap_or(wall);
                if std::env::var("BENCH_NOCHECK").is_err() {
                    assert_rows(&format!("bench {ty}"), &y, &want);
                }
                let n = rows as f64 * cols as f64;
                println!(
                    "{ty:>5} {rows:>6}x{cols:<5} tpr {:>2}: {:>9.1} us, {:>7.2} Gweights/s, {:>7.1} GB/s of stored weights ({}; wall {:.1} us)",
                    threads_per_row(&g, ty, rows, cols),
                    s * 1e6,
                    n / s / 1e9,
                    w.len() as f64 / s / 1e9,
                    if on_gpu.is_some() { "GPU timestamps" } else { "wall clock" },
                    wall * 1e6
                );
            }
        }
    }
}
