// formats/q2_k.wgsl: GGML Q2_K (ggml-common.h block_q2_K): 256 weights in 84 bytes,
// { u8 scales[16]; u8 qs[64]; f16 d, dmin }. Weight 128n + 32j + 16h + l (n, h < 2, j < 4,
// l < 16) is q = (qs[32n + 16h + l] >> 2j) & 3 with sub-block byte sc = scales[8n + 2j + h]:
// value (d * (sc & 15)) * q - dmin * (sc >> 4) (ggml-quants.c dequantize_row_q2_K). Blocks are
// word aligned. One unit = (n, h, k < 4): one word of qs, bytes 32n + 16h + 4k .. + 4, with its 4
// shifts (16 weights, 4 scale bytes); 16 units per block. The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 256u;
const BLOCK_BYTES: u32 = 84u;
const UNIT: u32 = 16u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 4u;
  let n = (u >> 3u) & 1u;
  let h = (u >> 2u) & 1u;
  let k = u & 3u;
  let w0 = (rb >> 2u) + 21u * blk;
  let dm = unpack2x16float(W[w0 + 20u]);
  // scales[8n + h + 2j], j = 0..3: bytes h and h + 2 of words 2n and 2n + 1.
  let s0 = W[w0 + 2u * n];
  let s1 = W[w0 + 2u * n + 1u];
  let sc = vec4<u32>(s0 >> (8u * h), s0 >> (8u * h + 16u), s1 >> (8u * h), s1 >> (8u * h + 16u)) & vec4<u32>(255u);
  let dl = dm.x * vec4<f32>(sc & vec4<u32>(15u));
  let ml = dm.y * vec4<f32>(sc >> vec4<u32>(4u));
  let w = W[w0 + 4u + 8u * n + 4u * h + k];
  let x = xo + 256u * blk + 128u * n + 16u * h + 4u * k;
  let q0 = vec4<f32>(bytes4(w, 0u) & vec4<u32>(3u));
  let q1 = vec4<f32>(bytes4(w, 2u) & vec4<u32>(3u));
  let q2 = vec4<f32>(bytes4(w, 4u) & vec4<u32>(3u));
  let q3 = vec4<f32>(bytes4(w, 6u) & vec4<u32>(3u));
  return dot(dl.x * q0 - ml.x, xv4(x)) + dot(dl.y * q1 - ml.y, xv4(x + 32u))
       + dot(dl.z * q2 - ml.z, xv4(x + 64u)) + dot(dl.w * q3 - ml.w, xv4(x + 96u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 84u * (i >> 8u);
  let e = i & 255u;
  let n = e >> 7u;
  let j = (e >> 5u) & 3u;
  let h = (e >> 4u) & 1u;
  let l = e & 15u;
  let dm = unpack2x16float(W[(bb >> 2u) + 20u]);
  let sc = b8(bb + 8u * n + 2u * j + h);
  let q = (b8(bb + 16u + 32u * n + 16u * h + l) >> (2u * j)) & 3u;
  return (dm.x * f32(sc & 15u)) * f32(q) - dm.y * f32(sc >> 4u);
}
