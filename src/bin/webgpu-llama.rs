//! The native door: run a GGUF on a prompt of token ids, or print what a GGUF holds.
//!
//! `webgpu-llama run MODEL.gguf --tokens 1,2,3 [-n 20] [--ctx N] [--kv f32|f16] [--dump-logits FILE]
//! [--generate [--block K]] [--temperature T --top-k K --top-p P --min-p P --repeat-penalty R
//! --repeat-window N --seed S]`
//! `webgpu-llama info MODEL.gguf`
//! `webgpu-llama plan MODEL.gguf --tokens N [--start P]` (the kernels a forward of N tokens runs)
//!
//! Kernel forms: `--switch NAME=BOOL` (the device's policy otherwise); in builds with the cargo
//! feature `lab`, also `--set KEY=VALUE` (numeric overrides, measuring modes: `--set help`).

#![cfg_attr(target_arch = "wasm32", allow(unused))]

#[cfg(target_arch = "wasm32")]
fn main() {} // the browser door is the library's `web` module

#[cfg(not(target_arch = "wasm32"))]
mod cli {
    use std::io::Write;
    use std::process::ExitCode;
    use std::time::Instant;

    use clap::{Parser, Subcommand};
    use webgpu_llama::{gguf::ByteSource, vocab::Vocab, weights::TensorSource, Config, GenerateOptions, Gguf, Gpu, KvType, Llama, LoadOptions, Sampler};

    #[derive(Parser)]
    #[command(name = "webgpu-llama", about = "LLaMA / Mixtral GGUF forward pass on the GPU (wgpu)")]
    struct Cli {
        #[command(subcommand)]
        cmd: Cmd,
    }

    #[derive(Subcommand)]
    enum Cmd {
        /// Run a prompt of token ids, print the top-5 next tokens and a greedy continuation.
        Run {
            /// The GGUF file.
            model: String,
            /// Prompt token ids, comma-separated (BOS included if the model wants one).
            #[arg(long, value_delimiter = ',', required = true)]
            tokens: Vec<u32>,
            /// Tokens to generate greedily.
            #[arg(short = 'n', default_value_t = 20)]
            n: u32,
            /// KV-cache length (default min(context_length, 2048)).
            #[arg(long)]
            ctx: Option<u32>,
            /// KV-cache element type: f32, or f16 (half the bytes).
            #[arg(long, default_value_t = KvType::F32)]
            kv: KvType,
            /// Write the logits after every token of prompt ++ greedy[:-1] (f32 rows of vocab values).
            #[arg(long)]
            dump_logits: Option<String>,
            /// Create the device with WebGPU's default limits (128 MiB per storage binding).
            #[arg(long)]
            default_limits: bool,
            #[command(flatten)]
            generation: Generation,
            #[command(flatten)]
            choices: Choices,
        },
        /// Measure load, prefill and decode speed (median and spread over repeats).
        Bench {
            /// The GGUF file.
            model: String,
            /// Prompt length for prefill.
            #[arg(long, default_value_t = 512)]
            prompt: u32,
            /// Tokens in the KV cache before the timed prefill and decode (llama-bench's -d).
            #[arg(long, default_value_t = 0)]
            depth: u32,
            /// Tokens to decode.
            #[arg(long, default_value_t = 128)]
            gen: u32,
            /// KV-cache length (default prompt + gen).
            #[arg(long)]
            ctx: Option<u32>,
            /// KV-cache element type: f32, or f16 (half the bytes).
            #[arg(long, default_value_t = KvType::F32)]
            kv: KvType,
            /// Repeats.
            #[arg(long, default_value_t = 3)]
            repeats: u32,
            /// Peak memory bandwidth of the GPU in GB/s (its datasheet's), for the bandwidth bound.
            #[arg(long)]
            peak_gbs: Option<f64>,
            /// Print one JSON object instead of text.
            #[arg(long)]
            json: bool,
            /// Create the device with WebGPU's default limits.
            #[arg(long)]
            default_limits: bool,
            /// Also print the GPU time of every kernel of one decode step and one prefill batch.
            #[arg(long)]
            profile: bool,
            /// Decode reading back only the top K logits of each token, chosen on the GPU
            /// (`forwardTopK`), instead of all of them (argmax on the CPU).
            #[arg(long)]
            top_k: Option<u32>,
            /// With all logits: copy each token's logits out of the readback buffer before the
            /// argmax (as `forward` returns them) instead of reading them in place.
            #[cfg(feature = "lab")]
            #[arg(long)]
            copy_logits: bool,
            /// Decode as llama-bench's tg does: each next token a pseudo-random id instead of
            /// the argmax (all logits still read back and mapped each token, not read; not with
            /// --top-k).
            #[arg(long)]
            random_next: bool,
            /// Decode through Llama::generate, ids read back every K steps (next tokens picked
            /// greedily on the GPU; not with --top-k or --random-next).
            #[arg(long, value_name = "K")]
            generate: Option<u32>,
            /// Also measure the device's read bandwidth (`shaders/stream.wgsl`, 1 GiB read 32
            /// times, median of 5 passes) and print the decode's weight reads as a share of it.
            #[cfg(feature = "lab")]
            #[arg(long)]
            stream: bool,
            #[command(flatten)]
            choices: Choices,
        },
        /// Write a GGUF of a real model's shape with random weights (for benchmarks).
        Gen {
            /// Shape: llama-3.2-1b, llama-3-8b, tinyllama-1.1b, moe-8x-1b, smollm2-135m, qwen2.5-0.5b, qwen3-0.6b, qwen3-4b, phi-3.5-mini, gemma-3-1b, gemma-2-2b, or smoke (a small dense model).
            #[arg(long)]
            shape: String,
            /// Weight format: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K or Q4_K_M.
            #[arg(long = "type")]
            ty: String,
            /// Output file.
            out: String,
            /// Random seed.
            #[arg(long, default_value_t = 1)]
            seed: u64,
        },
        /// Print the kernels a forward of N tokens from position P runs on this device, batch by
        /// batch: each dispatch's name (as `bench --profile` and `profile()` label it), its grid of
        /// workgroups and the bytes it moves by the profiler's estimate. Nothing is run.
        Plan {
            /// The GGUF file.
            model: String,
            /// Tokens of the forward (its prompt chunks run as batches of at most the load's batch).
            #[arg(long, default_value_t = 1)]
            tokens: u32,
            /// The position of its first token.
            #[arg(long, default_value_t = 0)]
            start: u32,
            /// KV-cache length (default min(context_length, 2048)).
            #[arg(long)]
            ctx: Option<u32>,
            /// KV-cache element type: f32, or f16 (half the bytes).
            #[arg(long, default_value_t = KvType::F32)]
            kv: KvType,
            /// Every token's logits (`forward_all`), not only the last one's.
            #[arg(long)]
            all_logits: bool,
            /// Create the device with WebGPU's default limits.
            #[arg(long)]
            default_limits: bool,
            #[command(flatten)]
            choices: Choices,
        },
        /// Print the metadata, the tensor table and the derived config.
        Info {
            /// The GGUF file.
            model: String,
        },
    }

