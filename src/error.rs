//! The one error type of the crate. Every message names the problem (and the tensor, byte offset
//! or limit involved) so that a JS `Error` built from it tells the user what to fix.

use std::fmt;

/// Everything that can go wrong between GGUF bytes and logits.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The first four bytes are not `GGUF`.
    BadMagic([u8; 4]),
    /// A GGUF version other than 2 or 3.
    UnsupportedVersion(u32),
    /// A big-endian GGUF (its version reads as 2 or 3 only byte-swapped).
    BigEndian(u32),
    /// The file ends before `what` (which needs `need` bytes at byte offset `at`).
    Truncated { what: String, at: u64, need: u64, len: u64 },
    /// Structurally malformed GGUF (bad counts, bad alignment, overlapping tensors ...).
    Malformed(String),
    /// A tensor of a GGML type this crate does not handle: its id and ggml's name for it
    /// ([`crate::ggml::GgmlType::name_of`]).
    UnsupportedType { tensor: String, ggml_type: u32, name: &'static str },
    /// `general.architecture` (`found`) is none of the recognised ones (`supported`, comma-separated:
    /// `Family::ALL`).
    UnsupportedArchitecture { found: String, supported: String },
    /// Hyperparameters that do not make a LLaMA model (or exceed the engine's limits).
    Config(String),
    /// A tensor the config needs is absent.
    MissingTensor(String),
    /// A tensor whose element count or shape disagrees with the config.
    TensorShape { tensor: String, expected: String, found: String },
    /// A buffer needed by the model is larger than the device allows.
    TooLarge { tensor: String, bytes: u64, limit: u64, limit_name: &'static str },
    /// Bad argument values (empty tokens, token out of range, past the context, a gap in the KV
    /// cache ...). The browser module rejects with a JS `RangeError`.
    Input(String),
    /// An argument of the wrong type (not an array, not a number, not a `GPUDevice` ...). The
    /// browser module rejects with a JS `TypeError`.
    InvalidType(String),
    /// The GPU reported an error (validation, mapping).
    Gpu(String),
    /// The device could not allocate the model's buffers (WebGPU's out-of-memory error while
    /// loading): `bytes` of GPU buffers were asked for (in the browser every buffer of the
    /// model; natively its weights and KV cache as planned, [`crate::plan::LoadPlan::weight_and_cache_bytes`];
    /// 0 where unknown), `detail` is the device's message (natively naming the buffer refused
    /// and its size). The browser module rejects with an `OutOfMemoryError`, as for
    /// [`Error::TooLarge`].
    OutOfMemory { bytes: u64, detail: String },
    /// The GPU device was lost (destroyed by the host, a driver reset ...): this call and every
    /// later one on the model fail. The browser module rejects with a `DeviceLostError`.
    DeviceLost(String),
    /// Use after `dispose()`.
    Disposed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadMagic(m) => write!(f, "not a GGUF file: magic is {:?}, expected \"GGUF\"", String::from_utf8_lossy(m)),
            Error::UnsupportedVersion(v) => write!(f, "unsupported GGUF version {v} (only 2 and 3 are supported)"),
            Error::BigEndian(v) => write!(
                f,
                "big-endian GGUF (version {v} stored big-endian): only little-endian GGUF files are supported (llama.cpp's gguf_convert_endian.py converts it)"
            ),
            Error::Truncated { what, at, need, len } => write!(
                f,
                "truncated GGUF: {what} needs {need} bytes at byte {at} but the file has {len} bytes"
            ),
            Error::Malformed(m) => write!(f, "malformed GGUF: {m}"),
            Error::UnsupportedType { tensor, ggml_type, name } => write!(f, "tensor {tensor} has unsupported type {name} ({ggml_type})"),
            Error::UnsupportedArchitecture { found, supported } => {
                write!(f, "WebGPU path: unsupported architecture {found:?} (general.architecture); supported: {supported}")
            }
            Error::Config(m) => write!(f, "WebGPU path: {m}"),
            Error::MissingTensor(t) => write!(f, "missing tensor {t}"),
            Error::TensorShape { tensor, expected, found } => write!(f, "tensor {tensor} has {found}, expected {expected}"),
            Error::TooLarge { tensor, bytes, limit, limit_name } => write!(
                f,
                "tensor {tensor} needs {bytes} bytes in one GPU buffer but the device's {limit_name} is {limit}: request a larger {limit_name} when creating the GPUDevice"
            ),
            Error::Input(m) => write!(f, "{m}"),
            Error::InvalidType(m) => write!(f, "{m}"),
            Error::Gpu(m) => write!(f, "GPU error: {m}"),
            Error::OutOfMemory { bytes: 0, detail } => write!(f, "out of GPU memory: the device could not allocate a buffer ({detail})"),
            Error::OutOfMemory { bytes, detail } => {
                write!(f, "out of GPU memory: the model needs {bytes} bytes of GPU buffers and the device could not allocate them ({detail})")
            }
            Error::DeviceLost(m) => write!(f, "the GPU device was lost ({m})"),
            Error::Disposed => write!(f, "this model was disposed: use after dispose()"),
        }
    }
}

impl std::error::Error for Error {}

/// Result with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
