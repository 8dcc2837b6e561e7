//! Causal GQA attention of a batch of tokens against the KV cache: one flash-attention kernel
//! (`shaders/attention.wgsl`: key tiles in workgroup memory, online softmax) in two shapes, one
//! for few query rows (many threads per row) and one for more (on GPUs, batches of 2 to
//! [`SPLIT_MAX_TOKENS`] tokens, or every batch with the other kernels off), and for small batches a
//! split of the keys across workgroups whose partial results `shaders/attention_combine.wgsl`
//! (`attention_combine_wide.wgsl` past [`WIDE_COMBINE_SPLITS`]) merges (flash-decoding), so that
//! decode keeps the GPU busy however long the context. On GPUs,
//! one-token batches take `shaders/attention_decode.wgsl` ([`decode_kernel`]) and batches beyond
//! [`SPLIT_MAX_TOKENS`] tokens `shaders/attention_tiled.wgsl` (prefill: 64 query rows a
//! workgroup, a block of scores and of outputs per thread, [`tiled_geometry`]); on CPU adapters
//! every batch whose keys are not split (all, unless splits are forced) takes
//! `shaders/attention_cpu.wgsl` (a query row per invocation, see [`cpu_geometry`]), one-token
//! steps too: `attention.wgsl`'s shared key tiles and barriers cost a CPU's compiler more than
//! the GPU's (a CPU's compiler runs each barrier as a task switch and each lane's load as a
//! loop over the lanes, so the form without them is the faster one there).
//! All read the KV cache as f32 or, with [`KvType::F16`], as f16 pairs (`unpack2x16float`).

use bytemuck::{Pod, Zeroable};

use crate::config::{Config, KvType};
use crate::gpu::Gpu;
pub use crate::kernels::{merge_split_groups, wide_threads, MAX_SPLITS};
use crate::kernels::{Geometry, Kernel, Named, PipelineKey, COMBINE_QUANT_MAX_HD};
use crate::program::{Batch, Builder};

/// Above this many key splits (a context past 2048 keys) the combine is
/// `shaders/attention_combine_wide.wgsl` (256 threads a head, its loads in fewer rounds), else
/// `attention_combine.wgsl` (64): past that many splits the 64-thread form's rounds of loads
/// (one per 8 splits and dim) outlast the wide form's fixed cost; below it the wide form's
/// trees and extra threads cost more than the rounds they save.
pub const WIDE_COMBINE_SPLITS: u32 = 32;
/// Key splits are used only for batches of at most this many tokens.
pub const SPLIT_MAX_TOKENS: u32 = 8;

/// The forms of the attention op, each a kernel compiled for the op's shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `attention.wgsl` shaped for few query rows (many threads a row): small batches, their
    /// keys split.
    FewRows,
    /// `attention.wgsl` shaped for more query rows.
    ManyRows,
    /// `attention_cpu.wgsl`: a CPU adapter's batches whose keys are not split.
    Cpu,
    /// `attention_cpu.wgsl` for one token: a query row a lane.
    CpuOneToken,
    /// `attention_tiled.wgsl`: GPUs' batches past [`SPLIT_MAX_TOKENS`] (prefill).
    Tiled,
    /// `attention_decode.wgsl` (or `attention_decode_wide.wgsl`) for one token, in chunks of
    /// this many keys (64 or 128, [`decode_chunk`]).
    OneToken(u32),
    /// The same with one query head a workgroup: short steps ([`short_steps_one_head`]).
    OneTokenOneHead,
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Form::FewRows => f.write_str("few rows"),
            Form::ManyRows => f.write_str("many rows"),
            Form::Cpu => f.write_str("cpu"),
            Form::CpuOneToken => f.write_str("cpu one token"),
            Form::Tiled => f.write_str("tiled"),
            Form::OneToken(keys) => write!(f, "one token, {keys}-key chunks"),
            Form::OneTokenOneHead => f.write_str("one token, one head a workgroup"),
        }
    }
}

/// `struct Attn` of `shaders/attention_params.wgsl` (every attention kernel's `p`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct AttentionParams {
    /// Query heads.
    pub n_heads: u32,
    /// KV heads.
    pub n_kv: u32,
    /// Floats per token row of the fused `[q | k | v]` buffer.
    pub q_stride: u32,
    /// Floats per token row of the output.
    pub o_stride: u32,
    /// Score scale: 1 / sqrt(head_dim), or the family's ([`crate::FamilyParams::attn_scale`]).
    pub scale: f32,
    /// RoPE pairs rotated per head (`n_rot / 2`; read by `attention_decode.wgsl` with RoPE fused in).
    pub rot: u32,
    /// Score soft-cap `c` (scores become `c tanh(s / c)`; Gemma 2), 0 for none.
    pub softcap: f32,
    /// Sliding window in positions (keys at `qpos - window` and before are masked), 0 for none.
    pub window: u32,
}

