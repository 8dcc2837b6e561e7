//! The wgpu context: device and queue, the device limits that decide how tensors are split and
//! which kernel shapes fit, buffer helpers, and the [`Tuning`] that picks kernel variants (and
//! that tests override to run every variant on any device). Kernels themselves: [`crate::kernels`].

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::kernels::{CpuTile, Tile};

/// Choices of kernel variant that depend on the device; [`Gpu::tuning_mut`] overrides them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// A CPU implementation of the API (lavapipe, SwiftShader): matrix-vector kernels take a
    /// whole row per invocation, attention does not split keys.
    pub cpu: bool,
    /// Forced threads per row for the matrix-vector kernels (else [`crate::linear::threads_per_row`]).
    pub tpr: Option<u32>,
    /// Forced rows per thread of the one-token matrix-vector kernel (else
    /// [`crate::linear::rows_per_thread`]).
    pub rpt: Option<u32>,
    /// Forced weights per span of the matrix-vector kernel (else [`crate::linear::span`]).
    pub span: Option<u32>,
    /// Forced rows per thread of the one-token matrix-vector kernel with SwiGLU fused (each is a
    /// gate and an up row; else as the others).
    pub rpt_glu: Option<u32>,
    /// Forced rows per thread of the output head's one-token forms (else as the others).
    pub head_rpt: Option<u32>,
    /// Forced threads per row of the output head's matrix-vector forms (else as the others).
    pub head_tpr: Option<u32>,
    /// Forced spans (with [`Tuning::wide`]: 16-byte pieces) per step of the one-token
    /// matrix-vector kernel (else [`crate::linear::spans_per_step`]; 1 piece).
    pub unroll: Option<u32>,
    /// Read the weights of the matrix-vector kernel as 16-byte pieces where the format has them
    /// (see [`crate::linear::wide`]; [`Tuning::span`] then does not apply to those formats);
    /// `None`: the default there.
    pub wide: Option<bool>,
    /// With pieces on, the formats that take them, as a mask of `1 << ggml type id`; `None`:
    /// every format that has them.
    pub wide_types: Option<u64>,
    /// With pieces on, whether the matrix-vector forms with RMSNorm fused take them too; `None`:
    /// yes (see [`crate::linear::wide_with_norm`]).
    pub wide_norm: Option<bool>,
    /// The one-token matrix-vector form of formats with an integer form (Q4_K, Q8_0, Q6_K) reads
    /// 24-bit quantised activations and multiplies by integer dot products where it reads pieces
    /// (see [`crate::linear::int_dot`]); `None`: off ([`Gpu::native`] turns it on for Vulkan
    /// devices; the browser's GPUs are not measured yet).
    pub int_dot: Option<bool>,
    /// Where the one-token form is the integer one, the linear ops whose output the next one reads
    /// in the integer form write it themselves (`QOUT`, [`crate::linear::Fuse::quant_out`]): the
    /// output and down projections (`quant_out`) and the SwiGLU matvec (`quant_out_glu`);
    /// `None`: on ([`crate::linear::quant_out`]).
    pub quant_out: Option<bool>,
    /// See [`Tuning::quant_out`].
    pub quant_out_glu: Option<bool>,
    /// Threads per row of the matrix-vector kernel with `QOUT` (at most 512 / (16 / rows per
    /// thread)); `None`: as without.
    pub quant_out_tpr: Option<u32>,
    /// One-token attention through `shaders/attention_decode.wgsl`; `None`: on GPUs (see
    /// [`crate::attention::decode_kernel`]).
    pub decode_attention: Option<bool>,
    /// Batches of more than [`crate::attention::SPLIT_MAX_TOKENS`] tokens through
    /// `shaders/attention_tiled.wgsl` on GPUs where its tiles fit (else `attention.wgsl`).
    pub tiled_attention: bool,
    /// Query heads per workgroup of `attention_decode.wgsl` (a divisor of the GQA group), for
    /// every step; `None`: by group size ([`crate::attention::decode_heads`]), and one for
    /// short steps ([`Tuning::attn_heads_until`]).
    pub attn_heads: Option<u32>,
    /// One-token steps over at most this many keys take one query head a workgroup of
    /// `attention_decode.wgsl` where [`Tuning::attn_heads`] is not set, the kernel merges its
    /// own splits and the step's chunks are 64 keys ([`crate::attention::short_steps_one_head`]);
    /// `None`: the default ([`crate::attention::ONE_HEAD_MAX_KEYS`]), 0: never.
    pub attn_heads_until: Option<u32>,
    /// Fuse RMSNorm and SwiGLU into the matrix-vector kernel (`shaders/matvec.wgsl`, NORM and
    /// GLU); `None`: on GPUs, and on CPU adapters with subgroups ([`Tuning::fused`]).
    pub fuse: Option<bool>,
    /// Batches of at most this many tokens use the matrix-vector kernel (each weight read once,
    /// multiplied into every token); larger ones the tiled matrix-matrix kernel. `None`: 8 on
    /// GPUs, 1 on CPU adapters with the CPU matmul (see [`crate::linear::matvec_max_tokens`]).
    pub matvec_max_tokens: Option<u32>,
    /// The matrix-matrix tile.
    pub tile: Tile,
    /// Workgroups below which a linear op uses the small tile (the portable one, or the
    /// matrix-unit matmul's [`crate::kernels::CoopTile::SMALL`]) instead of the large one (a large
    /// tile leaves a GPU idle when it makes few workgroups: a narrow matrix, a short batch).
    /// `None`: [`Tuning::min_large`]'s choice by the tile in force.
    pub min_large_tiles: Option<u32>,
    /// Forced attention key splits for small batches (else [`crate::attention::splits`]).
    pub splits: Option<u32>,
    /// Use the matrix-unit matmul (`shaders/matmul_coop.wgsl`: f16 halves of f32 operands, f32
    /// accumulation) for the batches beyond [`Tuning::matvec_max_tokens`]. Natively only, where
    /// the device has 16x16x16 f16 cooperative matrices ([`Gpu::has_coop`]): on by default there.
    pub coop: bool,
    /// The matrix-unit matmul's tile and precision ([`crate::kernels::CoopTile`]).
    pub coop_tile: crate::kernels::CoopTile,
    /// The matrix-unit matmul reads Q4_K, and Q8_0 and Q6_K weights regrouped in groups of 8
    /// blocks, as 16-byte pieces too ([`crate::kernels::CoopTile::pieces`]; F16's always are).
    /// On an H200, pp512 of the
    /// Llama-3.2-1B shape 14.2k -> 19.6k tok/s (Q8_0) and 14.35k -> 17.5k (Q4_K_M, before Q6_K's
    /// pieces; BENCHMARKS.md v16). Off: linear.wgsl's runs of 4, as every other format.
    pub coop_quant_pieces: bool,
    /// Append the matrix-unit matmul's split ops ([`crate::split`]) without [`Tuning::coop`]
    /// too (their halves then go unread; needs `SHADER_F16`): for tests of the program's op
    /// order on devices without matrix units.
    pub split_without_coop: bool,
    /// The CPU matrix-matrix kernel (`shaders/matmul_cpu.wgsl`) and its tile, for the batches
    /// beyond [`Tuning::matvec_max_tokens`] when [`Tuning::cpu`] is set; `None`: the tiled GPU
    /// kernel there too.
    pub cpu_tile: Option<CpuTile>,
    /// The subgroup size the CPU kernels are compiled for, sharing loads across a subgroup's
    /// lanes (the device's fixed size, [`Gpu::subgroup_size`], by default), or 0: none.
    pub cpu_subgroup: u32,
    /// The subgroup size the GPU kernels' reductions are compiled for, or 0: workgroup memory
    /// only. `shaders/matvec.wgsl` adds a row's partial sums by butterfly shuffles within a
    /// subgroup, then across the row's subgroups in workgroup memory; `attention_decode.wgsl`
    /// takes its softmax max and sum the same way. The device's fixed size by default
    /// ([`Gpu::subgroup_size`]). On an H200 (32 lanes), top-1 decode of the Llama-3.2-1B shape
    /// with / without: Q8_0 676-692 / 664, Q4_K_M 498-546 / 528, F16 581-592 / 566.
    pub reduce_subgroup: u32,
    /// Attention of batches beyond [`crate::attention::SPLIT_MAX_TOKENS`] tokens with the CPU
    /// kernel (`shaders/attention_cpu.wgsl`) when [`Tuning::cpu`] is set.
    pub cpu_attention: bool,
    /// Natively, keep wgpu's injected shader runtime checks (see [`crate::pipelines::Kernels::pipeline`]).
    pub checked_shaders: bool,
    /// Natively, wait for a readback by polling the device in a loop (one CPU core busy, for at
    /// most [`SPIN_LIMIT`], then a blocking wait) instead of sleeping in the driver's fence wait,
    /// which wakes up late (CUDA's default wait spins too); `None`: on GPUs, off on CPU adapters
    /// (whose work would lose the core; by the adapter's name or type, whatever [`Tuning::cpu`]
    /// says). No effect in the browser, whose map promise resolves on
    /// its own schedule. Measured on an H200 (BENCHMARKS.md v19, tg128 with all logits, off /
    /// on): Llama-3.2-1B shape Q8_0 800 / 859, Q4_K_M 771 / 808, F16 717 / 775; Llama-3-8B
    /// shape Q4_K_M 262 / 269.
    pub spin_wait: Option<bool>,
    /// Where one-token attention fuses RoPE and the cache write and the value
    /// projection is a matrix of its own (its format differs from q's and k's, as in most
    /// Q4_K_M files, or the three could not be loaded as one buffer), the value projection
    /// writes the token's value into the V cache itself ([`crate::linear::Fuse::cache_row`]), so
    /// that it can run alongside the q/k projection; `None`: on. Measured on an H200
    /// (BENCHMARKS.md v19, top-1 tg128 off / on): Llama-3-8B shape Q4_K_M 274-277 / 284-286,
    /// at depth 4096 239.5 / 250.0; Llama-3.2-1B shape Q4_K_M 902-919 / 932-973. An f16 cache
    /// takes it too where the projection's threads hold an even number of rows (written in
    /// pairs, [`crate::linear::AT_POSITION16`]): BENCHMARKS.md v31.
    pub v_to_cache: Option<bool>,
    /// One-token attention merges its key splits itself, in the last workgroup of each head
    /// group to finish, instead of a combine dispatch after it
    /// ([`crate::attention::fuses_combine`]), where RoPE is fused in; `None`: off ([`Gpu::native`]
    /// turns it on for Vulkan devices). Measured on an H200 (BENCHMARKS.md v20): Llama-3-8B shape
    /// Q4_K_M tg128 281.6 -> 292.3 tok/s.
    pub fused_combine: Option<bool>,
    /// Keys a chunk of one-token attention, 64 or 128 ([`crate::attention::decode_chunk`]);
    /// `None`: by the split's keys (128 where a split holds an even number of 64-key chunks and
    /// the 128-key variant is compiled).
    pub attn_chunk: Option<u32>,
    /// One-token attention loads a chunk's first value rows before it scores the chunk's keys,
    /// so that the two waits on memory can overlap; `None`: on for head dims up to
    /// [`crate::attention::PREFETCH_MAX_HD`] (measured there). (`attention_decode.wgsl` only:
    /// the wide kernel, [`Tuning::attn_wide`], loads a chunk's keys and values at once anyway.)
    pub attn_prefetch: Option<bool>,
    /// One-token attention through `shaders/attention_decode_wide.wgsl` where it applies
    /// ([`crate::attention::decode_wide`]); `None`: for head dims past
    /// [`crate::attention::PREFETCH_MAX_HD`].
    pub attn_wide: Option<bool>,
    /// The wide kernel's subgroups keep their own softmax where they own their keys
    /// ([`crate::attention::decode_owned`]); `None`: off (not yet measured on a GPU).
    pub attn_owned: Option<bool>,
    /// A measuring mode, never a model's: every kernel, or one, returns at entry (see [`Hollow`]).
    pub hollow: Hollow,
}

