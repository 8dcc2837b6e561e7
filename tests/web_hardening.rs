#![cfg(target_arch = "wasm32")]
//! Hardening of the browser module in headless Chromium (WebGPU on SwiftShader): no GPU buffer
//! outlives `dispose()` (over create / forward / dispose cycles, and with calls in flight), wasm
//! memory stays bounded, calls in flight give the awaited calls' results or a clear error, a
//! model that does not fit (a device limit, a forced out-of-memory) is an `OutOfMemoryError`
//! that frees what was uploaded, and device loss is a `DeviceLostError`, never a hang.
//!
//! The buffers are counted by the host, not by the module: the page hands `createLlama` its
//! `GPUDevice` behind a `Proxy` that counts the buffers created through it and not yet
//! destroyed, tracks the error-scope depth, and can answer the N-th buffer's out-of-memory error
//! scope with a `GPUOutOfMemoryError` (what WebGPU reports when an allocation fails; the buffer
//! itself is real, so a model that forgets it leaves it counted). Every await is raced against a
//! timeout, so that a hang fails the test.
//!
//! Run: `scripts/test-web.sh --wasm` (or `cargo test --target wasm32-unknown-unknown --test
//! web_hardening`).

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_test::*;

use webgpu_llama::web;

mod web_common;
use web_common::*;

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen(inline_js = r#"
const LIMIT_MS = 60000;
// Rejects with 'TIMEOUT ...' when `p` has not settled in LIMIT_MS: a hang fails the test.
function timed(p, what) {
  let t;
  const timeout = new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`TIMEOUT: ${what} did not settle in ${LIMIT_MS} ms`)), LIMIT_MS); });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}
// { ok, value } or { ok: false, name, message, error }; a timeout is thrown on.
async function outcome(p, what) {
  try { return { ok: true, value: await timed(p, what) }; } catch (e) {
    if (String(e && e.message).startsWith('TIMEOUT')) throw e;
    return { ok: false, name: e && e.name, message: e && e.message, error: e };
  }
}

// The host's device behind a Proxy: `counter` has the buffers created through it and not
// destroyed (`live`, `bytes`), all created (`created`), the open error scopes (`depth`); with
// `oomAt` > 0 the innermost 'out-of-memory' scope open at the oomAt-th createBuffer pops a
// GPUOutOfMemoryError.
export function countedDevice(device, oomAt) {
  const counter = { live: 0, bytes: 0, created: 0, depth: 0, injected: 0 };
  const scopes = [];
  const createBuffer = (desc) => {
    const b = device.createBuffer(desc);
    counter.created++; counter.live++; counter.bytes += b.size;
    if (counter.created === oomAt) {
      const s = scopes.findLast((s) => s.filter === 'out-of-memory');
      if (s) { s.oom = true; counter.injected++; }
    }
    let destroyed = false;
    b.destroy = () => {
      if (!destroyed) { destroyed = true; counter.live--; counter.bytes -= b.size; }
      GPUBuffer.prototype.destroy.call(b);
    };
    return b;
  };
  const pushErrorScope = (filter) => { scopes.push({ filter, oom: false }); counter.depth++; device.pushErrorScope(filter); };
  const popErrorScope = () => {
    const s = scopes.pop(); counter.depth--;
    return device.popErrorScope().then((e) => e || (s && s.oom ? new GPUOutOfMemoryError(`injected: buffer ${oomAt} could not be allocated`) : null));
  };
  const own = { createBuffer, pushErrorScope, popErrorScope };
  const proxy = new Proxy(device, {
    get(t, k) {
      if (k in own) return own[k];
      const v = Reflect.get(t, k);
      return typeof v === 'function' ? v.bind(t) : v;
    },
    set(t, k, v) { return Reflect.set(t, k, v); },
  });
  return { device: proxy, counter };
}
const live = (c) => [c.live, c.bytes];

