// formats/q5_k.wgsl: GGML Q5_K (ggml-common.h block_q5_K): 256 weights in 176 bytes,
// { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }. As Q4_K (chunk c < 4 reads
// qs[32c .. 32c + 32], low nibbles then high nibbles, scale/min pairs 2c and 2c + 1), plus a
// fifth bit (value 16) from qh[l]: bit 2c for weight 64c + l, bit 2c + 1 for 64c + 32 + l;
// value (d * sc) * q - dmin * m (ggml-quants.c dequantize_row_q5_K). Blocks are word aligned.
// One unit = two words of a chunk's qs, bytes 32c + 8k' .. + 8 (k' < 4), and the matching two
// words of qh: 16 weights; 16 units per block. k4_chunk_scales (same packing as Q4_K) is in common.wgsl.
// The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 176u;
const UNIT: u32 = 16u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 4u;
  let c = (u >> 2u) & 3u;
  let k = 2u * (u & 3u);
  let w0 = (rb >> 2u) + 44u * blk;
  let s = k4_chunk_scales(w0, c);
  let d1 = s.x;
  let m1 = s.y;
  let d2 = s.z;
  let m2 = s.w;
  let wa = W[w0 + 12u + 8u * c + k];
  let wb = W[w0 + 13u + 8u * c + k];
  let ha = W[w0 + 4u + k];
  let hb = W[w0 + 5u + k];
  let x = xo + 256u * blk + 64u * c + 4u * k;
  let h1a = (bytes4(ha, 2u * c) & vec4<u32>(1u)) << vec4<u32>(4u);
  let h1b = (bytes4(hb, 2u * c) & vec4<u32>(1u)) << vec4<u32>(4u);
  let h2a = (bytes4(ha, 2u * c + 1u) & vec4<u32>(1u)) << vec4<u32>(4u);
  let h2b = (bytes4(hb, 2u * c + 1u) & vec4<u32>(1u)) << vec4<u32>(4u);
  let la = d1 * vec4<f32>((bytes4(wa, 0u) & vec4<u32>(15u)) | h1a) - m1;
  let lb = d1 * vec4<f32>((bytes4(wb, 0u) & vec4<u32>(15u)) | h1b) - m1;
  let pa = d2 * vec4<f32>((bytes4(wa, 4u) & vec4<u32>(15u)) | h2a) - m2;
  let pb = d2 * vec4<f32>((bytes4(wb, 4u) & vec4<u32>(15u)) | h2b) - m2;
  return dot(la, xv4(x)) + dot(lb, xv4(x + 4u)) + dot(pa, xv4(x + 32u)) + dot(pb, xv4(x + 36u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 176u * (i >> 8u);
  let e = i & 255u;
  let c = e >> 6u;
  let hi = (e >> 5u) & 1u;
  let l = e & 31u;
  let w0 = bb >> 2u;
  let s = k4_chunk_scales(w0, c);
  let dm = select(s.xy, s.zw, hi == 1u);
  let h = ((b8(bb + 16u + l) >> (2u * c + hi)) & 1u) << 4u;
  let q = ((b8(bb + 48u + 32u * c + l) >> (4u * hi)) & 15u) | h;
  return dm.x * f32(q) - dm.y;
}
