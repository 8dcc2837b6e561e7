//! The compute kernels (one WGSL file each under `shaders/`), their typed pipeline keys, and the
//! cache that compiles each (kernel, variant) once.
//!
//! A [`PipelineKey`] names everything that changes a kernel's WGSL: the GGML format of the weights
//! it reads, its geometry (threads per row and tokens per dispatch for the matrix-vector kernels,
//! the tile shape of the matrix-matrix kernel, the head dim and threads per query of attention,
//! the KV cache's element type for the kernels that write and read it),
//! and the optional device features it uses. [`compose`] turns a key into WGSL: `const`
//! declarations for the geometry, then for weight kernels `shaders/formats/common.wgsl` and the
//! format's file (its `dq4s` decoder: the only per-format code), then the kernel's file(s).

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
    /// The same on CPU implementations of the API (lavapipe, SwiftShader): whole rows per
    /// invocation, shared token reads (per weight format).
    MatmulCpu,
    /// RoPE and KV-cache write.
    RopeKv,
    /// Causal GQA flash attention of a batch of tokens against the KV cache.
    Attention,
    /// Attention of a one-token batch (decoding): a key per thread, then a value dim per thread.
    AttentionDecode,
    /// The same with a chunk's key and value loads spread over 8 vectors a thread, all in flight
    /// at once ([`crate::attention::decode_wide`]).
    AttentionDecodeWide,
    /// Merges attention's key splits (flash-decoding).
    AttentionCombine,
    /// The same for many splits: 256 threads a head instead of 64.
    AttentionCombineWide,
    /// Causal GQA attention of a batch of tokens on CPU implementations of the API: a query row
    /// per invocation, every lane walking the same keys.
    AttentionCpu,
    /// MoE router top-k and gates per token.
    MoeSelect,
    /// Selected experts' gate/up projections per token (per weight format).
    MatvecExp,
    /// Selected experts' down projections, gated, into the residual (per weight format).
    MoeDown,
    /// SwiGLU activation.
    Swiglu,
    /// Top-k of the logits (two stages).
    TopK,
    /// A plain read of a buffer: the bench's measured read bandwidth.
    Stream,
    /// Q8_0 and Q6_K rows regrouped in place at load, so that block weights start on 16-byte
    /// boundaries (Q8_0 rows of 64k but not 256k weights: on words).
    Repack,
    /// A token row of activations as 24-bit integers per 16 values (RMSNorm optionally fused),
    /// for the integer form of the matrix-vector kernel.
    Quantize,
    /// Causal GQA attention of a long batch (prefill) on GPUs: 64 query rows a workgroup, each
    /// thread a block of scores and of outputs.
    AttentionTiled,
    /// A batch's activations as f16 halves (hi + lo), the matrix-unit matmul's input.
    Split,
    /// The repetition penalty of a generation step, on its logits in place ([`crate::sample`]).
    Penalty,
    /// The next token of a generation step, from the top-k candidates ([`crate::sample`]).
    Pick,
    /// The next token of a greedy generation step: the top-k kernel's first candidate.
    PickGreedy,
}

impl Kernel {
    /// Every kernel.
    pub const ALL: [Kernel; 26] = [
        Kernel::Embed,
        Kernel::RmsNorm,
        Kernel::Matvec,
        Kernel::Matmul,
        Kernel::MatmulCoop,
        Kernel::MatmulCpu,
        Kernel::RopeKv,
        Kernel::Attention,
        Kernel::AttentionDecode,
        Kernel::AttentionDecodeWide,
        Kernel::AttentionCombine,
        Kernel::AttentionCombineWide,
        Kernel::AttentionCpu,
        Kernel::MoeSelect,
        Kernel::MatvecExp,
        Kernel::MoeDown,
        Kernel::Swiglu,
        Kernel::TopK,
        Kernel::Stream,
        Kernel::Repack,
        Kernel::Quantize,
        Kernel::AttentionTiled,
        Kernel::Split,
        Kernel::Penalty,
        Kernel::Pick,
        Kernel::PickGreedy,
    ];

    /// The kernel's own WGSL (without its format, geometry or shared bindings: see [`compose`]).
    pub fn source(self) -> &'static str {
        match self {
            Kernel::Embed => include_str!("../shaders/embed.wgsl"),
            Kernel::RmsNorm => include_str!("../shaders/rmsnorm.wgsl"),
            Kernel::Matvec => include_str!("../shaders/matvec.wgsl"),
            Kernel::Matmul => include_str!("../shaders/matmul.wgsl"),
            Kernel::MatmulCoop => include_str!("../shaders/matmul_coop.wgsl"),
            Kernel::MatmulCpu => include_str!("../shaders/matmul_cpu.wgsl"),
            Kernel::RopeKv => include_str!("../shaders/rope_kv.wgsl"),
            Kernel::Attention => include_str!("../shaders/attention.wgsl"),
            Kernel::AttentionDecode => include_str!("../shaders/attention_decode.wgsl"),
            Kernel::AttentionDecodeWide => include_str!("../shaders/attention_decode_wide.wgsl"),
            Kernel::AttentionCombine => include_str!("../shaders/attention_combine.wgsl"),
            Kernel::AttentionCombineWide => include_str!("../shaders/attention_combine_wide.wgsl"),
            Kernel::AttentionCpu => include_str!("../shaders/attention_cpu.wgsl"),
            Kernel::MoeSelect => include_str!("../shaders/moe_select.wgsl"),
            Kernel::MatvecExp => include_str!("../shaders/matvec_exp.wgsl"),
            Kernel::MoeDown => include_str!("../shaders/moe_down.wgsl"),
            Kernel::Swiglu => include_str!("../shaders/swiglu.wgsl"),
            Kernel::TopK => include_str!("../shaders/topk.wgsl"),
            Kernel::Stream => include_str!("../shaders/stream.wgsl"),
            Kernel::Repack => include_str!("../shaders/repack.wgsl"),
            Kernel::Quantize => include_str!("../shaders/quantize.wgsl"),
            Kernel::AttentionTiled => include_str!("../shaders/attention_tiled.wgsl"),
            Kernel::Split => include_str!("../shaders/split.wgsl"),
            Kernel::Penalty => include_str!("../shaders/penalty.wgsl"),
            Kernel::Pick => include_str!("../shaders/pick.wgsl"),
            Kernel::PickGreedy => include_str!("../shaders/pick_greedy.wgsl"),
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
            Kernel::MatmulCpu => "matmul_cpu",
            Kernel::RopeKv => "rope_kv",
            Kernel::Attention => "attention",
            Kernel::AttentionDecode => "attention_decode",
            Kernel::AttentionDecodeWide => "attention_decode_wide",
            Kernel::AttentionCombine => "attention_combine",
            Kernel::AttentionCombineWide => "attention_combine_wide",
            Kernel::AttentionCpu => "attention_cpu",
            Kernel::MoeSelect => "moe_select",
            Kernel::MatvecExp => "matvec_exp",
            Kernel::MoeDown => "moe_down",
            Kernel::Swiglu => "swiglu",
            Kernel::TopK => "topk",
            Kernel::Stream => "stream",
            Kernel::Repack => "repack",
            Kernel::Quantize => "quantize",
            Kernel::AttentionTiled => "attention_tiled",
            Kernel::Split => "split",
            Kernel::Penalty => "penalty",
            Kernel::Pick => "pick",
            Kernel::PickGreedy => "pick_greedy",
        }
    }

    /// Whether the kernel reads weights, and so is composed with a format file.
    pub fn reads_weights(self) -> bool {
        matches!(self, Kernel::Embed | Kernel::Matvec | Kernel::Matmul | Kernel::MatmulCoop | Kernel::MatmulCpu | Kernel::MatvecExp | Kernel::MoeDown)
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
    /// (`bench --set tile=...`, pp512 of the Llama-3.2-1B shape in Q8_0: 7.6k, 6.4k, 6.4k, 8.1k, 5.5k tok/s).
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

/// The CPU matrix-matrix kernel's tile (`shaders/matmul_cpu.wgsl`): `lanes` invocations of
/// `rows` whole weight rows each, all over the same `tokens` tokens; a workgroup computes
/// `lanes * rows` x `tokens` outputs, `rows * tokens` accumulators per invocation. With
/// `subgroup` (the device's subgroup size, needs the `subgroups` feature) the lanes of a subgroup
/// share the activations' loads through `subgroupBroadcast`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuTile {
    /// Invocations per workgroup (a multiple of the SIMD width: 8 on AVX2, 4 on SSE, and of
    /// `subgroup`).
    pub lanes: u32,
    /// Weight rows per invocation.
    pub rows: u32,
    /// Tokens per workgroup.
    pub tokens: u32,
    /// The subgroup size the kernel is compiled for (the device's, fixed), or 0: no subgroups.
    pub subgroup: u32,
}

