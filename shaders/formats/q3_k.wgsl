// formats/q3_k.wgsl: GGML Q3_K (ggml-common.h block_q3_K): 256 weights in 110 bytes,
// { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }. Weight 128n + 32j + l (n < 2, j < 4,
// l < 32) has low bits (qs[32n + l] >> 2j) & 3, minus 4 unless bit 4n + j of hmask[l] is set;
// value (d * sc) * q with the signed 6-bit scale sc of sub-block i = 8n + 2j + l / 16: low
// nibble of scales[i % 8] (high nibble when i >= 8), top bits (scales[8 + i % 4] >> 2(i / 4)) & 3,
// minus 32 (ggml-quants.c dequantize_row_q3_K). Blocks alternate between word aligned and 2
// bytes in (`ld`). A qs byte serves four weights 32 apart: CHUNK 128. (Interface: common.wgsl.)

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let c = cb + o;
  let bb = rb + 110u * (c >> 8u);
  let e = c & 255u;
  let n = e >> 7u;
  let j = (e >> 5u) & 3u;
  let l = e & 31u;
  let i = 8u * n + 2u * j + (l >> 4u);
  let low = (b8(bb + 96u + (i & 7u)) >> (4u * (i >> 3u))) & 15u;
  let high = (b8(bb + 104u + (i & 3u)) >> (2u * (i >> 2u))) & 3u;
  let dl = half(h16(bb + 108u)) * f32(i32(low | (high << 4u)) - 32);
  let lo = bytes4(ld(bb + 32u + 32u * n + l), 2u * j) & vec4<u32>(3u);
  let hb = bytes4(ld(bb + l), 4u * n + j) & vec4<u32>(1u);
  return dl * (vec4<f32>(lo | (hb << vec4<u32>(2u))) - 4.0);
}
