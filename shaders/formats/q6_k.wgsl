// formats/q6_k.wgsl: GGML Q6_K (ggml-common.h block_q6_K): 256 weights in 210 bytes,
// { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }. In half n < 2 (ql += 64n, qh += 32n,
// scales += 8n), for l < 32 and k < 4, weight 128n + 32k + l is
// q = (nibble k / 2 of ql[l + 32 (k % 2)]) | ((qh[l] >> 2k) & 3) << 4, minus 32, with the signed
// scale sc = scales[l / 16 + 2k]; value (d * sc) * q (ggml-quants.c dequantize_row_q6_K).
// In rows of 2048k weights the blocks are regrouped on the GPU (shaders/repack.wgsl, at load):
// groups of 8 blocks, a group being their first 208 bytes each (ql, qh, scales) then their 8 d
// values, so that every block starts on a 16-byte boundary (the pieces below). Other rows keep
// the file's layout, whose blocks alternate between word aligned and 2 bytes in (`ld`). Which
// one: REGROUP (8 or 0, kernels::PipelineKey::regroup). A qh byte serves four weights 32 apart: CHUNK 128. (Interface: common.wgsl.)

// Byte offsets of block b's ql (its first byte) and of its d, in the row starting at byte rb.
fn q6_block(rb: u32, b: u32) -> vec2<u32> {
  if (REGROUP == 8u) {
    let gb = rb + 1680u * (b >> 3u);
    return vec2<u32>(gb + 208u * (b & 7u), gb + 1664u + 2u * (b & 7u));
  }
  let bb = rb + 210u * b;
  return vec2<u32>(bb, bb + 208u);
}

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let blk = q6_block(rb, cb >> 8u);
  let bb = blk.x;
  let e = cb & 255u;
  let n = e >> 7u;
  let k = (e >> 5u) & 3u;
  let l = e & 31u;
  let ql = bytes4(ld2(bb + 64u * n + l + 32u * (k & 1u), o), 4u * (k >> 1u)) & vec4<u32>(15u);
  let qh = bytes4(ld2(bb + 128u + 32u * n + l, o), 2u * k) & vec4<u32>(3u);
  let sc = (i32(b8(bb + 192u + 8u * n + (l >> 4u) + 2u * k)) << 24u) >> 24u;
  return (half(h16(blk.y)) * f32(sc)) * (vec4<f32>(ql | (qh << vec4<u32>(4u))) - 32.0);
}

//@pieces
// 16-byte pieces (matvec.wgsl's WIDE form, regrouped rows; interface in common.wgsl): piece p of
// a block (p % 8: half n = p / 4 % 2, c = p / 2 % 2, l0 = 16 (p % 2)) is ql bytes
// 64n + 32c + l0 .. + 16 (one load): their low nibbles are weights 128n + 32c + l0 .. + 16 (run
// 0, k = c), their high ones the 16 at k = c + 2 (run 1); each also takes the same 16 qh bytes,
// 128 + 32n + l0 .. (a second load, shared with the piece at the other c), and its two scales
// and d (the block's scales vec4, the group's d vec4: cache hits after the first piece).

// The piece's ql and qh bytes (qh shifted so that run r's 2 bits are at 4r), and d * sc of each
// run.
struct Piece { ql: vec4<u32>, qh: vec4<u32>, s: vec2<f32> }

fn pcol(p: u32, r: u32) -> u32 {
  return (p >> 3u) * 256u + 128u * ((p >> 2u) & 1u) + 32u * (((p >> 1u) & 1u) + 2u * r) + 16u * (p & 1u);
}

fn pload(rb: u32, p: u32) -> Piece {
  let b = p >> 3u;
  let g = (rb >> 4u) + 105u * (b >> 3u);
  let v = g + 13u * (b & 7u);
  let n = (p >> 2u) & 1u;
  let c = (p >> 1u) & 1u;
  let ql = W4[v + 4u * n + 2u * c + (p & 1u)];
  let qh = W4[v + 8u + 2u * n + (p & 1u)] >> vec4<u32>(2u * c);
  let sw = W4[v + 12u];
  let d = unpack2x16float(W4[g + 104u][(b & 7u) >> 1u])[b & 1u];
  // Scales 8n + (p % 2) + 2c (run 0) and that + 4 (run 1): bytes of words 2n + c and 2n + c + 1.
  let i0 = 8u * n + (p & 1u) + 2u * c;
  let s0 = (bitcast<i32>(sw[i0 >> 2u]) << (24u - 8u * (i0 & 3u))) >> 24u;
  let s1 = (bitcast<i32>(sw[(i0 + 4u) >> 2u]) << (24u - 8u * (i0 & 3u))) >> 24u;
  return Piece(ql, qh, d * vec2<f32>(f32(s0), f32(s1)));
}

// The 6-bit values (0 to 63) of weights 4j .. 4j + 4 of run r of piece q, one per byte.
fn q6_bytes(q: Piece, r: u32, j: u32) -> u32 {
  return ((q.ql[j] >> (4u * r)) & 0x0f0f0f0fu) | (((q.qh[j] >> (4u * r)) & 0x03030303u) << 4u);
}

// Weights 4j .. 4j + 4 of run r of piece q.
fn pdq(q: Piece, r: u32, j: u32) -> vec4<f32> {
  return q.s[r] * (vec4<f32>(unpack4xU8(q6_bytes(q, r, j))) - 32.0);
}

// The integer form (matvec.wgsl's IDOT): weights 4j .. 4j + 4 of run r of piece q as bytes n = q
// (0 to 63: non-negative signed bytes), and (a, b) = (d * sc, 32 d * sc) with weight = a * n - b:
// the offset of 32 goes through the activations' half sums, as Q4_K's minimum does, instead of
// three more instructions per word of four weights.
fn pint(q: Piece, r: u32, j: u32) -> u32 {
  return q6_bytes(q, r, j);
}

fn pab(q: Piece, r: u32) -> vec2<f32> {
  return vec2<f32>(q.s[r], 32.0 * q.s[r]);
}
