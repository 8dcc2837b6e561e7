// formats/common.wgsl: helpers shared by every format file; composed first, before the format
// file and the kernel file (see `kernels::compose`). Weights are the GGUF's stored bytes, uploaded
// unchanged (little-endian; Q8_0 rows of 64k weights and Q6_K rows of 2048k then regrouped, repack.wgsl) and read as
// `W: array<u32>`; `X: array<vec4<f32>>` is the kernel's
// f32 activations, read four values at a time (a quarter of the loads: on CPU implementations
// such as lavapipe and SwiftShader the vector loads are most of a matvec's cost). Both are
// declared by the kernel file. Every GGML block is a whole number of 16-bit halfwords, so every
// field starts at an even byte offset; when a row or block starts 2 bytes into a word (Q4_0,
// Q5_0, Q8_0, Q3_K, Q6_K, F16, BF16 with odd rows), `ld` joins two words.
//
// The interface of a format file (the only code written per GGML type; the constants are
// kernels::Format's, composed before this file):
//   BLOCK_ELEMS, BLOCK_BYTES: a row of `cols` weights is cols / BLOCK_ELEMS blocks of BLOCK_BYTES;
//   CHUNK: weights a matvec thread takes per step (a multiple of 4; a block, or the span over
//     which a block's bytes and scales are shared, so that one step loads each byte once);
//   GROUP: weights that share a scale, or other decoding work such as word loads (a power of
//     two; 4 where nothing is shared);
//   dq4s(rb, cb, o): weights cb + o .. cb + o + 4 (cb + o a multiple of 4) of the row starting at
//     byte rb of W, where cb and cb + o lie in the same GROUP: what depends on the group (its
//     block, its scale) comes from cb alone, so that the calls of a span that share cb share that
//     work (matvec.wgsl; dq4 below is the general form); each weight
//     exactly ggml's dequantised f32 value (ggml-quants.c dequantize_row_*).
//   REGROUP: not defined here but by kernels::compose, before this file: the blocks per
//     regrouped group of the rows the kernel reads, or 0 (Q8_0 and Q6_K need it: their rows of
//     64k and 2048k weights are regrouped at load, see q8_0.wgsl and q6_k.wgsl).
// Optionally, 16-byte pieces (matvec.wgsl's WIDE form, where the format's rows start on 16-byte
// boundaries of a buffer bound from byte 0, as every weight part is): the part of the file after
// its `//@pieces` line, composed into that form only (it reads the weights' second view
// `W4: array<vec4<u32>>`, which only that form declares; PIECE and RUNS composed from
// kernels::Format::pieces):
//   PIECE: weights per piece; RUNS: runs of PIECE / RUNS consecutive weights in a piece;
//   struct Piece: what a thread holds of a piece (its words, its decoded scales);
//   pcol(p, r): the first column of run r of piece p;
//   pload(rb, p): piece p of the row starting at byte rb: its vector loads (one or more, and any
//     header of its block, shared by the block's pieces through the cache), scales decoded once;
//   pdq(q, r, j): weights 4j .. 4j + 4 of run r of piece q, each exactly ggml's dequantised value.
// Optionally, dq4a(rb, cb, o): weights cb + o .. cb + o + 4 with cb a multiple of 32 and o a
//   multiple of 4 below 32 (correct for any such o; matmul_cpu.wgsl's steps of whole blocks give
//   it as a literal, where it counts): o alone says where in the block the weights lie, so that
//   the calls of a step load each word once
//   (Q4_0, Q4_1, Q5_0 and Q5_1, whose dq4s shares nothing, define it, and take the dq4s below,
//   written once, in place of their own). Elsewhere the form below: dq4s on the step's groups.
// Optionally, bdot(rb, cb, x, xs): the dot product of the block of 32 weights from column cb
//   (a multiple of 32) of the row starting at byte rb with x (8 vec4s; xs their sum), the
//   block's words and scales loaded once and its scale applied once (weights a q + b: a (q . x)
//   + b xs): matvec.wgsl's CPU form (XB) takes it where the format has it (BDOT).
// And optionally, for runs of 16 weights, the integer form (matvec.wgsl's IDOT where
//   kernels::Format::int says so): pint(q, r, j): weights 4j .. 4j + 4 of run r as four signed bytes n;
//   pab(q, r): (a, b) such that each weight of the run is exactly a * n - b.
// Weight kernels use nothing else of a format: matvec and matmul (and embed, through `dequant`).

