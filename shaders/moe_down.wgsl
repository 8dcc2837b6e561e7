// moe_down: x[r] += sum_j gate[j] * sum_c W[sel[j]][r][c] h[j][c]: the selected experts' down
// projections, weighted by the router gates, added to the residual stream.
// Bindings: 0 {rows = d, cols = ff_exp, k}, 1 sel [k], 2 gate [k], 3 W [E][rows][cols] f32,
// 4 h [k][cols], 5 x [rows]. One workgroup of 64 per output row.
struct P { rows: u32, cols: u32, k: u32, _a: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> sel: array<u32>;
@group(0) @binding(2) var<storage, read> gate: array<f32>;
@group(0) @binding(3) var<storage, read> W: array<f32>;
@group(0) @binding(4) var<storage, read> h: array<f32>;
@group(0) @binding(5) var<storage, read_write> x: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let row = wg.x;
  var acc = 0.0;
  for (var j = 0u; j < p.k; j++) {
    let base = (sel[j] * p.rows + row) * p.cols;
    var s = 0.0;
    for (var c = l.x; c < p.cols; c += 64u) { s += W[base + c] * h[j * p.cols + c]; }
    part[l.x] = s;
    workgroupBarrier();
    for (var k = 32u; k > 0u; k >>= 1u) {
      if (l.x < k) { part[l.x] += part[l.x + k]; }
      workgroupBarrier();
    }
    acc += gate[j] * part[0];
    workgroupBarrier();
  }
  if (l.x == 0u) { x[row] = x[row] + acc; }
}
