// formats/f16.wgsl: GGML F16, IEEE half per weight (2 bytes); a row starts 2 bytes into a word
// when it follows a row of odd width. Widened with unpack2x16float (exact; no shader-f16).
// (Interface: common.wgsl.)
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 2u;
const GROUP: u32 = 4u; // (nothing shared: dq4s takes cb + o as one column)
const CHUNK: u32 = 16u;

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let c = cb + o;
  let b = rb + 2u * c;
  return vec4<f32>(unpack2x16float(ld(b)), unpack2x16float(ld(b + 4u)));
}
