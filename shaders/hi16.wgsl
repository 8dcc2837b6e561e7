// hi16.wgsl (composed into matmul_coop.wgsl and split.wgsl): the high half of an f32 split into
// two f16s, v = hi + lo (Ootomo and Yokota 2022, see matmul_coop.wgsl).

// v rounded to f16's 10 mantissa bits (to nearest, ties away; exact in f16 within its range),
// on the bits: rounding through f16 and back is a conversion pair that compilers may fold away
// (a GPU driver did: the remainders came out 0), and so is pack2x16float / unpack2x16float.
fn hi16(v: vec4<f32>) -> vec4<f32> {
  return bitcast<vec4<f32>>((bitcast<vec4<u32>>(v) + vec4<u32>(0x1000u)) & vec4<u32>(0xffffe000u));
}
