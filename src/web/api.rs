//! The JavaScript API, the seed module's (`createLlama`, `Llama.config`, `Llama.forward`,
//! `testMatvecQ8`) plus `Llama.dispose`, token decoding and `wasmMemoryBytes`. Argument checking
//! and conversion only: the engine does the work.
//!
//! Errors reach JS as `Error` objects whose message is the engine's [`Error`] text (or names the
//! bad argument). Promise-returning functions never throw synchronously: bad arguments reject.

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::adopt::adopt_device;
use super::glue;
use super::js::{describe, get, js_number, object};
use super::promise::{install, on_panic, spawn};
use super::source::{read_header, stream_uploads, JsBytes, Source};
use crate::config::{Config, KvType};
use crate::error::Error;
use crate::gguf::Gguf;
use crate::gpu::Gpu;
use crate::llama::{Llama, LoadOptions, Pending};
use crate::vocab::Vocab;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
/** A loaded model's hyperparameters (the seed's fields first) and what loading it took. */
export interface LlamaConfig {
  /** The GGUF's general.architecture ("llama", "qwen3" ...): the model family. */
  readonly architecture: string;
  /** Model width (llama.embedding_length). */
  readonly d: number;
  /** Transformer blocks (llama.block_count). */
  readonly L: number;
  /** Feed-forward width; the per-expert width for MoE models. */
  readonly ff: number;
  /** Query heads. */
  readonly nh: number;
  /** Key/value heads (GQA when fewer than nh). */
  readonly nkv: number;
  /** Head dimension. */
  readonly hd: number;
  /** KV-cache length in positions: forward(tokens, startPos) needs startPos + tokens.length <= ctx. */
  readonly ctx: number;
  /** The KV cache's element type (options.kvType). */
  readonly kvType: KvType;
  /** Vocabulary size: token ids are 0 .. vocab-1 and forward returns vocab logits. */
  readonly vocab: number;
  /** RMSNorm epsilon. */
  readonly eps: number;
  /** RoPE base. */
  readonly theta: number;
  /** Experts per MoE layer (0 for dense models). */
  readonly experts: number;
  /** Experts used per token (0 for dense models). */
  readonly topk: number;
  /** GPU dispatches recorded per token. */
  readonly dispatchesPerToken: number;
  /** Bytes of weights held on the GPU. */
  readonly weightBytesOnGpu: number;
  /** Bytes of the model's tensors in the GGUF file. */
  readonly fileTensorBytes: number;
  /** Bytes of every GPU buffer the model made (weights, KV cache, activations). */
  readonly gpuBytes: number;
  /** RoPE dimensions per head. */
  readonly nRot: number;
  /** Trained context length (llama.context_length). */
  readonly trainCtx: number;
  /** True when the output head is the token embedding. */
  readonly tiedOutput: boolean;
  /** The device's maxStorageBufferBindingSize and maxBufferSize, in bytes, as the host requested them. */
  readonly maxStorageBufferBindingSize: number;
  readonly maxBufferSize: number;
  /** The adapter, from GPUDevice.adapterInfo. */
  readonly adapter: string;
  /** The subgroup size the kernels were compiled for: the device's when it was created with the
   * `subgroups` feature and its adapterInfo gives one size (subgroupMinSize == subgroupMaxSize);
   * 0 when the kernels use no subgroups. */
  readonly subgroupSize: number;
}

/** Load progress, reported after each tensor is uploaded. */
export interface LoadProgress {
  /** Tensor bytes (as stored in the file) uploaded so far. */
  bytesDone: number;
  bytesTotal: number;
  tensorsDone: number;
  tensorsTotal: number;
}

/** The KV cache's element type: 'f32', or 'f16' (IEEE halves packed two per u32 with
 * pack2x16float, so no shader-f16 feature is needed): half the cache's bytes, logits within about
 * 1e-2 of the f32 cache's (measured on the reference models: see the README). */
export type KvType = 'f32' | 'f16';

/** Options for createLlama. */
export interface LoadOptions {
  /** KV-cache length in positions (default min(llama.context_length, 2048)). */
  contextLength?: number;
  /** Alias of contextLength. */
  ctx?: number;
  /** The KV cache's element type (default 'f32'); 'f16' halves the cache's bytes. A string other
   * than these rejects with a RangeError, another type with a TypeError. */
  kvType?: KvType;
  /** Called after each tensor is on the GPU (the load yields to the event loop between reads, so
   * the page can repaint); an exception thrown here fails the load. */
  onProgress?: (progress: LoadProgress) => void;
  /** Aborts the load: createLlama rejects with signal.reason and frees what it had uploaded. */
  signal?: AbortSignal;
}

/** Where createLlama reads the GGUF from. Blobs and streams are read once, window by window:
 * the whole file is never held in memory (a stream of unknown length is first collected into a
 * Blob). */
export type ModelSource = ArrayBuffer | ArrayBufferView | Blob | Response | ReadableStream<Uint8Array>;

/** forwardTopK's result: the k most likely next tokens, largest logit first (equal logits by
 * lower id), as a stable descending sort of forward's logits would order them. */
export interface TopK {
  /** Token ids, k of them. */
  ids: Uint32Array;
  /** Their logits, bit-identical to forward's. */
  logits: Float32Array;
}

/** generate's sampler, llama.cpp's chain in its order: repetition penalty -> top-k -> top-p ->
 * min-p -> temperature -> draw. Every field is optional; the defaults are llama.cpp's. A value of
 * the wrong type rejects with a TypeError, one out of range with a RangeError naming it. */