    /// `run --generate`: the continuation through `Llama::generate` (next tokens picked on the
    /// GPU, ids read back once a block), greedy or with a sampler (llama.cpp's defaults for the
    /// values not given).
    #[derive(clap::Args)]
    struct Generation {
        /// Generate through Llama::generate instead of a loop of forwards (implied by a sampler flag).
        #[arg(long)]
        generate: bool,
        /// Steps between readbacks of the ids.
        #[arg(long, default_value_t = 16)]
        block: u32,
        /// Sampling temperature (0: greedy).
        #[arg(long)]
        temperature: Option<f32>,
        /// Candidates kept (0: the 128 likeliest).
        #[arg(long)]
        top_k: Option<u32>,
        /// Nucleus mass kept, in (0, 1].
        #[arg(long)]
        top_p: Option<f32>,
        /// Minimum probability relative to the likeliest, in [0, 1).
        #[arg(long)]
        min_p: Option<f32>,
        /// Repetition penalty (1: off).
        #[arg(long)]
        repeat_penalty: Option<f32>,
        /// Ids the repetition penalty looks back over.
        #[arg(long)]
        repeat_window: Option<u32>,
        /// Seed of the draws.
        #[arg(long)]
        seed: Option<u32>,
    }

    impl Generation {
        /// The sampler the flags ask for (`None`: greedy).
        fn sampler(&self) -> Option<Sampler> {
            let flags = [self.temperature, self.top_p, self.min_p, self.repeat_penalty].iter().any(Option::is_some)
                || [self.top_k, self.repeat_window, self.seed].iter().any(Option::is_some);
            let d = Sampler::default();
            flags.then(|| Sampler {
                temperature: self.temperature.unwrap_or(d.temperature),
                top_k: self.top_k.unwrap_or(d.top_k),
                top_p: self.top_p.unwrap_or(d.top_p),
                min_p: self.min_p.unwrap_or(d.min_p),
                repeat_penalty: self.repeat_penalty.unwrap_or(d.repeat_penalty),
                repeat_window: self.repeat_window.unwrap_or(d.repeat_window),
                seed: self.seed.unwrap_or(d.seed),
            })
        }
    }

