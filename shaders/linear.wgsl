// linear.wgsl: the bindings shared by the kernels of a linear op Y (+)= W X over a batch of
// tokens: matvec.wgsl, and the tiled matmul.wgsl, matmul_coop.wgsl (matrix units) and
// matmul_cpu.wgsl (CPU adapters) (kernels::Kernel; linear::Builder::linear picks one per batch). Composed after formats/common.wgsl and one formats/<type>.wgsl.
// W: one part of a [rows][cols] weight matrix in its GGUF storage format (as formats/<type>.wgsl
// reads it, regrouped for Q8_0 rows of 64k weights and Q6_K rows of 2048k; row r at byte
// r * cols / BLOCK_ELEMS * BLOCK_BYTES of this part's buffer). X: activations [n][x_stride] f32,
// token i's input at X[(x_row0 + i) * x_stride ..]. Y: [n][y_stride] f32, token i's output row r
// at Y[i * y_stride + y0 + r]; with `accumulate` = 1 added to what is there (the residual stream),
// with 2 written at Y row pos0 + i instead (the token's row of the KV cache), with 3 the same into
// an f16 cache (matvec.wgsl's one-token form with HALF_ROWS, two rows a word).
// Token rows: 0 .. st.n_tokens, or only the last one (`last_only`: the output head, which needs
// the logits after the last token alone; it reads X row n - 1 and writes Y row 0). `eps`: the
// RMSNorm epsilon of matvec's fused norm (NORM).
// `scale` multiplies W X before it is stored or added (Granite's residual and logit multipliers).
// `gelu` = 1: matvec.wgsl's fused GLU is GEGLU (activation.wgsl), else SwiGLU.
struct Linear { rows: u32, cols: u32, x_stride: u32, y_stride: u32, y0: u32, accumulate: u32, last_only: u32, eps: f32, scale: f32, gelu: u32, _b: u32, _c: u32 };
@bind var<uniform> p: Linear;
@bind var<uniform> st: Step;
@bind var<storage, read> W: array<u32>;
//@if !XH
@bind var<storage, read> X: array<vec4<f32>>;
//@end
//@if XH
// matmul_coop reads the activations as split.wgsl's f16 halves, 8 a vec4<u32>: hi here (lo as
// its XL).
@bind var<storage, read> X: array<vec4<u32>>;
//@end
//@if !HALF_ROWS
@bind var<storage, read_write> Y: array<f32>;
//@end
//@if HALF_ROWS
// matvec.wgsl's HALF_ROWS: Y is an f16 cache, two halves a word (linear::AT_POSITION16), written
// as words (an f32 view would carry them through float registers, which may flush subnormals).
@bind var<storage, read_write> Y: array<u32>;
//@end

// Token rows this dispatch computes, and the X row of the first.
fn batch_rows() -> vec2<u32> {
  if (p.last_only != 0u) { return vec2<u32>(1u, st.n_tokens - 1u); }
  return vec2<u32>(st.n_tokens, 0u);
}

// p.accumulate: write token i's row at Y row pos0 + i (linear::AT_POSITION; with
// linear::AT_POSITION16 as f16 values, matvec.wgsl's HALF_ROWS).
const AT_POSITION: u32 = 2u;

//@if !HALF_ROWS
// Token i's output row r: v (at row pos0 + i with AT_POSITION), or with `accumulate` = 1 v added
// to it; returns what was written.
fn store(i: u32, r: u32, v: f32) -> f32 {
  var o = i * p.y_stride + p.y0 + r;
  if (p.accumulate == AT_POSITION) { o += st.pos0 * p.y_stride; }
  var y = v * p.scale;
  if (p.accumulate == 1u) { y += Y[o]; }
  Y[o] = y;
  return y;
}
//@end

// The tiled kernels' loads: weights c .. c + 4 of the row starting at byte rb (matmul,
// matmul_coop), and X elements xo .. xo + 4 (column c of a token's row; matmul only: matmul_coop
// reads f16 halves), each zero past the row's end.
fn w_run4(rb: u32, c: u32) -> vec4<f32> {
  if (c + 4u <= p.cols) { return dq4(rb, c); }
  var w = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c + e < p.cols) { w[e] = dequant(rb, c + e); }
  }
  return w;
}

//@if !XH
fn x_run4(xo: u32, c: u32) -> vec4<f32> {
  if (c + 4u <= p.cols && (p.x_stride & 3u) == 0u) { return X[xo >> 2u]; }
  var x = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    if (c + e < p.cols) { x[e] = x1(xo + e); }
  }
  return x;
}

//@end

// Run i of a tiled kernel's weight tile (bm rows x 32 columns from column k0; run i: row i / 8,
// columns 4 (i % 8) .., so that eight consecutive threads read one row's adjacent bytes), zero
// past the tile or the matrix.
fn tile_w(i: u32, k0: u32, m0: u32, row_bytes: u32, bm: u32) -> vec4<f32> {
  let m = i / 8u;
  if (i >= bm * 8u || m0 + m >= p.rows) { return vec4<f32>(0.0); }
  return w_run4((m0 + m) * row_bytes, k0 + 4u * (i % 8u));
}

//@if !XH
// Run i of a tiled kernel's activation tile (bn tokens from token n0), zero past the tile, the
// batch or the row.
fn tile_x(i: u32, k0: u32, n0: u32, b: vec2<u32>, bn: u32) -> vec4<f32> {
  let n = i / 8u;
  let c = k0 + 4u * (i % 8u);
  if (i >= bn * 8u || n0 + n >= b.x) { return vec4<f32>(0.0); }
  return x_run4((b.y + n0 + n) * p.x_stride + c, c);
}
//@end