export interface Sampler {
  /** Divides the logits before the draw (default 0.8); 0 picks the likeliest token. */
  temperature?: number;
  /** Candidates kept: the topK likeliest (default 40), an integer from 0 to 128; 0 keeps the 128
   * likeliest (candidates are never more than 128). */
  topK?: number;
  /** Keeps the smallest set of the likeliest candidates whose probability reaches topP (at
   * temperature 1), in (0, 1] (default 0.95; 1 keeps all). */
  topP?: number;
  /** Keeps candidates at least minP times as likely as the likeliest, in [0, 1) (default 0.05). */
  minP?: number;
  /** Logits of ids in the window divided by it (multiplied when negative), once per id; > 0
   * (default 1: off). */
  repeatPenalty?: number;
  /** The window: the last repeatWindow ids of the given tokens then the generated ones (default 64). */
  repeatWindow?: number;
  /** Seeds the draws (an integer from 0 to 2^32 - 1, default 0): the draw of a step depends on
   * the seed and the step's position only, so the same call gives the same ids. */
  seed?: number;
}

/** Why generate ended. */
export type StopReason = 'stop' | 'length' | 'abort';

/** Options for generate. */
export interface GenerateOptions {
  /** Ids to generate at most (default 16); fewer where the context ends ('length'). */
  maxTokens?: number;
  /** Sampling; greedy (the likeliest id, the lower of equal logits) when omitted or with
   * temperature 0. */
  sampler?: Sampler;
  /** Generation stops at the first of these it picks (included in ids: 'stop'). */
  stopIds?: ArrayLike<number>;
  /** Called with each block's ids as they arrive; returning false stops ('abort'); a throw
   * rejects generate with it. */
  onTokens?: (ids: Int32Array) => void | boolean;
  /** Checked between blocks: once aborted, generate resolves with 'abort'. */
  signal?: AbortSignal;
  /** Steps run on the GPU between readbacks of their ids, an integer from 1 to 256 (default 16). */
  block?: number;
}

/** generate's result. */
export interface Generated {
  /** The generated ids (a stop id last when stopReason is 'stop'). */
  ids: Int32Array;
  stopReason: StopReason;
}

/** Llama.stagedSteps: how the one-token forwards' steps recorded ahead got their inputs. */
export interface StagedSteps {
  /** Steps whose token id and position came from the mapped staging buffer. */
  staged: number;
  /** Steps recorded afresh (inputs by writeBuffer) because its map had not resolved. */
  afresh: number;
}

/** Llama.profile's result: GPU seconds per kernel of one forward pass, from timestamp queries. */
export interface Profile {
  /** Each dispatch in program order: its kernel (pipeline key; the output head's after "head: "),
   * GPU seconds in a compute pass of its own, and the bytes it moves by the profiler's estimate
   * (weights, activations, KV cache). */
  kernels: { label: string; seconds: number; bytes: number }[];
  /** GPU seconds of the whole pass recorded as forward records it (median of 5). */
  passSeconds: number;
}

/** testMatvecQ8's result: one weight matrix times x, three ways. */
export interface MatvecQ8Result {
  /** Rows (tensor dims[1] * dims[2] ...) and columns (dims[0]). */
  rows: number;
  cols: number;
  /** The GPU f32 matvec kernel on the weights dequantised on the CPU. */
  f32: Float32Array;
  /** The engine's Q8_0 matvec kernel on the weights kept quantised. */
  q8: Float32Array;
  /** CPU reference: dequantised f32 weights times x, summed in f64. */
  ref: Float64Array;
}
"#;

/// The JS error for an engine error: `TypeError` for an argument of the wrong type, `RangeError`
/// for a bad value ([`Error::Input`]), `DeviceLostError` when the device was lost,
/// `OutOfMemoryError` when the model does not fit ([`Error::TooLarge`], [`Error::OutOfMemory`]),
/// else `Error`.
pub(crate) fn js_error(e: Error) -> JsValue {
    let m = e.to_string();
    match e {
        Error::InvalidType(_) => js_sys::TypeError::new(&m).into(),
        Error::Input(_) => js_sys::RangeError::new(&m).into(),
        Error::DeviceLost(_) => glue::new_device_lost_error(&m, ""),
        Error::TooLarge { bytes, limit, limit_name, .. } => glue::new_out_of_memory_error(&m, bytes as f64, (limit as f64).into(), limit_name.into()),
        Error::OutOfMemory { bytes, .. } => glue::new_out_of_memory_error(&m, bytes as f64, JsValue::NULL, JsValue::NULL),
        _ => js_sys::Error::new(&m).into(),
    }
}

/// `Error::DeviceLost` when `watch` (from [`glue::watch_lost`]) saw the device lost.
fn lost_error(watch: &JsValue) -> Option<JsValue> {
    let info = get(watch, "info");
    if info.is_null() || info.is_undefined() {
        return None;
    }
    let text = |k: &str| get(&info, k).as_string().unwrap_or_default();
    let reason = text("reason");
    let m = Error::DeviceLost(format!("{reason}: {}", text("message"))).to_string();
    Some(glue::new_device_lost_error(&m, &reason))
}

/// After a failure: the `DeviceLostError` if the device turns out to be lost (checked after one
/// event-loop turn, as `GPUDevice.lost` may settle just after the failed call), else `e`.
pub(crate) async fn or_lost(watch: &JsValue, e: JsValue) -> JsValue {
    if let Some(l) = lost_error(watch) {
        return l;
    }
    glue::yield_to_event_loop().await;
    lost_error(watch).unwrap_or(e)
}

