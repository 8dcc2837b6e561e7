#![cfg(not(target_arch = "wasm32"))]
//! Every kernel on odd shapes against the CPU reference (`webgpu_llama::reference`, f64):
//! synthetic models whose widths are not multiples of 64, GQA ratios 1, 2 and 4, partial RoPE,
//! Llama-3 `rope_freqs` (also past position 8192), MoE with top-1 and top-k > 1, split matrices
//! and expert stacks, and every weight format the engine keeps on the GPU (F32, F16, BF16, Q4_0,
//! Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; the three K-quants that
//! `ggml::quantize` cannot make are random blocks with sane scales); logits compared at several
//! positions, each position exercising embed, rmsnorm, matvec, rope_kv, attention, swiglu,
//! moe_select, matvec_exp and moe_down.

mod common;

use common::*;
use pollster::block_on;
use webgpu_llama::ggml::GgmlType;
use webgpu_llama::gguf::GgufWriter;
use webgpu_llama::reference::Reference;
use webgpu_llama::synth::Rng;
use webgpu_llama::synth::{model, Scheme, Shape};
use webgpu_llama::weights::per_binding;
#[cfg(feature = "lab")]
use webgpu_llama::KvType;
use webgpu_llama::{Gguf, Gpu, Llama, LoadOptions};

/// Runs `positions` tokens one at a time on the GPU and the CPU reference; returns the worst
/// max-abs difference relative to the largest reference logit.
fn compare(shape: &Shape, scheme: Scheme, positions: u32, cap: Option<u64>) -> f64 {
    compare_bytes(&model(shape, scheme, 7).unwrap().to_bytes(), shape.vocab, positions, cap)
}

/// Max-abs difference of `got` from `want`, relative to the largest reference logit.
fn relative_err(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1e-3f64, |m, x| m.max(x.abs()));
    got.iter().zip(want).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max) / scale
}

/// As [`compare`] for a model file's bytes.
fn compare_bytes(bytes: &Vec<u8>, vocab: u32, positions: u32, cap: Option<u64>) -> f64 {
    compare_tuned(bytes, vocab, positions, cap, |_| {})
}

/// As [`compare_bytes`], with `tune` applied to the GPU policy's device (e.g. attention keys in
/// splits: the combine then runs for every token, and with the integer form writes the output
/// projection's integers).
fn compare_tuned(bytes: &Vec<u8>, vocab: u32, positions: u32, cap: Option<u64>, tune: impl Fn(&mut Gpu)) -> f64 {
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    // The same model twice: with the GPU policy's kernels and with the CPU adapters'.
    let mut gpus = [gpu(false), gpu(false)];
    gpus[0].set_cpu(false);
    tune(&mut gpus[0]);
    gpus[1].set_cpu(true);
    let llamas: Vec<Llama> = gpus
        .iter_mut()
        .map(|gpu| {
            if let Some(c) = cap {
                gpu.cap_binding(c);
            }
            Llama::load(gpu, &g, bytes, LoadOptions { ctx: Some(positions + 3), ..Default::default() }).unwrap()
        })
        .collect();
    let mut cpu = Reference::load(&g, bytes.as_slice(), &llamas[0].config).unwrap();
    let mut worst = 0f64;
    for pos in 0..positions {
        let token = (pos * 7919 + 3) % vocab;
        let want = cpu.step(token, pos);
        for llama in &llamas {
            let got = block_on(llama.forward(&[token], pos)).unwrap();
            worst = worst.max(relative_err(&got, &want));
        }
    }
    worst
}

/// `n` weights of K-quant `ty` (Q2_K, Q3_K or Q5_K) in rows of `cols`: random bytes, with the f16
/// super-block scales chosen so that weights have mean about 0 and spread about 1/sqrt(cols)
/// (for uniformly random sub-block scales and quants: Q2_K value d*sc*q - dmin*m has mean
/// 11.25 d - 7.5 dmin and spread about 14 d; Q3_K d*sc*q spread about 43 d; Q5_K mean
/// 488 d - 31.5 dmin, spread about 527 d).
fn random_k_blocks(ty: GgmlType, n: u64, cols: u64, rng: &mut Rng) -> Vec<u8> {
    let unit = 1.0 / (cols as f32).sqrt();
    let (fields, d, dmin): (&[usize], f32, f32) = match ty {
        GgmlType::Q2_K => (&[80, 82], unit / 14.0, 1.5 * unit / 14.0),
        GgmlType::Q3_K => (&[108], unit / 43.0, 0.0),
        GgmlType::Q5_K => (&[0, 2], unit / 527.0, 15.5 * unit / 527.0),
        _ => panic!("random_k_blocks: {ty} is made by ggml::quantize"),
    };
    let mut bytes: Vec<u8> = (0..ty.tensor_bytes(n).unwrap()).map(|_| rng.bits() as u8).collect();
    for block in bytes.chunks_exact_mut(ty.block_bytes() as usize) {
        for (&at, v) in fields.iter().zip([d, dmin]) {
            block[at..at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
    }
    bytes
}

/// The synthetic F32 model of `shape` with every weight matrix replaced by random `ty` blocks.
fn random_k_model(shape: &Shape, ty: GgmlType) -> Vec<u8> {
    let f32_bytes = model(shape, Scheme::All(GgmlType::F32), 7).unwrap().to_bytes();
    let g = Gguf::parse(f32_bytes.as_slice()).unwrap();
    let mut w = GgufWriter::new(3);
    for (k, v) in &g.metadata {
        w.kv(k, v.clone());
    }
    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B ^ ty as u64);
    for t in &g.tensors {
        if t.dims.len() >= 2 {
            w.tensor(&t.name, &t.dims, ty, random_k_blocks(ty, t.n_elements, t.dims[0], &mut rng));
        } else {
            let data = f32_bytes[t.offset as usize..(t.offset + t.n_bytes) as usize].to_vec();
            w.tensor(&t.name, &t.dims, t.ggml_type, data);
        }
    }
    w.to_bytes()
}

fn assert_close(what: &str, err: f64) {
    println!("{what}: worst relative max-abs error {err:.2e}");
    assert!(err < 2e-4, "{what}: GPU differs from the CPU reference by {err:.2e} (relative)");
}

#[test]
fn dense_gqa1_odd_width_f32() {
    // d 72 (not a multiple of 64), 6 heads of 12, no grouping.
    assert_close("gqa1", compare(&Shape::dense(72, 2, 6, 6, 100, 97), Scheme::All(GgmlType::F32), 9, None));
}

#[test]
fn dense_gqa2_f16() {
    assert_close("gqa2 f16", compare(&Shape::dense(80, 2, 8, 4, 136, 131), Scheme::All(GgmlType::F16), 7, None));
}

#[test]
fn dense_gqa4_q8_0_kept_quantised() {
    assert_close("gqa4 q8_0", compare(&Shape::dense(96, 2, 8, 2, 160, 101), Scheme::All(GgmlType::Q8_0), 7, None));
}

#[test]
fn dense_q4_k_m() {
    assert_close("q4_k_m", compare(&Shape::dense(256, 1, 4, 2, 512, 67), Scheme::Q4KM, 5, None));
}

/// Two layers of Q4_K and of Q8_0 rows (both with the integer form): each output and down
/// projection and SwiGLU matvec writes the next op's integers (QOUT), the down projection's
/// for the next layer's q/k/v through its attention norm (INORM).
#[test]
fn dense_two_layers_next_op_integers() {
    let s = Shape::dense(256, 2, 4, 2, 512, 67);
    for ty in [GgmlType::Q4_K, GgmlType::Q8_0] {
        assert_close(&format!("dense 2 layers {ty}"), compare(&s, Scheme::All(ty), 4, None));
    }
}

#[test]
fn dense_every_32_block_format() {
    // Widths that are whole Q*_0/Q*_1 blocks (32) but not multiples of 64; odd vocab.
    let s = Shape::dense(96, 2, 6, 2, 160, 101);
    for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0] {
        assert_close(&format!("dense {ty}"), compare(&s, Scheme::All(ty), 5, None));
    }
}

