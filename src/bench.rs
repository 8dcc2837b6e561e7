//! The benchmark harness behind `webgpu-llama bench`: load time, prefill and decode throughput
//! over repeats (median and spread), dispatches per token, weight bytes read per decoded token and
//! the bandwidth that implies, and GPU memory allocated. Native only (wall-clock timing).

use std::time::Instant;

use crate::config::{Config, KvType};
use crate::error::Result;
use crate::gguf::Gguf;
use crate::gpu::Gpu;
use crate::llama::{Llama, LoadOptions};
use crate::weights::TensorSource;

/// The commit this crate was built from ([`BenchReport::commit`]; `build.rs`).
pub const COMMIT: &str = env!("WEBGPU_LLAMA_COMMIT");

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Prompt length for the prefill measurement (pp N).
    pub prompt: u32,
    /// Tokens decoded one at a time, each with its logits read back (tg M).
    pub gen: u32,
    /// Tokens already in the KV cache before the timed prefill (llama-bench's `-d`): prefill
    /// and decode are then measured at that depth.
    pub depth: u32,
    /// KV-cache length (default: prompt + gen).
    pub ctx: Option<u32>,
    /// Repeats of the prefill + decode measurement.
    pub repeats: u32,
    /// The GPU's peak memory bandwidth in GB/s (its datasheet's), for the bandwidth bound.
    pub peak_gbs: Option<f64>,
    /// Also time every kernel of one decode step (at position `prompt`) and of one prefill batch
    /// (timestamp queries, where the adapter has them).
    pub profile: bool,
    /// The KV cache's element type.
    pub kv: KvType,
    /// Decode reading back only the top k of each token's logits, chosen on the GPU
    /// (`Llama::submit_top_k`), instead of all of them with the argmax on the CPU.
    pub top_k: Option<u32>,
    /// With all logits: copy them out of the readback buffer (`Llama::read`, as `forward`
    /// returns them) before the argmax, instead of reading them in place (`Llama::read_with`).
    pub copy_logits: bool,
    /// Decode as llama-bench's tg does (`test_gen` in llama.cpp's `tools/llama-bench`): each
    /// next token a pseudo-random id, not chosen from the logits, which are still read back and
    /// mapped every token (llama-bench copies them to host memory and never reads them). Off:
    /// the next token is the argmax of the logits (or the first of the top k), a greedy loop.
    /// Not with `top_k` or `copy_logits` ([`run`] rejects them).
    pub random_next: bool,
    /// Decode through `Llama::generate` in blocks of this many steps (next tokens picked on the
    /// GPU, greedily, the ids read back once a block) instead of a loop of forwards. Not with
    /// `top_k`, `copy_logits` or `random_next`.
    pub generate: Option<u32>,
}

/// One kernel's share of a profiled batch: the dispatches with the same pipeline label.
#[derive(Debug, Clone, Default)]
pub struct ProfileRow {
    /// Pipeline label, e.g. `matvec Q4_K tpr16 x1`.
    pub label: String,
    /// Dispatches.
    pub calls: u32,
    /// GPU seconds, summed.
    pub seconds: f64,
    /// Bytes moved (estimate: weights once, activations, KV cache), summed.
    pub bytes: u64,
}

/// A profiled batch.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// What it is, e.g. `decode at 512`.
    pub phase: String,
    /// Tokens in the batch.
    pub tokens: u32,
    /// Per kernel label, slowest first.
    pub rows: Vec<ProfileRow>,
    /// GPU seconds of the whole batch in one compute pass (as decode and prefill run it).
    pub one_pass: f64,
}

impl Profile {
    fn of(phase: String, tokens: u32, list: Vec<(String, f64, u64)>, one_pass: f64) -> Profile {
        let mut rows: Vec<ProfileRow> = Vec::new();
        for (label, t, b) in list {
            let i = rows.iter().position(|r| r.label == label).unwrap_or_else(|| {
                rows.push(ProfileRow { label, ..Default::default() });
                rows.len() - 1
            });
            rows[i].calls += 1;
            rows[i].seconds += t;
            rows[i].bytes += b;
        }
        rows.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        Profile { phase, tokens, rows, one_pass }
    }

    /// Total GPU seconds.
    pub fn seconds(&self) -> f64 {
        self.rows.iter().map(|r| r.seconds).sum()
    }

