// formats/q4_k.wgsl: GGML Q4_K (ggml-common.h block_q4_K): 256 weights in 144 bytes,
// { f16 d, dmin; u8 scales[12]; u8 qs[128] }. Chunk c < 4 (64 weights) reads qs[32c .. 32c + 32]:
// weight 64c + l is the low nibble of qs[32c + l], weight 64c + 32 + l the high one, with the
// 6-bit scale/min pairs 2c and 2c + 1 of get_scale_min_k4 (k4_scale, common.wgsl); value
// (d * sc) * q - dmin * m (ggml-quants.c dequantize_row_q4_K). Blocks are word aligned; CHUNK 64
// loads each qs byte once. matmul_coop.wgsl's WQ4K reads this layout too. (Interface:
// common.wgsl.)

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let w0 = (rb >> 2u) + 36u * (cb >> 8u);
  let e = cb & 255u;
  let s = e >> 5u;
  let dm = k4_scale(w0, s);
  let q = bytes4(W[w0 + 4u + 8u * (e >> 6u) + (((e & 31u) + o) >> 2u)], 4u * (s & 1u)) & vec4<u32>(15u);
  return dm.x * vec4<f32>(q) - dm.y;
}

//@pieces
// 16-byte pieces (matvec.wgsl's WIDE form; interface in common.wgsl): piece p of a row is qs
// bytes 16 (p % 8) .. + 16 of block p / 8 (vec4 1 + p % 8 of the block's nine), read with one
// vector load; its low nibbles are the 16 weights from pcol(p, 0), its high ones the 16 from
// pcol(p, 1), with the scale/min pairs 2c and 2c + 1 (c = (p % 8) / 2) of the block's header
// (its first vec4: d, dmin, the 12 scale bytes; a second load, shared by the block's 8 pieces).

// The piece's qs bytes, and (scale, min) of run 0 in s.xy, of run 1 in s.zw.
struct Piece { q: vec4<u32>, s: vec4<f32> }

fn pcol(p: u32, r: u32) -> u32 {
  return (p >> 3u) * 256u + 64u * ((p & 7u) >> 1u) + 16u * (p & 1u) + 32u * r;
}

fn pload(rb: u32, p: u32) -> Piece {
  let v = (rb >> 4u) + 9u * (p >> 3u);
  let q = W4[v + 1u + (p & 7u)];
  let h = W4[v];
  let dm = unpack2x16float(h.x);
  let sm = vec4<f32>(scale_min_k4(2u * ((p & 7u) >> 1u), h.y, h.z, h.w));
  return Piece(q, vec4<f32>(dm.x, dm.y, dm.x, dm.y) * sm);
}

// Weights 4j .. 4j + 4 of run r of piece q.
fn pdq(q: Piece, r: u32, j: u32) -> vec4<f32> {
  let n = bytes4(q.q[j], 4u * r) & vec4<u32>(15u);
  let sm = select(q.s.xy, q.s.zw, r == 1u);
  return sm.x * vec4<f32>(n) - sm.y;
}

// The integer form (matvec.wgsl's IDOT): weights 4j .. 4j + 4 of run r of piece q as signed
// bytes n (the nibbles, 0 to 15), and (a, b) with weight = a * n - b.
fn pint(q: Piece, r: u32, j: u32) -> u32 {
  return (q.q[j] >> (4u * r)) & 0x0f0f0f0fu;
}

fn pab(q: Piece, r: u32) -> vec2<f32> {
  return select(q.s.xy, q.s.zw, r == 1u);
}
