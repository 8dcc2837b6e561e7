// The generation step's parameters (`sample::GenParams`) and its step uniform, shared by
// penalty.wgsl and pick.wgsl (kernels::compose puts this first). `first`: the position of the
// token whose logits give the call's first pick, so a step's pick index is
// pos0 + n_tokens - 1 - first; `given`: the tokens given to the call; `window`: the penalty's
// window (0: none); `slots`: entries of the ids ring (two blocks); `vocab`: logits in a row.
struct Gen {
  greedy: u32, k: u32, seed: u32, first: u32,
  top_p: f32, min_p: f32, temperature: f32, penalty: f32,
  window: u32, given: u32, slots: u32, vocab: u32,
};
@bind var<uniform> g: Gen;
@bind var<uniform> st: Step;
