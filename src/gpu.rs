//! The wgpu context: device and queue, the device's facts ([`Caps`]: what the adapter is and
//! can do, found once when the device is created or adopted), the user's on/off [`Switches`],
//! and buffer helpers. What kernels a device gets from these: [`crate::policy`]; the kernels
//! themselves: [`crate::kernels`].

use std::sync::Arc;

use crate::error::{Error, Result};

mod sink;

/// What the device is and can do, found once: natively from the adapter ([`Gpu::native`]), in
/// the browser from the host's `GPUDevice` and adapter (`web::adopt`, through
/// [`Gpu::set_web_subgroup`], [`Gpu::set_web_size_control`] and [`Gpu::set_web_packed_dot`]).
/// Facts, never choices: the choices they lead to are [`crate::policy`]'s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Caps {
    /// The adapter is a CPU implementation of the API (lavapipe, SwiftShader): by its type
    /// natively, by its name otherwise. The class whose policy applies is [`Gpu::is_cpu`]
    /// (this, unless [`Gpu::set_cpu`] says otherwise).
    pub cpu: bool,
    /// The adapter is SwiftShader (by its name): Chromium's WebGPU on machines without a GPU.
    /// Its JIT (Subzero, 4 lanes) favours other kernel shapes than lavapipe's (LLVM).
    pub swiftshader: bool,
    /// Natively on Vulkan: naga makes `storageBarrier` device scope and emits `OpSDot` for
    /// `dot4I8Packed` where the device has integer dot products.
    pub vulkan: bool,
    /// The one subgroup size the kernels are compiled for, where the device has the subgroups
    /// feature and one fixed size (natively from the adapter; in the browser from the host's
    /// device), else `None`.
    pub subgroup: Option<u32>,
    /// In the browser with a subgroup size: the WGSL starts with `enable subgroups;`.
    pub wgsl_subgroups: bool,
    /// In the browser: the device has `subgroup-size-control` and the kernels with subgroup
    /// operations fix their size with `@subgroup_size`.
    pub size_control: bool,
    /// The device was created with 16x16x16 f16 x f16 -> f32 cooperative matrices (natively
    /// only, where the adapter has them and subgroups of exactly 32).
    pub coop: bool,
    /// In the browser: whether WGSL has `dot4I8Packed` (the `packed_4x8_integer_dot_product`
    /// language feature); `None` natively.
    pub packed_dot: Option<bool>,
    /// The device's limits.
    pub limits: wgpu::Limits,
}