/// The step's dispatch floor (`bench --hollow`): every kernel composed to return at entry, so
/// that a step keeps its dispatches, bindings, barriers, copies and CPU work while its kernels
/// move no data (the logits stay as their buffer was made: zeros). What a step costs beyond the
/// bytes it must move: the floor under any kernel's speed-up. Or one kernel alone
/// ([`Hollow::Only`]): what that kernel costs as the step runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hollow {
    /// The kernels run.
    #[default]
    Off,
    /// Each dispatch over the grid its plan gives (the workgroups' launch included).
    Grids,
    /// Each dispatch over one workgroup: the dispatches' and barriers' cost alone.
    One,
    /// Only this kernel's dispatches hollow, over their grids; the others run. The step's time
    /// against the same step with every kernel run is what that kernel costs as the step runs
    /// (its overlap with its neighbours included), which a profile of one pass per dispatch,
    /// whose passes each wait for the one before, cannot give.
    Only(crate::kernels::Kernel),
}

impl Hollow {
    /// Whether `kernel` is composed to return at entry.
    pub fn hollows(self, kernel: crate::kernels::Kernel) -> bool {
        match self {
            Hollow::Off => false,
            Hollow::Only(k) => k == kernel,
            Hollow::Grids | Hollow::One => kernel != crate::kernels::Kernel::Stream,
        }
    }
}

