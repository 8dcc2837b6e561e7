// attention_decode: attention.wgsl's maths for a batch of one token (decoding), shaped for
// latency instead of reuse: with one query row per head there is nothing to share a key tile
// with, and attention.wgsl's tile loop (a barrier-separated load, score, sum and softmax per 16
// keys) leaves a decode step waiting on memory several times per tile. Here each workgroup takes
// G of one KV head's GQ query heads and one key split (flash-decoding: partials merged by
// attention_combine(_wide).wgsl, as attention.wgsl writes them, or here, COMBINE below) and
// walks its keys KC (64 or 128: the workgroup's threads, a chunk) at a time in
// three steps:
//   1. thread j reads key j's row (HD / 4 vector loads, 16 in flight at a time) and scores it
//      against the workgroup's G query heads (q in workgroup memory);
//   2. each head's running max and sum are updated from the KC scores (online softmax,
//      FlashAttention, Dao et al. 2022; max and sum as trees across the threads), and thread j
//      turns its scores into weights;
//   3. the KC weighted value rows are added up by NDG x KG threads: thread j takes the 4 dims
//      4 (j % NDG) .. (of each head) of the KPG keys of key group j / NDG, 16 vector loads in
//      flight at a time (16 keys' value rows per wait on memory, not 1), and the KG groups'
//      sums are added in workgroup memory once, at the end.
// Composed with `const HD` (head dim, a multiple of 4), `GQ` (query heads per KV head), `G` (the
// workgroup's query heads: GQ / G workgroups share a KV head and each reads its keys and values,
// so that a short context's few chunks still make enough workgroups, each with less to do), `DPT`
// (4-dim groups per thread: HD / (4 KC) rounded up), `KG` (key groups, below), `SG` (subgroup size
// of step 2's reductions, 0: none), `KV16` (f16 cache: IEEE halves two per u32), `ROPE` and
// `VCACHED` (with ROPE: the value projection already wrote the token's value into its cache row,
// linear::Fuse::cache_row, so it is read from there and only the key is written), `KC` (keys
// a chunk, and the workgroup's threads: 64, or 128 where a split holds an even number of 64-key
// chunks, attention::decode_chunk), `PREFETCH` (step 3's first value rows are loaded before step
// 1, gpu::Tuning::attn_prefetch).
// With `ROPE`, rope_kv.wgsl's work for the token is fused in (attention::fuses_rope): q and k
// arrive unrotated; q is rotated as it is loaded, the token's own key and value come from qkv
// (k rotated by all threads into workgroup memory, where its thread scores it; its value is
// added once after the keys, with weight 0 in the loop), and the first workgroup (x = 0) of the
// split that holds the token writes them into the cache. This needs no ordering: the other
// workgroups of that split load the slot in step 1 only to discard it (the own key's score
// comes from KOWN, past-the-end keys are masked) and step 3 stops before it; no other split or
// KV head touches it. cs: rope_kv's cos/sin table.
// With `SG` (a subgroup size dividing KC, at least 2), step 2's max and sum are subgroup
// operations, then one exchange in workgroup memory, instead of log2(KC)-level trees.
// With `COMBINE` (and ROPE) the key splits are merged here (attention_decode_io.wgsl's `merge`).
// Bindings and the shared helpers: attention_decode_io.wgsl. Grid (GQ / G, n_kv, splits).
var<workgroup> Q: array<vec4<f32>, G * HD / 4u>;
var<workgroup> S: array<array<f32, KC>, G>; // scores, then softmax weights, of the KC keys
// KG key groups (composed: a power of two with KG x NDG <= KC) of KPG keys each share the KC
// threads, so the groups cover a chunk's KC keys exactly (with more than KC dim groups, one key
// group and DPT dim groups per thread).
const KPG: u32 = KC / KG;
var<workgroup> O: array<array<vec4<f32>, KC>, G>; // the trees of step 2 (x), the key groups' sums at the end
//@if ROPE
var<workgroup> OWN: array<f32, G>; // the token's own key's weights (ROPE)
//@end

@compute @workgroup_size(KC)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let kvh = wg.y;
  let j = l.x;
  let kvd = p.n_kv * HD;
  let h0 = kvh * GQ + wg.x * G;
  // This split's keys (whole chunks of KC, from the first in the sliding window).
  let kall = st.pos0 + 1u;
  let klo = first_key(st.pos0);
  let per = ((kall - klo + nwg.z - 1u) / nwg.z + KC - 1u) / KC * KC;
  let kbeg = klo + wg.z * per;
  let kend = min(kall, kbeg + per);
  for (var i = j; i < G * HD / 4u; i += KC) {
    let g = i / (HD / 4u);
    let d = 4u * (i % (HD / 4u));
    let qo = (h0 + g) * HD + d;
    Q[i] = rope4(qkv4(qo), d, st.pos0) * p.scale;
  }
  var m = array<f32, G>();
  var lsum = array<f32, G>();
  var acc = array<array<vec4<f32>, DPT>, G>();
  let kg = j / NDG;
  for (var g = 0u; g < G; g++) { m[g] = NEG; }