/// The user's on/off choices of kernel form (the CLI's flags, tests), as ggml-vulkan's toggles:
/// `None` leaves the choice to the device's policy ([`crate::policy`]). Set them before loading a
/// model: the program is built with the choices of that moment. Numeric shapes and measuring
/// modes are the laboratory's (`lab` builds only: [`crate::knobs`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Switches {
    /// The matrix-unit matmul (`shaders/matmul_coop.wgsl`: f16 halves of f32 operands, f32
    /// accumulation) for the batches beyond [`crate::linear::matvec_max_tokens`]; `None`: where
    /// the device has cooperative matrices ([`crate::policy::coop`]).
    pub coop: Option<bool>,
    /// The one-token matrix-vector form of formats with an integer form (Q4_K, Q8_0, Q6_K) reads
    /// 24-bit quantised activations and multiplies by integer dot products where it reads pieces
    /// ([`crate::linear::int_dot`]); `None`: [`crate::policy::int_dot`].
    pub int_dot: Option<bool>,
    /// Read the matrix-vector kernel's weights as 16-byte pieces where the format has them
    /// ([`crate::linear::wide`]); `None`: on GPUs.
    pub wide: Option<bool>,
    /// Fuse RMSNorm and SwiGLU into the matrix-vector kernel (`shaders/matvec.wgsl`, NORM and
    /// GLU); `None`: [`crate::policy::fused`].
    pub fuse: Option<bool>,
    /// Where the one-token form is the integer one, the output and down projections and the
    /// SwiGLU matvec write the next op's integer activations themselves (`QOUT`,
    /// [`crate::linear::quant_out`]), saving a quantize dispatch; `None`: on.
    pub quant_out: Option<bool>,
    /// One-token attention through `shaders/attention_decode.wgsl`; `None`: on GPUs (see
    /// [`crate::attention::decode_kernel`]).
    pub decode_attention: Option<bool>,
    /// Batches of more than [`crate::attention::SPLIT_MAX_TOKENS`] tokens through
    /// `shaders/attention_tiled.wgsl` on GPUs where its tiles fit (else `attention.wgsl`).
    pub tiled_attention: bool,
    /// One-token attention through `shaders/attention_decode_wide.wgsl` where it applies
    /// ([`crate::attention::decode_wide`]); `None`: for head dims past
    /// [`crate::attention::PREFETCH_MAX_HD`].
    pub attn_wide: Option<bool>,
    /// Where one-token attention fuses RoPE and the cache write and the value projection is a
    /// matrix of its own, the value projection writes the token's value into the V cache itself
    /// ([`crate::linear::Fuse::cache_row`]), so that it can run alongside the q/k projection;
    /// `None`: on.
    pub v_to_cache: Option<bool>,
    /// One-token attention merges its key splits itself, in the last workgroup of each head
    /// group to finish, instead of a combine dispatch after it
    /// ([`crate::attention::fuses_combine`]); `None`: [`crate::policy::fused_combine`].
    pub fused_combine: Option<bool>,
    /// Natively, wait for a readback by polling the device in a loop (one CPU core busy, for at
    /// most [`SPIN_LIMIT`], then a blocking wait) instead of sleeping in the driver's fence wait,
    /// which wakes up late (CUDA's default wait spins too); `None`: on GPUs, off on CPU adapters
    /// (whose work would lose the core). No effect in the browser, whose map promise resolves on
    /// its own schedule.
    pub spin_wait: Option<bool>,
    /// Natively, keep wgpu's injected shader runtime checks (see [`crate::pipelines::Kernels::pipeline`]).
    pub checked_shaders: bool,
    /// Reduce with subgroup operations where the device has one subgroup size
    /// ([`Gpu::reduce_subgroup`]): matrix-vector row sums, the one-token softmax, and on CPU
    /// adapters the matvec form that broadcasts activations across a subgroup. Off: workgroup
    /// memory only.
    pub reduce_subgroups: bool,
    /// Compile the CPU adapters' kernels (the CPU matmul, attention) with subgroups where the
    /// device has one size ([`Gpu::cpu_subgroup`]), sharing loads across a subgroup's lanes.
    pub cpu_subgroups: bool,
    /// On CPU adapters, the CPU matrix-matrix kernel (`shaders/matmul_cpu.wgsl`) and attention
    /// kernel (`shaders/attention_cpu.wgsl`) for prefill; off: the GPU kernels there too.
    pub cpu_kernels: bool,
}

impl Switches {
    /// Every switch's name (the field's) and what it turns on, for the CLI's `--switch NAME=BOOL`.
    pub const NAMES: [(&'static str, &'static str); 15] = [
        ("coop", "the matrix-unit matmul for prefill (default: where the device has cooperative matrices)"),
        ("int_dot", "one-token matvecs of Q4_K, Q8_0, Q6_K by integer dot products (default: natively on Vulkan, GPUs in the browser)"),
        ("wide", "matvec weights read as 16-byte pieces where the format has them (default: on GPUs)"),
        ("fuse", "RMSNorm and SwiGLU fused into the matvec (default: on GPUs and on CPU adapters with subgroups)"),
        ("quant_out", "integer-form matvecs write the next op's integer activations (default: on)"),
        ("decode_attention", "one-token attention through its own kernel (default: on GPUs)"),
        ("tiled_attention", "prefill attention through the tiled kernel (default: on)"),
        ("attn_wide", "one-token attention through the wide kernel (default: head dims past 64)"),
        ("v_to_cache", "the value projection writes decode's value into the V cache (default: on)"),
        ("fused_combine", "one-token attention merges its key splits itself (default: natively on Vulkan)"),
        ("spin_wait", "readbacks waited for by polling, up to 20 ms (default: on GPUs)"),
        ("checked_shaders", "keep wgpu's injected shader runtime checks (default: off)"),
        ("reduce_subgroups", "reductions by subgroup operations where the device has one size (default: on)"),
        ("cpu_subgroups", "CPU adapters' kernels with subgroups (default: on)"),
        ("cpu_kernels", "CPU adapters' own matmul and attention kernels for prefill (default: on)"),
    ];