// The host's own work after the module's: a buffer, a compute pass, a readback, in a validation
// scope of its own; then the device's scope stack must be empty (popErrorScope rejects with an
// OperationError), i.e. the module left none open.
async function hostCompute(device) {
  device.pushErrorScope('validation');
  const code = '@group(0) @binding(0) var<storage, read_write> v: array<u32>;\n' +
    '@compute @workgroup_size(4) fn main(@builtin(global_invocation_id) i: vec3u) { v[i.x] = v[i.x] * 2u + 1u; }';
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
  const b = device.createBuffer({ size: 16, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  const r = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(b, 0, new Uint32Array([1, 2, 3, 4]));
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: b } }] }));
  pass.dispatchWorkgroups(1);
  pass.end();
  enc.copyBufferToBuffer(b, 0, r, 0, 16);
  device.queue.submit([enc.finish()]);
  await timed(r.mapAsync(GPUMapMode.READ), 'the host readback');
  const v = Array.from(new Uint32Array(r.getMappedRange().slice(0)));
  r.unmap(); r.destroy(); b.destroy();
  const err = await device.popErrorScope();
  if (err) return 'host validation error: ' + err.message;
  const balanced = await device.popErrorScope().then(() => false, (e) => e.name === 'OperationError');
  return v.join(',') + (balanced ? '' : ' (an error scope was left open)');
}

// `n` createLlama / dispose cycles, with a forward (a prompt, then a one-token step recorded
// ahead) in every `every`-th cycle and the last: a forward compiles the model's kernels, seconds
// on SwiftShader.
export async function cycles(create, memory, device, buffer, n, every) {
  const { device: d, counter } = countedDevice(device, 0);
  const out = { live: [], peak: 0, gpuBytes: 0, memory: [], same: true, ms: 0, forwards: 0 };
  let first = null;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const llama = await timed(create(d, buffer, { contextLength: 16 }), `createLlama ${i}`);
    out.gpuBytes = llama.config.gpuBytes;
    if (i % every === 0 || i === n - 1) {
      await timed(llama.forward([1, 403], 0), `forward ${i}`);
      const logits = await timed(llama.forward([407], 2), `forward ${i}`);
      out.forwards++;
      out.peak = Math.max(out.peak, counter.bytes);
      if (!first) first = logits; else if (logits.some((x, j) => x !== first[j])) out.same = false;
    }
    llama.dispose();
    out.live.push(live(counter));
    out.memory.push(memory());
  }
  out.ms = performance.now() - t0;
  out.host = await hostCompute(device);
  return out;
}

export async function disposeInFlight(create, device, buffer, prompt) {
  const { device: d, counter } = countedDevice(device, 0);
  const r = {};
  // A forward issued before dispose().
  let llama = await timed(create(d, buffer, { contextLength: 64 }), 'createLlama');
  const f = llama.forward(prompt, 0);
  llama.dispose();
  r.forward = await outcome(f, 'a forward issued before dispose()');
  r.forwardLive = live(counter);
  // dispose() from onTokens: at the first of several blocks, and at the last block.
  for (const [key, at, maxTokens] of [['generateFirst', 1, 40], ['generateLast', 2, 4]]) {
    llama = await timed(create(d, buffer, { contextLength: 64 }), 'createLlama');
    let calls = 0;
    const onTokens = () => { if (++calls === at) llama.dispose(); };
    r[key] = await outcome(llama.generate(prompt, 0, { maxTokens, block: 2, onTokens }), 'generate disposed from onTokens');
    r[key].calls = calls;
    r[key + 'Live'] = live(counter);
  }
  // dispose() right after generate() returns its promise (before its first step).
  llama = await timed(create(d, buffer, { contextLength: 64 }), 'createLlama');
  const g = llama.generate(prompt, 0, { maxTokens: 8 });
  llama.dispose();
  r.generateAtOnce = await outcome(g, 'generate disposed at once');
  r.generateAtOnceLive = live(counter);
  r.depth = counter.depth;
  r.host = await hostCompute(device);
  return r;
}

// The same calls, awaited one by one: a prompt, a generate from the first greedy id, a forward
// of the last generated id.
async function inOrder(llama, prompt, g0, opts) {
  const p = prompt.length;
  const logits = await timed(llama.forward(prompt, 0), 'forward');
  const g = await timed(llama.generate([g0], p, opts), 'generate');
  const next = await timed(llama.forward([g.ids.at(-1)], p + g.ids.length), 'forward');
  return { logits: Array.from(logits), ids: Array.from(g.ids), next: Array.from(next) };
}