impl std::fmt::Display for Hollow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hollow::Off => f.write_str("off"),
            Hollow::Grids => f.write_str("grids"),
            Hollow::One => f.write_str("one"),
            Hollow::Only(k) => write!(f, "only:{}", k.name()),
        }
    }
}

impl std::str::FromStr for Hollow {
    type Err = Error;
    fn from_str(s: &str) -> Result<Hollow> {
        match s {
            "off" => Ok(Hollow::Off),
            "grids" => Ok(Hollow::Grids),
            "one" => Ok(Hollow::One),
            _ => match s
                .strip_prefix("only:")
                .and_then(|name| crate::kernels::Kernel::ALL.into_iter().find(|k| k.name() == name && *k != crate::kernels::Kernel::Stream))
            {
                Some(k) => Ok(Hollow::Only(k)),
                None => Err(Error::Input(format!("hollow mode {s:?}: expected off, grids, one or only:KERNEL (a kernel's name, e.g. only:attention_decode)"))),
            },
        }
    }
}

impl Tuning {
    /// Whether the matrix-vector forms fuse RMSNorm and SwiGLU ([`Tuning::fuse`]): by default on
    /// GPUs, and on CPU adapters whose matvecs share the activations' loads across a subgroup
    /// (`XB` in `shaders/matvec.wgsl`, [`crate::kernels::broadcasts`] of [`Tuning::reduce_subgroup`]: the
    /// norm's sum of squares then costs a few vector ops a step). lavapipe, decode tok/s fused /
    /// not (`bench --fuse`, `--no-fuse`): stories260K 350-382 / 245, SmolLM2-135M 20.2-21.0 /
    /// 18.9-19.0; SwiftShader in Chromium, stories260K 32 / 48 dispatches a token. Without
    /// subgroups every lane loads every activation, and a row's invocation would redo the norm's
    /// sum of squares for each of its rows.
    pub fn fused(&self) -> bool {
        self.fuse.unwrap_or(!self.cpu || crate::kernels::broadcasts(self.reduce_subgroup))
    }

