#![cfg(not(target_arch = "wasm32"))]
//! Hardening of the GPU side, natively (lavapipe): no GPU memory leaks over load / forward / drop
//! cycles, measured by wgpu's own allocator (`Device::generate_allocator_report`, gpu-allocator's
//! live allocations), nor after `dispose()` with calls in flight; several forwards in flight on
//! one model and on two models of one device, and two models driven from two threads, giving the
//! results of the same calls awaited in order; the device destroyed (`Device::destroy`) between
//! calls, after a load, during a load, a forward and a generate giving `Error::DeviceLost`, never
//! a hang (each such test runs under a time limit); and (`lab` builds) a load refused at each of
//! its buffers in turn giving `Error::OutOfMemory` and freeing everything. The browser's side of
//! the same: tests/web_hardening.rs.

mod common;

use webgpu_llama::{GenerateOptions, Gguf, Gpu, Llama, LoadOptions};

/// The allocator's live allocations and their bytes, after the device has finished every
/// submission (wgpu frees a dropped buffer once the GPU no longer uses it, at a poll).
fn live(gpu: &Gpu) -> (usize, u64) {
    gpu.device.poll(wgpu::PollType::wait_indefinitely()).expect("poll");
    let report = gpu.device.generate_allocator_report().expect("the Vulkan backend reports its allocator");
    (report.allocations.len(), report.total_allocated_bytes)
}

fn model(name: &str) -> Vec<u8> {
    std::fs::read(common::model_path(name)).unwrap()
}

/// stories260K Q8_0 and its reference case.
fn stories() -> (Vec<u8>, common::Case) {
    (model("stories260K-Q8_0.gguf"), common::case("stories260K-q8_0"))
}

fn load(gpu: &Gpu, bytes: &[u8], ctx: u32) -> Llama {
    let g = Gguf::parse(bytes).expect("parse");
    Llama::load(gpu, &g, &bytes.to_vec(), LoadOptions { ctx: Some(ctx), ..Default::default() }).expect("load")
}

#[test]
fn a_hundred_load_forward_drop_cycles_leave_gpu_memory_where_it_started() {
    let gpu = common::gpu(false);
    let (bytes, case) = stories();
    let p = case.prompt.len();
    // The baseline after one cycle: wgpu keeps a few buffers of its own once used (the queue's
    // staging chunks), which are not the model's.
    let cycle = |i: usize| {
        let llama = load(&gpu, &bytes, 64);
        assert!(live(&gpu).1 >= llama.gpu_bytes(), "cycle {i}: the model's buffers are not in the allocator's report");
        let logits = pollster::block_on(llama.forward(&case.prompt, 0)).unwrap();
        assert!(common::max_abs(&logits, &case.rows[p - 1]) <= 2e-3, "cycle {i}: wrong logits");
        // A decode step (recorded ahead: its readback is pooled) and a generate call (its own
        // readbacks), so that every kind of buffer a session makes is made.
        pollster::block_on(llama.forward(&[case.greedy[0]], p as u32)).unwrap();
        let opts = GenerateOptions { max_tokens: 3, block: 2, ..Default::default() };
        pollster::block_on(llama.generate(&[case.greedy[1]], p as u32 + 1, &opts, &mut |_| true)).unwrap();
        drop(llama);
    };
    cycle(0);
    let before = live(&gpu);
    let mut most = before;
    for i in 1..=100 {
        cycle(i);
        let now = live(&gpu);
        most = most.max(now);
        assert_eq!(now, before, "cycle {i}: live allocations (count, bytes) {now:?}, at the start {before:?}");
    }
    eprintln!("100 cycles: live allocations {before:?} before and after (at most {most:?} between cycles)");
}