#[test]
fn dense_bf16_odd_width() {
    // d 72: F16/BF16 rows of 144 bytes; q/k/v heads of 12.
    assert_close("dense bf16", compare(&Shape::dense(72, 2, 6, 3, 100, 97), Scheme::All(GgmlType::BF16), 5, None));
}

#[test]
fn dense_every_k_quant() {
    let s = Shape::dense(256, 1, 4, 2, 512, 67);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
        assert_close(&format!("dense {ty}"), compare(&s, Scheme::All(ty), 4, None));
    }
    for ty in [GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q5_K] {
        assert_close(&format!("dense random {ty}"), compare_bytes(&random_k_model(&s, ty), s.vocab, 4, None));
    }
}

#[test]
fn moe_k_quants_and_split_experts() {
    let s = Shape { experts: 4, topk: 2, ..Shape::dense(256, 1, 4, 2, 256, 67) };
    assert_close("moe q4_k_m", compare(&s, Scheme::Q4KM, 4, None));
    assert_close("moe random q5_k", compare_bytes(&random_k_model(&s, GgmlType::Q5_K), s.vocab, 4, None));
    // A 100 KB binding cap holds one 256x256 Q6_K expert (53760 bytes), not two: every stack is
    // split into single experts.
    assert_eq!(per_binding(100_000, 256 * 210), 1);
    assert_close("moe q6_k split", compare(&s, Scheme::All(GgmlType::Q6_K), 4, Some(100_000)));
}

/// Rows of 2048 weights: Q6_K's rows regrouped at load (`repack.wgsl`) and read as pieces (with
/// the GPU shapes: through the one-token integer form natively), Q4_K and Q8_0 as pieces, dense
/// and through the expert kernels; with key splits, the output projection's integers written by
/// one-token attention's merge (`attention_decode.wgsl`, COMBINE and QUANT) or by the combine
/// dispatch (`attention_combine.wgsl` and `attention_combine_wide.wgsl`, QUANT); the integers of the next linear op
/// written by the output and down projections and the SwiGLU matvec (`matvec_idot.wgsl`, QOUT and
/// INORM), and without them.
#[test]
fn width_2048_regrouped_q6_k_dense_and_moe() {
    let dense = Shape::dense(2048, 1, 16, 4, 2048, 67);
    assert_close("Q4_K_M, d 2048", compare(&dense, Scheme::Q4KM, 3, None));
    // Keys in 3 splits: one-token attention's merge (on natively on Vulkan, as here) writes the
    // output projection's integers (head dim 128); without it, the combine.
    let bytes = model(&dense, Scheme::Q4KM, 7).unwrap().to_bytes();
    #[cfg(feature = "lab")]
    {
        assert_close("Q4_K_M, d 2048, 3 key splits", compare_tuned(&bytes, dense.vocab, 3, None, |g| g.lab_mut().splits = Some(3)));
        let combine = |splits| {
            move |g: &mut Gpu| {
                g.lab_mut().splits = Some(splits);
                g.switches_mut().fused_combine = Some(false);
            }
        };
        assert_close("Q4_K_M, d 2048, 3 key splits, combine", compare_tuned(&bytes, dense.vocab, 3, None, combine(3)));
        // 40 (past attention::WIDE_COMBINE_SPLITS, most of them empty): the merge, and without it
        // attention_combine_wide.wgsl, writes them.
        assert_close("Q4_K_M, d 2048, 40 key splits", compare_tuned(&bytes, dense.vocab, 3, None, |g| g.lab_mut().splits = Some(40)));
        assert_close("Q4_K_M, d 2048, 40 key splits, combine", compare_tuned(&bytes, dense.vocab, 3, None, combine(40)));
    }
    #[cfg(not(feature = "lab"))]
    println!("Q4_K_M, d 2048, forced key splits: skipped: they need `--features lab`");
    // The linear ops write the next one's integers by default (QOUT, and INORM for the
    // norms); without, quantize ops.
    let off = |g: &mut Gpu| g.switches_mut().quant_out = Some(false);
    assert_close("Q4_K_M, d 2048, no QOUT", compare_tuned(&bytes, dense.vocab, 3, None, off));
    let moe = Shape { experts: 4, topk: 2, ..dense };
    assert_close("MoE Q6_K, d 2048", compare(&moe, Scheme::All(GgmlType::Q6_K), 3, None));
    assert_close("MoE Q4_K_M, d 2048", compare(&moe, Scheme::Q4KM, 3, None));
}

#[test]
fn moe_top1_and_top3() {
    let top1 = Shape { experts: 5, topk: 1, ..Shape::dense(72, 2, 6, 3, 40, 83) };
    assert_close("moe top-1", compare(&top1, Scheme::All(GgmlType::F32), 6, None));
    let top3 = Shape { experts: 6, topk: 3, ..Shape::dense(64, 2, 4, 2, 96, 83) };
    assert_close("moe top-3 q8_0", compare(&top3, Scheme::All(GgmlType::Q8_0), 6, None));
}

#[test]
fn partial_rope_key_length_and_linear_scaling() {
    // head_dim 16 set by key_length (6 heads x 16 = 96 != d 80), only 8 dims rotated, scaling 4.
    let s = Shape { head_dim: Some(16), n_rot: Some(8), rope_scale: Some(4.0), ..Shape::dense(80, 2, 6, 3, 96, 71) };
    assert_close("partial rope", compare(&s, Scheme::All(GgmlType::F32), 8, None));
}

#[test]
fn llama3_rope_freqs_tied_output() {
    let s = Shape { rope_freqs: true, tied: true, theta: 500000.0, ..Shape::dense(64, 2, 4, 1, 96, 89) };
    assert_close("rope_freqs", compare(&s, Scheme::All(GgmlType::F32), 6, None));
}