    /// Kernel choices: the device's policy ([`webgpu_llama::policy`]) unless switched, and in
    /// `lab` builds the laboratory's knobs.
    #[derive(clap::Args)]
    struct Choices {
        /// An on/off choice of kernel form, NAME=true|false, repeatable (`--switch help` lists
        /// them; default: the device's policy).
        #[arg(long = "switch", value_name = "NAME=BOOL")]
        switches: Vec<String>,
        /// A laboratory knob, KEY=VALUE, repeatable: a numeric override of a kernel default or a
        /// measuring mode (`--set help` lists them).
        #[cfg(feature = "lab")]
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    }

    impl Choices {
        /// Prints the lists `--switch help` and `--set help` ask for; whether one was asked.
        fn help(&self) -> bool {
            let switches = self.switches.iter().any(|s| s == "help");
            if switches {
                println!("{}", webgpu_llama::gpu::Switches::help());
            }
            #[cfg(feature = "lab")]
            if self.set.iter().any(|s| s == "help") {
                println!("{}", webgpu_llama::lab::help());
                return true;
            }
            switches
        }

        /// The model file mapped, and the native device with these choices applied (as `run`,
        /// `bench` and `plan` take them).
        async fn open(&self, model: &str, default_limits: bool) -> Result<(Mapped, Gpu), Box<dyn std::error::Error>> {
            let bytes = read(model)?;
            let mut gpu = Gpu::native(default_limits).await?;
            self.apply(&mut gpu)?;
            Ok((bytes, gpu))
        }

        /// Applies the choices to `gpu`.
        fn apply(&self, gpu: &mut Gpu) -> Result<(), Box<dyn std::error::Error>> {
            for s in &self.switches {
                gpu.switches_mut().set(s)?;
            }
            #[cfg(feature = "lab")]
            for s in &self.set {
                gpu.lab_mut().set(s)?;
            }
            Ok(())
        }
    }

    pub fn main() -> ExitCode {
        match pollster::block_on(run(Cli::parse())) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    }

    /// A model file mapped into memory: the OS pages tensors in as they are uploaded, so the
    /// file is never read whole into the heap.
    struct Mapped(memmap2::Mmap);

    impl Mapped {
        fn as_slice(&self) -> &[u8] {
            &self.0
        }
    }

    impl ByteSource for Mapped {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }

        fn read_at(&self, offset: u64, buf: &mut [u8]) -> webgpu_llama::Result<()> {
            self.as_slice().read_at(offset, buf)
        }
    }

    impl TensorSource for Mapped {
        fn upload(&self, gpu: &Gpu, buffer: &wgpu::Buffer, dst: u64, src: u64, len: u64) -> webgpu_llama::Result<()> {
            self.as_slice().upload(gpu, buffer, dst, src, len)
        }
    }

    fn read(path: &str) -> Result<Mapped, Box<dyn std::error::Error>> {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        // SAFETY: the file is only read; the CLI does not expect it to change while it runs (as
        // llama.cpp's mmap loading).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| format!("cannot map {path}: {e}"))?;
        Ok(Mapped(map))
    }

    fn top_k(v: &[f32], k: usize) -> Vec<(u32, f32)> {
        let mut idx: Vec<u32> = (0..v.len() as u32).collect();
        idx.sort_by(|&a, &b| v[b as usize].total_cmp(&v[a as usize]).then(a.cmp(&b)));
        idx.into_iter().take(k).map(|i| (i, v[i as usize])).collect()
    }

    async fn run(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
        match cli.cmd {
            Cmd::Plan { model, tokens, start, ctx, kv, all_logits, default_limits, choices } => {
                if choices.help() {
                    return Ok(());
                }
                if tokens == 0 {
                    return Err("--tokens must be at least 1".into());
                }
                let (bytes, gpu) = choices.open(&model, default_limits).await?;
                let g = Gguf::parse(bytes.as_slice())?;
                let llama = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx, kv, ..Default::default() })?;
                // (Any span of the context: nothing runs, so no position need be filled first.)
                let end = u64::from(start) + u64::from(tokens);
                if end > u64::from(llama.config.ctx) {
                    return Err(
                        format!("--tokens {tokens} from --start {start}: positions up to {end}, past the KV cache's {} (--ctx)", llama.config.ctx).into()
                    );
                }
                println!("adapter: {}", gpu.adapter_info);
                println!("decode fusions: {}", llama.fusion);
                for (i, batch) in llama.batches(tokens, start, all_logits).iter().enumerate() {
                    let dispatches = llama.dispatches(batch);
                    let total: u64 = dispatches.iter().map(|d| d.bytes).sum();
                    println!(
                        "batch {i}: {} tokens at position {}, {} key splits: {} dispatches, {total} bytes",
                        batch.n_tokens,
                        batch.pos0,
                        batch.splits,
                        dispatches.len()
                    );
                    for d in &dispatches {
                        let [x, y, z] = d.grid;
                        println!("  {:<64} {x:>6} x {y:>4} x {z:>3} {:>12}", d.labelled(), d.bytes);
                    }
                }
                Ok(())
            }
            Cmd::Info { model } => {
                let bytes = read(&model)?;
                let g = Gguf::parse(bytes.as_slice())?;
                println!(
                    "GGUF v{}, {} metadata keys, {} tensors, alignment {}, data at byte {}",
                    g.version,
                    g.metadata.len(),
                    g.tensors.len(),
                    g.alignment,
                    g.data_offset
                );
                for (k, v) in &g.metadata {
                    println!("  {k} = {v}");
                }
                println!("tensors:");
                for t in &g.tensors {
                    println!("  {:<32} {:>6} {:?} {} bytes at {}", t.name, t.ggml_type.name(), t.dims, t.n_bytes, t.offset);
                }
                match Config::from_gguf(&g, None) {
                    Ok(c) => println!("config: {c:#?}"),
                    Err(e) => println!("config: not loadable: {e}"),
                }
                Ok(())
            }
            Cmd::Bench {
                model,
                prompt,
                depth,
                gen,
                ctx,
                kv,
                repeats,
                peak_gbs,
                json,
                default_limits,
                profile,
                top_k,
                #[cfg(feature = "lab")]
                copy_logits,
                random_next,
                generate,
                #[cfg(feature = "lab")]
                stream,
                choices,
            } => {
                #[cfg(not(feature = "lab"))]
                let copy_logits = false;
                if choices.help() {
                    return Ok(());
                }
                let (bytes, gpu) = choices.open(&model, default_limits).await?;
                let g = Gguf::parse(bytes.as_slice())?;
                let opts =
                    webgpu_llama::bench::BenchOptions { prompt, depth, gen, ctx, repeats, peak_gbs, profile, kv, top_k, copy_logits, random_next, generate };
                let report = webgpu_llama::bench::run(&gpu, &g, &bytes, &opts).await?;
                if json {
                    println!("{}", report.to_json());
                } else {
                    println!("model: {model}");
                    println!("{report}");
                }
                #[cfg(feature = "lab")]
                if stream {
                    let bytes = (1u64 << 30).min(gpu.max_binding()) & !15;
                    let gbs = webgpu_llama::bench::read_bandwidth(&gpu, bytes, 32, 5).await?;
                    let share = match report.hollow {
                        webgpu_llama::lab::Hollow::Off => {
                            format!("; the decode's weight reads reach {:.1}% of the median", 100.0 * report.decode_gbs() / gbs.median)
                        }
                        _ => String::new(),
                    };
                    println!(
                        "measured read bandwidth (shaders/stream.wgsl, {bytes} bytes x 32, 5 passes): {:.1} (min {:.1}, max {:.1}) GB/s{share}",
                        gbs.median, gbs.min, gbs.max
                    );
                }
                Ok(())
            }
            Cmd::Gen { shape, ty, out, seed } => {
                use webgpu_llama::synth::{model, Scheme, Shape};
                let s = match shape.as_str() {
                    "smoke" => Shape::dense(256, 4, 8, 2, 768, 4096),
                    name => Shape::named(name).ok_or_else(|| format!("unknown shape {name:?}: {} or smoke", Shape::NAMES.join(", ")))?,
                };
                let scheme = Scheme::parse(&ty).ok_or_else(|| format!("unknown weight format {ty:?}"))?;
                let t = Instant::now();
                let w = model(&s, scheme, seed)?;
                let mut f = std::io::BufWriter::new(std::fs::File::create(&out)?);
                w.write_to(&mut f)?;
                f.flush()?;
                println!("wrote {out} ({} bytes, {shape} {ty}) in {:.1} s", std::fs::metadata(&out)?.len(), t.elapsed().as_secs_f64());
                Ok(())
            }
            Cmd::Run { model, tokens, n, ctx, kv, dump_logits, default_limits, generation, choices } => {
                if choices.help() {
                    return Ok(());
                }
                let (bytes, gpu) = choices.open(&model, default_limits).await?;
                #[cfg(feature = "lab")]
                if gpu.lab().hollow != webgpu_llama::lab::Hollow::Off {
                    return Err(
                        "--set hollow is bench's measure of a step's floor (or of one kernel's cost): run would print logits its kernels never wrote".into()
                    );
                }
                println!("adapter: {}", gpu.adapter_info);
                let t0 = Instant::now();
                let g = Gguf::parse(bytes.as_slice())?;
                // The last step's position, checked before the load (the config's context is the
                // one load gives the KV cache): a run that would stop past it fails before it starts.
                let cache = webgpu_llama::Config::from_gguf(&g, ctx)?.ctx;
                let need = tokens.len() as u64 + u64::from(n.saturating_sub(1));
                if need > u64::from(cache) {
                    return Err(format!(
                        "--tokens ({} ids) and -n {n} need a context of {need} tokens, more than the KV cache's {cache}: pass --ctx {need} or fewer tokens",
                        tokens.len()
                    )
                    .into());
                }
                let llama = Llama::load(&gpu, &g, &bytes, LoadOptions { ctx, kv, ..Default::default() })?;
                gpu.device.poll(wgpu::PollType::wait_indefinitely())?;
                let c = &llama.config;
                println!(
                    "loaded {model} in {:.2} s: d {} L {} ff {} heads {}/{} hd {} ctx {} ({} KV cache) vocab {} experts {} top-{}; {} dispatches per token",
                    t0.elapsed().as_secs_f64(),
                    c.d,
                    c.n_layers,
                    c.ff,
                    c.n_heads,
                    c.n_kv_heads,
                    c.head_dim,
                    c.ctx,
                    c.kv,
                    c.vocab,
                    c.experts,
                    c.topk,
                    llama.dispatches_per_token()
                );
                let (on_gpu, in_file) = llama.weight_bytes();
                println!("weights on GPU: {on_gpu} bytes (file tensors: {in_file} bytes)");
                let vocab = Vocab::from_gguf(&g);
                let text = |ids: &[u32]| vocab.as_ref().map(|v| v.decode(ids)).unwrap_or_default();

                let t1 = Instant::now();
                let mut logits = llama.forward(&tokens, 0).await?;
                let prefill = t1.elapsed().as_secs_f64();
                println!("top-5 after the prompt:");
                for (id, l) in top_k(&logits, 5) {
                    println!("  {id:>6} {l:>10.4} {:?}", text(&[id]));
                }
                let mut out = Vec::new();
                let t2 = Instant::now();
                let sampler = generation.sampler();
                if generation.generate || sampler.is_some() {
                    // (The prompt again, from position 0: generate prefills it itself.)
                    let opts = GenerateOptions { max_tokens: n, sampler, stop_ids: Vec::new(), block: generation.block };
                    out = llama.generate(&tokens, 0, &opts, &mut |_| true).await?.ids;
                } else {
                    for i in 0..n {
                        let next = webgpu_llama::topk::argmax(&logits);
                        out.push(next);
                        if i + 1 < n {
                            logits = llama.forward(&[next], tokens.len() as u32 + i).await?;
                        }
                    }
                }
                let decode = t2.elapsed().as_secs_f64();
                let kind = if sampler.is_some() { "sampled" } else { "greedy" };
                println!("{kind} ids: {}", out.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","));
                println!("{kind} text: {:?}", text(&out));
                println!("prefill: {} tokens in {:.3} s = {:.1} tok/s", tokens.len(), prefill, tokens.len() as f64 / prefill);
                if generation.generate || sampler.is_some() {
                    println!("generate: {} ids in {:.3} s (its prefill included) = {:.1} tok/s", out.len(), decode, out.len() as f64 / decode);
                } else if n > 1 {
                    println!("decode: {} tokens in {:.3} s = {:.1} tok/s", n - 1, decode, (n - 1) as f64 / decode);
                }
                if let Some(path) = dump_logits {
                    // Every row from the batched path: one forward over prompt ++ greedy[:-1] from
                    // position 0 (this also re-runs the cache).
                    let all: Vec<u32> = tokens.iter().chain(out.iter().take(out.len().saturating_sub(1))).copied().collect();
                    let rows = llama.forward_all(&all, 0).await?;
                    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
                    f.write_all(bytemuck::cast_slice(&rows))?;
                    println!("wrote {} rows of {} logits to {path}", all.len(), c.vocab);
                }
                Ok(())
            }
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn main() -> std::process::ExitCode {
    cli::main()
}
