//! The GGUF v2/v3 container: header, metadata key/values, tensor infos, alignment and the data
//! section (spec: `docs/gguf.md` in ggml; v2 and v3 share one layout, v1 used u32 counts).
//!
//! Layout, all little-endian: magic `GGUF`, u32 version, u64 tensor count, u64 metadata count;
//! each metadata entry is a string key, a u32 value type and the value; each tensor info is a
//! string name, u32 n_dims, n_dims u64 dims (innermost first), u32 GGML type, u64 offset relative
//! to the data section. Strings are a u64 byte length and UTF-8 bytes. The data section starts at
//! the end of the tensor infos rounded up to `general.alignment` (default 32).
//!
//! [`Gguf::parse`] reads through a [`ByteSource`] in small ranges, so the file never has to be in
//! memory (a browser can serve the ranges from a JS `ArrayBuffer`), and checks every count,
//! length, offset and dimension against the file size before it allocates or adds.

mod value;
mod writer;

pub use value::Value;
pub use writer::GgufWriter;

use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use std::collections::HashSet;

/// The first four bytes of every GGUF file.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Data alignment when `general.alignment` is absent (`GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Most dimensions a tensor may have (`GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Deepest nesting of metadata arrays accepted (an array of arrays is depth 2).
pub const MAX_ARRAY_DEPTH: u32 = 8;

/// Smallest metadata entry: empty key length (8), value type (4), a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest tensor info before its dims: name length (8), n_dims (4), type (4), offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// Bytes the reader fetches from the source at once, so small fields cost no source call each.
const WINDOW: u64 = 64 * 1024;
/// Most bytes of a string read (and allocated) at once: a longer one grows as it is read.
const STRING_CHUNK: usize = 1 << 20;

/// Random-access bytes: a slice, a memory map, or (in the browser) a JS `ArrayBuffer`.
pub trait ByteSource {
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// Whether the source has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` with the bytes at `offset..offset + buf.len()`.
    ///
    /// # Errors
    /// [`Error::Truncated`] if that range is not inside `0..len()`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
}

impl ByteSource for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = <[u8]>::len(self) as u64;
        let end = offset.checked_add(buf.len() as u64).filter(|&e| e <= len);
        let Some(end) = end else {
            return Err(Error::Truncated { what: "read".into(), at: offset, need: buf.len() as u64, len });
        };
        buf.copy_from_slice(&self[offset as usize..end as usize]);
        Ok(())
    }
}

impl ByteSource for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.as_slice().read_at(offset, buf)
    }
}

impl<T: ByteSource + ?Sized> ByteSource for &T {
    fn len(&self) -> u64 {
        (**self).len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read_at(offset, buf)
    }
}

/// One tensor's entry in the header, checked against the file.
#[derive(Debug, Clone)]
pub struct TensorInfo {
    /// Tensor name, e.g. `blk.0.attn_q.weight`.
    pub name: String,
    /// Dimensions, innermost (contiguous) first, as ggml's `ne`: 1 to 4 values, each >= 1.
    pub dims: Vec<u64>,
    /// Element type.
    pub ggml_type: GgmlType,
    /// ABSOLUTE byte offset of the tensor's data in the file (data section start + relative
    /// offset).
    pub offset: u64,
    /// Product of `dims`.
    pub n_elements: u64,
    /// Bytes of data: `ggml_type.tensor_bytes(n_elements)`; `offset + n_bytes <= file_len`.
    pub n_bytes: u64,
}

/// A parsed GGUF header: everything but the tensor data, which stays in the source.
#[derive(Debug, Clone)]
pub struct Gguf {
    /// Format version (2 or 3).
    pub version: u32,
    /// Metadata in file order; keys are unique.
    pub metadata: Vec<(String, Value)>,
    /// Tensor infos in file order; names are unique, data ranges aligned, inside the file and
    /// disjoint.
    pub tensors: Vec<TensorInfo>,
    /// Data alignment in bytes (`general.alignment`, default 32; a power of two).
    pub alignment: u64,
    /// Absolute byte offset of the data section.
    pub data_offset: u64,
    /// Length of the source in bytes.
    pub file_len: u64,
}

