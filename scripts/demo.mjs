#!/usr/bin/env node
// The demo's one command (`npm run demo`). Build/serve/browser helpers: scripts/serve.mjs.
//
//   node scripts/demo.mjs            build, serve www/ on 127.0.0.1, and
//                                      - with a display: print the URL and keep serving;
//                                      - without one (no $DISPLAY / $WAYLAND_DISPLAY), or with
//                                        --headless: open the chat page in headless Chromium,
//                                        load SmolLM2-135M-Instruct, ask one question, print the
//                                        answer and the speed, save a screenshot
//                                        (target/demo/screenshot.png) and exit.
//   node scripts/demo.mjs --build    only build pkg/ (release wasm, wasm-bindgen --target web,
//                                      wasm-opt -O3 from npm binaryen, the entry files)
//   node scripts/demo.mjs --measure A.gguf [B.gguf ...]
//                                    load each file in a fresh headless page and print the wasm
//                                      memory (WebAssembly.Memory.buffer.byteLength) before and
//                                      after createLlama and after one forward
//   options: --port N (default 8787), --n N (most new tokens, default 24),
//            --q "QUESTION" (default "What is the capital of France?"), --model /models/NAME.gguf,
//            --no-build, --headless
//
// Paths served (scripts/serve.mjs webMounts): / -> www/, /pkg/ -> pkg/, /models/ -> .models/
// (scripts/fetch-models.sh), /shared/models/ -> ../shared/models/; also www/bench.html (npm run bench:web).
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT, build, serve, launchChromium, webMounts } from './serve.mjs';

// Re-exported for tests/page.test.mjs (the helpers live in scripts/serve.mjs).
export { ROOT, CHROMIUM, CHROMIUM_ARGS, build, serve, launchChromium } from './serve.mjs';

function parseArgs(argv) {
  const o = { build: true, buildOnly: false, headless: !(process.env.DISPLAY || process.env.WAYLAND_DISPLAY), port: 8787 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === '--build') o.buildOnly = true;
    else if (a === '--no-build') o.build = false;
    else if (a === '--headless') o.headless = true;
    else if (a === '--port') o.port = Number(v());
    else if (a === '--n') o.n = Number(v());
    else if (a === '--q') o.q = v();
    else if (a === '--model') o.model = v();
    else if (a === '--measure') { o.measure = argv.slice(i + 1); i = argv.length; }
    else throw new Error(`unknown argument ${a} (see the comment at the top of scripts/demo.mjs)`);
  }
  return o;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.build || o.buildOnly) {
    const t = build();
    console.log(`[build] done: cargo ${t.cargo.toFixed(1)} s${t.bindgen ? `, wasm-bindgen ${t.bindgen.toFixed(1)} s, wasm-opt ${t.opt.toFixed(1)} s` : ' (wasm up to date)'}; pkg/webgpu_llama_bg.wasm ${(t.wasmBytes / 1e6).toFixed(2)} MB`);
    if (o.buildOnly) return;
  }
  if (o.measure) { await measure(o.measure); return; }
  const model = o.model || '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
  if (!o.model && !existsSync(join(ROOT, '.models', 'SmolLM2-135M-Instruct.Q4_1.gguf'))) {
    console.warn('[demo] .models/SmolLM2-135M-Instruct.Q4_1.gguf is missing: run scripts/fetch-models.sh (the page can still open a file)');
  }
  const { server, url } = await serve(webMounts(), o.port).catch(() => serve(webMounts(), 0));
  if (!o.headless) {
    console.log(`[demo] serving ${url}/  (Ctrl-C to stop; Chromium needs WebGPU, e.g. --enable-unsafe-webgpu on Linux)`);
    return;
  }
  const n = o.n ?? 24;
  const q = o.q || 'What is the capital of France?';
  const page_url = `${url}/?model=${encodeURIComponent(model)}&q=${encodeURIComponent(q)}&n=${n}&autorun=1`;
  console.log(`[demo] no display: running ${page_url} once in headless Chromium (SwiftShader is slow: about a minute)`);
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 760 } });
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.log(`[page ${m.type()}] ${m.text()}`); });
    page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
    await page.goto(page_url);
    await page.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null, { timeout: 20 * 60_000, polling: 500 });
    const r = await page.evaluate(() => window.demoResult);
    mkdirSync(join(ROOT, 'target', 'demo'), { recursive: true });
    const shot = join(ROOT, 'target', 'demo', 'screenshot.png');
    await page.screenshot({ path: shot, fullPage: true });
    if (!r || r.error) throw new Error(`the page failed: ${r ? r.error : 'no result'}`);
    console.log(`[demo] adapter: ${r.config.adapter}; subgroups of ${r.config.subgroupSize || "none"}`);
    console.log(`[demo] model: ${model} (d ${r.config.d}, L ${r.config.L}, vocab ${r.config.vocab}, ${r.config.dispatchesPerToken} dispatches per token)`);
    console.log(`[demo] load: createLlama ${r.loadSeconds.toFixed(2)} s from a Blob; wasm memory ${(r.wasmMemoryBytes / 2 ** 20).toFixed(1)} MiB; weights on GPU ${(r.config.weightBytesOnGpu / 2 ** 20).toFixed(1)} MiB`);
    console.log(`[demo] user: ${q}`);
    console.log(`[demo] assistant: ${r.answerShown}`);
    console.log(`[demo] prompt: ${r.promptIds.length} tokens (chat template from the GGUF) in ${r.prefillSeconds.toFixed(2)} s`);
    console.log(`[demo] answer: ${r.ids.length} tokens in ${r.decodeSeconds.toFixed(2)} s = ${r.tokensPerSecond.toFixed(3)} tok/s`);
    console.log(`[demo] screenshot: ${shot}`);
  } finally {
    await browser.close();
    server.close();
  }
}

