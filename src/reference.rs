//! A plain-Rust f64 forward pass over exactly dequantised weights: the independent CPU reference
//! the GPU kernels are tested against (same maths as the seed and `../shared/reference`: RMSNorm,
//! adjacent-pair RoPE, causal GQA softmax attention, SwiGLU, MoE top-k with softmax over the
//! selected router logits), and every [`crate::family`] as llama.cpp computes it (Qwen2's q/k/v
//! biases, Qwen3's per-head q/k RMSNorm before RoPE, NEOX RoPE; tests/families.rs checks it
//! against llama.cpp's logits). Slow and simple on purpose; never used by the engine. With
//! `cfg.kv` = [`KvType::F16`] the keys and values are rounded to f16 (to nearest, ties to even)
//! as they enter the cache, the one rounding an f16 cache adds.

use crate::config::{Config, KvType};
use crate::error::{Error, Result};
use crate::ggml;
use crate::gguf::{ByteSource, Gguf};

/// A dequantised model and its KV cache.
pub struct Reference {
    /// The config it was built with.
    pub cfg: Config,
    t: std::collections::HashMap<String, Vec<f64>>,
    kc: Vec<Vec<f64>>,
    vc: Vec<Vec<f64>>,
}

/// `y = W x` for row-major `W [rows][x.len()]`.
pub fn matvec(w: &[f64], x: &[f64]) -> Vec<f64> {
    w.chunks_exact(x.len()).map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
}

/// RMSNorm: `x / sqrt(mean(x^2) + eps) * w`.
pub fn rmsnorm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(a, b)| a * inv * b).collect()
}

/// SiLU(g) * u.
pub fn swiglu(g: &[f64], u: &[f64]) -> Vec<f64> {
    g.iter().zip(u).map(|(a, b)| a / (1.0 + (-a).exp()) * b).collect()
}

/// GELU(g) * u, GELU in its tanh approximation `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`
/// (Hendrycks & Gimpel 2016; the form llama.cpp's `ggml_gelu` computes).
pub fn geglu(g: &[f64], u: &[f64]) -> Vec<f64> {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    g.iter().zip(u).map(|(x, b)| 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh()) * b).collect()
}

/// Rotates adjacent pairs of each `head_dim` head in place at position `pos`, the first `n_rot`
/// dims only, with the given per-pair frequencies.
pub fn rope(x: &mut [f64], head_dim: usize, freqs: &[f64], pos: u32) {
    for head in x.chunks_exact_mut(head_dim) {
        for (j, f) in freqs.iter().enumerate() {
            let (s, c) = (pos as f64 * f).sin_cos();
            let (a, b) = (head[2 * j], head[2 * j + 1]);
            head[2 * j] = a * c - b * s;
            head[2 * j + 1] = a * s + b * c;
        }
    }
}

/// Rotates NEOX pairs `(j, j + n_rot/2)` of each `head_dim` head in place at position `pos`
/// (llama.cpp's `LLAMA_ROPE_TYPE_NEOX`; `n_rot` = 2 * `freqs.len()`), dims past `n_rot` untouched.
pub fn rope_neox(x: &mut [f64], head_dim: usize, freqs: &[f64], pos: u32) {
    let half = freqs.len();
    for head in x.chunks_exact_mut(head_dim) {
        for (j, f) in freqs.iter().enumerate() {
            let (s, c) = (pos as f64 * f).sin_cos();
            let (a, b) = (head[j], head[j + half]);
            head[j] = a * c - b * s;
            head[j + half] = a * s + b * c;
        }
    }
}

/// RMSNorm of each `w.len()`-wide head of `x` in place, with the same weights for every head
/// (Qwen3's q and k norms).
pub fn rmsnorm_heads(x: &mut [f64], w: &[f64], eps: f64) {
    for head in x.chunks_exact_mut(w.len()) {
        let y = rmsnorm(head, w, eps);
        head.copy_from_slice(&y);
    }
}

fn add_in_place(x: &mut [f64], y: &[f64]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Top-k of router logits (ties to the lower index), in ascending expert order, with gates = the
/// softmax over the selected logits.
pub fn moe_select(r: &[f64], k: usize) -> Vec<(usize, f64)> {
    let mut idx: Vec<usize> = (0..r.len()).collect();
    idx.sort_by(|&a, &b| r[b].partial_cmp(&r[a]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b)));
    let mut pick: Vec<usize> = idx[..k].to_vec();
    pick.sort();
    let mx = pick.iter().map(|&e| r[e]).fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = pick.iter().map(|&e| (r[e] - mx).exp()).sum();
    pick.into_iter().map(|e| (e, (r[e] - mx).exp() / z)).collect()
}

