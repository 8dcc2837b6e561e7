// attention_combine: merges the key splits of attention.wgsl and attention_decode.wgsl
// (flash-decoding): for each token and query head, with split s's running max m_s, sum l_s and
// unnormalised output a_s, o = sum_s a_s exp(m_s - M) / sum_s l_s exp(m_s - M), M = max over the
// splits that saw a key. Bindings: 0 {n_heads, head_dim, o_stride}, 1 step {n_tokens, splits},
// 2 partials [split][token][head][head_dim + 2], 3 o [tokens][o_stride]. Grid (n_heads,
// n_tokens), 64 threads: thread s reads the max and sum of splits s and s + 64 (splits <= 128,
// attention::MAX_SPLITS; the forward pass sends more than attention::WIDE_COMBINE_SPLITS to
// attention_combine_wide.wgsl), M and the denominator are reduced in workgroup memory, then
// thread d adds up dims d, d + 64, ... over the splits, 8 splits' loads in flight at a time (a
// loop of dependent loads would wait on memory once per split).
// With QUANT (head_dim a multiple of 16, at most 512) it also writes the last token's row of the
// head's output as quantize_half.wgsl's 24-bit integers (XQW, XSW; the row's halves of
// this head), for the integer form of the output projection, which one-token batches run: the
// quantize op it would take is one dependent dispatch per layer more.
// (Bindings: combine_io.wgsl.)

const NEG: f32 = -3.0e38;
const SPT: u32 = 2u; // splits per thread
var<workgroup> weight: array<f32, 64u * SPT>; // exp(m_s - M), 0 for a split without keys
var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let h = wg.x;
  let t = wg.y;
  let w = p.head_dim + 2u;
  let s = l.x;
  // Split s's partial for (t, h) starts at b0 + s * stride.
  let stride = st.n_tokens * p.n_heads * w;
  let b0 = (t * p.n_heads + h) * w;
  var ms = array<f32, SPT>();
  var ls = array<f32, SPT>();
  var mt = NEG;
  for (var i = 0u; i < SPT; i++) {
    let si = s + 64u * i;
    ms[i] = NEG;
    ls[i] = 0.0;
    if (si < st.splits) {
      ls[i] = partials[b0 + si * stride + p.head_dim + 1u];
      if (ls[i] > 0.0) { ms[i] = partials[b0 + si * stride + p.head_dim]; }
    }
    mt = max(mt, ms[i]);
  }
  red[s] = mt;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (s < k) { red[s] = max(red[s], red[s + k]); }
    workgroupBarrier();
  }
  let mx = red[0];
  workgroupBarrier();
  var lt = 0.0;
  for (var i = 0u; i < SPT; i++) {
    let c = select(0.0, exp(ms[i] - mx), ls[i] > 0.0);
    weight[s + 64u * i] = c;
    lt += ls[i] * c;
  }
  red[s] = lt;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (s < k) { red[s] += red[s + k]; }
    workgroupBarrier();
  }
  let z = red[0];
  let last = st.splits - 1u;
  for (var d = l.x; d < p.head_dim; d += 64u) {
    var acc = 0.0;
    for (var s0 = 0u; s0 < st.splits; s0 += 8u) {
      var a = array<f32, 8>();
      for (var u = 0u; u < 8u; u++) { a[u] = partials[b0 + min(s0 + u, last) * stride + d]; }
      for (var u = 0u; u < 8u; u++) {
        if (s0 + u < st.splits) { acc += a[u] * weight[s0 + u]; }
      }
    }
    o[t * p.o_stride + h * p.head_dim + d] = acc / z;
//@if QUANT
    OV[d] = acc / z;
//@end
  }
//@if QUANT
  workgroupBarrier();
  quantize_head(h, t, l.x, 64u);
//@end
}
