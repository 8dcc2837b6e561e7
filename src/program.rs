//! The forward program: a list of ops recorded once at load, each able to run on a batch of any
//! number of tokens up to the activations' capacity (one token when decoding, a chunk of the
//! prompt when prefilling). An op holds one or more variants (a kernel key and its buffers,
//! compiled and bound on the first batch that picks it: see [`Variant`]) and a plan that, given
//! the [`Batch`], picks the variant and its workgroup grid, or skips the op. The only per-batch
//! inputs on the GPU are the [`Step`] uniform and the token ids, written once per batch.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use bytemuck::{Pod, Zeroable};

use crate::gpu::Gpu;
use crate::kernels::{Named, PipelineKey};
use crate::pipelines::Kernels;

/// What one recorded pass computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// Tokens in the batch (at least 1, at most the program's capacity).
    pub n_tokens: u32,
    /// Position of the first token.
    pub pos0: u32,
    /// Key splits of attention (flash-decoding; 1 = none), see [`crate::attention::splits`].
    pub splits: u32,
    /// Compute the logits of every token, not only the last one's.
    pub all_logits: bool,
}

/// The step uniform every batched kernel reads (`struct Step` of `shaders/step.wgsl`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct Step {
    /// Tokens in the batch.
    pub n_tokens: u32,
    /// Position of the first token.
    pub pos0: u32,
    /// Attention key splits.
    pub splits: u32,
    /// Padding to 16 bytes.
    pub pad: u32,
}

impl Step {
    /// The uniform for `b`.
    pub fn of(b: &Batch) -> Step {
        Step { n_tokens: b.n_tokens, pos0: b.pos0, splits: b.splits, pad: 0 }
    }
}

/// The device and pipeline cache that a program's variants compile from.
pub struct Compiler {
    gpu: Gpu,
    kernels: RefCell<Kernels>,
}

/// One form of an op: a kernel and its buffers, compiled and bound the first time a batch
/// records it. A variant that no batch picks is never compiled: a CPU adapter's compiler (in
/// the browser, SwiftShader) compiles a pipeline slowly, and most sessions
/// never run some forms (the top-k readout, the split-key combine, GPU forms on CPU adapters).
pub struct Variant {
    /// What it is compiled for.
    pub key: PipelineKey,
    buffers: Vec<(&'static str, wgpu::Buffer)>,
    compiler: Rc<Compiler>,
    built: OnceCell<(wgpu::ComputePipeline, wgpu::BindGroup)>,
}

impl Variant {
    /// `key` bound to `buffers` by name ([`crate::kernels::bound`]), compiled on first use.
    pub fn new(compiler: &Rc<Compiler>, key: PipelineKey, buffers: &[Named<'_>]) -> Variant {
        Variant { key, buffers: buffers.iter().map(|&(n, b)| (n, b.clone())).collect(), compiler: compiler.clone(), built: OnceCell::new() }
    }

    fn built(&self) -> &(wgpu::ComputePipeline, wgpu::BindGroup) {
        self.built.get_or_init(|| {
            let c = &self.compiler;
            let buffers: Vec<Named<'_>> = self.buffers.iter().map(|(n, b)| (*n, b)).collect();
            c.kernels.borrow_mut().bind(&c.gpu, self.key, &buffers)
        })
    }

    /// The pipeline (compiled now if it is not yet).
    pub fn pipeline(&self) -> &wgpu::ComputePipeline {
        &self.built().0
    }

    /// Its bind group (made now if it is not yet).
    pub fn bind(&self) -> &wgpu::BindGroup {
        &self.built().1
    }

    /// Whether it has been compiled.
    pub fn is_built(&self) -> bool {
        self.built.get().is_some()
    }

    /// Records it over `grid` workgroups.
    /// (In `lab` builds with `hollow=one`: over one.)
    pub fn dispatch(&self, pass: &mut wgpu::ComputePass<'_>, grid: [u32; 3]) {
        #[cfg(feature = "lab")]
        let grid = if self.compiler.gpu.lab().hollow == crate::lab::Hollow::One { [1; 3] } else { grid };
        pass.set_pipeline(self.pipeline());
        pass.set_bind_group(0, self.bind(), &[]);
        pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
    }
}

/// Picks an op's variant and grid for a batch; `None` skips the op.
pub type Plan = Box<dyn Fn(&Batch) -> Option<(usize, [u32; 3])>>;

/// Bytes an op moves to and from memory for a batch (an estimate for the profiler: weights read
/// once, plus the activations and KV cache it reads and writes).
pub type Traffic = Box<dyn Fn(&Batch) -> u64>;

/// One step of the forward program.
pub struct Op {
    /// Its compiled forms.
    pub variants: Vec<Variant>,
    /// How a batch runs it.
    pub plan: Plan,
    /// Its memory traffic (0 unless the builder set it).
    pub traffic: Traffic,
    /// What the profiler calls it before its kernel's label ("" for most ops; "head" for the
    /// output head, whose matrix would otherwise share a row with a layer's).
    pub tag: &'static str,
}

/// A dispatch as recorded for one batch: which op's which variant, over which grid.
#[derive(Clone, Copy)]
pub struct Dispatch<'a> {
    /// The variant.
    pub variant: &'a Variant,
    /// Workgroups in x, y, z.
    pub grid: [u32; 3],
    /// Bytes it moves (see [`Traffic`]).
    pub bytes: u64,
    /// Its op's [`Op::tag`].
    pub tag: &'static str,
}

impl Dispatch<'_> {
    /// The profiler's label: the kernel's, after the op's tag if it has one.
    pub fn labelled(&self) -> String {
        match self.tag {
            "" => self.variant.key.label(),
            tag => format!("{tag}: {}", self.variant.key.label()),
        }
    }
}

