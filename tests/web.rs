#![cfg(target_arch = "wasm32")]
//! The JavaScript API in headless Chromium (WebGPU on SwiftShader), as a host page uses it: the
//! test creates its own `GPUDevice` and passes it with the GGUF's `ArrayBuffer` to `createLlama`;
//! `forward`, `config` and `dispose` are called through the JS class wasm-bindgen generates.
//!
//! Run: `scripts/test-web.sh` (or `wasm-pack test --headless --chrome -- --test web`). The models
//! and reference logits are compiled in from `../shared` (the build fails if it is missing).

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::*;

use webgpu_llama::ggml::GgmlType;
use webgpu_llama::gguf::{GgufWriter, Value};
use webgpu_llama::web;

mod web_common;
use web_common::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen(inline_js = r#"
// Calls llama.forward exactly as JS does; a synchronous throw is turned into a marked rejection.
export function jsForward(llama, tokens, pos) {
  try { return llama.forward(tokens, pos); }
  catch (e) { return Promise.reject(new Error('SYNC THROW: ' + (e && e.message))); }
}
export function jsCall(obj, method, ...args) { return obj[method](...args); }
// The host's own uncaptured-error handler; the module must never replace it.
export function setHostHandler(device) {
  const f = (e) => console.log('host handler: ' + e.error.message);
  device.onuncapturederror = f;
  return f;
}
export function destroyDevice(device) { device.destroy(); }
export function jsGet(obj, key) { return obj[key]; }
export function strings(...xs) { return xs; }
// Model sources other than an ArrayBuffer.
export function blobOf(u8) { return new Blob([u8]); }
// A Response streaming `u8` in chunks of `chunk` bytes, with a Content-Length (or none when length < 0).
export function responseOf(u8, chunk, length) {
  let at = 0;
  const stream = new ReadableStream({
    pull(c) {
      if (at >= u8.length) { c.close(); return; }
      c.enqueue(u8.slice(at, at + chunk)); at += chunk;
    },
  });
  const headers = length >= 0 ? { 'content-length': String(length) } : {};
  return new Response(stream, { headers });
}
export function streamOf(u8, chunk) { return responseOf(u8, chunk, -1).body; }
// onProgress that records each call and aborts `controller` at call `abortAt` (never when < 0).
export function recorder(controller, abortAt) {
  const calls = [];
  const f = (p) => { calls.push(p); if (calls.length === abortAt) controller.abort(); };
  f.calls = calls;
  return f;
}
export function errorName(e) { return e && e.name; }
export function isDeviceLostError(e, cls) { return e instanceof cls && e instanceof Error && e.name === 'DeviceLostError'; }
export function isLost(device) {
  let lost = false;
  device.lost.then(() => { lost = true; });
  return new Promise((r) => setTimeout(() => r(lost), 0));
}
// The host keeps using its device after a model was disposed.
export async function hostRoundTrip(device) {
  device.pushErrorScope('validation');
  const b = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(b, 0, new Uint32Array([1, 2, 3, 4]));
  await b.mapAsync(GPUMapMode.READ);
  const v = Array.from(new Uint32Array(b.getMappedRange().slice(0)));
  b.unmap(); b.destroy();
  const err = await device.popErrorScope();
  if (err) throw new Error('host validation error: ' + err.message);
  return v.join(',');
}
"#)]
extern "C" {
    #[wasm_bindgen(js_name = jsForward)]
    fn js_forward(llama: &JsValue, tokens: &JsValue, pos: &JsValue) -> js_sys::Promise;
    #[wasm_bindgen(catch, js_name = jsCall)]
    fn js_call0(obj: &JsValue, method: &str) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = jsCall)]
    fn js_call1(obj: &JsValue, method: &str, a: &JsValue) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = jsCall)]
    fn js_call3(obj: &JsValue, method: &str, a: &JsValue, b: &JsValue, c: &JsValue) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_name = setHostHandler)]
    fn set_host_handler(device: &JsValue) -> JsValue;
    #[wasm_bindgen(js_name = destroyDevice)]
    fn destroy_device(device: &JsValue);
    #[wasm_bindgen(js_name = jsGet)]
    fn js_get(obj: &JsValue, key: &str) -> JsValue;
    #[wasm_bindgen(js_name = blobOf)]
    fn blob_of(u8: &js_sys::Uint8Array) -> JsValue;
    #[wasm_bindgen(js_name = responseOf)]
    fn response_of(u8: &js_sys::Uint8Array, chunk: u32, length: f64) -> JsValue;
    #[wasm_bindgen(js_name = streamOf)]
    fn stream_of(u8: &js_sys::Uint8Array, chunk: u32) -> JsValue;
    fn recorder(controller: &JsValue, abort_at: i32) -> JsValue;
    #[wasm_bindgen(js_name = errorName)]
    fn error_name(e: &JsValue) -> JsValue;
    #[wasm_bindgen(js_name = isDeviceLostError)]
    fn is_device_lost_error(e: &JsValue, cls: &JsValue) -> bool;
    #[wasm_bindgen(js_name = isLost)]
    async fn is_lost(device: &JsValue) -> JsValue;
    #[wasm_bindgen(catch, js_name = hostRoundTrip)]
    async fn host_round_trip(device: &JsValue) -> Result<JsValue, JsValue>;
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn nums(xs: &[f64]) -> JsValue {
    xs.iter().map(|&x| JsValue::from_f64(x)).collect::<js_sys::Array>().into()
}

fn toks(xs: &[u32]) -> JsValue {
    nums(&xs.iter().map(|&x| x as f64).collect::<Vec<_>>())
}

/// Awaits a promise; `Err` carries the rejection as "Name: message" (`TypeError: ...`,
/// `RangeError: ...`, `DeviceLostError: ...`, `Error: ...`) after checking it is a JS `Error`.
async fn settle(p: js_sys::Promise) -> Result<JsValue, String> {
    match JsFuture::from(p).await {
        Ok(v) => Ok(v),
        Err(e) => {
            assert!(e.is_instance_of::<js_sys::Error>(), "rejected with a non-Error: {e:?}");
            let name = error_name(&e).as_string().unwrap_or_default();
            let m: String = e.unchecked_into::<js_sys::Error>().message().into();
            assert!(!m.starts_with("SYNC THROW"), "threw synchronously instead of rejecting: {m}");
            Err(format!("{name}: {m}"))
        }
    }
}

fn options(ctx: Option<u32>) -> Option<JsValue> {
    ctx.map(|c| {
        let o = js_sys::Object::new();
        js_sys::Reflect::set(&o, &"contextLength".into(), &c.into()).unwrap();
        o.into()
    })
}

async fn create(device: &JsValue, buffer: JsValue, opts: Option<JsValue>) -> Result<JsValue, String> {
    web::reinit_after_panic(false);
    settle(web::create_llama(device.clone(), buffer, opts)).await
}

async fn load(device: &JsValue, case: &Case, ctx: Option<u32>) -> JsValue {
    create(device, case.buffer(), options(ctx)).await.unwrap_or_else(|e| panic!("{}: createLlama failed: {e}", case.name))
}

