// The npm package as a user gets it: build, `npm pack`, install the tarball into a temp dir, serve
// a plain <script type="module"> page that imports the PACKED package (bare specifier through an
// import map built from the installed package.json's "exports"), drive /usr/bin/chromium
// (WebGPU on SwiftShader) with playwright-core, and check stories260K's logits and greedy
// continuation, and every row of the SmolLM2 case, against ../shared/reference from that page. Also: the package's files and types,
// typed errors reaching the page, loading in a Web Worker from a streamed Response, what a Rust
// panic does to the module, and the chat demo (www/index.html) answering a question on SmolLM2
// (screenshot in target/page-test/chat.png).
//
//   node --test tests/page.test.mjs        (npm run test:page; scripts/test-web.sh runs it too)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, build, serve, launchChromium } from '../scripts/demo.mjs';
import { webMounts } from '../scripts/serve.mjs';

const SHARED = join(ROOT, '..', 'shared');
const CASE = 'stories260K-f32';
const TOLERANCE = 2e-3;

let tmp, app, server, url, browser, page;

function reference(name) {
  const dir = join(SHARED, 'reference');
  assert.ok(existsSync(dir), `MISSING ${dir}: the reference logits must be checked out beside the crate`);
  const meta = JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8'));
  const raw = readFileSync(join(dir, meta.logits_file));
  const all = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
  const rows = [];
  for (let i = 0; i < meta.logits_rows; i++) rows.push(all.subarray(i * meta.vocab, (i + 1) * meta.vocab));
  return { ...meta, rows };
}

// Import maps do not reach workers: the worker imports the package entry by its URL.
const WORKER = `
onmessage = async (e) => {
  const { modelUrl, prompt, entry } = e.data;
  try {
    const lib = await import(entry);
    const adapter = await navigator.gpu.requestAdapter();
    const device = await adapter.requestDevice();
    let progress = 0;
    const res = await fetch(modelUrl);
    const llama = await lib.createLlama(device, res, { onProgress: () => { progress++; } });
    const logits = await llama.forward(prompt, 0);
    postMessage({ inWorker: typeof WorkerGlobalScope !== 'undefined' && self instanceof WorkerGlobalScope,
                  streamed: res.bodyUsed, progress, tensors: llama.config.dispatchesPerToken > 0, logits: Array.from(logits) });
    llama.dispose();
  } catch (err) {
    postMessage({ error: String(err && err.stack || err) });
  }
};`;

