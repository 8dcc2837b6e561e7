#![cfg(not(target_arch = "wasm32"))]
//! GGUF container tests: value round trips through `GgufWriter`, tensor layout and alignment,
//! malformed files (each asserting the error variant and that the message names the problem),
//! and the real models in `../shared/models`.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use webgpu_llama::error::Error;
use webgpu_llama::ggml::GgmlType;
use webgpu_llama::gguf::*;

// ---------------------------------------------------------------------------------------------
// Helpers

/// A hand-assembled GGUF, for files the writer will not produce (bad type ids, offsets, counts).
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    fn tensor_info(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    /// Zero padding to `align`, then `n` data bytes.
    fn data(&mut self, align: usize, n: usize) -> &mut Self {
        let padded = self.0.len().div_ceil(align) * align;
        self.0.resize(padded + n, 0);
        self
    }
}

fn parse(bytes: &[u8]) -> Result<Gguf, Error> {
    Gguf::parse(bytes)
}

fn malformed(bytes: &[u8]) -> String {
    match parse(bytes) {
        Err(Error::Malformed(m)) => m,
        other => panic!("expected Error::Malformed, got {other:?}"),
    }
}

fn assert_contains(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} should contain {p:?}");
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// One entry of each of the 13 value types, plus arrays of every element type, nested arrays,
/// arrays of arrays of different element types and empty arrays.
fn every_value() -> Vec<(String, Value)> {
    use Value::*;
    let v = vec![
        ("t.u8", U8(200)),
        ("t.i8", I8(-100)),
        ("t.u16", U16(65535)),
        ("t.i16", I16(-32768)),
        ("t.u32", U32(4_000_000_000)),
        ("t.i32", I32(-2_000_000_000)),
        ("t.f32", F32(-1.5e-7)),
        ("t.bool.true", Bool(true)),
        ("t.bool.false", Bool(false)),
        ("t.str", Str("héllo ✓".into())),
        ("t.str.empty", Str(String::new())),
        ("t.u64", U64(u64::MAX)),
        ("t.i64", I64(i64::MIN)),
        ("t.f64", F64(std::f64::consts::PI)),
        ("t.arr.u8", Array(vec![U8(0), U8(255)])),
        ("t.arr.i8", Array(vec![I8(-1), I8(1)])),
        ("t.arr.u16", Array(vec![U16(1), U16(2), U16(3)])),
        ("t.arr.i16", Array(vec![I16(-7)])),
        ("t.arr.u32", Array((0..10).map(U32).collect())),
        ("t.arr.i32", Array(vec![I32(i32::MIN), I32(i32::MAX)])),
        ("t.arr.f32", Array(vec![F32(0.0), F32(f32::MAX), F32(f32::MIN_POSITIVE)])),
        ("t.arr.bool", Array(vec![Bool(true), Bool(false), Bool(true)])),
        ("t.arr.str", Array(vec![Str("<s>".into()), Str(String::new()), Str("▁the".into())])),
        ("t.arr.u64", Array(vec![U64(1 << 40)])),
        ("t.arr.i64", Array(vec![I64(-(1 << 40))])),
        ("t.arr.f64", Array(vec![F64(-0.5), F64(1e300)])),
        ("t.arr.empty", Array(vec![])),
        ("t.arr.arr", Array(vec![Array(vec![U8(1), U8(2)]), Array(vec![]), Array(vec![Str("x".into())])])),
        ("t.arr.arr.empty", Array(vec![Array(vec![]), Array(vec![])])),
        ("t.arr.deep", nested(8)),
    ];
    v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// `depth` arrays inside each other around one u32.
fn nested(depth: u32) -> Value {
    (0..depth).fold(Value::U32(7), |v, _| Value::Array(vec![v]))
}

fn models_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/models"));
    assert!(
        dir.is_dir(),
        "MISSING TEST DATA: the model directory {} does not exist; these tests need ../shared/models \
         (stories260K*.gguf) next to the crate",
        dir.display()
    );
    dir
}

fn model_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(models_dir())
        .expect("read ../shared/models")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    paths.sort();
    paths
}

/// Reads a file through positioned reads: the parser never sees the whole file.
struct FileSource {
    file: std::fs::File,
    len: u64,
    reads: Cell<u64>,
    largest: Cell<u64>,
}

impl FileSource {
    fn open(p: &Path) -> FileSource {
        let file = std::fs::File::open(p).expect("open model");
        let len = file.metadata().expect("metadata").len();
        FileSource { file, len, reads: Cell::new(0), largest: Cell::new(0) }
    }
}

impl ByteSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> webgpu_llama::error::Result<()> {
        use std::os::unix::fs::FileExt;
        self.reads.set(self.reads.get() + 1);
        self.largest.set(self.largest.get().max(buf.len() as u64));
        self.file.read_exact_at(buf, offset).map_err(|_| Error::Truncated { what: "file read".into(), at: offset, need: buf.len() as u64, len: self.len })
    }
}

/// A source of `len` bytes: `head`, then zeros that are never stored.
struct HeadThenZeros {
    head: Vec<u8>,
    len: u64,
    largest: Cell<u64>,
}

