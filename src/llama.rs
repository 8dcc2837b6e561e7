//! The model on the GPU: weights, KV cache, activations for a batch of up to [`Llama::batch`]
//! tokens, and the forward program (built once at load, [`crate::program`]) that prefill and
//! decode share. A `forward` call runs its tokens in chunks of at most that many, one command
//! buffer each; the only per-chunk writes are the step uniform and the token ids. Only the
//! logits that are asked for are computed and read back: the last token's, or every token's.

use std::cell::{Cell, RefCell};

use crate::attention;
use crate::config::{Config, KvType};
use crate::error::{Error, Result};
use crate::forward::{Activations, Fusion};
use crate::gguf::Gguf;
use crate::gpu::Gpu;
use crate::inputs::StepInputs;
use crate::plan::{LoadPlan, PlanOptions};
use crate::program::{Batch, Builder, Dispatch, Program, Step};
use crate::sample::Picker;
use crate::topk::TopK;
use crate::weights::{Progress, TensorSource, Weights};

mod generate;

pub use crate::plan::DEFAULT_BATCH;
/// The logits of every token are computed in chunks whose logits fit this many bytes.
const ALL_LOGITS_BYTES: u64 = 8 << 20;

/// Options for [`Llama::load`].
#[derive(Default)]
pub struct LoadOptions<'a> {
    /// KV-cache length in positions (default `min(llama.context_length, 2048)`).
    pub ctx: Option<u32>,
    /// Tokens per batch: longer prompts are processed in chunks of this many (default 512,
    /// fewer when the activations would not fit one storage binding).
    pub batch: Option<u32>,
    /// Called after each tensor is uploaded.
    pub progress: Option<&'a mut dyn FnMut(&Progress)>,
    /// The KV cache's element type (default f32; f16 halves its bytes).
    pub kv: KvType,
}

/// A LLaMA model loaded on the GPU, ready to turn token ids into next-token logits.
pub struct Llama {
    gpu: Gpu,
    /// The validated hyperparameters.
    pub config: Config,
    /// The decode fusions in force ([`Fusion::of`]).
    pub fusion: Fusion,
    weights: Weights,
    program: Program,
    /// Run once before the first batch: the weights' regrouping ([`crate::repack`]), which must
    /// follow the upload (for a streamed source, done after [`Llama::load`] returns).
    setup: RefCell<Option<Program>>,
    step: wgpu::Buffer,
    tokens: wgpu::Buffer,
    logits: wgpu::Buffer,
    batch: u32,
    logit_rows: u32,
    buffers: Vec<wgpu::Buffer>,
    /// Readback buffers of one logits row or one top-k result, reused: a fresh MAP_READ buffer
    /// per token costs milliseconds on some drivers.
    readbacks: RefCell<Vec<wgpu::Buffer>>,
    /// KV-cache positions written so far (a forward may start at any position up to this).
    filled: Cell<u32>,
    /// The one-token step at position `filled`, recorded while the GPU runs the last submission
    /// (see [`Llama::submit`]).
    next: RefCell<Option<Prepared>>,
    /// The staging slot the steps recorded ahead copy their inputs from.
    inputs: StepInputs,
    /// CPU seconds spent recording steps ahead ([`Llama::prepare`]), for the benchmark.
    prepare_s: Cell<f64>,
    topk: TopK,
    /// The next-token pick of [`Llama::generate`].
    picker: Picker,
    disposed: Cell<bool>,
    /// A [`Llama::generate`] call is under way: its steps own the token ids and the step
    /// uniform until it returns.
    generating: Cell<bool>,
    /// A generate call was accepted but has not started yet ([`Llama::reserve`]): calls made in
    /// between are refused as while it runs.
    reserved: Cell<bool>,
}

/// A submitted forward pass's logits, to be read with [`Gpu::map_read`] and then given back
/// with [`Llama::recycle`].
pub struct Pending {
    /// The MAP_READ buffer the logits are copied to.
    pub buffer: wgpu::Buffer,
    /// Rows of `vocab` logits in it.
    pub rows: u32,
}

/// Bytes of a top-k readback: [`crate::topk::MAX_TOP_K`] pairs (one size for every k, so that
/// the buffers are pooled).
const TOP_K_BYTES: u64 = crate::topk::MAX_TOP_K as u64 * 8;