/// A token list from JS: an array or typed array of integer numbers `0 <= id < vocab`.
pub(crate) fn tokens_from_js(v: &JsValue, vocab: u32) -> Result<Vec<u32>, Error> {
    let array_like = js_sys::Array::is_array(v) || (js_sys::ArrayBuffer::is_view(v) && !v.is_instance_of::<js_sys::DataView>());
    if !array_like {
        return Err(Error::InvalidType(format!("tokens must be an array (or typed array) of token ids, got {}", describe(v))));
    }
    let n = get(v, "length").as_f64().unwrap_or(0.0) as u32;
    if n == 0 {
        return Err(Error::Input("tokens must be a non-empty list of token ids".into()));
    }
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let t = js_sys::Reflect::get_u32(v, i).unwrap_or(JsValue::UNDEFINED);
        let Some(x) = t.as_f64() else {
            return Err(Error::InvalidType(format!("token at index {i} is {}, not a number: token ids are integers 0 .. {}", describe(&t), vocab - 1)));
        };
        if !x.is_finite() || x.fract() != 0.0 || x < 0.0 {
            return Err(Error::Input(format!("token at index {i} is {}: token ids are integers 0 .. {}", js_number(x), vocab - 1)));
        }
        if x >= vocab as f64 {
            return Err(Error::Input(format!("token id {} at index {i} is out of range (vocab {vocab})", js_number(x))));
        }
        out.push(x as u32);
    }
    Ok(out)
}

/// `startPos`: an integer number `0 <= p < 2^32` (`TypeError` when not a number).
fn top_k_from_js(v: &JsValue) -> Result<u32, Error> {
    let msg = || format!("k must be an integer from 1 to {}, got {}", crate::topk::MAX_TOP_K, describe(v));
    match v.as_f64() {
        Some(x) if x.is_finite() && x.fract() == 0.0 && x >= 1.0 && x <= u32::MAX as f64 => Ok(x as u32),
        Some(_) => Err(Error::Input(msg())),
        None => Err(Error::InvalidType(msg())),
    }
}

pub(crate) fn position_from_js(v: &JsValue) -> Result<u32, Error> {
    let msg = || format!("startPos must be a non-negative integer, got {}", describe(v));
    match v.as_f64() {
        Some(x) if x.is_finite() && x.fract() == 0.0 && x >= 0.0 && x <= u32::MAX as f64 => Ok(x as u32),
        Some(_) => Err(Error::Input(msg())),
        None => Err(Error::InvalidType(msg())),
    }
}

struct Options {
    ctx: Option<u32>,
    kv: KvType,
    on_progress: Option<js_sys::Function>,
    signal: Option<JsValue>,
}

fn options_from_js(v: Option<JsValue>) -> Result<Options, Error> {
    let mut o = Options { ctx: None, kv: KvType::F32, on_progress: None, signal: None };
    let Some(v) = v.filter(|v| !v.is_undefined() && !v.is_null()) else {
        return Ok(o);
    };
    if !v.is_object() || v.is_function() {
        return Err(Error::InvalidType(format!("options must be an object, got {}", describe(&v))));
    }
    for key in ["contextLength", "ctx"] {
        let ctx = get(&v, key);
        if ctx.is_undefined() || o.ctx.is_some() {
            continue;
        }
        let msg = || format!("options.{key} must be a positive integer, got {}", describe(&ctx));
        match ctx.as_f64() {
            Some(x) if x.fract() == 0.0 && x >= 1.0 && x <= u32::MAX as f64 => o.ctx = Some(x as u32),
            Some(_) => return Err(Error::Input(msg())),
            None => return Err(Error::InvalidType(msg())),
        }
    }
    let kv = get(&v, "kvType");
    if !kv.is_undefined() {
        let msg = || format!("options.kvType must be \"f32\" or \"f16\", got {}", describe(&kv));
        match kv.as_string() {
            Some(s) => o.kv = s.parse().map_err(|_| Error::Input(msg()))?,
            None => return Err(Error::InvalidType(msg())),
        }
    }
    let cb = get(&v, "onProgress");
    if !cb.is_undefined() {
        match cb.dyn_into::<js_sys::Function>() {
            Ok(f) => o.on_progress = Some(f),
            Err(cb) => return Err(Error::InvalidType(format!("options.onProgress must be a function, got {}", describe(&cb)))),
        }
    }
    let signal = get(&v, "signal");
    if !signal.is_undefined() {
        if !glue::is_abort_signal(&signal) {
            return Err(Error::InvalidType(format!("options.signal must be an AbortSignal, got {}", describe(&signal))));
        }
        o.signal = Some(signal);
    }
    Ok(o)
}

/// `Err(signal.reason)` once the load's signal is aborted.
fn check_abort(signal: &Option<JsValue>) -> Result<(), JsValue> {
    match signal.as_ref().map(glue::abort_reason) {
        Some(reason) if !reason.is_null() => Err(reason),
        _ => Ok(()),
    }
}

/// The host's device as a [`Gpu`]. Fails when it is already lost (work on a lost device silently
/// does nothing, so loading would "succeed" with a dead model). Callers ask [`check_device`]
/// first.
async fn adopt(device: &JsValue) -> Result<Gpu, Error> {
    let lost = get(device, "lost");
    if lost.is_instance_of::<js_sys::Promise>() {
        // `lost` wins the race only if it has already resolved.
        let race = js_sys::Promise::race(&js_sys::Array::of2(&lost, &js_sys::Promise::resolve(&JsValue::NULL)));
        if let Ok(info) = wasm_bindgen_futures::JsFuture::from(race).await {
            if !info.is_null() && !info.is_undefined() {
                let text = |k: &str| get(&info, k).as_string().unwrap_or_default();
                return Err(Error::DeviceLost(format!("{}: {}", text("reason"), text("message"))));
            }
        }
    }
    Ok(adopt_device(device).await.map_err(Error::Gpu)?.into_gpu())
}

/// A `TypeError` unless `device` looks like a `GPUDevice` (an object with `createBuffer`; adopting
/// it checks the rest). `createLlama` asks this before anything else, so that a wrong first
/// argument is named as such even when the file is bad too.
fn check_device(device: &JsValue) -> Result<(), Error> {
    if !device.is_object() || !get(device, "createBuffer").is_function() {
        return Err(Error::InvalidType(format!("could not adopt the host's GPUDevice: expected a GPUDevice, got {}", describe(device))));
    }
    Ok(())
}

