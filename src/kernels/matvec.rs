//! The matrix-vector kernel (`shaders/matvec.wgsl`, through `shaders/linear.wgsl`): its
//! workgroup shapes and the constants of its forms (span or 16-byte pieces, integer dot
//! products, a CPU adapter's row a thread). Which form an op takes is [`crate::linear`]'s.

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
/// activations' loads across subgroups of `sg` lanes (`XB` in `shaders/matvec.wgsl`): with 4 or
/// more lanes (so that a 32-column step's 8 vec4s take at most 2 loads a lane). The defaults
/// that suit that form ([`matvec_workgroup`], [`crate::linear::rows_per_thread`],
/// [`crate::policy::fused`]) ask here too.
pub fn broadcasts(sg: u32) -> bool {
    sg >= 4
}

/// The `//@if` and `//@for` constants of a matrix-vector key ([`Geometry::Rows`]).
pub(super) fn consts(key: &PipelineKey) -> Vec<(&'static str, u32)> {
    let Geometry::Rows { tpr, tokens, rpt, span, un, norm, glu, sg, wide, int, qout, half } = key.geometry else { unreachable!("a matrix-vector key") };
    // WIDE: the format's runs per piece and vec4s per run.
    // (Formats without pieces compose the span form.)
    let (wide, runs, rj) = match (wide, key.format.and_then(|ty| Format::of(ty).pieces)) {
        (true, Some(p)) => (1, p.runs, p.weights / p.runs / 4),
        _ => (0, 0, 0),
    };
    let int = int && wide == 1 && key.format.is_some_and(|ty| Format::of(ty).int);
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
        ("BDOT", (xb && key.format.is_some_and(|ty| Format::of(ty).bdot)) as u32),
        ("IDOT", int as u32),
        ("RUNS", runs),
        ("RJ", rj),
        ("UN", un),
    ]
}
