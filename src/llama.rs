//! The forward program: pipelines, bind groups and uniforms built once at load; per token one
//! command buffer whose only per-token input is a 16-byte step uniform (position, token id);
//! only the last token's logits are read back. Owns the KV cache (f32, `[ctx][kv_dim]` per layer).

use std::cell::{Cell, RefCell};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::gpu::{grid, record, threads_per_row, Dispatch, Gpu, Kernel, Kernels, PipelineKey, WORKGROUP};
use crate::weights::{Experts, Ffn, Matrix, Progress, TensorSource, Weights};

/// Options for [`Llama::load`].
#[derive(Default)]
pub struct LoadOptions<'a> {
    /// KV-cache length in positions (default `min(llama.context_length, 2048)`).
    pub ctx: Option<u32>,
    /// Called after each tensor is uploaded.
    pub progress: Option<&'a mut dyn FnMut(&Progress)>,
}

/// A LLaMA model loaded on the GPU, ready to turn token ids into next-token logits.
pub struct Llama {
    gpu: Gpu,
    /// The validated hyperparameters.
    pub config: Config,
    weights: Weights,
    program: Vec<Dispatch>,
    step: wgpu::Buffer,
    logits: wgpu::Buffer,
    buffers: Vec<wgpu::Buffer>,
    /// Mapped-and-unmapped logits readback buffers, reused: a fresh MAP_READ buffer per token
    /// costs milliseconds on some drivers.
    readbacks: RefCell<Vec<wgpu::Buffer>>,
    disposed: Cell<bool>,
}

/// GPU buffers for the activations of one token.
struct Acts {
    x: wgpu::Buffer,
    xn: wgpu::Buffer,
    /// `[q | k | v]`.
    qkv: wgpu::Buffer,
    att: wgpu::Buffer,
    /// `[g | u]` (dense: ff each; MoE: top-k x ff each), SwiGLU's output over g.
    g: wgpu::Buffer,
    logits: wgpu::Buffer,
    router: wgpu::Buffer,
    sel: wgpu::Buffer,
    gate: wgpu::Buffer,
    scores: wgpu::Buffer,
}

/// Builds the dispatch list; remembers every uniform it makes.
pub(crate) struct Builder<'a> {
    pub(crate) gpu: &'a Gpu,
    pub(crate) kernels: &'a mut Kernels,
    pub(crate) out: Vec<Dispatch>,
    pub(crate) buffers: Vec<wgpu::Buffer>,
}

