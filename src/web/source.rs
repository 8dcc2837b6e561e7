//! The model file as the host page holds it, and how its tensors reach GPU buffers.
//!
//! * [`JsBytes`]: a JS `ArrayBuffer` (or a typed-array view of one), read in small ranges for
//!   header parsing and copied tensor by tensor straight to GPU buffers with
//!   `GPUQueue.writeBuffer` (never through wasm linear memory).
//! * [`Source`]: that, a `Blob`/`File`, or a `Response`/`ReadableStream`. Loading from any of
//!   them is planned then streamed: [`read_header`] fetches only the header (growing a prefix
//!   until it parses), the engine's load runs against a [`Planned`] source that records every
//!   upload instead of doing it, and [`stream_uploads`] then reads the file once, in order, in
//!   windows of at most [`WINDOW`] bytes, writing each window's bytes to their buffers,
//!   reporting progress, honouring an `AbortSignal` and yielding to the event loop between
//!   windows. At most about one window of the file is in memory at a time (plus the header).

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use std::cell::{Cell, RefCell};

use crate::error::{Error, Result};
use crate::gguf::{ByteSource, Gguf, TensorInfo};
use crate::gpu::Gpu;
use crate::weights::TensorSource;

use super::adopt::write_from_js;
use super::glue;

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
        Err(Error::InvalidType(format!(
            "expected the GGUF file as an ArrayBuffer, a typed array, a Blob/File, a Response or a ReadableStream, got {}",
            super::js::describe(value)
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
            .map_err(|e| Error::Input(format!("reading the GGUF's ArrayBuffer failed: {}", super::js::describe(&e))))?;
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

/// Bytes of the file read, and written to the GPU, per step of [`stream_uploads`].
pub const WINDOW: u64 = 8 << 20;
/// The largest header (metadata and tensor infos) read from a `Blob` or stream.
const MAX_HEADER: u64 = 1 << 30;
/// The first read of a `Blob` or stream's header.
const FIRST_HEADER_READ: u64 = 64 << 10;

/// Where a model's bytes come from.
pub enum Source {
    /// An `ArrayBuffer` or a view of one: random access, no copies.
    Buffer(JsBytes),
    /// A `Blob` or `File` of `len` bytes: ranges read with `slice().arrayBuffer()`.
    Blob { blob: JsValue, len: u64 },
    /// A `ReadableStream` (a `Response`'s body) of known length: read once, in order.
    Stream { reader: glue::RangeReader, len: u64 },
}

fn js_failure(what: &str, e: &JsValue) -> Error {
    Error::Gpu(format!("{what}: {}", super::js::describe_error(e)))
}

impl Source {
    /// Wraps what `createLlama` was given. A `Response` or `ReadableStream` whose length is
    /// unknown (no `Content-Length`, or a compressed body) is first collected into a `Blob` (the
    /// browser may keep a large one on disk rather than in memory).
    ///
    /// # Errors
    /// [`Error::InvalidType`] for anything else, or a locked / already read stream;
    /// [`Error::Input`] for a `Response` with an HTTP error status.
    pub async fn from_js(value: &JsValue) -> Result<Source> {
        match glue::source_kind(value).as_str() {
            "arraybuffer" => Ok(Source::Buffer(JsBytes::from_js(value)?)),
            "blob" => Ok(Source::Blob { blob: value.clone(), len: glue::blob_size(value) as u64 }),
            kind @ ("response" | "stream") => {
                let (stream, len) = if kind == "response" {
                    let body = glue::response_body(value).map_err(|e| stream_error("the Response", &e))?;
                    (super::js::get(&body, "stream"), super::js::get(&body, "length").as_f64().unwrap_or(-1.0))
                } else {
                    (value.clone(), -1.0)
                };
                if len < 0.0 {
                    if js_sys::Reflect::get(&stream, &"locked".into()).ok().and_then(|v| v.as_bool()) == Some(true) {
                        return Err(Error::InvalidType("the ReadableStream is locked (already being read)".into()));
                    }
                    let blob = glue::stream_to_blob(&stream).await.map_err(|e| stream_error("reading the stream", &e))?;
                    return Ok(Source::Blob { len: glue::blob_size(&blob) as u64, blob });
                }
                let reader = glue::RangeReader::new(&stream).map_err(|e| stream_error("the stream", &e))?;
                Ok(Source::Stream { reader, len: len as u64 })
            }
            _ => Err(JsBytes::from_js(value).err().unwrap_or_else(|| Error::InvalidType("unreadable model source".into()))),
        }
    }

    /// Total bytes.
    pub fn len(&self) -> u64 {
        match self {
            Source::Buffer(b) => b.len,
            Source::Blob { len, .. } | Source::Stream { len, .. } => *len,
        }
    }

    /// Always false for a real model (a GGUF has at least a header).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An `ArrayBuffer` holding bytes `[start, end)` of the file, and where `start` is in it.
    async fn range(&self, start: u64, end: u64, what: &str) -> Result<(js_sys::ArrayBuffer, u64)> {
        let truncated = || Error::Truncated { what: what.to_string(), at: start, need: end - start, len: self.len() };
        if end > self.len() {
            return Err(truncated());
        }
        match self {
            Source::Buffer(b) => Ok((b.buffer.clone().unchecked_into(), b.start + start)),
            Source::Blob { blob, .. } => {
                let ab = glue::blob_range(blob, start as f64, end as f64).await.map_err(|e| stream_error("reading the Blob", &e))?;
                let got = super::js::get(&ab, "byteLength").as_f64().unwrap_or(0.0) as u64;
                if got != end - start {
                    return Err(truncated());
                }
                Ok((ab.unchecked_into(), 0))
            }
            Source::Stream { reader, .. } => {
                let r = reader.range(start as f64, end as f64).await.map_err(|e| stream_error("reading the stream", &e))?;
                if let Some(ended) = super::js::get(&r, "ended").as_f64() {
                    let what = format!("{what} (the stream ended after {ended} of its {} bytes)", self.len());
                    return Err(Error::Truncated { what, at: start, need: end - start, len: ended as u64 });
                }
                let offset = super::js::get(&r, "offset").as_f64().unwrap_or(0.0) as u64;
                Ok((super::js::get(&r, "buffer").unchecked_into(), offset))
            }
        }
    }

    /// Stops reading a stream (after an error or an abort).
    pub fn cancel(&self, reason: &JsValue) {
        if let Source::Stream { reader, .. } = self {
            reader.cancel(reason);
        }
    }
}

fn stream_error(what: &str, e: &JsValue) -> Error {
    if e.is_instance_of::<js_sys::TypeError>() {
        return Error::InvalidType(super::js::describe_error(e));
    }
    js_failure(what, e)
}

/// One upload the engine asked for, done once its bytes are read.
enum Op {
    /// `len` bytes at `src` to `buffer` at `dst`.
    Copy { buffer: wgpu::Buffer, dst: u64, src: u64, len: u64 },
    /// A 1-D tensor widened to f32 into `buffer`.
    F32 { buffer: wgpu::Buffer, tensor: TensorInfo },
    /// The file's last `len < 4` bytes zero-padded to one word.
    Tail { buffer: wgpu::Buffer, dst: u64, src: u64, len: u64 },
}

impl Op {
    fn range(&self) -> (u64, u64) {
        match self {
            Op::Copy { src, len, .. } | Op::Tail { src, len, .. } => (*src, src + len),
            Op::F32 { tensor, .. } => (tensor.offset, tensor.offset + tensor.n_bytes),
        }
    }
}

/// The source the engine loads from: header bytes served from memory, every upload recorded
/// (for [`stream_uploads`]) instead of done.
pub struct Planned<'a> {
    src: &'a Source,
    /// Bytes `[0, prefix.len())` of the file (Blob and stream sources).
    prefix: Vec<u8>,
    /// Further ranges read ahead (`rope_freqs.weight` of a Blob).
    extra: Vec<(u64, Vec<u8>)>,
    /// The end of the furthest read that the prefix could not serve.
    missed: Cell<u64>,
    ops: RefCell<Vec<Op>>,
}

impl<'a> Planned<'a> {
    fn new(src: &'a Source) -> Planned<'a> {
        Planned { src, prefix: Vec::new(), extra: Vec::new(), missed: Cell::new(0), ops: RefCell::new(Vec::new()) }
    }
}

impl ByteSource for Planned<'_> {
    fn len(&self) -> u64 {
        self.src.len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= self.src.len());
        let Some(end) = end else {
            return Err(Error::Truncated { what: "read".into(), at: offset, need: buf.len() as u64, len: self.src.len() });
        };
        if let Source::Buffer(b) = self.src {
            return b.read_at(offset, buf);
        }
        if end <= self.prefix.len() as u64 {
            buf.copy_from_slice(&self.prefix[offset as usize..end as usize]);
            return Ok(());
        }
        for (at, bytes) in &self.extra {
            if offset >= *at && end <= at + bytes.len() as u64 {
                buf.copy_from_slice(&bytes[(offset - at) as usize..(end - at) as usize]);
                return Ok(());
            }
        }
        self.missed.set(self.missed.get().max(end));
        Err(Error::Malformed(format!("bytes {offset}..{end} were needed before the file was streamed")))
    }
}

impl Planned<'_> {
    fn record(&self, op: Op) -> Result<()> {
        self.ops.borrow_mut().push(op);
        Ok(())
    }
}