impl Gguf {
    /// Parses and validates the header of the GGUF in `src`.
    ///
    /// # Errors
    /// - [`Error::BadMagic`]: the file does not start with `GGUF`.
    /// - [`Error::UnsupportedVersion`]: a version other than 2 or 3 (v1 used u32 counts).
    /// - [`Error::BigEndian`]: a big-endian file (version 2 or 3 byte-swapped).
    /// - [`Error::Truncated`]: the file ends inside a field, or a count or length asks for more
    ///   bytes than remain (`what` names the field, e.g. `metadata key 12 ("x") value`).
    /// - [`Error::Malformed`]: unknown value type, bool not 0/1, bad UTF-8, arrays nested over
    ///   [`MAX_ARRAY_DEPTH`], duplicate key or tensor name, `general.alignment` not an unsigned
    ///   power of two, n_dims outside `1..=4`, a zero dimension, dims overflow, a row length not
    ///   a multiple of the type's block size, a misaligned offset, data outside the file, or
    ///   overlapping tensors.
    /// - [`Error::UnsupportedType`]: a tensor type id [`GgmlType::from_u32`] rejects.
    pub fn parse(src: &(impl ByteSource + ?Sized)) -> Result<Gguf> {
        let mut r = Reader::new(src);
        let magic = r.bytes::<4>(&|| "header magic".into())?;
        if magic != GGUF_MAGIC {
            return Err(Error::BadMagic(magic));
        }
        let version = r.u32(&|| "header version".into())?;
        if version != 2 && version != 3 {
            if matches!(version.swap_bytes(), 2 | 3) {
                return Err(Error::BigEndian(version.swap_bytes()));
            }
            return Err(Error::UnsupportedVersion(version));
        }
        let n_tensors = r.u64(&|| "header tensor count".into())?;
        let n_kv = r.u64(&|| "header metadata count".into())?;
        r.need_n(n_kv, MIN_KV_BYTES, &|| format!("{n_kv} metadata entries"))?;
        r.need_n(n_tensors, MIN_TENSOR_INFO_BYTES, &|| format!("{n_tensors} tensor infos"))?;
        let metadata = read_metadata(&mut r, n_kv)?;
        let alignment = alignment_of(&metadata)?;
        let infos = read_tensor_infos(&mut r, n_tensors)?;
        let data_offset = r
            .pos
            .div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or_else(|| Error::Malformed(format!("data section offset overflows (header ends at {}, alignment {alignment})", r.pos)))?;
        let tensors = place_tensors(infos, data_offset, alignment, r.len)?;
        Ok(Gguf { version, metadata, tensors, alignment, data_offset, file_len: r.len })
    }

    /// The metadata value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// `general.architecture` (e.g. `"llama"`), if present and a string.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture")?.as_str()
    }
}

/// Describes the field being read, for error messages; only called when reading fails.
type What<'a> = &'a dyn Fn() -> String;

/// A position in a [`ByteSource`], reading through a small window so that many tiny fields
/// cost one source call.
struct Reader<'a, S: ByteSource + ?Sized> {
    src: &'a S,
    pos: u64,
    len: u64,
    window: Vec<u8>,
    window_start: u64,
}

impl<'a, S: ByteSource + ?Sized> Reader<'a, S> {
    fn new(src: &'a S) -> Self {
        Reader { src, pos: 0, len: src.len(), window: Vec::new(), window_start: 0 }
    }

    /// Fails with `Truncated` unless `n` more bytes remain.
    fn need(&self, n: u64, what: What) -> Result<()> {
        if n > self.len - self.pos {
            return Err(Error::Truncated { what: what(), at: self.pos, need: n, len: self.len });
        }
        Ok(())
    }

