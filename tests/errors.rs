#![cfg(not(target_arch = "wasm32"))]
//! Bad models and bad calls get typed errors whose messages name the problem (the seed's messages
//! kept where it had one); nothing panics and nothing reaches the GPU unchecked.

mod common;

use common::*;
use pollster::block_on;
use webgpu_llama::ggml::GgmlType;
use webgpu_llama::gguf::{GgufWriter, Value};
use webgpu_llama::{Config, Error, Gguf, KvType, Llama, LoadOptions};

/// A tiny dense llama (d 8, 2 heads, 1 KV head, ff 16, vocab 10) with `kv` added to or replacing
/// its metadata, and `drop` left out of its tensors.
fn tiny(kv: &[(&str, Value)], drop: &str) -> Vec<u8> {
    tiny_with(kv, drop, &[])
}

/// [`tiny`] plus `extra` F32 tensors (replacing those of the same name).
fn tiny_with(kv: &[(&str, Value)], drop: &str, extra: &[(&str, &[u64])]) -> Vec<u8> {
    tiny_arch("llama", kv, drop, extra)
}

/// [`tiny_with`] as architecture `arch` (its metadata keys under `arch.`; the same tensors).
fn tiny_arch(arch: &str, kv: &[(&str, Value)], drop: &str, extra: &[(&str, &[u64])]) -> Vec<u8> {
    let k = |s: &str| format!("{arch}.{s}");
    let mut meta: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::Str(arch.into())),
        (k("embedding_length"), Value::U32(8)),
        (k("block_count"), Value::U32(1)),
        (k("feed_forward_length"), Value::U32(16)),
        (k("attention.head_count"), Value::U32(2)),
        (k("attention.head_count_kv"), Value::U32(1)),
        (k("attention.layer_norm_rms_epsilon"), Value::F32(1e-5)),
        (k("context_length"), Value::U32(32)),
        (k("vocab_size"), Value::U32(10)),
    ];
    for (k, v) in kv {
        meta.retain(|(key, _)| key != k);
        meta.push((k.to_string(), v.clone()));
    }
    let mut w = GgufWriter::new(3);
    for (k, v) in meta {
        w.kv(&k, v);
    }
    let mut put = |name: &str, dims: &[u64]| {
        let n: u64 = dims.iter().product();
        let vals: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) / 10.0).collect();
        w.tensor(name, dims, GgmlType::F32, bytemuck::cast_slice(&vals).to_vec());
    };
    // An extra of a base tensor's name replaces it (the same tensor in another shape).
    let mut t = |name: &str, dims: &[u64]| {
        if name != drop && !extra.iter().any(|(n, _)| *n == name) {
            put(name, dims);
        }
    };
    t("token_embd.weight", &[8, 10]);
    t("output_norm.weight", &[8]);
    t("output.weight", &[8, 10]);
    t("blk.0.attn_norm.weight", &[8]);
    t("blk.0.attn_q.weight", &[8, 8]);
    t("blk.0.attn_k.weight", &[8, 4]);
    t("blk.0.attn_v.weight", &[8, 4]);
    t("blk.0.attn_output.weight", &[8, 8]);
    t("blk.0.ffn_norm.weight", &[8]);
    t("blk.0.ffn_gate.weight", &[8, 16]);
    t("blk.0.ffn_up.weight", &[8, 16]);
    t("blk.0.ffn_down.weight", &[16, 8]);
    for (name, dims) in extra {
        put(name, dims);
    }
    w.to_bytes()
}

fn config_err(bytes: &[u8]) -> Error {
    Config::from_gguf(&Gguf::parse(bytes).unwrap(), None).unwrap_err()
}

#[test]
fn tiny_model_is_valid() {
    let c = Config::from_gguf(&Gguf::parse(tiny(&[], "").as_slice()).unwrap(), None).unwrap();
    assert_eq!((c.d, c.n_heads, c.n_kv_heads, c.head_dim, c.ctx, c.vocab, c.ff), (8, 2, 1, 4, 32, 10, 16));
    assert_eq!(c.theta, 10000.0, "default RoPE base");
}

