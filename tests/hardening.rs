#![cfg(not(target_arch = "wasm32"))]
//! Hardening of the GPU side, natively (lavapipe): no GPU memory leaks over load / forward / drop
//! cycles, measured by wgpu's own allocator (`Device::generate_allocator_report`, gpu-allocator's
//! live allocations), and several forwards in flight on one model and on two models of one
//! device giving the logits of the same calls awaited in order. The browser's side of the same
//! (dispose, device loss, a forced out-of-memory): tests/web_hardening.rs.

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

fn load(gpu: &Gpu, bytes: &[u8], ctx: u32) -> Llama {
    let g = Gguf::parse(bytes).expect("parse");
    Llama::load(gpu, &g, &bytes.to_vec(), LoadOptions { ctx: Some(ctx), ..Default::default() }).expect("load")
}

#[test]
fn a_hundred_load_forward_drop_cycles_leave_gpu_memory_where_it_started() {
    let gpu = common::gpu(false);
    let bytes = model("stories260K-Q8_0.gguf");
    let case = common::case("stories260K-q8_0");
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
