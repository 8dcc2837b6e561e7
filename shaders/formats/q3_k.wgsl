// formats/q3_k.wgsl: GGML Q3_K (ggml-common.h block_q3_K): 256 weights in 110 bytes,
// { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }. Weight 128n + 32j + l (n < 2, j < 4,
// l < 32) has low bits (qs[32n + l] >> 2j) & 3, minus 4 unless bit 4n + j of hmask[l] is set;
// value (d * sc) * q with the signed 6-bit scale sc of sub-block i = 8n + 2j + l / 16: low
// nibble of scales[i % 8] (high nibble when i >= 8), top bits (scales[8 + i % 4] >> 2(i / 4)) & 3,
// minus 32 (ggml-quants.c dequantize_row_q3_K). Blocks alternate between word aligned and 2
// bytes in (`ld`). One unit = (n, h = l / 16, k < 4): l = 16h + 4k .. + 4, one word each of hmask
// and qs, all 4 shifts j (16 weights); 16 units per block.
// The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 110u;
const UNIT: u32 = 16u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 4u;
  let n = (u >> 3u) & 1u;
  let h = (u >> 2u) & 1u;
  let k = u & 3u;
  let bb = rb + 110u * blk;
  let d = f16(h16(bb + 108u));
  let s0 = ld(bb + 96u);
  let s1 = ld(bb + 100u);
  let s2 = ld(bb + 104u);
  // Sub-blocks i = 8n + 2j + h: low nibble in byte h + 2j (nibble n), top bits in byte
  // h + 2(j % 2) of s2 at bit 2(2n + j / 2).
  let low = (vec4<u32>(s0 >> (8u * h), s0 >> (8u * h + 16u), s1 >> (8u * h), s1 >> (8u * h + 16u)) >> vec4<u32>(4u * n)) & vec4<u32>(15u);
  let hs = vec4<u32>(8u * h, 8u * h + 16u, 8u * h, 8u * h + 16u) + 4u * n + vec4<u32>(0u, 0u, 2u, 2u);
  let high = (vec4<u32>(s2) >> hs) & vec4<u32>(3u);
  let dl = d * vec4<f32>(vec4<i32>(low | (high << vec4<u32>(4u))) - vec4<i32>(32));
  let hm = ld(bb + 16u * h + 4u * k);
  let qw = ld(bb + 32u + 32u * n + 16u * h + 4u * k);
  let x = xo + 256u * blk + 128u * n + 16u * h + 4u * k;
  var s = 0.0;
  for (var j = 0u; j < 4u; j++) {
    let lo = bytes4(qw, 2u * j) & vec4<u32>(3u);
    let hb = bytes4(hm, 4u * n + j) & vec4<u32>(1u);
    let q = vec4<f32>(vec4<i32>(lo | (hb << vec4<u32>(2u))) - vec4<i32>(4));
    s += dot(dl[j] * q, xv4(x + 32u * j));
  }
  return s;
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 110u * (i >> 8u);
  let e = i & 255u;
  let n = e >> 7u;
  let j = (e >> 5u) & 3u;
  let l = e & 31u;
  let is = 8u * n + 2u * j + (l >> 4u);
  let low = (b8(bb + 96u + (is & 7u)) >> (4u * (is >> 3u))) & 15u;
  let high = (b8(bb + 104u + (is & 3u)) >> (2u * (is >> 2u))) & 3u;
  let dl = f16(h16(bb + 108u)) * f32(i32(low | (high << 4u)) - 32);
  let lo = (b8(bb + 32u + 32u * n + l) >> (2u * j)) & 3u;
  let hb = (b8(bb + l) >> (4u * n + j)) & 1u;
  return dl * f32(i32(lo | (hb << 2u)) - 4);
}
