// formats/common.wgsl: helpers shared by every format file; composed first, before the format
// file and the kernel file (see `gpu::compose`). Weights are the GGUF's stored bytes, uploaded
// unchanged (little-endian) and read as `W: array<u32>`; `X: array<vec4<f32>>` is the kernel's
// f32 vector, read four values at a time (a quarter of the loads: on CPU implementations such as
// lavapipe and SwiftShader the vector loads are most of a matvec's cost); its buffer is a whole
// number of vec4s. Both are declared by the kernel file. Every GGML block is a whole number of 16-bit
// halfwords, so every field starts at an even byte offset; when a row or block starts 2 bytes
// into a word (Q4_0, Q5_0, Q8_0, Q3_K, Q6_K, F16, BF16 with odd rows), `ld` joins two words.

// The four bytes at even byte offset b, as one little-endian word (two loads; the second is
// discarded by the shift when b is word aligned).
fn ld(b: u32) -> u32 {
  let w = b >> 2u;
  let sh = (b & 2u) << 3u; // 0 or 16
  return (W[w] >> sh) | ((W[w + 1u] << 16u) << (16u - sh));
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
fn f16(bits: u32) -> f32 {
  return unpack2x16float(bits).x;
}

// The four bytes of w, each shifted right by `sh` (0 for low nibbles, 4 for high ones...).
fn bytes4(w: u32, sh: u32) -> vec4<u32> {
  return vec4<u32>(w >> sh, w >> (8u + sh), w >> (16u + sh), w >> (24u + sh));
}

// Element i of the f32 vector X.
fn x1(i: u32) -> f32 {
  return X[i >> 2u][i & 3u];
}

// Elements i .. i + 4 of X: one vector load when i is a multiple of 4 (always, except in
// moe_down over F32/F16/BF16 experts of a width that is not).
fn xv4(i: u32) -> vec4<f32> {
  if ((i & 3u) == 0u) { return X[i >> 2u]; }
  return vec4<f32>(x1(i), x1(i + 1u), x1(i + 2u), x1(i + 3u));
}

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

// Q4_K / Q5_K: (d * scale, dmin * min) of sub-blocks 2c and 2c + 1 of the block whose first word
// is w0 (f16 d and dmin, then the 12 scale bytes): (d1, m1, d2, m2).
fn k4_chunk_scales(w0: u32, c: u32) -> vec4<f32> {
  let dm = unpack2x16float(W[w0]);
  let sm = vec4<f32>(scale_min_k4(2u * c, W[w0 + 1u], W[w0 + 2u], W[w0 + 3u]));
  return vec4<f32>(dm.x, dm.y, dm.x, dm.y) * sm;
}