    /// Fails unless `count` items of at least `each` bytes could still fit.
    fn need_n(&self, count: u64, each: u64, what: What) -> Result<()> {
        self.need(count.saturating_mul(each), what)
    }

    /// Reads `out.len()` bytes, which [`need`](Self::need) has checked.
    fn fill(&mut self, out: &mut [u8]) -> Result<()> {
        let n = out.len() as u64;
        if n > WINDOW {
            self.src.read_at(self.pos, out)?;
        } else {
            let window_end = self.window_start + self.window.len() as u64;
            if self.pos < self.window_start || self.pos + n > window_end {
                let take = WINDOW.min(self.len - self.pos) as usize;
                self.window.resize(take, 0);
                self.src.read_at(self.pos, &mut self.window)?;
                self.window_start = self.pos;
            }
            let i = (self.pos - self.window_start) as usize;
            out.copy_from_slice(&self.window[i..i + out.len()]);
        }
        self.pos += n;
        Ok(())
    }

    fn bytes<const N: usize>(&mut self, what: What) -> Result<[u8; N]> {
        self.need(N as u64, what)?;
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    fn u8(&mut self, what: What) -> Result<u8> {
        Ok(self.bytes::<1>(what)?[0])
    }

    fn u32(&mut self, what: What) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }

    fn u64(&mut self, what: What) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }

    /// A u64 length then that many UTF-8 bytes.
    ///
    /// The bytes are read [`STRING_CHUNK`] at a time and the string grows as they arrive, so the
    /// memory taken is bounded by the bytes actually read, not by the length field: a source that
    /// reports a large file but serves only its head (the browser's streamed header, see
    /// `web::source::Planned`) fails at the end of what it has before a huge length is allocated.
    fn string(&mut self, what: What) -> Result<String> {
        let n = self.u64(what)?;
        self.need(n, what)?;
        let n = usize::try_from(n).map_err(|_| Error::Malformed(format!("{}: a {n}-byte string does not fit in memory", what())))?;
        let mut buf = Vec::with_capacity(n.min(STRING_CHUNK));
        while buf.len() < n {
            let start = buf.len();
            buf.resize(start + (n - start).min(STRING_CHUNK), 0);
            self.fill(&mut buf[start..])?;
        }
        String::from_utf8(buf).map_err(|e| Error::Malformed(format!("{} is not valid UTF-8 ({e})", what())))
    }
}

fn read_metadata<S: ByteSource + ?Sized>(r: &mut Reader<S>, n: u64) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::with_capacity(n.min(1024) as usize);
    let mut seen = HashSet::new();
    for i in 0..n {
        let key = r.string(&|| format!("metadata key {i} name"))?;
        if !seen.insert(key.clone()) {
            return Err(Error::Malformed(format!("duplicate metadata key {key:?} (entry {i})")));
        }
        let ty = r.u32(&|| format!("metadata key {i} ({key:?}) type"))?;
        let value = read_value(r, ty, 0, &|| format!("metadata key {i} ({key:?}) value"))?;
        out.push((key, value));
    }
    Ok(out)
}

/// Fewest bytes a value of type `ty` can take, or `None` for an unknown type.
fn min_value_bytes(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        8 | 10..=12 => Some(8),
        9 => Some(4 + 8),
        _ => None,
    }
}

fn unknown_value_type(ty: u32, what: What) -> Error {
    Error::Malformed(format!("{}: unknown value type {ty} (GGUF value types are 0..=12)", what()))
}

