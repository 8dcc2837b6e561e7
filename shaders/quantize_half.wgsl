// quantize_half: one 16-value half of a token row as quantize.wgsl's 24-bit integers, for the
// kernels that write the integer form's activations (quantize.wgsl; combine_io.wgsl's
// quantize_head, for the combine kernels with QUANT; matvec.wgsl with QOUT): v = d * (65536 h +
// 256 m + l), h, m and l the balanced base-256 digits of q = round(v / d), d = max |v| / 8355711. Half i of a row of H halves goes into the
// writer's bindings XQW (vec4<u32>: the h bytes at 3i, m at 3i + 1, l at 3i + 2) and XSW
// (vec2<f32>: d and the half's f32 sum at i; for a fused RMSNorm, matvec.wgsl's INORM, the writer
// adds the half's sum of squares of the raw values at XSW[H + i / 2][i % 2], after the pairs).
fn quantize_half(i: u32, v: array<vec4<f32>, 4>) {
  var amax = vec4<f32>();
  var sum = vec4<f32>();
  for (var j = 0u; j < 4u; j++) {
    amax = max(amax, abs(v[j]));
    sum += v[j];
  }
  let m = max(max(amax.x, amax.y), max(amax.z, amax.w));
  let d = m / 8355711.0;
  let r = select(0.0, 1.0 / d, m > 0.0);
  var dh: array<u32, 4>;
  var dm: array<u32, 4>;
  var dl: array<u32, 4>;
  for (var j = 0u; j < 4u; j++) {
    let q = clamp(vec4<i32>(round(v[j] * r)), vec4<i32>(-8355711), vec4<i32>(8355711));
    let l = ((q + vec4<i32>(128)) & vec4<i32>(255)) - vec4<i32>(128);
    let q1 = (q - l) >> vec4<u32>(8u);
    let mm = ((q1 + vec4<i32>(128)) & vec4<i32>(255)) - vec4<i32>(128);
    dh[j] = pack4xI8((q1 - mm) >> vec4<u32>(8u));
    dm[j] = pack4xI8(mm);
    dl[j] = pack4xI8(l);
  }
  XQW[3u * i] = vec4<u32>(dh[0], dh[1], dh[2], dh[3]);
  XQW[3u * i + 1u] = vec4<u32>(dm[0], dm[1], dm[2], dm[3]);
  XQW[3u * i + 2u] = vec4<u32>(dl[0], dl[1], dl[2], dl[3]);
  XSW[i] = vec2<f32>(d, (sum.x + sum.y) + (sum.z + sum.w));
}
