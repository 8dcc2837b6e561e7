// bias: y += b over each token row: y[t][i] += b[i] for i < n (rows of `stride` values), the
// additive bias of a linear op (Qwen2's q/k/v, llama.cpp's `ggml_add` after the projection).
// Grid (n / 64, n_tokens).
struct P { n: u32, stride: u32, _a: u32, _b: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> b: array<f32>;
@bind var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n && g.y < st.n_tokens) {
    let o = g.y * p.stride + g.x;
    y[o] += b[g.x];
  }
}
