// The browser benchmark: webgpu-llama ("ours", /pkg/index.js), the seed prototype ("seed",
// /seed/llama.js, served from ../shared/seeds by scripts/serve.mjs) and optionally an earlier build
// of webgpu-llama ("base", /base/index.js: another checkout's pkg/, scripts/bench-web.mjs --base)
// on ONE page and ONE GPUDevice,
// which this page creates with the adapter's maxStorageBufferBindingSize and maxBufferSize.
// The model file is fetched once; both engines load from the same ArrayBuffer.
//
// Per engine and repeat (engines alternate order between repeats):
//   load     createLlama(device, buffer) until it resolves, then queue.onSubmittedWorkDone(), so the
//            queued weight uploads are counted (module import and fetch are not);
//   first    load + a first forward(prompt, 0) with its logits read back: the time to the first
//            logits (webgpu-llama compiles each kernel on the first batch that runs it, so that
//            part of its start-up lands here; an engine that compiles all in createLlama pays it
//            in load);
//   prefill  a second forward(prompt, 0) (the same positions again): prompt tokens / seconds;
//   decode   M tokens one at a time, greedy (argmax), each forward awaited with its logits read
//            back, as a sampler loop does: M / seconds, and ms per token;
//   generate (engines that have it) the prompt again, then the same M tokens through
//            generate([first id], P, { maxTokens: M, block: K }): decode chained on the GPU, the
//            ids read back K at a time (a short generate first compiles its kernels): M / seconds,
//            and whether its ids are the forward loop's;
//   then dispose() (the seed has none). Every repeat loads afresh.
// Reported: median (min-max) over repeats, config.dispatchesPerToken, the speed ratios ours/seed
// (load: seed seconds / our seconds; prefill and decode: our tokens/s / seed tokens/s) and
// ours/base likewise, and
// agreement: max |logits_ours - logits_seed| after the prompt, the greedy ids of both (prefill's
// argmax then one per decode step: M + 1 ids), and, with a reference case, each engine's max abs
// difference from ../shared/reference's float64 logits and its greedy ids.
//
// URL parameters (run=1 starts it; scripts/bench-web.mjs sets them):
//   model=URL (default /shared/models/stories260K.gguf)
//   prompt=1,2,3 | long300 (the 300-token prompt of stories260K-f32-long300.json; the default)
//   gen=M (64), repeats=R (3), engines=ours,seed[,base], block=K (16: generate's ids per readback)
//   seedGen=, seedRepeats=   smaller M and R for the seed (slow models); default gen and repeats
//   ref=NAME                 reference case under /shared/reference/ (long300 implies its case)
//   profile=1                the device gets `timestamp-query` where the adapter has it, and ours'
//                            first repeat ends with llama.profile(): GPU time per kernel of one
//                            decode step (after the M tokens) and of the prompt in one batch,
//                            summed by kernel (result.profile)
// The result lands in window.benchResult; document.body.dataset.state becomes 'done' or 'error'.

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const LONG300 = 'stories260K-f32-long300';
const now = () => performance.now() / 1000;
const log = (s) => { $('log').textContent += `${s}\n`; console.log(s); };
const status = (s, err = false) => { $('status').textContent = s; $('status').classList.toggle('error', err); };

function argmax(v) {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}
function maxAbsDiff(a, b) {
  if (a.length !== b.length) return NaN;
  let d = 0;
  for (let i = 0; i < a.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}
const commonPrefix = (a, b) => { let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++; return i; };
function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return { median: s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2, min: s[0], max: s[s.length - 1], n: s.length };
}

async function fetchOk(url, as) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r[as]();
}