#[test]
fn dispose_with_calls_in_flight_completes_them_or_fails_them_as_disposed_and_frees_everything() {
    let gpu = common::gpu(false);
    let (bytes, case) = stories();
    let p = case.prompt.len();
    // (The baseline after one session: see the cycles above.)
    drop(pollster::block_on(load(&gpu, &bytes, 64).forward(&case.prompt, 0)));
    let before = live(&gpu);

    // A forward submitted before dispose() still reads its logits.
    let llama = load(&gpu, &bytes, 64);
    let pending = llama.submit(&case.prompt, 0, false).unwrap();
    llama.dispose();
    let logits = pollster::block_on(llama.read(pending)).unwrap();
    assert!(common::max_abs(&logits, &case.rows[p - 1]) <= 2e-3, "the logits of the forward in flight at dispose()");
    assert_eq!(pollster::block_on(llama.forward(&case.prompt, 0)).unwrap_err(), webgpu_llama::Error::Disposed);
    drop(llama);
    assert_eq!(live(&gpu), before, "live allocations after a forward in flight at dispose()");

    // A generate call disposed between its blocks fails as disposed at its next block.
    let llama = load(&gpu, &bytes, 64);
    pollster::block_on(llama.forward(&case.prompt, 0)).unwrap();
    let opts = GenerateOptions { max_tokens: 12, block: 3, ..Default::default() };
    let mut blocks = 0;
    let r = pollster::block_on(llama.generate(&[case.greedy[0]], p as u32, &opts, &mut |_| {
        blocks += 1;
        llama.dispose();
        true
    }));
    assert_eq!((r.map(|g| g.ids).unwrap_err(), blocks), (webgpu_llama::Error::Disposed, 1));
    drop(llama);
    assert_eq!(live(&gpu), before, "live allocations after a generate disposed between its blocks");
}

/// Logits of `calls` (tokens, start position) on `llama`, each awaited before the next.
fn in_order(llama: &Llama, calls: &[(Vec<u32>, u32)]) -> Vec<Vec<f32>> {
    calls.iter().map(|(t, pos)| pollster::block_on(llama.forward(t, *pos)).unwrap()).collect()
}

#[test]
fn forwards_in_flight_on_one_model_and_on_two_models_of_one_device_match_awaited_calls() {
    let gpu = common::gpu(false);
    let case = common::case("stories260K-q8_0");
    let (a, b) = (load(&gpu, &model("stories260K-Q8_0.gguf"), 64), load(&gpu, &model("stories260K.gguf"), 64));
    let p = case.prompt.len() as u32;
    let g = &case.greedy;
    let calls = [(case.prompt.clone(), 0), (vec![g[0]], p), (g[1..3].to_vec(), p + 1), (vec![g[3]], p + 3), (vec![g[0]], p)];
    let other = [(vec![1, 403, 407], 0), (vec![261], 3), (vec![378, 300], 4)];
    let expect_a = in_order(&a, &calls);
    let expect_b = in_order(&b, &other);
    // The reference rows: the calls above are the reference case's own positions.
    assert!(common::max_abs(&expect_a[2], &case.rows[p as usize + 2]) <= 2e-3);

    // Every call submitted before any is read, the two models' calls interleaved, then read in
    // reverse order.
    let mut pending = Vec::new();
    for i in 0..calls.len().max(other.len()) {
        if let Some((t, pos)) = calls.get(i) {
            pending.push((0, i, a.submit(t, *pos, false).unwrap()));
        }
        if let Some((t, pos)) = other.get(i) {
            pending.push((1, i, b.submit(t, *pos, false).unwrap()));
        }
    }
    for (m, i, p) in pending.into_iter().rev() {
        let (llama, want) = if m == 0 { (&a, &expect_a[i]) } else { (&b, &expect_b[i]) };
        let got = pollster::block_on(llama.read(p)).unwrap();
        assert_eq!(&got, want, "model {m} call {i}: logits differ from the awaited call's");
    }
}

/// Runs `f` on a thread of its own and fails if it takes longer than `limit`: a device loss
/// must end every call, never leave one waiting.
fn within(limit: std::time::Duration, what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().unwrap(),
        // The worker panicked (its assertion's message is printed above).
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => std::panic::resume_unwind(worker.join().unwrap_err()),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still running after {limit:?} (a hang)"),
    }
}

