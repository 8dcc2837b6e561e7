//! The device policy: which kernel forms and shapes a device gets by default, from its facts
//! ([`crate::gpu::Caps`]) and its class ([`Gpu::is_cpu`]: a GPU, or a CPU implementation of the
//! API such as lavapipe and SwiftShader), under the user's [`crate::gpu::Switches`] and, in
//! `lab` builds, the laboratory's knobs ([`crate::knobs`]). The defaults of each device class
//! are the constants of [`GPU`] and [`CPU`] and the named constants after them (the numbers
//! kernels are shaped with: spans, rows and threads a row, attention's one-head steps); the
//! shape rules that follow a tensor's format and size stay with their kernels
//! ([`crate::linear`], [`crate::attention`]), reading their numbers here.

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::{broadcasts, CoopTile, CpuTile, Tile};

/// A device class's defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Defaults {
    /// Batches of at most this many tokens take the linear ops' matrix-vector forms (each weight
    /// read once, multiplied into every token), larger ones the matrix-matrix kernel.
    pub matvec_max_tokens: u32,
    /// The portable matrix-matrix tile, where the device's workgroup memory holds it (else
    /// [`Tile::PORTABLE`], which fits WebGPU's default 16 KiB).
    pub tile: Tile,
    /// The CPU matrix-matrix kernel's tile, for the batches beyond `matvec_max_tokens`; `None`:
    /// the tiled GPU kernel.
    pub cpu_tile: Option<CpuTile>,
    /// Workgroups below which a linear op takes the small tile instead of the large one (a large
    /// tile leaves a GPU idle when it makes few workgroups: a narrow matrix, a short batch).
    pub min_large_tiles: u32,
    /// Weights a matrix-vector thread decodes at once ([`crate::linear::span`]; a multiple of
    /// 4) for Q4_K, Q5_K and Q6_K, whose spans within one scale group share the decoding of its
    /// 6-bit scales (`dq4s`, `shaders/formats/common.wgsl`).
    pub span_k_quants: u32,
    /// The same for the other formats, for which a longer span costs more in spread load
    /// addresses than it saves.
    pub span: u32,
    /// Rows per thread of the one-token matrix-vector form ([`crate::linear::rows_per_thread`]):
    /// each load of the activations serves that many rows, and a thread keeps that many more
    /// weight loads in flight.
    pub rows_per_thread: u32,
    /// The same for F16 weights (2 bytes a weight and no integer form).
    pub rows_per_thread_f16: u32,
}

/// A GPU's defaults. The matrix-vector forms up to 8 tokens (their accumulators fit; beyond, the
/// tiled kernels reuse each weight across more tokens). The 64 x 128 tile was the fastest of
/// 64x64/4x4, 128x128/8x8, 128x64/8x4, 64x128/4x8 and 64x64/8x8 for prefill (`bench --set
/// tile=...`, the Llama-3.2-1B shape in Q8_0). 256 workgroups (about two waves of a large GPU's
/// multiprocessors) before the large tile, where it was measured. Spans of 16 weights for the
/// K-quants (sharing their scale decoding pays), 8 for the others. 2 rows a thread: more hold
/// more decoded vectors, which past 2 cost more than the shared loads save (the SwiGLU matvec's
/// too); F16 weights take 4 (a thread's 4 rows keep twice the loads in flight), where the
/// quantised formats lose with 4.
pub const GPU: Defaults = Defaults {
    matvec_max_tokens: 8,
    tile: Tile::LARGE,
    cpu_tile: None,
    min_large_tiles: 256,
    span_k_quants: 16,
    span: 8,
    rows_per_thread: 2,
    rows_per_thread_f16: 4,
};

/// A CPU adapter's defaults: one token a matrix-vector batch, the CPU matmul beyond (the
/// multi-token matvec's accumulators for 8 tokens cost more than the CPU matmul's tiles:
/// SmolLM2-135M Q4_1 on lavapipe and in SwiftShader, [`crate::linear::matvec_max_tokens`]), the
/// portable tile where the GPU matmul runs. Spans of 32 weights, whatever the format: a whole row
/// per invocation, whose compilers then share a block's header and words across the span's
/// unrolled decoding. 4 rows a thread (each activation load serves more rows), but see
/// [`SWIFTSHADER_UNSHARED_ROWS_PER_THREAD`].
pub const CPU: Defaults = Defaults {
    matvec_max_tokens: 1,
    tile: Tile::PORTABLE,
    cpu_tile: Some(CpuTile::DEFAULT),
    min_large_tiles: 256,
    span_k_quants: 32,
    span: 32,
    rows_per_thread: 4,
    rows_per_thread_f16: 4,
};