#[test]
fn unknown_architecture_lists_the_supported_ones() {
    let e = config_err(&tiny(&[("general.architecture", Value::Str("mamba".into()))], ""));
    assert!(matches!(e, Error::UnsupportedArchitecture { .. }));
    assert_eq!(
        e.to_string(),
        "WebGPU path: unsupported architecture \"mamba\" (general.architecture); supported: llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3, smollm3, granite"
    );
}

#[test]
fn family_keys_are_read_under_the_architectures_name() {
    // The tiny model as qwen3 (with its q/k norms) reads qwen3.* keys; llama.* ones are not read.
    let norms: &[(&str, &[u64])] = &[("blk.0.attn_q_norm.weight", &[4]), ("blk.0.attn_k_norm.weight", &[4])];
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("qwen3", &[], "", norms).as_slice()).unwrap(), None).unwrap();
    assert_eq!((c.architecture.name(), c.d, c.n_heads, c.n_kv_heads, c.head_dim, c.ff), ("qwen3", 8, 2, 1, 4, 16));
    assert!(c.family.qk_norm && c.family.rope_neox && !c.family.qkv_bias);
    let e = config_err(&tiny_arch("qwen3", &[("qwen3.embedding_length", Value::Str("8".into()))], "", norms));
    assert!(e.to_string().contains("qwen3.embedding_length must be a non-negative integer"), "{e}");
}

#[test]
fn family_tensors_are_required_with_their_dims() {
    let (qn, kn) = ("blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight");
    // Qwen3's q/k norms are required, [head_dim] each.
    let e = config_err(&tiny_arch("qwen3", &[], "", &[(qn, &[4])]));
    assert_eq!(e, Error::MissingTensor(kn.into()));
    let e = config_err(&tiny_arch("qwen3", &[], "", &[(qn, &[4]), (kn, &[8])]));
    assert!(matches!(&e, Error::TensorShape { tensor, .. } if tensor == kn), "{e}");
    assert!(e.to_string().contains("expected dims [4] (head_dim;"), "{e}");
    // Qwen2's biases: q's presence requires k's and v's, each as wide as its projection.
    let e = config_err(&tiny_arch("qwen2", &[], "", &[("blk.0.attn_q.bias", &[8]), ("blk.0.attn_k.bias", &[4])]));
    assert_eq!(e, Error::MissingTensor("blk.0.attn_v.bias".into()));
    let e = config_err(&tiny_arch("qwen2", &[], "", &[("blk.0.attn_q.bias", &[8]), ("blk.0.attn_k.bias", &[8]), ("blk.0.attn_v.bias", &[4])]));
    assert!(e.to_string().contains("tensor blk.0.attn_k.bias has dims [8], expected dims [4] (n_head_kv * head_dim;"), "{e}");
    let e = config_err(&tiny_arch("qwen2", &[], "", &[("blk.0.attn_v.bias", &[4])]));
    assert!(e.to_string().contains("k or v biases without q biases"), "{e}");
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("qwen2", &[], "", &[]).as_slice()).unwrap(), None).unwrap();
    assert!(!c.family.qkv_bias, "biases are optional, as in llama.cpp");
}