    /// Total bytes moved.
    pub fn bytes(&self) -> u64 {
        self.rows.iter().map(|r| r.bytes).sum()
    }

    /// The table: per kernel calls, microseconds, share of the batch, GB/s and share of the
    /// bandwidth bound; then the total and the per-layer average.
    pub fn table(&self, peak_gbs: Option<f64>, layers: u32) -> String {
        let mut out = format!("profile: {} ({} tokens), GPU time per kernel (timestamp queries, one pass per dispatch)\n", self.phase, self.tokens);
        out += &format!("  {:<40} {:>6} {:>10} {:>6} {:>9} {:>7}\n", "kernel", "calls", "us", "share", "GB/s", "bound");
        let total = self.seconds();
        let line = |label: &str, calls: u32, t: f64, bytes: u64| {
            let gbs = bytes as f64 / t.max(1e-12) / 1e9;
            let bound = peak_gbs.map_or("-".to_string(), |p| format!("{:.1}%", 100.0 * gbs / p));
            format!("  {label:<40} {calls:>6} {:>10.1} {:>5.1}% {gbs:>9.1} {bound:>7}\n", t * 1e6, 100.0 * t / total.max(1e-12))
        };
        for r in &self.rows {
            out += &line(&r.label, r.calls, r.seconds, r.bytes);
        }
        let calls = self.rows.iter().map(|r| r.calls).sum();
        out += &line("total", calls, total, self.bytes());
        out += &line("per layer (total / layers)", calls / layers.max(1), total / layers.max(1) as f64, self.bytes() / layers.max(1) as u64);
        out += &line("whole batch in one pass (as it runs)", calls, self.one_pass, self.bytes());
        out
    }
}

/// Median and spread of one measurement.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stat {
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Stat {
    fn of(mut v: Vec<f64>) -> Stat {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Stat { median, min: v[0], max: v[n - 1] }
    }
}

/// The figures of one benchmark run.
#[derive(Debug, Clone, Default)]
pub struct BenchReport {
    /// Adapter description.
    pub adapter: String,
    /// Seconds from parsed GGUF to a ready model (upload included, GPU idle at the end).
    pub load_s: f64,
    /// Prefill tokens per second.
    pub prefill_tps: Stat,
    /// Decode tokens per second.
    pub decode_tps: Stat,
    /// CPU milliseconds per decoded token spent recording and submitting its command buffer
    /// (`Llama::submit`), median over repeats: when close to ms/token, decode is CPU-bound.
    pub encode_ms: f64,
    /// CPU milliseconds per decoded token from the step's submission until its logits (or top k)
    /// are read, median over repeats (the GPU's time plus the readback).
    pub wait_ms: f64,
    /// CPU milliseconds per decoded token picking the next token (argmax over the logits, or the
    /// first of the top k), median over repeats.
    pub pick_ms: f64,
    /// CPU milliseconds per decoded token of [`BenchReport::encode_ms`] spent recording the next
    /// step ahead (while the GPU runs this one), median over repeats.
    pub ahead_ms: f64,
    /// The top-k readout decode used, if any ([`BenchOptions::top_k`]).
    pub top_k: Option<u32>,
    /// Decoded tokens whose step took its inputs from a staging slot, and all decoded tokens
    /// (timed repeats; [`Llama::staged_steps`]).
    pub staged: (u64, u64),
    /// See [`BenchOptions::copy_logits`].
    pub copy_logits: bool,
    /// See [`BenchOptions::random_next`].
    pub random_next: bool,
    /// See [`BenchOptions::generate`].
    pub generate: Option<u32>,
    /// The kernels hollow, or one of them ([`crate::lab::Hollow`]): the figures are the step's
    /// floor, or the step without that kernel, not the model's speed.
    #[cfg(feature = "lab")]
    pub hollow: crate::lab::Hollow,
    /// The commit the binary was built from (`git rev-parse --short HEAD` at build time;
    /// "unknown" without git).
    pub commit: &'static str,
    /// The device's facts.
    pub caps: crate::gpu::Caps,
    /// Whether the CPU adapters' policy was in force ([`Gpu::is_cpu`]).
    pub cpu_policy: bool,
    /// The on/off choices in force.
    pub switches: crate::gpu::Switches,
    /// The laboratory's knobs set (`lab` builds: `--set`), as `(key, value)`.
    pub knobs: Vec<(&'static str, String)>,
    /// Dispatches per decoded token.
    pub dispatches_per_token: usize,
    /// Weight bytes read per decoded token (the embedding row, every matrix, top-k of E experts).
    pub weight_bytes_per_token: u64,
    /// GPU bytes allocated by the model (weights, KV cache, activations).
    pub gpu_bytes: u64,
    /// Weight bytes on the GPU and in the file.
    pub weight_bytes: (u64, u64),
    /// Prompt and generated lengths.
    pub prompt: u32,
    /// See `prompt`.
    pub gen: u32,
    /// KV-cache depth the prefill and decode were measured at.
    pub depth: u32,
    /// Peak bandwidth given, GB/s.
    pub peak_gbs: Option<f64>,
    /// Kernel profiles (with [`BenchOptions::profile`]).
    pub profiles: Vec<Profile>,
    /// Layers (for the per-layer profile line).
    pub layers: u32,
    /// The KV cache's element type.
    pub kv: KvType,
}

impl BenchReport {
    /// Implied weight bandwidth at the median decode speed, GB/s.
    pub fn decode_gbs(&self) -> f64 {
        self.weight_bytes_per_token as f64 * self.decode_tps.median / 1e9
    }

