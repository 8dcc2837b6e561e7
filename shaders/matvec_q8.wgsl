// matvec_q8: matvec over a Q8_0 matrix kept quantised (GGML Q8_0: 32 weights per block, one scale).
// Repacked at load: Q [rows][cols/4] u32 of four int8, D [rows][cols/32] f32 scales.
// Each weight is d * q in f32 (exactly ggml's dequantisation), then the same dot as matvec.
// Bindings: 0 {rows, cols, accumulate, row_start}, 1 Q, 2 D, 3 x [cols], 4 y.
struct P { rows: u32, cols: u32, accumulate: u32, row_start: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> Q: array<u32>;
@group(0) @binding(2) var<storage, read> D: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let row = wg.y * nwg.x + wg.x;
  if (row >= p.rows) { return; }
  let words = p.cols / 4u;
  var s = 0.0;
  for (var w = l.x; w < words; w += 64u) {
    let packed = Q[row * words + w];
    let sc = D[row * (p.cols / 32u) + w / 8u];
    let c = 4u * w;
    for (var b = 0u; b < 4u; b++) {
      let q = f32(i32(packed << (24u - 8u * b)) >> 24u);
      s += (sc * q) * x[c + b];
    }
  }
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
