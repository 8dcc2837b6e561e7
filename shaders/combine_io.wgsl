// combine_io: the interface of attention_combine.wgsl and attention_combine_wide.wgsl (their
// bindings, described there, and QUANT's row of the head's output), composed before either
// (kernels::compose).
struct P { n_heads: u32, head_dim: u32, o_stride: u32, _a: u32 };
struct Step { n_tokens: u32, pos0: u32, splits: u32, _b: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> st: Step;
@group(0) @binding(2) var<storage, read> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
//@if QUANT
@group(0) @binding(4) var<storage, read_write> XQW: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> XSW: array<vec2<f32>>;
var<workgroup> OV: array<f32, 512>; // the head's output row
//@end
