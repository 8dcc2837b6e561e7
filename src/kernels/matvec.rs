//! The matrix-vector kernel: its forms ([`MatvecForm`], a WGSL file each after the shared
//! `shaders/matvec.wgsl`, composed through `shaders/linear.wgsl`), their workgroup shapes and the
//! constants of each form's variations (span or 16-byte pieces, the decode fusions). Which form
//! and shape an op takes is [`crate::linear`]'s, by the defaults of [`crate::policy`].

use super::*;

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

/// The matrix-vector kernel's algorithms, one WGSL file each (after `shaders/matvec.wgsl`, the
/// helpers and bindings they share; their `main`s begin and end with the fragments
/// [`FRAGMENTS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatvecForm {
    /// GPUs (`shaders/matvec_rows.wgsl`): a row's `tpr` threads side by side over its spans or
    /// 16-byte pieces, their partial sums added by subgroup shuffles and in workgroup memory.
    /// (CPU adapters without subgroups of 4 lanes take it too, a row group per invocation.)
    Rows,
    /// GPUs, one token (`shaders/matvec_idot.wgsl`): the rows' 16-byte pieces against the
    /// activations as 24-bit integers (`shaders/quantize.wgsl`), by integer dot products.
    IntDot,
    /// CPU adapters (`shaders/matvec_broadcast.wgsl`): a row group per invocation, the
    /// activations loaded across a subgroup's lanes and broadcast to all of them.
    Broadcast,
}

impl MatvecForm {
    /// The form a matrix-vector key composes: [`MatvecForm::IntDot`] where it asks for the
    /// integer form and its format has it (with pieces), [`MatvecForm::Broadcast`] for a row
    /// group per invocation over spans of 32 with subgroups that [`broadcasts`], else
    /// [`MatvecForm::Rows`].
    pub fn of(key: &PipelineKey) -> MatvecForm {
        let Geometry::Rows { tpr, span, un, sg, wide, int, .. } = key.geometry else { unreachable!("a matrix-vector key") };
        let format = key.format.map(Format::of);
        let pieces = wide && format.is_some_and(|f| f.pieces.is_some());
        if int && pieces && format.is_some_and(|f| f.int) {
            MatvecForm::IntDot
        } else if tpr == 1 && span == 32 && un == 1 && broadcasts(sg) && !pieces {
            MatvecForm::Broadcast
        } else {
            MatvecForm::Rows
        }
    }

    /// The form's WGSL file.
    pub fn source(self) -> &'static str {
        match self {
            MatvecForm::Rows => include_str!("../../shaders/matvec_rows.wgsl"),
            MatvecForm::IntDot => include_str!("../../shaders/matvec_idot.wgsl"),
            MatvecForm::Broadcast => include_str!("../../shaders/matvec_broadcast.wgsl"),
        }
    }
}

impl std::fmt::Display for MatvecForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MatvecForm::Rows => "rows",
            MatvecForm::IntDot => "idot",
            MatvecForm::Broadcast => "broadcast",
        })
    }
}

/// The fragments the forms' `main`s share, by the name a `//@include NAME` line gives
/// ([`crate::kernels::compose`]): the row group and its accumulators, a step's 16-byte pieces
/// (the WIDE loops of the rows and integer forms), and the leftover weights with the row's sums
/// joined and written.
pub const FRAGMENTS: [(&str, &str); 3] = [
    ("matvec_begin", include_str!("../../shaders/matvec_begin.wgsl")),
    ("matvec_pieces", include_str!("../../shaders/matvec_pieces.wgsl")),
    ("matvec_end", include_str!("../../shaders/matvec_end.wgsl")),
];

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

/// Threads per workgroup of the matrix-vector kernel (`shaders/matvec.wgsl`; the expert kernels
/// take `max(64, tpr)`): `max(64, tpr)`; with a whole row per thread (CPU adapters' form,
/// [`crate::linear::threads_per_row`]), one subgroup of `sg` lanes (16 threads without
/// subgroups of 4 or more: the form that shares loads across a subgroup needs them), where a workgroup is one CPU thread's task: more, smaller tasks keep the cores
/// busy on narrow matrices, and a workgroup of one subgroup needs no workgroup memory. With
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
/// activations' loads across subgroups of `sg` lanes ([`MatvecForm::Broadcast`]): with 4 or
/// more lanes (so that a 32-column step's 8 vec4s take at most 2 loads a lane). The defaults
/// that suit that form ([`matvec_workgroup`], [`crate::linear::rows_per_thread`],
/// [`crate::policy::fused`]) ask here too.
pub fn broadcasts(sg: u32) -> bool {
    sg >= 4
}

/// The `//@if` and `//@for` constants of a matrix-vector key ([`Geometry::Rows`]) for its
/// [`MatvecForm`].
pub(super) fn consts(key: &PipelineKey) -> Vec<(&'static str, u32)> {
    let Geometry::Rows { tpr, tokens, rpt, span, un, norm, glu, sg, qout, half, .. } = key.geometry else { unreachable!("a matrix-vector key") };
    let form = MatvecForm::of(key);
    // WIDE: the format's runs per piece and vec4s per run (the integer form always; the rows
    // form where the key asks and the format has pieces).
    let pieces = key.format.and_then(|ty| Format::of(ty).pieces).filter(|_| matches!(key.geometry, Geometry::Rows { wide: true, .. }));
    let (wide, runs, rj) = match pieces {
        Some(p) => (1, p.runs, p.weights / p.runs / 4),
        None => (0, 0, 0),
    };
    let int = form == MatvecForm::IntDot;
    assert!(!int || tokens == 1, "the integer matrix-vector form takes one token");
    // (QOUT only with the integer form: formats without it compose the plain f32 form.)
    let (qout, qnorm) = (int && qout != QuantOut::Off, int && qout == QuantOut::Norm);
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
        ("XR", 8u32.div_ceil(sg.max(1))),
        ("BDOT", (form == MatvecForm::Broadcast && key.format.is_some_and(|ty| Format::of(ty).bdot)) as u32),
        ("RUNS", runs),
        ("RJ", rj),
        ("UN", un),
    ]
}
