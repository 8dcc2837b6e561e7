// step.wgsl: the per-batch uniform every batched kernel reads at `st` (program::Step, written once
// per batch): tokens in the batch, the first one's position, attention's key splits (1: none).
// Composed first by kernels::compose for every kernel that reads it (Kernel::reads_step).
struct Step { n_tokens: u32, pos0: u32, splits: u32, _pad: u32 };
