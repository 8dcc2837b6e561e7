// quantize_half: one 16-value half of a token row as quantize.wgsl's 24-bit integers, for the
// kernels that write the integer form's activations (quantize.wgsl; combine_io.wgsl's
// quantize_head, for the combine kernels with QUANT; matvec.wgsl with QOUT and the one-token
// attention with QUANT take half_scale and half_digits, a half by several threads): v = d * (65536 h +
// 256 m + l), h, m and l the balanced base-256 digits of q = round(v / d), d = max |v| / 8355711. Half i of a row of H halves goes into the
// writer's bindings XQW (vec4<u32>: the h bytes at 3i, m at 3i + 1, l at 3i + 2) and XSW
// (vec2<f32>: d and the half's f32 sum at i; for a fused RMSNorm, matvec.wgsl's INORM, the writer
// adds the half's sum of squares of the raw values at XSW[H + i / 2][i % 2], after the pairs).
fn quantize_half(i: u32, v: array<vec4<f32>, 4>) {
  let s = half_scale(v);
  var dg = array<vec3<u32>, 4>();
  for (var j = 0u; j < 4u; j++) { dg[j] = half_digits(v[j], s.y); }
  XQW[3u * i] = vec4<u32>(dg[0].x, dg[1].x, dg[2].x, dg[3].x);
  XQW[3u * i + 1u] = vec4<u32>(dg[0].y, dg[1].y, dg[2].y, dg[3].y);
  XQW[3u * i + 2u] = vec4<u32>(dg[0].z, dg[1].z, dg[2].z, dg[3].z);
  XSW[i] = vec2<f32>(s.x, s.z);
}

// A half's (d, 1 / d or 0, f32 sum).
fn half_scale(v: array<vec4<f32>, 4>) -> vec3<f32> {
  var amax = vec4<f32>();
  var sum = vec4<f32>();
  for (var j = 0u; j < 4u; j++) {
    amax = max(amax, abs(v[j]));
    sum += v[j];
  }
  let m = max(max(amax.x, amax.y), max(amax.z, amax.w));
  let d = m / 8355711.0;
  return vec3<f32>(d, select(0.0, 1.0 / d, m > 0.0), (sum.x + sum.y) + (sum.z + sum.w));
}

// Four values' h, m and l digits (x, y, z), each as four signed bytes, at 1 / d = r.
fn half_digits(x: vec4<f32>, r: f32) -> vec3<u32> {
  let q = clamp(vec4<i32>(round(x * r)), vec4<i32>(-8355711), vec4<i32>(8355711));
  let l = ((q + vec4<i32>(128)) & vec4<i32>(255)) - vec4<i32>(128);
  let q1 = (q - l) >> vec4<u32>(8u);
  let mm = ((q1 + vec4<i32>(128)) & vec4<i32>(255)) - vec4<i32>(128);
  return vec3<u32>(pack4xI8((q1 - mm) >> vec4<u32>(8u)), pack4xI8(mm), pack4xI8(l));
}
