#![cfg(target_arch = "wasm32")]
//! The GPU kernel forms in headless Chromium. SwiftShader is a CPU adapter, so `createLlama` runs
//! the CPU kernel forms there (tests/web.rs); a real GPU in a browser gets the GPU forms (tiled
//! matmul, tiled and split-key attention, the GPU matrix-vector forms), compiled by Tint, which
//! compiles some WGSL differently from naga (the native path): a loop-local `var` without an
//! initializer kept its last iteration's value under Tint, which broke every prompt of more
//! than one key tile. These tests adopt the host's device as `createLlama` does and force the
//! policy a GPU gets ([`gpu_forms`]), then check every reference case and prompt lengths that
//! cross the kernels' tiles and chunks against the float64 logits.
//!
//! Run: `scripts/test-web.sh --wasm` (or `cargo test --target wasm32-unknown-unknown --test web_gpu`).

use wasm_bindgen_test::*;

use webgpu_llama::ggml::GgmlType;
use webgpu_llama::gpu::Gpu;
use webgpu_llama::{Gguf, Llama, LoadOptions};

mod web_common;
use web_common::*;

wasm_bindgen_test_configure!(run_in_browser);

/// The host's device adopted as `createLlama` adopts it (its subgroup size where it has one),
/// with the policy of a GPU adapter whatever the adapter is.
async fn gpu_forms(dev: &wasm_bindgen::JsValue) -> Gpu {
    let mut gpu = webgpu_llama::web::adopt::adopt_device(dev).await.expect("adopt the host's device").into_gpu();
    assert!(!webgpu_llama::policy::int_dot(&gpu), "a CPU adapter keeps the f32 matvec form");
    gpu.set_cpu(false);
    assert_eq!(gpu.reduce_subgroup() as f64, expected_subgroup(dev), "subgroup size of the reductions");
    // Chromium's WGSL has dot4I8Packed: the integer matvec form runs (SwiftShader polyfills it).
    assert!(webgpu_llama::policy::int_dot(&gpu), "the integer matvec form on a GPU with dot4I8Packed");
    gpu
}

fn load(gpu: &Gpu, case: &Case) -> Llama {
    let g = Gguf::parse(case.model).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    Llama::load(gpu, &g, &case.model.to_vec(), LoadOptions::default()).unwrap_or_else(|e| panic!("{}: load: {e}", case.name))
}

/// Checks `got` against row `i` of `case`; returns the difference.
fn check(case: &Case, what: &str, i: usize, got: &[f32]) -> f32 {
    let d = max_abs(got, &case.row(i));
    assert!(d <= TOLERANCE, "{} with the GPU forms, {what}: row {i} differs by {d} (tolerance {TOLERANCE})", case.name);
    d
}

/// The prompt in one call, the greedy continuation one token at a time (identical ids), then the
/// prompt again one token per call: every row within [`TOLERANCE`].
async fn run_case(gpu: &Gpu, case: &Case) {
    let llama = load(gpu, case);
    let (prompt, greedy) = (case.prompt(), case.greedy());
    let p = prompt.len();
    let mut logits = llama.forward(&prompt, 0).await.unwrap();
    let mut worst = check(case, "the prompt in one call", p - 1, &logits);
    for (j, &want) in greedy.iter().enumerate() {
        let next = argmax(&logits);
        assert_eq!(next, want, "{} with the GPU forms: greedy token {j} is {next}, reference {want}", case.name);
        if j + 1 < greedy.len() {
            logits = llama.forward(&[next], (p + j) as u32).await.unwrap();
            worst = worst.max(check(case, "a decode step", p + j, &logits));
        }
    }
    for (i, &t) in prompt.iter().enumerate().take(p - 1) {
        worst = worst.max(check(case, "the prompt a token a call", i, &llama.forward(&[t], i as u32).await.unwrap()));
    }
    llama.dispose();
    web_sys::console::log_1(&format!("{} with the GPU forms: max abs diff {worst:.2e}, greedy identical", case.name).into());
}

#[wasm_bindgen_test]
async fn every_reference_case_with_the_gpu_kernel_forms() {
    let gpu = gpu_forms(&device(true).await).await;
    for case in [&F32, &Q8_0, &MOE_Q8_0, &PAD256_Q4_K_M].into_iter().chain(&OTHERS) {
        run_case(&gpu, case).await;
    }
}

/// The same without subgroups: the workgroup-memory reductions.
#[wasm_bindgen_test]
async fn reference_cases_with_the_gpu_kernel_forms_without_subgroups() {
    let gpu = gpu_forms(&device_without_subgroups().await).await;
    for case in [&F32, &PAD256_Q4_K_M] {
        run_case(&gpu, case).await;
    }
}

