// matmul_cpu: Y (+)= W X for a batch of tokens on CPU implementations of WebGPU (lavapipe,
// SwiftShader: the prefill path there; matmul.wgsl is the GPU one). Bindings and layout:
// linear.wgsl. Composed (kernels::compose) with `const WG, RPI, NT, SG, KR` (invocations per
// workgroup, rows per invocation, tokens per workgroup, the subgroup size or 0, subgroup rounds
// per step: 4 * SG * KR columns, at least 32) and one formats/<type>.wgsl; the `//@for v < N` ..
// `//@end` blocks are unrolled at compose time ($v replaced by 0 .. N - 1).
// Such compilers run a workgroup's invocations side by side in SIMD lanes, so each invocation
// owns RPI whole rows (decoded with the format's dq4a or dq4 in every lane at once, no workgroup memory,
// no barriers) and every invocation of the workgroup the same NT tokens: their X reads have one
// address across the lanes, a single load broadcast. The unrolled accumulators (scalars, not a
// private array) stay in registers. Grid: (rows / (WG * RPI), tokens / NT); workgroup x holds
// rows (x * RPI + i) * WG + lane for i < RPI. The maths: each weight exactly ggml's dequantised
// f32 value, an f32 dot product per (row, token).
@compute @workgroup_size(WG)
//@if SG
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u, @builtin(subgroup_invocation_id) sg_lane: u32) {
//@end
//@if !SG
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
//@end
  let b = batch_rows();
  let n0 = wg.y * NT;
  let row_bytes = p.cols / BLOCK_ELEMS * BLOCK_BYTES;
  // Rows past the matrix read its last row and tokens past the batch its last token (in bounds,
  // never stored).
  //@for i < RPI
  let m$i = (wg.x * RPI + $iu) * WG + l.x;
  let rb$i = min(m$i, p.rows - 1u) * row_bytes;
  //@end
  //@for j < NT
  let xo$j = (b.y + min(n0 + $ju, b.x - 1u)) * p.x_stride;
  //@end
  //@for i < RPI
  //@for j < NT
  var a$i_$j = 0.0;
  //@end
  //@end
  let cols4 = p.cols & ~3u;
  var c0 = 0u;
  //@if SG
  // Subgroups of SG lanes (one SIMD register): in KR rounds of 4 * SG columns, lane k reads
  // columns 4k .. 4k + 3 of each token and subgroupBroadcast hands them to every lane: one load
  // per lane where the compiler would otherwise load the shared address once per lane. A step
  // (KR rounds) covers whole 32-column blocks from c0, a multiple of 32, and names each weight
  // run by a literal offset from it (dq4a), so that the compiler sees which runs share a word or
  // a scale and loads it once: on lavapipe the loads, one per lane, are what the kernel's time
  // goes to.
  if ((p.x_stride & 3u) == 0u) {
    let cols_sg = p.cols / (4u * SG * KR) * (4u * SG * KR);
    for (; c0 < cols_sg; c0 += 4u * SG * KR) {
      //@for r < KR
      {
        //@for j < NT
        let v$j = X[(xo$j + c0) / 4u + SG * $ru + sg_lane];
        //@end
        //@for k < SG
        {
          //@for i < RPI
          let w$i = dq4a(rb$i, c0 + ((4u * (SG * $ru + $ku)) & ~31u), (4u * (SG * $ru + $ku)) & 31u);
          //@end
          //@for j < NT
          let t$j = subgroupBroadcast(v$j, $ku);
          //@for i < RPI
          a$i_$j += dot(w$i, t$j);
          //@end
          //@end
        }
        //@end
      }
      //@end
    }
  }
  //@end
  if ((p.x_stride & 3u) == 0u) {
    for (var c = c0; c < cols4; c += 4u) {
      //@for i < RPI
      let w$i = dq4(rb$i, c);
      //@end
      //@for j < NT
      let t$j = X[(xo$j + c) >> 2u];
      //@for i < RPI
      a$i_$j += dot(w$i, t$j);
      //@end
      //@end
    }
  } else {
    // Rows of X that are not whole vec4s (odd widths).
    for (var c = c0; c < cols4; c += 4u) {
      //@for i < RPI
      let w$i = dq4(rb$i, c);
      //@end
      //@for j < NT
      let t$j = xv4(xo$j + c);
      //@for i < RPI
      a$i_$j += dot(w$i, t$j);
      //@end
      //@end
    }
  }
  for (var c = cols4; c < p.cols; c++) {
    //@for i < RPI
    let w$i = dequant(rb$i, c);
    //@end
    //@for j < NT
    let t$j = x1(xo$j + c);
    //@for i < RPI
    a$i_$j += w$i * t$j;
    //@end
    //@end
  }
  //@for i < RPI
  if (m$i < p.rows) {
    //@for j < NT
    if (n0 + $ju < b.x) { store(n0 + $ju, m$i, a$i_$j); }
    //@end
  }
  //@end
}