const PAGE = (importPath) => `<!doctype html>
<html><head><meta charset="utf-8"><title>webgpu-llama page test</title>
<script type="importmap">${JSON.stringify({ imports: { 'webgpu-llama': importPath } })}</script>
</head><body>
<script type="module">
import * as lib from 'webgpu-llama';
const argmax = (v) => { let b = 0; for (let i = 1; i < v.length; i++) if (v[i] > v[b]) b = i; return b; };
// The device as the package recommends it (its deviceDescriptor: the adapter's limits, subgroups).
async function device() {
  const adapter = await navigator.gpu.requestAdapter();
  const desc = lib.deviceDescriptor(adapter);
  if (desc.requiredLimits.maxComputeInvocationsPerWorkgroup !== adapter.limits.maxComputeInvocationsPerWorkgroup) throw new Error('deviceDescriptor: the adapter limits');
  return adapter.requestDevice(desc);
}
// The seed's use: prompt in one call, then one token at a time; every row of logits returned.
window.runCase = async (modelUrl, prompt, n) => {
  const buf = await (await fetch(modelUrl)).arrayBuffer();
  const llama = await lib.createLlama(await device(), buf);
  const rows = [], ids = [];
  let logits = await llama.forward(prompt, 0);
  rows.push(Array.from(logits));
  for (let j = 0; j < n; j++) {
    ids.push(argmax(logits));
    if (j + 1 < n) { logits = await llama.forward([ids[j]], prompt.length + j); rows.push(Array.from(logits)); }
  }
  const out = { config: { ...llama.config }, rows, ids, text: llama.decode(ids), memory: lib.wasmMemoryBytes() };
  llama.dispose();
  return out;
};
// A reference case whole, its rows checked in the page (SmolLM2's are 5 MB): the prompt in one
// call, the greedy continuation a token at a time, then the rows inside the prompt a token per
// call from position 0 (as tests/web.rs does); each row's max |logit - reference| and the ids.
window.referenceCase = async (modelUrl, logitsUrl, prompt, n) => {
  const [buf, ref] = await Promise.all([modelUrl, logitsUrl].map(async (u) => (await fetch(u)).arrayBuffer()));
  const want = new Float32Array(ref);
  const llama = await lib.createLlama(await device(), buf);
  const vocab = llama.config.vocab, p = prompt.length, diff = [], ids = [];
  const check = (i, got) => {
    let d = got.length === vocab ? 0 : Infinity;
    for (let k = 0; k < got.length; k++) d = Math.max(d, Math.abs(got[k] - want[i * vocab + k]));
    diff[i] = d;
  };
  let logits = await llama.forward(prompt, 0);
  check(p - 1, logits);
  for (let j = 0; j < n; j++) {
    ids.push(argmax(logits));
    if (j + 1 < n) { logits = await llama.forward([ids[j]], p + j); check(p + j, logits); }
  }
  for (let i = 0; i + 1 < p; i++) check(i, await llama.forward([prompt[i]], i));
  const text = llama.decode(ids);
  llama.dispose();
  return { diff, ids, vocab, text };
};
window.errorCase = async (modelUrl) => {
  const buf = await (await fetch(modelUrl)).arrayBuffer();
  const dev = await device();
  const llama = await lib.createLlama(dev, buf, { contextLength: 4 });
  const out = {};
  const seen = (e) => ({ isError: e instanceof Error, name: e.name, type: e instanceof TypeError, range: e instanceof RangeError,
                         lost: e instanceof lib.DeviceLostError, message: e.message });
  try { await llama.forward([1, 2, 3, 4, 5], 0); } catch (e) { out.past = seen(e); }
  try { await llama.forward('1,2', 0); } catch (e) { out.notArray = seen(e); }
  try { await lib.createLlama(dev, new ArrayBuffer(64)); } catch (e) { out.notGguf = seen(e); }
  try { await lib.createLlama({}, buf); } catch (e) { out.notDevice = seen(e); }
  llama.dispose();
  try { await llama.forward([1], 0); } catch (e) { out.disposed = seen(e); }
  const again = await lib.createLlama(dev, buf, { contextLength: 4 });
  dev.destroy();
  try { await again.forward([1], 0); } catch (e) { out.lost = seen(e); }
  return out;
};
// llama.profile() on a device with 'timestamp-query' (where the adapter has it) and on one
// without, and its typed errors.
window.profileCase = async (modelUrl, prompt) => {
  const buf = await (await fetch(modelUrl)).arrayBuffer();
  const adapter = await navigator.gpu.requestAdapter();
  const has = adapter.features.has('timestamp-query');
  const seen = (e) => ({ name: e.name, message: e.message });
  const out = { has };
  const timed = await lib.createLlama(await adapter.requestDevice({ requiredFeatures: has ? ['timestamp-query'] : [] }), buf);
  out.first = Array.from(await timed.forward(prompt, 0));
  const p = await timed.profile(1, prompt.length);
  out.dispatches = timed.config.dispatchesPerToken;
  out.profile = p && { n: p.kernels.length, kernels: p.kernels.map((k) => k.label.split(' ')[0]),
    finite: p.kernels.every((k) => Number.isFinite(k.seconds) && k.seconds >= 0 && Number.isFinite(k.bytes)),
    seconds: p.kernels.reduce((t, k) => t + k.seconds, 0), bytes: p.kernels.reduce((t, k) => t + k.bytes, 0), pass: p.passSeconds };
  out.batch = (await timed.profile(prompt.length, 0))?.kernels.length;
  out.again = Array.from(await timed.forward(prompt, 0));
  try { await timed.profile(0, 0); } catch (e) { out.zero = seen(e); }
  try { await timed.profile('1', 0); } catch (e) { out.notNumber = seen(e); }
  try { await timed.profile(1, 4000); } catch (e) { out.past = seen(e); }
  timed.dispose();
  const plain = await lib.createLlama(await device(), buf);
  out.without = await plain.profile(1, 0);
  plain.dispose();
  return out;
};
// The same model loaded in a dedicated module worker from a streamed Response.
window.workerCase = (modelUrl, prompt, entry) => new Promise((resolve) => {
  const w = new Worker('/worker.js', { type: 'module' });
  w.onmessage = (e) => { resolve(e.data); w.terminate(); };
  w.onerror = (e) => resolve({ error: e.message || 'worker error' });
  w.postMessage({ modelUrl, prompt, entry });
});
// A panic: pending promises reject with the panic's message, the module resets itself, old
// objects fail loudly, new ones work.
window.panicCase = async (modelUrl) => {
  const buf = await (await fetch(modelUrl)).arrayBuffer();
  const dev = await device();
  const old = await lib.createLlama(dev, buf);
  const out = {};
  try { await lib.__testPanicAsync('boom in a future'); out.asyncResolved = true; } catch (e) { out.async = { isError: e instanceof Error, message: e.message }; }
  try { lib.__testPanic('boom in a call'); out.syncReturned = true; } catch (e) { out.sync = { name: e.constructor.name, message: e.message }; }
  try { await old.forward([1], 0); out.staleWorked = true; } catch (e) { out.stale = { message: e.message }; }
  const fresh = await lib.createLlama(dev, buf);
  out.freshLogits = Array.from(await fresh.forward([1, 403, 407, 261, 378], 0));
  fresh.dispose();
  return out;
};
window.ready = Object.keys(lib).sort();
</script></body></html>`;