#[test]
fn matrices_split_across_bindings() {
    // A 4 KiB binding cap splits every matrix and the embedding into many parts.
    assert_close("split f32", compare(&Shape::dense(72, 1, 6, 2, 100, 300), Scheme::All(GgmlType::F32), 4, Some(4096)));
    assert_close("split q8_0", compare(&Shape::dense(64, 1, 4, 2, 96, 300), Scheme::All(GgmlType::Q8_0), 4, Some(4096)));
    // ffn_down rows of 3 Q4_0 blocks (54 bytes) in parts of 17 rows, of 3 Q5_0 blocks (66 bytes)
    // in parts of 15: every other part starts 2 bytes into a word of the file (the caps still
    // hold the 896-byte KV cache).
    assert_eq!(per_binding(17 * 54 + 19, 54), 17);
    assert_eq!(per_binding(15 * 66 + 19, 66), 15);
    assert_close("split q4_0", compare(&Shape::dense(64, 1, 4, 2, 96, 300), Scheme::All(GgmlType::Q4_0), 4, Some(17 * 54 + 19)));
    assert_close("split q5_0", compare(&Shape::dense(64, 1, 4, 2, 96, 300), Scheme::All(GgmlType::Q5_0), 4, Some(15 * 66 + 19)));
}

#[test]
fn llama3_rope_freqs_past_8192() {
    // One forward of an 8200-token prompt, then single tokens at 8200.., against the CPU
    // reference stepped through every position.
    let s = Shape { rope_freqs: true, theta: 500000.0, ctx: 9000, ..Shape::dense(64, 1, 4, 2, 64, 61) };
    let bytes = model(&s, Scheme::All(GgmlType::F32), 11).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let gpu = gpu(false);
    let llama = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(8300), ..Default::default() }).unwrap();
    let mut cpu = Reference::load(&g, bytes.as_slice(), &llama.config).unwrap();
    let token = |pos: u32| (pos * 7919 + 3) % s.vocab;
    let prompt: Vec<u32> = (0..8200).map(token).collect();
    let got = block_on(llama.forward(&prompt, 0)).unwrap();
    let mut want = Vec::new();
    for (pos, &t) in prompt.iter().enumerate() {
        want = cpu.step(t, pos as u32);
    }
    assert_close("rope_freqs prompt of 8200", relative_err(&got, &want));
    for pos in 8200..8204 {
        let got = block_on(llama.forward(&[token(pos)], pos)).unwrap();
        assert_close(&format!("rope_freqs position {pos}"), relative_err(&got, &cpu.step(token(pos), pos)));
    }
}

#[test]
fn many_positions_attention() {
    // 150 positions: attention's loops over more than two workgroups' worth of cached keys.
    assert_close("150 positions", compare(&Shape::dense(64, 1, 4, 2, 64, 61), Scheme::All(GgmlType::F32), 150, None));
}

/// An output head larger than WebGPU's default 128 MiB storage binding in its stored format
/// (66000 x 1024 F16 = 135 MB) loads on a device created with default limits, split into parts,
/// and gives the CPU reference's logits.
#[test]
fn head_over_128_mib_on_default_limits() {
    let shape = Shape::dense(1024, 1, 8, 8, 64, 66000);
    let bytes = model(&shape, Scheme::All(GgmlType::F16), 3).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let head = g.tensor("output.weight").unwrap();
    assert!(head.n_bytes > 128 << 20, "the head must exceed one default binding: {} bytes", head.n_bytes);
    let gpu = gpu(true);
    assert_eq!(gpu.limits().max_storage_buffer_binding_size, 128 << 20, "default limits");
    let llama = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(4), ..Default::default() }).unwrap();
    let (on_gpu, in_file) = llama.weight_bytes();
    assert!(on_gpu <= in_file + in_file / 10, "weights stay compact: {on_gpu} on the GPU for {in_file} in the file");
    let mut cpu = Reference::load(&g, bytes.as_slice(), &llama.config).unwrap();
    for (pos, token) in [(0u32, 17u32), (1, 65999)] {
        let got = block_on(llama.forward(&[token], pos)).unwrap();
        assert_close("head over 128 MiB", relative_err(&got, &cpu.step(token, pos)));
    }
}

/// The matrix-unit matmul's split ops (`shaders/split.wgsl`) come after the integer form's
/// quantize op in the program, so the integers that QOUT and attention's combine write for the
/// next op are still reused: one-token decode has the same dispatches with the split ops as
/// without. (A split op appended before the quantize op once cost the Llama-3.2-1B shape 64
/// quantize dispatches a token.) The split ops run here without matrix units
/// (the `split_without_coop` knob): their halves go unread, so every logit is unchanged.
#[test]
#[cfg(feature = "lab")]
fn split_ops_keep_next_op_integers() {
    let s = Shape::dense(256, 2, 4, 2, 512, 67);
    let bytes = model(&s, Scheme::All(GgmlType::Q8_0), 7).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let load = |split: bool| {
        let mut gpu = gpu(false);
        if !gpu.device.features().contains(wgpu::Features::SHADER_F16) {
            return None;
        }
        gpu.set_cpu(false);
        let t = gpu.switches_mut();
        (t.int_dot, t.wide, t.fuse, t.quant_out) = (Some(true), Some(true), Some(true), Some(true));
        // (Without matrix units: with them the split ops run in both, for the matmul.)
        t.coop = Some(false);
        let k = gpu.lab_mut();
        (k.quant_out_glu, k.split_without_coop) = (Some(true), Some(split));
        Some(Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(80), ..Default::default() }).unwrap())
    };
    let (Some(plain), Some(split)) = (load(false), load(true)) else {
        println!("split_ops_keep_next_op_integers: skipped: the adapter has no f16 in shaders (the split ops need it)");
        return;
    };
    let names = |l: &Llama, n: u32| l.dispatches(&l.plan(n, 0, false)).iter().map(|d| d.variant.key.kernel.name()).collect::<Vec<_>>();
    let count = |v: &[&str], k: &str| v.iter().filter(|n| **n == k).count();
    let (decode, decode_split) = (names(&plain, 1), names(&split, 1));
    assert!(count(&decode, "quantize") > 0, "the integer form is on (else this test checks nothing): {decode:?}");
    assert_eq!(decode_split, decode, "one-token dispatches with the split ops against without");
    let (batch, batch_split) = (names(&plain, 64), names(&split, 64));
    assert_eq!((count(&batch, "split"), count(&batch_split, "quantize")), (0, count(&batch, "quantize")));
    // One split a layer for each input: the attention norm's (q+k and v share it), attention's
    // output, the FFN norm's (gate/up), SwiGLU's (down); none for the head (one row of logits).
    assert_eq!(count(&batch_split, "split"), 4 * 2, "split ops in a 64-token batch: {batch_split:?}");
    // The same logits, a 64-token prompt then one decoded token.
    let tokens: Vec<u32> = (0..64).map(|i| (i * 7919 + 3) % s.vocab).collect();
    for (pos, chunk) in [(0, &tokens[..]), (64, &tokens[..1])] {
        let (a, b) = (block_on(plain.forward(chunk, pos)).unwrap(), block_on(split.forward(chunk, pos)).unwrap());
        assert_eq!(a, b, "logits at position {pos} with the split ops against without");
    }
}

