//! The RoPE cos/sin table (Su et al. 2021, "RoFormer"), as llama.cpp's `ggml_rope_ext` in normal
//! (adjacent-pair) mode: pair j of a head rotates by `pos * freq_scale * theta^(-2j/n_rot) / f_j`,
//! where `freq_scale` is 1 / the linear scaling factor and `f_j` the Llama-3 `rope_freqs` factor.

use crate::config::Config;

/// The rotation frequency of each pair `j < n_rot / 2`, in radians per position (f64).
pub fn frequencies(cfg: &Config, factors: Option<&[f32]>) -> Vec<f64> {
    let n_rot = cfg.n_rot as f64;
    (0..cfg.n_rot / 2)
        .map(|j| {
            let f = (cfg.theta as f64).powf(-2.0 * j as f64 / n_rot) / cfg.rope_scale as f64;
            match factors {
                Some(fs) => f / fs[j as usize] as f64,
                None => f,
            }
        })
        .collect()
}

/// `[positions][n_rot / 2][cos, sin]` as f32, angles computed in f64 so that late positions keep
/// their precision; both scaled by LongRoPE's magnitude factor
/// ([`crate::FamilyParams::rope_attn_factor`], 1 elsewhere), as ggml's RoPE applies it.
pub fn table(cfg: &Config, factors: Option<&[f32]>, positions: u32) -> Vec<f32> {
    let freqs = frequencies(cfg, factors);
    let m = cfg.family.rope_attn_factor as f64;
    let mut out = Vec::with_capacity(positions as usize * freqs.len() * 2);
    for pos in 0..positions {
        for f in &freqs {
            let a = pos as f64 * f;
            out.push((m * a.cos()) as f32);
            out.push((m * a.sin()) as f32);
        }
    }
    out
}