/** The benchmark's settings from the URL. */
async function settings() {
  const gen = Number(params.get('gen') || 64), repeats = Number(params.get('repeats') || 3);
  const promptArg = params.get('prompt') || 'long300';
  const s = {
    model: params.get('model') || '/shared/models/stories260K.gguf',
    promptArg,
    engines: (params.get('engines') || 'ours,seed').split(',').filter(Boolean),
    gen, repeats,
    seedGen: params.get('seedGen') ? Number(params.get('seedGen')) : gen,
    seedRepeats: params.get('seedRepeats') ? Number(params.get('seedRepeats')) : repeats,
    refName: params.get('ref') || (promptArg === 'long300' ? LONG300 : ''),
  };
  if (s.refName) {
    s.ref = await fetchOk(`/shared/reference/${s.refName}.json`, 'json');
    const raw = await fetchOk(`/shared/reference/${s.ref.logits_file}`, 'arrayBuffer');
    s.refLogits = new Float32Array(raw);
  }
  s.prompt = s.promptArg === 'long300' ? s.ref.prompt : s.promptArg.split(/[\s,]+/).filter(Boolean).map(Number);
  for (const e of s.engines) if (!['ours', 'seed', 'base'].includes(e)) throw new Error(`unknown engine ${e} (ours, seed, base)`);
  return s;
}

/** The page's device as webgpu-llama's deviceDescriptor gives it (the adapter's limits, its
 *  subgroup features), or WebGPU's default limits (128 MiB per storage binding, 256 MiB per
 *  buffer, 16 KiB of workgroup memory, 256 invocations) with `limits=default`. */
async function makeDevice(defaultLimits, subgroups, timestamps) {
  if (!navigator.gpu) throw new Error('WebGPU is not available (Chromium on Linux: --enable-unsafe-webgpu)');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error('navigator.gpu.requestAdapter() returned null');
  const desc = (await import('webgpu-llama')).deviceDescriptor(adapter, { timestamps });
  const requiredFeatures = desc.requiredFeatures.filter((f) => subgroups || !f.startsWith('subgroup'));
  const device = await adapter.requestDevice(defaultLimits ? { requiredFeatures } : { ...desc, requiredFeatures });
  device.lost.then((i) => status(`GPU device lost: ${i.message}`, true));
  const info = adapter.info || {};
  const sg = device.features.has('subgroups') ? `subgroups of ${info.subgroupMinSize}-${info.subgroupMaxSize}` : 'no subgroups';
  return { device, adapter: `${[info.vendor, info.architecture, info.description].filter(Boolean).join(' ') || 'unknown'} (${sg})` };
}

/** One engine, one repeat: load, prefill, M decode steps. */
async function runOnce(createLlama, device, buffer, prompt, m, profile = false, block = 16) {
  const t0 = now();
  const llama = await createLlama(device, buffer);
  await device.queue.onSubmittedWorkDone();
  const load = now() - t0;
  await llama.forward(prompt, 0);
  const first = now() - t0;
  const t1 = now();
  const prefillLogits = await llama.forward(prompt, 0);
  const prefill = now() - t1;
  const ids = [argmax(prefillLogits)];
  const t2 = now();
  for (let i = 0; i < m; i++) ids.push(argmax(await llama.forward([ids[i]], prompt.length + i)));
  const decode = now() - t2;
  let generate, generateSame;
  if (llama.generate) {
    await llama.forward(prompt, 0);
    await llama.generate([ids[0]], prompt.length, { maxTokens: 2, block });
    const t3 = now();
    const g = await llama.generate([ids[0]], prompt.length, { maxTokens: m, block });
    generate = now() - t3;
    generateSame = g.ids.length === m && [...g.ids].every((id, j) => id === ids[j + 1]);
  }
  const config = { ...llama.config };
  const profiled = profile && llama.profile ? { decode: bySum(await llama.profile(1, prompt.length + m)), prefill: bySum(await llama.profile(prompt.length, 0)) } : undefined;
  if (llama.dispose) llama.dispose();
  return { profiled, load, prefill, first, decode, prefillTps: prompt.length / prefill, decodeTps: m / decode, msPerToken: 1000 * decode / m,
           generateTps: generate ? m / generate : NaN, generateSame, ids, prefillLogits, dispatchesPerToken: config.dispatchesPerToken, vocab: config.vocab };
}

