#!/usr/bin/env node
// Prefill and decode of the WebAssembly module (pkg/, as `npm run build` makes it) on Dawn + Tint,
// Chrome's WebGPU, through node and dawn.node (npm `webgpu`): on a GPU machine with no browser (the
// device machine), with the runtime ../shared/gpu-web/prepare.sh carries. ../shared/gpu-web/bench-dawn.mjs
// measures the forward loop and the per-kernel profile; this adds `generate` (decode chained on the
// GPU, ids read back a block at a time) beside the forward loop, on the same load.
//
// Per repeat (one load each): forward(prompt, depth) once to compile, then timed (prefill); then
// M tokens through the forward loop (each awaited, argmax in JS, as a sampler loop does); then the
// prompt again and M tokens through generate(last, pos, { maxTokens: M, block: K }) (greedy), whose
// ids must equal the loop's. With --depth D, forward(D tokens, 0) fills the cache first.
// Reported: median (min-max) of prefill tok/s, decode tok/s (loop) and (generate), and their ratio.
//
//   node scripts/bench-dawn.mjs --webgpu DIR --pkg DIR --model F.gguf [--prompt 512] [--gen 128]
//        [--repeats 3] [--depth 0] [--block 16] [--ctx N] [--json OUT] [--label NAME] [--dawn FLAG]...
//        [--limits buffers] (only the buffer limits raised; default: deviceDescriptor(adapter))
//        [--profile] (then one decode step and the prefill's kernels, summed by kernel, from
//        llama.profile(); the device gets timestamp-query, Dawn's timestamp quantization is off)
// Prompt ids: the native bench's 1 + (i * 2654435761) % (vocab - 1).
import { openAsBlob, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

const o = { prompt: 512, gen: 128, repeats: 3, depth: 0, block: 16, dawn: [] };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i], v = process.argv[++i];
  if (a === '--profile') { o.profile = true; i--; }
  else if (a === '--dawn') o.dawn.push(v);
  else if (['--webgpu', '--pkg', '--model', '--json', '--label', '--limits'].includes(a)) o[a.slice(2)] = v;
  else if (['--prompt', '--gen', '--repeats', '--depth', '--block', '--ctx'].includes(a)) o[a.slice(2)] = Number(v);
  else throw new Error(`unknown argument ${a} (see the header of scripts/bench-dawn.mjs)`);
}
if (!o.webgpu || !o.pkg || !o.model) throw new Error('--webgpu DIR --pkg DIR --model FILE are required');

// dawn.node in place of a page's WebGPU: GPU* globals, navigator.gpu, a Window (wgpu's WebGPU
// backend looks for navigator.gpu only where one exists), fetch() of file: URLs (the .wasm).
const { create, globals } = await import(pathToFileURL(join(resolve(o.webgpu), 'index.js')).href);
for (const [k, v] of Object.entries(globals)) if (globalThis[k] === undefined) globalThis[k] = v;
const flags = o.dawn.some((f) => f.startsWith('backend=')) ? o.dawn : ['backend=vulkan', ...o.dawn];
if (o.profile) flags.push('disable-dawn-features=timestamp_quantization');
const gpu = create(flags);
Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
if (globalThis.Window === undefined) globalThis.Window = function Window() {};
const nodeFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = new URL(String(input?.url ?? input), 'file:///');
  if (url.protocol !== 'file:') return nodeFetch(input, init);
  return new Response(readFileSync(fileURLToPath(url)), { headers: { 'content-type': 'application/wasm' } });
};
const { createLlama, deviceDescriptor } = await import(pathToFileURL(join(resolve(o.pkg), 'index.js')).href);

// The device as the package recommends it (deviceDescriptor: the adapter's limits), or with
// --limits buffers only the buffer limits raised (compute limits at WebGPU's defaults).
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
const desc = deviceDescriptor(adapter, { timestamps: !!o.profile });
if (o.limits === 'buffers') for (const k of Object.keys(desc.requiredLimits)) if (!k.endsWith('BufferBindingSize') && k !== 'maxBufferSize') delete desc.requiredLimits[k];
const device = await adapter.requestDevice(desc);
const info = adapter.info || {};
console.log(`[dawn] ${info.vendor} ${info.architecture} ${info.description}; ${desc.requiredFeatures.join(' ')}; limits ${JSON.stringify(desc.requiredLimits)}`);

