//! Structure-aware inputs: a small LLaMA GGUF built from an `arbitrary` description, then mutated
//! where the format is fragile. The description picks the shape (width, layers, heads, head dim,
//! FFN, vocab, experts), the weight type, the version and the alignment; edits metadata (any key
//! of the config to any value type, arrays, nesting); edits tensors (dims swapped, changed, added
//! or dropped, type ids, renames, duplicates, drops); and finally patches recorded structural
//! fields in the written bytes (counts, string and array lengths, value and tensor type ids,
//! n_dims, dims, offsets) to edge values.

use arbitrary::Arbitrary;
use webgpu_llama::ggml::GgmlType;

/// Most bytes of tensor data a built file may hold (keeps executions fast).
const MAX_DATA: u64 = 1 << 20;

/// A model description (see the module docs).
#[derive(Arbitrary, Debug)]
pub struct Spec {
    /// The load's numbers ([`crate::knobs`]).
    pub knobs: [u8; 8],
    version: u8,
    align_log2: u8,
    d: u8,
    layers: u8,
    heads: u8,
    kv_heads: u8,
    head_dim: Option<u8>,
    n_rot: Option<u8>,
    ff: u8,
    vocab: u8,
    experts: u8,
    topk: u8,
    tied: bool,
    rope_freqs: bool,
    vocab_key: bool,
    wtype: u8,
    metas: Vec<(u8, Val)>,
    tensors: Vec<(u8, Tweak)>,
    patches: Vec<(u16, Patch)>,
}

/// A metadata value to set (or `Remove` the key).
#[derive(Arbitrary, Debug)]
enum Val {
    /// A scalar of value type `ty % 13` (a string or array id gives a u8) from the low bytes of
    /// `bits` (a bool may be any byte).
    Scalar(u8, u64),
    Str(String),
    ArrU32(Vec<u32>),
    ArrStr(Vec<String>),
    /// Arrays nested this many levels (mod 12) around a u8.
    Nested(u8),
    Remove,
}

/// A change to one tensor info.
#[derive(Arbitrary, Debug)]
enum Tweak {
    Swap(u8, u8),
    Dim(u8, u64),
    PushDim(u64),
    PopDim,
    Type(u32),
    Drop,
    Rename(String),
    Duplicate,
}

/// A new value for a structural field.
#[derive(Arbitrary, Debug)]
enum Patch {
    Zero,
    One,
    Max32,
    Max64,
    Pow2(u8),
    Add(i8),
    Double,
    Raw(u64),
}

/// The metadata keys the config reads (the targets of `Spec::metas`).
const KEYS: [&str; 21] = [
    "general.architecture",
    "general.alignment",
    "llama.embedding_length",
    "llama.block_count",
    "llama.feed_forward_length",
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.attention.key_length",
    "llama.attention.value_length",
    "llama.rope.dimension_count",
    "llama.attention.layer_norm_rms_epsilon",
    "llama.rope.freq_base",
    "llama.context_length",
    "llama.vocab_size",
    "tokenizer.ggml.tokens",
    "llama.expert_count",
    "llama.expert_used_count",
    "llama.expert_feed_forward_length",
    "llama.rope.scaling.type",
    "llama.rope.scaling.factor",
    "",
];

const WEIGHT_TYPES: [GgmlType; 8] =
    [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::BF16, GgmlType::Q5_1];

/// A metadata value as written: type id and bytes.
enum Meta {
    Scalar(u32, Vec<u8>),
    Str(String),
    Array(u32, Vec<Meta>),
}

impl Meta {
    fn type_id(&self) -> u32 {
        match self {
            Meta::Scalar(t, _) => *t,
            Meta::Str(_) => 8,
            Meta::Array(..) => 9,
        }
    }

    fn u32(x: u32) -> Meta {
        Meta::Scalar(4, x.to_le_bytes().to_vec())
    }
}