/** llama.profile()'s dispatches summed by kernel label, largest first (null stays null). */
function bySum(p) {
  if (!p) return null;
  const m = new Map();
  for (const k of p.kernels) {
    const e = m.get(k.label) || { label: k.label, calls: 0, seconds: 0, bytes: 0 };
    e.calls += 1; e.seconds += k.seconds; e.bytes += k.bytes;
    m.set(k.label, e);
  }
  const kernels = [...m.values()].sort((a, b) => b.seconds - a.seconds);
  return { kernels, dispatches: p.kernels.length, sumSeconds: kernels.reduce((t, k) => t + k.seconds, 0), passSeconds: p.passSeconds };
}

function summarise(name, runs, s) {
  const pick = (k) => stats(runs.map((r) => r[k]));
  const out = { engine: name, repeats: runs.length, gen: runs[0].ids.length - 1, load: pick('load'), first: pick('first'), prefillTps: pick('prefillTps'),
    decodeTps: pick('decodeTps'), msPerToken: pick('msPerToken'), dispatchesPerToken: runs[0].dispatchesPerToken,
    generateTps: pick('generateTps'), generateSame: runs.every((r) => r.generateSame !== false),
    ids: runs[0].ids, idsStable: runs.every((r) => commonPrefix(r.ids, runs[0].ids) === Math.min(r.ids.length, runs[0].ids.length)) };
  if (s.ref && s.ref.prompt.join() === s.prompt.join()) {
    const row = s.prompt.length - 1, v = s.ref.vocab;
    out.refMaxAbsDiff = maxAbsDiff(runs[0].prefillLogits, s.refLogits.subarray(row * v, (row + 1) * v));
    out.refGreedyMatch = `${commonPrefix(runs[0].ids, s.ref.greedy)}/${Math.min(runs[0].ids.length, s.ref.greedy.length)}`;
  }
  return out;
}

function render(r) {
  const f = (x, d = 2) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(d));
  const ms = (st, d) => `${f(st.median, d)} (${f(st.min, d)}-${f(st.max, d)})`;
  const rows = r.engines.map((e) => `<tr><td>${e.engine}</td><td>${e.repeats}</td><td>${ms(e.load, 3)}</td><td>${ms(e.first, 3)}</td><td>${ms(e.prefillTps)}</td>` +
    `<td>${e.gen}</td><td>${ms(e.decodeTps)}</td><td>${f(e.msPerToken.median, 1)}</td><td>${ms(e.generateTps)}</td><td>${e.dispatchesPerToken}</td>` +
    `<td>${e.refMaxAbsDiff === undefined ? '-' : e.refMaxAbsDiff.toExponential(2)}</td><td>${e.refGreedyMatch || '-'}</td></tr>`).join('');
  const ratio = r.ratio ? `<p>ours/seed speed: load <b>${f(r.ratio.load)}x</b>, first logits <b>${f(r.ratio.first)}x</b>, prefill <b>${f(r.ratio.prefill)}x</b>, decode <b>${f(r.ratio.decode)}x</b>; ` +
    `max |logits ours - seed| after the prompt ${r.agree.maxAbsDiff.toExponential(2)}; greedy ids ${r.agree.idsIdentical ? 'identical' : 'DIFFER'} (${r.agree.common} compared)</p>` : '';
  const base = r.ratioBase ? `<p>ours/base speed: load <b>${f(r.ratioBase.load)}x</b>, first logits <b>${f(r.ratioBase.first)}x</b>, prefill <b>${f(r.ratioBase.prefill)}x</b>, decode <b>${f(r.ratioBase.decode)}x</b></p>` : '';
  $('tables').innerHTML = `<p>${r.model} (${(r.fileBytes / 2 ** 20).toFixed(1)} MiB), prompt ${r.promptTokens} tokens, adapter ${r.adapter}</p>` +
    `<table><tr><th>engine</th><th>runs</th><th>load s</th><th>first logits s</th><th>prefill tok/s</th><th>M</th><th>decode tok/s</th><th>ms/token</th><th>generate tok/s</th>` +
    `<th>dispatches/token</th><th>vs reference</th><th>greedy = ref</th></tr>${rows}</table>${ratio}${base}` +
    r.engines.map((e) => `<p>${e.engine} greedy ids: <code>${e.ids.join(',')}</code></p>`).join('');
}

