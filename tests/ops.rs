#![cfg(not(target_arch = "wasm32"))]
//! Op-level tests in the style of ggml's test-backend-ops: every op of the forward program, run
//! alone through `oneshot` (the same builders and kernel choices as a model), against an f64 CPU
//! reference, with a tokens axis T = 1..9, 16, 33, 300 on odd shapes (widths that are not
//! multiples of 64, GQA groups of 3, partial RoPE, positions that start mid-cache). Weight formats
//! are covered shape by shape in `formats.rs`; here every format runs the linear op across the
//! whole tokens axis (matvec for T <= 8, the tiled matmul above). Timings of the same cases:
//! `webgpu-llama bench` (`--profile`) and `formats.rs`'s ignored `bench_matvec_formats`.

mod common;

use common::gpu;
use pollster::block_on;
use webgpu_llama::ggml::{self, GgmlType};
#[cfg(feature = "lab")]
use webgpu_llama::kernels::CpuTile;
use webgpu_llama::synth::Rng;
use webgpu_llama::{attention, oneshot, reference, rope, Config, Family, FamilyParams, Gpu, KvType};

/// The tokens axis.
const TOKENS: [u32; 12] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33, 300];

/// Max |got - want| over max(|want|, 1) must stay within `tol`.
fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1f64, |m, w| m.max(w.abs()));
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let e = (g as f64 - w).abs() / scale;
        assert!(e <= tol, "{what}: element {i}: GPU {g} vs CPU {w} (relative error {e:.2e})");
    }
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// A config for the attention-side ops: 6 query heads over 2 KV heads (groups of 3), head dim
/// 20 with 12 rotated dims, and a cache of `ctx` positions.
fn attention_config(ctx: u32) -> Config {
    Config {
        d: 120,
        n_layers: 1,
        ff: 0,
        n_heads: 6,
        n_kv_heads: 2,
        head_dim: 20,
        n_rot: 12,
        ctx,
        train_ctx: ctx,
        vocab: 1,
        eps: 1e-5,
        theta: 10000.0,
        rope_scale: 1.0,
        experts: 0,
        topk: 0,
        tied_output: false,
        has_rope_freqs: false,
        kv: KvType::F32,
        architecture: Family::Llama,
        family: FamilyParams::default(),
    }
}

#[test]
fn rmsnorm() {
    let gpu = gpu(false);
    let mut rng = Rng(1);
    for (i, &n) in TOKENS.iter().enumerate() {
        let d = [37, 200, 1000][i % 3];
        let x = rng.vec(n as usize * d);
        let w = rng.vec(d);
        let got = block_on(oneshot::rmsnorm(&gpu, &x, &w, 1e-5)).unwrap();
        let want: Vec<f64> = x.chunks(d).flat_map(|r| reference::rmsnorm(&f64s(r), &f64s(&w), 1e-5)).collect();
        assert_close(&format!("rmsnorm T={n} d={d}"), &got, &want, 1e-5);
    }
}

#[test]
fn swiglu() {
    let gpu = gpu(false);
    let mut rng = Rng(2);
    for &n in &TOKENS {
        let f = 77;
        let gu: Vec<f32> = rng.vec(n as usize * 2 * f).iter().map(|v| 6.0 * v).collect();
        let got = block_on(oneshot::swiglu(&gpu, &gu, f as u32, false)).unwrap();
        let want: Vec<f64> = gu.chunks(2 * f).flat_map(|r| reference::swiglu(&f64s(&r[..f]), &f64s(&r[f..]))).collect();
        assert_close(&format!("swiglu T={n}"), &got, &want, 1e-6);
        // GEGLU (Gemma): inputs past tanh's saturation (|g| up to 12) included.
        let gu: Vec<f32> = gu.iter().map(|v| 2.0 * v).collect();
        let got = block_on(oneshot::swiglu(&gpu, &gu, f as u32, true)).unwrap();
        let want: Vec<f64> = gu.chunks(2 * f).flat_map(|r| reference::geglu(&f64s(&r[..f]), &f64s(&r[f..]))).collect();
        assert_close(&format!("geglu T={n}"), &got, &want, 1e-6);
    }
}

/// The post-norm op (`rmsnorm.wgsl` adding): `y + rmsnorm(x) * w`, y's rows changed by that
/// alone.
#[test]
fn post_norm() {
    let gpu = gpu(false);
    let mut rng = Rng(3);
    for (i, &n) in TOKENS.iter().enumerate() {
        let d = [37, 200, 1000][i % 3];
        let (x, w, y) = (rng.vec(n as usize * d), rng.vec(d), rng.vec(n as usize * d));
        let got = block_on(oneshot::post_norm(&gpu, &x, &w, 1e-6, &y)).unwrap();
        let want: Vec<f64> = x
            .chunks(d)
            .zip(y.chunks(d))
            .flat_map(|(xr, yr)| reference::rmsnorm(&f64s(xr), &f64s(&w), 1e-6).into_iter().zip(yr).map(|(a, &b)| a + b as f64))
            .collect();
        assert_close(&format!("post_norm T={n} d={d}"), &got, &want, 1e-5);
    }
}

/// The final-logit soft-cap over the rows the output head wrote: the last token's (row 0) or,
/// with all logits, every row; logits from -200 to 200 (tanh saturated at both ends), cap 30.
#[test]
fn softcap() {
    let gpu = gpu(false);
    let mut rng = Rng(4);
    let (n, c) = (1000usize, 30.0f32);
    for rows in [1usize, 3] {
        let z: Vec<f32> = rng.vec(rows * n).iter().map(|v| 200.0 * v).collect();
        for all in [false, true] {
            let got = block_on(oneshot::softcap(&gpu, &z, n as u32, c, all)).unwrap();
            let capped = |v: f32| c as f64 * (v as f64 / c as f64).tanh();
            let want: Vec<f64> = z.iter().enumerate().map(|(i, &v)| if all || i < n { capped(v) } else { v as f64 }).collect();
            assert_close(&format!("softcap rows={rows} all_logits={all}"), &got, &want, 1e-6);
        }
    }
}