/// Asserts that `r` is the typed device-lost error, with the reason as the browser's
/// `DeviceLostError` gives it.
#[track_caller]
fn assert_lost<T>(r: webgpu_llama::Result<T>, what: &str) {
    match r {
        Err(webgpu_llama::Error::DeviceLost(why)) => assert_eq!(why, "destroyed", "{what}"),
        Err(e) => panic!("{what}: expected Error::DeviceLost, got {e:?}"),
        Ok(_) => panic!("{what}: expected Error::DeviceLost, got a result"),
    }
}

const LOST_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// A model (64 positions) on a device of its own, which the test destroys.
fn on_own_device(bytes: &[u8]) -> (Gpu, Llama) {
    let gpu = common::gpu(false);
    let llama = load(&gpu, bytes, 64);
    (gpu, llama)
}

#[test]
fn a_device_destroyed_between_calls_fails_every_later_call_and_load_as_device_lost() {
    within(LOST_LIMIT, "calls after the device was destroyed", || {
        let (bytes, case) = stories();
        let (gpu, llama) = on_own_device(&bytes);
        let logits = pollster::block_on(llama.forward(&case.prompt, 0)).unwrap();
        assert!(common::max_abs(&logits, &case.rows[case.prompt.len() - 1]) <= 2e-3);
        gpu.device.destroy();
        let p = case.prompt.len() as u32;
        assert_lost(pollster::block_on(llama.forward(&[case.greedy[0]], p)), "forward after destroy");
        assert_lost(pollster::block_on(llama.forward(&case.prompt, 0)), "a second forward after destroy");
        assert_lost(pollster::block_on(llama.forward_top_k(&[case.greedy[0]], p, 5)), "forward_top_k after destroy");
        let opts = GenerateOptions { max_tokens: 8, block: 4, ..Default::default() };
        assert_lost(pollster::block_on(llama.generate(&[case.greedy[0]], p, &opts, &mut |_| true)), "generate after destroy");
        let g = Gguf::parse(bytes.as_slice()).unwrap();
        assert_lost(Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(64), ..Default::default() }), "load on the destroyed device");
        let e = pollster::block_on(llama.forward(&[case.greedy[0]], p)).unwrap_err();
        assert_eq!(e.to_string(), "the GPU device was lost (destroyed)");
        llama.dispose();
    });
}

#[test]
fn a_device_destroyed_after_load_or_before_it_fails_the_first_call_or_the_load_as_device_lost() {
    within(LOST_LIMIT, "a load and a first forward on a destroyed device", || {
        let bytes = model("stories260K-Q8_0.gguf");
        let (gpu, llama) = on_own_device(&bytes);
        gpu.device.destroy();
        assert_lost(pollster::block_on(llama.forward(&[1, 403, 407], 0)), "the first forward after destroy");

        // Destroyed before the load: no poll has reported it yet, so the load finds out at its
        // end.
        let gpu = common::gpu(false);
        gpu.device.destroy();
        let g = Gguf::parse(bytes.as_slice()).unwrap();
        assert_lost(Llama::load(&gpu, &g, &bytes, LoadOptions { ctx: Some(64), ..Default::default() }), "load after destroy");
    });
}

#[test]
fn a_device_destroyed_during_a_load_fails_it_as_device_lost() {
    within(LOST_LIMIT, "a load whose device is destroyed half way", || {
        let bytes = model("stories260K-Q8_0.gguf");
        let gpu = common::gpu(false);
        let g = Gguf::parse(bytes.as_slice()).unwrap();
        let device = gpu.device.clone();
        let mut calls = 0;
        // Destroyed after the third tensor's upload.
        let mut progress = |_: &webgpu_llama::weights::Progress| {
            calls += 1;
            if calls == 3 {
                device.destroy();
            }
        };
        let opts = LoadOptions { ctx: Some(64), progress: Some(&mut progress), ..Default::default() };
        assert_lost(Llama::load(&gpu, &g, &bytes, opts), "load destroyed after 3 tensors");
        assert!(calls > 3, "the load went on after the destroy ({calls} tensors)");
    });
}

