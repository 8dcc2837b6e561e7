//! GGUF metadata values (the 13 value types of the GGUF spec, `docs/gguf.md` in ggml).

use std::fmt;

/// One metadata value. Variants are the GGUF value types; the type ids are
/// `U8 0, I8 1, U16 2, I16 3, U32 4, I32 5, F32 6, Bool 7, Str 8, Array 9, U64 10, I64 11, F64 12`.
/// An `Array`'s elements all have the same variant (GGUF arrays are homogeneous; nested arrays
/// may differ in their own element types).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Type 0: unsigned 8-bit integer.
    U8(u8),
    /// Type 1: signed 8-bit integer.
    I8(i8),
    /// Type 2: unsigned 16-bit integer.
    U16(u16),
    /// Type 3: signed 16-bit integer.
    I16(i16),
    /// Type 4: unsigned 32-bit integer.
    U32(u32),
    /// Type 5: signed 32-bit integer.
    I32(i32),
    /// Type 6: 32-bit float.
    F32(f32),
    /// Type 7: bool, one byte that must be 0 or 1.
    Bool(bool),
    /// Type 8: UTF-8 string (u64 byte length, then the bytes).
    Str(String),
    /// Type 9: array (u32 element type, u64 count, then the elements).
    Array(Vec<Value>),
    /// Type 10: unsigned 64-bit integer.
    U64(u64),
    /// Type 11: signed 64-bit integer.
    I64(i64),
    /// Type 12: 64-bit float.
    F64(f64),
}

impl Value {
    /// Any integer variant whose value is `>= 0`, widened to u64; `None` otherwise (floats and
    /// bools included).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any numeric variant (integers and floats, not bools) as f64 (64-bit integers may round).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::I8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::F32(v) => Some(v.into()),
            Value::U64(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The string of a `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an `Array`.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Short lower-case type name: `"u8"`, `"i32"`, `"f32"`, `"bool"`, `"string"`, `"array"` ...
    pub fn type_name(&self) -> &'static str {
        type_name_of(self.type_id()).unwrap_or("?")
    }

    /// The GGUF value type id of this variant.
    pub(crate) fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => 0,
            Value::I8(_) => 1,
            Value::U16(_) => 2,
            Value::I16(_) => 3,
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::Str(_) => 8,
            Value::Array(_) => 9,
            Value::U64(_) => 10,
            Value::I64(_) => 11,
            Value::F64(_) => 12,
        }
    }
}

/// Name of GGUF value type id `t`, or `None` for an id the spec does not define.
pub(crate) fn type_name_of(t: u32) -> Option<&'static str> {
    const NAMES: [&str; 13] = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"];
    NAMES.get(t as usize).copied()
}

/// Strings longer than this many characters print shortened.
const SHORT_STR: usize = 64;
/// Arrays longer than this print as `[N x type: a, b, c, ...]`.
const SHORT_ARRAY: usize = 8;

/// Short form for listings: numbers as Rust prints them, strings quoted (over 64 characters cut
/// to 60 with `...` and the byte length), arrays of up to 8 elements in full, longer ones as
/// `[N x type: a, b, c, ...]`.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Str(s) if s.chars().count() <= SHORT_STR => write!(f, "{s:?}"),
            Value::Str(s) => {
                let head: String = s.chars().take(SHORT_STR - 4).collect();
                write!(f, "{:?} ({} bytes)", head + "...", s.len())
            }
            Value::Array(a) => fmt_array(a, f),
        }
    }
}

fn fmt_array(a: &[Value], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let shown = if a.len() > SHORT_ARRAY { 3 } else { a.len() };
    f.write_str("[")?;
    if a.len() > SHORT_ARRAY {
        write!(f, "{} x {}: ", a.len(), a[0].type_name())?;
    }
    for (i, v) in a[..shown].iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{v}")?;
    }
    if a.len() > SHORT_ARRAY {
        f.write_str(", ...")?;
    }
    f.write_str("]")
}
