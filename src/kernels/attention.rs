//! Attention's kernels (`shaders/attention*.wgsl`): the limits and workgroup shapes their
//! WGSL is composed for. Which one a batch runs, and with what, is [`crate::attention`]'s.

use super::*;

/// Most key splits of one attention dispatch (the combine kernels hold 128 splits' weights in
/// workgroup memory): 128, so that decode through the combine dispatch at a 4608-key context
/// walks one 64-key chunk per workgroup (73 splits) instead of two (where attention merges its
/// own splits, [`crate::attention::splits`] gives fewer).
pub const MAX_SPLITS: u32 = 128;
const _: () = assert!(MAX_SPLITS <= 128);

/// The largest head dim whose combine writes the quantised output ([`Geometry::Combine`]): its
/// workgroup keeps the head's output row.
pub const COMBINE_QUANT_MAX_HD: u32 = 512;

/// Split groups of a one-token attention kernel's merge with `threads` threads and `heads` query
/// heads of `head_dim`: as many groups of a thread per 4 dims of the heads as the threads hold,
/// at least 1 (`attention_decode_wide.wgsl`'s; [`crate::kernels::merge_groups`]).
pub fn merge_split_groups(head_dim: u32, heads: u32, threads: u32) -> u32 {
    (threads / (heads * head_dim / 4).max(1)).max(1)
}

/// Threads a workgroup of `shaders/attention_decode_wide.wgsl` for `head_dim` and chunks of
/// `keys` keys (64 or 128): 8 of a chunk's key vectors and 8 of its value vectors each
/// (`head_dim` x `keys` / 32), at least `keys`.
pub fn wide_threads(head_dim: u32, keys: u32) -> u32 {
    (head_dim * keys / 32).max(keys)
}

/// Split groups of the one-token attention's merge of its key splits (`MG` in
/// `shaders/attention_decode_io.wgsl`): as many groups of a thread per 4 dims of the
/// workgroup's heads as `attention_decode_wide.wgsl`'s threads hold, else 1: a long context's
/// splits are then one round of loads, not several in series. `attention_decode.wgsl`'s 128
/// threads would take 4 groups at head dim 64 and lost with them, so it keeps 1.
pub fn merge_groups(key: &PipelineKey) -> u32 {
    match key.geometry {
        Geometry::AttentionDecode { head_dim, heads, keys, .. } if key.kernel == Kernel::AttentionDecodeWide => {
            merge_split_groups(head_dim, heads, wide_threads(head_dim, keys))
        }
        _ => 1,
    }
}

/// The `//@if` constants of a one-token attention key ([`Geometry::AttentionDecode`]).
pub(super) fn decode_consts(key: &PipelineKey) -> Vec<(&'static str, u32)> {
    let Geometry::AttentionDecode { kv_f16, rope, sg, v_cached, combine, quant, prefetch, .. } = key.geometry else {
        unreachable!("a one-token attention key")
    };
    let combine = rope && combine;
    vec![
        ("MGROUPS", (merge_groups(key) > 1) as u32),
        ("KV16", kv_f16 as u32),
        ("ROPE", rope as u32),
        ("SG", sg),
        ("VCACHED", (rope && v_cached) as u32),
        ("COMBINE", combine as u32),
        ("QUANT", (combine && quant) as u32),
        ("PREFETCH", prefetch as u32),
    ]
}
