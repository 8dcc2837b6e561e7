//! Compute pipelines, each compiled once from its [`PipelineKey`]'s WGSL, and their bind groups.

use std::collections::HashMap;

use crate::gpu::Gpu;
#[cfg(feature = "lab")]
use crate::kernels::hollow;
use crate::kernels::{bound, composed, Composed, Named, PipelineKey};

/// Compute pipelines, each compiled once, on the first batch that runs it
/// ([`crate::program::Variant`]), then shared.
#[derive(Default)]
pub struct Kernels {
    pipelines: HashMap<PipelineKey, (wgpu::ComputePipeline, std::rc::Rc<[String]>)>,
}

impl Kernels {
    /// No pipelines yet.
    pub fn new() -> Kernels {
        Kernels::default()
    }

    /// The pipeline for `key`, compiled on first use (layout derived from the WGSL).
    ///
    /// Natively, unless [`crate::gpu::Switches::checked_shaders`] is set, the module is created
    /// without wgpu's injected runtime checks: every loop of these kernels has a bound known
    /// at dispatch, and every index stays inside its array by construction (the tests check the
    /// results on every shape), while buffer accesses stay covered by Vulkan's robust buffer
    /// access, which wgpu enables. The injected loop counters and index clamps otherwise keep
    /// the driver's compiler from unrolling the kernels' inner loops and holding their
    /// per-thread arrays in registers. The browser always compiles its own checked form.
    pub fn pipeline(&mut self, gpu: &Gpu, key: PipelineKey) -> wgpu::ComputePipeline {
        self.compiled(gpu, key).0
    }

    /// The pipeline for `key` and its bindings' names.
    fn compiled(&mut self, gpu: &Gpu, key: PipelineKey) -> (wgpu::ComputePipeline, std::rc::Rc<[String]>) {
        let device = &gpu.device;
        let checked = gpu.switches().checked_shaders;
        self.pipelines
            .entry(key)
            .or_insert_with(|| {
                let label = key.label();
                let Composed { wgsl, bindings } = composed(&key);
                let src = gpu.wgsl_source(wgsl);
                #[cfg(feature = "lab")]
                let src = if gpu.lab().hollow.hollows(key.kernel) { hollow(&src) } else { src };
                let desc = wgpu::ShaderModuleDescriptor { label: Some(&label), source: wgpu::ShaderSource::Wgsl(src.into()) };
                let module = if checked || cfg!(target_arch = "wasm32") {
                    device.create_shader_module(desc)
                } else {
                    // SAFETY: see above; the kernels are ours, bounded and in-bounds by construction.
                    unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
                };
                let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                });
                (pipeline, bindings.into())
            })
            .clone()
    }

    /// Pipelines compiled so far.
    pub fn len(&self) -> usize {
        self.pipelines.len()
    }

    /// Whether none is compiled yet.
    pub fn is_empty(&self) -> bool {
        self.pipelines.is_empty()
    }

    /// `key`'s pipeline and a bind group of `buffers`, each at the binding its name declares
    /// ([`bound`]).
    pub fn bind(&mut self, gpu: &Gpu, key: PipelineKey, buffers: &[Named<'_>]) -> (wgpu::ComputePipeline, wgpu::BindGroup) {
        let device = &gpu.device;
        let (pipeline, bindings) = self.compiled(gpu, key);
        let entries: Vec<wgpu::BindGroupEntry> =
            bound(&bindings, buffers).into_iter().map(|(binding, b)| wgpu::BindGroupEntry { binding, resource: b.as_entire_binding() }).collect();
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(key.kernel.name()),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        (pipeline, bind)
    }
}
