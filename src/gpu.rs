//! The wgpu context: device and queue, the device limits that decide how tensors are split,
//! buffer helpers, and the compute pipelines built once from `shaders/*.wgsl`.
//!
//! The four kernels that read weights (`embed`, `matvec`, `matvec_exp`, `moe_down`) read them in
//! the GGUF's stored format: each is composed at pipeline creation ([`compose`]) from
//! `const TPR, RPW` (its workgroup shape), `shaders/formats/common.wgsl`, one
//! `shaders/formats/<type>.wgsl` (the block layout: `unit_dot` and `dequant`) and the kernel file.
//! Pipelines are built once, at load, for the (kernel, format, shape) triples the model uses.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::ggml::GgmlType;

/// A device and queue, natively created or adopted from the host page, plus an error sink.
#[derive(Clone)]
pub struct Gpu {
    /// The wgpu device (on the web: the host page's `GPUDevice`).
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Adapter name and backend, for logs and the CLI.
    pub adapter_info: String,
    errors: Arc<Mutex<Vec<String>>>,
    binding_cap: Option<u64>,
    cpu: bool,
    tpr: Option<u32>,
}

impl Gpu {
    /// Wraps an existing device. With `capture_errors` (only for devices we own) uncaptured
    /// validation and out-of-memory errors are recorded for [`Gpu::check`] instead of panicking.
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue, adapter_info: String, capture_errors: bool) -> Gpu {
        let errors = Arc::new(Mutex::new(Vec::new()));
        if capture_errors {
            let sink = errors.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                if let Ok(mut v) = sink.lock() {
                    v.push(e.to_string());
                }
            }));
        }
        let name = adapter_info.to_lowercase();
        let cpu = ["llvmpipe", "lavapipe", "swiftshader", "software"].iter().any(|s| name.contains(s));
        Gpu { device, queue, adapter_info, errors, binding_cap: None, cpu, tpr: None }
    }

    /// Whether the device is a CPU implementation of the API (lavapipe, SwiftShader: detected
    /// from the adapter's type natively, from its name otherwise); the weight kernels then use a
    /// workgroup shape that suits SIMD lanes rather than GPU memory coalescing
    /// ([`threads_per_row`]).
    pub fn is_cpu(&self) -> bool {
        self.cpu
    }

    /// Overrides [`Gpu::is_cpu`] (tests run both kernel shapes on one device).
    pub fn set_cpu(&mut self, cpu: bool) {
        self.cpu = cpu;
    }

    /// Forces the weight kernels' threads per row (a power of two from 1 to 64; `None`: the
    /// [`threads_per_row`] policy), so that tests can run every workgroup shape on any device.
    pub fn set_threads_per_row(&mut self, tpr: Option<u32>) {
        assert!(tpr.is_none_or(|t| t.is_power_of_two() && t <= WORKGROUP), "threads per row must be a power of two up to 64");
        self.tpr = tpr;
    }

    /// Creates a native device (Vulkan, Metal or DX12; `WGPU_BACKEND` overrides) with the
    /// adapter's own limits, or WebGPU's defaults when `default_limits` is set (to test splitting).
    #[cfg(not(target_arch = "wasm32"))]
    pub async fn native(default_limits: bool) -> Result<Gpu> {
        let backends = wgpu::Backends::from_env().unwrap_or(wgpu::Backends::VULKAN | wgpu::Backends::METAL | wgpu::Backends::DX12);
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor { backends, ..wgpu::InstanceDescriptor::new_without_display_handle() });
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions { power_preference: wgpu::PowerPreference::HighPerformance, ..Default::default() })
            .await
            .map_err(|e| Error::Gpu(format!("no GPU adapter found (is a Vulkan driver such as lavapipe installed?): {e}")))?;
        let info = adapter.get_info();
        let limits = if default_limits { wgpu::Limits::default() } else { adapter.limits() };
        let wanted = wgpu::Features::SUBGROUP | wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webgpu-llama"),
                required_features: adapter.features() & wanted,
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("could not create a device on {}: {e}", info.name)))?;
        let mut gpu = Gpu::from_device(device, queue, format!("{} ({:?}, {})", info.name, info.backend, info.driver_info), true);
        gpu.cpu |= info.device_type == wgpu::DeviceType::Cpu;
        Ok(gpu)
    }

    /// The device's limits.
    pub fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    /// The largest buffer one storage binding may hold, in bytes (the binding and the buffer
    /// limit, and at most 4 GiB - 16: the weight kernels address bytes with u32).
    pub fn max_binding(&self) -> u64 {
        let l = self.limits();
        let limit = l.max_storage_buffer_binding_size.min(l.max_buffer_size).min((1 << 32) - 16);
        self.binding_cap.map_or(limit, |c| c.min(limit))
    }

    /// Caps [`Gpu::max_binding`] below the device's limit, so that tests can force tensors to be
    /// split on any device.
    pub fn cap_binding(&mut self, bytes: u64) {
        self.binding_cap = Some(bytes);
    }

    /// Returns the first GPU error recorded since the last call, if any.
    pub fn check(&self) -> Result<()> {
        let mut v = self.errors.lock().map_err(|_| Error::Gpu("error sink poisoned".into()))?;
        let first = v.drain(..).next();
        match first {
            Some(e) => Err(Error::Gpu(e)),
            None => Ok(()),
        }
    }

    /// A storage buffer of `size` bytes rounded up to a multiple of 16 (so that kernels may read
    /// any f32 vector as `array<vec4<f32>>`), zeroed.
    pub fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(16).next_multiple_of(16),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// A storage buffer holding `data`.
    pub fn storage_with(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        let b = self.storage(label, data.len() as u64);
        self.queue.write_buffer(&b, 0, data);
        b
    }

    /// A 16-byte uniform buffer holding four words.
    pub fn uniform(&self, label: &str, words: [u32; 4]) -> wgpu::Buffer {
        let b = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: 16,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&b, 0, bytemuck::cast_slice(&words));
        b
    }

    /// Copies `size` bytes of `src` to a new mappable buffer and returns them (native: polls;
    /// web: awaits the map promise).
    pub async fn read(&self, src: &wgpu::Buffer, size: u64) -> Result<Vec<u8>> {
        let rb = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(src, 0, &rb, 0, size);
        self.queue.submit([enc.finish()]);
        let out = self.map_read(&rb).await;
        rb.destroy();
        out
    }

    /// Maps a MAP_READ buffer and copies its contents out.
    pub async fn map_read(&self, rb: &wgpu::Buffer) -> Result<Vec<u8>> {
        let (tx, rx) = futures_channel::oneshot::channel();
        rb.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("device poll failed: {e}")))?;
        rx.await
            .map_err(|_| Error::Gpu("the readback was dropped (device lost?)".into()))?
            .map_err(|e| Error::Gpu(format!("could not map the readback buffer: {e}")))?;
        let data = rb.get_mapped_range(..).map_err(|e| Error::Gpu(format!("mapped range: {e}")))?.to_vec();
        rb.unmap();
        self.check()?;
        Ok(data)
    }
}

