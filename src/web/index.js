// webgpu-llama: the package entry (copied to pkg/index.js by `npm run build`).
//
// Loads the WebAssembly module once, at import (top-level await), so the API is the seed's:
//   import { createLlama, testMatvecQ8 } from 'webgpu-llama';
//   const llama = await createLlama(device, arrayBuffer, { contextLength, onProgress });
//   const logits = await llama.forward(tokens, startPos);   // Float32Array of config.vocab
//   llama.dispose();
// The wasm file is fetched from beside this file (new URL('webgpu_llama_bg.wasm', import.meta.url)).
import init from './webgpu_llama.js';

await init();

export { createLlama, testMatvecQ8, wasmMemoryBytes, Llama } from './webgpu_llama.js';
// Internal: panic-handling tests only.
export { __testPanic, __testPanicAsync } from './webgpu_llama.js';
