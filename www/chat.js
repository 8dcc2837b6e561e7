// The chat page: loads a GGUF (the default SmolLM2 model or a file) with createLlama from a Blob,
// builds the tokenizer and chat template from the file's metadata (www/tokenizer.js: the GGUF
// tokenizers of the llama, qwen2, qwen3, phi3, gemma, smollm3 and granite families), and streams
// greedy replies token by token with tokens per second. The KV cache is reused across turns: each
// turn runs only the tokens after the prefix the cache already holds.
// URL parameters (scripts/demo.mjs, tests/page.test.mjs): ?model=URL&q=QUESTION&n=MAX_NEW&autorun=1
// loads the model, asks QUESTION and sets window.demoResult and document.body.dataset.state to
// 'done' (or 'error').
import { createLlama, deviceDescriptor, readMetadata, wasmMemoryBytes } from 'webgpu-llama';
import { fromGgufMetadata } from './tokenizer.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const DEFAULT_MODEL = '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const state = { device: null, llama: null, tok: null, messages: [], cached: [], busy: false, stop: false, loadSeconds: 0 };
if (params.get('n')) $('max-new').value = params.get('n');

function status(text, isError = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', isError);
}
const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;

async function getDevice() {
  if (state.device) return state.device;
  if (!navigator.gpu) throw new Error('WebGPU is not available in this browser (Chromium on Linux: --enable-unsafe-webgpu)');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('navigator.gpu.requestAdapter() returned null');
  // The adapter's limits and subgroups where it offers them: the package's fastest kernels.
  state.device = await adapter.requestDevice(deviceDescriptor(adapter));
  state.device.lost.then((info) => status(`GPU device lost: ${info.message}`, true));
  return state.device;
}

function setBusy(busy) {
  state.busy = busy;
  $('send').disabled = busy || !state.llama;
  $('question').disabled = !state.llama;
  $('stop').disabled = !busy;
  $('load-default').disabled = busy;
  $('file').disabled = busy;
}

/** Loads a model from a Blob/File: metadata (header only) for the tokenizer, then the weights. */
async function loadModel(blob, name) {
  setBusy(true);
  try {
    if (state.llama) { state.llama.dispose(); state.llama = null; }
    const device = await getDevice();
    status(`Reading ${name} (${mib(blob.size)})`);
    let tok;
    try {
      tok = fromGgufMetadata(await readMetadata(blob));
    } catch (e) {
      throw new Error(`${name}: ${e.message}`, { cause: e });
    }
    if (!tok.hasTemplate) throw new Error(`${name} has no tokenizer.chat_template: not a chat model`);
    const t0 = performance.now();
    const llama = await createLlama(device, blob, { contextLength: 2048, onProgress: (p) => {
      $('progress').value = p.bytesDone / p.bytesTotal;
      status(`Uploading ${name}: ${mib(p.bytesDone)} of ${mib(p.bytesTotal)} (tensor ${p.tensorsDone}/${p.tensorsTotal})`);
    } });
    state.loadSeconds = (performance.now() - t0) / 1000;
    Object.assign(state, { llama, tok, messages: [], cached: [] });
    const c = llama.config;
    status(`${name}: ${c.L} layers, width ${c.d}, vocab ${c.vocab}, context ${c.ctx}; loaded in ${state.loadSeconds.toFixed(1)} s ` +
      `(${mib(c.weightBytesOnGpu)} on the GPU, wasm memory ${mib(wasmMemoryBytes())}) on ${c.adapter}`);
    $('log').replaceChildren(Object.assign(document.createElement('div'), { className: 'empty', textContent: 'Ask something.' }));
  } finally {
    setBusy(false);
  }
}

