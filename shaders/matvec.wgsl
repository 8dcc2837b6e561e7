// matvec: Y (+)= W X for a few tokens (NT at most; 1 when decoding), reading each weight once.
// Bindings and layout: linear.wgsl. Composed (kernels::compose) with `const WG, TPR, RPW, RPT, NT,
// SPAN, NG, UN, UNG, NORM, GLU, SG, LANES, WIDE, IDOT, INORM, SS, QOUT, QNORM, XB, BDOT, SPANS, WGRED,
// HALF_ROWS`
// (RUNS, RJ with WIDE): workgroup of WG = RPW row groups x TPR threads; a row group is
// RPT rows, and thread t of it takes the spans of SPAN weights t, t + TPR, ... of each of its
// rows (so that the TPR threads' loads of weights and of X are side by side: a few cache lines
// per load instruction, not one per thread), UN spans at a time, their UNG x RPT loads issued
// before any is used: decode is bound by memory latency x loads in flight. Each load of X serves
// the RPT rows. A span is NG = SPAN / 4 groups of 4 weights, each decoded with the format's
// decoder (dqm, below) and multiplied into all NT token rows; the row's TPR partial sums are
// then added (by subgroup shuffles with SG, below, then in workgroup memory). Workgroups past
// 65535 wrap into workgroup_id.y. The maths: each weight is exactly ggml's dequantised f32
// value, then an f32 dot product per token (the integer form, IDOT below: exact integer products
// against 24-bit activations).
// The `//@for` blocks are unrolled at compose time (kernels::unroll) into named registers: the
// drivers' compilers keep a private array indexed in a loop in memory when they do not unroll it.
//
// LANES (composed, kernels::matvec_lanes): the lanes of a row summed by subgroup shuffles (SG >
// 0), else 1; the rest of the TPR partial sums are added in workgroup memory (WGRED).

// Decode fusions (linear::Fuse), so that a decoded token needs fewer dispatches:
// NORM = 1: X holds the raw residual stream and NW the RMSNorm weights; the kernel computes
//   (W (x * nw)) / sqrt(mean(x^2) + eps), the sum of squares taken from the same loads of x
//   (the row's threads read all of x between them), instead of reading rmsnorm.wgsl's output.
// GLU = 1: W is [gate; up] (2 * p.rows rows); row r of the output is
//   silu(gate_r . x) * (up_r . x) (SwiGLU), the two rows sharing each load of x.
// Weights cb + o .. cb + o + 4 of the span starting at column cb: when a span lies within one of
// the format's scale groups, through dq4s, so that its NG calls share the block and scale
// decoding (the same expressions of cb; formats/common.wgsl); when it is whole 32-weight steps
// (CPU adapters' spans, linear::span), through dq4a, whose calls share a block's loads the same
// way (o is a literal).
//@if HALF_ROWS
// HALF_ROWS = 1 (linear::AT_POSITION16: the value projection into an f16 V cache, Y a u32 view):
// a thread's rows row .. row + RPT of token i, y, go into Y's row pos0 + i as f16 halves, rows r
// and r + 1 one word (r's the low half; Y's stride and offsets count f16 elements). The word
// holds two rows of this op, so the op's first row and row count are even (the builder takes
// this form only then, RPT even too); a row past p.rows (none then) would be written as 0.
fn store_halves(i: u32, row: u32, y: array<f32, RPT>) {
  let o = (st.pos0 + i) * p.y_stride + p.y0 + row;
  for (var r = 0u; r < RPT; r += 2u) {
    if (row + r < p.rows) { Y[(o + r) / 2u] = pack2x16float(vec2<f32>(y[r], y[r + 1u])); }
  }
}
//@end

fn dqm(rb: u32, cb: u32, o: u32) -> vec4<f32> {
  if (GROUP % SPAN == 0u) { return dq4s(rb, cb, o); }
  if (SPAN % 32u == 0u) { return dq4a(rb, cb + (o & ~31u), o & 31u); }
  return dq4(rb, cb + o);
}

//@if NORM
@bind var<storage, read> NW: array<vec4<f32>>;

fn nw1(i: u32) -> f32 {
  return NW[i >> 2u][i & 3u];
}

// Norm weights c .. c + 4.
fn nw4(c: u32) -> vec4<f32> {
  if ((c & 3u) == 0u) { return NW[c >> 2u]; }
  return vec4<f32>(nw1(c), nw1(c + 1u), nw1(c + 2u), nw1(c + 3u));
}
//@end