    /// Decode tokens per second if weight reads ran at the peak bandwidth.
    pub fn bandwidth_bound_tps(&self) -> Option<f64> {
        self.peak_gbs.map(|p| p * 1e9 / self.weight_bytes_per_token as f64)
    }

    /// One JSON object (hand-written: flat numbers and one string).
    pub fn to_json(&self) -> String {
        let s = |x: &Stat| format!("{{\"median\":{:.3},\"min\":{:.3},\"max\":{:.3}}}", x.median, x.min, x.max);
        let lab = format!("{{{}}}", self.knobs.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect::<Vec<_>>().join(","));
        format!(
            "{{\"adapter\":{:?},\"load_s\":{:.4},\"prompt\":{},\"gen\":{},\"prefill_tps\":{},\"decode_tps\":{},\"ms_per_token\":{:.4},\"encode_ms_per_token\":{:.4},\"wait_ms_per_token\":{:.4},\"pick_ms_per_token\":{:.4},\"ahead_ms_per_token\":{:.4},\"top_k\":{},\"copy_logits\":{},\"random_next\":{},\"staged_tokens\":{},\"decoded_tokens\":{},\"dispatches_per_token\":{},\"weight_bytes_per_token\":{},\"decode_gbs\":{:.2},\"bandwidth_bound_tps\":{},\"gpu_bytes\":{},\"weights_on_gpu\":{},\"file_tensor_bytes\":{},\"kv\":\"{}\",\"commit\":\"{}\",\"caps\":{},\"cpu_policy\":{},\"switches\":{},\"lab\":{}}}",
            self.adapter, self.load_s, self.prompt, self.gen, s(&self.prefill_tps), s(&self.decode_tps),
            1e3 / self.decode_tps.median, self.encode_ms, self.wait_ms, self.pick_ms, self.ahead_ms, self.top_k.map_or("null".to_string(), |k| k.to_string()), self.copy_logits, self.random_next, self.staged.0, self.staged.1, self.dispatches_per_token, self.weight_bytes_per_token, self.decode_gbs(),
            self.bandwidth_bound_tps().map_or("null".into(), |b| format!("{b:.1}")),
            self.gpu_bytes, self.weight_bytes.0, self.weight_bytes.1, self.kv,
            self.commit, caps_json(&self.caps), self.cpu_policy, switches_json(&self.switches),
            lab
        )
    }
}

/// `caps` as a JSON object (its limits: those that pick kernels and split tensors).
pub fn caps_json(c: &crate::gpu::Caps) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "null".into());
    let l = &c.limits;
    format!(
        "{{\"cpu\":{},\"swiftshader\":{},\"vulkan\":{},\"subgroup\":{},\"wgsl_subgroups\":{},\"size_control\":{},\"coop\":{},\"packed_dot\":{},\"limits\":{{\"max_storage_buffer_binding_size\":{},\"max_buffer_size\":{},\"max_compute_workgroup_storage_size\":{},\"max_compute_invocations_per_workgroup\":{},\"max_storage_buffers_per_shader_stage\":{}}}}}",
        c.cpu,
        c.swiftshader,
        c.vulkan,
        opt(c.subgroup.map(|s| s.to_string())),
        c.wgsl_subgroups,
        c.size_control,
        c.coop,
        opt(c.packed_dot.map(|p| p.to_string())),
        l.max_storage_buffer_binding_size,
        l.max_buffer_size,
        l.max_compute_workgroup_storage_size,
        l.max_compute_invocations_per_workgroup,
        l.max_storage_buffers_per_shader_stage
    )
}

