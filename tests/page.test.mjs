// The npm package as a user gets it: build, `npm pack`, install the tarball into a temp dir, serve
// a plain <script type="module"> page that imports the PACKED package (bare specifier through an
// import map built from the installed package.json's "exports"), drive /usr/bin/chromium
// (WebGPU on SwiftShader) with playwright-core, and check stories260K's logits and greedy
// continuation against ../shared/reference from that page. Also: the package's files and types,
// an error reaching the page, and what a Rust panic does to the module.
//
//   node --test tests/page.test.mjs        (npm run test:page; scripts/test-web.sh runs it too)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, build, serve, launchChromium } from '../scripts/demo.mjs';

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

const PAGE = (importPath) => `<!doctype html>
<html><head><meta charset="utf-8"><title>webgpu-llama page test</title>
<script type="importmap">${JSON.stringify({ imports: { 'webgpu-llama': importPath } })}</script>
</head><body>
<script type="module">
import * as lib from 'webgpu-llama';
const argmax = (v) => { let b = 0; for (let i = 1; i < v.length; i++) if (v[i] > v[b]) b = i; return b; };
async function device() {
  const adapter = await navigator.gpu.requestAdapter();
  return adapter.requestDevice({ requiredLimits: { maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize } });
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
window.errorCase = async (modelUrl) => {
  const buf = await (await fetch(modelUrl)).arrayBuffer();
  const llama = await lib.createLlama(await device(), buf, { contextLength: 4 });
  const out = {};
  try { await llama.forward([1, 2, 3, 4, 5], 0); } catch (e) { out.past = { isError: e instanceof Error, message: e.message }; }
  try { await lib.createLlama(await device(), new ArrayBuffer(64)); } catch (e) { out.notGguf = { isError: e instanceof Error, message: e.message }; }
  llama.dispose();
  try { await llama.forward([1], 0); } catch (e) { out.disposed = { isError: e instanceof Error, message: e.message }; }
  return out;
};
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
  ({ server, url } = await serve({ '/': app, '/models/': join(SHARED, 'models') }));
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
  assert.deepEqual(files, ['index.d.ts', 'index.js', 'webgpu_llama.d.ts', 'webgpu_llama.js', 'webgpu_llama_bg.wasm', 'webgpu_llama_bg.wasm.d.ts']);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  assert.equal(pkg.name, 'webgpu-llama');
  assert.equal(pkg.type, 'module');
  assert.equal(pkg.exports['.'].types, './pkg/index.d.ts');
  const dts = readFileSync(join(dir, 'pkg', 'webgpu_llama.d.ts'), 'utf8');
  for (const s of ['createLlama(device: GPUDevice, arrayBuffer: ArrayBuffer | ArrayBufferView, options?: LoadOptions): Promise<Llama>',
    'forward(tokens: ArrayLike<number>, startPos: number): Promise<Float32Array>', 'readonly config: LlamaConfig',
    'testMatvecQ8(device: GPUDevice', 'Promise<MatvecQ8Result>', 'wasmMemoryBytes(): number', 'dispose(): void']) {
    assert.ok(dts.includes(s), `webgpu_llama.d.ts should declare ${s}`);
  }
  assert.ok(!/export function __test/.test(dts), 'test hooks stay out of the declared API');
});

test('the page imports the packed package', async () => {
  const names = await page.evaluate(() => window.ready);
  for (const n of ['createLlama', 'testMatvecQ8', 'wasmMemoryBytes', 'Llama']) assert.ok(names.includes(n), `exports ${n}`);
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

test('errors reach the page as Error objects with the seed\'s messages', async () => {
  const r = await page.evaluate((m) => window.errorCase(m), '/models/stories260K.gguf');
  assert.equal(r.past?.isError, true);
  assert.match(r.past.message, /past the context/);
  assert.equal(r.notGguf?.isError, true);
  assert.match(r.notGguf.message, /not a GGUF file/);
  assert.equal(r.disposed?.isError, true);
  assert.match(r.disposed.message, /use after dispose\(\)/);
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
