#![cfg(not(target_arch = "wasm32"))]
//! `Llama::generate` (decode steps chained on the GPU, the next token picked there) against
//! independent references: greedy ids against the `forward` loop's argmax ids and the reference
//! json's `greedy` (three models, blocks of 1, 3 and 16); stop ids, `max_tokens` (and the
//! context's end) and an aborting `on_tokens`; the KV cache after a stop against the float64
//! reference row; each sampler setting against `sample::reference_pick` on the logits `forward`
//! gives when the generated ids are replayed; bad options named.

mod common;

use common::*;
use pollster::block_on;
use webgpu_llama::sample::{draw, reference_pick};
use webgpu_llama::{Error, GenerateOptions, Generated, Llama, Sampler, StopReason};

/// Rows of the reference within this of the float64 logits (as tests/reference.rs).
const TOLERANCE: f32 = 2e-3;

fn generate(llama: &Llama, tokens: &[u32], pos: u32, opts: &GenerateOptions) -> (Generated, Vec<Vec<u32>>) {
    let mut blocks = Vec::new();
    let got = block_on(llama.generate(tokens, pos, opts, &mut |ids| {
        blocks.push(ids.to_vec());
        true
    }))
    .unwrap();
    (got, blocks)
}

fn greedy(max_tokens: u32, block: u32) -> GenerateOptions {
    GenerateOptions { max_tokens, block, ..Default::default() }
}

/// `n` greedy ids through `forward` and the CPU argmax, one token per call.
fn forward_loop(llama: &Llama, prompt: &[u32], n: usize) -> Vec<u32> {
    let mut logits = block_on(llama.forward(prompt, 0)).unwrap();
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(webgpu_llama::topk::argmax(&logits));
        if i + 1 < n {
            logits = block_on(llama.forward(&[ids[i]], (prompt.len() + i) as u32)).unwrap();
        }
    }
    ids
}

fn greedy_case(name: &str) {
    greedy_case_on(name, &gpu(false));
}

fn greedy_case_on(name: &str, gpu: &webgpu_llama::Gpu) {
    let c = case(name);
    let llama = load(gpu, &std::fs::read(model_path(&c.model)).unwrap(), None);
    let n = c.greedy.len();
    let want = forward_loop(&llama, &c.prompt, n);
    assert_eq!(want, c.greedy, "{name}: the forward loop's ids against the reference");
    for block in [1, 3, 16] {
        let (got, blocks) = generate(&llama, &c.prompt, 0, &greedy(n as u32, block));
        assert_eq!(got.ids, want, "{name}, block {block}: generate's ids against the forward loop's");
        assert_eq!(got.stop_reason, StopReason::Length, "{name}, block {block}");
        let sizes: Vec<usize> = blocks.iter().map(Vec::len).collect();
        let full = n / block as usize;
        let mut expect = vec![block as usize; full];
        if n % block as usize != 0 {
            expect.push(n % block as usize);
        }
        assert_eq!(sizes, expect, "{name}, block {block}: on_tokens's blocks");
        assert_eq!(llama.filled() as usize, c.prompt.len() + n - 1, "{name}, block {block}: filled");
    }
}

#[test]
fn greedy_ids_equal_the_forward_loop_stories260k() {
    greedy_case("stories260K-f32");
}

#[test]
fn greedy_ids_equal_the_forward_loop_after_a_300_token_prompt() {
    greedy_case("stories260K-f32-long300");
}

#[test]
fn greedy_ids_equal_the_forward_loop_q4_k_m() {
    greedy_case("stories260K-pad256-q4_k_m");
}

/// A GPU's greedy pick (the top-k kernel at k = 1, then pick.wgsl), which CPU adapters replace
/// with pick_greedy.wgsl: the GPU policy forced on this adapter.
#[test]
fn greedy_ids_equal_the_forward_loop_with_the_gpu_pick() {
    let mut g = gpu(false);
    g.set_cpu(false);
    greedy_case_on("stories260K-f32", &g);
    greedy_case_on("stories260K-pad256-q4_k_m", &g);
}

