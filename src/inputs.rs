//! A one-token step's inputs (its [`Step`] uniform and its token id) written through small
//! mapped staging buffers and copied by the step's own command buffer.
//!
//! `queue.write_buffer` makes a staging buffer per call and, at the next submission, a command
//! buffer of wgpu's own to copy it: two writes a decoded token, on the CPU between the readback
//! and the next step's submission, while the GPU waits. Here a step recorded ahead
//! ([`crate::llama::Llama`]'s decode loop) copies its inputs from one of two slots, mapped
//! for writing while the step before runs (the slot's last step finished before then), so the
//! submission only writes 20 bytes into mapped memory and unmaps them.

use crate::program::Step;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bytes of a slot: the step uniform (16) then the token id (4), padded.
const SLOT_BYTES: u64 = 32;

/// A staging slot: a MAP_WRITE buffer and whether its map has completed (`mapped`, set by the
/// map callback) or been asked for (`asked`).
struct Slot {
    buffer: wgpu::Buffer,
    mapped: Arc<AtomicBool>,
    asked: Cell<bool>,
}

/// Two staging slots used in turn by the steps recorded ahead.
pub struct StepInputs {
    slots: [Slot; 2],
    turn: Cell<usize>,
    /// Steps submitted through a slot, and steps recorded afresh because theirs was not mapped.
    counts: Cell<(u64, u64)>,
}

impl StepInputs {
    /// Two slots of 32 bytes each.
    pub fn new(device: &wgpu::Device) -> StepInputs {
        let slot = || Slot {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("step inputs"),
                size: SLOT_BYTES,
                usage: wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            mapped: Arc::new(AtomicBool::new(false)),
            asked: Cell::new(false),
        };
        StepInputs { slots: [slot(), slot()], turn: Cell::new(0), counts: Cell::new((0, 0)) }
    }

    /// Takes the next slot for a step being recorded: asks for its map (which completes once
    /// the last submission that copied from it has run) and records the copies of its step
    /// uniform into `step` and its token id into `tokens`. Returns the slot, for [`Self::fill`].
    pub fn record(&self, enc: &mut wgpu::CommandEncoder, step: &wgpu::Buffer, tokens: &wgpu::Buffer) -> usize {
        let i = self.turn.get();
        self.turn.set(1 - i);
        let s = &self.slots[i];
        if !s.asked.replace(true) {
            let mapped = s.mapped.clone();
            s.buffer.map_async(wgpu::MapMode::Write, .., move |r| mapped.store(r.is_ok(), Ordering::Release));
        }
        enc.copy_buffer_to_buffer(&s.buffer, 0, step, 0, 16);
        enc.copy_buffer_to_buffer(&s.buffer, 16, tokens, 0, 4);
        i
    }

    /// Writes `step` and `token` into slot `i` and unmaps it, so that the command buffer
    /// [`Self::record`] made can be submitted; false (nothing written) when its map has not
    /// completed yet: the caller then records the step afresh with `queue.write_buffer`.
    pub fn fill(&self, i: usize, step: &Step, token: u32) -> bool {
        let s = &self.slots[i];
        let (staged, missed) = self.counts.get();
        if !s.mapped.load(Ordering::Acquire) {
            self.counts.set((staged, missed + 1));
            return false;
        }
        {
            let Ok(mut v) = s.buffer.get_mapped_range_mut(..) else {
                self.counts.set((staged, missed + 1));
                return false;
            };
            let mut bytes = [0u8; SLOT_BYTES as usize];
            bytes[..16].copy_from_slice(bytemuck::bytes_of(step));
            bytes[16..20].copy_from_slice(&token.to_le_bytes());
            v.copy_from_slice(&bytes);
        }
        s.buffer.unmap();
        s.mapped.store(false, Ordering::Release);
        s.asked.set(false);
        self.counts.set((staged + 1, missed));
        true
    }

    /// One-token steps so far submitted through a slot, and those recorded afresh because their
    /// slot's map had not completed (a step submitted before the one two back has run).
    pub fn counts(&self) -> (u64, u64) {
        self.counts.get()
    }

    /// Frees both slots.
    pub fn destroy(&self) {
        for s in &self.slots {
            s.buffer.destroy();
        }
    }
}
