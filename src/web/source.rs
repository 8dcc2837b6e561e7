//! The model file as the host page holds it: a JS `ArrayBuffer` (or a typed-array view of one)
//! read in small ranges for header parsing, and copied tensor by tensor straight to GPU buffers
//! with `GPUQueue.writeBuffer` (never through wasm linear memory).

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::error::{Error, Result};
use crate::gguf::ByteSource;
use crate::gpu::Gpu;
use crate::weights::TensorSource;

use super::adopt::write_from_js;

#[wasm_bindgen]
extern "C" {
    /// `new Uint8Array(buffer, byteOffset, length)` with offsets as doubles (no 4 GiB wrap).
    #[wasm_bindgen(js_name = Uint8Array)]
    type ByteView;
    #[wasm_bindgen(constructor, js_class = "Uint8Array", catch)]
    fn new(buffer: &JsValue, byte_offset: f64, length: f64) -> Result<ByteView, JsValue>;
    #[wasm_bindgen(js_namespace = ArrayBuffer, js_name = isView)]
    fn is_view(value: &JsValue) -> bool;
}

fn number(target: &JsValue, key: &str) -> Option<f64> {
    js_sys::Reflect::get(target, &JsValue::from_str(key)).ok()?.as_f64()
}

/// A byte range of a JS `ArrayBuffer` (or `SharedArrayBuffer`) holding a GGUF file.
pub struct JsBytes {
    buffer: JsValue,
    start: u64,
    len: u64,
}

impl JsBytes {
    /// Wraps `value`: an `ArrayBuffer`, a `SharedArrayBuffer`, or any `ArrayBuffer` view
    /// (`Uint8Array`, `DataView`, ...), whose bytes are the file. Nothing is copied.
    ///
    /// # Errors
    /// [`Error::Input`] naming what was passed when it is none of these.
    pub fn from_js(value: &JsValue) -> Result<JsBytes> {
        if is_view(value) {
            let buffer = js_sys::Reflect::get(value, &JsValue::from_str("buffer")).unwrap_or(JsValue::UNDEFINED);
            let start = number(value, "byteOffset").unwrap_or(0.0) as u64;
            let len = number(value, "byteLength").unwrap_or(0.0) as u64;
            return Ok(JsBytes { buffer, start, len });
        }
        // (wasm-bindgen's instanceof shims catch the TypeError when `SharedArrayBuffer` is absent.)
        let shared = value.is_instance_of::<js_sys::SharedArrayBuffer>();
        if value.is_instance_of::<js_sys::ArrayBuffer>() || shared {
            let len = number(value, "byteLength").unwrap_or(0.0) as u64;
            return Ok(JsBytes { buffer: value.clone(), start: 0, len });
        }
        Err(Error::Input(format!(
            "expected the GGUF file as an ArrayBuffer or a typed array, got {}",
            super::api::describe(value)
        )))
    }

    fn check(&self, offset: u64, n: u64, what: &str) -> Result<()> {
        if offset.checked_add(n).is_none_or(|e| e > self.len) {
            return Err(Error::Truncated { what: what.into(), at: offset, need: n, len: self.len });
        }
        Ok(())
    }
}

impl ByteSource for JsBytes {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check(offset, buf.len() as u64, "read")?;
        if buf.is_empty() {
            return Ok(());
        }
        let view = ByteView::new(&self.buffer, (self.start + offset) as f64, buf.len() as f64)
            .map_err(|e| Error::Input(format!("reading the GGUF's ArrayBuffer failed: {}", super::api::describe(&e))))?;
        view.unchecked_into::<js_sys::Uint8Array>().copy_to(buf);
        Ok(())
    }
}

impl TensorSource for JsBytes {
    /// Copies the range with `GPUQueue.writeBuffer` straight from the `ArrayBuffer`.
    fn upload(&self, gpu: &Gpu, buffer: &wgpu::Buffer, dst_offset: u64, src_offset: u64, len: u64) -> Result<()> {
        self.check(src_offset, len, "tensor data")?;
        write_from_js(&gpu.queue, buffer, dst_offset, self.buffer.unchecked_ref(), self.start + src_offset, len).map_err(Error::Gpu)
    }
}
