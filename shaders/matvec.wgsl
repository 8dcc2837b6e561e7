// matvec: Y[row_start + r] (+)= sum_c W[r][c] * X[c] for the rows of one part of a weight matrix
// kept in its GGUF storage format. Composed at pipeline creation (gpu::compose) after
// `const TPR, RPW` (threads per row, rows per workgroup; TPR * RPW = 64), formats/common.wgsl
// and one formats/<type>.wgsl, which supplies BLOCK_ELEMS, BLOCK_BYTES, UNIT, unit_dot, dequant.
// Bindings: 0 {rows, cols, accumulate, row_start}, 1 W: the part's rows as stored in the file
// (row r at byte r * row_bytes, row_bytes = cols / BLOCK_ELEMS * BLOCK_BYTES), read as u32 words;
// 2 X [cols] f32; 3 Y f32.
// Workgroup of 64 = RPW rows x TPR threads; thread t of a row takes units t, t + TPR, ... (so
// consecutive threads read consecutive runs of the row's bytes), then the row's TPR partial
// sums are added in workgroup memory. Workgroups past 65535 wrap into workgroup_id.y.
// The maths: each weight is exactly ggml's dequantised f32 value (see the format file), then an
// f32 dot product.
struct P { rows: u32, cols: u32, accumulate: u32, row_start: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = (wg.y * nwg.x + wg.x) * RPW + l.x / TPR;
  var s = 0.0;
  if (row < p.rows) {
    let rb = row * (p.cols / BLOCK_ELEMS * BLOCK_BYTES);
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
  if (t == 0u && row < p.rows) {
    let o = p.row_start + row;
    if (p.accumulate != 0u) { Y[o] = Y[o] + part[l.x]; } else { Y[o] = part[l.x]; }
  }
}
