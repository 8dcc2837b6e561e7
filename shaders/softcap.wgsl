// softcap: z = c tanh(z / c) in place over each row of logits (Gemma 2's final-logit soft-cap,
// llama.cpp's `final_logit_softcapping`), for the rows the output head wrote: the grid's y rows
// (1, or every token's with all logits), `n` values each. tanh's argument is clamped: some
// drivers' tanh gives NaN for large ones, and tanh(15) is 1 in f32. Grid (n / 64, rows).
struct P { n: u32, c: f32, _a: u32, _b: u32 };
@bind var<uniform> p: P;
@bind var<storage, read_write> z: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) {
    let o = g.y * p.n + g.x;
    z[o] = p.c * tanh(clamp(z[o] / p.c, -15.0, 15.0));
  }
}