/// `struct P` of `shaders/combine_io.wgsl` (both combine kernels').
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct CombineParams {
    /// Query heads.
    pub n_heads: u32,
    /// Head dim.
    pub head_dim: u32,
    /// Floats per token row of the output.
    pub o_stride: u32,
    /// Padding to 16 bytes.
    pub pad: u32,
}

/// The attention kernel's geometry for `head_dim` with `rows_hint` query rows per workgroup
/// wanted: threads per query row (a power of two dividing `head_dim`, at most 64 / rows_hint)
/// and keys per tile (K and V tiles plus the scores fitting `shared` bytes of workgroup memory,
/// at most 16 KiB: WebGPU's default), reading a cache of `kv` (the tiles are f32 either way).
pub fn geometry(head_dim: u32, rows_hint: u32, shared: u32, kv: KvType) -> Geometry {
    let mut tpq = (64 / rows_hint.next_power_of_two().clamp(1, 64)).min(16);
    while tpq > 1 && head_dim % tpq != 0 {
        tpq /= 2;
    }
    let budget = shared.min(16384) / 4;
    let mut bkv = 32;
    while bkv > 1 && bkv * (2 * head_dim + 64) > budget {
        bkv /= 2;
    }
    Geometry::Attention { head_dim, tpq, bkv, kv_f16: kv == KvType::F16 }
}

/// `shaders/attention_tiled.wgsl`'s geometry for `head_dim` reading a cache of `kv`: the most
/// keys per tile (32, 16 or 8) whose tiles (keys with a padded row, values, 64 rows of scores,
/// the rows' factors) fit `shared` bytes of workgroup memory, or `None` if not even 8 do.
pub fn tiled_geometry(head_dim: u32, shared: u32, kv: KvType) -> Option<Geometry> {
    let hd4 = head_dim.div_ceil(4);
    let bytes = |bkv: u32| bkv * (2 * hd4 + 1) * 16 + 64 * (bkv + 1) * 4 + 64 * 4;
    [32, 16, 8].into_iter().find(|&b| bytes(b) <= shared).map(|bkv| Geometry::AttentionTiled { head_dim, bkv, kv_f16: kv == KvType::F16 })
}

/// The CPU attention kernel's geometry for `head_dim` (a multiple of 4) with subgroups of
/// `subgroup` lanes (0: none), reading a cache of `kv`. Without subgroups: 16 invocations per
/// workgroup (2 SIMD groups of 8) of 4 query rows each (every key and value read serves all 4),
/// blocks of 4 keys. With subgroups, blocks of a subgroup's width (subgroups tile the
/// workgroup), and for head dims up to 64 and subgroups of at most 8 lanes 8 invocations of 8
/// rows (each key and value a lane loads and broadcasts serves 8 rows; the unrolled q and output
/// registers grow with head dim x rows, so larger heads keep 16 x 4). 8 x 8 shares each
/// broadcast load among the most rows whose unrolled registers still fit; a wider geometry
/// (8 x 16) gained little for a much larger kernel, whose compile time every load pays.
pub fn cpu_geometry(head_dim: u32, subgroup: u32, kv: KvType) -> Geometry {
    let kv_f16 = kv == KvType::F16;
    match subgroup {
        1.. if 8 % subgroup == 0 && head_dim <= 64 => Geometry::CpuAttention { head_dim, lanes: 8, rows: 8, keys: subgroup, subgroup, kv_f16 },
        1.. if 16 % subgroup == 0 => Geometry::CpuAttention { head_dim, lanes: 16, rows: 4, keys: subgroup, subgroup, kv_f16 },
        _ => Geometry::CpuAttention { head_dim, lanes: 16, rows: 4, keys: 4, subgroup: 0, kv_f16 },
    }
}

/// The CPU attention kernel's geometry for one-token steps, whose rows are the GQA group's few
/// query heads: a lane per row (a subgroup's lanes, or 4), so that no lane computes the 8 rows
/// of [`cpu_geometry`]'s mirrored idle rows (on a CPU adapter every lane's work takes time,
/// idle or not).
/// Subgroups of 4 to 16 lanes (as [`cpu_geometry`] takes them); other sizes run 4 lanes without.
pub fn cpu_one_token_geometry(head_dim: u32, subgroup: u32, kv: KvType) -> Geometry {
    let sg = if (4..=16).contains(&subgroup) && 16 % subgroup == 0 { subgroup } else { 0 };
    let lanes = if sg > 0 { sg } else { 4 };
    Geometry::CpuAttention { head_dim, lanes, rows: 1, keys: lanes, subgroup: sg, kv_f16: kv == KvType::F16 }
}