impl TensorSource for Planned<'_> {
    fn upload(&self, _gpu: &Gpu, buffer: &wgpu::Buffer, dst: u64, src: u64, len: u64) -> Result<()> {
        self.record(Op::Copy { buffer: buffer.clone(), dst, src, len })
    }

    fn upload_f32(&self, _gpu: &Gpu, buffer: &wgpu::Buffer, t: &TensorInfo) -> Result<()> {
        self.record(Op::F32 { buffer: buffer.clone(), tensor: t.clone() })
    }

    fn upload_tail(&self, _gpu: &Gpu, buffer: &wgpu::Buffer, dst: u64, src: u64, len: u64) -> Result<()> {
        self.record(Op::Tail { buffer: buffer.clone(), dst, src, len })
    }
}

/// Reads and parses the header of `src` (for a `Blob` or stream: a prefix grown until it
/// parses, at most 1 GiB), and reads ahead what the engine reads on the CPU while loading
/// (`rope_freqs.weight`). Returns the header and the planning source to load from.
///
/// # Errors
/// The GGUF parser's errors; [`Error::Malformed`] for a header over 1 GiB; read errors.
pub async fn read_header(src: &Source) -> Result<(Gguf, Planned<'_>)> {
    let mut planned = Planned::new(src);
    if let Source::Buffer(_) = src {
        let g = Gguf::parse(&planned)?;
        return Ok((g, planned));
    }
    let mut want = FIRST_HEADER_READ.min(src.len());
    let g = loop {
        if want > planned.prefix.len() as u64 {
            let (ab, off) = src.range(0, want, "header").await?;
            planned.prefix = bytes_at(&ab, off, want)?;
        }
        planned.missed.set(0);
        match Gguf::parse(&planned) {
            Ok(g) => break g,
            Err(e) => {
                let missed = planned.missed.get();
                if missed <= planned.prefix.len() as u64 {
                    return Err(e);
                }
                if missed > MAX_HEADER {
                    return Err(Error::Malformed(format!("the header is larger than {MAX_HEADER} bytes (needs byte {missed})")));
                }
                want = missed.max(2 * want).min(src.len()).min(MAX_HEADER);
            }
        }
    };
    // The engine reads rope_freqs.weight on the CPU while loading: have its bytes at hand.
    if let Some(t) = g.tensor("rope_freqs.weight") {
        let end = t.offset + t.n_bytes;
        match src {
            Source::Stream { .. } if end > planned.prefix.len() as u64 => {
                if end > MAX_HEADER {
                    return Err(Error::Input(format!(
                        "rope_freqs.weight lies {end} bytes into the file: stream loading needs it within {MAX_HEADER} bytes; pass a Blob or ArrayBuffer"
                    )));
                }
                let (ab, off) = src.range(0, end, "rope_freqs.weight").await?;
                planned.prefix = bytes_at(&ab, off, end)?;
            }
            Source::Blob { .. } if end > planned.prefix.len() as u64 => {
                let (ab, off) = src.range(t.offset, end, "rope_freqs.weight").await?;
                let bytes = bytes_at(&ab, off, t.n_bytes)?;
                planned.extra.push((t.offset, bytes));
            }
            _ => {}
        }
    }
    Ok((g, planned))
}

