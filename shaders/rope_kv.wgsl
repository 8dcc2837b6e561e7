// rope_kv: RoPE on q (in place) and k, then k and v into the KV cache, for each token i of the
// batch at position pos0 + i. RoPE as in the seed and llama.cpp's normal (non-NeoX) mode:
// adjacent pairs (2j, 2j+1) of each head rotate by angle pos * freq_j; only the first n_rot dims
// rotate, the rest pass through. cs holds cos and sin per (pos, j), computed on the CPU in f64
// (freq_j = theta^(-2j/n_rot), divided by Llama-3 rope_freqs factors and linear scaling).
// Bindings: 0 {n_heads, n_kv, head_dim, n_rot, qkv_stride}, 1 step {n_tokens, pos0}, 2 cs
// [ctx][n_rot/2][2], 3 qkv [tokens][qkv_stride]: [q | k | v] as the fused projection writes it
// (q: n_heads*head_dim, k and v: n_kv*head_dim), 4 kc, 5 vc [ctx][n_kv*head_dim]: f32, or with
// `KV16` (composed by kernels::compose: `//@if KV16` blocks) IEEE halves packed two per u32 by
// pack2x16float (element e in bits 16 * (e % 2) of word e / 2; no shader-f16 needed).
// Grid (max(q pairs, kv dims) / 64, n_tokens). Thread i rotates q pair i and k pair i (whose two
// values make one u32 of the f16 cache) and copies v value i (f16: v pair i): each cache word is
// written by one thread.
struct P { n_heads: u32, n_kv: u32, head_dim: u32, n_rot: u32, qkv_stride: u32, _a: u32, _b: u32, _c: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> cs: array<f32>;
@bind var<storage, read_write> q: array<f32>;
@bind var<storage, read_write> kc: array<KvWord>;
@bind var<storage, read_write> vc: array<KvWord>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.y >= st.n_tokens) { return; }
  let pos = st.pos0 + g.y;
  let row = g.y * p.qkv_stride;
  let half = p.head_dim / 2u;
  let rot = p.n_rot / 2u;
  let kvd = p.n_kv * p.head_dim;
  let k0 = row + p.n_heads * p.head_dim;
  let v0 = k0 + kvd;
  let i = g.x;
  let j = i % half;
  let a = (i / half) * p.head_dim + 2u * j;
  let t = 2u * (pos * rot + j);
  if (i < p.n_heads * half && j < rot) {
    let c = cs[t];
    let s = cs[t + 1u];
    let x0 = q[row + a];
    let x1 = q[row + a + 1u];
    q[row + a] = x0 * c - x1 * s;
    q[row + a + 1u] = x0 * s + x1 * c;
  }
  if (i < p.n_kv * half) {
    let x0 = q[k0 + a];
    let x1 = q[k0 + a + 1u];
    let o = pos * kvd + a;
    var k = vec2<f32>(x0, x1);
    if (j < rot) {
      let c = cs[t];
      let s = cs[t + 1u];
      k = vec2<f32>(x0 * c - x1 * s, x0 * s + x1 * c);
    }
    //@if KV16
    kc[o / 2u] = pack2x16float(k);
    //@end
    //@if !KV16
    kc[o] = k.x;
    kc[o + 1u] = k.y;
    //@end
  }
  //@if KV16
  if (i < kvd / 2u) { vc[pos * (kvd / 2u) + i] = pack2x16float(vec2<f32>(q[v0 + 2u * i], q[v0 + 2u * i + 1u])); }
  //@end
  //@if !KV16
  if (i < kvd) { vc[pos * kvd + i] = q[v0 + i]; }
  //@end
}
