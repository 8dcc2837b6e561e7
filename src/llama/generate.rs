//! [`Llama::generate`]: decode steps chained on the GPU, each picking its next token there
//! ([`crate::sample`]) and feeding it to the next step, with the ids read back once per block
//! of steps. A readback costs a round trip (in Chrome, through the GPU process), so
//! one per token caps a page's decode; one per block of K tokens does not.

use super::{Llama, Readout};
use crate::error::{Error, Result};
use crate::program::Step;
use crate::sample::{GenerateOptions, Generated, StopReason};

impl Llama {
    /// Generates up to `opts.max_tokens` ids after `tokens` (the prompt, prefilled as
    /// [`Llama::forward`] runs it, or just the last token) at positions `start_pos..`.
    ///
    /// The first id is picked from the logits after `tokens`' last token; each id is then fed,
    /// on the GPU, as the next step's token (the pick kernel writes it where the embedding reads
    /// its input), so a block of `opts.block` steps is recorded and submitted with no CPU round
    /// trip: each step's uniform is copied from a buffer of the block's steps between compute
    /// passes. The block's ids are read back once; block j + 1 is submitted before block j's
    /// readback is awaited, so the GPU does not wait for it. After each block `on_tokens` gets
    /// its ids (cut at a stop id or at `max_tokens`).
    ///
    /// It ends at the first id in `opts.stop_ids` (included in the ids: [`StopReason::Stop`]),
    /// when `on_tokens` returns false ([`StopReason::Abort`]; the ids include that block's), or
    /// after `max_tokens` ids ([`StopReason::Length`]), `max_tokens` clamped to what the context
    /// holds (`ctx - start_pos - tokens.len() + 1`: the last id is picked, not fed).
    ///
    /// The KV cache afterwards: with `n` ids returned, [`Llama::filled`] is `start_pos +
    /// tokens.len() + n - 1`: every id but the last has been fed. Steps the GPU ran past the
    /// end (the rest of a block, or the block after it) wrote only positions from there on,
    /// which the next call overwrites. So the caller goes on with `forward(&[last id], start_pos
    /// + tokens.len() + n - 1)`, as after a loop of forwards.
    ///
    /// The pick: greedy (`sampler` `None`, or a temperature of 0) is the likeliest id, the lower
    /// of equal logits ([`crate::topk::argmax`]'s); a sampler's draw is
    /// [`crate::sample::reference_pick`]'s. The repetition penalty changes the step's logits
    /// row in place (the forward pass's scratch, rewritten by every later step or forward).
    ///
    /// Errors: as [`Llama::validate`] (which also refuses any call, this one included, while a
    /// generate call is under way: from `on_tokens`, or in the browser between its blocks);
    /// [`Error::Input`] naming the option ([`GenerateOptions::check`]); [`Error::Gpu`].
    pub async fn generate(&self, tokens: &[u32], start_pos: u32, opts: &GenerateOptions, on_tokens: &mut dyn FnMut(&[u32]) -> bool) -> Result<Generated> {
        // (A mark of Llama::reserve is this call's own: taken over by the busy flag below.)
        self.release();
        self.validate(tokens, start_pos)?;
        opts.check(self.config.vocab)?;
        // Until it returns (or its future is dropped), other calls are refused.
        let _busy = Busy::new(&self.generating);
        let given = tokens.len() as u32;
        let max = opts.max_tokens.min(self.config.ctx - start_pos - given + 1);
        let block = opts.block;
        self.run_setup();
        // The step recorded ahead reads its inputs from the staging slot: not used here.
        let prepared = self.next.borrow_mut().take();
        if let Some(p) = prepared {
            self.readbacks.borrow_mut().push(p.readback);
        }
        let queue = &self.gpu.queue;
        let k = self.picker.start(queue, tokens, start_pos, block, opts.sampler.as_ref(), &self.config);
        self.topk.set_k(queue, k);
        // The prompt's chunks but the last, as forward runs them; the last one is block 0's
        // first step.
        let chunk = self.batch as usize;
        let last = (tokens.len() - 1) / chunk * chunk;
        for (c, part) in tokens[..last].chunks(chunk).enumerate() {
            let batch = self.plan(part.len() as u32, start_pos + (c * chunk) as u32, false);
            self.write_inputs(&batch, part);
            self.program.submit(&self.gpu, &batch);
        }
        self.filled.set(start_pos);
        let readbacks = [self.readback(block as u64 * 4), self.readback(block as u64 * 4)];
        // Pick i (from 0) of the call; pick i > 0 feeds pick i - 1 at start_pos + given + i - 1.
        // Each block's recording (which compiles the kernels it runs first) and submission
        // inside an error scope of its own, so that a GPU error fails this call, not the
        // host's uncaptured-error handler (the browser's).
        let submit = |b: u32| {
            let scope = self.gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let (i0, slot) = (b * block, (b % 2) as usize);
            let n = block.min(max - i0);
            let mut steps = Vec::with_capacity(n as usize);
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            for i in i0..i0 + n {
                let batch = if i == 0 {
                    let batch = self.plan(given - last as u32, start_pos + last as u32, false);
                    self.write_inputs(&batch, &tokens[last..]);
                    batch
                } else {
                    let step = std::mem::size_of::<Step>() as u64;
                    enc.copy_buffer_to_buffer(&self.picker.steps, (i - i0) as u64 * step, &self.step, 0, step);
                    self.plan(1, start_pos + given + i - 1, false)
                };
                steps.push(Step::of(&batch));
                let mut pass = enc.begin_compute_pass(&Default::default());
                self.program.record(&mut pass, &batch);
                self.picker.record(&mut pass, &self.topk);
            }
            // (Ordered after the blocks already submitted, which read the steps before.)
            queue.write_buffer(&self.picker.steps, 0, bytemuck::cast_slice(&steps));
            enc.copy_buffer_to_buffer(&self.picker.ids, slot as u64 * block as u64 * 4, &readbacks[slot], 0, n as u64 * 4);
            let index = queue.submit([enc.finish()]);
            (scope.pop(), index)
        };
        let mut scopes = std::collections::VecDeque::from([submit(0)]);
        let (mut ids, mut stop_reason) = (Vec::new(), StopReason::Length);
        let blocks = max.div_ceil(block);
        for b in 0..blocks {
            // After dispose() (from on_tokens, or in the browser between blocks) the buffers are
            // gone: no further block is submitted.
            if self.disposed.get() {
                readbacks.iter().for_each(wgpu::Buffer::destroy);
                return Err(Error::Disposed);
            }
            if b + 1 < blocks {
                scopes.push_back(submit(b + 1));
            }
            // (The scope's promise, asked for at submission, has settled by the readback.)
            let (scope, index) = scopes.pop_front().expect("block b was submitted");
            let read = self.gpu.map_read_after(&readbacks[(b % 2) as usize], Some(index), bytemuck::pod_collect_to_vec::<u8, u32>).await;
            let error = scope.await;
            let read = match error {
                Some(e) => Err(Error::Gpu(e.to_string())),
                None => read,
            };
            let got = match read {
                Ok(got) => got,
                Err(e) => {
                    readbacks.iter().for_each(wgpu::Buffer::destroy);
                    return Err(e);
                }
            };
            let mut got = &got[..block.min(max - b * block) as usize];
            let stop = got.iter().position(|id| opts.stop_ids.contains(id));
            if let Some(s) = stop {
                got = &got[..=s];
            }
            ids.extend_from_slice(got);
            let go_on = on_tokens(got);
            if stop.is_some() {
                stop_reason = StopReason::Stop;
                break;
            }
            if !go_on {
                stop_reason = StopReason::Abort;
                break;
            }
        }
        // A block submitted past the end: its ids are discarded, but a GPU error in it is
        // still this call's (an unawaited scope would lose it).
        let late = scopes.pop_front();
        // (Destroyed once the work queued with them is done.)
        readbacks.iter().for_each(wgpu::Buffer::destroy);
        if let Some((scope, _)) = late {
            if let Some(e) = scope.await {
                return Err(Error::Gpu(e.to_string()));
            }
        }
        let filled = start_pos + given + ids.len() as u32 - 1;
        self.filled.set(filled);
        self.prepare(filled, Readout::Last);
        Ok(Generated { ids, stop_reason })
    }
}

/// Sets a flag for as long as it lives.
struct Busy<'a>(&'a std::cell::Cell<bool>);

impl<'a> Busy<'a> {
    fn new(flag: &'a std::cell::Cell<bool>) -> Busy<'a> {
        flag.set(true);
        Busy(flag)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}
