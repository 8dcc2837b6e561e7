#![cfg(not(target_arch = "wasm32"))]
//! `Llama::forward_top_k` (`shaders/topk.wgsl`) against a stable descending sort of the full
//! logits from `Llama::forward` on the same positions: the same ids in the same order and
//! bit-identical logits, for a small vocabulary (one first-stage slice) and SmolLM2's 49152
//! (48 slices merged), after a prompt and after a decode step; bad k rejected.

mod common;

use common::*;
use pollster::block_on;
use webgpu_llama::llama::Llama;

/// The k largest of `logits`, larger first, equal ones by lower id.
fn sorted_top(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut v: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &x)| (i as u32, x)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

fn check(llama: &Llama, name: &str, tokens: &[u32], pos: u32) {
    let full = block_on(llama.forward(tokens, pos)).unwrap();
    assert_eq!(webgpu_llama::topk::argmax(&full), sorted_top(&full, 1)[0].0, "{name}: CPU argmax at position {pos}");
    for k in [1u32, 2, 40, 128] {
        let got = block_on(llama.forward_top_k(tokens, pos, k)).unwrap();
        let want = sorted_top(&full, k as usize);
        let ids: Vec<u32> = got.iter().map(|p| p.0).collect();
        let want_ids: Vec<u32> = want.iter().map(|p| p.0).collect();
        assert_eq!(ids, want_ids, "{name}: top-{k} ids at position {pos}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g.1.to_bits(), w.1.to_bits(), "{name}: top-{k} logit of id {}", g.0);
        }
    }
}

fn run(case_name: &str) {
    let c = case(case_name);
    let llama = load_case(&c);
    let p = c.prompt.len() as u32;
    check(&llama, case_name, &c.prompt, 0);
    // A decode step after the prompt (the cache holds the prompt: the last call re-ran it).
    check(&llama, case_name, &[c.greedy[0]], p);
}

#[test]
fn top_k_of_a_small_vocabulary_matches_the_sorted_logits() {
    run("stories260K-f32");
}

#[test]
fn top_k_over_many_slices_matches_the_sorted_logits() {
    run("smollm2-135m-instruct-q4_1");
}

#[test]
fn bad_k_is_an_input_error() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    for k in [0u32, 129] {
        let e = block_on(llama.forward_top_k(&c.prompt, 0, k)).unwrap_err().to_string();
        assert!(e.contains("top-k") && e.contains(&format!("k = {k}")), "k = {k}: {e}");
    }
    // Still usable afterwards.
    assert_eq!(block_on(llama.forward_top_k(&c.prompt, 0, 3)).unwrap().len(), 3);
}

/// A greedy decode through top-1 readouts, one token per call (after the first, each call runs
/// the step `Llama` recorded ahead for a top-1 readout): the reference's greedy continuation.
/// Then a different k and a full-logits call at the next positions (the step recorded ahead is
/// not the one asked for) still match the sorted logits.
#[test]
fn greedy_decode_through_top_1_steps_matches_the_reference() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    let mut pos = c.prompt.len() as u32;
    let mut got = vec![block_on(llama.forward_top_k(&c.prompt, 0, 1)).unwrap()[0].0];
    while got.len() < c.greedy.len() {
        let next = block_on(llama.forward_top_k(&[*got.last().unwrap()], pos, 1)).unwrap()[0].0;
        got.push(next);
        pos += 1;
    }
    assert_eq!(got, c.greedy, "greedy ids through top-1 steps");
    check(&llama, "after top-1 steps", &[*got.last().unwrap()], pos);
}

/// `topk::argmax` (the CLI's and the bench's CPU pick) against a stable descending sort: ties
/// go to the lower id (within a 16-wide chunk and across chunks), lengths not a multiple of 16,
/// the maximum in the tail, NaN never wins, all -inf gives 0.
#[test]
fn cpu_argmax_matches_the_sorted_logits() {
    let mut seed = 7u32;
    let mut rnd = || {
        seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
        (seed >> 8) as f32 / (1u32 << 24) as f32
    };
    for n in [1usize, 15, 16, 17, 33, 1000, 49152, 128256] {
        let mut v: Vec<f32> = (0..n).map(|_| rnd() * 8.0 - 4.0).collect();
        let want = sorted_top(&v, 1)[0].0;
        assert_eq!(webgpu_llama::topk::argmax(&v), want, "n {n}");
        // A tie at the maximum: the lower id wins, in another chunk and in the same one.
        if n > 40 {
            let m = v[want as usize];
            for other in [want as usize + 1, (want as usize + 20) % n, (want as usize + n - 20) % n] {
                let mut t = v.clone();
                t[other % n] = m;
                assert_eq!(webgpu_llama::topk::argmax(&t), sorted_top(&t, 1)[0].0, "n {n}, tie at {other}");
            }
        }
        // The maximum in the tail past the last full chunk, and a NaN before it.
        v[n - 1] = 9.0;
        v[0] = f32::NAN;
        assert_eq!(webgpu_llama::topk::argmax(&v), (n - 1) as u32 * u32::from(n > 1), "n {n}, tail");
    }
    assert_eq!(webgpu_llama::topk::argmax(&[f32::NEG_INFINITY; 40]), 0);
}
