//! Linear ops `Y (+)= W X` over a batch of tokens: the one place that picks, per batch, between
//! the matrix-vector kernel (a few tokens: each weight is read once and multiplied into every
//! token, the decode path) and the tiled matrix-matrix kernel (many tokens: prefill). Both read
//! the weights in their GGUF storage format through the format's `dq4s` decoder
//! (`shaders/formats/*.wgsl`) and share one parameter block ([`LinearParams`], `shaders/linear.wgsl`).

use bytemuck::{Pod, Zeroable};

use crate::ggml::GgmlType;
use crate::gpu::Gpu;
use crate::kernels::{default_spans_per_step, matvec_workgroup, CpuTile, Format, Geometry, Kernel, Named, PipelineKey, QuantOut, Tile, QUANT_OUT_ROWS};
use crate::program::{grid, Builder};
use crate::reuse::{Derived, Quantized};
use crate::weights::Matrix;

/// Token vectors per dispatch of the matrix-vector kernel's multi-token form (batches of 2 up to
/// this many tokens; 1 has its own form).
pub const MATVEC_TOKENS: u32 = 8;

/// The forms of a linear op, each a kernel compiled for the op's matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The matrix-vector kernel for one token (with the decode fusions; its integer form,
    /// `matvec_idot.wgsl`, where it applies; [`crate::kernels::MatvecForm`]).
    OneToken,
    /// The matrix-vector kernel for 2 to [`MATVEC_TOKENS`] tokens a dispatch.
    FewTokens,
    /// The matrix-matrix kernel's large tile (`matmul.wgsl` or, with matrix units,
    /// `matmul_coop.wgsl`).
    Tiles,
    /// Its small tile, where the large one leaves a GPU idle (few workgroups).
    SmallTiles,
    /// `matmul_cpu.wgsl`: CPU adapters' longer batches.
    Cpu,
    /// The output head's `matvec.wgsl` for the last token alone (batches that want one row of
    /// logits).
    LastRow,
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Form::OneToken => "one token",
            Form::FewTokens => "few tokens",
            Form::Tiles => "tiles",
            Form::SmallTiles => "small tiles",
            Form::Cpu => "cpu",
            Form::LastRow => "last row",
        })
    }
}

/// `struct Linear` of `shaders/linear.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct LinearParams {
    /// Rows of this part of W.
    pub rows: u32,
    /// Columns (the input width).
    pub cols: u32,
    /// Floats between consecutive tokens' inputs in X.
    pub x_stride: u32,
    /// Floats between consecutive tokens' outputs in Y.
    pub y_stride: u32,
    /// Where in a token's output row this part's first row goes.
    pub y0: u32,
    /// 1: add to Y (the residual stream); 0: overwrite; [`AT_POSITION`]: overwrite token i's
    /// output at row `pos0 + i` of Y (the KV cache's row of the token, [`Fuse::cache_row`]);
    /// [`AT_POSITION16`]: the same as f16 values.
    pub accumulate: u32,
    /// 1: only the batch's last token (read from X row n - 1, written to Y row 0).
    pub last_only: u32,
    /// RMSNorm epsilon of the fused norm ([`Fuse::norm`]).
    pub eps: f32,
    /// Multiplies `W x` before it is stored or added (`store` in `shaders/linear.wgsl`).
    pub scale: f32,
    /// 1: the fused GLU ([`Fuse::glu`]) is GEGLU ([`Fuse::gelu`]), 0: SwiGLU.
    pub gelu: u32,
    /// Padding to 16 bytes.
    pub pad: [u32; 2],
}

/// [`LinearParams::accumulate`]: write token i's output row at Y row `pos0 + i`.
pub const AT_POSITION: u32 = 2;

/// [`LinearParams::accumulate`]: [`AT_POSITION`] into an f16 Y (the f16 KV cache), two rows a
/// 4-byte word: only the one-token matrix-vector form, whose threads then write their rows in
/// pairs (where [`writes_f16_rows`]).
pub const AT_POSITION16: u32 = 3;

/// Where a linear op reads and writes.
#[derive(Clone, Copy)]
pub struct Io<'a> {
    /// Input activations `[tokens][x_stride]`.
    pub x: &'a wgpu::Buffer,
    /// See [`LinearParams::x_stride`].
    pub x_stride: u32,
    /// Output `[tokens][y_stride]`.
    pub y: &'a wgpu::Buffer,
    /// See [`LinearParams::y_stride`].
    pub y_stride: u32,
    /// First output column of the matrix's row 0 (fused projections write side by side).
    pub y0: u32,
    /// Add to Y instead of overwriting it.
    pub accumulate: bool,
    /// Multiplies the product before it is written or added ([`LinearParams::scale`]): Granite's
    /// residual and logit multipliers; 1 elsewhere.
    pub scale: f32,
}

