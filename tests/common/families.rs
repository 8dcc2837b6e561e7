//! The family cases of `tests/families/` (llama.cpp's logits for `scripts/families.py`'s F32
//! models; the models themselves generated into `.families/`), shared by the CPU and GPU tests.

use std::path::PathBuf;

use super::*;
use webgpu_llama::reference::Reference;
use webgpu_llama::{Config, Gguf};

pub fn families_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/families"))
}

/// Every case under tests/families/, sorted.
pub fn family_cases() -> Vec<Case> {
    let mut names: Vec<String> =
        std::fs::read_dir(families_dir()).unwrap().filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".json").map(String::from)).collect();
    names.sort();
    assert!(names.len() >= 2, "expected the family cases in tests/families/, found {names:?}");
    names.iter().map(|n| case_in(&families_dir(), n)).collect()
}

/// sha256 (hex) of `bytes`, by coreutils' sha256sum (the crate has no hash dependency).
pub fn sha256(bytes: &[u8]) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("sha256sum (coreutils) must be on PATH");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap_or("").to_string()
}

/// The context llama.cpp ran the case with (`n_ctx` of its json): LongRoPE picks its factor
/// table by it, so the reference's KV cache has the same length.
pub fn n_ctx(c: &Case) -> u32 {
    number(&std::fs::read_to_string(families_dir().join(format!("{}.json", c.name))).unwrap(), "n_ctx") as u32
}

/// The reference's logits after each of `tokens` (positions 0..) with a KV cache of `ctx`
/// positions, as f32 rows.
pub fn reference_rows(bytes: &[u8], tokens: &[u32], ctx: u32) -> (Config, Vec<Vec<f32>>) {
    let g = Gguf::parse(bytes).unwrap();
    let cfg = Config::from_gguf(&g, Some(ctx)).unwrap();
    let mut r = Reference::load(&g, bytes, &cfg).unwrap();
    let rows = tokens.iter().zip(0..).map(|(&t, pos)| r.step(t, pos).into_iter().map(|x| x as f32).collect()).collect();
    (cfg, rows)
}

/// The tokens whose logits the case's rows are: prompt ++ greedy[:-1].
pub fn fed(c: &Case) -> Vec<u32> {
    c.prompt.iter().chain(&c.greedy[..c.greedy.len() - 1]).copied().collect()
}