//@if ROPE
  rotate_own(kvh, j);
//@end
  workgroupBarrier();
  for (var kb = kbeg; kb < kend; kb += KC) {
    // The chunk's last key with a value row to read (step 3), and whether it has any.
    var last = kend - 1u - kb;
    var values = true;
//@if ROPE
    // The token's own key (the split's last, in its last chunk) is not in the cache yet: the
    // reads stop before its slot (whatever it holds, even a non-finite leftover, stays out of
    // the sums), and a chunk of that key alone reads no values.
    if (kend - 1u == st.pos0 && last < KC) {
      values = last > 0u;
      last = max(last, 1u) - 1u;
    }
//@end
    let k0 = min(kg, KG - 1u) * KPG;
    // (Groups stop at the split's last key: a short context reads no rows past it. Loads past
    // the group's keys read its last one again: the next chunk's rows can be the token's own
    // slot, whose leftover, NaN say, would turn a weight of 0 into NaN.)
    let top = min(last, k0 + KPG - 1u);
//@if PREFETCH
    // Step 3's first 16 value rows (of its first dims), loaded now: they do not depend on the
    // scores, so their wait on memory overlaps step 1's and 2's instead of following them.
    // (With a chunk of the own key alone they load its slot, and are not used.)
    var vpre = array<vec4<f32>, 16>();
    let vo0 = (kb * kvd + kvh * HD) / 4u + min(j % NDG, NDG - 1u);
    for (var u = 0u; u < 16u; u++) { vpre[u] = value4(vo0 + min(k0 + u, top) * (kvd / 4u)); }
//@end
    // 1. Key kb + j against each of the workgroup's heads.
    let key = kb + j;
    let kbase = min(key, kend - 1u) * (kvd / 4u) + kvh * (HD / 4u);
    // (16 loads in flight at a time: a loop of dependent loads waits on memory once per vector.)
    var s = array<f32, G>();
    for (var i = 0u; i < HD / 4u; i += 16u) {
      var k = array<vec4<f32>, 16>();
      for (var u = 0u; u < 16u; u++) { k[u] = key4(kbase + min(i + u, HD / 4u - 1u)); }
      for (var u = 0u; u < 16u; u++) {
        if (i + u < HD / 4u) {
          for (var g = 0u; g < G; g++) { s[g] += dot(Q[g * (HD / 4u) + i + u], k[u]); }
        }
      }
    }
//@if ROPE
    // The token's own key is not in the cache yet: its one thread scores it again from KOWN
    // (a branch once per chunk, not a compare per load).
    let own = key == st.pos0;
    if (own) {
      for (var g = 0u; g < G; g++) { s[g] = 0.0; }
      for (var i = 0u; i < HD / 4u; i++) {
        for (var g = 0u; g < G; g++) { s[g] += dot(Q[g * (HD / 4u) + i], KOWN[i]); }
      }
    }
//@end
    for (var g = 0u; g < G; g++) { s[g] = capped(s[g]); }
    // 2. The chunk's max per head (a tree over the threads' keys, in O's x), folded into each
    // head's state; key j's weights, and their sum (another tree). A loop over the KC scores
    // in every thread instead waits on workgroup memory KC times per head.
    // With subgroups (SG lanes, a 1-D workgroup split into runs of SG consecutive threads):
    // each subgroup's max and sum by subgroup operations, then the KC / SG of them in O.
    var chunk_max = array<f32, G>();
//@if SG
    for (var g = 0u; g < G; g++) {
      let mx = subgroupMax(select(NEG, s[g], key < kend));
      if (j % SG == 0u) { O[g][j / SG].x = mx; }
    }
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      chunk_max[g] = O[g][0].x;
      for (var i = 1u; i < KC / SG; i++) { chunk_max[g] = max(chunk_max[g], O[g][i].x); }
    }
//@end
//@if !SG
    for (var g = 0u; g < G; g++) { O[g][j].x = select(NEG, s[g], key < kend); }
    workgroupBarrier();
    for (var h = KC / 2u; h > 0u; h >>= 1u) {
      if (j < h) {
        for (var g = 0u; g < G; g++) { O[g][j].x = max(O[g][j].x, O[g][j + h].x); }
      }
      workgroupBarrier();
    }
    for (var g = 0u; g < G; g++) { chunk_max[g] = O[g][0].x; }
