// webgpu-llama: the package entry (copied to pkg/index.js by `npm run build`).
//
// Loads the WebAssembly module once, at import (top-level await), so the API is the seed's:
//   import { createLlama, testMatvecQ8 } from 'webgpu-llama';
//   const llama = await createLlama(device, source, { contextLength, onProgress, signal });
//     (source: ArrayBuffer, typed array, Blob/File, Response or ReadableStream)
//   const logits = await llama.forward(tokens, startPos);   // Float32Array of config.vocab
//   llama.dispose();
// Errors: TypeError (wrong argument types), RangeError (bad values), DeviceLostError (exported
// here), Error (a bad file, a GPU error).
// The wasm file is fetched from beside this file (new URL('webgpu_llama_bg.wasm', import.meta.url)).
import init, { __deviceLostErrorClass } from './webgpu_llama.js';

await init();

export { createLlama, readMetadata, testMatvecQ8, wasmMemoryBytes, Llama } from './webgpu_llama.js';
/** The error a model's calls reject with once its GPUDevice is lost (name 'DeviceLostError'). */
export const DeviceLostError = __deviceLostErrorClass();
// Internal: panic-handling tests only.
export { __testPanic, __testPanicAsync } from './webgpu_llama.js';
