// matvec_exp: the selected experts' gate or up projections, Y[j][r] = sum_c W[sel[j]][r][c] X[c],
// over an expert stack [E][rows][cols] kept in its GGUF storage format, split into parts of whole
// experts (experts e0 .. e0 + ne in this dispatch's buffer; a pick outside them is another
// part's). Composed like matvec.wgsl (TPR, RPW, formats/common.wgsl, formats/<type>.wgsl).
// Bindings: 0 {rows = ff_exp, cols = d, e0 | ne << 16, y0}, 1 sel [k] u32, 2 W: experts e0.. as stored
// (expert e row r at byte ((e - e0) * rows + r) * row_bytes), 3 X [cols], 4 Y: [k][rows] from Y[y0].
// Workgroup (x, j): RPW rows x TPR threads of pick j, reduced in workgroup memory as matvec.
struct P { rows: u32, cols: u32, experts: u32, y0: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> sel: array<u32>;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> Y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = wg.x * RPW + l.x / TPR;
  let j = wg.y;
  let e = sel[j];
  let e0 = p.experts & 0xffffu;
  let ne = p.experts >> 16u;
  let mine = row < p.rows && e >= e0 && e < e0 + ne;
  var s = 0.0;
  if (mine) {
    let rb = ((e - e0) * p.rows + row) * (p.cols / BLOCK_ELEMS * BLOCK_BYTES);
    let units = p.cols / UNIT;
    for (var u = t; u < units; u += TPR) { s += unit_dot(rb, u, 0u); }
    for (var c = units * UNIT + t; c < p.cols; c += TPR) { s += dequant(rb, c) * x1(c); }
  }
  part[l.x] = s;
  workgroupBarrier();
  for (var k = TPR / 2u; k > 0u; k >>= 1u) {
    if (t < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  if (t == 0u && mine) { Y[p.y0 + j * p.rows + row] = part[l.x]; }
}
