// webgpu-llama: the package entry's types for TypeScript 5 and earlier (copied to
// pkg/index-webgpu-types.d.ts by `npm run build`; package.json picks it by the `types@<6` condition
// and `typesVersions`). Those versions' "dom" lib has no WebGPU types, so they come from the
// @webgpu/types dependency; everything else is index.d.ts's.
/// <reference types="@webgpu/types" />
export * from './index.js';