impl CpuTile {
    /// The default: 64 lanes of 3 rows (192 rows: SmolLM2's 576, 960 and 3072 are multiples)
    /// over 16 tokens; on lavapipe (8 lanes of AVX2, subgroups of 8) the fastest of 64x1/8,
    /// 64x1/16, 64x2/8, 64x2/16, 64x4/8, 64x4/16, 64x2/32, 64x3/24 and 32x6/16 for SmolLM2's
    /// prefill (more tokens or rows spill the accumulators, fewer load more per multiply). With
    /// the weights' loads shared across a block (`dq4a`), still among the fastest: SmolLM2's
    /// 512-token batch's linear ops 2.38-2.52 s, against 2.37 s for 64x6/12, 2.52 s for 64x4/16,
    /// 2.8 s for 64x4/12, 64x6/8 and 64x4/8, and 2.9 to 3.5 s for 64x6/16, 64x8/12, 64x8/16,
    /// 64x2/24, 64x4/24, 64x6/24 and 64x8/6.
    pub const DEFAULT: CpuTile = CpuTile { lanes: 64, rows: 3, tokens: 16, subgroup: 0 };

    /// Weight rows per workgroup.
    pub fn bm(&self) -> u32 {
        self.lanes * self.rows
    }
}

impl std::fmt::Display for CpuTile {
    /// `LANESxROWS/TOKENS[/SUBGROUP]`, e.g. `64x3/16` or `64x3/16/8`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}/{}", self.lanes, self.rows, self.tokens)?;
        if self.subgroup > 0 {
            write!(f, "/{}", self.subgroup)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for CpuTile {
    type Err = String;

    /// `LANESxROWS/TOKENS`: lanes 1 to 256, rows 1 to 8, tokens 1 to 32 (no subgroups: see
    /// [`crate::Gpu::cpu_subgroup`]).
    fn from_str(s: &str) -> Result<CpuTile, String> {
        let bad = || format!("cpu tile {s:?}: expected LANESxROWS/TOKENS, e.g. 64x3/16");
        let v: Vec<u32> = s.split(['x', '/']).map(|p| p.trim().parse().map_err(|_| bad())).collect::<Result<_, _>>()?;
        let [lanes, rows, tokens] = v[..] else { return Err(bad()) };
        if !(1..=256).contains(&lanes) || !(1..=8).contains(&rows) || !(1..=32).contains(&tokens) {
            return Err(bad());
        }
        Ok(CpuTile { lanes, rows, tokens, subgroup: 0 })
    }
}

/// The matrix-unit matmul's tile (`shaders/matmul_coop.wgsl`): `bm` weight rows x `bn` tokens per
/// workgroup, in subgroups of 32 that each take `sm` x `sn` of them (32 or 64 each: 2 or 4 tiles
/// of 16 a side), and how the f16 matrix units keep f32 precision: `split` 0 rounds weights and
/// activations to f16 (as llama.cpp's matrix-unit paths do), 1 also multiplies the activations'
/// f16 remainders (x = hi + lo), 2 the weights' too (hi x hi + hi x lo + lo x hi: near-f32
/// products).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoopTile {
    /// Weight rows per workgroup (a multiple of `sm`).
    pub bm: u32,
    /// Tokens per workgroup (a multiple of `sn`).
    pub bn: u32,
    /// Weight rows per subgroup: 32 or 64.
    pub sm: u32,
    /// Tokens per subgroup: 32 or 64.
    pub sn: u32,
    /// 0, 1 or 2: f16 halves per operand beyond the first (above).
    pub split: u32,
    /// Weights in rows of whole 16-byte pieces, loaded a piece at a time (`WV`: F16 rows a
    /// multiple of 8 wide, 8 halves straight into the tiles; Q8_0 rows of 256k and Q6_K rows of
    /// 2048k, regrouped, and Q4_K, 16 weights); set by [`CoopTile::for_format`].
    pub pieces: bool,
}

impl CoopTile {
    /// 128 x 128 in 8 subgroups of 64 x 32 (each loads 4 weight fragments and 2 token fragments
    /// for 8 products, against 2 and 2 for 4 in 32 x 32), weights and activations each split in
    /// two f16 halves: 48 KiB of workgroup memory. On an H200, pp512 against [`CoopTile::COMPACT`]
    /// (with [`crate::policy::min_large`] 128 against 256): 8B Q4_K_M 3781 -> 4302
    /// tok/s, Llama-3.2-1B shape Q8_0 19935 -> 21551, Q4_K_M 21648 -> 22424, F16 26685 -> 31954
    /// (BENCHMARKS.md v21; subgroups of 32 x 64 ran even, 64 x 64 slower).
    pub const DEFAULT: CoopTile = CoopTile { bm: 128, bn: 128, sm: 64, sn: 32, split: 2, pieces: false };

    /// 64 x 128 in 8 subgroups of 32 x 32 (38 KiB): the default where [`CoopTile::DEFAULT`] does
    /// not fit the workgroup memory (and before v21); at split 2 on an H200 the fastest of
    /// 64x64, 128x64 and 64x128 in subgroups of 32 x 32 (BENCHMARKS.md v9).
    pub const COMPACT: CoopTile = CoopTile { bm: 64, bn: 128, sm: 32, sn: 32, split: 2, pieces: false };

