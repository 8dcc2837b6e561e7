// formats/q6_k.wgsl: GGML Q6_K (ggml-common.h block_q6_K): 256 weights in 210 bytes,
// { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }. In half n < 2 (ql += 64n, qh += 32n,
// scales += 8n), for l < 32 and k < 4, weight 128n + 32k + l is
// q = (nibble k / 2 of ql[l + 32 (k % 2)]) | ((qh[l] >> 2k) & 3) << 4, minus 32, with the signed
// scale sc = scales[l / 16 + 2k]; value (d * sc) * q (ggml-quants.c dequantize_row_q6_K).
// Blocks alternate between word aligned and 2 bytes in (`ld`). One unit = (n, h = l / 16, k < 4):
// l = 16h + 4k .. + 4, one word each of ql[l], ql[l + 32] and qh[l]: 16 weights; 16 units per
// block. The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 210u;
const UNIT: u32 = 16u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 4u;
  let n = (u >> 3u) & 1u;
  let h = (u >> 2u) & 1u;
  let k = u & 3u;
  let bb = rb + 210u * blk;
  let d = f16(h16(bb + 208u));
  // scales[8n + h + 2k'], k' = 0..3: bytes h, h + 2 of the two words at 192 + 8n, sign-extended.
  let sa = ld(bb + 192u + 8u * n);
  let sb = ld(bb + 196u + 8u * n);
  let sc = (bitcast<vec4<i32>>(vec4<u32>(sa, sa, sb, sb)) << vec4<u32>(24u - 8u * h, 8u - 8u * h, 24u - 8u * h, 8u - 8u * h)) >> vec4<u32>(24u);
  let ds = d * vec4<f32>(sc);
  let a0 = bb + 64u * n + 16u * h + 4u * k;
  let qa = ld(a0);
  let qb = ld(a0 + 32u);
  let qh = ld(bb + 128u + 32u * n + 16u * h + 4u * k);
  let q1 = vec4<i32>((bytes4(qa, 0u) & vec4<u32>(15u)) | ((bytes4(qh, 0u) & vec4<u32>(3u)) << vec4<u32>(4u))) - vec4<i32>(32);
  let q2 = vec4<i32>((bytes4(qb, 0u) & vec4<u32>(15u)) | ((bytes4(qh, 2u) & vec4<u32>(3u)) << vec4<u32>(4u))) - vec4<i32>(32);
  let q3 = vec4<i32>((bytes4(qa, 4u) & vec4<u32>(15u)) | ((bytes4(qh, 4u) & vec4<u32>(3u)) << vec4<u32>(4u))) - vec4<i32>(32);
  let q4 = vec4<i32>((bytes4(qb, 4u) & vec4<u32>(15u)) | ((bytes4(qh, 6u) & vec4<u32>(3u)) << vec4<u32>(4u))) - vec4<i32>(32);
  let x = xo + 256u * blk + 128u * n + 16u * h + 4u * k;
  return dot(ds.x * vec4<f32>(q1), xv4(x)) + dot(ds.y * vec4<f32>(q2), xv4(x + 32u))
       + dot(ds.z * vec4<f32>(q3), xv4(x + 64u)) + dot(ds.w * vec4<f32>(q4), xv4(x + 96u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 210u * (i >> 8u);
  let e = i & 255u;
  let n = e >> 7u;
  let k = (e >> 5u) & 3u;
  let l = e & 31u;
  let ql = (b8(bb + 64u * n + l + 32u * (k & 1u)) >> (4u * (k >> 1u))) & 15u;
  let qh = (b8(bb + 128u + 32u * n + l) >> (2u * k)) & 3u;
  let q = i32(ql | (qh << 4u)) - 32;
  let sc = (i32(b8(bb + 192u + 8u * n + (l >> 4u) + 2u * k)) << 24u) >> 24u;
  return (f16(h16(bb + 208u)) * f32(sc)) * f32(q);
}
