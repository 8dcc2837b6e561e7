// formats/f16.wgsl: GGML F16, IEEE half per weight (2 bytes); a row starts 2 bytes into a word
// when it follows a row of odd width. Widened with unpack2x16float (exact; no shader-f16).
// (Interface: common.wgsl.)
// No scales: a span's calls share only their word loads (ld2); spans that divide 64 take dq4s.

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let x = rb + 2u * cb;
  return vec4<f32>(unpack2x16float(ld2(x, 2u * o)), unpack2x16float(ld2(x, 2u * o + 4u)));
}

//@pieces
// 16-byte pieces (matvec.wgsl's WIDE form; interface in common.wgsl): 8 weights, one load.

struct Piece { q: vec4<u32> }

fn pcol(p: u32, r: u32) -> u32 {
  return 8u * p;
}

fn pload(rb: u32, p: u32) -> Piece {
  return Piece(W4[(rb >> 4u) + p]);
}

fn pdq(q: Piece, r: u32, j: u32) -> vec4<f32> {
  return vec4<f32>(unpack2x16float(q.q[2u * j]), unpack2x16float(q.q[2u * j + 1u]));
}
