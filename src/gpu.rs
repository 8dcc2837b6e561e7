//! The wgpu context: device and queue, the device limits that decide how tensors are split,
//! buffer helpers, and the compute pipelines built once from `shaders/*.wgsl`.

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

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
        Gpu { device, queue, adapter_info, errors, binding_cap: None }
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
        Ok(Gpu::from_device(device, queue, format!("{} ({:?}, {})", info.name, info.backend, info.driver_info), true))
    }

    /// The device's limits.
    pub fn limits(&self) -> wgpu::Limits {
        self.device.limits()
    }

    /// The largest buffer one storage binding may hold, in bytes (the binding and the buffer limit).
    pub fn max_binding(&self) -> u64 {
        let l = self.limits();
        let limit = (l.max_storage_buffer_binding_size as u64).min(l.max_buffer_size);
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

    /// A storage buffer of `size` bytes (at least 16), zeroed.
    pub fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(16).next_multiple_of(4),
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Token embedding gather.
    Embed,
    /// RMSNorm.
    RmsNorm,
    /// f32 matrix-vector product.
    Matvec,
    /// Q8_0 matrix-vector product.
    MatvecQ8,
    /// RoPE and KV-cache write.
    RopeKv,
    /// Causal GQA attention for one query position.
    Attention,
    /// MoE router top-k and gates.
    MoeSelect,
    /// Selected experts' gate/up projections.
    MatvecExp,
    /// Selected experts' down projections, gated, into the residual.
    MoeDown,
    /// SwiGLU activation.
    Swiglu,
}

impl Kernel {
    /// Every kernel, in pipeline-table order.
    pub const ALL: [Kernel; 10] = [
        Kernel::Embed, Kernel::RmsNorm, Kernel::Matvec, Kernel::MatvecQ8, Kernel::RopeKv,
        Kernel::Attention, Kernel::MoeSelect, Kernel::MatvecExp, Kernel::MoeDown, Kernel::Swiglu,
    ];

    /// The kernel's WGSL source.
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Embed => include_str!("../shaders/embed.wgsl"),
            Kernel::RmsNorm => include_str!("../shaders/rmsnorm.wgsl"),
            Kernel::Matvec => include_str!("../shaders/matvec.wgsl"),
            Kernel::MatvecQ8 => include_str!("../shaders/matvec_q8.wgsl"),
            Kernel::RopeKv => include_str!("../shaders/rope_kv.wgsl"),
            Kernel::Attention => include_str!("../shaders/attention.wgsl"),
            Kernel::MoeSelect => include_str!("../shaders/moe_select.wgsl"),
            Kernel::MatvecExp => include_str!("../shaders/matvec_exp.wgsl"),
            Kernel::MoeDown => include_str!("../shaders/moe_down.wgsl"),
            Kernel::Swiglu => include_str!("../shaders/swiglu.wgsl"),
        }
    }

    /// The file stem, e.g. `matvec_q8`.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Embed => "embed",
            Kernel::RmsNorm => "rmsnorm",
            Kernel::Matvec => "matvec",
            Kernel::MatvecQ8 => "matvec_q8",
            Kernel::RopeKv => "rope_kv",
            Kernel::Attention => "attention",
            Kernel::MoeSelect => "moe_select",
            Kernel::MatvecExp => "matvec_exp",
            Kernel::MoeDown => "moe_down",
            Kernel::Swiglu => "swiglu",
        }
    }
}

/// Compute pipelines for every [`Kernel`], built once.
pub struct Kernels {
    pipelines: Vec<wgpu::ComputePipeline>,
}

impl Kernels {
    /// Compiles every kernel on `device`.
    pub fn new(device: &wgpu::Device) -> Kernels {
        let pipelines = Kernel::ALL
            .iter()
            .map(|k| {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(k.name()),
                    source: wgpu::ShaderSource::Wgsl(k.source().into()),
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(k.name()),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: Default::default(),
                    cache: None,
                })
            })
            .collect();
        Kernels { pipelines }
    }

    /// The pipeline of kernel `k`.
    pub fn pipeline(&self, k: Kernel) -> &wgpu::ComputePipeline {
        &self.pipelines[Kernel::ALL.iter().position(|&x| x == k).unwrap_or(0)]
    }

    /// A bind group for `k` with `buffers` at bindings 0, 1, 2 ... in order.
    pub fn bind(&self, device: &wgpu::Device, k: Kernel, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(k.name()),
            layout: &self.pipeline(k).get_bind_group_layout(0),
            entries: &entries,
        })
    }
}

/// One recorded dispatch: a kernel, its bind group and its workgroup grid.
pub struct Dispatch {
    /// The kernel.
    pub kernel: Kernel,
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
pub fn record(pass: &mut wgpu::ComputePass<'_>, kernels: &Kernels, program: &[Dispatch]) {
    for d in program {
        pass.set_pipeline(kernels.pipeline(d.kernel));
        pass.set_bind_group(0, &d.bind, &[]);
        pass.dispatch_workgroups(d.groups.0, d.groups.1, 1);
    }
}
