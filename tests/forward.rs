#![cfg(not(target_arch = "wasm32"))]
//! The forward plan (`webgpu_llama::forward`): what each op hands the next. A decode step on a
//! Q4_K model with the GPU's kernel forms runs its linear ops in the integer form; each one's
//! integer activations come from exactly one place (the op before, or one quantize op shared by
//! the ops on the same input), which the number of quantize dispatches shows. The values those
//! steps compute are checked against the float64 reference in `tests/reference.rs`; here only
//! the hand-offs.

mod common;

use common::*;
use webgpu_llama::synth::{model, Scheme, Shape};
use webgpu_llama::{Gguf, Llama, LoadOptions};

/// Quantize dispatches in a one-token step at position 0 (no key splits), and the layers.
fn quantize_ops(quant_out: bool) -> (usize, usize) {
    let mut gpu = gpu(false);
    // The GPU's forms (lavapipe is a CPU adapter, whose forms have no integer dot products).
    gpu.set_cpu(false);
    gpu.switches_mut().quant_out = Some(quant_out);
    gpu.switches_mut().int_dot = Some(true);
    let shape = Shape::dense(256, 3, 4, 2, 512, 300);
    let bytes = model(&shape, Scheme::parse("Q4_K").unwrap(), 7).unwrap().to_bytes();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let llama = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(64), ..Default::default() }).unwrap();
    assert!(llama.fusion.norm, "the GPU's forms fuse RMSNorm into the matrix-vector kernels");
    assert_eq!(llama.fusion.quant_out, quant_out);
    let step = llama.plan(1, 0, false);
    assert_eq!(step.splits, 1);
    let ds = llama.dispatches(&step);
    let labels: Vec<String> = ds.iter().map(|d| d.labelled()).collect();
    assert!(labels.iter().any(|l| l.contains("idot")), "no integer-form matvec in {labels:#?}");
    (labels.iter().filter(|l| l.starts_with("quantize")).count(), llama.config.n_layers as usize)
}

#[test]
fn each_integer_row_is_made_once_and_handed_on() {
    // Without the writers' integers: per layer one for q/k/v (shared by the three), one after
    // attention (the output projection's), one each for gate/up and down; one for the head.
    let (n, layers) = quantize_ops(false);
    assert_eq!(n, 4 * layers + 1, "quantize ops without quant_out");
    // With them, only the first layer's q/k/v and attention's output (unsplit keys) need one:
    // the output projection, the SwiGLU matvec and the down projection write the next op's.
    let (n, layers) = quantize_ops(true);
    assert_eq!(n, layers + 1, "quantize ops with quant_out");
}