#[test]
fn gemma3_norms_window_pattern_and_soft_cap_are_checked() {
    let t: &[(&str, &[u64])] = &[
        ("blk.0.attn_q_norm.weight", &[4]),
        ("blk.0.attn_k_norm.weight", &[4]),
        ("blk.0.post_attention_norm.weight", &[8]),
        ("blk.0.post_ffw_norm.weight", &[8]),
    ];
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("gemma3", &[], "", t).as_slice()).unwrap(), None).unwrap();
    assert!(c.family.post_norms && c.family.gelu && c.family.sliding_window == 0 && !c.family.is_swa(0));
    assert_eq!(config_err(&tiny_arch("gemma3", &[], "blk.0.post_ffw_norm.weight", &t[..3])), Error::MissingTensor("blk.0.post_ffw_norm.weight".into()));
    let e = config_err(&tiny_arch("gemma3", &[], "", &[t[0], t[1], ("blk.0.post_attention_norm.weight", &[4]), t[3]]));
    assert!(e.to_string().contains("tensor blk.0.post_attention_norm.weight has dims [4], expected dims [8] (n_embd;"), "{e}");
    let window = ("gemma3.attention.sliding_window", Value::U32(4));
    let e = config_err(&tiny_arch("gemma3", &[window.clone(), ("gemma3.attention.sliding_window_pattern", Value::Array(vec![Value::Bool(true); 2]))], "", t));
    assert!(e.to_string().contains("gemma3.attention.sliding_window_pattern is an array of 2 values but there are 1 layers"), "{e}");
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("gemma3", &[window], "", t).as_slice()).unwrap(), None).unwrap();
    assert!(c.family.is_swa(0), "default pattern 6: layer 0 slides");
    let e = config_err(&tiny_arch("gemma3", &[("gemma3.final_logit_softcapping", Value::F32(-1.0))], "", t));
    assert!(e.to_string().contains("gemma3.final_logit_softcapping must be positive, found -1"), "{e}");
    // Gemma 2: no q/k norms; window 4096, pattern 2, attention soft-cap 50 by default; output.weight
    // present or not, the output is the token embedding (as llama.cpp's loader reads it).
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("gemma2", &[], "", &t[2..]).as_slice()).unwrap(), None).unwrap();
    let f = &c.family;
    assert!(!f.qk_norm && f.post_norms && c.tied_output && f.is_swa(0));
    assert_eq!((f.sliding_window, f.attn_softcap, f.final_softcap, f.theta_swa), (4096, 50.0, 0.0, c.theta));
    let e = config_err(&tiny_arch("gemma2", &[("gemma2.attn_logit_softcapping", Value::F32(0.0))], "", &t[2..]));
    assert!(e.to_string().contains("gemma2.attn_logit_softcapping must be positive"), "{e}");
}

#[test]
fn phi3_fused_matrices_and_longrope_tables_are_checked() {
    // The tiny model's q, k, v fused into one [8, 16] matrix, gate|up into one [8, 32].
    let fused: &[(&str, &[u64])] = &[("blk.0.attn_qkv.weight", &[8, 16]), ("blk.0.ffn_up.weight", &[8, 32])];
    let phi3 = |kv: &[(&str, Value)], extra: &[(&str, &[u64])]| {
        let mut t = fused.to_vec();
        t.extend_from_slice(extra);
        tiny_arch("phi3", kv, "blk.0.ffn_gate.weight", &t)
    };
    let c = Config::from_gguf(&Gguf::parse(phi3(&[], &[]).as_slice()).unwrap(), None).unwrap();
    assert!(c.family.fused_qkv && c.family.fused_gate_up && !c.family.longrope && c.rope_factors().is_none());
    let e = config_err(&tiny_arch("phi3", &[], "blk.0.ffn_gate.weight", &[("blk.0.attn_qkv.weight", &[8, 12]), fused[1]]));
    assert!(e.to_string().contains("tensor blk.0.attn_qkv.weight has dims [8, 12], expected dims [8, 16] (n_embd, (n_head + 2 n_head_kv) * head_dim;"), "{e}");
    let e = config_err(&tiny_arch("phi3", &[], "blk.0.ffn_gate.weight", &[fused[0], ("blk.0.ffn_up.weight", &[8, 16])]));
    assert!(e.to_string().contains("expected dims [8, 32] (n_embd, 2 n_ff;"), "{e}");
    // LongRoPE: either table requires both, [n_rot / 2] each.
    let e = config_err(&phi3(&[], &[("rope_factors_long.weight", &[2])]));
    assert_eq!(e, Error::MissingTensor("rope_factors_short.weight".into()));
    let e = config_err(&phi3(&[], &[("rope_factors_long.weight", &[2]), ("rope_factors_short.weight", &[4])]));
    assert!(e.to_string().contains("tensor rope_factors_short.weight has dims [4], expected dims [2] (n_rot / 2;"), "{e}");
    let e = config_err(&phi3(&[("phi3.rope.scaling.attn_factor", Value::F32(0.0))], &[]));
    assert!(e.to_string().contains("phi3.rope.scaling.attn_factor must be positive"), "{e}");
    let e = config_err(&phi3(&[("phi3.rope.scaling.type", Value::Str("yarn".into()))], &[]));
    assert!(e.to_string().contains("rope scaling type \"yarn\" is not supported"), "{e}");
}

