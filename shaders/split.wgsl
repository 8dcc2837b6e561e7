// split: a batch's activations [tokens][x_stride] f32 as matmul_coop.wgsl's f16 operands, once
// per linear op input instead of once per workgroup of weight rows: x = hi + lo, hi = hi16(x),
// lo = f16(x - hi) (Ootomo and Yokota 2022). Each row is padded with zeros to LD = cols rounded
// up to 32 (the kernel's K step), so that its tiles read no further checks.
// Bindings: 0 {cols, x_stride}, 1 step {n_tokens}, 2 x, 3 hi, 4 lo ([tokens][LD] f16, as vec4s).
// Grid (LD / 4 / 64, n_tokens): four values per invocation.
struct P { cols: u32, x_stride: u32, _a: u32, _b: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> x: array<f32>;
@bind var<storage, read_write> hi: array<vec4<f16>>;
@bind var<storage, read_write> lo: array<vec4<f16>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let ld4 = (p.cols + 31u) / 32u * 8u;
  if (g.x >= ld4 || g.y >= st.n_tokens) { return; }
  var v = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) {
    let c = 4u * g.x + e;
    if (c < p.cols) { v[e] = x[g.y * p.x_stride + c]; }
  }
  let h = hi16(v);
  hi[g.y * ld4 + g.x] = vec4<f16>(h);
  lo[g.y * ld4 + g.x] = vec4<f16>(v - h);
}