/// Threads per row (TPR) of the matrix-vector kernel for rows of `cols` weights of format `ty`
/// (`rows`: see [`expert_threads_per_row`]); a workgroup then holds
/// [`crate::kernels::matvec_workgroup`] / TPR row groups.
///
/// * On a GPU, [`crate::policy::MAX_THREADS_PER_ROW`] (fewer when the row has fewer spans,
///   [`span`], or 16-byte pieces, [`wide`]; at least 4): the threads of a row read side by side
///   (`shaders/matvec_rows.wgsl`), and more threads keep more loads in flight.
/// * On a CPU implementation ([`Gpu::is_cpu`]: lavapipe, SwiftShader), 1: each invocation takes
///   a whole row, so the SIMD lanes of a workgroup read the same `X` elements in step and no
///   reduction is needed; with subgroups each lane loads a part of them and broadcasts it to the
///   others (`shaders/matvec_broadcast.wgsl`: these compilers load even a shared address once per
///   lane).
///
/// the `tpr` knob ([`crate::knobs`]) overrides both.
pub fn threads_per_row(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32) -> u32 {
    threads_per_row_of(gpu, ty, rows, cols, wide(gpu, ty, cols))
}

/// [`threads_per_row`] for a kernel that does (`wide`) or does not read 16-byte pieces.
fn threads_per_row_of(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32, wide: bool) -> u32 {
    if let Some(t) = lab!(gpu, tpr) {
        return t;
    }
    if gpu.is_cpu() {
        return expert_threads_per_row(gpu, ty, rows, cols);
    }
    // A thread's unit along the row: a 16-byte piece ([`wide`]) or a span.
    let unit = match Format::of(ty).pieces {
        Some(p) if wide => p.weights,
        _ => span(gpu, ty),
    };
    (cols / unit).max(1).next_power_of_two().clamp(4, crate::policy::MAX_THREADS_PER_ROW)
}

/// Threads per row of the one-token integer form ([`int_dot`]) where the f32 form takes `tpr`:
/// at most [`crate::policy::INT_THREADS_PER_ROW`] for pieces of 32 weights (the K-quants),
/// unless the `tpr` knob ([`crate::knobs`]) says. Q8_0's pieces (16 weights) keep theirs.
fn int_threads_per_row(gpu: &Gpu, ty: GgmlType, tpr: u32) -> u32 {
    match Format::of(ty).pieces {
        Some(p) if p.weights >= 32 && lab!(gpu, tpr).is_none() => tpr.min(crate::policy::INT_THREADS_PER_ROW),
        _ => tpr,
    }
}

/// Weights a matrix-vector thread decodes at once for format `ty` (a multiple of 4; see
/// `shaders/matvec_rows.wgsl`): the device class's [`crate::policy::Defaults::span_k_quants`]
/// for Q4_K, Q5_K and Q6_K, its [`crate::policy::Defaults::span`] for the others; the `span`
/// knob ([`crate::knobs`]) overrides. Longer spans spread a load instruction's addresses; within
/// one of the format's scale groups they share the scale decoding (`dq4s`).
pub fn span(gpu: &Gpu, ty: GgmlType) -> u32 {
    let class = crate::policy::class(gpu);
    let k_quant = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K);
    lab!(gpu, span).unwrap_or(if k_quant { class.span_k_quants } else { class.span })
}

/// Spans a one-token matrix-vector thread loads before it uses any (`UN` in
/// `shaders/matvec_rows.wgsl`; the multi-token form keeps the default): enough for 16 weights
/// (`16 / span`, at least 1); the `unroll` knob ([`crate::knobs`]) overrides. More
/// holds more decoded vectors per thread, and the registers they take cost more than the
/// loads they put in flight.
pub fn spans_per_step(gpu: &Gpu, span: u32) -> u32 {
    lab!(gpu, unroll).unwrap_or(default_spans_per_step(span))
}

/// [`spans_per_step`], or with 16-byte pieces ([`wide`]) the pieces per step: 1 unless
/// the `unroll` knob ([`crate::knobs`]) says otherwise (2 was slower everywhere measured).
fn spans_or_pieces_per_step(gpu: &Gpu, span: u32, wide: bool) -> u32 {
    if wide {
        lab!(gpu, unroll).unwrap_or(1)
    } else {
        spans_per_step(gpu, span)
    }
}