export async function inFlight(create, device, bufferA, bufferB, prompt, g0) {
  const { device: d, counter } = countedDevice(device, 0);
  const a = await timed(create(d, bufferA, { contextLength: 64 }), 'createLlama A');
  const b = await timed(create(d, bufferB, { contextLength: 64 }), 'createLlama B');
  const opts = { maxTokens: 6, block: 2 };
  const r = { want: [await inOrder(a, prompt, g0, opts), await inOrder(b, prompt, g0, opts)] };
  // Both models' calls issued without awaiting, interleaved.
  const p = prompt.length;
  const la = a.forward(prompt, 0), lb = b.forward(prompt, 0);
  const ga = a.generate([g0], p, opts), gb = b.generate([g0], p, opts);
  // While A's generate is under way (not yet started: its promise was just returned), calls
  // on A are refused; B is not affected.
  const refusedForward = a.forward([403], 0), refusedGenerate = a.generate([g0], p, opts);
  const [ra, rb, rga, rgb] = await timed(Promise.all([la, lb, ga, gb]), 'the calls in flight');
  const na = a.forward([rga.ids.at(-1)], p + rga.ids.length), nb = b.forward([rgb.ids.at(-1)], p + rgb.ids.length);
  const [rna, rnb] = await timed(Promise.all([na, nb]), 'the next forwards');
  r.got = [
    { logits: Array.from(ra), ids: Array.from(rga.ids), next: Array.from(rna) },
    { logits: Array.from(rb), ids: Array.from(rgb.ids), next: Array.from(rnb) },
  ];
  r.refusedForward = await outcome(refusedForward, 'the refused forward');
  r.refusedGenerate = await outcome(refusedGenerate, 'the refused generate');
  a.dispose(); b.dispose();
  r.live = live(counter);
  r.host = await hostCompute(device);
  return r;
}

export async function outOfMemory(create, device, small, buffer, oomAt) {
  const r = {};
  const { device: d, counter } = countedDevice(device, oomAt);
  r.oom = await outcome(create(d, buffer, { contextLength: 16 }), 'createLlama with an allocation failing');
  r.injected = counter.injected; r.created = counter.created; r.live = live(counter); r.depth = counter.depth;
  r.host = await hostCompute(device);
  // The device loads the model afterwards (the injection was for one buffer only).
  const llama = await timed(create(d, buffer, { contextLength: 16 }), 'createLlama after the failure');
  r.after = (await timed(llama.forward([1], 0), 'forward')).length;
  llama.dispose();
  r.afterLive = live(counter);
  // Beyond the limits of a device with WebGPU's defaults (128 MiB per storage binding).
  const s = countedDevice(small, 0);
  r.tooLarge = await outcome(create(s.device, buffer, { contextLength: 2000000 }), 'createLlama too large');
  r.tooLargeLive = live(s.counter);
  r.smallHost = await hostCompute(small);
  return r;
}