/// `bias.wgsl`: the bias over the first columns of each row, the rest untouched.
#[test]
fn bias() {
    let gpu = gpu(false);
    let mut rng = Rng(21);
    for &n in &TOKENS {
        let (cols, stride) = (150usize, 157u32);
        let y = rng.vec(n as usize * stride as usize);
        let b = rng.vec(cols);
        let got = block_on(oneshot::bias(&gpu, &y, stride, &b)).unwrap();
        let want: Vec<f64> =
            y.chunks(stride as usize).flat_map(|r| r.iter().enumerate().map(|(i, &v)| v as f64 + b.get(i).map_or(0.0, |&b| b as f64))).collect();
        assert_close(&format!("bias T={n}"), &got, &want, 1e-6);
    }
}

/// `head_norm.wgsl`: each q head and k head RMSNorm'd with its own weights (head dims of one
/// workgroup's width, more, and not a multiple of it), v and the row's padding untouched.
#[test]
fn head_norm() {
    let gpu = gpu(false);
    let mut rng = Rng(22);
    for (i, &n) in TOKENS.iter().enumerate() {
        let (hd, n_q, n_kv) = [(64usize, 4usize, 2usize), (128, 2, 1), (40, 3, 3)][i % 3];
        let stride = (n_q + 2 * n_kv) * hd + 3;
        let y: Vec<f32> = rng.vec(n as usize * stride).iter().map(|v| 4.0 * v).collect();
        let (wq, wk) = (rng.vec(hd), rng.vec(hd));
        let got = block_on(oneshot::head_norm(&gpu, &y, stride as u32, (n_q as u32, n_kv as u32), &wq, &wk, 1e-6)).unwrap();
        let want: Vec<f64> = y
            .chunks(stride)
            .flat_map(|r| {
                let mut out = f64s(r);
                for h in 0..n_q + n_kv {
                    let w = if h < n_q { &wq } else { &wk };
                    let normed = reference::rmsnorm(&out[h * hd..(h + 1) * hd], &f64s(w), 1e-6);
                    out[h * hd..(h + 1) * hd].copy_from_slice(&normed);
                }
                out
            })
            .collect();
        assert_close(&format!("head_norm T={n} hd={hd}"), &got, &want, 1e-5);
    }
}

/// `split.wgsl`, the matrix-unit matmul's input: hi is x rounded to 11 significant bits (hi16's
/// rounding, done here on the CPU) as an f16, within half an f16 step of x; hi + lo is x within
/// the f16 rounding of the remainder; each row, read at a stride wider than its values, is
/// padded with zeros to a multiple of 32. The reference: `half`'s f16 conversions and f64. (A
/// device that flushed f16 subnormals to zero would fail it, and lose those bits in the matmul.)
#[test]
fn split() {
    let gpu = gpu(false);
    if !gpu.device.features().contains(wgpu::Features::SHADER_F16) {
        println!("split: skipped: {} has no f16 in shaders (only devices with matrix units run it)", gpu.adapter_info);
        return;
    }
    let mut rng = Rng(9);
    for (i, &n) in TOKENS.iter().enumerate() {
        let (cols, stride) = [(37u32, 41u32), (64, 64), (100, 107)][i % 3];
        let ld = webgpu_llama::split::halves_stride(cols) as usize;
        // Magnitudes from 1e-2 to 1e3 (f16's normal range, away from 65504).
        let x: Vec<f32> = rng.vec(n as usize * stride as usize).iter().enumerate().map(|(j, v)| v * 10f32.powi(j as i32 % 6 - 2)).collect();
        let (hi, lo) = block_on(oneshot::split(&gpu, &x, stride, cols)).unwrap();
        assert_eq!((hi.len(), lo.len()), (n as usize * ld, n as usize * ld), "split T={n}: output sizes");
        for t in 0..n as usize {
            for c in 0..ld {
                let (h, l) = (hi[t * ld + c], lo[t * ld + c]);
                if c >= cols as usize {
                    assert_eq!((h, l), (0.0, 0.0), "split T={n} cols={cols}: padding at token {t} column {c}");
                    continue;
                }
                let xv = x[t * stride as usize + c];
                let v = xv as f64;
                let what = format!("split T={n} cols={cols}: token {t} column {c}: x {v:e}, hi {h:e}, lo {l:e}");
                // hi16 on the CPU: the mantissa rounded to 10 bits, to nearest, ties away.
                let want = half::f16::from_f32(f32::from_bits((xv.to_bits() + 0x1000) & 0xffff_e000)).to_f32();
                let subnormal = want.abs() < 2f32.powi(-14);
                assert!((h - want).abs() <= if subnormal { 2f32.powi(-24) } else { 0.0 }, "{what}: hi is not x rounded to 11 bits ({want:e})");
                // (Below 2^-14, f16 subnormals: steps of 2^-24, and up to one step off, the 11
                // bits being rounded again into fewer.)
                assert!((v - h as f64).abs() <= (v.abs() * 2f64.powi(-11)).max(2f64.powi(-24)), "{what}: hi further than half an f16 step");
                assert!((v - h as f64 - l as f64).abs() <= v.abs() * 2f64.powi(-21) + 6e-8, "{what}: hi + lo is not x");
            }
        }
    }
}

#[test]
fn moe_select() {
    let gpu = gpu(false);
    let mut rng = Rng(3);
    for (i, &n) in TOKENS.iter().enumerate() {
        let (experts, k) = [(4, 2), (8, 2), (5, 1), (16, 4)][i % 4];
        let r = rng.vec(n as usize * experts);
        let (sel, gate) = block_on(oneshot::moe_select(&gpu, &r, experts as u32, k as u32)).unwrap();
        for (t, row) in r.chunks(experts).enumerate() {
            let want = reference::moe_select(&f64s(row), k);
            let got_sel = &sel[t * k..(t + 1) * k];
            assert_eq!(got_sel, want.iter().map(|&(e, _)| e as u32).collect::<Vec<_>>(), "moe_select T={n} token {t}: experts");
            assert_close(&format!("moe_select T={n} token {t}: gates"), &gate[t * k..(t + 1) * k], &want.iter().map(|&(_, g)| g).collect::<Vec<_>>(), 1e-6);
        }
    }
}

