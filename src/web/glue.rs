//! Small JavaScript helpers the browser module needs (one inline ES module): the
//! `DeviceLostError` and `OutOfMemoryError` classes, recognising `Blob` / `Response` / `ReadableStream` sources, reading
//! them in ranges, yielding to the event loop, and watching `GPUDevice.lost`.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(inline_js = r#"
/** The GPU device a model runs on was lost: this call and every later one on the model fail. */
export class DeviceLostError extends Error {
  constructor(message, reason) {
    super(message);
    this.name = 'DeviceLostError';
    /** GPUDeviceLostInfo.reason ('destroyed' or 'unknown'), when known. */
    this.reason = reason;
  }
}
export function deviceLostErrorClass() { return DeviceLostError; }
/** The model does not fit the device: a buffer beyond its limits, or out of GPU memory. */
export class OutOfMemoryError extends Error {
  constructor(message, bytes, limit, limitName) {
    super(message);
    this.name = 'OutOfMemoryError';
    /** Bytes asked for: the one buffer beyond the limit, or every buffer of the model. */
    this.bytes = bytes;
    /** The device limit exceeded and its name, or null (out of memory below the limits). */
    this.limit = limit;
    this.limitName = limitName;
  }
}
export function outOfMemoryErrorClass() { return OutOfMemoryError; }
export function newOutOfMemoryError(message, bytes, limit, limitName) { return new OutOfMemoryError(message, bytes, limit, limitName); }
export function newDeviceLostError(message, reason) { return new DeviceLostError(message, reason); }

/** 'arraybuffer' | 'blob' | 'response' | 'stream' | 'other' */
export function sourceKind(x) {
  if (x instanceof ArrayBuffer || ArrayBuffer.isView(x)) return 'arraybuffer';
  if (typeof SharedArrayBuffer !== 'undefined' && x instanceof SharedArrayBuffer) return 'arraybuffer';
  if (typeof Blob !== 'undefined' && x instanceof Blob) return 'blob';
  if (typeof Response !== 'undefined' && x instanceof Response) return 'response';
  if (typeof ReadableStream !== 'undefined' && x instanceof ReadableStream) return 'stream';
  return 'other';
}
export function blobSize(blob) { return blob.size; }
export function blobRange(blob, start, end) { return blob.slice(start, end).arrayBuffer(); }

/** A Response's body and its byte length (-1 when unknown or content-encoded). */
export function responseBody(r) {
  if (r.bodyUsed) throw new TypeError('the Response body was already read');
  if (!r.ok && r.status !== 0) throw new Error(`the Response has HTTP status ${r.status} ${r.statusText}`.trim());
  if (!r.body) throw new TypeError('the Response has no body');
  const enc = r.headers.get('content-encoding');
  const n = Number(r.headers.get('content-length'));
  return { stream: r.body, length: !enc || enc === 'identity' ? (Number.isFinite(n) && n > 0 ? n : -1) : -1 };
}
export function streamToBlob(stream) { return new Response(stream).blob(); }

/** Sequential reads of a ReadableStream as byte ranges; bytes before a range's start are dropped. */
export class RangeReader {
  constructor(stream) {
    if (stream.locked) throw new TypeError('the ReadableStream is locked (already being read)');
    this.reader = stream.getReader();
    this.base = 0;                   // stream offset of buf[0]
    this.buf = new Uint8Array(0);
    this.chunks = []; this.pending = 0;
  }
  /** Resolves to { buffer, offset } with bytes [start, end) at buffer[offset ..], or { ended }
   * (the stream's length) when the stream ends first. */
  async range(start, end) {
    if (start < this.base) throw new Error(`stream range ${start} was already dropped (at ${this.base})`);
    while (this.base + this.buf.length + this.pending < end) {
      const { done, value } = await this.reader.read();
      if (done) return { ended: this.base + this.buf.length + this.pending };
      const v = value instanceof Uint8Array ? value : new Uint8Array(value);
      this.chunks.push(v); this.pending += v.length;
    }
    // Concatenate, then drop the bytes before `start`.
    const drop = start - this.base;
    const joined = new Uint8Array(this.buf.length + this.pending);
    joined.set(this.buf, 0);
    let at = this.buf.length;
    for (const c of this.chunks) { joined.set(c, at); at += c.length; }
    this.buf = joined.slice(drop);
    this.base += drop; this.chunks = []; this.pending = 0;
    return { buffer: this.buf.buffer, offset: this.buf.byteOffset + (start - this.base) };
  }
  cancel(reason) { this.reader.cancel(reason).catch(() => {}); }
}

