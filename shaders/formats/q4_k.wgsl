// formats/q4_k.wgsl: GGML Q4_K (ggml-common.h block_q4_K): 256 weights in 144 bytes,
// { f16 d, dmin; u8 scales[12]; u8 qs[128] }. Chunk c < 4 (64 weights) reads qs[32c .. 32c + 32]:
// weight 64c + l is the low nibble of qs[32c + l], weight 64c + 32 + l the high one, with the
// 6-bit scale/min pairs 2c and 2c + 1 of get_scale_min_k4 (k4_chunk_scales, common.wgsl); value (d * sc) * q - dmin * m
// (ggml-quants.c dequantize_row_q4_K). Blocks are word aligned. One unit = two words of a chunk's
// qs, bytes 32c + 8k' .. + 8 (k' < 4): 8 low-nibble and 8 high-nibble weights; 16 units per block.
// The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 144u;
const UNIT: u32 = 16u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 4u;
  let c = (u >> 2u) & 3u;
  let k = 2u * (u & 3u);
  let w0 = (rb >> 2u) + 36u * blk;
  let s = k4_chunk_scales(w0, c);
  let d1 = s.x;
  let m1 = s.y;
  let d2 = s.z;
  let m2 = s.w;
  let wa = W[w0 + 4u + 8u * c + k];
  let wb = W[w0 + 5u + 8u * c + k];
  let x = xo + 256u * blk + 64u * c + 4u * k;
  let la = d1 * vec4<f32>(bytes4(wa, 0u) & vec4<u32>(15u)) - m1;
  let lb = d1 * vec4<f32>(bytes4(wb, 0u) & vec4<u32>(15u)) - m1;
  let ha = d2 * vec4<f32>(bytes4(wa, 4u) & vec4<u32>(15u)) - m2;
  let hb = d2 * vec4<f32>(bytes4(wb, 4u) & vec4<u32>(15u)) - m2;
  return dot(la, xv4(x)) + dot(lb, xv4(x + 4u)) + dot(ha, xv4(x + 32u)) + dot(hb, xv4(x + 36u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 144u * (i >> 8u);
  let e = i & 255u;
  let c = e >> 6u;
  let hi = (e >> 5u) & 1u;
  let w0 = bb >> 2u;
  let s = k4_chunk_scales(w0, c);
  let dm = select(s.xy, s.zw, hi == 1u);
  let q = (b8(bb + 16u + 32u * c + (e & 31u)) >> (4u * hi)) & 15u;
  return dm.x * f32(q) - dm.y;
}
