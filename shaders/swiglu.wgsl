// swiglu: g = silu(g) * u = g / (1 + exp(-g)) * u   (SwiGLU, Shazeer 2020), in place on g.
// Bindings: 0 {n}, 1 g [n], 2 u [n].
struct P { n: u32, _a: u32, _b: u32, _c: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> g: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) i: vec3u) {
  if (i.x < p.n) { let a = g[i.x]; g[i.x] = a / (1.0 + exp(-a)) * u[i.x]; }
}
