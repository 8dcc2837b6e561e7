//! The browser front door (wasm32 only): the seed module's JavaScript API over the engine.
//!
//! * [`api`]: `createLlama(device, arrayBuffer, options?)`, the `Llama` class (`config`,
//!   `forward`, `dispose`, `tokenBytes`, `decode`), `testMatvecQ8`, `wasmMemoryBytes`.
//! * [`generate`]: `Llama.generate` (options, `onTokens`, `signal`).
//! * [`adopt`]: wgpu wraps the host page's own `GPUDevice` (checked with `Object.is`).
//! * [`source`]: the GGUF as a JS `ArrayBuffer`, `Blob` or stream; tensors go from it to GPU
//!   buffers window by window.
//! * [`js`]: plain JS values: described for error messages, read, built.
//! * [`glue`]: JS helpers: the `DeviceLostError` class, reading Blobs and streams, yielding.
//! * [`promise`]: promises handed to JS, and the panic hook (log, reject pending promises, free
//!   GPU buffers, reset the wasm instance before the next call).
//!
//! No maths here: argument checking and conversion only.

pub mod adopt;
pub mod api;
pub mod generate;
pub mod glue;
pub mod js;
pub mod promise;
pub mod source;

pub use api::{create_llama, device_lost_error_class, out_of_memory_error_class, read_metadata, test_matvec_q8, wasm_memory_bytes, WebLlama};
pub use promise::reinit_after_panic;
pub use source::{JsBytes, Source};
