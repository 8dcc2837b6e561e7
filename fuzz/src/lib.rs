//! What the fuzz targets share: a source that serves a header as the head of a larger file, the
//! input decoding (a raw header, or a GGUF built from an `arbitrary` model description with
//! structural mutations: [`build`]), and the invariants every accepted input must satisfy.
//!
//! Input layout: byte 0 picks the mode. Even: bytes 1..9 are the [`knobs`], the rest a GGUF (a
//! real model's header from `scripts/fuzz-corpus.py`) served by [`HeaderOnly`]. Odd: the rest
//! drives [`build::Spec`] through `arbitrary`.

use arbitrary::{Arbitrary, Unstructured};
use webgpu_llama::gguf::ByteSource;
use webgpu_llama::plan::{widest_row, Layout, LoadPlan, PlanOptions};
use webgpu_llama::{Config, Error, Gguf, KvType, Result};

pub mod build;

/// Bytes a [`HeaderOnly`] source claims beyond its real ones: room for the tensor data of a
/// multi-GiB model, so real headers place their tensors and reach the config and the plan.
pub const VIRTUAL_TAIL: u64 = 1 << 36;

/// The input as the head of a file of `input.len() + VIRTUAL_TAIL` bytes, as the browser's
/// streamed header is (`web::source::Planned`): reads that start inside the input succeed, the
/// part past its end read as zeros (the parser's read-ahead window); reads that start past its
/// end fail with [`Error::Truncated`]. So a length field can claim up to the whole virtual file,
/// and the parser's memory must still stay bounded by the bytes it actually reads.
pub struct HeaderOnly<'a> {
    bytes: &'a [u8],
}

impl<'a> HeaderOnly<'a> {
    /// Serves `bytes` as the head of a larger file.
    pub fn new(bytes: &'a [u8]) -> Self {
        HeaderOnly { bytes }
    }

    /// The file length it claims.
    pub fn file_len(&self) -> u64 {
        self.bytes.len() as u64 + VIRTUAL_TAIL
    }
}

impl ByteSource for HeaderOnly<'_> {
    fn len(&self) -> u64 {
        self.file_len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let have = self.bytes.len() as u64;
        if offset >= have || offset + buf.len() as u64 > self.file_len() {
            return Err(Error::Truncated { what: "read past the header".into(), at: offset, need: buf.len() as u64, len: have });
        }
        let n = ((have - offset) as usize).min(buf.len());
        buf[..n].copy_from_slice(&self.bytes[offset as usize..offset as usize + n]);
        buf[n..].fill(0);
        Ok(())
    }
}

/// The load's numbers besides the file, from 8 input bytes: selectors for the context, the
/// binding limit, the KV type and the batch, then a u32 that the "any value" selectors take.
pub fn knobs(b: [u8; 8]) -> PlanOptions {
    let any = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let ctx = match b[0] % 5 {
        0 => None,
        1 => Some(1),
        2 => Some(2048),
        3 => Some(any),
        _ => Some(any % 65536),
    };
    let max_binding = match b[1] % 8 {
        0 => 128 << 20,
        1 => 256 << 20,
        2 => (2u64 << 30) - 4,
        3 => 4 << 30,
        4 => 64 << 10,
        5 => 4 << 10,
        6 => 16,
        _ => any as u64,
    };
    let kv = if b[2] % 2 == 0 { KvType::F32 } else { KvType::F16 };
    let batch = match b[3] % 4 {
        0 => None,
        1 => Some(1),
        2 => Some(512),
        _ => Some(any),
    };
    PlanOptions { ctx, batch, kv, max_binding }
}

/// A decoded input: a GGUF (whole, or a header standing for a larger file) and the knobs.
pub struct Input {
    /// The GGUF bytes.
    pub bytes: Vec<u8>,
    /// Whether `bytes` is only the head of the file ([`HeaderOnly`]).
    pub header_only: bool,
    /// The load's numbers ([`knobs`]).
    pub knobs: PlanOptions,
}

impl Input {
    /// Decodes `data` (see the crate docs); `None` when it is too short or the description
    /// builds nothing.
    pub fn decode(data: &[u8]) -> Option<Input> {
        let (&mode, rest) = data.split_first()?;
        if mode % 2 == 0 {
            let knobs = knobs(rest.get(..8)?.try_into().ok()?);
            return Some(Input { bytes: rest[8..].to_vec(), header_only: true, knobs });
        }
        let spec = build::Spec::arbitrary_take_rest(Unstructured::new(rest)).ok()?;
        let knobs = knobs(spec.knobs);
        Some(Input { bytes: build::build(&spec)?, header_only: false, knobs })
    }

    /// Parses the GGUF, checking the parser's invariants on success.
    pub fn parse(&self) -> Option<Gguf> {
        let (g, len) = if self.header_only {
            let src = HeaderOnly::new(&self.bytes);
            (Gguf::parse(&src).ok()?, src.file_len())
        } else {
            (Gguf::parse(self.bytes.as_slice()).ok()?, self.bytes.len() as u64)
        };
        check_gguf(&g, len);
        Some(g)
    }
}

