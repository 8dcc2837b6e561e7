// formats/q5_1.wgsl: GGML Q5_1 (ggml-common.h block_q5_1): 32 weights in 24 bytes,
// { f16 d, m; u8 qh[4]; u8 qs[16] }; the 5-bit q as in Q5_0; value q * d + m (ggml-quants.c
// dequantize_row_q5_1). Blocks are word aligned. One unit = word k < 4 of qs (weights 4k .. 4k + 4
// and 16 + 4k .. 20 + 4k), 4 units per block.
// The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 24u;
const UNIT: u32 = 8u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 2u;
  let k = u & 3u;
  let w0 = (rb >> 2u) + 6u * blk;
  let dm = unpack2x16float(W[w0]);
  let qh = vec4<u32>(W[w0 + 1u]);
  let x = xo + 32u * blk + 4u * k;
  let w = W[w0 + 2u + k];
  let j = vec4<u32>(0u, 1u, 2u, 3u) + 4u * k;
  let hl = ((qh >> j) & vec4<u32>(1u)) << vec4<u32>(4u);
  let hh = ((qh >> (j + 16u)) & vec4<u32>(1u)) << vec4<u32>(4u);
  let lo = vec4<f32>((bytes4(w, 0u) & vec4<u32>(15u)) | hl) * dm.x + dm.y;
  let hi = vec4<f32>((bytes4(w, 4u) & vec4<u32>(15u)) | hh) * dm.x + dm.y;
  return dot(lo, xv4(x)) + dot(hi, xv4(x + 16u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 24u * (i >> 5u);
  let j = i & 31u;
  let dm = unpack2x16float(W[bb >> 2u]);
  let h = ((W[(bb >> 2u) + 1u] >> j) & 1u) << 4u;
  let q = ((b8(bb + 8u + (j & 15u)) >> ((j >> 4u) << 2u)) & 15u) | h;
  return f32(q) * dm.x + dm.y;
}
