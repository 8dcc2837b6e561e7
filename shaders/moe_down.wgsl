// moe_down: X_out[r] += sum_j gate[j] * sum_c W[sel[j]][r][c] H[j][c]: the selected experts' down
// projections, weighted by the router gates, added to the residual stream. The expert stack
// [E][rows][cols] is kept in its GGUF storage format, split into parts of whole experts; this
// dispatch adds the picks among experts e0 .. e0 + ne. Composed like matvec.wgsl (TPR, RPW,
// formats/common.wgsl, formats/<type>.wgsl).
// Bindings: 0 {rows = d, cols = ff_exp, k, e0}, 1 {ne, ..}, 2 sel [k], 3 gate [k], 4 W: experts
// e0.. as stored (expert e row r at byte ((e - e0) * rows + r) * row_bytes), 5 X = H [k][cols],
// 6 Y = the residual [rows].
// Workgroup: RPW rows x TPR threads; each thread sums gate[j] * (its share of pick j's dot) over
// the picks, then the row's TPR partial sums are added in workgroup memory.
struct P { rows: u32, cols: u32, k: u32, e0: u32 };
struct Q { ne: u32, _a: u32, _b: u32, _c: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> q: Q;
@group(0) @binding(2) var<storage, read> sel: array<u32>;
@group(0) @binding(3) var<storage, read> gate: array<f32>;
@group(0) @binding(4) var<storage, read> W: array<u32>;
@group(0) @binding(5) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> Y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = wg.x * RPW + l.x / TPR;
  var s = 0.0;
  if (row < p.rows) {
    let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
    let units = p.cols / UNIT;
    for (var j = 0u; j < p.k; j++) {
      let e = sel[j];
      if (e >= p.e0 && e < p.e0 + q.ne) {
        let rb = ((e - p.e0) * p.rows + row) * row_bytes;
        let xo = j * p.cols;
        var sj = 0.0;
        for (var u = t; u < units; u += TPR) { sj += unit_dot(rb, u, xo); }
        for (var c = units * UNIT + t; c < p.cols; c += TPR) { sj += dequant(rb, c) * x1(xo + c); }
        s += gate[j] * sj;
      }
    }
  }
  part[l.x] = s;
  workgroupBarrier();
  for (var k = TPR / 2u; k > 0u; k >>= 1u) {
    if (t < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  if (t == 0u && row < p.rows) { Y[row] = Y[row] + part[l.x]; }
}
