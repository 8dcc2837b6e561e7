#!/usr/bin/env node
// The browser benchmark, headless (`npm run bench:web`): builds pkg/ (scripts/serve.mjs build),
// serves www/ with the seed mapped in from ../shared (webMounts), opens www/bench.html in headless
// Chromium (WebGPU; SwiftShader on a machine without a GPU) once per case, and prints, for
// webgpu-llama ("ours") and the seed prototype side by side on one page and one GPUDevice: load s,
// first logits s (load + a first prefill: ours compiles each kernel on first use), prefill tok/s
// (a second prefill of the same prompt), decode tok/s and ms/token (median (min-max) over
// repeats), dispatches per token, the speed ratios ours/seed, and whether the two agree (logits after the prompt, greedy ids, and
// each against ../shared/reference). What the page measures and how: the header of www/bench.js.
//
//   node scripts/bench-web.mjs                 both cases below
//   node scripts/bench-web.mjs --case stories  (a) stories260K F32, the 300-token prompt, 64 decode
//                                                  tokens, 3 repeats (targets: prefill >= 50x, decode >= 2x)
//   node scripts/bench-web.mjs --case smollm2  (b) SmolLM2-135M-Instruct Q4_1 (.models/, fetch with
//                                                  scripts/fetch-models.sh), 5-token prompt; the seed
//                                                  does 3 decode tokens, 1 repeat (~13 s/token here)
//   options: --json FILE (the page's results), --no-build (use pkg/ as it is), --headed,
//            --base DIR (an earlier build's pkg/, e.g. of a git worktree built with its own
//            `node -e "import('./scripts/serve.mjs').then((m) => m.build())"`: served at /base/ and
//            run as a third engine on the same page, with the ratios ours/base),
//            or a custom case: --model URL --prompt IDS|long300 --gen M --repeats R
//            [--engines ours,seed] [--seed-gen M] [--seed-repeats R] [--ref NAME] [--limits default]
//            [--subgroups off] (the page's device without the `subgroups` feature) [--block K] (generate's ids
//            per readback, 16); without
//            --model, these options change the cases above (e.g. --case smollm2 --engines ours)
//            --profile: also GPU time per kernel of ours (llama.profile(): one decode step after
//            the M tokens, and the prompt as one batch), summed by kernel; Chromium then runs with
//            --enable-webgpu-developer-features so that timestamps are not coarsened to 100 us
// URLs: /models/NAME -> .models/NAME, /shared/models/NAME -> ../shared/models/NAME.
import { writeFileSync } from 'node:fs';
import { CHROMIUM, CHROMIUM_ARGS, build, serve, webMounts } from './serve.mjs';

const CASES = {
  stories: { title: '(a) stories260K F32, 300-token prompt', model: '/shared/models/stories260K.gguf', prompt: 'long300',
    gen: 64, repeats: 3, targets: { prefill: 50, decode: 2, generate: 2 } },
  smollm2: { title: '(b) SmolLM2-135M-Instruct Q4_1, prompt "The capital of France is"', model: '/models/SmolLM2-135M-Instruct.Q4_1.gguf',
    prompt: '504,3575,282,4649,314', gen: 8, repeats: 3, seedGen: 3, seedRepeats: 1, ref: 'smollm2-135m-instruct-q4_1',
    note: 'the seed runs 3 decode tokens and 1 repeat only: it takes ~13 s per token on SwiftShader here' },
};