/// Whether the matrix-vector kernel reads a `[rows][cols]` matrix of format `ty` as 16-byte
/// pieces (`WIDE` in `shaders/matvec_rows.wgsl`, always in `matvec_idot.wgsl`): where the format has them
/// ([`crate::kernels::Format::pieces`]: Q4_K, F16, and Q8_0 and Q6_K as regrouped at load,
/// [`crate::repack`]) and every row starts on a 16-byte boundary (Q8_0: rows of 256k weights,
/// Q6_K: 2048k); on
/// GPUs, off on CPU adapters (a whole row per invocation there), unless
/// [`crate::gpu::Switches::wide`] says otherwise. A warp's load is then contiguous bytes, where
/// the spans take 4-byte loads (and Q4_K's threads each read a word twice).
///
/// The pieces are vector loads from the start of the part's buffer: every matrix part is a
/// buffer of its own, bound whole (`weights.rs`), so a row at a multiple of 16 bytes is aligned.
/// A sub-allocated part would have to keep its offset a multiple of 16.
pub fn wide(gpu: &Gpu, ty: GgmlType, cols: u32) -> bool {
    let fits = Format::of(ty).pieces.is_some() && (cols as u64 / ty.block_size() * ty.block_bytes()) % 16 == 0;
    let chosen = lab!(gpu, wide_types).is_none_or(|m| m & (1 << ty as u64) != 0);
    fits && chosen && gpu.switches().wide.unwrap_or(!gpu.is_cpu())
}

/// Whether a matrix-vector kernel with RMSNorm fused ([`Fuse::norm`]) reads its weights as
/// pieces where [`wide`] says so: yes unless the `wide_norm` knob ([`crate::knobs`]) says otherwise.
/// On GPUs Q8_0's regrouped rows read in spans are slower than the file's layout in spans, so
/// Q8_0 wants pieces everywhere there; on CPU adapters, which read spans, the regrouped rows
/// decode as fast as the file's.
pub fn wide_with_norm(gpu: &Gpu) -> bool {
    lab!(gpu, wide_norm).unwrap_or(true)
}

/// Whether the one-token matrix-vector form of a `[rows][cols]` matrix of format `ty` reads its
/// activations as 24-bit integers and multiplies by integer dot products
/// (`shaders/matvec_idot.wgsl`, after `shaders/quantize.wgsl`; [`crate::quantize`]): where the format
/// has the integer form ([`crate::kernels::Format::int`]: Q4_K, Q8_0, Q6_K), its pieces are read
/// ([`wide`]) and [`crate::gpu::Switches::int_dot`] is on (natively on Vulkan by default).
pub fn int_dot(gpu: &Gpu, ty: GgmlType, cols: u32) -> bool {
    Format::of(ty).int && wide(gpu, ty, cols) && crate::policy::int_dot(gpu)
}

/// [`wide`] for a matrix-vector form with (`norm`) or without RMSNorm fused.
fn wide_fused(gpu: &Gpu, ty: GgmlType, cols: u32, norm: bool) -> bool {
    wide(gpu, ty, cols) && (!norm || wide_with_norm(gpu))
}

/// Rows per thread of the one-token matrix-vector form (the multi-token form takes 1: its
/// accumulators would outgrow workgroup memory): the device class's
/// [`crate::policy::Defaults::rows_per_thread`] ([`crate::policy::Defaults::rows_per_thread_f16`]
/// for F16 weights), or in SwiftShader without the activations broadcast across a subgroup
/// (`shaders/matvec_broadcast.wgsl` needs subgroups of 4 or more)
/// [`crate::policy::SWIFTSHADER_UNSHARED_ROWS_PER_THREAD`]; the `rpt` knob ([`crate::knobs`])
/// overrides (the SwiGLU matvec's: the `rpt_glu` knob).
pub fn rows_per_thread(gpu: &Gpu, ty: GgmlType) -> u32 {
    let broadcast = crate::kernels::broadcasts(gpu.reduce_subgroup());
    let class = crate::policy::class(gpu);
    let default = if gpu.is_cpu() && gpu.is_swiftshader() && !broadcast {
        crate::policy::SWIFTSHADER_UNSHARED_ROWS_PER_THREAD
    } else if ty == GgmlType::F16 {
        class.rows_per_thread_f16
    } else {
        class.rows_per_thread
    };
    lab!(gpu, rpt).unwrap_or(default)
}

/// Threads per row of the output head's one-token integer form, where the others' take `tpr`:
/// at most half the row's pieces, so that a thread takes two or more of each row (the head
/// is one dispatch of 128k rows; with one piece a thread, a row's threads wait on one load
/// each and then spend as long adding their sums). A head whose default already gives each
/// thread two or more pieces of a row keeps it.
fn head_int_threads_per_row(gpu: &Gpu, ty: GgmlType, cols: u32, tpr: u32) -> u32 {
    match Format::of(ty).pieces {
        Some(p) if lab!(gpu, tpr).is_none() => tpr.min(1 << (cols / p.weights / 2).max(1).ilog2()),
        _ => tpr,
    }
}

/// Whether the one-token matrix-vector form of `w` can write its rows into an f16 cache
/// ([`AT_POSITION16`], [`Fuse::cache_row`]): a thread's rows go in pairs, a word each, so rows
/// per thread are even and each part of the matrix (cut to fit a binding) has an even number
/// of rows from an even row.
pub fn writes_f16_rows(gpu: &Gpu, w: &Matrix) -> bool {
    rows_per_thread(gpu, w.ty) % 2 == 0 && w.parts.iter().all(|p| p.rows % 2 == 0 && p.row_start % 2 == 0)
}

