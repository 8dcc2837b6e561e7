//! The load plan (`LoadPlan::new`: config, KV cache, batch, weight buffers under a binding limit)
//! on a raw header or a built GGUF, under varied binding limits, contexts and KV types.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webgpu_llama::plan::LoadPlan;
use webgpu_llama_fuzz::{check_plan, Input};

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::decode(data) else { return };
    let Some(g) = input.parse() else { return };
    let opts = input.knobs;
    if let Ok(plan) = LoadPlan::new(&g, opts) {
        check_plan(&g, &plan, opts);
    }
});
