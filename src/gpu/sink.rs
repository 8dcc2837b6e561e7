//! What a device reports outside the call that caused it: errors no error scope caught (wgpu
//! hands them to a handler, not to the call) and the device's loss (wgpu calls a callback, at a
//! device poll, once `Device::destroy` was called and its queue is empty, or at once when the
//! driver loses the device). A [`Gpu`] records both here and turns them into the crate's typed
//! errors: [`Error::DeviceLost`], [`Error::OutOfMemory`], [`Error::Gpu`]. After a loss, wgpu
//! drops the errors of every call on the device (WebGPU's rule: they surface through the loss),
//! so the loss is checked wherever an error could have been.

use std::sync::{Arc, Mutex};

use super::Gpu;
use crate::error::{Error, Result};

/// The errors and the loss a [`Gpu`] and its clones recorded.
#[derive(Default)]
pub(crate) struct Sink {
    /// Errors not yet returned by [`Gpu::check`], oldest first.
    errors: Mutex<Vec<Error>>,
    /// Why the device was lost (`"destroyed"` or `"unknown"`, then the driver's message if it
    /// gave one), once it was.
    lost: Mutex<Option<String>>,
    /// Buffers made through [`Gpu::allocate`] since the load under way began (`lab` builds:
    /// the `fail_alloc_at` knob).
    #[cfg(feature = "lab")]
    allocations: std::sync::atomic::AtomicU32,
}

impl Sink {
    /// A sink for a device we own: its uncaptured errors (validation, out of memory) and its
    /// loss are recorded here, never panicking or logged by wgpu's default handler.
    pub(crate) fn watching(device: &wgpu::Device) -> Arc<Sink> {
        let sink = Arc::new(Sink::default());
        let errors = sink.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let e = match e {
                wgpu::Error::OutOfMemory { .. } => Error::OutOfMemory { bytes: 0, detail: e.to_string() },
                e => Error::Gpu(e.to_string()),
            };
            errors.push(e);
        }));
        let lost = sink.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut l) = lost.lost.lock() {
                l.get_or_insert(lost_text(reason, &message));
            }
        });
        sink
    }

    fn push(&self, e: Error) {
        if let Ok(mut v) = self.errors.lock() {
            v.push(e);
        }
    }
}

/// How a loss reads in [`Error::DeviceLost`]: the reason as WebGPU names it
/// (`GPUDeviceLostReason`: `destroyed`, `unknown`), then the driver's message where there is
/// one, as the browser module's `DeviceLostError` reads (`src/web/api.rs`).
fn lost_text(reason: wgpu::DeviceLostReason, message: &str) -> String {
    let reason = match reason {
        wgpu::DeviceLostReason::Destroyed => "destroyed",
        wgpu::DeviceLostReason::Unknown => "unknown",
    };
    if message.is_empty() {
        reason.to_string()
    } else {
        format!("{reason}: {message}")
    }
}

impl Gpu {
    /// Fails once the device's loss has been reported (natively: wgpu's device-lost callback,
    /// which runs at a device poll; devices made by [`Gpu::native`] or adopted with
    /// `capture_errors` only). Reads a flag: no GPU work.
    ///
    /// # Errors
    /// [`Error::DeviceLost`] with the reason.
    pub fn lost(&self) -> Result<()> {
        match self.sink.lost.lock().ok().and_then(|l| l.clone()) {
            Some(why) => Err(Error::DeviceLost(why)),
            None => Ok(()),
        }
    }

    /// Returns the first GPU error recorded since the last call, if any (the others go), or
    /// the device's loss. Natively it first polls the device without waiting, so that a loss
    /// that happened since the last poll is reported (wgpu drops the errors of calls on a lost
    /// device, so there may be none to show it).
    ///
    /// # Errors
    /// [`Error::DeviceLost`] when the device was lost (whatever else was recorded);
    /// [`Error::OutOfMemory`] for an allocation the device refused (its `bytes`: the buffer's,
    /// 0 where wgpu did not say which buffer); [`Error::Gpu`] for a validation or internal error.
    pub fn check(&self) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::Poll);
        self.recorded()
    }

    /// [`Gpu::check`] without the poll (after one).
    pub(super) fn recorded(&self) -> Result<()> {
        let first = self.sink.errors.lock().map_err(|_| Error::Gpu("error sink poisoned".into()))?.drain(..).next();
        self.lost()?;
        first.map_or(Ok(()), Err)
    }

    /// `e`, or [`Error::DeviceLost`] where the device turns out to be lost: the failure may be
    /// the loss's first sign, and wgpu reports a destroyed device's loss once its queue is
    /// empty, so natively it first waits for the work submitted so far (failure paths only).
    pub(super) fn or_lost(&self, e: Error) -> Error {
        #[cfg(not(target_arch = "wasm32"))]
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
        self.lost().err().unwrap_or(e)
    }

    /// Creates a buffer. Natively, an out-of-memory error of the device for it is caught by an
    /// error scope around the call and recorded for [`Gpu::check`] as [`Error::OutOfMemory`]
    /// naming the buffer (`bytes`: its size). With the lab's `fail_alloc_at` knob, the load's
    /// buffer of that number fails so, as if the device had no memory left: it is made invalid,
    /// as a refused allocation's buffer is, so that what follows runs as it would then.
    pub(super) fn allocate(&self, desc: &wgpu::BufferDescriptor<'_>) -> wgpu::Buffer {
        #[cfg(feature = "lab")]
        if self.knobs.fail_alloc_at > 0 {
            let n = self.knobs.fail_alloc_at;
            if self.sink.allocations.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == n {
                // An empty usage makes it invalid: its validation error is dropped with the scope.
                let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
                let b = self.device.create_buffer(&wgpu::BufferDescriptor { usage: wgpu::BufferUsages::empty(), ..desc.clone() });
                drop(scope.pop());
                self.refused(desc, &format!("buffer {n} of the load refused by the lab's fail_alloc_at={n}"));
                return b;
            }
        }
        // (In the browser the scope's promise would settle later: the load's own scopes catch it.)
        #[cfg(not(target_arch = "wasm32"))]
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let b = self.device.create_buffer(desc);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(e) = pollster::block_on(scope.pop()) {
            self.refused(desc, &e.to_string());
        }
        b
    }

    /// Records that the device refused `desc`'s allocation (`why`: its message).
    #[cfg(any(not(target_arch = "wasm32"), feature = "lab"))]
    fn refused(&self, desc: &wgpu::BufferDescriptor<'_>, why: &str) {
        let label = desc.label.unwrap_or("a buffer");
        self.sink.push(Error::OutOfMemory { bytes: desc.size, detail: format!("{label} of {} bytes could not be allocated: {why}", desc.size) });
    }

    /// Starts counting the buffers of a load from 0 (`lab` builds: the `fail_alloc_at` knob).
    #[cfg(feature = "lab")]
    pub(crate) fn count_allocations(&self) {
        self.sink.allocations.store(0, std::sync::atomic::Ordering::Relaxed);
    }
}
