//! `Llama.generate` in JS: its options checked and converted ([`GenerateOptions`], typed errors
//! naming the option), `onTokens` and `signal` wired to [`Llama::generate`]'s callback.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use super::api::{js_error, or_lost, position_from_js, tokens_from_js, WebLlama};
use super::glue;
use super::js::{describe, get, object};
use super::promise::spawn;
use crate::error::Error;
#[cfg(doc)]
use crate::llama::Llama;
use crate::sample::{GenerateOptions, Sampler, StopReason};

/// `generate`'s options beside [`GenerateOptions`]: the callback and the signal.
struct JsOptions {
    opts: GenerateOptions,
    on_tokens: Option<js_sys::Function>,
    signal: Option<JsValue>,
}

/// `what` (`o.key`) as an integer from `min` to `max`, or `None` when undefined.
fn int_option(o: &JsValue, key: &str, what: &str, min: u32, max: u32) -> Result<Option<u32>, Error> {
    let v = get(o, key);
    if v.is_undefined() {
        return Ok(None);
    }
    let msg = || format!("{what} must be an integer from {min} to {max}, got {}", describe(&v));
    match v.as_f64() {
        Some(x) if x.fract() == 0.0 && x >= min as f64 && x <= max as f64 => Ok(Some(x as u32)),
        Some(_) => Err(Error::Input(msg())),
        None => Err(Error::InvalidType(msg())),
    }
}

/// `what` (`o.key`) as a number, or `None` when undefined (its range: [`Sampler::check`]).
fn number_option(o: &JsValue, key: &str, what: &str) -> Result<Option<f32>, Error> {
    let v = get(o, key);
    if v.is_undefined() {
        return Ok(None);
    }
    v.as_f64().map(|x| Some(x as f32)).ok_or_else(|| Error::InvalidType(format!("{what} must be a number, got {}", describe(&v))))
}

/// `options.sampler`, llama.cpp's defaults for what it leaves out.
fn sampler_from_js(v: &JsValue) -> Result<Sampler, Error> {
    if !v.is_object() || v.is_function() {
        return Err(Error::InvalidType(format!("options.sampler must be an object, got {}", describe(v))));
    }
    let d = Sampler::default();
    let s = Sampler {
        temperature: number_option(v, "temperature", "sampler.temperature")?.unwrap_or(d.temperature),
        top_k: int_option(v, "topK", "sampler.topK", 0, crate::topk::MAX_TOP_K)?.unwrap_or(d.top_k),
        top_p: number_option(v, "topP", "sampler.topP")?.unwrap_or(d.top_p),
        min_p: number_option(v, "minP", "sampler.minP")?.unwrap_or(d.min_p),
        repeat_penalty: number_option(v, "repeatPenalty", "sampler.repeatPenalty")?.unwrap_or(d.repeat_penalty),
        repeat_window: int_option(v, "repeatWindow", "sampler.repeatWindow", 0, u32::MAX)?.unwrap_or(d.repeat_window),
        seed: int_option(v, "seed", "sampler.seed", 0, u32::MAX)?.unwrap_or(d.seed),
    };
    s.check()?;
    Ok(s)
}

fn options_from_js(v: &JsValue, vocab: u32) -> Result<JsOptions, Error> {
    let mut o = JsOptions { opts: GenerateOptions::default(), on_tokens: None, signal: None };
    if v.is_undefined() || v.is_null() {
        return Ok(o);
    }
    if !v.is_object() || v.is_function() {
        return Err(Error::InvalidType(format!("options must be an object, got {}", describe(v))));
    }
    if let Some(n) = int_option(v, "maxTokens", "options.maxTokens", 1, u32::MAX)? {
        o.opts.max_tokens = n;
    }
    if let Some(k) = int_option(v, "block", "options.block", 1, crate::sample::MAX_BLOCK)? {
        o.opts.block = k;
    }
    let sampler = get(v, "sampler");
    if !sampler.is_undefined() {
        o.opts.sampler = Some(sampler_from_js(&sampler)?);
    }
    let stop = get(v, "stopIds");
    if !stop.is_undefined() {
        let empty = get(&stop, "length").as_f64() == Some(0.0);
        o.opts.stop_ids = if empty && js_sys::Array::is_array(&stop) {
            Vec::new()
        } else {
            tokens_from_js(&stop, vocab).map_err(|e| match e {
                Error::InvalidType(m) => Error::InvalidType(format!("options.stopIds: {m}")),
                Error::Input(m) => Error::Input(format!("options.stopIds: {m}")),
                e => e,
            })?
        };
    }
    let cb = get(v, "onTokens");
    if !cb.is_undefined() {
        match cb.dyn_into::<js_sys::Function>() {
            Ok(f) => o.on_tokens = Some(f),
            Err(cb) => return Err(Error::InvalidType(format!("options.onTokens must be a function, got {}", describe(&cb)))),
        }
    }
    let signal = get(v, "signal");
    if !signal.is_undefined() {
        if !glue::is_abort_signal(&signal) {
            return Err(Error::InvalidType(format!("options.signal must be an AbortSignal, got {}", describe(&signal))));
        }
        o.signal = Some(signal);
    }
    Ok(o)
}

