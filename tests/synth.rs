#![cfg(not(target_arch = "wasm32"))]
//! `webgpu-llama gen`'s files (`synth`), on the CPU: the tokenizer every file carries is the one
//! llama.cpp's `llama_vocab::impl::load` reads for `tokenizer.ggml.model = "llama"` (key types,
//! lengths, special ids; that llama.cpp itself loads the files is checked by hand, see
//! `scripts/device-families.sh`), the Gemma shapes read back as the real models' hyperparameters
//! (`google/gemma-3-1b-pt` and `google/gemma-2-2b` config.json, as llama.cpp's converter writes
//! them), and scaled-down Gemma files run through the float64 reference with their sliding window.

use std::collections::HashSet;

use webgpu_llama::ggml::GgmlType;
use webgpu_llama::gguf::Value;
use webgpu_llama::reference::Reference;
use webgpu_llama::synth::{model, Scheme, Shape};
use webgpu_llama::vocab::Vocab;
use webgpu_llama::{Config, Family, Gguf};

fn bytes_of(shape: &Shape) -> Vec<u8> {
    model(shape, Scheme::All(GgmlType::F32), 5).unwrap().to_bytes()
}

/// The array under `key`, each element checked to be of the variant `is`.
fn array<'a>(g: &'a Gguf, key: &str, is: fn(&Value) -> bool) -> &'a [Value] {
    let a = g.get(key).and_then(Value::as_array).unwrap_or_else(|| panic!("{key}: missing or not an array"));
    assert!(a.iter().all(is), "{key}: elements of another type");
    a
}

fn id(g: &Gguf, key: &str) -> Option<u64> {
    g.get(key).map(|v| v.as_u64().unwrap_or_else(|| panic!("{key}: {v} is not an unsigned integer")))
}

#[test]
fn every_file_carries_a_tokenizer_llama_cpp_reads() {
    let bytes = bytes_of(&Shape::dense(64, 1, 4, 2, 64, 300));
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    assert_eq!(g.get("tokenizer.ggml.model").and_then(Value::as_str), Some("llama"));
    // llama.cpp: tokens an array of strings, scores of f32 (or i32), token_type of i32, each
    // at least as long as the tokens; every token distinct (it asserts the map's size).
    let tokens = array(&g, "tokenizer.ggml.tokens", |v| matches!(v, Value::Str(_)));
    assert_eq!(array(&g, "tokenizer.ggml.scores", |v| matches!(v, Value::F32(_))).len(), 300);
    let types = array(&g, "tokenizer.ggml.token_type", |v| matches!(v, Value::I32(_)));
    assert_eq!((tokens.len(), types.len()), (300, 300), "one entry a row of token_embd");
    assert_eq!(tokens.iter().filter_map(Value::as_str).collect::<HashSet<_>>().len(), 300, "distinct tokens");
    let ty = |i: usize| types[i].as_f64().unwrap();
    assert_eq!([ty(0), ty(1), ty(2), ty(3), ty(258), ty(259)], [2.0, 3.0, 3.0, 6.0, 6.0, 1.0], "unknown, control x2, byte .. byte, normal");
    let ids = ["unknown_token_id", "bos_token_id", "eos_token_id"].map(|k| id(&g, &format!("tokenizer.ggml.{k}")));
    assert_eq!(ids, [Some(0), Some(1), Some(2)]);
    assert_eq!(tokens[13].as_str(), Some("<0x0A>"), "llama.cpp's SPM newline token is the byte <0x0A>");
    assert_eq!(Config::from_gguf(&g, None).unwrap().vocab, 300);
    // Our own reader: bytes for byte tokens, `▁` as a space.
    let v = Vocab::from_gguf(&g).unwrap();
    assert_eq!(v.decode(&[3 + 0x48, 3 + 0x69, 259, 260, 259 + 26]), "Hi a b aa");

    // Fewer tokens than specials and bytes: the first `vocab`, no id past the end.
    let small = bytes_of(&Shape::dense(64, 1, 4, 2, 64, 2));
    let g = Gguf::parse(small.as_slice()).unwrap();
    assert_eq!(array(&g, "tokenizer.ggml.tokens", |v| matches!(v, Value::Str(_))).len(), 2);
    assert_eq!((id(&g, "tokenizer.ggml.bos_token_id"), id(&g, "tokenizer.ggml.eos_token_id")), (Some(1), None));
}

#[test]
fn a_full_size_vocabulary_has_distinct_pieces() {
    let mut w = webgpu_llama::gguf::GgufWriter::new(3);
    webgpu_llama::synth::tokenizer(&mut w, 262144);
    let bytes = w.to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let tokens = array(&g, "tokenizer.ggml.tokens", |v| matches!(v, Value::Str(_)));
    assert_eq!(tokens.iter().filter_map(Value::as_str).collect::<HashSet<_>>().len(), 262144);
    assert_eq!(tokens.last().and_then(Value::as_str), Some("\u{2581}nwjm"), "piece 262144 - 259 - 1 in bijective base 26");
}

/// The Gemma shapes with the real width, heads and metadata, fewer layers, a smaller FFN and
/// vocabulary (the hyperparameters read are the same; the file stays small).
fn trimmed(s: Shape, n_layers: u32) -> Config {
    let bytes = bytes_of(&Shape { n_layers, ff: 64, vocab: 512, ..s });
    Config::from_gguf(&Gguf::parse(bytes.as_slice()).unwrap(), None).unwrap()
}