function parseArgs(argv) {
  const o = { build: true, cases: [], custom: {} };
  const keys = { '--model': 'model', '--prompt': 'prompt', '--gen': 'gen', '--repeats': 'repeats', '--engines': 'engines',
    '--seed-gen': 'seedGen', '--seed-repeats': 'seedRepeats', '--ref': 'ref', '--limits': 'limits', '--subgroups': 'subgroups', '--block': 'block' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => argv[++i];
    if (a === '--no-build') o.build = false;
    else if (a === '--headed') o.headed = true;
    else if (a === '--profile') o.profile = true;
    else if (a === '--json') o.json = v();
    else if (a === '--base') o.base = v();
    else if (a === '--case') { const c = v(); if (!CASES[c]) throw new Error(`unknown case ${c} (${Object.keys(CASES).join(', ')})`); o.cases.push(c); }
    else if (keys[a]) o.custom[keys[a]] = v();
    else throw new Error(`unknown argument ${a} (see the comment at the top of scripts/bench-web.mjs)`);
  }
  // With --model a case of its own; without, the options apply to the named cases (or both).
  // (A prompt of its own drops the case's reference unless --ref names one.)
  const overrides = o.custom.model ? {} : { ...(o.custom.prompt && !o.custom.ref ? { ref: undefined } : {}), ...o.custom };
  if (o.custom.model) o.cases.push({ title: 'custom', prompt: 'long300', ...o.custom });
  if (!o.cases.length) o.cases = Object.keys(CASES);
  o.cases = o.cases.map((c) => (typeof c === 'string' ? { ...CASES[c], ...overrides } : c));
  const withBase = (e) => [...new Set([...(e || 'ours,seed').split(','), 'base'])].join(',');
  if (o.base) o.cases = o.cases.map((c) => ({ ...c, engines: withBase(c.engines) }));
  return o;
}

const f = (x, d = 2) => (x === undefined || x === null || Number.isNaN(x) ? '-' : x.toFixed(d));
const spread = (s, d = 2) => `${f(s.median, d)} (${f(s.min, d)}-${f(s.max, d)})`;