fn rows_per_workgroup(g: &Geometry) -> u32 {
    match g {
        Geometry::Attention { tpq, .. } => 64 / tpq,
        Geometry::CpuAttention { lanes, rows, .. } => lanes * rows,
        _ => unreachable!("attention geometry"),
    }
}

/// Key splits for a batch of `n_tokens` whose keys run to `kv_len`: one per 64-key chunk (a
/// split's keys are walked in series: at long contexts more splits keep decode flat), at most
/// [`MAX_SPLITS`]; 1 for larger batches (they fill the GPU with query rows) and on CPU adapters.
/// At long contexts more, shorter splits keep each workgroup's walk short: past 64 splits a
/// split can hold one chunk where 64 would make each walk two.
///
/// One-token steps whose attention merges its own splits ([`fuses_combine`]) give each split
/// floor(sqrt(chunks) / 3) whole chunks instead (about the chunks over 3 sqrt(`kv_len`) / 8): 1,
/// as before, up to 2240 keys, 2 from 2241, 3 from 5121; 32 splits at 4096 keys. That merge is
/// one workgroup's, in rounds of 8 splits, so its time grows with the splits while a split's
/// walk grows with its chunks, and the sum is least near the square root. (Splits of part
/// chunks cost: the kernel rounds a split up to whole chunks, so a rule by keys alone gave
/// fewer, longer splits than it asked for at short contexts.)
pub fn splits(gpu: &Gpu, cfg: &Config, n_tokens: u32, kv_len: u32) -> u32 {
    if n_tokens > SPLIT_MAX_TOKENS {
        return 1;
    }
    if let Some(s) = lab!(gpu, splits) {
        return s.clamp(1, MAX_SPLITS);
    }
    if gpu.is_cpu() {
        return 1;
    }
    let chunks = kv_len.max(1).div_ceil(64);
    let per = if n_tokens == 1 && fuses_combine(gpu, cfg) { (chunks.isqrt() / 3).max(1) } else { 1 };
    chunks.div_ceil(per).min(MAX_SPLITS)
}

/// Whether batches of more than [`SPLIT_MAX_TOKENS`] tokens take `attention_tiled.wgsl`: on GPUs
/// (not CPU adapters) where its tiles fit ([`tiled_geometry`]), unless
/// [`crate::gpu::Switches::tiled_attention`] is off.
pub fn tiled_kernel(gpu: &Gpu, cfg: &Config) -> bool {
    !gpu.is_cpu() && gpu.switches().tiled_attention && tiled_geometry(cfg.head_dim, gpu.limits().max_compute_workgroup_storage_size, cfg.kv).is_some()
}

/// Whether one-token batches take `shaders/attention_decode.wgsl` (a key per thread; its query
/// heads and scores in workgroup memory): on GPUs (not CPU adapters, where a thread per key
/// buys nothing), for head dims that are whole vectors and groups of at most 8 query heads whose
/// workgroup memory (q, scores, the key groups' sums and the token's own key) fits the
/// device's, unless [`crate::gpu::Switches::decode_attention`] is off.
pub fn decode_kernel(gpu: &Gpu, cfg: &Config) -> bool {
    let g = cfg.n_heads / cfg.n_kv_heads;
    gpu.switches().decode_attention.unwrap_or(!gpu.is_cpu()) && cfg.head_dim % 4 == 0 && g <= 8 && decode_fits(gpu, cfg, 64)
}

/// Whether `attention_decode.wgsl` with chunks of `keys` keys (and as many threads) fits the
/// device: its workgroup memory (q, scores, sums, own-key weights per head; the own key and
/// the merge's ticket once) and invocations.
fn decode_fits(gpu: &Gpu, cfg: &Config, keys: u32) -> bool {
    let g = cfg.n_heads / cfg.n_kv_heads;
    let shared = g * (4 * cfg.head_dim + keys * 4 + keys * 16 + 4) + 4 * cfg.head_dim + 4;
    let limits = gpu.limits();
    shared <= limits.max_compute_workgroup_storage_size && keys <= limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_x)
}

