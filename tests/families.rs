#![cfg(not(target_arch = "wasm32"))]
//! The model families on the CPU (no GPU): for every case of `tests/families/` (llama.cpp's
//! logits for `scripts/families.py`'s F32 models), the float64 reference ([`Reference`]) agrees
//! with llama.cpp at every row within [`TOL`] and picks the same greedy tokens; its runs on the
//! Q8_0 and Q4_0 files (exactly dequantised weights) stay within a loose bound of the F32 run;
//! and the config reads each family's features.
//!
//! The models are generated, not fetched: `bash scripts/families.sh` writes them to `.families/`
//! (scripts/setup.sh runs it). A missing model or one whose sha256 differs from the json's fails
//! here, loudly.

mod common;

use common::families::*;
use common::*;
use webgpu_llama::reference::Reference;
use webgpu_llama::{Config, Family, Gguf};

/// Max abs difference allowed between the f64 reference and llama.cpp's f32 logits. llama.cpp
/// sums in f32 (relative rounding about 6e-8 a term, over at most 512 terms, through 3 layers)
/// and its logits are O(1-10): measured differences are near 1e-5, so 1e-4 leaves room for
/// summation order without hiding a wrong formula (a NEOX/adjacent RoPE swap, a missing bias or
/// norm moves logits by 1e-1 or more).
const TOL: f32 = 1e-4;

/// Loose bound on quantised vs F32 logits (reference on both), as a fraction of the largest F32
/// logit: Q8_0's weight rounding moves these tiny random models' logits by 1-2% of it, Q4_0's by
/// 20-45% (random weights have no structure to spare, and 3 layers compound the error); a file
/// whose weights decoded wrongly (a wrong scale, a swapped block) moves them by more than the
/// logits' own size.
const QUANT_BOUND: [(&str, f32); 2] = [("q8_0", 0.05), ("q4_0", 0.75)];

/// The F32 file's reference against llama.cpp, every row; our greedy tokens against llama.cpp's.
fn check_f32(c: &Case) -> Vec<Vec<f32>> {
    let bytes = family_model(&c.model);
    assert_eq!(sha256(&bytes), c.model_sha256, "{}: .families/{} differs from the one the references were made from: regenerate it with `bash scripts/families.sh` (and, if scripts/families.py changed on purpose, the references with scripts/family-references.py)", c.name, c.model);
    let tokens = fed(c);
    let (cfg, rows) = reference_rows(&bytes, &tokens, n_ctx(c));
    assert_eq!(cfg.vocab as usize, c.vocab, "{}: vocab", c.name);
    assert_eq!(rows.len(), c.rows.len(), "{}: rows", c.name);
    let mut worst = 0f32;
    for (i, (got, want)) in rows.iter().zip(&c.rows).enumerate() {
        let e = max_abs(got, want);
        worst = worst.max(e);
        assert!(e <= TOL, "{}: row {i} max abs {e:.3e} > {TOL:.0e}", c.name);
    }
    let p = c.prompt.len();
    let greedy: Vec<u32> = rows[p - 1..].iter().map(|r| argmax(r)).collect();
    assert_eq!(&greedy[..], &c.greedy[..], "{}: greedy continuation", c.name);
    println!("{} ({}): {} rows, max abs vs llama.cpp {worst:.3e}, greedy identical", c.name, cfg.architecture, rows.len());
    rows
}

/// The quantised files of a case: the reference runs on their exactly dequantised weights and
/// stays within [`QUANT_BOUND`] of the F32 run, at every row for a dense model. An MoE's top-k
/// routing is discontinuous: weight rounding flips a near-tie between experts on some rows, which
/// moves those rows by a large step, so there at least 3 rows in 4 must be within the bound.
fn check_quantised(c: &Case, f32_rows: &[Vec<f32>]) {
    let stem = c.model.strip_suffix("-f32.gguf").expect("an F32 case");
    for (ty, bound) in QUANT_BOUND {
        let bytes = family_model(&format!("{stem}-{ty}.gguf"));
        let json = std::fs::read_to_string(families_dir().join(format!("{}.json", c.name))).unwrap();
        let want = json.split(&format!("\"{ty}\": \"")).nth(1).and_then(|r| r.split('"').next()).unwrap_or_else(|| panic!("{}: no sha256 for {ty}", c.name));
        assert_eq!(
            sha256(&bytes),
            want,
            "{stem}-{ty}.gguf differs from the file the references were made beside: regenerate it with `bash scripts/families.sh`"
        );
        let (cfg, rows) = reference_rows(&bytes, &fed(c), n_ctx(c));
        let diffs: Vec<f32> = rows.iter().zip(f32_rows).map(|(a, b)| max_abs(a, b)).collect();
        let worst = diffs.iter().copied().fold(0.0, f32::max);
        let scale = f32_rows.iter().flatten().fold(0.0, |m: f32, x| m.max(x.abs()));
        let within = diffs.iter().filter(|&&e| e <= bound * scale).count();
        println!(
            "{stem}-{ty}: max abs vs the F32 reference {worst:.3e} (largest F32 logit {scale:.2}: {:.3} of it); {within} of {} rows within {bound} of it",
            worst / scale,
            diffs.len()
        );
        assert!(worst > 0.0, "{stem}-{ty}: identical to F32: the weights were not quantised");
        let need = if cfg.is_moe() { diffs.len().div_ceil(4) * 3 } else { diffs.len() };
        assert!(within >= need, "{stem}-{ty}: {within} of {} rows within {bound} x the largest F32 logit {scale} of F32 (need {need})", diffs.len());
    }
}

#[test]
fn every_family_case_matches_llama_cpp_and_its_quantised_files_stay_close() {
    for c in family_cases() {
        let rows = check_f32(&c);
        check_quantised(&c, &rows);
    }
}

