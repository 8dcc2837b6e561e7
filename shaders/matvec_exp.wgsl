// matvec_exp: the selected experts' gate or up projections: y[j][r] = sum_c W[sel[j]][r][c] x[c].
// Bindings: 0 {rows = ff_exp, cols = d}, 1 sel [k], 2 W [E][rows][cols] f32, 3 x [cols], 4 y [k][rows].
// Workgroup (r, j): one of 64 per output row and selected expert.
struct P { rows: u32, cols: u32, _a: u32, _b: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> sel: array<u32>;
@group(0) @binding(2) var<storage, read> W: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let row = wg.x;
  let j = wg.y;
  let base = (sel[j] * p.rows + row) * p.cols;
  var s = 0.0;
  for (var c = l.x; c < p.cols; c += 64u) { s += W[base + c] * x[c]; }
  part[l.x] = s;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  if (l.x == 0u) { y[j * p.rows + row] = part[0]; }
}