fn aborted(signal: &Option<JsValue>) -> bool {
    signal.as_ref().is_some_and(|s| !glue::abort_reason(s).is_null())
}

#[wasm_bindgen(js_class = Llama)]
impl WebLlama {
    /// Generates up to `options.maxTokens` ids after `tokens` (the prompt, or just the last
    /// token) at positions `startPos..`, picking each next token on the GPU and feeding it to
    /// the next step there; the ids are read back once per `options.block` steps
    /// ([`Llama::generate`]). Resolves to `{ ids: Int32Array, stopReason: 'stop' | 'length' |
    /// 'abort' }`. Afterwards the KV cache holds every id but the last: continue with
    /// `forward([ids.at(-1)], startPos + tokens.length + ids.length - 1)` (or `generate` with
    /// that one token and position).
    ///
    /// Options: `maxTokens` (default 16; clamped to the context, then 'length'), `sampler`
    /// (omitted: greedy; see the `Sampler` type for its fields and llama.cpp's defaults),
    /// `stopIds` (the first one picked ends it, included: 'stop'), `onTokens(ids)` (each block's
    /// ids as they arrive; returning `false` stops: 'abort'), `signal` (an `AbortSignal` checked
    /// between blocks: 'abort'), `block` (1 to 256, default 16).
    ///
    /// Rejects as `forward` does for bad tokens or positions, with a `TypeError` for an option of
    /// the wrong type and a `RangeError` for a bad value (both naming the option), and with
    /// whatever `onTokens` throws (which stops it as returning `false` does: the cache then
    /// holds every id passed to `onTokens` but the last, as after an 'abort'). From the call
    /// until it settles its steps own the model's inputs: `forward`, `forwardTopK`, `profile`
    /// and `generate` called in between (awaited or not) reject with a `RangeError` ("a
    /// generate call is under way"). Calls issued before it are served first. `dispose()`
    /// while it runs: it rejects with "use after dispose()" at the next block (or resolves if
    /// that was its last), and its buffers are destroyed.
    #[wasm_bindgen(unchecked_return_type = "Promise<Generated>")]
    pub fn generate(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ArrayLike<number>")] tokens: JsValue,
        #[wasm_bindgen(js_name = startPos, unchecked_param_type = "number")] start_pos: JsValue,
        #[wasm_bindgen(unchecked_optional_param_type = "GenerateOptions")] options: Option<JsValue>,
    ) -> js_sys::Promise {
        let state = match self.live() {
            Ok(s) => s,
            Err(rejected) => return rejected,
        };
        let vocab = state.llama.config.vocab;
        let args = (|| {
            let tokens = tokens_from_js(&tokens, vocab)?;
            let pos = position_from_js(&start_pos)?;
            let o = options_from_js(&options.unwrap_or(JsValue::UNDEFINED), vocab)?;
            state.llama.validate(&tokens, pos)?;
            Ok((tokens, pos, o))
        })();
        // The call owns the model's inputs from now on, not from when its future first runs:
        // a forward or generate issued before then (without awaiting this one) is refused
        // instead of being queued ahead of this call's steps.
        if args.is_ok() {
            state.llama.reserve();
        }
        spawn(async move {
            let (tokens, pos, o) = args.map_err(js_error)?;
            let result = |ids: &[u32], reason: &str| {
                let ids: Vec<i32> = ids.iter().map(|&x| x as i32).collect();
                object(&[("ids", js_sys::Int32Array::from(ids.as_slice()).into()), ("stopReason", reason.into())])
            };
            if aborted(&o.signal) {
                state.llama.release();
                return Ok(result(&[], "abort"));
            }
            let mut thrown = None;
            let mut on_tokens = |ids: &[u32]| {
                if let Some(f) = &o.on_tokens {
                    let ids: Vec<i32> = ids.iter().map(|&x| x as i32).collect();
                    match f.call1(&JsValue::NULL, &js_sys::Int32Array::from(ids.as_slice())) {
                        Ok(r) if r == JsValue::FALSE => return false,
                        Ok(_) => {}
                        Err(e) => {
                            thrown = Some(e);
                            return false;
                        }
                    }
                }
                !aborted(&o.signal)
            };
            let generated = match state.llama.generate(&tokens, pos, &o.opts, &mut on_tokens).await {
                Ok(g) => g,
                Err(e) => return Err(or_lost(&state.lost, js_error(e)).await),
            };
            if let Some(e) = thrown {
                return Err(e);
            }
            let reason = match generated.stop_reason {
                StopReason::Stop => "stop",
                StopReason::Length => "length",
                StopReason::Abort => "abort",
            };
            Ok(result(&generated.ids, reason))
        })
    }
}