    /// Sets one switch from `NAME=BOOL` ([`Switches::NAMES`]).
    ///
    /// # Errors
    /// [`Error::Input`] naming an unknown switch or a value other than `true` or `false`.
    pub fn set(&mut self, assignment: &str) -> Result<()> {
        let names = || Self::NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
        let (name, value) = assignment.split_once('=').ok_or_else(|| Error::Input(format!("switch {assignment:?}: expected NAME=true|false ({})", names())))?;
        let on: bool = value.trim().parse().map_err(|_| Error::Input(format!("switch {name}={value}: expected true or false")))?;
        match name.trim() {
            "coop" => self.coop = Some(on),
            "int_dot" => self.int_dot = Some(on),
            "wide" => self.wide = Some(on),
            "fuse" => self.fuse = Some(on),
            "quant_out" => self.quant_out = Some(on),
            "decode_attention" => self.decode_attention = Some(on),
            "tiled_attention" => self.tiled_attention = on,
            "attn_wide" => self.attn_wide = Some(on),
            "v_to_cache" => self.v_to_cache = Some(on),
            "fused_combine" => self.fused_combine = Some(on),
            "spin_wait" => self.spin_wait = Some(on),
            "checked_shaders" => self.checked_shaders = on,
            "reduce_subgroups" => self.reduce_subgroups = on,
            "cpu_subgroups" => self.cpu_subgroups = on,
            "cpu_kernels" => self.cpu_kernels = on,
            _ => return Err(Error::Input(format!("switch {name}: unknown ({})", names()))),
        }
        Ok(())
    }

    /// The switches and their docs, one a line (`--switch help`).
    pub fn help() -> String {
        Self::NAMES.iter().map(|(n, d)| format!("{n:<18} {d}")).collect::<Vec<_>>().join("\n")
    }
}

impl Default for Switches {
    /// Every choice the policy's.
    fn default() -> Switches {
        Switches {
            coop: None,
            int_dot: None,
            wide: None,
            fuse: None,
            quant_out: None,
            decode_attention: None,
            tiled_attention: true,
            attn_wide: None,
            v_to_cache: None,
            fused_combine: None,
            spin_wait: None,
            checked_shaders: false,
            reduce_subgroups: true,
            cpu_subgroups: true,
            cpu_kernels: true,
        }
    }
}

/// The subgroup size to compile the kernels for on an adapter of subgroup sizes `min..=max`, and
/// whether each kernel must fix it (`@subgroup_size`, which needs `size_control`: the device's
/// `subgroup-size-control`): the one size where `min == max`, or where a range can be fixed, 32
/// if it holds 32, else its largest power of two up to 64. Sizes are powers of two from 4 to 64
/// (the one-token attention takes keys per subgroup: 1 or 2 gain nothing); else `None`.
pub fn subgroup_for(min: u32, max: u32, size_control: bool) -> Option<(u32, bool)> {
    let ok = |n: u32| (4..=64).contains(&n) && n.is_power_of_two();
    if min == max {
        return ok(min).then_some((min, false));
    }
    if !size_control || min > max {
        return None;
    }
    let top = max.min(64);
    let pick = if (min..=max).contains(&32) {
        32
    } else if top.is_power_of_two() {
        top
    } else {
        top.next_power_of_two() / 2
    };
    (ok(pick) && pick >= min).then_some((pick, true))
}

/// Whether WGSL `src` calls a subgroup builtin function (`subgroupAdd`, `subgroupShuffleXor` ...)
/// or reads a subgroup builtin value.
fn uses_subgroups(src: &str) -> bool {
    src.contains("@builtin(subgroup_") || src.match_indices("subgroup").any(|(i, _)| src[i + 8..].starts_with(|c: char| c.is_ascii_uppercase()))
}

