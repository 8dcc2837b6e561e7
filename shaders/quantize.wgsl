// quantize: one token row of f32 activations as 24-bit integers per 16-value half block, the
// input of matvec.wgsl's integer form (IDOT): value v = d * (65536 h + 256 m + l), h, m and l
// signed bytes (balanced base-256 digits of q = round(v / d)), d = max |v| of the half / 8355711
// (= 0x7f7f7f, so that every digit stays within [-128, 127]); the error is at most about 1.5 d
// (half a unit, plus f32's rounding of v / d near 2^23), 1.8e-7 of the half's largest value.
// (16 bits, two digits, measured 2.03e-3 from the reference on stories260K-pad256-Q4_K_M decoded
// a token at a time, at the 2e-3 tolerance.)
// Each half also keeps the f32 sum of its values (the formats' min terms).
// With NORM (p.norm = 1) v = x / sqrt(mean(x^2) + eps) * w (RMSNorm, as rmsnorm.wgsl), so that
// the matrix-vector op after it reads normalised activations.
// Bindings: 0 {n, eps, norm, x_stride}, 1 step {n_tokens}, 2 x [tokens][x_stride] (row n_tokens -
// 1 is quantised: decode has one), 3 w [n] (norm weights; unread without NORM), 4 XQW [n / 16][3]
// vec4<u32> (half i: its h bytes at 3i, m at 3i + 1, l at 3i + 2, four per word, little-endian),
// 5 XSW [n / 16] (d, sum). A half per invocation, workgroups of 64 (grid n / 16 / 64); with NORM
// each workgroup first sums the whole row's squares (a 4096-value row is 16 KiB from the cache
// per workgroup; one workgroup for the row would leave the GPU idle for longer). n and x_stride
// multiples of 16 and 4.
struct P { n: u32, eps: f32, norm: u32, x_stride: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> x: array<vec4<f32>>;
@bind var<storage, read> w: array<vec4<f32>>;
@bind var<storage, read_write> XQW: array<vec4<u32>>;
@bind var<storage, read_write> XSW: array<vec2<f32>>;

var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let o = (st.n_tokens - 1u) * p.x_stride / 4u;
  let n4 = p.n / 4u;
  var inv = 1.0;
  if (p.norm != 0u) {
    var s = 0.0;
    for (var i = l.x; i < n4; i += 64u) { s += dot(x[o + i], x[o + i]); }
    part[l.x] = s;
    workgroupBarrier();
    for (var k = 32u; k > 0u; k >>= 1u) {
      if (l.x < k) { part[l.x] += part[l.x + k]; }
      workgroupBarrier();
    }
    inv = 1.0 / sqrt(part[0] / f32(p.n) + p.eps);
  }
  let h = wg.x * 64u + l.x;
  if (h >= p.n / 16u) { return; }
  var v = array<vec4<f32>, 4>();
  for (var j = 0u; j < 4u; j++) {
    var e = x[o + 4u * h + j];
    if (p.norm != 0u) { e = e * inv * w[4u * h + j]; }
    v[j] = e;
  }
  quantize_half(h, v);
}