fn meta_of(v: &Val) -> Option<Meta> {
    /// Bytes of each scalar value type (0 for string and array).
    const SIZES: [usize; 13] = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
    Some(match v {
        Val::Scalar(ty, bits) => {
            let ty = match *ty as u32 % 13 {
                8 | 9 => 0,
                t => t,
            };
            Meta::Scalar(ty, bits.to_le_bytes()[..SIZES[ty as usize]].to_vec())
        }
        Val::Str(s) => Meta::Str(s.clone()),
        Val::ArrU32(a) => Meta::Array(4, a.iter().map(|&x| Meta::u32(x)).collect()),
        Val::ArrStr(a) => Meta::Array(8, a.iter().map(|s| Meta::Str(s.clone())).collect()),
        Val::Nested(n) => (0..n % 12).fold(Meta::Scalar(0, vec![1]), |m, _| Meta::Array(m.type_id(), vec![m])),
        Val::Remove => return None,
    })
}

/// One tensor info as written.
struct Info {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
}

/// The GGUF bytes being written, with the position and width of every structural field.
struct Writer {
    buf: Vec<u8>,
    fields: Vec<(usize, usize)>,
}

impl Writer {
    fn field(&mut self, v: u64, width: usize) {
        self.fields.push((self.buf.len(), width));
        self.buf.extend_from_slice(&v.to_le_bytes()[..width]);
    }

    fn string(&mut self, s: &str) {
        self.field(s.len() as u64, 8);
        self.buf.extend_from_slice(s.as_bytes());
    }

    fn value(&mut self, m: &Meta) {
        match m {
            Meta::Scalar(_, b) => self.buf.extend_from_slice(b),
            Meta::Str(s) => self.string(s),
            Meta::Array(t, items) => {
                self.field(*t as u64, 4);
                self.field(items.len() as u64, 8);
                items.iter().for_each(|x| self.value(x));
            }
        }
    }

    fn patch(&mut self, which: u16, p: &Patch) {
        if self.fields.is_empty() {
            return;
        }
        let (at, width) = self.fields[which as usize % self.fields.len()];
        let mut cur = [0u8; 8];
        cur[..width].copy_from_slice(&self.buf[at..at + width]);
        let cur = u64::from_le_bytes(cur);
        let max = if width == 4 { u32::MAX as u64 } else { u64::MAX };
        let v = match p {
            Patch::Zero => 0,
            Patch::One => 1,
            Patch::Max32 => u32::MAX as u64,
            Patch::Max64 => u64::MAX,
            Patch::Pow2(k) => 1u64 << (k % 64),
            Patch::Add(d) => cur.wrapping_add(*d as i64 as u64),
            Patch::Double => cur.wrapping_mul(2),
            Patch::Raw(x) => *x,
        } & max;
        self.buf[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
    }
}

/// The metadata of the description's base model, in file order.
fn base_metadata(s: &Spec, shape: &Shape) -> Vec<(String, Meta)> {
    let mut m: Vec<(String, Meta)> = vec![
        ("general.architecture".into(), Meta::Str("llama".into())),
        ("llama.embedding_length".into(), Meta::u32(shape.d)),
        ("llama.block_count".into(), Meta::u32(shape.layers)),
        ("llama.attention.head_count".into(), Meta::u32(shape.heads)),
        ("llama.attention.head_count_kv".into(), Meta::u32(shape.kv_heads)),
        ("llama.attention.layer_norm_rms_epsilon".into(), Meta::Scalar(6, 1e-5f32.to_le_bytes().to_vec())),
        ("llama.context_length".into(), Meta::u32(64)),
    ];
    if shape.experts > 0 {
        m.push(("llama.expert_count".into(), Meta::u32(shape.experts)));
        m.push(("llama.expert_used_count".into(), Meta::u32(shape.topk)));
        m.push(("llama.expert_feed_forward_length".into(), Meta::u32(shape.ff)));
    } else {
        m.push(("llama.feed_forward_length".into(), Meta::u32(shape.ff)));
    }
    if let Some(h) = s.head_dim {
        m.push(("llama.attention.key_length".into(), Meta::u32(shape.head_dim)));
        m.push(("llama.attention.value_length".into(), Meta::u32(if h % 7 == 0 { h as u32 } else { shape.head_dim })));
    }
    if let Some(r) = s.n_rot {
        m.push(("llama.rope.dimension_count".into(), Meta::u32(r as u32 % (shape.head_dim + 2))));
    }
    if s.vocab_key {
        m.push(("llama.vocab_size".into(), Meta::u32(shape.vocab)));
    } else {
        let tokens = (0..shape.vocab).map(|i| Meta::Str(format!("t{i}"))).collect();
        m.push(("tokenizer.ggml.tokens".into(), Meta::Array(8, tokens)));
    }
    m
}

/// The shape the description stands for (small, so tensor data stays small).
struct Shape {
    d: u32,
    layers: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    ff: u32,
    vocab: u32,
    experts: u32,
    topk: u32,
}

impl Shape {
    fn of(s: &Spec) -> Shape {
        const WIDTHS: [u32; 8] = [2, 4, 8, 16, 32, 64, 128, 256];
        let d = WIDTHS[s.d as usize % 8];
        let heads: u32 = 1 << (s.heads % 4);
        let kv_heads = heads >> (s.kv_heads % 3).min(heads.trailing_zeros() as u8);
        let head_dim = s.head_dim.map_or(d / heads.min(d), |h| 2 * (1 + h as u32 % 32));
        let experts = [0, 0, 1, 2, 4, 8][s.experts as usize % 6];
        Shape {
            d,
            layers: 1 + s.layers as u32 % 3,
            heads,
            kv_heads,
            head_dim,
            ff: 1 + s.ff as u32 % 64,
            vocab: 1 + s.vocab as u32 % 64,
            experts,
            topk: 1 + s.topk as u32 % 3,
        }
    }