/// The comparison has teeth: the reference with one family feature switched off (NEOX pairs read
/// as adjacent ones; Gemma 3's sliding window ignored) leaves llama.cpp's rows by far more than
/// [`TOL`].
#[test]
fn a_missing_family_feature_fails_the_comparison() {
    for (name, knock_out) in [("qwen3-f32", "rope_neox"), ("gemma3-f32", "sliding_window")] {
        let c = case_in(&families_dir(), name);
        let bytes = family_model(&c.model);
        let g = Gguf::parse(bytes.as_slice()).unwrap();
        let mut cfg = Config::from_gguf(&g, Some(n_ctx(&c))).unwrap();
        match knock_out {
            "rope_neox" => cfg.family.rope_neox = false,
            _ => cfg.family.sliding_window = 0,
        }
        let mut r = Reference::load(&g, bytes.as_slice(), &cfg).unwrap();
        let worst = fed(&c)
            .iter()
            .zip(0..)
            .map(|(&t, pos)| max_abs(&r.step(t, pos).into_iter().map(|x| x as f32).collect::<Vec<_>>(), &c.rows[pos as usize]))
            .fold(0.0, f32::max);
        println!("{name} without {knock_out}: max abs {worst:.3e}");
        assert!(worst > 1000.0 * TOL, "{name} without {knock_out}: max abs {worst} is within 1000 x the tolerance");
    }
}

fn config_of(file: &str) -> Config {
    Config::from_gguf(&Gguf::parse(family_model(file).as_slice()).unwrap(), None).unwrap()
}

#[test]
fn the_config_reads_each_familys_features() {
    let q2 = config_of("qwen2-f32.gguf");
    assert_eq!(q2.architecture, Family::Qwen2);
    assert!(q2.family.rope_neox && q2.family.qkv_bias && !q2.family.qk_norm && !q2.tied_output);
    assert_eq!((q2.theta, q2.n_heads, q2.n_kv_heads, q2.head_dim), (1e6, 4, 2, 32));
    let q3 = config_of("qwen3-f32.gguf");
    assert_eq!(q3.architecture, Family::Qwen3);
    assert!(q3.family.rope_neox && !q3.family.qkv_bias && q3.family.qk_norm && q3.tied_output);
    assert_eq!((q3.d, q3.head_dim, q3.q_dim(), q3.n_rot), (128, 128, 512, 128), "head dim 128 with n_head*head_dim != n_embd");
    assert!(q3.expected_tensors().iter().any(|(n, d)| n == "blk.2.attn_k_norm.weight" && d == &[128]));
    assert!(q2.expected_tensors().iter().any(|(n, d)| n == "blk.2.attn_v.bias" && d == &[64]));
    let m3 = config_of("qwen3moe-f32.gguf");
    assert_eq!((m3.architecture, m3.experts, m3.topk, m3.ff, m3.q_dim()), (Family::Qwen3Moe, 8, 3, 64, 256));
    assert!(m3.is_moe() && m3.family.qk_norm && m3.family.rope_neox && !m3.tied_output);
    assert!(m3.expected_tensors().iter().any(|(n, d)| n == "blk.1.ffn_down_exps.weight" && d == &[64, 128, 8]));
    let g3 = config_of("gemma3-f32.gguf");
    assert_eq!(g3.architecture, Family::Gemma3);
    let f = &g3.family;
    assert!(f.rope_neox && f.qk_norm && f.post_norms && f.gelu && !f.qkv_bias && g3.tied_output);
    assert_eq!((f.embd_scale, f.attn_scale, f.final_softcap), ((128f32).sqrt(), None, 0.0));
    assert_eq!((f.sliding_window, f.theta_swa, g3.theta, g3.rope_scale), (4, 10000.0, 1e6, 8.0), "linear RoPE factor 8 on the global layers");
    assert_eq!((0..4).map(|l| f.is_swa(l)).collect::<Vec<_>>(), [true, true, false, true], "pattern 3: every third layer global");
    assert!(g3.expected_tensors().iter().any(|(n, d)| n == "blk.3.post_ffw_norm.weight" && d == &[128]));
    let g2 = config_of("gemma2-f32.gguf");
    let f = &g2.family;
    assert_eq!(g2.architecture, Family::Gemma2);
    assert!(f.post_norms && f.gelu && !f.qk_norm && g2.tied_output);
    assert_eq!((f.attn_softcap, f.final_softcap, f.sliding_window, f.theta_swa), (1.5, 10.0, 4, 10000.0), "one RoPE base");
    assert_eq!((0..4).map(|l| f.is_swa(l)).collect::<Vec<_>>(), [true, false, true, false], "default pattern 2");
    let p3 = config_of("phi3-f32.gguf");
    assert_eq!(p3.architecture, Family::Phi3);
    let f = &p3.family;
    assert!(f.rope_neox && f.fused_qkv && f.fused_gate_up && f.longrope && !f.qk_norm && !p3.tied_output);
    assert_eq!((p3.head_dim, p3.n_rot, f.rope_orig_ctx), (32, 24, 128), "partial rotary 0.75");
    assert!((f.rope_attn_factor - (1.0 + 8f32.ln() / 128f32.ln()).sqrt()).abs() < 1e-6);
    let at = |ctx| Config { ctx, ..p3.clone() }.rope_factors();
    assert_eq!((at(128), at(129)), (Some("rope_factors_short.weight"), Some("rope_factors_long.weight")), "long past the original context");
    let names: Vec<String> = p3.expected_tensors().into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"blk.0.attn_qkv.weight".into()) && !names.contains(&"blk.0.attn_q.weight".into()) && !names.contains(&"blk.0.ffn_gate.weight".into())
    );
}
