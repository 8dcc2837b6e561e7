// attention_params.wgsl: the uniform `p` of the attention kernels (attention::AttentionParams):
// query and KV heads, floats per token row of the fused [q | k | v] input and of the output,
// the score scale (1 / sqrt(head dim) unless the family sets its own), RoPE pairs rotated per
// head (read where RoPE is fused in: attention_decode_io.wgsl), Gemma 2's score soft-cap (0:
// none) and the layer's sliding window (0: none). Composed by kernels::compose before the
// kernel's own file.
struct Attn { n_heads: u32, n_kv: u32, q_stride: u32, o_stride: u32, scale: f32, rot: u32, softcap: f32, window: u32 };

// A scaled score after the soft-cap c tanh(s / c) (Gemma 2; llama.cpp's attn_soft_cap). tanh's
// argument is clamped: some drivers' tanh gives NaN for large ones, and tanh(15) is 1 in f32.
fn capped(s: f32) -> f32 {
  if (p.softcap > 0.0) { return p.softcap * tanh(clamp(s / p.softcap, -15.0, 15.0)); }
  return s;
}

// The first key position a query at `qpos` sees: 0, or on a sliding-window layer the window's
// first (llama.cpp's LLAMA_SWA_TYPE_STANDARD: key t is visible from p when p - t < window).
fn first_key(qpos: u32) -> u32 {
  if (p.window > 0u && qpos >= p.window) { return qpos + 1u - p.window; }
  return 0u;
}