    /// The tensors the engine reads, dims in ggml order, with their types.
    fn tensors(&self, s: &Spec) -> Vec<Info> {
        let (d, q, kv, ff, e, v) = (
            self.d as u64,
            (self.heads * self.head_dim) as u64,
            (self.kv_heads * self.head_dim) as u64,
            self.ff as u64,
            self.experts as u64,
            self.vocab as u64,
        );
        let wt = WEIGHT_TYPES[s.wtype as usize % WEIGHT_TYPES.len()];
        let info = |name: String, dims: Vec<u64>| {
            let ty = if dims.len() > 1 && dims[0] % wt.block_size() == 0 { wt } else { GgmlType::F32 };
            Info { name, dims, type_id: ty as u32 }
        };
        let mut t = vec![info("token_embd.weight".into(), vec![d, v]), info("output_norm.weight".into(), vec![d])];
        if !s.tied {
            t.push(info("output.weight".into(), vec![d, v]));
        }
        if s.rope_freqs {
            t.push(info("rope_freqs.weight".into(), vec![(self.head_dim as u64 / 2).max(1)]));
        }
        for l in 0..self.layers {
            let b = |x: &str| format!("blk.{l}.{x}.weight");
            t.push(info(b("attn_norm"), vec![d]));
            t.push(info(b("attn_q"), vec![d, q]));
            t.push(info(b("attn_k"), vec![d, kv]));
            t.push(info(b("attn_v"), vec![d, kv]));
            t.push(info(b("attn_output"), vec![q, d]));
            t.push(info(b("ffn_norm"), vec![d]));
            if e > 0 {
                t.push(info(b("ffn_gate_inp"), vec![d, e]));
                t.push(info(b("ffn_gate_exps"), vec![d, ff, e]));
                t.push(info(b("ffn_up_exps"), vec![d, ff, e]));
                t.push(info(b("ffn_down_exps"), vec![ff, d, e]));
            } else {
                t.push(info(b("ffn_gate"), vec![d, ff]));
                t.push(info(b("ffn_up"), vec![d, ff]));
                t.push(info(b("ffn_down"), vec![ff, d]));
            }
        }
        t
    }
}

fn apply_meta(m: &mut Vec<(String, Meta)>, key_index: u8, v: &Val) {
    let key = match v {
        Val::Str(s) if key_index as usize >= KEYS.len() => s.clone(),
        _ => KEYS[key_index as usize % KEYS.len()].to_string(),
    };
    match meta_of(v) {
        Some(meta) => match m.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) if key_index % 5 != 4 => slot.1 = meta,
            _ => m.push((key, meta)),
        },
        None => m.retain(|(k, _)| *k != key),
    }
}