/** The result as a text table, the ratios and the agreement. */
function report(c, r) {
  const lines = [`== ${c.title} ==`, `model ${r.model} (${(r.fileBytes / 2 ** 20).toFixed(2)} MiB), prompt ${r.promptTokens} tokens` +
    `${r.refName ? `, reference ${r.refName}` : ''}; adapter: ${r.adapter}`];
  if (c.note) lines.push(`note: ${c.note}`);
  const head = ['engine', 'runs', 'load s', 'first logits s', 'prefill tok/s', 'M', 'decode tok/s', 'ms/token', 'generate tok/s', 'dispatches/token', 'max|d| vs ref', 'greedy = ref'];
  const rows = r.engines.map((e) => [e.engine, String(e.repeats), spread(e.load, 3), e.first ? spread(e.first, 3) : '-', spread(e.prefillTps), String(e.gen), spread(e.decodeTps),
    f(e.msPerToken.median, 1), e.generateTps && !Number.isNaN(e.generateTps.median) ? spread(e.generateTps) : '-', String(e.dispatchesPerToken), e.refMaxAbsDiff === undefined ? '-' : e.refMaxAbsDiff.toExponential(2), e.refGreedyMatch || '-']);
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const fmt = (row) => `| ${row.map((x, i) => x.padEnd(w[i])).join(' | ')} |`;
  lines.push(fmt(head), `|${w.map((n) => '-'.repeat(n + 2)).join('|')}|`, ...rows.map(fmt));
  if (r.ratio) {
    const t = (k) => (c.targets?.[k] ? ` (target >= ${c.targets[k]}x: ${r.ratio[k] >= c.targets[k] ? 'met' : 'NOT met'})` : '');
    lines.push(`ours/seed speed: load ${f(r.ratio.load)}x (seed s / our s), first logits ${f(r.ratio.first)}x (likewise), prefill ${f(r.ratio.prefill)}x${t('prefill')}, decode ${f(r.ratio.decode)}x${t('decode')}`);
    lines.push(`agreement: max |logits ours - seed| after the prompt ${r.agree.maxAbsDiff.toExponential(2)}; greedy ids ` +
      `${r.agree.idsIdentical ? 'identical' : 'DIFFER'} over the ${r.agree.common} both produced`);
  }
  for (const e of r.engines.filter((e) => e.generateTps && !Number.isNaN(e.generateTps.median))) {
    const x = e.generateTps.median / e.decodeTps.median, t = c.targets?.generate;
    lines.push(`${e.engine}: generate (K = ${r.block}) / forward loop decode ${f(x)}x${t ? ` (target >= ${t}x: ${x >= t ? 'met' : 'NOT met'})` : ''}; ` +
      `generate's ids ${e.generateSame ? 'are' : 'are NOT'} the forward loop's`);
  }
  if (r.ratioBase) {
    lines.push(`ours/base speed: load ${f(r.ratioBase.load)}x (base s / our s), first logits ${f(r.ratioBase.first)}x (likewise), prefill ${f(r.ratioBase.prefill)}x, decode ${f(r.ratioBase.decode)}x`);
  }
  for (const [what, p] of Object.entries(r.profile || {})) {
    if (!p) { lines.push(`profile of ${what}: none (no timestamp-query, or more tokens than one batch)`); continue; }
    lines.push(`profile of ${what} (ours, GPU ms per kernel, one compute pass each; ${p.dispatches} dispatches sum to ${f(1e3 * p.sumSeconds, 3)} ms, ` +
      `the whole pass ${f(1e3 * p.passSeconds, 3)} ms):`);
    for (const k of p.kernels) lines.push(`  ${f(1e3 * k.seconds, 3).padStart(9)} ms  ${String(k.calls).padStart(3)}x  ${k.label}`);
  }
  for (const e of r.engines) lines.push(`${e.engine} greedy ids (${e.ids.length}${e.idsStable ? ', same in every repeat' : ', VARY between repeats'}): ${e.ids.join(',')}`);
  return lines.join('\n');
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  if (o.build) {
    const t = build();
    console.log(`[bench-web] build: cargo ${t.cargo.toFixed(1)} s${t.bindgen ? `, wasm-bindgen ${t.bindgen.toFixed(1)} s, wasm-opt ${t.opt.toFixed(1)} s` : ' (wasm up to date)'}`);
  }
  const { server, url } = await serve(o.base ? { ...webMounts(), '/base/': o.base } : webMounts(), 0);
  const args = o.profile ? [...CHROMIUM_ARGS, '--enable-webgpu-developer-features'] : CHROMIUM_ARGS;
  const browser = await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, headless: !o.headed, args });
  const out = { date: new Date().toISOString(), cases: [] };
  try {
    for (const c of o.cases) {
      const q = new URLSearchParams({ run: '1', model: c.model, prompt: c.prompt, gen: String(c.gen ?? 64), repeats: String(c.repeats ?? 3) });
      if (o.profile) q.set('profile', '1');
      for (const k of ['engines', 'seedGen', 'seedRepeats', 'ref', 'limits', 'subgroups', 'block']) if (c[k] !== undefined) q.set(k, String(c[k]));
      const pageUrl = `${url}/bench.html?${q}`;
      console.log(`[bench-web] ${c.title}: ${pageUrl}`);
      const page = await browser.newPage();
      page.on('console', (m) => { if (m.type() === 'log') console.log(`[page] ${m.text()}`); else if (m.type() === 'error') console.log(`[page error] ${m.text()}`); });
      page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
      const t0 = Date.now();
      await page.goto(pageUrl);
      await page.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null, { timeout: 90 * 60_000, polling: 1000 });
      const r = await page.evaluate(() => window.benchResult);
      await page.close();
      if (!r || r.error) throw new Error(`the page failed: ${r ? r.error : 'no result'}`);
      console.log(`${report(c, r)}\n(${((Date.now() - t0) / 1000).toFixed(0)} s in the page)\n`);
      out.cases.push({ case: c, result: r });
    }
  } finally {
    await browser.close();
    server.close();
  }
  if (o.json) { writeFileSync(o.json, `${JSON.stringify(out, null, 1)}\n`); console.log(`[bench-web] wrote ${o.json}`); }
}

main().catch((e) => { console.error(`[bench-web] ${e.stack || e}`); process.exit(1); });
