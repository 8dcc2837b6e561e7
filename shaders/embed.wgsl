// embed: Y = E[token], the token's row of the embedding table kept in its GGUF storage format,
// for the rows held by this part (a table larger than one storage binding is split by rows; each
// part writes only its own tokens). Composed after formats/common.wgsl and one
// formats/<type>.wgsl (gpu::compose), whose `dequant` gives each weight exactly as ggml's
// dequantize_row_* does.
// Bindings: 0 step {pos, token, n = d}, 1 part {row_start, rows, _, _}, 2 W: the part's rows as
// stored (row r at byte r * row_bytes), 3 Y = x [d] f32. One thread per element.
struct Step { pos: u32, token: u32, n: u32, _p: u32 };
struct Part { row_start: u32, rows: u32, _a: u32, _b: u32 };
@group(0) @binding(0) var<uniform> st: Step;
@group(0) @binding(1) var<uniform> part: Part;
@group(0) @binding(2) var<storage, read> W: array<u32>;
@group(0) @binding(3) var<storage, read_write> Y: array<f32>;
// Not bound: the dot-product helpers of the format files read X, which the gather never calls.
@group(0) @binding(15) var<storage, read> X: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (st.token < part.row_start || st.token >= part.row_start + part.rows) { return; }
  if (g.x < st.n) {
    let rb = (st.token - part.row_start) * (st.n / BLOCK_ELEMS * BLOCK_BYTES);
    Y[g.x] = dequant(rb, g.x);
  }
}
