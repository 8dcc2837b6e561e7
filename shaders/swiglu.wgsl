// swiglu: h = silu(g) * u = g / (1 + exp(-g)) * u   (SwiGLU, Shazeer 2020), in place over g, with
// g and u in one buffer (the fused gate/up projection writes [g | u]).
// Bindings: 0 {n, u0}, 1 gu: g at [0, n), u at [u0, u0 + n); h overwrites g.
struct P { n: u32, u0: u32, _b: u32, _c: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> gu: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) i: vec3u) {
  if (i.x < p.n) { let a = gu[i.x]; gu[i.x] = a / (1.0 + exp(-a)) * gu[p.u0 + i.x]; }
}