#[test]
fn embed() {
    let gpu = gpu(false);
    let mut rng = Rng(4);
    let (rows, cols) = (300u32, 96u32);
    let table = rng.vec((rows * cols) as usize);
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0] {
        let bytes = ggml::quantize(ty, &table).unwrap();
        let mut exact = vec![0f32; table.len()];
        ggml::dequantize(ty, &bytes, &mut exact).unwrap();
        for &n in &TOKENS {
            let tokens: Vec<u32> = (0..n).map(|i| (i * 37 + 5) % rows).collect();
            let got = block_on(oneshot::embed(&gpu, &bytes, ty, 0, rows, cols, &tokens)).unwrap();
            let want: Vec<f64> = tokens.iter().flat_map(|&t| f64s(&exact[(t * cols) as usize..((t + 1) * cols) as usize])).collect();
            assert_close(&format!("embed {ty} T={n}"), &got, &want, 1e-7);
        }
    }
}

/// The linear op for every format across the tokens axis (67 rows: partial workgroups and tiles).
#[test]
fn linear_every_format() {
    let gpu = gpu(false);
    let mut rng = Rng(5);
    for ty in GgmlType::ALL {
        let cols = if ty.block_size() == 256 { 512 } else { 96 };
        let rows = 67u32;
        let w = rng.vec((rows * cols) as usize);
        // The K-quants ggml::quantize cannot make are covered in formats.rs on random blocks.
        let Ok(bytes) = ggml::quantize(ty, &w) else {
            println!("linear: {ty}: no quantizer here, covered by formats.rs");
            continue;
        };
        let mut exact = vec![0f32; w.len()];
        ggml::dequantize(ty, &bytes, &mut exact).unwrap();
        for &n in &TOKENS {
            let x = rng.vec((n * cols) as usize);
            let got = block_on(oneshot::linear(&gpu, &bytes, ty, 0, rows, cols, &x)).unwrap();
            let want: Vec<f64> = x.chunks(cols as usize).flat_map(|xi| reference::matvec(&f64s(&exact), &f64s(xi))).collect();
            assert_close(&format!("linear {ty} {rows}x{cols} T={n}"), &got, &want, 2e-5);
        }
    }
}

/// The decode fusions (RMSNorm into the linear op, SwiGLU into the gate/up projection) for every
/// format the quantizer makes, over the tokens axis (the fused matrix-vector forms for T <= 8,
/// rmsnorm + the tiled kernel + swiglu above), with the GPU and the CPU workgroup shapes and spans
/// of 4, 12 and the format's default (the GPU default reads Q4_K, F16 and Q8_0 as 16-byte
/// pieces; the spans-of-12 case turns pieces off): against rmsnorm, matvec and SwiGLU (and
/// GEGLU) in f64.
#[test]
fn linear_fused_norm_and_swiglu() {
    let base = gpu(false);
    let mut rng = Rng(11);
    for ty in GgmlType::ALL {
        // 256 for the 32-weight blocks: Q8_0 rows regrouped at load and read as pieces.
        let cols = if ty.block_size() == 256 { 512 } else { 256 };
        let rows = 2 * 37u32;
        let w = rng.vec((rows * cols) as usize);
        let Ok(bytes) = ggml::quantize(ty, &w) else { continue };
        let mut exact = vec![0f32; w.len()];
        ggml::dequantize(ty, &bytes, &mut exact).unwrap();
        let (gate, up) = exact.split_at(exact.len() / 2);
        let nw: Vec<f32> = rng.vec(cols as usize).iter().map(|v| 1.0 + 0.5 * v).collect();
        for (i, n) in [1u32, 1, 3, 8, 9, 33].into_iter().enumerate() {
            let mut g = base.clone();
            // The f32 forms (the integer form has its own test, `linear_integer_form`).
            (g.switches_mut().fuse, g.switches_mut().int_dot) = (Some(true), Some(false));
            // The GPU forms, with (1) spans instead of pieces, and the CPU forms; in `lab` builds
            // with odd spans and rows per thread.
            g.set_cpu(i % 3 == 2);
            if i % 3 == 1 {
                g.switches_mut().wide = Some(false);
            }
            #[cfg(feature = "lab")]
            {
                let k = g.lab_mut();
                (k.span, k.rpt) = [(None, Some(2)), (Some(12), Some(3)), (Some(4), None)][i % 3];
            }
            let x: Vec<f32> = rng.vec((n * cols) as usize).iter().map(|v| 3.0 * v).collect();
            let xn: Vec<Vec<f64>> = x.chunks(cols as usize).map(|r| reference::rmsnorm(&f64s(r), &f64s(&nw), 1e-5)).collect();
            let what = format!(
                "{ty} {rows}x{cols} T={n} (cpu {}, span {}, rows per thread {}, wide {})",
                g.is_cpu(),
                webgpu_llama::linear::span(&g, ty),
                webgpu_llama::linear::rows_per_thread(&g, ty),
                webgpu_llama::linear::wide(&g, ty, cols)
            );

            let got = block_on(oneshot::linear_fused(&g, &bytes, ty, 0, rows, cols, &x, Some((&nw, 1e-5)), false, false)).unwrap();
            let want: Vec<f64> = xn.iter().flat_map(|r| reference::matvec(&f64s(&exact), r)).collect();
            assert_close(&format!("norm + linear {what}"), &got, &want, 2e-5);

            let got = block_on(oneshot::linear_fused(&g, &bytes, ty, 0, rows, cols, &x, Some((&nw, 1e-5)), true, false)).unwrap();
            let want: Vec<f64> = xn.iter().flat_map(|r| reference::swiglu(&reference::matvec(&f64s(gate), r), &reference::matvec(&f64s(up), r))).collect();
            assert_close(&format!("norm + linear + swiglu {what}"), &got, &want, 2e-5);

            let got = block_on(oneshot::linear_fused(&g, &bytes, ty, 0, rows, cols, &x, Some((&nw, 1e-5)), true, true)).unwrap();
            let want: Vec<f64> = xn.iter().flat_map(|r| reference::geglu(&reference::matvec(&f64s(gate), r), &reference::matvec(&f64s(up), r))).collect();
            assert_close(&format!("norm + linear + geglu {what}"), &got, &want, 2e-5);

            let got = block_on(oneshot::linear_fused(&g, &bytes, ty, 0, rows, cols, &x, None, true, false)).unwrap();
            let want: Vec<f64> = x
                .chunks(cols as usize)
                .flat_map(|r| reference::swiglu(&reference::matvec(&f64s(gate), &f64s(r)), &reference::matvec(&f64s(up), &f64s(r))))
                .collect();
            assert_close(&format!("linear + swiglu {what}"), &got, &want, 2e-5);
        }
    }
}