/// Logits of `merged` (one-token attention merging its key splits, `+combine`) against `plain`
/// (the combine dispatch): within 1e-5 of the largest (the merge is an online softmax over the
/// splits, the combine's maths in another order).
#[cfg(feature = "lab")]
fn assert_merged(plain: &Llama, merged: &Llama, tokens: &[u32], pos: u32, what: &str) {
    let (x, y) = (block_on(plain.forward(tokens, pos)).unwrap(), block_on(merged.forward(tokens, pos)).unwrap());
    let err = relative_err(&y, &x.iter().map(|&v| v as f64).collect::<Vec<_>>());
    assert!(err < 1e-5, "{what}: {} tokens at position {pos}, merged in attention against by the combine: {err:e}", tokens.len());
}

/// `bytes`' model loaded twice, one-token attention merging its key splits itself (`+combine`)
/// and not, with `splits` key splits (`None`: by context) and the integer form; the merging
/// model's attention in chunks of `chunk` keys (the `attn_chunk` knob; `None`: by the splits'
/// keys) and with the value rows' prefetch or not (the `attn_prefetch` knob, on by default for head dims up to 64), the
/// other's in chunks of 64 without it. Checks that each layer's one-token step runs the merging
/// variant (with the output projection's integers, `+quant`; with `chunk` 128, in chunks of 128)
/// and no combine dispatch, and that 3-token batches still run the combine.
#[cfg(feature = "lab")]
fn merge_pair(bytes: &Vec<u8>, layers: usize, ctx: u32, kv: KvType, splits: Option<u32>, chunk: Option<u32>, prefetch: bool) -> (Llama, Llama) {
    let g = Gguf::parse(bytes).unwrap();
    let load = |on: bool| {
        let mut gpu = gpu(false);
        gpu.set_cpu(false);
        let t = gpu.switches_mut();
        (t.fuse, t.fused_combine, t.int_dot) = (Some(true), Some(on), Some(true));
        let k = gpu.lab_mut();
        k.splits = splits;
        (k.attn_chunk, k.attn_prefetch) = if on { (chunk, Some(prefetch)) } else { (Some(64), Some(false)) };
        Llama::load(&gpu, &g, bytes, LoadOptions { ctx: Some(ctx), kv, ..Default::default() }).unwrap()
    };
    let (plain, merged) = (load(false), load(true));
    let names = |l: &Llama, n: u32| l.dispatches(&l.plan(n, ctx / 2, false)).iter().map(|d| d.variant.key.label()).collect::<Vec<_>>();
    let with = |v: &[String], k: &str| v.iter().filter(|n| n.contains(k)).count();
    let (a, b) = (names(&plain, 1), names(&merged, 1));
    assert_eq!((with(&a, "+combine"), with(&b, "+combine +quant")), (0, layers), "{kv:?} {splits:?}: {b:?}");
    assert_eq!((with(&a, "attention_combine"), with(&b, "attention_combine")), (layers, 0), "{kv:?} {splits:?}: one combine dispatch a layer fewer");
    assert_eq!(with(&names(&merged, 3), "attention_combine"), layers, "3-token batches merge by the combine dispatch");
    if chunk == Some(128) {
        assert_eq!(b.iter().filter(|n| n.contains(" kc128 ") && n.contains("+combine")).count(), layers, "{kv:?} {splits:?}: chunks of 128 keys: {b:?}");
    }
    (plain, merged)
}

/// One-token attention merges its key splits itself (`attention_decode.wgsl`'s COMBINE: the last
/// workgroup of each head group to finish, through a ticket after the partials) instead of a
/// combine dispatch: the same logits as the combine's with 3, 7 and 128 splits (most of the last
/// empty) and by default, at every position of a prompt decoded a token at a time across
/// several 64-key chunks, for an f32 and an f16 cache, the merge also writing the output
/// projection's integers (`+quant`); two workgroups per KV head (GQA 4, 2 heads each) keep
/// separate tickets; 3-token batches (the combine dispatch in both) in between. Splits of more
/// than 64 keys take chunks of 128 where they hold an even number of 64-key chunks
/// (`attention::decode_chunk`; 2 splits here past 128 keys), and chunks of 128 are
/// forced where splits hold fewer keys too (the token's own key then in either half of a chunk,
/// and splits with no keys); with the value rows' prefetch (on by default for head dims up to 64) and without.
#[test]
#[cfg(feature = "lab")]
fn decode_merges_its_key_splits() {
    let s = Shape::dense(256, 2, 8, 2, 512, 67);
    let bytes = model(&s, Scheme::Q4KM, 13).unwrap().to_bytes();
    // (2 splits: two chunks a split past 128 keys, as attention::splits gives past 2240.)
    let c128 = Some(128);
    for (kv, splits, chunk, prefetch) in [
        (KvType::F32, Some(3), None, true),
        (KvType::F32, Some(7), None, true),
        (KvType::F32, Some(128), None, true),
        (KvType::F32, None, None, true),
        (KvType::F16, Some(5), None, true),
        (KvType::F32, Some(2), None, true),
        (KvType::F32, Some(2), None, false),
        (KvType::F32, Some(7), c128, true),
        (KvType::F16, Some(2), c128, true),
        (KvType::F32, None, c128, true),
        (KvType::F32, Some(7), c128, false),
    ] {
        let (plain, merged) = merge_pair(&bytes, 2, 200, kv, splits, chunk, prefetch);
        let tokens: Vec<u32> = (0..190).map(|i| (i * 7919 + 3) % s.vocab).collect();
        for (pos, &t) in tokens.iter().enumerate() {
            assert_merged(&plain, &merged, &[t], pos as u32, &format!("{kv:?} {splits:?} chunk {chunk:?}"));
        }
        assert_merged(&plain, &merged, &tokens[..3], 120, &format!("{kv:?} {splits:?} chunk {chunk:?}"));
        assert_merged(&plain, &merged, &tokens[120..121], 123, &format!("{kv:?} {splits:?} chunk {chunk:?}, after a 3-token batch"));
    }
}

