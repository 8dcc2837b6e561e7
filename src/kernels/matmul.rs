//! The matrix-matrix kernels' tiles: `shaders/matmul.wgsl` (GPUs), `matmul_cpu.wgsl` (CPU
//! adapters) and `matmul_coop.wgsl` (matrix units).

use super::*;

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
    /// 64x64/4x4, 128x128/8x8, 128x64/8x4, 64x128/4x8 and 64x64/8x8 for prefill on a large GPU
    /// (`bench --set tile=...`).
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
    /// the weights' loads shared across a block (`dq4a`), still among the fastest.
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
    /// two f16 halves: 48 KiB of workgroup memory. Each weight step is shared by twice the tokens'
    /// loads and each token step by twice the weight rows of [`CoopTile::COMPACT`]; it takes
    /// [`crate::policy::min_large`] 128, so that wide matrices still run on it.
    /// (Subgroups of 32 x 64 ran even, 64 x 64 slower.)
    pub const DEFAULT: CoopTile = CoopTile { bm: 128, bn: 128, sm: 64, sn: 32, split: 2, pieces: false };

    /// 64 x 128 in 8 subgroups of 32 x 32 (38 KiB): the default where [`CoopTile::DEFAULT`] does
    /// not fit the workgroup memory; at split 2 the fastest of
    /// 64x64, 128x64 and 64x128 in subgroups of 32 x 32.
    pub const COMPACT: CoopTile = CoopTile { bm: 64, bn: 128, sm: 32, sn: 32, split: 2, pieces: false };

    /// The smaller tile a linear op falls back to when this one makes too few workgroups.
    pub const SMALL: CoopTile = CoopTile { bm: 64, bn: 64, sm: 32, sn: 32, split: 2, pieces: false };

    /// This tile for `cols`-wide weights of format `ty`: F16 and BF16 weights are exact in f16
    /// after `hi16` (11 and 8 significant bits), so their remainders (split 2's lo x hi) are
    /// zero and skipped; F16 rows of whole 16-byte pieces take [`CoopTile::pieces`], and with
    /// `quant_pieces` (the `coop_quant_pieces` knob ([`crate::knobs`])) Q8_0 and Q6_K rows regrouped in
    /// groups of 8 blocks, and Q4_K.
    pub fn for_format(self, ty: GgmlType, cols: u32, quant_pieces: bool) -> CoopTile {
        let regrouped = group_blocks(ty, cols) == 8;
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

/// The `//@if` constants of a matrix-unit matmul key: the remainders, SPLIT (the activations',
/// split >= 1) and WLO (the weights', split 2), and how the weights are read.
pub(super) fn coop_consts(key: &PipelineKey, t: CoopTile) -> Vec<(&'static str, u32)> {
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
