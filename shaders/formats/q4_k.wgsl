// formats/q4_k.wgsl: GGML Q4_K (ggml-common.h block_q4_K): 256 weights in 144 bytes,
// { f16 d, dmin; u8 scales[12]; u8 qs[128] }. Chunk c < 4 (64 weights) reads qs[32c .. 32c + 32]:
// weight 64c + l is the low nibble of qs[32c + l], weight 64c + 32 + l the high one, with the
// 6-bit scale/min pairs 2c and 2c + 1 of get_scale_min_k4 (k4_scale, common.wgsl); value
// (d * sc) * q - dmin * m (ggml-quants.c dequantize_row_q4_K). Blocks are word aligned; CHUNK 64
// loads each qs byte once. (Interface: common.wgsl.)
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 144u;
const GROUP: u32 = 32u;
const CHUNK: u32 = 64u;

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let w0 = (rb >> 2u) + 36u * (cb >> 8u);
  let e = cb & 255u;
  let s = e >> 5u;
  let dm = k4_scale(w0, s);
  let q = bytes4(W[w0 + 4u + 8u * (e >> 6u) + (((e & 31u) + o) >> 2u)], 4u * (s & 1u)) & vec4<u32>(15u);
  return dm.x * vec4<f32>(q) - dm.y;
}