#[test]
fn qwen3moe_needs_its_router_and_experts() {
    let norms: &[(&str, &[u64])] = &[("blk.0.attn_q_norm.weight", &[4]), ("blk.0.attn_k_norm.weight", &[4])];
    let kv = [("qwen3moe.expert_count", Value::U32(4)), ("qwen3moe.expert_used_count", Value::U32(2)), ("qwen3moe.expert_feed_forward_length", Value::U32(16))];
    let e = config_err(&tiny_arch("qwen3moe", &kv, "", norms));
    assert_eq!(e, Error::MissingTensor("blk.0.ffn_gate_inp.weight".into()), "a qwen3moe file is MoE in every layer");
    let mut t = norms.to_vec();
    t.extend_from_slice(&[("blk.0.ffn_gate_inp.weight", &[8, 4]), ("blk.0.ffn_gate_exps.weight", &[8, 16, 4]), ("blk.0.ffn_up_exps.weight", &[8, 16, 4])]);
    let e = config_err(&tiny_arch("qwen3moe", &kv, "", &t));
    assert_eq!(e, Error::MissingTensor("blk.0.ffn_down_exps.weight".into()));
    t.push(("blk.0.ffn_down_exps.weight", &[16, 8, 4]));
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("qwen3moe", &kv, "", &t).as_slice()).unwrap(), None).unwrap();
    assert_eq!((c.experts, c.topk, c.ff, c.family.qk_norm), (4, 2, 16, true));
}

#[test]
fn granite_multipliers_are_read_and_its_unsupported_extras_refused() {
    let scale = ("granite.logit_scale", Value::F32(8.0));
    let e = config_err(&tiny_arch("granite", &[], "", &[]));
    assert_eq!(e.to_string(), "WebGPU path: missing metadata granite.logit_scale");
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("granite", std::slice::from_ref(&scale), "", &[]).as_slice()).unwrap(), None).unwrap();
    assert_eq!((c.family.logit_scale, c.family.embd_scale, c.family.residual_scale, c.family.attn_scale), (8.0, 1.0, 1.0, None));
    let off = ("granite.rope.scaling.finetuned", Value::Bool(false));
    let c = Config::from_gguf(&Gguf::parse(tiny_arch("granite", &[scale.clone(), off], "", &[]).as_slice()).unwrap(), None).unwrap();
    assert!(!c.family.uses_rope(0), "rope.scaling.finetuned false: no layer rotates, as llama.cpp reads it");
    let e = config_err(&tiny_arch("granite", &[scale.clone(), ("granite.residual_scale", Value::F32(-0.5))], "", &[]));
    assert!(e.to_string().contains("granite.residual_scale must be positive"), "{e}");
    let e = config_err(&tiny_arch("granite", &[scale], "", &[("blk.0.ffn_down.bias", &[8])]));
    assert!(e.to_string().contains("granite: blk.0.ffn_down.bias is not supported"), "{e}");
}

#[test]
fn family_shapes_llama_cpp_asserts_against_are_config_errors() {
    let norms: &[(&str, &[u64])] = &[("blk.0.attn_q_norm.weight", &[4]), ("blk.0.attn_k_norm.weight", &[4])];
    let e = config_err(&tiny_arch("qwen3", &[("qwen3.rope.dimension_count", Value::U32(2))], "", norms));
    assert!(matches!(e, Error::Config(_)) && e.to_string().contains("qwen3: rope dims 2 must equal the head dim 4"), "{e}");
    // Qwen2's attn_q and attn_output are n_embd x n_embd: a head dim that changes the query width is refused.
    let kv = [("qwen2.attention.key_length", Value::U32(8)), ("qwen2.attention.value_length", Value::U32(8))];
    let e = config_err(&tiny_arch("qwen2", &kv, "", &[]));
    assert!(e.to_string().contains("qwen2: heads x head dim = 16 must equal the width 8"), "{e}");
    let e = config_err(&tiny_arch("qwen2", &[], "", &[("output.bias", &[10])]));
    assert!(e.to_string().contains("qwen2: output.bias is not supported"), "{e}");
}

#[test]
fn expert_limits_keep_the_seed_message() {
    for (e, k) in [(257, 2), (8, 17)] {
        let kv = [("llama.expert_count", Value::U32(e)), ("llama.expert_used_count", Value::U32(k))];
        // The router's presence marks an MoE model.
        let bytes = tiny_with(&kv, "", &[("blk.0.ffn_gate_inp.weight", &[8, e as u64])]);
        let err = config_err(&bytes);
        assert_eq!(err.to_string(), "WebGPU path: at most 256 experts, top-16");
    }
}

