// activation.wgsl: the gated FFN's activation, act(g) * u, for swiglu.wgsl and the matrix-vector
// kernels that fuse it: SiLU, g / (1 + exp(-g)) (SwiGLU, Shazeer 2020), or with `gelu` GELU's
// tanh form, 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))) (Hendrycks & Gimpel 2016; GEGLU,
// Gemma; llama.cpp's ggml_gelu). tanh's argument is clamped: some drivers' tanh gives NaN for
// large ones, and tanh(15) is 1 in f32. Composed by kernels::compose before the kernel's file.
fn gated(g: f32, u: f32, gelu: bool) -> f32 {
  if (gelu) {
    let t = tanh(clamp(0.7978845608 * (g + 0.044715 * g * g * g), -15.0, 15.0));
    return 0.5 * g * (1.0 + t) * u;
  }
  return g / (1.0 + exp(-g)) * u;
}
