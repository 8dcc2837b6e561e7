// formats/bf16.wgsl: GGML BF16, the upper 16 bits of an f32 per weight (2 bytes): widened by
// shifting into the high half (exact). (Interface: common.wgsl.)
// No scales: a span's calls share only their word loads (ld2); spans that divide 64 take dq4s.

// The two bf16 values of a word, widened.
fn bf2(w: u32) -> vec2<f32> {
  return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
}

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let x = rb + 2u * cb;
  return vec4<f32>(bf2(ld2(x, 2u * o)), bf2(ld2(x, 2u * o + 4u)));
}
