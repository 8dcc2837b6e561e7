// attention_cpu: causal GQA softmax attention of a batch of tokens (positions pos0 .. pos0 + n)
// against the KV cache (positions 0 .. pos0 + n, the batch's keys already written by rope_kv) on
// CPU implementations of WebGPU (lavapipe, SwiftShader; attention.wgsl is the GPU kernel):
// o_h = sum_t softmax_t(q_h . k_t / sqrt(head_dim)) v_t over t <= the query's position, query head
// h reading KV head h / (n_heads / n_kv) (Vaswani et al. 2017; Ainslie et al. 2023), key block by
// key block with an online softmax (Milakov & Gimelshein 2018, as in FlashAttention).
// Composed (kernels::compose) with `const HD4` (head dim / 4), `WG` (invocations per workgroup),
// `RQ` (query rows per invocation), `BK` (keys per block), `SG` (subgroup size, then equal to
// BK, or 0) and `KV16` (1: the cache holds IEEE halves, four per vec2<u32>, unpacked by `ld`
// with unpack2x16float); the `//@for v < N` ..
// `//@end` blocks are unrolled at compose time ($v replaced by 0 .. N - 1), `//@if SG` ..
// `//@end` kept only where SG is not 0 (`//@if !SG` where it is).
// Such compilers run a workgroup's invocations side by side in SIMD lanes: each invocation owns
// RQ rows (row x * WG * RQ + i * WG + lane for i < RQ; a row is a (token, query head) pair of KV
// head y: row r is token r / g, head y * g + r % g), their q and outputs held in unrolled vec4
// registers, so that each key and value read serves RQ rows; every lane walks the same keys (all the
// workgroup's rows need, masked per row past its position), so that each K and V read has one
// address across the lanes: one load broadcast, no workgroup memory, no barriers.
// Bindings: 0 {n_heads, n_kv, q_stride, o_stride, scale}, 1 step {n_tokens, pos0}, 2 qkv
// [tokens][q_stride] (q of head h at h * HD), 3 kc, 4 vc [ctx][n_kv * HD], 5 o [tokens][o_stride]
// (all f32, read as vec4: HD, q_stride and o_stride are multiples of 4; with KV16 the caches as
// vec2<u32>, 4 halves each: the same indices). Grid (rows / (WG * RQ), n_kv).
@bind var<uniform> p: Attn;
@bind var<uniform> st: Step;
@bind var<storage, read> qkv: array<vec4<f32>>;
@bind var<storage, read> kc: array<KvQuad>;
@bind var<storage, read> vc: array<KvQuad>;
//@if KV16
fn ld(x: KvQuad) -> vec4<f32> { return vec4<f32>(unpack2x16float(x.x), unpack2x16float(x.y)); }
//@end
//@if !KV16
fn ld(x: KvQuad) -> vec4<f32> { return x; }
//@end
@bind var<storage, read_write> o: array<vec4<f32>>;

const NEG: f32 = -3.0e38; // a masked score

@compute @workgroup_size(WG)
//@if SG
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u, @builtin(subgroup_invocation_id) sg_lane: u32) {
//@end
//@if !SG
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
//@end
  let g = p.n_heads / p.n_kv;
  let rows = st.n_tokens * g;
  let r0 = wg.x * (WG * RQ);
  // Keys the workgroup's last row needs (the same for every lane).
  let kend = st.pos0 + (min(r0 + WG * RQ, rows) - 1u) / g + 1u;
  let kvd4 = p.n_kv * HD4;
  let kh = wg.y * HD4;
  //@for i < RQ
  let row$i = min(r0 + $iu * WG + l.x, rows - 1u); // idle lanes mirror the last row
  let qpos$i = st.pos0 + row$i / g;
  let qo$i = (row$i / g * p.q_stride) / 4u + (wg.y * g + row$i % g) * HD4;
  //@for d < HD4
  let q$i_$d = qkv[qo$i + $du] * p.scale;
  var o$i_$d = vec4<f32>(0.0);
  //@end
  var m$i = NEG;
  var z$i = 0.0;
  //@end
  // From the block of the first key the workgroup's first row sees (a sliding window's).
  for (var kb = first_key(st.pos0 + r0 / g) / BK * BK; kb < kend; kb += BK) {
    // Keys past kend read the last key (in bounds) and are masked like those past qpos.
    //@if !SG
    //@for j < BK
    let k$j = min(kb + $ju, kend - 1u) * kvd4 + kh;
    //@end
    //@for d < HD4
    //@for j < BK
    let kv$d_$j = ld(kc[k$j + $du]);
    //@end
    //@end
    //@end
    //@if SG
    // BK = SG: lane j reads key kb + j (and later its value), subgroupBroadcast hands it to
    // every lane: one load per lane where the compiler would load the shared address per lane.
    let kl = min(kb + sg_lane, kend - 1u) * kvd4 + kh;
    //@for d < HD4
    let kv$d = ld(kc[kl + $du]);
    //@for j < BK
    let kv$d_$j = subgroupBroadcast(kv$d, $ju);
    //@end
    //@end
    //@end
    //@for i < RQ
    //@for j < BK
    var s$i_$j = 0.0;
    //@for d < HD4
    s$i_$j += dot(q$i_$d, kv$d_$j);
    //@end
    //@end
    // A masked key's weight is 0 (a sliding window can mask a row's whole first blocks: mt is
    // then NEG too).
    var mt$i = m$i;
    //@for j < BK
    s$i_$j = select(NEG, capped(s$i_$j), kb + $ju <= qpos$i && kb + $ju >= first_key(qpos$i));
    mt$i = max(mt$i, s$i_$j);
    //@end
    let corr$i = exp(m$i - mt$i);
    z$i *= corr$i;
    //@for j < BK
    let e$i_$j = select(0.0, exp(s$i_$j - mt$i), s$i_$j > 0.5 * NEG);
    z$i += e$i_$j;
    //@end
    m$i = mt$i;
    //@end
    //@for d < HD4
    //@if !SG
    //@for j < BK
    let vv$d_$j = ld(vc[k$j + $du]);
    //@end
    //@end
    //@if SG
    let vv$d = ld(vc[kl + $du]);
    //@for j < BK
    let vv$d_$j = subgroupBroadcast(vv$d, $ju);
    //@end
    //@end
    //@for i < RQ
    var u$i_$d = o$i_$d * corr$i;
    //@for j < BK
    u$i_$d += e$i_$j * vv$d_$j;
    //@end
    o$i_$d = u$i_$d;
    //@end
    //@end
  }
  //@for i < RQ
  if (r0 + $iu * WG + l.x < rows) {
    let oo = (row$i / g * p.o_stride) / 4u + (wg.y * g + row$i % g) * HD4;
    //@for d < HD4
    o[oo + $du] = o$i_$d / z$i;
    //@end
  }
  //@end
}