// The four bytes at even byte offset x + o (o a multiple of 4), as one little-endian word (two
// loads; the second is discarded by the shift when x is word aligned). The word index is split
// as (x >> 2) + (o >> 2): the calls of one span share x and differ in a literal o, so the
// compiler sees that word k + 1 of one call is word k of the next and loads it once (a span of
// n words: n + 1 loads instead of 2n).
fn ld2(x: u32, o: u32) -> u32 {
  let w = (x >> 2u) + (o >> 2u);
  let sh = (x & 2u) << 3u; // 0 or 16
  return (W[w] >> sh) | ((W[w + 1u] << 16u) << (16u - sh));
}

// The four bytes at even byte offset b.
fn ld(b: u32) -> u32 {
  return ld2(b, 0u);
}

// The 16-bit halfword at even byte offset b, in the low bits.
fn h16(b: u32) -> u32 {
  return (W[b >> 2u] >> ((b & 2u) << 3u)) & 0xffffu;
}

// The byte at byte offset b.
fn b8(b: u32) -> u32 {
  return (W[b >> 2u] >> ((b & 3u) << 3u)) & 0xffu;
}

// IEEE half in the low 16 bits of `bits`, widened exactly (no shader-f16 needed).
fn half(bits: u32) -> f32 {
  return unpack2x16float(bits).x;
}

// The four bytes of w, each shifted right by `sh` (0 for low nibbles, 4 for high ones...).
fn bytes4(w: u32, sh: u32) -> vec4<u32> {
  return vec4<u32>(w >> sh, w >> (8u + sh), w >> (16u + sh), w >> (24u + sh));
}

// The block dot products (bdot, in the formats with blocks of 32 weights and one scale pair;
// matvec.wgsl's BDOT): x holds the block's 32 activations, 8 vec4s.
// q . x where the 32 weights are 4-bit values q in the 16 bytes q (ggml's layout: weight j < 16
// the low nibble of byte j, weight j + 16 the high one), and with h (Q5_0, Q5_1) a fifth bit,
// bit j of h for weight j. (Through i32: u32 to f32 conversions take more instructions on CPUs.)
fn nibdot(q: vec4<u32>, h: u32, x: array<vec4<f32>, 8>) -> f32 {
  // (Written out: CPU compilers keep an array indexed in a loop in memory.)
  let a = (nib5(q.x, h, 0u) * x[0] + nib5(q.x, h, 16u) * x[4]) + (nib5(q.y, h, 4u) * x[1] + nib5(q.y, h, 20u) * x[5])
        + ((nib5(q.z, h, 8u) * x[2] + nib5(q.z, h, 24u) * x[6]) + (nib5(q.w, h, 12u) * x[3] + nib5(q.w, h, 28u) * x[7]));
  return dot(a, vec4<f32>(1.0));
}

// Weights j .. j + 4 (j a multiple of 4) of a block of 32 4-bit weights (nibdot's layout), as
// values 0 .. 31: from q, the word of bytes j % 16 .. + 4 (its low nibbles for j < 16, else its
// high ones), and h, the fifth bits (0 for Q4_0 and Q4_1). The formats' dq4a and nibdot take it.
fn nib5(q: u32, h: u32, j: u32) -> vec4<f32> {
  let hi = ((vec4<u32>(h) >> (vec4<u32>(0u, 1u, 2u, 3u) + j)) & vec4<u32>(1u)) << vec4<u32>(4u);
  return vec4<f32>(vec4<i32>((bytes4(q, (j >> 4u) << 2u) & vec4<u32>(15u)) | hi));
}

// Weights c .. c + 4 (c a multiple of 4) of the row starting at byte rb.
fn dq4(rb: u32, c: u32) -> vec4<f32> {
  return dq4s(rb, c & ~(GROUP - 1u), c & (GROUP - 1u));
}