/// Rows per thread of the output head's one-token forms: [`rows_per_thread`] unless
/// the `head_rpt` knob ([`crate::knobs`]) says (its threads per row: the `head_tpr` knob ([`crate::knobs`])).
pub fn head_rows_per_thread(gpu: &Gpu, ty: GgmlType) -> u32 {
    lab!(gpu, head_rpt).unwrap_or(rows_per_thread(gpu, ty))
}

/// Output rows per workgroup of the matrix-vector kernel with `tpr` threads per row and `rpt`
/// rows per thread (a workgroup is [`matvec_workgroup`] threads).
fn matvec_rows_per_workgroup(tpr: u32, rpt: u32, sg: u32, qout: QuantOut) -> u32 {
    matvec_workgroup(tpr, rpt, sg, qout) / tpr * rpt
}

/// Whether the one-token integer-form matvecs that write the residual stream (the output and
/// down projections; `glu`: gate/up with SwiGLU, the down projection's input) also write the
/// next linear op's integer activations ([`Fuse::quant_out`]), so that it needs no quantize
/// dispatch: [`crate::gpu::Switches::quant_out`] and `quant_out_glu`, on by default: a quantize
/// dispatch is a dependent launch of little work, and the writers' workgroups of 16 rows
/// cost less than it at every width measured.
pub fn quant_out(gpu: &Gpu, glu: bool) -> bool {
    let plain = gpu.switches().quant_out.unwrap_or(true);
    if glu {
        lab!(gpu, quant_out_glu).unwrap_or(plain)
    } else {
        plain
    }
}

/// The most threads a workgroup of the matrix-vector kernel with [`QuantOut`] takes: its
/// threads per row are cut to fit (16 rows of 64 threads and 2 rows per thread: 512).
const QUANT_OUT_THREADS: u32 = 512;

/// The most tokens a batch may have to run the linear ops' matrix-vector forms (see
/// [`Builder::linear`]), and so the fusions of [`Fuse`].
pub fn matvec_tokens(gpu: &Gpu) -> u32 {
    matvec_max_tokens(gpu).min(MATVEC_TOKENS)
}

/// Batches of at most this many tokens take the linear ops' matrix-vector forms, larger ones the
/// matrix-matrix kernel: 8 on GPUs, 1 on CPU adapters with the CPU matmul in force
/// (the `matvec_max_tokens` knob ([`crate::knobs`]) overrides). On a CPU the multi-token matvec's accumulators for 8 tokens cost more than the
/// CPU matmul's tiles.
pub fn matvec_max_tokens(gpu: &Gpu) -> u32 {
    let class = crate::policy::class(gpu).matvec_max_tokens;
    lab!(gpu, matvec_max_tokens).unwrap_or(if crate::policy::cpu_tile(gpu).is_some() { class } else { crate::policy::GPU.matvec_max_tokens })
}

/// Work a linear op's matrix-vector forms take over from the ops around it when
/// [`crate::policy::fused`] (the matrix-matrix forms read [`Io::x`] as usual).
#[derive(Clone, Copy, Default)]
pub struct Fuse<'a> {
    /// RMSNorm of the input: `(raw, weights, eps)`: the matrix-vector forms read the raw rows
    /// (`[tokens][x_stride]`, the residual stream) and normalise them on the fly; the caller
    /// skips its `rmsnorm` op for matrix-vector batches ([`matvec_tokens`]).
    pub norm: Option<(&'a wgpu::Buffer, &'a wgpu::Buffer, f32)>,
    /// SwiGLU: the matrix is `[gate; up]` (one part); the matrix-vector forms write
    /// `silu(gate . x) * (up . x)` into the gate half of the output and leave the up half alone.
    pub glu: bool,
    /// With `glu`, GELU (tanh form) instead of SiLU: GEGLU (Gemma; `shaders/activation.wgsl`).
    pub gelu: bool,
    /// The linear op after this one reads its output in the integer form ([`Builder::int_form`];
    /// with `norm`, through that RMSNorm): where this op's one-token form is the integer one too
    /// (one part, output rows a multiple of 16 written from column 0), it writes them as well,
    /// 16 rows a workgroup (`QOUT` in `shaders/matvec_idot.wgsl`), so that the next op needs no
    /// quantize dispatch ([`Fused::out`] hands them on).
    pub quant_out: Option<QuantNext<'a>>,
    /// `(cache, stride, f16)`: the one-token matrix-vector form writes the token's output row
    /// into `cache` (`[ctx][stride]` f32, or f16 with `f16`, where [`writes_f16_rows`]; the
    /// op's rows from column 0) at the token's position instead of into [`Io::y`]: the value
    /// projection writing the token's value straight into the V cache. Its dispatch then writes no buffer used before in the step's pass (the cache is
    /// first touched there) and reads none the op before it wrote, so wgpu (30) records no
    /// barrier before it and the GPU can run it alongside the q/k projection instead of after
    /// it. It cannot where an op comes between them (a quantize op for an integer-form v after
    /// a q/k projection without it) or for a second part of a split matrix; the results are the
    /// same either way. Not with `glu`, `accumulate` or `quant_out`; unlike the other fields it
    /// does not depend on [`crate::policy::fused`].
    pub cache_row: Option<(&'a wgpu::Buffer, u32, bool)>,
}

