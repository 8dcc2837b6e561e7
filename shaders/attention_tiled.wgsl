// attention_tiled: causal GQA softmax attention of a batch of tokens (positions pos0 .. pos0 + n)
// against the KV cache (positions 0 .. pos0 + n, the batch's keys already written by rope_kv),
// the maths of attention.wgsl (FlashAttention's online softmax, Dao et al. 2022) blocked for
// prefill as a matrix product is: a workgroup takes BQ = 64 query rows (the (token, query head)
// pairs of one KV head) and walks the keys in tiles of BKV; each thread computes a 4 x KPT block
// of scores (4 rows, keys kg + 8 j) and then a 4-row block of the output (dims 4 (kg + 8 i) ..),
// so that each value read from workgroup memory feeds 4 or more FMAs, where attention.wgsl's
// threads share one row. Per tile: the keys and values into workgroup memory; the scores into S;
// one thread per row takes the row's new maximum, its probabilities (in place) and its sum; the
// outputs are rescaled and the probabilities times the values added.
// Composed with `const HD` (head dim), `HD4` (vec4s per head: HD / 4 rounded up), `BKV` (keys per
// tile, a multiple of 8) and `KV16` (`//@if KV16`: the cache holds IEEE halves, two per u32).
// Bindings as attention.wgsl's 0 to 5 (no key splits: batches of more than SPLIT_MAX_TOKENS).
// Grid (rows / 64 rounded up, n_kv). With `Q4` (HD a multiple of 4) q is read as vec4s.
@bind var<uniform> p: Attn;
@bind var<uniform> st: Step;
//@if Q4
@bind var<storage, read> qkv: array<vec4<f32>>;
//@end
//@if !Q4
@bind var<storage, read> qkv: array<f32>;
//@end
@bind var<storage, read> kc: array<KvWord>;
@bind var<storage, read> vc: array<KvWord>;
@bind var<storage, read_write> o: array<f32>;

const BQ: u32 = 64u;
const KPT: u32 = BKV / 8u; // keys per thread (score phase)
const CPT: u32 = (HD4 + 7u) / 8u; // vec4s of a row per thread (output phase)
const KS: u32 = HD4 + 1u; // key tile row stride: rows on distinct banks
const SS: u32 = BKV + 1u; // score row stride, likewise
const NEG: f32 = -3.0e38; // a masked score
var<workgroup> Kt: array<vec4<f32>, BKV * KS>;
var<workgroup> Vt: array<vec4<f32>, BKV * HD4>;
var<workgroup> S: array<f32, BQ * SS>; // [row][key]: scores, then probabilities
var<workgroup> R: array<f32, BQ>; // per row: this tile's rescale factor; at the end, the sum

// Dims 4c .. 4c + 4 of cache row `key` (zero past the head).
fn cache4(key: u32, kvh: u32, c: u32) -> array<vec4<f32>, 2> {
  var k = vec4<f32>(0.0);
  var v = vec4<f32>(0.0);
  let kvd = p.n_kv * HD;
  for (var e = 0u; e < 4u; e += 2u) {
    let d = 4u * c + e;
    //@if KV16
    // HD is even (KV16 needs it): a pair never straddles the head's end.
    if (d < HD) {
      let src = (key * kvd + kvh * HD + d) / 2u;
      let kp = unpack2x16float(kc[src]);
      let vp = unpack2x16float(vc[src]);
      k[e] = kp.x;
      k[e + 1u] = kp.y;
      v[e] = vp.x;
      v[e + 1u] = vp.y;
    }
    //@end
    //@if !KV16
    for (var f = 0u; f < 2u; f++) {
      if (d + f < HD) {
        let src = key * kvd + kvh * HD + d + f;
        k[e + f] = kc[src];
        v[e + f] = vc[src];
      }
    }
    //@end
  }
  return array<vec4<f32>, 2>(k, v);
}