/// One value of type `ty`; `depth` is the number of arrays it is inside.
fn read_value<S: ByteSource + ?Sized>(r: &mut Reader<S>, ty: u32, depth: u32, what: What) -> Result<Value> {
    Ok(match ty {
        0 => Value::U8(r.u8(what)?),
        1 => Value::I8(r.u8(what)? as i8),
        2 => Value::U16(u16::from_le_bytes(r.bytes(what)?)),
        3 => Value::I16(i16::from_le_bytes(r.bytes(what)?)),
        4 => Value::U32(r.u32(what)?),
        5 => Value::I32(i32::from_le_bytes(r.bytes(what)?)),
        6 => Value::F32(f32::from_le_bytes(r.bytes(what)?)),
        7 => match r.u8(what)? {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => return Err(Error::Malformed(format!("{}: bool byte is {b}, not 0 or 1", what()))),
        },
        8 => Value::Str(r.string(what)?),
        9 => Value::Array(read_array(r, depth + 1, what)?),
        10 => Value::U64(r.u64(what)?),
        11 => Value::I64(i64::from_le_bytes(r.bytes(what)?)),
        12 => Value::F64(f64::from_le_bytes(r.bytes(what)?)),
        _ => return Err(unknown_value_type(ty, what)),
    })
}

/// An array's element type, count and elements; `depth` counts this array.
fn read_array<S: ByteSource + ?Sized>(r: &mut Reader<S>, depth: u32, what: What) -> Result<Vec<Value>> {
    if depth > MAX_ARRAY_DEPTH {
        return Err(Error::Malformed(format!("{}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels", what())));
    }
    let ty = r.u32(what)?;
    let n = r.u64(what)?;
    let each = min_value_bytes(ty).ok_or_else(|| unknown_value_type(ty, what))?;
    r.need_n(n, each, &|| format!("{} (array of {n} x {})", what(), value::type_name_of(ty).unwrap_or("?")))?;
    let mut out = Vec::with_capacity(n.min(4096) as usize);
    for _ in 0..n {
        out.push(read_value(r, ty, depth, what)?);
    }
    Ok(out)
}

/// `general.alignment`: absent means 32; otherwise an unsigned integer power of two.
fn alignment_of(metadata: &[(String, Value)]) -> Result<u64> {
    let Some((_, v)) = metadata.iter().find(|(k, _)| k == "general.alignment") else {
        return Ok(DEFAULT_ALIGNMENT);
    };
    let a = match v {
        Value::U8(_) | Value::U16(_) | Value::U32(_) | Value::U64(_) => v.as_u64().unwrap_or(0),
        _ => return Err(Error::Malformed(format!("general.alignment is {} ({v}), expected an unsigned integer", v.type_name()))),
    };
    if !a.is_power_of_two() {
        return Err(Error::Malformed(format!("general.alignment {a} is not a power of two")));
    }
    Ok(a)
}

/// A tensor info as read, before its data range is checked.
struct RawInfo {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    rel_offset: u64,
    n_elements: u64,
    n_bytes: u64,
}

fn read_tensor_infos<S: ByteSource + ?Sized>(r: &mut Reader<S>, n: u64) -> Result<Vec<RawInfo>> {
    let mut out = Vec::with_capacity(n.min(4096) as usize);
    let mut seen = HashSet::new();
    for i in 0..n {
        let name = r.string(&|| format!("tensor info {i} name"))?;
        if !seen.insert(name.clone()) {
            return Err(Error::Malformed(format!("duplicate tensor name {name:?} (tensor info {i})")));
        }
        out.push(read_tensor_info(r, i, name)?);
    }
    Ok(out)
}