/// A stop id ends the ids (included); the cache then holds every id but the last, so the next
/// forward of the last id gives the reference's row there. Mid-block (block 3: the block after is
/// in flight) and in the first block (16).
#[test]
fn a_stop_id_ends_it_and_the_cache_goes_on_from_there() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    let p = c.prompt.len();
    // An id whose first occurrence in the continuation is at index j > 0.
    let j = (4..c.greedy.len() - 1).find(|&j| !c.greedy[..j].contains(&c.greedy[j])).unwrap();
    for block in [3, 16] {
        let opts = GenerateOptions { stop_ids: vec![c.greedy[j], 0], ..greedy(100, block) };
        let (got, _) = generate(&llama, &c.prompt, 0, &opts);
        assert_eq!(got.ids, c.greedy[..=j], "block {block}: ids up to the stop");
        assert_eq!(got.stop_reason, StopReason::Stop, "block {block}");
        assert_eq!(llama.filled() as usize, p + j, "block {block}: filled");
        let row = block_on(llama.forward(&[c.greedy[j]], (p + j) as u32)).unwrap();
        let e = max_abs(&row, &c.rows[p + j]);
        assert!(e <= TOLERANCE, "block {block}: the row after the stop differs from the reference by {e}");
    }
}

/// Continuing a generation with its last id gives the rest of the greedy continuation.
#[test]
fn a_second_call_from_the_last_id_continues_the_continuation() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    let p = c.prompt.len() as u32;
    let (first, _) = generate(&llama, &c.prompt, 0, &greedy(5, 2));
    assert_eq!(first.ids, c.greedy[..5]);
    let (rest, _) = generate(&llama, &first.ids[4..], p + 4, &greedy(15, 4));
    assert_eq!(rest.ids, c.greedy[5..]);
}

/// `max_tokens` gives `Length`; so does the end of the context (max_tokens clamped to it); an
/// `on_tokens` returning false gives `Abort` after that block.
#[test]
fn length_context_and_abort() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    let (got, _) = generate(&llama, &c.prompt, 0, &greedy(7, 3));
    assert_eq!((got.ids.as_slice(), got.stop_reason), (&c.greedy[..7], StopReason::Length));

    let mut calls = 0;
    let got = block_on(llama.generate(&c.prompt, 0, &greedy(20, 3), &mut |ids| {
        calls += 1;
        assert_eq!(ids.len(), 3);
        calls < 2
    }))
    .unwrap();
    assert_eq!((got.ids.as_slice(), got.stop_reason, calls), (&c.greedy[..6], StopReason::Abort, 2));
    assert_eq!(llama.filled() as usize, c.prompt.len() + 5);

    // A cache of 9: the prompt's 5 positions, then 4 fed ids; the 5th id is picked, not fed.
    let small = load(&gpu(false), &std::fs::read(model_path(&c.model)).unwrap(), Some(9));
    let (got, _) = generate(&small, &c.prompt, 0, &greedy(100, 16));
    assert_eq!((got.ids.as_slice(), got.stop_reason), (&c.greedy[..5], StopReason::Length));
    assert_eq!(small.filled(), 9);
}

/// Generates with `s`, then replays the ids through `forward` one step at a time: at each step
/// the CPU reference's draw on the read-back logits (with the window of the ids before) must be
/// the generated id, except where the draw lies within 1e-4 of a boundary (ambiguous: few).
/// Returns how many ids differ from the argmax of their logits.
fn check_sampler(llama: &Llama, c: &Case, s: Sampler, n: u32, block: u32) -> usize {
    let opts = GenerateOptions { max_tokens: n, sampler: Some(s), block, ..Default::default() };
    let (got, _) = generate(llama, &c.prompt, 0, &opts);
    assert_eq!(got.ids.len(), n as usize, "{s:?}");
    let p = c.prompt.len();
    let mut seq = c.prompt.clone();
    let mut logits = block_on(llama.forward(&c.prompt, 0)).unwrap();
    let (mut ambiguous, mut off_argmax) = (0, 0);
    for (i, &id) in got.ids.iter().enumerate() {
        let window = &seq[seq.len().saturating_sub(s.repeat_window as usize)..];
        let (want, margin) = reference_pick(&logits, window, &s, (p - 1 + i) as u32);
        if margin < 1e-4 {
            ambiguous += 1;
        } else {
            assert_eq!(id, want, "{s:?}: id {i} (margin {margin:.2e})");
        }
        off_argmax += usize::from(id != webgpu_llama::topk::argmax(&logits));
        seq.push(id);
        logits = block_on(llama.forward(&[id], (p + i) as u32)).unwrap();
    }
    assert!(ambiguous <= 2, "{s:?}: {ambiguous} of {n} draws within 1e-4 of a boundary");
    off_argmax
}

