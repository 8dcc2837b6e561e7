// attention_decode_wide: attention_decode.wgsl's one-token attention (RoPE, the cache write and
// the merge of the key splits fused in: ROPE and COMBINE on, subgroups of SG lanes)
// with a chunk's loads spread over more threads, so that a chunk of KC keys costs one wait on
// memory instead of four to six. attention_decode.wgsl's thread per key holds HD / 4 key vectors
// and then as many value rows, in two to four rounds of 16 loads, each a wait, after q's; here
// WGT = 2 HD threads a 64-key chunk (4 HD with 128-key chunks; at least KC) load a chunk's keys
// and values at once, 8 vectors each (HD / 4 for head dims under 32):
//   - scoring: TPK = WGT / KC threads a key (consecutive lanes of one subgroup), each a slice of
//     KPT = HD / (4 TPK) vectors of it (slice t + TPK i: the TPK threads' loads side by side),
//     their partial dot products added by subgroup shuffles;
//   - values: NDG = HD / 4 threads a key group (a 4-dim group each, a warp's loads one whole row),
//     KGV = WGT / NDG key groups of VPT = KC / KGV keys;
// and while a chunk is scored and summed, the next chunk's loads are already in flight (issued
// into the same registers as soon as their values are used). The chunk's max and sum: subgroup
// operations, then one exchange in workgroup memory (FlashAttention's online softmax, Dao et al.
// 2022; flash-decoding's key splits, merged by attention_decode_io.wgsl's `merge`). q is rotated
// into workgroup memory and the token's own key (not in the cache yet) is scored from KOWN there
// (its value, without VCACHED, from VOWN).
// The key groups' sums are added once, at the end. With `OWNED` (attention::decode_owned: a
// value row's NDG threads fit in one subgroup, so that each subgroup values exactly the keys
// it scored, VPT TPK = NDG), each subgroup keeps its own max and sum and takes its keys'
// weights by shuffles: no barrier a chunk; the subgroups' states are merged once, after the
// keys, as the key splits' are. Grid (GQ / G, n_kv, splits), as attention_decode.wgsl's.
// Constants as attention_decode_io.wgsl's, and KC, SG, OWNED.
const H4: u32 = HD / 4u;
const TPK: u32 = WGT / KC;
const KPT: u32 = H4 / TPK;
const KGV: u32 = WGT / NDG;
const VPT: u32 = KC / KGV;
const NSUB: u32 = WGT / SG;

var<workgroup> Q: array<vec4<f32>, G * H4>;
//@if !VCACHED
var<workgroup> VOWN: array<vec4<f32>, H4>; // the token's own value (VCACHED: in the cache)
//@end
var<workgroup> S: array<array<f32, KC>, G>; // the chunk's softmax weights
var<workgroup> MX: array<array<f32, NSUB>, G>; // the subgroups' maxima of the chunk's scores
var<workgroup> SW: array<array<f32, NSUB>, G>; // the subgroups' sums of the chunk's weights
var<workgroup> O: array<array<vec4<f32>, NDG>, KGV * G>; // the key groups' sums

@compute @workgroup_size(WGT)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let kvh = wg.y;
  let j = l.x;
  let kvd4 = p.n_kv * H4;
  let h0 = kvh * GQ + wg.x * G;
  // This split's keys (whole chunks of KC, from the first in the sliding window).
  let kall = st.pos0 + 1u;
  let klo = first_key(st.pos0);
  let per = ((kall - klo + nwg.z - 1u) / nwg.z + KC - 1u) / KC * KC;
  let kbeg = klo + wg.z * per;
  let kend = min(kall, kbeg + per);
  let kk = j / TPK; // scoring: key kk of a chunk, slice sl
  let sl = j % TPK;
  let dg = j % NDG; // values: dim group dg of keys kgv VPT ..
  let kgv = j / NDG;
  let kcol = kvh * H4;
  // The first chunk's loads (rows past the split's last key read its last again: weight 0;
  // the token's own key slot is read and replaced by KOWN).
  var k = array<vec4<f32>, KPT>();
  var v = array<vec4<f32>, VPT>();
  for (var i = 0u; i < KPT; i++) { k[i] = key4(min(kbeg + kk, kend - 1u) * kvd4 + kcol + sl + TPK * i); }
  for (var u = 0u; u < VPT; u++) { v[u] = value4(min(kbeg + kgv * VPT + u, kend - 1u) * kvd4 + kcol + dg); }
  for (var i = j; i < G * H4; i += WGT) {
    let d = 4u * (i % H4);
    Q[i] = rope4(qkv4((h0 + i / H4) * HD + d), d, st.pos0) * p.scale;
  }
  rotate_own(kvh, j);
//@if !VCACHED
  for (var i = j; i < H4; i += WGT) { VOWN[i] = as_cached(qkv4(vnew(kvh) + 4u * i)); }