/// Workgroup memory of the merge's split groups in `attention_decode_wide.wgsl` of `threads`
/// threads and `heads` query heads: each group's dims, max and sum (`MACC`, `MMZ` in
/// `shaders/attention_decode_io.wgsl`, declared for more than one group,
/// [`crate::kernels::merge_groups`]).
fn merge_bytes(cfg: &Config, threads: u32, heads: u32) -> u32 {
    match merge_split_groups(cfg.head_dim, heads, threads) {
        1 => 0,
        groups => 24 * groups * heads * cfg.head_dim / 4,
    }
}

/// Keys a chunk of `attention_decode.wgsl` (`KC`, and threads a workgroup) for a one-token step
/// at `kv_len` keys in `splits` splits: 128 where a split holds an even number of 64-key chunks
/// (2, 4, ...), so that it walks half as many chunks in series (each chunk is a few waits on
/// memory and barriers; the workgroups are few then, so the wider ones still fit the GPU at
/// once), else 64: a short context's splits of one chunk would leave half the threads idle,
/// and an odd number of chunks rounded up to 128-key chunks would move keys between splits
/// and leave the last ones empty. the `attn_chunk` knob ([`crate::knobs`]) forces either. The
/// 128-key variant is compiled only where the kernel merges its own splits ([`fuses_combine`],
/// whose rule gives splits of several chunks) or splits or chunks are forced; elsewhere every
/// step takes 64. (`attention_decode_wide.wgsl`,
/// [`decode_wide`], compiles its 128-key variant only where chunks are forced to 128: it walks
/// a split's 64-key chunks with the next one's loads in flight.)
pub fn decode_chunk(gpu: &Gpu, kv_len: u32, splits: u32) -> u32 {
    chunk_keys(lab!(gpu, attn_chunk), kv_len, splits)
}

fn chunk_keys(forced: Option<u32>, kv_len: u32, splits: u32) -> u32 {
    let chunks = kv_len.div_ceil(splits.max(1)).div_ceil(64);
    forced.unwrap_or(if chunks >= 2 && chunks % 2 == 0 { 128 } else { 64 })
}

/// Whether one-token steps take `shaders/attention_decode_wide.wgsl` instead of
/// `attention_decode.wgsl`: a chunk's key and value loads all in flight at once (8 vectors a
/// thread), the next chunk's while it is summed. It takes the fused form only
/// ([`fuses_combine`]), head dims of a power of two times 4, and [`wide_fits`] for chunks of 64
/// keys; [`crate::gpu::Switches::attn_wide`] turns it on or off, by default on for head dims past
/// [`PREFETCH_MAX_HD`] (up to there `attention_decode.wgsl` loads a chunk's keys and first
/// values at once too). At head dim 128 a thread of the other kernel holds a whole key row
/// and then its value rows, two rounds of dependent loads after q's; at head dim 64 its
/// prefetch already overlaps them, and the wide form gains nothing there.
pub fn decode_wide(gpu: &Gpu, cfg: &Config) -> bool {
    let hd = cfg.head_dim;
    let on = gpu.switches().attn_wide.unwrap_or(hd > PREFETCH_MAX_HD);
    on && fuses_combine(gpu, cfg) && hd % 4 == 0 && (hd / 4).is_power_of_two() && wide_fits(gpu, cfg, 64)
}

/// Whether the wide kernel's subgroups each keep their own online softmax over the keys they
/// score and value (`OWNED` in `attention_decode_wide.wgsl`), merged once after the keys as the
/// key splits are, instead of a chunk's max and sum across the workgroup (two barriers a chunk,
/// and a third before the next): where the `attn_owned` knob ([`crate::knobs`]) is on and a value
/// row's `head_dim / 4` threads fit in one subgroup, so that each subgroup values exactly the
/// keys it scored (32 lanes: head dims up to 128). Off by default: written and tested on
/// lavapipe (8 and 16 lanes), not yet timed on a GPU.
pub fn decode_owned(gpu: &Gpu, cfg: &Config) -> bool {
    let sg = gpu.reduce_subgroup();
    lab!(gpu, attn_owned).unwrap_or(false) && sg != 0 && cfg.head_dim / 4 <= sg
}

/// Whether `attention_decode_wide.wgsl` with chunks of `keys` keys fits the device: its threads
/// ([`wide_threads`]) a workgroup, subgroups of at least the threads a key that tile the
/// workgroup, and its workgroup memory (q, scores, the subgroups' maxima and sums and the key
/// groups' sums per head; the own key and value and the merge's ticket once).
pub fn wide_fits(gpu: &Gpu, cfg: &Config, keys: u32) -> bool {
    let (hd, sg) = (cfg.head_dim, gpu.reduce_subgroup());
    let threads = wide_threads(hd, keys);
    let heads = decode_heads(gpu, cfg);
    let shared = heads * (4 * hd + keys * 4 + threads * 16 + 2 * 4 * threads / sg.max(1)) + 8 * hd + 4 + merge_bytes(cfg, threads, heads);
    let limits = gpu.limits();
    sg >= (threads / keys).max(2)
        && sg.is_power_of_two()
        && 64 % sg == 0
        && threads % sg == 0
        && threads <= limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_x)
        && shared <= limits.max_compute_workgroup_storage_size
}

