//! What the browser tests share (tests/web.rs, tests/web_gpu.rs): the reference cases, compiled
//! in from `../shared` (the build fails if it is missing), and small helpers.
#![allow(dead_code)]

use wasm_bindgen::prelude::*;

#[wasm_bindgen(inline_js = r#"
export async function hostDevice(raise, subgroups, sizeControl) {
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('requestAdapter() returned null (is --enable-unsafe-webgpu set?)');
  const requiredLimits = raise ? {
    maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
    maxBufferSize: adapter.limits.maxBufferSize,
  } : {};
  const requiredFeatures = [...(subgroups ? ['subgroups'] : []), ...(sizeControl ? ['subgroup-size-control'] : [])].filter((f) => adapter.features.has(f));
  return adapter.requestDevice({ requiredLimits, requiredFeatures });
}
// The subgroup size the module should compile for on `device`: its one size when it has the
// feature and adapterInfo gives subgroupMinSize == subgroupMaxSize, a power of two from 4 to 64;
// else 0.
export function hasFeature(device, name) { return device.features.has(name); }
export function expectedSubgroup(device) {
  const i = device.adapterInfo || {}, n = i.subgroupMinSize;
  const one = n === i.subgroupMaxSize && Number.isInteger(n) && n >= 4 && n <= 64 && (n & (n - 1)) === 0;
  return device.features.has('subgroups') && one ? n : 0;
}
"#)]
extern "C" {
    #[wasm_bindgen(catch, js_name = hostDevice)]
    async fn host_device(raise: bool, subgroups: bool, size_control: bool) -> Result<JsValue, JsValue>;
    #[wasm_bindgen(js_name = hasFeature)]
    pub fn has_feature(device: &JsValue, name: &str) -> bool;
    #[wasm_bindgen(js_name = expectedSubgroup)]
    pub fn expected_subgroup(device: &JsValue) -> f64;
}

/// The host's device, with the `subgroups` feature where the adapter offers it (as
/// `www/chat.js` asks for it); [`device_without_subgroups`] for the path without.
pub async fn device(raise: bool) -> JsValue {
    host_device(raise, true, false).await.expect("the host creates a GPUDevice")
}

/// The host's device with `subgroups` and `subgroup-size-control` where the adapter has them.
pub async fn device_with_size_control() -> JsValue {
    host_device(true, true, true).await.expect("the host creates a GPUDevice")
}

pub async fn device_without_subgroups() -> JsValue {
    host_device(true, false, false).await.expect("the host creates a GPUDevice")
}

pub struct Case {
    pub name: &'static str,
    pub model: &'static [u8],
    pub json: &'static str,
    pub logits: &'static [u8],
}

macro_rules! case {
    ($name:literal, $model:literal) => {
        Case {
            name: $name,
            model: include_bytes!(concat!("../../../shared/models/", $model)),
            json: include_str!(concat!("../../../shared/reference/", $name, ".json")),
            logits: include_bytes!(concat!("../../../shared/reference/", $name, ".logits.f32")),
        }
    };
}

pub const F32: Case = case!("stories260K-f32", "stories260K.gguf");
pub const Q8_0: Case = case!("stories260K-q8_0", "stories260K-Q8_0.gguf");
pub const MOE_Q8_0: Case = case!("stories260K-moe4x-top2-q8_0", "stories260K-moe4x-top2-Q8_0.gguf");
pub const PAD256_Q4_K_M: Case = case!("stories260K-pad256-q4_k_m", "stories260K-pad256-Q4_K_M.gguf");
/// The other stories260K cases, so that every shared case also passes in the browser (SmolLM2,
/// not in `../shared/models` and too large to compile into this test, from a page:
/// `tests/page.test.mjs`).
pub const OTHERS: [Case; 7] = [
    case!("stories260K-f16", "stories260K-F16.gguf"),
    case!("stories260K-f32-long300", "stories260K.gguf"),
    case!("stories260K-moe4x-top2-f32", "stories260K-moe4x-top2-F32.gguf"),
    case!("stories260K-pad256-f16", "stories260K-pad256-F16.gguf"),
    case!("stories260K-pad256-q4_0", "stories260K-pad256-Q4_0.gguf"),
    case!("stories260K-pad256-q6_k", "stories260K-pad256-Q6_K.gguf"),
    case!("stories260K-pad256-q8_0", "stories260K-pad256-Q8_0.gguf"),
];