//@end
  var m = array<f32, G>();
  var lsum = array<f32, G>();
  var acc = array<vec4<f32>, G>();
  for (var g = 0u; g < G; g++) { m[g] = NEG; }
  workgroupBarrier();
  for (var kb = kbeg; kb < kend; kb += KC) {
    let key = kb + kk;
    let own = key == st.pos0;
    let valid = key < kend;
    var s = array<f32, G>();
    for (var i = 0u; i < KPT; i++) {
      let x = select(k[i], KOWN[sl + TPK * i], own);
      for (var g = 0u; g < G; g++) { s[g] += dot(Q[g * H4 + sl + TPK * i], x); }
    }
    // The next chunk's keys, in flight while this one is summed.
    let nb = kb + KC;
    if (nb < kend) {
      for (var i = 0u; i < KPT; i++) { k[i] = key4(min(nb + kk, kend - 1u) * kvd4 + kcol + sl + TPK * i); }
    }
    var corr = array<f32, G>();
    var w = array<f32, G>();
    for (var g = 0u; g < G; g++) {
      for (var x = 1u; x < TPK; x <<= 1u) { s[g] += subgroupShuffleXor(s[g], x); }
      s[g] = capped(s[g]);
    }
    if (OWNED) {
      // Each subgroup's own online softmax over its keys: no barrier.
      for (var g = 0u; g < G; g++) {
        let mn = max(m[g], subgroupMax(select(NEG, s[g], valid)));
        corr[g] = exp(m[g] - mn);
        m[g] = mn;
        w[g] = select(0.0, exp(s[g] - mn), valid);
        lsum[g] = lsum[g] * corr[g] + subgroupAdd(select(0.0, w[g], sl == 0u));
      }
    } else {
      for (var g = 0u; g < G; g++) {
        let mx = subgroupMax(select(NEG, s[g], valid));
        if (j % SG == 0u) { MX[g][j / SG] = mx; }
      }
      workgroupBarrier();
      for (var g = 0u; g < G; g++) {
        var cm = MX[g][0];
        for (var i = 1u; i < NSUB; i++) { cm = max(cm, MX[g][i]); }
        let mn = max(m[g], cm);
        corr[g] = exp(m[g] - mn);
        m[g] = mn;
        w[g] = select(0.0, exp(s[g] - mn), valid);
        if (sl == 0u) { S[g][kk] = w[g]; }
        let sw = subgroupAdd(select(0.0, w[g], sl == 0u));
        if (j % SG == 0u) { SW[g][j / SG] = sw; }
      }
      workgroupBarrier();
      for (var g = 0u; g < G; g++) {
        var cs = 0.0;
        for (var i = 0u; i < NSUB; i++) { cs += SW[g][i]; }
        lsum[g] = lsum[g] * corr[g] + cs;
      }
    }
    for (var g = 0u; g < G; g++) { acc[g] *= corr[g]; }
    for (var u = 0u; u < VPT; u++) {
      var x = v[u];
//@if !VCACHED
      // (The slot the load read: past the split's last key, its last, which can be the token's.)
      x = select(x, VOWN[dg], min(kb + kgv * VPT + u, kend - 1u) == st.pos0);
//@end
      if (OWNED) {
        // Key kgv VPT + u's weight, from the first of its TPK lanes (in this subgroup; lane
        // j % SG, as the writers of MX and SW take it: a 1-D workgroup's subgroups are runs of
        // SG consecutive threads).
        let lane = ((kgv * VPT + u) * TPK) % SG;
        for (var g = 0u; g < G; g++) { acc[g] += subgroupShuffle(w[g], lane) * x; }
      } else {
        for (var g = 0u; g < G; g++) { acc[g] += S[g][kgv * VPT + u] * x; }
      }
    }
    // The next chunk's values.
    if (nb < kend) {
      for (var u = 0u; u < VPT; u++) { v[u] = value4(min(nb + kgv * VPT + u, kend - 1u) * kvd4 + kcol + dg); }
    }
    if (!OWNED) { workgroupBarrier(); }
  }
  if (OWNED) {
    // The subgroups' maxima and sums, each subgroup's sums rescaled to the workgroup's max.
    for (var g = 0u; g < G; g++) {
      if (j % SG == 0u) {
        MX[g][j / SG] = m[g];
        SW[g][j / SG] = lsum[g];
      }
    }
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      var mw = NEG;
      for (var i = 0u; i < NSUB; i++) { mw = max(mw, MX[g][i]); }
      var lw = 0.0;
      for (var i = 0u; i < NSUB; i++) { lw += SW[g][i] * exp(MX[g][i] - mw); }
      acc[g] *= exp(m[g] - mw);
      m[g] = mw;
      lsum[g] = lw;
    }
  }
  // The key groups' sums, then this split's partial (or, unsplit, the output).
  for (var g = 0u; g < G; g++) { O[kgv * G + g][dg] = acc[g]; }
  workgroupBarrier();
  for (var i = j; i < G * NDG; i += WGT) {
    let g = i / NDG;
    let d = i % NDG;
    var a = vec4<f32>();
    for (var r = 0u; r < KGV; r++) { a += O[r * G + g][d]; }
    put_dims(kvh * (GQ / G) + wg.x, wg.z, nwg.z, h0, g, d, a, lsum[g]);
    if (d == 0u && nwg.z > 1u) {
      put_stats(kvh * (GQ / G) + wg.x, wg.z, g, m[g], lsum[g]);
    }
  }
  // The token's key (rotated) and value into the cache, by the workgroup whose split holds it
  // (the first of the KV head's).
  if (kbeg <= st.pos0 && st.pos0 < kend && wg.x == 0u) {
    store_own(kvh, j);
  }
  if (nwg.z > 1u) {
    merge(kvh * (GQ / G) + wg.x, h0, j, nwg.z);
  }
}