async fn forward(llama: &JsValue, tokens: &[u32], pos: u32) -> Result<Vec<f32>, String> {
    settle(js_forward(llama, &toks(tokens), &pos.into())).await.map(|v| v.unchecked_into::<js_sys::Float32Array>().to_vec())
}

async fn forward_err(llama: &JsValue, tokens: JsValue, pos: JsValue) -> String {
    match settle(js_forward(llama, &tokens, &pos)).await {
        Ok(_) => panic!("forward({tokens:?}, {pos:?}) resolved; expected a rejection"),
        Err(m) => m,
    }
}

fn config_u32(llama: &JsValue, key: &str) -> f64 {
    js_get(&js_get(llama, "config"), key).as_f64().unwrap_or_else(|| panic!("config.{key} is not a number"))
}

fn assert_has(msg: &str, part: &str) {
    assert!(msg.contains(part), "message {msg:?} should contain {part:?}");
}

/// Every reference row, one token at a time, plus the batched prompt; greedy continuation
/// identical. Returns the worst difference.
async fn run_case(case: &Case) -> f32 {
    run_case_on(case, &device(true).await).await
}

async fn run_case_on(case: &Case, dev: &JsValue) -> f32 {
    case.check_model_name();
    let llama = load(dev, case, None).await;
    let sg = config_u32(&llama, "subgroupSize");
    assert_eq!(sg, expected_subgroup(dev), "{}: config.subgroupSize", case.name);
    let (prompt, greedy) = (case.prompt(), case.greedy());
    assert_eq!(config_u32(&llama, "vocab") as usize, case.vocab(), "{}: vocab", case.name);
    assert_eq!(js_get(&js_get(&llama, "config"), "architecture").as_string().as_deref(), Some(case.architecture()), "{}: config.architecture", case.name);
    let p = prompt.len();
    let mut worst = 0f32;
    let mut check = |i: usize, got: &[f32]| {
        let d = max_abs(got, &case.row(i));
        assert!(d <= TOLERANCE, "{}: row {i} differs by {d} (tolerance {TOLERANCE})", case.name);
        worst = worst.max(d);
    };

    // The prompt in one call, then the greedy continuation one token at a time.
    let mut logits = forward(&llama, &prompt, 0).await.unwrap();
    check(p - 1, &logits);
    let mut ours = Vec::new();
    for j in 0..greedy.len() {
        let next = argmax(&logits);
        ours.push(next);
        assert_eq!(next, greedy[j], "{}: greedy token {j} is {next}, reference {}", case.name, greedy[j]);
        if j + 1 < greedy.len() {
            logits = forward(&llama, &[next], (p + j) as u32).await.unwrap();
            check(p + j, &logits);
        }
    }
    // Every one-token step above was recorded ahead and took its inputs from the staging slot
    // (its map resolved with the step before, before the readback's promise).
    let staged = js_get(&llama, "stagedSteps");
    let n = greedy.len() as f64 - 1.0;
    assert_eq!((js_get(&staged, "staged").as_f64(), js_get(&staged, "afresh").as_f64()), (Some(n), Some(0.0)), "{}: stagedSteps", case.name);
    // The rows inside the prompt: the prompt again, one token per call from position 0.
    for (i, &t) in prompt.iter().enumerate().take(p - 1) {
        let row = forward(&llama, &[t], i as u32).await.unwrap();
        check(i, &row);
    }
    js_call0(&llama, "dispose").unwrap();
    web_sys::console::log_1(&format!("{} (subgroups of {sg}): {} rows, max abs diff {worst:.2e}, greedy {:?}", case.name, p - 1 + greedy.len(), ours).into());
    worst
}

// ---------------------------------------------------------------------------------------------
// Reference logits

#[wasm_bindgen_test]
async fn reference_stories260k_f32() {
    run_case(&F32).await;
}

/// The same on a device created without the `subgroups` feature: the kernels without subgroup
/// operations (the path of browsers that do not offer them).
#[wasm_bindgen_test]
async fn reference_stories260k_f32_without_subgroups() {
    let dev = device_without_subgroups().await;
    run_case_on(&F32, &dev).await;
}

#[wasm_bindgen_test]
async fn reference_stories260k_q8_0() {
    run_case(&Q8_0).await;
}

#[wasm_bindgen_test]
async fn reference_stories260k_moe4x_top2_q8_0() {
    run_case(&MOE_Q8_0).await;
}

#[wasm_bindgen_test]
async fn reference_stories260k_pad256_q4_k_m() {
    run_case(&PAD256_Q4_K_M).await;
}

#[wasm_bindgen_test]
async fn reference_every_other_stories260k_case() {
    for c in &OTHERS {
        run_case(c).await;
    }
}