/// Per row of `w` (`[rows][cols]`, f64), the bound on the integer form's error for input `x`:
/// each value is off by at most 1.5 d (d = max |x| of its 16 / 8355711: half a unit, plus the f32
/// rounding of v / d near 2^23), so a row by at most sum_i |w_i| 1.5 d_i; plus 1e-6 of sum |w x|
/// for the f32 sums of the products.
fn integer_bound(w: &[f64], x: &[f64]) -> Vec<f64> {
    let d: Vec<f64> = x.chunks(16).flat_map(|h| vec![h.iter().fold(0f64, |m, v| m.max(v.abs())) / 8355711.0; h.len()]).collect();
    w.chunks(x.len()).map(|r| r.iter().zip(&d).zip(x).map(|((w, d), x)| w.abs() * (1.5 * d + 1e-6 * x.abs())).sum()).collect()
}

/// The one-token integer form (`shaders/quantize.wgsl`, then `shaders/matvec_idot.wgsl`:
/// integer dot products) for every format that has it, in rows of 16-byte pieces (2048 weights:
/// Q8_0 and Q6_K regrouped at load), alone, after RMSNorm, with SwiGLU, and both: within the
/// bound of its 24-bit activations (`integer_bound`; SwiGLU's product adds |u| silu'(g) of the
/// gate's error and silu(g) of the up's), and not equal to the f32 form (so it ran).
#[test]
fn linear_integer_form() {
    let base = gpu(false);
    let mut rng = Rng(23);
    let (rows, cols) = (2 * 37u32, 2048u32);
    for ty in GgmlType::ALL.into_iter().filter(|&t| webgpu_llama::kernels::Format::of(t).int) {
        let w = rng.vec((rows * cols) as usize);
        let bytes = ggml::quantize(ty, &w).unwrap();
        let mut exact = vec![0f32; w.len()];
        ggml::dequantize(ty, &bytes, &mut exact).unwrap();
        let exact = f64s(&exact);
        let (gate, up) = exact.split_at(exact.len() / 2);
        let nw: Vec<f32> = rng.vec(cols as usize).iter().map(|v| 1.0 + 0.5 * v).collect();
        let x: Vec<f32> = rng.vec(cols as usize).iter().map(|v| 3.0 * v).collect();
        let mut g = base.clone();
        g.set_cpu(false);
        let t = g.switches_mut();
        (t.wide, t.int_dot, t.fuse) = (Some(true), Some(true), Some(true));
        let mut f = g.clone();
        f.switches_mut().int_dot = Some(false);
        for norm in [false, true] {
            let xr = if norm { reference::rmsnorm(&f64s(&x), &f64s(&nw), 1e-5) } else { f64s(&x) };
            let nwe = norm.then_some((&nw[..], 1e-5));
            for glu in [false, true] {
                let run = |g: &Gpu| block_on(oneshot::linear_fused(g, &bytes, ty, 0, rows, cols, &x, nwe, glu, false)).unwrap();
                let got = run(&g);
                assert_ne!(got, run(&f), "{ty} norm {norm} glu {glu}: the integer form gave the f32 form's values: did it run?");
                let (want, bound): (Vec<f64>, Vec<f64>) = if glu {
                    let (gv, uv) = (reference::matvec(gate, &xr), reference::matvec(up, &xr));
                    let (gb, ub) = (integer_bound(gate, &xr), integer_bound(up, &xr));
                    let silu = |v: f64| v / (1.0 + (-v).exp());
                    let want = reference::swiglu(&gv, &uv);
                    let bound = (0..gv.len()).map(|i| 1.1 * uv[i].abs() * gb[i] + silu(gv[i]).abs() * ub[i] + (gb[i] * ub[i]) + 1e-6 * want[i].abs()).collect();
                    (want, bound)
                } else {
                    (reference::matvec(&exact, &xr), integer_bound(&exact, &xr))
                };
                for (i, ((&gv, &wv), &b)) in got.iter().zip(&want).zip(&bound).enumerate() {
                    let e = (gv as f64 - wv).abs();
                    assert!(e <= b, "{ty} {rows}x{cols} norm {norm} glu {glu}: row {i}: GPU {gv} vs CPU {wv} (|err| {e:.3e}, bound {b:.3e})");
                }
            }
        }
    }
}

/// RoPE + KV write for T tokens at a position mid-cache.
#[test]
fn rope_kv() {
    rope_kv_with(KvType::F32, 0.0);
}

/// The same into an f16 cache (pairs packed by `pack2x16float`): k and v within one f16 ulp of
/// the f64 values (2^-10 of max(|x|, 1); round to nearest is within half that, but WGSL leaves
/// the conversion's rounding to the implementation).
#[test]
fn rope_kv_f16() {
    rope_kv_with(KvType::F16, 1.0 / 1024.0);
}

