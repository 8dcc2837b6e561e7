// formats/q5_k.wgsl: GGML Q5_K (ggml-common.h block_q5_K): 256 weights in 176 bytes,
// { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }. As Q4_K (chunk c < 4 reads
// qs[32c .. 32c + 32], low nibbles then high nibbles, scale/min pairs 2c and 2c + 1), plus a
// fifth bit (value 16) from qh[l]: bit 2c for weight 64c + l, bit 2c + 1 for 64c + 32 + l;
// value (d * sc) * q - dmin * m (ggml-quants.c dequantize_row_q5_K). Blocks are word aligned.
// (Interface: common.wgsl.)

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let w0 = (rb >> 2u) + 44u * (cb >> 8u);
  let e = cb & 255u;
  let s = e >> 5u;
  let l4 = ((e & 31u) + o) >> 2u;
  let dm = k4_scale(w0, s);
  let lo = bytes4(W[w0 + 12u + 8u * (e >> 6u) + l4], 4u * (s & 1u)) & vec4<u32>(15u);
  let hi = (bytes4(W[w0 + 4u + l4], s) & vec4<u32>(1u)) << vec4<u32>(4u);
  return dm.x * vec4<f32>(lo | hi) - dm.y;
}