/// The fields after the name of tensor info `i`.
fn read_tensor_info<S: ByteSource + ?Sized>(r: &mut Reader<S>, i: u64, name: String) -> Result<RawInfo> {
    let malformed = |m: String| Error::Malformed(format!("tensor {name:?}: {m}"));
    let n_dims = r.u32(&|| format!("tensor info {i} ({name:?}) n_dims"))?;
    if !(1..=MAX_DIMS).contains(&n_dims) {
        return Err(malformed(format!("n_dims {n_dims} is not in 1..={MAX_DIMS} (GGML_MAX_DIMS)")));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        let dim = r.u64(&|| format!("tensor info {i} ({name:?}) dimension {d}"))?;
        if dim == 0 {
            return Err(malformed(format!("dimension {d} is 0")));
        }
        dims.push(dim);
    }
    let type_id = r.u32(&|| format!("tensor info {i} ({name:?}) type"))?;
    let ggml_type =
        GgmlType::from_u32(type_id).ok_or_else(|| Error::UnsupportedType { tensor: name.clone(), ggml_type: type_id, name: GgmlType::name_of(type_id) })?;
    let rel_offset = r.u64(&|| format!("tensor info {i} ({name:?}) offset"))?;
    let n_elements =
        dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)).ok_or_else(|| malformed(format!("dims overflow ({dims:?} has more than 2^64 elements)")))?;
    let block = ggml_type.block_size();
    if dims[0] % block != 0 {
        return Err(malformed(format!("row length {} (dims[0]) is not a multiple of the {ggml_type} block size {block}", dims[0])));
    }
    let n_bytes =
        ggml_type.tensor_bytes(n_elements).ok_or_else(|| malformed(format!("dims overflow ({n_elements} {ggml_type} elements need more than 2^64 bytes)")))?;
    Ok(RawInfo { name, dims, ggml_type, rel_offset, n_elements, n_bytes })
}

/// Turns relative offsets into absolute ones and checks alignment, bounds and overlap.
fn place_tensors(infos: Vec<RawInfo>, data_offset: u64, alignment: u64, file_len: u64) -> Result<Vec<TensorInfo>> {
    let mut out = Vec::with_capacity(infos.len());
    for t in infos {
        if t.rel_offset % alignment != 0 {
            return Err(Error::Malformed(format!("tensor {:?}: offset {} is not a multiple of the alignment {alignment}", t.name, t.rel_offset)));
        }
        // u128 cannot overflow here: both terms are below 2^64.
        let start = data_offset as u128 + t.rel_offset as u128;
        let end = start + t.n_bytes as u128;
        if end > file_len as u128 && (start <= file_len as u128 || data_offset > file_len) {
            // The data (or the data section itself) starts inside the file but runs past its
            // end: a cut file. Data starting past the end of a whole data section is a bad offset.
            return Err(Error::Truncated { what: format!("tensor {:?} data", t.name), at: start as u64, need: t.n_bytes, len: file_len });
        }
        if end > file_len as u128 {
            return Err(Error::Malformed(format!("tensor {:?} data [{start}, {end}) is outside the file (len {file_len})", t.name)));
        }
        out.push(TensorInfo { name: t.name, dims: t.dims, ggml_type: t.ggml_type, offset: start as u64, n_elements: t.n_elements, n_bytes: t.n_bytes });
    }
    check_overlap(&out)?;
    Ok(out)
}

/// Fails if any two tensors' data ranges share a byte.
fn check_overlap(tensors: &[TensorInfo]) -> Result<()> {
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if a.offset + a.n_bytes > b.offset {
            return Err(Error::Malformed(format!(
                "tensors {:?} and {:?} overlap: [{}, {}) and [{}, {})",
                a.name,
                b.name,
                a.offset,
                a.offset + a.n_bytes,
                b.offset,
                b.offset + b.n_bytes
            )));
        }
    }
    Ok(())
}

/// The metadata value `key` as a u32 (`None` when absent).
///
/// # Errors
/// [`Error::Config`] when it is not a non-negative integer below 2^32.
pub(crate) fn meta_u32(g: &Gguf, key: &str) -> Result<Option<u32>> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(x) if x <= u32::MAX as u64 => Ok(Some(x as u32)),
            _ => Err(Error::Config(format!("{key} must be a non-negative integer below 2^32, found {v}"))),
        },
    }
}

/// The metadata value `key` as an f32 (`None` when absent).
///
/// # Errors
/// [`Error::Config`] when it is not a finite number.
pub(crate) fn meta_f32(g: &Gguf, key: &str) -> Result<Option<f32>> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() => Ok(Some(x as f32)),
            _ => Err(Error::Config(format!("{key} must be a finite number, found {v}"))),
        },
    }
}
