// formats/f32.wgsl: GGML F32, 4 bytes per weight, rows word aligned. (Interface: common.wgsl.)

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let c = cb + o;
  let w = (rb >> 2u) + c;
  return bitcast<vec4<f32>>(vec4<u32>(W[w], W[w + 1u], W[w + 2u], W[w + 3u]));
}
