// formats/q5_0.wgsl: GGML Q5_0 (ggml-common.h block_q5_0): 32 weights in 22 bytes,
// { f16 d; u8 qh[4]; u8 qs[16] }; weight j < 16 is the low nibble of qs[j] plus bit j of qh
// (as the fifth bit), weight j + 16 the high nibble plus bit j + 16; value (q - 16) * d
// (ggml-quants.c dequantize_row_q5_0). Blocks alternate between word aligned and 2 bytes in
// (`ld`). One unit = word k < 4 of qs (weights 4k .. 4k + 4 and 16 + 4k .. 20 + 4k), 4 units per
// block. The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 22u;
const UNIT: u32 = 8u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 2u;
  let k = u & 3u;
  let bb = rb + 22u * blk;
  let d = f16(h16(bb));
  let qh = vec4<u32>(ld(bb + 2u));
  let x = xo + 32u * blk + 4u * k;
  let w = ld(bb + 6u + 4u * k);
  let j = vec4<u32>(0u, 1u, 2u, 3u) + 4u * k;
  let hl = ((qh >> j) & vec4<u32>(1u)) << vec4<u32>(4u);
  let hh = ((qh >> (j + 16u)) & vec4<u32>(1u)) << vec4<u32>(4u);
  let lo = vec4<f32>(vec4<i32>((bytes4(w, 0u) & vec4<u32>(15u)) | hl) - vec4<i32>(16)) * d;
  let hi = vec4<f32>(vec4<i32>((bytes4(w, 4u) & vec4<u32>(15u)) | hh) - vec4<i32>(16)) * d;
  return dot(lo, xv4(x)) + dot(hi, xv4(x + 16u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 22u * (i >> 5u);
  let j = i & 31u;
  let h = ((ld(bb + 2u) >> j) & 1u) << 4u;
  let q = ((b8(bb + 6u + (j & 15u)) >> ((j >> 4u) << 2u)) & 15u) | h;
  return f32(i32(q) - 16) * f16(h16(bb));
}