/// The compute kernels, one WGSL file each under `shaders/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Token embedding gather (per weight format).
    Embed,
    /// RMSNorm.
    RmsNorm,
    /// Matrix-vector product (per weight format).
    Matvec,
    /// RoPE and KV-cache write.
    RopeKv,
    /// Causal GQA attention for one query position.
    Attention,
    /// MoE router top-k and gates.
    MoeSelect,
    /// Selected experts' gate/up projections (per weight format).
    MatvecExp,
    /// Selected experts' down projections, gated, into the residual (per weight format).
    MoeDown,
    /// SwiGLU activation.
    Swiglu,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 9] = [
        Kernel::Embed, Kernel::RmsNorm, Kernel::Matvec, Kernel::RopeKv, Kernel::Attention,
        Kernel::MoeSelect, Kernel::MatvecExp, Kernel::MoeDown, Kernel::Swiglu,
    ];

    /// The kernel's WGSL source (for the weight kernels, without its format: see [`compose`]).
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Embed => include_str!("../shaders/embed.wgsl"),
            Kernel::RmsNorm => include_str!("../shaders/rmsnorm.wgsl"),
            Kernel::Matvec => include_str!("../shaders/matvec.wgsl"),
            Kernel::RopeKv => include_str!("../shaders/rope_kv.wgsl"),
            Kernel::Attention => include_str!("../shaders/attention.wgsl"),
            Kernel::MoeSelect => include_str!("../shaders/moe_select.wgsl"),
            Kernel::MatvecExp => include_str!("../shaders/matvec_exp.wgsl"),
            Kernel::MoeDown => include_str!("../shaders/moe_down.wgsl"),
            Kernel::Swiglu => include_str!("../shaders/swiglu.wgsl"),
        }
    }

    /// The file stem, e.g. `matvec_exp`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Embed => "embed",
            Kernel::RmsNorm => "rmsnorm",
            Kernel::Matvec => "matvec",
            Kernel::RopeKv => "rope_kv",
            Kernel::Attention => "attention",
            Kernel::MoeSelect => "moe_select",
            Kernel::MatvecExp => "matvec_exp",
            Kernel::MoeDown => "moe_down",
            Kernel::Swiglu => "swiglu",
        }
    }

    /// Whether the kernel reads weights, and so is composed with a format file.
    pub fn reads_weights(self) -> bool {
        matches!(self, Kernel::Embed | Kernel::Matvec | Kernel::MatvecExp | Kernel::MoeDown)
    }
}