// Dims 4c .. 4c + 4 of token t's query head h in qkv (zero past the head).
fn q4(t: u32, h: u32, c: u32) -> vec4<f32> {
  //@if Q4
  return qkv[(t * p.q_stride + h * HD) / 4u + c];
  //@end
  //@if !Q4
  let qo = t * p.q_stride + h * HD + 4u * c;
  var q = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (4u * c + e < HD) { q[e] = qkv[qo + e]; }
  }
  return q;
  //@end
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let g = p.n_heads / p.n_kv;
  let kvh = wg.y;
  let rows = st.n_tokens * g;
  let rg = li / 8u; // this thread's rows 4 rg .. 4 rg + 4 of the workgroup's
  let kg = li % 8u; // and its keys kg + 8 j, or output vec4s kg + 8 i
  // Its rows' tokens and heads (idle rows mirror the last row).
  var tok = array<u32, 4>();
  var head = array<u32, 4>();
  for (var r = 0u; r < 4u; r++) {
    let row = min(wg.x * BQ + 4u * rg + r, rows - 1u);
    tok[r] = row / g;
    head[r] = kvh * g + row % g;
  }
  // Keys this workgroup needs: up to its last row's position.
  let kend = st.pos0 + (min(wg.x * BQ + BQ, rows) - 1u) / g + 1u;
  // Thread li < 64 keeps the softmax state of row li.
  var m = NEG;
  var lsum = 0.0;
  var acc = array<vec4<f32>, 4u * CPT>();
  // From the tile of the first key its first row sees (a sliding window's).
  for (var kb = first_key(st.pos0 + wg.x * BQ / g) / BKV * BKV; kb < kend; kb += BKV) {
    for (var i = li; i < BKV * HD4; i += 128u) {
      let j = i / HD4;
      let c = i % HD4;
      var kv = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
      if (kb + j < kend) { kv = cache4(kb + j, kvh, c); }
      Kt[j * KS + c] = kv[0];
      Vt[j * HD4 + c] = kv[1];
    }
    workgroupBarrier();
    // Scores: 4 rows x KPT keys, q read through the cache (the 8 threads of a row group share it).
    var s = array<f32, 4u * KPT>();
    for (var c = 0u; c < HD4; c++) {
      var k = array<vec4<f32>, KPT>();
      for (var j = 0u; j < KPT; j++) { k[j] = Kt[(kg + 8u * j) * KS + c]; }
      for (var r = 0u; r < 4u; r++) {
        let q = q4(tok[r], head[r], c);
        for (var j = 0u; j < KPT; j++) { s[r * KPT + j] += dot(q, k[j]); }
      }
    }
    for (var r = 0u; r < 4u; r++) {
      let qpos = st.pos0 + tok[r];
      for (var j = 0u; j < KPT; j++) {
        let key = kb + kg + 8u * j;
        S[(4u * rg + r) * SS + kg + 8u * j] = select(NEG, capped(s[r * KPT + j] * p.scale), key <= qpos && key >= first_key(qpos) && key < kend);
      }
    }
    workgroupBarrier();
    // Row li's softmax state: the new maximum, the probabilities in place, the sum.
    if (li < BQ) {
      var mt = m;
      for (var j = 0u; j < BKV; j++) { mt = max(mt, S[li * SS + j]); }
      let corr = exp(m - mt);
      var sum = 0.0;
      for (var j = 0u; j < BKV; j++) {
        let sj = S[li * SS + j];
        let pj = select(0.0, exp(sj - mt), sj > 0.5 * NEG);
        S[li * SS + j] = pj;
        sum += pj;
      }
      lsum = lsum * corr + sum;
      m = mt;
      R[li] = corr;
    }
    workgroupBarrier();
    // Outputs: rescaled, plus the probabilities times the values.
    for (var r = 0u; r < 4u; r++) {
      let corr = R[4u * rg + r];
      for (var i = 0u; i < CPT; i++) { acc[r * CPT + i] *= corr; }
    }
    for (var j = 0u; j < BKV; j++) {
      var v = array<vec4<f32>, CPT>();
      for (var i = 0u; i < CPT; i++) { v[i] = Vt[j * HD4 + min(kg + 8u * i, HD4 - 1u)]; }
      for (var r = 0u; r < 4u; r++) {
        let pr = S[(4u * rg + r) * SS + j];
        for (var i = 0u; i < CPT; i++) { acc[r * CPT + i] += pr * v[i]; }
      }
    }
    workgroupBarrier();
  }
  if (li < BQ) { R[li] = lsum; }
  workgroupBarrier();
  for (var r = 0u; r < 4u; r++) {
    let lr = 4u * rg + r;
    if (wg.x * BQ + lr >= rows) { continue; }
    let oo = tok[r] * p.o_stride + head[r] * HD;
    let inv = 1.0 / R[lr];
    for (var i = 0u; i < CPT; i++) {
      let c = kg + 8u * i;
      if (c >= HD4) { continue; }
      let y = acc[r * CPT + i] * inv;
      for (var e = 0u; e < 4u; e++) {
        if (4u * c + e < HD) { o[oo + 4u * c + e] = y[e]; }
      }
    }
  }
}