#[test]
fn a_device_destroyed_while_a_forward_or_generate_runs_ends_it_as_device_lost() {
    within(LOST_LIMIT, "calls in flight when the device is destroyed", || {
        let (bytes, case) = stories();
        let p = case.prompt.len() as u32;

        // Between a forward's submission and its readback.
        let (gpu, llama) = on_own_device(&bytes);
        let pending = llama.submit(&case.prompt, 0, false).unwrap();
        gpu.device.destroy();
        assert_lost(pollster::block_on(llama.read(pending)), "a readback in flight at destroy");

        // Between a generate call's blocks (its first block's ids are in, the next block is
        // submitted).
        let (gpu, llama) = on_own_device(&bytes);
        pollster::block_on(llama.forward(&case.prompt, 0)).unwrap();
        let (device, mut blocks) = (gpu.device.clone(), Vec::new());
        let opts = GenerateOptions { max_tokens: 12, block: 3, ..Default::default() };
        let r = pollster::block_on(llama.generate(&[case.greedy[0]], p, &opts, &mut |ids| {
            blocks.push(ids.to_vec());
            device.destroy();
            true
        }));
        assert_lost(r, "generate destroyed after its first block");
        assert_eq!(blocks, [case.greedy[1..4].to_vec()], "the block before the destroy");

        // From another thread while forwards run: each call gives the right logits or
        // DeviceLost, and once the destroy has returned (and a poll seen it) every call fails.
        let (gpu, llama) = on_own_device(&bytes);
        // (Its kernels compiled first, so that calls complete before the destroy too.)
        pollster::block_on(llama.forward(&case.prompt, 0)).unwrap();
        let device = gpu.device.clone();
        let killer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(30));
            device.destroy();
        });
        let (mut ok, mut lost) = (0, 0);
        while !killer.is_finished() || lost == 0 {
            match pollster::block_on(llama.forward(&case.prompt, 0)) {
                Ok(logits) => {
                    assert!(common::max_abs(&logits, &case.rows[p as usize - 1]) <= 2e-3, "call {ok}: wrong logits");
                    ok += 1;
                }
                Err(webgpu_llama::Error::DeviceLost(_)) => lost += 1,
                Err(e) => panic!("call {}: expected logits or Error::DeviceLost, got {e:?}", ok + lost),
            }
            assert!(ok < 1_000_000, "the destroy was never seen");
        }
        killer.join().unwrap();
        assert_lost(pollster::block_on(llama.forward(&case.prompt, 0)), "after the other thread's destroy");
        eprintln!("destroyed from another thread: {ok} forwards completed before, {lost} failed as DeviceLost");
    });
}

/// A load whose Nth buffer the device refuses (the lab's `fail_alloc_at`, every N a load
/// makes: the first weight, the middle ones, the KV cache, the activations, the last) fails
/// with the typed out-of-memory error naming what the model needs and the buffer refused,
/// leaves the allocator where it was, and the same device then loads the model and gives the
/// logits of a load that never failed.
#[test]
fn a_refused_allocation_fails_the_load_as_out_of_memory_and_frees_what_it_made() {
    #[cfg(feature = "lab")]
    refused_allocations();
    #[cfg(not(feature = "lab"))]
    println!("forced allocation failures: skipped: the fail_alloc_at knob needs `--features lab`");
}