    /// The smaller tile a linear op falls back to when this one makes too few workgroups.
    pub const SMALL: CoopTile = CoopTile { bm: 64, bn: 64, sm: 32, sn: 32, split: 2, pieces: false };

    /// This tile for `cols`-wide weights of format `ty`: F16 and BF16 weights are exact in f16
    /// after `hi16` (11 and 8 significant bits), so their remainders (split 2's lo x hi) are
    /// zero and skipped; F16 rows of whole 16-byte pieces take [`CoopTile::pieces`], and with
    /// `quant_pieces` (the `coop_quant_pieces` knob ([`crate::knobs`])) Q8_0 and Q6_K rows regrouped in
    /// groups of 8 blocks, and Q4_K.
    pub fn for_format(self, ty: GgmlType, cols: u32, quant_pieces: bool) -> CoopTile {
        let regrouped = crate::repack::group_blocks(ty, cols) == 8;
        let quant = quant_pieces && (regrouped || ty == GgmlType::Q4_K);
        let pieces = (ty == GgmlType::F16 && cols % 8 == 0) || quant;
        if matches!(ty, GgmlType::F16 | GgmlType::BF16) {
            CoopTile { split: self.split.min(1), pieces, ..self }
        } else {
            CoopTile { pieces, ..self }
        }
    }

    /// Subgroups per workgroup.
    pub fn subgroups(&self) -> u32 {
        (self.bm / self.sm) * (self.bn / self.sn)
    }

    /// Workgroup memory in bytes: the f16 tiles (BM + BN rows of 40), the remainders' (split 1:
    /// the activations' BN rows; split 2: BM + BN), and a 16 x 16 f32 result tile per subgroup.
    pub fn shared_bytes(&self) -> u32 {
        let remainder_rows = match self.split {
            0 => 0,
            1 => self.bn,
            _ => self.bm + self.bn,
        };
        (self.bm + self.bn + remainder_rows) * 40 * 2 + self.subgroups() * 1024
    }

    /// Threads per workgroup.
    pub fn threads(&self) -> u32 {
        self.subgroups() * 32
    }