/// No filtering but the temperature: every one of the 128 likeliest ids may come.
fn plain(temperature: f32) -> Sampler {
    Sampler { temperature, top_k: 0, top_p: 1.0, min_p: 0.0, repeat_penalty: 1.0, repeat_window: 64, seed: 7 }
}

#[test]
fn each_sampler_setting_draws_as_the_cpu_reference() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    let settings = [
        ("temperature", plain(1.3), true),
        ("top-k", Sampler { top_k: 5, seed: 11, ..plain(1.5) }, true),
        ("top-p", Sampler { top_p: 0.6, seed: 12, ..plain(1.5) }, true),
        ("min-p", Sampler { min_p: 0.1, seed: 13, ..plain(1.5) }, true),
        ("repeat penalty", Sampler { repeat_penalty: 1.8, repeat_window: 16, seed: 14, ..plain(0.7) }, true),
        // Greedy with a penalty: the likeliest id of the penalised logits.
        ("greedy with a penalty", Sampler { repeat_penalty: 3.0, repeat_window: 8, ..plain(0.0) }, true),
        ("all together", Sampler { repeat_penalty: 1.1, seed: 42, temperature: 1.2, ..Sampler::default() }, false),
    ];
    for (name, s, off) in settings {
        let moved = check_sampler(&llama, &c, s, 40, 16);
        eprintln!("{name}: {moved} of 40 ids not the argmax");
        // (The settings are strong enough that some draws leave the argmax: the check above
        // then compares real draws, not a greedy run.)
        assert!(!off || moved > 0, "{name}: every id is the argmax");
    }
}

/// The draw depends on the seed and the position, not on the block size.
#[test]
fn sampled_ids_do_not_depend_on_the_block() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    let s = Sampler { seed: 5, ..plain(1.0) };
    let ids = |block, seed| {
        generate(&llama, &c.prompt, 0, &GenerateOptions { max_tokens: 24, sampler: Some(Sampler { seed, ..s }), block, ..Default::default() }).0.ids
    };
    let a = ids(16, 5);
    assert_eq!(a, ids(1, 5));
    assert_eq!(a, ids(5, 5));
    assert_ne!(a, ids(16, 6), "another seed draws other ids");
}

/// The CPU reference on hand-computed cases: probabilities 0.1 .. 0.4 for ids 0 .. 3.
#[test]
fn the_cpu_reference_draws_as_computed_by_hand() {
    let logits: Vec<f32> = [1.0f32, 2.0, 3.0, 4.0].iter().map(|x| x.ln()).collect();
    let s = Sampler { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, repeat_penalty: 1.0, repeat_window: 0, seed: 3 };
    for pos in 0..50 {
        let u = draw(3, pos);
        // Sorted: ids 3, 2, 1, 0 with cumulative 0.4, 0.7, 0.9, 1.0.
        let all = [(0.4, 3), (0.7, 2), (0.9, 1), (1.0, 0)].iter().find(|(c, _)| *c > u).unwrap().1;
        assert_eq!(reference_pick(&logits, &[], &s, pos).0, all, "u {u}");
        // top-p 0.65 keeps ids 3, 2 (0.4 + 0.3 reaches it): 4/7 and 3/7.
        let top_p = if u < 4.0 / 7.0 { 3 } else { 2 };
        assert_eq!(reference_pick(&logits, &[], &Sampler { top_p: 0.65, ..s }, pos).0, top_p, "top-p, u {u}");
        // min-p 0.6 keeps p >= 0.24: the same two; top-k 1 keeps id 3 alone.
        assert_eq!(reference_pick(&logits, &[], &Sampler { min_p: 0.6, ..s }, pos).0, top_p, "min-p, u {u}");
        assert_eq!(reference_pick(&logits, &[], &Sampler { top_k: 1, ..s }, pos).0, 3);
    }
    // The penalty, once per distinct id: [2, 1.5, -2] with id 0 twice and id 2 in the window,
    // penalty 2 -> [1, 1.5, -4]: the greedy pick moves to id 1 (applied twice: 0.5, the same).
    let s = Sampler { temperature: 0.0, repeat_penalty: 2.0, repeat_window: 3, ..s };
    assert_eq!(reference_pick(&[2.0, 1.5, -2.0], &[0, 0, 2], &s, 0).0, 1);
    assert_eq!(reference_pick(&[2.0, 1.9, -2.0], &[0, 0, 2], &Sampler { repeat_penalty: 1.01, ..s }, 0).0, 0);
    // The draws spread: u over 1000 positions has a mean near 0.5.
    let mean = (0..1000).map(|p| draw(9, p)).sum::<f64>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
}

