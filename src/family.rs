//! Model families: the GGUF architectures this crate recognises and the hyperparameters each adds
//! to llama's, read from `<arch>.*` metadata and checked as llama.cpp's loaders check them
//! (`src/models/<family>.cpp`, the rope-type table in `src/llama-model.cpp`).
//!
//! A family is a [`Family`] value and a [`FamilyParams`] whose defaults are llama's, so the
//! forward pass (the GPU's and [`crate::reference`]'s) branches on a few flags, not on names.
//! [`Family::gpu_ready`] is the one predicate that says which families the GPU engine runs.

use crate::error::{Error, Result};
use crate::gguf::Gguf;

/// A GGUF `general.architecture` this crate recognises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Family {
    /// `llama` (LLaMA 1-3, Mistral, SmolLM2, TinyLlama, and Mixtral's MoE).
    #[default]
    Llama,
    /// `qwen2` (Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen): NEOX RoPE, q/k/v biases.
    Qwen2,
    /// `qwen3`: NEOX RoPE, per-head RMSNorm of q and k before RoPE, free head dim.
    Qwen3,
}

impl Family {
    /// Every recognised family, in the order error messages list them.
    pub const ALL: [Family; 3] = [Family::Llama, Family::Qwen2, Family::Qwen3];

    /// The `general.architecture` string, which is also the prefix of the family's metadata keys.
    pub fn name(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
        }
    }

    /// Parses `general.architecture`.
    ///
    /// # Errors
    /// [`Error::UnsupportedArchitecture`] for any other string (its message lists [`Family::ALL`]).
    pub fn from_name(arch: &str) -> Result<Family> {
        Family::ALL.into_iter().find(|f| f.name() == arch).ok_or_else(|| Error::UnsupportedArchitecture(arch.to_string()))
    }

    /// The recognised architectures, comma-separated (for messages).
    pub fn supported_list() -> String {
        Family::ALL.map(Family::name).join(", ")
    }

    /// True when the GPU engine runs this family. The config, the tensor checks and the CPU
    /// reference know every family; [`crate::plan::LoadPlan::new`] (so `Llama::load`) refuses the
    /// others with a message naming the architecture. Widen this as a family's kernels land.
    pub fn gpu_ready(self) -> bool {
        matches!(self, Family::Llama)
    }

    /// True when RoPE rotates pairs `(i, i + n_rot/2)` (llama.cpp's `LLAMA_ROPE_TYPE_NEOX`) rather
    /// than adjacent pairs `(2i, 2i+1)`.
    pub fn rope_neox(self) -> bool {
        !matches!(self, Family::Llama)
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a family adds to llama's forward pass. [`FamilyParams::default`] is llama's (every
/// feature off), so a llama config's value changes nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FamilyParams {
    /// RoPE pairs `(i, i + n_rot/2)` (NEOX) instead of adjacent ones; see [`Family::rope_neox`].
    pub rope_neox: bool,
    /// `blk.N.attn_{q,k,v}.bias` present (widths q_dim, kv_dim, kv_dim), added after each
    /// projection (Qwen2; optional in llama.cpp for every family, detected from block 0's
    /// `attn_q.bias` and then required in every block; not read for `llama`).
    pub qkv_bias: bool,
    /// `blk.N.attn_{q,k}_norm.weight` (`[head_dim]`): each head of q and of k is RMSNormed (same
    /// eps as the blocks') before RoPE (Qwen3).
    pub qk_norm: bool,
}

/// Whether block 0 holds tensor `blk.0.{suffix}`: optional tensors are detected there and then
/// required in every block by [`crate::config::Config::expected_tensors`].
fn in_block0(g: &Gguf, suffix: &str) -> bool {
    g.tensor(&format!("blk.0.{suffix}")).is_some()
}

impl FamilyParams {
    /// Reads the family-specific features of `family` from `g`, given the shapes already read.
    ///
    /// # Errors
    /// [`Error::Config`] for shapes llama.cpp's graph for the family asserts against (Qwen2/3:
    /// RoPE over the whole head; Qwen2: query width = model width), and for tensors the family may
    /// carry that this crate does not compute (`output.bias`).
    pub fn read(g: &Gguf, family: Family, d: u32, q_dim: u32, head_dim: u32, n_rot: u32) -> Result<FamilyParams> {
        let p = FamilyParams { rope_neox: family.rope_neox(), ..FamilyParams::default() };
        match family {
            Family::Llama => Ok(p),
            Family::Qwen2 | Family::Qwen3 => {
                if n_rot != head_dim {
                    return Err(Error::Config(format!("{family}: rope dims {n_rot} must equal the head dim {head_dim} (llama.cpp asserts it)")));
                }
                if family == Family::Qwen2 && q_dim != d {
                    return Err(Error::Config(format!("qwen2: heads x head dim = {q_dim} must equal the width {d} (attn_output is n_embd x n_embd)")));
                }
                if g.tensor("output.bias").is_some() {
                    return Err(Error::Config(format!("{family}: output.bias is not supported")));
                }
                let qkv_bias = in_block0(g, "attn_q.bias");
                if !qkv_bias && (in_block0(g, "attn_k.bias") || in_block0(g, "attn_v.bias")) {
                    return Err(Error::Config(format!("{family}: k or v biases without q biases are not supported")));
                }
                Ok(FamilyParams { qkv_bias, qk_norm: family == Family::Qwen3, ..p })
            }
        }
    }
}