/// A map asked for ([`Gpu::ask_map`]): its result's channel and whether its callback has run.
type MapAsked = (futures_channel::oneshot::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>, Arc<std::sync::atomic::AtomicBool>);

/// The longest a readback is waited for in a polling loop ([`Switches::spin_wait`]): a decode
/// step's wait (short on a GPU) is spun through;
/// a long prompt's (seconds) sleeps after this, so that a core is not burned for all of it.
pub const SPIN_LIMIT: std::time::Duration = std::time::Duration::from_millis(20);

/// A device and queue, natively created or adopted from the host page, plus what the device
/// reported outside the calls (its uncaptured errors and its loss: `gpu/sink.rs`).
#[derive(Clone)]
pub struct Gpu {
    /// The wgpu device (on the web: the host page's `GPUDevice`).
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// Adapter name and backend, for logs and the CLI.
    pub adapter_info: String,
    sink: Arc<sink::Sink>,
    binding_cap: Option<u64>,
    caps: Caps,
    /// The class whose policy applies: a CPU implementation ([`Gpu::is_cpu`]).
    cpu: bool,
    switches: Switches,
    /// The laboratory's knobs ([`crate::lab`]).
    #[cfg(feature = "lab")]
    pub(crate) knobs: crate::knobs::Knobs,
}