/** signal.reason, or an AbortError DOMException when the signal has none; null when not aborted. */
export function abortReason(signal) {
  if (!signal || !signal.aborted) return null;
  return signal.reason !== undefined ? signal.reason : new DOMException('the load was aborted', 'AbortError');
}
export function isAbortSignal(x) {
  return typeof AbortSignal !== 'undefined' ? x instanceof AbortSignal : !!x && typeof x.aborted === 'boolean';
}

/** A macrotask turn, so that the page can repaint (works in workers too). */
export function yieldToEventLoop() { return new Promise((r) => setTimeout(r, 0)); }

/** Watches device.lost: the returned object's `info` becomes the GPUDeviceLostInfo. */
export function watchLost(device) {
  const s = { info: null };
  const lost = device && device.lost;
  if (lost && typeof lost.then === 'function') lost.then((i) => { s.info = i || { reason: 'unknown', message: '' }; }, () => {});
  return s;
}
"#)]
extern "C" {
    /// `new DeviceLostError(message, reason)`.
    #[wasm_bindgen(js_name = newDeviceLostError)]
    pub fn new_device_lost_error(message: &str, reason: &str) -> JsValue;
    /// `new OutOfMemoryError(message, bytes, limit, limitName)`.
    #[wasm_bindgen(js_name = newOutOfMemoryError)]
    pub fn new_out_of_memory_error(message: &str, bytes: f64, limit: JsValue, limit_name: JsValue) -> JsValue;
    /// The `OutOfMemoryError` class itself (exported by the package entry).
    #[wasm_bindgen(js_name = outOfMemoryErrorClass)]
    pub fn out_of_memory_error_class() -> JsValue;
    /// The `DeviceLostError` class itself (exported by the package entry).
    #[wasm_bindgen(js_name = deviceLostErrorClass)]
    pub fn device_lost_error_class() -> JsValue;
    /// `'arraybuffer' | 'blob' | 'response' | 'stream' | 'other'`.
    #[wasm_bindgen(js_name = sourceKind)]
    pub fn source_kind(x: &JsValue) -> String;
    /// `blob.size`.
    #[wasm_bindgen(js_name = blobSize)]
    pub fn blob_size(blob: &JsValue) -> f64;
    /// `blob.slice(start, end).arrayBuffer()`.
    #[wasm_bindgen(js_name = blobRange, catch)]
    pub async fn blob_range(blob: &JsValue, start: f64, end: f64) -> Result<JsValue, JsValue>;
    /// `{ stream, length }` of a `Response` (`length` -1 when unknown); throws for a used body,
    /// an HTTP error status or no body.
    #[wasm_bindgen(js_name = responseBody, catch)]
    pub fn response_body(r: &JsValue) -> Result<JsValue, JsValue>;
    /// `new Response(stream).blob()`.
    #[wasm_bindgen(js_name = streamToBlob, catch)]
    pub async fn stream_to_blob(stream: &JsValue) -> Result<JsValue, JsValue>;
    /// Sequential byte-range reads of a `ReadableStream`.
    pub type RangeReader;
    /// Locks `stream` (throws a `TypeError` when it is locked already).
    #[wasm_bindgen(constructor, catch)]
    pub fn new(stream: &JsValue) -> Result<RangeReader, JsValue>;
    /// `{ buffer, offset }` holding bytes `[start, end)`, or `{ ended }` (the bytes the stream
    /// had) when it ends first.
    #[wasm_bindgen(method, catch)]
    pub async fn range(this: &RangeReader, start: f64, end: f64) -> Result<JsValue, JsValue>;
    /// Cancels the stream (errors ignored).
    #[wasm_bindgen(method)]
    pub fn cancel(this: &RangeReader, reason: &JsValue);
    /// `signal.reason` (an `AbortError` when it has none) once aborted, else `null`.
    #[wasm_bindgen(js_name = abortReason)]
    pub fn abort_reason(signal: &JsValue) -> JsValue;
    /// Whether `x` is an `AbortSignal`.
    #[wasm_bindgen(js_name = isAbortSignal)]
    pub fn is_abort_signal(x: &JsValue) -> bool;
    /// One macrotask turn.
    #[wasm_bindgen(js_name = yieldToEventLoop)]
    pub async fn yield_to_event_loop();
    /// `{ info }`, where `info` becomes the device's `GPUDeviceLostInfo` once it is lost.
    #[wasm_bindgen(js_name = watchLost)]
    pub fn watch_lost(device: &JsValue) -> JsValue;
}
