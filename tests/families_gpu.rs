#![cfg(not(target_arch = "wasm32"))]
//! The model families on the GPU (lavapipe here): every case of `tests/families/`, through `forward_all` over the prompt and the greedy
//! continuation, with the device's kernel forms (prefill in one batch) and with a GPU's forms a
//! token at a time (the decode kernels: fused RoPE, integer-form matvecs where the format has
//! one). The F32 file within [`TOL`] of llama.cpp's logits at every row, greedy identical; the
//! Q8_0 and Q4_0 files within [`TOL`] of the float64 reference on their exactly dequantised
//! weights (llama.cpp quantises activations there, so it is not the oracle), greedy as it picks.

mod common;

use common::families::*;
use common::*;
use pollster::block_on;
use webgpu_llama::{Family, Gguf, Llama, LoadOptions};

/// The reference cases' tolerance (`tests/reference.rs`).
const TOL: f32 = 2e-3;

/// The kernel choices a case runs under.
#[derive(Clone, Copy, Debug)]
enum Forms {
    /// The device's own (on lavapipe, a CPU adapter's), the whole sequence in one batch.
    Device,
    /// A GPU's, one token a batch: the one-token kernels.
    GpuDecode,
}

/// The GPU's logits for `tokens` from position 0 on the model `bytes` (KV cache of `ctx`).
fn gpu_rows(bytes: &[u8], tokens: &[u32], ctx: u32, forms: Forms) -> Vec<Vec<f32>> {
    let mut gpu = gpu(false);
    let batch = match forms {
        Forms::Device => None,
        Forms::GpuDecode => {
            gpu.set_cpu(false);
            Some(1)
        }
    };
    let g = Gguf::parse(bytes).unwrap();
    let llama = Llama::load(&gpu, &g, &bytes.to_vec(), LoadOptions { ctx: Some(ctx), batch, ..Default::default() }).unwrap();
    let vocab = llama.config.vocab as usize;
    let all = block_on(llama.forward_all(tokens, 0)).unwrap();
    llama.dispose();
    all.chunks(vocab).map(|r| r.to_vec()).collect()
}

/// `got` against `want` at every row within [`TOL`], and the greedy picks after the prompt.
fn check(what: &str, got: &[Vec<f32>], want: &[Vec<f32>], prompt: usize, greedy: &[u32]) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}: rows");
    let mut worst = 0f32;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let e = max_abs(g, w);
        worst = worst.max(e);
        assert!(e <= TOL, "{what}: row {i} max abs {e:.3e} > {TOL:.0e}");
    }
    let picks: Vec<u32> = got[prompt - 1..].iter().map(|r| argmax(r)).collect();
    assert_eq!(picks, greedy, "{what}: greedy continuation");
    worst
}

#[test]
fn every_gpu_family_case_matches_its_reference() {
    let mut ran = Vec::new();
    for c in family_cases() {
        let bytes = family_model(&c.model);
        let cfg = webgpu_llama::Config::from_gguf(&Gguf::parse(bytes.as_slice()).unwrap(), None).unwrap();
        let (tokens, ctx, p) = (fed(&c), n_ctx(&c), c.prompt.len());
        for forms in [Forms::Device, Forms::GpuDecode] {
            let worst = check(&format!("{} ({forms:?})", c.name), &gpu_rows(&bytes, &tokens, ctx, forms), &c.rows, p, &c.greedy);
            println!("{} ({forms:?}): {} rows, max abs vs llama.cpp {worst:.3e}", c.name, c.rows.len());
        }
        let stem = c.model.strip_suffix("-f32.gguf").expect("an F32 case");
        for ty in ["q8_0", "q4_0"] {
            let q = family_model(&format!("{stem}-{ty}.gguf"));
            let (_, want) = reference_rows(&q, &tokens, ctx);
            let greedy: Vec<u32> = want[p - 1..].iter().map(|r| argmax(r)).collect();
            for forms in [Forms::Device, Forms::GpuDecode] {
                let worst = check(&format!("{stem}-{ty} ({forms:?})"), &gpu_rows(&q, &tokens, ctx, forms), &want, p, &greedy);
                println!("{stem}-{ty} ({forms:?}): max abs vs the float64 reference {worst:.3e}");
            }
        }
        ran.push(cfg.architecture);
    }
    for f in Family::ALL.into_iter().filter(|f| *f != Family::Llama) {
        assert!(ran.contains(&f), "{f} has no case in tests/families/");
    }
}

/// `webgpu-llama gen`'s family shapes (`synth`), scaled down: each GGUF the generator writes loads,
/// and the GPU's logits over a few tokens match the float64 reference on the same file.
#[test]
fn synthetic_family_models_match_the_reference() {
    use webgpu_llama::synth::{model, Scheme, Shape};
    let small = Shape::dense(128, 2, 4, 2, 256, 300);
    // The Gemma shapes' metadata and tensors at the small width, a window shorter than the tokens.
    let gemma = |s: Shape| Shape {
        d: 128,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        head_dim: Some(64),
        ff: 256,
        vocab: 300,
        sliding_window: 4,
        swa_pattern: Some(2),
        ..s
    };
    let shapes = [
        Shape { family: Family::Qwen2, ..small.clone() },
        Shape { family: Family::Qwen3, head_dim: Some(64), ..small.clone() },
        Shape { family: Family::Phi3, ..small },
        gemma(Shape::gemma3_1b()),
        gemma(Shape::gemma2_2b()),
    ];
    for scaled in shapes {
        let family = scaled.family;
        let shape = Shape { tied: family != Family::Phi3, ctx: 8192, ..scaled };
        let bytes = model(&shape, Scheme::parse("Q8_0").unwrap(), 11).unwrap().to_bytes();
        let tokens = [1, 7, 42, 299, 5, 100];
        let (cfg, want) = reference_rows(&bytes, &tokens, 64);
        assert_eq!(cfg.architecture, family);
        let got = gpu_rows(&bytes, &tokens, 64, Forms::GpuDecode);
        let worst = got.iter().zip(&want).map(|(g, w)| max_abs(g, w)).fold(0f32, f32::max);
        println!("synthetic {family}: max abs vs the float64 reference {worst:.3e}");
        assert!(worst <= TOL, "synthetic {family}: max abs {worst:.3e}");
    }
}