/// What [`Gguf::parse`] promises of a header it accepts.
pub fn check_gguf(g: &Gguf, file_len: u64) {
    assert!(g.version == 2 || g.version == 3);
    assert!(g.alignment.is_power_of_two());
    assert_eq!(g.file_len, file_len);
    assert!(g.data_offset % g.alignment == 0 && g.data_offset <= file_len.max(g.data_offset));
    let mut keys: Vec<&str> = g.metadata.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    assert!(keys.windows(2).all(|w| w[0] != w[1]), "duplicate metadata key accepted");
    for (_, v) in &g.metadata {
        let _ = v.to_string();
    }
    let mut names: Vec<&str> = g.tensors.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert!(names.windows(2).all(|w| w[0] != w[1]), "duplicate tensor name accepted");
    let mut ranges = Vec::with_capacity(g.tensors.len());
    for t in &g.tensors {
        assert!((1..=4).contains(&t.dims.len()) && t.dims.iter().all(|&d| d > 0), "{}: dims {:?}", t.name, t.dims);
        assert_eq!(t.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)), Some(t.n_elements));
        assert_eq!(t.ggml_type.tensor_bytes(t.n_elements), Some(t.n_bytes));
        assert!(t.offset >= g.data_offset && (t.offset - g.data_offset) % g.alignment == 0);
        assert!(t.offset.checked_add(t.n_bytes).is_some_and(|e| e <= file_len), "{} outside the file", t.name);
        ranges.push((t.offset, t.offset + t.n_bytes));
    }
    ranges.sort_unstable();
    assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "overlapping tensors accepted");
}

/// Dims without trailing 1s.
fn trimmed(dims: &[u64]) -> &[u64] {
    let n = dims.iter().rposition(|&x| x != 1).map_or(1, |i| i + 1);
    &dims[..n.min(dims.len())]
}

/// What [`Config::from_gguf`] promises of a config it accepts.
pub fn check_config(g: &Gguf, cfg: &Config) {
    assert!(cfg.d > 0 && cfg.n_layers > 0 && cfg.n_heads > 0 && cfg.n_kv_heads > 0 && cfg.vocab > 0 && cfg.ff > 0 && cfg.ctx > 0);
    assert!(cfg.n_heads % cfg.n_kv_heads == 0);
    assert!(cfg.head_dim > 0 && cfg.head_dim % 2 == 0 && cfg.n_rot % 2 == 0 && cfg.n_rot <= cfg.head_dim);
    assert!(cfg.eps > 0.0 && cfg.theta > 0.0 && cfg.rope_scale > 0.0);
    assert!(cfg.experts <= 256 && cfg.topk <= 16 && cfg.topk <= cfg.experts);
    // Widths the engine computes in u32 must not overflow (a debug build would panic here).
    let _ = cfg.q_dim() + 2 * cfg.kv_dim();
    let _ = widest_row(cfg);
    for (name, dims) in cfg.expected_tensors() {
        let t = g.tensor(&name).unwrap_or_else(|| panic!("accepted config without {name}"));
        assert_eq!(trimmed(&t.dims), trimmed(&dims), "{name}: accepted dims {:?}, config implies {dims:?}", t.dims);
    }
}

/// Bytes of the buffer holding `bytes` stored bytes (a spare word, a multiple of 16).
fn padded(bytes: u64) -> u64 {
    (bytes + 4).next_multiple_of(16)
}

/// What [`LoadPlan::new`] promises of a plan it accepts: every buffer fits the binding limit and
/// the parts cover their tensor exactly.
pub fn check_plan(g: &Gguf, plan: &LoadPlan, opts: PlanOptions) {
    check_config(g, &plan.config);
    let limit = opts.max_binding;
    assert!(plan.kv_bytes <= limit);
    assert!(plan.batch >= 1 && plan.batch <= plan.config.ctx);
    for t in &plan.tensors {
        match t.layout {
            Layout::Vector { bytes } => assert!(bytes <= limit || t.name == "rope_freqs.weight"),
            Layout::Matrix { rows, row_bytes, rows_per_part, parts, .. } => {
                assert!(rows_per_part >= 1 && padded(rows_per_part as u64 * row_bytes) <= limit, "{}", t.name);
                assert!(parts as u64 * rows_per_part as u64 >= rows as u64 && ((parts - 1) as u64) * (rows_per_part as u64) < rows as u64);
                assert!(rows as u64 * row_bytes == t.file_bytes, "{}: rows x row bytes != its bytes in the file", t.name);
            }
            Layout::Experts { experts, rows, row_bytes, experts_per_part, parts, .. } => {
                assert!(experts_per_part >= 1 && padded(experts_per_part as u64 * rows as u64 * row_bytes) <= limit, "{}", t.name);
                assert!(parts as u64 * experts_per_part as u64 >= experts as u64 && ((parts - 1) as u64) * (experts_per_part as u64) < experts as u64);
                assert!(experts as u64 * rows as u64 * row_bytes == t.file_bytes, "{}", t.name);
            }
        }
    }
    let _ = plan.weight_buffer_bytes();
}