/// `s` as a JSON object (`null`: the policy's choice).
pub fn switches_json(s: &crate::gpu::Switches) -> String {
    let o = |v: Option<bool>| v.map_or("null".to_string(), |b| b.to_string());
    format!(
        "{{\"coop\":{},\"int_dot\":{},\"wide\":{},\"fuse\":{},\"quant_out\":{},\"decode_attention\":{},\"tiled_attention\":{},\"attn_wide\":{},\"v_to_cache\":{},\"fused_combine\":{},\"spin_wait\":{},\"checked_shaders\":{},\"reduce_subgroups\":{},\"cpu_subgroups\":{},\"cpu_kernels\":{}}}",
        o(s.coop),
        o(s.int_dot),
        o(s.wide),
        o(s.fuse),
        o(s.quant_out),
        o(s.decode_attention),
        s.tiled_attention,
        o(s.attn_wide),
        o(s.v_to_cache),
        o(s.fused_combine),
        o(s.spin_wait),
        s.checked_shaders,
        s.reduce_subgroups,
        s.cpu_subgroups,
        s.cpu_kernels
    )
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = |x: &Stat| format!("{:.1} (min {:.1}, max {:.1})", x.median, x.min, x.max);
        writeln!(f, "adapter: {}", self.adapter)?;
        writeln!(f, "load: {:.3} s", self.load_s)?;
        let at = if self.depth > 0 { format!(" at depth {}", self.depth) } else { String::new() };
        writeln!(f, "prefill pp{}{at}: {} tok/s", self.prompt, st(&self.prefill_tps))?;
        writeln!(f, "decode tg{}{at}: {} tok/s, {:.3} ms/token", self.gen, st(&self.decode_tps), 1e3 / self.decode_tps.median)?;
        let all = if self.copy_logits {
            "all logits read back, copied out, argmax on the CPU"
        } else {
            "all logits read back, argmax on the CPU over the mapped buffer"
        };
        let readout = match self.top_k {
            _ if self.generate.is_some() => format!("generate: next tokens picked on the GPU, ids read back every {} steps", self.generate.unwrap_or(0)),
            _ if self.random_next => "all logits read back and mapped, not read; the next token pseudo-random (llama-bench's tg)".to_string(),
            Some(k) => format!("top {k} read back (chosen on the GPU)"),
            None => all.to_string(),
        };
        writeln!(f, "decode readout: {readout}")?;
        if !self.knobs.is_empty() {
            writeln!(f, "lab knobs: {}", self.knobs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "))?;
        }
        #[cfg(feature = "lab")]
        match self.hollow {
            crate::lab::Hollow::Off => {}
            crate::lab::Hollow::Only(k) => writeln!(
                f,
                "kernels: {} hollow (over its planned grids; it returns at entry, the others run): against the same step with it run, what it costs as the step runs; not the model's speed",
                k.name()
            )?,
            h => writeln!(
                f,
                "kernels: hollow ({}; each returns at entry): these figures are the step's dispatch floor, not the model's speed",
                if h == crate::lab::Hollow::One { "one workgroup a dispatch" } else { "each dispatch over its planned grid" }
            )?,
        }
        // (generate's steps are neither submitted nor read one by one.)
        if self.generate.is_none() {
            writeln!(f, "CPU record+submit per decoded token: {:.3} ms ({:.3} ms of it recording the next step ahead)", self.encode_ms, self.ahead_ms)?;
            writeln!(f, "decoded tokens with their inputs staged: {} of {}", self.staged.0, self.staged.1)?;
            writeln!(f, "wait for the readback per decoded token: {:.3} ms; next-token pick: {:.3} ms", self.wait_ms, self.pick_ms)?;
        }
        writeln!(f, "dispatches per token: {}", self.dispatches_per_token)?;
        // (In `lab` builds, hollow kernels read no bytes: a bandwidth would mean nothing.)
        #[cfg(feature = "lab")]
        let read = self.hollow == crate::lab::Hollow::Off;
        #[cfg(not(feature = "lab"))]
        let read = true;
        if read {
            writeln!(f, "weight bytes per token: {} ({:.1} GB/s at the median decode speed)", self.weight_bytes_per_token, self.decode_gbs())?;
        } else {
            #[cfg(feature = "lab")]
            {
                let why = if matches!(self.hollow, crate::lab::Hollow::Only(_)) { "no bandwidth: a kernel hollow" } else { "none read: hollow kernels" };
                writeln!(f, "weight bytes per token: {} ({why})", self.weight_bytes_per_token)?;
            }
        }
        if let Some(b) = self.bandwidth_bound_tps().filter(|_| read) {
            writeln!(
                f,
                "bandwidth bound at {:.0} GB/s: {:.1} tok/s (decode reaches {:.1}% of it)",
                self.peak_gbs.unwrap_or(0.0),
                b,
                100.0 * self.decode_tps.median / b
            )?;
        }
        writeln!(f, "weights on GPU: {} bytes (file tensors: {} bytes)", self.weight_bytes.0, self.weight_bytes.1)?;
        write!(f, "GPU memory allocated: {} bytes ({} KV cache)", self.gpu_bytes, self.kv)?;
        for p in &self.profiles {
            write!(f, "\n{}", p.table(self.peak_gbs, self.layers).trim_end())?;
        }
        Ok(())
    }
}