#[test]
fn bad_options_are_input_errors_naming_the_option() {
    let c = case("stories260K-f32");
    let llama = load_case(&c);
    let s = Sampler::default();
    let bad: Vec<(GenerateOptions, &str)> = vec![
        (greedy(0, 16), "maxTokens"),
        (greedy(4, 0), "block"),
        (greedy(4, 257), "block"),
        (GenerateOptions { stop_ids: vec![1, 512], ..greedy(4, 16) }, "stopIds: id 512 at index 1"),
        (GenerateOptions { sampler: Some(Sampler { temperature: -1.0, ..s }), ..greedy(4, 16) }, "sampler.temperature"),
        (GenerateOptions { sampler: Some(Sampler { temperature: f32::NAN, ..s }), ..greedy(4, 16) }, "sampler.temperature"),
        (GenerateOptions { sampler: Some(Sampler { top_k: 129, ..s }), ..greedy(4, 16) }, "sampler.topK"),
        (GenerateOptions { sampler: Some(Sampler { top_p: 0.0, ..s }), ..greedy(4, 16) }, "sampler.topP"),
        (GenerateOptions { sampler: Some(Sampler { top_p: 1.5, ..s }), ..greedy(4, 16) }, "sampler.topP"),
        (GenerateOptions { sampler: Some(Sampler { min_p: 1.0, ..s }), ..greedy(4, 16) }, "sampler.minP"),
        (GenerateOptions { sampler: Some(Sampler { min_p: -0.1, ..s }), ..greedy(4, 16) }, "sampler.minP"),
        (GenerateOptions { sampler: Some(Sampler { repeat_penalty: 0.0, ..s }), ..greedy(4, 16) }, "sampler.repeatPenalty"),
        (GenerateOptions { sampler: Some(Sampler { repeat_penalty: f32::INFINITY, ..s }), ..greedy(4, 16) }, "sampler.repeatPenalty"),
    ];
    for (opts, name) in bad {
        match block_on(llama.generate(&c.prompt, 0, &opts, &mut |_| true)) {
            Err(Error::Input(m)) => assert!(m.contains(name), "{m:?} should name {name}"),
            other => panic!("{name}: {other:?}"),
        }
    }
    // forward's checks: empty tokens, an id past the vocabulary, past the context, a gap.
    for (tokens, pos, part) in
        [(vec![], 0, "non-empty"), (vec![512], 0, "out of range"), (vec![1], llama.config.ctx, "past the context"), (vec![1], 300, "gap")]
    {
        match block_on(llama.generate(&tokens, pos, &greedy(4, 16), &mut |_| true)) {
            Err(Error::Input(m)) => assert!(m.contains(part), "{m:?} should contain {part}"),
            other => panic!("{part}: {other:?}"),
        }
    }
    // Calls from on_tokens, while generate owns the model's inputs, are refused.
    let mut refused = Vec::new();
    block_on(llama.generate(&c.prompt, 0, &greedy(4, 2), &mut |ids| {
        refused.push(block_on(llama.forward(&ids[..1], 0)).unwrap_err().to_string());
        true
    }))
    .unwrap();
    assert_eq!(refused.len(), 2);
    assert!(refused.iter().all(|m| m.contains("a generate call is under way")), "{refused:?}");
    // Still usable.
    assert_eq!(generate(&llama, &c.prompt, 0, &greedy(3, 16)).0.ids, c.greedy[..3]);
}