/// The ops in order.
#[derive(Default)]
pub struct Program {
    /// Ops in execution order.
    pub ops: Vec<Op>,
}

impl Program {
    /// The dispatches a batch runs, in order.
    pub fn dispatches(&self, batch: &Batch) -> Vec<Dispatch<'_>> {
        self.ops
            .iter()
            .filter_map(|op| {
                let (v, grid) = (op.plan)(batch)?;
                Some(Dispatch { variant: &op.variants[v], grid, bytes: (op.traffic)(batch), tag: op.tag })
            })
            .collect()
    }

    /// Appends an op of `variants` planned by `plan` (no traffic estimate).
    pub fn push(&mut self, variants: Vec<Variant>, plan: impl Fn(&Batch) -> Option<(usize, [u32; 3])> + 'static) {
        self.ops.push(Op { variants, plan: Box::new(plan), traffic: Box::new(|_| 0), tag: "" });
    }

    /// Records `batch` into one compute pass of a command buffer of its own and submits it
    /// (nothing when the program is empty).
    pub fn submit(&self, gpu: &Gpu, batch: &Batch) {
        if self.ops.is_empty() {
            return;
        }
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        self.record(&mut enc.begin_compute_pass(&Default::default()), batch);
        gpu.queue.submit([enc.finish()]);
    }

    /// Records `batch` into one compute pass.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, batch: &Batch) {
        for d in self.dispatches(batch) {
            d.variant.dispatch(pass, d.grid);
        }
    }

    /// Records `batch` with one compute pass per dispatch, each writing timestamps `2i` and
    /// `2i + 1` of `queries` (which must hold two per dispatch): the profiler's form. Returns
    /// the dispatches in order.
    pub fn record_timed<'p>(&'p self, enc: &mut wgpu::CommandEncoder, batch: &Batch, queries: &wgpu::QuerySet) -> Vec<Dispatch<'p>> {
        let list = self.dispatches(batch);
        for (i, d) in list.iter().enumerate() {
            let timestamp_writes = Some(wgpu::ComputePassTimestampWrites {
                query_set: queries,
                beginning_of_pass_write_index: Some(2 * i as u32),
                end_of_pass_write_index: Some(2 * i as u32 + 1),
            });
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
            d.variant.dispatch(&mut pass, d.grid);
        }
        list
    }
}

/// A grid of `n` workgroups in x, wrapping into y past 65535 (the per-dimension limit): kernels
/// recover the index as `wg.y * num_workgroups.x + wg.x` and skip indices past `n`.
pub fn grid(n: u32) -> [u32; 3] {
    let x = n.clamp(1, 65535);
    [x, n.div_ceil(x).max(1), 1]
}