    /// [`Tuning::min_large_tiles`] in force: by default 128 (about one wave of an H200's 132
    /// SMs) for the matrix-unit matmul's 128 x 128 tiles, where 256 left the 8B shape's
    /// 4096-row matrices on the 64 x 64 tile (pp512 3937 -> 4302 tok/s, BENCHMARKS.md v21), and
    /// 256 (about two waves) for the other tiles, where it was measured.
    pub fn min_large(&self) -> u32 {
        let big = self.coop && self.coop_tile.bm * self.coop_tile.bn >= 128 * 128;
        self.min_large_tiles.unwrap_or(if big { 128 } else { 256 })
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

/// The longest a readback is waited for in a polling loop ([`Tuning::spin_wait`]): a decode
/// step's wait (0.3-4 ms on an H200 for the Llama-3.2-1B to Llama-3-8B shapes) is spun through;
/// a long prompt's (seconds) sleeps after this, so that a core is not burned for all of it.
pub const SPIN_LIMIT: std::time::Duration = std::time::Duration::from_millis(20);

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
    subgroup: Option<u32>,
    wgsl_subgroups: bool,
    cpu_adapter: bool,
    swiftshader: bool,
    /// On the web: kernels with subgroup operations fix their size with `@subgroup_size`
    /// ([`Gpu::set_web_size_control`]).
    size_control: bool,
    /// On the web: whether WGSL has `dot4I8Packed` ([`Gpu::set_web_packed_dot`]).
    web_packed_dot: Option<bool>,
    tuning: Tuning,
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
        let mut gpu = Gpu {
            device,
            queue,
            adapter_info,
            errors,
            binding_cap: None,
            subgroup: None,
            wgsl_subgroups: false,
            cpu_adapter: cpu,
            swiftshader: name.contains("swiftshader"),
            web_packed_dot: None,
            size_control: false,
            tuning: Tuning {
                cpu,
                tpr: None,
                span: None,
                unroll: None,
                wide: None,
                wide_types: None,
                wide_norm: None,
                int_dot: None,
                quant_out: None,
                quant_out_glu: None,
                quant_out_tpr: None,
                rpt_glu: None,
                head_rpt: None,
                head_tpr: None,
                rpt: None,
                fuse: None,
                decode_attention: None,
                tiled_attention: true,
                attn_heads: None,
                attn_heads_until: None,
                matvec_max_tokens: None,
                tile: Tile::PORTABLE,
                min_large_tiles: None,
                splits: None,
                coop: false,
                coop_tile: crate::kernels::CoopTile::DEFAULT,
                coop_quant_pieces: true,
                split_without_coop: false,
                cpu_tile: None,
                cpu_attention: false,
                cpu_subgroup: 0,
                reduce_subgroup: 0,
                checked_shaders: false,
                spin_wait: None,
                v_to_cache: None,
                fused_combine: None,
                attn_chunk: None,
                attn_prefetch: None,
                attn_wide: None,
                attn_owned: None,
                hollow: Hollow::Off,
            },
        };
        gpu.set_cpu(cpu);
        gpu
    }