/// `model` with its metadata `kv` replaced (or added), tensors unchanged.
fn rewrite(model: &[u8], kv: &[(&str, Value)]) -> Vec<u8> {
    let g = Gguf::parse(model).unwrap();
    let mut w = GgufWriter::new(3);
    for (k, v) in &g.metadata {
        if !kv.iter().any(|(key, _)| key == k) && k != "general.alignment" {
            w.kv(k, v.clone());
        }
    }
    for (k, v) in kv {
        w.kv(k, v.clone());
    }
    for t in &g.tensors {
        w.tensor(&t.name, &t.dims, t.ggml_type, model[t.offset as usize..(t.offset + t.n_bytes) as usize].to_vec());
    }
    w.to_bytes()
}

fn per_layer(v: u32, layers: usize) -> Value {
    Value::Array(vec![Value::U32(v); layers])
}

#[test]
fn per_layer_arrays_of_equal_values_load_as_llama_cpp_reads_them() {
    // stories260K (5 layers, 8 heads, 4 KV heads, ff 172) with the per-layer keys as arrays.
    let case = case("stories260K-q8_0");
    let model = std::fs::read(model_path(&case.model)).unwrap();
    let arrays = rewrite(
        &model,
        &[
            ("llama.attention.head_count", per_layer(8, 5)),
            ("llama.attention.head_count_kv", per_layer(4, 5)),
            ("llama.feed_forward_length", per_layer(172, 5)),
        ],
    );
    let g = Gguf::parse(arrays.as_slice()).unwrap();
    assert!(g.get("llama.attention.head_count_kv").unwrap().as_array().is_some(), "the rewrite holds arrays");
    let c = Config::from_gguf(&g, None).unwrap();
    assert_eq!((c.n_heads, c.n_kv_heads, c.ff, c.n_layers), (8, 4, 172, 5));
    // Same logits as the reference.
    let gpu = gpu(false);
    let llama = load(&gpu, &arrays, Some(32));
    let got = block_on(llama.forward(&case.prompt, 0)).unwrap();
    let d = max_abs(&got, &case.rows[case.prompt.len() - 1]);
    assert!(d <= 2e-3, "differs from the reference by {d}");
    llama.dispose();

    // Unequal values, and an array whose length is not the layer count, are named.
    let e = config_err(&rewrite(&model, &[("llama.attention.head_count_kv", Value::Array([4, 4, 2, 4, 4].map(Value::U32).to_vec()))]));
    assert!(matches!(e, Error::Config(_)), "{e}");
    assert!(e.to_string().contains("llama.attention.head_count_kv differs between layers ([4, 4, 2, 4, 4])"), "{e}");
    let e = config_err(&rewrite(&model, &[("llama.feed_forward_length", per_layer(172, 3))]));
    assert!(e.to_string().contains("llama.feed_forward_length is an array of 3 values but there are 5 layers"), "{e}");
    let e = config_err(&rewrite(&model, &[("llama.attention.head_count", Value::Array(vec![Value::Str("8".into()); 5]))]));
    assert!(e.to_string().contains("llama.attention.head_count must hold non-negative integers"), "{e}");
}

#[test]
fn a_moe_file_without_its_expert_tensors_names_the_missing_tensor() {
    // The router marks a MoE model; no expert_feed_forward_length, no expert stacks.
    let kv = [("llama.expert_count", Value::U32(4)), ("llama.expert_used_count", Value::U32(2))];
    let e = config_err(&tiny_with(&kv, "", &[("blk.0.ffn_gate_inp.weight", &[8, 4])]));
    assert!(matches!(&e, Error::MissingTensor(t) if t.starts_with("blk.0.ffn_gate_exps.weight")), "{e}");
    assert!(e.to_string().contains("missing tensor blk.0.ffn_gate_exps.weight"), "{e}");
    // With the expert width in the metadata, the first absent stack is named too.
    let kv = [kv[0].clone(), kv[1].clone(), ("llama.expert_feed_forward_length", Value::U32(16))];
    let e = config_err(&tiny_with(&kv, "", &[("blk.0.ffn_gate_inp.weight", &[8, 4])]));
    assert_eq!(e, Error::MissingTensor("blk.0.ffn_gate_exps.weight".into()));
}

