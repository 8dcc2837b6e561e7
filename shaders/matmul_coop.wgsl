// matmul_coop: Y (+)= W X for a batch of tokens on the GPU's matrix units (tensor cores), through
// wgpu's cooperative-matrix extension (native only; kernels::compose puts `enable f16;` and
// `enable wgpu_cooperative_matrix;` first). Bindings and layout: linear.wgsl, except that X is
// the activations as split.wgsl's f16 halves (8 a vec4<u32>, rows of LD = cols rounded up to
// 32): hi as X and, with a split, lo as XL. Picked by linear.rs instead of
// matmul.wgsl when gpu::Tuning::coop is set, which needs 16x16x16 f16 x f16 -> f32 matrices and
// 32-wide subgroups. Composed with `const BM, BN` (the tile: weight rows x tokens), `FM, FN`
// (a subgroup's block: 16 FM rows x 16 FN tokens), `SGM, SGN` (BM / 16 FM, BN / 16 FN), `SPLIT`
// (kernels::CoopTile: 0, 1 or 2) and, where the weights' rows are whole 16-byte pieces, `WV`
// with `WP` (F16) or `WQ` and `WQ8` (Q8_0, in groups of 8 blocks), `WQ4K` (Q4_K) or `WQ6K`
// (Q6_K, regrouped) (below).
//
// A workgroup of SGM x SGN subgroups computes BM x BN outputs, each subgroup a 16 FM x 16 FN
// block as FM x FN f32 accumulator tiles of 16 x 16 (more fragments a subgroup: fewer loads
// from workgroup memory a product). Each step over K = BK columns decodes the BM x BK
// weights once with the format's dq4 (ggml's exact f32 values; WV: from 16-byte pieces, below)
// into workgroup memory as f16, copies the BN x BK activation halves beside them (split.wgsl
// converted them once per op, not once per workgroup of weight rows), then multiplies tile by
// tile. f16 keeps 11 bits of an f32: with SPLIT >= 1 the activations come as two halves, x = hi +
// lo (hi rounded to 11 bits, lo = f16(x - hi)), and each product is taken twice; with SPLIT 2 the
// weights too, and w x = hi hi + hi lo + lo hi, after Ootomo and Yokota 2022 ("Recovering single
// precision accuracy from Tensor Cores while surpassing the FP32 theoretical peak performance"),
// without their scaling of lo (small remainders are f16 subnormals and lose bits) or their separate
// accumulators (which cost speed here): on the references 1e-5 to 6e-5 from the f64 logits against
// the f32 kernel's 6e-6 to 1.2e-5. |v| above 65504 would become infinite.
// Without a split this is the precision of llama.cpp's matrix-unit paths.
// Accumulation is f32.
const BK: u32 = 32u;
// Row stride of the f16 tiles in workgroup memory, in vec4<f16>s (10: 80 bytes, which keeps
// each row on a 16-byte boundary, as the matrix loads want, and puts 8 consecutive rows'
// 16-byte pieces on distinct banks). The tiles are vec4s so that a run goes in with one store;
// the matrix loads take their offsets and strides in the same units.
const L4: u32 = (BK + 8u) / 4u;
const WG: u32 = 32u * SGM * SGN;
//@if SPLIT
@bind var<storage, read> XL: array<vec4<u32>>;
//@end
// WV: weights whose rows are whole 16-byte pieces (every part is a buffer of its own, so they
// are aligned), read through this view of W's binding (the kernel then reads W only through
// it), one load where linear.wgsl's runs take four: WP, F16, 8 halves a load stored as they are
// (no f32 round trip); WQ, 16 quantised weights a load and their scales from a second, decoded
// to f32 and split as the runs are: WQ8, Q8_0 rows in groups of 8 blocks (formats/q8_0.wgsl), WQ4K, Q4_K
// (blocks of 9 vec4s), WQ6K, Q6_K rows regrouped (formats/q6_k.wgsl). Staging the weights
// bounded this kernel, not its matrix units.
//@if WV
@bind(W) var<storage, read> W4: array<vec4<u32>>;
//@end
// The step's tiles, as rows of L4: the weights' BM rows (matrix A, row-major), then the
// activations' BN token rows (matrix B, column-major K x N); with a split, the remainders in Tl:
// the weights' (WLO) and the activations' (from row TL0).
var<workgroup> Th: array<vec4<f16>, (BM + BN) * L4>;
//@if WLO
const TL0: u32 = 0u;
//@end
//@if !WLO
const TL0: u32 = BM;
//@end
//@if SPLIT
var<workgroup> Tl: array<vec4<f16>, (BM + BN - TL0) * L4>;
//@end
var<workgroup> Cs: array<f32, SGM * SGN * 256u>; // a 16 x 16 result tile per subgroup, column-major

