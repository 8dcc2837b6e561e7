//! The compute kernels (one WGSL file each under `shaders/`), their typed pipeline keys, and the
//! cache that compiles each (kernel, variant) once.
//!
//! A [`PipelineKey`] names everything that changes a kernel's WGSL: the GGML format of the weights
//! it reads, its geometry (threads per row and tokens per dispatch for the matrix-vector kernels,
//! the tile shape of the matrix-matrix kernel, the head dim and threads per query of attention),
//! and the optional device features it uses. [`compose`] turns a key into WGSL: `const`
//! declarations for the geometry, then for weight kernels `shaders/formats/common.wgsl` and the
//! format's file (its `dq4` decoder: the only per-format code), then the kernel's file(s).

use std::collections::HashMap;

use crate::ggml::GgmlType;
use crate::gpu::Gpu;

/// The compute kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// Token embedding gather (per weight format).
    Embed,
    /// RMSNorm per token row.
    RmsNorm,
    /// Matrix times a few token vectors, each weight read once (per weight format).
    Matvec,
    /// Tiled matrix-matrix product over a batch of tokens (per weight format).
    Matmul,
    /// The same on the matrix units (cooperative matrices, native only; opt-in).
    MatmulCoop,
    /// RoPE and KV-cache write.
    RopeKv,
    /// Causal GQA flash attention of a batch of tokens against the KV cache.
    Attention,
    /// Merges attention's key splits (flash-decoding).
    AttentionCombine,
    /// MoE router top-k and gates per token.
    MoeSelect,
    /// Selected experts' gate/up projections per token (per weight format).
    MatvecExp,
    /// Selected experts' down projections, gated, into the residual (per weight format).
    MoeDown,
    /// SwiGLU activation.
    Swiglu,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 12] = [
        Kernel::Embed,
        Kernel::RmsNorm,
        Kernel::Matvec,
        Kernel::Matmul,
        Kernel::MatmulCoop,
        Kernel::RopeKv,
        Kernel::Attention,
        Kernel::AttentionCombine,
        Kernel::MoeSelect,
        Kernel::MatvecExp,
        Kernel::MoeDown,
        Kernel::Swiglu,
    ];

    /// The kernel's own WGSL (without its format, geometry or shared bindings: see [`compose`]).
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Embed => include_str!("../shaders/embed.wgsl"),
            Kernel::RmsNorm => include_str!("../shaders/rmsnorm.wgsl"),
            Kernel::Matvec => include_str!("../shaders/matvec.wgsl"),
            Kernel::Matmul => include_str!("../shaders/matmul.wgsl"),
            Kernel::MatmulCoop => include_str!("../shaders/matmul_coop.wgsl"),
            Kernel::RopeKv => include_str!("../shaders/rope_kv.wgsl"),
            Kernel::Attention => include_str!("../shaders/attention.wgsl"),
            Kernel::AttentionCombine => include_str!("../shaders/attention_combine.wgsl"),
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
            Kernel::Matmul => "matmul",
            Kernel::MatmulCoop => "matmul_coop",
            Kernel::RopeKv => "rope_kv",
            Kernel::Attention => "attention",
            Kernel::AttentionCombine => "attention_combine",
            Kernel::MoeSelect => "moe_select",
            Kernel::MatvecExp => "matvec_exp",
            Kernel::MoeDown => "moe_down",
            Kernel::Swiglu => "swiglu",
        }
    }

    /// Whether the kernel reads weights, and so is composed with a format file.
    pub fn reads_weights(self) -> bool {
        matches!(self, Kernel::Embed | Kernel::Matvec | Kernel::Matmul | Kernel::MatmulCoop | Kernel::MatvecExp | Kernel::MoeDown)
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A matrix-matrix tile: `bm` weight rows x `bn` tokens per workgroup, `tm` x `tn` per thread
/// (multiples of 4); the K step is 32 columns, so workgroup memory is `(bm + bn) * 128` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// Weight rows per workgroup.
    pub bm: u32,
    /// Tokens per workgroup.
    pub bn: u32,
    /// Weight rows per thread.
    pub tm: u32,
    /// Tokens per thread.
    pub tn: u32,
}