#[test]
fn heads_must_divide() {
    let e = config_err(&tiny(&[("llama.attention.head_count", Value::U32(3))], ""));
    assert!(e.to_string().contains("3 heads do not divide the width 8"), "{e}");
    let e = config_err(&tiny(&[("llama.attention.head_count_kv", Value::U32(3)), ("llama.attention.head_count", Value::U32(4))], ""));
    assert!(e.to_string().contains("3 KV heads do not divide 4 heads"), "{e}");
}

#[test]
fn missing_metadata_and_tensors() {
    let e = config_err(&tiny(&[("llama.block_count", Value::Str("one".into()))], ""));
    assert!(e.to_string().contains("llama.block_count"), "{e}");
    let e = config_err(&tiny(&[], "blk.0.attn_k.weight"));
    assert_eq!(e, Error::MissingTensor("blk.0.attn_k.weight".into()));
    // A vocab that disagrees with the embedding's element count.
    let e = config_err(&tiny(&[("llama.vocab_size", Value::U32(11))], ""));
    assert!(matches!(&e, Error::TensorShape { tensor, .. } if tensor == "token_embd.weight"), "{e}");
}

#[test]
fn forward_argument_errors() {
    let gpu = gpu(false);
    let bytes = tiny(&[], "");
    let llama = load(&gpu, &bytes, Some(6));
    assert_eq!(llama.config.ctx, 6, "ctx set at load");
    let msg = |t: &[u32], p: u32| block_on(llama.forward(t, p)).unwrap_err().to_string();
    assert!(msg(&[], 0).contains("non-empty"));
    assert!(msg(&[1, 10], 0).contains("token id 10 at index 1 is out of range (vocab 10)"));
    assert!(msg(&[1, 2, 3], 4).contains("past the context"));
    assert!(msg(&[1], 6).contains("past the context"));
    // Starting past the filled KV-cache positions names the gap.
    assert!(msg(&[1], 1).contains("startPos 1 leaves a gap: only positions 0..0 of the KV cache are filled"));
    // Exactly filling the context is fine.
    assert_eq!(block_on(llama.forward(&[1, 2, 3], 0)).unwrap().len(), 10);
    assert!(msg(&[1], 4).contains("startPos 4 leaves a gap: only positions 0..3"));
    assert_eq!(block_on(llama.forward(&[1, 2, 3], 3)).unwrap().len(), 10);
    llama.dispose();
    assert_eq!(block_on(llama.forward(&[1], 0)).unwrap_err(), Error::Disposed);
}

/// Switches (and in `lab` builds knobs) set from Rust that the device cannot run (the
/// matrix-unit matmul without cooperative matrices, a tile beyond its workgroup memory, a
/// subgroup block the kernel has no form for) are refused at load, by name.
#[test]
fn a_choice_the_device_cannot_run_is_an_input_error() {
    use webgpu_llama::kernels::CoopTile;
    let base = gpu(false);
    let bytes = tiny(&[], "");
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let cases = if base.has_coop() && cfg!(feature = "lab") {
        vec![
            // 68 KiB of workgroup memory, past any device's so far.
            (Some(CoopTile { bm: 256, bn: 128, sm: 64, sn: 64, ..CoopTile::DEFAULT }), "coop_tile 256x128/2/64x64 needs 69632 bytes"),
            (Some(CoopTile { sm: 48, ..CoopTile::DEFAULT }), "coop_tile 128x128/2/48x32: subgroup blocks must be 32 or 64"),
        ]
    } else if base.has_coop() {
        println!("{}: the matrix-unit matmul's tiles are forced through the lab's knobs: skipped without `--features lab`", base.adapter_info);
        return;
    } else {
        println!("{}: no cooperative matrices, so only the matmul's absence is checked", base.adapter_info);
        vec![(None, "Switches::coop is on")]
    };
    for (tile, want) in cases {
        let mut gpu = base.clone();
        #[cfg(feature = "lab")]
        {
            gpu.lab_mut().coop_tile = tile;
        }
        #[cfg(not(feature = "lab"))]
        let _ = tile;
        gpu.switches_mut().coop = Some(true);
        let e = Llama::load(&gpu, &g, &bytes, LoadOptions::default()).err().expect("must not load");
        assert!(matches!(e, Error::Input(_)) && e.to_string().contains(want), "{e}");
    }
}

