// formats/q4_0.wgsl: GGML Q4_0 (ggml-common.h block_q4_0): 32 weights in 18 bytes,
// { f16 d; u8 qs[16] }; weight j < 16 is the low nibble of qs[j], weight j + 16 the high one;
// value (q - 8) * d (ggml-quants.c dequantize_row_q4_0). 18-byte blocks alternate between word
// aligned and 2 bytes in (`ld`). (Interface: common.wgsl.)

// (dq4s: common.wgsl's, through this.)
fn dq4a(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let bb = rb + 18u * (cb >> 5u);
  return (nib5(ld2(bb + 2u, o & 15u), 0u, o) - 8.0) * half(h16(bb));
}

// Weights cb .. cb + 32 (a block) of the row starting at byte rb dotted with x (xs: the sum of
// x): d (q . x - 8 xs) (formats/common.wgsl's nibdot).
fn bdot(rb: u32, cb: u32, x: array<vec4<f32>, 8>, xs: f32) -> f32 {
  let bb = rb + 18u * (cb >> 5u);
  let q = vec4<u32>(ld2(bb + 2u, 0u), ld2(bb + 2u, 4u), ld2(bb + 2u, 8u), ld2(bb + 2u, 12u));
  return half(h16(bb)) * (nibdot(q, 0u, x) - 8.0 * xs);
}