// Per thread and step: NW runs of 4 weights (linear.wgsl's tile_w; WP: pieces of 8) and NX
// pieces of 8 activation halves (of hi, and of lo).
//@if !WV
const NW: u32 = (BM * 8u + WG - 1u) / WG;
//@end
//@if WP
const NW: u32 = (BM * 4u + WG - 1u) / WG;
//@end
//@if WQ
const NW: u32 = (BM * 2u + WG - 1u) / WG;
//@end
const NX: u32 = (BN * 4u + WG - 1u) / WG;

// Run v of weights into the tiles at o: as f16, or with `split` as hi16(v) and the f16 remainder.
fn stash(v: vec4<f32>, o: u32, split: bool) {
  let hf = select(v, hi16(v), split);
  Th[o] = vec4<f16>(hf);
//@if WLO
  Tl[o] = vec4<f16>(v - hf);
//@end
}

//@if WP
// Piece i of the step's weight tile (row i / 4, columns 8 (i % 4) ..), zero past the tile or
// the matrix; the tile's rows are whole pieces, so a piece is all in the row or all past it.
fn tile_wp(i: u32, k0: u32, m0: u32, row_bytes: u32) -> vec4<u32> {
  let m = i / 4u;
  let c = k0 + 8u * (i % 4u);
  if (i >= BM * 4u || m0 + m >= p.rows || c >= p.cols) { return vec4<u32>(0u); }
  return W4[((m0 + m) * row_bytes) / 16u + c / 8u];
}

fn weights(i: u32, k0: u32, m0: u32, row_bytes: u32) -> vec4<u32> {
  return tile_wp(i, k0, m0, row_bytes);
}
//@end
//@if WQ8
// Piece i of the step's Q8_0 weight tile: row i / 2, half i % 2 of the step's block (16 signed
// bytes q, weights d q), in a group of 8 blocks' qs (16 vec4s) and their d values (1 vec4).
// Rows of 256k weights: the step is never past the row.
struct QPiece { q: vec4<u32>, d: f32 }

fn weights(i: u32, k0: u32, m0: u32, row_bytes: u32) -> QPiece {
  let m = i / 2u;
  if (i >= BM * 2u || m0 + m >= p.rows) { return QPiece(vec4<u32>(0u), 0.0); }
  let b = k0 / 32u;
  let g = ((m0 + m) * row_bytes) / 16u + 17u * (b >> 3u);
  let d = unpack2x16float(W4[g + 16u][(b & 7u) >> 1u])[b & 1u];
  return QPiece(W4[g + 2u * (b & 7u) + (i & 1u)], d);
}