/// What a forward reads back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Readout {
    /// The last token's logits.
    Last,
    /// Every token's logits.
    All,
    /// The last token's top k (ids and logits).
    TopK(u32),
}

/// A one-token decode step recorded ahead of its call: its command buffer, which copies its step
/// uniform `step` and its token id from the staging slot ([`StepInputs`], written at
/// submission), and the readback buffer it copies the logits (or, for a top-k readout, the top
/// k) to.
struct Prepared {
    pos: u32,
    readout: Readout,
    step: Step,
    commands: wgpu::CommandBuffer,
    readback: wgpu::Buffer,
}

impl Llama {
    /// Parses nothing itself: takes a parsed GGUF and its bytes, validates the config, uploads the
    /// weights, allocates the KV cache and activations, and records the forward program. Its
    /// kernels compile later, each on the first batch that runs it ([`crate::program::Variant`]),
    /// so a kernel the device rejects fails that `forward` (and every later one that runs it)
    /// with [`Error::Gpu`], not the load.
    ///
    /// Errors: any [`LoadPlan::new`] error, decided before anything is uploaded (the config's, or
    /// [`Error::TooLarge`] when a row, an expert stack or the KV cache exceeds one storage
    /// binding); [`Error::OutOfMemory`] when the device refuses an allocation (natively:
    /// `bytes` the weights' and KV cache's as planned, [`LoadPlan::weight_and_cache_bytes`];
    /// `detail` names the buffer refused, its size and the device's message);
    /// [`Error::DeviceLost`] when the device's loss is reported by the load's end (wgpu reports
    /// a destroyed device's once its queue is empty: with other work still running on it, the
    /// model's first call fails instead); [`Error::Gpu`] for other errors
    /// of the device; [`Error::Input`] for switches or knobs the device cannot run
    /// ([`crate::policy::check`]). A failed load frees every buffer it made.
    pub fn load(gpu: &Gpu, g: &Gguf, src: &dyn TensorSource, opts: LoadOptions<'_>) -> Result<Llama> {
        gpu.lost()?;
        crate::policy::check(gpu)?;
        // Decided from the header before any upload, so that a refused load leaves nothing behind.
        let plan = LoadPlan::new(g, PlanOptions { ctx: opts.ctx, batch: opts.batch, kv: opts.kv, max_binding: gpu.max_binding() })?;
        #[cfg(feature = "lab")]
        gpu.count_allocations();
        // A refused buffer fails the load with what the model needs, not that buffer's size.
        // The failed load's buffers are destroyed, but wgpu frees a buffer with writes pending
        // only after the next submission: an empty one, so that nothing stays.
        let need = plan.weight_and_cache_bytes();
        let named = |e: Error| {
            gpu.queue.submit([]);
            match e {
                Error::OutOfMemory { detail, .. } => Error::OutOfMemory { bytes: need, detail },
                e => e,
            }
        };
        let (cfg, kv_bytes, batch) = (plan.config, plan.kv_bytes, plan.batch);
        let mut no_progress = |_: &Progress| {};
        let progress = opts.progress.unwrap_or(&mut no_progress);
        let mut weights = Weights::load(gpu, g, src, &cfg, progress).map_err(named)?;
        let mut b = Builder::new(gpu);
        for r in std::mem::take(&mut weights.repacks) {
            b.repack(&r);
        }

        let logit_rows = (ALL_LOGITS_BYTES / (cfg.vocab as u64 * 4)).clamp(1, batch as u64) as u32;
        let a = Activations::new(&mut b, &cfg, &weights, batch, logit_rows);
        let fusion = Fusion::of(gpu, &cfg);
        crate::forward::build(&mut b, &cfg, &weights, &a, fusion, kv_bytes);
        let Activations { logits, tokens, .. } = a;
        let topk = TopK::build(&mut b, &logits, cfg.vocab);
        let picker = Picker::build(&mut b, &logits, &tokens, &topk, cfg.ctx);
        let Builder { program, setup, buffers, step, .. } = b;
        if let Err(e) = gpu.check() {
            // (Freed now rather than when wgpu next polls after they drop.)
            weights.buffers.iter().chain(&buffers).for_each(wgpu::Buffer::destroy);
            return Err(named(e));
        }
        Ok(Llama {
            gpu: gpu.clone(),
            config: cfg,
            fusion,
            weights,
            program,
            setup: RefCell::new(Some(setup)),
            step,
            tokens,
            logits,
            batch,
            logit_rows,
            buffers,
            readbacks: RefCell::new(Vec::new()),
            next: RefCell::new(None),
            inputs: StepInputs::new(&gpu.device),
            prepare_s: Cell::new(0.0),
            topk,
            picker,
            filled: Cell::new(0),
            disposed: Cell::new(false),
            generating: Cell::new(false),
            reserved: Cell::new(false),
        })
    }

