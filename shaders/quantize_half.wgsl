// quantize_half: one 16-value half of a token row as quantize.wgsl's 24-bit integers, for the
// kernels that write the integer form's activations (quantize.wgsl; attention_combine.wgsl with
// QUANT): v = d * (65536 h + 256 m + l), h, m and l the balanced base-256 digits of
// q = round(v / d), d = max |v| / 8355711, plus the half's f32 sum. The kernel declares XQ
// (vec4<u32>: half i's h bytes at 3i, m at 3i + 1, l at 3i + 2) and XS (vec2<f32>: d, sum).
fn quantize_half(h: u32, v: array<vec4<f32>, 4>) {
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
  XQ[3u * h] = vec4<u32>(dh[0], dh[1], dh[2], dh[3]);
  XQ[3u * h + 1u] = vec4<u32>(dm[0], dm[1], dm[2], dm[3]);
  XQ[3u * h + 2u] = vec4<u32>(dl[0], dl[1], dl[2], dl[3]);
  XS[h] = vec2<f32>(d, (sum.x + sum.y) + (sum.z + sum.w));
}
