//! webgpu-llama: the LLaMA forward pass (dense and Mixtral-style MoE) on the GPU through WebGPU,
//! from GGUF files. Token ids in, next-token logits out; the same WGSL runs natively (Vulkan,
//! Metal, DX12 through wgpu) and in the browser.
//!
//! Layers, each using only the ones before it: [`gguf`] (container) -> [`ggml`] (tensor types,
//! CPU dequantisation) -> [`config`] (hyperparameters) -> [`kernels`] (WGSL and pipeline keys by
//! kernel family, the weight formats) -> [`gpu`] (device, its facts [`gpu::Caps`], the user's
//! [`gpu::Switches`]) -> [`policy`] (the kernel forms and shapes a device class gets; in `lab`
//! builds under the [`knobs`] set through `lab`) -> [`pipelines`] (compiled kernels) ->
//! [`weights`] (upload; [`repack`]) -> [`program`] (batched ops:
//! [`linear`], [`ops`], [`attention`], [`moe`]) -> [`forward`] (the layers' ops in order, the
//! fusions, what each op hands the next: [`reuse`]) -> [`llama`] (the model, KV cache, forward; a decode step's inputs through [`inputs`]; `generate`, its next token picked on the GPU by [`sample`]). [`reference`](mod@reference) is a plain-Rust
//! f64 forward pass used to check the GPU.
//!
//! # Native use
//!
//! Greedy decoding, as the CLI's `run` does (stories260K from `../shared`; `scripts/test.sh` runs
//! this on lavapipe, and `tests/reference.rs` checks the same loop's logits and ids against the
//! float64 reference):
//!
//! ```
//! use webgpu_llama::{topk::argmax, GenerateOptions, Gguf, Gpu, Llama, LoadOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let bytes = std::fs::read("../shared/models/stories260K.gguf")?;
//! let gpu = pollster::block_on(Gpu::native(false))?; // Vulkan, Metal or DX12
//! let gguf = Gguf::parse(bytes.as_slice())?;
//! let llama = Llama::load(&gpu, &gguf, &bytes, LoadOptions::default())?;
//! let prompt = [1, 403, 407, 261, 378];
//! // `vocab` logits after the prompt's last token; the KV cache now holds positions 0..5.
//! let mut logits = pollster::block_on(llama.forward(&prompt, 0))?;
//! let mut ids = Vec::new();
//! for pos in prompt.len() as u32..prompt.len() as u32 + 8 {
//!     let next = argmax(&logits);
//!     ids.push(next);
//!     logits = pollster::block_on(llama.forward(&[next], pos))?; // one token at `pos`
//! }
//! assert_eq!(logits.len(), llama.config.vocab as usize);
//! // The same ids with the GPU picking each next token and feeding it to the next step itself,
//! // the ids read back 16 steps at a time (`Llama::generate`).
//! let opts = GenerateOptions { max_tokens: 8, ..Default::default() };
//! let generated = pollster::block_on(llama.generate(&prompt, 0, &opts, &mut |_block| true))?;
//! assert_eq!(generated.ids, ids);
//! # Ok(())
//! # }
//! ```

/// A laboratory knob ([`knobs`]): `lab!(gpu, key)` is the value `--set key=...` or a test gave
/// it in `lab` builds, and `None` (the policy's value) in every other build.
#[cfg(feature = "lab")]
macro_rules! lab {
    ($gpu:expr, $key:ident) => {
        $gpu.lab().$key
    };
}

/// A laboratory knob ([`knobs`]): `None` outside `lab` builds, so that only the policy decides.
#[cfg(not(feature = "lab"))]
macro_rules! lab {
    ($gpu:expr, $key:ident) => {{
        let _ = &$gpu;
        $crate::knobs::off::$key
    }};
}

pub mod attention;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod config;
pub mod error;
pub mod family;
pub mod forward;
pub mod ggml;
pub mod gguf;
pub mod gpu;
pub mod inputs;
pub mod kernels;
pub mod knobs;
#[cfg(feature = "lab")]
pub mod lab;
pub mod linear;
pub mod llama;
pub mod moe;
pub mod oneshot;
pub mod ops;
pub mod pipelines;
pub mod plan;
pub mod policy;
pub mod probe;
pub mod program;
pub mod quantize;
pub mod reference;
pub mod repack;
pub mod reuse;
pub mod rope;
pub mod sample;
pub mod split;
pub mod synth;
pub mod topk;
pub mod vocab;
#[cfg(target_arch = "wasm32")]
pub mod web;
pub mod weights;

pub use config::{Config, KvType};
pub use error::{Error, Result};
pub use family::{Family, FamilyParams};
pub use gguf::Gguf;
pub use gpu::Gpu;
pub use llama::{Llama, LoadOptions};
pub use sample::{GenerateOptions, Generated, Sampler, StopReason};
