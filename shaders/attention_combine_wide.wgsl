// attention_combine_wide: attention_combine.wgsl's merge of key splits for many splits (more than
// attention::WIDE_COMBINE_SPLITS; at most 128, attention::MAX_SPLITS), same bindings, grid and
// QUANT, 256 threads a head instead of 64: thread s reads the max and sum of split s, M and the
// denominator are reduced in workgroup memory (trees over as many slots as there are splits),
// then the threads take the head's dims times NP parts (NP = 256 / head_dim, at least 1):
// thread (q, d) adds up dim d over splits q, q + NP, ..., 16 loads in flight, and the parts'
// sums are added in workgroup memory. A long context's splits are then a few rounds of loads
// per thread, not a round per 8 splits and dim; with few splits the 64-thread form is faster
// (measured: attention::WIDE_COMBINE_SPLITS).
// (Bindings: combine_io.wgsl.)

const NEG: f32 = -3.0e38;
const WG: u32 = 256u;
const MAXS: u32 = 128u; // splits (attention::MAX_SPLITS)
const LIVE: u32 = 16u; // loads in flight per thread
var<workgroup> weight: array<f32, MAXS>; // exp(m_s - M), 0 for a split without keys
var<workgroup> red: array<f32, MAXS>;
var<workgroup> parts: array<f32, WG>; // the parts' sums of each dim (NP > 1)

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let h = wg.x;
  let t = wg.y;
  let hd = p.head_dim;
  let w = hd + 2u;
  let i = l.x;
  // Split s's partial for (t, h) starts at b0 + s * stride.
  let stride = st.n_tokens * p.n_heads * w;
  let b0 = (t * p.n_heads + h) * w;
  var ms = NEG;
  var ls = 0.0;
  if (i < st.splits) {
    ls = partials[b0 + i * stride + hd + 1u];
    if (ls > 0.0) { ms = partials[b0 + i * stride + hd]; }
  }
  // The trees' width: the slots that hold splits, to a power of two.
  var top = 1u;
  while (top < st.splits) { top <<= 1u; }
  if (i < MAXS) { red[i] = ms; }
  workgroupBarrier();
  for (var k = top / 2u; k > 0u; k >>= 1u) {
    if (i < k) { red[i] = max(red[i], red[i + k]); }
    workgroupBarrier();
  }
  let mx = red[0];
  workgroupBarrier();
  let c = select(0.0, exp(ms - mx), ls > 0.0);
  if (i < MAXS) {
    weight[i] = c;
    red[i] = ls * c;
  }
  workgroupBarrier();
  for (var k = top / 2u; k > 0u; k >>= 1u) {
    if (i < k) { red[i] += red[i + k]; }
    workgroupBarrier();
  }
  let z = red[0];
  // Dims times parts: thread i takes dim i % hd (and + WG, ... when hd > WG) of part i / hd.
  let np = max(1u, WG / hd);
  let q = i / hd;
  let last = st.splits - 1u;
  for (var d = i % hd; d < hd && q < np; d += WG) {
    var acc = 0.0;
    for (var s0 = q; s0 < st.splits; s0 += np * LIVE) {
      var a = array<f32, LIVE>();
      for (var u = 0u; u < LIVE; u++) { a[u] = partials[b0 + min(s0 + u * np, last) * stride + d]; }
      for (var u = 0u; u < LIVE; u++) {
        if (s0 + u * np < st.splits) { acc += a[u] * weight[s0 + u * np]; }
      }
    }
    if (np == 1u) {
      o[t * p.o_stride + h * hd + d] = acc / z;
//@if QUANT
      OV[d] = acc / z;
//@end
    } else {
      parts[i] = acc;
    }
  }
  if (np > 1u) {
    workgroupBarrier();
    if (i < hd) {
      var acc = parts[i];
      for (var k = 1u; k < np; k++) { acc += parts[k * hd + i]; }
      o[t * p.o_stride + h * hd + i] = acc / z;
//@if QUANT
      OV[i] = acc / z;
//@end
    }
  }
//@if QUANT
  workgroupBarrier();
  quantize_head(h, t, i, WG);
//@end
}
