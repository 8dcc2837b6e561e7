//! Picking the next token on the GPU, for [`crate::llama::Llama::generate`]: the options, the
//! kernels' Rust side (`shaders/penalty.wgsl`, `shaders/pick.wgsl`, after the top-k kernel of
//! [`crate::topk`]) and [`reference_pick`], the same draw on the CPU for the tests.
//!
//! The sampling chain is llama.cpp's default order (`src/llama-sampling.cpp`, the chain
//! `common_sampler` builds): repetition penalty -> top-k -> top-p -> min-p -> temperature ->
//! draw. Candidates are at most the [`MAX_TOP_K`] likeliest tokens after the penalty, so
//! `top_k: 0` ("no limit" in llama.cpp) means those 128 here.

use bytemuck::{Pod, Zeroable};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::kernels::{Kernel, PipelineKey};
use crate::program::{Builder, Step, Variant};
use crate::topk::{TopK, MAX_TOP_K};

/// The largest block (steps between readbacks) [`GenerateOptions::block`] takes.
pub const MAX_BLOCK: u32 = 256;

/// A sampler's settings (llama.cpp's names and meanings). The defaults are llama.cpp's
/// (`common_params_sampling`): temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat
/// penalty 1 (off) over 64 ids, seed 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampler {
    /// Divides the logits before the draw; 0 picks the likeliest token (after the penalty).
    pub temperature: f32,
    /// Candidates kept: the `top_k` likeliest, at most [`MAX_TOP_K`]; 0 means [`MAX_TOP_K`].
    pub top_k: u32,
    /// Keeps the smallest prefix of the candidates whose probability (softmax over them at
    /// temperature 1) reaches this; in (0, 1], 1 keeps all.
    pub top_p: f32,
    /// Keeps candidates whose probability is at least `min_p` times the likeliest's; in [0, 1),
    /// 0 keeps all.
    pub min_p: f32,
    /// Divides positive logits and multiplies negative ones of every id among the last
    /// `repeat_window` ids of the call (once per distinct id); > 0, 1 is off.
    pub repeat_penalty: f32,
    /// Ids the penalty looks back over: the tokens given to `generate`, then its picks (a window
    /// longer than the context acts as the context's length).
    pub repeat_window: u32,
    /// Seeds the draw: the same seed, logits and positions give the same ids.
    pub seed: u32,
}

impl Default for Sampler {
    fn default() -> Sampler {
        Sampler { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05, repeat_penalty: 1.0, repeat_window: 64, seed: 0 }
    }
}

impl Sampler {
    /// Checks every value.
    ///
    /// Errors: [`Error::Input`] naming the option (`temperature`, `topK`, `topP`, `minP`,
    /// `repeatPenalty`: the JS names) when a value is not finite or out of its range.
    pub fn check(&self) -> Result<()> {
        let bad = |name: &str, v: f32, range: &str| Err(Error::Input(format!("sampler.{name} must be {range}, got {v}")));
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad("temperature", self.temperature, "a finite number >= 0");
        }
        if self.top_k > MAX_TOP_K {
            return Err(Error::Input(format!("sampler.topK must be an integer from 0 to {MAX_TOP_K} (0: the {MAX_TOP_K} likeliest), got {}", self.top_k)));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("topP", self.top_p, "in (0, 1]");
        }
        if !(self.min_p >= 0.0 && self.min_p < 1.0) {
            return bad("minP", self.min_p, "in [0, 1)");
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad("repeatPenalty", self.repeat_penalty, "a finite number > 0");
        }
        Ok(())
    }

    /// Whether the penalty changes anything.
    pub fn penalises(&self) -> bool {
        self.repeat_penalty != 1.0 && self.repeat_window > 0
    }

    /// Candidates the top-k kernel gives the pick, for `vocab` tokens (1 for a greedy pick).
    pub fn candidates(&self, vocab: u32) -> u32 {
        if self.temperature == 0.0 {
            return 1;
        }
        (if self.top_k == 0 { MAX_TOP_K } else { self.top_k }).min(vocab)
    }
}

/// Options of [`crate::llama::Llama::generate`].
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Ids to generate at most (>= 1); fewer when the context ends first (then
    /// [`StopReason::Length`]).
    pub max_tokens: u32,
    /// `None`: greedy (the likeliest token, the lower id of equal logits, as
    /// [`crate::topk::argmax`]).
    pub sampler: Option<Sampler>,
    /// Generation ends at the first of these it picks (included in the ids).
    pub stop_ids: Vec<u32>,
    /// Steps recorded and submitted together between readbacks of their ids (1 ..=
    /// [`MAX_BLOCK`]; default 16).
    pub block: u32,
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        GenerateOptions { max_tokens: 16, sampler: None, stop_ids: Vec::new(), block: 16 }
    }
}