before(async () => {
  const t0 = Date.now();
  build({ log: () => {} });
  tmp = mkdtempSync(join(tmpdir(), 'webgpu-llama-page-'));
  const packed = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], { cwd: ROOT, encoding: 'utf8' });
  const tarball = join(tmp, JSON.parse(packed)[0].filename);
  app = join(tmp, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'page-test-app', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: app, stdio: 'pipe' });
  const installed = JSON.parse(readFileSync(join(app, 'node_modules', 'webgpu-llama', 'package.json'), 'utf8'));
  const entry = installed.exports['.'].default;
  writeFileSync(join(app, 'index.html'), PAGE(`/node_modules/webgpu-llama/${entry.replace(/^\.\//, '')}`));
  writeFileSync(join(app, 'worker.js'), WORKER);
  ({ server, url } = await serve({ '/': app, '/models/': join(SHARED, 'models'), '/reference/': join(SHARED, 'reference'), '/local-models/': join(ROOT, '.models') }));
  browser = await launchChromium();
  page = await browser.newPage();
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') console.log(`[page console] ${m.text().split('\n')[0]}`); });
  await page.goto(`${url}/`);
  await page.waitForFunction(() => window.ready, null, { timeout: 60_000 });
  console.log(`# setup (build, pack, install, browser) ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

after(async () => {
  await browser?.close();
  server?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('the tarball holds the built module, its types and nothing else', () => {
  const dir = join(app, 'node_modules', 'webgpu-llama');
  const files = readdirSync(join(dir, 'pkg')).sort();
  assert.deepEqual(files, ['index-webgpu-types.d.ts', 'index.d.ts', 'index.js', 'snippets', 'webgpu_llama.d.ts', 'webgpu_llama.js', 'webgpu_llama_bg.wasm', 'webgpu_llama_bg.wasm.d.ts']);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  assert.equal(pkg.name, 'webgpu-llama');
  assert.equal(pkg.type, 'module');
  assert.equal(pkg.exports['.'].types, './pkg/index.d.ts');
  assert.equal(pkg.exports['.']['types@<6'], './pkg/index-webgpu-types.d.ts');
  const dts = readFileSync(join(dir, 'pkg', 'webgpu_llama.d.ts'), 'utf8');
  assert.deepEqual(pkg.dependencies, { '@webgpu/types': '0.1.74' }, 'the types depend on @webgpu/types');
  const index = readFileSync(join(dir, 'pkg', 'index.d.ts'), 'utf8');
  for (const s of ['export declare class DeviceLostError extends Error', 'readMetadata', 'Profile']) {
    assert.ok(index.includes(s), `index.d.ts should have ${s}`);
  }
  const before6 = readFileSync(join(dir, 'pkg', 'index-webgpu-types.d.ts'), 'utf8');
  for (const s of ['/// <reference types="@webgpu/types" />', "export * from './index.js';"]) {
    assert.ok(before6.includes(s), `index-webgpu-types.d.ts should have ${s}`);
  }
  for (const s of ['createLlama(device: GPUDevice, source: ModelSource, options?: LoadOptions): Promise<Llama>',
    'export type ModelSource = ArrayBuffer | ArrayBufferView | Blob | Response | ReadableStream<Uint8Array>', 'signal?: AbortSignal',
    "export type KvType = 'f32' | 'f16'", 'kvType?: KvType', 'readonly kvType: KvType',
    'forward(tokens: ArrayLike<number>, startPos: number): Promise<Float32Array>', 'readonly config: LlamaConfig',
    'testMatvecQ8(device: GPUDevice', 'Promise<MatvecQ8Result>', 'wasmMemoryBytes(): number', 'dispose(): void']) {
    assert.ok(dts.includes(s), `webgpu_llama.d.ts should declare ${s}`);
  }
  assert.ok(!/export function __test/.test(dts), 'test hooks stay out of the declared API');
});

// A user's module, type-checked against the installed package (the README's example, typed).
const CONSUMER = `import { createLlama, deviceDescriptor, readMetadata, DeviceLostError } from 'webgpu-llama';
import type { KvType, Llama, LlamaConfig, LoadProgress, Profile, TopK } from 'webgpu-llama';
export async function main(): Promise<void> {
  const adapter = (await navigator.gpu.requestAdapter())!;
  const device: GPUDevice = await adapter.requestDevice(deviceDescriptor(adapter, { timestamps: true }));
  const llama: Llama = await createLlama(device, await fetch('model.gguf'), { contextLength: 2048, onProgress: (p: LoadProgress) => console.log(p.bytesDone) });
  const config: LlamaConfig = llama.config;
  const kv: KvType = config.kvType;
  const logits: Float32Array = await llama.forward([504, 3575, 282, 4649, 314], 0);
  const top: TopK = await llama.forwardTopK([7042], 5, 40);
  const profile: Profile | null = await llama.profile(1, 6);
  console.log(kv, logits.length, top.ids, profile, llama.decode([7042]), await readMetadata(new Blob([])));
  llama.dispose();
  try { await llama.forward([1], 6); } catch (e) { if (e instanceof DeviceLostError) console.log(e.reason); }
}
`;

test('the types check with TypeScript 5 and 7 (skipLibCheck off): WebGPU types from @webgpu/types before 6, from the "dom" lib after', () => {
  writeFileSync(join(app, 'consumer.ts'), CONSUMER);
  const compilers = [['5', join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')], ['7', join(ROOT, 'node_modules', 'typescript-7', 'bin', 'tsc')]];
  for (const [version, tsc] of compilers) {
    assert.ok(existsSync(tsc), `MISSING ${tsc}: npm ci installs TypeScript ${version} (devDependencies)`);
    // node10 (package.json's typesVersions) is gone from TypeScript 7.
    for (const resolution of version === '5' ? ['bundler', 'node16', 'node10'] : ['bundler', 'node16']) {
      const module = resolution === 'node16' ? 'node16' : resolution === 'node10' ? 'commonjs' : 'esnext';
      const options = { target: 'es2022', module, moduleResolution: resolution, strict: true, noEmit: true, skipLibCheck: false, lib: ['esnext', 'dom'] };
      writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: options, files: ['consumer.ts'] }));
      const r = spawnSync(process.execPath, [tsc, '-p', app], { cwd: app, encoding: 'utf8' });
      assert.equal(r.status, 0, `TypeScript ${version}, moduleResolution ${resolution}:\n${r.stdout}${r.stderr}`);
    }
  }
});

test('the page imports the packed package', async () => {
  const names = await page.evaluate(() => window.ready);
  for (const n of ['createLlama', 'readMetadata', 'DeviceLostError', 'testMatvecQ8', 'wasmMemoryBytes', 'Llama']) assert.ok(names.includes(n), `exports ${n}`);
});

test(`${CASE}: logits and greedy continuation match the reference from the page`, async () => {
  const ref = reference(CASE);
  const t0 = Date.now();
  const r = await page.evaluate(([m, p, n]) => window.runCase(m, p, n), [`/models/${ref.model}`, ref.prompt, ref.greedy.length]);
  const seconds = (Date.now() - t0) / 1000;
  assert.deepEqual(r.ids, ref.greedy, 'greedy continuation');
  assert.equal(r.rows.length, ref.greedy.length);
  let worst = 0;
  r.rows.forEach((row, j) => {
    const want = ref.rows[ref.prompt.length - 1 + j];
    assert.equal(row.length, ref.vocab);
    let d = 0;
    for (let i = 0; i < row.length; i++) d = Math.max(d, Math.abs(row[i] - want[i]));
    assert.ok(d <= TOLERANCE, `row ${ref.prompt.length - 1 + j} differs by ${d}`);
    worst = Math.max(worst, d);
  });
  const c = r.config;
  assert.deepEqual([c.d, c.L, c.ff, c.nh, c.nkv, c.hd, c.ctx, c.vocab, c.experts, c.topk], [64, 5, 172, 8, 4, 8, 2048, 512, 0, 0]);
  console.log(`# ${CASE}: ${r.rows.length} rows, max abs diff ${worst.toExponential(2)}, ${seconds.toFixed(1)} s, text ${JSON.stringify(r.text)}, wasm memory ${r.memory} bytes`);
});

