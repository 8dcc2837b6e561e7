// matvec: Y (+)= W X for a few tokens (NT at most; 1 when decoding), reading each weight once.
// Bindings and layout: linear.wgsl. Composed (kernels::compose) with `const TPR, RPW, NT`:
// workgroup of 64 = RPW rows x TPR threads per row; thread t of a row takes the 4-weight groups
// t, t + TPR, ... (so that the TPR threads' loads of weights and of X are side by side: a few
// cache lines per load instruction, not one per thread), decodes each group once with the
// format's dq4 and multiplies it into all NT token rows; the row's TPR partial sums are then
// added in workgroup memory. Workgroups past 65535 wrap into
// workgroup_id.y. The maths: each weight is exactly ggml's dequantised f32 value, then an f32
// dot product per token.
const U: u32 = 4u;
var<workgroup> part: array<array<f32, NT>, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u,
        @builtin(local_invocation_id) l: vec3u) {
  let t = l.x % TPR;
  let row = (wg.y * nwg.x + wg.x) * RPW + l.x / TPR;
  let b = batch_rows();
  var s: array<f32, NT>;
  if (row < p.rows) {
    let rb = row * (p.cols / BLOCK_ELEMS * BLOCK_BYTES);
    let groups = p.cols / 4u;
    // U groups per step, their loads issued before any is used: each thread keeps U loads in
    // flight (decode is bound by memory latency x loads in flight, not by arithmetic).
    var g = t;
    for (; g + (U - 1u) * TPR < groups; g += U * TPR) {
      var w: array<vec4<f32>, U>;
      var x: array<array<vec4<f32>, U>, NT>;
      for (var u = 0u; u < U; u++) {
        let c = 4u * (g + u * TPR);
        w[u] = dq4(rb, c);
        for (var k = 0u; k < NT; k++) { x[k][u] = xv4((b.y + k) * p.x_stride + c); }
      }
      for (var u = 0u; u < U; u++) {
        for (var k = 0u; k < NT; k++) { s[k] += dot(w[u], x[k][u]); }
      }
    }
    for (; g < groups; g += TPR) {
      let c = 4u * g;
      let w = dq4(rb, c);
      for (var k = 0u; k < NT; k++) { s[k] += dot(w, xv4((b.y + k) * p.x_stride + c)); }
    }
    for (var c = groups * 4u + t; c < p.cols; c += TPR) {
      let w = dequant(rb, c);
      for (var k = 0u; k < NT; k++) { s[k] += w * x1((b.y + k) * p.x_stride + c); }
    }
  }
  part[l.x] = s;
  workgroupBarrier();
  for (var h = TPR / 2u; h > 0u; h >>= 1u) {
    if (t < h) {
      for (var k = 0u; k < NT; k++) { part[l.x][k] += part[l.x + h][k]; }
    }
    workgroupBarrier();
  }
  if (t == 0u && row < p.rows) {
    for (var k = 0u; k < NT; k++) {
      if (k < b.x) { store(k, row, part[l.x][k]); }
    }
  }
}