/// Key splits by context (`attention::splits`): every split holds keys (the kernel walks a split's
/// keys in whole 64-key chunks, so a split count that does not divide them into chunks leaves
/// splits empty; nor do the kernel's 128-key chunks, `attention::decode_chunk`, leave any), one
/// chunk a split through the combine dispatch and, where attention merges its own splits, one up
/// to 2240 keys and more past it, about sqrt(chunks) / 3 (32 splits at 4096 keys, the measured
/// best region on an H200: BENCHMARKS.md v21); at most MAX_SPLITS.
#[test]
fn key_splits_walk_whole_chunks() {
    let s = Shape::dense(256, 1, 8, 2, 256, 67);
    let bytes = model(&s, Scheme::Q4KM, 5).unwrap().to_bytes();
    let cfg = webgpu_llama::Config::from_gguf(&Gguf::parse(bytes.as_slice()).unwrap(), Some(64)).unwrap();
    let base = gpu(false);
    let with = |on: bool| {
        let mut g = base.clone();
        g.set_cpu(false);
        let t = g.switches_mut();
        (t.fuse, t.fused_combine) = (Some(true), Some(on));
        g
    };
    let (plain, merged) = (with(false), with(true));
    use webgpu_llama::attention::{decode_chunk, splits, MAX_SPLITS};
    let mut last_per = 1;
    for kv in [1u32, 63, 64, 65, 520, 641, 2176, 2177, 2240, 2241, 4096, 5120, 5121, 20000, 100_000, 1 << 20] {
        let chunks = kv.div_ceil(64);
        let n = splits(&plain, &cfg, 1, kv);
        assert_eq!(n, chunks.min(MAX_SPLITS), "{kv} keys through the combine dispatch: one chunk a split");
        let n = splits(&merged, &cfg, 1, kv);
        let per = kv.div_ceil(n).div_ceil(64); // chunks a split walks (the kernel's rounding)
        assert!(n <= MAX_SPLITS && (n - 1) * per * 64 < kv, "{kv} keys, {n} splits of {per} chunks: one is empty");
        // The kernel's chunk (64 or 128 keys) leaves no split empty either, and walks fewer of them.
        let kc = decode_chunk(&merged, kv, n);
        let per_kc = kv.div_ceil(n).div_ceil(kc);
        assert!((n - 1) * per_kc * kc < kv, "{kv} keys, {n} splits of {per_kc} chunks of {kc}: one is empty");
        assert_eq!(kc, if per % 2 == 0 { 128 } else { 64 }, "{kv} keys: chunks of 128 where splits hold an even number of 64-key chunks");
        assert!(per >= last_per || n == MAX_SPLITS, "{kv} keys: {per} chunks a split, fewer than at fewer keys");
        if kv <= 2240 {
            assert_eq!(n, chunks, "{kv} keys: one chunk a split, as before");
        } else if n < MAX_SPLITS {
            assert!(per >= 2, "{kv} keys: {n} splits of one chunk");
        }
        last_per = per;
    }
    assert_eq!(splits(&merged, &cfg, 1, 4096), 32);
    assert_eq!(splits(&merged, &cfg, 3, 4096), 64, "3-token batches merge by the combine dispatch");
}

/// The merge past its first round of 8 splits (a 650-token prompt, then one-token steps with 128
/// splits and by context: 11 splits hold keys, so the second round rescales the first's sums)
/// and with more dims than threads (GQA 8 at head dim 128, 4 heads a workgroup: 128 vec4s of
/// output and integers for 64 threads), and in 3 splits of 217 keys or more (chunks of 128 keys,
/// 4 key groups of 32; with the value rows' prefetch too), against the combine dispatch.
#[test]
#[cfg(feature = "lab")]
fn decode_merges_long_contexts_and_wide_groups() {
    let s = Shape::dense(1024, 1, 8, 1, 256, 67);
    let bytes = model(&s, Scheme::Q4KM, 17).unwrap().to_bytes();
    let prompt: Vec<u32> = (0..660).map(|i| (i * 7919 + 3) % s.vocab).collect();
    for (splits, prefetch) in [(Some(128), false), (None, false), (Some(3), false), (Some(3), true)] {
        let (plain, merged) = merge_pair(&bytes, 1, 704, KvType::F32, splits, None, prefetch);
        assert_merged(&plain, &merged, &prompt[..650], 0, &format!("{splits:?}, prefetch {prefetch}, the prompt"));
        for pos in 650..660 {
            assert_merged(&plain, &merged, &prompt[pos..pos + 1], pos as u32, &format!("{splits:?}, prefetch {prefetch}"));
        }
    }
}

/// The value projection of its own (Q6_K beside Q4_K q and k, as in Q4_K_M files) writes decode's
/// value straight into the V cache (`Switches::v_to_cache`, `linear::Fuse::cache_row`; into the
/// f16 cache two rows a word, `linear::AT_POSITION16`) and one-token attention reads it there
/// (`+v-cached`): the same logits, bit for bit, as through qkv (where the f16 cache's attention
/// rounds the token's own value as the cache holds it), at every position of a prompt decoded a
/// token at a time and past the key splits' first chunk; and the path is taken.
#[test]
#[cfg(feature = "lab")]
fn value_projection_into_the_cache() {
    // Head dims 64 (attention_decode.wgsl) and 128 (attention_decode_wide.wgsl on GPUs).
    for (heads, kv_heads) in [(4, 2), (2, 1)] {
        for kv in [KvType::F32, KvType::F16] {
            value_projection_into_the_cache_with(Shape::dense(256, 2, heads, kv_heads, 512, 67), kv, None, 160);
        }
    }
    // Rows of 2048 weights: the GPUs' integer form of the Q6_K projection (64 threads a row, 16-byte
    // pieces, its sums through workgroup memory), as on the Llama shapes.
    value_projection_into_the_cache_with(Shape::dense(2048, 1, 16, 4, 512, 67), KvType::F16, None, 48);
    // Bindings capped at 63 Q6_K rows of 256 weights (210 bytes each): the value projection's 128
    // rows in parts of 63, 63 and 2. Its f16 rows go in pairs, a word each, which such parts
    // would straddle: the f16 cache's value goes through qkv then; the f32 cache's still not.
    for kv in [KvType::F32, KvType::F16] {
        value_projection_into_the_cache_with(Shape::dense(256, 2, 4, 2, 512, 67), kv, Some(63 * 210 + 19), 24);
    }
}