/// Builds a [`Program`]; remembers every buffer it makes (for disposal).
pub struct Builder<'a> {
    /// The device.
    pub gpu: &'a Gpu,
    /// The device and pipeline cache the variants compile from.
    pub compiler: Rc<Compiler>,
    /// The program so far.
    pub program: Program,
    /// Ops to run once, before the program's first batch (weight regrouping: [`crate::repack`]).
    pub setup: Program,
    /// Buffers made (uniforms, activations).
    pub buffers: Vec<wgpu::Buffer>,
    /// The per-batch [`Step`] uniform.
    pub step: wgpu::Buffer,
    /// The buffers the quantised activations are written to ([`Builder::quant_buffers`]).
    pub quant_pool: Vec<(wgpu::Buffer, wgpu::Buffer)>,
    /// The buffers they are written to.
    pub halves_pool: Vec<(wgpu::Buffer, wgpu::Buffer)>,
}

impl<'a> Builder<'a> {
    /// An empty program with its step uniform.
    pub fn new(gpu: &'a Gpu) -> Builder<'a> {
        let step = gpu.uniform_of("step", &Step::default());
        Builder {
            gpu,
            compiler: Rc::new(Compiler { gpu: gpu.clone(), kernels: RefCell::new(Kernels::new()) }),
            program: Program::default(),
            setup: Program::default(),
            buffers: vec![step.clone()],
            step,
            quant_pool: Vec::new(),
            halves_pool: Vec::new(),
        }
    }

    /// A uniform buffer holding `value`.
    pub fn uniform<T: Pod>(&mut self, label: &str, value: &T) -> wgpu::Buffer {
        let b = self.gpu.uniform_of(label, value);
        self.buffers.push(b.clone());
        b
    }

    /// A zeroed storage buffer of `bytes` bytes.
    pub fn storage(&mut self, label: &str, bytes: u64) -> wgpu::Buffer {
        let b = self.gpu.storage(label, bytes);
        self.buffers.push(b.clone());
        b
    }

    /// `key` bound to `buffers` by name, compiled on first use.
    pub fn variant(&mut self, key: PipelineKey, buffers: &[Named<'_>]) -> Variant {
        Variant::new(&self.compiler, key, buffers)
    }

    /// Appends an op.
    pub fn op(&mut self, variants: Vec<Variant>, plan: impl Fn(&Batch) -> Option<(usize, [u32; 3])> + 'static) {
        self.program.push(variants, plan);
    }

    /// Appends an op whose forms are named (`F`: an enum with `Display`, e.g.
    /// [`crate::attention::Form`]): `plan` picks a form by name, never by its place in the list.
    pub fn op_forms<F: Copy + PartialEq + std::fmt::Display + 'static>(
        &mut self,
        forms: Vec<(F, Variant)>,
        plan: impl Fn(&Batch) -> Option<(F, [u32; 3])> + 'static,
    ) {
        let (names, variants): (Vec<F>, Vec<Variant>) = forms.into_iter().unzip();
        self.op(variants, move |b| {
            plan(b).map(|(form, grid)| (names.iter().position(|n| *n == form).unwrap_or_else(|| panic!("form {form} was not built")), grid))
        });
    }

    /// Sets the memory traffic of the op appended last (for the profiler).
    pub fn traffic(&mut self, f: impl Fn(&Batch) -> u64 + 'static) {
        if let Some(op) = self.program.ops.last_mut() {
            op.traffic = Box::new(f);
        }
    }

    /// Sets the [`Op::tag`] of the op appended last.
    pub fn tag(&mut self, tag: &'static str) {
        if let Some(op) = self.program.ops.last_mut() {
            op.tag = tag;
        }
    }

    /// Appends an op of one variant that always runs, over `grid(batch)`.
    pub fn plain(&mut self, key: PipelineKey, buffers: &[Named<'_>], grid: impl Fn(&Batch) -> [u32; 3] + 'static) {
        let v = self.variant(key, buffers);
        self.op(vec![v], move |b| Some((0, grid(b))));
    }
}
