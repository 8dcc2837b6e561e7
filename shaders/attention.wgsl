// attention: causal softmax attention for one new query position, grouped KV heads (GQA):
// o_h = sum_t softmax_t(q_h . k_t / sqrt(head_dim)) v_t over cached positions t = 0..pos,
// query head h reading KV head h / (n_heads / n_kv) (Vaswani et al. 2017; Ainslie et al. 2023).
// Bindings: 0 step {pos, ..}, 1 {n_heads, n_kv, head_dim, ctx}, 2 q (the first n_heads*head_dim
// of [q | k | v]), 3 kc, 4 vc [ctx][n_kv*head_dim], 5 o [n_heads*head_dim], 6 scores
// [n_heads][ctx] (scratch: no workgroup-memory cap on the context).
// One workgroup of WG threads per query head (composed by gpu::compose: 256 on GPUs, 64 on CPU
// adapters such as SwiftShader and lavapipe, where every barrier costs per invocation). Scores:
// one position per thread. Output: the positions are split over WG / head_dim groups of threads
// (one dim each), so no thread walks the whole context alone (that serial walk was the decode
// bottleneck at long contexts on the H200), then the groups' partial sums are added.
struct Step { pos: u32, token: u32, n: u32, _p: u32 };
struct P { n_heads: u32, n_kv: u32, head_dim: u32, ctx: u32 };
@group(0) @binding(0) var<uniform> st: Step;
@group(0) @binding(1) var<uniform> p: P;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> sc: array<f32>;
var<workgroup> part: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let h = wg.x;
  let hd = p.head_dim;
  let kvh = h / (p.n_heads / p.n_kv);
  let kvd = p.n_kv * hd;
  let qo = h * hd;
  let ko = kvh * hd;
  let so = h * p.ctx;
  let n = st.pos + 1u;
  let scale = 1.0 / sqrt(f32(hd));
  var m = -3.4e38;
  for (var t = l.x; t < n; t += WG) {
    var s = 0.0;
    for (var d = 0u; d < hd; d++) { s += q[qo + d] * kc[t * kvd + ko + d]; }
    s = s * scale;
    sc[so + t] = s;
    m = max(m, s);
  }
  part[l.x] = m;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] = max(part[l.x], part[l.x + k]); }
    workgroupBarrier();
  }
  let mx = part[0];
  workgroupBarrier();
  var z = 0.0;
  for (var t = l.x; t < n; t += WG) { let e = exp(sc[so + t] - mx); sc[so + t] = e; z += e; }
  part[l.x] = z;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  let zz = part[0];
  // Every thread's scores must be visible (and part[0] read) before the output pass.
  storageBarrier();
  workgroupBarrier();
  let groups = max(1u, WG / hd);
  if (groups == 1u) {
    for (var d = l.x; d < hd; d += WG) {
      var acc = 0.0;
      for (var t = 0u; t < n; t++) { acc += sc[so + t] * vc[t * kvd + ko + d]; }
      o[qo + d] = acc / zz;
    }
  } else {
    let d = l.x % hd;
    let grp = l.x / hd;
    var acc = 0.0;
    if (grp < groups) {
      for (var t = grp; t < n; t += groups) { acc += sc[so + t] * vc[t * kvd + ko + d]; }
    }
    part[l.x] = acc;
    workgroupBarrier();
    if (grp == 0u) {
      var s = 0.0;
      for (var g = 0u; g < groups; g++) { s += part[g * hd + d]; }
      o[qo + d] = s / zz;
    }
  }
}