#[cfg(feature = "lab")]
fn refused_allocations() {
    use webgpu_llama::plan::{LoadPlan, PlanOptions};
    let mut gpu = common::gpu(false);
    let (bytes, case) = stories();
    let g = Gguf::parse(bytes.as_slice()).unwrap();
    let need =
        LoadPlan::new(&g, PlanOptions { ctx: Some(64), batch: None, kv: Default::default(), max_binding: gpu.max_binding() }).unwrap().weight_and_cache_bytes();
    let clean = {
        let llama = load(&gpu, &bytes, 64);
        pollster::block_on(llama.forward(&case.prompt, 0)).unwrap()
    };
    assert!(common::max_abs(&clean, &case.rows[case.prompt.len() - 1]) <= 2e-3);
    let before = live(&gpu);
    let mut refused = Vec::new();
    for n in 1.. {
        gpu.lab_mut().fail_alloc_at = n;
        let opts = LoadOptions { ctx: Some(64), ..Default::default() };
        match Llama::load(&gpu, &g, &bytes, opts) {
            Ok(_) => break,
            Err(webgpu_llama::Error::OutOfMemory { bytes, detail }) => {
                if n == 1 {
                    eprintln!("{}", webgpu_llama::Error::OutOfMemory { bytes, detail: detail.clone() });
                }
                assert_eq!(bytes, need, "buffer {n}: the need named");
                let (label, size) = detail
                    .split_once(" of ")
                    .and_then(|(l, rest)| Some((l, rest.split_once(" bytes could not be allocated")?.0)))
                    .unwrap_or_else(|| panic!("buffer {n}: {detail:?} names no buffer and size"));
                assert!(size.parse::<u64>().is_ok_and(|s| s > 0), "buffer {n}: size {size:?}");
                refused.push(label.to_string());
            }
            Err(e) => panic!("buffer {n}: expected Error::OutOfMemory, got {e:?}"),
        }
        assert_eq!(live(&gpu), before, "buffer {n} refused: live allocations (count, bytes) after the failed load");
    }
    let has = |s: &str| refused.iter().any(|l| l.contains(s));
    assert_eq!(refused.first().map(String::as_str), Some("token_embd.weight"), "the first buffer of a load");
    for part in ["blk.1.attn_norm.weight", "output_norm.weight", "k cache", "v cache", "logits"] {
        assert!(has(part), "no load was refused at {part}: {refused:?}");
    }
    eprintln!("{} loads, each refused at another buffer ({} .. {}), all freed", refused.len(), refused[0], refused[refused.len() - 1]);
    gpu.lab_mut().fail_alloc_at = 0;
    let llama = load(&gpu, &bytes, 64);
    assert_eq!(pollster::block_on(llama.forward(&case.prompt, 0)).unwrap(), clean, "logits after the failed loads");
}

#[test]
fn two_models_driven_from_two_threads_on_one_device_match_sequential_calls() {
    let gpu = common::gpu(false);
    let case = common::case("stories260K-q8_0");
    let p = case.prompt.len() as u32;
    // A prefill, a decode step and a generate call on each model.
    let run = |gpu: &Gpu, file: &str| {
        let llama = load(gpu, &model(file), 64);
        let prefill = pollster::block_on(llama.forward(&case.prompt, 0)).unwrap();
        let step = pollster::block_on(llama.forward(&[case.greedy[0]], p)).unwrap();
        let opts = GenerateOptions { max_tokens: 12, block: 4, ..Default::default() };
        let ids = pollster::block_on(llama.generate(&[case.greedy[1]], p + 1, &opts, &mut |_| true)).unwrap().ids;
        (prefill, step, ids)
    };
    let files = ["stories260K-Q8_0.gguf", "stories260K.gguf"];
    let sequential: Vec<_> = files.iter().map(|f| run(&gpu, f)).collect();
    assert!(common::max_abs(&sequential[0].0, &case.rows[p as usize - 1]) <= 2e-3);
    assert_eq!(sequential[0].2, case.greedy[2..14], "greedy ids");
    for round in 0..5 {
        std::thread::scope(|s| {
            let threads: Vec<_> = files.iter().map(|f| s.spawn(|| run(&gpu, f))).collect();
            for (i, t) in threads.into_iter().enumerate() {
                assert!(t.join().unwrap() == sequential[i], "round {round}, {}: results differ from the sequential calls'", files[i]);
            }
        });
    }
}