impl ByteSource for HeadThenZeros {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> webgpu_llama::error::Result<()> {
        assert!(offset + buf.len() as u64 <= self.len, "parser read past len()");
        self.largest.set(self.largest.get().max(buf.len() as u64));
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.head.get(offset as usize + i).copied().unwrap_or(0);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips and layout

#[test]
fn every_value_type_round_trips_in_v2_and_v3() {
    for version in [2, 3] {
        let mut w = GgufWriter::new(version);
        for (k, v) in every_value() {
            w.kv(&k, v);
        }
        w.tensor("w", &[8], GgmlType::F32, f32_bytes(&[1.0; 8]));
        let g = parse(&w.to_bytes()).unwrap();
        assert_eq!(g.version, version);
        assert_eq!(g.metadata, every_value(), "metadata must come back identical and in order");
        assert_eq!(g.get("t.i64"), Some(&Value::I64(i64::MIN)));
        assert_eq!(g.get("t.str").and_then(Value::as_str), Some("héllo ✓"));
        assert_eq!(g.get("missing"), None);
        assert_eq!(g.architecture(), None);
    }
}

#[test]
fn float_bits_survive_the_round_trip() {
    // PartialEq cannot see -0.0 or NaN payloads: compare bits.
    let mut w = GgufWriter::new(3);
    w.kv("a", Value::F32(-0.0)).kv("b", Value::F32(f32::from_bits(0x7fc0_1234))).kv("c", Value::F64(-0.0));
    let g = parse(&w.to_bytes()).unwrap();
    let Some(Value::F32(a)) = g.get("a") else { panic!("a: {:?}", g.get("a")) };
    let Some(Value::F32(b)) = g.get("b") else { panic!("b: {:?}", g.get("b")) };
    let Some(Value::F64(c)) = g.get("c") else { panic!("c: {:?}", g.get("c")) };
    assert_eq!(a.to_bits(), 0x8000_0000);
    assert_eq!(b.to_bits(), 0x7fc0_1234);
    assert_eq!(c.to_bits(), 0x8000_0000_0000_0000);
}

#[test]
fn value_type_names_and_accessors() {
    let names: Vec<&str> = [
        Value::U8(0),
        Value::I8(0),
        Value::U16(0),
        Value::I16(0),
        Value::U32(0),
        Value::I32(0),
        Value::F32(0.0),
        Value::Bool(false),
        Value::Str(String::new()),
        Value::Array(vec![]),
        Value::U64(0),
        Value::I64(0),
        Value::F64(0.0),
    ]
    .iter()
    .map(Value::type_name)
    .collect();
    assert_eq!(names, ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"]);

    assert_eq!(Value::U8(7).as_u64(), Some(7));
    assert_eq!(Value::I32(5).as_u64(), Some(5));
    assert_eq!(Value::I8(-1).as_u64(), None);
    assert_eq!(Value::I64(i64::MIN).as_u64(), None);
    assert_eq!(Value::U64(u64::MAX).as_u64(), Some(u64::MAX));
    assert_eq!(Value::F32(3.0).as_u64(), None);
    assert_eq!(Value::Bool(true).as_u64(), None);
    assert_eq!(Value::I16(-3).as_f64(), Some(-3.0));
    assert_eq!(Value::F32(0.5).as_f64(), Some(0.5));
    assert_eq!(Value::U32(9).as_f64(), Some(9.0));
    assert_eq!(Value::Str("9".into()).as_f64(), None);
    assert_eq!(Value::Str("x".into()).as_str(), Some("x"));
    assert_eq!(Value::U8(1).as_str(), None);
    assert_eq!(Value::Array(vec![Value::U8(1)]).as_array(), Some(&[Value::U8(1)][..]));
    assert_eq!(Value::U8(1).as_array(), None);
}

#[test]
fn display_is_short() {
    let long = Value::Array((0..10).map(Value::U32).collect());
    assert_eq!(long.to_string(), "[10 x u32: 0, 1, 2, ...]");
    let short = Value::Array(vec![Value::I8(-1), Value::I8(2)]);
    assert_eq!(short.to_string(), "[-1, 2]");
    let strs = Value::Array((0..9).map(|i| Value::Str(format!("t{i}"))).collect());
    assert_eq!(strs.to_string(), "[9 x string: \"t0\", \"t1\", \"t2\", ...]");
    assert_eq!(Value::Array(vec![]).to_string(), "[]");
    assert_eq!(Value::Str("llama".into()).to_string(), "\"llama\"");
    assert_eq!(Value::F32(1.5).to_string(), "1.5");
    assert_eq!(Value::Bool(true).to_string(), "true");
    let big = Value::Str("x".repeat(1000)).to_string();
    assert!(big.len() < 100 && big.contains("1000 bytes"), "{big}");
}

/// Tensors of 12, 68 and 20 bytes: with alignment `a` the data offsets are 0, pad(12), ...
fn layout_case(a: u64) {
    let t0 = f32_bytes(&[1.0, 2.0, 3.0]);
    let t1: Vec<u8> = (0..68).map(|i| i as u8).collect(); // Q8_0, 2 blocks of 34 bytes
    let t2: Vec<u8> = (0..20).map(|i| 100 + i as u8).collect(); // F16 [5, 2]
    let mut w = GgufWriter::new(3);
    w.alignment(a);
    w.kv("general.architecture", Value::Str("llama".into()));
    w.tensor("t0", &[3], GgmlType::F32, t0.clone());
    w.tensor("t1", &[64], GgmlType::Q8_0, t1.clone());
    w.tensor("t2", &[5, 2], GgmlType::F16, t2.clone());
    let bytes = w.to_bytes();
    let g = parse(&bytes).unwrap();
    assert_eq!(g.alignment, a);
    assert_eq!(g.file_len, bytes.len() as u64);
    assert_eq!(g.data_offset % a, 0);
    assert_eq!(g.architecture(), Some("llama"));
    let pad = |n: u64| n.div_ceil(a) * a;
    let expected = [
        ("t0", vec![3], GgmlType::F32, g.data_offset, 3, 12, &t0),
        ("t1", vec![64], GgmlType::Q8_0, g.data_offset + pad(12), 64, 68, &t1),
        ("t2", vec![5, 2], GgmlType::F16, g.data_offset + pad(12) + pad(68), 10, 20, &t2),
    ];
    assert_eq!(g.tensors.len(), 3);
    for (t, (name, dims, ty, offset, n, nb, data)) in g.tensors.iter().zip(expected) {
        assert_eq!((t.name.as_str(), &t.dims, t.ggml_type), (name, &dims, ty));
        assert_eq!((t.offset, t.n_elements, t.n_bytes), (offset, n, nb), "tensor {name}");
        assert_eq!(&bytes[t.offset as usize..(t.offset + t.n_bytes) as usize], &data[..], "{name} data");
        assert_eq!(g.tensor(name).map(|t| t.offset), Some(offset));
    }
    assert!(g.tensor("t3").is_none());
    // ggml pads the last tensor too.
    assert_eq!(g.file_len, g.data_offset + pad(12) + pad(68) + pad(20));
}

#[test]
fn default_alignment_32_places_tensors() {
    layout_case(32);
    let mut w = GgufWriter::new(3);
    w.tensor("x", &[1], GgmlType::F32, vec![0; 4]);
    let g = parse(&w.to_bytes()).unwrap();
    assert_eq!(g.get("general.alignment"), None, "32 is the default and is not written");
}

#[test]
fn custom_alignment_64_and_256_place_tensors() {
    layout_case(64);
    layout_case(256);
    let mut w = GgufWriter::new(3);
    w.alignment(64).tensor("x", &[1], GgmlType::F32, vec![0; 4]);
    assert_eq!(parse(&w.to_bytes()).unwrap().get("general.alignment"), Some(&Value::U32(64)));
}

#[test]
fn alignment_may_be_any_unsigned_integer_type() {
    // Header: 24 bytes, then general.alignment (8 + 17 + 4 + size), then "pad" (8 + 3 + 4 + 11).
    for (v, size) in [(Value::U8(16), 1), (Value::U16(16), 2), (Value::U32(16), 4), (Value::U64(16), 8)] {
        let mut w = GgufWriter::new(3);
        w.kv("general.alignment", v.clone()).kv("pad", Value::Str("abc".into()));
        let g = parse(&w.to_bytes()).unwrap();
        assert_eq!(g.alignment, 16, "{v:?}");
        // No tensors: the data section starts at the header end rounded up to 16 (not 32).
        assert_eq!(g.data_offset, (79u64 + size).div_ceil(16) * 16, "{v:?}");
    }
    let mut w = GgufWriter::new(3);
    w.kv("general.alignment", Value::I32(32));
    assert_contains(&malformed(&w.to_bytes()), &["general.alignment", "i32", "unsigned"]);
}

#[test]
fn parsing_reads_small_ranges_not_the_whole_file() {
    // A 1 TiB "file": a real header followed by zeros that exist only in read_at.
    let mut w = GgufWriter::new(3);
    w.kv("general.architecture", Value::Str("llama".into()));
    w.tensor("small", &[8], GgmlType::F32, vec![0; 32]);
    let head = w.to_bytes();
    let mut raw = Raw::header(3, 2, 1);
    raw.str("general.architecture").u32(8).str("llama");
    raw.tensor_info("small", &[8], 0, 0).tensor_info("huge", &[1 << 28, 4], 0, 64);
    raw.data(32, 0);
    let src = HeadThenZeros { head: raw.0, len: 1 << 40, largest: Cell::new(0) };
    let g = Gguf::parse(&src).unwrap();
    assert_eq!(g.tensor("huge").unwrap().n_bytes, 1 << 32);
    assert_eq!(g.file_len, 1 << 40);
    assert!(src.largest.get() <= 64 * 1024, "largest read {} bytes", src.largest.get());
    // A Vec, a slice and a reference to a slice are all sources.
    let from_vec = Gguf::parse(&head).unwrap();
    let from_slice = Gguf::parse(&head[..]).unwrap();
    let slice: &[u8] = &head;
    let from_ref = Gguf::parse(&slice).unwrap();
    assert_eq!(from_vec.data_offset, from_slice.data_offset);
    assert_eq!(from_ref.tensors[0].offset, from_slice.tensors[0].offset);
}

#[test]
fn byte_source_for_slices_reports_out_of_range_reads() {
    let data = [1u8, 2, 3, 4];
    let mut buf = [0u8; 2];
    data[..].read_at(2, &mut buf).unwrap();
    assert_eq!(buf, [3, 4]);
    assert_eq!(ByteSource::len(&data[..]), 4);
    let err = data[..].read_at(3, &mut buf).unwrap_err();
    assert!(matches!(err, Error::Truncated { at: 3, need: 2, len: 4, .. }), "{err:?}");
    let err = data.to_vec().read_at(u64::MAX, &mut buf).unwrap_err();
    assert!(matches!(err, Error::Truncated { .. }), "{err:?}");
}

#[test]
fn writer_rejects_inconsistent_input() {
    let mut w = GgufWriter::new(3);
    w.tensor("x", &[4], GgmlType::F32, vec![0; 15]);
    let err = w.write_to(&mut Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("\"x\""), "{err}");
    let mut w = GgufWriter::new(3);
    w.kv("mixed", Value::Array(vec![Value::U8(1), Value::I8(1)]));
    assert!(w.write_to(&mut Vec::new()).unwrap_err().to_string().contains("mixes"));
    let mut w = GgufWriter::new(3);
    w.alignment(48);
    assert!(w.write_to(&mut Vec::new()).is_err());
}

// ---------------------------------------------------------------------------------------------
// Malformed files

#[test]
fn bad_magic() {
    let mut bytes = GgufWriter::new(3).to_bytes();
    bytes[3] = b'X';
    assert_eq!(parse(&bytes).unwrap_err(), Error::BadMagic(*b"GGUX"));
    assert!(parse(&bytes).unwrap_err().to_string().contains("not a GGUF file"));
    assert_eq!(parse(b"lmgg\x01\0\0\0").unwrap_err(), Error::BadMagic(*b"lmgg"));
}

#[test]
fn versions_1_and_4_are_unsupported() {
    for v in [0, 1, 4, 0x0400_0000] {
        let err = parse(&GgufWriter::new(v).to_bytes()).unwrap_err();
        assert_eq!(err, Error::UnsupportedVersion(v));
        assert!(err.to_string().contains(&format!("version {v}")), "{err}");
    }
}

#[test]
fn a_big_endian_file_says_so() {
    // A big-endian GGUF (gguf_convert_endian.py): magic bytes unchanged, every number byte-swapped.
    for v in [2u32, 3] {
        let mut w = GgufWriter::new(v);
        w.kv("general.architecture", Value::Str("llama".into()));
        let mut bytes = w.to_bytes();
        bytes[4..8].reverse(); // version
        bytes[8..16].reverse(); // tensor count
        bytes[16..24].reverse(); // metadata count
        let err = parse(&bytes).unwrap_err();
        assert_eq!(err, Error::BigEndian(v));
        let m = err.to_string();
        assert!(m.contains("big-endian GGUF") && m.contains("only little-endian"), "{m}");
    }
}

#[test]
fn every_truncation_of_a_small_file_is_an_error() {
    let mut w = GgufWriter::new(3);
    w.kv("general.architecture", Value::Str("llama".into()));
    w.kv("a", Value::Array(vec![Value::Str("x".into()), Value::Str("yz".into())]));
    w.kv("b", Value::U64(3));
    // 32 bytes of data: the file ends exactly where the tensor does, so no prefix is valid.
    w.tensor("w", &[8], GgmlType::F32, f32_bytes(&[0.5; 8]));
    let bytes = w.to_bytes();
    let full = parse(&bytes).unwrap();
    assert_eq!(full.data_offset as usize, bytes.len() - 32);
    // Every cut is Truncated: inside the header it names the header field; once the header is
    // whole (its padding or the data missing) it names the tensor whose data is cut.
    let mut first_data_cut = None;
    for cut in 0..bytes.len() {
        match parse(&bytes[..cut]) {
            Err(Error::Truncated { what, at, need, len }) => {
                assert_eq!(len, cut as u64, "cut {cut}");
                assert!(at + need > len, "cut {cut}: {what} at {at} needs {need}");
                assert!(!what.is_empty());
                if what == "tensor \"w\" data" {
                    first_data_cut.get_or_insert(cut);
                } else {
                    assert!(first_data_cut.is_none(), "cut {cut}: a header field ({what}) after a data cut");
                }
            }
            other => panic!("cut at {cut} of {}: {other:?}", bytes.len()),
        }
    }
    let header_end = first_data_cut.expect("some cut leaves the header whole") as u64;
    assert!(header_end <= full.data_offset && header_end + 32 > full.data_offset, "header ends at {header_end}");
    // The field being read is named.
    let Err(Error::Truncated { what, .. }) = parse(&bytes[..30]) else { panic!() };
    assert_contains(&what, &["3 metadata entries"]);
    let yz = bytes.windows(2).position(|w| w == b"yz").unwrap();
    let Err(Error::Truncated { what, at, need, .. }) = parse(&bytes[..yz + 1]) else { panic!() };
    assert_contains(&what, &["metadata key 1 (\"a\") value"]);
    assert_eq!((at, need), (yz as u64, 2));
    let Err(Error::Truncated { what, .. }) = parse(&bytes[..10]) else { panic!() };
    assert_contains(&what, &["tensor count"]);
}

#[test]
fn huge_tensor_count_is_rejected_before_allocating() {
    let mut r = Raw::header(3, u64::MAX, 0);
    r.data(32, 64);
    match parse(&r.0) {
        Err(Error::Truncated { what, need, at, .. }) => {
            assert_contains(&what, &["18446744073709551615 tensor infos"]);
            assert_eq!((need, at), (u64::MAX, 24));
        }
        other => panic!("{other:?}"),
    }
    let mut r = Raw::header(3, 1 << 40, 0);
    r.data(32, 64);
    assert!(matches!(parse(&r.0), Err(Error::Truncated { need, .. }) if need == 24 << 40));
}

#[test]
fn huge_metadata_count_is_rejected_before_allocating() {
    let mut r = Raw::header(3, 0, u64::MAX / 2);
    r.str("k").u32(4).u32(1);
    match parse(&r.0) {
        Err(Error::Truncated { what, .. }) => assert_contains(&what, &["metadata entries"]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_string_lengths_are_rejected() {
    // Key length.
    let mut r = Raw::header(3, 0, 1);
    r.u64(u64::MAX - 3).u32(4).u32(1);
    match parse(&r.0) {
        Err(Error::Truncated { what, need, at, .. }) => {
            assert_contains(&what, &["metadata key 0 name"]);
            assert_eq!((need, at), (u64::MAX - 3, 32));
        }
        other => panic!("{other:?}"),
    }
    // String value length.
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(8).u64(1 << 62).u64(0);
    match parse(&r.0) {
        Err(Error::Truncated { what, need, .. }) => {
            assert_contains(&what, &["metadata key 0 (\"k\") value"]);
            assert_eq!(need, 1 << 62);
        }
        other => panic!("{other:?}"),
    }
    // Tensor name length.
    let mut r = Raw::header(3, 1, 0);
    r.u64(1 << 50).data(8, 64);
    match parse(&r.0) {
        Err(Error::Truncated { what, .. }) => assert_contains(&what, &["tensor info 0 name"]),
        other => panic!("{other:?}"),
    }
}

/// The head of a file that claims `len` bytes, as the browser's streamed header is: reads past
/// the head fail, as [`HeadThenZeros`] would not.
struct HeadOfLargeFile {
    head: Vec<u8>,
    len: u64,
}

impl ByteSource for HeadOfLargeFile {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> webgpu_llama::error::Result<()> {
        let have = self.head.len() as u64;
        if offset >= have {
            return Err(Error::Truncated { what: "read past the head".into(), at: offset, need: buf.len() as u64, len: have });
        }
        let n = ((have - offset) as usize).min(buf.len());
        buf[..n].copy_from_slice(&self.head[offset as usize..offset as usize + n]);
        buf[n..].fill(0);
        Ok(())
    }
}

#[test]
fn huge_lengths_in_a_large_file_fail_where_the_bytes_end_without_allocating_them() {
    // A 1 TiB file of which only the head is at hand: a key, a string value, a tensor name and
    // an array whose lengths fit the file but not memory. Before the string reader read in
    // windows, the 512 GiB string was allocated whole (an abort, not an error).
    let len = 1u64 << 40;
    let cases: [(&str, Raw); 4] = [
        ("metadata key 0 name", {
            let mut r = Raw::header(3, 0, 1);
            r.u64(1 << 39).data(8, 100);
            r
        }),
        ("metadata key 0 (\"k\") value", {
            let mut r = Raw::header(3, 0, 1);
            r.str("k").u32(8).u64(1 << 39).data(8, 100);
            r
        }),
        ("tensor info 0 name", {
            let mut r = Raw::header(3, 1, 0);
            r.u64(1 << 39).data(8, 100);
            r
        }),
        ("metadata key 0 (\"arr\") value", {
            let mut r = Raw::header(3, 0, 1);
            r.str("arr").u32(9).u32(10).u64(1 << 36).data(8, 100);
            r
        }),
    ];
    for (what, raw) in cases {
        let src = HeadOfLargeFile { head: raw.0, len };
        match Gguf::parse(&src) {
            // Strings are read a MiB at a time: the read after the first fails.
            Err(Error::Truncated { at, .. }) => assert!(at < 2 << 20, "{what}: failed at {at}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn huge_array_counts_are_rejected() {
    for (elem_type, count, name) in [(10u32, 1u64 << 60, "u64"), (0, u64::MAX, "u8"), (8, u64::MAX / 4, "string")] {
        let mut r = Raw::header(3, 0, 1);
        r.str("arr").u32(9).u32(elem_type).u64(count).u64(0);
        match parse(&r.0) {
            Err(Error::Truncated { what, need, .. }) => {
                assert_contains(&what, &["metadata key 0 (\"arr\") value", &format!("array of {count} x {name}")]);
                assert!(need >= count, "need {need}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn arrays_nested_deeper_than_8_are_rejected() {
    let mut w = GgufWriter::new(3);
    w.kv("ok", nested(8));
    assert_eq!(parse(&w.to_bytes()).unwrap().get("ok"), Some(&nested(8)));
    let mut w = GgufWriter::new(3);
    w.kv("deep", nested(9));
    assert_contains(&malformed(&w.to_bytes()), &["\"deep\"", "nested deeper than 8"]);
    // A hostile file nesting a million levels must not overflow the stack.
    let mut r = Raw::header(3, 0, 1);
    r.str("bomb").u32(9);
    for _ in 0..1_000_000 {
        r.u32(9).u64(1);
    }
    assert_contains(&malformed(&r.0), &["nested deeper than 8"]);
}

#[test]
fn unknown_value_types_are_rejected() {
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(13).u64(0);
    assert_contains(&malformed(&r.0), &["\"k\"", "unknown value type 13"]);
    // As an array element type, even for an empty array.
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(9).u32(0xdead).u64(0);
    assert_contains(&malformed(&r.0), &["unknown value type 57005"]);
}

#[test]
fn bool_must_be_0_or_1() {
    let mut r = Raw::header(3, 0, 1);
    r.str("flag").u32(7).u8(2);
    assert_contains(&malformed(&r.0), &["\"flag\"", "bool", "2", "not 0 or 1"]);
    let mut r = Raw::header(3, 0, 1);
    r.str("flags").u32(9).u32(7).u64(2).u8(1).u8(255);
    assert_contains(&malformed(&r.0), &["\"flags\"", "bool byte is 255"]);
}

#[test]
fn invalid_utf8_is_rejected() {
    let mut r = Raw::header(3, 0, 1);
    r.u64(2).u8(0xff).u8(0xfe).u32(4).u32(1);
    assert_contains(&malformed(&r.0), &["metadata key 0 name", "UTF-8"]);
    let mut r = Raw::header(3, 0, 1);
    r.str("s").u32(8).u64(1).u8(0x80);
    assert_contains(&malformed(&r.0), &["\"s\"", "UTF-8"]);
}

#[test]
fn duplicate_keys_and_tensor_names_are_rejected() {
    let mut w = GgufWriter::new(3);
    w.kv("a", Value::U8(1)).kv("b", Value::U8(2)).kv("a", Value::U8(3));
    assert_contains(&malformed(&w.to_bytes()), &["duplicate metadata key \"a\""]);
    let mut w = GgufWriter::new(3);
    w.tensor("w", &[8], GgmlType::F32, vec![0; 32]).tensor("w", &[8], GgmlType::F32, vec![0; 32]);
    assert_contains(&malformed(&w.to_bytes()), &["duplicate tensor name \"w\""]);
}

#[test]
fn tensor_data_outside_the_file_is_rejected() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("w", &[8], 0, 1024).data(32, 32);
    let len = r.0.len();
    let start = len - 32 + 1024;
    assert_contains(&malformed(&r.0), &["\"w\"", &format!("data [{start}, {}) is outside the file (len {len})", start + 32)]);
    // Offsets near u64::MAX must not overflow.
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("w", &[8], 0, u64::MAX - 31).data(32, 32);
    assert_contains(&malformed(&r.0), &["\"w\"", "outside the file"]);
}

#[test]
fn overlapping_tensors_are_rejected() {
    let mut r = Raw::header(3, 2, 0);
    r.tensor_info("a", &[16], 0, 0).tensor_info("b", &[8], 0, 32).data(32, 64);
    assert_contains(&malformed(&r.0), &["tensors \"a\" and \"b\" overlap"]);
    // Listed in the other order, same data.
    let mut r = Raw::header(3, 2, 0);
    r.tensor_info("b", &[8], 0, 32).tensor_info("a", &[16], 0, 0).data(32, 64);
    assert_contains(&malformed(&r.0), &["tensors \"a\" and \"b\" overlap"]);
    // Two bytes of overlap: 17 f16 values (34 bytes) at 0, the next tensor at 32.
    let mut r = Raw::header(3, 2, 0);
    r.tensor_info("h", &[17], 1, 0).tensor_info("b", &[8], 0, 32).data(32, 64);
    let d = r.0.len() - 64; // the data section
    let ranges = format!("[{d}, {}) and [{}, {})", d + 34, d + 32, d + 64);
    assert_contains(&malformed(&r.0), &["tensors \"h\" and \"b\" overlap", &ranges]);
    // Touching is fine.
    let mut r = Raw::header(3, 2, 0);
    r.tensor_info("a", &[8], 0, 0).tensor_info("b", &[8], 0, 32).data(32, 64);
    assert_eq!(parse(&r.0).unwrap().tensors.len(), 2);
}

#[test]
fn misaligned_tensor_offset_is_rejected() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("w", &[8], 0, 4).data(32, 64);
    assert_contains(&malformed(&r.0), &["\"w\"", "offset 4 is not a multiple of the alignment 32"]);
    // Aligned for 32 but not for a 64 alignment.
    let mut r = Raw::header(3, 1, 1);
    r.str("general.alignment").u32(4).u32(64);
    r.tensor_info("w", &[8], 0, 32).data(64, 128);
    assert_contains(&malformed(&r.0), &["offset 32 is not a multiple of the alignment 64"]);
}

#[test]
fn alignment_0_and_3_are_rejected() {
    for a in [0u32, 3, 48] {
        let mut w = GgufWriter::new(3);
        w.kv("general.alignment", Value::U32(a));
        assert_contains(&malformed(&w.to_bytes()), &[&format!("general.alignment {a} is not a power of two")]);
    }
}

#[test]
fn n_dims_must_be_1_to_4() {
    for dims in [&[][..], &[1, 1, 1, 1, 1][..]] {
        let mut w = GgufWriter::new(3);
        w.tensor("w", dims, GgmlType::F32, vec![0; 4]);
        assert_contains(&malformed(&w.to_bytes()), &["\"w\"", &format!("n_dims {} is not in 1..=4", dims.len())]);
    }
    let mut w = GgufWriter::new(3);
    w.tensor("w4", &[1, 2, 1, 2], GgmlType::F32, vec![0; 16]);
    assert_eq!(parse(&w.to_bytes()).unwrap().tensors[0].dims, [1, 2, 1, 2]);
    // A huge n_dims is caught before any dims are read.
    let mut r = Raw::header(3, 1, 0);
    r.str("w").u32(u32::MAX).data(8, 64);
    assert_contains(&malformed(&r.0), &["n_dims 4294967295"]);
}

#[test]
fn zero_dimensions_are_rejected() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("w", &[8, 0], 0, 0).data(32, 32);
    assert_contains(&malformed(&r.0), &["\"w\"", "dimension 1 is 0"]);
}

#[test]
fn dims_overflow_is_rejected() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("w", &[1 << 32, 1 << 32], 0, 0).data(32, 32);
    assert_contains(&malformed(&r.0), &["tensor \"w\": dims overflow"]);
    // Elements fit in u64 but bytes do not (2^62 f32 = 2^64 bytes).
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("w", &[1 << 31, 1 << 31], 0, 0).data(32, 32);
    assert_contains(&malformed(&r.0), &["tensor \"w\": dims overflow"]);
}

#[test]
fn unknown_ggml_types_are_unsupported() {
    for (id, name) in [(99u32, "unknown"), (16, "IQ2_XXS"), (4, "Q4_2"), (39, "MXFP4")] {
        let mut r = Raw::header(3, 1, 0);
        r.tensor_info("w", &[256], id, 0).data(32, 1024);
        let err = parse(&r.0).unwrap_err();
        assert_eq!(err, Error::UnsupportedType { tensor: "w".into(), ggml_type: id, name: GgmlType::name_of(id) });
        assert_contains(&err.to_string(), &["tensor w", name, &format!("({id})")]);
    }
}

#[test]
fn rows_not_a_multiple_of_the_block_size_are_rejected() {
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("q", &[48], GgmlType::Q4_0 as u32, 0).data(32, 64);
    assert_contains(&malformed(&r.0), &["\"q\"", "row length 48", "Q4_0 block size 32"]);
    // 32 elements in all, but rows of 16 cannot be Q4_0 blocks either.
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("q", &[16, 2], GgmlType::Q4_0 as u32, 0).data(32, 64);
    assert_contains(&malformed(&r.0), &["row length 16", "block size 32"]);
    let mut r = Raw::header(3, 1, 0);
    r.tensor_info("k", &[128, 2], GgmlType::Q4_K as u32, 0).data(32, 288);
    assert_contains(&malformed(&r.0), &["row length 128", "Q4_K block size 256"]);
}

// ---------------------------------------------------------------------------------------------
// The shared models

#[test]
fn every_shared_model_parses() {
    let paths = model_paths();
    assert!(paths.len() >= 10, "expected the 10 stories260K*.gguf files, found {paths:?}");
    for p in &paths {
        let bytes = std::fs::read(p).unwrap();
        let g = Gguf::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let name = p.file_name().unwrap().to_string_lossy();
        assert_eq!(g.version, 3, "{name}");
        assert_eq!(g.architecture(), Some("llama"), "{name}");
        assert!(!g.tensors.is_empty(), "{name}");
        assert!(g.tensor("token_embd.weight").is_some(), "{name}");
        assert_eq!(g.alignment, 32, "{name}");
        assert_eq!(g.file_len, bytes.len() as u64);
        let end = g.tensors.iter().map(|t| t.offset + t.n_bytes).max().unwrap();
        assert!(end <= g.file_len && end + 32 > g.file_len, "{name}: data ends at {end} of {}", g.file_len);
        let tokens = g.get("tokenizer.ggml.tokens").and_then(Value::as_array).unwrap();
        assert_eq!(tokens.len(), 512, "{name}");
        assert_eq!(tokens[1].as_str(), Some("<s>"), "{name}");
        let blocks = g.get("llama.block_count").and_then(Value::as_u64);
        assert_eq!(blocks, Some(5), "{name}");
    }
}

#[test]
fn stories260k_facts() {
    let bytes = std::fs::read(models_dir().join("stories260K.gguf")).unwrap();
    let g = Gguf::parse(&bytes).unwrap();
    let u = |k: &str| g.get(k).and_then(Value::as_u64);
    assert_eq!(u("llama.embedding_length"), Some(64));
    assert_eq!(u("llama.block_count"), Some(5));
    assert_eq!(u("llama.feed_forward_length"), Some(172));
    assert_eq!(u("llama.attention.head_count"), Some(8));
    assert_eq!(u("llama.attention.head_count_kv"), Some(4));
    assert_eq!(u("llama.context_length"), Some(2048));
    let eps = g.get("llama.attention.layer_norm_rms_epsilon").and_then(Value::as_f64).unwrap();
    assert!((eps - 1e-5).abs() < 1e-9, "{eps}");
    assert_eq!(g.metadata.len(), 19);
    assert_eq!(g.tensors.len(), 48); // 3 + 9 per block
    assert!(g.tensors.iter().all(|t| t.ggml_type == GgmlType::F32));
    let emb = g.tensor("token_embd.weight").unwrap();
    assert_eq!(emb.dims, [64, 512]);
    assert_eq!(emb.n_bytes, 64 * 512 * 4);
    assert_eq!(emb.offset, g.data_offset, "token_embd is the first tensor at relative offset 0");
    assert_eq!(g.tensor("blk.4.ffn_down.weight").unwrap().dims, [172, 64]);
    // 14152 header bytes rounded up to 32.
    assert_eq!(g.data_offset, 14176);
}

#[test]
fn quantised_shared_models_have_the_expected_types() {
    let dir = models_dir();
    let types = |file: &str| {
        let g = Gguf::parse(&std::fs::read(dir.join(file)).unwrap()).unwrap();
        let mut t: Vec<&str> = g.tensors.iter().map(|t| t.ggml_type.name()).collect();
        t.sort();
        t.dedup();
        (g, t)
    };
    let (g, t) = types("stories260K-pad256-Q4_K_M.gguf");
    assert_eq!(t, ["F32", "Q4_K", "Q6_K"]);
    assert_eq!(g.get("general.file_type"), Some(&Value::U32(15))); // LLAMA_FTYPE_MOSTLY_Q4_K_M
    assert_eq!(g.tensor("output.weight").unwrap().ggml_type, GgmlType::Q6_K);
    assert_eq!(g.tensor("token_embd.weight").unwrap().n_bytes, 256 * 512 / 256 * 144);
    assert_eq!(types("stories260K-pad256-Q6_K.gguf").1, ["F32", "Q6_K"]);
    assert_eq!(types("stories260K-pad256-Q4_0.gguf").1, ["F32", "Q4_0", "Q6_K"]);
    assert_eq!(types("stories260K-pad256-Q8_0.gguf").1, ["F32", "Q8_0"]);
    assert_eq!(types("stories260K-Q8_0.gguf").1, ["F16", "F32", "Q8_0"]);
    assert_eq!(types("stories260K-F16.gguf").1, ["F16", "F32"]);
    let (moe, _) = types("stories260K-moe4x-top2-F32.gguf");
    assert!(moe.tensors.len() > 48);
}

#[test]
fn parsing_through_positioned_file_reads_matches_the_slice() {
    for p in model_paths() {
        let src = FileSource::open(&p);
        let a = Gguf::parse(&src).unwrap();
        let b = Gguf::parse(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(a.metadata, b.metadata);
        assert_eq!(a.data_offset, b.data_offset);
        let offsets = |g: &Gguf| g.tensors.iter().map(|t| (t.name.clone(), t.offset, t.n_bytes)).collect::<Vec<_>>();
        assert_eq!(offsets(&a), offsets(&b));
        // The header is ~15 KB: one or two windowed reads, never the multi-megabyte file.
        assert!(src.largest.get() <= 64 * 1024, "{}: largest read {}", p.display(), src.largest.get());
        assert!(src.reads.get() <= 4, "{}: {} reads", p.display(), src.reads.get());
    }
}

#[test]
fn headers_larger_than_the_read_window_parse_exactly() {
    // ~10k strings of varying length (values straddle every 64 KiB window boundary) and one
    // 100 KB string (read directly, bypassing the window), through a counting file-like source.
    let tokens: Vec<Value> = (0..10_000).map(|i| Value::Str(format!("tok{i}{}", "x".repeat(i % 13)))).collect();
    let big = "é".repeat(50_000);
    let mut w = GgufWriter::new(3);
    w.kv("tokenizer.ggml.tokens", Value::Array(tokens.clone()));
    w.kv("big", Value::Str(big.clone()));
    w.kv("after", Value::U64(0x0123_4567_89ab_cdef));
    w.tensor("w", &[8], GgmlType::F32, f32_bytes(&[3.0; 8]));
    let bytes = w.to_bytes();
    assert!(bytes.len() > 200_000);
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.get("tokenizer.ggml.tokens").and_then(Value::as_array), Some(&tokens[..]));
    assert_eq!(g.get("big").and_then(Value::as_str), Some(big.as_str()));
    assert_eq!(g.get("after"), Some(&Value::U64(0x0123_4567_89ab_cdef)));
    let src = HeadThenZeros { head: bytes.clone(), len: bytes.len() as u64, largest: Cell::new(0) };
    let g2 = Gguf::parse(&src).unwrap();
    assert_eq!(g2.metadata, g.metadata);
    assert_eq!(g2.tensors[0].offset, g.tensors[0].offset);
    assert_eq!(&bytes[g.tensors[0].offset as usize..][..4], &3.0f32.to_le_bytes());
    assert_eq!(src.largest.get(), 100_000, "the one read over 64 KiB is the big string itself");
}