    /// Tokens per batch: a longer `forward` runs in chunks of this many.
    pub fn batch(&self) -> u32 {
        self.batch
    }

    /// The batch a chunk of `n` tokens at `pos0` runs as.
    pub fn plan(&self, n: u32, pos0: u32, all_logits: bool) -> Batch {
        Batch { n_tokens: n, pos0, splits: attention::splits(&self.gpu, &self.config, n, pos0 + n), all_logits }
    }

    /// The dispatches of one batch, in order (for profiling and the dispatch count).
    pub fn dispatches(&self, batch: &Batch) -> Vec<Dispatch<'_>> {
        self.program.dispatches(batch)
    }

    /// The batches a forward of `n_tokens` tokens from `start_pos` runs, in order ([`Llama::submit`]
    /// splits its tokens into chunks of [`Llama::batch`] tokens, or fewer where every token's
    /// logits are kept): what `webgpu-llama plan` prints.
    pub fn batches(&self, n_tokens: u32, start_pos: u32, all_logits: bool) -> Vec<Batch> {
        let chunk = self.chunk(all_logits);
        (0..n_tokens).step_by(chunk as usize).map(|first| self.plan(chunk.min(n_tokens - first), start_pos + first, all_logits)).collect()
    }

    /// Tokens a chunk of [`Llama::submit`] holds.
    fn chunk(&self, all_logits: bool) -> u32 {
        if all_logits {
            self.logit_rows
        } else {
            self.batch
        }
    }

    /// Dispatches recorded for one decoded token at position 0 (the seed's `dispatchesPerToken`).
    pub fn dispatches_per_token(&self) -> usize {
        self.program.dispatches(&self.plan(1, 0, false)).len()
    }

    /// Bytes of weights on the GPU, and bytes of those tensors in the file.
    pub fn weight_bytes(&self) -> (u64, u64) {
        (self.weights.gpu_bytes, self.weights.file_bytes)
    }

    /// Bytes of every GPU buffer this model made (weights, KV cache, activations, uniforms).
    pub fn gpu_bytes(&self) -> u64 {
        self.weights.gpu_bytes + self.buffers.iter().map(|b| b.size()).sum::<u64>()
    }

    /// KV-cache positions written so far: a `forward` may start at any position up to this.
    pub fn filled(&self) -> u32 {
        self.filled.get()
    }

    /// Checks `forward`'s arguments without touching the GPU.
    ///
    /// Errors: [`Error::Disposed`]; [`Error::DeviceLost`] once the device's loss was reported
    /// ([`Gpu::lost`]); [`Error::Input`] for a [`Llama::generate`] call under way, an empty
    /// list, `start_pos + tokens.len() > ctx`, a gap in the cache, an id `>= vocab`.
    pub fn validate(&self, tokens: &[u32], start_pos: u32) -> Result<()> {
        self.validate_span(tokens.len() as u64, start_pos)?;
        if let Some((i, t)) = tokens.iter().enumerate().find(|(_, &t)| t >= self.config.vocab) {
            return Err(Error::Input(format!("token id {t} at index {i} is out of range (vocab {})", self.config.vocab)));
        }
        Ok(())
    }

    /// [`Llama::validate`] for `n` tokens whatever their ids.
    fn validate_span(&self, n: u64, start_pos: u32) -> Result<()> {
        if self.disposed.get() {
            return Err(Error::Disposed);
        }
        self.gpu.lost()?;
        if self.generating.get() || self.reserved.get() {
            return Err(Error::Input("a generate call is under way: await it before the next forward or generate".into()));
        }
        if n == 0 {
            return Err(Error::Input("tokens must be a non-empty list of token ids".into()));
        }
        if start_pos as u64 + n > self.config.ctx as u64 {
            return Err(Error::Input(format!("past the context: startPos {start_pos} + {n} tokens > ctx {}", self.config.ctx)));
        }
        let filled = self.filled.get();
        if start_pos > filled {
            return Err(Error::Input(format!(
                "startPos {start_pos} leaves a gap: only positions 0..{filled} of the KV cache are filled \
                 ({filled} positions), so the next forward must start at or before {filled}"
            )));
        }
        Ok(())
    }

    /// A MAP_READ buffer of `bytes` bytes: a pooled one of that size if there is one (see
    /// [`Llama::recycle`]), else a new one.
    fn readback(&self, bytes: u64) -> wgpu::Buffer {
        let mut pool = self.readbacks.borrow_mut();
        let pooled = pool.iter().position(|b| b.size() == bytes).map(|i| pool.swap_remove(i));
        pooled.unwrap_or_else(|| {
            self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("readback"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
    }

    /// Writes a batch's step uniform and token ids (queued before its command buffer).
    fn write_inputs(&self, batch: &Batch, tokens: &[u32]) {
        self.gpu.queue.write_buffer(&self.step, 0, bytemuck::bytes_of(&Step::of(batch)));
        self.gpu.queue.write_buffer(&self.tokens, 0, bytemuck::cast_slice(tokens));
    }

    /// Queues `tokens` at positions `start_pos..` in batches of at most [`Llama::batch`] tokens
    /// (one command buffer each) and the copy of the logits asked for (the last token's, or with
    /// `all_logits` every token's, in token order) into a readback buffer, which it returns.
    /// Synchronous, so calls that are not awaited are still queued in order.
    ///
    /// Then, while the GPU runs what it queued, it records the one-token step at the next
    /// position: a decode loop's next call only writes the token and submits (recording a step's
    /// dispatches is CPU time that would otherwise leave the GPU idle).
    ///
    /// Errors: as [`Llama::validate`].
    pub fn submit(&self, tokens: &[u32], start_pos: u32, all_logits: bool) -> Result<Pending> {
        self.queue(tokens, start_pos, if all_logits { Readout::All } else { Readout::Last })
    }

    fn queue(&self, tokens: &[u32], start_pos: u32, readout: Readout) -> Result<Pending> {
        self.validate(tokens, start_pos)?;
        self.run_setup();
        if let Readout::TopK(k) = readout {
            self.topk.check(k)?;
        }
        let all_logits = readout == Readout::All;
        let prepared = self.next.borrow_mut().take();
        if let Some(p) = prepared {
            // (fill last: it unmaps the slot, which only this step's submission may follow.)
            if tokens.len() == 1 && readout == p.readout && p.pos == start_pos && self.inputs.fill(&p.step, tokens[0]) {
                if let Readout::TopK(k) = readout {
                    self.topk.set_k(&self.gpu.queue, k);
                }
                self.gpu.queue.submit([p.commands]);
                self.filled.set(start_pos + 1);
                self.prepare(start_pos + 1, readout);
                return Ok(Pending { buffer: p.readback, rows: (readout == Readout::Last) as u32 });
            }
            self.readbacks.borrow_mut().push(p.readback);
        }
        let row = self.config.vocab as u64 * 4;
        let (rows, readback) = match readout {
            Readout::All => (tokens.len() as u32, self.readback(tokens.len() as u64 * row)),
            Readout::Last => (1, self.readback(row)),
            Readout::TopK(k) => {
                self.topk.set_k(&self.gpu.queue, k);
                (0, self.readback(TOP_K_BYTES))
            }
        };
        let chunk = self.chunk(all_logits) as usize;
        for (c, part) in tokens.chunks(chunk).enumerate() {
            let first = (c * chunk) as u32;
            let last = first as usize + part.len() == tokens.len();
            let batch = self.plan(part.len() as u32, start_pos + first, all_logits);
            self.write_inputs(&batch, part);
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            self.encode(&mut enc, &batch, readout, &readback, first, last);
            self.gpu.queue.submit([enc.finish()]);
        }
        let end = start_pos + tokens.len() as u32;
        self.filled.set(end);
        self.prepare(end, if readout == Readout::All { Readout::Last } else { readout });
        Ok(Pending { buffer: readback, rows })
    }

    /// Queues `tokens` as [`Llama::submit`] does, then the top `k` of the last token's logits
    /// on the GPU ([`crate::topk`]); the readback holds `k` pairs `(id: u32, logit: f32 bits)`.
    ///
    /// Errors: as [`Llama::validate`]; [`Error::Input`] when `k` is not 1 ..= min(128, vocab).
    pub fn submit_top_k(&self, tokens: &[u32], start_pos: u32, k: u32) -> Result<Pending> {
        self.queue(tokens, start_pos, Readout::TopK(k))
    }

    /// Records the one-token step at `pos` with `readout` (`Last`: the logits, or `TopK`, into a
    /// pooled readback buffer) for [`Llama::submit`] or [`Llama::submit_top_k`] to use if the next
    /// call asks for exactly it: recording a step costs about as much CPU time as the GPU takes to
    /// run it on a fast GPU, so it is done while the GPU runs the step before.
    fn prepare(&self, pos: u32, readout: Readout) {
        // (After dispose() nothing may allocate: a generate call that ends after it comes here.)
        if pos >= self.config.ctx || self.disposed.get() {
            return;
        }
        #[cfg(not(target_arch = "wasm32"))]
        let t = std::time::Instant::now();
        let batch = self.plan(1, pos, false);
        let readback = self.readback(if let Readout::TopK(_) = readout { TOP_K_BYTES } else { self.config.vocab as u64 * 4 });
        let mut enc = self.gpu.device.create_command_encoder(&Default::default());
        self.inputs.record(&mut enc, &self.step, &self.tokens);
        self.encode(&mut enc, &batch, readout, &readback, 0, true);
        *self.next.borrow_mut() = Some(Prepared { pos, readout, step: Step::of(&batch), commands: enc.finish(), readback });
        #[cfg(not(target_arch = "wasm32"))]
        self.prepare_s.set(self.prepare_s.get() + t.elapsed().as_secs_f64());
    }

    /// Records one batch's commands into `enc`: the forward pass, then what `readout` reads back
    /// into `readback`: every row (the batch's rows from token `first` of the call on), or on the
    /// call's `last` batch the last row or the top k.
    fn encode(&self, enc: &mut wgpu::CommandEncoder, batch: &Batch, readout: Readout, readback: &wgpu::Buffer, first: u32, last: bool) {
        let row = self.config.vocab as u64 * 4;
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            self.program.record(&mut pass, batch);
            if last && matches!(readout, Readout::TopK(_)) {
                self.topk.record(&mut pass);
            }
        }
        match readout {
            Readout::All => enc.copy_buffer_to_buffer(&self.logits, 0, readback, first as u64 * row, batch.n_tokens as u64 * row),
            Readout::Last if last => enc.copy_buffer_to_buffer(&self.logits, 0, readback, 0, row),
            Readout::TopK(k) if last => enc.copy_buffer_to_buffer(&self.topk.out, 0, readback, 0, k as u64 * 8),
            _ => {}
        }
    }

    /// One-token steps recorded ahead and submitted so far with their inputs written through the
    /// staging slot ([`StepInputs`]), and those recorded afresh instead because the slot's map
    /// had not completed (natively, when the step before was neither read nor the device polled
    /// since it finished).
    pub fn staged_steps(&self) -> (u64, u64) {
        self.inputs.counts()
    }

    /// CPU seconds spent so far recording one-token steps ahead of their calls (natively; 0 in
    /// the browser): the part of [`Llama::submit`]'s time that overlaps the GPU's work.
    pub fn prepare_seconds(&self) -> f64 {
        self.prepare_s.get()
    }

    /// Reads a [`Pending`]'s logits and gives its buffer back.
    pub async fn read(&self, pending: Pending) -> Result<Vec<f32>> {
        self.read_with(pending, <[f32]>::to_vec).await
    }

    /// Reads a [`Pending`]'s logits in place: `f` gets them straight from the mapped readback
    /// buffer, with no copy (a sampler's pass over 128256 logits then reads them once; as
    /// llama.cpp's `llama_get_logits` hands out its own buffer), and the buffer goes back to the
    /// pool after it returns. The logits are `vocab` f32 per row, rows in token order: the last
    /// token's alone, or with [`Llama::submit`]'s `all_logits` one per token (for a
    /// [`Llama::submit_top_k`] call, its `(id, logit)` pairs' bits, which [`crate::topk::decode`]
    /// reads from [`Llama::read`]'s copy).
    ///
    /// Errors: [`Error::DeviceLost`] when the device was lost before or while it ran (never a
    /// hang: natively the wait ends once the device is idle); [`Error::Gpu`] (the buffer could
    /// not be mapped, or a GPU error was captured).
    pub async fn read_with<T>(&self, pending: Pending, f: impl FnOnce(&[f32]) -> T) -> Result<T> {
        // (Mapped memory is 4-byte aligned in practice; otherwise it is copied first.)
        let read = |b: &[u8]| match bytemuck::try_cast_slice(b) {
            Ok(v) => f(v),
            Err(_) => f(&bytemuck::pod_collect_to_vec::<u8, f32>(b)),
        };
        match self.gpu.map_read_with(&pending.buffer, read).await {
            Ok(d) => {
                self.recycle(pending);
                Ok(d)
            }
            Err(e) => {
                pending.buffer.destroy();
                Err(e)
            }
        }
    }

    /// Runs `tokens` at positions `start_pos..` and returns the `vocab` next-token logits after
    /// the last one. Positions before `start_pos` must already be in the KV cache; re-running
    /// from an earlier position overwrites the cache from there.
    ///
    /// Errors: [`Error::Input`] for an empty list, a token id `>= vocab`, `start_pos +
    /// tokens.len() > ctx` ("past the context") or `start_pos` past the filled positions (a gap);
    /// [`Error::Disposed`]; [`Error::DeviceLost`]; [`Error::Gpu`].
    pub async fn forward(&self, tokens: &[u32], start_pos: u32) -> Result<Vec<f32>> {
        let pending = self.submit(tokens, start_pos, false)?;
        self.read(pending).await
    }

    /// As [`Llama::forward`], but returns the logits after every token: `tokens.len()` rows of
    /// `vocab` values, row i the next-token logits after token i (the layout of
    /// `../shared/reference/*.logits.f32`).
    pub async fn forward_all(&self, tokens: &[u32], start_pos: u32) -> Result<Vec<f32>> {
        let pending = self.submit(tokens, start_pos, true)?;
        self.read(pending).await
    }

    /// As [`Llama::forward`], but returns only the `k` largest next-token logits with their token
    /// ids, largest first (equal logits by lower id: the order of a stable descending sort of
    /// the full logits), computed on the GPU: `8 k` bytes read back instead of `4 vocab`.
    ///
    /// Errors: as [`Llama::forward`]; [`Error::Input`] when `k` is not 1 ..= min(128, vocab).
    pub async fn forward_top_k(&self, tokens: &[u32], start_pos: u32, k: u32) -> Result<Vec<(u32, f32)>> {
        let pending = self.submit_top_k(tokens, start_pos, k)?;
        Ok(crate::topk::decode(&self.read(pending).await?, k))
    }

    /// GPU time of each dispatch of one batch of `n` tokens at `pos0` (token id 1 each), from
    /// timestamp queries around one compute pass per dispatch: (kernel label, the output head's
    /// after "head: " ([`crate::program::Dispatch::labelled`]), seconds, bytes moved) in program
    /// order; and the GPU seconds of the whole batch in one compute pass, as `forward`
    /// records it (the median of 5 runs), which also shows what the per-dispatch passes add.
    /// `None` when the device has no timestamp queries. Writes the KV cache at `pos0 .. pos0 + n`
    /// (positions before must be filled).
    ///
    /// Errors: as [`Llama::validate`]; [`Error::Gpu`].
    pub async fn profile(&self, n: u32, pos0: u32) -> Result<Option<(Vec<(String, f64, u64)>, f64)>> {
        self.validate_span(n as u64, pos0)?;
        let tokens = vec![1u32; n as usize];
        if n > self.batch || !self.gpu.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) {
            return Ok(None);
        }
        self.run_setup();
        let batch = self.plan(n, pos0, false);
        let count = self.program.dispatches(&batch).len() as u32 * 2;
        let (queries, resolve) = self.timestamps(count);
        self.write_inputs(&batch, &tokens);
        let mut enc = self.gpu.device.create_command_encoder(&Default::default());
        let list = self.program.record_timed(&mut enc, &batch, &queries);
        enc.resolve_query_set(&queries, 0..count, &resolve, 0);
        self.gpu.queue.submit([enc.finish()]);
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&self.gpu.read(&resolve, count as u64 * 8).await?);
        resolve.destroy();
        queries.destroy();
        self.filled.set(self.filled.get().max(pos0 + n));
        let period = self.gpu.queue.get_timestamp_period() as f64 * 1e-9;
        let list = list.iter().enumerate().map(|(i, d)| (d.labelled(), ticks[2 * i + 1].saturating_sub(ticks[2 * i]) as f64 * period, d.bytes)).collect();
        // The same batch in one pass.
        let (queries, resolve) = self.timestamps(2);
        let mut runs = Vec::new();
        for _ in 0..5 {
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            {
                let timestamp_writes =
                    Some(wgpu::ComputePassTimestampWrites { query_set: &queries, beginning_of_pass_write_index: Some(0), end_of_pass_write_index: Some(1) });
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
                self.program.record(&mut pass, &batch);
            }
            enc.resolve_query_set(&queries, 0..2, &resolve, 0);
            self.gpu.queue.submit([enc.finish()]);
            let t: Vec<u64> = bytemuck::pod_collect_to_vec(&self.gpu.read(&resolve, 16).await?);
            runs.push(t[1].saturating_sub(t[0]) as f64 * period);
        }
        resolve.destroy();
        queries.destroy();
        runs.sort_by(f64::total_cmp);
        Ok(Some((list, runs[2])))
    }

    /// Compiles now the kernels that a batch of `n` tokens at `pos0` runs (and the setup
    /// program's), as its first run would ([`crate::program::Variant`]), so that a caller can
    /// catch their errors in an error scope of its own (the browser's `profile`).
    ///
    /// Errors: as [`Llama::validate`] for `n` tokens.
    pub fn compile(&self, n: u32, pos0: u32) -> Result<()> {
        self.validate_span(n as u64, pos0)?;
        if let Some(setup) = self.setup.borrow().as_ref() {
            setup.dispatches(&self.plan(1, 0, false)).iter().for_each(|d| _ = d.variant.pipeline());
        }
        self.program.dispatches(&self.plan(n.min(self.batch), pos0, false)).iter().for_each(|d| _ = d.variant.pipeline());
        Ok(())
    }

    /// Submits the setup program (the weights' regrouping) the first time it is called.
    fn run_setup(&self) {
        if let Some(setup) = self.setup.borrow_mut().take() {
            setup.submit(&self.gpu, &self.plan(1, 0, false));
        }
    }

    /// `count` timestamp queries and the buffer they resolve into (the profiler's).
    fn timestamps(&self, count: u32) -> (wgpu::QuerySet, wgpu::Buffer) {
        let queries = self.gpu.device.create_query_set(&wgpu::QuerySetDescriptor { label: Some("profile"), ty: wgpu::QueryType::Timestamp, count });
        let resolve = self.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile timestamps"),
            size: count as u64 * 8,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        (queries, resolve)
    }

    /// Gives a read (and unmapped) readback buffer back to the pool (a few one-row and top-k
    /// buffers are kept; after [`Llama::dispose`] it is destroyed).
    pub fn recycle(&self, pending: Pending) {
        let mut pool = self.readbacks.borrow_mut();
        let size = pending.buffer.size();
        let reused = size == self.config.vocab as u64 * 4 || size == TOP_K_BYTES;
        if self.disposed.get() || !reused || pool.len() >= 6 {
            pending.buffer.destroy();
        } else {
            pool.push(pending.buffer);
        }
    }

    /// Frees every GPU buffer this model made (never the device). Later calls fail with
    /// [`Error::Disposed`].
    pub fn dispose(&self) {
        if self.disposed.replace(true) {
            return;
        }
        let prepared = self.next.borrow_mut().take();
        if let Some(p) = prepared {
            p.readback.destroy();
        }
        self.inputs.destroy();
        for b in self.weights.buffers.iter().chain(&self.buffers).chain(self.readbacks.borrow_mut().drain(..).as_slice()) {
            b.destroy();
        }
    }

    /// Marks a [`Llama::generate`] call as accepted before it starts (the browser's `generate`
    /// returns its promise first and starts it from the microtask queue): until then, and then
    /// while it runs, other calls fail as [`Llama::validate`] says, so that none is queued
    /// between the call and its steps. Its start takes the mark over; [`Llama::release`] drops
    /// it when the call ends before starting.
    pub fn reserve(&self) {
        self.reserved.set(true);
    }

    /// Drops [`Llama::reserve`]'s mark.
    pub fn release(&self) {
        self.reserved.set(false);
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
