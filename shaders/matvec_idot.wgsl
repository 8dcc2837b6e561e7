// matvec_idot.wgsl: the matrix-vector kernel's integer form (kernels::MatvecForm::IntDot; after
// matvec.wgsl; GPUs, one token, the weights read as 16-byte pieces as matvec_rows.wgsl's WIDE
// reads them; a norm through INORM, below): the activations come as quantize.wgsl's 24-bit integers per 16-value half (XQ: three signed-byte digits h, m, l of
// each; XS: d and the half's sum), and each run of a piece (16 weights, one half) is four words
// of signed bytes n with weight = a * n - b (the format's pint and pab): its dot product is
// a * d * (65536 (n . h) + 256 (n . m) + n . l) - b * sum, the three integer dot products exact
// (dot4I8Packed: four byte products and their sum in one instruction, where the f32 form spends
// one multiply-add per weight and more to decode it).
// INORM = 1: the integers are of x * w, the raw residual row times the RMSNorm
// weights, and XS holds each half's sum of squares of x after the row's (d, sum) pairs, two per
// vec2 (written by QOUT with QNORM, below; quantize.wgsl's norm is the whole RMSNorm, read
// without INORM): the row's threads add them up, a vec2 load or two each, and the sums are
// divided by sqrt(mean(x^2) + eps) at the end, as NORM does (a half's integers do not change
// with a positive scale of its values).
@bind var<storage, read> XQ: array<vec4<u32>>;
@bind var<storage, read> XS: array<vec2<f32>>;

// Run r of piece q against the digits (h, m, l) of an activation half: the integer products,
// summed (in f32: 65536 (n . h) can pass 2^31; each dot product is exact, the sum rounds at
// most twice, within an f32 unit of the result).
fn idot(q: Piece, r: u32, xh: vec4<u32>, xm: vec4<u32>, xl: vec4<u32>) -> f32 {
  let n = vec4<u32>(pint(q, r, 0u), pint(q, r, 1u), pint(q, r, 2u), pint(q, r, 3u));
  let h = dot4I8Packed(n.x, xh.x) + dot4I8Packed(n.y, xh.y) + dot4I8Packed(n.z, xh.z) + dot4I8Packed(n.w, xh.w);
  let m = dot4I8Packed(n.x, xm.x) + dot4I8Packed(n.y, xm.y) + dot4I8Packed(n.z, xm.z) + dot4I8Packed(n.w, xm.w);
  let l = dot4I8Packed(n.x, xl.x) + dot4I8Packed(n.y, xl.y) + dot4I8Packed(n.z, xl.z) + dot4I8Packed(n.w, xl.w);
  return f32(256 * h + m) * 256.0 + f32(l);
}

// QOUT = 1 (RPW x RPT = 16 rows a workgroup, rows a multiple of 16, y0 = 0):
// the output row is also written in the integer form's activations (quantize_half.wgsl) for
// the linear op after this one: XQW and XSW, bound after XS; with QNORM, the values times the
// next RMSNorm's weights NWQ (bound after them), each half keeping the raw values' sum of
// squares for the consumer's INORM. The residual stream's writers (the output and down
// projections) and the SwiGLU matvec (whose rows the down projection reads) take it.
//@if QOUT
@bind var<storage, read_write> XQW: array<vec4<u32>>;
@bind var<storage, read_write> XSW: array<vec2<f32>>;
var<workgroup> QV: array<f32, 16>; // the workgroup's output rows
//@end
//@if QNORM
@bind var<storage, read> NWQ: array<vec4<f32>>;
//@end

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
//@include matvec_begin
//@if INORM
  // The halves' sums of squares (INORM, above), side by side across the row's threads.
  let nh = p.cols / 16u;
  for (var i = t; 2u * i < nh; i += TPR) {
    let e = XS[nh + i];
    ss_0 += e.x + select(e.y, 0.0, 2u * i + 1u >= nh);
  }
//@end
  let pieces = select(0u, p.cols / PIECE, row < p.rows);
  for (var base = 0u; base < pieces; base += UN * TPR) {
//@include matvec_pieces
//@for u < UN
//@for r < RUNS
    {
      let h = pcol(pc_$u, $ru) >> 4u;
      let xh = XQ[3u * h];
      let xm = XQ[3u * h + 1u];
      let xl = XQ[3u * h + 2u];
      let xs = select(vec2<f32>(), XS[h], ok_$u);
//@for i < RPT
      let ab_$i = pab(q_$u_$i, $ru);
      s_0_$i += ab_$i.x * xs.x * idot(q_$u_$i, $ru, xh, xm, xl) - ab_$i.y * xs.y;
//@if GLU
      let abu_$i = pab(qu_$u_$i, $ru);
      u_0_$i += abu_$i.x * xs.x * idot(qu_$u_$i, $ru, xh, xm, xl) - abu_$i.y * xs.y;
//@end
//@end
    }
//@end
//@end
  }
  let first = (p.cols / PIECE) * PIECE;
//@include matvec_end
//@if QOUT
  // The workgroup's 16 rows, one half of the output row, as the next integer-form op's
  // activations (its quantize dispatch, a dependent launch, is then not needed): quantize_half's maths
  // by four threads (fewer in a smaller workgroup), thread j the digits of values 4j .. 4j + 4
  // (a word of each digit), each taking the half's scale from all 16, so that the workgroup's
  // tail, which holds its threads' slots, is a quarter of the conversions long.
  let row0 = (wg.y * nwg.x + wg.x) * RPW * RPT;
  let hq = (p.y0 + row0) / 16u;
//@if QNORM
  // (The norm weights loaded before the barrier, for the scale: their wait overlaps the other
  // rows'.)
  var nq = array<vec4<f32>, 4>();
  if (l.x < 4u) {
    for (var j = 0u; j < 4u; j++) { nq[j] = NWQ[4u * hq + j]; }
  }
//@end
  workgroupBarrier();
  if (l.x < 4u && row0 < p.rows) {
    var v = array<vec4<f32>, 4>();
    var ssq = 0.0;
    for (var j = 0u; j < 4u; j++) {
      var e = vec4<f32>(QV[4u * j], QV[4u * j + 1u], QV[4u * j + 2u], QV[4u * j + 3u]);
//@if QNORM
      ssq += dot(e, e);
      e *= nq[j];
//@end
      v[j] = e;
    }
    let s = half_scale(v);
    for (var j = l.x; j < 4u; j += WG) {
      let e = vec4<f32>(QV[4u * j], QV[4u * j + 1u], QV[4u * j + 2u], QV[4u * j + 3u]);
//@if QNORM
      let dg = half_digits(e * NWQ[4u * hq + j], s.y);
//@end
//@if !QNORM
      let dg = half_digits(e, s.y);
//@end
      XQW[3u * hq][j] = dg.x;
      XQW[3u * hq + 1u][j] = dg.y;
      XQW[3u * hq + 2u][j] = dg.z;
    }
    if (l.x == 0u) {
      XSW[hq] = vec2<f32>(s.x, s.z);
//@if QNORM
      XSW[p.rows / 16u + hq / 2u][hq & 1u] = ssq;
//@end
    }
  }
//@end
}