// The shared case the wasm tests leave out (tests/web.rs: too slow for their runner there), from
// the page: every row of the prompt and the greedy continuation, within the tolerance.
test('smollm2-135m-instruct-q4_1: every reference row and the greedy continuation from the page', { timeout: 10 * 60_000 }, async (t) => {
  const name = 'smollm2-135m-instruct-q4_1';
  const meta = JSON.parse(readFileSync(join(SHARED, 'reference', `${name}.json`), 'utf8'));
  if (!existsSync(join(ROOT, '.models', meta.model))) { t.skip(`SKIPPED: .models/${meta.model} is missing (scripts/fetch-models.sh)`); return; }
  const t0 = Date.now();
  const r = await page.evaluate(([m, l, p, n]) => window.referenceCase(m, l, p, n), [`/local-models/${meta.model}`, `/reference/${meta.logits_file}`, meta.prompt, meta.greedy.length]);
  const seconds = (Date.now() - t0) / 1000;
  assert.equal(r.vocab, meta.vocab);
  assert.deepEqual(r.ids, meta.greedy, 'greedy continuation');
  assert.equal(r.diff.length, meta.logits_rows);
  r.diff.forEach((d, i) => assert.ok(d <= TOLERANCE, `row ${i} differs by ${d}`));
  console.log(`# ${name}: ${r.diff.length} rows, max abs diff ${Math.max(...r.diff).toExponential(2)}, ${seconds.toFixed(1)} s, text ${JSON.stringify(r.text)}`);
});

