// formats/q4_0.wgsl: GGML Q4_0 (ggml-common.h block_q4_0): 32 weights in 18 bytes,
// { f16 d; u8 qs[16] }; weight j < 16 is the low nibble of qs[j], weight j + 16 the high one;
// value (q - 8) * d (ggml-quants.c dequantize_row_q4_0). 18-byte blocks alternate between word
// aligned and 2 bytes in, so quants are read through `ld`. One unit = word k < 4 of qs (bytes
// 4k .. 4k + 4: weights 4k .. 4k + 4 and 16 + 4k .. 20 + 4k), 4 units per block.
// The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 18u;
const UNIT: u32 = 8u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 2u;
  let k = u & 3u;
  let bb = rb + 18u * blk;
  let d = f16(h16(bb));
  let x = xo + 32u * blk + 4u * k;
  let w = ld(bb + 2u + 4u * k);
  let lo = vec4<f32>(vec4<i32>(bytes4(w, 0u) & vec4<u32>(15u)) - vec4<i32>(8)) * d;
  let hi = vec4<f32>(vec4<i32>(bytes4(w, 4u) & vec4<u32>(15u)) - vec4<i32>(8)) * d;
  return dot(lo, xv4(x)) + dot(hi, xv4(x + 16u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 18u * (i >> 5u);
  let j = i & 31u;
  let q = (b8(bb + 2u + (j & 15u)) >> ((j >> 4u) << 2u)) & 15u;
  return f32(i32(q) - 8) * f16(h16(bb));
}
