//! The browser front door (wasm32 only): the seed module's JavaScript API over the engine.
//!
//! * [`api`]: `createLlama(device, arrayBuffer, options?)`, the `Llama` class (`config`,
//!   `forward`, `dispose`, `tokenBytes`, `decode`), `testMatvecQ8`, `wasmMemoryBytes`.
//! * [`adopt`]: wgpu wraps the host page's own `GPUDevice` (checked with `Object.is`).
//! * [`source`]: the GGUF as a JS `ArrayBuffer`; tensors go from it straight to GPU buffers.
//! * [`promise`]: promises handed to JS, and the panic hook (log, reject pending promises, free
//!   GPU buffers, reset the wasm instance before the next call).
//!
//! No maths here: argument checking and conversion only.

pub mod adopt;
pub mod api;
pub mod promise;
pub mod source;

pub use api::{create_llama, test_matvec_q8, wasm_memory_bytes, WebLlama};
pub use promise::reinit_after_panic;
pub use source::JsBytes;
