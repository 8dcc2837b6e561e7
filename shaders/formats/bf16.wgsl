// formats/bf16.wgsl: GGML BF16, the upper 16 bits of an f32 per weight (2 bytes): widened by
// shifting into the high half (exact). The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 2u;
const UNIT: u32 = 8u;

// The two bf16 values of a word, widened.
fn bf2(w: u32) -> vec2<f32> {
  return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
}

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let b = rb + 16u * u;
  let x = xo + 8u * u;
  let v0 = vec4<f32>(bf2(ld(b)), bf2(ld(b + 4u)));
  let v1 = vec4<f32>(bf2(ld(b + 8u)), bf2(ld(b + 12u)));
  return dot(v0, xv4(x)) + dot(v1, xv4(x + 4u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  return bitcast<f32>(h16(rb + 2u * i) << 16u);
}