/// `rounding`: the cache's own error bound (0 for f32; k also carries the RoPE error, 1e-5).
fn rope_kv_with(kv: KvType, rounding: f64) {
    let gpu = gpu(false);
    let mut rng = Rng(6);
    for &n in &TOKENS {
        let pos0 = [0, 3, 17][n as usize % 3];
        let cfg = Config { kv, ..attention_config(pos0 + n + 2) };
        let (q, kv) = (cfg.q_dim() as usize, cfg.kv_dim() as usize);
        let qkv = rng.vec(n as usize * (q + 2 * kv));
        let cache = (cfg.ctx as usize) * kv;
        let (kc, vc) = (rng.vec(cache), rng.vec(cache));
        let [got_q, got_k, got_v] = block_on(oneshot::rope_kv(&gpu, &cfg, None, &qkv, pos0, &kc, &vc)).unwrap();
        let freqs = rope::frequencies(&cfg, None);
        let (mut want_q, mut want_k, mut want_v) = (f64s(&qkv), f64s(&kc), f64s(&vc));
        for (t, row) in qkv.chunks(q + 2 * kv).enumerate() {
            let p = pos0 + t as u32;
            let mut qt = f64s(&row[..q]);
            let mut kt = f64s(&row[q..q + kv]);
            reference::rope(&mut qt, cfg.head_dim as usize, &freqs, p);
            reference::rope(&mut kt, cfg.head_dim as usize, &freqs, p);
            want_q[t * (q + 2 * kv)..][..q].copy_from_slice(&qt);
            want_k[p as usize * kv..][..kv].copy_from_slice(&kt);
            want_v[p as usize * kv..][..kv].copy_from_slice(&f64s(&row[q + kv..]));
        }
        // Only q is rotated in place; k and v go to the cache.
        let got_q: Vec<f32> = got_q.chunks(q + 2 * kv).flat_map(|r| r[..q].to_vec()).collect();
        let want_q: Vec<f64> = want_q.chunks(q + 2 * kv).flat_map(|r| r[..q].to_vec()).collect();
        assert_close(&format!("rope_kv T={n} q"), &got_q, &want_q, 1e-5);
        assert_close(&format!("rope_kv {kv} T={n} k cache"), &got_k, &want_k, 1e-5 + rounding);
        assert_close(&format!("rope_kv {kv} T={n} v cache"), &got_v, &want_v, rounding);
    }
}

/// Causal GQA attention of T queries at pos0.. over a cache of pos0 + T keys, in f64: within
/// layer 0's sliding window and with the family's score scale and soft-cap, as
/// `reference::Reference` computes them.
fn attention_reference(cfg: &Config, qkv: &[f32], pos0: u32, kc: &[f32], vc: &[f32]) -> Vec<f64> {
    let (q, kv, hd) = (cfg.q_dim() as usize, cfg.kv_dim() as usize, cfg.head_dim as usize);
    let group = (cfg.n_heads / cfg.n_kv_heads) as usize;
    let mut out = Vec::new();
    for (t, row) in qkv.chunks(q + 2 * kv).enumerate() {
        let p = pos0 as usize + t;
        for h in 0..cfg.n_heads as usize {
            let ko = (h / group) * hd;
            let qh = &row[h * hd..(h + 1) * hd];
            let f = &cfg.family;
            let scale = f.attn_scale.map_or(1.0 / (hd as f64).sqrt(), f64::from);
            let cap = |s: f64| if f.attn_softcap > 0.0 { f.attn_softcap as f64 * (s / f.attn_softcap as f64).tanh() } else { s };
            let first = if f.is_swa(0) { (p + 1).saturating_sub(f.sliding_window as usize) } else { 0 };
            let s: Vec<f64> = (first..=p).map(|j| cap(qh.iter().zip(&kc[j * kv + ko..]).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() * scale)).collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            out.extend((0..hd).map(|i| e.iter().enumerate().map(|(j, w)| w / z * vc[(first + j) * kv + ko + i] as f64).sum::<f64>()));
        }
    }
    out
}

/// Attention for T tokens at several cache depths, without and (T <= 8) with key splits, with
/// the device's kernel choice (on CPU adapters `attention_cpu` unless keys are split, with subgroups
/// where the device has them), the CPU kernel without subgroups, and the GPU kernels.
#[test]
fn attention() {
    attention_with(KvType::F32, &FamilyParams::default());
}

/// The same within a sliding window of 7 keys (shorter than most batches' keys: a row's first
/// tiles, chunks or splits can hold no key it sees) and with Gemma 2's score soft-cap (c = 1,
/// below the scores' range) and a score scale of the family's own.
#[test]
fn attention_sliding_window_and_softcap() {
    attention_with(KvType::F32, &windowed(7));
}

/// A family whose layer 0 slides a window of `window` keys, soft-caps scores at 1 and scales them
/// by 0.3.
fn windowed(window: u32) -> FamilyParams {
    FamilyParams { sliding_window: window, swa_layers: vec![true], attn_softcap: 1.0, attn_scale: Some(0.3), ..FamilyParams::default() }
}

/// The same over an f16 cache: the reference reads the caches as rounded to f16 on the way in
/// (`oneshot::pack_f16`), so the tolerance is f32's: this checks the kernels' f16 reads.
#[test]
fn attention_f16() {
    attention_with(KvType::F16, &FamilyParams::default());
}

/// The kernel choices [`attention_with`] checks, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AttentionCase {
    /// The device's kernels.
    Device,
    /// The same without subgroups.
    DeviceNoSubgroups,
    /// The GPU kernels (one-token batches through attention_decode.wgsl; batches of more than
    /// SPLIT_MAX_TOKENS tokens through attention_tiled.wgsl).
    Gpu,
    /// The same with attention.wgsl for one token too.
    GpuNoDecode,
    /// The GPU kernels at a head dim of 132 (attention_decode: 33 groups of 4 dims, one key
    /// group of 64 keys).
    GpuHeadDim132,
    /// The GPU kernels with one query head per attention_decode workgroup.
    GpuOneHead,
    /// The GPU kernels with a GQA group of 4 (8 query heads), which attention_decode splits into
    /// two workgroups of 2 heads by default.
    GpuGroup4,
    /// The GPU kernels with attention.wgsl, not attention_tiled.wgsl, for long batches.
    GpuNoTiled,
    /// attention_tiled.wgsl at a head dim of 18 (not whole vec4s: q read as scalars, a part vec4
    /// per row).
    TiledHeadDim18,
    /// attention_tiled.wgsl at a head dim of 128 on WebGPU's default limits (16 KiB of workgroup
    /// memory: 8 keys a tile).
    TiledDefaultLimits,
    /// The device's kernels at a head dim of 128 (on CPU adapters with subgroups,
    /// attention_cpu's 16 x 4 geometry: 8 x 8 takes head dims up to 64).
    DeviceHeadDim128,
}