impl Reference {
    /// Dequantises every tensor the config needs.
    pub fn load(g: &Gguf, src: &(impl ByteSource + ?Sized), cfg: &Config) -> Result<Reference> {
        let mut t = std::collections::HashMap::new();
        for (name, dims) in cfg.expected_tensors() {
            let n: u64 = dims.iter().product();
            let info = g.tensor(&name).ok_or_else(|| Error::MissingTensor(name.clone()))?;
            let mut raw = vec![0u8; info.n_bytes as usize];
            src.read_at(info.offset, &mut raw)?;
            let mut out = vec![0f32; n as usize];
            ggml::dequantize(info.ggml_type, &raw, &mut out)?;
            t.insert(name, out.into_iter().map(f64::from).collect());
        }
        let kv = (cfg.ctx * cfg.kv_dim()) as usize;
        Ok(Reference { cfg: cfg.clone(), t, kc: vec![vec![0.0; kv]; cfg.n_layers as usize], vc: vec![vec![0.0; kv]; cfg.n_layers as usize] })
    }

    fn w(&self, name: &str) -> &[f64] {
        &self.t[name]
    }

    /// One token at position `pos`; returns the logits.
    pub fn step(&mut self, token: u32, pos: u32) -> Vec<f64> {
        let c = self.cfg.clone();
        let d = c.d as usize;
        let factors: Option<Vec<f32>> = c.rope_factors().map(|name| self.w(name).iter().map(|&x| x as f32).collect());
        let freqs = crate::rope::frequencies(&c, factors.as_deref());
        // Sliding-window layers rotate with their own base and no scaling (llama.cpp's *_swa).
        let freqs_swa = crate::rope::frequencies(&c.swa_rope(), None);
        let embd_scale = c.family.embd_scale as f64;
        let mut x: Vec<f64> = self.w("token_embd.weight")[token as usize * d..(token as usize + 1) * d].iter().map(|v| v * embd_scale).collect();
        for l in 0..c.n_layers as usize {
            let b = |s: &str| format!("blk.{l}.{s}.weight");
            let xn = rmsnorm(&x, self.w(&b("attn_norm")), c.eps as f64);
            let swa = c.family.is_swa(l as u32);
            let mut o = self.attention(l, &xn, pos, if swa { &freqs_swa } else { &freqs });
            if c.family.post_norms {
                o = rmsnorm(&o, self.w(&b("post_attention_norm")), c.eps as f64);
            }
            let residual_scale = c.family.residual_scale as f64;
            o.iter_mut().for_each(|v| *v *= residual_scale);
            add_in_place(&mut x, &o);
            let xn = rmsnorm(&x, self.w(&b("ffn_norm")), c.eps as f64);
            let mut h = self.ffn(l, &xn);
            if c.family.post_norms {
                h = rmsnorm(&h, self.w(&b("post_ffw_norm")), c.eps as f64);
            }
            h.iter_mut().for_each(|v| *v *= residual_scale);
            add_in_place(&mut x, &h);
        }
        let xn = rmsnorm(&x, self.w("output_norm.weight"), c.eps as f64);
        let out = if c.tied_output { "token_embd.weight" } else { "output.weight" };
        let logit_scale = c.family.logit_scale as f64;
        let mut logits: Vec<f64> = matvec(self.w(out), &xn).into_iter().map(|z| z / logit_scale).collect();
        let cap = c.family.final_softcap as f64;
        if cap > 0.0 {
            logits.iter_mut().for_each(|z| *z = cap * (*z / cap).tanh());
        }
        logits
    }