async function main() {
  const s = await settings();
  const q = new URLSearchParams(location.search);
  const profile = q.get('profile') === '1';
  const { device, adapter } = await makeDevice(q.get('limits') === 'default', q.get('subgroups') !== 'off', profile);
  const mods = {};
  if (s.engines.includes('ours')) mods.ours = (await import('webgpu-llama')).createLlama;
  if (s.engines.includes('seed')) mods.seed = (await import('/seed/llama.js')).createLlama;
  if (s.engines.includes('base')) mods.base = (await import('/base/index.js')).createLlama;
  status(`fetching ${s.model}...`);
  const buffer = await fetchOk(s.model, 'arrayBuffer');
  log(`model ${s.model} (${buffer.byteLength} bytes), prompt ${s.prompt.length} tokens, adapter ${adapter}`);
  const runs = Object.fromEntries(s.engines.map((e) => [e, []]));
  for (let rep = 0; rep < s.repeats; rep++) {
    const order = rep % 2 ? [...s.engines].reverse() : s.engines;
    for (const e of order) {
      if (e === 'seed' && rep >= s.seedRepeats) continue;
      const m = e === 'seed' ? s.seedGen : s.gen;
      status(`repeat ${rep + 1}/${s.repeats}: ${e} (prefill ${s.prompt.length}, decode ${m})...`);
      const r = await runOnce(mods[e], device, buffer, s.prompt, m, profile && e === 'ours' && rep === 0, Number(q.get('block') || 16));
      runs[e].push(r);
      log(`${e} #${rep + 1}: load ${r.load.toFixed(3)} s, prefill ${r.prefill.toFixed(3)} s (${r.prefillTps.toFixed(2)} tok/s), ` +
          `decode ${m} in ${r.decode.toFixed(3)} s (${r.decodeTps.toFixed(2)} tok/s, ${r.msPerToken.toFixed(1)} ms/token)` +
          (Number.isNaN(r.generateTps) ? '' : `, generate ${r.generateTps.toFixed(2)} tok/s (ids ${r.generateSame ? 'the same' : 'DIFFER'})`));
    }
  }
  const result = { model: s.model, block: Number(q.get('block') || 16), fileBytes: buffer.byteLength, promptTokens: s.prompt.length, prompt: s.promptArg === 'long300' ? 'long300' : s.prompt,
    refName: s.refName || null, adapter, userAgent: navigator.userAgent, engines: s.engines.map((e) => summarise(e, runs[e], s)) };
  if (runs.ours?.[0]?.profiled) result.profile = runs.ours[0].profiled;
  if (runs.ours?.length && runs.seed?.length) {
    const [o, d] = [result.engines.find((e) => e.engine === 'ours'), result.engines.find((e) => e.engine === 'seed')];
    const common = Math.min(o.ids.length, d.ids.length);
    result.ratio = { load: d.load.median / o.load.median, first: d.first.median / o.first.median, prefill: o.prefillTps.median / d.prefillTps.median, decode: o.decodeTps.median / d.decodeTps.median };
    result.agree = { maxAbsDiff: maxAbsDiff(runs.ours[0].prefillLogits, runs.seed[0].prefillLogits), common,
      idsIdentical: commonPrefix(o.ids, d.ids) === common };
  }
  if (runs.ours?.length && runs.base?.length) {
    const [o, b] = [result.engines.find((e) => e.engine === 'ours'), result.engines.find((e) => e.engine === 'base')];
    result.ratioBase = { load: b.load.median / o.load.median, first: b.first.median / o.first.median, prefill: o.prefillTps.median / b.prefillTps.median, decode: o.decodeTps.median / b.decodeTps.median };
  }
  render(result);
  status('done');
  return result;
}

if (params.get('run') === '1') {
  for (const [k, v] of params) if ($('form').elements[k]) $('form').elements[k].value = v;
  main().then((r) => { window.benchResult = r; document.body.dataset.state = 'done'; }, (e) => {
    console.error(e);
    status(String(e && e.message || e), true);
    window.benchResult = { error: String(e && e.stack || e) };
    document.body.dataset.state = 'error';
  });
}