/// Query heads per workgroup of `attention_decode.wgsl` ([`Geometry::AttentionDecode`]'s
/// `heads`): the `attn_heads` knob ([`crate::knobs`]) where it divides the group, else half of a group
/// of 4 or more (an even number), else the whole group; short steps may take one instead
/// ([`short_steps_one_head`]). Halving doubles the workgroups and
/// halves each one's serial work per chunk of keys, for twice the reads of the keys and values
/// (the second mostly from L2): at short contexts the halved serial work outweighs the second
/// read; one head a workgroup reads the cache once per query head, which long contexts pay for.
pub fn decode_heads(gpu: &Gpu, cfg: &Config) -> u32 {
    let g = cfg.n_heads / cfg.n_kv_heads;
    let default = if g >= 4 && g % 2 == 0 { g / 2 } else { g };
    lab!(gpu, attn_heads).filter(|&h| h >= 1 && g % h == 0).unwrap_or(default)
}

/// The most keys over which one-token steps of `attention_decode.wgsl` take one query head a
/// workgroup (the `attn_heads_until` knob ([`crate::knobs`]), else [`crate::policy::ONE_HEAD_MAX_KEYS`]), or `None`
/// where they never do: the kernel runs with more ([`decode_heads`] unforced), not as the wide
/// kernel, and merges its own splits (`merges`, [`fuses_combine`]: natively on Vulkan, where it
/// was measured). The steps take it where their chunks are 64 keys. Its workgroups then have
/// half the serial work a chunk and twice the count, which at short contexts (few key splits,
/// a GPU partly idle) is what bounds the step.
pub fn short_steps_one_head(gpu: &Gpu, cfg: &Config, merges: bool, wide_kernel: bool) -> Option<u32> {
    let until = lab!(gpu, attn_heads_until).unwrap_or(crate::policy::ONE_HEAD_MAX_KEYS);
    (merges && !wide_kernel && lab!(gpu, attn_heads).is_none() && decode_heads(gpu, cfg) > 1 && until > 0).then_some(until)
}

/// Whether one-token batches apply RoPE and write the KV cache inside `attention_decode.wgsl`
/// (the `rope_kv` dispatch then skips them: one dispatch fewer per layer and token): where the
/// decode kernel runs ([`decode_kernel`]) and the decode fusions are on
/// ([`crate::policy::fused`]).
pub fn fuses_rope(gpu: &Gpu, cfg: &Config) -> bool {
    decode_kernel(gpu, cfg) && crate::policy::fused(gpu)
}

/// Whether one-token attention with RoPE fused in ([`fuses_rope`]) also merges its key splits
/// itself (the decode kernels' `COMBINE`, `attention_decode_io.wgsl`'s `merge`: the last workgroup of each head group to finish
/// merges them), so that the combine dispatch runs only for batches of 2 to
/// [`SPLIT_MAX_TOKENS`] tokens; where [`crate::gpu::Switches::fused_combine`] is on (by default
/// natively on Vulkan only) and the device binds 8 storage buffers a stage (the kernel's, with
/// the output's integers). The merge needs one workgroup's storage writes to be visible to
/// another after a `storageBarrier()` and an atomic: naga's SPIR-V makes that barrier device
/// scope, while WGSL itself promises it only within a workgroup (Metal's
/// `threadgroup_barrier(mem_device)` likewise), so the browser and other backends keep the
/// combine dispatch.
/// It saves one dependent dispatch a layer: the combine's launch and its wait on the attention
/// before it.
pub fn fuses_combine(gpu: &Gpu, cfg: &Config) -> bool {
    fuses_rope(gpu, cfg) && crate::policy::fused_combine(gpu) && gpu.limits().max_storage_buffers_per_shader_stage >= 8
}

/// Where the tickets of [`fuses_combine`] start in the partials buffer, in u32s: after the
/// partials of [`MAX_SPLITS`] splits of [`SPLIT_MAX_TOKENS`] tokens (more than the merge's
/// layout, whose blocks of a head group's split are padded to 128-byte lines, takes).
pub fn tickets_at(cfg: &Config) -> u32 {
    MAX_SPLITS * SPLIT_MAX_TOKENS * cfg.n_heads * (cfg.head_dim + 2)
}

