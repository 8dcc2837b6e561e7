// matvec: Y (+)= W X for a few tokens (NT at most; 1 when decoding), reading each weight once.
// Bindings and layout: linear.wgsl. Composed (kernels::compose) with `const TPR, RPW, NT`:
// workgroup of 64 = RPW rows x TPR threads per row; thread t of a row takes chunks t, t + TPR, ...
// of CHUNK weights (consecutive threads read consecutive runs of the row's bytes), decodes each
// 4 weights once with the format's dq4 and multiplies them into all NT token rows; the row's TPR
// partial sums are then added in workgroup memory. Workgroups past 65535 wrap into
// workgroup_id.y. The maths: each weight is exactly ggml's dequantised f32 value, then an f32
// dot product per token.
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
    let chunks = p.cols / CHUNK;
    for (var ch = t; ch < chunks; ch += TPR) {
      let c0 = ch * CHUNK;
      for (var i = 0u; i < CHUNK; i += 4u) {
        let w = dq4(rb, c0 + i);
        for (var k = 0u; k < NT; k++) { s[k] += dot(w, xv4((b.y + k) * p.x_stride + c0 + i)); }
      }
    }
    for (var c = chunks * CHUNK + t; c < p.cols; c += TPR) {
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
