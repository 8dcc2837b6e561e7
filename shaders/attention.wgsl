// attention: causal softmax attention for one new query position, grouped KV heads (GQA):
// o_h = sum_t softmax_t(q_h . k_t / sqrt(head_dim)) v_t over cached positions t = 0..pos,
// query head h reading KV head h / (n_heads / n_kv) (Vaswani et al. 2017; Ainslie et al. 2023).
// Bindings: 0 step {pos, ..}, 1 {n_heads, n_kv, head_dim, ctx}, 2 q, 3 kc, 4 vc [ctx][n_kv*head_dim],
// 5 o [n_heads*head_dim], 6 scores [n_heads][ctx] (scratch: no workgroup-size cap on the context).
// One workgroup of 64 per query head.
struct Step { pos: u32, token: u32, n: u32, _p: u32 };
struct P { n_heads: u32, n_kv: u32, head_dim: u32, ctx: u32 };
@group(0) @binding(0) var<uniform> st: Step;
@group(0) @binding(1) var<uniform> p: P;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> sc: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let h = wg.x;
  let kvh = h / (p.n_heads / p.n_kv);
  let kvd = p.n_kv * p.head_dim;
  let qo = h * p.head_dim;
  let ko = kvh * p.head_dim;
  let so = h * p.ctx;
  let n = st.pos + 1u;
  let scale = 1.0 / sqrt(f32(p.head_dim));
  var m = -3.4e38;
  for (var t = l.x; t < n; t += 64u) {
    var s = 0.0;
    for (var d = 0u; d < p.head_dim; d++) { s += q[qo + d] * kc[t * kvd + ko + d]; }
    s = s * scale;
    sc[so + t] = s;
    m = max(m, s);
  }
  part[l.x] = m;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] = max(part[l.x], part[l.x + k]); }
    workgroupBarrier();
  }
  let mx = part[0];
  workgroupBarrier();
  var z = 0.0;
  for (var t = l.x; t < n; t += 64u) { let e = exp(sc[so + t] - mx); sc[so + t] = e; z += e; }
  part[l.x] = z;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  let zz = part[0];
  // Every thread's scores must be visible before any thread sums over all of them.
  storageBarrier();
  workgroupBarrier();
  for (var d = l.x; d < p.head_dim; d += 64u) {
    var acc = 0.0;
    for (var t = 0u; t < n; t++) { acc += sc[so + t] * vc[t * kvd + ko + d]; }
    o[qo + d] = acc / zz;
  }
}
