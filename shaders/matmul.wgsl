// matmul: Y (+)= W X for a batch of tokens, tiled (the prefill path; matvec.wgsl decodes).
// Bindings and layout: linear.wgsl. Composed (kernels::compose) with the tile shape
// `const BM, BN, TM, TN` (rows and tokens per workgroup, per thread) and one formats/<type>.wgsl.
// Each step over K = 32 columns: the workgroup decodes its BM x 32 weights once with the format's
// dq4 into workgroup memory (exact f32, as ggml dequantises), loads the BN x 32 activations, and
// each thread accumulates its TM x TN outputs from the two tiles, while its share of the next
// step's tiles is loaded into registers. Grid: (rows / BM, tokens / BN).
// Workgroup memory: (BM + BN) * 32 * 4 bytes (16 KiB for 64 x 64: WebGPU's default limit).
const BK: u32 = 32u;
const WG: u32 = (BM / TM) * (BN / TN);
var<workgroup> Ws: array<vec4<f32>, BK * BM / 4u>; // [k][m / 4]
var<workgroup> Xs: array<vec4<f32>, BK * BN / 4u>; // [k][n / 4]

// Per thread and step: NW runs of 4 weights and NX runs of 4 activations (linear.wgsl's tile_w,
// tile_x: eight consecutive threads take one row's 32 weights, so that a load instruction reads
// a few rows' contiguous bytes).
const NW: u32 = (BM * 8u + WG - 1u) / WG;
const NX: u32 = (BN * 8u + WG - 1u) / WG;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let b = batch_rows();
  let m0 = wg.x * BM;
  let n0 = wg.y * BN;
  let tm = l.x % (BM / TM); // this thread's rows: m0 + tm * TM ..
  let tn = l.x / (BM / TM); // tokens: n0 + tn * TN ..
  let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
  var acc = array<array<vec4<f32>, TN>, TM / 4u>();
  // The next step's tiles are loaded into registers while this step's are multiplied (software
  // pipelining): the loads' latency overlaps the arithmetic instead of stalling every step.
  var wr = array<vec4<f32>, NW>();
  var xr = array<vec4<f32>, NX>();
  for (var r = 0u; r < NW; r++) { wr[r] = tile_w(l.x + r * WG, 0u, m0, row_bytes, BM); }
  for (var r = 0u; r < NX; r++) { xr[r] = tile_x(l.x + r * WG, 0u, n0, b, BN); }
  for (var k0 = 0u; k0 < p.cols; k0 += BK) {
    for (var r = 0u; r < NW; r++) {
      let i = l.x + r * WG;
      if (i < BM * 8u) {
        for (var e = 0u; e < 4u; e++) { Ws[(4u * (i % 8u) + e) * (BM / 4u) + (i / 32u)][(i / 8u) & 3u] = wr[r][e]; }
      }
    }
    for (var r = 0u; r < NX; r++) {
      let i = l.x + r * WG;
      if (i < BN * 8u) {
        for (var e = 0u; e < 4u; e++) { Xs[(4u * (i % 8u) + e) * (BN / 4u) + (i / 32u)][(i / 8u) & 3u] = xr[r][e]; }
      }
    }
    workgroupBarrier();
    if (k0 + BK < p.cols) {
      for (var r = 0u; r < NW; r++) { wr[r] = tile_w(l.x + r * WG, k0 + BK, m0, row_bytes, BM); }
      for (var r = 0u; r < NX; r++) { xr[r] = tile_x(l.x + r * WG, k0 + BK, n0, b, BN); }
    }
    for (var k = 0u; k < BK; k++) {
      var a = array<vec4<f32>, TM / 4u>();
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
