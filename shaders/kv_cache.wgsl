// kv_cache.wgsl: the KV cache's element types, for the kernels that read or write it (RoPE and
// the cache write, the attention kernels; kernels::Kernel::reads_kv_cache). Composed by
// kernels::compose before the kernel's own file, whose `kc` and `vc` bindings are arrays of
// them (each kernel with its own access mode). KV16 (config::KvType::F16): IEEE halves, two per
// u32 (pack2x16float / unpack2x16float); else f32. KvWord: a scalar element as the scalar
// kernels index it (two halves, or one f32); KvQuad: four values (vec2<u32> of halves, or
// vec4<f32>).
//@if KV16
alias KvWord = u32;
alias KvQuad = vec2<u32>;
//@end
//@if !KV16
alias KvWord = f32;
alias KvQuad = vec4<f32>;
//@end
