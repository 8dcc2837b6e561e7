// combine_io: what attention_combine.wgsl and attention_combine_wide.wgsl share (their bindings,
// described there, and with QUANT the head's output row and its integer form), composed before
// either (kernels::compose).
struct P { n_heads: u32, head_dim: u32, o_stride: u32, _a: u32 };
@bind var<uniform> p: P;
@bind var<uniform> st: Step;
@bind var<storage, read> partials: array<f32>;
@bind var<storage, read_write> o: array<f32>;
//@if QUANT
@bind var<storage, read_write> XQW: array<vec4<u32>>;
@bind var<storage, read_write> XSW: array<vec2<f32>>;
var<workgroup> OV: array<f32, 512>; // the head's output row

// Head h's row OV of token t as quantize.wgsl's halves, by threads i, i + n, ... after a barrier
// (only the last token's: decode has one).
fn quantize_head(h: u32, t: u32, i: u32, n: u32) {
  for (var k = i; k < p.head_dim / 16u && t + 1u == st.n_tokens; k += n) {
    var v = array<vec4<f32>, 4>();
    for (var j = 0u; j < 4u; j++) {
      let e = 16u * k + 4u * j;
      v[j] = vec4<f32>(OV[e], OV[e + 1u], OV[e + 2u], OV[e + 3u]);
    }
    quantize_half(h * p.head_dim / 16u + k, v);
  }
}
//@end