    /// The tile the matrix-matrix kernel uses by default: the large one where the device allows
    /// 32 KiB of workgroup memory and is a GPU, else the one that fits WebGPU's default 16 KiB.
    fn default_tile(&self) -> Tile {
        let shared = self.device.limits().max_compute_workgroup_storage_size;
        if !self.tuning.cpu && shared >= Tile::LARGE.shared_bytes() {
            Tile::LARGE
        } else {
            Tile::PORTABLE
        }
    }

    /// Sets [`Tuning::cpu`] and the choices that follow from it: the matrix-matrix tile and the
    /// CPU kernels.
    pub fn set_cpu(&mut self, cpu: bool) {
        self.tuning.cpu = cpu;
        self.tuning.tile = self.default_tile();
        self.tuning.cpu_tile = cpu.then_some(CpuTile::DEFAULT);
        self.tuning.cpu_subgroup = self.subgroup.unwrap_or(0);
        self.tuning.reduce_subgroup = self.subgroup.unwrap_or(0);
        self.tuning.cpu_attention = cpu;
        if let Some(packed) = self.web_packed_dot {
            self.tuning.int_dot = Some(packed && !cpu);
        }
    }

    /// On the web: whether WGSL has `dot4I8Packed` (the `packed_4x8_integer_dot_product`
    /// language feature). Where it has, GPUs take the integer matvec form as natively on Vulkan
    /// ([`Tuning::int_dot`]; Tint emits the hardware's 4x8-bit dot product where the driver has
    /// one); CPU adapters keep the f32 form. Call it after [`Gpu::set_web_subgroup`].
    pub fn set_web_packed_dot(&mut self, packed: bool) {
        self.web_packed_dot = Some(packed);
        self.set_cpu(self.tuning.cpu);
    }

    /// The kernel variant choices in force.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// Overrides kernel variant choices (tests run every variant on one device). Set before
    /// loading a model: the program is built with the choices of that moment.
    pub fn tuning_mut(&mut self) -> &mut Tuning {
        &mut self.tuning
    }

    /// The device's subgroup size where it has the `subgroups` feature and one fixed size
    /// (natively from the adapter; on the web from the host's `GPUDevice`, see
    /// [`Gpu::set_web_subgroup`]).
    pub fn subgroup_size(&self) -> Option<u32> {
        self.subgroup
    }

    /// On the web: the host device's subgroup size (its `subgroups` feature and one size, read
    /// from JS: wgpu's WebGPU backend does not report the feature), or `None`. With a size, the
    /// kernels are compiled with subgroups as natively ([`Tuning::reduce_subgroup`],
    /// [`Tuning::cpu_subgroup`]) and their WGSL starts with `enable subgroups;` (which the
    /// browser requires and naga, natively, rejects; see [`Gpu::wgsl_source`]). Call it
    /// right after creating the `Gpu`: it resets the choices that [`Gpu::set_cpu`] makes.
    pub fn set_web_subgroup(&mut self, size: Option<u32>) {
        self.subgroup = size;
        self.wgsl_subgroups = size.is_some();
        self.set_cpu(self.tuning.cpu);
    }

