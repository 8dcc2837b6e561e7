// formats/q6_k.wgsl: GGML Q6_K (ggml-common.h block_q6_K): 256 weights in 210 bytes,
// { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }. In half n < 2 (ql += 64n, qh += 32n,
// scales += 8n), for l < 32 and k < 4, weight 128n + 32k + l is
// q = (nibble k / 2 of ql[l + 32 (k % 2)]) | ((qh[l] >> 2k) & 3) << 4, minus 32, with the signed
// scale sc = scales[l / 16 + 2k]; value (d * sc) * q (ggml-quants.c dequantize_row_q6_K).
// Blocks alternate between word aligned and 2 bytes in (`ld`). A qh byte serves four weights 32
// apart: CHUNK 128. (Interface: common.wgsl.)
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 210u;
const GROUP: u32 = 16u;
const CHUNK: u32 = 128u;

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let bb = rb + 210u * (cb >> 8u);
  let e = cb & 255u;
  let n = e >> 7u;
  let k = (e >> 5u) & 3u;
  let l = e & 31u;
  let ql = bytes4(ld2(bb + 64u * n + l + 32u * (k & 1u), o), 4u * (k >> 1u)) & vec4<u32>(15u);
  let qh = bytes4(ld2(bb + 128u + 32u * n + l, o), 2u * k) & vec4<u32>(3u);
  let sc = (i32(b8(bb + 192u + 8u * n + (l >> 4u) + 2u * k)) << 24u) >> 24u;
  return (half(h16(bb + 208u)) * f32(sc)) * (vec4<f32>(ql | (qh << vec4<u32>(4u))) - 32.0);
}
