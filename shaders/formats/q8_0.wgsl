// formats/q8_0.wgsl: GGML Q8_0 (ggml-common.h block_q8_0): 32 weights in 34 bytes,
// { f16 d; i8 qs[32] }; value q * d (ggml-quants.c dequantize_row_q8_0). Blocks alternate
// between word aligned and 2 bytes in (`ld`). One unit = weights 8k .. 8k + 8 (k < 4), 4 units per
// block.
// The interface is described in f32.wgsl.
const BLOCK_ELEMS: u32 = 32u;
const BLOCK_BYTES: u32 = 34u;
const UNIT: u32 = 8u;

// The four signed bytes of w, sign-extended.
fn i8x4(w: u32) -> vec4<i32> {
  return (vec4<i32>(bitcast<i32>(w)) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
}

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let blk = u >> 2u;
  let k = u & 3u;
  let bb = rb + 34u * blk;
  let d = f16(h16(bb));
  let x = xo + 32u * blk + 8u * k;
  let a = vec4<f32>(i8x4(ld(bb + 2u + 8u * k))) * d;
  let b = vec4<f32>(i8x4(ld(bb + 6u + 8u * k))) * d;
  return dot(a, xv4(x)) + dot(b, xv4(x + 4u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  let bb = rb + 34u * (i >> 5u);
  let q = (i32(b8(bb + 2u + (i & 31u))) << 24u) >> 24u;
  return f32(q) * f16(h16(bb));
}
