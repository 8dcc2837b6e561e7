//! The GGML formats the weight kernels read (`shaders/formats/`): one table, [`FORMATS`], and the
//! rows' layout after the load's regrouping ([`group_blocks`]).

use crate::ggml::GgmlType;

/// 16-byte pieces of a format (`shaders/formats/common.wgsl`): the matrix-vector kernel's `WIDE`
/// form reads them, one vector load each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pieces {
    /// Weights per piece (`PIECE`).
    pub weights: u32,
    /// Runs of consecutive weights per piece (`RUNS`); `matvec.wgsl` unrolls runs of whole vec4s.
    pub runs: u32,
}

/// How the weight kernels read one GGML format: the constants the composer writes before
/// `shaders/formats/common.wgsl` (the interface is described there), and which of the optional
/// forms the format's file defines.
#[derive(Clone, Copy, Debug)]
pub struct Format {
    /// The GGML type (its block's weights and bytes: [`GgmlType::block_size`],
    /// [`GgmlType::block_bytes`]).
    pub ty: GgmlType,
    /// `shaders/formats/<type>.wgsl`.
    pub source: &'static str,
    /// Weights that share a scale or other decoding work such as word loads (`GROUP`: a power of
    /// two; 4 where nothing is shared, `dq4s` then taking `cb + o` as one column).
    pub group: u32,
    /// Weights a matrix-vector thread takes per step (`CHUNK`: a block, or the span over which a
    /// block's bytes and scales are shared, so that one step loads each byte once).
    pub chunk: u32,
    /// Its 16-byte pieces (the part of its file after `//@pieces`), if it has them.
    pub pieces: Option<Pieces>,
    /// Whether its pieces have the integer form (`pint`, `pab`; runs of 16 weights): the
    /// matrix-vector kernel's integer form ([`super::MatvecForm::IntDot`]).
    pub int: bool,
    /// Whether it defines its own `dq4a` (a block's words loaded once per 32-column step;
    /// `DQ4A`: `formats/common.wgsl` then composes the general one out).
    pub dq4a: bool,
    /// Whether it defines `bdot`, a block's dot product with its scale applied once (`BDOT`: the
    /// matrix-vector kernel's CPU form takes it).
    pub bdot: bool,
}

const fn format(ty: GgmlType, source: &'static str, group: u32, chunk: u32) -> Format {
    Format { ty, source, group, chunk, pieces: None, int: false, dq4a: false, bdot: false }
}

/// Q4_0, Q4_1, Q5_0 and Q5_1: nothing shared within a span (GROUP 4), but a block's words
/// within a 32-column step (`dq4a`) and its scale within a block's dot product (`bdot`).
const fn block32(f: Format) -> Format {
    Format { dq4a: true, bdot: true, ..f }
}

const fn pieces(f: Format, weights: u32, runs: u32) -> Format {
    Format { pieces: Some(Pieces { weights, runs }), ..f }
}

/// Every format the weight kernels read, in [`GgmlType::ALL`]'s order.
pub const FORMATS: [Format; 13] = {
    use GgmlType::*;
    [
        format(F32, include_str!("../../shaders/formats/f32.wgsl"), 4, 16),
        pieces(format(F16, include_str!("../../shaders/formats/f16.wgsl"), 64, 16), 8, 1),
        format(BF16, include_str!("../../shaders/formats/bf16.wgsl"), 64, 16),
        block32(format(Q4_0, include_str!("../../shaders/formats/q4_0.wgsl"), 4, 32)),
        block32(format(Q4_1, include_str!("../../shaders/formats/q4_1.wgsl"), 4, 32)),
        block32(format(Q5_0, include_str!("../../shaders/formats/q5_0.wgsl"), 4, 32)),
        block32(format(Q5_1, include_str!("../../shaders/formats/q5_1.wgsl"), 4, 32)),
        Format { int: true, bdot: true, ..pieces(format(Q8_0, include_str!("../../shaders/formats/q8_0.wgsl"), 32, 32), 16, 1) },
        format(Q2_K, include_str!("../../shaders/formats/q2_k.wgsl"), 4, 128),
        format(Q3_K, include_str!("../../shaders/formats/q3_k.wgsl"), 4, 128),
        Format { int: true, ..pieces(format(Q4_K, include_str!("../../shaders/formats/q4_k.wgsl"), 32, 64), 32, 2) },
        format(Q5_K, include_str!("../../shaders/formats/q5_k.wgsl"), 32, 64),
        Format { int: true, ..pieces(format(Q6_K, include_str!("../../shaders/formats/q6_k.wgsl"), 16, 128), 32, 2) },
    ]
};

impl Format {
    /// The entry of `ty`.
    pub fn of(ty: GgmlType) -> &'static Format {
        let f = FORMATS.iter().find(|f| f.ty == ty).expect("every GGML type has a format entry");
        debug_assert!(f.pieces.is_none_or(|p| p.runs > 0 && p.weights % (4 * p.runs) == 0), "{ty:?}: PIECE must be a multiple of 4 x RUNS");
        debug_assert!(!f.int || f.pieces.is_some_and(|p| p.weights / p.runs == 16), "{ty:?}: the integer form needs pieces of runs of 16");
        f
    }

    /// The part of its file that every form composes: all of it before `//@pieces` (the
    /// 16-byte pieces, composed only where they are read).
    pub fn base(&self) -> &'static str {
        self.source.split("\n//@pieces\n").next().unwrap_or_default()
    }

    /// The WGSL constants of its table entry (composed before `formats/common.wgsl`; with
    /// `pieces`, `PIECE` and `RUNS` too).
    pub(super) fn consts(&self, pieces: bool) -> String {
        let mut s = format!(
            "const BLOCK_ELEMS: u32 = {}u;\nconst BLOCK_BYTES: u32 = {}u;\nconst GROUP: u32 = {}u;\nconst CHUNK: u32 = {}u;\n",
            self.ty.block_size(),
            self.ty.block_bytes(),
            self.group,
            self.chunk
        );
        if let Some(p) = self.pieces.filter(|_| pieces) {
            s += &format!("const PIECE: u32 = {}u;\nconst RUNS: u32 = {}u;\n", p.weights, p.runs);
        }
        s
    }
}

/// Blocks per regrouped group in rows of `cols` weights of type `ty`: 8 for Q8_0 rows of 256k
/// weights and Q6_K rows of 2048k (16-byte pieces), 2 for other Q8_0 rows of 64k (word-aligned
/// weights), 0 where rows keep the file's layout. `shaders/formats/q8_0.wgsl` and `q6_k.wgsl`
/// read the layout from `REGROUP`, this count, a constant of the kernel
/// ([`crate::kernels::PipelineKey::regroup`]).
pub fn group_blocks(ty: GgmlType, cols: u32) -> u32 {
    match ty {
        GgmlType::Q8_0 if cols % 256 == 0 => 8,
        GgmlType::Q8_0 if cols % 64 == 0 => 2,
        GgmlType::Q6_K if cols % 2048 == 0 => 8,
        _ => 0,
    }
}