fn gpu_error(e: wgpu::Error) -> Error {
    Error::Gpu(e.to_string())
}

pub(crate) struct State {
    pub(crate) llama: Llama,
    config: JsValue,
    vocab: Option<Vocab>,
    /// `{ info }` from [`glue::watch_lost`] on the device.
    pub(crate) lost: JsValue,
}

/// A model loaded on the host's GPUDevice (JS class `Llama`, made by `createLlama`).
#[wasm_bindgen(js_name = Llama)]
pub struct WebLlama {
    pub(crate) state: Rc<State>,
}

/// Loads a llama GGUF onto the host page's `GPUDevice` (JS: `createLlama(device, source,
/// options?) -> Promise<Llama>`).
///
/// * `device`: the host's `GPUDevice`, used as is (wgpu adopts that very object; checked with
///   `Object.is`) with the limits and features the host requested. Never destroyed.
/// * `source`: the file as an `ArrayBuffer` (or a typed array over one), a `Blob`/`File`, or a
///   `Response`/`ReadableStream`. Tensor bytes go from it to GPU buffers window by window
///   (at most a few MiB of the file in memory at a time; an `ArrayBuffer` is never copied); the
///   caller may drop it once the promise resolves.
/// * `options`: `{ contextLength?: number (alias ctx), kvType?: 'f32' | 'f16', onProgress?:
///   ({bytesDone, bytesTotal, tensorsDone, tensorsTotal}) => void, signal?: AbortSignal }`. The load yields to the event
///   loop between windows, so progress repaints; an aborted signal rejects with its reason.
///
/// Rejects with a `TypeError` for arguments of the wrong type (not a `GPUDevice`, not a model
/// source, bad options), a `RangeError` for bad option values, a `DeviceLostError` when the
/// device is lost, and an `Error` naming the problem otherwise: not a GGUF, truncated, "WebGPU
/// path: unsupported architecture" (listing the recognised ones), unsupported tensor type, "WebGPU path: at most 256 experts, top-16",
/// GPU validation errors. A model that does not fit rejects with an `OutOfMemoryError` (its
/// `bytes`, `limit` and `limitName`): a buffer larger than the device's
/// `maxStorageBufferBindingSize` (naming the tensor, its size, the limit and the limit to
/// request), or the device's out-of-memory error (naming the bytes of every buffer of the
/// model); what was uploaded is freed. Kernels compile on
/// the first `forward` that runs each: a kernel the device rejects fails that call (and every
/// later one that runs it) with an `Error`, not the load.
#[wasm_bindgen(js_name = createLlama, unchecked_return_type = "Promise<Llama>")]
pub fn create_llama(
    #[wasm_bindgen(unchecked_param_type = "GPUDevice")] device: JsValue,
    #[wasm_bindgen(unchecked_param_type = "ModelSource")] source: JsValue,
    #[wasm_bindgen(unchecked_optional_param_type = "LoadOptions")] options: Option<JsValue>,
) -> js_sys::Promise {
    install();
    spawn(async move { create(device, source, options).await.map(JsValue::from) })
}

async fn create(device: JsValue, source: JsValue, options: Option<JsValue>) -> Result<WebLlama, JsValue> {
    check_device(&device).map_err(js_error)?;
    let opts = options_from_js(options).map_err(js_error)?;
    check_abort(&opts.signal)?;
    let src = Source::from_js(&source).await.map_err(js_error)?;
    let loaded = load(&device, &src, &opts).await;
    if let Err(e) = &loaded {
        src.cancel(e);
    }
    loaded
}

/// Per-tensor progress while the file streams by: each tensor is reported once every byte
/// before its end is on the GPU, in file order.
struct Reporter<'a> {
    /// (end offset, bytes) of every tensor the model reads, by end offset.
    tensors: Vec<(u64, u64)>,
    next: usize,
    bytes_done: u64,
    bytes_total: u64,
    on_progress: Option<&'a js_sys::Function>,
    signal: &'a Option<JsValue>,
}

impl Reporter<'_> {
    fn reached(&mut self, pos: u64) -> Result<(), JsValue> {
        while self.next < self.tensors.len() && self.tensors[self.next].0 <= pos {
            self.bytes_done += self.tensors[self.next].1;
            self.next += 1;
            if let Some(f) = self.on_progress {
                let arg = object(&[
                    ("bytesDone", (self.bytes_done as f64).into()),
                    ("bytesTotal", (self.bytes_total as f64).into()),
                    ("tensorsDone", (self.next as f64).into()),
                    ("tensorsTotal", (self.tensors.len() as f64).into()),
                ]);
                f.call1(&JsValue::NULL, &arg)?;
            }
            check_abort(self.signal)?;
        }
        Ok(())
    }
}

