//! Promises handed to JavaScript, and what a Rust panic does to them.
//!
//! On `wasm32-unknown-unknown` a panic aborts: the wasm instance traps, the JS call that was
//! running gets a `RuntimeError`, and Rust state (an async task queue, a borrowed cell) may be
//! left half-updated. So that this never leaves the module silently unusable, the panic hook
//! installed by [`install`]:
//! 1. logs the panic with its stack (`console_error_panic_hook`), after any earlier hook;
//! 2. rejects every promise this module handed out and has not settled yet, with a JS `Error`
//!    naming the panic (they would otherwise never settle);
//! 3. frees the GPU buffers of every live model (registered with [`on_panic`]);
//! 4. schedules a reinitialisation: the next call into the module first replaces the wasm
//!    instance with a fresh one (wasm-bindgen's `schedule_reinit`). Models created before are
//!    gone: their methods throw "Invalid stale object from previous Wasm instance".

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;

use wasm_bindgen::prelude::*;

thread_local! {
    static PENDING: RefCell<BTreeMap<u32, js_sys::Function>> = const { RefCell::new(BTreeMap::new()) };
    static NEXT_ID: Cell<u32> = const { Cell::new(0) };
    static REINIT: Cell<bool> = const { Cell::new(true) };
    static ON_PANIC: RefCell<Vec<Box<dyn Fn()>>> = const { RefCell::new(Vec::new()) };
}

/// Installs the panic hook described in the module docs (once; later calls do nothing).
/// Every exported entry point calls it first.
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            console_error_panic_hook::hook(info);
            after_panic(&info.to_string());
        }));
    });
}

/// Whether a panic schedules a fresh wasm instance (default `true`). Test harnesses that run in
/// the same instance (wasm-bindgen-test) turn it off so that a failing test does not reset them.
#[doc(hidden)]
pub fn reinit_after_panic(on: bool) {
    REINIT.with(|r| r.set(on));
}

/// Registers `f` to run when the module panics (e.g. freeing the live models' GPU buffers). Hooks
/// stay registered; register each once.
pub fn on_panic(f: Box<dyn Fn()>) {
    ON_PANIC.with(|v| v.borrow_mut().push(f));
}

fn after_panic(message: &str) {
    let pending = PENDING.try_with(|p| p.try_borrow_mut().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default()).unwrap_or_default();
    if !pending.is_empty() {
        let err = js_sys::Error::new(&format!("webgpu-llama panicked ({message}); this call was abandoned and the module will be reset: create models again"));
        for reject in pending.values() {
            let _ = reject.call1(&JsValue::NULL, &err);
        }
    }
    let _ = ON_PANIC.try_with(|v| {
        if let Ok(hooks) = v.try_borrow() {
            for f in hooks.iter() {
                f();
            }
        }
    });
    if REINIT.try_with(|r| r.get()).unwrap_or(true) {
        wasm_bindgen::handler::schedule_reinit();
    }
}

/// A JS `Promise` settled by `fut`: resolved with its `Ok` value, rejected with its `Err` value,
/// or rejected by the panic hook if the module panics first. Nothing runs synchronously except
/// building the promise; `fut` is polled from the microtask queue.
pub fn spawn<F>(fut: F) -> js_sys::Promise
where
    F: Future<Output = Result<JsValue, JsValue>> + 'static,
{
    let mut handles = None;
    let promise = js_sys::Promise::new(&mut |resolve, reject| handles = Some((resolve, reject)));
    let Some((resolve, reject)) = handles else {
        return js_sys::Promise::reject(&js_sys::Error::new("webgpu-llama: Promise executor did not run").into());
    };
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1));
        id
    });
    PENDING.with(|p| p.borrow_mut().insert(id, reject.clone()));
    wasm_bindgen_futures::spawn_local(async move {
        let result = fut.await;
        // Settle only if the panic hook has not rejected it already.
        if PENDING.with(|p| p.borrow_mut().remove(&id)).is_some() {
            let _ = match result {
                Ok(v) => resolve.call1(&JsValue::NULL, &v),
                Err(e) => reject.call1(&JsValue::NULL, &e),
            };
        }
    });
    promise
}