    /// Whether `shaders/matmul_coop.wgsl` can be composed for this tile: `sm` and `sn` 32 or 64,
    /// `bm` and `bn` multiples of them up to 512, at most 8 subgroups, `split` 0 to 2.
    pub fn is_valid(&self) -> bool {
        let side = |v: u32| v == 32 || v == 64;
        side(self.sm)
            && side(self.sn)
            && (1..=512).contains(&self.bm)
            && (1..=512).contains(&self.bn)
            && self.bm % self.sm == 0
            && self.bn % self.sn == 0
            && self.threads() <= 256
            && self.split <= 2
    }
}

/// `BMxBN/SPLIT`, with `/SMxSN` where the subgroup block is not 32 x 32 (the `coop_tile` knob's syntax).
impl std::fmt::Display for CoopTile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}/{}", self.bm, self.bn, self.split)?;
        if (self.sm, self.sn) != (32, 32) {
            write!(f, "/{}x{}", self.sm, self.sn)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for CoopTile {
    type Err = String;

    /// `BMxBN/SPLIT` or `BMxBN/SPLIT/SMxSN`, e.g. `128x64/2` or `128x128/1/64x32`: SM and SN 32
    /// (the default) or 64, BM and BN multiples of them, at most 256 threads, SPLIT 0 to 2.
    fn from_str(s: &str) -> Result<CoopTile, String> {
        let bad = || {
            format!(
                "coop tile {s:?}: expected BMxBN/SPLIT or BMxBN/SPLIT/SMxSN with SM, SN 32 or 64, BM, BN multiples of them \
                 up to 512 (at most 8 subgroups) and SPLIT 0, 1 or 2, e.g. 64x64/2 or 128x128/1/64x32"
            )
        };
        let mut parts = s.split('/');
        let dims = |p: Option<&str>| -> Result<(u32, u32), String> {
            let (a, b) = p.ok_or_else(bad)?.split_once('x').ok_or_else(bad)?;
            Ok((a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?))
        };
        let (bm, bn) = dims(parts.next())?;
        let split = parts.next().ok_or_else(bad)?.trim().parse::<u32>().map_err(|_| bad())?;
        let (sm, sn) = match parts.next() {
            Some(p) => dims(Some(p))?,
            None => (32, 32),
        };
        let t = CoopTile { bm, bn, sm, sn, split, pieces: false };
        if parts.next().is_some() || !t.is_valid() {
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
    /// Matrix-vector kernels: `tpr` threads per row (a power of two up to 64; matvec: up to 256,
    /// in a workgroup of [`matvec_workgroup`] threads), `tokens` token
    /// vectors per dispatch, `span` weights a thread takes at once, and the decode fusions
    /// (matvec only: the expert kernels take [`Geometry::rows`]).
    Rows {
        /// Threads per row.
        tpr: u32,
        /// Token vectors per dispatch.
        tokens: u32,
        /// Rows per thread (each load of the activations serves them all).
        rpt: u32,
        /// Weights a thread decodes at once (a multiple of 4): see `shaders/matvec.wgsl`.
        span: u32,
        /// Spans (with `wide`: 16-byte pieces) a thread loads before using any (`UN` in
        /// `shaders/matvec.wgsl`).
        un: u32,
        /// RMSNorm fused in (the input is the raw residual stream).
        norm: bool,
        /// SwiGLU fused in (the matrix is `[gate; up]`).
        glu: bool,
        /// The subgroup size a row's partial sums are added with (subgroup shuffles; the
        /// device's, fixed), or 0: workgroup memory only (matvec only).
        sg: u32,
        /// The weights read as the format's 16-byte pieces (`WIDE` in `shaders/matvec.wgsl`;
        /// [`format_piece`]), not in spans (`span` then unused); the kernel then binds the
        /// weights a second time, after the others. Ignored for formats without pieces.
        wide: bool,
        /// With `wide` and one token: the activations as `shaders/quantize.wgsl`'s 24-bit
        /// integers, multiplied by integer dot products (`IDOT` in `shaders/matvec.wgsl`; formats
        /// with [`format_int`]); the kernel then binds them after the weights' second view. With
        /// `norm`, they are of the raw row times the norm weights and the kernel divides by the
        /// RMS itself (`INORM`).
        int: bool,
        /// With `int`: the output row also written as the next linear op's integer activations
        /// (`QOUT`; a workgroup of 16 rows).
        qout: QuantOut,
        /// One token, rows per thread even: the rows written as f16 halves, two a word
        /// (`HALF_ROWS`, [`crate::linear::AT_POSITION16`]: the value projection into an f16 V
        /// cache).
        half: bool,
    },
    /// The matrix-matrix kernel's tile.
    Tile(Tile),
    /// The CPU matrix-matrix kernel's tile.
    CpuTile(CpuTile),
    /// The matrix-unit matmul's tile.
    Coop(CoopTile),
    /// The CPU attention kernel: head dim (a multiple of 4), invocations per workgroup, query rows
    /// per invocation, keys per block, subgroup size (0: none; else keys per block equals it and
    /// lanes are a multiple of it).
    CpuAttention {
        /// Head dim.
        head_dim: u32,
        /// Invocations per workgroup.
        lanes: u32,
        /// Query rows per invocation.
        rows: u32,
        /// Keys per block.
        keys: u32,
        /// The subgroup size the kernel is compiled for (the device's, fixed), or 0.
        subgroup: u32,
        /// The KV cache holds f16 pairs (`KvType::F16`), else f32.
        kv_f16: bool,
    },
    /// Attention: head dim, threads per query row (a power of two dividing it), keys per tile.
    Attention {
        /// Head dim.
        head_dim: u32,
        /// Threads per query row.
        tpq: u32,
        /// Keys per tile.
        bkv: u32,
        /// The KV cache holds f16 pairs (`KvType::F16`), else f32.
        kv_f16: bool,
    },
    /// Prefill attention (`attention_tiled.wgsl`): head dim, keys per tile (a multiple of 8).
    AttentionTiled {
        /// Head dim.
        head_dim: u32,
        /// Keys per tile.
        bkv: u32,
        /// The KV cache holds f16 pairs (`KvType::F16`), else f32.
        kv_f16: bool,
    },
    /// One-token attention (`attention_decode.wgsl`): head dim (a multiple of 4), query heads
    /// per KV head.
    AttentionDecode {
        /// Head dim.
        head_dim: u32,
        /// Query heads per KV head.
        group: u32,
        /// Query heads per workgroup (a divisor of `group`): the group's heads are split across
        /// `group / heads` workgroups, each reading the KV head's keys and values.
        heads: u32,
        /// The KV cache holds f16 pairs (`KvType::F16`), else f32.
        kv_f16: bool,
        /// RoPE and the KV-cache write fused in (`rope_kv.wgsl`'s work for the token).
        rope: bool,
        /// The subgroup size the softmax max and sum are reduced with (a divisor of 64, at
        /// least 2; the device's, fixed), or 0: trees in workgroup memory.
        sg: u32,
        /// With `rope`: the token's value is already in the V cache (the value projection wrote
        /// it there, `linear::Fuse::cache_row`): read from there, and only the key written.
        v_cached: bool,
        /// With `rope`: the key splits are merged by the last workgroup of each head group to
        /// finish (`COMBINE`), not by a combine dispatch ([`crate::attention::fuses_combine`]).
        combine: bool,
        /// With `combine`: the merge also writes the heads' output as
        /// `shaders/quantize_half.wgsl`'s integers (`QUANT`, as [`Geometry::Combine`]'s).
        quant: bool,
        /// With `combine`: where the tickets start in the partials buffer, in u32s
        /// ([`crate::attention::tickets_at`]).
        tickets: u32,
        /// Keys a chunk, and threads a workgroup (`KC`): 64, or 128
        /// ([`crate::attention::decode_chunk`]).
        keys: u32,
        /// A chunk's first value rows are loaded before its keys are scored (`PREFETCH`,
        /// the `attn_prefetch` knob ([`crate::knobs`])).
        prefetch: bool,
        /// `attention_decode_wide.wgsl` only: each subgroup keeps its own online softmax over
        /// the keys it scores and values, merged once after the keys (`OWNED`, no barrier a
        /// chunk; [`crate::attention::decode_owned`]).
        owned: bool,
    },
    /// RMSNorm: `rows` token rows per workgroup, one invocation each, no barriers
    /// (`shaders/rmsnorm.wgsl`'s CPU form, for CPU adapters), or 0: a workgroup per row (the GPU
    /// form).
    NormRows {
        /// Token rows per workgroup, or 0.
        rows: u32,
    },
    /// Attention's combine of key splits (`attention_combine.wgsl`, `attention_combine_wide.wgsl`):
    /// whether it also writes the head's output as `shaders/quantize_half.wgsl`'s 24-bit integers
    /// (`QUANT`, for the integer form of the output projection; head dims a multiple of 16, at
    /// most [`COMBINE_QUANT_MAX_HD`]).
    Combine {
        /// Writes the quantised output too.
        quant: bool,
    },
    /// RoPE and the KV-cache write: the cache's element type.
    RopeKv {
        /// The KV cache holds f16 pairs (`KvType::F16`), else f32.
        kv_f16: bool,
    },
}

impl Geometry {
    /// A matrix-matrix tile's weight rows and tokens per workgroup ((1, 1) for other geometries).
    pub fn tile_size(&self) -> (u32, u32) {
        match self {
            Geometry::Tile(t) => (t.bm, t.bn),
            Geometry::Coop(t) => (t.bm, t.bn),
            _ => (1, 1),
        }
    }
}

/// Whether a one-token integer-form matrix-vector kernel also writes its output row as the
/// integer activations of the linear op after it (`QOUT` in `shaders/matvec.wgsl`,
/// [`crate::linear::Fuse::quant_out`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum QuantOut {
    /// No.
    #[default]
    Off,
    /// The output row as it is (the down projection's input).
    Plain,
    /// The output row times the next RMSNorm's weights (bound after the integers), each half
    /// with its sum of squares (the next op's `INORM`).
    Norm,
}

/// Rows per workgroup of the matrix-vector kernel with [`QuantOut`]: one 16-value half.
pub const QUANT_OUT_ROWS: u32 = 16;

/// The largest head dim whose combine writes the quantised output ([`Geometry::Combine`]): its
/// workgroup keeps the head's output row.
pub const COMBINE_QUANT_MAX_HD: u32 = 512;

/// Everything that specialises one kernel's WGSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// The kernel.
    pub kernel: Kernel,
    /// The weights' GGML format (weight kernels only).
    pub format: Option<GgmlType>,
    /// Blocks per regrouped group of the weights' rows ([`crate::repack::group_blocks`]; 0: the
    /// file's layout), `REGROUP` in the WGSL: a constant, so that the format file's layout
    /// choice costs no branch (on CPU adapters both sides of a branch run, masked, and a
    /// branch per 4 weights cost Q8_0 rows their single aligned loads).
    pub regroup: u32,
    /// Workgroup shape and constants.
    pub geometry: Geometry,
}

impl Geometry {
    /// `tpr` threads per row over `tokens` token vectors, spans of 4 weights, nothing fused.
    pub fn rows(tpr: u32, tokens: u32) -> Geometry {
        Geometry::Rows {
            tpr,
            tokens,
            rpt: 1,
            span: 4,
            un: default_spans_per_step(4),
            norm: false,
            glu: false,
            sg: 0,
            wide: false,
            int: false,
            qout: QuantOut::Off,
            half: false,
        }
    }
}

/// The matrix-vector kernel's spans per step (`UN`) unless tuned: 16 weights' worth, at least
/// one span ([`crate::linear::spans_per_step`]).
pub const fn default_spans_per_step(span: u32) -> u32 {
    if span >= 16 {
        1
    } else {
        16 / span
    }
}

impl PipelineKey {
    /// A kernel with nothing to specialise.
    pub fn plain(kernel: Kernel) -> PipelineKey {
        PipelineKey::new(kernel, Geometry::Fixed)
    }

    /// A kernel that reads no weights, with `geometry`.
    pub fn new(kernel: Kernel, geometry: Geometry) -> PipelineKey {
        PipelineKey { kernel, format: None, regroup: 0, geometry }
    }

    /// A weight kernel for rows of `cols` weights of `format` (their layout:
    /// [`crate::repack::group_blocks`]) with `geometry`.
    pub fn weights(kernel: Kernel, format: GgmlType, cols: u32, geometry: Geometry) -> PipelineKey {
        PipelineKey { kernel, format: Some(format), regroup: crate::repack::group_blocks(format, cols), geometry }
    }

    /// A short label, e.g. `matmul q4_K 64x64/4x4`.
    pub fn label(&self) -> String {
        let mut s = self.kernel.name().to_string();
        if let Some(f) = self.format {
            s += &format!(" {}", f.name());
            if self.regroup != 0 {
                s += &format!("/g{}", self.regroup);
            }
        }
        match self.geometry {
            Geometry::Fixed => {}
            Geometry::Rows { tpr, tokens, rpt, span, un, norm, glu, sg, wide, int, qout, half } => {
                s += &format!(" tpr{tpr} x{tokens}");
                if rpt != 1 {
                    s += &format!(" r{rpt}");
                }
                if span != 4 {
                    s += &format!(" s{span}");
                }
                if un != default_spans_per_step(span) {
                    s += &format!(" u{un}");
                }
                if norm {
                    s += " +norm";
                }
                if glu {
                    s += " +glu";
                }
                if sg != 0 {
                    s += &format!(" sg{sg}");
                }
                if wide && self.format.and_then(format_piece).is_some() {
                    s += " wide";
                }
                if int && self.format.is_some_and(format_int) {
                    s += " idot";
                }
                match qout {
                    QuantOut::Off => {}
                    QuantOut::Plain => s += " +qout",
                    QuantOut::Norm => s += " +qout-norm",
                }
                if half {
                    s += " +f16-row";
                }
            }
            Geometry::Tile(t) => s += &format!(" {}x{}/{}x{}", t.bm, t.bn, t.tm, t.tn),
            Geometry::CpuTile(t) => s += &format!(" {t}"),
            Geometry::Coop(t) => s += &format!(" {t}{}", if t.pieces { " wp" } else { "" }),
            Geometry::CpuAttention { head_dim, lanes, rows, keys, subgroup, .. } => s += &format!(" hd{head_dim} wg{lanes} rq{rows} bk{keys} sg{subgroup}"),
            Geometry::Attention { head_dim, tpq, bkv, .. } => s += &format!(" hd{head_dim} tpq{tpq} bkv{bkv}"),
            Geometry::AttentionTiled { head_dim, bkv, .. } => s += &format!(" hd{head_dim} bkv{bkv}"),
            Geometry::AttentionDecode { head_dim, group, heads, rope, sg, v_cached, combine, quant, keys, prefetch, owned, .. } => {
                s += &format!(" hd{head_dim} g{group}{}{}", if heads < group { format!("/{heads}") } else { String::new() }, if rope { " +rope" } else { "" });
                if keys != 64 {
                    s += &format!(" kc{keys}");
                }
                if prefetch {
                    s += " pf";
                }
                for (on, name) in [(v_cached, " +v-cached"), (combine, " +combine"), (quant, " +quant")] {
                    if on {
                        s += name;
                    }
                }
                if owned {
                    s += " owned";
                }
                if sg != 0 {
                    s += &format!(" sg{sg}");
                }
            }
            Geometry::RopeKv { .. } | Geometry::Combine { quant: false } => {}
            Geometry::Combine { quant: true } => s += " +quant",
            Geometry::NormRows { rows } if rows > 0 => s += &format!(" rows{rows}"),
            Geometry::NormRows { .. } => {}
        }
        if let Geometry::CpuAttention { kv_f16: true, .. }
        | Geometry::Attention { kv_f16: true, .. }
        | Geometry::AttentionTiled { kv_f16: true, .. }
        | Geometry::AttentionDecode { kv_f16: true, .. }
        | Geometry::RopeKv { kv_f16: true } = self.geometry
        {
            s += " kv-f16";
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
    format_const(ty, "CHUNK").unwrap_or_else(|| panic!("shaders/formats/{}.wgsl has no `const CHUNK: u32 = Nu;`", ty.name().to_lowercase()))
}

/// The part of format `ty`'s file that every form composes: all of it before `//@pieces` (the
/// 16-byte pieces, composed only where they are read).
fn format_base(ty: GgmlType) -> &'static str {
    format_source(ty).split("\n//@pieces\n").next().unwrap_or_default()
}

/// The value of `const NAME: u32 = Nu;` in format `ty`'s file, if it has one.
fn format_const(ty: GgmlType, name: &str) -> Option<u32> {
    format_source(ty).lines().find_map(|l| l.strip_prefix("const ")?.strip_prefix(name)?.strip_prefix(": u32 = ")?.strip_suffix("u;")?.parse().ok())
}

/// The 16-byte pieces of format `ty` (`const PIECE` and `RUNS` of its file: weights per piece,
/// runs of consecutive weights per piece), if it has them (see `shaders/formats/common.wgsl`).
pub fn format_piece(ty: GgmlType) -> Option<(u32, u32)> {
    let (piece, runs) = (format_const(ty, "PIECE")?, format_const(ty, "RUNS")?);
    // Runs of whole vec4s (matvec.wgsl unrolls RUNS x PIECE / RUNS / 4 of them).
    assert!(runs > 0 && piece % (4 * runs) == 0, "shaders/formats/{}.wgsl: PIECE must be a multiple of 4 x RUNS", ty.name().to_lowercase());
    Some((piece, runs))
}

/// Whether format `ty`'s pieces have the integer form (`fn pint` and `pab` in its file; runs of 16
/// weights): the matrix-vector kernel's `IDOT`.
pub fn format_int(ty: GgmlType) -> bool {
    let int = format_source(ty).contains("\nfn pint(");
    assert!(
        !int || format_piece(ty).is_some_and(|(piece, runs)| piece / runs == 16),
        "shaders/formats/{}.wgsl: pint needs pieces of runs of 16",
        ty.name().to_lowercase()
    );
    int
}

/// The WGSL of `key`.
pub fn compose(key: &PipelineKey) -> String {
    // Enable directives must come first.
    // (Naga takes subgroup built-ins without `enable subgroups;`, and rejects it so far: the
    // browser, which requires it, gets it from `Gpu::wgsl_source`.)
    let enables = match key.kernel {
        Kernel::MatmulCoop => "enable f16;\nenable wgpu_cooperative_matrix;\n",
        Kernel::Split => "enable f16;\n",
        _ => "",
    };
    let mut s = format!("{enables}// composed by kernels::compose: {}\n", key.label());
    match key.geometry {
        Geometry::Fixed => {}
        Geometry::Rows { tpr, tokens, rpt, span, un, glu, sg, qout, .. } => {
            let ng = span / 4;
            // (The expert kernels' workgroups are 64 threads, whatever the rows take.)
            let wg = if key.kernel == Kernel::Matvec { matvec_workgroup(tpr, rpt, sg, qout) } else { tpr.max(64) };
            let c = consts(key);
            let norm = c.iter().find(|(n, _)| *n == "NORM").map_or(0, |c| c.1);
            s += &format!(
                "const WG: u32 = {wg}u;\nconst TPR: u32 = {tpr}u;\nconst RPW: u32 = {}u;\nconst RPT: u32 = {rpt}u;\nconst NT: u32 = {tokens}u;\n",
                wg / tpr
            );
            s += &format!(
                "const SPAN: u32 = {span}u;\nconst NG: u32 = {ng}u;\nconst UN: u32 = {un}u;\nconst NORM: u32 = {norm}u;\nconst GLU: u32 = {}u;\nconst SG: u32 = {sg}u;\nconst LANES: u32 = {}u;\n",
                glu as u32,
                matvec_lanes(tpr, sg)
            );
        }
        Geometry::Tile(t) => s += &format!("const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst TM: u32 = {}u;\nconst TN: u32 = {}u;\n", t.bm, t.bn, t.tm, t.tn),
        Geometry::Coop(t) => {
            let (fm, fn_) = (t.sm / 16, t.sn / 16);
            s += &format!("const BM: u32 = {}u;\nconst BN: u32 = {}u;\nconst FM: u32 = {fm}u;\nconst FN: u32 = {fn_}u;\n", t.bm, t.bn);
            s += &format!("const SGM: u32 = {}u;\nconst SGN: u32 = {}u;\n", t.bm / t.sm, t.bn / t.sn);
            s += &format!("const SPLIT: u32 = {}u;\n", t.split);
        }
        Geometry::Attention { head_dim, tpq, bkv, .. } => s += &format!("const HD: u32 = {head_dim}u;\nconst TPQ: u32 = {tpq}u;\nconst BKV: u32 = {bkv}u;\n"),
        Geometry::AttentionTiled { head_dim, bkv, .. } => {
            s += &format!("const HD: u32 = {head_dim}u;\nconst HD4: u32 = {}u;\nconst BKV: u32 = {bkv}u;\n", head_dim.div_ceil(4))
        }
        Geometry::AttentionDecode { head_dim, group, heads, sg, tickets, keys, owned, .. } => {
            // Key groups: the largest power of two of NDG-thread groups that fits KC threads, so
            // that its groups of KC / KG keys cover the KC keys of a chunk exactly.
            let groups = (keys / (head_dim / 4).max(1)).max(1);
            let kg = 1u32 << (31 - groups.leading_zeros());
            s += &format!(
                "const HD: u32 = {head_dim}u;\nconst GQ: u32 = {group}u;\nconst G: u32 = {heads}u;\nconst DPT: u32 = {}u;\nconst KG: u32 = {kg}u;\nconst SG: u32 = {sg}u;\nconst KC: u32 = {keys}u;\n",
                head_dim.div_ceil(4 * keys)
            );
            // Threads a workgroup: a key each, or 8 vectors of a chunk's keys and values each.
            let threads = if key.kernel == Kernel::AttentionDecodeWide { crate::attention::wide_threads(head_dim, keys) } else { keys };
            s += &format!("const WGT: u32 = {threads}u;\nconst MG: u32 = {}u;\nconst OWNED: bool = {owned};\n", merge_groups(key));
            // The merge's layout (COMBINE): a head group's split in whole 128-byte lines.
            let gs = (heads * (head_dim + 2)).next_multiple_of(32);
            s += &format!("const GS: u32 = {gs}u;\nconst MAX_SPLITS: u32 = {}u;\nconst TICKETS: u32 = {}u;\n", crate::attention::MAX_SPLITS, tickets.max(1));
        }
        Geometry::CpuTile(_) | Geometry::CpuAttention { .. } | Geometry::RopeKv { .. } | Geometry::NormRows { .. } | Geometry::Combine { .. } => {
            for (name, v) in consts(key) {
                s += &format!("const {name}: u32 = {v}u;\n");
            }
        }
    }
    // `//@if` blocks in the shared files too (XH: the activations as f16 halves, matmul_coop).
    // (HALF_ROWS: linear.wgsl's f16 rows for matvec.wgsl; both off where the key has neither.)
    let mut shared = consts(key);
    for name in ["HALF_ROWS", "XH"] {
        if !shared.iter().any(|c| c.0 == name) {
            shared.push((name, 0));
        }
    }
    // DQ4A: the format defines its own `dq4a` (formats/common.wgsl composes the general one).
    shared.push(("DQ4A", key.format.is_some_and(|ty| format_base(ty).contains("\nfn dq4a(")) as u32));
    if let Some(ty) = key.format.filter(|_| key.kernel.reads_weights()) {
        // The rows' layout (formats/q8_0.wgsl, q6_k.wgsl): blocks per regrouped group, or 0.
        s += &format!("const REGROUP: u32 = {}u;\n", key.regroup);
        s += &unroll(include_str!("../shaders/formats/common.wgsl"), &shared);
        s += "\n";
        // The format's 16-byte pieces only where they are read: they use the `W4` view that
        // the matrix-vector kernel's WIDE form declares (matmul_coop reads its pieces itself).
        let wide = matches!(key.geometry, Geometry::Rows { wide: true, .. }) && key.kernel == Kernel::Matvec;
        s += if wide { format_source(ty) } else { format_base(ty) };
        s += "\n";
    }
    // The writers of the integer form's activations share their maths.
    let qout = consts(key).contains(&("QOUT", 1));
    let quant = matches!(key.geometry, Geometry::Combine { .. } | Geometry::AttentionDecode { .. }) && consts(key).contains(&("QUANT", 1));
    if key.kernel == Kernel::Quantize || quant || qout {
        s += include_str!("../shaders/quantize_half.wgsl");
        s += "\n";
    }
    if matches!(key.kernel, Kernel::AttentionCombine | Kernel::AttentionCombineWide) {
        s += &unroll(include_str!("../shaders/combine_io.wgsl"), &consts(key));
        s += "\n";
    }
    if matches!(key.kernel, Kernel::AttentionDecode | Kernel::AttentionDecodeWide) {
        s += &unroll(include_str!("../shaders/attention_decode_io.wgsl"), &consts(key));
        s += "\n";
    }
    if matches!(key.kernel, Kernel::Penalty | Kernel::Pick | Kernel::PickGreedy) {
        s += include_str!("../shaders/gen.wgsl");
        s += "\n";
    }
    if matches!(key.kernel, Kernel::MatmulCoop | Kernel::Split) {
        s += include_str!("../shaders/hi16.wgsl");
        s += "\n";
    }
    if matches!(key.kernel, Kernel::Matvec | Kernel::Matmul | Kernel::MatmulCoop | Kernel::MatmulCpu) {
        s += &unroll(include_str!("../shaders/linear.wgsl"), &shared);
        s += "\n";
    }
    s + &unroll(key.kernel.source(), &consts(key))
}

/// Split groups of the one-token attention's merge of its key splits (`MG` in
/// `shaders/attention_decode_io.wgsl`): as many groups of a thread per 4 dims of the
/// workgroup's heads as `attention_decode_wide.wgsl`'s threads hold, else 1. Measured on an H100
/// (BENCHMARKS.md v30), decode tg128 after 4096 keys with 1 / 4 groups: Llama-3-8B shape Q4_K_M
/// 246.3, 247.4 / 252.4, 252.6 tok/s; `attention_decode.wgsl`'s 128 threads, 4 groups at head
/// dim 64, lost (Llama-3.2-1B shape Q8_0 767.4, 786.7 / 756.1, 747.1; F16 652.5, 646.8 / 619.4,
/// 630.3), so it keeps 1.
pub fn merge_groups(key: &PipelineKey) -> u32 {
    match key.geometry {
        Geometry::AttentionDecode { head_dim, heads, keys, .. } if key.kernel == Kernel::AttentionDecodeWide => {
            crate::attention::merge_split_groups(head_dim, heads, crate::attention::wide_threads(head_dim, keys))
        }
        _ => 1,
    }
}

/// Threads per workgroup of the matrix-vector kernel (`shaders/matvec.wgsl`; the expert kernels
/// take `max(64, tpr)`): `max(64, tpr)`; with a whole row per thread (CPU adapters' form,
/// [`crate::linear::threads_per_row`]), one subgroup of `sg` lanes (16 threads without
/// subgroups of 4 or more: the form that shares loads across a subgroup needs them), where a workgroup is one CPU thread's task: more, smaller tasks keep the cores
/// busy on narrow matrices. SwiftShader in Chromium (4 lanes), 4 / 16 threads, decode tok/s on
/// one page (`bench-web`): stories260K 319 / 269, SmolLM2-135M 4.62 / 4.36; lavapipe (8 lanes),
/// SmolLM2-135M, 64 / 16 threads: 8.9-9.1 / 9.5-9.7 tok/s (BENCHMARKS.md v26). With
/// [`QuantOut`] the threads of 16 rows.
pub fn matvec_workgroup(tpr: u32, rpt: u32, sg: u32, qout: QuantOut) -> u32 {
    match qout {
        QuantOut::Off if tpr == 1 && broadcasts(sg) => sg,
        QuantOut::Off if tpr == 1 => 16,
        QuantOut::Off => tpr.max(64),
        _ => QUANT_OUT_ROWS / rpt * tpr,
    }
}

/// Lanes of a row of the matrix-vector kernel that subgroup shuffles sum (`LANES` in
/// `shaders/matvec.wgsl`): `min(tpr, sg)` with subgroups of `sg` lanes, else 1. With more threads
/// a row than that, the rest are summed in workgroup memory (`WGRED`).
pub fn matvec_lanes(tpr: u32, sg: u32) -> u32 {
    if sg > 0 {
        tpr.min(sg)
    } else {
        1
    }
}

/// Whether the matrix-vector kernel's CPU-adapter form (a row group per invocation) shares the
/// activations' loads across subgroups of `sg` lanes (`XB` in `shaders/matvec.wgsl`): with 4 or
/// more lanes (so that a 32-column step's 8 vec4s take at most 2 loads a lane). The defaults
/// that suit that form ([`matvec_workgroup`], [`crate::linear::rows_per_thread`],
/// [`crate::policy::fused`]) ask here too.
pub fn broadcasts(sg: u32) -> bool {
    sg >= 4
}

/// The compile-time constants of `key`'s geometry, by name (the bounds of `//@for` blocks).
fn consts(key: &PipelineKey) -> Vec<(&'static str, u32)> {
    match key.geometry {
        // KR: subgroup rounds per step of matmul_cpu.wgsl, whose steps are whole 32-column blocks.
        Geometry::CpuTile(t) => {
            let kr = (8 / t.subgroup.max(1)).max(1);
            debug_assert!(t.subgroup == 0 || (4 * t.subgroup * kr) % 32 == 0, "subgroup sizes are powers of two");
            vec![("WG", t.lanes), ("RPI", t.rows), ("NT", t.tokens), ("SG", t.subgroup), ("KR", kr)]
        }
        Geometry::Rows { tpr, tokens, rpt, span, un, norm, glu, sg, wide, int, qout, half } => {
            // WIDE: the format's runs per piece and vec4s per run.
            // (Formats without pieces compose the span form.)
            let (wide, runs, rj) = match (wide, key.format.and_then(format_piece)) {
                (true, Some((piece, runs))) => (1, runs, piece / runs / 4),
                _ => (0, 0, 0),
            };
            let int = int && wide == 1 && key.format.is_some_and(format_int);
            assert!(!int || tokens == 1, "the integer matrix-vector form takes one token");
            // (QOUT only with the integer form: formats without it compose the plain f32 form.)
            let (qout, qnorm) = (int && qout != QuantOut::Off, int && qout == QuantOut::Norm);
            // XB: matvec.wgsl's CPU-adapter form (activations loaded across a subgroup's lanes).
            let xb = tpr == 1 && span == 32 && un == 1 && broadcasts(sg) && wide == 0;
            assert!(!qout || QUANT_OUT_ROWS % rpt == 0, "QOUT: rows per thread must divide 16");
            assert!(!half || (rpt % 2 == 0 && tokens == 1 && !qout && !glu), "HALF_ROWS: one token, rows per thread even, no QOUT or SwiGLU");
            vec![
                ("NT", tokens),
                ("RPT", rpt),
                ("UNG", (span / 4) * un),
                ("NORM", (norm && !int) as u32),
                ("INORM", (norm && int) as u32),
                ("SS", norm as u32),
                ("QOUT", qout as u32),
                ("QNORM", qnorm as u32),
                ("HALF_ROWS", half as u32),
                ("GLU", glu as u32),
                ("SG", sg),
                ("WIDE", wide),
                // WGRED: the rows' partial sums are joined in workgroup memory (more threads a
                // row than a subgroup's lanes; matvec.wgsl's LANES).
                ("WGRED", (tpr > matvec_lanes(tpr, sg)) as u32),
                ("XB", xb as u32),
                ("XR", 8u32.div_ceil(sg.max(1))),
                ("SPANS", (wide == 0 && !xb) as u32),
                ("BDOT", (xb && key.format.is_some_and(|ty| format_base(ty).contains("\nfn bdot("))) as u32),
                ("IDOT", int as u32),
                ("RUNS", runs),
                ("RJ", rj),
                ("UN", un),
            ]
        }
        Geometry::CpuAttention { head_dim, lanes, rows, keys, subgroup, kv_f16 } => {
            vec![("HD4", head_dim / 4), ("WG", lanes), ("RQ", rows), ("BK", keys), ("SG", subgroup), ("KV16", kv_f16 as u32)]
        }
        // `//@if KV16` blocks: the f16 cache's bindings, reads and writes.
        Geometry::AttentionDecode { kv_f16, rope, sg, v_cached, combine, quant, prefetch, .. } => {
            let combine = rope && combine;
            vec![
                ("MGROUPS", (merge_groups(key) > 1) as u32),
                ("KV16", kv_f16 as u32),
                ("ROPE", rope as u32),
                ("SG", sg),
                ("VCACHED", (rope && v_cached) as u32),
                ("COMBINE", combine as u32),
                ("QUANT", (combine && quant) as u32),
                ("PREFETCH", prefetch as u32),
            ]
        }
        Geometry::AttentionTiled { head_dim, kv_f16, .. } => vec![("KV16", kv_f16 as u32), ("Q4", (head_dim % 4 == 0) as u32)],
        Geometry::Attention { kv_f16, .. } | Geometry::RopeKv { kv_f16 } => vec![("KV16", kv_f16 as u32)],
        Geometry::NormRows { rows } => vec![("ROWS", rows)],
        Geometry::Combine { quant } => vec![("QUANT", quant as u32)],
        // The remainders: SPLIT (the activations', split >= 1), WLO (the weights', split 2).
        Geometry::Coop(t) => {
            let wv = t.pieces && matches!(key.format, Some(GgmlType::F16 | GgmlType::Q8_0 | GgmlType::Q4_K | GgmlType::Q6_K));
            let is = |ty| (wv && key.format == Some(ty)) as u32;
            vec![
                ("FM", t.sm / 16),
                ("FN", t.sn / 16),
                ("SPLIT", t.split),
                // (F16's remainders are zero: its pieces never write them.)
                ("WLO", (t.split >= 2 && is(GgmlType::F16) == 0) as u32),
                ("XH", 1),
                ("WV", wv as u32),
                ("WP", is(GgmlType::F16)),
                // The quantised pieces (one loop, a decoder per format).
                ("WQ", is(GgmlType::Q8_0) | is(GgmlType::Q4_K) | is(GgmlType::Q6_K)),
                ("WQ8", is(GgmlType::Q8_0)),
                ("WQ4K", is(GgmlType::Q4_K)),
                ("WQ6K", is(GgmlType::Q6_K)),
            ]
        }
        _ => vec![],
    }
}

/// Expands the `//@for v < N` .. `//@end` blocks of a kernel's WGSL (nested ones too): the lines
/// between them repeated for v = 0 .. N - 1 with `$v` replaced by the number; and the
/// `//@if N` (`//@if !N`) .. `//@end` blocks: kept where N is not 0 (is 0). N is a literal or
/// a name of `consts`. WGSL has no way to unroll a loop or to name a register per index, and
/// the CPU implementations' compilers keep unrolled scalars in registers where a private array
/// indexed in a loop would live in memory.
pub fn unroll(src: &str, consts: &[(&str, u32)]) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = String::with_capacity(src.len());
    expand(&lines, &[], consts, &mut out);
    out
}

fn expand(lines: &[&str], vars: &[(String, u32)], consts: &[(&str, u32)], out: &mut String) {
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let t = line.trim();
        if t.starts_with("//@for ") || t.starts_with("//@if ") {
            let value = |name: &str| -> u32 {
                name.parse().ok().or_else(|| consts.iter().find(|c| c.0 == name).map(|c| c.1)).unwrap_or_else(|| panic!("{line}: {name} is not a constant"))
            };
            let (var, n) = if let Some(head) = t.strip_prefix("//@for ") {
                let (var, bound) = head.split_once('<').unwrap_or_else(|| panic!("bad //@for: {line}"));
                (Some(var.trim()), value(bound.trim()))
            } else {
                let cond = t["//@if ".len()..].trim();
                match cond.strip_prefix('!') {
                    Some(c) => (None, (value(c.trim()) == 0) as u32),
                    None => (None, (value(cond) != 0) as u32),
                }
            };
            // The matching //@end.
            let mut depth = 1;
            let mut j = i + 1;
            while depth > 0 {
                let t = lines.get(j).unwrap_or_else(|| panic!("{line} without //@end")).trim();
                depth += (t.starts_with("//@for ") || t.starts_with("//@if ")) as i32 - (t == "//@end") as i32;
                j += 1;
            }
            for v in 0..n {
                let mut vars = vars.to_vec();
                vars.extend(var.map(|var| (format!("${var}"), v)));
                expand(&lines[i + 1..j - 1], &vars, consts, out);
            }
            i = j;
            continue;
        }
        let mut l = line.to_string();
        // Longest names first, so that `$ij` is not taken for `$i` followed by `j`.
        let mut vs = vars.to_vec();
        vs.sort_by_key(|v| std::cmp::Reverse(v.0.len()));
        for (name, v) in &vs {
            l = l.replace(name.as_str(), &v.to_string());
        }
        out.push_str(&l);
        out.push('\n');
        i += 1;
    }
}