impl Builder<'_> {
    pub(crate) fn uniform(&mut self, words: [u32; 4]) -> wgpu::Buffer {
        let b = self.gpu.uniform("params", words);
        self.buffers.push(b.clone());
        b
    }

    fn push_key(&mut self, key: PipelineKey, bufs: &[&wgpu::Buffer], groups: (u32, u32)) {
        let d = self.kernels.dispatch(&self.gpu.device, key, bufs, groups);
        self.out.push(d);
    }

    pub(crate) fn push(&mut self, kernel: Kernel, bufs: &[&wgpu::Buffer], groups: (u32, u32)) {
        self.push_key((kernel, None), bufs, groups);
    }

    /// `x = E[token]` (the token from the step uniform), one dispatch per part of `E`.
    pub(crate) fn embed(&mut self, e: &Matrix, step: &wgpu::Buffer, x: &wgpu::Buffer) {
        for part in &e.parts {
            let pp = self.uniform([part.row_start, part.rows, 0, 0]);
            self.push_key((Kernel::Embed, Some((e.ty, WORKGROUP))), &[step, &pp, &part.buffer, x], (e.cols.div_ceil(64), 1));
        }
    }

    /// `y (+)= W x`, one dispatch per part of `W`.
    pub(crate) fn matvec(&mut self, w: &Matrix, x: &wgpu::Buffer, y: &wgpu::Buffer, accumulate: bool) {
        self.matvec_at(w, x, y, 0, accumulate);
    }

    /// `y[y0..] = W x` for each matrix of a group (fused or one by one, see `Layer::qkv`).
    fn matvec_group(&mut self, group: &[(Matrix, u32)], x: &wgpu::Buffer, y: &wgpu::Buffer) {
        for (w, y0) in group {
            self.matvec_at(w, x, y, *y0, false);
        }
    }

    /// `y[y0 + r] (+)= (W x)[r]`, one dispatch per part of `W`.
    fn matvec_at(&mut self, w: &Matrix, x: &wgpu::Buffer, y: &wgpu::Buffer, y0: u32, accumulate: bool) {
        let tpr = threads_per_row(self.gpu, w.ty, w.rows, w.cols);
        for part in &w.parts {
            let p = self.uniform([part.rows, w.cols, accumulate as u32, y0 + part.row_start]);
            let groups = grid(part.rows.div_ceil(WORKGROUP / tpr));
            self.push_key((Kernel::Matvec, Some((w.ty, tpr))), &[&p, &part.buffer, x, y], groups);
        }
    }

    /// `y[y0 + j * rows..] = W[sel[j]] x` for the `k` picks, one dispatch per part of the stack.
    pub(crate) fn matvec_exp(&mut self, w: &Experts, k: u32, sel: &wgpu::Buffer, x: &wgpu::Buffer, y: &wgpu::Buffer, y0: u32) {
        let tpr = threads_per_row(self.gpu, w.ty, w.rows * k, w.cols);
        for part in &w.parts {
            // Experts <= 256 (config), so first and count share one word.
            let p = self.uniform([w.rows, w.cols, part.expert_start | part.experts << 16, y0]);
            let groups = (w.rows.div_ceil(WORKGROUP / tpr), k);
            self.push_key((Kernel::MatvecExp, Some((w.ty, tpr))), &[&p, sel, &part.buffer, x, y], groups);
        }
    }

    /// `x += sum_j gate[j] W[sel[j]] h[j]` for the `k` picks, one dispatch per part of the stack.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn moe_down(&mut self, w: &Experts, k: u32, sel: &wgpu::Buffer, gate: &wgpu::Buffer, h: &wgpu::Buffer, x: &wgpu::Buffer) {
        let tpr = threads_per_row(self.gpu, w.ty, w.rows, w.cols);
        for part in &w.parts {
            let p = self.uniform([w.rows, w.cols, k, part.expert_start]);
            let q = self.uniform([part.experts, 0, 0, 0]);
            let groups = (w.rows.div_ceil(WORKGROUP / tpr), 1);
            self.push_key((Kernel::MoeDown, Some((w.ty, tpr))), &[&p, &q, sel, gate, &part.buffer, h, x], groups);
        }
    }
}

fn f32_words(n: u32, f: f32) -> [u32; 4] {
    [n, f.to_bits(), 0, 0]
}