//@if DQ4A
// dq4s for formats that define dq4a (blocks of 32, GROUP 4: nothing shared but the block).
fn dq4s(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let c = cb + o;
  return dq4a(rb, c & ~31u, c & 31u);
}
//@end

//@if !DQ4A
// dq4a (above) for formats without their own: the groups of a 32-column step (or the step within
// a group of 64) from cb plus a literal, which the compiler folds.
fn dq4a(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  let g = min(GROUP, 32u);
  return dq4s(rb, cb + (o & ~(g - 1u)), o & (g - 1u));
}
//@end

// Weight i of the row starting at byte rb (embedding gathers, rows whose width is not a
// multiple of 4).
fn dequant(rb: u32, i: u32) -> f32 {
  return dq4(rb, i & ~3u)[i & 3u];
}

//@if !XH
// Element i of the f32 activations X.
fn x1(i: u32) -> f32 {
  return X[i >> 2u][i & 3u];
}

// Elements i .. i + 4 of X: one vector load when i is a multiple of 4 (always, unless a row of X
// is not a whole number of vec4s).
fn xv4(i: u32) -> vec4<f32> {
  if ((i & 3u) == 0u) { return X[i >> 2u]; }
  return vec4<f32>(x1(i), x1(i + 1u), x1(i + 2u), x1(i + 3u));
}
//@end

// Shared by Q4_K and Q5_K (the same 12-byte scale packing).
// ggml's get_scale_min_k4 for j and j + 1 (j even) from the 12 scale bytes in s0, s1, s2:
// (scale j, min j, scale j + 1, min j + 1). For j < 4 the low 6 bits of bytes j and j + 4; for
// j >= 4 the nibbles of byte j + 4 and the top 2 bits of bytes j - 4 (scale) and j (min).
fn scale_min_k4(j: u32, s0: u32, s1: u32, s2: u32) -> vec4<u32> {
  let sh = vec4<u32>(8u * (j & 3u), 8u * (j & 3u), 8u * (j & 3u) + 8u, 8u * (j & 3u) + 8u);
  let a = vec4<u32>(s0, s1, s0, s1) >> sh; // bytes j, j + 4 (and j + 1, j + 5), mod 4
  let c = vec4<u32>(s2) >> (sh + vec4<u32>(0u, 4u, 0u, 4u)); // nibbles of byte j + 4 (j >= 4)
  let hi = (c & vec4<u32>(15u)) | (((a >> vec4<u32>(6u)) & vec4<u32>(3u)) << vec4<u32>(4u));
  return select(a & vec4<u32>(63u), hi, j >= 4u);
}

// Q4_K / Q5_K: (d * scale, dmin * min) of the 32-weight sub-block s (< 8) of the block whose
// first word is w0 (f16 d and dmin, then the 12 scale bytes).
fn k4_scale(w0: u32, s: u32) -> vec2<f32> {
  let dm = unpack2x16float(W[w0]);
  let sm = scale_min_k4(s & ~1u, W[w0 + 1u], W[w0 + 2u], W[w0 + 3u]);
  return dm * vec2<f32>(select(sm.xy, sm.zw, (s & 1u) == 1u));
}

//@if !XH
// Thread t's share (chunks t, t + tpr, ...) of sum_c W[c] X[xo + c] over the `cols` weights of
// the row starting at byte rb: the expert kernels' dot product (matvec.wgsl has its own, for
// several tokens at once).
fn row_dot(rb: u32, cols: u32, xo: u32, t: u32, tpr: u32) -> f32 {
  var s = 0.0;
  let chunks = cols / CHUNK;
  for (var ch = t; ch < chunks; ch += tpr) {
    let c0 = ch * CHUNK;
    for (var i = 0u; i < CHUNK; i += 4u) { s += dot(dq4(rb, c0 + i), xv4(xo + c0 + i)); }
  }
  for (var c = chunks * CHUNK + t; c < cols; c += tpr) { s += dequant(rb, c) * x1(xo + c); }
  return s;
}
//@end
