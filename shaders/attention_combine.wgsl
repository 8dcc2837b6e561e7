// attention_combine: merges the key splits of attention.wgsl (flash-decoding): for each token and
// query head, with split s's running max m_s, sum l_s and unnormalised output a_s,
// o = sum_s a_s exp(m_s - M) / sum_s l_s exp(m_s - M), M = max over the splits that saw a key.
// Bindings: 0 {n_heads, head_dim, o_stride}, 1 step {n_tokens, splits}, 2 partials
// [split][token][head][head_dim + 2], 3 o [tokens][o_stride]. Grid (n_heads, n_tokens), 64 threads
// over the head's dims.
struct P { n_heads: u32, head_dim: u32, o_stride: u32, _a: u32 };
struct Step { n_tokens: u32, pos0: u32, splits: u32, _b: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> st: Step;
@group(0) @binding(2) var<storage, read> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let h = wg.x;
  let t = wg.y;
  let w = p.head_dim + 2u;
  var mx = -3.0e38;
  for (var s = 0u; s < st.splits; s++) {
    let b = ((s * st.n_tokens + t) * p.n_heads + h) * w;
    if (partials[b + p.head_dim + 1u] > 0.0) { mx = max(mx, partials[b + p.head_dim]); }
  }
  for (var d = l.x; d < p.head_dim; d += 64u) {
    var acc = 0.0;
    var z = 0.0;
    for (var s = 0u; s < st.splits; s++) {
      let b = ((s * st.n_tokens + t) * p.n_heads + h) * w;
      let ls = partials[b + p.head_dim + 1u];
      if (ls > 0.0) {
        let c = exp(partials[b + p.head_dim] - mx);
        acc += partials[b + d] * c;
        z += ls * c;
      }
    }
    o[t * p.o_stride + h * p.head_dim + d] = acc / z;
  }
}
