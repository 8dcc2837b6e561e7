// webgpu-llama: the package entry (copied to pkg/index.js by `npm run build`).
//
// Loads the WebAssembly module once, at import (top-level await), so the API is the seed's:
//   import { createLlama, testMatvecQ8 } from 'webgpu-llama';
//   const llama = await createLlama(device, source, { contextLength, onProgress, signal });
//     (source: ArrayBuffer, typed array, Blob/File, Response or ReadableStream)
//   const logits = await llama.forward(tokens, startPos);   // Float32Array of config.vocab
//   llama.dispose();
// Errors: TypeError (wrong argument types), RangeError (bad values), DeviceLostError and
// OutOfMemoryError (exported here), Error (a bad file, a GPU error).
// The wasm file is fetched from beside this file (new URL('webgpu_llama_bg.wasm', import.meta.url)).
import init, { __deviceLostErrorClass, __outOfMemoryErrorClass } from './webgpu_llama.js';

await init();

export { createLlama, readMetadata, testMatvecQ8, wasmMemoryBytes, Llama } from './webgpu_llama.js';
/** The error a model's calls reject with once its GPUDevice is lost (name 'DeviceLostError'). */
export const DeviceLostError = __deviceLostErrorClass();
/** createLlama's error when the model does not fit the device (name 'OutOfMemoryError'): a buffer
 * beyond a device limit, or out of GPU memory; `bytes`, `limit`, `limitName` say which. */
export const OutOfMemoryError = __outOfMemoryErrorClass();
/**
 * What to pass to `adapter.requestDevice()` so that the model runs its fastest kernels: the
 * adapter's largest buffers and storage bindings (larger models), storage buffers a kernel,
 * workgroup memory and invocations (the large matmul and attention tiles, the matrix-vector
 * kernels that write the next op's integer activations), and the features the kernels use where the adapter has them
 * (`subgroups`, and `subgroup-size-control` for adapters with a range of subgroup sizes;
 * `timestamp-query` with `timestamps`, for `profile`).
 * The module runs on whatever device it gets; WebGPU's default limits pick slower kernels.
 */
export function deviceDescriptor(adapter, { timestamps = false } = {}) {
  const keys = ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage',
    'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX'];
  const requiredLimits = Object.fromEntries(keys.map((k) => [k, adapter.limits[k]]));
  const requiredFeatures = ['subgroups', 'subgroup-size-control', ...(timestamps ? ['timestamp-query'] : [])]
    .filter((f) => adapter.features.has(f));
  return { requiredLimits, requiredFeatures };
}
// Internal: panic-handling tests only.
export { __testPanic, __testPanicAsync } from './webgpu_llama.js';
