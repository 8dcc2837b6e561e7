// attention_params.wgsl: the uniform `p` of the attention kernels (attention::AttentionParams):
// query and KV heads, floats per token row of the fused [q | k | v] input and of the output,
// 1 / sqrt(head dim), RoPE pairs rotated per head (read where RoPE is fused in:
// attention_decode_io.wgsl). Composed by kernels::compose before the kernel's own file.
struct Attn { n_heads: u32, n_kv: u32, q_stride: u32, o_stride: u32, scale: f32, rot: u32, _b: u32, _c: u32 };
