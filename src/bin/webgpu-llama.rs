//! The native door: run a GGUF on a prompt of token ids, or print what a GGUF holds.
//!
//! `webgpu-llama run MODEL.gguf --tokens 1,2,3 [-n 20] [--ctx N] [--kv f32|f16] [--dump-logits FILE]
//! [--generate [--block K]] [--temperature T --top-k K --top-p P --min-p P --repeat-penalty R
//! --repeat-window N --seed S]`
//! `webgpu-llama info MODEL.gguf`

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
            /// Peak memory bandwidth of the GPU in GB/s, for the bandwidth bound (H200: 4800).
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
            #[arg(long)]
            copy_logits: bool,
            /// Decode as llama-bench's tg does: each next token a pseudo-random id instead of
            /// the argmax (all logits still read back and mapped each token, not read; not with
            /// --top-k or --copy-logits).
            #[arg(long)]
            random_next: bool,
            /// Decode through Llama::generate, ids read back every K steps (next tokens picked
            /// greedily on the GPU; not with --top-k, --copy-logits or --random-next).
            #[arg(long, value_name = "K")]
            generate: Option<u32>,
            /// Also measure the device's read bandwidth (`shaders/stream.wgsl`, 1 GiB read 32
            /// times, median of 5 passes) and print the decode's weight reads as a share of it.
            #[arg(long)]
            stream: bool,
            #[command(flatten)]
            choices: Choices,
        },
        /// Write a GGUF of a real model's shape with random weights (for benchmarks).
        Gen {
            /// Shape: llama-3.2-1b, llama-3-8b, tinyllama-1.1b, moe-8x-1b, smollm2-135m, or smoke (a small dense model).
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

    /// Kernel choices (defaults: the device's policy, `gpu::Tuning`).
    #[derive(clap::Args)]
    struct Choices {
        /// Matrix-matrix tile `BMxBN/TMxTN` of the portable kernel (e.g. 64x64/4x4, 64x128/4x8).
        #[arg(long)]
        tile: Option<String>,
        /// Batches of at most this many tokens use the matrix-vector kernel.
        #[arg(long)]
        matvec_max_tokens: Option<u32>,
        /// Workgroups below which a linear op uses the small tile instead of the large one (default:
        /// 128 for the matrix-unit matmul's 128 x 128 tiles, else 256).
        #[arg(long)]
        min_large_tiles: Option<u32>,
        /// Attention key splits for small batches (default: by context length).
        #[arg(long)]
        splits: Option<u32>,
        /// Threads per row of the matrix-vector kernels: 1, 2, 4 ... 256 (the expert kernels take 64 at most; default: by shape and device).
        #[arg(long)]
        tpr: Option<u32>,
        /// Weights a matrix-vector thread decodes at once: a multiple of 4 up to 64 (default: by format).
        #[arg(long)]
        span: Option<u32>,
        /// Rows per thread of the one-token matrix-vector kernel: 1 to 8 (default: by device and weight format).
        #[arg(long)]
        rpt: Option<u32>,
        /// Rows per thread of the one-token matrix-vector kernel with SwiGLU fused: 1 to 8
        /// (default: as --rpt).
        #[arg(long)]
        rpt_glu: Option<u32>,
        /// Rows per thread of the output head's one-token matrix-vector kernel: 1 to 8
        /// (default: as --rpt).
        #[arg(long)]
        head_rpt: Option<u32>,
        /// Threads per row of the output head's matrix-vector kernels: a power of two from 4 to
        /// 256 (default: as --tpr).
        #[arg(long)]
        head_tpr: Option<u32>,
        /// Spans a one-token matrix-vector thread loads before using any: 1 to 8 (default: 16
        /// weights' worth).
        #[arg(long)]
        unroll: Option<u32>,
        /// Read the matrix-vector kernel's weights as 16-byte pieces where the format has them
        /// (Q4_K, Q6_K, F16, Q8_0): on / off (default: by device).
        #[arg(long)]
        wide: Option<bool>,
        /// With pieces: only these formats take them (comma list of GGML type names, e.g.
        /// `q4_k,f16`; default: all that have them).
        #[arg(long, value_delimiter = ',')]
        wide_types: Option<Vec<String>>,
        /// With pieces: whether the matrix-vector forms with RMSNorm fused take them too
        /// (default: true).
        #[arg(long)]
        wide_norm: Option<bool>,
        /// One-token matrix-vector products of Q4_K, Q8_0 and Q6_K weights by integer dot products
        /// against 24-bit quantised activations: on / off (default: on for Vulkan devices).
        #[arg(long)]
        int_dot: Option<bool>,
        /// With the integer form: the output and down projections write the next op's integer
        /// activations themselves (QOUT): on / off (default: on).
        #[arg(long)]
        quant_out: Option<bool>,
        /// The same for the SwiGLU matvec (the down projection's input): on / off (default: as
        /// --quant-out).
        #[arg(long)]
        quant_out_glu: Option<bool>,
        /// Threads per row of the matrix-vector kernels with QOUT: a power of two up to 64, cut to
        /// keep a workgroup's 16 rows within 512 threads (default: as without, so cut).
        #[arg(long)]
        quant_out_tpr: Option<u32>,
        /// Keep RMSNorm and SwiGLU as dispatches of their own when decoding (default: fused into
        /// the matrix-vector kernel).
        #[arg(long)]
        no_fuse: bool,
        /// Query heads per workgroup of the one-token attention kernel: a divisor of the query
        /// heads per KV head; a value that does not divide it falls back to the default (by
        /// shape).
        #[arg(long)]
        attn_heads: Option<u32>,
        /// One-token steps over at most this many keys take one query head a workgroup of the
        /// one-token attention kernel (head dims up to 64, where it merges its own key splits,
        /// natively on Vulkan, in 64-key chunks; 0: never; default: 1024).
        #[arg(long)]
        attn_heads_until: Option<u32>,
        /// Decode attention through the general kernel (attention.wgsl) instead of the one-token kernel.
        #[arg(long)]
        no_decode_attention: bool,
        /// Prefill attention through the general kernel (attention.wgsl) instead of the tiled
        /// one (attention_tiled.wgsl).
        #[arg(long)]
        no_tiled_attention: bool,
        /// Fuse RMSNorm and SwiGLU into the matrix-vector kernel (the default).
        #[arg(long, conflicts_with = "no_fuse")]
        fuse: bool,
        /// Keep wgpu's injected shader runtime checks (bounds clamps, loop counters).
        #[arg(long)]
        checked_shaders: bool,
        /// Wait for each readback by polling in a loop (one CPU core busy, up to 20 ms) instead
        /// of sleeping in the driver's fence wait: on / off (default: on GPUs, off on CPU
        /// adapters).
        #[arg(long)]
        spin_wait: Option<bool>,
        /// Measure the step's dispatch floor: every kernel returns at entry, over its planned
        /// grid (`grids`) or over one workgroup (`one`); the logits are then zeros. Or one kernel
        /// alone (`only:NAME`, e.g. `only:attention_decode_wide`: the others run): against the
        /// step with it run, what that kernel costs as the step runs (default: off).
        #[arg(long)]
        hollow: Option<String>,
        /// Where the value projection is a matrix of its own, decode writes its output straight
        /// into the V cache, beside the q/k projection: on / off (default: on).
        #[arg(long)]
        v_to_cache: Option<bool>,
        /// One-token attention merges its key splits itself (the last workgroup of each head
        /// group to finish) instead of a combine dispatch: on / off (default: on natively on
        /// Vulkan, where RoPE is fused into it).
        #[arg(long)]
        fused_combine: Option<bool>,
        /// Keys a chunk of one-token attention (and threads a workgroup): 64 or 128 (default: 128
        /// where the kernel merges its key splits and a split holds 2, 4, ... chunks of 64 keys,
        /// else 64).
        #[arg(long)]
        attn_chunk: Option<u32>,
        /// One-token attention loads a chunk's first value rows before scoring its keys: on / off
        /// (default: on for head dims up to 64, BENCHMARKS.md v24; the wide kernel, --attn-wide,
        /// loads a chunk's keys and values at once anyway).
        #[arg(long)]
        attn_prefetch: Option<bool>,
        /// One-token attention through attention_decode_wide.wgsl (a chunk's loads spread over
        /// 2 x head-dim threads, all in flight at once): on / off (default: on for head dims past
        /// 64, where the fused merge runs: natively on Vulkan).
        #[arg(long)]
        attn_wide: Option<bool>,
        /// In the wide one-token attention, each subgroup keeps its own softmax over the keys it
        /// scores and values, merged once after the keys (no barrier a chunk), where a value
        /// row's head-dim / 4 threads fit in one subgroup: on / off (default: off).
        #[arg(long)]
        attn_owned: Option<bool>,
        /// On CPU adapters, the CPU matrix-matrix kernel's tile `LANESxROWS/TOKENS` (e.g. 64x3/16).
        #[arg(long)]
        cpu_tile: Option<String>,
        /// On CPU adapters, compile the CPU kernels (the CPU matmul, attention) without subgroups
        /// (the matvec's CPU form follows --no-reduce-subgroups).
        #[arg(long)]
        no_cpu_subgroups: bool,
        /// Reduce in workgroup memory only, not with subgroup operations (matrix-vector row sums,
        /// the one-token attention's softmax; default: subgroups where the device has one size);
        /// on CPU adapters also the matvec form that broadcasts activations across a subgroup.
        #[arg(long)]
        no_reduce_subgroups: bool,
        /// On CPU adapters, use the GPU matrix-matrix and attention kernels for prefill too.
        #[arg(long)]
        no_cpu_kernels: bool,
        /// The matrix-unit (cooperative matrix) matmul for prefill: on / off, `--coop` alone: on
        /// (default: on where the device has 16x16x16 f16 cooperative matrices).
        #[arg(long, num_args = 0..=1, default_missing_value = "true")]
        coop: Option<bool>,
        /// The matrix-unit matmul's tile `BMxBN/SPLIT` or `BMxBN/SPLIT/SMxSN` (SMxSN: each
        /// subgroup's block, 32 or 64 a side, 32x32 by default; BM, BN multiples of it; SPLIT 0: f16
        /// operands, as llama.cpp's matrix-unit paths; 1: the activations as two f16 halves, exact
        /// products for F16 and BF16 weights only; 2: the weights too, within 2e-3 of the
        /// references for every format; 0 and 1 on other weights are outside it; default
        /// 128x128/2/64x32 where it fits the workgroup memory, else 64x128/2).
        #[arg(long)]
        coop_tile: Option<String>,
        /// The matrix-unit matmul reads Q4_K, Q8_0 (rows of 256k) and Q6_K (rows of 2048k) weights
        /// as 16-byte pieces, as it does F16's: on / off, alone: on (default: on; off: the runs of
        /// 4 that every other format takes).
        #[arg(long, num_args = 0..=1, default_missing_value = "true")]
        coop_quant_pieces: Option<bool>,
    }

    impl Choices {
        fn apply(&self, gpu: &mut Gpu) -> Result<(), Box<dyn std::error::Error>> {
            let t = gpu.tuning_mut();
            if let Some(tile) = &self.tile {
                t.tile = tile.parse()?;
            }
            if let Some(m) = self.matvec_max_tokens {
                t.matvec_max_tokens = Some(m);
            }
            if let Some(m) = self.min_large_tiles {
                t.min_large_tiles = Some(m);
            }
            t.splits = self.splits.or(t.splits);
            t.attn_heads = self.attn_heads.or(t.attn_heads);
            t.attn_heads_until = self.attn_heads_until.or(t.attn_heads_until);
            if let Some(n) = self.tpr {
                if !n.is_power_of_two() || n > 256 {
                    return Err(format!("--tpr {n}: expected a power of two from 1 to 256").into());
                }
                t.tpr = Some(n);
            }
            if let Some(n) = self.span {
                if n == 0 || n % 4 != 0 || n > 64 {
                    return Err(format!("--span {n}: expected a multiple of 4 from 4 to 64").into());
                }
                t.span = Some(n);
            }
            if let Some(n) = self.rpt_glu {
                if !(1..=8).contains(&n) {
                    return Err(format!("--rpt-glu {n}: expected 1 to 8").into());
                }
                t.rpt_glu = Some(n);
            }
            if let Some(n) = self.head_rpt {
                if !(1..=8).contains(&n) {
                    return Err(format!("--head-rpt {n}: expected 1 to 8").into());
                }
                t.head_rpt = Some(n);
            }
            if let Some(n) = self.head_tpr {
                if !n.is_power_of_two() || !(4..=256).contains(&n) {
                    return Err(format!("--head-tpr {n}: expected a power of two from 4 to 256").into());
                }
                t.head_tpr = Some(n);
            }
            if let Some(n) = self.unroll {
                if !(1..=8).contains(&n) {
                    return Err(format!("--unroll {n}: expected 1 to 8").into());
                }
                t.unroll = Some(n);
            }
            t.wide = self.wide.or(t.wide);
            if let Some(names) = &self.wide_types {
                let mut mask = 0u64;
                for n in names {
                    let ty = webgpu_llama::ggml::GgmlType::from_name(n).ok_or_else(|| format!("--wide-types {n}: not a GGML type name"))?;
                    if webgpu_llama::kernels::Format::of(ty).pieces.is_none() {
                        return Err(format!("--wide-types {n}: {} has no 16-byte pieces (Q4_K, Q6_K, F16 and Q8_0 do)", ty.name()).into());
                    }
                    mask |= 1 << ty as u32;
                }
                t.wide_types = Some(mask);
            }
            t.wide_norm = self.wide_norm.or(t.wide_norm);
            t.int_dot = self.int_dot.or(t.int_dot);
            t.quant_out = self.quant_out.or(t.quant_out);
            t.quant_out_glu = self.quant_out_glu.or(t.quant_out_glu);
            if let Some(n) = self.quant_out_tpr {
                if !n.is_power_of_two() || n > 64 {
                    return Err(format!("--quant-out-tpr {n}: expected a power of two up to 64").into());
                }
                t.quant_out_tpr = Some(n);
            }
            if let Some(n) = self.rpt {
                if !(1..=8).contains(&n) {
                    return Err(format!("--rpt {n}: expected 1 to 8").into());
                }
                t.rpt = Some(n);
            }
            if self.no_decode_attention {
                t.decode_attention = Some(false);
            }
            if self.no_tiled_attention {
                t.tiled_attention = false;
            }
            if self.fuse || self.no_fuse {
                t.fuse = Some(self.fuse);
            }
            t.checked_shaders = self.checked_shaders;
            t.spin_wait = self.spin_wait.or(t.spin_wait);
            t.v_to_cache = self.v_to_cache.or(t.v_to_cache);
            if let Some(h) = &self.hollow {
                t.hollow = h.parse()?;
            }
            t.fused_combine = self.fused_combine.or(t.fused_combine);
            if let Some(n) = self.attn_chunk {
                if n != 64 && n != 128 {
                    return Err(format!("--attn-chunk {n}: expected 64 or 128").into());
                }
                t.attn_chunk = Some(n);
            }
            t.attn_prefetch = self.attn_prefetch.or(t.attn_prefetch);
            t.attn_wide = self.attn_wide.or(t.attn_wide);
            t.attn_owned = self.attn_owned.or(t.attn_owned);
            if let Some(c) = &self.cpu_tile {
                t.cpu_tile = Some(c.parse()?);
            }
            if self.no_cpu_subgroups {
                t.cpu_subgroup = 0;
            }
            if self.no_reduce_subgroups {
                t.reduce_subgroup = 0;
            }
            if self.no_cpu_kernels {
                (t.cpu_tile, t.cpu_attention) = (None, false);
            }
            if self.coop == Some(true) && !gpu.has_coop() {
                return Err("--coop: this device has no 16x16x16 f16 cooperative matrices".into());
            }
            if let Some(c) = self.coop {
                if c && !gpu.coop_fits(gpu.tuning().coop_tile) {
                    return Err("--coop: its tiles need more workgroup memory than this device allows (--default-limits?)".into());
                }
                gpu.tuning_mut().coop = c;
            }
            if let Some(t) = &self.coop_tile {
                let t: webgpu_llama::kernels::CoopTile = t.parse()?;
                if !gpu.tuning().coop {
                    return Err("--coop-tile: the matrix-unit matmul is off (no cooperative matrices on this device, or --coop false)".into());
                }
                if !gpu.coop_fits(t) {
                    let limit = gpu.limits().max_compute_workgroup_storage_size;
                    return Err(format!(
                        "--coop-tile: {} bytes of workgroup memory (or the 64x64 fallback's), more than this device's {limit}",
                        t.shared_bytes()
                    )
                    .into());
                }
                gpu.tuning_mut().coop_tile = t;
            }
            if let Some(q) = self.coop_quant_pieces {
                gpu.tuning_mut().coop_quant_pieces = q;
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
                copy_logits,
                random_next,
                generate,
                stream,
                choices,
            } => {
                let bytes = read(&model)?;
                let mut gpu = Gpu::native(default_limits).await?;
                choices.apply(&mut gpu)?;
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
                if stream {
                    let bytes = (1u64 << 30).min(gpu.max_binding()) & !15;
                    let gbs = webgpu_llama::bench::read_bandwidth(&gpu, bytes, 32, 5).await?;
                    let share = match report.hollow {
                        webgpu_llama::gpu::Hollow::Off => {
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
                    name => Shape::named(name)
                        .ok_or_else(|| format!("unknown shape {name:?}: llama-3.2-1b, llama-3-8b, tinyllama-1.1b, moe-8x-1b, smollm2-135m or smoke"))?,
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
                let bytes = read(&model)?;
                let mut gpu = Gpu::native(default_limits).await?;
                choices.apply(&mut gpu)?;
                if gpu.tuning().hollow != webgpu_llama::gpu::Hollow::Off {
                    return Err(
                        "--hollow is bench's measure of a step's floor (or of one kernel's cost): run would print logits its kernels never wrote".into()
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