impl GenerateOptions {
    /// Checks the options for a vocabulary of `vocab` ids.
    ///
    /// Errors: [`Error::Input`] naming `maxTokens`, `block`, `stopIds` or a sampler value.
    pub fn check(&self, vocab: u32) -> Result<()> {
        if self.max_tokens == 0 {
            return Err(Error::Input("maxTokens must be at least 1, got 0".into()));
        }
        if self.block == 0 || self.block > MAX_BLOCK {
            return Err(Error::Input(format!("block must be an integer from 1 to {MAX_BLOCK}, got {}", self.block)));
        }
        if let Some((i, id)) = self.stop_ids.iter().enumerate().find(|(_, &id)| id >= vocab) {
            return Err(Error::Input(format!("stopIds: id {id} at index {i} is out of range (vocab {vocab})")));
        }
        self.sampler.as_ref().map_or(Ok(()), Sampler::check)
    }
}

/// Why [`crate::llama::Llama::generate`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// It picked a stop id (the last id).
    Stop,
    /// It reached `max_tokens`, or the end of the context.
    Length,
    /// `on_tokens` returned false.
    Abort,
}

/// What [`crate::llama::Llama::generate`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// The picked ids, in order (a stop id last when [`StopReason::Stop`]).
    pub ids: Vec<u32>,
    /// Why it ended.
    pub stop_reason: StopReason,
}

/// `struct Gen` of `shaders/gen.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct GenParams {
    greedy: u32,
    k: u32,
    seed: u32,
    first: u32,
    top_p: f32,
    min_p: f32,
    temperature: f32,
    penalty: f32,
    window: u32,
    given: u32,
    slots: u32,
    vocab: u32,
}

/// The pick's buffers and kernels, bound at load to the model's logits, token ids and top-k.
pub struct Picker {
    penalty: Variant,
    pick: Variant,
    pick_greedy: Variant,
    params: wgpu::Buffer,
    /// `[2 MAX_BLOCK]` u32: the ids of two blocks, pick `i` of a call at `i % (2 block)`.
    pub ids: wgpu::Buffer,
    /// `[MAX_BLOCK]` [`Step`]s: a block's one-token steps, copied into the step uniform in turn.
    pub steps: wgpu::Buffer,
    /// `[ctx]` u32: the penalty's window, sequence index `s` at `s % window`.
    hist: wgpu::Buffer,
    penalises: std::cell::Cell<bool>,
    greedy: std::cell::Cell<bool>,
    /// A CPU adapter: greedy steps take `pick_greedy.wgsl` (see there).
    cpu: bool,
}

impl Picker {
    /// Allocates the buffers (a window of at most `ctx` ids) and binds the kernels (compiled on
    /// the first generation).
    pub fn build(b: &mut Builder<'_>, logits: &wgpu::Buffer, tokens: &wgpu::Buffer, topk: &TopK, ctx: u32) -> Picker {
        let params = b.uniform("generate", &GenParams::default());
        let ids = b.storage("generated ids", 2 * MAX_BLOCK as u64 * 4);
        let hist = b.storage("penalty window", ctx.max(1) as u64 * 4);
        let steps = b.gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("generation steps"),
            size: MAX_BLOCK as u64 * std::mem::size_of::<Step>() as u64,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        b.buffers.push(steps.clone());
        let step = b.step.clone();
        let penalty = b.variant(PipelineKey::plain(Kernel::Penalty), &[("g", &params), ("st", &step), ("hist", &hist), ("logits", logits)]);
        let pick = b.variant(
            PipelineKey::plain(Kernel::Pick),
            &[("g", &params), ("st", &step), ("top", &topk.out), ("tokens", tokens), ("ids", &ids), ("hist", &hist)],
        );
        let pick_greedy = b.variant(
            PipelineKey::plain(Kernel::PickGreedy),
            &[("g", &params), ("st", &step), ("logits", logits), ("tokens", tokens), ("ids", &ids), ("hist", &hist)],
        );
        Picker { penalty, pick, pick_greedy, params, ids, steps, hist, penalises: Default::default(), greedy: Default::default(), cpu: b.gpu.is_cpu() }
    }

    /// Writes a call's parameters and its window's given ids: `tokens` given at positions from
    /// `start_pos`, blocks of `block` steps, `sampler` (`None`: greedy), for a model of `cfg`'s
    /// vocabulary and context (at most `ctx` ids in the window). Returns the candidates the
    /// top-k kernel must give.
    pub fn start(&self, queue: &wgpu::Queue, tokens: &[u32], start_pos: u32, block: u32, sampler: Option<&Sampler>, cfg: &Config) -> u32 {
        let (vocab, ctx) = (cfg.vocab, cfg.ctx);
        let s = sampler.copied().unwrap_or(Sampler { temperature: 0.0, repeat_penalty: 1.0, ..Default::default() });
        let window = if s.penalises() { s.repeat_window.min(ctx) } else { 0 };
        self.penalises.set(window > 0);
        self.greedy.set(s.temperature == 0.0);
        let given = tokens.len() as u32;
        let p = GenParams {
            greedy: (s.temperature == 0.0) as u32,
            k: s.candidates(vocab),
            seed: s.seed,
            first: start_pos + given - 1,
            top_p: s.top_p,
            min_p: s.min_p,
            temperature: s.temperature,
            penalty: s.repeat_penalty,
            window,
            given,
            slots: 2 * block,
            vocab,
        };
        queue.write_buffer(&self.params, 0, bytemuck::bytes_of(&p));
        if window > 0 {
            // The last `window` given ids, each at its sequence index modulo the window.
            let mut ring = vec![0u32; window as usize];
            let from = given.saturating_sub(window);
            for s in from..given {
                ring[(s % window) as usize] = tokens[s as usize];
            }
            queue.write_buffer(&self.hist, 0, bytemuck::cast_slice(&ring));
        }
        p.k
    }

