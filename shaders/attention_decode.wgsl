// attention_decode: attention.wgsl's maths for a batch of one token (decoding), shaped for
// latency instead of reuse: with one query row per head there is nothing to share a key tile
// with, and attention.wgsl's tile loop (a barrier-separated load, score, sum and softmax per 16
// keys) leaves a decode step waiting on memory several times per tile. Here each workgroup takes
// one KV head and one key split (flash-decoding: partials merged by attention_combine.wgsl, as
// attention.wgsl writes them) and walks its keys 64 at a time in three steps:
//   1. thread j reads key j's row (HD / 4 vector loads, all in flight at once) and scores it
//      against the G query heads of the group (q in workgroup memory);
//   2. each head's running max and sum are updated from the 64 scores (online softmax,
//      FlashAttention, Dao et al. 2022), and thread j turns its scores into weights;
//   3. thread d adds the 64 weighted value rows into its dims (d, d + 64, ... of each head),
//      loads side by side across the threads.
// Composed with `const HD` (head dim, a multiple of 4), `G` (query heads per KV head), `DPT`
// (dims per thread: HD / 64 rounded up) and `KV16` (f16 cache: IEEE halves two per u32).
// Bindings as attention.wgsl's. Grid (1, n_kv, splits).
struct P { n_heads: u32, n_kv: u32, q_stride: u32, o_stride: u32, scale: f32, _a: u32, _b: u32, _c: u32 };
struct Step { n_tokens: u32, pos0: u32, splits: u32, _b: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> st: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
//@if KV16
@group(0) @binding(3) var<storage, read> kc: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> vc: array<u32>;
//@end
//@if !KV16
@group(0) @binding(3) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
//@end
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> partials: array<f32>;

const NEG: f32 = -3.0e38; // a masked score
var<workgroup> Q: array<vec4<f32>, G * HD / 4u>;
var<workgroup> S: array<array<f32, 64>, G>; // scores, then softmax weights, of the 64 keys

// Key-cache elements 4i .. 4i + 4.
fn key4(i: u32) -> vec4<f32> {
//@if KV16
  let w = kc[i];
  return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
//@end
//@if !KV16
  return kc[i];
//@end
}

// Element e of the value cache.
fn value(e: u32) -> f32 {
//@if KV16
  return unpack2x16float(vc[e >> 1u])[e & 1u];
//@end
//@if !KV16
  return vc[e];
//@end
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let kvh = wg.y;
  let j = l.x;
  let kvd = p.n_kv * HD;
  let h0 = kvh * G;
  // This split's keys (whole chunks of 64).
  let kall = st.pos0 + 1u;
  let per = ((kall + nwg.z - 1u) / nwg.z + 63u) / 64u * 64u;
  let kbeg = wg.z * per;
  let kend = min(kall, kbeg + per);
  for (var i = j; i < G * HD / 4u; i += 64u) {
    let g = i / (HD / 4u);
    let d = 4u * (i % (HD / 4u));
    let qo = (h0 + g) * HD + d;
    Q[i] = vec4<f32>(qkv[qo], qkv[qo + 1u], qkv[qo + 2u], qkv[qo + 3u]) * p.scale;
  }
  var m: array<f32, G>;
  var lsum: array<f32, G>;
  var acc: array<array<f32, DPT>, G>;
  for (var g = 0u; g < G; g++) { m[g] = NEG; }
  workgroupBarrier();
  for (var kb = kbeg; kb < kend; kb += 64u) {
    // 1. Key kb + j against every head of the group.
    let key = kb + j;
    let kbase = min(key, kend - 1u) * (kvd / 4u) + kvh * (HD / 4u);
    var s: array<f32, G>;
    for (var i = 0u; i < HD / 4u; i++) {
      let k = key4(kbase + i);
      for (var g = 0u; g < G; g++) { s[g] += dot(Q[g * (HD / 4u) + i], k); }
    }
    for (var g = 0u; g < G; g++) { S[g][j] = select(NEG, s[g], key < kend); }
    workgroupBarrier();
    // 2. Every thread folds the chunk's max into each head's state; thread j writes key j's
    // weight per head, then every thread adds the chunk's weights to its sums.
    var corr: array<f32, G>;
    var mt: array<f32, G>;
    for (var g = 0u; g < G; g++) {
      var mx = m[g];
      for (var i = 0u; i < 64u; i++) { mx = max(mx, S[g][i]); }
      mt[g] = mx;
      corr[g] = exp(m[g] - mx);
      m[g] = mx;
    }
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      S[g][j] = select(0.0, exp(S[g][j] - mt[g]), key < kend);
    }
    workgroupBarrier();
    // 3. The weighted value rows into this thread's dims, 8 keys' loads in flight at a time (a
    // loop of dependent loads would wait on memory 64 times). Keys past the split's end read
    // its last key and weigh 0.
    for (var g = 0u; g < G; g++) {
      var z = 0.0;
      for (var i = 0u; i < 64u; i++) { z += S[g][i]; }
      lsum[g] = lsum[g] * corr[g] + z;
      for (var t = 0u; t < DPT; t++) { acc[g][t] *= corr[g]; }
    }
    let last = kend - 1u - kb;
    for (var t = 0u; t < DPT; t++) {
      let d = min(j + 64u * t, HD - 1u);
      let vo = kb * kvd + kvh * HD + d;
      for (var i = 0u; i < 64u; i += 8u) {
        var v: array<f32, 8>;
        for (var u = 0u; u < 8u; u++) { v[u] = value(vo + min(i + u, last) * kvd); }
        for (var u = 0u; u < 8u; u++) {
          for (var g = 0u; g < G; g++) { acc[g][t] += S[g][i + u] * v[u]; }
        }
      }
    }
    workgroupBarrier();
  }
  for (var g = 0u; g < G; g++) {
    let h = h0 + g;
    let base = (wg.z * p.n_heads + h) * (HD + 2u);
    for (var t = 0u; t < DPT; t++) {
      let d = j + 64u * t;
      if (d < HD) {
        if (nwg.z == 1u) {
          o[h * HD + d] = acc[g][t] / lsum[g];
        } else {
          partials[base + d] = acc[g][t];
        }
      }
    }
    if (j == 0u && nwg.z > 1u) {
      partials[base + HD] = m[g];
      partials[base + HD + 1u] = lsum[g];
    }
  }
}