async fn load(device: &JsValue, src: &Source, opts: &Options) -> Result<WebLlama, JsValue> {
    let (g, planned) = read_header(src).await.map_err(js_error)?;
    check_abort(&opts.signal)?;
    let gpu = adopt(device).await.map_err(js_error)?;
    let lost = glue::watch_lost(device);
    let vocab = Vocab::from_gguf(&g);
    let cfg = Config::from_gguf(&g, opts.ctx).map_err(js_error)?;
    let mut tensors: Vec<(u64, u64)> =
        cfg.expected_tensors().iter().filter_map(|(name, _)| g.tensor(name)).map(|t| (t.offset + t.n_bytes, t.n_bytes)).collect();
    tensors.sort_unstable();
    let bytes_total = tensors.iter().map(|t| t.1).sum();
    let mut reporter = Reporter { tensors, next: 0, bytes_done: 0, bytes_total, on_progress: opts.on_progress.as_ref(), signal: &opts.signal };

    // Error scopes (never the host's uncaptured-error handler) catch what the device rejects.
    // Planning is synchronous, so no other code can push or pop scopes in between.
    let oom = gpu.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
    let planned_load = Llama::load(&gpu, &g, &planned, LoadOptions { ctx: opts.ctx, kv: opts.kv, ..Default::default() });
    let validation = validation.pop();
    let oom = oom.pop();
    drop(g);
    let llama = planned_load.map_err(js_error)?;
    let failed = |llama: &Llama, e: JsValue| {
        llama.dispose();
        e
    };
    let mut on_window = |pos: u64| {
        check_abort(&opts.signal)?;
        reporter.reached(pos)
    };
    let scopes = match stream_uploads(planned, &gpu, &mut on_window, js_error).await {
        Ok(s) => s,
        Err(e) => return Err(failed(&llama, or_lost(&lost, e).await)),
    };
    let mut gpu_failure = match (validation.await, oom.await) {
        (Some(e), _) | (None, Some(e)) => Some(e),
        (None, None) => None,
    };
    for scope in scopes {
        if let (None, Some(e)) = (&gpu_failure, scope.await) {
            gpu_failure = Some(e);
        }
    }
    if let Some(e) = gpu_failure {
        let e = match e {
            wgpu::Error::OutOfMemory { .. } => Error::OutOfMemory { bytes: llama.gpu_bytes(), detail: e.to_string() },
            e => gpu_error(e),
        };
        return Err(failed(&llama, or_lost(&lost, js_error(e)).await));
    }
    if let Some(e) = lost_error(&lost) {
        return Err(failed(&llama, e));
    }
    if let Err(e) = check_abort(&opts.signal) {
        return Err(failed(&llama, e));
    }

    let c = &llama.config;
    let limits = gpu.limits();
    let (weight_gpu, weight_file) = llama.weight_bytes();
    let config = object(&[
        ("architecture", c.architecture.name().into()),
        ("d", c.d.into()),
        ("L", c.n_layers.into()),
        ("ff", c.ff.into()),
        ("nh", c.n_heads.into()),
        ("nkv", c.n_kv_heads.into()),
        ("hd", c.head_dim.into()),
        ("ctx", c.ctx.into()),
        ("kvType", c.kv.name().into()),
        ("vocab", c.vocab.into()),
        ("eps", (c.eps as f64).into()),
        ("theta", (c.theta as f64).into()),
        ("experts", c.experts.into()),
        ("topk", c.topk.into()),
        ("dispatchesPerToken", (llama.dispatches_per_token() as f64).into()),
        ("weightBytesOnGpu", (weight_gpu as f64).into()),
        ("fileTensorBytes", (weight_file as f64).into()),
        ("gpuBytes", (llama.gpu_bytes() as f64).into()),
        ("nRot", c.n_rot.into()),
        ("trainCtx", c.train_ctx.into()),
        ("tiedOutput", c.tied_output.into()),
        ("maxStorageBufferBindingSize", (limits.max_storage_buffer_binding_size as f64).into()),
        ("maxBufferSize", (limits.max_buffer_size as f64).into()),
        ("adapter", gpu.adapter_info.as_str().into()),
        ("subgroupSize", gpu.subgroup_size().unwrap_or(0).into()),
    ]);
    js_sys::Object::freeze(config.unchecked_ref::<js_sys::Object>());
    let state = Rc::new(State { llama, config, vocab, lost });
    track(&state);
    Ok(WebLlama { state })
}

thread_local! {
    /// Every model not yet dropped, so that a panic can free their GPU buffers.
    static LIVE: RefCell<Vec<Weak<State>>> = const { RefCell::new(Vec::new()) };
}

fn track(state: &Rc<State>) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        on_panic(Box::new(|| {
            let _ = LIVE.try_with(|live| {
                if let Ok(live) = live.try_borrow() {
                    live.iter().filter_map(Weak::upgrade).for_each(|s| s.llama.dispose());
                }
            });
        }))
    });
    LIVE.with(|live| {
        let mut live = live.borrow_mut();
        live.retain(|w| w.strong_count() > 0);
        live.push(Rc::downgrade(state));
    });
}

#[wasm_bindgen(js_class = Llama)]
impl WebLlama {
    /// The model's hyperparameters and load figures (a frozen object, the same one each time).
    #[wasm_bindgen(getter, unchecked_return_type = "LlamaConfig")]
    pub fn config(&self) -> JsValue {
        self.state.config.clone()
    }