/// Kernels with subgroup operations compiled for a fixed size (`enable subgroup_size_control;`,
/// `@subgroup_size(N)`), as on a device whose adapter has a range of sizes (D3D12, Vulkan on
/// Intel and AMD): SwiftShader has one size, so the fixing is forced here, where Tint compiles
/// and runs it.
#[wasm_bindgen_test]
async fn reference_cases_with_subgroup_sizes_fixed_per_kernel() {
    let dev = device_with_size_control().await;
    if !has_feature(&dev, "subgroup-size-control") || expected_subgroup(&dev) == 0.0 {
        web_sys::console::log_1(&"SKIPPED: this adapter has no subgroup-size-control or no fixed subgroup size".into());
        return;
    }
    let mut gpu = gpu_forms(&dev).await;
    gpu.set_web_size_control(true);
    for case in [&F32, &PAD256_Q4_K_M] {
        run_case(&gpu, case).await;
    }
}

/// Batches whose lengths are no multiple of any tile (matmul tiles of 64 tokens, attention tiles
/// of 8 to 32 keys and 64 query rows, key chunks of 64), from position 0 and from positions past
/// a tile, each batch's last row against the reference; then the 300-token prompt in one call
/// and its greedy continuation (one-token steps after 300 keys: several chunks and splits).
#[wasm_bindgen_test]
async fn prompt_lengths_across_tiles_with_the_gpu_kernel_forms() {
    let case = OTHERS.iter().find(|c| c.name == "stories260K-f32-long300").expect("the long300 case");
    let gpu = gpu_forms(&device(true).await).await;
    let llama = load(&gpu, case);
    let prompt = case.prompt();
    let mut worst = 0f32;
    for n in [1usize, 7, 32, 33, 65, 300] {
        let got = llama.forward(&prompt[..n], 0).await.unwrap();
        worst = worst.max(check(case, &format!("{n} tokens from position 0"), n - 1, &got));
    }
    let mut at = 0;
    for n in [1usize, 7, 32, 33, 65, 97, 65] {
        let got = llama.forward(&prompt[at..at + n], at as u32).await.unwrap();
        worst = worst.max(check(case, &format!("{n} tokens from position {at}"), at + n - 1, &got));
        at += n;
    }
    assert_eq!(at, prompt.len());
    let mut logits = llama.forward(&prompt, 0).await.unwrap();
    for (j, &want) in case.greedy().iter().enumerate() {
        assert_eq!(argmax(&logits), want, "greedy token {j} after the 300-token prompt");
        logits = llama.forward(&[want], (at + j) as u32).await.unwrap();
        if j + 1 < case.greedy().len() {
            worst = worst.max(check(case, "a decode step", at + j, &logits));
        }
    }
    llama.dispose();
    web_sys::console::log_1(&format!("prompt lengths across tiles with the GPU forms: max abs diff {worst:.2e}").into());
}

/// The one-token and multi-token matrix-vector kernels with RMSNorm and SwiGLU fused, Q4_K, F16
/// and Q8_0 (regrouped at load: rows of 512) as 16-byte pieces, row sums by subgroup shuffles when
/// the device has one subgroup size: against rmsnorm, matvec and SwiGLU in f64.
#[wasm_bindgen_test]
async fn gpu_kernel_forms_match_the_f64_reference() {
    use webgpu_llama::{ggml, oneshot, reference};
    let dev = device(true).await;
    let mut gpu = gpu_forms(&dev).await;
    gpu.switches_mut().fuse = Some(true);
    assert_eq!(gpu.reduce_subgroup() as f64, expected_subgroup(&dev), "subgroup size of the reductions");
    let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let mut seed = 7u32;
    let mut rand = move || {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (seed >> 8) as f32 / (1 << 24) as f32 * 2.0 - 1.0
    };
    for ty in [GgmlType::Q4_K, GgmlType::F16, GgmlType::Q8_0] {
        let (rows, cols) = (2 * 19u32, 512u32);
        let w: Vec<f32> = (0..rows * cols).map(|_| rand()).collect();
        let bytes = ggml::quantize(ty, &w).unwrap();
        let mut exact = vec![0f32; w.len()];
        ggml::dequantize(ty, &bytes, &mut exact).unwrap();
        let (gate, up) = exact.split_at(exact.len() / 2);
        let nw: Vec<f32> = (0..cols).map(|_| 1.0 + 0.5 * rand()).collect();
        for n in [1u32, 3] {
            let x: Vec<f32> = (0..n * cols).map(|_| 3.0 * rand()).collect();
            let got = oneshot::linear_fused(&gpu, &bytes, ty, 0, rows, cols, &x, Some((&nw, 1e-5)), true, false).await.unwrap();
            let want: Vec<f64> = x
                .chunks(cols as usize)
                .flat_map(|r| {
                    let xn = reference::rmsnorm(&f64s(r), &f64s(&nw), 1e-5);
                    reference::swiglu(&reference::matvec(&f64s(gate), &xn), &reference::matvec(&f64s(up), &xn))
                })
                .collect();
            assert_eq!(got.len(), want.len(), "{ty} T={n}: output length");
            // Relative to the largest output (as tests/ops.rs does natively).
            let scale = want.iter().fold(1f64, |m, w| m.max(w.abs()));
            let worst = got.iter().zip(&want).map(|(g, w)| (*g as f64 - w).abs() / scale).fold(0.0, f64::max);
            assert!(worst <= 2e-5, "{ty} T={n}: norm + linear + swiglu differs by {worst:.2e} of the largest output");
        }
    }
}