// Weights 4j .. 4j + 4 of piece w.
fn qdq(w: QPiece, j: u32) -> vec4<f32> {
  let q = (vec4<i32>(bitcast<i32>(w.q[j])) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
  return vec4<f32>(q) * w.d;
}
//@end
//@if WQ4K
// Piece i of the step's Q4_K weight tile: row i / 2, weights 16 (i % 2) .. of the step's 32,
// sub-block s of its block: nibble s % 2 of qs bytes 32 (s / 2) + 16 (i % 2) ..
// (formats/q4_k.wgsl), shifted down here, and (d * scale, dmin * min) of the sub-block
// (k4_scale's maths). Rows are whole blocks of 256: the step is never past the row.
struct QPiece { q: vec4<u32>, s: vec2<f32> }

fn weights(i: u32, k0: u32, m0: u32, row_bytes: u32) -> QPiece {
  let m = i / 2u;
  if (i >= BM * 2u || m0 + m >= p.rows) { return QPiece(vec4<u32>(0u), vec2<f32>(0.0)); }
  let v = ((m0 + m) * row_bytes) / 16u + 9u * (k0 / 256u);
  let s = (k0 % 256u) / 32u;
  let h = W4[v];
  let sm = scale_min_k4(s & ~1u, h.y, h.z, h.w);
  let sc = unpack2x16float(h.x) * vec2<f32>(select(sm.xy, sm.zw, (s & 1u) == 1u));
  return QPiece(W4[v + 1u + (s & ~1u) + (i & 1u)] >> vec4<u32>(4u * (s & 1u)), sc);
}

// Weights 4j .. 4j + 4 of piece w.
fn qdq(w: QPiece, j: u32) -> vec4<f32> {
  return w.s.x * vec4<f32>(unpack4xU8(w.q[j] & 0x0f0f0f0fu)) - w.s.y;
}
//@end
//@if WQ6K
// Piece i of the step's Q6_K weight tile: row i / 2, weights l0 = 16 (i % 2) .. of the step's
// 32, which are run k of half n of block b (formats/q6_k.wgsl): nibble k / 2 of ql bytes
// 64n + 32 (k % 2) + l0 .., bits 2k of qh bytes 128 + 32n + l0 .., scale 8n + i % 2 + 2k and the
// group's d, in rows of 2048k regrouped (groups of 8 blocks of 13 vec4s, then their d values).
// Here the 6-bit values (one a byte) and d * scale; the step is never past the row.
struct QPiece { q: vec4<u32>, d: f32 }

fn weights(i: u32, k0: u32, m0: u32, row_bytes: u32) -> QPiece {
  let m = i / 2u;
  if (i >= BM * 2u || m0 + m >= p.rows) { return QPiece(vec4<u32>(0u), 0.0); }
  let b = k0 / 256u;
  let n = (k0 / 128u) & 1u;
  let k = (k0 / 32u) & 3u;
  let h = i & 1u;
  let g = ((m0 + m) * row_bytes) / 16u + 105u * (b >> 3u);
  let v = g + 13u * (b & 7u);
  let ql = (W4[v + 4u * n + 2u * (k & 1u) + h] >> vec4<u32>(4u * (k >> 1u))) & vec4<u32>(0x0f0f0f0fu);
  let qh = (W4[v + 8u + 2u * n + h] >> vec4<u32>(2u * k)) & vec4<u32>(0x03030303u);
  let si = 8u * n + h + 2u * k;
  let sc = (bitcast<i32>(W4[v + 12u][si >> 2u]) << (24u - 8u * (si & 3u))) >> 24u;
  let d = unpack2x16float(W4[g + 104u][(b & 7u) >> 1u])[b & 1u];
  return QPiece(ql | (qh << vec4<u32>(4u)), d * f32(sc));
}

// Weights 4j .. 4j + 4 of piece w (dq4s's maths: (d * sc) * (q - 32)).
fn qdq(w: QPiece, j: u32) -> vec4<f32> {
  return w.d * (vec4<f32>(unpack4xU8(w.q[j])) - 32.0);
}
//@end
//@if !WV
fn weights(i: u32, k0: u32, m0: u32, row_bytes: u32) -> vec4<f32> {
  return tile_w(i, k0, m0, row_bytes, BM);
}
//@end

// Piece i of the step's activation halves (8 of them: token row i / 4 of the tile, halves
// k0 + 8 (i % 4) ..) is at this index of X and XL; past the tile or the batch it reads as zeros.
fn x_at(i: u32, k0: u32, n0: u32, b: vec2<u32>, ldx8: u32) -> u32 {
  return (b.y + n0 + i / 4u) * ldx8 + k0 / 8u + i % 4u;
}

fn in_tile(i: u32, n0: u32, b: vec2<u32>) -> bool {
  return i < BN * 4u && n0 + i / 4u < b.x;
}

fn x_hi(i: u32, k0: u32, n0: u32, b: vec2<u32>, ldx8: u32) -> vec4<u32> {
  if (!in_tile(i, n0, b)) { return vec4<u32>(0u); }
  return X[x_at(i, k0, n0, b, ldx8)];
}

//@if SPLIT
fn x_lo(i: u32, k0: u32, n0: u32, b: vec2<u32>, ldx8: u32) -> vec4<u32> {
  if (!in_tile(i, n0, b)) { return vec4<u32>(0u); }
  return XL[x_at(i, k0, n0, b, ldx8)];
}
//@end

// Halves 0 .. 4 (j = 0) or 4 .. 8 (j = 1) of a piece, as f16s (the conversions through f32 are
// exact, and compilers drop them: WGSL has no bitcast from two u32s to four f16s).
fn halves4(q: vec4<u32>, j: u32) -> vec4<f16> {
  let w = select(q.xy, q.zw, j == 1u);
  return vec4<f16>(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)));
}

