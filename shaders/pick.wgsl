// pick: the next token of one generation step, from the top-k kernel's candidates (topk.wgsl,
// larger logit first, equal logits by lower id), written where the next step's embedding reads
// its token id, into the block's ids and into the penalty's window.
// Greedy (g.greedy == 1): the first candidate. Sampling, in llama.cpp's order
// (src/llama-sampling.cpp: top_k -> top_p -> min_p -> temp -> dist):
//   top-p: the smallest prefix of the candidates whose softmax mass (temperature 1, over the
//          candidates) reaches top_p (all of them when top_p >= 1);
//   min-p: of those, the prefix whose logits are >= max + log(min_p) (p >= min_p * p_max);
//   temperature: softmax of logit / temperature over the kept ones;
//   draw: u in [0, 1) from a hash of (seed, position of the token whose logits these are), and
//          the first kept candidate whose cumulative probability exceeds u.
// `sample::reference_pick` is the same draw on the CPU. One invocation: at most 128 candidates.
// Bindings: 0 gen (sample::GenParams), 1 step {n_tokens, pos0}, 2 top-k out [k] of (id, f32 bits),
// 3 tokens [..] u32 (the embedding's input), 4 ids [slots] u32, 5 hist [window] u32.
@bind var<storage, read> top: array<vec2<u32>>;
@bind var<storage, read_write> tokens: array<u32>;
@bind var<storage, read_write> ids: array<u32>;
@bind var<storage, read_write> hist: array<u32>;

const NONE: u32 = 0xffffffffu;

// sample::mix32 (a 32-bit integer hash: lowbias32).
fn mix32(x: u32) -> u32 {
  var h = x;
  h ^= h >> 16u;
  h *= 0x7feb352du;
  h ^= h >> 15u;
  h *= 0x846ca68bu;
  h ^= h >> 16u;
  return h;
}

fn logit(j: u32) -> f32 {
  return bitcast<f32>(top[j].y);
}

@compute @workgroup_size(1)
fn main() {
  let pos = st.pos0 + st.n_tokens - 1u;
  let i = pos - g.first;
  var id = top[0].x;
  if (g.greedy == 0u) {
    var n = 0u;
    while (n < g.k && top[n].x != NONE) { n++; }
    let lmax = logit(0u);
    // (All NaN: no candidate; the draw below keeps the first entry, made token 0 after.)
    var keep = max(n, 1u);
    if (g.top_p < 1.0) {
      var sum = 0.0;
      for (var j = 0u; j < n; j++) { sum += exp(logit(j) - lmax); }
      var cum = 0.0;
      for (var j = 0u; j < n; j++) {
        cum += exp(logit(j) - lmax) / sum;
        if (cum >= g.top_p) {
          keep = j + 1u;
          break;
        }
      }
    }
    if (g.min_p > 0.0) {
      let lo = lmax + log(g.min_p);
      var m = 1u;
      for (var j = 1u; j < keep; j++) {
        if (logit(j) >= lo) { m = j + 1u; }
      }
      keep = m;
    }
    var total = 0.0;
    for (var j = 0u; j < keep; j++) { total += exp((logit(j) - lmax) / g.temperature); }
    let u = f32(mix32(mix32(g.seed ^ 0x9e3779b9u) + pos) >> 8u) / 16777216.0;
    var cum = 0.0;
    id = top[keep - 1u].x;
    for (var j = 0u; j < keep; j++) {
      cum += exp((logit(j) - lmax) / g.temperature) / total;
      if (cum > u) {
        id = top[j].x;
        break;
      }
    }
  }
  // All logits NaN: token 0, as topk::argmax and pick_greedy.wgsl give.
  if (id == NONE) { id = 0u; }
  tokens[0] = id;
  ids[i % g.slots] = id;
  if (g.window > 0u) { hist[(g.given + i) % g.window] = id; }
}