async function loadDefault() {
  const url = params.get('model') || DEFAULT_MODEL;
  status(`Downloading ${url}`);
  $('progress').removeAttribute('value');
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status} (run scripts/fetch-models.sh for the default model)`);
  const blob = await res.blob();
  $('progress').value = 0;
  await loadModel(blob, url.split('/').pop());
}

function bubble(role, text) {
  $('log').querySelector('.empty')?.remove();
  const el = Object.assign(document.createElement('div'), { className: `msg ${role}`, textContent: text });
  $('log').append(el);
  $('log').scrollTop = $('log').scrollHeight;
  return el;
}

const argmax = (v) => { let b = 0; for (let i = 1; i < v.length; i++) if (v[i] > v[b]) b = i; return b; };

/** One turn: the template over the conversation, only the tokens the cache lacks, greedy decode. */
async function ask(question) {
  const { llama, tok } = state;
  setBusy(true);
  state.stop = false;
  bubble('user', question);
  const out = bubble('assistant', '');
  out.classList.add('pending');
  try {
    state.messages.push({ role: 'user', content: question });
    const promptIds = tok.chatIds(state.messages);
    let keep = 0;
    while (keep < state.cached.length && keep < promptIds.length - 1 && state.cached[keep] === promptIds[keep]) keep++;
    const maxNew = Math.max(1, Number($('max-new').value) || 128);
    if (promptIds.length + maxNew > llama.config.ctx) throw new RangeError(`the conversation (${promptIds.length} tokens) is too long for the context (${llama.config.ctx})`);
    $('stats').textContent = `prefill: ${promptIds.length - keep} new tokens (${keep} cached) ...`;
    const t0 = performance.now();
    let logits = await llama.forward(promptIds.slice(keep), keep);
    const prefillSeconds = (performance.now() - t0) / 1000;
    const ids = [];
    const t1 = performance.now();
    let pos = promptIds.length;
    for (;;) {
      const next = argmax(logits);
      if (tok.stop.has(next)) break;
      ids.push(next);
      out.textContent = tok.decode(ids);
      const tps = ids.length / ((performance.now() - t1) / 1000 || 1e-9);
      $('stats').textContent = `prefill ${promptIds.length - keep} tokens in ${prefillSeconds.toFixed(2)} s; ` +
        `${ids.length} tokens at ${tps.toFixed(2)} tok/s`;
      if (ids.length >= maxNew || state.stop) break;
      logits = await llama.forward([next], pos++);
    }
    const decodeSeconds = (performance.now() - t1) / 1000;
    const answer = tok.decode(ids);
    state.messages.push({ role: 'assistant', content: answer });
    state.cached = promptIds.concat(ids.slice(0, -1));   // the last id was never run
    return { question, promptIds, cachedTokens: keep, ids, answer, prefillSeconds, decodeSeconds,
             tokensPerSecond: ids.length / decodeSeconds };
  } finally {
    out.classList.remove('pending');
    setBusy(false);
  }
}

$('load-default').addEventListener('click', () => loadDefault().catch((e) => status(String(e), true)));
$('file').addEventListener('change', (e) => {
  const f = e.target.files[0];
  if (f) loadModel(f, f.name).catch((err) => status(String(err), true));
});
$('stop').addEventListener('click', () => { state.stop = true; });
$('form').addEventListener('submit', (e) => {
  e.preventDefault();
  const q = $('question').value.trim();
  if (!q || state.busy || !state.llama) return;
  $('question').value = '';
  ask(q).then((r) => { window.lastTurn = r; }, (err) => status(String(err), true));
});

if (params.get('autorun')) {
  (async () => {
    await loadDefault();
    $('question').value = params.get('q') || 'What is the capital of France?';
    $('send').click();
    while (!window.lastTurn && !$('status').classList.contains('error')) await new Promise((r) => setTimeout(r, 200));
    if (!window.lastTurn) throw new Error($('status').textContent);
    window.demoResult = { ...window.lastTurn, loadSeconds: state.loadSeconds, config: { ...state.llama.config },
                          wasmMemoryBytes: wasmMemoryBytes(), answerShown: [...document.querySelectorAll('.msg.assistant')].pop().textContent };
    document.body.dataset.state = 'done';
  })().catch((e) => {
    status(String(e), true);
    window.demoResult = { error: String(e) };
    document.body.dataset.state = 'error';
  });
}
