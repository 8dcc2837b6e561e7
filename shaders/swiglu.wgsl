// swiglu: h = act(g) * u in place over g, for each token row of [g | u] (the fused gate/up
// projection writes g at [0, n) and u at [u0, u0 + n) of a row of `stride` values); act is SiLU
// (SwiGLU, Shazeer 2020) or with `gelu` = 1 GELU's tanh form (GEGLU: Gemma), activation.wgsl's.
// Bindings: 0 {n, u0, stride, gelu}, 1 step {n_tokens}, 2 gu. Grid (n / 64, n_tokens).
struct P { n: u32, u0: u32, stride: u32, gelu: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read_write> gu: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n && g.y < st.n_tokens) {
    let o = g.y * p.stride + g.x;
    gu[o] = gated(gu[o], gu[o + p.u0], p.gelu != 0u);
  }
}