/// The linear op after this one ([`Fuse::quant_out`]).
#[derive(Clone, Copy, Default)]
pub struct QuantNext<'a> {
    /// The RMSNorm weights it reads its input through ([`Fuse::norm`]), if any.
    pub norm: Option<&'a wgpu::Buffer>,
}

/// What a linear op's matrix-vector forms took ([`Builder::linear_fused`]).
#[derive(Clone, Debug)]
pub struct Fused {
    /// RMSNorm fused in ([`Fuse::norm`]; with `int`, done by the quantize op, or after a linear
    /// op that wrote the integers, [`Fuse::quant_out`], by this one's kernel, `INORM`).
    pub norm: bool,
    /// SwiGLU fused in ([`Fuse::glu`]).
    pub glu: bool,
    /// The one-token form is the integer one ([`int_dot`]).
    pub int: bool,
    /// Its output row's integer form, where it writes it ([`Fuse::quant_out`]): for the forward
    /// plan to hand to the op that reads it.
    pub out: Option<Quantized>,
}

/// Threads per row of the expert kernels (`matvec_exp`, `moe_down`: each thread takes runs of
/// CHUNK weights) over `rows` rows (all picks together) of `cols` weights of format `ty`: on a
/// GPU the fewest threads per row, from 64 (or the row's chunks rounded up to a power of two,
/// if fewer) down to 4, that still give about 128k threads in all (enough to fill a large GPU);
/// 1 on a CPU implementation; the `tpr` knob ([`crate::knobs`]) overrides both.
pub fn expert_threads_per_row(gpu: &Gpu, ty: GgmlType, rows: u32, cols: u32) -> u32 {
    if let Some(t) = lab!(gpu, tpr) {
        return t.min(64);
    }
    if gpu.is_cpu() {
        return 1;
    }
    const THREADS: u64 = 128 * 1024;
    let chunks = (cols / Format::of(ty).chunk).max(1);
    let mut t = chunks.next_power_of_two().clamp(4, 64);
    while t > 4 && rows as u64 * (t as u64 / 2) >= THREADS {
        t /= 2;
    }
    t
}

