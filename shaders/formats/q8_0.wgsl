// formats/q8_0.wgsl: GGML Q8_0 (ggml-common.h block_q8_0): 32 weights in 34 bytes,
// { f16 d; i8 qs[32] }; value q * d (ggml-quants.c dequantize_row_q8_0). Blocks alternate
// between word aligned and 2 bytes in (`ld`). (Interface: common.wgsl.)
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 34u;
const GROUP: u32 = 32u;
const CHUNK: u32 = 32u;

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let bb = rb + 34u * (cb >> 5u);
  let q = (vec4<i32>(bitcast<i32>(ld2(bb + 2u + (cb & 31u), o))) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
  return vec4<f32>(q) * half(h16(bb));
}