#[cfg(feature = "lab")]
fn value_projection_into_the_cache_with(s: Shape, kv: KvType, cap: Option<u64>, ctx: u32) {
    let bytes = model(&s, Scheme::Q4KM, 11).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let load = |on: bool| {
        let mut gpu = gpu(false);
        if let Some(c) = cap {
            gpu.cap_binding(c);
        }
        gpu.set_cpu(false);
        (gpu.switches_mut().fuse, gpu.switches_mut().v_to_cache) = (Some(true), Some(on));
        gpu.lab_mut().splits = Some(3);
        Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(ctx), kv, ..Default::default() }).unwrap()
    };
    let (plain, cached) = (load(false), load(true));
    let names = |l: &Llama| l.dispatches(&l.plan(1, ctx - 2, false)).iter().map(|d| d.variant.key.label()).collect::<Vec<_>>();
    let with = |v: &[String], k: &str| v.iter().filter(|n| n.contains(k)).count();
    let (a, b) = (names(&plain), names(&cached));
    let odd_parts = cap.is_some() && kv == KvType::F16;
    if s.d >= 2048 && kv == KvType::F16 {
        assert!(b.iter().any(|n| n.contains("tpr64") && n.contains("wide idot +f16-row")), "the GPUs' integer form writes the f16 rows: {b:?}");
    }
    let layers = s.n_layers as usize;
    let (v_cached, f16_rows) = (if odd_parts { 0 } else { layers }, if kv == KvType::F16 && !odd_parts { layers } else { 0 });
    assert_eq!(
        (with(&a, "+v-cached"), with(&b, "+v-cached")),
        (0, v_cached),
        "{kv} cache, cap {cap:?}: one-token attention reading the cache's value, per layer: {b:?}"
    );
    assert_eq!((with(&a, "+f16-row"), with(&b, "+f16-row")), (0, f16_rows), "{kv} cache, cap {cap:?}: the value projection's f16 rows, per layer: {b:?}");
    assert_eq!(a.len(), b.len(), "{kv} cache: the same dispatches");
    let tokens: Vec<u32> = (0..140.min(ctx)).map(|i| (i * 7919 + 3) % s.vocab).collect();
    for (pos, &t) in tokens.iter().enumerate() {
        let (x, y) = (block_on(plain.forward(&[t], pos as u32)).unwrap(), block_on(cached.forward(&[t], pos as u32)).unwrap());
        assert_eq!(x, y, "{kv} cache, head dim {}: logits at position {pos}, the value through the cache against through qkv", s.d / s.n_heads);
    }
    // One-token steps between multi-token batches (whose values rope_kv writes from qkv), and a
    // step re-run from an earlier position (its cache row overwritten).
    let calls: [(&[u32], u32); 6] = [(&tokens[..5], 0), (&tokens[5..6], 5), (&tokens[6..9], 6), (&tokens[9..10], 9), (&tokens[20..21], 7), (&tokens[8..9], 8)];
    for (chunk, pos) in calls {
        let (x, y) = (block_on(plain.forward(chunk, pos)).unwrap(), block_on(cached.forward(chunk, pos)).unwrap());
        assert_eq!(x, y, "{kv} cache, head dim {}: logits of {} tokens at position {pos}", s.d / s.n_heads, chunk.len());
    }
}

/// One-token steps over at most the `attn_heads_until` knob keys take one query head a workgroup
/// of attention_decode.wgsl (`attention::short_steps_one_head`), longer ones two: the same
/// logits as with two heads a workgroup throughout, at every position of a prompt decoded a
/// token at a time on both sides of the bound, with 3 key splits and by context, and the f16 cache; and
/// each side takes its form.
#[test]
#[cfg(feature = "lab")]
fn short_steps_take_one_head_a_workgroup() {
    let s = Shape::dense(256, 2, 4, 1, 512, 67);
    let bytes = model(&s, Scheme::All(GgmlType::Q8_0), 13).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    for (kv, splits) in [(KvType::F32, Some(3)), (KvType::F32, None), (KvType::F16, Some(3))] {
        let load = |until: u32| {
            let mut gpu = gpu(false);
            gpu.set_cpu(false);
            gpu.switches_mut().fuse = Some(true);
            (gpu.lab_mut().splits, gpu.lab_mut().attn_heads_until) = (splits, Some(until));
            Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(160), kv, ..Default::default() }).unwrap()
        };
        let (two, short) = (load(0), load(100));
        let attention = |l: &Llama, pos: u32| {
            l.dispatches(&l.plan(1, pos, false)).iter().map(|d| d.variant.key.label()).find(|n| n.starts_with("attention_decode")).unwrap()
        };
        assert!(attention(&short, 99).contains(" g4/1 "), "{kv}, {splits:?} splits: 100 keys, one head a workgroup: {}", attention(&short, 99));
        assert!(attention(&short, 100).contains(" g4/2 "), "{kv}, {splits:?} splits: 101 keys, two: {}", attention(&short, 100));
        assert!(attention(&two, 50).contains(" g4/2 "), "{kv}, {splits:?} splits: off, two: {}", attention(&two, 50));
        let tokens: Vec<u32> = (0..140).map(|i| (i * 7919 + 5) % s.vocab).collect();
        for (pos, &t) in tokens.iter().enumerate() {
            let (x, y) = (block_on(two.forward(&[t], pos as u32)).unwrap(), block_on(short.forward(&[t], pos as u32)).unwrap());
            let d = max_abs(&x, &y);
            assert!(d < 1e-4, "{kv}, {splits:?} splits: logits at position {pos}, one head a workgroup against two: {d}");
        }
    }
}

/// Kernels compile on the first batch that runs them (`program::Variant`): nothing at load,
/// a decode step's own after the first step, a prompt's batch kernels only once a batch runs
/// them; and the logits agree whichever call compiled the kernels.
#[test]
fn kernels_compile_on_first_use() {
    let s = Shape::dense(96, 2, 4, 2, 256, 67);
    let bytes = model(&s, Scheme::All(GgmlType::Q8_0), 5).unwrap().to_bytes();
    let gpu = gpu(false);
    let llama = load(&gpu, &bytes, Some(64));
    let built = |n: u32, pos: u32| llama.dispatches(&llama.plan(n, pos, false)).iter().filter(|d| d.variant.is_built()).count();
    let (step, batch) = (llama.dispatches(&llama.plan(1, 20, false)).len(), llama.dispatches(&llama.plan(20, 0, false)).len());
    assert_eq!((built(1, 20), built(20, 0)), (0, 0), "kernels compiled at load");
    let tokens: Vec<u32> = (0..21).map(|i| (i * 31 + 7) % s.vocab).collect();
    let one_at_a_time: Vec<Vec<f32>> = tokens.iter().enumerate().map(|(p, &t)| block_on(llama.forward(&[t], p as u32)).unwrap()).collect();
    assert_eq!(built(1, 20), step, "a decode step's kernels after the first step");
    let batch_only = llama.dispatches(&llama.plan(20, 0, false)).iter().filter(|d| !d.variant.is_built()).count();
    assert!(batch_only > 0, "a 20-token batch runs kernels that one-token steps do not (else this test checks nothing)");
    let prompt = block_on(llama.forward(&tokens[..20], 0)).unwrap();
    assert_eq!(built(20, 0), batch, "the batch's kernels after it ran");
    let after = block_on(llama.forward(&tokens[20..], 20)).unwrap();
    assert!(max_abs(&prompt, &one_at_a_time[19]) < 1e-3, "the prompt in one batch against a token at a time");
    assert!(max_abs(&after, &one_at_a_time[20]) < 1e-3, "a step after the batch against the same step before it");
}

