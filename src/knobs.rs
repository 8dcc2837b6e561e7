//! The laboratory's knobs: every numeric override of a kernel default and every measuring mode,
//! in one table (key, doc, value parser). They exist only in builds with the cargo feature `lab`
//! (`crate::lab`: `bench --set KEY=VALUE`, tests that force a kernel shape): there the table
//! declares `Knobs`, held by each [`crate::Gpu`], and the `--set` parser. In every other build
//! (the browser package, the default CLI) the table declares each key as a constant `None`, so
//! that the policy's value is the only one a kernel choice can see and the compiler folds the
//! override away: `lab!(gpu, KEY)` reads a knob either way.
//!
//! On/off choices a user may need (a driver's bug, an A/B run) are [`crate::gpu::Switches`]
//! instead, in every build; the defaults themselves are [`crate::policy`]'s.

#[cfg(feature = "lab")]
use crate::kernels::{CoopTile, CpuTile, Tile};

/// Declares the knobs: `key: Type = parser;` with the key's doc comments, where `parser` is a
/// `fn(&str) -> Result<Type, String>` of `crate::lab` (named only in `lab` builds), and in
/// `modes` the measuring modes (not `Option`s elsewhere: no constant in other builds).
macro_rules! knobs {
    ({ $($(#[doc = $doc:expr])* $key:ident: $ty:ty = $parse:expr;)* } modes { $($(#[doc = $mdoc:expr])* $mkey:ident: $mty:ty = $mparse:expr;)* }) => {
        /// The knobs set (`None`: the policy's value); see [`crate::knobs`].
        #[cfg(feature = "lab")]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct Knobs {
            $($(#[doc = $doc])* pub $key: Option<$ty>,)*
            $($(#[doc = $mdoc])* pub $mkey: $mty,)*
        }

        /// Every knob's key, its doc and its setter from a `--set` value.
        #[cfg(feature = "lab")]
        pub const TABLE: &[crate::lab::Knob] = &[
            $(crate::lab::Knob {
                key: stringify!($key),
                doc: concat!($($doc, "\n"),*),
                set: |k: &mut Knobs, v: &str| { k.$key = Some(($parse)(v)?); Ok(()) },
                get: |k: &Knobs| k.$key.map(|v| crate::lab::show(&v)),
            },)*
            $(crate::lab::Knob {
                key: stringify!($mkey),
                doc: concat!($($mdoc, "\n"),*),
                set: |k: &mut Knobs, v: &str| { k.$mkey = ($mparse)(v)?; Ok(()) },
                get: |k: &Knobs| Some(k.$mkey).filter(|m| *m != <$mty>::default()).map(|v| crate::lab::show(&v)),
            },)*
        ];

        /// Outside `lab` builds every knob is `None`: the policy's value.
        #[cfg(not(feature = "lab"))]
        #[allow(non_upper_case_globals)]
        pub mod off {
            use crate::kernels::{CoopTile, CpuTile, Tile};

            $($(#[doc = $doc])* pub const $key: Option<$ty> = None;)*
        }
    };
}

knobs! {
    {
    /// The portable matrix-matrix kernel's tile, `BMxBN/TMxTN` (e.g. 64x64/4x4, 64x128/4x8).
    tile: Tile = crate::lab::parse_tile;
    /// Batches of at most this many tokens take the matrix-vector forms (GPUs 8, CPU adapters
    /// with the CPU matmul 1).
    matvec_max_tokens: u32 = crate::lab::parse_u32;
    /// Workgroups below which a linear op takes the small tile (128 for the matrix-unit
    /// matmul's 128 x 128 tiles, else 256).
    min_large_tiles: u32 = crate::lab::parse_u32;
    /// Attention key splits for small batches (default: by context length).
    splits: u32 = crate::lab::parse_splits;
    /// Threads per row of the matrix-vector kernels: a power of two from 1 to 256 (the expert
    /// kernels take 64 at most).
    tpr: u32 = crate::lab::parse_tpr;
    /// Weights a matrix-vector thread decodes at once: a multiple of 4 from 4 to 64.
    span: u32 = crate::lab::parse_span;
    /// Rows per thread of the one-token matrix-vector kernel: 1 to 8.
    rpt: u32 = crate::lab::parse_rows;
    /// Rows per thread of the one-token matrix-vector kernel with SwiGLU fused: 1 to 8.
    rpt_glu: u32 = crate::lab::parse_rows;
    /// Rows per thread of the output head's one-token forms: 1 to 8.
    head_rpt: u32 = crate::lab::parse_rows;
    /// Threads per row of the output head's matrix-vector forms: a power of two from 4 to 256.
    head_tpr: u32 = crate::lab::parse_head_tpr;
    /// Spans (with pieces: 16-byte pieces) a one-token matrix-vector thread loads before using
    /// any: 1 to 8.
    unroll: u32 = crate::lab::parse_rows;
    /// With 16-byte pieces on, the formats that take them: a comma list of GGML type names (e.g.
    /// `q4_k,f16`), kept as a mask of `1 << type id`.
    wide_types: u64 = crate::lab::parse_wide_types;
    /// With pieces on, whether the matrix-vector forms with RMSNorm fused take them too.
    wide_norm: bool = crate::lab::parse_bool;
    /// With the integer form: whether the SwiGLU matvec writes the down projection's integer
    /// activations itself (default: as the `quant_out` switch).
    quant_out_glu: bool = crate::lab::parse_bool;
    /// Threads per row of the matrix-vector kernels that write the next op's integers: a power
    /// of two up to 64, cut to keep a workgroup's 16 rows within 512 threads.
    quant_out_tpr: u32 = crate::lab::parse_quant_out_tpr;
    /// Query heads per workgroup of the one-token attention kernel (a divisor of the GQA group;
    /// another value falls back to the default).
    attn_heads: u32 = crate::lab::parse_u32;
    /// One-token steps over at most this many keys take one query head a workgroup (0: never).
    attn_heads_until: u32 = crate::lab::parse_u32;
    /// Keys a chunk of one-token attention: 64 or 128.
    attn_chunk: u32 = crate::lab::parse_chunk;
    /// One-token attention loads a chunk's first value rows before scoring its keys.
    attn_prefetch: bool = crate::lab::parse_bool;
    /// In the wide one-token attention, each subgroup keeps its own softmax where a value row's
    /// threads fit in one subgroup (default off: not yet timed on a GPU).
    attn_owned: bool = crate::lab::parse_bool;
    /// The CPU matrix-matrix kernel's tile `LANESxROWS/TOKENS` (e.g. 64x3/16).
    cpu_tile: CpuTile = crate::lab::parse_cpu_tile;
    /// The matrix-unit matmul's tile `BMxBN/SPLIT[/SMxSN]` (SPLIT 0: f16 operands; 1: the
    /// activations as two f16 halves; 2: the weights too).
    coop_tile: CoopTile = crate::lab::parse_coop_tile;
    /// The matrix-unit matmul reads Q4_K, Q8_0 and Q6_K weights as 16-byte pieces (off: runs
    /// of 4, as every other format).
    coop_quant_pieces: bool = crate::lab::parse_bool;
    /// Append the matrix-unit matmul's split ops without it (their halves go unread; needs
    /// `SHADER_F16`): tests of the program's op order on devices without matrix units.
    split_without_coop: bool = crate::lab::parse_bool;
    }
    modes {
    /// Measure the step's floor: every kernel returns at entry, over its planned grid (`grids`)
    /// or one workgroup (`one`); or one kernel alone (`only:NAME`) while the others run.
    hollow: crate::lab::Hollow = crate::lab::parse_hollow;
    /// Make a load's Nth GPU buffer (from 1; 0: off) fail as if the device were out of memory
    /// ([`crate::Gpu::storage`]): tests that a failed load names the need and frees what it
    /// uploaded.
    fail_alloc_at: u32 = crate::lab::parse_u32;
    }
}