/// A model family's case: llama.cpp's logits in `tests/families/`, the model generated into
/// `.families/` by `scripts/families.sh` (the build fails if it is missing).
macro_rules! family_case {
    ($name:literal, $model:literal) => {
        Case {
            name: $name,
            model: include_bytes!(concat!("../../.families/", $model)),
            json: include_str!(concat!("../families/", $name, ".json")),
            logits: include_bytes!(concat!("../families/", $name, ".logits.f32")),
        }
    };
}

/// The F32 case of every family besides llama.
pub const FAMILIES: [Case; 8] = [
    family_case!("qwen2-f32", "qwen2-f32.gguf"),
    family_case!("qwen3-f32", "qwen3-f32.gguf"),
    family_case!("qwen3moe-f32", "qwen3moe-f32.gguf"),
    family_case!("phi3-f32", "phi3-f32.gguf"),
    family_case!("smollm3-f32", "smollm3-f32.gguf"),
    family_case!("granite-f32", "granite-f32.gguf"),
    family_case!("gemma2-f32", "gemma2-f32.gguf"),
    family_case!("gemma3-f32", "gemma3-f32.gguf"),
];

/// Largest allowed |logit - reference| at any position.
pub const TOLERANCE: f32 = 2e-3;
/// The same with `kvType: 'f16'`, as tests/reference.rs (keys and values rounded to f16 move the
/// reference cases' logits by 1e-2 to 4.4e-2 natively; stories260K-q8_0's by 1.0e-2).
pub const KV_F16_TOLERANCE: f32 = 8e-2;

pub fn ints(json: &str, key: &str) -> Vec<u32> {
    let start = json.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("no {key}"));
    let open = start + json[start..].find('[').unwrap();
    let close = open + json[open..].find(']').unwrap();
    json[open + 1..close].split(',').map(|s| s.trim().parse().unwrap()).collect()
}

pub fn number(json: &str, key: &str) -> usize {
    let start = json.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("no {key}"));
    let rest = &json[start + key.len() + 3..];
    rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

impl Case {
    /// The GGUF architecture of the case's model (`llama` unless its json says otherwise).
    pub fn architecture(&self) -> &str {
        self.json.split("\"architecture\"").nth(1).and_then(|r| r.split('"').nth(1)).unwrap_or("llama")
    }

    pub fn check_model_name(&self) {
        let file = self.json.split("\"model\"").nth(1).and_then(|r| r.split('"').nth(1)).unwrap();
        assert!(self.model.len() > 1000 && !file.is_empty(), "{}: bad case", self.name);
    }
    pub fn prompt(&self) -> Vec<u32> {
        ints(self.json, "prompt")
    }
    pub fn greedy(&self) -> Vec<u32> {
        ints(self.json, "greedy")
    }
    pub fn vocab(&self) -> usize {
        number(self.json, "vocab")
    }
    pub fn row(&self, i: usize) -> Vec<f32> {
        let v = self.vocab();
        self.logits[i * v * 4..(i + 1) * v * 4].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }
    pub fn buffer(&self) -> JsValue {
        bytes_to_js(self.model)
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

pub fn bytes_to_js(b: &[u8]) -> JsValue {
    js_sys::Uint8Array::from(b).buffer().into()
}

pub fn max_abs(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The first index of the largest logit (tests/topk.rs checks it).
pub use webgpu_llama::topk::argmax;
