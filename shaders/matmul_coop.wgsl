// matmul_coop: Y (+)= W X for a batch of tokens on the GPU's matrix units (tensor cores), through
// wgpu's cooperative-matrix extension (native only; kernels::compose puts `enable f16;` and
// `enable wgpu_cooperative_matrix;` first). Bindings and layout: linear.wgsl. Picked by
// linear.rs instead of matmul.wgsl when gpu::Tuning::coop is set (opt-in, `--coop`), which needs
// 16x16x16 f16 x f16 -> f32 matrices and 32-wide subgroups. Measured on an H200 (1B shape, pp512):
// 7.5k tok/s vs 8.2k for matmul.wgsl, and 8e-3 .. 0.16 max abs from the reference logits (f16
// activations): the next step is wider tiles that keep the matrix units fed, and f32 activations
// split into two f16 halves.
// A workgroup computes 64 rows x 64 tokens with 4 subgroups of 32, each a 32 x 32 quarter as
// 2 x 2 tiles of 16 x 16 f32 accumulators. Each step over K = 32 columns decodes the 64 x 32
// weights once with the format's dq4 (ggml's f32 values, rounded to f16) and the 64 x 32
// activations (rounded to f16) into workgroup memory, then multiplies tile by tile. The f16
// rounding of weights and activations is the precision llama.cpp's Vulkan and CUDA backends use
// for their matrix-unit paths; products are accumulated in f32.
const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 32u;
var<workgroup> Ws: array<f16, BM * BK>; // [m][k], row-major (stride BK): matrix A
var<workgroup> Xs: array<f16, BN * BK>; // [n][k]: column-major K x N (stride BK): matrix B
var<workgroup> Cs: array<f32, BM * BN>; // [n][m]: the result, column-major M x N (stride BM)

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32) {
  let b = batch_rows();
  let m0 = wg.x * BM;
  let n0 = wg.y * BN;
  let sg = li / 32u; // this thread's subgroup (32-wide subgroups are a condition of this kernel)
  let mt = 32u * (sg & 1u); // its quarter: rows mt .. mt + 32, tokens nt .. nt + 32
  let nt = 32u * (sg >> 1u);
  let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
  var c00 = coop_mat16x16<f32, C>();
  var c01 = coop_mat16x16<f32, C>();
  var c10 = coop_mat16x16<f32, C>();
  var c11 = coop_mat16x16<f32, C>();
  for (var k0 = 0u; k0 < p.cols; k0 += BK) {
    // Weights and activations: 64 rows x 8 runs of 4 each, consecutive threads on consecutive rows.
    for (var i = li; i < BM * 8u; i += 128u) {
      let m = i % BM;
      let j = i / BM;
      let c = k0 + 4u * j;
      var w = vec4<f32>(0.0);
      if (m0 + m < p.rows) { w = w_run4((m0 + m) * row_bytes, c); }
      let wo = m * BK + 4u * j;
      Ws[wo] = f16(w.x);
      Ws[wo + 1u] = f16(w.y);
      Ws[wo + 2u] = f16(w.z);
      Ws[wo + 3u] = f16(w.w);
      var x = vec4<f32>(0.0);
      if (n0 + m < b.x) { x = x_run4((b.y + n0 + m) * p.x_stride + c, c); }
      Xs[wo] = f16(x.x);
      Xs[wo + 1u] = f16(x.y);
      Xs[wo + 2u] = f16(x.z);
      Xs[wo + 3u] = f16(x.w);
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k += 16u) {
      let a0 = coopLoadT<coop_mat16x16<f16, A>>(&Ws[mt * BK + k], BK);
      let a1 = coopLoadT<coop_mat16x16<f16, A>>(&Ws[(mt + 16u) * BK + k], BK);
      let b0 = coopLoad<coop_mat16x16<f16, B>>(&Xs[nt * BK + k], BK);
      let b1 = coopLoad<coop_mat16x16<f16, B>>(&Xs[(nt + 16u) * BK + k], BK);
      c00 = coopMultiplyAdd(a0, b0, c00);
      c01 = coopMultiplyAdd(a0, b1, c01);
      c10 = coopMultiplyAdd(a1, b0, c10);
      c11 = coopMultiplyAdd(a1, b1, c11);
    }
    workgroupBarrier();
  }
  coopStore(c00, &Cs[nt * BM + mt], BM);
  coopStore(c01, &Cs[(nt + 16u) * BM + mt], BM);
  coopStore(c10, &Cs[nt * BM + mt + 16u], BM);
  coopStore(c11, &Cs[(nt + 16u) * BM + mt + 16u], BM);
  workgroupBarrier();
  for (var i = li; i < BM * BN; i += 128u) {
    let m = i % BM;
    let n = i / BM;
    if (m0 + m < p.rows && n0 + n < b.x) { store(n0 + n, m0 + m, Cs[i]); }
  }
}