/// Weight bytes a decoded token reads, from the file's tensor sizes: one embedding row, every
/// matrix and norm once, and for MoE the top-k of E experts (plus the router).
pub fn weight_bytes_per_token(g: &Gguf, cfg: &Config) -> u64 {
    let mut total = 0u64;
    for (name, _) in cfg.expected_tensors() {
        let Some(t) = g.tensor(&name) else { continue };
        total += if name == "token_embd.weight" {
            let row = t.n_bytes / cfg.vocab as u64;
            if cfg.tied_output {
                t.n_bytes + row
            } else {
                row
            }
        } else if name.contains("_exps") {
            t.n_bytes / cfg.experts as u64 * cfg.topk as u64
        } else {
            t.n_bytes
        };
    }
    total
}

/// The id of a top-k readout's first (largest) pair.
fn first_id(top: &[(u32, f32)]) -> Result<u32> {
    top.first().map(|p| p.0).ok_or_else(|| crate::error::Error::Gpu("an empty top-k readout".into()))
}

/// Deterministic prompt tokens in `1..vocab`.
fn tokens(n: u32, vocab: u32, salt: u32) -> Vec<u32> {
    (0..n).map(|i| token(i, vocab, salt)).collect()
}

/// Token `i` of [`tokens`]`(.., vocab, salt)`.
fn token(i: u32, vocab: u32, salt: u32) -> u32 {
    1 + (i.wrapping_mul(2_654_435_761).wrapping_add(salt * 97)) % (vocab - 1).max(1)
}

