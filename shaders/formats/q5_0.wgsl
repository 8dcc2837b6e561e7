// formats/q5_0.wgsl: GGML Q5_0 (ggml-common.h block_q5_0): 32 weights in 22 bytes,
// { f16 d; u8 qh[4]; u8 qs[16] }; weight j < 16 is the low nibble of qs[j] plus bit j of qh
// (as the fifth bit), weight j + 16 the high nibble plus bit j + 16; value (q - 16) * d
// (ggml-quants.c dequantize_row_q5_0). Blocks alternate between word aligned and 2 bytes in
// (`ld`). (Interface: common.wgsl.)

// (dq4s: common.wgsl's, through this.)
fn dq4a(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let bb = rb + 22u * (cb >> 5u);
  return (nib5(ld2(bb + 6u, o & 15u), ld(bb + 2u), o) - 16.0) * half(h16(bb));
}

// Weights cb .. cb + 32 (a block) of the row starting at byte rb dotted with x (xs: the sum of
// x): d (q . x - 16 xs) (formats/common.wgsl's nibdot).
fn bdot(rb: u32, cb: u32, x: array<vec4<f32>, 8>, xs: f32) -> f32 {
  let bb = rb + 22u * (cb >> 5u);
  let q = vec4<u32>(ld2(bb + 6u, 0u), ld2(bb + 6u, 4u), ld2(bb + 6u, 8u), ld2(bb + 6u, 12u));
  return half(h16(bb)) * (nibdot(q, ld(bb + 2u), x) - 16.0 * xs);
}
