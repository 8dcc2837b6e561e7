// rmsnorm: y = x / sqrt(mean(x^2) + eps) * w   (RMSNorm, Zhang & Sennrich 2019; llama.cpp ggml_rms_norm).
// Bindings: 0 {n, eps}, 1 x [n], 2 w [n], 3 y [n]. One workgroup of 256.
struct P { n: u32, eps: f32, _a: u32, _b: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
var<workgroup> part: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) l: vec3u) {
  var s = 0.0;
  for (var i = l.x; i < p.n; i += 256u) { s += x[i] * x[i]; }
  part[l.x] = s;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  let inv = 1.0 / sqrt(part[0] / f32(p.n) + p.eps);
  for (var i = l.x; i < p.n; i += 256u) { y[i] = x[i] * inv * w[i]; }
}