// WIDE = 1: the weights are read as 16-byte pieces, vector loads (the format's PIECE, pcol,
// pload, pdq: the part of its file after `//@pieces`; formats/common.wgsl), through a second
// view of W: thread t of a row takes pieces t, t + TPR, ..., side by side across the row's
// threads (a warp's load is 512 contiguous bytes but for the K-quants' block headers), instead
// of a span's 4-byte loads.
//@if WIDE
//@if NORM
@bind var<storage, read> W4: array<vec4<u32>>;
//@end
//@if !NORM
@bind var<storage, read> W4: array<vec4<u32>>;
//@end
//@end

// IDOT = 1 (with WIDE, one token; a norm through INORM, below): the activations come as
// quantize.wgsl's 24-bit integers per 16-value half (XQ: three signed-byte digits h, m, l of
// each; XS: d and the half's sum), and each run of a piece (16 weights, one half) is four words
// of signed bytes n with weight = a * n - b (the format's pint and pab): its dot product is
// a * d * (65536 (n . h) + 256 (n . m) + n . l) - b * sum, the three integer dot products exact
// (dot4I8Packed: four byte products and their sum in one instruction, where the f32 form spends
// one multiply-add per weight and more to decode it).
// INORM = 1 (with IDOT): the integers are of x * w, the raw residual row times the RMSNorm
// weights, and XS holds each half's sum of squares of x after the row's (d, sum) pairs, two per
// vec2 (written by QOUT with QNORM, below; quantize.wgsl's norm is the whole RMSNorm, read
// without INORM): the row's threads add them up, a vec2 load or two each, and the sums are
// divided by sqrt(mean(x^2) + eps) at the end, as NORM does (a half's integers do not change
// with a positive scale of its values). SS = NORM or INORM.
//@if IDOT
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
//@end

// QOUT = 1 (IDOT, one token, RPW x RPT = 16 rows a workgroup, rows a multiple of 16, y0 = 0):
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

// WGRED (more threads a row than LANES): per thread, token k's sum for row i of its group at
// [k * RPT + i] (W x), up rows' (GLU), x . x (SS: NORM's, or INORM's halves' sums). Without it,
// no workgroup memory (but QOUT's): compilers that zero it at entry add a barrier there, and
// SwiftShader runs a kernel with barriers one coroutine per subgroup.
//@if WGRED
var<workgroup> part: array<array<f32, NT * RPT>, WG>;
//@if GLU
var<workgroup> part_up: array<array<f32, NT * RPT>, WG>;
//@end
//@if SS
var<workgroup> part_ss: array<array<f32, NT>, WG>;
//@end
//@end