/// Invocations per workgroup of the weight kernels.
pub const WORKGROUP: u32 = 64;

/// `shaders/formats/<type>.wgsl`: how the weight kernels read a matrix stored as `ty`.
pub fn format_source(ty: GgmlType) -> &'static str {
    match ty {
        GgmlType::F32 => include_str!("../shaders/formats/f32.wgsl"),
        GgmlType::F16 => include_str!("../shaders/formats/f16.wgsl"),
        GgmlType::BF16 => include_str!("../shaders/formats/bf16.wgsl"),
        GgmlType::Q4_0 => include_str!("../shaders/formats/q4_0.wgsl"),
        GgmlType::Q4_1 => include_str!("../shaders/formats/q4_1.wgsl"),
        GgmlType::Q5_0 => include_str!("../shaders/formats/q5_0.wgsl"),
        GgmlType::Q5_1 => include_str!("../shaders/formats/q5_1.wgsl"),
        GgmlType::Q8_0 => include_str!("../shaders/formats/q8_0.wgsl"),
        GgmlType::Q2_K => include_str!("../shaders/formats/q2_k.wgsl"),
        GgmlType::Q3_K => include_str!("../shaders/formats/q3_k.wgsl"),
        GgmlType::Q4_K => include_str!("../shaders/formats/q4_k.wgsl"),
        GgmlType::Q5_K => include_str!("../shaders/formats/q5_k.wgsl"),
        GgmlType::Q6_K => include_str!("../shaders/formats/q6_k.wgsl"),
    }
}

/// Weights per work unit of format `ty` (its file's `const UNIT`): one thread's step.
pub fn format_unit(ty: GgmlType) -> u32 {
    format_source(ty)
        .lines()
        .find_map(|l| l.strip_prefix("const UNIT: u32 = ")?.strip_suffix("u;")?.parse().ok())
        .unwrap_or_else(|| panic!("shaders/formats/{}.wgsl has no `const UNIT: u32 = Nu;`", ty.name().to_lowercase()))
}

/// Threads per row (TPR) for a matrix-vector product over `rows` rows (all picks together for
/// the expert kernels) of `cols` weights of format `ty`; a workgroup then holds 64 / TPR rows.
///
/// * On a GPU: the fewest threads per row, from 64 (or the row's work units rounded up to a
///   power of two, if fewer) down to 4, that still give about 128k threads in all (enough to fill
///   a large GPU): fewer threads per row give each thread more of a row's work units (more loads
///   in flight, shorter reductions), too few leave the GPU idle. Measured on an H200 (Q4_K, warm
///   clocks; `tests/formats.rs` bench): 32000 x 2048 takes 35 us at 16 threads per row and 41 at
///   64; 2048 x 8192 takes 12 us at 64 and 22 at 16.
/// * On a CPU implementation ([`Gpu::is_cpu`]: lavapipe, SwiftShader), 1: each invocation takes
///   a whole row, so the SIMD lanes of a workgroup read the same `X` elements in step (a uniform
///   address: one load instead of one per lane) and no reduction is needed; about 1.5x the
///   decode speed of the GPU shapes on lavapipe.
///
/// [`Gpu::set_threads_per_row`] overrides both.
pub fn threads_per_row(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32) -> u32 {
    if let Some(t) = gpu.tpr {
        return t;
    }
    if gpu.cpu {
        return 1;
    }
    const THREADS: u64 = 128 * 1024;
    let units = (cols / format_unit(ty)).max(1);
    let mut t = units.next_power_of_two().clamp(4, WORKGROUP);
    while t > 4 && rows as u64 * (t as u64 / 2) >= THREADS {
        t /= 2;
    }
    t
}

