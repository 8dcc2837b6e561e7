//! What a pipeline is compiled for: [`PipelineKey`], a kernel with its format and [`Geometry`].

use super::*;

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
        /// Weights a thread decodes at once (a multiple of 4): see `shaders/matvec_rows.wgsl`.
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
        /// [`Format::pieces`]), not in spans (`span` then unused); the kernel then binds the
        /// weights a second time, after the others. Ignored for formats without pieces.
        wide: bool,
        /// With `wide` and one token: the activations as `shaders/quantize.wgsl`'s 24-bit
        /// integers, multiplied by integer dot products ([`MatvecForm::IntDot`], `shaders/matvec_idot.wgsl`; formats
        /// with [`Format::int`]); the kernel then binds them after the weights' second view. With
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
        PipelineKey { kernel, format: Some(format), regroup: group_blocks(format, cols), geometry }
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
                if wide && self.format.is_some_and(|ty| Format::of(ty).pieces.is_some()) {
                    s += " wide";
                }
                if int && self.format.is_some_and(|ty| Format::of(ty).int) {
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
