//! Config validation (`Config::from_gguf`, tensor dims included) on a raw header or a GGUF built
//! from an `arbitrary` model description with structural mutations.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webgpu_llama::Config;
use webgpu_llama_fuzz::{check_config, Input};

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::decode(data) else { return };
    let Some(g) = input.parse() else { return };
    if let Ok(cfg) = Config::from_gguf(&g, input.knobs.ctx) {
        check_config(&g, &cfg);
    }
});