impl std::fmt::Display for AttentionCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

fn attention_with(kv: KvType, family: &FamilyParams) {
    use AttentionCase::*;
    let base = gpu(false);
    let mut rng = Rng(7);
    let limited = gpu(true);
    let cases =
        [Device, DeviceNoSubgroups, Gpu, GpuNoDecode, GpuHeadDim132, GpuOneHead, GpuGroup4, GpuNoTiled, TiledHeadDim18, TiledDefaultLimits, DeviceHeadDim128];
    for case in cases {
        let mut gpu = if case == TiledDefaultLimits { limited.clone() } else { base.clone() };
        if case == GpuOneHead && cfg!(not(feature = "lab")) {
            println!("attention {case} (one query head a workgroup, forced) skipped: it needs `--features lab`");
            continue;
        }
        gpu.set_cpu(matches!(case, Device | DeviceNoSubgroups | DeviceHeadDim128));
        let t = gpu.switches_mut();
        match case {
            DeviceNoSubgroups => t.cpu_subgroups = false,
            GpuNoDecode => t.decode_attention = Some(false),
            GpuNoTiled => t.tiled_attention = false,
            _ => {}
        }
        #[cfg(feature = "lab")]
        if case == GpuOneHead {
            gpu.lab_mut().attn_heads = Some(1);
        }
        let head_dim = match case {
            GpuHeadDim132 => 132,
            TiledHeadDim18 => 18,
            TiledDefaultLimits | DeviceHeadDim128 => 128,
            _ => 20,
        };
        if case == TiledDefaultLimits {
            let cfg = Config { head_dim, kv, ..attention_config(8) };
            let g = attention::tiled_geometry(head_dim, gpu.limits().max_compute_workgroup_storage_size, kv);
            assert_eq!(g, Some(webgpu_llama::kernels::Geometry::AttentionTiled { head_dim, bkv: 8, kv_f16: kv == KvType::F16 }), "{cfg:?}");
        }
        let n_heads = if matches!(case, GpuGroup4 | GpuNoTiled | TiledHeadDim18 | TiledDefaultLimits | DeviceHeadDim128) { 8 } else { 6 };
        attention_on(&gpu, case, kv, head_dim, n_heads, family, &mut rng);
    }
}

/// Key splits past WIDE_COMBINE_SPLITS (`attention_combine_wide.wgsl`): 1 and 3 tokens at a
/// 5000-key context split 70, 100 and MAX_SPLITS ways (and 32 and 33, either side of it), through
/// attention_decode (one token; splits are whole 64-key chunks: 70 splits use 40, 100 and 128
/// use 79, so splits 64 to 78 hold keys and the rest are empty) and attention.wgsl (3 tokens; whole tiles of keys), GQA groups
/// of 3; and 1 and 5 splits (attention_decode then walks 79 and 16 chunks of keys a split). Head
/// dims 20, 128, 132 and 260 (`attention_combine_wide.wgsl` takes 12 and 2 parts of the splits
/// per dim, then one: a dim per thread, and for 260 dims 256 on a second pass).
#[test]
fn attention_many_splits() {
    many_splits(&FamilyParams::default(), &[(1u32, 20), (3, 20), (1, 128), (1, 132), (1, 260)]);
}

/// The same within a sliding window of 700 keys: the splits share the window's keys alone (the
/// decode kernels), or the keys before it are masked (attention.wgsl).
#[test]
fn attention_many_splits_sliding_window() {
    many_splits(&windowed(700), &[(1u32, 20), (3, 20), (1, 128)]);
}

fn many_splits(family: &FamilyParams, shapes: &[(u32, u32)]) {
    let mut gpu = gpu(false);
    gpu.set_cpu(false);
    let mut rng = Rng(11);
    for &(n, head_dim) in shapes {
        let pos0 = 5000 - n;
        let cfg = Config { head_dim, family: family.clone(), ..attention_config(5000) };
        let (q, kv) = (cfg.q_dim() as usize, cfg.kv_dim() as usize);
        let qkv: Vec<f32> = rng.vec(n as usize * (q + 2 * kv)).iter().map(|v| 3.0 * v).collect();
        let (kc, vc) = (rng.vec(cfg.ctx as usize * kv), rng.vec(cfg.ctx as usize * kv));
        let want = attention_reference(&cfg, &qkv, pos0, &kc, &vc);
        for s in [1, 5, 32, 33, 70, 100, webgpu_llama::attention::MAX_SPLITS] {
            let got = block_on(oneshot::attention(&gpu, &cfg, &qkv, pos0, &kc, &vc, s)).unwrap();
            assert_close(&format!("attention hd {head_dim} T={n} pos0={pos0} splits={s} window={}", family.sliding_window), &got, &want, 2e-6);
        }
    }
}

fn attention_on(gpu: &Gpu, case: impl std::fmt::Display, kv_type: KvType, head_dim: u32, n_heads: u32, family: &FamilyParams, rng: &mut Rng) {
    let gpu = gpu.clone();
    // What the cache holds of a value.
    let stored = |v: Vec<f32>| match kv_type {
        KvType::F32 => v,
        KvType::F16 => oneshot::unpack_f16(&oneshot::pack_f16(&v)),
    };
    for &n in &TOKENS {
        for pos0 in [0, 45] {
            let cfg = Config { kv: kv_type, head_dim, n_heads, family: family.clone(), ..attention_config(pos0 + n + 3) };
            let (q, kv) = (cfg.q_dim() as usize, cfg.kv_dim() as usize);
            let qkv: Vec<f32> = rng.vec(n as usize * (q + 2 * kv)).iter().map(|v| 3.0 * v).collect();
            let cache = cfg.ctx as usize * kv;
            let (kc, vc) = (rng.vec(cache), rng.vec(cache));
            let want = attention_reference(&cfg, &qkv, pos0, &stored(kc.clone()), &stored(vc.clone()));
            let splits: &[u32] = if n <= webgpu_llama::attention::SPLIT_MAX_TOKENS { &[1, 3, 8] } else { &[1] };
            for &s in splits {
                let got = block_on(oneshot::attention(&gpu, &cfg, &qkv, pos0, &kc, &vc, s)).unwrap();
                assert_close(&format!("attention {kv_type} {case} T={n} pos0={pos0} splits={s} window={}", family.sliding_window), &got, &want, 2e-6);
            }
        }
    }
}

