// formats/f16.wgsl: GGML F16, IEEE half per weight (2 bytes); a row starts 2 bytes into a word
// when it follows a row of odd width. Widened with unpack2x16float (exact; no shader-f16).
// (Interface: common.wgsl.)
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 2u;
const CHUNK: u32 = 16u;

fn dq4(rb: u32, c: u32) -> vec4<f32> {
  let b = rb + 2u * c;
  return vec4<f32>(unpack2x16float(ld(b)), unpack2x16float(ld(b + 4u)));
}