/// A source over bytes `[at, at + bytes.len())` of a file (for dequantising one tensor).
struct Window<'a> {
    at: u64,
    bytes: &'a [u8],
}

impl ByteSource for Window<'_> {
    fn len(&self) -> u64 {
        self.at + self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let start = offset.checked_sub(self.at).ok_or_else(|| Error::Malformed(format!("byte {offset} is before the window")))?;
        self.bytes.read_at(start, buf)
    }
}

impl TensorSource for Window<'_> {}

/// What [`stream_uploads`] reports between windows: the stream position reached.
pub type OnWindow<'a> = dyn FnMut(u64) -> std::result::Result<(), JsValue> + 'a;

/// Performs the uploads `planned` recorded: reads the file once in source order, in windows
/// of at most [`WINDOW`] bytes (more only for a single tensor that must be widened whole), and
/// writes each window's bytes to their buffers. After each window it calls `on_window(next)`,
/// `next` being the start of the next window (every byte before it is on the GPU; the file's
/// length at the end), which may fail (an abort, a throwing progress callback), and then yields
/// to the event loop. Each window's writes run inside a validation error scope; the popped
/// scopes are returned to be awaited.
///
/// # Errors
/// Read errors (truncated stream ...) and [`Error::Gpu`] from `writeBuffer`, as `JsValue`s via
/// `to_js`; whatever `on_window` returns.
pub async fn stream_uploads(
    planned: Planned<'_>,
    gpu: &Gpu,
    on_window: &mut OnWindow<'_>,
    to_js: fn(Error) -> JsValue,
) -> std::result::Result<Vec<impl std::future::Future<Output = Option<wgpu::Error>>>, JsValue> {
    let src = planned.src;
    let mut ops = planned.ops.into_inner();
    // Split big copies so that windows stay bounded.
    let mut pieces = Vec::with_capacity(ops.len());
    for op in ops.drain(..) {
        match op {
            Op::Copy { buffer, dst, src, len } if len > WINDOW => {
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(WINDOW);
                    pieces.push(Op::Copy { buffer: buffer.clone(), dst: dst + done, src: src + done, len: n });
                    done += n;
                }
            }
            op => pieces.push(op),
        }
    }
    pieces.sort_by_key(|op| op.range().0);
    let mut scopes = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        let (start, mut end) = pieces[i].range();
        let mut j = i + 1;
        while j < pieces.len() {
            let (s, e) = pieces[j].range();
            if e.max(end) - start > WINDOW || s > end + WINDOW / 4 {
                break;
            }
            end = end.max(e);
            j += 1;
        }
        let (ab, base) = src.range(start, end, "tensor data").await.map_err(to_js)?;
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let written = write_window(gpu, &pieces[i..j], &ab, base, start);
        scopes.push(scope.pop());
        written.map_err(to_js)?;
        let next = pieces.get(j).map_or(src.len(), |p| p.range().0);
        on_window(next)?;
        glue::yield_to_event_loop().await;
        i = j;
    }
    Ok(scopes)
}