/// `src` (a composed kernel) returning at the entry of `main` ([`crate::lab::Hollow`]; `lab`
/// builds only; every
/// kernel but `stream.wgsl`, which measures the device): the rest stays in the module, so that
/// the bindings it declares are still in the derived layout (`tests/shaders.rs` checks both for
/// every variant). (A constant condition: the barriers after it stay in uniform control flow.)
#[cfg(feature = "lab")]
pub fn hollow(src: &str) -> String {
    let entry = src.find("\nfn main(").expect("a composed kernel has a main");
    assert_eq!(src.rfind("\nfn main("), Some(entry), "a composed kernel has one main");
    let open = entry + src[entry..].find('{').expect("main has a body") + 1;
    format!("{}\n  if (true) {{ return; }}{}", &src[..open], &src[open..])
}

/// Compute pipelines, each compiled once, on the first batch that runs it
/// ([`crate::program::Variant`]), then shared.
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
    /// Natively, unless [`crate::gpu::Switches::checked_shaders`] is set, the module is created
    /// without wgpu's injected runtime checks: every loop of these kernels has a bound known
    /// at dispatch, and every index stays inside its array by construction (the tests check the
    /// results on every shape), while buffer accesses stay covered by Vulkan's robust buffer
    /// access, which wgpu enables. The injected loop counters and index clamps otherwise keep
    /// the driver's compiler from unrolling the kernels' inner loops and holding their
    /// per-thread arrays in registers. The browser always compiles its own checked form.
    pub fn pipeline(&mut self, gpu: &Gpu, key: PipelineKey) -> wgpu::ComputePipeline {
        let device = &gpu.device;
        let checked = gpu.switches().checked_shaders;
        self.pipelines
            .entry(key)
            .or_insert_with(|| {
                let label = key.label();
                let src = gpu.wgsl_source(compose(&key));
                #[cfg(feature = "lab")]
                let src = if gpu.lab().hollow.hollows(key.kernel) { hollow(&src) } else { src };
                let desc = wgpu::ShaderModuleDescriptor { label: Some(&label), source: wgpu::ShaderSource::Wgsl(src.into()) };
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