impl Llama {
    /// Parses nothing itself: takes a parsed GGUF and its bytes, validates the config, uploads the
    /// weights and records the forward program.
    ///
    /// Errors: any [`Config::from_gguf`] error, [`Error::TooLarge`] when a row or an expert stack
    /// exceeds one storage binding, [`Error::Gpu`] when the device rejects an allocation.
    pub fn load(gpu: &Gpu, g: &Gguf, src: &dyn TensorSource, opts: LoadOptions<'_>) -> Result<Llama> {
        let cfg = Config::from_gguf(g, opts.ctx)?;
        let mut no_progress = |_: &Progress| {};
        let progress = opts.progress.unwrap_or(&mut no_progress);
        // Checked before any upload, so that a refused load leaves nothing behind.
        let kv_bytes = (cfg.ctx as u64 * cfg.kv_dim() as u64 * 4).next_multiple_of(16);
        if kv_bytes > gpu.max_binding() {
            return Err(Error::TooLarge { tensor: "KV cache".into(), bytes: kv_bytes, limit: gpu.max_binding(), limit_name: "maxStorageBufferBindingSize" });
        }
        let weights = Weights::load(gpu, g, src, &cfg, progress)?;
        let mut kernels = Kernels::new();
        let mut b = Builder { gpu, kernels: &mut kernels, out: Vec::new(), buffers: Vec::new() };

        let mut scratch = |label: &str, n: u64| {
            let buf = gpu.storage(label, n * 4);
            b.buffers.push(buf.clone());
            buf
        };
        let (d, q, kv) = (cfg.d as u64, cfg.q_dim() as u64, cfg.kv_dim() as u64);
        let ffw = if cfg.is_moe() { cfg.topk as u64 * cfg.ff as u64 } else { cfg.ff as u64 };
        let a = Acts {
            x: scratch("x", d),
            xn: scratch("xn", d),
            qkv: scratch("qkv", q + 2 * kv),
            att: scratch("att", q),
            g: scratch("gate|up", 2 * ffw),
            logits: scratch("logits", cfg.vocab as u64),
            router: scratch("router", cfg.experts.max(4) as u64),
            sel: scratch("sel", 16),
            gate: scratch("gate", 16),
            scores: scratch("scores", cfg.n_heads as u64 * cfg.ctx as u64),
        };
        let caches: Vec<(wgpu::Buffer, wgpu::Buffer)> =
            (0..cfg.n_layers).map(|_| (scratch("k cache", cfg.ctx as u64 * kv), scratch("v cache", cfg.ctx as u64 * kv))).collect();
        let rope = gpu.storage_with("rope", bytemuck::cast_slice(&crate::rope::table(&cfg, weights.rope_freqs.as_deref(), cfg.ctx)));
        b.buffers.push(rope.clone());
        let step = b.uniform([0, 0, cfg.d, 0]);

        // The per-token program.
        let p_norm = b.uniform(f32_words(cfg.d, cfg.eps));
        let p_heads = b.uniform([cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.n_rot]);
        let p_attn = b.uniform([cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.ctx]);
        b.embed(&weights.embd, &step, &a.x);
        let rope_threads = (cfg.q_dim() / 2).max(cfg.kv_dim());
        for (lw, (kc, vc)) in weights.layers.iter().zip(&caches) {
            b.push(Kernel::RmsNorm, &[&p_norm, &a.x, &lw.attn_norm, &a.xn], (1, 1));
            b.matvec_group(&lw.qkv, &a.xn, &a.qkv);
            b.push(Kernel::RopeKv, &[&step, &p_heads, &rope, &a.qkv, kc, vc], (rope_threads.div_ceil(64), 1));
            let attention = (Kernel::Attention, Some((crate::ggml::GgmlType::F32, crate::gpu::attention_workgroup(gpu))));
            b.push_key(attention, &[&step, &p_attn, &a.qkv, kc, vc, &a.att, &a.scores], (cfg.n_heads, 1));
            b.matvec(&lw.o, &a.att, &a.x, true);
            b.push(Kernel::RmsNorm, &[&p_norm, &a.x, &lw.ffn_norm, &a.xn], (1, 1));
            match &lw.ffn {
                Ffn::Dense { gate_up, down } => {
                    b.matvec_group(gate_up, &a.xn, &a.g);
                    let p_ff = b.uniform([cfg.ff, cfg.ff, 0, 0]);
                    b.push(Kernel::Swiglu, &[&p_ff, &a.g], (cfg.ff.div_ceil(64), 1));
                    b.matvec(down, &a.g, &a.x, true);
                }
                Ffn::Moe { router, gate, up, down } => {
                    b.matvec(router, &a.xn, &a.router, false);
                    let p_sel = b.uniform([cfg.experts, cfg.topk, 0, 0]);
                    b.push(Kernel::MoeSelect, &[&p_sel, &a.router, &a.sel, &a.gate], (1, 1));
                    let kff = cfg.topk * cfg.ff;
                    b.matvec_exp(gate, cfg.topk, &a.sel, &a.xn, &a.g, 0);
                    b.matvec_exp(up, cfg.topk, &a.sel, &a.xn, &a.g, kff);
                    let p_ff = b.uniform([kff, kff, 0, 0]);
                    b.push(Kernel::Swiglu, &[&p_ff, &a.g], (kff.div_ceil(64), 1));
                    b.moe_down(down, cfg.topk, &a.sel, &a.gate, &a.g, &a.x);
                }
            }
        }
        b.push(Kernel::RmsNorm, &[&p_norm, &a.x, &weights.out_norm, &a.xn], (1, 1));
        b.matvec(&weights.output, &a.xn, &a.logits, false);

        let Builder { out: program, buffers, .. } = b;
        gpu.check()?;
        Ok(Llama { gpu: gpu.clone(), config: cfg, weights, program, step, logits: a.logits, buffers, readbacks: RefCell::new(Vec::new()), disposed: Cell::new(false) })
    }

    /// Dispatches recorded per token (the seed's `dispatchesPerToken`).
    pub fn dispatches_per_token(&self) -> usize {
        self.program.len()
    }

