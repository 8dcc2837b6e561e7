// head_norm: RMSNorm of each attention head of q and k in place, before RoPE (Qwen3 and Gemma 3's
// `attn_q_norm` / `attn_k_norm`; llama.cpp's `ggml_rms_norm` over the head dimension). A token
// row holds n_q query heads then the key heads, `hd` values each from the row's start: head h
// takes weights wq (h < n_q) or wk, `hd` values. One workgroup of 64 per (head, token).
// Grid (n_q + n_kv heads, n_tokens).
struct P { hd: u32, n_q: u32, stride: u32, eps: f32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> wq: array<f32>;
@bind var<storage, read> wk: array<f32>;
@bind var<storage, read_write> y: array<f32>;

var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let h = wg.x;
  let o = min(wg.y, st.n_tokens - 1u) * p.stride + h * p.hd;
  var s = 0.0;
  for (var i = l.x; i < p.hd; i += 64u) { s += y[o + i] * y[o + i]; }
  part[l.x] = s;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  let inv = 1.0 / sqrt(part[0] / f32(p.hd) + p.eps);
  for (var i = l.x; i < p.hd; i += 64u) {
    let w = select(wk[i], wq[i], h < p.n_q);
    y[o + i] = y[o + i] * inv * w;
  }
}
