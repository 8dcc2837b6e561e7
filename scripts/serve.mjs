// Build, serve and browser helpers shared by scripts/demo.mjs, scripts/bench-web.mjs and
// tests/page.test.mjs (which imports them through demo.mjs):
//   build()            pkg/ from the release wasm (cargo, wasm-bindgen --target web, wasm-opt -O3)
//   serve(mounts, p)   a static file server on 127.0.0.1 (node's http), directories or single files
//   launchChromium()   headless /usr/bin/chromium through playwright-core, WebGPU on (SwiftShader)
import { spawnSync } from 'node:child_process';
import { createReadStream, existsSync, copyFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** ../shared beside the checkout: reference models, logits and the seed (read-only, never copied). */
export const SHARED = join(ROOT, '..', 'shared');
const CARGO_BIN = join(process.env.CARGO_HOME || join(process.env.HOME || '/root', '.cargo'), 'bin');

/** Chromium flags for WebGPU on SwiftShader in a headless, offline machine (TOOLCHAIN.md). */
export const CHROMIUM_ARGS = [
  '--enable-unsafe-webgpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  ...(process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : []),
];
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

function run(cmd, args, opts = {}) {
  const t0 = Date.now();
  const r = spawnSync(cmd, args, {
    cwd: ROOT,
    stdio: opts.quiet ? ['ignore', 'pipe', 'pipe'] : 'inherit',
    env: { ...process.env, PATH: `${CARGO_BIN}:${join(ROOT, 'node_modules', '.bin')}:${process.env.PATH}` },
  });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) {
    const out = opts.quiet ? `\n${r.stdout}${r.stderr}` : '';
    throw new Error(`${cmd} ${args.join(' ')} exited with ${r.status}${out}`);
  }
  return (Date.now() - t0) / 1000;
}

const newer = (a, b) => existsSync(b) && existsSync(a) && statSync(b).mtimeMs >= statSync(a).mtimeMs;

/**
 * Builds pkg/: `cargo build --release --target wasm32-unknown-unknown --lib`, `wasm-bindgen
 * --target web`, `wasm-opt -O3` (npm binaryen), and the entry files src/web/index.{js,d.ts}.
 * Steps whose output is newer than their input are skipped (cargo itself is incremental).
 * Returns the seconds each step took.
 */
export function build({ log = console.log } = {}) {
  const times = {};
  const wasm = join(ROOT, 'target', 'wasm32-unknown-unknown', 'release', 'webgpu_llama.wasm');
  const pkg = join(ROOT, 'pkg');
  const bg = join(pkg, 'webgpu_llama_bg.wasm');
  const stamp = join(ROOT, 'target', 'wasm32-unknown-unknown', 'release', 'webgpu_llama.opt-stamp');
  log('[build] cargo build --release --target wasm32-unknown-unknown --lib');
  times.cargo = run('nice', ['cargo', 'build', '--release', '--target', 'wasm32-unknown-unknown', '--lib']);
  if (!(newer(wasm, stamp) && existsSync(bg))) {
    log('[build] wasm-bindgen --target web --out-dir pkg');
    times.bindgen = run('wasm-bindgen', ['--target', 'web', '--out-dir', pkg, wasm]);
    log('[build] wasm-opt -O3 (npm binaryen)');
    times.opt = run('wasm-opt', ['-O3', '--enable-bulk-memory', '--enable-nontrapping-float-to-int', '--enable-sign-ext',
      '--enable-mutable-globals', '--enable-reference-types', '--enable-multivalue', bg, '-o', bg]);
    writeFileSync(stamp, `${statSync(wasm).mtimeMs}\n`);
  }
  copyFileSync(join(ROOT, 'src', 'web', 'index.js'), join(pkg, 'index.js'));
  for (const f of ['index.d.ts', 'index-webgpu-types.d.ts']) copyFileSync(join(ROOT, 'src', 'web', f), join(pkg, f));
  times.wasmBytes = statSync(bg).size;
  return times;
}

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
  '.ts': 'text/plain; charset=utf-8', '.gguf': 'application/octet-stream', '.f32': 'application/octet-stream',
};

/**
 * Serves `mounts` on 127.0.0.1:`port` (0 = any free port). Keys ending in '/' map a URL prefix to a
 * directory ({ '/': dir, '/pkg/': dir }, longest prefix wins); other keys map one URL to one file
 * ({ '/seed/llama.js': file }), served with the type of the URL's extension when the file's own
 * is unknown (a .txt served as JavaScript). Resolves to { server, url }.
 */
export function serve(mounts, port = 0) {
  const prefixes = Object.keys(mounts).filter((p) => p.endsWith('/')).sort((a, b) => b.length - a.length);
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    let file;
    if (Object.hasOwn(mounts, path) && !path.endsWith('/')) file = resolve(mounts[path]);
    else {
      const prefix = prefixes.find((p) => path.startsWith(p));
      const base = prefix && resolve(mounts[prefix]);
      file = base && normalize(join(base, path.slice(prefix.length)));
      if (!file || (file !== base && !file.startsWith(base + sep))) { res.writeHead(403).end('forbidden'); return; }
    }
    if (existsSync(file) && statSync(file).isDirectory()) file = join(file, 'index.html');
    if (!existsSync(file)) { res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: ${path}`); return; }
    res.writeHead(200, {
      'content-type': TYPES[extname(file)] || TYPES[extname(path)] || 'application/octet-stream',
      'content-length': statSync(file).size,
      'cache-control': 'no-store',
    });
    if (req.method === 'HEAD') { res.end(); return; }
    createReadStream(file).pipe(res);
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, '127.0.0.1', () => ok({ server, url: `http://127.0.0.1:${server.address().port}` }));
  });
}

/** The seed prototype, served at /seed/llama.js (it imports ./gguf.js = www/seed/gguf.js). */
export const SEED = join(SHARED, 'seeds', '000_9edf6990fd25599c.txt');

/**
 * What the pages under www/ expect: / -> www/, /pkg/ -> pkg/, /models/ -> .models/,
 * /shared/models/ and /shared/reference/ -> ../shared/..., /seed/llama.js -> the seed (read in
 * place from ../shared, never copied into the project).
 */
export function webMounts() {
  return {
    '/': join(ROOT, 'www'), '/pkg/': join(ROOT, 'pkg'), '/models/': join(ROOT, '.models'),
    '/shared/models/': join(SHARED, 'models'), '/shared/reference/': join(SHARED, 'reference'), '/seed/llama.js': SEED,
    // The chat page's tokenizer and chat-template libraries (npm devDependencies).
    '/vendor/': join(ROOT, 'node_modules'),
  };
}

/** Headless Chromium (/usr/bin/chromium) through playwright-core, with WebGPU enabled. */
export async function launchChromium() {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}
