//! Every kernel on odd shapes against the CPU reference (`webgpu_llama::reference`, f64):
//! synthetic models whose widths are not multiples of 64, GQA ratios 1, 2 and 4, partial RoPE,
//! Llama-3 `rope_freqs`, MoE with top-1 and top-k > 1, split matrices; logits compared at several
//! positions, each position exercising embed, rmsnorm, matvec(_q8), rope_kv, attention, swiglu,
//! moe_select, matvec_exp and moe_down.

mod common;

use common::*;
use pollster::block_on;
use webgpu_llama::ggml::GgmlType;
use webgpu_llama::reference::Reference;
use webgpu_llama::synth::{model, Scheme, Shape};
use webgpu_llama::{Gguf, Llama, LoadOptions};

/// Runs `positions` tokens one at a time on the GPU and the CPU reference; returns the worst
/// max-abs difference relative to the largest reference logit.
fn compare(shape: &Shape, scheme: Scheme, positions: u32, cap: Option<u64>) -> f64 {
    let bytes = model(shape, scheme, 7).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let mut gpu = gpu(false);
    if let Some(c) = cap {
        gpu.cap_binding(c);
    }
    let llama = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(positions + 3), progress: None }).unwrap();
    let mut cpu = Reference::load(&g, bytes.as_slice(), &llama.config).unwrap();
    let mut worst = 0f64;
    for pos in 0..positions {
        let token = (pos * 7919 + 3) % shape.vocab;
        let got = block_on(llama.forward(&[token], pos)).unwrap();
        let want = cpu.step(token, pos);
        let scale = want.iter().fold(1e-3f64, |m, x| m.max(x.abs()));
        let err = got.iter().zip(&want).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max) / scale;
        worst = worst.max(err);
    }
    worst
}

fn assert_close(what: &str, err: f64) {
    println!("{what}: worst relative max-abs error {err:.2e}");
    assert!(err < 2e-4, "{what}: GPU differs from the CPU reference by {err:.2e} (relative)");
}

#[test]
fn dense_gqa1_odd_width_f32() {
    // d 72 (not a multiple of 64), 6 heads of 12, no grouping.
    assert_close("gqa1", compare(&Shape::dense(72, 2, 6, 6, 100, 97), Scheme::All(GgmlType::F32), 9, None));
}

#[test]
fn dense_gqa2_f16() {
    assert_close("gqa2 f16", compare(&Shape::dense(80, 2, 8, 4, 136, 131), Scheme::All(GgmlType::F16), 7, None));
}

#[test]
fn dense_gqa4_q8_0_kept_quantised() {
    assert_close("gqa4 q8_0", compare(&Shape::dense(96, 2, 8, 2, 160, 101), Scheme::All(GgmlType::Q8_0), 7, None));
}

#[test]
fn dense_k_quants_dequantised() {
    assert_close("q4_k_m", compare(&Shape::dense(256, 1, 4, 2, 512, 67), Scheme::Q4KM, 5, None));
}

#[test]
fn moe_top1_and_top3() {
    let top1 = Shape { experts: 5, topk: 1, ..Shape::dense(72, 2, 6, 3, 40, 83) };
    assert_close("moe top-1", compare(&top1, Scheme::All(GgmlType::F32), 6, None));
    let top3 = Shape { experts: 6, topk: 3, ..Shape::dense(64, 2, 4, 2, 96, 83) };
    assert_close("moe top-3 q8_0", compare(&top3, Scheme::All(GgmlType::Q8_0), 6, None));
}

#[test]
fn partial_rope_key_length_and_linear_scaling() {
    // head_dim 16 set by key_length (6 heads x 16 = 96 != d 80), only 8 dims rotated, scaling 4.
    let s = Shape { head_dim: Some(16), n_rot: Some(8), rope_scale: Some(4.0), ..Shape::dense(80, 2, 6, 3, 96, 71) };
    assert_close("partial rope", compare(&s, Scheme::All(GgmlType::F32), 8, None));
}

#[test]
fn llama3_rope_freqs_tied_output() {
    let s = Shape { rope_freqs: true, tied: true, theta: 500000.0, ..Shape::dense(64, 2, 4, 1, 96, 89) };
    assert_close("rope_freqs", compare(&s, Scheme::All(GgmlType::F32), 6, None));
}

#[test]
fn matrices_split_across_bindings() {
    // A 4 KiB binding cap splits every matrix and the embedding into many parts.
    assert_close("split f32", compare(&Shape::dense(72, 1, 6, 2, 100, 300), Scheme::All(GgmlType::F32), 4, Some(4096)));
    assert_close("split q8_0", compare(&Shape::dense(64, 1, 4, 2, 96, 300), Scheme::All(GgmlType::Q8_0), 4, Some(4096)));
}

#[test]
fn many_positions_attention() {
    // 150 positions: attention's loops over more than two workgroups' worth of cached keys.
    assert_close("150 positions", compare(&Shape::dense(64, 1, 4, 2, 64, 61), Scheme::All(GgmlType::F32), 150, None));
}
