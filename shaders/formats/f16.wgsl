// formats/f16.wgsl: GGML F16, IEEE half per weight (2 bytes); a row starts 2 bytes into a word
// when it follows a row of odd width. Widened with unpack2x16float (exact; no shader-f16).
// The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 2u;
const UNIT: u32 = 8u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let b = rb + 16u * u;
  let x = xo + 8u * u;
  let v0 = vec4<f32>(unpack2x16float(ld(b)), unpack2x16float(ld(b + 4u)));
  let v1 = vec4<f32>(unpack2x16float(ld(b + 8u)), unpack2x16float(ld(b + 12u)));
  return dot(v0, xv4(x)) + dot(v1, xv4(x + 4u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  return f16(h16(rb + 2u * i));
}