/// One-token attention through `attention_decode_wide.wgsl` (`Switches::attn_wide`: a chunk's key
/// and value loads spread over 2 x head-dim threads, all in flight at once, the next chunk's
/// while one is summed) gives the combine dispatch's logits at every position of a prompt decoded
/// a token at a time (1 to 3 chunks of 64 keys): head dims 32 (a thread a key), 64 and 128 (2
/// and 4 threads a key, their dot products summed by subgroup shuffles). Where a value row's
/// head-dim / 4 threads fit in one subgroup, each subgroup can keep its own softmax over the
/// keys it scores and values (` owned`, asked for in four of the six cases, so that both forms
/// run at each head dim): head dim 32 at lavapipe's 8 lanes, and 64 too in scripts/test.sh's
/// second run at 16 (`LP_NATIVE_VECTOR_WIDTH=512`, `WEBGPU_LLAMA_EXPECT_LANES=16`); f32 caches (the value
/// projection writes its cache row) and f16 (the kernel writes it), splits by context, 3, 7
/// and 128 (most of the last empty) and 2 (splits of 2 and 3 chunks of 64 keys, the next chunk's
/// loads in flight while one is summed), chunks of 128 forced (the own key in either half of a
/// chunk, splits with no keys), 3-token batches in between.
#[test]
#[cfg(feature = "lab")]
fn wide_decode_attention() {
    for (d, heads) in [(256, 4), (256, 8), (512, 4)] {
        let s = Shape::dense(d, 1, heads, 2, 2 * d, 67);
        let bytes = model(&s, Scheme::Q4KM, 17).unwrap().to_bytes();
        for (i, (kv, splits, chunk)) in [
            (KvType::F32, None, None),
            (KvType::F32, Some(3), None),
            (KvType::F16, Some(7), None),
            (KvType::F32, Some(128), None),
            (KvType::F16, Some(2), None),
            (KvType::F32, Some(3), Some(128)),
        ]
        .into_iter()
        .enumerate()
        {
            // Subgroups owning their keys asked for in four of the six (both forms at each head dim).
            let own = i != 1 && i != 3;
            // (Chunks of 128 keys at head dim 128 are 512 threads whose workgroup memory passes
            // lavapipe's 32 KiB.)
            if chunk == Some(128) && d != 256 {
                continue;
            }
            let g = Gguf::parse(&bytes).unwrap();
            let load = |wide: bool| {
                let mut gpu = gpu(false);
                gpu.set_cpu(false);
                let t = gpu.switches_mut();
                (t.fuse, t.fused_combine, t.int_dot, t.attn_wide) = (Some(true), Some(wide), Some(true), Some(wide));
                let k = gpu.lab_mut();
                (k.splits, k.attn_chunk, k.attn_owned) = (splits, if wide { chunk } else { Some(64) }, Some(own));
                Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(160), kv, ..Default::default() }).unwrap()
            };
            let (plain, wide) = (load(false), load(true));
            let names = wide.dispatches(&wide.plan(1, 80, false)).iter().map(|d| d.variant.key.label()).collect::<Vec<_>>();
            let kc128 = chunk == Some(128);
            assert_eq!(names.iter().filter(|n| n.starts_with("attention_decode_wide") && n.contains(" kc128") == kc128).count(), 1, "{names:?}");
            // Subgroups that own their keys where a value row's d / heads / 4 threads fit in one.
            let sg = wide.gpu().reduce_subgroup();
            let owned = names.iter().any(|n| n.starts_with("attention_decode_wide") && n.contains(" owned"));
            assert_eq!(owned, own && d / heads / 4 <= sg, "{names:?} at {sg} lanes");
            if let Ok(lanes) = std::env::var("WEBGPU_LLAMA_EXPECT_LANES") {
                assert_eq!(sg.to_string(), lanes, "the subgroup size scripts/test.sh asked lavapipe for");
            }
            if i == 0 {
                println!("head dim {}: {sg} lanes, subgroups {}own their keys", d / heads, if owned { "" } else { "do not " });
            }
            let what = format!("d {d} {kv:?} {splits:?} chunk {chunk:?} owned {owned}");
            let tokens: Vec<u32> = (0..150).map(|i| (i * 7919 + 3) % s.vocab).collect();
            for (pos, &t) in tokens.iter().enumerate() {
                assert_merged(&plain, &wide, &[t], pos as u32, &what);
            }
            assert_merged(&plain, &wide, &tokens[..3], 100, &what);
            assert_merged(&plain, &wide, &tokens[100..101], 103, &format!("{what}, after a 3-token batch"));
        }
    }
}

/// The hollow tests' model: Q4_K everywhere, 4 heads of 64 dims (2 KV heads), 2 layers.
#[cfg(feature = "lab")]
fn hollow_test_model() -> (Shape, Vec<u8>) {
    let s = Shape::dense(256, 2, 4, 2, 512, 67);
    let bytes = model(&s, Scheme::All(GgmlType::Q4_K), 7).unwrap().to_bytes();
    (s, bytes)
}

/// That model with `hollow`, in the GPU forms (integer matvecs, their wide loads, 3 key splits).
#[cfg(feature = "lab")]
fn load_hollow(bytes: &Vec<u8>, hollow: webgpu_llama::lab::Hollow) -> (Gpu, Llama) {
    let g = Gguf::parse(bytes).unwrap();
    let mut gpu = gpu(false);
    gpu.set_cpu(false);
    (gpu.switches_mut().int_dot, gpu.switches_mut().wide) = (Some(true), Some(true));
    (gpu.lab_mut().splits, gpu.lab_mut().hollow) = (Some(3), hollow);
    (gpu.clone(), Llama::load(&gpu, &g, bytes, LoadOptions { ctx: Some(80), ..Default::default() }).unwrap())
}

/// `bench --set hollow=grids|one` (the `hollow` mode): every kernel composed to return at entry, over its
/// planned grid or one workgroup, keeps the step's dispatches (the same kernels, in order) and
/// does no work: every logit stays as its buffer was made (0), with no validation error, where
/// the same model's kernels, run, give logits. The GPU forms (integer matvecs, one-token
/// attention merging its key splits, the top-k readout) and a prompt then one-token steps.
#[test]
#[cfg(feature = "lab")]
fn hollow_kernels_keep_the_dispatches_and_do_no_work() {
    use webgpu_llama::lab::Hollow;
    let (s, bytes) = hollow_test_model();
    let load = |hollow: Hollow| load_hollow(&bytes, hollow);
    let names = |l: &Llama, n: u32, pos: u32| l.dispatches(&l.plan(n, pos, false)).iter().map(|d| d.variant.key.label()).collect::<Vec<_>>();
    let (_, run) = load(Hollow::Off);
    let tokens: Vec<u32> = (0..20).map(|i| (i * 7919 + 3) % s.vocab).collect();
    let steps = [(0, &tokens[..]), (20, &tokens[..1]), (21, &tokens[1..2])];
    for (pos, chunk) in steps {
        let l = block_on(run.forward(chunk, pos)).unwrap();
        assert!(l.iter().any(|&x| x != 0.0), "the kernels run: logits at position {pos}");
    }
    for hollow in [Hollow::Grids, Hollow::One] {
        let (gpu, h) = load(hollow);
        assert_eq!(names(&h, 1, 20), names(&run, 1, 20), "{hollow}: one-token dispatches");
        assert_eq!(names(&h, 20, 0), names(&run, 20, 0), "{hollow}: prompt dispatches");
        for (pos, chunk) in steps {
            let l = block_on(h.forward(chunk, pos)).unwrap();
            let nonzero = l.iter().filter(|&&x| x != 0.0).count();
            assert_eq!(nonzero, 0, "{hollow}: logits written at position {pos}");
        }
        let top = block_on(h.forward_top_k(&tokens[2..3], 22, 4)).unwrap();
        assert!(top.iter().all(|&(id, x)| id == 0 && x == 0.0), "{hollow}: the top-k readout wrote {top:?}");
        gpu.check().unwrap();
    }
}