/// Rows per thread of the one-token matrix-vector form in SwiftShader (Chromium without a GPU)
/// without subgroups of 4 or more lanes, where every lane loads every activation (the
/// activations are not broadcast, [`broadcasts`]): more rows share each load.
pub const SWIFTSHADER_UNSHARED_ROWS_PER_THREAD: u32 = 8;

/// The most threads a row of the GPUs' matrix-vector form takes ([`crate::linear::threads_per_row`]):
/// more threads keep more loads in flight, but past 128 a row's reduction and the fewer rows a
/// workgroup cost more than the extra loads give.
pub const MAX_THREADS_PER_ROW: u32 = 128;

/// The most threads a row of the one-token integer form takes for pieces of 32 weights (the
/// K-quants; [`crate::linear::int_dot`]): with the dequantisation's arithmetic mostly gone, a
/// thread's 2 to 7 pieces a row keep more loads in flight per instruction; fewer threads a row
/// run too few rows at once, more give a thread too few pieces.
pub const INT_THREADS_PER_ROW: u32 = 64;

/// The most keys over which a one-token step of `attention_decode.wgsl` (not the wide kernel)
/// takes one query head a workgroup instead of [`crate::attention::decode_heads`]
/// ([`crate::attention::short_steps_one_head`]). Up to about a thousand keys the halved serial
/// work of one head a workgroup gains; past it the doubled reads of the cache cost more than the
/// shorter chains save.
pub const ONE_HEAD_MAX_KEYS: u32 = 1024;

/// Workgroups below which a linear op takes the matrix-unit matmul's small tile where its tile
/// is 128 x 128 or larger: about one wave of a large GPU's multiprocessors (256 left the 8B
/// shape's 4096-row matrices on the 64 x 64 tile and was slower there).
pub const MIN_LARGE_COOP_TILES: u32 = 128;

/// The matrix-unit matmul's tiles, by preference: the first whose workgroup memory (with its
/// small fallback's) fits the device. The 128 x 128 tile was the faster where it fits.
pub const COOP_TILES: [CoopTile; 2] = [CoopTile::DEFAULT, CoopTile::COMPACT];

/// Whether the matrix-unit matmul reads Q4_K, Q8_0 and Q6_K weights as 16-byte pieces, as it
/// does F16's (faster prefill on the quantised formats than runs of 4).
pub const COOP_QUANT_PIECES: bool = true;

/// The defaults of `gpu`'s class.
pub fn class(gpu: &Gpu) -> &'static Defaults {
    if gpu.is_cpu() {
        &CPU
    } else {
        &GPU
    }
}

/// The portable matrix-matrix tile in force: the class's where the workgroup memory holds it.
pub fn tile(gpu: &Gpu) -> Tile {
    let t = class(gpu).tile;
    let fits = t.shared_bytes() <= gpu.limits().max_compute_workgroup_storage_size;
    lab!(gpu, tile).unwrap_or(if fits { t } else { Tile::PORTABLE })
}

/// The CPU matrix-matrix kernel's tile, where the CPU kernels run (a CPU adapter with
/// [`crate::gpu::Switches::cpu_kernels`] on).
pub fn cpu_tile(gpu: &Gpu) -> Option<CpuTile> {
    let tile = class(gpu).cpu_tile.filter(|_| gpu.switches().cpu_kernels)?;
    Some(lab!(gpu, cpu_tile).unwrap_or(tile))
}

/// Whether the matrix-vector forms fuse RMSNorm and SwiGLU ([`crate::gpu::Switches::fuse`]): by
/// default on GPUs, and on CPU adapters whose matvecs share the activations' loads across a
/// subgroup (`shaders/matvec_broadcast.wgsl`, [`broadcasts`] of [`Gpu::reduce_subgroup`]: the
/// norm's sum of squares then costs a few vector ops a step, and a decode step fewer dispatches:
/// faster on lavapipe and SwiftShader). Without subgroups every lane loads every activation, and
/// a row's invocation would redo the norm's sum of squares for each of its rows.
pub fn fused(gpu: &Gpu) -> bool {
    gpu.switches().fuse.unwrap_or(!gpu.is_cpu() || broadcasts(gpu.reduce_subgroup()))
}

