// formats/f32.wgsl: GGML F32, 4 bytes per weight, rows word aligned. (Interface: common.wgsl.)
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 4u;
const GROUP: u32 = 4u; // (nothing shared: dq4s takes cb + o as one column)
const CHUNK: u32 = 16u;

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let c = cb + o;
  let w = (rb >> 2u) + c;
  return bitcast<vec4<f32>>(vec4<u32>(W[w], W[w + 1u], W[w + 2u], W[w + 3u]));
}