/// `bench --set hollow=only:KERNEL` (`Hollow::Only`): that kernel alone returns at entry, the others
/// run. With the one-token attention kernel hollow, a prompt's logits (other attention kernels)
/// are the run's bit for bit and a one-token step's are not; with every matvec hollow, no logit
/// is written. The mode's names parse and print back; `stream` and unknown names are refused.
#[test]
#[cfg(feature = "lab")]
fn one_kernel_hollow_leaves_the_others_running() {
    use webgpu_llama::kernels::Kernel;
    use webgpu_llama::lab::Hollow;
    let (s, bytes) = hollow_test_model();
    let load = |hollow: Hollow| load_hollow(&bytes, hollow);
    let (_, run) = load(Hollow::Off);
    let one_token = run
        .dispatches(&run.plan(1, 20, false))
        .iter()
        .map(|d| d.variant.key.kernel)
        .find(|k| matches!(k, Kernel::AttentionDecode | Kernel::AttentionDecodeWide));
    let attention = one_token.expect("a one-token step takes the one-token attention kernel");
    let tokens: Vec<u32> = (0..21).map(|i| (i * 7919 + 3) % s.vocab).collect();
    let expect: Vec<Vec<f32>> = [(0, &tokens[..20]), (20, &tokens[20..])].iter().map(|&(pos, t)| block_on(run.forward(t, pos)).unwrap()).collect();
    let (gpu, h) = load(Hollow::Only(attention));
    assert_eq!(block_on(h.forward(&tokens[..20], 0)).unwrap(), expect[0], "a prompt runs without the one-token kernel");
    assert_ne!(block_on(h.forward(&tokens[20..], 20)).unwrap(), expect[1], "the one-token attention ran");
    gpu.check().unwrap();
    let (gpu, h) = load(Hollow::Only(Kernel::Matvec));
    for (pos, chunk) in [(0, &tokens[..20]), (20, &tokens[20..])] {
        let l = block_on(h.forward(chunk, pos)).unwrap();
        assert_eq!(l.iter().filter(|&&x| x != 0.0).count(), 0, "matvecs hollow: logits written at position {pos}");
    }
    gpu.check().unwrap();
    let name = format!("only:{}", attention.name());
    assert_eq!(name.parse::<Hollow>().unwrap(), Hollow::Only(attention));
    assert_eq!(Hollow::Only(attention).to_string(), name);
    for bad in ["only:stream", "only:", "only:attn", "attention_decode"] {
        let e = bad.parse::<Hollow>().unwrap_err().to_string();
        assert!(e.contains(bad) && e.contains("only:KERNEL"), "{bad}: {e}");
    }
}

/// The SwiGLU matvec's integers for the down projection (`QOUT`, four threads of its workgroup
/// converting the 16-row half) are the quantize op's bit for bit (the same maths on the same f32
/// row), so every logit is the same with the quantize dispatch as without, at a prompt and at
/// one-token steps; its low digits included, which no tolerance would see. And in workgroups of
/// fewer than four threads (a thread a row, 8 rows a thread: 2 threads), the output and down
/// projections' integers (times the next norm's weights) still give the quantize op's logits
/// within 1e-5 of the largest (the norm's division comes later on that path).
#[test]
#[cfg(feature = "lab")]
fn swiglu_integers_match_the_quantize_op() {
    let s = Shape::dense(256, 2, 4, 2, 512, 67);
    let bytes = model(&s, Scheme::All(GgmlType::Q4_K), 11).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let load = |qout: bool, glu: bool, tpr: Option<u32>, rpt: Option<u32>| {
        let mut gpu = gpu(false);
        gpu.set_cpu(false);
        let t = gpu.switches_mut();
        (t.int_dot, t.wide, t.fuse, t.quant_out) = (Some(true), Some(true), Some(true), Some(qout && !glu));
        let k = gpu.lab_mut();
        (k.tpr, k.rpt, k.quant_out_glu) = (tpr, rpt, Some(qout && glu));
        Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(40), ..Default::default() }).unwrap()
    };
    let labels = |l: &Llama| l.dispatches(&l.plan(1, 20, false)).iter().map(|d| d.variant.key.label()).collect::<Vec<_>>();
    let count = |l: &Llama, k: &str| labels(l).iter().filter(|n| n.contains(k)).count();
    let tokens: Vec<u32> = (0..20).map(|i| (i * 7919 + 3) % s.vocab).collect();
    let steps = [(0, &tokens[..]), (20, &tokens[..1]), (21, &tokens[1..2]), (22, &tokens[2..3])];
    let (plain, qout) = (load(false, true, None, None), load(true, true, None, None));
    assert_eq!(count(&plain, "quantize"), count(&qout, "quantize") + 2, "one quantize dispatch a layer fewer with the SwiGLU matvec's integers");
    for (pos, chunk) in steps {
        let (a, b) = (block_on(plain.forward(chunk, pos)).unwrap(), block_on(qout.forward(chunk, pos)).unwrap());
        assert_eq!(a, b, "logits at position {pos} with the SwiGLU matvec's integers against the quantize op's");
    }
    let (plain, qout) = (load(false, false, Some(1), Some(8)), load(true, false, Some(1), Some(8)));
    assert!(count(&qout, "tpr1 x1 r8") > 0 && count(&qout, "+qout-norm") == 4, "2-thread writers: {:?}", labels(&qout));
    for (pos, chunk) in steps {
        let (a, b) = (block_on(plain.forward(chunk, pos)).unwrap(), block_on(qout.forward(chunk, pos)).unwrap());
        let err = relative_err(&b, &a.iter().map(|&v| v as f64).collect::<Vec<_>>());
        assert!(err < 1e-5, "2-thread writers: logits at position {pos} against the quantize op's: {err:e}");
    }
}
