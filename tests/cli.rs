#![cfg(not(target_arch = "wasm32"))]
//! The native CLI end to end: `run --dump-logits` writes every row in the layout of
//! `../shared/reference/*.logits.f32` and they match the reference; `run` prints the greedy
//! continuation, the top-5 and the weights-on-GPU line; `info` derives the config; a bad file
//! fails with a named error and a non-zero exit, as does a run that would step past the context
//! (before the model is loaded).

mod common;

use common::*;
use std::process::Command;

fn cli(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_webgpu-llama"))
        .args(args)
        .env("XDG_RUNTIME_DIR", std::env::var("XDG_RUNTIME_DIR").unwrap_or_else(|_| "/tmp".into()))
        .output()
        .expect("run the CLI");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[test]
fn run_dump_logits_matches_the_reference() {
    let c = case("stories260K-moe4x-top2-q8_0");
    let model = model_path(&c.model);
    let dump = std::env::temp_dir().join(format!("webgpu-llama-cli-{}.f32", std::process::id()));
    let tokens = c.prompt.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
    let (ok, out) = cli(&["run", model.to_str().unwrap(), "--tokens", &tokens, "-n", "20", "--dump-logits", dump.to_str().unwrap()]);
    assert!(ok, "{out}");
    let greedy = c.greedy.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
    assert!(out.contains(&format!("greedy ids: {greedy}")), "{out}");
    assert!(out.contains("top-5 after the prompt") && out.contains("weights on GPU: "), "{out}");
    let raw = std::fs::read(&dump).unwrap();
    std::fs::remove_file(&dump).ok();
    let rows: Vec<f32> = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(rows.len(), c.rows.len() * c.vocab, "every row of prompt ++ greedy[:-1]");
    for (i, (got, want)) in rows.chunks(c.vocab).zip(&c.rows).enumerate() {
        let e = max_abs(got, want);
        assert!(e <= 2e-3, "row {i}: max abs {e}");
    }
}

#[test]
fn info_prints_the_config_and_bad_files_fail() {
    let model = model_path("stories260K.gguf");
    let (ok, out) = cli(&["info", model.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("GGUF v") && out.contains("token_embd.weight") && out.contains("d: 64"), "{out}");
    let (ok, out) = cli(&["run", "/nonexistent.gguf", "--tokens", "1"]);
    assert!(!ok && out.contains("cannot read /nonexistent.gguf"), "{out}");
}

#[test]
fn run_past_the_context_fails_before_the_load() {
    let model = model_path("stories260K.gguf");
    let m = model.to_str().unwrap();
    // 5 prompt tokens and 10 greedy ones step up to position 13: a cache of 8 fails up front.
    let (ok, out) = cli(&["run", m, "--tokens", "1,2,3,4,5", "--ctx", "8", "-n", "10"]);
    assert!(!ok && out.contains("need a context of 14 tokens, more than the KV cache's 8: pass --ctx 14"), "{out}");
    assert!(!out.contains("loaded ") && !out.contains("top-5 after the prompt"), "checked before the load: {out}");
    // Exactly enough: the last step writes position 13.
    let (ok, out) = cli(&["run", m, "--tokens", "1,2,3,4,5", "--ctx", "14", "-n", "10"]);
    assert!(ok && out.contains("greedy ids: "), "{out}");
}

/// `run --generate` (the continuation through `Llama::generate`, ids read back a block at a
/// time) prints the same greedy ids as `run`'s loop of forwards, which are the reference's.
#[test]
fn run_generate_prints_the_same_ids_as_run() {
    let c = case("stories260K-f32");
    let model = model_path(&c.model);
    let tokens = c.prompt.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
    let ids = |extra: &[&str]| {
        let (ok, out) = cli(&[&["run", model.to_str().unwrap(), "--tokens", &tokens, "-n", "20"], extra].concat());
        assert!(ok, "{out}");
        out.lines().find_map(|l| l.strip_prefix("greedy ids: ").map(String::from)).unwrap_or_else(|| panic!("no greedy ids: {out}"))
    };
    let want = c.greedy.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
    assert_eq!(ids(&[]), want);
    assert_eq!(ids(&["--generate", "--block", "3"]), want);
    // A sampler flag prints sampled ids instead.
    let (ok, out) = cli(&["run", model.to_str().unwrap(), "--tokens", &tokens, "-n", "8", "--temperature", "1", "--seed", "3"]);
    assert!(ok && out.contains("sampled ids: ") && out.contains("generate: 8 ids"), "{out}");
}

/// `plan` prints the batches a forward runs (the prompt in chunks of the load's batch) and each
/// batch's dispatches (after the decode fusions in force): one output head a batch, attention in every layer, a one-token batch as
/// many dispatches as `run` reports a token takes; a span past the context is refused.
#[test]
fn plan_prints_each_batch_and_its_dispatches() {
    let model = model_path("stories260K.gguf");
    let m = model.to_str().unwrap();
    let (ok, run) = cli(&["run", m, "--tokens", "1", "-n", "1"]);
    assert!(ok, "{run}");
    let per_token: usize =
        run.split(" dispatches per token").next().and_then(|s| s.rsplit(' ').next()).and_then(|n| n.parse().ok()).expect("run reports its dispatches");
    let (ok, out) = cli(&["plan", m, "--tokens", "1", "--start", "3"]);
    assert!(ok, "{out}");
    assert!(out.contains(&format!("batch 0: 1 tokens at position 3, 1 key splits: {per_token} dispatches")), "{out}");
    // lavapipe is a CPU adapter: its forms fuse RMSNorm and SwiGLU into the matrix-vector kernels.
    assert!(out.lines().any(|l| l.starts_with("decode fusions: ") && l.contains("rmsnorm+swiglu in matvec")), "{out}");
    let layers = 5; // stories260K
    let (ok, out) = cli(&["plan", m, "--tokens", "600", "--ctx", "700"]);
    assert!(ok, "{out}");
    let batches: Vec<&str> = out.lines().filter(|l| l.starts_with("batch ")).collect();
    assert_eq!(batches.len(), 2, "{out}");
    assert!(batches[0].starts_with("batch 0: 512 tokens at position 0") && batches[1].starts_with("batch 1: 88 tokens at position 512"), "{out}");
    for part in out.split("\nbatch ").skip(1) {
        let kernels: Vec<&str> = part.lines().skip(1).collect();
        assert_eq!(kernels.iter().filter(|l| l.trim_start().starts_with("head:")).count(), 1, "one output head a batch: {part}");
        assert_eq!(kernels.iter().filter(|l| l.trim_start().starts_with("attention")).count(), layers, "{part}");
    }
    let (ok, out) = cli(&["plan", m, "--tokens", "10", "--start", "2040"]);
    assert!(!ok && out.contains("2050"), "past the context: {out}");
}