//@end
    var corr = array<f32, G>();
    var w = array<f32, G>();
    for (var g = 0u; g < G; g++) {
      let mx = max(m[g], chunk_max[g]);
      corr[g] = exp(m[g] - mx);
      m[g] = mx;
      w[g] = select(0.0, exp(s[g] - mx), key < kend);
      S[g][j] = w[g];
//@if ROPE
      // The own key's value comes from qkv after step 3's loop (weight 0 in it).
      if (own) { S[g][j] = 0.0; OWN[g] = w[g]; }
//@end
    }
    var chunk_sum = array<f32, G>();
//@if SG
    // (Slots KC / SG on: other threads may still read the maxima in the first ones.)
    for (var g = 0u; g < G; g++) {
      let sw = subgroupAdd(w[g]);
      if (j % SG == 0u) { O[g][KC / SG + j / SG].x = sw; }
    }
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      for (var i = 0u; i < KC / SG; i++) { chunk_sum[g] += O[g][KC / SG + i].x; }
    }
//@end
//@if !SG
    workgroupBarrier();
    for (var g = 0u; g < G; g++) { O[g][j].x = w[g]; }
    workgroupBarrier();
    for (var h = KC / 2u; h > 0u; h >>= 1u) {
      if (j < h) {
        for (var g = 0u; g < G; g++) { O[g][j].x += O[g][j + h].x; }
      }
      workgroupBarrier();
    }
    for (var g = 0u; g < G; g++) { chunk_sum[g] = O[g][0].x; }
//@end
    // 3. The weighted value rows into this thread's dims, 16 keys' loads in flight at a time (a
    // loop of dependent loads would wait on memory once per key). Keys past the split's end
    // weigh 0 and read a key of the group that was written (`top`, below).
    for (var g = 0u; g < G; g++) {
      lsum[g] = lsum[g] * corr[g] + chunk_sum[g];
      for (var t = 0u; t < DPT; t++) { acc[g][t] *= corr[g]; }
    }
    for (var t = 0u; t < DPT && values; t++) {
      let dg = min(j % NDG + KC * t, NDG - 1u);
      let vo = (kb * kvd + kvh * HD) / 4u + dg;
      for (var i = k0; i < k0 + KPG && i <= last; i += 16u) {
        var v = array<vec4<f32>, 16>();
//@if PREFETCH
        if (t == 0u && i == k0) {
          v = vpre;
        } else {
//@end
          for (var u = 0u; u < 16u; u++) {
            v[u] = value4(vo + min(i + u, top) * (kvd / 4u));
          }
//@if PREFETCH
        }
//@end
        for (var u = 0u; u < 16u; u++) {
          // Past the group's keys (KPG not a multiple of 16): weight 0.
          let in_group = i + u < k0 + KPG;
          for (var g = 0u; g < G; g++) { acc[g][t] += select(0.0, S[g][min(i + u, KC - 1u)], in_group) * v[u]; }
        }
      }
    }
    workgroupBarrier();
  }
//@if ROPE
  // The token's own value (the last key of the split that holds it), from qkv as the cache holds
  // it (with VCACHED from its cache row, where the value projection wrote it): key group 0 adds it.
  if (kbeg <= st.pos0 && st.pos0 < kend && kg == 0u) {
    for (var t = 0u; t < DPT; t++) {
      let v = own_value(kvh, min(j % NDG + KC * t, NDG - 1u));
      for (var g = 0u; g < G; g++) { acc[g][t] += OWN[g] * v; }
    }
  }
//@end
  // The key groups' sums: group 0's threads add the others'.
  for (var t = 0u; t < DPT; t++) {
    if (KG > 1u) {
      for (var g = 0u; g < G; g++) { O[g][j] = acc[g][t]; }
      workgroupBarrier();
      if (j < NDG) {
        for (var g = 0u; g < G; g++) {
          for (var k = 1u; k < KG; k++) { acc[g][t] += O[g][j + k * NDG]; }
        }
      }
      workgroupBarrier();
    }
  }
  for (var g = 0u; g < G; g++) {
    for (var t = 0u; t < DPT; t++) {
      let dg = j + KC * t;
      if (j < NDG && dg < NDG) {
        put_dims(kvh * (GQ / G) + wg.x, wg.z, nwg.z, h0, g, dg, acc[g][t], lsum[g]);
      }
    }
    if (j == 0u && nwg.z > 1u) {
      put_stats(kvh * (GQ / G) + wg.x, wg.z, g, m[g], lsum[g]);
    }
  }
//@if ROPE
  // The token's key (rotated) and value into the cache, by the workgroup whose split holds it
  // (the first of the KV head's).
  if (kbeg <= st.pos0 && st.pos0 < kend && wg.x == 0u) {
    store_own(kvh, j);
  }
//@end
//@if COMBINE
  if (nwg.z > 1u) {
    merge(kvh * (GQ / G) + wg.x, h0, j, nwg.z);
  }
//@end
}
