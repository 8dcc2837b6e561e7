// embed: x = E[token] for the rows of the token embedding held by this part.
// Bindings: 0 step {pos, token, n = d}, 1 part {row_start, rows, _, _}, 2 E [rows][d] f32, 3 x [d].
// A table larger than one storage binding is split by rows; each part writes only its own tokens.
struct Step { pos: u32, token: u32, n: u32, _p: u32 };
struct Part { row_start: u32, rows: u32, _a: u32, _b: u32 };
@group(0) @binding(0) var<uniform> st: Step;
@group(0) @binding(1) var<uniform> part: Part;
@group(0) @binding(2) var<storage, read> E: array<f32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (st.token < part.row_start || st.token >= part.row_start + part.rows) { return; }
  if (g.x < st.n) { x[g.x] = E[(st.token - part.row_start) * st.n + g.x]; }
}