test('errors reach the page typed: TypeError, RangeError, DeviceLostError, Error', async () => {
  const r = await page.evaluate((m) => window.errorCase(m), '/models/stories260K.gguf');
  assert.deepEqual([r.past?.range, r.past?.name], [true, 'RangeError']);
  assert.match(r.past.message, /past the context/);
  assert.deepEqual([r.notArray?.type, r.notArray?.name], [true, 'TypeError']);
  assert.match(r.notArray.message, /tokens must be an array/);
  assert.deepEqual([r.notDevice?.type, r.notDevice?.name], [true, 'TypeError']);
  assert.deepEqual([r.notGguf?.isError, r.notGguf?.name], [true, 'Error']);
  assert.match(r.notGguf.message, /not a GGUF file/);
  assert.deepEqual([r.disposed?.isError, r.disposed?.name], [true, 'Error']);
  assert.match(r.disposed.message, /use after dispose\(\)/);
  assert.deepEqual([r.lost?.lost, r.lost?.isError, r.lost?.name], [true, true, 'DeviceLostError'], JSON.stringify(r.lost));
  assert.match(r.lost.message, /the GPU device was lost \(destroyed/);
});

test('profile(): GPU time of each kernel of a step with timestamp-query, null without, typed errors', async (t) => {
  const ref = reference(CASE);
  const r = await page.evaluate(([m, p]) => window.profileCase(m, p), [`/models/${ref.model}`, ref.prompt]);
  assert.equal(r.without, null, 'a device without timestamp-query gets null');
  assert.deepEqual([r.zero?.name, r.notNumber?.name, r.past?.name], ['RangeError', 'TypeError', 'RangeError'], JSON.stringify(r));
  // The profile wrote the cache but left forward's logits as they were.
  assert.deepEqual(r.again, r.first, 'the prompt\'s logits after profile() against before');
  if (!r.has) { t.skip('SKIPPED (timing part): the adapter has no timestamp-query'); return; }
  assert.ok(r.profile, 'a profile with timestamp-query');
  assert.equal(r.profile.n, r.dispatches, 'one entry per dispatch of a one-token step');
  assert.ok(r.profile.finite && r.profile.seconds > 0 && r.profile.pass > 0 && r.profile.bytes > 0, JSON.stringify(r.profile));
  // (RMSNorm and SwiGLU run inside the matvecs where those fuse them: Tuning::fused.)
  for (const k of ['embed', 'matvec']) assert.ok(r.profile.kernels.includes(k), `${k} in ${r.profile.kernels}`);
  assert.ok(r.profile.kernels.some((k) => k.startsWith('attention')), `an attention kernel in ${r.profile.kernels}`);
  assert.ok(r.batch > 0, 'the prompt as one batch profiles too');
  console.log(`# profile: ${r.profile.n} kernels, ${(1e3 * r.profile.seconds).toFixed(2)} ms summed, the pass ${(1e3 * r.profile.pass).toFixed(2)} ms`);
});

test('a Web Worker loads a streamed Response and gets the reference logits', async () => {
  const ref = reference(CASE);
  const entry = '/node_modules/webgpu-llama/pkg/index.js';
  const r = await page.evaluate(([m, p, e]) => window.workerCase(m, p, e), [`/models/${ref.model}`, ref.prompt, entry]);
  assert.equal(r.error, undefined, r.error);
  assert.equal(r.inWorker, true, 'ran in a worker');
  assert.equal(r.streamed, true, 'the Response body was read');
  assert.ok(r.progress > 10, `progress reported per tensor (${r.progress} calls)`);
  const want = ref.rows[ref.prompt.length - 1];
  let d = 0;
  for (let i = 0; i < want.length; i++) d = Math.max(d, Math.abs(r.logits[i] - want[i]));
  assert.ok(d <= TOLERANCE, `worker logits differ by ${d}`);
});

test('a Rust panic rejects pending calls, then the module resets and works again', async () => {
  const r = await page.evaluate((m) => window.panicCase(m), '/models/stories260K.gguf');
  assert.equal(r.asyncResolved, undefined);
  assert.equal(r.async?.isError, true);
  assert.match(r.async.message, /webgpu-llama panicked [\s\S]*boom in a future/);
  assert.equal(r.syncReturned, undefined);
  assert.equal(r.sync?.name, 'RuntimeError');
  assert.equal(r.staleWorked, undefined);
  assert.match(r.stale.message, /stale object/);
  const ref = reference(CASE);
  const want = ref.rows[ref.prompt.length - 1];
  let d = 0;
  for (let i = 0; i < want.length; i++) d = Math.max(d, Math.abs(r.freshLogits[i] - want[i]));
  assert.ok(d <= TOLERANCE, `after the reset the logits differ by ${d}`);
});

// The chat demo, as a user uses it: SmolLM2 loaded from a Blob, a question typed in, the answer
// streamed into the page. The greedy ids must be the native engine's for the same prompt ids
// (the CLI, target/debug/webgpu-llama, built by the native tests).
test('the chat demo answers a typed question on SmolLM2 (screenshot)', { timeout: 15 * 60_000 }, async (t) => {
  const model = join(ROOT, '.models', 'SmolLM2-135M-Instruct.Q4_1.gguf');
  if (!existsSync(model)) { t.skip(`SKIPPED: ${model} is missing (scripts/fetch-models.sh)`); return; }
  const { server: chatServer, url: chatUrl } = await serve(webMounts());
  const chat = await browser.newPage({ viewport: { width: 900, height: 760 } });
  chat.on('pageerror', (e) => console.log(`[chat page error] ${e.message}`));
  try {
    const t0 = Date.now();
    await chat.goto(`${chatUrl}/?n=8`);
    await chat.click('#load-default');
    await chat.waitForFunction(() => !document.querySelector('#question').disabled || document.querySelector('#status.error'), null, { timeout: 5 * 60_000 });
    assert.doesNotMatch(await chat.textContent('#status'), /Error/);
    await chat.fill('#question', 'What is the capital of France?');
    await chat.click('#send');
    await chat.waitForFunction(() => window.lastTurn || document.querySelector('#status.error'), null, { timeout: 10 * 60_000, polling: 500 });
    const r = await chat.evaluate(() => window.lastTurn);
    mkdirSync(join(ROOT, 'target', 'page-test'), { recursive: true });
    await chat.screenshot({ path: join(ROOT, 'target', 'page-test', 'chat.png'), fullPage: true });
    assert.ok(r, `no answer: ${await chat.textContent('#status')}`);
    const shown = await chat.evaluate(() => [...document.querySelectorAll('.msg')].map((m) => [m.className, m.textContent]));
    assert.deepEqual(shown[0], ['msg user', 'What is the capital of France?']);
    assert.equal(shown[1][1], r.answer, 'the answer is shown');
    assert.ok(r.answer.trim().length > 0 && r.ids.length > 0, 'a non-empty answer');
    assert.ok(r.ids.length <= 8, 'capped at 8 new tokens');
    const stats = await chat.textContent('#stats');
    assert.match(stats, /tok\/s/);
    // The prompt is the GGUF's chat template over the question; its first ids are <|im_start|>system.
    assert.equal(r.promptIds[0], 1);
    const cli = join(ROOT, 'target', 'debug', 'webgpu-llama');
    if (!existsSync(cli)) {
      console.log(`# SKIPPED the native comparison: ${cli} is not built (cargo test builds it)`);
    } else {
      const out = spawnSync(cli, ['run', model, '--tokens', r.promptIds.join(','), '-n', String(r.ids.length + 1)], { encoding: 'utf8' });
      assert.equal(out.status, 0, out.stderr);
      const native = out.stdout.match(/greedy ids: ([0-9,]+)/)[1].split(',').map(Number);
      assert.deepEqual(r.ids, native.slice(0, r.ids.length), 'greedy ids equal the native engine\'s');
    }
    console.log(`# chat: ${r.promptIds.length} prompt tokens, answer ${JSON.stringify(r.answer)} (${r.ids.length} tokens, ` +
      `${r.tokensPerSecond.toFixed(2)} tok/s, prefill ${r.prefillSeconds.toFixed(1)} s) in ${((Date.now() - t0) / 1000).toFixed(0)} s; screenshot target/page-test/chat.png`);
  } finally {
    await chat.close();
    chatServer.close();
  }
});