/// The WGSL of `kernel`; weight kernels are composed with `format`'s file and the workgroup shape
/// `tpr` threads per row (a power of two dividing [`WORKGROUP`]).
pub fn compose(kernel: Kernel, format: Option<(GgmlType, u32)>) -> String {
    match format {
        Some((ty, tpr)) if kernel.reads_weights() => format!(
            "// composed by gpu::compose: {kernel} for {ty}, {tpr} threads per row\n\
             const TPR: u32 = {tpr}u;\nconst RPW: u32 = {rpw}u;\n{common}\n{fmt}\n{body}",
            kernel = kernel.name(),
            ty = ty.name(),
            rpw = WORKGROUP / tpr,
            common = include_str!("../shaders/formats/common.wgsl"),
            fmt = format_source(ty),
            body = kernel.source(),
        ),
        // Attention takes its workgroup size (the key's number) as a constant.
        Some((_, wg)) if kernel == Kernel::Attention => {
            format!("// composed by gpu::compose: attention, workgroup {wg}\nconst WG: u32 = {wg}u;\n{}", kernel.source())
        }
        _ => kernel.source().to_string(),
    }
}

/// The attention kernel's workgroup size: 256 on GPUs (more threads per head in flight), 64 on
/// CPU adapters (barriers cost per invocation there).
pub fn attention_workgroup(gpu: &Gpu) -> u32 {
    if gpu.is_cpu() { 64 } else { 256 }
}

/// A pipeline: a kernel, and for the weight kernels the format and threads per row (for
/// attention, the number is its workgroup size).
pub type PipelineKey = (Kernel, Option<(GgmlType, u32)>);

/// Compute pipelines, each built once on first use (at load) and then shared.
#[derive(Default)]
pub struct Kernels {
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
}

impl Kernels {
    /// No pipelines yet.
    pub fn new() -> Kernels {
        Kernels::default()
    }

    /// The pipeline for `key`, compiled on first use.
    pub fn pipeline(&mut self, device: &wgpu::Device, key: PipelineKey) -> wgpu::ComputePipeline {
        let key = if key.0.reads_weights() || key.0 == Kernel::Attention { key } else { (key.0, None) };
        self.pipelines
            .entry(key)
            .or_insert_with(|| {
                let label = match key.1 {
                    Some((ty, tpr)) => format!("{} {} tpr {tpr}", key.0.name(), ty.name()),
                    None => key.0.name().to_string(),
                };
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&label),
                    source: wgpu::ShaderSource::Wgsl(compose(key.0, key.1).into()),
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
            })
            .clone()
    }

    /// Pipelines built so far.
    pub fn len(&self) -> usize {
        self.pipelines.len()
    }

    /// Whether none is built yet.
    pub fn is_empty(&self) -> bool {
        self.pipelines.is_empty()
    }

    /// A dispatch of `key` over `groups` with `buffers` bound at 0, 1, 2 ... in order.
    pub fn dispatch(&mut self, device: &wgpu::Device, key: PipelineKey, buffers: &[&wgpu::Buffer], groups: (u32, u32)) -> Dispatch {
        let pipeline = self.pipeline(device, key);
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
            .collect();
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(key.0.name()),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        Dispatch { kernel: key.0, pipeline, bind, groups }
    }
}

/// One recorded dispatch: a kernel's pipeline, its bind group and its workgroup grid.
pub struct Dispatch {
    /// The kernel.
    pub kernel: Kernel,
    /// Its pipeline (shared with every dispatch of the same kernel, format and shape).
    pub pipeline: wgpu::ComputePipeline,
    /// Its bindings.
    pub bind: wgpu::BindGroup,
    /// Workgroups in x and y.
    pub groups: (u32, u32),
}

/// A grid of `n` workgroups within the 65535-per-dimension limit: (x, y) with x * y >= n.
/// Kernels recover the index as `wg.y * num_workgroups.x + wg.x` and skip indices past `n`.
pub fn grid(n: u32) -> (u32, u32) {
    let x = n.clamp(1, 65535);
    (x, n.div_ceil(x).max(1))
}

/// Records `program` into one compute pass.
pub fn record(pass: &mut wgpu::ComputePass<'_>, program: &[Dispatch]) {
    for d in program {
        pass.set_pipeline(&d.pipeline);
        pass.set_bind_group(0, &d.bind, &[]);
        pass.dispatch_workgroups(d.groups.0, d.groups.1, 1);
    }
}