impl Tile {
    /// 64 x 64, 4 x 4 per thread, 256 threads, 16 KiB of workgroup memory: fits WebGPU's defaults.
    pub const PORTABLE: Tile = Tile { bm: 64, bn: 64, tm: 4, tn: 4 };
    /// 64 x 128, 4 x 8 per thread, 256 threads, 24 KiB of workgroup memory: the fastest of
    /// 64x64/4x4, 128x128/8x8, 128x64/8x4, 64x128/4x8 and 64x64/8x8 for prefill on an H200
    /// (`bench --tile`, pp512 of the Llama-3.2-1B shape in Q8_0: 7.6k, 6.4k, 6.4k, 8.1k, 5.5k tok/s).
    pub const LARGE: Tile = Tile { bm: 64, bn: 128, tm: 4, tn: 8 };

    /// Threads per workgroup.
    pub fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }

    /// Workgroup memory in bytes.
    pub fn shared_bytes(&self) -> u32 {
        (self.bm + self.bn) * 32 * 4
    }
}

impl std::str::FromStr for Tile {
    type Err = String;

    /// `BMxBN/TMxTN`, e.g. `128x64/8x4`: every value a multiple of 4, TM dividing BM and TN
    /// dividing BN, at most 256 threads.
    fn from_str(s: &str) -> Result<Tile, String> {
        let bad = || format!("tile {s:?}: expected BMxBN/TMxTN with multiples of 4, e.g. 64x64/4x4");
        let v: Vec<u32> = s.split(['x', '/']).map(|p| p.trim().parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
        let [bm, bn, tm, tn] = v[..] else { return Err(bad()) };
        let t = Tile { bm, bn, tm, tn };
        if [bm, bn, tm, tn].iter().any(|&x| x == 0 || x % 4 != 0) || bm % tm != 0 || bn % tn != 0 || t.threads() > 256 || 256 % t.threads() != 0 {
            return Err(bad());
        }
        Ok(t)
    }
}

/// The geometry a kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Geometry {
    /// Nothing to specialise.
    #[default]
    Fixed,
    /// Matrix-vector kernels: `tpr` threads per row (a power of two up to 64), `tokens` token
    /// vectors per dispatch (matvec only; 1 for the expert kernels).
    Rows {
        /// Threads per row.
        tpr: u32,
        /// Token vectors per dispatch.
        tokens: u32,
    },
    /// The matrix-matrix kernel's tile.
    Tile(Tile),
    /// Attention: head dim, threads per query row (a power of two dividing it), keys per tile.
    Attention {
        /// Head dim.
        head_dim: u32,
        /// Threads per query row.
        tpq: u32,
        /// Keys per tile.
        bkv: u32,
    },
}

/// Everything that specialises one kernel's WGSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// The kernel.
    pub kernel: Kernel,
    /// The weights' GGML format (weight kernels only).
    pub format: Option<GgmlType>,
    /// Workgroup shape and constants.
    pub geometry: Geometry,
}

impl PipelineKey {
    /// A kernel with nothing to specialise.
    pub fn plain(kernel: Kernel) -> PipelineKey {
        PipelineKey { kernel, format: None, geometry: Geometry::Fixed }
    }

    /// A weight kernel for `format` with `geometry`.
    pub fn weights(kernel: Kernel, format: GgmlType, geometry: Geometry) -> PipelineKey {
        PipelineKey { kernel, format: Some(format), geometry }
    }

    /// A short label, e.g. `matmul q4_K 64x64/4x4`.
    pub fn label(&self) -> String {
        let mut s = self.kernel.name().to_string();
        if let Some(f) = self.format {
            s += &format!(" {}", f.name());
        }
        match self.geometry {
            Geometry::Fixed => {}
            Geometry::Rows { tpr, tokens } => s += &format!(" tpr{tpr} x{tokens}"),
            Geometry::Tile(t) => s += &format!(" {}x{}/{}x{}", t.bm, t.bn, t.tm, t.tn),
            Geometry::Attention { head_dim, tpq, bkv } => s += &format!(" hd{head_dim} tpq{tpq} bkv{bkv}"),
        }
        s
    }
}

/// `shaders/formats/<type>.wgsl`: how the weight kernels decode a matrix stored as `ty`.
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