/// The largest head dim whose one-token attention loads a chunk's first value rows before it
/// scores the keys by default (the `attn_prefetch` knob ([`crate::knobs`])): at head dim 64 the
/// two waits on memory overlap for a few more registers; at 128 its 16 prefetched value rows
/// are twice the registers, which cost more than the overlap gains at long contexts. (Measured
/// natively on Vulkan only; the browser's GPUs take the same default.)
pub const PREFETCH_MAX_HD: u32 = 64;

/// Layer `layer`'s sliding window for [`AttentionIo::window`]: the family's window on its
/// sliding-window layers ([`crate::FamilyParams::is_swa`]), else 0 (every earlier key).
pub fn window(cfg: &Config, layer: u32) -> u32 {
    if cfg.family.is_swa(layer) {
        cfg.family.sliding_window
    } else {
        0
    }
}

/// Bytes of the partial-results buffer attention's key splits need: the partials, then one
/// ticket (a u32, zero between dispatches) per query head ([`fuses_combine`]'s head groups are
/// fewer).
pub fn partials_bytes(cfg: &Config) -> u64 {
    (tickets_at(cfg) as u64 + cfg.n_heads as u64) * 4
}

/// The buffers one attention op reads and writes.
pub struct AttentionIo<'a> {
    /// `[tokens][q_stride]`: `[q | k | v]` after RoPE.
    pub qkv: &'a wgpu::Buffer,
    /// Floats per token row of `qkv`.
    pub q_stride: u32,
    /// KV cache `[ctx][n_kv * head_dim]` of `cfg.kv` values (f16: two per u32), keys.
    pub k_cache: &'a wgpu::Buffer,
    /// Values.
    pub v_cache: &'a wgpu::Buffer,
    /// Output `[tokens][n_heads * head_dim]`.
    pub out: &'a wgpu::Buffer,
    /// Scratch for key splits ([`partials_bytes`]).
    pub partials: &'a wgpu::Buffer,
    /// The RoPE cos/sin table (`crate::rope::table`) where RoPE and the cache write of one-token
    /// batches are fused in ([`fuses_rope`]; `qkv` then holds q and k unrotated for them and
    /// `rope_kv` must skip them), else `None`.
    pub rope: Option<&'a wgpu::Buffer>,
    /// The output of one-token batches is read by the integer form of the output projection
    /// (`shaders/quantize.wgsl`'s integers, [`Builder::quantized`]): whatever merges the key
    /// splits writes them with the output where it can (the decode kernel's merge,
    /// [`fuses_combine`], or the combine, [`crate::kernels::Geometry::Combine`]), a quantize op
    /// where keys are not split.
    pub quantize: bool,
    /// With `rope`: one-token batches' value projection wrote the token's value into `v_cache`
    /// itself ([`crate::linear::Fuse::cache_row`]; `qkv`'s v columns are not written then).
    pub v_cached: bool,
    /// The layer's sliding window in positions ([`crate::FamilyParams::is_swa`] layers'
    /// [`crate::FamilyParams::sliding_window`]), 0 for none: a query at position p sees the keys
    /// at `p - window + 1 ..= p`.
    pub window: u32,
}

