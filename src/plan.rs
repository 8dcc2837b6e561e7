//! The load plan: everything a load decides from the file alone, before any GPU buffer exists.
//!
//! [`LoadPlan::new`] validates the config ([`Config::from_gguf`], tensor dims included), sizes the
//! KV cache and the batch, and lays out every weight tensor in storage buffers under the device's
//! binding limit as [`crate::weights::Weights::load`] will (rows of a matrix split into parts,
//! expert stacks split by whole experts, norms widened to f32). It is a pure function of the
//! header and a few numbers, so a model the device cannot hold is refused before anything is
//! uploaded, and the fuzz targets (`fuzz/`) run it without a GPU.
//!
//! # Errors (the contract [`crate::Llama::load`] passes on)
//! - any [`Config::from_gguf`] error (architecture, hyperparameters, missing tensors, dims);
//! - [`Error::TooLarge`] naming the KV cache, a norm, a matrix row or one expert that does not
//!   fit one storage binding, with its bytes and the limit;
//! - [`Error::Malformed`] for a matrix whose rows are not whole blocks of its type;
//! - [`Error::Config`] for an expert stack of more than 65535 rows per expert.

use crate::config::{Config, KvType};
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::weights::{padded, per_binding, row_bytes};

/// Default tokens per batch (prefill chunk).
pub const DEFAULT_BATCH: u32 = 512;
pub use crate::weights::MAX_EXPERT_ROWS;

/// The numbers a load takes besides the file.
#[derive(Debug, Clone, Copy)]
pub struct PlanOptions {
    /// KV-cache length in positions (default `min(llama.context_length, 2048)`).
    pub ctx: Option<u32>,
    /// Tokens per batch (default [`DEFAULT_BATCH`], fewer when a row of activations would not fit).
    pub batch: Option<u32>,
    /// The KV cache's element type.
    pub kv: KvType,
    /// The device's `maxStorageBufferBindingSize` in bytes.
    pub max_binding: u64,
}

/// How one tensor is held on the GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// A 1-D tensor as f32: a norm in one buffer of `bytes`; `rope_freqs`, read to the CPU.
    Vector { bytes: u64 },
    /// A `[rows][cols]` matrix kept in its storage format: `parts` buffers of at most
    /// `rows_per_part` rows of `row_bytes` each.
    Matrix { rows: u32, cols: u32, row_bytes: u64, rows_per_part: u32, parts: u32 },
    /// An expert stack `[experts][rows][cols]`, split by whole experts.
    Experts { experts: u32, rows: u32, cols: u32, row_bytes: u64, experts_per_part: u32, parts: u32 },
}

/// A tensor of the plan: its name, bytes in the file, and layout on the GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTensor {
    /// Tensor name.
    pub name: String,
    /// Bytes of its data in the file.
    pub file_bytes: u64,
    /// Its buffers.
    pub layout: Layout,
}

/// What a load will allocate, decided from the header alone.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPlan {
    /// The validated config (with the plan's KV type and context).
    pub config: Config,
    /// Bytes of each layer's key (and value) cache buffer.
    pub kv_bytes: u64,
    /// Tokens per batch.
    pub batch: u32,
    /// Every tensor the forward pass reads, in [`Config::expected_tensors`] order.
    pub tensors: Vec<PlannedTensor>,
}

/// Largest per-token activation row in floats (the batch is sized so that each fits a binding).
pub fn widest_row(cfg: &Config) -> u64 {
    let ffw = if cfg.is_moe() { cfg.topk * cfg.ff } else { cfg.ff } as u64;
    [cfg.d as u64, (cfg.q_dim() + 2 * cfg.kv_dim()) as u64, 2 * ffw, cfg.experts as u64].into_iter().max().unwrap_or(1)
}

fn too_large(tensor: String, bytes: u64, limit: u64) -> Error {
    Error::TooLarge { tensor, bytes, limit, limit_name: "maxStorageBufferBindingSize" }
}