export async function deviceLoss(create, devices, buffer, prompt) {
  const r = {};
  // During the load: from its progress callback, and right after the call.
  let dev = devices[0];
  const onProgress = (p) => { if (p.tensorsDone === 1) dev.destroy(); };
  r.load = await outcome(create(dev, buffer, { contextLength: 16, onProgress }), 'createLlama, device destroyed in onProgress');
  const early = create(devices[1], buffer, { contextLength: 16 });
  devices[1].destroy();
  r.loadEarly = await outcome(early, 'createLlama, device destroyed at once');
  // During a forward, during a generate, and between calls.
  const { device: d, counter } = countedDevice(devices[2], 0);
  const llama = await timed(create(d, buffer, { contextLength: 64 }), 'createLlama');
  const f = llama.forward(prompt, 0);
  devices[2].destroy();
  r.forward = await outcome(f, 'forward, device destroyed');
  r.later = await outcome(llama.forward([1], 0), 'forward after the loss');
  r.laterGenerate = await outcome(llama.generate([1], 0, { maxTokens: 4 }), 'generate after the loss');
  llama.dispose();
  r.live = live(counter);
  const other = await timed(create(devices[3], buffer, { contextLength: 64 }), 'createLlama');
  let calls = 0;
  const onTokens = () => { if (++calls === 1) devices[3].destroy(); };
  r.generate = await outcome(other.generate(prompt, 0, { maxTokens: 40, block: 1, onTokens }), 'generate, device destroyed in onTokens');
  other.dispose();
  return r;
}
"#)]
extern "C" {
    #[wasm_bindgen(catch)]
    async fn cycles(create: &JsValue, memory: &JsValue, device: &JsValue, buffer: &JsValue, n: u32, every: u32) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = disposeInFlight)]
    async fn dispose_in_flight(create: &JsValue, device: &JsValue, buffer: &JsValue, prompt: Vec<u32>) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = inFlight)]
    async fn in_flight(create: &JsValue, device: &JsValue, a: &JsValue, b: &JsValue, prompt: Vec<u32>, g0: u32) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = outOfMemory)]
    async fn out_of_memory(create: &JsValue, device: &JsValue, small: &JsValue, buffer: &JsValue, oom_at: u32) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(catch, js_name = deviceLoss)]
    async fn device_loss(create: &JsValue, devices: &JsValue, buffer: &JsValue, prompt: Vec<u32>) -> Result<JsValue, JsValue>;
}

/// `createLlama` as a JS function, for the scenarios above.
fn create_fn() -> JsValue {
    web::reinit_after_panic(false);
    Closure::<dyn Fn(JsValue, JsValue, JsValue) -> js_sys::Promise>::new(|d, s, o| web::create_llama(d, s, Some(o))).into_js_value()
}

fn at(v: &JsValue, path: &str) -> JsValue {
    path.split('.').fold(v.clone(), |v, k| js_sys::Reflect::get(&v, &k.into()).unwrap_or(JsValue::UNDEFINED))
}

fn text(v: &JsValue, path: &str) -> String {
    at(v, path).as_string().unwrap_or_else(|| format!("{:?}", at(v, path)))
}

fn num(v: &JsValue, path: &str) -> f64 {
    at(v, path).as_f64().unwrap_or_else(|| panic!("{path} is not a number: {:?}", at(v, path)))
}

/// `[live buffers, live bytes]` at `path`.
fn live(v: &JsValue, path: &str) -> (f64, f64) {
    let a: js_sys::Array = at(v, path).unchecked_into();
    (a.get(0).as_f64().unwrap(), a.get(1).as_f64().unwrap())
}

/// "ok" or "Name: message" of an outcome at `path`.
fn settled(v: &JsValue, path: &str) -> String {
    if at(v, &format!("{path}.ok")).as_bool() == Some(true) {
        "ok".into()
    } else {
        format!("{}: {}", text(v, &format!("{path}.name")), text(v, &format!("{path}.message")))
    }
}

async fn run(p: impl std::future::Future<Output = Result<JsValue, JsValue>>) -> JsValue {
    p.await.unwrap_or_else(|e| panic!("the scenario failed: {}", text(&e, "message")))
}

