// matvec.wgsl: what the matrix-vector kernel's forms share, Y (+)= W X for a few tokens (NT at
// most; 1 when decoding), reading each weight once. Bindings and layout: linear.wgsl. Composed
// (kernels::compose) after the format's file and before one form's file (kernels::MatvecForm):
// matvec_rows.wgsl (GPUs: a row's TPR threads side by side over its spans or 16-byte pieces),
// matvec_idot.wgsl (GPUs, one token: integer dot products against quantised activations) and
// matvec_broadcast.wgsl (CPU adapters: a row group per invocation, the activations broadcast
// across a subgroup). Each form's `main` takes its row group, its accumulators and, at its end,
// the row's sums joined and written from the shared fragments matvec_begin.wgsl and
// matvec_end.wgsl (`//@include`, expanded at compose time).
// Constants: `const WG, TPR, RPW, RPT, NT, SPAN, NG, UN, NORM, GLU, SG, LANES` (kernels::compose)
// and the `//@if` / `//@for` bounds of kernels::matvec: a workgroup of WG = RPW row groups x TPR
// threads; a row group is RPT rows (each load of X serves the RPT rows). Workgroups past 65535
// wrap into workgroup_id.y. The maths: each weight is exactly ggml's dequantised f32 value, then
// an f32 dot product per token (the integer form: exact integer products against 24-bit
// activations).
// The `//@for` blocks are unrolled at compose time (kernels::unroll) into named registers: the
// drivers' compilers keep a private array indexed in a loop in memory when they do not unroll it.
//
// LANES (composed, kernels::matvec_lanes): the lanes of a row summed by subgroup shuffles (SG >
// 0), else 1; the rest of the TPR partial sums are added in workgroup memory (WGRED).

// Decode fusions (linear::Fuse), so that a decoded token needs fewer dispatches:
// NORM = 1: X holds the raw residual stream and NW the RMSNorm weights; the kernel computes
//   (W (x * nw)) / sqrt(mean(x^2) + eps), the sum of squares taken from the same loads of x
//   (the row's threads read all of x between them), instead of reading rmsnorm.wgsl's output.
//   (The integer form's norm is its INORM: matvec_idot.wgsl.) SS = NORM or INORM.
// GLU = 1: W is [gate; up] (2 * p.rows rows); row r of the output is
//   act(gate_r . x) * (up_r . x) (SwiGLU, or GEGLU with p.gelu), the two rows sharing each load
//   of x.
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
// pload, pdq, pint, pab: the part of its file after `//@pieces`; formats/common.wgsl), through a
// second view of W: thread t of a row takes pieces t, t + TPR, ..., side by side across the row's
// threads (a warp's load is 512 contiguous bytes but for the K-quants' block headers), instead
// of a span's 4-byte loads (matvec_rows.wgsl's and matvec_idot.wgsl's, with matvec_pieces.wgsl).
//@if WIDE
@bind var<storage, read> W4: array<vec4<u32>>;
//@end

// WGRED (more threads a row than LANES): per thread, token k's sum for row i of its group at
// [k * RPT + i] (W x), up rows' (GLU), x . x (SS: NORM's, or INORM's halves' sums). Without it,
// no workgroup memory (but the integer form's QOUT): compilers that zero it at entry add a
// barrier there, and SwiftShader runs a kernel with barriers one coroutine per subgroup.
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
// the RMS of x (SS), then act(s) u (GLU: SiLU, or GELU with p.gelu, activation.wgsl).
fn finish(s: f32, u: f32, ss: f32) -> f32 {
  var inv = 1.0;
//@if SS
  inv = 1.0 / sqrt(ss / f32(p.cols) + p.eps);
//@end
  var v = s * inv;
//@if GLU
  v = gated(v, u * inv, p.gelu != 0u);
//@end
  return v;
}