/// Weights a matrix-vector thread takes per step for format `ty` (its file's `const CHUNK`).
pub fn format_chunk(ty: GgmlType) -> u32 {
    format_source(ty)
        .lines()
        .find_map(|l| l.strip_prefix("const CHUNK: u32 = ")?.strip_suffix("u;")?.parse().ok())
        .unwrap_or_else(|| panic!("shaders/formats/{}.wgsl has no `const CHUNK: u32 = Nu;`", ty.name().to_lowercase()))
}

/// The WGSL of `key`.
pub fn compose(key: &PipelineKey) -> String {
    // Enable directives must come first.
    let enables = if key.kernel == Kernel::MatmulCoop { "enable f16;\nenable wgpu_cooperative_matrix;\n" } else { "" };
    let mut s = format!("{enables}// composed by kernels::compose: {}\n", key.label());
    match key.geometry {
        Geometry::Fixed => {}
        Geometry::Rows { tpr, tokens } => s += &format!("const TPR: u32 = {tpr}u;\nconst RPW: u32 = {}u;\nconst NT: u32 = {tokens}u;\n", 64 / tpr),
        Geometry::Tile(t) => s += &format!("const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst TM: u32 = {}u;\nconst TN: u32 = {}u;\n", t.bm, t.bn, t.tm, t.tn),
        Geometry::Attention { head_dim, tpq, bkv } => s += &format!("const HD: u32 = {head_dim}u;\nconst TPQ: u32 = {tpq}u;\nconst BKV: u32 = {bkv}u;\n"),
    }
    if let Some(ty) = key.format.filter(|_| key.kernel.reads_weights()) {
        s += include_str!("../shaders/formats/common.wgsl");
        s += "\n";
        s += format_source(ty);
        s += "\n";
    }
    if matches!(key.kernel, Kernel::Matvec | Kernel::Matmul | Kernel::MatmulCoop) {
        s += include_str!("../shaders/linear.wgsl");
        s += "\n";
    }
    s + key.kernel.source()
}

/// Compute pipelines, each compiled once on first use (at load) and then shared.
#[derive(Default)]
pub struct Kernels {
    pipelines: HashMap<PipelineKey, wgpu::ComputePipeline>,
}

impl Kernels {
    /// No pipelines yet.
    pub fn new() -> Kernels {
        Kernels::default()
    }

    /// The pipeline for `key`, compiled on first use (layout derived from the WGSL).
    ///
    /// Natively, unless [`crate::gpu::Tuning::checked_shaders`] is set, the module is created
    /// without wgpu's injected runtime checks: every loop of these kernels has a bound known
    /// at dispatch, and every index stays inside its array by construction (the tests check the
    /// results on every shape), while buffer accesses stay covered by Vulkan's robust buffer
    /// access, which wgpu enables. The injected loop counters and index clamps otherwise keep
    /// the driver's compiler from unrolling the kernels' inner loops and holding their
    /// per-thread arrays in registers. The browser always compiles its own checked form.
    pub fn pipeline(&mut self, gpu: &Gpu, key: PipelineKey) -> wgpu::ComputePipeline {
        let device = &gpu.device;
        let checked = gpu.tuning().checked_shaders;
        self.pipelines
            .entry(key)
            .or_insert_with(|| {
                let label = key.label();
                let desc = wgpu::ShaderModuleDescriptor { label: Some(&label), source: wgpu::ShaderSource::Wgsl(compose(&key).into()) };
                let module = if checked || cfg!(target_arch = "wasm32") {
                    device.create_shader_module(desc)
                } else {
                    // SAFETY: see above; the kernels are ours, bounded and in-bounds by construction.
                    unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
                };
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

    /// Pipelines compiled so far.
    pub fn len(&self) -> usize {
        self.pipelines.len()
    }

    /// Whether none is compiled yet.
    pub fn is_empty(&self) -> bool {
        self.pipelines.is_empty()
    }

    /// `key`'s pipeline and a bind group of `buffers` at bindings 0, 1, 2 ... in order.
    pub fn bind(&mut self, gpu: &Gpu, key: PipelineKey, buffers: &[&wgpu::Buffer]) -> (wgpu::ComputePipeline, wgpu::BindGroup) {
        let device = &gpu.device;
        let pipeline = self.pipeline(gpu, key);
        let entries: Vec<wgpu::BindGroupEntry> =
            buffers.iter().enumerate().map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() }).collect();
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(key.kernel.name()),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        (pipeline, bind)
    }
}
