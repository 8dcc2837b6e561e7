// pick_greedy: the next token of a greedy generation step on a CPU adapter: the largest logit of
// the step's row (the lower id of equal ones; NaN never), as topk.wgsl at k = 1 then pick.wgsl
// give it, written where pick.wgsl writes (the next step's token id, the block's ids, the
// penalty's window). In one dispatch of one small workgroup: lavapipe and SwiftShader spend
// more on the top-k kernel's 256-thread rounds and on pick.wgsl's untaken sampling loops than
// on a step's forward pass on small models. GPUs keep the top-k kernel (many workgroups).
// Bindings as pick.wgsl's, but 2: logits [vocab] f32 (the step's row).
@bind var<storage, read> logits: array<f32>;
@bind var<storage, read_write> tokens: array<u32>;
@bind var<storage, read_write> ids: array<u32>;
@bind var<storage, read_write> hist: array<u32>;

const WG: u32 = 64u;
const NONE: u32 = 0xffffffffu;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// Whether (v, i) comes before (w, j): a larger value, or an equal one with a lower id; NaN and
// the empty entry after everything.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
  if (i == NONE || v != v) { return false; }
  if (j == NONE || w != w) { return true; }
  return v > w || (v == w && i < j);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32) {
  var v = 0.0;
  var i = NONE;
  for (var e = li; e < g.vocab; e += WG) {
    let x = logits[e];
    if (before(x, e, v, i)) {
      v = x;
      i = e;
    }
  }
  best_v[li] = v;
  best_i[li] = i;
  for (var half = WG / 2u; half > 0u; half /= 2u) {
    workgroupBarrier();
    if (li < half && before(best_v[li + half], best_i[li + half], best_v[li], best_i[li])) {
      best_v[li] = best_v[li + half];
      best_i[li] = best_i[li + half];
    }
  }
  if (li == 0u) {
    // (All NaN: token 0, as topk::argmax gives.)
    let id = select(best_i[0], 0u, best_i[0] == NONE);
    let s = st.pos0 + st.n_tokens - 1u - g.first;
    tokens[0] = id;
    ids[s % g.slots] = id;
    if (g.window > 0u) { hist[(g.given + s) % g.window] = id; }
  }
}