    /// Runs `tokens` at positions `startPos, startPos + 1, ...` and resolves to the `vocab`
    /// next-token logits after the last one (a `Float32Array`). Positions before `startPos` must
    /// already be in the KV cache (from earlier calls); running from an earlier position
    /// overwrites the cache from there.
    ///
    /// The work is queued on the GPU before this returns, so calls issued without awaiting are
    /// served in order, each with its own result.
    ///
    /// Rejects (never throws) with a `TypeError` when tokens is not an array/typed array or holds
    /// a non-number, or `startPos` is not a number; a `RangeError` for an empty list, an id that
    /// is not an integer or is `>= vocab`, a negative or fractional `startPos`, "past the
    /// context" when `startPos + tokens.length > config.ctx`, or a `startPos` that leaves a gap
    /// in the KV cache; a `DeviceLostError` once the device is lost (this call and every later
    /// one); an `Error` after `dispose()` or for another GPU error.
    #[wasm_bindgen(unchecked_return_type = "Promise<Float32Array>")]
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ArrayLike<number>")] tokens: JsValue,
        #[wasm_bindgen(js_name = startPos, unchecked_param_type = "number")] start_pos: JsValue,
    ) -> js_sys::Promise {
        self.queue_and_read(
            &tokens,
            &start_pos,
            |llama, tokens, pos| llama.submit(tokens, pos, false),
            |bytes| {
                let logits: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes);
                Ok(js_sys::Float32Array::from(logits.as_slice()).into())
            },
        )
    }

    /// The `k` most likely next tokens after the last of `tokens` (at positions `startPos..`, as
    /// `forward`), picked on the GPU: `{ ids: Uint32Array, logits: Float32Array }`, `k` entries,
    /// largest logit first (equal logits by lower id). Reads back `8 k` bytes instead of
    /// `4 vocab` (for a sampler that only needs the top k). The KV cache advances as with
    /// `forward`.
    ///
    /// Rejects as `forward` does, and with a `RangeError` when `k` is not an integer from 1 to
    /// min(128, vocab) (a `TypeError` when it is not a number).
    #[wasm_bindgen(js_name = forwardTopK, unchecked_return_type = "Promise<TopK>")]
    pub fn forward_top_k(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ArrayLike<number>")] tokens: JsValue,
        #[wasm_bindgen(js_name = startPos, unchecked_param_type = "number")] start_pos: JsValue,
        #[wasm_bindgen(unchecked_param_type = "number")] k: JsValue,
    ) -> js_sys::Promise {
        let parsed = top_k_from_js(&k);
        let n = *parsed.as_ref().unwrap_or(&0);
        self.queue_and_read(
            &tokens,
            &start_pos,
            move |llama, tokens, pos| llama.submit_top_k(tokens, pos, parsed?),
            move |bytes| {
                let top = crate::topk::decode(&bytemuck::pod_collect_to_vec::<u8, f32>(&bytes), n);
                let ids: Vec<u32> = top.iter().map(|p| p.0).collect();
                let logits: Vec<f32> = top.iter().map(|p| p.1).collect();
                let out = js_sys::Object::new();
                js_sys::Reflect::set(&out, &"ids".into(), &js_sys::Uint32Array::from(ids.as_slice()))?;
                js_sys::Reflect::set(&out, &"logits".into(), &js_sys::Float32Array::from(logits.as_slice()))?;
                Ok(out.into())
            },
        )
    }

    /// GPU time of each kernel of one forward pass over `n` tokens at `startPos` (token id 1 each),
    /// from timestamp queries around one compute pass per dispatch: resolves to `{ kernels: [{
    /// label, seconds, bytes }], passSeconds }` (kernels in program order; `bytes` the profiler's
    /// estimate of the memory it moves; `passSeconds` the median GPU time of 5 runs of the whole
    /// pass as `forward` records it), or to `null` when the device was created without the
    /// `timestamp-query` feature or `n` exceeds the batch the model was built for. The native
    /// `webgpu-llama bench --profile` prints the same figures. It writes the KV cache at
    /// `startPos .. startPos + n` (positions before must be filled), as `forward` would.
    /// Browsers may coarsen timestamps (Chromium: to 100 us unless started with
    /// `--enable-webgpu-developer-features`).
    ///
    /// Rejects as `forward` does: a `TypeError` when `n` or `startPos` is not a number, a
    /// `RangeError` when `n` is not a positive integer, `startPos` is bad or the batch runs past
    /// the context or leaves a gap in the cache.
    #[wasm_bindgen(unchecked_return_type = "Promise<Profile | null>")]
    pub fn profile(
        &self,
        #[wasm_bindgen(unchecked_param_type = "number")] n: JsValue,
        #[wasm_bindgen(js_name = startPos, unchecked_param_type = "number")] start_pos: JsValue,
    ) -> js_sys::Promise {
        let state = match self.live() {
            Ok(s) => s,
            Err(rejected) => return rejected,
        };
        let args = (|| {
            let msg = format!("n must be a positive integer, got {}", describe(&n));
            let n = match position_from_js(&n) {
                Ok(n) if n > 0 => n,
                Err(Error::InvalidType(_)) => return Err(Error::InvalidType(msg)),
                _ => return Err(Error::Input(msg)),
            };
            let pos = position_from_js(&start_pos)?;
            // The batch's kernels compile here, inside a scope of ours (never the host's
            // uncaptured-error handler), as forward's do inside its own.
            let scope = state.llama.gpu().device.push_error_scope(wgpu::ErrorFilter::Validation);
            let compiled = state.llama.compile(n, pos);
            let popped = scope.pop();
            compiled.map(|_| (n, pos, popped))
        })();
        spawn(async move {
            let (n, pos, popped) = args.map_err(js_error)?;
            if let Some(e) = popped.await {
                return Err(or_lost(&state.lost, js_error(gpu_error(e))).await);
            }
            let profiled = match state.llama.profile(n, pos).await {
                Ok(p) => p,
                Err(e) => return Err(or_lost(&state.lost, js_error(e)).await),
            };
            let Some((kernels, pass)) = profiled else {
                return Ok(JsValue::NULL);
            };
            let list = js_sys::Array::new();
            for (label, seconds, bytes) in kernels {
                list.push(&object(&[("label", label.into()), ("seconds", seconds.into()), ("bytes", (bytes as f64).into())]));
            }
            Ok(object(&[("kernels", list.into()), ("passSeconds", pass.into())]))
        })
    }

    /// Frees every GPU buffer the model made (never the host's device): weights, KV cache,
    /// activations and readback buffers; a readback still in flight is destroyed once its call
    /// settles. Idempotent; afterwards `forward` rejects with "use after dispose()". Forwards
    /// already issued still resolve; a `generate` under way rejects with "use after dispose()"
    /// at its next block (or resolves if that was its last).
    pub fn dispose(&self) {
        self.state.llama.dispose();
    }

    /// Whether `dispose()` was called.
    #[wasm_bindgen(getter)]
    pub fn disposed(&self) -> bool {
        self.state.llama.is_disposed()
    }

    /// `{ staged, afresh }`: one-token forwards so far whose step, recorded ahead, took its
    /// token id and position from the mapped staging buffer (no `writeBuffer` between the
    /// readback and the next step), and those recorded afresh because its map had not resolved.
    #[wasm_bindgen(getter, js_name = stagedSteps, unchecked_return_type = "StagedSteps")]
    pub fn staged_steps(&self) -> JsValue {
        let (staged, afresh) = self.state.llama.staged_steps();
        object(&[("staged", (staged as f64).into()), ("afresh", (afresh as f64).into())])
    }

    /// The bytes of token `id` as the GGUF's token list spells it (SentencePiece `▁` -> space,
    /// `<0xNN>` -> that byte, GPT-2 byte-level pieces -> their bytes); empty for an unknown id or a
    /// file without `tokenizer.ggml.tokens`. Feed them to a streaming `TextDecoder`.
    #[wasm_bindgen(js_name = tokenBytes)]
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        self.state.vocab.as_ref().map(|v| v.bytes(id)).unwrap_or_default()
    }

    /// The text of a token sequence (invalid UTF-8 replaced by U+FFFD). Throws an `Error` for a
    /// bad token list, as `forward` rejects.
    pub fn decode(&self, #[wasm_bindgen(unchecked_param_type = "ArrayLike<number>")] tokens: JsValue) -> Result<String, JsValue> {
        install();
        let ids = tokens_from_js(&tokens, self.state.llama.config.vocab).map_err(js_error)?;
        Ok(self.state.vocab.as_ref().map(|v| v.decode(&ids)).unwrap_or_default())
    }
}