/// 100 createLlama / dispose cycles on one device, with forwards in every 50th and the last
/// (a forward compiles the model's kernels: about 15 s a cycle on SwiftShader with 2 busy CPU
/// cores, so not in every cycle): after each dispose() no buffer the model made is alive, every
/// forward gives the first one's logits, and wasm memory does not grow after the first cycle.
#[wasm_bindgen_test]
async fn create_forward_dispose_cycles_leave_no_buffer_and_bounded_wasm_memory() {
    const CYCLES: u32 = 100;
    let dev = device(true).await;
    let memory = Closure::<dyn Fn() -> f64>::new(web::wasm_memory_bytes).into_js_value();
    let r = run(cycles(&create_fn(), &memory, &dev, &Q8_0.buffer(), CYCLES, 50)).await;
    assert_eq!(num(&r, "forwards"), 3.0);
    let lives: js_sys::Array = at(&r, "live").unchecked_into();
    for (i, l) in lives.iter().enumerate() {
        let l: js_sys::Array = l.unchecked_into();
        assert_eq!((l.get(0).as_f64(), l.get(1).as_f64()), (Some(0.0), Some(0.0)), "cycle {i}: buffers (count, bytes) alive after dispose()");
    }
    assert!(num(&r, "peak") >= num(&r, "gpuBytes"), "the counted buffers hold config.gpuBytes");
    assert_eq!(at(&r, "same").as_bool(), Some(true), "every cycle gives the first cycle's logits");
    let mem: Vec<f64> = at(&r, "memory").unchecked_into::<js_sys::Array>().iter().map(|x| x.as_f64().unwrap()).collect();
    let grown = mem[mem.len() - 1] - mem[1.min(mem.len() - 1)];
    web_sys::console::log_1(
        &format!("{CYCLES} cycles in {:.1} s: wasm memory {:?} MiB after cycle 1, grew {grown} bytes since", num(&r, "ms") / 1e3, mem[0] / 1048576.0).into(),
    );
    assert!(grown <= 4.0 * 1048576.0, "wasm memory grew by {grown} bytes over the cycles");
    assert_eq!(text(&r, "host"), "3,5,7,9");
}

/// dispose() with a forward or a generate in flight: the forward resolves with its logits, a
/// generate rejects with "use after dispose()" at its next block (or resolves when disposed at
/// its last), and once they settle no buffer is alive.
#[wasm_bindgen_test]
async fn dispose_with_calls_in_flight_settles_them_and_frees_every_buffer() {
    let dev = device(true).await;
    let r = run(dispose_in_flight(&create_fn(), &dev, &Q8_0.buffer(), Q8_0.prompt())).await;
    let logits: Vec<f32> = at(&r, "forward.value").unchecked_into::<js_sys::Float32Array>().to_vec();
    assert!(max_abs(&logits, &Q8_0.row(Q8_0.prompt().len() - 1)) <= TOLERANCE, "the forward issued before dispose()");
    assert_eq!(argmax(&logits), Q8_0.greedy()[0]);
    assert_eq!(settled(&r, "generateFirst"), "Error: this model was disposed: use after dispose()");
    assert_eq!(num(&r, "generateFirst.calls"), 1.0);
    assert_eq!(settled(&r, "generateLast"), "ok");
    assert_eq!(settled(&r, "generateAtOnce"), "Error: this model was disposed: use after dispose()");
    for key in ["forwardLive", "generateFirstLive", "generateLastLive", "generateAtOnceLive"] {
        assert_eq!(live(&r, key), (0.0, 0.0), "{key}: buffers (count, bytes) alive after dispose()");
    }
    assert_eq!(num(&r, "depth"), 0.0, "error scopes left open");
    assert_eq!(text(&r, "host"), "3,5,7,9");
}

/// Calls in flight (not awaited) on one model and on two models of one device give the logits
/// and ids of the same calls awaited in order; calls made while a generate is under way on that
/// model are refused with a RangeError instead of being slipped in ahead of its steps.
#[wasm_bindgen_test]
async fn calls_in_flight_match_the_awaited_calls_or_are_refused() {
    let dev = device(true).await;
    let (prompt, g0) = (Q8_0.prompt(), Q8_0.greedy()[0]);
    let r = run(in_flight(&create_fn(), &dev, &Q8_0.buffer(), &F32.buffer(), prompt, g0)).await;
    for m in 0..2 {
        for key in ["logits", "ids", "next"] {
            let (want, got) = (at(&r, &format!("want.{m}.{key}")), at(&r, &format!("got.{m}.{key}")));
            let (want, got) = (js_sys::JSON::stringify(&want).unwrap(), js_sys::JSON::stringify(&got).unwrap());
            assert!(want == got, "model {m}: {key} in flight differ from the awaited call's");
        }
    }
    let ids: Vec<u32> = (0..6).map(|i| num(&r, &format!("want.0.ids.{i}")) as u32).collect();
    assert_eq!(ids, Q8_0.greedy()[1..7], "the awaited generate against the reference's greedy ids");
    let under_way = "RangeError: a generate call is under way: await it before the next forward or generate";
    assert_eq!(settled(&r, "refusedForward"), under_way);
    assert_eq!(settled(&r, "refusedGenerate"), under_way);
    assert_eq!(live(&r, "live"), (0.0, 0.0));
    assert_eq!(text(&r, "host"), "3,5,7,9");
}

