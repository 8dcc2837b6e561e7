// formats/q8_0.wgsl: GGML Q8_0 (ggml-common.h block_q8_0): 32 weights in 34 bytes,
// { f16 d; i8 qs[32] }; value q * d (ggml-quants.c dequantize_row_q8_0). In rows of 256k weights
// the blocks are regrouped on the GPU (shaders/repack.wgsl, at load): groups of 8 blocks, a group
// being their qs (256 bytes) then their d values (16 bytes), so that every qs starts on a word
// and every group on a 16-byte boundary (the pieces below); in other rows of 64k weights, in
// pairs of blocks (64 bytes of qs, then the two d values), every qs on a word. Other rows keep
// the file's layout, whose blocks alternate between word aligned and 2 bytes in (`ld`). Which
// one: REGROUP, the blocks per group (8, 2 or 0: repack.rs group_blocks), a constant of the
// kernel (kernels::PipelineKey::regroup).
// matmul_coop.wgsl's WQ8 reads the groups of 8 too. (Interface: common.wgsl.)

// Byte offsets of the qs and of the d of block b of the row starting at byte rb.
fn q8_block(rb: u32, b: u32) -> vec2<u32> {
  if (REGROUP == 8u) {
    let gb = rb + 272u * (b >> 3u);
    return vec2<u32>(gb + 32u * (b & 7u), gb + 256u + 2u * (b & 7u));
  }
  if (REGROUP == 2u) {
    let gb = rb + 68u * (b >> 1u);
    return vec2<u32>(gb + 32u * (b & 1u), gb + 64u + 2u * (b & 1u));
  }
  let bb = rb + 34u * b;
  return vec2<u32>(bb + 2u, bb);
}

// The four qs bytes at byte x + o of a block's qs at byte x (o a multiple of 4): one load where
// the rows are regrouped (every qs on a word), two elsewhere.
fn q8_word(x: u32, o: u32) -> u32 {
  if (REGROUP != 0u) { return W[(x >> 2u) + (o >> 2u)]; }
  return ld2(x, o);
}

// The four signed bytes at byte o of a block's qs at byte x, as f32.
fn q8x4(x: u32, o: u32) -> vec4<f32> {
  return vec4<f32>((vec4<i32>(bitcast<i32>(q8_word(x, o))) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let blk = q8_block(rb, cb >> 5u);
  return q8x4(blk.x + (cb & 31u), o) * half(h16(blk.y));
}

// Weights cb .. cb + 32 (a block) of the row starting at byte rb dotted with x: d (q . x), the
// block's d and words loaded once (xs unused).
fn bdot(rb: u32, cb: u32, x: array<vec4<f32>, 8>, xs: f32) -> f32 {
  let blk = q8_block(rb, cb >> 5u);
  // (Written out: CPU compilers keep an array indexed in a loop in memory.)
  let a = (q8x4(blk.x, 0u) * x[0] + q8x4(blk.x, 4u) * x[1]) + (q8x4(blk.x, 8u) * x[2] + q8x4(blk.x, 12u) * x[3])
        + ((q8x4(blk.x, 16u) * x[4] + q8x4(blk.x, 20u) * x[5]) + (q8x4(blk.x, 24u) * x[6] + q8x4(blk.x, 28u) * x[7]));
  return half(h16(blk.y)) * dot(a, vec4<f32>(1.0));
}

//@pieces
// 16-byte pieces (matvec.wgsl's WIDE form, rows regrouped in groups of 8): piece p is half p % 2
// of block p / 2's qs, 16 weights in one load (a group is 17 vec4s: 16 of qs, then the d values); its d
// is one more load, shared by the group's 16 pieces.

struct Piece { q: vec4<u32>, d: f32 }

fn pcol(p: u32, r: u32) -> u32 {
  return 16u * p;
}

fn pload(rb: u32, p: u32) -> Piece {
  let b = p >> 1u;
  let q = W4[(rb >> 4u) + 17u * (b >> 3u) + 2u * (b & 7u) + (p & 1u)];
  let d = unpack2x16float(W[(rb >> 2u) + 68u * (b >> 3u) + 64u + ((b & 7u) >> 1u)])[b & 1u];
  return Piece(q, d);
}

// Weights 4j .. 4j + 4 of piece q.
fn pdq(q: Piece, r: u32, j: u32) -> vec4<f32> {
  let v = (vec4<i32>(bitcast<i32>(q.q[j])) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
  return vec4<f32>(v) * q.d;
}

// The integer form (matvec.wgsl's IDOT): weights 4j .. 4j + 4 of piece q as signed bytes n (the
// file's), and (a, b) with weight = a * n - b.
fn pint(q: Piece, r: u32, j: u32) -> u32 {
  return q.q[j];
}

fn pab(q: Piece, r: u32) -> vec2<f32> {
  return vec2<f32>(q.d, 0.0);
}
