//! The GGUF parser on raw bytes: as a whole file, and as the header of a larger one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webgpu_llama::Gguf;
use webgpu_llama_fuzz::{check_gguf, HeaderOnly};

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = Gguf::parse(data) {
        check_gguf(&g, data.len() as u64);
    }
    let src = HeaderOnly::new(data);
    if let Ok(g) = Gguf::parse(&src) {
        check_gguf(&g, src.file_len());
    }
});