/// Every model family the GPU engine runs (Qwen2, Qwen3, Qwen3-MoE, Phi-3, SmolLM3, Granite),
/// against llama.cpp's logits.
#[wasm_bindgen_test]
async fn reference_every_gpu_family_case() {
    for c in &FAMILIES {
        run_case(c).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The API's shape

#[wasm_bindgen_test]
async fn config_matches_the_seed_and_progress_is_reported() {
    let dev = device(true).await;
    let calls = std::rc::Rc::new(std::cell::RefCell::new(Vec::<(f64, f64, f64, f64)>::new()));
    let sink = calls.clone();
    let cb = Closure::<dyn FnMut(JsValue)>::new(move |p: JsValue| {
        let f = |k: &str| js_get(&p, k).as_f64().unwrap();
        sink.borrow_mut().push((f("bytesDone"), f("bytesTotal"), f("tensorsDone"), f("tensorsTotal")));
    });
    let opts = js_sys::Object::new();
    js_sys::Reflect::set(&opts, &"onProgress".into(), cb.as_ref()).unwrap();
    let llama = create(&dev, F32.buffer(), Some(opts.into())).await.unwrap();
    let c = js_get(&llama, "config");
    assert!(js_sys::Object::is(&c, &js_get(&llama, "config")), "config is one object");
    let seed = [
        ("d", 64.0),
        ("L", 5.0),
        ("ff", 172.0),
        ("nh", 8.0),
        ("nkv", 4.0),
        ("hd", 8.0),
        ("ctx", 2048.0),
        ("vocab", 512.0),
        ("eps", 1e-5f32 as f64),
        ("theta", 10000.0),
        ("experts", 0.0),
        ("topk", 0.0),
    ];
    for (k, v) in seed {
        assert_eq!(js_get(&c, k).as_f64(), Some(v), "config.{k}");
    }
    assert_eq!(js_get(&c, "kvType").as_string().as_deref(), Some("f32"), "config.kvType");
    let dpt = config_u32(&llama, "dispatchesPerToken");
    // embed + 5 layers x (q/k/v with RMSNorm, rope_kv, attention, o, gate/up with RMSNorm and
    // SwiGLU, down) + output head with the final RMSNorm: 32, against the seed's 63 (on this
    // device with subgroups, where the CPU adapters' matvecs fuse the norms: policy::fused).
    assert_eq!(dpt, 32.0, "dispatchesPerToken");
    let file = config_u32(&llama, "fileTensorBytes");
    assert!(config_u32(&llama, "weightBytesOnGpu") >= file && file > 1e6, "weight bytes");
    assert!(config_u32(&llama, "gpuBytes") > config_u32(&llama, "weightBytesOnGpu"));
    assert!(js_get(&c, "adapter").as_string().is_some_and(|s| !s.is_empty()));

    let calls = calls.borrow().clone();
    assert_eq!(calls.len() as f64, calls.last().unwrap().3, "one progress call per tensor");
    let last = calls.last().unwrap();
    assert_eq!((last.0, last.2), (last.1, last.3), "progress ends complete");
    assert_eq!(last.1, file, "bytesTotal is fileTensorBytes");
    assert!(calls.windows(2).all(|w| w[1].0 >= w[0].0 && w[1].2 == w[0].2 + 1.0), "progress is monotonic");

    // The MoE config carries experts and top-k, and ff is per expert.
    let moe = load(&dev, &MOE_Q8_0, Some(64)).await;
    assert_eq!((config_u32(&moe, "experts"), config_u32(&moe, "topk"), config_u32(&moe, "ctx")), (4.0, 2.0, 64.0));

    // Token text for the demo.
    let text = js_call1(&llama, "decode", &toks(&[403, 407])).unwrap().as_string().unwrap();
    assert!(!text.is_empty());
    let bytes = js_call1(&llama, "tokenBytes", &403.into()).unwrap().unchecked_into::<js_sys::Uint8Array>().to_vec();
    assert!(text.as_bytes().starts_with(&bytes), "{text:?} vs {bytes:?}");
    assert!(web::wasm_memory_bytes() > 0.0);
    js_call0(&llama, "dispose").unwrap();
    js_call0(&moe, "dispose").unwrap();
}

#[wasm_bindgen_test]
async fn forwards_issued_without_awaiting_are_served_in_order() {
    let dev = device(true).await;
    let llama = load(&dev, &Q8_0, None).await;
    let (prompt, greedy) = (Q8_0.prompt(), Q8_0.greedy());
    let p = prompt.len();
    // Three calls queued back to back, awaited in reverse order.
    let a = js_forward(&llama, &toks(&prompt), &0.into());
    let b = js_forward(&llama, &toks(&greedy[..1]), &(p as u32).into());
    let c = js_forward(&llama, &toks(&greedy[1..3]), &(p as u32 + 1).into());
    let rc: Vec<f32> = settle(c).await.unwrap().unchecked_into::<js_sys::Float32Array>().to_vec();
    let rb: Vec<f32> = settle(b).await.unwrap().unchecked_into::<js_sys::Float32Array>().to_vec();
    let ra: Vec<f32> = settle(a).await.unwrap().unchecked_into::<js_sys::Float32Array>().to_vec();
    for (got, row) in [(&ra, p - 1), (&rb, p), (&rc, p + 2)] {
        let d = max_abs(got, &Q8_0.row(row));
        assert!(d <= TOLERANCE, "concurrent forward for row {row} differs by {d}");
    }
    js_call0(&llama, "dispose").unwrap();
}

#[wasm_bindgen_test]
async fn dispose_frees_the_model_not_the_device() {
    let dev = device(true).await;
    let handler = set_host_handler(&dev);
    let llama = load(&dev, &Q8_0, Some(16)).await;
    assert!(js_sys::Object::is(&js_get(&dev, "onuncapturederror"), &handler), "the host's error handler was replaced");
    // A forward issued before dispose still resolves.
    let pending = js_forward(&llama, &toks(&[1, 403]), &0.into());
    assert_eq!(js_get(&llama, "disposed").as_bool(), Some(false));
    js_call0(&llama, "dispose").unwrap();
    js_call0(&llama, "dispose").unwrap(); // idempotent
    assert_eq!(js_get(&llama, "disposed").as_bool(), Some(true));
    assert_eq!(settle(pending).await.unwrap().unchecked_into::<js_sys::Float32Array>().length(), 512);
    let m = forward_err(&llama, toks(&[1]), 0.into()).await;
    assert_has(&m, "use after dispose()");
    assert_eq!(is_lost(&dev).await.as_bool(), Some(false), "the host's device must survive dispose()");
    assert_eq!(host_round_trip(&dev).await.unwrap().as_string().unwrap(), "1,2,3,4");
    // The device can load again.
    let again = load(&dev, &Q8_0, Some(16)).await;
    assert_eq!(forward(&again, &[1], 0).await.unwrap().len(), 512);
    js_call0(&again, "dispose").unwrap();
}

#[wasm_bindgen_test]
async fn a_device_destroyed_by_the_host_gives_device_lost_errors_not_hangs() {
    let dev = device(true).await;
    let llama = load(&dev, &Q8_0, Some(16)).await;
    // Issued before the loss: pending when the device goes.
    let pending = js_forward(&llama, &toks(&[1, 403]), &0.into());
    destroy_device(&dev);
    let class = web::device_lost_error_class();
    for (when, p) in [("pending", pending), ("later", js_forward(&llama, &toks(&[1]), &0.into()))] {
        let e = JsFuture::from(p).await.expect_err(&format!("the {when} forward should reject"));
        assert!(is_device_lost_error(&e, &class), "{when}: not a DeviceLostError: {e:?}");
        let m: String = e.unchecked_into::<js_sys::Error>().message().into();
        assert_has(&m, "the GPU device was lost (destroyed");
    }
    js_call0(&llama, "dispose").unwrap();
    let m = create(&dev, Q8_0.buffer(), None).await.expect_err("loading on a destroyed device");
    assert_has(&m, "DeviceLostError: the GPU device was lost (destroyed");
}

#[wasm_bindgen_test]
async fn test_matvec_q8_matches_its_f64_reference() {
    let dev = device(true).await;
    let name = "blk.0.ffn_gate.weight"; // Q8_0 [64, 172]: 172 rows, not a multiple of 64
    let x: Vec<f64> = (0..64).map(|i| ((i * 37 % 64) as f64 / 32.0 - 1.0) * 0.75).collect();
    let r = settle(web::test_matvec_q8(dev.clone(), Q8_0.buffer(), name.into(), nums(&x))).await.unwrap();
    assert_eq!((js_get(&r, "rows").as_f64(), js_get(&r, "cols").as_f64()), (Some(172.0), Some(64.0)));
    let f = js_get(&r, "f32").unchecked_into::<js_sys::Float32Array>().to_vec();
    let q = js_get(&r, "q8").unchecked_into::<js_sys::Float32Array>().to_vec();
    let reference = js_get(&r, "ref");
    assert!(reference.is_instance_of::<js_sys::Float64Array>(), "ref is a Float64Array");
    let reference = reference.unchecked_into::<js_sys::Float64Array>().to_vec();
    assert_eq!((f.len(), q.len(), reference.len()), (172, 172, 172));
    let scale = reference.iter().fold(0f64, |m, v| m.max(v.abs()));
    for (which, got) in [("f32", &f), ("q8", &q)] {
        let d = got.iter().zip(&reference).map(|(a, b)| (*a as f64 - b).abs()).fold(0f64, f64::max);
        assert!(d <= 1e-5 * scale.max(1.0), "{which} differs from the f64 reference by {d} (scale {scale})");
    }
    assert!(scale > 0.1, "a non-trivial product");
    // A Float32Array x works too; wrong tensors are named.
    let x32 = js_sys::Float32Array::from(&x.iter().map(|&v| v as f32).collect::<Vec<_>>()[..]);
    settle(web::test_matvec_q8(dev.clone(), Q8_0.buffer(), name.into(), x32.into())).await.unwrap();
    let m = settle(web::test_matvec_q8(dev.clone(), Q8_0.buffer(), "output_norm.weight".into(), nums(&x))).await.unwrap_err();
    assert_has(&m, "output_norm.weight is F32, not Q8_0");
    let m = settle(web::test_matvec_q8(dev.clone(), Q8_0.buffer(), "nope".into(), nums(&x))).await.unwrap_err();
    assert_has(&m, "missing tensor nope");
    let m = settle(web::test_matvec_q8(dev, Q8_0.buffer(), name.into(), nums(&x[..10]))).await.unwrap_err();
    assert_has(&m, "x has 10 values but the tensor has 64 columns");
}

// ---------------------------------------------------------------------------------------------
// Errors

/// A minimal llama header with the given metadata and tiny tensors (only what `Config` reads
/// before the check under test).
fn gguf_with(arch: &str, experts: Option<u32>) -> Vec<u8> {
    let mut w = GgufWriter::new(3);
    w.kv("general.architecture", Value::Str(arch.into()))
        .kv("llama.embedding_length", Value::U32(32))
        .kv("llama.block_count", Value::U32(1))
        .kv("llama.feed_forward_length", Value::U32(32))
        .kv("llama.attention.head_count", Value::U32(4))
        .kv("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5));
    if let Some(e) = experts {
        w.kv("llama.expert_count", Value::U32(e)).kv("llama.expert_used_count", Value::U32(2));
        w.tensor("blk.0.ffn_gate_inp.weight", &[32, e as u64], GgmlType::F32, vec![0; 32 * e as usize * 4]);
    }
    w.tensor("token_embd.weight", &[32, 64], GgmlType::F32, vec![0; 32 * 64 * 4]);
    w.to_bytes()
}

#[wasm_bindgen_test]
async fn bad_files_are_named() {
    let dev = device(true).await;
    let expect = |r: Result<JsValue, String>| r.expect_err("createLlama should reject");

    let m = expect(create(&dev, bytes_to_js(b"PK\x03\x04 this is a zip, not a gguf"), None).await);
    assert_has(&m, "not a GGUF file");
    // Cut in the tensor data: the engine names the first tensor whose data is missing.
    let m = expect(create(&dev, bytes_to_js(&F32.model[..F32.model.len() / 2]), None).await);
    assert_has(&m, "truncated GGUF: tensor");
    assert_has(&m, "the file has 592688 bytes");
    let m = expect(create(&dev, bytes_to_js(&F32.model[..7]), None).await);
    assert_has(&m, "truncated GGUF");
    let m = expect(create(&dev, bytes_to_js(&gguf_with("gpt2", None)), None).await);
    assert_has(&m, "WebGPU path: unsupported architecture \"gpt2\"");
    assert_has(&m, "supported: llama, qwen2");
    let m = expect(create(&dev, bytes_to_js(&gguf_with("llama", Some(300))), None).await);
    assert_has(&m, "WebGPU path: at most 256 experts, top-16");

    // An unsupported tensor type: patch token_embd's type id to IQ4_NL (20).
    let mut b = gguf_with("llama", None);
    let name = b"token_embd.weight";
    let at = b.windows(name.len()).position(|w| w == name).unwrap() + name.len();
    let ty = at + 4 + 2 * 8;
    assert_eq!(u32::from_le_bytes(b[ty..ty + 4].try_into().unwrap()), GgmlType::F32 as u32);
    b[ty..ty + 4].copy_from_slice(&20u32.to_le_bytes());
    let m = expect(create(&dev, bytes_to_js(&b), None).await);
    assert_has(&m, "token_embd.weight has unsupported type IQ4_NL");

    // Swapped dims with the right element count: token_embd [64, 32] in a width-32 file, whose
    // vocab (no vocab_size, no tokens) is then 64; ggml order puts the width first.
    let mut b = gguf_with("llama", None);
    let dims = b.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4;
    b[dims..dims + 16].copy_from_slice(&[64u64.to_le_bytes(), 32u64.to_le_bytes()].concat());
    let m = expect(create(&dev, bytes_to_js(&b), None).await);
    assert_has(&m, "Error: tensor token_embd.weight has dims [64, 32], expected dims [32, 64] (n_embd, vocab");

    // Not a buffer, not a device, bad options.
    let m = expect(create(&dev, "model.gguf".into(), None).await);
    assert_has(
        &m,
        "TypeError: expected the GGUF file as an ArrayBuffer, a typed array, a Blob/File, a Response or a ReadableStream, got the string \"model.gguf\"",
    );
    let m = expect(create(&js_sys::Object::new().into(), Q8_0.buffer(), None).await);
    assert_has(&m, "TypeError: could not adopt the host's GPUDevice: expected a GPUDevice, got an Object");
    // The device is named first, even when the file is bad too.
    let m = expect(create(&JsValue::NULL, js_sys::ArrayBuffer::new(8).into(), None).await);
    assert_has(&m, "TypeError: could not adopt the host's GPUDevice: expected a GPUDevice, got null");
    let m = expect(create(&dev, Q8_0.buffer(), options(Some(0))).await);
    assert_has(&m, "RangeError: options.contextLength must be a positive integer, got 0");
    for (key, value, want) in [
        ("onProgress", JsValue::from("yes"), "TypeError: options.onProgress must be a function"),
        ("contextLength", JsValue::from("8"), "TypeError: options.contextLength must be a positive integer, got the string \"8\""),
        ("ctx", JsValue::from(2.5), "RangeError: options.ctx must be a positive integer, got 2.5"),
        ("signal", JsValue::from(true), "TypeError: options.signal must be an AbortSignal, got true"),
        ("kvType", JsValue::from("f8"), "RangeError: options.kvType must be \"f32\" or \"f16\", got the string \"f8\""),
        ("kvType", JsValue::from(16), "TypeError: options.kvType must be \"f32\" or \"f16\", got 16"),
    ] {
        let o = js_sys::Object::new();
        js_sys::Reflect::set(&o, &key.into(), &value).unwrap();
        assert_has(&expect(create(&dev, Q8_0.buffer(), Some(o.into())).await), want);
    }
    let m = expect(create(&dev, Q8_0.buffer(), Some("big".into())).await);
    assert_has(&m, "TypeError: options must be an object");

    // A typed-array view over the file (at an offset) loads.
    let mut padded = vec![7u8; 64];
    padded.extend_from_slice(Q8_0.model);
    let view = js_sys::Uint8Array::new_with_byte_offset(&js_sys::Uint8Array::from(&padded[..]).buffer(), 64);
    let llama = create(&dev, view.into(), options(Some(8))).await.unwrap();
    let row = forward(&llama, &Q8_0.prompt(), 0).await.unwrap();
    assert!(max_abs(&row, &Q8_0.row(Q8_0.prompt().len() - 1)) <= TOLERANCE);
    js_call0(&llama, "dispose").unwrap();
}

#[wasm_bindgen_test]
async fn too_large_for_the_hosts_limits_names_the_limit() {
    // Default limits: 128 MiB per storage binding. A 2M-position KV cache needs 256 MB per layer.
    let dev = device(false).await;
    let m = create(&dev, Q8_0.buffer(), options(Some(2_000_000))).await.expect_err("should not fit");
    assert_eq!(
        m,
        "OutOfMemoryError: tensor KV cache needs 256000000 bytes in one GPU buffer but the device's maxStorageBufferBindingSize is 134217728: \
         request a larger maxStorageBufferBindingSize when creating the GPUDevice"
    );
    // An f16 cache needs half the bytes: 4M positions are refused at the same size.
    let opts = js_sys::Object::new();
    js_sys::Reflect::set(&opts, &"contextLength".into(), &4_000_000.into()).unwrap();
    js_sys::Reflect::set(&opts, &"kvType".into(), &"f16".into()).unwrap();
    let m = create(&dev, Q8_0.buffer(), Some(opts.into())).await.expect_err("should not fit");
    assert_has(&m, "OutOfMemoryError: tensor KV cache needs 256000000 bytes in one GPU buffer");
    // The host's limits are the ones used.
    let llama = load(&dev, &Q8_0, Some(8)).await;
    assert_eq!(config_u32(&llama, "maxStorageBufferBindingSize"), 134217728.0);
    js_call0(&llama, "dispose").unwrap();
    let raised = device(true).await;
    let llama = load(&raised, &Q8_0, Some(8)).await;
    assert!(config_u32(&llama, "maxStorageBufferBindingSize") > 134217728.0, "raised limit seen");
    js_call0(&llama, "dispose").unwrap();
}

/// `kvType: 'f16'`: config.kvType says so, the cache's bytes halve (config.gpuBytes), and the
/// prompt and the greedy continuation decoded token by token stay within the f16 cache's
/// tolerance of the reference, with the same tokens.
#[wasm_bindgen_test]
async fn an_f16_kv_cache_halves_the_cache_and_keeps_the_continuation() {
    let dev = device(true).await;
    let opts = |kv: &str| {
        let o = js_sys::Object::new();
        js_sys::Reflect::set(&o, &"contextLength".into(), &64.into()).unwrap();
        js_sys::Reflect::set(&o, &"kvType".into(), &kv.into()).unwrap();
        Some(o.into())
    };
    let m32 = create(&dev, Q8_0.buffer(), opts("f32")).await.unwrap();
    let m16 = create(&dev, Q8_0.buffer(), opts("f16")).await.unwrap();
    assert_eq!(js_get(&js_get(&m16, "config"), "kvType").as_string().as_deref(), Some("f16"));
    // 5 layers x (k, v) x 64 positions x 4 KV heads x 8 dims x 2 bytes.
    assert_eq!(config_u32(&m32, "gpuBytes") - config_u32(&m16, "gpuBytes"), (5 * 2 * 64 * 32 * 2) as f64, "gpuBytes");
    let (prompt, greedy) = (Q8_0.prompt(), Q8_0.greedy());
    let p = prompt.len();
    let mut logits = forward(&m16, &prompt, 0).await.unwrap();
    let mut worst = 0f32;
    for (j, &want) in greedy.iter().enumerate() {
        let d = max_abs(&logits, &Q8_0.row(p - 1 + j));
        assert!(d <= KV_F16_TOLERANCE, "f16 cache: row {} differs by {d}", p - 1 + j);
        worst = worst.max(d);
        assert_eq!(argmax(&logits), want, "f16 cache: greedy token {j}");
        if j + 1 < greedy.len() {
            logits = forward(&m16, &[want], (p + j) as u32).await.unwrap();
        }
    }
    web_sys::console::log_1(&format!("f16 KV cache: {} rows, max abs diff {worst:.2e}", greedy.len()).into());
    js_call0(&m32, "dispose").unwrap();
    js_call0(&m16, "dispose").unwrap();
}

#[wasm_bindgen_test]
async fn bad_forward_arguments_reject_with_named_errors() {
    let dev = device(true).await;
    let llama = load(&dev, &Q8_0, Some(8)).await;
    let zero = JsValue::from(0);
    let cases: Vec<(JsValue, JsValue, &str)> = vec![
        (nums(&[1.5]), zero.clone(), "RangeError: token at index 0 is 1.5"),
        (nums(&[1.0, -1.0]), zero.clone(), "RangeError: token at index 1 is -1"),
        (nums(&[f64::NAN]), zero.clone(), "RangeError: token at index 0 is NaN"),
        (js_sys::Array::of1(&"3".into()).into(), zero.clone(), "TypeError: token at index 0 is the string \"3\", not a number"),
        (nums(&[4294967296.0]), zero.clone(), "RangeError: token id 4294967296 at index 0 is out of range (vocab 512)"),
        (nums(&[512.0]), zero.clone(), "RangeError: token id 512 at index 0 is out of range (vocab 512)"),
        (nums(&[]), zero.clone(), "RangeError: tokens must be a non-empty list of token ids"),
        ("1,2".into(), zero.clone(), "TypeError: tokens must be an array (or typed array) of token ids, got the string \"1,2\""),
        (JsValue::UNDEFINED, zero.clone(), "TypeError: tokens must be an array (or typed array) of token ids, got undefined"),
        (toks(&[1]), (-1).into(), "RangeError: startPos must be a non-negative integer, got -1"),
        (toks(&[1]), 0.5.into(), "RangeError: startPos must be a non-negative integer, got 0.5"),
        (toks(&[1]), f64::NAN.into(), "RangeError: startPos must be a non-negative integer, got NaN"),
        (toks(&[1]), "0".into(), "TypeError: startPos must be a non-negative integer, got the string \"0\""),
        (toks(&[1]), JsValue::UNDEFINED, "TypeError: startPos must be a non-negative integer, got undefined"),
        (toks(&[1; 9]), zero.clone(), "RangeError: past the context"),
    ];
    for (tokens, pos, want) in cases {
        let m = forward_err(&llama, tokens, pos).await;
        assert_has(&m, want);
    }
    // Typed arrays are accepted; the model still works after all those rejections.
    let typed = js_sys::Uint32Array::from(&Q8_0.prompt()[..]);
    let row = settle(js_forward(&llama, &typed.into(), &zero)).await.unwrap().unchecked_into::<js_sys::Float32Array>().to_vec();
    assert!(max_abs(&row, &Q8_0.row(Q8_0.prompt().len() - 1)) <= TOLERANCE);
    let m = js_call1(&llama, "decode", &nums(&[2.5])).unwrap_err();
    assert_eq!(error_name(&m).as_string().as_deref(), Some("RangeError"));
    js_call0(&llama, "dispose").unwrap();
    let m = forward_err(&llama, toks(&[1]), 0.into()).await;
    assert_has(&m, "Error: this model was disposed");
}

/// The KV-cache gap check. NOTE: this test passes only once the engine's gap check
/// (`src/llama.rs`, `Error::Input("startPos N leaves a gap ...")`, on the lead's branch) is
/// merged; before that `forward` reads cache slots never written and resolves.
#[wasm_bindgen_test]
async fn a_start_position_past_the_filled_cache_is_a_range_error_naming_the_gap() {
    let dev = device(true).await;
    let llama = load(&dev, &Q8_0, Some(16)).await;
    let prompt = Q8_0.prompt();
    forward(&llama, &prompt[..2], 0).await.unwrap();
    let m = forward_err(&llama, toks(&[prompt[2]]), 5.into()).await;
    assert_has(&m, "RangeError: startPos 5 leaves a gap");
    // Continuing at the first empty slot, or re-running from an earlier position, is allowed.
    forward(&llama, &prompt[2..3], 2).await.unwrap();
    let row = forward(&llama, &prompt, 0).await.unwrap();
    assert!(max_abs(&row, &Q8_0.row(prompt.len() - 1)) <= TOLERANCE);
    js_call0(&llama, "dispose").unwrap();
}

/// `forwardTopK` against a stable descending sort of `forward`'s logits at the same position:
/// same ids in the same order, bit-identical logits; bad k rejected with named errors.
#[wasm_bindgen_test]
async fn forward_top_k_matches_the_sorted_logits_of_forward() {
    let dev = device(true).await;
    let llama = load(&dev, &Q8_0, Some(16)).await;
    let prompt = Q8_0.prompt();
    let full = forward(&llama, &prompt, 0).await.unwrap();
    let mut order: Vec<u32> = (0..full.len() as u32).collect();
    order.sort_by(|&a, &b| full[b as usize].total_cmp(&full[a as usize]).then(a.cmp(&b)));
    for k in [1u32, 40, 128] {
        let p = js_call3(&llama, "forwardTopK", &toks(&prompt), &0.into(), &k.into()).unwrap().unchecked_into::<js_sys::Promise>();
        let top = settle(p).await.unwrap();
        let ids = js_get(&top, "ids").unchecked_into::<js_sys::Uint32Array>().to_vec();
        let logits = js_get(&top, "logits").unchecked_into::<js_sys::Float32Array>().to_vec();
        assert_eq!(ids, order[..k as usize], "top-{k} ids");
        for (id, l) in ids.iter().zip(&logits) {
            assert_eq!(l.to_bits(), full[*id as usize].to_bits(), "top-{k}: logit of id {id}");
        }
    }
    for (k, want) in [
        (JsValue::from(0), "RangeError: k must be an integer from 1 to 128, got 0"),
        (JsValue::from(129), "RangeError: top-k: k = 129"),
        (JsValue::from(2.5), "RangeError: k must be an integer from 1 to 128, got 2.5"),
        (JsValue::from("4"), "TypeError: k must be an integer from 1 to 128, got the string \"4\""),
    ] {
        let p = js_call3(&llama, "forwardTopK", &toks(&prompt), &0.into(), &k).unwrap().unchecked_into::<js_sys::Promise>();
        assert_has(&settle(p).await.unwrap_err(), want);
    }
    js_call0(&llama, "dispose").unwrap();
}

// ---------------------------------------------------------------------------------------------
// Sources: Blob, Response, ReadableStream; progress; abort

/// Loads `source`, checks the prompt's last row against the reference and the progress calls
/// (one per tensor, monotonic, complete), and disposes.
async fn check_source(dev: &JsValue, what: &str, source: JsValue) {
    let rec = recorder(&JsValue::NULL, -1);
    let opts = js_sys::Object::new();
    js_sys::Reflect::set(&opts, &"onProgress".into(), &rec).unwrap();
    js_sys::Reflect::set(&opts, &"ctx".into(), &16.into()).unwrap();
    let llama = create(dev, source, Some(opts.into())).await.unwrap_or_else(|e| panic!("{what}: {e}"));
    let row = forward(&llama, &Q8_0.prompt(), 0).await.unwrap();
    let d = max_abs(&row, &Q8_0.row(Q8_0.prompt().len() - 1));
    assert!(d <= TOLERANCE, "{what}: row differs by {d}");
    assert_eq!(config_u32(&llama, "ctx"), 16.0, "{what}: options.ctx");
    let calls: Vec<(f64, f64, f64, f64)> = js_sys::Array::from(&js_get(&rec, "calls"))
        .iter()
        .map(|p| {
            let f = |k: &str| js_get(&p, k).as_f64().unwrap();
            (f("bytesDone"), f("bytesTotal"), f("tensorsDone"), f("tensorsTotal"))
        })
        .collect();
    let last = *calls.last().unwrap_or_else(|| panic!("{what}: no progress"));
    assert_eq!(calls.len() as f64, last.3, "{what}: one progress call per tensor");
    assert_eq!((last.0, last.2), (last.1, last.3), "{what}: progress ends complete");
    assert_eq!(last.1, config_u32(&llama, "fileTensorBytes"), "{what}: bytesTotal");
    assert!(calls.windows(2).all(|w| w[1].0 > w[0].0 && w[1].2 == w[0].2 + 1.0), "{what}: monotonic");
    js_call0(&llama, "dispose").unwrap();
}

#[wasm_bindgen_test]
async fn blobs_responses_and_streams_load_like_the_array_buffer() {
    let dev = device(true).await;
    let u8 = js_sys::Uint8Array::from(Q8_0.model);
    let n = Q8_0.model.len() as f64;
    check_source(&dev, "Blob", blob_of(&u8)).await;
    // Odd chunk sizes: tensors straddle chunks; Content-Length known: streamed window by window.
    check_source(&dev, "Response (streamed)", response_of(&u8, 4099, n)).await;
    // No length: collected into a Blob first.
    check_source(&dev, "Response without Content-Length", response_of(&u8, 65536, -1.0)).await;
    check_source(&dev, "ReadableStream", stream_of(&u8, 1 << 20)).await;

    // A stream shorter than its Content-Length, and a header cut short, are named.
    let short = Q8_0.model.len() - 5000;
    let cut = js_sys::Uint8Array::from(&Q8_0.model[..short]);
    let m = create(&dev, response_of(&cut, 8192, n), None).await.unwrap_err();
    assert_has(&m, &format!("Error: truncated GGUF: tensor data (the stream ended after {short} of its {n} bytes)"));
    assert_has(&m, &format!("but the file has {short} bytes"));
    let m = create(&dev, response_of(&js_sys::Uint8Array::from(&Q8_0.model[..100]), 64, n), None).await.unwrap_err();
    assert_has(&m, &format!("Error: truncated GGUF: header (the stream ended after 100 of its {n} bytes)"));
    let m = create(&dev, blob_of(&js_sys::Uint8Array::from(&Q8_0.model[..100])), None).await.unwrap_err();
    assert_has(&m, "Error: truncated GGUF");
    // A used body is a TypeError.
    let r = response_of(&u8, 8192, n);
    check_source(&dev, "Response (first use)", r.clone()).await;
    assert_has(&create(&dev, r, None).await.unwrap_err(), "TypeError: the Response body was already read");
}

#[wasm_bindgen_test]
async fn an_aborted_load_rejects_with_the_signals_reason() {
    let dev = device(true).await;
    let u8 = js_sys::Uint8Array::from(Q8_0.model);
    for (what, source) in [("ArrayBuffer", Q8_0.buffer()), ("Blob", blob_of(&u8)), ("stream", response_of(&u8, 4096, Q8_0.model.len() as f64))] {
        let controller = js_sys::Reflect::construct(&js_get(&js_sys::global(), "AbortController").into(), &js_sys::Array::new()).unwrap();
        let rec = recorder(&controller, 3);
        let opts = js_sys::Object::new();
        js_sys::Reflect::set(&opts, &"onProgress".into(), &rec).unwrap();
        js_sys::Reflect::set(&opts, &"signal".into(), &js_get(&controller, "signal")).unwrap();
        let m = create(&dev, source, Some(opts.into())).await.expect_err("aborted");
        assert_has(&m, "AbortError");
        let calls = js_sys::Array::from(&js_get(&rec, "calls")).length();
        assert!(calls < 10, "{what}: the load went on after the abort ({calls} progress calls)");
    }
    // Already aborted: rejects before reading anything.
    let controller = js_sys::Reflect::construct(&js_get(&js_sys::global(), "AbortController").into(), &js_sys::Array::new()).unwrap();
    js_call1(&controller, "abort", &"stop".into()).unwrap();
    let opts = js_sys::Object::new();
    js_sys::Reflect::set(&opts, &"signal".into(), &js_get(&controller, "signal")).unwrap();
    let e = JsFuture::from(web::create_llama(dev.clone(), Q8_0.buffer(), Some(opts.into()))).await.unwrap_err();
    assert_eq!(e.as_string().as_deref(), Some("stop"), "rejects with signal.reason");
    // The device is fine afterwards.
    let llama = load(&dev, &Q8_0, Some(8)).await;
    assert_eq!(forward(&llama, &[1], 0).await.unwrap().len(), 512);
    js_call0(&llama, "dispose").unwrap();
}

// ---------------------------------------------------------------------------------------------
// generate

#[wasm_bindgen(inline_js = r#"
export function jsGenerate(llama, tokens, pos, opts) {
  try { return llama.generate(tokens, pos, opts); }
  catch (e) { return Promise.reject(new Error('SYNC THROW: ' + (e && e.message))); }
}
// onTokens recording each block (as a plain array); returns false at block `stopAt` (never when
// < 0); aborts `controller` at block `abortAt`; throws at block `throwAt`.
export function blockRecorder(stopAt, controller, abortAt, throwAt) {
  const blocks = [];
  const f = (ids) => {
    if (!(ids instanceof Int32Array)) throw new Error('onTokens got ' + Object.prototype.toString.call(ids));
    blocks.push(Array.from(ids));
    if (blocks.length === abortAt) controller.abort();
    if (blocks.length === throwAt) throw new TypeError('thrown by onTokens');
    return blocks.length === stopAt ? false : undefined;
  };
  f.blocks = blocks;
  return f;
}
export function withKey(o, key, v) { o[key] = v; return o; }
// onTokens calling llama.forward; `settled()` gives each forward's outcome.
export function forwardCaller(llama) {
  const seen = [];
  const f = () => { seen.push(llama.forward([1], 0).then(() => 'resolved', (e) => e.name + ': ' + e.message)); };
  f.settled = () => Promise.all(seen);
  return f;
}
export function newAbortController() { return new AbortController(); }
"#)]
extern "C" {
    #[wasm_bindgen(js_name = jsGenerate)]
    fn js_generate(llama: &JsValue, tokens: &JsValue, pos: &JsValue, opts: &JsValue) -> js_sys::Promise;
    #[wasm_bindgen(js_name = blockRecorder)]
    fn block_recorder(stop_at: i32, controller: &JsValue, abort_at: i32, throw_at: i32) -> JsValue;
    #[wasm_bindgen(js_name = withKey)]
    fn with_key(o: &JsValue, key: &str, v: &JsValue) -> JsValue;
    #[wasm_bindgen(js_name = newAbortController)]
    fn new_abort_controller() -> JsValue;
    #[wasm_bindgen(js_name = forwardCaller)]
    fn forward_caller(llama: &JsValue) -> JsValue;
}

fn json(s: &str) -> JsValue {
    js_sys::JSON::parse(s).unwrap()
}

/// `llama.generate(tokens, pos, opts)`: the ids and the stop reason.
async fn generate(llama: &JsValue, tokens: &[u32], pos: u32, opts: &JsValue) -> Result<(Vec<u32>, String), String> {
    let g = settle(js_generate(llama, &toks(tokens), &pos.into(), opts)).await?;
    let ids = js_get(&g, "ids").dyn_into::<js_sys::Int32Array>().expect("ids is an Int32Array").to_vec();
    Ok((ids.iter().map(|&x| x as u32).collect(), js_get(&g, "stopReason").as_string().unwrap()))
}

fn recorded(f: &JsValue) -> Vec<Vec<u32>> {
    let blocks: js_sys::Array = js_get(f, "blocks").unchecked_into();
    blocks.iter().map(|b| b.unchecked_into::<js_sys::Array>().iter().map(|x| x.as_f64().unwrap() as u32).collect()).collect()
}

/// Greedy `generate` gives the `forward` loop's ids (the reference's); `onTokens` gets them in
/// blocks; a stop id ends it and the cache goes on from there (the reference's row); `onTokens`
/// returning false and an aborted signal give 'abort'; a sampler's draws are the CPU
/// reference's on the replayed logits, and the same seed gives the same ids.
#[wasm_bindgen_test]
async fn generate_matches_the_forward_loop_streams_blocks_and_stops() {
    let dev = device(true).await;
    let llama = load(&dev, &F32, None).await;
    let (prompt, want) = (F32.prompt(), F32.greedy());
    let (p, n) = (prompt.len(), want.len());
    let mut logits = forward(&llama, &prompt, 0).await.unwrap();
    let mut looped = Vec::new();
    for j in 0..n {
        looped.push(argmax(&logits));
        if j + 1 < n {
            logits = forward(&llama, &[looped[j]], (p + j) as u32).await.unwrap();
        }
    }
    assert_eq!(looped, want, "the forward loop against the reference");

    let rec = block_recorder(-1, &JsValue::NULL, -1, -1);
    let opts = with_key(&json(&format!("{{\"maxTokens\": {n}, \"block\": 3}}")), "onTokens", &rec);
    let (ids, reason) = generate(&llama, &prompt, 0, &opts).await.unwrap();
    assert_eq!((ids.clone(), reason.as_str()), (looped.clone(), "length"), "generate against the forward loop");
    let blocks = recorded(&rec);
    assert_eq!(blocks.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 3, 3, 3, 3, 2]);
    assert_eq!(blocks.concat(), ids, "onTokens's blocks");

    // A stop id (its first occurrence at j), then the next forward from the cache.
    let j = (4..n - 1).find(|&j| !want[..j].contains(&want[j])).unwrap();
    let (ids, reason) = generate(&llama, &prompt, 0, &json(&format!("{{\"stopIds\": [{}], \"maxTokens\": 20, \"block\": 4}}", want[j]))).await.unwrap();
    assert_eq!((ids.as_slice(), reason.as_str()), (&want[..=j], "stop"));
    let row = forward(&llama, &[want[j]], (p + j) as u32).await.unwrap();
    let e = max_abs(&row, &F32.row(p + j));
    assert!(e <= TOLERANCE, "the row after the stop differs by {e}");

    // onTokens returning false at block 2; a signal aborted at block 1.
    let rec = block_recorder(2, &JsValue::NULL, -1, -1);
    let (ids, reason) = generate(&llama, &prompt, 0, &with_key(&json("{\"maxTokens\": 20, \"block\": 4}"), "onTokens", &rec)).await.unwrap();
    assert_eq!((ids.as_slice(), reason.as_str()), (&want[..8], "abort"));
    let controller = new_abort_controller();
    let rec = block_recorder(-1, &controller, 1, -1);
    let opts = with_key(&with_key(&json("{\"maxTokens\": 20, \"block\": 5}"), "onTokens", &rec), "signal", &js_get(&controller, "signal"));
    let (ids, reason) = generate(&llama, &prompt, 0, &opts).await.unwrap();
    assert_eq!((ids.as_slice(), reason.as_str()), (&want[..5], "abort"));
    // An exception in onTokens rejects with it.
    let rec = block_recorder(-1, &JsValue::NULL, -1, 1);
    let m = generate(&llama, &prompt, 0, &with_key(&json("{\"maxTokens\": 8, \"block\": 2}"), "onTokens", &rec)).await.unwrap_err();
    assert_has(&m, "TypeError: thrown by onTokens");

    // A sampler, replayed through forward against the CPU reference.
    let opts =
        json("{\"maxTokens\": 12, \"sampler\": {\"temperature\": 1.2, \"topK\": 0, \"topP\": 0.9, \"minP\": 0.02, \"repeatPenalty\": 1.3, \"seed\": 9}}");
    let (ids, _) = generate(&llama, &prompt, 0, &opts).await.unwrap();
    assert_eq!(generate(&llama, &prompt, 0, &opts).await.unwrap().0, ids, "the same seed, the same ids");
    let s = webgpu_llama::Sampler { temperature: 1.2, top_k: 0, top_p: 0.9, min_p: 0.02, repeat_penalty: 1.3, repeat_window: 64, seed: 9 };
    let mut seq = prompt.clone();
    let mut logits = forward(&llama, &prompt, 0).await.unwrap();
    let mut ambiguous = 0;
    for (i, &id) in ids.iter().enumerate() {
        let (want, margin) = webgpu_llama::sample::reference_pick(&logits, &seq[seq.len().saturating_sub(64)..], &s, (p - 1 + i) as u32);
        if margin < 1e-4 {
            ambiguous += 1;
        } else {
            assert_eq!(id, want, "sampled id {i}");
        }
        seq.push(id);
        logits = forward(&llama, &[id], (p + i) as u32).await.unwrap();
    }
    assert!(ambiguous <= 1, "{ambiguous} ambiguous draws");
    js_call0(&llama, "dispose").unwrap();
}

#[wasm_bindgen_test]
async fn bad_generate_options_reject_with_named_errors() {
    let dev = device(true).await;
    let llama = load(&dev, &Q8_0, Some(16)).await;
    let prompt = Q8_0.prompt();
    let cases: Vec<(JsValue, &str)> = vec![
        ("x".into(), "TypeError: options must be an object, got the string \"x\""),
        (json("{\"maxTokens\": 0}"), "RangeError: options.maxTokens must be an integer from 1"),
        (json("{\"maxTokens\": \"3\"}"), "TypeError: options.maxTokens must be an integer"),
        (json("{\"block\": 0}"), "RangeError: options.block must be an integer from 1 to 256, got 0"),
        (json("{\"block\": 2.5}"), "RangeError: options.block"),
        (json("{\"stopIds\": [512]}"), "RangeError: options.stopIds: token id 512 at index 0 is out of range"),
        (json("{\"stopIds\": 5}"), "TypeError: options.stopIds"),
        (json("{\"onTokens\": 3}"), "TypeError: options.onTokens must be a function"),
        (json("{\"signal\": {}}"), "TypeError: options.signal must be an AbortSignal"),
        (json("{\"sampler\": 1}"), "TypeError: options.sampler must be an object"),
        (json("{\"sampler\": {\"temperature\": -1}}"), "RangeError: sampler.temperature must be a finite number >= 0"),
        (json("{\"sampler\": {\"topP\": 0}}"), "RangeError: sampler.topP must be in (0, 1]"),
        (json("{\"sampler\": {\"minP\": 1}}"), "RangeError: sampler.minP must be in [0, 1)"),
        (json("{\"sampler\": {\"topK\": 129}}"), "RangeError: sampler.topK must be an integer from 0 to 128"),
        (json("{\"sampler\": {\"repeatPenalty\": 0}}"), "RangeError: sampler.repeatPenalty"),
        (json("{\"sampler\": {\"seed\": -1}}"), "RangeError: sampler.seed"),
        (json("{\"sampler\": {\"minP\": \"x\"}}"), "TypeError: sampler.minP must be a number"),
    ];
    for (opts, want) in cases {
        assert_has(&generate(&llama, &prompt, 0, &opts).await.unwrap_err(), want);
    }
    assert_has(&generate(&llama, &[512], 0, &JsValue::UNDEFINED).await.unwrap_err(), "RangeError: token id 512");
    // A forward while generate runs (from onTokens) rejects.
    let caller = forward_caller(&llama);
    generate(&llama, &prompt, 0, &with_key(&json("{\"maxTokens\": 4, \"block\": 2}"), "onTokens", &caller)).await.unwrap();
    let settled = JsFuture::from(js_call0(&caller, "settled").unwrap().unchecked_into::<js_sys::Promise>()).await.unwrap();
    let settled: Vec<String> = settled.unchecked_into::<js_sys::Array>().iter().map(|x| x.as_string().unwrap()).collect();
    assert_eq!(settled.len(), 2);
    for m in &settled {
        assert_has(m, "RangeError: a generate call is under way");
    }
    assert_has(&generate(&llama, &prompt, 20, &JsValue::UNDEFINED).await.unwrap_err(), "RangeError: past the context");
    // The context's end: 16 positions, a 5-token prompt: 12 ids (the last one picked, not fed).
    let (ids, reason) = generate(&llama, &prompt, 0, &json("{\"maxTokens\": 100}")).await.unwrap();
    assert_eq!((ids.as_slice(), reason.as_str()), (&Q8_0.greedy()[..12], "length"));
    js_call0(&llama, "dispose").unwrap();
}
