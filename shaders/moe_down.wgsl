// moe_down: X_out[i][r] += sum_j gate[i][j] * sum_c W[sel[i][j]][r][c] H[i][j][c]: each token's
// selected experts' down projections, weighted by the router gates, added to the residual
// stream. The expert stack [E][rows][cols] is kept in its GGUF storage format, split into parts
// of whole experts; this dispatch adds the picks among experts e0 .. e0 + ne. Composed like
// matvec.wgsl (TPR, RPW, formats/common.wgsl, formats/<type>.wgsl).
// Bindings: 0 {rows = d, cols = ff_exp, k, e0, ne, h_stride, y_stride}, 1 step {n_tokens}, 2 sel
// [tokens][k], 3 gate [tokens][k], 4 W: experts e0.. as stored (expert e row r at byte
// ((e - e0) * rows + r) * row_bytes), 5 X = H [tokens][h_stride] (pick j at j * cols), 6 Y = the
// residual [tokens][y_stride]. Workgroup (x, 1, i): RPW rows x TPR threads of token i; each
// thread sums gate[j] * (its share of pick j's dot) over the picks, then the row's TPR partial
// sums are added in workgroup memory.
struct P { rows: u32, cols: u32, k: u32, e0: u32, ne: u32, h_stride: u32, y_stride: u32, _a: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> sel: array<u32>;
@bind var<storage, read> gate: array<f32>;
@bind var<storage, read> W: array<u32>;
@bind var<storage, read> X: array<vec4<f32>>;
@bind var<storage, read_write> Y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = wg.x * RPW + l.x / TPR;
  let i = wg.z;
  let live = row < p.rows && i < st.n_tokens;
  var s = 0.0;
  if (live) {
    let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
    for (var j = 0u; j < p.k; j++) {
      let e = sel[i * p.k + j];
      if (e >= p.e0 && e < p.e0 + p.ne) {
        let rb = ((e - p.e0) * p.rows + row) * row_bytes;
        s += gate[i * p.k + j] * row_dot(rb, p.cols, i * p.h_stride + j * p.cols, t, TPR);
      }
    }
  }
  part[l.x] = s;
  workgroupBarrier();
  for (var h = TPR / 2u; h > 0u; h >>= 1u) {
    if (t < h) { part[l.x] += part[l.x + h]; }
    workgroupBarrier();
  }
  if (t == 0u && live) {
    let o = i * p.y_stride + row;
    Y[o] = Y[o] + part[l.x];
  }
}
