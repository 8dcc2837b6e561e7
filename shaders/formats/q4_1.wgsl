// formats/q4_1.wgsl: GGML Q4_1 (ggml-common.h block_q4_1): 32 weights in 20 bytes,
// { f16 d, m; u8 qs[16] }; weight j < 16 is the low nibble of qs[j], weight j + 16 the high one;
// value q * d + m (ggml-quants.c dequantize_row_q4_1). Blocks are word aligned. One unit = word
// k < 4 of qs (weights 4k .. 4k + 4 and 16 + 4k .. 20 + 4k), 4 units per block. The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 20u;
const UNIT: u32 = 8u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 2u;
  let k = u & 3u;
  let w0 = (rb >> 2u) + 5u * blk;
  let dm = unpack2x16float(W[w0]);
  let x = xo + 32u * blk + 4u * k;
  let w = W[w0 + 1u + k];
  let lo = vec4<f32>(bytes4(w, 0u) & vec4<u32>(15u)) * dm.x + dm.y;
  let hi = vec4<f32>(bytes4(w, 4u) & vec4<u32>(15u)) * dm.x + dm.y;
  return dot(lo, xv4(x)) + dot(hi, xv4(x + 16u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 20u * (i >> 5u);
  let j = i & 31u;
  let dm = unpack2x16float(W[bb >> 2u]);
  let q = (b8(bb + 4u + (j & 15u)) >> ((j >> 4u) << 2u)) & 15u;
  return f32(q) * dm.x + dm.y;
}
