// matmul: Y (+)= W X for a batch of tokens, tiled (the prefill path; matvec.wgsl decodes).
// Bindings and layout: linear.wgsl. Composed (kernels::compose) with the tile shape
// `const BM, BN, TM, TN` (rows and tokens per workgroup, per thread) and one formats/<type>.wgsl.
// Each step over K = 32 columns: the workgroup decodes its BM x 32 weights once with the format's
// dq4 into workgroup memory (exact f32, as ggml dequantises), loads the BN x 32 activations, and
// each thread accumulates its TM x TN outputs from the two tiles. Grid: (rows / BM, tokens / BN).
// Workgroup memory: (BM + BN) * 32 * 4 bytes (16 KiB for 64 x 64: WebGPU's default limit).
const BK: u32 = 32u;
const WG: u32 = (BM / TM) * (BN / TN);
var<workgroup> Ws: array<vec4<f32>, BK * BM / 4u>; // [k][m / 4]
var<workgroup> Xs: array<vec4<f32>, BK * BN / 4u>; // [k][n / 4]

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let b = batch_rows();
  let m0 = wg.x * BM;
  let n0 = wg.y * BN;
  let tm = l.x % (BM / TM); // this thread's rows: m0 + tm * TM ..
  let tn = l.x / (BM / TM); // tokens: n0 + tn * TN ..
  let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
  var acc: array<array<vec4<f32>, TN>, TM / 4u>;
  for (var k0 = 0u; k0 < p.cols; k0 += BK) {
    // Weights: BM rows x 8 runs of 4; eight consecutive threads take one row's 32 weights, so
    // that a load instruction reads a few rows' contiguous bytes.
    for (var i = l.x; i < BM * 8u; i += WG) {
      let m = i / 8u;
      let j = i % 8u;
      let c = k0 + 4u * j;
      var w = vec4<f32>(0.0);
      if (m0 + m < p.rows) {
        let rb = (m0 + m) * row_bytes;
        if (c + 4u <= p.cols) {
          w = dq4(rb, c);
        } else {
          for (var e = 0u; e < 4u; e++) {
            if (c + e < p.cols) { w[e] = dequant(rb, c + e); }
          }
        }
      }
      for (var e = 0u; e < 4u; e++) { Ws[(4u * j + e) * (BM / 4u) + (m >> 2u)][m & 3u] = w[e]; }
    }
    // Activations: BN tokens x 8 runs of 4.
    for (var i = l.x; i < BN * 8u; i += WG) {
      let n = i / 8u;
      let j = i % 8u;
      let c = k0 + 4u * j;
      var x = vec4<f32>(0.0);
      if (n0 + n < b.x) {
        let xo = (b.y + n0 + n) * p.x_stride + c;
        if (c + 4u <= p.cols && (p.x_stride & 3u) == 0u) {
          x = X[xo >> 2u];
        } else {
          for (var e = 0u; e < 4u; e++) {
            if (c + e < p.cols) { x[e] = x1(xo + e); }
          }
        }
      }
      for (var e = 0u; e < 4u; e++) { Xs[(4u * j + e) * (BN / 4u) + (n >> 2u)][n & 3u] = x[e]; }
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k++) {
      var a: array<vec4<f32>, TM / 4u>;
      for (var i = 0u; i < TM / 4u; i++) { a[i] = Ws[k * (BM / 4u) + tm * (TM / 4u) + i]; }
      for (var j4 = 0u; j4 < TN / 4u; j4++) {
        let x = Xs[k * (BN / 4u) + tn * (TN / 4u) + j4];
        for (var i = 0u; i < TM / 4u; i++) {
          acc[i][4u * j4] += a[i] * x.x;
          acc[i][4u * j4 + 1u] += a[i] * x.y;
          acc[i][4u * j4 + 2u] += a[i] * x.z;
          acc[i][4u * j4 + 3u] += a[i] * x.w;
        }
      }
    }
    workgroupBarrier();
  }
  for (var j = 0u; j < TN; j++) {
    let n = n0 + tn * TN + j;
    if (n < b.x) {
      for (var i = 0u; i < TM / 4u; i++) {
        for (var e = 0u; e < 4u; e++) {
          let m = m0 + tm * TM + 4u * i + e;
          if (m < p.rows) { store(n, m, acc[i][j][e]); }
        }
      }
    }
  }
}
