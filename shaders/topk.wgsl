// topk: the k largest logits and their token ids, on the GPU, so that a sampler reads back 8k
// bytes instead of the whole vocabulary. Order: larger logit first, equal logits by lower id
// (a stable sort of the logits, descending); NaN logits are never picked.
// Two stages, one dispatch each, 256 threads per workgroup:
//   stage 1: workgroup w takes logits [w * SLICE, (w + 1) * SLICE) and writes its own top k to
//            cand[w * k ..] (a slice of fewer than k logits pads with empty entries);
//   stage 2: one workgroup takes the n = slices * k candidates and writes the top k to out.
// Each of the k rounds picks the best entry strictly after the last pick in that order (an
// argmax over the threads' candidates in workgroup memory), so nothing is ever removed or sorted.
// Bindings: 0 {n, k, stage}, 1 logits [n], 2 candidates [slices * k] of (id, f32 bits),
// 3 out [k] of (id, f32 bits). Empty entries have id 0xffffffff.
struct P { n: u32, k: u32, stage: u32, _p: u32 };
@bind var<uniform> p: P;
@bind var<storage, read> logits: array<f32>;
@bind var<storage, read_write> cand: array<vec2<u32>>;
@bind var<storage, read_write> out: array<vec2<u32>>;

const SLICE: u32 = 1024u;
const NONE: u32 = 0xffffffffu;
var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;

// Whether (v, i) comes before (w, j): a larger value, or an equal one with a lower id; an empty
// entry comes after everything.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
  if (i == NONE) { return false; }
  if (j == NONE) { return true; }
  return v > w || (v == w && i < j);
}

struct Entry { v: f32, id: u32 };

// Entry e of this stage's input.
fn entry(e: u32) -> Entry {
  if (p.stage == 1u) { return Entry(logits[e], e); }
  let c = cand[e];
  return Entry(bitcast<f32>(c.y), c.x);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  var lo = 0u;
  var hi = p.n;
  if (p.stage == 1u) {
    lo = wg.x * SLICE;
    hi = min(p.n, lo + SLICE);
  }
  var last_v = 0.0;
  var last_i = NONE; // none yet: every entry is eligible
  for (var r = 0u; r < p.k; r++) {
    var bv = 0.0;
    var bi = NONE;
    for (var e = lo + l.x; e < hi; e += 256u) {
      let x = entry(e);
      let eligible = last_i == NONE || before(last_v, last_i, x.v, x.id);
      // `x.v == x.v` skips NaN.
      if (eligible && x.v == x.v && before(x.v, x.id, bv, bi)) {
        bv = x.v;
        bi = x.id;
      }
    }
    best_v[l.x] = bv;
    best_i[l.x] = bi;
    workgroupBarrier();
    for (var h = 128u; h > 0u; h >>= 1u) {
      if (l.x < h && before(best_v[l.x + h], best_i[l.x + h], best_v[l.x], best_i[l.x])) {
        best_v[l.x] = best_v[l.x + h];
        best_i[l.x] = best_i[l.x + h];
      }
      workgroupBarrier();
    }
    // The pick, the same in every thread (a uniform value: the loop may end on it).
    let i = workgroupUniformLoad(&best_i[0]);
    let v = best_v[0];
    workgroupBarrier();
    if (l.x == 0u) {
      let o = vec2<u32>(i, bitcast<u32>(v));
      if (p.stage == 1u) { cand[wg.x * p.k + r] = o; } else { out[r] = o; }
    }
    if (i == NONE) {
      // Nothing left: the remaining picks stay empty.
      for (var q = r + 1u + l.x; q < p.k; q += 256u) {
        if (p.stage == 1u) { cand[wg.x * p.k + q] = vec2<u32>(NONE, 0u); } else { out[q] = vec2<u32>(NONE, 0u); }
      }
      break;
    }
    last_v = v;
    last_i = i;
  }
}