/// The GPU kernels' choices [`rope_attention`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RopeCase {
    /// The decode fusions on (RoPE and the cache write inside attention_decode.wgsl).
    Fused,
    /// Off (rope_kv.wgsl does them).
    Unfused,
    /// Fused, the softmax's reductions without subgroups.
    NoSubgroups,
    /// Fused, one query head per workgroup.
    OneHead,
    /// Fused, a GQA group of 4 (8 query heads).
    Group4,
    /// Fused, within a sliding window of 40 keys and Gemma 2's soft-cap ([`windowed`]; at head
    /// dim 128 natively the wide decode kernel, `attention::decode_wide`).
    Windowed,
}

/// RoPE + KV write + attention as the forward pass records them, one token (decoding) and three:
/// with the decode fusions on the GPU kernels, a one-token batch's RoPE and cache write run
/// inside `attention_decode.wgsl` (`attention::fuses_rope`); without them `rope_kv` does them.
/// Against f64 RoPE and attention, and the caches after, f32 and f16 caches, head dims 20 and 132
/// (5 and 33 groups of 4 dims: key groups that do not divide 64) and 64, with the softmax's
/// reductions in subgroups where the device has them ([`RopeCase`]: without; one query head per
/// workgroup; a GQA group of 4, two workgroups of 2 heads by default; a sliding window), up to
/// 131 keys (3 chunks of 64; the token alone in its chunk at positions 64 and 128), the slots the batch
/// writes holding NaN before.
#[test]
fn rope_attention() {
    use RopeCase::*;
    let base = gpu(false);
    let mut rng = Rng(9);
    let cases = [
        (Fused, KvType::F32, 20),
        (Unfused, KvType::F32, 20),
        (Fused, KvType::F16, 132),
        (Unfused, KvType::F16, 20),
        (Fused, KvType::F32, 132),
        (Fused, KvType::F32, 64),
        (Fused, KvType::F16, 64),
        (NoSubgroups, KvType::F32, 64),
        (OneHead, KvType::F32, 20),
        (OneHead, KvType::F16, 132),
        (Group4, KvType::F32, 20),
        (Group4, KvType::F16, 64),
        (Windowed, KvType::F32, 64),
        (Windowed, KvType::F16, 128),
    ];
    for (case, kv_type, head_dim) in cases {
        let mut gpu = base.clone();
        if case == OneHead && cfg!(not(feature = "lab")) {
            println!("rope + attention {case:?} (one query head a workgroup, forced) skipped: it needs `--features lab`");
            continue;
        }
        gpu.set_cpu(false);
        let t = gpu.switches_mut();
        t.fuse = Some(case != Unfused);
        if case == NoSubgroups {
            t.reduce_subgroups = false;
        }
        #[cfg(feature = "lab")]
        if case == OneHead {
            gpu.lab_mut().attn_heads = Some(1);
        }
        let family = if case == Windowed { windowed(40) } else { FamilyParams::default() };
        for n in [1, 3] {
            for pos0 in [0, 45, 64, 128, 130] {
                let n_heads = if case == Group4 { 8 } else { 6 };
                let cfg = Config { kv: kv_type, head_dim, n_heads, family: family.clone(), ..attention_config(pos0 + n + 3) };
                assert_eq!(attention::fuses_rope(&gpu, &cfg), case != Unfused, "the decode fusions decide");
                let (q, kv) = (cfg.q_dim() as usize, cfg.kv_dim() as usize);
                let qkv: Vec<f32> = rng.vec(n as usize * (q + 2 * kv)).iter().map(|v| 3.0 * v).collect();
                let cache = cfg.ctx as usize * kv;
                let (mut kc, mut vc) = (rng.vec(cache), rng.vec(cache));
                // The slots the batch writes hold NaN before (a leftover no read may pick up).
                for c in [&mut kc, &mut vc] {
                    c[pos0 as usize * kv..(pos0 + n) as usize * kv].fill(f32::NAN);
                }
                // The caches as they hold values; the reference: RoPE on q and k in f64, k and v
                // into the caches, then attention, the token's own key and value as the cache
                // holds them (the fused kernel, which has them in qkv, rounds them as well).
                let round = |v: &[f32]| match kv_type {
                    KvType::F32 => v.to_vec(),
                    KvType::F16 => oneshot::unpack_f16(&oneshot::pack_f16(v)),
                };
                let freqs = rope::frequencies(&cfg, None);
                let (mut roped, mut want_k, mut want_v) = (qkv.clone(), round(&kc), round(&vc));
                for (i, row) in roped.chunks_mut(q + 2 * kv).enumerate() {
                    let p = pos0 as usize + i;
                    for part in [0..q, q..q + kv] {
                        let mut x = f64s(&row[part.clone()]);
                        reference::rope(&mut x, head_dim as usize, &freqs, p as u32);
                        row[part].iter_mut().zip(&x).for_each(|(a, b)| *a = *b as f32);
                    }
                    want_k[p * kv..][..kv].copy_from_slice(&round(&row[q..q + kv]));
                    want_v[p * kv..][..kv].copy_from_slice(&round(&row[q + kv..]));
                }
                let want = attention_reference(&cfg, &roped, pos0, &want_k, &want_v);
                for s in [1, 3, 8] {
                    let what = format!("rope + attention {kv_type} {case:?} hd {head_dim} T={n} pos0={pos0} splits={s}");
                    let [o, k, v] = block_on(oneshot::rope_attention(&gpu, &cfg, None, &qkv, pos0, &kc, &vc, s)).unwrap();
                    assert_close(&format!("{what}: output"), &o, &want, 1e-5);
                    // An f16 cache within an ulp of the rounded f64 key (values up to 3 * sqrt(2): ulps of 2^-8,
                    // relative to that scale under 2^-9; WGSL leaves the rounding to the implementation).
                    let ulp = if kv_type == KvType::F16 { 1.0 / 512.0 } else { 1e-5 };
                    assert_close(&format!("{what}: k cache"), &k, &f64s(&want_k), ulp);
                    assert_close(&format!("{what}: v cache"), &v, &f64s(&want_v), ulp);
                }
            }
        }
    }
}