impl Builder<'_> {
    /// Attention of the batch's tokens over the cache, then (when keys are split, unless the
    /// decode kernel merges them itself, [`fuses_combine`]) the combine; with
    /// [`AttentionIo::quantize`], between them the quantize op of the output's integers (run
    /// where keys are not split; whatever merges them writes them where they are), which it
    /// returns for the output projection.
    pub fn attention(&mut self, cfg: &Config, io: AttentionIo<'_>) -> Option<crate::reuse::Quantized> {
        let shared = self.gpu.limits().max_compute_workgroup_storage_size;
        let g = cfg.n_heads / cfg.n_kv_heads;
        let q_dim = cfg.q_dim();
        let params = AttentionParams {
            n_heads: cfg.n_heads,
            n_kv: cfg.n_kv_heads,
            q_stride: io.q_stride,
            o_stride: q_dim,
            scale: cfg.family.attn_scale.unwrap_or(1.0 / (cfg.head_dim as f32).sqrt()),
            rot: cfg.n_rot / 2,
            softcap: cfg.family.attn_softcap,
            window: io.window,
        };
        let p = self.uniform("attention", &params);
        let step = self.step.clone();
        let bufs = [("p", &p), ("st", &step), ("qkv", io.qkv), ("kc", io.k_cache), ("vc", io.v_cache), ("o", io.out), ("partials", io.partials)];
        let decode = geometry(cfg.head_dim, g, shared, cfg.kv);
        let prefill = geometry(cfg.head_dim, 16, shared, cfg.kv);
        let (bq_decode, bq_prefill) = (rows_per_workgroup(&decode), rows_per_workgroup(&prefill));
        let mut variants = vec![
            (Form::FewRows, self.variant(PipelineKey::new(Kernel::Attention, decode), &bufs)),
            (Form::ManyRows, self.variant(PipelineKey::new(Kernel::Attention, prefill), &bufs)),
        ];
        // On CPU adapters: Cpu, and for one-token steps CpuOneToken (one query row a lane).
        let cpu = (self.gpu.is_cpu() && self.gpu.switches().cpu_kernels && cfg.head_dim % 4 == 0).then(|| {
            let sg = self.gpu.cpu_subgroup();
            let geometry = cpu_geometry(cfg.head_dim, sg, cfg.kv);
            let one = cpu_one_token_geometry(cfg.head_dim, sg, cfg.kv);
            for (form, geometry) in [(Form::Cpu, geometry), (Form::CpuOneToken, one)] {
                variants.push((form, self.variant(PipelineKey::new(Kernel::AttentionCpu, geometry), &bufs)));
            }
            (rows_per_workgroup(&geometry), rows_per_workgroup(&one))
        });
        // Batches beyond the key splits' on GPUs: the tiled kernel.
        // (Its vec4 reads of q need whole vec4 rows.)
        let q4_rows = cfg.head_dim % 4 != 0 || io.q_stride % 4 == 0;
        let tiled = (tiled_kernel(self.gpu, cfg) && q4_rows).then(|| tiled_geometry(cfg.head_dim, shared, cfg.kv)).flatten().map(|geometry| {
            variants.push((Form::Tiled, self.variant(PipelineKey::new(Kernel::AttentionTiled, geometry), &bufs)));
        });
        let tiled = tiled.is_some();
        // The output projection's integers, for one-token batches: by a quantize op where the
        // keys are not split, else by whichever merges the splits (the decode kernel or the
        // combine). (Taken here: the decode kernel binds them, the quantize op after it writes
        // them.)
        let quant = io.quantize && cfg.head_dim % crate::quantize::HALF == 0 && cfg.head_dim <= COMBINE_QUANT_MAX_HD;
        let quant_bufs = quant.then(|| self.quant_buffers((q_dim / crate::quantize::HALF) as u64, None));
        // One-token batches on GPUs: the decode kernel.
        let merges = io.rope.is_some() && fuses_combine(self.gpu, cfg);
        let one = decode_kernel(self.gpu, cfg).then(|| {
            let sg = Some(self.gpu.reduce_subgroup()).filter(|&s| s >= 2 && 64 % s == 0).unwrap_or(0);
            let heads = decode_heads(self.gpu, cfg);
            let (kv_f16, rope) = (cfg.kv == KvType::F16, io.rope.is_some());
            let (combine, v_cached) = (merges, io.v_cached);
            let tickets = if merges { tickets_at(cfg) } else { 0 };
            // With RoPE its cos/sin table (cs), where it merges its splits the integers out.
            let quant_out = quant_bufs.iter().filter(|_| merges).flat_map(|(xq, xs)| [("XQW", xq), ("XSW", xs)]);
            let with_rope: Vec<Named<'_>> = bufs.into_iter().chain(io.rope.map(|cs| ("cs", cs))).chain(quant_out).collect();
            // Chunks of 64 keys, and of 128 where they fit and a split can hold more than 64 keys
            // (decode_chunk picks per step): where the kernel merges its splits (their rule gives
            // splits of several chunks), or splits or chunks are forced.
            let wide_kernel = merges && decode_wide(self.gpu, cfg);
            let prefetch = !wide_kernel && lab!(self.gpu, attn_prefetch).unwrap_or(cfg.head_dim <= PREFETCH_MAX_HD);
            // (The wide kernel's chunks are 64 keys unless forced: it walks a split's chunks with
            // the next one's loads in flight, and its 128-key form was slower.)
            let chunk128 = if wide_kernel {
                lab!(self.gpu, attn_chunk) == Some(128) && wide_fits(self.gpu, cfg, 128)
            } else {
                (merges || lab!(self.gpu, splits).is_some() || lab!(self.gpu, attn_chunk) == Some(128)) && decode_fits(self.gpu, cfg, 128)
            };
            let kernel = if wide_kernel { Kernel::AttentionDecodeWide } else { Kernel::AttentionDecode };
            let geometry = |heads, keys| Geometry::AttentionDecode {
                head_dim: cfg.head_dim,
                group: g,
                heads,
                kv_f16,
                rope,
                sg,
                v_cached,
                combine,
                quant: merges && quant,
                tickets,
                keys,
                prefetch,
                owned: wide_kernel && decode_owned(self.gpu, cfg),
            };
            for keys in [64, 128].into_iter().filter(|&k| k == 64 || chunk128) {
                variants.push((Form::OneToken(keys), self.variant(PipelineKey::new(kernel, geometry(heads, keys)), &with_rope)));
            }
            // Short steps' one head a workgroup, in 64-key chunks (a split of a short step holds
            // one under the default split rule; steps whose chunks are 128 keys keep `heads`).
            let one_head = short_steps_one_head(self.gpu, cfg, merges, wide_kernel);
            if one_head.is_some() {
                variants.push((Form::OneTokenOneHead, self.variant(PipelineKey::new(kernel, geometry(1, 64)), &with_rope)));
            }
            (g / heads, chunk128, one_head)
        });
        // The decode kernel merges one-token batches' splits itself.
        let merged = move |b: &Batch| merges && one.is_some() && b.n_tokens == 1;
        let n_kv = cfg.n_kv_heads;
        let forced = lab!(self.gpu, attn_chunk);
        self.op_forms(variants, move |b: &Batch| {
            let rows = b.n_tokens * g;
            Some(match (cpu, one, tiled) {
                (_, Some((parts, chunk128, one_head)), _) if b.n_tokens == 1 => {
                    let keys = chunk_keys(forced, b.pos0 + 1, b.splits);
                    match one_head {
                        Some(until) if b.pos0 < until && keys == 64 => (Form::OneTokenOneHead, [g, n_kv, b.splits]),
                        _ => (Form::OneToken(if chunk128 && keys == 128 { 128 } else { 64 }), [parts, n_kv, b.splits]),
                    }
                }
                (Some((_, per_wg_one)), _, _) if b.n_tokens == 1 && b.splits == 1 => (Form::CpuOneToken, [rows.div_ceil(per_wg_one), n_kv, 1]),
                (Some((per_wg, _)), _, _) if b.n_tokens > SPLIT_MAX_TOKENS || b.splits == 1 => (Form::Cpu, [rows.div_ceil(per_wg), n_kv, 1]),
                (_, _, true) if b.n_tokens > SPLIT_MAX_TOKENS => (Form::Tiled, [rows.div_ceil(64), n_kv, 1]),
                _ if rows <= bq_decode => (Form::FewRows, [rows.div_ceil(bq_decode), n_kv, b.splits]),
                _ => (Form::ManyRows, [rows.div_ceil(bq_prefill), n_kv, b.splits]),
            })
        });
        // The cache's keys and values once, q in and o out.
        let (kv_row, q_row) = (2 * cfg.kv_dim() as u64 * cfg.kv.bytes() as u64, 2 * q_dim as u64 * 4);
        self.traffic(move |b| (b.pos0 + b.n_tokens) as u64 * kv_row + b.n_tokens as u64 * q_row);
        let cp = CombineParams { n_heads: cfg.n_heads, head_dim: cfg.head_dim, o_stride: q_dim, pad: 0 };
        let c = self.uniform("attention combine", &cp);
        let mut cbufs = vec![("p", &c), ("st", &step), ("partials", io.partials), ("o", io.out)];
        let quant = quant_bufs.map(|pair| self.quantize_into(pair, io.out, q_dim, q_dim, None, |b| b.splits == 1));
        if let Some(q) = &quant {
            cbufs.extend([("XQW", &q.q), ("XSW", &q.s)]);
        }
        let geometry = Geometry::Combine { quant: quant.is_some() };
        // The wide form only where a context or forced splits can reach it (one compile less at
        // load; the 64-thread form merges up to MAX_SPLITS too).
        let wide = cfg.ctx > 64 * WIDE_COMBINE_SPLITS || lab!(self.gpu, splits).is_some_and(|s| s > WIDE_COMBINE_SPLITS);
        let kernels = [Kernel::AttentionCombine, Kernel::AttentionCombineWide];
        let combine = kernels[..1 + wide as usize].iter().map(|&kernel| (kernel, self.variant(PipelineKey::new(kernel, geometry), &cbufs))).collect();
        let n_heads = cfg.n_heads;
        self.op_forms(combine, move |b| {
            (b.splits > 1 && !merged(b)).then_some((kernels[(wide && b.splits > WIDE_COMBINE_SPLITS) as usize], [n_heads, b.n_tokens, 1]))
        });
        quant
    }
}
