// formats/q2_k.wgsl: GGML Q2_K (ggml-common.h block_q2_K): 256 weights in 84 bytes,
// { u8 scales[16]; u8 qs[64]; f16 d, dmin }. Weight 128n + 32j + 16h + l (n, h < 2, j < 4,
// l < 16) is q = (qs[32n + 16h + l] >> 2j) & 3 with sub-block byte sc = scales[8n + 2j + h]:
// value (d * (sc & 15)) * q - dmin * (sc >> 4) (ggml-quants.c dequantize_row_q2_K). Blocks are
// word aligned. A qs byte serves four weights 32 apart: CHUNK 128 loads each byte once.
// (Interface: common.wgsl.)

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let c = cb + o;
  let w0 = (rb >> 2u) + 21u * (c >> 8u);
  let e = c & 255u;
  let n = e >> 7u;
  let j = (e >> 5u) & 3u;
  let h = (e >> 4u) & 1u;
  let dm = unpack2x16float(W[w0 + 20u]);
  let sc = b8(4u * w0 + 8u * n + 2u * j + h);
  let q = bytes4(W[w0 + 4u + 8u * n + 4u * h + ((e & 15u) >> 2u)], 2u * j) & vec4<u32>(3u);
  return (dm.x * f32(sc & 15u)) * vec4<f32>(q) - dm.y * f32(sc >> 4u);
}