impl Builder<'_> {
    /// `Y (+)= W X` over every token of a batch, one op per part of `W`: the matrix-vector
    /// kernel for batches of up to [`matvec_max_tokens`] tokens, the tiled
    /// matrix-matrix kernel beyond (on CPU adapters its CPU form, [`crate::policy::cpu_tile`];
    /// on devices with cooperative matrices the matrix-unit form, [`crate::gpu::Switches::coop`]).
    pub fn linear(&mut self, w: &Matrix, io: Io<'_>) {
        self.linear_fused(w, io, Fuse::default(), &mut Derived::default());
    }

    /// Whether one-token batches of a linear op on `w` take the integer matrix-vector form
    /// ([`int_dot`]), reading [`Builder::quantized`] activations.
    pub fn int_form(&self, w: &Matrix) -> bool {
        matvec_max_tokens(self.gpu) >= 1 && int_dot(self.gpu, w.ty, w.cols)
    }

    /// [`Builder::linear`] with the decode fusions `fuse` where [`crate::policy::fused`]
    /// allows them (SwiGLU needs `W` in one part). `input`: what the ops before on the same
    /// input derived from it, which this op reuses where it is of its input, and to which it
    /// adds what it derives itself, for the next op on that input. Returns which fusions the
    /// matrix-vector forms took.
    pub fn linear_fused(&mut self, w: &Matrix, io: Io<'_>, fuse: Fuse<'_>, input: &mut Derived) -> Fused {
        self.linear_op(w, io, fuse, input, false)
    }

    /// [`Builder::linear_fused`]; `head`: the output head's, which for batches that want only the
    /// last token's logits runs its own last-row form ([`Form::LastRow`]).
    fn linear_op(&mut self, w: &Matrix, io: Io<'_>, fuse: Fuse<'_>, input: &mut Derived, head: bool) -> Fused {
        let mv_max = matvec_max_tokens(self.gpu);
        let coop = crate::policy::coop(self.gpu);
        let min_large = crate::policy::min_large(self.gpu);
        let sg = self.gpu.cpu_subgroup();
        let fused = crate::policy::fused(self.gpu);
        let norm = fuse.norm.filter(|_| fused);
        let glu = fuse.glu && fused && w.parts.len() == 1;
        // Subgroups must tile the workgroup.
        let cpu_tile =
            crate::policy::cpu_tile(self.gpu).filter(|_| self.gpu.is_cpu()).map(|t| CpuTile { subgroup: if t.lanes % sg.max(1) == 0 { sg } else { 0 }, ..t });
        // The matrix-matrix kernel's large tile and, where it is larger, the small one (the
        // portable tile; with matrix units, 64 x 64 at the same precision).
        let (large, small) = if coop {
            let t = crate::policy::coop_tile(self.gpu).for_format(w.ty, w.cols, lab!(self.gpu, coop_quant_pieces).unwrap_or(crate::policy::COOP_QUANT_PIECES));
            let s = crate::kernels::CoopTile { split: t.split, pieces: t.pieces, ..crate::kernels::CoopTile::SMALL };
            (Geometry::Coop(t), (s.bm * s.bn < t.bm * t.bn).then_some(Geometry::Coop(s)))
        } else {
            let t = crate::policy::tile(self.gpu);
            (Geometry::Tile(t), (t != Tile::PORTABLE).then_some(Geometry::Tile(Tile::PORTABLE)))
        };
        let mm = if coop { Kernel::MatmulCoop } else { Kernel::Matmul };
        let (span, sg) = (span(self.gpu, w.ty), self.gpu.reduce_subgroup());
        let rpt = match (glu, head) {
            (true, _) => lab!(self.gpu, rpt_glu).unwrap_or(rows_per_thread(self.gpu, w.ty)),
            (_, true) => head_rows_per_thread(self.gpu, w.ty),
            _ => rows_per_thread(self.gpu, w.ty),
        };
        let wide = wide_fused(self.gpu, w.ty, w.cols, norm.is_some());
        let un = spans_or_pieces_per_step(self.gpu, span, wide);
        let un_multi = if wide { 1 } else { default_spans_per_step(span) };
        // The one-token form's integer activations (the norm done by the quantize op, or with
        // INORM by this kernel).
        let int = self.int_form(w).then(|| match norm {
            Some((raw, nw, eps)) => self.quantized(input.quant.as_ref(), raw, io.x_stride, w.cols, Some((nw, eps))),
            None => self.quantized(input.quant.as_ref(), io.x, io.x_stride, w.cols, None),
        });
        let inorm = norm.is_some() && int.as_ref().is_some_and(|q| q.inorm);
        // The matrix-unit matmul reads its activations as f16 halves, split once for the input.
        let matmul_batch = move |n: u32| !(n == 1 && mv_max >= 1) && n > mv_max.min(MATVEC_TOKENS);
        let split_ops = coop || lab!(self.gpu, split_without_coop).unwrap_or(false);
        let halves = split_ops
            .then(|| self.halves(input.halves.as_ref(), io.x, io.x_stride, w.cols, head, move |b| matmul_batch(b.n_tokens) && (!head || b.all_logits)));
        // Its output row in the integer form too, for the next op: one part, whole halves from
        // the row's start (the integers' half index and the sums' region count from column 0),
        // and the device's limits (the weights' second view, the integers in and out, the norm's
        // weights: up to 9 storage buffers; a workgroup of up to QUANT_OUT_THREADS threads and
        // its partial sums, `part`, `part_up` and `part_ss` in matvec.wgsl).
        let limits = self.gpu.limits();
        let out_rows = if glu { w.rows / 2 } else { w.rows };
        let shared = QUANT_OUT_THREADS * (rpt * (1 + glu as u32) + 1) * 4 + QUANT_OUT_ROWS * 4;
        let qout = fuse.quant_out.filter(|n| {
            let storage = 8 + n.norm.is_some() as u32;
            int.is_some()
                && w.parts.len() == 1
                && out_rows % QUANT_OUT_ROWS == 0
                && io.y0 == 0
                && QUANT_OUT_ROWS % rpt == 0
                && limits.max_storage_buffers_per_shader_stage >= storage
                && limits.max_compute_invocations_per_workgroup.min(limits.max_compute_workgroup_size_x) >= QUANT_OUT_THREADS
                && limits.max_compute_workgroup_storage_size >= shared
        });
        let qout_bufs = qout.map(|n| (self.quant_buffers((out_rows / QUANT_OUT_ROWS) as u64, int.as_ref().map(|q| &q.q)), n.norm));
        let qout_kind = match qout {
            None => QuantOut::Off,
            Some(QuantNext { norm: None }) => QuantOut::Plain,
            Some(_) => QuantOut::Norm,
        };
        for part in &w.parts {
            let tpr = threads_per_row_of(self.gpu, w.ty, part.rows, w.cols, wide);
            let tpr_int = int_threads_per_row(self.gpu, w.ty, tpr);
            let (tpr, tpr_int) = match lab!(self.gpu, head_tpr).filter(|_| head) {
                Some(t) => (t, t),
                None if head => (tpr, head_int_threads_per_row(self.gpu, w.ty, w.cols, tpr_int)),
                None => (tpr, tpr_int),
            };
            let params = LinearParams {
                rows: part.rows,
                cols: w.cols,
                x_stride: io.x_stride,
                y_stride: io.y_stride,
                y0: io.y0 + part.row_start,
                accumulate: io.accumulate as u32,
                last_only: 0,
                eps: norm.map_or(0.0, |n| n.2),
                scale: io.scale,
                gelu: fuse.gelu as u32,
                pad: [0; 2],
            };
            let p = self.uniform("linear", &params);
            let step = self.step.clone();
            let bufs = [("p", &p), ("st", &step), ("W", &part.buffer), ("X", io.x), ("Y", io.y)];
            // The matrix-unit form: the halves for X, and with a split the remainders (XL).
            let mm_bufs: Vec<Named<'_>> = match &halves {
                Some(h) if coop => vec![("p", &p), ("st", &step), ("W", &part.buffer), ("X", &h.hi), ("Y", io.y), ("XL", &h.lo)],
                _ => bufs.to_vec(),
            };
            // The matrix-vector forms: their own rows (GLU: half) and input (norm: raw + weights),
            // and the weights again as vec4s (W4: the WIDE form's).
            let mv_rows = if glu { part.rows / 2 } else { part.rows };
            let mv_p = if glu { self.uniform("linear glu", &LinearParams { rows: mv_rows, ..params }) } else { p.clone() };
            let mv_x = norm.map_or(io.x, |n| n.0);
            let nw: Option<Named<'_>> = norm.map(|n| ("NW", n.1));
            let mv_bufs: Vec<Named<'_>> =
                [("p", &mv_p), ("st", &step), ("W", &part.buffer), ("X", mv_x), ("Y", io.y), ("W4", &part.buffer)].into_iter().chain(nw).collect();
            // The one-token form's output: Y, or the cache's row of the token (Fuse::cache_row).
            assert!(
                fuse.cache_row.is_none() || !(glu || io.accumulate || qout.is_some()),
                "Fuse::cache_row cannot be combined with SwiGLU, accumulate or quant_out"
            );
            let half = matches!(fuse.cache_row, Some((_, _, true)));
            assert!(!half || writes_f16_rows(self.gpu, w), "Fuse::cache_row into an f16 cache: see linear::writes_f16_rows");
            let cache = fuse.cache_row.map(|(cache, stride, f16)| {
                let accumulate = if f16 { AT_POSITION16 } else { AT_POSITION };
                let at = LinearParams { y_stride: stride, y0: part.row_start, accumulate, ..params };
                (self.uniform("linear cache row", &at), cache)
            });
            let (one_p, one_y) = cache.as_ref().map_or((&mv_p, io.y), |(p, cache)| (p, *cache));
            let one_bufs: Vec<Named<'_>> =
                [("p", one_p), ("st", &step), ("W", &part.buffer), ("X", mv_x), ("Y", one_y), ("W4", &part.buffer)].into_iter().chain(nw).collect();
            // The multi-token form keeps 64 threads per row at most (its sums per thread would
            // outgrow workgroup memory in a larger workgroup).
            let rows_geometry = |tpr, tokens, rpt, un, half| Geometry::Rows {
                tpr,
                tokens,
                rpt,
                span,
                un,
                norm: norm.is_some(),
                glu,
                sg,
                wide,
                int: false,
                qout: QuantOut::Off,
                half,
            };
            // With QOUT, 16 rows a workgroup of at most QUANT_OUT_THREADS threads.
            let tpr_int = match qout {
                Some(_) => lab!(self.gpu, quant_out_tpr).unwrap_or(tpr_int).min(QUANT_OUT_THREADS / (QUANT_OUT_ROWS / rpt)),
                None => tpr_int,
            };
            let one = match &int {
                Some(Quantized { q: xq, s: xs, .. }) => {
                    let g = Geometry::Rows { tpr: tpr_int, tokens: 1, rpt, span, un, norm: inorm, glu, sg, wide: true, int: true, qout: qout_kind, half };
                    // QOUT's integers out (XQW, XSW) and with QNORM the next norm's weights.
                    let out = qout_bufs.iter().flat_map(|((oq, os), nw)| [("XQW", oq), ("XSW", os)].into_iter().chain(nw.map(|nw| ("NWQ", nw))));
                    let b = [("p", one_p), ("st", &step), ("W", &part.buffer), ("X", io.x), ("Y", one_y), ("W4", &part.buffer), ("XQ", xq), ("XS", xs)];
                    let b: Vec<Named<'_>> = b.into_iter().chain(out).collect();
                    self.variant(PipelineKey::weights(Kernel::Matvec, w.ty, w.cols, g), &b)
                }
                None => self.variant(PipelineKey::weights(Kernel::Matvec, w.ty, w.cols, rows_geometry(tpr, 1, rpt, un, half)), &one_bufs),
            };
            let mut variants = vec![
                (Form::OneToken, one),
                (
                    Form::FewTokens,
                    self.variant(PipelineKey::weights(Kernel::Matvec, w.ty, w.cols, rows_geometry(tpr.min(64), MATVEC_TOKENS, 1, un_multi, false)), &mv_bufs),
                ),
            ];
            // Longer batches: on CPU adapters the CPU matmul alone (the GPU
            // tiles would never run, and each would cost a CPU adapter's compiler a long compile);
            // elsewhere the large tile, and the small one where a
            // large tile leaves a GPU idle (few workgroups: a narrow matrix, a short batch).
            match cpu_tile {
                Some(t) => variants.push((Form::Cpu, self.variant(PipelineKey::weights(Kernel::MatmulCpu, w.ty, w.cols, Geometry::CpuTile(t)), &bufs))),
                None => {
                    variants.push((Form::Tiles, self.variant(PipelineKey::weights(mm, w.ty, w.cols, large), &mm_bufs)));
                    if let Some(g) = small {
                        variants.push((Form::SmallTiles, self.variant(PipelineKey::weights(mm, w.ty, w.cols, g), &mm_bufs)));
                    }
                }
            }
            // The output head's last-row form: batches that want one row of logits compute it
            // alone, through the fused norm (the integer form's one-token batches keep it: its
            // quantize op already read the last row).
            let last_row = head.then(|| {
                let p = self.uniform("head", &LinearParams { last_only: 1, ..params });
                let b: Vec<Named<'_>> =
                    [("p", &p), ("st", &step), ("W", &part.buffer), ("X", mv_x), ("Y", io.y), ("W4", &part.buffer)].into_iter().chain(nw).collect();
                variants.push((Form::LastRow, self.variant(PipelineKey::weights(Kernel::Matvec, w.ty, w.cols, rows_geometry(tpr, 1, rpt, un, false)), &b)));
                grid(part.rows.div_ceil(matvec_rows_per_workgroup(tpr, rpt, sg, QuantOut::Off)))
            });
            let (large, small) = (large.tile_size(), small.map(|g| g.tile_size()));
            let one_tpr = if int.is_some() { tpr_int } else { tpr };
            let (rows, per_wg, per_wg_multi) =
                (part.rows, matvec_rows_per_workgroup(one_tpr, rpt, sg, qout_kind), matvec_rows_per_workgroup(tpr.min(64), 1, sg, QuantOut::Off));
            let int_one = int.is_some() && mv_max >= 1;
            self.op_forms(variants, move |b| {
                if let Some(g) = last_row.filter(|_| !(b.all_logits || int_one && b.n_tokens == 1)) {
                    return Some((Form::LastRow, g));
                }
                Some(match b.n_tokens {
                    1 if mv_max >= 1 => (Form::OneToken, grid(mv_rows.div_ceil(per_wg))),
                    n if n <= mv_max.min(MATVEC_TOKENS) => (Form::FewTokens, grid(mv_rows.div_ceil(per_wg_multi))),
                    n => match (cpu_tile, small) {
                        (Some(t), _) => (Form::Cpu, [rows.div_ceil(t.bm()), n.div_ceil(t.tokens), 1]),
                        (None, Some(s)) if rows.div_ceil(large.0) * n.div_ceil(large.1) < min_large => {
                            (Form::SmallTiles, [rows.div_ceil(s.0), n.div_ceil(s.1), 1])
                        }
                        _ => (Form::Tiles, [rows.div_ceil(large.0), n.div_ceil(large.1), 1]),
                    },
                })
            });
            let (wbytes, io) = (part.buffer.size(), (w.cols + (1 + io.accumulate as u32) * part.rows) as u64 * 4);
            let last = wbytes + (w.cols + part.rows) as u64 * 4;
            self.traffic(move |b| if head && !b.all_logits { last } else { wbytes + b.n_tokens as u64 * io });
            if head {
                self.tag("head");
            }
        }
        let out = qout_bufs.map(|(bufs, nw)| crate::quantize::written_by_op(bufs, io.y, io.y_stride, out_rows, nw));
        let fused = Fused { norm: norm.is_some(), glu, int: int.is_some(), out };
        input.quant = int.or(input.quant.take());
        input.halves = halves.or(input.halves.take());
        fused
    }

    /// The output head `logits = W x` (`io.y`: `[rows][vocab]`): for the batch's last token only
    /// (into logits row 0), or with [`crate::program::Batch::all_logits`] for every token (as
    /// [`Builder::linear`]); `norm` as [`Fuse::norm`] (`io.x` is then the normalised rows the
    /// matrix-matrix forms read); `input` as [`Builder::linear_fused`]'s. Returns whether the norm
    /// was fused in.
    pub fn head(&mut self, w: &Matrix, io: Io<'_>, norm: Option<(&wgpu::Buffer, &wgpu::Buffer, f32)>, input: &mut Derived) -> bool {
        self.linear_op(w, io, Fuse { norm, ..Default::default() }, input, true).norm
    }
}
