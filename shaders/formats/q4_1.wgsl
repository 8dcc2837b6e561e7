// formats/q4_1.wgsl: GGML Q4_1 (ggml-common.h block_q4_1): 32 weights in 20 bytes,
// { f16 d, m; u8 qs[16] }; weight j < 16 is the low nibble of qs[j], weight j + 16 the high one;
// value q * d + m (ggml-quants.c dequantize_row_q4_1). Blocks are word aligned.
// (Interface: common.wgsl.)

// (dq4s: common.wgsl's, through this.)
fn dq4a(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let w0 = (rb >> 2u) + 5u * (cb >> 5u);
  let dm = unpack2x16float(W[w0]);
  return nib5(W[w0 + 1u + ((o & 15u) >> 2u)], 0u, o) * dm.x + dm.y;
}

// Weights cb .. cb + 32 (a block) of the row starting at byte rb dotted with x (xs: the sum of
// x): d (q . x) + m xs (formats/common.wgsl's nibdot).
fn bdot(rb: u32, cb: u32, x: array<vec4<f32>, 8>, xs: f32) -> f32 {
  let w0 = (rb >> 2u) + 5u * (cb >> 5u);
  let dm = unpack2x16float(W[w0]);
  let q = vec4<u32>(W[w0 + 1u], W[w0 + 2u], W[w0 + 3u], W[w0 + 4u]);
  return dm.x * nibdot(q, 0u, x) + dm.y * xs;
}
