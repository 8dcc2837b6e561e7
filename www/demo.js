// The demo page: load a GGUF (the default model or a file), show its config, run a prompt of
// token ids and stream the greedy continuation as text with tokens per second.
// URL parameters (for scripts/demo.mjs): ?model=URL&prompt=1,2,3&n=8&ctx=256&autorun=1; the
// result lands in window.demoResult and document.body.dataset.state becomes 'done' or 'error'.
import { createLlama, wasmMemoryBytes } from 'webgpu-llama';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const DEFAULT_MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
let device = null, llama = null;

function status(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
}

const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;

async function getDevice() {
  if (device) return device;
  if (!navigator.gpu) throw new Error('WebGPU is not available in this browser (Chromium: --enable-unsafe-webgpu on Linux)');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('navigator.gpu.requestAdapter() returned null');
  // The page owns the device and asks for the largest buffers the adapter allows.
  device = await adapter.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
  });
  device.lost.then((info) => status(`GPU device lost: ${info.message}`, true));
  return device;
}

/** Fetches `url` with a progress bar (bytes received / content-length). */
async function fetchModel(url) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status}`);
  const total = Number(res.headers.get('content-length')) || 0;
  const out = total ? new Uint8Array(total) : null;
  const parts = [];
  let got = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (out && got + value.length <= total) out.set(value, got); else parts.push(value);
    got += value.length;
    if (total) { $('progress').value = got / total * 0.5; }
    status(`Downloading ${url}: ${mib(got)}${total ? ` of ${mib(total)}` : ''}`);
  }
  if (out && got === total) return out.buffer;
  return new Blob(parts).arrayBuffer();
}

function showConfig(c) {
  const seed = ['d', 'L', 'ff', 'nh', 'nkv', 'hd', 'ctx', 'vocab', 'eps', 'theta', 'experts', 'topk', 'dispatchesPerToken'];
  const show = (k, v) => (k === 'eps' ? v.toExponential(2) : String(v));
  const rows = seed.map((k) => [k, show(k, c[k])]).concat([
    ['weights on GPU', mib(c.weightBytesOnGpu)], ['file tensors', mib(c.fileTensorBytes)], ['GPU total', mib(c.gpuBytes)],
    ['max binding', mib(c.maxStorageBufferBindingSize)], ['wasm memory', mib(wasmMemoryBytes())], ['adapter', c.adapter],
  ]);
  $('config').replaceChildren(...rows.map(([k, v]) => {
    const div = document.createElement('div');
    const a = document.createElement('span'), b = document.createElement('span');
    a.textContent = k; b.textContent = v; b.title = v;
    div.append(a, b);
    return div;
  }));
}

async function load(source, name) {
  $('run').disabled = true;
  $('load-default').disabled = true;
  if (llama) { llama.dispose(); llama = null; }
  const t0 = performance.now();
  const buffer = typeof source === 'string' ? await fetchModel(source) : await source.arrayBuffer();
  const fetchSeconds = (performance.now() - t0) / 1000;
  const dev = await getDevice();
  status(`Uploading ${name} (${mib(buffer.byteLength)}) to the GPU...`);
  $('progress').value = 0.5;
  await new Promise((r) => setTimeout(r, 30)); // let the status paint before the synchronous upload
  const t1 = performance.now();
  llama = await createLlama(dev, buffer, {
    contextLength: Number($('ctx').value) || undefined,
    onProgress: (p) => { $('progress').value = 0.5 + 0.5 * p.bytesDone / Math.max(1, p.bytesTotal); },
  });
  const loadSeconds = (performance.now() - t1) / 1000;
  $('progress').value = 1;
  showConfig(llama.config);
  status(`Loaded ${name}: ${mib(buffer.byteLength)} in ${fetchSeconds.toFixed(1)} s + ${loadSeconds.toFixed(1)} s on the GPU; wasm memory ${mib(wasmMemoryBytes())}.`);
  $('run').disabled = false;
  $('load-default').disabled = false;
  return { fetchSeconds, loadSeconds };
}

function argmax(v) {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

async function generate() {
  const prompt = $('prompt').value.split(/[\s,]+/).filter(Boolean).map(Number);
  const n = Math.max(1, Number($('n').value) || 1);
  $('run').disabled = true;
  const out = $('output');
  const promptSpan = document.createElement('span'), genSpan = document.createElement('span');
  promptSpan.className = 'prompt'; genSpan.className = 'gen';
  out.replaceChildren(promptSpan, genSpan);
  promptSpan.textContent = llama.decode(prompt);
  $('ids').textContent = '';
  const decoder = new TextDecoder('utf-8');
  const ids = [];
  const stats = (extra) => { $('stats').innerHTML = extra; };
  try {
    stats('prefill...');
    const t0 = performance.now();
    let logits = await llama.forward(prompt, 0);
    const prefillSeconds = (performance.now() - t0) / 1000;
    const t1 = performance.now();
    for (let i = 0; i < n; i++) {
      const next = argmax(logits);
      ids.push(next);
      genSpan.textContent += decoder.decode(llama.tokenBytes(next), { stream: true });
      $('ids').textContent = `ids: ${ids.join(',')}`;
      const dt = (performance.now() - t1) / 1000;
      stats(`<span>prefill <b>${prompt.length}</b> tokens in <b>${prefillSeconds.toFixed(2)} s</b></span>` +
        (i > 0 ? `<span>decode <b>${(i / dt).toFixed(2)} tok/s</b> (<b>${(1000 * dt / i).toFixed(0)} ms</b>/token)</span>` : '') +
        `<span>tokens <b>${ids.length}/${n}</b></span>`);
      if (i + 1 < n) logits = await llama.forward([next], prompt.length + i);
    }
    genSpan.textContent += decoder.decode();
    const decodeSeconds = (performance.now() - t1) / 1000;
    const tokensPerSecond = n > 1 ? (n - 1) / decodeSeconds : 0;
    return { prompt, promptText: promptSpan.textContent, ids, text: genSpan.textContent, prefillSeconds, decodeSeconds, tokensPerSecond };
  } finally {
    $('run').disabled = false;
  }
}

function fail(e) {
  console.error(e);
  status(String(e && e.message || e), true);
  window.demoResult = { error: String(e && e.message || e) };
  document.body.dataset.state = 'error';
  $('run').disabled = !llama;
  $('load-default').disabled = false;
}

$('load-default').onclick = () => load(DEFAULT_MODEL, 'SmolLM2-135M-Instruct.Q4_1.gguf').catch(fail);
$('file').onchange = (e) => { const f = e.target.files[0]; if (f) load(f, f.name).catch(fail); };
$('run').onclick = () => generate().catch(fail);

for (const [k, id] of [['prompt', 'prompt'], ['n', 'n'], ['ctx', 'ctx']]) if (params.has(k)) $(id).value = params.get(k);
if (params.get('autorun') === '1') {
  (async () => {
    const model = params.get('model') || DEFAULT_MODEL;
    const times = await load(model, model.split('/').pop());
    const r = await generate();
    window.demoResult = { ...r, ...times, config: { ...llama.config }, wasmMemoryBytes: wasmMemoryBytes() };
    document.body.dataset.state = 'done';
  })().catch(fail);
}