/// Loads the model and measures it: the load (with a first one-token forward, which compiles
/// the one-token step's kernels), then one untimed repeat (the other kernels compile on first
/// use) and `repeats` timed ones.
///
/// # Errors
/// [`crate::error::Error::Input`] for `random_next` with `top_k` or `copy_logits`; the load's
/// and the forward passes' errors.
pub async fn run(gpu: &Gpu, g: &Gguf, src: &dyn TensorSource, opts: &BenchOptions) -> Result<BenchReport> {
    if opts.random_next && (opts.top_k.is_some() || opts.copy_logits) {
        return Err(crate::error::Error::Input("random_next (llama-bench's tg) reads all logits back and maps them: not with top_k or copy_logits".into()));
    }
    if opts.generate.is_some() && (opts.top_k.is_some() || opts.copy_logits || opts.random_next) {
        return Err(crate::error::Error::Input("generate picks the next token on the GPU: not with top_k, copy_logits or random_next".into()));
    }
    let need = opts.depth + opts.prompt + opts.gen;
    let ctx = opts.ctx.unwrap_or(need).max(need);
    let t0 = Instant::now();
    let llama = Llama::load(gpu, g, src, LoadOptions { ctx: Some(ctx), kv: opts.kv, ..Default::default() })?;
    // A kernel hollow alone must be one the timed steps run, or the figures are the model's.
    #[cfg(feature = "lab")]
    if let crate::lab::Hollow::Only(k) = gpu.lab().hollow {
        let runs = |n: u32, pos: u32| llama.dispatches(&llama.plan(n, pos, false)).iter().any(|d| d.variant.key.kernel == k);
        if !runs(opts.prompt.max(1), opts.depth) && !runs(1, opts.depth + opts.prompt) {
            return Err(crate::error::Error::Input(format!("hollow mode only:{}: neither this model's prompt nor its decode steps run that kernel", k.name())));
        }
    }
    // Upload is queued: one tiny forward makes the load time include it.
    llama.forward(&[1], 0).await?;
    let load_s = t0.elapsed().as_secs_f64();
    let (mut pre, mut dec, mut enc, mut waits, mut picks, mut aheads) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut staged = (0, 0);
    // Kernels compile on the first batch that runs them (program::Variant): repeat 0 runs the
    // same shapes untimed, so that the timed repeats measure running them, not compiling.
    for r in 0..=opts.repeats.max(1) {
        let warm_up = r == 0;
        if opts.depth > 0 {
            llama.forward(&tokens(opts.depth, llama.config.vocab, r + 100), 0).await?;
        }
        let prompt = tokens(opts.prompt.max(1), llama.config.vocab, r);
        let t = Instant::now();
        // With a top-k readout the prompt takes one too, so that the step recorded after it is
        // the one the first decoded token asks for.
        let mut next = match opts.top_k {
            Some(k) => first_id(&llama.forward_top_k(&prompt, opts.depth, k).await?)?,
            None => crate::topk::argmax(&llama.forward(&prompt, opts.depth).await?),
        };
        if !warm_up {
            pre.push(prompt.len() as f64 / t.elapsed().as_secs_f64());
        }
        let t = Instant::now();
        let (mut encode, mut wait, mut pick, mut ahead) = (0.0, 0.0, 0.0, 0.0);
        let staged0 = llama.staged_steps().0;
        if let Some(block) = opts.generate {
            // The same `gen` one-token steps, the first fed `next`, chained on the GPU.
            let g = crate::sample::GenerateOptions { max_tokens: opts.gen.max(1), block, ..Default::default() };
            llama.generate(&[next], opts.depth + prompt.len() as u32, &g, &mut |_| true).await?;
        }
        for i in 0..opts.gen * u32::from(opts.generate.is_none()) {
            // forward() split in two, to time the CPU side of a token on its own.
            let (te, p0) = (Instant::now(), llama.prepare_seconds());
            let pos = opts.depth + prompt.len() as u32 + i;
            let pending = match opts.top_k {
                Some(k) => llama.submit_top_k(&[next], pos, k)?,
                None => llama.submit(&[next], pos, false)?,
            };
            encode += te.elapsed().as_secs_f64();
            ahead += llama.prepare_seconds() - p0;
            // The wait, then the next token's pick: from the top k, or the argmax of the logits
            // read in place (Llama::read_with), as a native sampler loop would; or, as
            // llama-bench's tg, a pseudo-random id with the logits mapped but not read.
            let tw = Instant::now();
            let picked = if opts.random_next {
                llama.read_with(pending, |_| ()).await?;
                (token(0, llama.config.vocab, pos + 7), 0.0)
            } else {
                match opts.top_k {
                    Some(k) => {
                        let top = llama.read(pending).await?;
                        let tp = Instant::now();
                        (first_id(&crate::topk::decode(&top, k))?, tp.elapsed().as_secs_f64())
                    }
                    None => {
                        let argmax = |l: &[f32]| {
                            let tp = Instant::now();
                            (crate::topk::argmax(l), tp.elapsed().as_secs_f64())
                        };
                        if opts.copy_logits {
                            argmax(&llama.read(pending).await?)
                        } else {
                            llama.read_with(pending, argmax).await?
                        }
                    }
                }
            };
            next = picked.0;
            pick += picked.1;
            wait += tw.elapsed().as_secs_f64() - picked.1;
        }
        if warm_up {
            continue;
        }
        staged.0 += llama.staged_steps().0 - staged0;
        staged.1 += opts.gen as u64;
        let per = |s: f64| 1e3 * s / opts.gen.max(1) as f64;
        dec.push(opts.gen.max(1) as f64 / t.elapsed().as_secs_f64());
        enc.push(per(encode));
        waits.push(per(wait));
        picks.push(per(pick));
        aheads.push(per(ahead));
    }
    let mut profiles = Vec::new();
    if opts.profile {
        let (p, d) = (opts.prompt.max(1), opts.depth);
        let n = p.min(llama.batch());
        let cases = [(format!("decode at position {}", d + p), 1, d + p), (format!("prefill of {n} tokens at position {d}"), n, d)];
        for (phase, n, pos) in cases {
            match llama.profile(n, pos).await? {
                Some((list, one_pass)) => profiles.push(Profile::of(phase, n, list, one_pass)),
                None => eprintln!("profile: {phase}: this adapter has no timestamp queries"),
            }
        }
    }
    let report = BenchReport {
        adapter: gpu.adapter_info.clone(),
        load_s,
        prefill_tps: Stat::of(pre),
        decode_tps: Stat::of(dec),
        encode_ms: Stat::of(enc).median,
        wait_ms: Stat::of(waits).median,
        pick_ms: Stat::of(picks).median,
        ahead_ms: Stat::of(aheads).median,
        top_k: opts.top_k,
        staged,
        copy_logits: opts.copy_logits,
        random_next: opts.random_next,
        generate: opts.generate,
        #[cfg(feature = "lab")]
        hollow: gpu.lab().hollow,
        commit: COMMIT,
        caps: gpu.caps().clone(),
        cpu_policy: gpu.is_cpu(),
        switches: *gpu.switches(),
        #[cfg(feature = "lab")]
        knobs: gpu.lab().set_ones(),
        #[cfg(not(feature = "lab"))]
        knobs: Vec::new(),
        dispatches_per_token: llama.dispatches_per_token(),
        weight_bytes_per_token: weight_bytes_per_token(g, &llama.config),
        gpu_bytes: llama.gpu_bytes(),
        weight_bytes: llama.weight_bytes(),
        prompt: opts.prompt,
        depth: opts.depth,
        gen: opts.gen,
        peak_gbs: opts.peak_gbs,
        profiles,
        layers: llama.config.n_layers,
        kv: llama.config.kv,
    };
    llama.dispose();
    Ok(report)
}

