// rmsnorm: y = x / sqrt(mean(x^2) + eps) * w per token row (RMSNorm, Zhang & Sennrich 2019;
// llama.cpp ggml_rms_norm). Bindings: 0 {n, eps, add}, 1 step {n_tokens}, 2 x [tokens][n], 3 w [n],
// 4 y [tokens][n]. With `add` = 1, y += that instead (Gemma's post-attention and post-FFN norms:
// the branch's output normed, then added to the residual stream y). On GPUs one workgroup of 256 per token (grid (n_tokens, 1)); composed with
// `ROWS` (kernels::Geometry::NormRows, CPU adapters), a token row per invocation, ROWS rows per
// workgroup (grid (n_tokens / ROWS, 1)): CPU implementations run a workgroup's invocations as
// SIMD lanes and each barrier as a switch between them, which a 256-wide tree pays 8 times a row.
struct P { n: u32, eps: f32, add: u32, _b: u32 };

fn put(o: u32, v: f32) {
  if (p.add != 0u) {
    y[o] += v;
  } else {
    y[o] = v;
  }
}
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> x: array<f32>;
@bind var<storage, read> w: array<f32>;
@bind var<storage, read_write> y: array<f32>;
//@if ROWS
@compute @workgroup_size(ROWS)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x >= st.n_tokens) { return; }
  let o = g.x * p.n;
  var s = 0.0;
  for (var i = 0u; i < p.n; i++) { s += x[o + i] * x[o + i]; }
  let inv = 1.0 / sqrt(s / f32(p.n) + p.eps);
  for (var i = 0u; i < p.n; i++) { put(o + i, x[o + i] * inv * w[i]); }
}
//@end
//@if !ROWS
var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let o = min(wg.x, st.n_tokens - 1u) * p.n;
  var s = 0.0;
  for (var i = l.x; i < p.n; i += 256u) { s += x[o + i] * x[o + i]; }
  part[l.x] = s;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  let inv = 1.0 / sqrt(part[0] / f32(p.n) + p.eps);
  for (var i = l.x; i < p.n; i += 256u) { put(o + i, x[o + i] * inv * w[i]); }
}
//@end