fn apply_tweak(t: &mut Vec<Info>, index: u8, tw: &Tweak) {
    if t.is_empty() {
        return;
    }
    let i = index as usize % t.len();
    let dims = &mut t[i].dims;
    if dims.is_empty() && matches!(tw, Tweak::Swap(..) | Tweak::Dim(..)) {
        return;
    }
    match tw {
        Tweak::Swap(a, b) => {
            let n = dims.len();
            dims.swap(*a as usize % n, *b as usize % n);
        }
        Tweak::Dim(k, v) => {
            let n = dims.len();
            dims[*k as usize % n] = *v;
        }
        Tweak::PushDim(v) => dims.push(*v),
        Tweak::PopDim => {
            dims.pop();
        }
        Tweak::Type(ty) => t[i].type_id = *ty,
        Tweak::Drop => {
            t.remove(i);
        }
        Tweak::Rename(s) => t[i].name = s.clone(),
        Tweak::Duplicate => {
            let dup = Info { name: t[i].name.clone(), dims: t[i].dims.clone(), type_id: t[i].type_id };
            t.push(dup);
        }
    }
}

/// Bytes of tensor data for `info` (0 when its type or dims make none).
fn data_bytes(info: &Info) -> u64 {
    let n = info.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    GgmlType::from_u32(info.type_id).zip(n).and_then(|(ty, n)| ty.tensor_bytes(n)).unwrap_or(0)
}

/// The GGUF the description stands for, or `None` when its data would exceed [`MAX_DATA`].
pub fn build(s: &Spec) -> Option<Vec<u8>> {
    let shape = Shape::of(s);
    let mut meta = base_metadata(s, &shape);
    let alignment = 1u64 << (s.align_log2 % 13);
    if alignment != 32 {
        meta.push(("general.alignment".into(), Meta::u32(alignment as u32)));
    }
    for (k, v) in &s.metas {
        apply_meta(&mut meta, *k, v);
    }
    let mut tensors = shape.tensors(s);
    for (i, tw) in &s.tensors {
        apply_tweak(&mut tensors, *i, tw);
    }
    let sizes: Vec<u64> = tensors.iter().map(data_bytes).collect();
    let data = sizes.iter().try_fold(0u64, |acc, b| acc.checked_add(b.div_ceil(alignment).checked_mul(alignment)?))?;
    if data > MAX_DATA {
        return None;
    }
    let mut w = Writer { buf: b"GGUF".to_vec(), fields: Vec::new() };
    w.buf.extend_from_slice(&[2u32, 3, 3, 1][s.version as usize % 4].to_le_bytes());
    w.field(tensors.len() as u64, 8);
    w.field(meta.len() as u64, 8);
    for (k, v) in &meta {
        w.string(k);
        w.field(v.type_id() as u64, 4);
        w.value(v);
    }
    let mut offset = 0u64;
    for (t, size) in tensors.iter().zip(&sizes) {
        w.string(&t.name);
        w.field(t.dims.len() as u64, 4);
        t.dims.iter().for_each(|&d| w.field(d, 8));
        w.field(t.type_id as u64, 4);
        w.field(offset, 8);
        offset += size.div_ceil(alignment) * alignment;
    }
    let header = (w.buf.len() as u64).div_ceil(alignment) * alignment;
    w.buf.resize((header + offset) as usize, 0);
    for (which, p) in &s.patches {
        w.patch(*which, p);
    }
    Some(w.buf)
}
