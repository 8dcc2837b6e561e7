// formats/f32.wgsl: GGML F32, 4 bytes per weight, rows word aligned.
// Interface shared by every format file (used by matvec, matvec_exp, moe_down, embed):
//   BLOCK_ELEMS, BLOCK_BYTES: a row of `cols` weights is cols / BLOCK_ELEMS blocks of BLOCK_BYTES;
//   UNIT: weights per work unit (a power of two); a row has cols / UNIT whole units, and any
//     remainder (only F32/F16/BF16 rows of odd widths have one) goes through `dequant`;
//   unit_dot(rb, u, xo): sum over the weights w_c of unit u of the row starting at byte rb of
//     W, of w_c * X[xo + c], each w_c exactly ggml's dequantised f32 value;
//   dequant(rb, i): weight i of the row starting at byte rb.
const BLOCK_ELEMS: u32 = 1u;
const BLOCK_BYTES: u32 = 4u;
const UNIT: u32 = 4u;

fn unit_dot(rb: u32, u: u32, xo: u32) -> f32 {
  let w = (rb >> 2u) + 4u * u;
  let v = vec4<f32>(bitcast<f32>(W[w]), bitcast<f32>(W[w + 1u]), bitcast<f32>(W[w + 2u]), bitcast<f32>(W[w + 3u]));
  return dot(v, xv4(xo + 4u * u));
}

fn dequant(rb: u32, i: u32) -> f32 {
  return bitcast<f32>(W[(rb >> 2u) + i]);
}