impl WebLlama {
    /// The model's state for a call (after the panic hook is installed), or the rejected promise
    /// to return once the device is lost or after `dispose()` (in that order).
    pub(crate) fn live(&self) -> Result<Rc<State>, js_sys::Promise> {
        install();
        if let Some(e) = lost_error(&self.state.lost) {
            return Err(js_sys::Promise::reject(&e));
        }
        if self.state.llama.is_disposed() {
            return Err(js_sys::Promise::reject(&js_error(Error::Disposed)));
        }
        Ok(self.state.clone())
    }

    /// `forward` and `forwardTopK`: rejects after loss or disposal and for bad tokens or
    /// positions (in that order), queues `submit`'s work synchronously inside a validation error
    /// scope (so calls issued without awaiting are served in order), then reads the readback
    /// buffer back and resolves with `finish` of its bytes.
    fn queue_and_read(
        &self,
        tokens: &JsValue,
        start_pos: &JsValue,
        submit: impl FnOnce(&Llama, &[u32], u32) -> Result<Pending, Error>,
        finish: impl FnOnce(Vec<u8>) -> Result<JsValue, JsValue> + 'static,
    ) -> js_sys::Promise {
        let state = match self.live() {
            Ok(s) => s,
            Err(rejected) => return rejected,
        };
        let submitted = (|| {
            let tokens = tokens_from_js(tokens, state.llama.config.vocab)?;
            let pos = position_from_js(start_pos)?;
            state.llama.validate(&tokens, pos)?;
            // Synchronous: push, submit, pop. No await inside the scope.
            let scope = state.llama.gpu().device.push_error_scope(wgpu::ErrorFilter::Validation);
            let readback = submit(&state.llama, &tokens, pos);
            let popped = scope.pop();
            Ok((readback?, popped))
        })();
        spawn(async move {
            let (readback, popped) = submitted.map_err(js_error)?;
            // The map is asked for before the error scope's answer is awaited: both at once.
            let checked = {
                let mapped = state.llama.gpu().map_read_started(&readback.buffer);
                match popped.await {
                    Some(e) => Err(gpu_error(e)),
                    None => mapped.await,
                }
            };
            match &checked {
                Ok(_) => state.llama.recycle(readback),
                Err(_) => readback.buffer.destroy(),
            }
            match checked {
                Ok(bytes) => finish(bytes),
                Err(e) => Err(or_lost(&state.lost, js_error(e)).await),
            }
        })
    }
}

impl Drop for WebLlama {
    /// `free()` (or garbage collection with weak refs) also frees the GPU buffers.
    fn drop(&mut self) {
        self.state.llama.dispose();
    }
}

/// The seed's test hook (JS: `testMatvecQ8(device, arrayBuffer, name, x) -> Promise<{rows, cols,
/// f32, q8, ref}>`): Q8_0 tensor `name` (`cols = dims[0]`, `rows` the other dims) times `x`
/// (`cols` numbers) through the GPU f32 matvec on the CPU-dequantised weights (`f32`), through the
/// engine's Q8_0 matvec on the weights kept quantised (`q8`), and on the CPU in f64 (`ref`, a
/// `Float64Array`). GPU buffers made here are destroyed before it resolves.
///
/// Rejects with an `Error` when the tensor is missing or not Q8_0, `x` has the wrong length or
/// non-numbers, or the arguments are not a device / ArrayBuffer / string.
#[wasm_bindgen(js_name = testMatvecQ8, unchecked_return_type = "Promise<MatvecQ8Result>")]
pub fn test_matvec_q8(
    #[wasm_bindgen(unchecked_param_type = "GPUDevice")] device: JsValue,
    #[wasm_bindgen(js_name = arrayBuffer, unchecked_param_type = "ArrayBuffer | ArrayBufferView")] gguf: JsValue,
    #[wasm_bindgen(unchecked_param_type = "string")] name: JsValue,
    #[wasm_bindgen(unchecked_param_type = "ArrayLike<number>")] x: JsValue,
) -> js_sys::Promise {
    install();
    spawn(async move { matvec_q8(device, gguf, name, x).await.map_err(js_error) })
}