impl Gpu {
    /// Wraps an existing device. With `capture_errors` (only for devices we own: it takes the
    /// device's one uncaptured-error handler and its one device-lost callback) uncaptured
    /// validation and out-of-memory errors are recorded for [`Gpu::check`] instead of panicking,
    /// and the device's loss for [`Gpu::lost`].
    pub fn from_device(device: wgpu::Device, queue: wgpu::Queue, adapter_info: String, capture_errors: bool) -> Gpu {
        let sink = if capture_errors { sink::Sink::watching(&device) } else { Default::default() };
        let name = adapter_info.to_lowercase();
        let cpu = ["llvmpipe", "lavapipe", "swiftshader", "software"].iter().any(|s| name.contains(s));
        let caps = Caps {
            cpu,
            swiftshader: name.contains("swiftshader"),
            vulkan: false,
            subgroup: None,
            wgsl_subgroups: false,
            size_control: false,
            coop: device.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX),
            packed_dot: None,
            limits: device.limits(),
        };
        Gpu {
            device,
            queue,
            adapter_info,
            sink,
            binding_cap: None,
            caps,
            cpu,
            switches: Switches::default(),
            #[cfg(feature = "lab")]
            knobs: Default::default(),
        }
    }

    /// The device's facts.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// Sets the device class whose policy applies ([`Gpu::is_cpu`]): tests run a GPU's kernel
    /// forms and defaults on a CPU adapter with `set_cpu(false)`.
    pub fn set_cpu(&mut self, cpu: bool) {
        self.cpu = cpu;
    }

    /// On the web: whether WGSL has `dot4I8Packed` (the `packed_4x8_integer_dot_product`
    /// language feature, [`Caps::packed_dot`]). Where it has, GPUs take the integer matvec form
    /// as natively on Vulkan ([`crate::policy::int_dot`]); CPU adapters keep the f32 form.
    pub fn set_web_packed_dot(&mut self, packed: bool) {
        self.caps.packed_dot = Some(packed);
    }

    /// The on/off choices in force.
    pub fn switches(&self) -> &Switches {
        &self.switches
    }

    /// Sets on/off choices (the CLI; tests run every form on one device). Set them before
    /// loading a model: the program is built with the choices of that moment.
    pub fn switches_mut(&mut self) -> &mut Switches {
        &mut self.switches
    }

    /// The device's subgroup size where it has the `subgroups` feature and one fixed size
    /// (natively from the adapter; on the web from the host's `GPUDevice`, see
    /// [`Gpu::set_web_subgroup`]).
    pub fn subgroup_size(&self) -> Option<u32> {
        self.caps.subgroup
    }

    /// The subgroup size the GPU kernels' reductions are compiled for, or 0: workgroup memory
    /// only ([`Switches::reduce_subgroups`]). `shaders/matvec.wgsl` adds a row's partial sums by
    /// butterfly shuffles within a subgroup, then across the row's subgroups in workgroup
    /// memory; `attention_decode.wgsl` takes its softmax max and sum the same way.
    pub fn reduce_subgroup(&self) -> u32 {
        self.caps.subgroup.filter(|_| self.switches.reduce_subgroups).unwrap_or(0)
    }

    /// The subgroup size the CPU kernels are compiled for, sharing loads across a subgroup's
    /// lanes, or 0: none ([`Switches::cpu_subgroups`]).
    pub fn cpu_subgroup(&self) -> u32 {
        self.caps.subgroup.filter(|_| self.switches.cpu_subgroups).unwrap_or(0)
    }

    /// On the web: the host device's subgroup size (its `subgroups` feature and one size, read
    /// from JS: wgpu's WebGPU backend does not report the feature), or `None`. With a size, the
    /// kernels are compiled with subgroups as natively ([`Gpu::reduce_subgroup`],
    /// [`Gpu::cpu_subgroup`]) and their WGSL starts with `enable subgroups;` (which the
    /// browser requires and naga, natively, rejects; see [`Gpu::wgsl_source`]).
    pub fn set_web_subgroup(&mut self, size: Option<u32>) {
        self.caps.subgroup = size;
        self.caps.wgsl_subgroups = size.is_some();
    }

    /// On the web, with [`Gpu::set_web_subgroup`]'s size: the device has
    /// `subgroup-size-control` and its adapter a range of sizes (D3D12, Vulkan on Intel and AMD),
    /// so each kernel with subgroup operations is compiled for that size with `@subgroup_size`
    /// ([`Gpu::wgsl_source`]); the host must have requested the feature.
    pub fn set_web_size_control(&mut self, on: bool) {
        self.caps.size_control = on && self.caps.wgsl_subgroups;
    }

    /// A kernel's WGSL as this device compiles it: on the web with subgroups, after
    /// `enable subgroups;` and the subgroup uniformity diagnostic off (the kernels' subgroup
    /// operations run where every invocation of a subgroup takes the same path, by construction;
    /// an unknown diagnostic name is only a warning), and with [`Gpu::set_web_size_control`] the
    /// size fixed where the kernel uses subgroup operations (kernels without them keep any size;
    /// those with them have workgroups of whole subgroups, as a fixed-size device needs too).
    pub fn wgsl_source(&self, src: String) -> String {
        if !self.caps.wgsl_subgroups {
            return src;
        }
        let head = "enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n";
        match self.caps.subgroup {
            Some(n) if self.caps.size_control && uses_subgroups(&src) => {
                format!("{head}enable subgroup_size_control;\n{}", src.replacen("@compute", &format!("@subgroup_size({n}) @compute"), 1))
            }
            _ => format!("{head}{src}"),
        }
    }

    /// Whether the device was created with cooperative matrices ([`Caps::coop`]).
    pub fn has_coop(&self) -> bool {
        self.caps.coop
    }

    /// Whether the device class whose policy applies is a CPU implementation of the API
    /// (lavapipe, SwiftShader: [`Caps::cpu`] unless [`Gpu::set_cpu`] says otherwise): matrix-vector
    /// kernels take a whole row per invocation, attention does not split keys.
    pub fn is_cpu(&self) -> bool {
        self.cpu
    }

    /// Whether the adapter is SwiftShader ([`Caps::swiftshader`]), see
    /// [`crate::linear::rows_per_thread`].
    pub fn is_swiftshader(&self) -> bool {
        self.caps.swiftshader
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
        // The matrix-unit matmul (shaders/matmul_coop.wgsl) needs 16x16x16 f16 x f16 -> f32
        // cooperative matrices, f16 in shaders and subgroups of exactly 32.
        let coop_ok = adapter.cooperative_matrix_properties().iter().any(|p| {
            (p.m_size, p.n_size, p.k_size) == (16, 16, 16) && p.ab_type == wgpu::CooperativeScalarType::F16 && p.cr_type == wgpu::CooperativeScalarType::F32
        }) && adapter.features().contains(wgpu::Features::SHADER_F16 | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && (info.subgroup_min_size, info.subgroup_max_size) == (32, 32);
        let mut wanted = wgpu::Features::SUBGROUP | wgpu::Features::SHADER_F16 | wgpu::Features::TIMESTAMP_QUERY;
        if coop_ok {
            wanted |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webgpu-llama"),
                required_features: adapter.features() & wanted,
                required_limits: limits,
                // SAFETY: only the cooperative-matrix feature is experimental; its one kernel is
                // checked on the devices that have it by tests/reference.rs (variant 4) and
                // tests/formats.rs (variants 6 to 8), which skip, saying so, elsewhere.
                experimental_features: if coop_ok { unsafe { wgpu::ExperimentalFeatures::enabled() } } else { wgpu::ExperimentalFeatures::disabled() },
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("could not create a device on {}: {e}", info.name)))?;
        // Cooperative-matrix shapes the adapter offers (for the logs).
        let coop: Vec<String> = adapter
            .cooperative_matrix_properties()
            .iter()
            .map(|p| format!("{}x{}x{} {:?}->{:?}", p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type))
            .collect();
        let coop = if coop.is_empty() { String::new() } else { format!("; cooperative matrix: {}", coop.join(", ")) };
        let mut gpu = Gpu::from_device(device, queue, format!("{} ({:?}, {}{coop})", info.name, info.backend, info.driver_info), true);
        // Kernels compiled for one subgroup size need the device to have exactly that one.
        let fixed = info.subgroup_min_size == info.subgroup_max_size && info.subgroup_min_size.is_power_of_two() && info.subgroup_min_size <= 64;
        gpu.caps.subgroup = (gpu.device.features().contains(wgpu::Features::SUBGROUP) && fixed).then_some(info.subgroup_min_size);
        gpu.caps.cpu |= info.device_type == wgpu::DeviceType::Cpu;
        gpu.cpu = gpu.caps.cpu;
        gpu.caps.vulkan = info.backend == wgpu::Backend::Vulkan;
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

    /// A storage buffer of `size` bytes rounded up to a multiple of 16 (so that kernels may read
    /// any f32 vector as `array<vec4<f32>>`), zeroed. A refused allocation (out of memory) is
    /// recorded for [`Gpu::check`].
    pub fn storage(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.allocate(&wgpu::BufferDescriptor {
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

    /// A uniform buffer holding `value` (a `#[repr(C)]` struct laid out as its WGSL twin).
    pub fn uniform_of<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        let bytes = bytemuck::bytes_of(value);
        let b = self.allocate(&wgpu::BufferDescriptor {
            label: Some(label),
            size: (bytes.len() as u64).max(16).next_multiple_of(16),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.queue.write_buffer(&b, 0, bytes);
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

    /// Whether readbacks are waited for by polling in a loop ([`Switches::spin_wait`]).
    pub fn spin_wait(&self) -> bool {
        self.switches.spin_wait.unwrap_or(!self.caps.cpu)
    }

    /// Natively: polls the device until `done` (set by a map callback) is set, in a loop for up
    /// to [`SPIN_LIMIT`] with [`Gpu::spin_wait`]; then (or without it) waits, blocking, for
    /// submission `after` (else for all the work submitted so far), after which the callback
    /// has run. A generation's block is read while the next block runs: waiting for everything
    /// would leave the GPU idle while the block after that is recorded. Should the callback
    /// still not have run (a map the device dropped), it waits once for everything; so it
    /// always returns, the device lost or not.
    #[cfg(not(target_arch = "wasm32"))]
    fn wait_for(&self, done: &std::sync::atomic::AtomicBool, after: Option<wgpu::SubmissionIndex>) -> Result<()> {
        let err = |e: wgpu::PollError| Error::Gpu(format!("device poll failed: {e}"));
        let is_done = || done.load(std::sync::atomic::Ordering::Acquire);
        let start = std::time::Instant::now();
        while self.spin_wait() && start.elapsed() < SPIN_LIMIT {
            if is_done() {
                return Ok(());
            }
            self.device.poll(wgpu::PollType::Poll).map_err(err)?;
            std::hint::spin_loop();
        }
        let waited_for_all = after.is_none();
        self.device.poll(wgpu::PollType::Wait { submission_index: after, timeout: None }).map_err(err)?;
        if !is_done() && !waited_for_all {
            self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(err)?;
        }
        Ok(())
    }

    /// Maps a MAP_READ buffer and copies its contents out.
    pub async fn map_read(&self, rb: &wgpu::Buffer) -> Result<Vec<u8>> {
        self.map_read_with(rb, <[u8]>::to_vec).await
    }

    /// Maps a MAP_READ buffer and returns `f` of its bytes (one pass over the mapped memory: a
    /// 512 KB logits row read once, not copied out and then converted).
    pub async fn map_read_with<T>(&self, rb: &wgpu::Buffer, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        self.map_read_after(rb, None, f).await
    }

    /// [`Gpu::map_read_with`] of a buffer whose last copy is in submission `after`: natively,
    /// a blocking wait waits for that submission only, not for the work submitted after it.
    pub async fn map_read_after<T>(&self, rb: &wgpu::Buffer, after: Option<wgpu::SubmissionIndex>, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        let asked = Self::ask_map(rb);
        self.finish_map(rb, asked, after, f).await
    }

    /// [`Gpu::map_read`] with the map asked for at this call, not when the future is first
    /// polled: a caller that awaits something else first (its error scope) waits for both at
    /// once, where each is a round trip to the browser's GPU process. A caller that drops the
    /// future unfinished destroys `rb` (its map may be pending or done, never unmapped).
    pub fn map_read_started<'a>(&'a self, rb: &'a wgpu::Buffer) -> impl std::future::Future<Output = Result<Vec<u8>>> + 'a {
        let asked = Self::ask_map(rb);
        self.finish_map(rb, asked, None, <[u8]>::to_vec)
    }

    /// Asks for `rb`'s map for reading: the map's result and whether its callback has run.
    fn ask_map(rb: &wgpu::Buffer) -> MapAsked {
        let (tx, rx) = futures_channel::oneshot::channel();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        rb.map_async(wgpu::MapMode::Read, .., move |r| {
            flag.store(true, std::sync::atomic::Ordering::Release);
            let _ = tx.send(r);
        });
        (rx, done)
    }

    /// Waits for a map [`Gpu::ask_map`] asked for, returns `f` of the bytes and unmaps. Every
    /// failure is [`Error::DeviceLost`] where the device turns out to be lost.
    async fn finish_map<T>(&self, rb: &wgpu::Buffer, (rx, done): MapAsked, after: Option<wgpu::SubmissionIndex>, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        #[cfg(not(target_arch = "wasm32"))]
        let mapped = {
            let mut rx = rx;
            self.wait_for(&done, after).map_err(|e| self.or_lost(e))?;
            // (After the waits the callback has run, or never will: awaiting it could hang.)
            match rx.try_recv() {
                Ok(Some(r)) => Ok(r),
                Ok(None) => return Err(self.or_lost(Error::Gpu("the readback's map did not complete once the device was idle".into()))),
                Err(c) => Err(c),
            }
        };
        #[cfg(target_arch = "wasm32")]
        let mapped = {
            let _ = (after, done);
            rx.await
        };
        mapped
            .map_err(|_| self.or_lost(Error::Gpu("the readback was dropped (device lost?)".into())))?
            .map_err(|e| self.or_lost(Error::Gpu(format!("could not map the readback buffer: {e}"))))?;
        let data = f(&rb.get_mapped_range(..).map_err(|e| self.or_lost(Error::Gpu(format!("mapped range: {e}"))))?);
        rb.unmap();
        self.recorded()?;
        Ok(data)
    }
}

/// The laboratory's knobs ([`crate::lab`]; `lab` builds only).
#[cfg(feature = "lab")]
impl Gpu {
    /// The knobs in force (the CLI's `--set`; tests).
    pub fn lab(&self) -> &crate::knobs::Knobs {
        &self.knobs
    }

    /// Sets knobs (tests force every kernel shape on one device). Set them before loading a
    /// model: the program is built with the values of that moment.
    pub fn lab_mut(&mut self) -> &mut crate::knobs::Knobs {
        &mut self.knobs
    }
}