    /// On the web, with [`Gpu::set_web_subgroup`]'s size: the device has
    /// `subgroup-size-control` and its adapter a range of sizes (D3D12, Vulkan on Intel and AMD),
    /// so each kernel with subgroup operations is compiled for that size with `@subgroup_size`
    /// ([`Gpu::wgsl_source`]); the host must have requested the feature.
    pub fn set_web_size_control(&mut self, on: bool) {
        self.size_control = on && self.wgsl_subgroups;
    }

    /// A kernel's WGSL as this device compiles it: on the web with subgroups, after
    /// `enable subgroups;` and the subgroup uniformity diagnostic off (the kernels' subgroup
    /// operations run where every invocation of a subgroup takes the same path, by construction;
    /// an unknown diagnostic name is only a warning), and with [`Gpu::set_web_size_control`] the
    /// size fixed where the kernel uses subgroup operations (kernels without them keep any size;
    /// those with them have workgroups of whole subgroups, as a fixed-size device needs too).
    pub fn wgsl_source(&self, src: String) -> String {
        if !self.wgsl_subgroups {
            return src;
        }
        let head = "enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n";
        match self.subgroup {
            Some(n) if self.size_control && uses_subgroups(&src) => {
                format!("{head}enable subgroup_size_control;\n{}", src.replacen("@compute", &format!("@subgroup_size({n}) @compute"), 1))
            }
            _ => format!("{head}{src}"),
        }
    }

    /// Whether the matrix-unit matmul's tile `t` and its small fallback fit the device's
    /// workgroup memory (wgpu does not check it before the driver compiles the pipeline).
    pub fn coop_fits(&self, t: crate::kernels::CoopTile) -> bool {
        let shared = self.device.limits().max_compute_workgroup_storage_size;
        t.shared_bytes().max(crate::kernels::CoopTile::SMALL.shared_bytes()) <= shared
    }

    /// Checks the [`Tuning`] against the device, for tunings set by Rust code (the CLI and
    /// [`Gpu::native`] check theirs as they set them): the matrix-unit matmul needs cooperative
    /// matrices and workgroup memory for its tile.
    ///
    /// # Errors
    /// [`Error::Input`] naming the setting the device cannot run.
    pub fn check_tuning(&self) -> Result<()> {
        let t = &self.tuning;
        if t.coop && !self.has_coop() {
            return Err(Error::Input(format!("Tuning::coop is on, but {} has no 16x16x16 f16 cooperative matrices", self.adapter_info)));
        }
        if t.coop && !t.coop_tile.is_valid() {
            return Err(Error::Input(format!(
                "Tuning::coop_tile {}: subgroup blocks must be 32 or 64 a side, tiles multiples of them up to 512 (at most 8 subgroups), split 0 to 2",
                t.coop_tile
            )));
        }
        if t.coop && !self.coop_fits(t.coop_tile) {
            return Err(Error::Input(format!(
                "Tuning::coop_tile {} needs {} bytes of workgroup memory, more than this device's {}",
                t.coop_tile,
                t.coop_tile.shared_bytes(),
                self.device.limits().max_compute_workgroup_storage_size
            )));
        }
        Ok(())
    }

    /// Whether the device was created with cooperative matrices (see [`Tuning::coop`]).
    pub fn has_coop(&self) -> bool {
        self.device.features().contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
    }

    /// Whether the device is a CPU implementation of the API (lavapipe, SwiftShader: detected
    /// from the adapter's type natively, from its name otherwise), see [`Tuning::cpu`].
    pub fn is_cpu(&self) -> bool {
        self.tuning.cpu
    }