async fn matvec_q8(device: JsValue, gguf: JsValue, name: JsValue, x: JsValue) -> Result<JsValue, Error> {
    let name = name.as_string().ok_or_else(|| Error::InvalidType(format!("name must be a tensor name string, got {}", describe(&name))))?;
    let src = JsBytes::from_js(&gguf)?;
    let g = Gguf::parse(&src)?;
    let t = g.tensor(&name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
    if t.ggml_type != crate::ggml::GgmlType::Q8_0 {
        return Err(Error::Input(format!("testMatvecQ8: tensor {name} is {}, not Q8_0", t.ggml_type.name())));
    }
    let (rows, cols) = crate::probe::shape(&g, &name)?;
    let xs = floats_from_js(&x, cols)?;
    check_device(&device)?;
    let gpu = adopt(&device).await?;
    let f32s = crate::probe::matvec(&gpu, &g, &src, &name, &xs, false).await?;
    let q8s = crate::probe::matvec(&gpu, &g, &src, &name, &xs, true).await?;
    let reference = crate::probe::reference(&g, &src, &name, &xs)?;
    Ok(object(&[
        ("rows", rows.into()),
        ("cols", cols.into()),
        ("f32", js_sys::Float32Array::from(f32s.as_slice()).into()),
        ("q8", js_sys::Float32Array::from(q8s.as_slice()).into()),
        ("ref", js_sys::Float64Array::from(reference.as_slice()).into()),
    ]))
}

/// `cols` finite numbers from an array or typed array, as f32.
fn floats_from_js(v: &JsValue, cols: u32) -> Result<Vec<f32>, Error> {
    let array_like = js_sys::Array::is_array(v) || (js_sys::ArrayBuffer::is_view(v) && !v.is_instance_of::<js_sys::DataView>());
    if !array_like {
        return Err(Error::InvalidType(format!("x must be an array or Float32Array of {cols} numbers, got {}", describe(v))));
    }
    let n = get(v, "length").as_f64().unwrap_or(0.0) as u32;
    if n != cols {
        return Err(Error::Input(format!("x has {n} values but the tensor has {cols} columns")));
    }
    (0..n)
        .map(|i| {
            let e = js_sys::Reflect::get_u32(v, i).unwrap_or(JsValue::UNDEFINED);
            e.as_f64().filter(|f| f.is_finite()).map(|f| f as f32).ok_or_else(|| Error::Input(format!("x[{i}] is {}, not a finite number", describe(&e))))
        })
        .collect()
}

/// Bytes of this module's wasm linear memory (`WebAssembly.Memory.buffer.byteLength`). It grows
/// but never shrinks, so after a load it shows the load's peak.
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory_bytes() -> f64 {
    get(&get(&wasm_bindgen::memory(), "buffer"), "byteLength").as_f64().unwrap_or(0.0)
}

/// A GGUF metadata value as JS: numbers (64-bit integers beyond 2^53 lose precision), booleans,
/// strings and arrays.
fn value_to_js(v: &crate::gguf::Value) -> JsValue {
    use crate::gguf::Value as V;
    match v {
        V::Bool(b) => (*b).into(),
        V::Str(s) => s.as_str().into(),
        V::Array(items) => items.iter().map(value_to_js).collect::<js_sys::Array>().into(),
        V::F32(x) => (*x as f64).into(),
        V::F64(x) => (*x).into(),
        V::I64(x) => (*x as f64).into(),
        other => other.as_u64().map(|x| x as f64).or_else(|| other.as_f64()).unwrap_or(f64::NAN).into(),
    }
}

/// Reads the metadata of a GGUF (JS: `readMetadata(source) -> Promise<Record<string,
/// unknown>>`) from an `ArrayBuffer`, a typed array or a `Blob`/`File`, reading only the header
/// (e.g. `tokenizer.ggml.tokens`, `tokenizer.ggml.merges` and `tokenizer.chat_template` to
/// build a tokenizer). Rejects with a `TypeError` for other sources (a stream can be read only
/// once: pass it to `createLlama`) and an `Error` naming a malformed header.
#[wasm_bindgen(js_name = readMetadata, unchecked_return_type = "Promise<Record<string, unknown>>")]
pub fn read_metadata(#[wasm_bindgen(unchecked_param_type = "ArrayBuffer | ArrayBufferView | Blob")] source: JsValue) -> js_sys::Promise {
    install();
    spawn(async move {
        if !matches!(glue::source_kind(&source).as_str(), "arraybuffer" | "blob") {
            return Err(js_error(Error::InvalidType(format!("readMetadata takes an ArrayBuffer, a typed array or a Blob, got {}", describe(&source)))));
        }
        let src = Source::from_js(&source).await.map_err(js_error)?;
        let (g, _) = read_header(&src).await.map_err(js_error)?;
        let out = js_sys::Object::new();
        for (k, v) in &g.metadata {
            let _ = js_sys::Reflect::set(&out, &JsValue::from_str(k), &value_to_js(v));
        }
        Ok(out.into())
    })
}

/// The `DeviceLostError` class (the package entry exports it as `DeviceLostError`).
#[doc(hidden)]
#[wasm_bindgen(js_name = __deviceLostErrorClass, skip_typescript)]
pub fn device_lost_error_class() -> JsValue {
    glue::device_lost_error_class()
}

/// The `OutOfMemoryError` class (the package entry exports it as `OutOfMemoryError`).
#[doc(hidden)]
#[wasm_bindgen(js_name = __outOfMemoryErrorClass, skip_typescript)]
pub fn out_of_memory_error_class() -> JsValue {
    glue::out_of_memory_error_class()
}

/// Panics with `message` (tests of the panic handling only).
#[doc(hidden)]
#[wasm_bindgen(js_name = __testPanic, skip_typescript)]
pub fn test_panic(message: String) {
    install();
    panic!("{message}");
}

/// A promise whose future panics with `message` after one turn of the event loop (tests only).
#[doc(hidden)]
#[wasm_bindgen(js_name = __testPanicAsync, skip_typescript)]
pub fn test_panic_async(message: String) -> js_sys::Promise {
    install();
    spawn(async move {
        let _ = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::resolve(&JsValue::NULL)).await;
        if !message.is_empty() {
            panic!("{message}");
        }
        Ok(JsValue::UNDEFINED)
    })
}
