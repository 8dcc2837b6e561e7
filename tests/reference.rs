#![cfg(not(target_arch = "wasm32"))]
//! End to end against `../shared/reference`: every case, every row within 2e-3 (max abs) of the
//! float64 reference logits, and the greedy continuation identical: through `forward` (the
//! prompt as one batch, then decode token by token) and through the batched every-row path
//! (`forward_all`, as `--dump-logits` uses it) with each kernel choice: the device's policy, the
//! GPU workgroup shapes with key splits, and the tiled matrix-matrix kernel for every batch in
//! chunks of 5 tokens.

mod common;

use common::*;
use pollster::block_on;

const TOL: f32 = 2e-3;

/// Runs one case: the prompt in one `forward` call (the answer is row len(prompt)-1), then the
/// greedy continuation token by token, then every prompt row again one token at a time from
/// position 0 (which also exercises overwriting the KV cache).
fn check_case(c: &Case) {
    let gpu = gpu(false);
    let bytes = std::fs::read(model_path(&c.model)).unwrap();
    let llama = load(&gpu, &bytes, None);
    assert_eq!(llama.config.vocab as usize, c.vocab, "{}: vocab", c.name);
    let p = c.prompt.len();
    let mut worst = 0f32;
    let mut logits = block_on(llama.forward(&c.prompt, 0)).unwrap();
    let mut got = Vec::new();
    for j in 0..c.greedy.len() {
        let row = p - 1 + j;
        let e = max_abs(&logits, &c.rows[row]);
        worst = worst.max(e);
        assert!(e <= TOL, "{}: row {row} max abs {e}", c.name);
        let next = argmax(&logits);
        got.push(next);
        if j + 1 < c.greedy.len() {
            logits = block_on(llama.forward(&[next], (p + j) as u32)).unwrap();
        }
    }
    assert_eq!(got, c.greedy, "{}: greedy continuation", c.name);
    for (i, &t) in c.prompt.iter().enumerate().take(p - 1) {
        let row = block_on(llama.forward(&[t], i as u32)).unwrap();
        let e = max_abs(&row, &c.rows[i]);
        worst = worst.max(e);
        assert!(e <= TOL, "{}: prompt row {i} max abs {e}", c.name);
    }
    println!("{}: {} rows, max abs {worst:.3e}, greedy identical", c.name, c.rows.len());
    for variant in 0..4 {
        check_all_rows(c, &bytes, variant);
    }
}

/// Every row of a case from one `forward_all` over prompt ++ greedy[..-1] from position 0, with
/// kernel choice `variant`: 0 the device's policy, 1 the GPU workgroup shapes (threads per row,
/// spans, 4 attention key splits for small batches) and its decode fusions (RMSNorm and SwiGLU in
/// the matrix-vector kernel) in chunks of 7 tokens, 2 the tiled matmul for every batch, 5-token
/// chunks, 3 the GPU shapes and fusions one token at a time.
fn check_all_rows(c: &Case, bytes: &Vec<u8>, variant: u32) {
    let mut gpu = gpu(false);
    let t = gpu.tuning_mut();
    match variant {
        0 => {}
        1 | 3 => (t.cpu, t.splits) = (false, Some(4)),
        _ => t.matvec_max_tokens = 0,
    }
    let g = webgpu_llama::Gguf::parse(bytes.as_slice()).unwrap();
    let batch = [None, Some(7), Some(5), Some(1)][variant as usize];
    let llama = webgpu_llama::Llama::load(&gpu, &g, bytes, webgpu_llama::LoadOptions { batch, ..Default::default() }).unwrap();
    let all: Vec<u32> = c.prompt.iter().chain(&c.greedy[..c.greedy.len() - 1]).copied().collect();
    let rows = block_on(llama.forward_all(&all, 0)).unwrap();
    assert_eq!(rows.len(), c.rows.len() * c.vocab, "{}: rows", c.name);
    let mut worst = 0f32;
    for (i, (got, want)) in rows.chunks(c.vocab).zip(&c.rows).enumerate() {
        let e = max_abs(got, want);
        worst = worst.max(e);
        assert!(e <= TOL, "{} (variant {variant}): batched row {i} max abs {e}", c.name);
        if i + 1 >= c.prompt.len() {
            assert_eq!(argmax(got), c.greedy[i + 1 - c.prompt.len()], "{} (variant {variant}): greedy at row {i}", c.name);
        }
    }
    println!("{} (variant {variant}): {} batched rows, max abs {worst:.3e}", c.name, c.rows.len());
    llama.dispose();
}

macro_rules! case_test {
    ($($fn:ident => $name:expr),* $(,)?) => { $( #[test] fn $fn() { check_case(&case($name)); } )* };
}

case_test! {
    stories260k_f32 => "stories260K-f32",
    stories260k_f32_long300 => "stories260K-f32-long300",
    stories260k_f16 => "stories260K-f16",
    stories260k_q8_0 => "stories260K-q8_0",
    stories260k_moe4x_top2_f32 => "stories260K-moe4x-top2-f32",
    stories260k_moe4x_top2_q8_0 => "stories260K-moe4x-top2-q8_0",
    stories260k_pad256_f16 => "stories260K-pad256-f16",
    stories260k_pad256_q4_0 => "stories260K-pad256-q4_0",
    stories260k_pad256_q4_k_m => "stories260K-pad256-q4_k_m",
    stories260k_pad256_q6_k => "stories260K-pad256-q6_k",
    stories260k_pad256_q8_0 => "stories260K-pad256-q8_0",
    smollm2_135m_instruct_q4_1 => "smollm2-135m-instruct-q4_1",
}

/// Every case file in `../shared/reference` has a test above (a new case cannot go unchecked).
#[test]
fn every_shared_case_is_tested() {
    let src = include_str!("reference.rs");
    for c in cases() {
        assert!(src.contains(&format!("=> \"{}\"", c.name)), "reference case {} has no test", c.name);
    }
}

/// Regenerate: after a continuation, re-running from an earlier position overwrites the cache and
/// gives the reference rows again.
#[test]
fn rerun_from_earlier_position_overwrites_cache() {
    let c = case("stories260K-f32");
    let gpu = gpu(false);
    let bytes = std::fs::read(model_path(&c.model)).unwrap();
    let llama = load(&gpu, &bytes, None);
    let p = c.prompt.len();
    block_on(llama.forward(&c.prompt, 0)).unwrap();
    // Garbage continuation at positions p.., then truncate back to p - 2 and redo.
    block_on(llama.forward(&[7, 8, 9, 10], p as u32)).unwrap();
    let redo = block_on(llama.forward(&c.prompt[p - 2..], (p - 2) as u32)).unwrap();
    assert!(max_abs(&redo, &c.rows[p - 1]) <= TOL);
    let next = block_on(llama.forward(&[c.greedy[0]], p as u32)).unwrap();
    assert!(max_abs(&next, &c.rows[p]) <= TOL);
}
