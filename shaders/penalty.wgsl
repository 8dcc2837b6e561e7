// penalty: llama.cpp's repetition penalty (src/llama-sampling.cpp, llama_sampler_penalties),
// applied in place to the logits row of one generation step before its top-k: every distinct id
// among the last `window` ids of the sequence (the tokens given to generate, then the ids it
// picked) gets logit / penalty where the logit is positive, logit * penalty otherwise, once
// however often it occurs. The logits row is the forward pass's scratch, rewritten by the next
// step, so changing it in place leaves no trace in later forwards.
// One workgroup of 256 threads; entry s of the window is changed by the thread holding it only
// when no earlier entry holds the same id, so no two threads write one logit.
// Bindings: 0 gen (sample::GenParams), 1 step {n_tokens, pos0}, 2 hist [window] u32: the id at
// sequence index s in hist[s % window], 3 logits [vocab] f32.
@bind var<storage, read> hist: array<u32>;
@bind var<storage, read_write> logits: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) l: vec3u) {
  // Ids in the sequence before this step's pick: the given tokens and the picks so far.
  let len = g.given + (st.pos0 + st.n_tokens - 1u - g.first);
  var lo = 0u;
  if (len > g.window) { lo = len - g.window; }
  for (var s = lo + l.x; s < len; s += 256u) {
    let id = hist[s % g.window];
    var first = true;
    for (var t = lo; t < s; t++) {
      if (hist[t % g.window] == id) {
        first = false;
        break;
      }
    }
    if (first) {
      let x = logits[id];
      logits[id] = select(x * g.penalty, x / g.penalty, x > 0.0);
    }
  }
}