    /// A step's pick, after its forward pass in the same compute pass: the penalty (when the
    /// call's sampler has one), the top-k stages, the pick.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, topk: &TopK) {
        if self.penalises.get() {
            self.penalty.dispatch(pass, [1, 1, 1]);
        }
        if self.greedy.get() && self.cpu {
            self.pick_greedy.dispatch(pass, [1, 1, 1]);
            return;
        }
        topk.record(pass);
        self.pick.dispatch(pass, [1, 1, 1]);
    }
}

/// A 32-bit integer hash (lowbias32), as `mix32` in `shaders/pick.wgsl`.
pub fn mix32(x: u32) -> u32 {
    let mut h = x;
    h ^= h >> 16;
    h = h.wrapping_mul(0x7feb352d);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846ca68b);
    h ^= h >> 16;
    h
}

/// The draw's uniform number in [0, 1) for the logits of the token at position `pos`: 24 bits
/// of a hash of `(seed, pos)`, so that it depends on neither the block size nor the call.
pub fn draw(seed: u32, pos: u32) -> f64 {
    (mix32(mix32(seed ^ 0x9e3779b9).wrapping_add(pos)) >> 8) as f64 / (1u32 << 24) as f64
}

/// The CPU reference of one pick: `logits` (one row of `vocab`), `window` the ids the penalty
/// looks at (the last `repeat_window` of the sequence), `pos` the position of the token whose
/// logits these are. Returns the id and the margin: the smallest distance, in probability or
/// logit, between a quantity the choice compared and the bound it was compared to (the top-p
/// mass against `top_p`, a logit against the min-p bound, a cumulative probability against the
/// draw); the GPU, rounding differently, may choose otherwise only where that margin is tiny.
/// The maths is in f64 after the penalty (which is in f32, as on the GPU).
pub fn reference_pick(logits: &[f32], window: &[u32], s: &Sampler, pos: u32) -> (u32, f64) {
    let mut l = logits.to_vec();
    if s.penalises() {
        let mut seen = std::collections::HashSet::new();
        for &id in window {
            if seen.insert(id) {
                let x = l[id as usize];
                l[id as usize] = if x > 0.0 { x / s.repeat_penalty } else { x * s.repeat_penalty };
            }
        }
    }
    let mut order: Vec<u32> = (0..l.len() as u32).filter(|&i| !l[i as usize].is_nan()).collect();
    order.sort_by(|&a, &b| l[b as usize].total_cmp(&l[a as usize]).then(a.cmp(&b)));
    if s.temperature == 0.0 {
        return (order[0], f64::INFINITY);
    }
    order.truncate(s.candidates(l.len() as u32) as usize);
    let c: Vec<f64> = order.iter().map(|&i| l[i as usize] as f64).collect();
    let mut margin = f64::INFINITY;
    let mut keep = c.len();
    if s.top_p < 1.0 {
        let sum: f64 = c.iter().map(|x| (x - c[0]).exp()).sum();
        let mut cum = 0.0;
        for (j, x) in c.iter().enumerate() {
            cum += (x - c[0]).exp() / sum;
            margin = margin.min((cum - s.top_p as f64).abs());
            if cum >= s.top_p as f64 {
                keep = j + 1;
                break;
            }
        }
    }
    if s.min_p > 0.0 {
        let lo = c[0] + (s.min_p as f64).ln();
        let m = c[..keep].iter().skip(1).take_while(|&&x| x >= lo).count() + 1;
        for x in &c[1..keep] {
            margin = margin.min((x - lo).abs());
        }
        keep = m;
    }
    let t = s.temperature as f64;
    let total: f64 = c[..keep].iter().map(|x| ((x - c[0]) / t).exp()).sum();
    let u = draw(s.seed, pos);
    let mut cum = 0.0;
    for (j, x) in c[..keep].iter().enumerate() {
        cum += ((x - c[0]) / t).exp() / total;
        margin = margin.min((cum - u).abs());
        if cum > u {
            return (order[j], margin);
        }
    }
    (order[keep - 1], margin)
}