/// A model that does not fit: an allocation that fails with WebGPU's out-of-memory error, and a
/// KV cache beyond the device's maxStorageBufferBindingSize. Both reject with an
/// OutOfMemoryError naming the bytes (and the limit), leave no buffer alive and no error scope
/// open, and the host's device goes on working.
#[wasm_bindgen_test]
async fn a_model_that_does_not_fit_is_an_out_of_memory_error_that_frees_what_it_made() {
    let (dev, small) = (device(true).await, device(false).await);
    let r = run(out_of_memory(&create_fn(), &dev, &small, &Q8_0.buffer(), 5)).await;
    assert_eq!(num(&r, "injected"), 1.0, "the 5th buffer is made inside createLlama's out-of-memory scope");
    let oom = settled(&r, "oom");
    assert!(oom.starts_with("OutOfMemoryError: out of GPU memory: the model needs "), "{oom}");
    let class = web::out_of_memory_error_class();
    let e = at(&r, "oom.error");
    assert!(e.is_instance_of::<js_sys::Error>() && js_sys::Reflect::get(&e, &"constructor".into()).unwrap() == class, "an OutOfMemoryError");
    assert!(num(&r, "oom.error.bytes") > 0.0 && at(&r, "oom.error.limit").is_null());
    assert_eq!(live(&r, "live"), (0.0, 0.0), "buffers alive after the failed load ({} made)", num(&r, "created"));
    assert_eq!(num(&r, "depth"), 0.0, "error scopes left open");
    assert_eq!(text(&r, "host"), "3,5,7,9");
    assert_eq!(num(&r, "after"), 512.0);
    assert_eq!(live(&r, "afterLive"), (0.0, 0.0));
    assert_eq!(
        settled(&r, "tooLarge"),
        "OutOfMemoryError: tensor KV cache needs 256000000 bytes in one GPU buffer but the device's maxStorageBufferBindingSize is 134217728: \
         request a larger maxStorageBufferBindingSize when creating the GPUDevice"
    );
    assert_eq!((num(&r, "tooLarge.error.bytes"), num(&r, "tooLarge.error.limit")), (256000000.0, 134217728.0));
    assert_eq!(text(&r, "tooLarge.error.limitName"), "maxStorageBufferBindingSize");
    assert_eq!(live(&r, "tooLargeLive"), (0.0, 0.0));
    assert_eq!(text(&r, "smallHost"), "3,5,7,9");
}

/// `device.destroy()` during a load (from onProgress, and right after the call), during a
/// forward, during a generate (from onTokens) and before later calls: each rejects with a
/// DeviceLostError within the timeout; dispose() afterwards leaves no buffer alive.
#[wasm_bindgen_test]
async fn device_loss_anywhere_is_a_device_lost_error_not_a_hang() {
    let devices = js_sys::Array::new();
    for _ in 0..4 {
        devices.push(&device(true).await);
    }
    let r = run(device_loss(&create_fn(), &devices, &Q8_0.buffer(), Q8_0.prompt())).await;
    let class = web::device_lost_error_class();
    for key in ["load", "loadEarly", "forward", "later", "laterGenerate", "generate"] {
        let m = settled(&r, key);
        assert!(m.starts_with("DeviceLostError: the GPU device was lost (destroyed"), "{key}: {m}");
        assert!(at(&r, &format!("{key}.error")).is_instance_of::<js_sys::Error>());
        assert!(js_sys::Reflect::get(&at(&r, &format!("{key}.error")), &"constructor".into()).unwrap() == class, "{key}: a DeviceLostError");
    }
    assert_eq!(live(&r, "live"), (0.0, 0.0));
}