const now = () => performance.now() / 1000;
const argmax = (v) => { let b = 0; for (let i = 1; i < v.length; i++) if (v[i] > v[b]) b = i; return b; };
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1]; };
const spread = (xs, d = 0) => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}-${Math.max(...xs).toFixed(d)})`;
/** llama.profile()'s dispatches summed by kernel label, largest first. */
function bySum(p) {
  if (!p) return null;
  const m = new Map();
  for (const k of p.kernels) {
    const e = m.get(k.label) || { label: k.label, calls: 0, seconds: 0 };
    e.calls += 1; e.seconds += k.seconds;
    m.set(k.label, e);
  }
  const kernels = [...m.values()].sort((a, b) => b.seconds - a.seconds);
  return { kernels, dispatches: p.kernels.length, sum: kernels.reduce((t, k) => t + k.seconds, 0), pass: p.passSeconds };
}

// A Blob over the file (files past 2 GiB cannot be read into one buffer).
const file = await openAsBlob(o.model);
const r = { prefill: [], loop: [], generate: [], agree: true };
for (let rep = 0; rep < o.repeats; rep++) {
  const llama = await createLlama(device, file, o.ctx ? { contextLength: o.ctx } : {});
  const vocab = llama.config.vocab;
  const ids = (n, salt) => Array.from({ length: n }, (_, i) => 1 + Number((BigInt(i) * 2654435761n + BigInt(salt * 97)) % 4294967296n) % (vocab - 1));
  if (o.depth) await llama.forward(ids(o.depth, 1), 0);
  const prompt = ids(o.prompt, 0);
  await llama.forward(prompt, o.depth);
  let t = now();
  let logits = await llama.forward(prompt, o.depth);
  r.prefill.push(o.prompt / (now() - t));
  const first = argmax(logits), loop = [first];
  let pos = o.depth + o.prompt;
  t = now();
  for (let j = 0; j < o.gen; j++) {
    logits = await llama.forward([loop[j]], pos + j);
    loop.push(argmax(logits));
  }
  r.loop.push(o.gen / (now() - t));
  // generate from the same state: its first id is the loop's second (compiled by a short run first).
  await llama.generate([first], pos, { maxTokens: 2, block: o.block });
  t = now();
  const g = await llama.generate([first], pos, { maxTokens: o.gen, block: o.block });
  r.generate.push(o.gen / (now() - t));
  const same = g.ids.length === o.gen && g.ids.every((id, j) => id === loop[j + 1]);
  r.agree &&= same;
  if (!same) console.log(`[dawn] generate ids differ from the forward loop's: ${[...g.ids].slice(0, 8)} vs ${loop.slice(1, 9)}`);
  if (o.profile && rep === o.repeats - 1) {
    r.profile = { decode: bySum(await llama.profile(1, pos + o.gen)), prefill: bySum(await llama.profile(o.prompt, o.depth)) };
  }
  llama.dispose();
}
const label = o.label || o.model.split('/').pop();
console.log(`[dawn] ${label}${o.limits ? ` (limits: ${o.limits})` : ''} depth ${o.depth}: prefill ${o.prompt} tok/s ${spread(r.prefill)}; decode ${o.gen} tok/s: forward loop ${spread(r.loop, 1)}, ` +
  `generate (K=${o.block}) ${spread(r.generate, 1)}, generate/loop ${(median(r.generate) / median(r.loop)).toFixed(2)}x; ids agree: ${r.agree}`);
for (const [what, p] of Object.entries(r.profile || {})) {
  if (!p) { console.log(`[dawn] profile of ${what}: none (no timestamp-query, or more tokens than one batch)`); continue; }
  console.log(`[dawn] profile of ${what}: ${p.dispatches} dispatches, ${(1e3 * p.sum).toFixed(3)} ms summed, the pass ${(1e3 * p.pass).toFixed(3)} ms; by kernel (calls, ms): ` +
    p.kernels.map((k) => `${k.label} ${k.calls} ${(1e3 * k.seconds).toFixed(3)}`).join('; '));
}
if (o.json) writeFileSync(o.json, JSON.stringify({ label, ...o, ...r }) + '\n', { flag: 'a' });
