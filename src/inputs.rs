//! A one-token step's inputs (its [`Step`] uniform and its token id) written through a small
//! mapped staging buffer and copied by the step's own command buffer.
//!
//! `queue.write_buffer` makes a staging buffer per call and, at the next submission, a command
//! buffer of wgpu's own to copy it: two writes a decoded token, on the CPU between the readback
//! and the next step's submission, while the GPU waits. Here a step recorded ahead
//! ([`crate::llama::Llama`]'s decode loop, right after the step before was submitted) copies its
//! inputs from a slot whose map for writing it asks for then. That map completes with the step
//! before (the last one that copies from the slot), in the same device poll as that step's
//! readback (natively; in the browser its promise resolves first, being asked for first), so
//! when the loop reads the step before and submits this one, the submission only writes 20
//! bytes into mapped memory and unmaps them.

use crate::program::Step;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

/// The slot's bytes: the step uniform, then the token id.
const STEP_BYTES: usize = std::mem::size_of::<Step>();
const SLOT_BYTES: usize = STEP_BYTES + 4;

/// The slot's states: unmapped with no map asked for, map asked for, mapped.
const IDLE: u8 = 0;
const ASKED: u8 = 1;
const MAPPED: u8 = 2;

/// The staging slot the steps recorded ahead copy their inputs from: a MAP_WRITE buffer, its
/// state (set by its map callback, which may run on another thread natively), and the steps
/// submitted through it and those recorded afresh because it was not mapped.
pub struct StepInputs {
    buffer: wgpu::Buffer,
    state: Arc<AtomicU8>,
    counts: std::cell::Cell<(u64, u64)>,
}

impl StepInputs {
    /// An unmapped slot.
    pub fn new(device: &wgpu::Device) -> StepInputs {
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("step inputs"),
            size: SLOT_BYTES as u64,
            usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        StepInputs { buffer, state: Arc::new(AtomicU8::new(IDLE)), counts: Default::default() }
    }

    /// For a step being recorded: asks for the slot's map unless it is asked for or mapped (a
    /// failed map sets it back to idle), and records the copies of its step uniform into `step`
    /// and its token id into `tokens`.
    pub fn record(&self, enc: &mut wgpu::CommandEncoder, step: &wgpu::Buffer, tokens: &wgpu::Buffer) {
        if self.state.compare_exchange(IDLE, ASKED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            let state = self.state.clone();
            self.buffer.map_async(wgpu::MapMode::Write, .., move |r| state.store(if r.is_ok() { MAPPED } else { IDLE }, Ordering::Release));
        }
        enc.copy_buffer_to_buffer(&self.buffer, 0, step, 0, STEP_BYTES as u64);
        enc.copy_buffer_to_buffer(&self.buffer, STEP_BYTES as u64, tokens, 0, 4);
    }

    /// Writes `step` and `token` into the slot and unmaps it, so that the command buffer
    /// [`Self::record`] made can be submitted; false (nothing written) when its map has not
    /// completed (natively, when the device was not polled since the step before finished,
    /// e.g. that step was not read before this one was submitted): the caller then records
    /// the step afresh with `queue.write_buffer`.
    pub fn fill(&self, step: &Step, token: u32) -> bool {
        let (staged, afresh) = self.counts.get();
        let written = self.state.load(Ordering::Acquire) == MAPPED && {
            let mut bytes = [0u8; SLOT_BYTES];
            bytes[..STEP_BYTES].copy_from_slice(bytemuck::bytes_of(step));
            bytes[STEP_BYTES..].copy_from_slice(&token.to_le_bytes());
            let ok = self.buffer.get_mapped_range_mut(..).map(|mut v| v.copy_from_slice(&bytes)).is_ok();
            self.buffer.unmap();
            self.state.store(IDLE, Ordering::Release);
            ok
        };
        self.counts.set(if written { (staged + 1, afresh) } else { (staged, afresh + 1) });
        written
    }

    /// One-token steps so far submitted through the slot, and those recorded afresh because
    /// its map had not completed.
    pub fn counts(&self) -> (u64, u64) {
        self.counts.get()
    }

    /// Frees the slot.
    pub fn destroy(&self) {
        self.buffer.destroy();
    }
}
