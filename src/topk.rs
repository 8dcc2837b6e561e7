//! Top-k of the logits on the GPU (`shaders/topk.wgsl`): a sampler that only needs the k most
//! likely tokens reads back `8 k` bytes instead of `4 vocab` (512 KB for Llama-3's vocabulary).
//! Two dispatches after the output head: each workgroup's top k of a slice of the logits, then
//! the top k of those candidates.

use bytemuck::{Pod, Zeroable};

use crate::error::{Error, Result};
use crate::kernels::{Kernel, PipelineKey};
use crate::program::{Builder, Variant};

/// The largest k [`crate::llama::Llama::forward_top_k`] takes (the cost grows as k^2).
pub const MAX_TOP_K: u32 = 128;
/// Logits per first-stage workgroup (`SLICE` in the shader).
const SLICE: u32 = 1024;

/// `struct P` of `shaders/topk.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
struct TopKParams {
    n: u32,
    k: u32,
    stage: u32,
    pad: u32,
}

/// The two stages, bound at load to the model's logits row 0.
pub struct TopK {
    stages: [(Variant, wgpu::Buffer, u32); 2],
    /// `[MAX_TOP_K]` of `(id, f32 bits)`: the result, best first.
    pub out: wgpu::Buffer,
    vocab: u32,
    /// The k the stages' parameters hold (0: none written yet).
    k: std::cell::Cell<u32>,
}

impl TopK {
    /// Compiles the kernel and allocates its candidates and output for `vocab` logits.
    pub fn build(b: &mut Builder<'_>, logits: &wgpu::Buffer, vocab: u32) -> TopK {
        let slices = vocab.div_ceil(SLICE);
        let cand = b.storage("top-k candidates", slices as u64 * MAX_TOP_K as u64 * 8);
        let out = b.storage("top-k", MAX_TOP_K as u64 * 8);
        let key = PipelineKey::plain(Kernel::TopK);
        let stage = |b: &mut Builder<'_>, stage: u32, workgroups: u32| {
            let params = b.uniform("top-k", &TopKParams { n: vocab, k: 1, stage, pad: 0 });
            (b.variant(key, &[("p", &params), ("logits", logits), ("cand", &cand), ("out", &out)]), params, workgroups)
        };
        let stages = [stage(b, 1, slices), stage(b, 2, 1)];
        TopK { stages, out, vocab, k: std::cell::Cell::new(0) }
    }

    /// Checks `k`: 1 ..= min([`MAX_TOP_K`], vocab).
    pub fn check(&self, k: u32) -> Result<()> {
        if k == 0 || k > MAX_TOP_K.min(self.vocab) {
            return Err(Error::Input(format!("top-k: k = {k} must be from 1 to {} (the vocabulary or {MAX_TOP_K}, the smaller)", MAX_TOP_K.min(self.vocab))));
        }
        Ok(())
    }

    /// Writes the parameters for `k` (queued before the pass that [`TopK::record`]s), unless they
    /// hold it already (a decode loop asks for the same k every token).
    pub fn set_k(&self, queue: &wgpu::Queue, k: u32) {
        if self.k.replace(k) == k {
            return;
        }
        let slices = self.vocab.div_ceil(SLICE);
        queue.write_buffer(&self.stages[0].1, 0, bytemuck::bytes_of(&TopKParams { n: self.vocab, k, stage: 1, pad: 0 }));
        queue.write_buffer(&self.stages[1].1, 0, bytemuck::bytes_of(&TopKParams { n: slices * k, k, stage: 2, pad: 0 }));
    }

    /// Both stages, after the forward pass in the same compute pass.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        for (v, _, workgroups) in &self.stages {
            v.dispatch(pass, [*workgroups, 1, 1]);
        }
    }
}

/// `(id, logit)` pairs from the readback of [`TopK::out`], read as `2 k` words (ids are the
/// bits of the even words; empty entries dropped).
pub fn decode(words: &[f32], k: u32) -> Vec<(u32, f32)> {
    words[..2 * k as usize].chunks(2).map(|w| (w[0].to_bits(), w[1])).filter(|&(id, _)| id != u32::MAX).collect()
}

/// The id of the largest logit, the first of equal ones (the GPU's top 1; NaN never wins; 0 when
/// every logit is NaN or the list is empty). Two passes that the compiler vectorises: the max in
/// 16 lanes, then the first 16-wide chunk holding it: it runs between a decode step's readback
/// and the next submission, so its time is the GPU's idle time.
pub fn argmax(logits: &[f32]) -> u32 {
    const L: usize = 16;
    let mut lanes = [f32::NEG_INFINITY; L];
    for c in logits.chunks_exact(L) {
        for (m, &x) in lanes.iter_mut().zip(c) {
            *m = if x > *m { x } else { *m };
        }
    }
    let tail = logits.chunks_exact(L).remainder();
    let max = lanes.iter().chain(tail).fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    let chunk = logits.chunks(L).position(|c| c.iter().fold(false, |a, &x| a | (x == max))).unwrap_or(0);
    (chunk * L + logits[chunk * L..].iter().position(|&x| x == max).unwrap_or(0)) as u32
}