/// The device's measured read bandwidth in GB/s, median (min, max) of `passes` passes, each
/// `shaders/stream.wgsl` reading a buffer of `bytes` (zeroed) `reps` times, timed from submit to
/// completion (the submit and the wait are negligible against a pass of 32
/// reads of 1 GiB), after one untimed pass. The practical ceiling of a weight kernel's reads
/// (16-byte loads, side by side), printed beside the decode's weight bandwidth (`bench --stream`, lab builds).
///
/// # Errors
/// [`crate::Error::Gpu`] when the device fails or is lost.
pub async fn read_bandwidth(gpu: &Gpu, bytes: u64, reps: u32, passes: u32) -> Result<Stat> {
    use crate::kernels::{Kernel, PipelineKey};
    use crate::pipelines::Kernels;
    let src = gpu.storage("stream source", bytes);
    let out = gpu.storage("stream output", 16);
    let (pipeline, bind) = Kernels::new().bind(gpu, PipelineKey::plain(Kernel::Stream), &[("S", &src), ("O", &out)]);
    let pass = |n: u32| {
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut p = enc.begin_compute_pass(&Default::default());
            p.set_pipeline(&pipeline);
            p.set_bind_group(0, &bind, &[]);
            for _ in 0..n {
                p.dispatch_workgroups(4096, 1, 1);
            }
        }
        gpu.queue.submit([enc.finish()]);
    };
    pass(1);
    gpu.read(&out, 16).await?;
    let mut gbs = Vec::new();
    for _ in 0..passes.max(1) {
        let t = Instant::now();
        pass(reps);
        gpu.read(&out, 16).await?;
        gbs.push(bytes as f64 * reps as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    src.destroy();
    out.destroy();
    Ok(Stat::of(gbs))
}