    /// Bytes of weights on the GPU, and bytes of those tensors in the file.
    pub fn weight_bytes(&self) -> (u64, u64) {
        (self.weights.gpu_bytes, self.weights.file_bytes)
    }

    /// Bytes of every GPU buffer this model made (weights, KV cache, activations, uniforms).
    pub fn gpu_bytes(&self) -> u64 {
        self.weights.gpu_bytes + self.buffers.iter().map(|b| b.size()).sum::<u64>()
    }

    /// Checks `forward`'s arguments without touching the GPU.
    pub fn validate(&self, tokens: &[u32], start_pos: u32) -> Result<()> {
        if self.disposed.get() {
            return Err(Error::Disposed);
        }
        if tokens.is_empty() {
            return Err(Error::Input("tokens must be a non-empty list of token ids".into()));
        }
        if let Some((i, t)) = tokens.iter().enumerate().find(|(_, &t)| t >= self.config.vocab) {
            return Err(Error::Input(format!("token id {t} at index {i} is out of range (vocab {})", self.config.vocab)));
        }
        if start_pos as u64 + tokens.len() as u64 > self.config.ctx as u64 {
            return Err(Error::Input(format!(
                "past the context: startPos {start_pos} + {} tokens > ctx {}",
                tokens.len(),
                self.config.ctx
            )));
        }
        Ok(())
    }

    /// Queues `tokens` at positions `start_pos..` (one command buffer each) and the copy of the
    /// last token's logits into a readback buffer of its own (from the pool), which it returns:
    /// map it with [`Gpu::map_read`], then give it back with [`Llama::recycle`]. Synchronous, so
    /// calls that are not awaited are still queued in order.
    pub fn submit(&self, tokens: &[u32], start_pos: u32) -> Result<wgpu::Buffer> {
        self.validate(tokens, start_pos)?;
        let bytes = self.config.vocab as u64 * 4;
        let pooled = self.readbacks.borrow_mut().pop();
        let readback = pooled.unwrap_or_else(|| {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("logits readback"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        for (i, &t) in tokens.iter().enumerate() {
            let words = [start_pos + i as u32, t, self.config.d, 0];
            self.gpu.queue.write_buffer(&self.step, 0, bytemuck::cast_slice(&words));
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                record(&mut pass, &self.program);
            }
            if i + 1 == tokens.len() {
                enc.copy_buffer_to_buffer(&self.logits, 0, &readback, 0, bytes);
            }
            self.gpu.queue.submit([enc.finish()]);
        }
        Ok(readback)
    }

    /// Runs `tokens` at positions `start_pos..` and returns the `vocab` next-token logits after
    /// the last one. Positions before `start_pos` must already be in the KV cache; re-running
    /// from an earlier position overwrites the cache from there.
    ///
    /// Errors: [`Error::Input`] for an empty list, a token id `>= vocab`, or `start_pos +
    /// tokens.len() > ctx` ("past the context"); [`Error::Disposed`]; [`Error::Gpu`].
    pub async fn forward(&self, tokens: &[u32], start_pos: u32) -> Result<Vec<f32>> {
        let readback = self.submit(tokens, start_pos)?;
        let data = self.gpu.map_read(&readback).await;
        match data {
            Ok(d) => {
                self.recycle(readback);
                Ok(bytemuck::pod_collect_to_vec(&d))
            }
            Err(e) => {
                readback.destroy();
                Err(e)
            }
        }
    }

    /// Returns a readback buffer from [`Llama::submit`], read and unmapped, to the pool (a few
    /// are kept; after [`Llama::dispose`] it is destroyed).
    pub fn recycle(&self, readback: wgpu::Buffer) {
        let mut pool = self.readbacks.borrow_mut();
        if self.disposed.get() || pool.len() >= 4 {
            readback.destroy();
        } else {
            pool.push(readback);
        }
    }

    /// Frees every GPU buffer this model made (never the device). Later calls fail with
    /// [`Error::Disposed`].
    pub fn dispose(&self) {
        if self.disposed.replace(true) {
            return;
        }
        for b in self.weights.buffers.iter().chain(&self.buffers).chain(self.readbacks.borrow_mut().drain(..).as_slice()) {
            b.destroy();
        }
    }

    /// Whether [`Llama::dispose`] was called.
    pub fn is_disposed(&self) -> bool {
        self.disposed.get()
    }

    /// The GPU context.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }
}