// Subgroup sg's result tile (rows m .. m + 16, tokens n .. n + 16), from its slot of Cs: lane l
// writes 8 of the 256 values.
fn put(sg: u32, l: u32, m: u32, n: u32) {
  let b = batch_rows();
  for (var e = 0u; e < 8u; e++) {
    let i = l + 32u * e;
    let r = m + i % 16u;
    let t = n + i / 16u;
    if (r < p.rows && t < b.x) { store(t, r, Cs[sg * 256u + i]); }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let b = batch_rows();
  let m0 = wg.x * BM;
  let n0 = wg.y * BN;
  let sg = li / 32u; // this thread's subgroup (32-wide subgroups are a condition of this kernel)
  let mt = 16u * FM * (sg % SGM); // its block: rows mt .. mt + 16 FM, tokens nt .. nt + 16 FN
  let nt = BM + 16u * FN * (sg / SGM); // (as a row of the tiles: the activations follow the weights)
  let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
  let ldx8 = (p.cols + BK - 1u) / BK * (BK / 8u); // the halves' row stride, in pieces
//@for i < FM
//@for j < FN
  var c$i$j = coop_mat16x16<f32, C>();
//@end
//@end
  // The next step's runs and pieces are loaded into registers while this step's tiles are
  // multiplied (software pipelining, as matmul.wgsl): their latency overlaps the matrix units'.
//@if !WV
  var wr = array<vec4<f32>, NW>();
//@end
//@if WQ
  var wr = array<QPiece, NW>();
//@end
//@if WP
  var wr = array<vec4<u32>, NW>();
//@end
  var xh = array<vec4<u32>, NX>();
//@if SPLIT
  var xl = array<vec4<u32>, NX>();
//@end
  for (var r = 0u; r < NW; r++) { wr[r] = weights(li + r * WG, 0u, m0, row_bytes); }
  for (var r = 0u; r < NX; r++) {
    xh[r] = x_hi(li + r * WG, 0u, n0, b, ldx8);
//@if SPLIT
    xl[r] = x_lo(li + r * WG, 0u, n0, b, ldx8);
//@end
  }
  for (var k0 = 0u; k0 < p.cols; k0 += BK) {
//@if !WV
    for (var r = 0u; r < NW; r++) {
      let i = li + r * WG;
      if (i < BM * 8u) { stash(wr[r], (i / 8u) * L4 + i % 8u, SPLIT >= 2u); }
    }
//@end
//@if WQ
    for (var r = 0u; r < NW; r++) {
      let i = li + r * WG;
      if (i < BM * 2u) {
        let o = (i / 2u) * L4 + 4u * (i % 2u);
        for (var j = 0u; j < 4u; j++) { stash(qdq(wr[r], j), o + j, SPLIT >= 2u); }
      }
    }
//@end
//@if WP
    for (var r = 0u; r < NW; r++) {
      let i = li + r * WG;
      let o = (i / 4u) * L4 + 2u * (i % 4u);
      if (i < BM * 4u) {
        Th[o] = halves4(wr[r], 0u);
        Th[o + 1u] = halves4(wr[r], 1u);
      }
    }
//@end
    for (var r = 0u; r < NX; r++) {
      let i = li + r * WG;
      let o = (BM + i / 4u) * L4 + 2u * (i % 4u);
      if (i < BN * 4u) {
        Th[o] = halves4(xh[r], 0u);
        Th[o + 1u] = halves4(xh[r], 1u);
//@if SPLIT
        Tl[o - TL0 * L4] = halves4(xl[r], 0u);
        Tl[o - TL0 * L4 + 1u] = halves4(xl[r], 1u);
//@end
      }
    }
    workgroupBarrier();
    if (k0 + BK < p.cols) {
      for (var r = 0u; r < NW; r++) { wr[r] = weights(li + r * WG, k0 + BK, m0, row_bytes); }
      for (var r = 0u; r < NX; r++) {
        xh[r] = x_hi(li + r * WG, k0 + BK, n0, b, ldx8);
//@if SPLIT
        xl[r] = x_lo(li + r * WG, k0 + BK, n0, b, ldx8);
//@end
      }
    }
    // FM weight fragments (matrix A) and FN token fragments (B) a subgroup, each loaded once
    // for all FM x FN products (and the remainders' for theirs).
    for (var k = 0u; k < BK; k += 16u) {
//@for i < FM
      let a$i = coopLoadT<coop_mat16x16<f16, A>>(&Th[(mt + 16u * $iu) * L4 + k / 4u], L4);
//@end
//@for j < FN
      let b$j = coopLoad<coop_mat16x16<f16, B>>(&Th[(nt + 16u * $ju) * L4 + k / 4u], L4);
//@end
//@for i < FM
//@for j < FN
      c$i$j = coopMultiplyAdd(a$i, b$j, c$i$j);
//@end
//@end
//@if SPLIT
//@for j < FN
      let l$j = coopLoad<coop_mat16x16<f16, B>>(&Tl[(nt + 16u * $ju - TL0) * L4 + k / 4u], L4);
//@end
//@for i < FM
//@for j < FN
      c$i$j = coopMultiplyAdd(a$i, l$j, c$i$j);
//@end
//@end
//@end
//@if WLO
//@for i < FM
      let e$i = coopLoadT<coop_mat16x16<f16, A>>(&Tl[(mt + 16u * $iu) * L4 + k / 4u], L4);
//@end
//@for i < FM
//@for j < FN
      c$i$j = coopMultiplyAdd(e$i, b$j, c$i$j);
//@end
//@end
//@end
    }
    workgroupBarrier();
  }
  // The FM x FN tiles out, one at a time through this subgroup's slot.
  let l = li % 32u;
  let m = m0 + mt;
  let n = n0 + nt - BM;
//@for i < FM
//@for j < FN
  coopStore(c$i$j, &Cs[sg * 256u], 16u);
  workgroupBarrier();
  put(sg, l, m + 16u * $iu, n + 16u * $ju);
  workgroupBarrier();
//@end
//@end
}