impl LoadPlan {
    /// Plans the load of the parsed GGUF `g` (see the module's error contract).
    pub fn new(g: &Gguf, opts: PlanOptions) -> Result<LoadPlan> {
        let config = Config { kv: opts.kv, ..Config::from_gguf(g, opts.ctx)? };
        let limit = opts.max_binding;
        // Saturating: a context of 2^32 - 1 positions times a KV width near 2^32 passes u64.
        let kv_bytes = (config.ctx as u64).saturating_mul(config.kv_dim() as u64).saturating_mul(config.kv.bytes() as u64).saturating_add(15) & !15;
        if kv_bytes > limit {
            return Err(too_large("KV cache".into(), kv_bytes, limit));
        }
        let row_floats = widest_row(&config) * 4;
        let batch = opts.batch.unwrap_or(DEFAULT_BATCH).clamp(1, config.ctx).min((limit / row_floats).max(1) as u32);
        let tensors = config.expected_tensors().into_iter().map(|(name, dims)| plan_tensor(g, name, &dims, limit)).collect::<Result<Vec<_>>>()?;
        Ok(LoadPlan { config, kv_bytes, batch, tensors })
    }

    /// Bytes of the weight buffers ([`LoadPlan::weight_buffer_bytes`]) and of the KV cache (a
    /// key and a value buffer of [`LoadPlan::kv_bytes`] a layer): what the model holds on the
    /// GPU but for its activations and uniforms.
    pub fn weight_and_cache_bytes(&self) -> u64 {
        self.weight_buffer_bytes() + 2 * self.config.n_layers as u64 * self.kv_bytes
    }

    /// Bytes of the weight buffers (stored bytes plus each buffer's padding, before fusing
    /// neighbours into one buffer).
    pub fn weight_buffer_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| match t.layout {
                Layout::Vector { bytes } => bytes,
                Layout::Matrix { rows, row_bytes, rows_per_part, parts, .. } => split_bytes(rows, rows_per_part, parts, row_bytes),
                Layout::Experts { experts, rows, row_bytes, experts_per_part, parts, .. } => {
                    split_bytes(experts, experts_per_part, parts, rows as u64 * row_bytes)
                }
            })
            .sum()
    }
}

/// Bytes of `parts` buffers holding `count` items of `item_bytes`, `per_part` to a buffer.
fn split_bytes(count: u32, per_part: u32, parts: u32, item_bytes: u64) -> u64 {
    let last = count - per_part * (parts - 1);
    (parts - 1) as u64 * padded(per_part as u64 * item_bytes) + padded(last as u64 * item_bytes)
}

/// The layout of the tensor `name`, whose dims [`Config::from_gguf`] has checked to be `dims`
/// (innermost first: `[cols]`, `[cols, rows]` or `[cols, rows, experts]`).
fn plan_tensor(g: &Gguf, name: String, dims: &[u64], limit: u64) -> Result<PlannedTensor> {
    let t = g.tensor(&name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
    let file_bytes = t.n_bytes;
    let layout = match *dims {
        [n] => {
            let bytes = (n * 4).max(16).next_multiple_of(16);
            // rope_freqs is read back to the CPU (the RoPE table), never a buffer of its own.
            if bytes > limit && name != "rope_freqs.weight" {
                return Err(too_large(name, bytes, limit));
            }
            Layout::Vector { bytes }
        }
        [cols, rows] => {
            let (cols, rows) = (cols as u32, rows as u32);
            let rb = row_bytes(&name, t.ggml_type, cols)?;
            let fit = per_binding(limit, rb);
            if fit == 0 {
                return Err(too_large(name, padded(rb), limit));
            }
            let rows_per_part = fit.min(rows as u64) as u32;
            Layout::Matrix { rows, cols, row_bytes: rb, rows_per_part, parts: rows.div_ceil(rows_per_part) }
        }
        [cols, rows, experts] => {
            let (cols, rows, experts) = (cols as u32, rows as u32, experts as u32);
            let rb = row_bytes(&name, t.ggml_type, cols)?;
            if rows > MAX_EXPERT_ROWS {
                return Err(Error::Config(format!("{name}: {rows} rows per expert; the expert kernels handle at most {MAX_EXPERT_ROWS}")));
            }
            let fit = per_binding(limit, rows as u64 * rb);
            if fit == 0 {
                return Err(too_large(format!("{name} (one expert)"), padded(rows as u64 * rb), limit));
            }
            let per_part = fit.min(experts as u64) as u32;
            Layout::Experts { experts, rows, cols, row_bytes: rb, experts_per_part: per_part, parts: experts.div_ceil(per_part) }
        }
        _ => return Err(Error::Config(format!("{name}: no GPU layout for {} dims", dims.len()))),
    };
    Ok(PlannedTensor { name, file_bytes, layout })
}