    /// Whether the adapter is SwiftShader (by its name): Chromium's WebGPU on machines without a
    /// GPU. Its JIT (Subzero, 4 lanes) favours other kernel shapes than lavapipe's (LLVM), see
    /// [`crate::linear::rows_per_thread`].
    pub fn is_swiftshader(&self) -> bool {
        self.swiftshader
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
        gpu.subgroup = (gpu.device.features().contains(wgpu::Features::SUBGROUP) && fixed).then_some(info.subgroup_min_size);
        gpu.set_cpu(gpu.tuning.cpu || info.device_type == wgpu::DeviceType::Cpu);
        gpu.cpu_adapter |= info.device_type == wgpu::DeviceType::Cpu;
        // On where the device has them (and is not a CPU) and its tiles fit the workgroup memory:
        // on an H200, pp512 against the f32 kernel 1.27x (1B Q8_0), 1.32x (Q4_K_M), 1.16x (F16),
        // 1.34x (8B Q4_K_M), within 6e-5 of every reference case (BENCHMARKS.md v9). The 128 x
        // 128 tile where it fits (BENCHMARKS.md v21), else 64 x 128.
        use crate::kernels::CoopTile;
        let tile = [CoopTile::DEFAULT, CoopTile::COMPACT].into_iter().find(|&t| gpu.coop_fits(t));
        gpu.tuning.coop = gpu.has_coop() && !gpu.is_cpu() && tile.is_some();
        gpu.tuning.coop_tile = tile.unwrap_or(CoopTile::DEFAULT);
        // The integer matvec form on Vulkan, where it was measured (naga emits OpSDot where the
        // device has integer dot products, a bit-field polyfill elsewhere; Metal and D3D12 are
        // unmeasured): H200, 8B Q4_K_M decode 160.6 -> 245.8 tok/s (BENCHMARKS.md v10).
        gpu.tuning.int_dot = Some(info.backend == wgpu::Backend::Vulkan);
        // The key splits' merge inside attention on Vulkan only, where naga's storageBarrier is
        // device scope (see attention::fuses_combine).
        gpu.tuning.fused_combine = Some(info.backend == wgpu::Backend::Vulkan);
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

    /// A uniform buffer holding `value` (a `#[repr(C)]` struct laid out as its WGSL twin).
    pub fn uniform_of<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        let bytes = bytemuck::bytes_of(value);
        let b = self.device.create_buffer(&wgpu::BufferDescriptor {
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

    /// Whether readbacks are waited for by polling in a loop ([`Tuning::spin_wait`]).
    pub fn spin_wait(&self) -> bool {
        self.tuning.spin_wait.unwrap_or(!self.cpu_adapter)
    }

    /// Natively: polls the device until `done` (set by a map callback) is set, in a loop for up
    /// to [`SPIN_LIMIT`] with [`Gpu::spin_wait`]; then (or without it) waits, blocking, for
    /// submission `after` (else for all the work submitted so far), after which the callback
    /// has run. A generation's block is read while the next block runs: waiting for everything
    /// would leave the GPU idle while the block after that is recorded.
    #[cfg(not(target_arch = "wasm32"))]
    fn wait_for(&self, done: &std::sync::atomic::AtomicBool, after: Option<wgpu::SubmissionIndex>) -> Result<()> {
        let err = |e: wgpu::PollError| Error::Gpu(format!("device poll failed: {e}"));
        let start = std::time::Instant::now();
        while self.spin_wait() && start.elapsed() < SPIN_LIMIT {
            if done.load(std::sync::atomic::Ordering::Acquire) {
                return Ok(());
            }
            self.device.poll(wgpu::PollType::Poll).map_err(err)?;
            std::hint::spin_loop();
        }
        self.device.poll(wgpu::PollType::Wait { submission_index: after, timeout: None }).map_err(err)?;
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

    /// Waits for a map [`Gpu::ask_map`] asked for, returns `f` of the bytes and unmaps.
    async fn finish_map<T>(&self, rb: &wgpu::Buffer, (rx, done): MapAsked, after: Option<wgpu::SubmissionIndex>, f: impl FnOnce(&[u8]) -> T) -> Result<T> {
        #[cfg(not(target_arch = "wasm32"))]
        self.wait_for(&done, after)?;
        #[cfg(target_arch = "wasm32")]
        let _ = (after, done);
        rx.await
            .map_err(|_| Error::Gpu("the readback was dropped (device lost?)".into()))?
            .map_err(|e| Error::Gpu(format!("could not map the readback buffer: {e}")))?;
        let data = f(&rb.get_mapped_range(..).map_err(|e| Error::Gpu(format!("mapped range: {e}")))?);
        rb.unmap();
        self.check()?;
        Ok(data)
    }
}
