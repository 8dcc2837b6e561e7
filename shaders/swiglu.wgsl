// swiglu: h = silu(g) * u = g / (1 + exp(-g)) * u   (SwiGLU, Shazeer 2020), in place over g, for
// each token row of [g | u] (the fused gate/up projection writes g at [0, n) and u at [u0, u0 + n)
// of a row of `stride` values). Bindings: 0 {n, u0, stride}, 1 step {n_tokens}, 2 gu.
// Grid (n / 64, n_tokens).
struct P { n: u32, u0: u32, stride: u32, _c: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read_write> gu: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n && g.y < st.n_tokens) {
    let o = g.y * p.stride + g.x;
    let a = gu[o];
    gu[o] = a / (1.0 + exp(-a)) * gu[o + p.u0];
  }
}
