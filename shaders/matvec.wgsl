// matvec: y[row_start + r] (+)= sum_c W[r][c] * x[c] for the rows of one part of an f32 matrix.
// Bindings: 0 {rows, cols, accumulate, row_start}, 1 W [rows][cols] f32, 2 x [cols], 3 y.
// One workgroup of 64 per row; rows past 65535 wrap into workgroup_id.y (dispatch limit).
struct P { rows: u32, cols: u32, accumulate: u32, row_start: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> W: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let row = wg.y * nwg.x + wg.x;
  if (row >= p.rows) { return; }
  let base = row * p.cols;
  var s = 0.0;
  for (var c = l.x; c < p.cols; c += 64u) { s += W[base + c] * x[c]; }
  part[l.x] = s;
  workgroupBarrier();
  for (var k = 32u; k > 0u; k >>= 1u) {
    if (l.x < k) { part[l.x] += part[l.x + k]; }
    workgroupBarrier();
  }
  if (l.x == 0u) {
    let o = p.row_start + row;
    if (p.accumulate != 0u) { y[o] = y[o] + part[0]; } else { y[o] = part[0]; }
  }
}
