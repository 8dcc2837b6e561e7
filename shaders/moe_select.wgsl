// moe_select: router top-k for a Mixtral-style MoE (ember's moe_ffn_f32_cpu; llama.cpp
// llm_build_moe_ffn with softmax-after-top-k): pick the k largest router logits, ties to the
// lower expert index; order the picks by ascending expert index; gates = softmax over the k
// picked logits. Bindings: 0 {E, k}, 1 r [E] router logits, 2 sel [k] u32, 3 gate [k] f32.
// A single invocation: E <= 256, k <= 16 (checked at load).
struct P { E: u32, k: u32, _a: u32, _b: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> r: array<f32>;
@group(0) @binding(2) var<storage, read_write> sel: array<u32>;
@group(0) @binding(3) var<storage, read_write> gate: array<f32>;

@compute @workgroup_size(1)
fn main() {
  var taken: array<bool, 256>;
  var pick: array<u32, 16>;
  for (var j = 0u; j < p.k; j++) {
    var best = 0xffffffffu;
    for (var e = 0u; e < p.E; e++) {
      if (!taken[e] && (best == 0xffffffffu || r[e] > r[best])) { best = e; }
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
  for (var j = 0u; j < p.k; j++) { mx = max(mx, r[pick[j]]); }
  var z = 0.0;
  for (var j = 0u; j < p.k; j++) { z += exp(r[pick[j]] - mx); }
  for (var j = 0u; j < p.k; j++) { sel[j] = pick[j]; gate[j] = exp(r[pick[j]] - mx) / z; }
}
