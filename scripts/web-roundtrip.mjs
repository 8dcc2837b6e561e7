// The browser's submit-and-readback round trip against a dispatch's GPU time, on the page's own
// adapter (headless Chromium; SwiftShader here): one dispatch of a loop of N steps, a copy of
// 2 KiB into a mappable buffer, submit, mapAsync, read; the median and the minimum of 40, for
// a range of N. A decode step pays this once a token (BENCHMARKS.md v28).
//   usage: node scripts/web-roundtrip.mjs   (after npm ci; prints one line per N)
import { CHROMIUM, CHROMIUM_ARGS, serve, webMounts } from './serve.mjs';

const STEPS = [0, 10_000, 30_000, 60_000, 100_000, 120_000, 160_000, 180_000, 250_000];
const { server, url } = await serve(webMounts(), 0);
const browser = await (await import('playwright-core')).chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
try {
  const page = await browser.newPage();
  await page.goto(`${url}/bench.html`);
  const rows = await page.evaluate(async (steps) => {
    const adapter = await navigator.gpu.requestAdapter();
    const d = await adapter.requestDevice();
    const buf = d.createBuffer({ size: 2048, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    const rb = d.createBuffer({ size: 2048, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const code = `@group(0) @binding(0) var<storage, read_write> b: array<f32>;
      @compute @workgroup_size(4) fn main(@builtin(global_invocation_id) g: vec3u) {
        var a = b[g.x];
        for (var i = 0u; i < u32(b[8]); i++) { a = a * 0.999 + 1.0; }
        b[g.x] = a;
      }`;
    const pipe = d.createComputePipeline({ layout: 'auto', compute: { module: d.createShaderModule({ code }), entryPoint: 'main' } });
    const bg = d.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
    const out = [];
    for (const n of steps) {
      const ms = [];
      for (let rep = 0; rep < 40; rep++) {
        const t0 = performance.now();
        const init = new Float32Array(16);
        init[8] = n;
        d.queue.writeBuffer(buf, 0, init);
        const e = d.createCommandEncoder();
        const pass = e.beginComputePass();
        pass.setPipeline(pipe);
        pass.setBindGroup(0, bg);
        pass.dispatchWorkgroups(1);
        pass.end();
        e.copyBufferToBuffer(buf, 0, rb, 0, 2048);
        d.queue.submit([e.finish()]);
        await rb.mapAsync(GPUMapMode.READ);
        new Float32Array(rb.getMappedRange()).slice();
        rb.unmap();
        ms.push(performance.now() - t0);
      }
      ms.sort((a, b) => a - b);
      out.push({ n, median: ms[20], min: ms[0] });
    }
    return { adapter: adapter.info ? `${adapter.info.vendor} ${adapter.info.architecture}` : '?', out };
  }, STEPS);
  console.log(`adapter: ${rows.adapter}`);
  for (const r of rows.out) console.log(`loop of ${r.n} steps: round trip median ${r.median.toFixed(2)} ms, min ${r.min.toFixed(2)} ms`);
} finally {
  await browser.close();
  server.close();
}
