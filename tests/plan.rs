#![cfg(not(target_arch = "wasm32"))]
//! The load plan (`webgpu_llama::plan`): what a load decides from the header alone, checked on
//! the shared models and against what `Llama::load` does on a device with the same limit.

mod common;

use common::*;
use webgpu_llama::plan::{Layout, LoadPlan, PlanOptions, DEFAULT_BATCH};
use webgpu_llama::{Config, Error, Gguf, KvType, Llama, LoadOptions};

fn opts(max_binding: u64) -> PlanOptions {
    PlanOptions { ctx: None, batch: None, kv: KvType::F32, max_binding }
}

#[test]
fn every_shared_model_plans_one_buffer_per_tensor_under_webgpu_defaults() {
    let dir = shared().join("models");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let g = Gguf::parse(bytes.as_slice()).unwrap();
        let plan = LoadPlan::new(&g, opts(128 << 20)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let cfg = Config::from_gguf(&g, None).unwrap();
        assert_eq!(plan.config, cfg);
        // stories260K: ctx 2048 (its context length), 4 KV heads of 8 dims.
        assert_eq!((plan.config.ctx, plan.kv_bytes, plan.batch), (2048, 2048 * 32 * 4, DEFAULT_BATCH));
        assert_eq!(plan.tensors.len(), cfg.expected_tensors().len());
        for t in &plan.tensors {
            assert_eq!(t.file_bytes, g.tensor(&t.name).unwrap().n_bytes, "{}", t.name);
            match t.layout {
                Layout::Matrix { parts, .. } | Layout::Experts { parts, .. } => assert_eq!(parts, 1, "{}", t.name),
                Layout::Vector { bytes } => assert_eq!(bytes, cfg.d as u64 * 4, "{}", t.name),
            }
        }
        n += 1;
    }
    assert!(n >= 10, "expected the 10 stories260K*.gguf files in {}", dir.display());
}

#[test]
fn a_small_binding_splits_matrices_by_rows_and_expert_stacks_by_experts() {
    // stories260K-moe4x-top2-F32: d 64, ff 172, 4 experts, vocab 512, all F32; a 64 KiB binding.
    let bytes = std::fs::read(model_path("stories260K-moe4x-top2-F32.gguf")).unwrap();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let plan = LoadPlan::new(&g, PlanOptions { ctx: Some(64), ..opts(64 << 10) }).unwrap();
    let get = |name: &str| plan.tensors.iter().find(|t| t.name == name).unwrap().layout.clone();
    // Rows of 256 bytes: (65536 - 19) / 256 = 255 rows a part, 512 rows in 3 parts.
    assert_eq!(get("token_embd.weight"), Layout::Matrix { rows: 512, cols: 64, row_bytes: 256, rows_per_part: 255, parts: 3 });
    // One expert of the gate stack: 172 rows of 256 bytes = 44032 bytes, one a part.
    assert_eq!(get("blk.0.ffn_gate_exps.weight"), Layout::Experts { experts: 4, rows: 172, cols: 64, row_bytes: 256, experts_per_part: 1, parts: 4 });
    assert!(plan.weight_buffer_bytes() >= plan.tensors.iter().map(|t| t.file_bytes).sum::<u64>());
    // 16 KiB: one 44 KiB expert no longer fits, and the error names it.
    let e = LoadPlan::new(&g, PlanOptions { ctx: Some(16), ..opts(16 << 10) }).unwrap_err();
    assert!(matches!(&e, Error::TooLarge { tensor, limit: 16384, .. } if tensor == "blk.0.ffn_gate_exps.weight (one expert)"), "{e}");
}

#[test]
fn the_plan_refuses_what_the_load_refuses_with_the_same_error() {
    let bytes = std::fs::read(model_path("stories260K.gguf")).unwrap();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let mut gpu = gpu(false);
    // KV cache of 2048 x 32 f32 (256 KiB), then an F32 row of 256 bytes against 200 bytes.
    for (cap, ctx, kv) in [(128 << 10, None, KvType::F32), (200, Some(1), KvType::F32), (128 << 10, Some(2048), KvType::F16)] {
        gpu.cap_binding(cap);
        let planned = LoadPlan::new(&g, PlanOptions { ctx, batch: None, kv, max_binding: gpu.max_binding() });
        let loaded = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx, kv, ..Default::default() });
        match (planned, loaded) {
            (Err(p), Err(l)) => assert_eq!(p, l, "cap {cap}"),
            (Ok(p), Ok(l)) => {
                assert_eq!(p.config, l.config, "cap {cap}");
                l.dispose();
            }
            (p, l) => panic!("cap {cap}: plan {:?}, load {:?}", p.err(), l.err()),
        }
    }
}