/// The writes of one window: the file's bytes `[start, ..)` are at `ab[base..]`.
fn write_window(gpu: &Gpu, ops: &[Op], ab: &js_sys::ArrayBuffer, base: u64, start: u64) -> Result<()> {
    for op in ops {
        let (s, e) = op.range();
        let at = base + (s - start);
        match op {
            Op::Copy { buffer, dst, len, .. } => {
                write_from_js(&gpu.queue, buffer, *dst, ab, at, *len).map_err(Error::Gpu)?;
            }
            Op::Tail { buffer, dst, len, .. } => {
                let mut word = [0u8; 4];
                word[..*len as usize].copy_from_slice(&bytes_at(ab, at, *len)?);
                gpu.queue.write_buffer(buffer, *dst, &word);
            }
            Op::F32 { buffer, tensor } => {
                let bytes = bytes_at(ab, at, e - s)?;
                Window { at: s, bytes: &bytes }.upload_f32(gpu, buffer, tensor)?;
            }
        }
    }
    Ok(())
}

/// A copy of `len` bytes of `ab` from byte `at` (offsets as doubles: no 4 GiB wrap).
fn bytes_at(ab: &js_sys::ArrayBuffer, at: u64, len: u64) -> Result<Vec<u8>> {
    let view = ByteView::new(ab, at as f64, len as f64).map_err(|e| js_failure("reading the model's bytes", &e))?;
    Ok(view.unchecked_into::<js_sys::Uint8Array>().to_vec())
}
