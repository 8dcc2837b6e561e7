// formats/bf16.wgsl: GGML BF16, the upper 16 bits of an f32 per weight (2 bytes): widened by
// shifting into the high half (exact). (Interface: common.wgsl.)
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 2u;
const GROUP: u32 = 4u; // (nothing shared: dq4s takes cb + o as one column)
const CHUNK: u32 = 16u;

// The two bf16 values of a word, widened.
fn bf2(w: u32) -> vec2<f32> {
  return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
}

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let c = cb + o;
  let b = rb + 2u * c;
  return vec4<f32>(bf2(ld(b)), bf2(ld(b + 4u)));
}