#[test]
fn every_listed_shape_name_is_known() {
    for name in Shape::NAMES {
        assert!(Shape::named(name).is_some(), "{name}");
    }
    assert_eq!(Shape::named("gemma-3-1b").map(|s| s.family), Some(Family::Gemma3));
    assert_eq!(Shape::named("gemma-2-2b").map(|s| s.family), Some(Family::Gemma2));
    assert!(Shape::named("gemma-3").is_none());
}

#[test]
fn the_gemma_shapes_read_back_as_the_real_models() {
    let g3 = trimmed(Shape::gemma3_1b(), 6);
    let f = &g3.family;
    assert_eq!(g3.architecture, Family::Gemma3);
    assert_eq!((g3.d, g3.n_heads, g3.n_kv_heads, g3.head_dim, g3.q_dim(), g3.n_rot), (1152, 4, 1, 256, 1024, 256));
    assert_eq!((g3.eps, g3.theta, g3.train_ctx, g3.tied_output), (1e-6, 1e6, 32768, true));
    assert!(f.rope_neox && f.qk_norm && f.post_norms && f.gelu && !f.qkv_bias);
    assert_eq!((f.embd_scale, f.attn_scale, f.attn_softcap, f.final_softcap), (1152f32.sqrt(), None, 0.0, 0.0));
    assert_eq!((f.sliding_window, f.theta_swa, f.rope_scale_swa), (512, 10000.0, 1.0));
    assert_eq!((0..6).map(|l| f.is_swa(l)).collect::<Vec<_>>(), [true, true, true, true, true, false], "5 local : 1 global");

    let g2 = trimmed(Shape::gemma2_2b(), 4);
    let f = &g2.family;
    assert_eq!(g2.architecture, Family::Gemma2);
    assert_eq!((g2.d, g2.n_heads, g2.n_kv_heads, g2.head_dim, g2.q_dim()), (2304, 8, 4, 256, 2048));
    assert_eq!((g2.eps, g2.theta, g2.train_ctx, g2.tied_output), (1e-6, 10000.0, 8192, true));
    assert!(f.post_norms && f.gelu && !f.qk_norm && !f.qkv_bias);
    assert_eq!((f.attn_softcap, f.final_softcap, f.sliding_window, f.theta_swa), (50.0, 30.0, 4096, 10000.0));
    assert_eq!((0..4).map(|l| f.is_swa(l)).collect::<Vec<_>>(), [true, false, true, false], "every other layer local");
}

#[test]
fn k_quants_fall_back_where_rows_do_not_fill_their_blocks() {
    // Gemma-3-1B's width 1152 is 4.5 Q4_K blocks; its FFN width 6912 and q width 1024 are whole.
    let s = Shape { n_layers: 1, vocab: 512, ..Shape::gemma3_1b() };
    let bytes = model(&s, Scheme::Q4KM, 5).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let ty = |name: &str| g.tensor(name).unwrap().ggml_type;
    let got = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight", "blk.0.ffn_down.weight"].map(ty);
    assert_eq!(got, [GgmlType::Q5_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K], "llama.cpp's tensor_type_fallback");
    assert_eq!(Config::from_gguf(&g, None).unwrap().d, 1152);
    assert_eq!(id(&g, "general.file_type"), Some(15), "llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M");
    assert_eq!(Scheme::fitted(GgmlType::Q8_0, 48), GgmlType::F16, "no block fits: F16");
    assert_eq!(Scheme::fitted(GgmlType::Q4_K, 512), GgmlType::Q4_K);
}

/// A scaled-down Gemma file through the float64 reference, with its sliding window of 3 and with
/// one longer than the cache: the rows agree while every key is inside the window and differ once
/// one falls out.
fn window_matters(shape: Shape) -> Vec<Vec<f64>> {
    let bytes = bytes_of(&shape);
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let cfg = Config::from_gguf(&g, Some(16)).unwrap();
    assert_eq!(cfg.family.sliding_window, 3);
    // The same local layers (their own RoPE base) with a window longer than the cache.
    let no_window = Config { family: webgpu_llama::FamilyParams { sliding_window: 1000, ..cfg.family.clone() }, ..cfg.clone() };
    let mut with = Reference::load(&g, bytes.as_slice(), &cfg).unwrap();
    let mut without = Reference::load(&g, bytes.as_slice(), &no_window).unwrap();
    let tokens = [1u32, 200, 7, 42, 299, 5, 100, 3];
    let mut rows = Vec::new();
    for (pos, &t) in (0..).zip(&tokens) {
        let (a, b) = (with.step(t, pos), without.step(t, pos));
        assert!(a.iter().all(|x| x.is_finite()) && a.len() == 300);
        let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        if pos < 3 {
            assert_eq!(diff, 0.0, "{}: position {pos} is inside the window", shape.family);
        } else {
            assert!(diff > 1e-6, "{}: position {pos}: the window changes nothing ({diff:e})", shape.family);
        }
        rows.push(a);
    }
    rows
}

#[test]
fn scaled_down_gemma_files_run_on_the_reference() {
    let small = |s: Shape| Shape { d: 128, n_heads: 4, n_kv_heads: 2, head_dim: Some(64), ff: 256, vocab: 300, sliding_window: 3, swa_pattern: Some(2), ..s };
    window_matters(Shape { n_layers: 2, ..small(Shape::gemma3_1b()) });
    let rows = window_matters(Shape { n_layers: 2, final_softcap: Some(2.0), ..small(Shape::gemma2_2b()) });
    let top = rows.iter().flatten().fold(0.0f64, |m, x| m.max(x.abs()));
    assert!(top <= 2.0 && top > 1.0, "final soft-cap 2: largest |logit| {top}");
}