// A row's output from its sums: s = W x, u = the up row's (GLU), ss = x . x (SS): divided by
// the RMS of x (SS), then silu(s) u (GLU).
fn finish(s: f32, u: f32, ss: f32) -> f32 {
  var inv = 1.0;
//@if SS
  inv = 1.0 / sqrt(ss / f32(p.cols) + p.eps);
//@end
  var v = s * inv;
//@if GLU
  v = v / (1.0 + exp(-v)) * (u * inv);
//@end
  return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
//@if XB
        @builtin(subgroup_invocation_id) lane: u32,
//@end
        @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = ((wg.y * nwg.x + wg.x) * RPW + l.x / TPR) * RPT;
  let b = batch_rows();
  let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
  // Row i of the group starts at byte rb_i (its up row at ru_i); rows past the last repeat it,
  // so that every load stays in bounds (only real rows are stored).
//@for i < RPT
  let rb_$i = min(row + $iu, p.rows - 1u) * row_bytes;
  let ru_$i = rb_$i + p.rows * row_bytes;
//@end
//@for k < NT
  var ss_$k = 0.0;
//@for i < RPT
  var s_$k_$i = 0.0;
  var u_$k_$i = 0.0;
//@end
//@end
//@if INORM
  // The halves' sums of squares (INORM, above), side by side across the row's threads.
  let nh = p.cols / 16u;
  for (var i = t; 2u * i < nh; i += TPR) {
    let e = XS[nh + i];
    ss_0 += e.x + select(e.y, 0.0, 2u * i + 1u >= nh);
  }
//@end
//@if WIDE
  // UN pieces per step (t, t + TPR, ...), all loaded before any is used; a piece past the row's
  // last loads the last and adds nothing (its inputs are masked to 0).
  let pieces = select(0u, p.cols / PIECE, row < p.rows);
  for (var base = 0u; base < pieces; base += UN * TPR) {
//@for u < UN
    let ok_$u = base + t + $uu * TPR < pieces;
    let pc_$u = min(base + t + $uu * TPR, pieces - 1u);
//@for i < RPT
    let q_$u_$i = pload(rb_$i, pc_$u);
//@if GLU
    let qu_$u_$i = pload(ru_$i, pc_$u);
//@end
//@end
//@end
//@if IDOT
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
//@end
//@if !IDOT
//@for u < UN
//@for r < RUNS
//@for j < RJ
//@for k < NT
    {
      let c = pcol(pc_$u, $ru) + 4u * $ju;
      var x = select(vec4<f32>(), xv4((b.y + $ku) * p.x_stride + c), ok_$u);
//@if NORM
      ss_$k += dot(x, x);
      x *= nw4(c);
//@end
//@for i < RPT
      s_$k_$i += dot(pdq(q_$u_$i, $ru, $ju), x);
//@if GLU
      u_$k_$i += dot(pdq(qu_$u_$i, $ru, $ju), x);
//@end
//@end
    }
//@end
//@end
//@end
//@end
//@end
  }
  let first = (p.cols / PIECE) * PIECE;
//@end
//@if XB
  // CPU adapters' form (XB: a whole row group per invocation, spans of 32, subgroups of SG >= 4
  // lanes): every lane of a subgroup steps through the same 32 columns, so lane k loads vec4s
  // k, k + SG, ... of the step's 8 (of X, and of NW with NORM) and subgroupBroadcast hands each
  // to every lane: such compilers load an address shared by the lanes once per lane, so the
  // activations cost 2 loads a lane a step instead of 8 (16 with NORM).
  let steps = select(0u, p.cols / 32u, (p.x_stride & 3u) == 0u);
  for (var cb = 0u; cb < 32u * steps; cb += 32u) {
//@for k < NT
    var xl_$k = array<vec4<f32>, (8u + SG - 1u) / SG>();
//@if NORM
    var nl_$k = array<vec4<f32>, (8u + SG - 1u) / SG>();
//@end
//@for r < XR
    xl_$k[$r] = X[(((b.y + $ku) * p.x_stride + cb) >> 2u) + min(SG * $ru + lane, 7u)];
//@if NORM
    nl_$k[$r] = NW[(cb >> 2u) + min(SG * $ru + lane, 7u)];
//@end
//@end
//@for g < 8
    var x_$k_$g = subgroupBroadcast(xl_$k[$gu / SG], $gu % SG);
//@if NORM
    ss_$k += dot(x_$k_$g, x_$k_$g);
    x_$k_$g *= subgroupBroadcast(nl_$k[$gu / SG], $gu % SG);
//@end
//@end
//@end
//@if BDOT
    // The format's block dot product (a block's words and scales loaded once; formats/common.wgsl).
//@for k < NT
    {
      let xa = array<vec4<f32>, 8>(x_$k_0, x_$k_1, x_$k_2, x_$k_3, x_$k_4, x_$k_5, x_$k_6, x_$k_7);
      let xs = dot((x_$k_0 + x_$k_1) + (x_$k_2 + x_$k_3) + ((x_$k_4 + x_$k_5) + (x_$k_6 + x_$k_7)), vec4<f32>(1.0));
//@for i < RPT
      s_$k_$i += bdot(rb_$i, cb, xa, xs);
//@if GLU
      u_$k_$i += bdot(ru_$i, cb, xa, xs);
//@end
//@end
    }
//@end
//@end
//@if !BDOT
//@for g < 8
//@for i < RPT
    {
      let w = dq4a(rb_$i, cb, 4u * $gu);
//@if GLU
      let v = dq4a(ru_$i, cb, 4u * $gu);
//@end
//@for k < NT
      s_$k_$i += dot(w, x_$k_$g);
//@if GLU
      u_$k_$i += dot(v, x_$k_$g);
//@end
//@end
    }
//@end
//@end
//@end
  }
  let first = 32u * steps;
//@end
//@if SPANS
  // The span form (neither WIDE nor XB).
  let spans = select(0u, p.cols / SPAN, row < p.rows);
  // Whole steps of UN x TPR spans (every thread the same count).
  for (var base = 0u; base + UN * TPR <= spans; base += UN * TPR) {
    let sp = base + t;
//@for j < UNG
    let cb_$j = (sp + ($ju / NG) * TPR) * SPAN;
    let c_$j = cb_$j + 4u * ($ju % NG);
//@for i < RPT
    let w_$j_$i = dqm(rb_$i, cb_$j, 4u * ($ju % NG));
//@if GLU
    let v_$j_$i = dqm(ru_$i, cb_$j, 4u * ($ju % NG));
//@end
//@end
//@end
//@for j < UNG
//@for k < NT
    {
      var x = xv4((b.y + $ku) * p.x_stride + c_$j);
//@if NORM
      ss_$k += dot(x, x);
      x *= nw4(c_$j);
//@end
//@for i < RPT
      s_$k_$i += dot(w_$j_$i, x);
//@if GLU
      u_$k_$i += dot(v_$j_$i, x);
//@end
//@end
    }
//@end
//@end
  }
  let first = ((spans / TPR) / UN) * UN * TPR * SPAN;
//@end
  // What the loop above leaves (fewer than UN x TPR spans, and the weights past the last whole
  // span), 4 weights at a time, side by side across the threads; the last partial group masked.
  let end = select(0u, p.cols, row < p.rows);
  for (var c = first + 4u * t; c < end; c += 4u * TPR) {
    let m = vec4<u32>(c) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(p.cols);
//@for i < RPT
    let w_$i = select(vec4<f32>(), dq4(rb_$i, c), m);
//@if GLU
    let v_$i = select(vec4<f32>(), dq4(ru_$i, c), m);
//@end
//@end
//@for k < NT
    {
      let xo = (b.y + $ku) * p.x_stride + c;
      var x = select(vec4<f32>(), vec4<f32>(x1(xo), x1(xo + 1u), x1(xo + 2u), x1(xo + 3u)), m);
//@if NORM
      ss_$k += dot(x, x);
      x *= select(vec4<f32>(), vec4<f32>(nw1(c), nw1(c + 1u), nw1(c + 2u), nw1(c + 3u)), m);
//@end
//@for i < RPT
      s_$k_$i += dot(w_$i, x);
//@if GLU
      u_$k_$i += dot(v_$i, x);
//@end
//@end
    }
//@end
  }
//@if SG
  // With subgroups (SG lanes, fixed): the row's lanes within one subgroup first, by butterfly
  // shuffles, so that every lane holds their sum; workgroup memory then only joins the row's
  // TPR / SG subgroups (no barrier at all when TPR <= SG). Lane = l.x % SG: a 1-D workgroup of
  // whole subgroups is split into consecutive runs of SG invocations (as drivers lay them out).
  for (var h = LANES / 2u; h > 0u; h >>= 1u) {
//@for k < NT
//@if SS
    ss_$k += subgroupShuffleXor(ss_$k, h);
//@end
//@for i < RPT
    s_$k_$i += subgroupShuffleXor(s_$k_$i, h);
//@if GLU
    u_$k_$i += subgroupShuffleXor(u_$k_$i, h);
//@end
//@end
//@end
  }
//@end
//@if !WGRED
  // The row's sums are in this thread (every lane of the row, with SG).
  if (t == 0u && row < p.rows) {
//@for k < NT
    if ($ku < b.x) {
//@if HALF_ROWS
      var y_$k = array<f32, RPT>();
//@end
//@for i < RPT
      if (row + $iu < p.rows) {
//@if QOUT
        QV[(l.x / TPR) * RPT + $iu] = store($ku, row + $iu, finish(s_$k_$i, u_$k_$i, ss_$k));
//@end
//@if !QOUT
//@if HALF_ROWS
        y_$k[$iu] = finish(s_$k_$i, u_$k_$i, ss_$k);
//@end
//@if !HALF_ROWS
        store($ku, row + $iu, finish(s_$k_$i, u_$k_$i, ss_$k));
//@end
//@end
      }
//@end
//@if HALF_ROWS
      store_halves($ku, row, y_$k);
//@end
    }
//@end
  }
//@end
//@if WGRED
//@for k < NT
//@for i < RPT
  part[l.x][$ku * RPT + $iu] = s_$k_$i;
//@if GLU
  part_up[l.x][$ku * RPT + $iu] = u_$k_$i;
//@end
//@end
//@if SS
  part_ss[l.x][$ku] = ss_$k;
//@end
//@end
  workgroupBarrier();
  for (var h = TPR / 2u; h >= LANES; h >>= 1u) {
    if (t < h) {
      for (var k = 0u; k < NT * RPT; k++) {
        part[l.x][k] += part[l.x + h][k];
//@if GLU
        part_up[l.x][k] += part_up[l.x + h][k];
//@end
      }
//@if SS
      for (var k = 0u; k < NT; k++) { part_ss[l.x][k] += part_ss[l.x + h][k]; }
//@end
    }
    workgroupBarrier();
  }
  if (t == 0u && row < p.rows) {
    for (var k = 0u; k < min(NT, b.x); k++) {
      var ss = 0.0;
//@if SS
      ss = part_ss[l.x][k];
//@end
//@if HALF_ROWS
      var y = array<f32, RPT>();
//@end
      for (var i = 0u; i < min(RPT, p.rows - row); i++) {
        var u = 0.0;
//@if GLU
        u = part_up[l.x][k * RPT + i];
//@end
//@if QOUT
        QV[(l.x / TPR) * RPT + i] = store(k, row + i, finish(part[l.x][k * RPT + i], u, ss));
//@end
//@if !QOUT
//@if HALF_ROWS
        y[i] = finish(part[l.x][k * RPT + i], u, ss);
//@end
//@if !HALF_ROWS
        store(k, row + i, finish(part[l.x][k * RPT + i], u, ss));
//@end
//@end
      }
//@if HALF_ROWS
      store_halves(k, row, y);
//@end
    }
  }
//@end
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