/// Whether the matrix-unit matmul runs the batches beyond [`crate::linear::matvec_max_tokens`]
/// ([`crate::gpu::Switches::coop`]): by default where the device has 16x16x16 f16 cooperative
/// matrices, is not a CPU and one of [`COOP_TILES`] fits its workgroup memory (prefill faster
/// than the f32 kernel's on every shape measured, as exact against the reference cases).
pub fn coop(gpu: &Gpu) -> bool {
    let caps = gpu.caps();
    gpu.switches().coop.unwrap_or(caps.coop && !caps.cpu && COOP_TILES.into_iter().any(|t| coop_fits(gpu, t)))
}

/// The matrix-unit matmul's tile: the first of [`COOP_TILES`] that fits.
pub fn coop_tile(gpu: &Gpu) -> CoopTile {
    lab!(gpu, coop_tile).unwrap_or_else(|| COOP_TILES.into_iter().find(|&t| coop_fits(gpu, t)).unwrap_or(CoopTile::DEFAULT))
}

/// Whether the matrix-unit matmul's tile `t` and its small fallback fit the device's workgroup
/// memory (wgpu does not check it before the driver compiles the pipeline).
pub fn coop_fits(gpu: &Gpu, t: CoopTile) -> bool {
    let shared = gpu.limits().max_compute_workgroup_storage_size;
    t.shared_bytes().max(CoopTile::SMALL.shared_bytes()) <= shared
}

/// Workgroups below which a linear op uses the small tile (the portable one, or the matrix-unit
/// matmul's [`CoopTile::SMALL`]): [`MIN_LARGE_COOP_TILES`] for the matrix-unit matmul's 128 x
/// 128 tiles, else the class's.
pub fn min_large(gpu: &Gpu) -> u32 {
    let t = coop_tile(gpu);
    let big = coop(gpu) && t.bm * t.bn >= 128 * 128;
    lab!(gpu, min_large_tiles).unwrap_or(if big { MIN_LARGE_COOP_TILES } else { class(gpu).min_large_tiles })
}

/// Whether the one-token matvecs of the formats with an integer form may take it
/// ([`crate::gpu::Switches::int_dot`]): natively on Vulkan, where it was measured (naga emits
/// `OpSDot` where the device has integer dot products, a bit-field polyfill elsewhere; Metal and
/// D3D12 are unmeasured; decode faster where quantised weights dominate); in the browser on GPUs whose WGSL has
/// `dot4I8Packed` (Tint emits the hardware's instruction where the driver has one), not on CPU
/// adapters.
pub fn int_dot(gpu: &Gpu) -> bool {
    let caps = gpu.caps();
    gpu.switches().int_dot.unwrap_or(match caps.packed_dot {
        Some(packed) => packed && !gpu.is_cpu(),
        None => caps.vulkan,
    })
}

/// Whether one-token attention may merge its key splits itself
/// ([`crate::gpu::Switches::fused_combine`]): natively on Vulkan only, where naga's
/// `storageBarrier` is device scope (see [`crate::attention::fuses_combine`]).
pub fn fused_combine(gpu: &Gpu) -> bool {
    gpu.switches().fused_combine.unwrap_or(gpu.caps().vulkan)
}

/// Checks the switches and knobs in force against the device, for those set by Rust code (the
/// CLI checks its own as it sets them): the matrix-unit matmul needs cooperative matrices and
/// workgroup memory for its tile.
///
/// # Errors
/// [`Error::Input`] naming the setting the device cannot run.
pub fn check(gpu: &Gpu) -> Result<()> {
    if !coop(gpu) {
        return Ok(());
    }
    let t = coop_tile(gpu);
    if !gpu.caps().coop {
        return Err(Error::Input(format!("Switches::coop is on, but {} has no 16x16x16 f16 cooperative matrices", gpu.adapter_info)));
    }
    if !t.is_valid() {
        return Err(Error::Input(format!(
            "coop_tile {t}: subgroup blocks must be 32 or 64 a side, tiles multiples of them up to 512 (at most 8 subgroups), split 0 to 2"
        )));
    }
    if !coop_fits(gpu, t) {
        return Err(Error::Input(format!(
            "coop_tile {t} needs {} bytes of workgroup memory, more than this device's {}",
            t.shared_bytes(),
            gpu.limits().max_compute_workgroup_storage_size
        )));
    }
    Ok(())
}
