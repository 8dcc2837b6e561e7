// moe_select: router top-k for a Mixtral-style MoE, per token (ember's moe_ffn_f32_cpu; llama.cpp
// llm_build_moe_ffn with softmax-after-top-k): pick the k largest router logits, ties to the
// lower expert index; order the picks by ascending expert index; gates = softmax over the k
// picked logits. Bindings: 0 {E, k}, 1 step {n_tokens}, 2 r [tokens][E] router logits,
// 3 sel [tokens][k] u32, 4 gate [tokens][k] f32. One invocation per token: E <= 256, k <= 16
// (checked at load).
struct P { E: u32, k: u32, _a: u32, _b: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> r: array<f32>;
@bind var<storage, read_write> sel: array<u32>;
@bind var<storage, read_write> gate: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x >= st.n_tokens) { return; }
  let ro = g.x * p.E;
  var taken = array<bool, 256>();
  var pick = array<u32, 16>();
  for (var j = 0u; j < p.k; j++) {
    var best = 0xffffffffu;
    for (var e = 0u; e < p.E; e++) {
      if (!taken[e] && (best == 0xffffffffu || r[ro + e] > r[ro + best])) { best = e; }
    }
    taken[best] = true;
    pick[j] = best;
  }
  for (var a = 1u; a < p.k; a++) {
    let v = pick[a];
    var b = a;
    while (b > 0u && pick[b - 1u] > v) { pick[b] = pick[b - 1u]; b--; }
    pick[b] = v;
  }
  var mx = -3.4e38;
  for (var j = 0u; j < p.k; j++) { mx = max(mx, r[ro + pick[j]]); }
  var z = 0.0;
  for (var j = 0u; j < p.k; j++) { z += exp(r[ro + pick[j]] - mx); }
  for (var j = 0u; j < p.k; j++) {
    sel[g.x * p.k + j] = pick[j];
    gate[g.x * p.k + j] = exp(r[ro + pick[j]] - mx) / z;
  }
}