#[test]
fn tensor_too_large_for_a_binding_names_it_and_the_limit() {
    let mut gpu = gpu(false);
    // 40 bytes per binding: the 1-position KV cache (16 bytes) fits, one f32 embedding row of 8
    // (32 bytes, plus the kernels' spare word and padding) does not.
    gpu.cap_binding(40);
    let bytes = tiny(&[], "");
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let e = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(1), ..Default::default() }).err().expect("must not load");
    let s = e.to_string();
    assert!(matches!(e, Error::TooLarge { .. }), "{s}");
    assert!(s.contains("token_embd.weight") && s.contains("maxStorageBufferBindingSize") && s.contains("40"), "{s}");
    // The default 32-position KV cache (512 bytes) is refused first, before any upload.
    let e = Llama::load(&gpu, &g, &bytes, LoadOptions::default()).err().expect("must not load");
    assert!(e.to_string().contains("KV cache needs 512 bytes"), "{e}");
    // In f16 it needs half that.
    let e = Llama::load(&gpu, &g, &bytes, LoadOptions { kv: KvType::F16, ..Default::default() }).err().expect("must not load");
    assert!(e.to_string().contains("KV cache needs 256 bytes"), "{e}");
}

#[test]
fn not_a_gguf_and_truncated() {
    let e = Gguf::parse(b"PK\x03\x04 this is a zip".as_slice()).unwrap_err();
    assert!(matches!(e, Error::BadMagic(_)) && e.to_string().contains("not a GGUF"), "{e}");
    let bytes = tiny(&[], "");
    let cut = &bytes[..bytes.len() - 10];
    let e = Gguf::parse(cut).unwrap_err();
    assert!(e.to_string().contains("outside the file") || e.to_string().contains("truncated"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Metadata honesty: dims, not only element counts

/// The error of [`tiny_with`] where `name` has `dims` instead of its own.
fn reshaped_err(kv: &[(&str, Value)], name: &str, dims: &[u64], extra: &[(&str, &[u64])]) -> Error {
    let mut all = extra.to_vec();
    all.push((name, dims));
    config_err(&tiny_with(kv, "", &all))
}

#[test]
fn swapped_dims_with_the_right_element_count_are_rejected_naming_both() {
    // tiny: d 8, q 8, kv 4 (1 KV head of 4), ff 16, vocab 10; ggml order, innermost first.
    for (name, swapped, expected) in [
        ("token_embd.weight", [10u64, 8], "dims [8, 10] (n_embd, vocab"),
        ("output.weight", [10, 8], "dims [8, 10] (n_embd, vocab"),
        ("blk.0.attn_k.weight", [4, 8], "dims [8, 4] (n_embd, n_head_kv * head_dim"),
        ("blk.0.attn_v.weight", [4, 8], "dims [8, 4] (n_embd, n_head_kv * head_dim"),
        ("blk.0.ffn_gate.weight", [16, 8], "dims [8, 16] (n_embd, n_ff"),
        ("blk.0.ffn_up.weight", [16, 8], "dims [8, 16] (n_embd, n_ff"),
        ("blk.0.ffn_down.weight", [8, 16], "dims [16, 8] (n_ff, n_embd"),
    ] {
        let e = reshaped_err(&[], name, &swapped, &[]);
        assert!(matches!(&e, Error::TensorShape { tensor, .. } if tensor == name), "{name}: {e}");
        let msg = e.to_string();
        assert!(msg.contains(&format!("tensor {name} has dims {swapped:?}, expected {expected}")), "{msg}");
    }
    // q and the output projection are square here: a query width of 16 (4 heads of 4) makes them not.
    let kv = [("llama.attention.head_count", Value::U32(4)), ("llama.attention.key_length", Value::U32(4))];
    let q_ok: [(&str, &[u64]); 1] = [("blk.0.attn_output.weight", &[16, 8])];
    let e = reshaped_err(&kv, "blk.0.attn_q.weight", &[16, 8], &q_ok);
    assert!(e.to_string().contains("tensor blk.0.attn_q.weight has dims [16, 8], expected dims [8, 16] (n_embd, n_head * head_dim"), "{e}");
    let q_ok: [(&str, &[u64]); 1] = [("blk.0.attn_q.weight", &[8, 16])];
    let e = reshaped_err(&kv, "blk.0.attn_output.weight", &[8, 16], &q_ok);
    assert!(e.to_string().contains("tensor blk.0.attn_output.weight has dims [8, 16], expected dims [16, 8] (n_head * head_dim, n_embd"), "{e}");
}

#[test]
fn norms_and_expert_stacks_are_checked_by_dims() {
    let e = reshaped_err(&[], "blk.0.attn_norm.weight", &[2, 4], &[]);
    assert!(e.to_string().contains("tensor blk.0.attn_norm.weight has dims [2, 4], expected dims [8] (n_embd"), "{e}");
    let e = reshaped_err(&[], "output_norm.weight", &[4, 2], &[]);
    assert!(matches!(&e, Error::TensorShape { tensor, .. } if tensor == "output_norm.weight"), "{e}");
    // Trailing 1s are ggml's padding, not a different shape.
    Config::from_gguf(&Gguf::parse(tiny_with(&[], "", &[("output_norm.weight", &[8, 1])]).as_slice()).unwrap(), None).unwrap();

    // MoE: 4 experts of ff 16; the stacks are [d, ff, E], [d, ff, E], [ff, d, E].
    let kv = [("llama.expert_count", Value::U32(4)), ("llama.expert_used_count", Value::U32(2)), ("llama.expert_feed_forward_length", Value::U32(16))];
    let stacks: [(&str, &[u64]); 4] = [
        ("blk.0.ffn_gate_inp.weight", &[8, 4]),
        ("blk.0.ffn_gate_exps.weight", &[8, 16, 4]),
        ("blk.0.ffn_up_exps.weight", &[8, 16, 4]),
        ("blk.0.ffn_down_exps.weight", &[16, 8, 4]),
    ];
    Config::from_gguf(&Gguf::parse(tiny_with(&kv, "", &stacks).as_slice()).unwrap(), None).unwrap();
    for (i, bad, expected) in [
        (0usize, [4u64, 8].as_slice(), "dims [8, 4] (n_embd, n_expert"),
        (1, &[16, 8, 4], "dims [8, 16, 4] (n_embd, n_ff_exp, n_expert"),
        (2, &[8, 4, 16], "dims [8, 16, 4] (n_embd, n_ff_exp, n_expert"),
        (3, &[8, 16, 4], "dims [16, 8, 4] (n_ff_exp, n_embd, n_expert"),
    ] {
        let name = stacks[i].0;
        let others: Vec<(&str, &[u64])> = stacks.iter().copied().filter(|(n, _)| *n != name).collect();
        let e = reshaped_err(&kv, name, bad, &others);
        assert!(e.to_string().contains(&format!("tensor {name} has dims {bad:?}, expected {expected}")), "{e}");
    }
}

#[test]
fn counts_and_widths_beyond_the_file_fail_fast_with_config_errors() {
    // A block count of 2^32 - 1 in a one-block file: the first absent block is named, without
    // listing 4 billion blocks' tensors first.
    let t = std::time::Instant::now();
    let e = config_err(&tiny(&[("llama.block_count", Value::U32(u32::MAX))], ""));
    assert_eq!(e, Error::MissingTensor("blk.1.attn_norm.weight".into()));
    assert!(t.elapsed().as_secs_f64() < 1.0, "took {:?}", t.elapsed());
    // 65536 heads of 65536 dims: a query width of 2^32 overflowed the u32 widths (a panic in a
    // debug build) before it was checked.
    let e = config_err(&tiny(&[("llama.attention.head_count", Value::U32(65536)), ("llama.attention.key_length", Value::U32(65536))], ""));
    assert!(matches!(e, Error::Config(_)) && e.to_string().contains("q|k|v width") && e.to_string().contains("exceeds 2^32"), "{e}");
    let e = config_err(&tiny(&[("llama.feed_forward_length", Value::U32(1 << 31))], ""));
    assert!(matches!(e, Error::Config(_)) && e.to_string().contains("feed-forward length 2147483648"), "{e}");
}
