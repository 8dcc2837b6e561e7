// attention: causal GQA softmax attention of a batch of tokens (positions pos0 .. pos0 + n)
// against the KV cache (positions 0 .. pos0 + n, the batch's keys already written by rope_kv):
// o_h = sum_t softmax_t(q_h . k_t / sqrt(head_dim)) v_t over t <= the query's position (and in
// its sliding window, `first_key`; scores soft-capped by `capped`: attention_params.wgsl), query
// head h reading KV head h / (n_heads / n_kv) (Vaswani et al. 2017; Ainslie et al. 2023), computed
// tile by tile of keys with an online softmax (FlashAttention, Dao et al. 2022) and optionally
// split over the keys (flash-decoding: partial results combined by attention_combine.wgsl, or
// attention_combine_wide.wgsl for many splits).
// Composed (kernels::compose) with `const HD` (head dim), `TPQ` (threads per query row: a power
// of two dividing HD), `BKV` (keys per tile) and `KV16` (`//@if KV16` blocks: the cache holds
// IEEE halves packed two per u32, read with unpack2x16float into the f32 tiles).
// Rows: the (token, query head) pairs of one KV head, so a K/V tile in workgroup memory serves
// every query head of its group. Workgroup (x, y, z): BQ = 64 / TPQ rows from x * BQ, KV head y,
// key split z of num_workgroups.z. A row's TPQ threads each hold HD / TPQ dims of q and of the
// output; per tile they write partial dot products, add them up key by key (each thread a share
// of the keys), and all then read the row's scores for the softmax and the V product.
// Bindings: 0 {n_heads, n_kv, q_stride, o_stride, scale}, 1 step {n_tokens, pos0}, 2 qkv
// [tokens][q_stride] (q of head h at h * HD), 3 kc, 4 vc [ctx][n_kv * HD] (f32, or with KV16
// [ctx][n_kv * HD / 2] u32 pairs), 5 o [tokens][o_stride],
// 6 partials [split][token][head][HD + 2] (acc, max, sum) when num_workgroups.z > 1.
@bind var<uniform> p: Attn;
@bind var<uniform> st: Step;
@bind var<storage, read> qkv: array<f32>;
@bind var<storage, read> kc: array<KvWord>;
@bind var<storage, read> vc: array<KvWord>;
@bind var<storage, read_write> o: array<f32>;
@bind var<storage, read_write> partials: array<f32>;

const BQ: u32 = 64u / TPQ;
const DPT: u32 = HD / TPQ;
const NEG: f32 = -3.0e38; // a masked score
var<workgroup> Kt: array<f32, BKV * HD>;
var<workgroup> Vt: array<f32, BKV * HD>;
var<workgroup> S: array<f32, 64u * BKV>; // [row][thread of row][key]; then [row][key] scores

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let g = p.n_heads / p.n_kv;
  let kvh = wg.y;
  let kvd = p.n_kv * HD;
  let r = l.x / TPQ;
  let sub = l.x % TPQ;
  let rows = st.n_tokens * g;
  let row = min(wg.x * BQ + r, rows - 1u); // idle threads mirror the last row
  let live = wg.x * BQ + r < rows;
  let t = row / g;
  let h = kvh * g + row % g;
  let qpos = st.pos0 + t;
  // Keys this workgroup needs (from the tile of the first its first row sees), and this
  // split's share (whole tiles).
  let kall = st.pos0 + (min(wg.x * BQ + BQ, rows) - 1u) / g + 1u;
  let klo = first_key(st.pos0 + wg.x * BQ / g) / BKV * BKV;
  let per = ((kall - klo + nwg.z - 1u) / nwg.z + BKV - 1u) / BKV * BKV;
  let kbeg = klo + wg.z * per;
  let kend = min(kall, kbeg + per);
  var q = array<f32, DPT>();
  var acc = array<f32, DPT>();
  let qo = t * p.q_stride + h * HD + sub * DPT;
  for (var d = 0u; d < DPT; d++) { q[d] = qkv[qo + d] * p.scale; }
  var m = NEG;
  var lsum = 0.0;
  let so = (r * TPQ + sub) * BKV;
  let ro = r * TPQ * BKV;
  for (var kb = kbeg; kb < kend; kb += BKV) {
    //@if KV16
    // A pair of dims (one u32 of each cache) per step.
    for (var i = l.x; i < BKV * HD / 2u; i += 64u) {
      let key = kb + 2u * i / HD;
      let src = (key * kvd + kvh * HD + (2u * i) % HD) / 2u;
      var k = vec2<f32>(0.0);
      var v = vec2<f32>(0.0);
      if (key < kend) {
        k = unpack2x16float(kc[src]);
        v = unpack2x16float(vc[src]);
      }
      Kt[2u * i] = k.x;
      Kt[2u * i + 1u] = k.y;
      Vt[2u * i] = v.x;
      Vt[2u * i + 1u] = v.y;
    }
    //@end
    //@if !KV16
    for (var i = l.x; i < BKV * HD; i += 64u) {
      let key = kb + i / HD;
      let src = key * kvd + kvh * HD + i % HD;
      var k = 0.0;
      var v = 0.0;
      if (key < kend) {
        k = kc[src];
        v = vc[src];
      }
      Kt[i] = k;
      Vt[i] = v;
    }
    //@end
    workgroupBarrier();
    for (var j = 0u; j < BKV; j++) {
      var s = 0.0;
      for (var d = 0u; d < DPT; d++) { s += q[d] * Kt[j * HD + sub * DPT + d]; }
      S[so + j] = s;
    }
    workgroupBarrier();
    for (var j = sub; j < BKV; j += TPQ) {
      var s = 0.0;
      for (var e = 0u; e < TPQ; e++) { s += S[ro + e * BKV + j]; }
      let key = kb + j;
      S[ro + j] = select(NEG, capped(s), key <= qpos && key >= first_key(qpos) && key < kend);
    }
    workgroupBarrier();
    var mt = m;
    for (var j = 0u; j < BKV; j++) { mt = max(mt, S[ro + j]); }
    let corr = exp(m - mt);
    lsum *= corr;
    for (var d = 0u; d < DPT; d++) { acc[d] *= corr; }
    for (var j = 0u; j < BKV; j++) {
      let s = S[ro + j];
      let pj = select(0.0, exp(s - mt), s > 0.5 * NEG);
      lsum += pj;
      for (var d = 0u; d < DPT; d++) { acc[d] += pj * Vt[j * HD + sub * DPT + d]; }
    }
    m = mt;
    workgroupBarrier();
  }
  if (!live) { return; }
  if (nwg.z == 1u) {
    let oo = t * p.o_stride + h * HD + sub * DPT;
    for (var d = 0u; d < DPT; d++) { o[oo + d] = acc[d] / lsum; }
  } else {
    let base = ((wg.z * st.n_tokens + t) * p.n_heads + h) * (HD + 2u);
    for (var d = 0u; d < DPT; d++) { partials[base + sub * DPT + d] = acc[d]; }
    if (sub == 0u) {
      partials[base + HD] = m;
      partials[base + HD + 1u] = lsum;
    }
  }
}
