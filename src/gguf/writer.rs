//! A GGUF writer for tests and generated benchmark models (the layout of `gguf_write_to_buf` in
//! ggml's `gguf.cpp`: header, metadata, tensor infos, padding, then each tensor's data padded to
//! the alignment).

use super::{Value, DEFAULT_ALIGNMENT, GGUF_MAGIC};
use crate::ggml::GgmlType;
use std::io::{self, Write};

/// Builds a GGUF file in memory. Metadata and tensor infos are written in the order given and
/// without validation (duplicate keys, odd versions or dims are written as asked, so tests can
/// make malformed files); only what would make the layout itself inconsistent (wrong data
/// length, bad alignment, mixed-type arrays) is an error at write time.
#[derive(Debug, Clone)]
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    tensors: Vec<Tensor>,
}

#[derive(Debug, Clone)]
struct Tensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    data: Vec<u8>,
}

impl GgufWriter {
    /// An empty file of format `version` (2 or 3; any other number is written as given).
    pub fn new(version: u32) -> Self {
        GgufWriter { version, alignment: DEFAULT_ALIGNMENT, metadata: Vec::new(), tensors: Vec::new() }
    }

    /// Sets the data alignment in bytes (a power of two) and, unless it is the default 32,
    /// records it as `general.alignment` (u32, or u64 if larger), replacing an earlier one.
    pub fn alignment(&mut self, a: u64) -> &mut Self {
        self.alignment = a;
        self.metadata.retain(|(k, _)| k != "general.alignment");
        if a != DEFAULT_ALIGNMENT {
            let v = u32::try_from(a).map_or(Value::U64(a), Value::U32);
            self.metadata.push(("general.alignment".into(), v));
        }
        self
    }

    /// Appends a metadata entry.
    pub fn kv(&mut self, key: &str, v: Value) -> &mut Self {
        self.metadata.push((key.into(), v));
        self
    }

    /// Appends a tensor: `dims` innermost first, `data` exactly `ty.tensor_bytes(product)` bytes
    /// (checked by [`write_to`](Self::write_to)).
    pub fn tensor(&mut self, name: &str, dims: &[u64], ty: GgmlType, data: Vec<u8>) -> &mut Self {
        self.tensors.push(Tensor { name: name.into(), dims: dims.to_vec(), ty, data });
        self
    }

    /// Writes the file.
    ///
    /// # Errors
    /// `InvalidInput` if the alignment is not a power of two, a tensor's data length does not
    /// match its dims and type, or an array mixes value types; otherwise `w`'s errors.
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<()> {
        let a = self.alignment;
        if !a.is_power_of_two() {
            return Err(invalid(format!("alignment {a} is not a power of two")));
        }
        let mut h = Vec::new();
        h.extend_from_slice(&GGUF_MAGIC);
        h.extend_from_slice(&self.version.to_le_bytes());
        h.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        h.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            put_str(&mut h, k);
            h.extend_from_slice(&v.type_id().to_le_bytes());
            put_value(&mut h, v)?;
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            check_data(t)?;
            put_str(&mut h, &t.name);
            h.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                h.extend_from_slice(&d.to_le_bytes());
            }
            h.extend_from_slice(&(t.ty as u32).to_le_bytes());
            h.extend_from_slice(&offset.to_le_bytes());
            offset += padded(t.data.len() as u64, a);
        }
        pad(&mut h, a);
        w.write_all(&h)?;
        for t in &self.tensors {
            w.write_all(&t.data)?;
            let fill = padded(t.data.len() as u64, a) - t.data.len() as u64;
            w.write_all(&vec![0u8; fill as usize])?;
        }
        Ok(())
    }

    /// The file as bytes.
    ///
    /// # Panics
    /// On the input errors [`write_to`](Self::write_to) reports (programmer errors).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Err(e) = self.write_to(&mut out) {
            panic!("GgufWriter::to_bytes: {e}");
        }
        out
    }
}

fn invalid(m: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, m)
}

/// `n` rounded up to a multiple of `a` (a power of two).
fn padded(n: u64, a: u64) -> u64 {
    n.div_ceil(a) * a
}

fn pad(buf: &mut Vec<u8>, a: u64) {
    buf.resize(padded(buf.len() as u64, a) as usize, 0);
}

fn check_data(t: &Tensor) -> io::Result<()> {
    let n: Option<u64> = t.dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    let want = n.and_then(|n| t.ty.tensor_bytes(n));
    if want != Some(t.data.len() as u64) {
        return Err(invalid(format!("tensor {:?}: {} bytes of data but {} {:?} needs {want:?}", t.name, t.data.len(), t.ty, t.dims)));
    }
    Ok(())
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// Writes a value without its type id. An empty array gets element type u8 (0): the type of an
/// empty array carries no information once read.
fn put_value(buf: &mut Vec<u8>, v: &Value) -> io::Result<()> {
    match v {
        Value::U8(x) => buf.push(*x),
        Value::I8(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => buf.push(*x as u8),
        Value::Str(s) => put_str(buf, s),
        Value::U64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::Array(items) => {
            let ty = items.first().map_or(0, Value::type_id);
            if let Some(odd) = items.iter().find(|x| x.type_id() != ty) {
                return Err(invalid(format!("array mixes {} and {} elements", items[0].type_name(), odd.type_name())));
            }
            buf.extend_from_slice(&ty.to_le_bytes());
            buf.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for x in items {
                put_value(buf, x)?;
            }
        }
    }
    Ok(())
}
