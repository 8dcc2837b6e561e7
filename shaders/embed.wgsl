// embed: X[i] = E[tokens[i]] for the batch's tokens, each row of the embedding table kept in its
// GGUF storage format, for the rows held by this part (a table larger than one storage binding is
// split by rows; each part writes only its own tokens). Composed after formats/common.wgsl and
// one formats/<type>.wgsl (kernels::compose), whose `dequant` gives each weight exactly as ggml's
// dequantize_row_* does.
// Bindings: 0 part {row_start, rows, d, scale (multiplies each embedding)}, 1 step {n_tokens}, 2 tokens [n] u32, 3 W: the part's rows
// as stored (row r at byte r * row_bytes), 4 Y [n][d] f32. Grid (d / 64, n): one thread per element.
struct Part { row_start: u32, rows: u32, d: u32, scale: f32 };
@bind var<uniform> part: Part;
@bind var<uniform> st: Step;
@bind var<storage, read> tokens: array<u32>;
@bind var<storage, read> W: array<u32>;
@bind var<storage, read_write> Y: array<f32>;
// Not bound: the dot-product helpers of common.wgsl read X, which the gather never calls.
@bind var<storage, read> X: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.y;
  if (i >= st.n_tokens || g.x >= part.d) { return; }
  let token = tokens[i];
  if (token < part.row_start || token >= part.row_start + part.rows) { return; }
  let rb = (token - part.row_start) * (part.d / BLOCK_ELEMS * BLOCK_BYTES);
  Y[i * part.d + g.x] = dequant(rb, g.x) * part.scale;
}