/// The GPU-policy kernel shapes too (threads per row, tiles), and the CPU matrix-matrix kernel's
/// tiles, on the same device.
#[test]
fn linear_gpu_policy_and_matmul_only() {
    let base = gpu(false);
    let mut rng = Rng(8);
    let (rows, cols) = (131u32, 160u32);
    let w = rng.vec((rows * cols) as usize);
    let ty = GgmlType::Q8_0;
    let bytes = ggml::quantize(ty, &w).unwrap();
    let mut exact = vec![0f32; w.len()];
    ggml::dequantize(ty, &bytes, &mut exact).unwrap();
    // The GPU policy; every batch through the matrix-matrix kernel: the device's (on CPU adapters
    // matmul_cpu, with subgroups where it has them), an odd CPU tile without subgroups, another,
    // the GPU kernel.
    for case in ["GPU policy", "matmul", "CPU tile 8x3/5", "CPU tile 16x2/3", "GPU tiles"] {
        let mut g: Gpu = base.clone();
        if case != "GPU policy" && cfg!(not(feature = "lab")) {
            println!("{ty} linear {case} (every batch through a matrix-matrix kernel, forced) skipped: it needs `--features lab`");
            continue;
        }
        if case == "GPU policy" {
            g.set_cpu(false);
        }
        #[cfg(feature = "lab")]
        {
            let t = g.lab_mut();
            match case {
                "matmul" | "GPU tiles" => t.matvec_max_tokens = Some(0),
                "CPU tile 8x3/5" => (t.matvec_max_tokens, t.cpu_tile) = (Some(0), Some(CpuTile { lanes: 8, rows: 3, tokens: 5, subgroup: 0 })),
                "CPU tile 16x2/3" => (t.matvec_max_tokens, t.cpu_tile) = (Some(0), Some(CpuTile { lanes: 16, rows: 2, tokens: 3, subgroup: 0 })),
                _ => {}
            }
            // (The f32 tiled kernel, also where the matrix-unit one is the default; "matmul"
            // takes the device's default.)
            let s = g.switches_mut();
            match case {
                "CPU tile 8x3/5" => s.cpu_subgroups = false,
                "GPU tiles" => (s.cpu_kernels, s.coop) = (false, Some(false)),
                _ => {}
            }
        }
        for &n in &TOKENS {
            let x = rng.vec((n * cols) as usize);
            let got = block_on(oneshot::linear(&g, &bytes, ty, 0, rows, cols, &x)).unwrap();
            let want: Vec<f64> = x.chunks(cols as usize).flat_map(|xi| reference::matvec(&f64s(&exact), &f64s(xi))).collect();
            assert_close(&format!("linear {case} T={n}"), &got, &want, 2e-5);
        }
    }
}

/// Not a check: the perf mode of the same cases (`cargo test --release --test ops perf --
/// --ignored --nocapture`): the linear op at Llama-3.2-1B's 2048 x 2048 and 8192 x 2048 in Q8_0,
/// Q4_K and F16 and attention at SmolLM2's head shape, over the tokens axis, with GPU timestamps
/// where the device has them. `PERF_TOKENS=1,512` picks token counts.
#[test]
#[ignore]
fn perf() {
    let gpu = gpu(false);
    println!("adapter: {}", gpu.adapter_info);
    let tokens: Vec<u32> = std::env::var("PERF_TOKENS").map_or(TOKENS.to_vec(), |v| v.split(',').map(|t| t.parse().unwrap()).collect());
    let mut rng = Rng(9);
    for ty in [GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::F16] {
        for (rows, cols) in [(2048u32, 2048u32), (8192, 2048)] {
            let bytes = ggml::quantize(ty, &rng.vec((rows * cols) as usize)).unwrap();
            for &n in &tokens {
                let x = rng.vec((n * cols) as usize);
                let (_, t) = block_on(oneshot::linear_timed(&gpu, &bytes, ty, 0, rows, cols, &x, 10)).unwrap();
                let (wall, on_gpu) = t.expect("timed");
                let s = on_gpu.unwrap_or(wall);
                let flops = 2.0 * rows as f64 * cols as f64 * n as f64;
                println!(
                    "linear {ty:>5} {rows:>5}x{cols:<5} T={n:<4} {:>9.1} us {:>8.1} GFLOP/s {:>7.1} GB/s of weights",
                    s * 1e6,
                    flops / s / 1e9,
                    bytes.len() as f64 / s / 1e9
                );
            }
        }
    }
    for &n in &tokens {
        let pos0 = 4096 - n;
        let cfg = Config { n_heads: 9, n_kv_heads: 3, head_dim: 64, n_rot: 64, ..attention_config(4096) };
        let (q, kv) = (cfg.q_dim() as usize, cfg.kv_dim() as usize);
        let qkv = rng.vec(n as usize * (q + 2 * kv));
        let (kc, vc) = (rng.vec(4096 * kv), rng.vec(4096 * kv));
        let splits = webgpu_llama::attention::splits(&gpu, &cfg, n, 4096);
        let (_, t) = block_on(oneshot::attention_timed(&gpu, &cfg, &qkv, pos0, &kc, &vc, splits, 10)).unwrap();
        let (wall, on_gpu) = t.expect("timed");
        println!("attention 9/3 heads hd64 T={n:<4} at {pos0}: {:>9.1} us ({splits} splits)", on_gpu.unwrap_or(wall) * 1e6);
    }
}