    /// Layer `l`'s attention block on the normed input `xn` at position `pos` (its key and value
    /// enter the cache): projections (+ biases), per-head q/k norms, RoPE with `freqs`, causal
    /// GQA softmax over the cached positions (within the sliding window on local layers), the
    /// output projection.
    fn attention(&mut self, l: usize, xn: &[f64], pos: u32, freqs: &[f64]) -> Vec<f64> {
        let c = &self.cfg;
        let (hd, kvd) = (c.head_dim as usize, c.kv_dim() as usize);
        let b = |s: &str| format!("blk.{l}.{s}.weight");
        let (mut q, mut k, mut v) = if c.family.fused_qkv {
            let qkv = matvec(self.w(&b("attn_qkv")), xn);
            let (q, rest) = qkv.split_at(c.q_dim() as usize);
            let (k, v) = rest.split_at(kvd);
            (q.to_vec(), k.to_vec(), v.to_vec())
        } else {
            (matvec(self.w(&b("attn_q")), xn), matvec(self.w(&b("attn_k")), xn), matvec(self.w(&b("attn_v")), xn))
        };
        if c.family.qkv_bias {
            for (y, name) in [(&mut q, "attn_q"), (&mut k, "attn_k"), (&mut v, "attn_v")] {
                add_in_place(y, self.w(&format!("blk.{l}.{name}.bias")));
            }
        }
        if c.family.qk_norm {
            rmsnorm_heads(&mut q, self.w(&b("attn_q_norm")), c.eps as f64);
            rmsnorm_heads(&mut k, self.w(&b("attn_k_norm")), c.eps as f64);
        }
        let rotate = if c.family.rope_neox { rope_neox } else { rope };
        let rotates = c.family.uses_rope(l as u32);
        if rotates {
            rotate(&mut q, hd, freqs, pos);
            rotate(&mut k, hd, freqs, pos);
        }
        let m = c.family.rope_attn_factor as f64;
        if rotates && m != 1.0 {
            // ggml scales cos and sin, so the rotated dims only.
            for head in q.chunks_exact_mut(hd).chain(k.chunks_exact_mut(hd)) {
                head[..c.n_rot as usize].iter_mut().for_each(|x| *x *= m);
            }
        }
        let p = pos as usize;
        let kv_type = c.kv;
        let stored = |x: &f64| match kv_type {
            KvType::F32 => *x,
            KvType::F16 => half::f16::from_f64(*x).to_f64(),
        };
        for (dst, src) in [(&mut self.kc[l], &k), (&mut self.vc[l], &v)] {
            for (a, b) in dst[p * kvd..(p + 1) * kvd].iter_mut().zip(src) {
                *a = stored(b);
            }
        }
        let c = &self.cfg;
        let scale = c.family.attn_scale.map_or(1.0 / (hd as f64).sqrt(), f64::from);
        // llama.cpp's standard window: key position t is visible from p when p - t < window.
        let first = if c.family.is_swa(l as u32) { (p + 1).saturating_sub(c.family.sliding_window as usize) } else { 0 };
        let group = (c.n_heads / c.n_kv_heads) as usize;
        let mut att = vec![0.0; q.len()];
        for h in 0..c.n_heads as usize {
            let ko = (h / group) * hd;
            let qh = &q[h * hd..(h + 1) * hd];
            let cap = c.family.attn_softcap as f64;
            let capped = |s: f64| if cap > 0.0 { cap * (s / cap).tanh() } else { s };
            let scores: Vec<f64> = (first..=p).map(|t| capped(qh.iter().zip(&self.kc[l][t * kvd + ko..]).map(|(a, b)| a * b).sum::<f64>() * scale)).collect();
            let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
            let z: f64 = e.iter().sum();
            for (t, w) in (first..=p).zip(&e) {
                for i in 0..hd {
                    att[h * hd + i] += w / z * self.vc[l][t * kvd + ko + i];
                }
            }
        }
        matvec(self.w(&b("attn_output")), &att)
    }

    /// Layer `l`'s feed-forward block on the normed input `xn`: the gated FFN (SiLU or GELU-tanh)
    /// or the MoE's selected experts weighted by their gates.
    fn ffn(&self, l: usize, xn: &[f64]) -> Vec<f64> {
        let c = &self.cfg;
        let b = |s: &str| format!("blk.{l}.{s}.weight");
        let gated = |g: Vec<f64>, u: Vec<f64>| if c.family.gelu { geglu(&g, &u) } else { swiglu(&g, &u) };
        if c.family.fused_gate_up {
            let gu = matvec(self.w(&b("ffn_up")), xn);
            let (g, u) = gu.split_at(c.ff as usize);
            return matvec(self.w(&b("ffn_down")), &gated(g.to_vec(), u.to_vec()));
        }
        if !c.is_moe() {
            return matvec(self.w(&b("ffn_down")), &gated(matvec(self.w(&b("ffn_gate")), xn), matvec(self.w(&b("ffn_up")), xn)));
        }
        let r = matvec(self.w(&b("ffn_gate_inp")), xn);
        let (ff, d) = (c.ff as usize, c.d as usize);
        let mut out = vec![0.0; d];
        for (e, gate) in moe_select(&r, c.topk as usize) {
            let wg = &self.w(&b("ffn_gate_exps"))[e * ff * d..(e + 1) * ff * d];
            let wu = &self.w(&b("ffn_up_exps"))[e * ff * d..(e + 1) * ff * d];
            let wd = &self.w(&b("ffn_down_exps"))[e * d * ff..(e + 1) * d * ff];
            let h = gated(matvec(wg, xn), matvec(wu, xn));
            for (o, y) in out.iter_mut().zip(matvec(wd, &h)) {
                *o += gate * y;
            }
        }
        out
    }
}