/** Loads each GGUF in a fresh page and prints the wasm memory around createLlama. */
async function measure(files) {
  const mounts = { '/': join(ROOT, 'www'), '/pkg/': join(ROOT, 'pkg') };
  files.forEach((f, i) => { mounts[`/m${i}/`] = dirname(resolve(f)); });
  const { server, url } = await serve(mounts, 0);
  const browser = await launchChromium();
  try {
    for (const [i, f] of files.entries()) {
      const page = await browser.newPage();
      page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
      await page.goto(`${url}/`);
      const r = await page.evaluate(async (u) => {
        const lib = await import('webgpu-llama');
        const before = lib.wasmMemoryBytes();
        const adapter = await navigator.gpu.requestAdapter();
        const device = await adapter.requestDevice(lib.deviceDescriptor(adapter));
        const buf = await (await fetch(u)).arrayBuffer();
        const t0 = performance.now();
        const llama = await lib.createLlama(device, buf, { contextLength: 256 });
        const loadSeconds = (performance.now() - t0) / 1000;
        const afterLoad = lib.wasmMemoryBytes();
        const t1 = performance.now();
        const logits = await llama.forward([1], 0);
        const forwardSeconds = (performance.now() - t1) / 1000;
        const out = { fileBytes: buf.byteLength, before, afterLoad, afterForward: lib.wasmMemoryBytes(), loadSeconds, forwardSeconds,
          weightBytesOnGpu: llama.config.weightBytesOnGpu, finite: logits.every(Number.isFinite) };
        llama.dispose();
        return out;
      }, `/m${i}/${f.split('/').pop()}`);
      const m = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
      console.log(`[measure] ${f}: file ${m(r.fileBytes)}, weights on GPU ${m(r.weightBytesOnGpu)}; wasm memory ${m(r.before)} before, ` +
        `${m(r.afterLoad)} after createLlama (${r.loadSeconds.toFixed(2)} s), ${m(r.afterForward)} after one forward ` +
        `(${r.forwardSeconds.toFixed(2)} s, logits finite: ${r.finite})`);
      await page.close();
    }
  } finally {
    await browser.close();
    server.close();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] || '').href) {
  main().catch((e) => { console.error(`[demo] ${e.stack || e}`); process.exit(1); });
}
