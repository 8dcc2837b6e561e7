//! Token pieces for display (the CLI and the demo page print continuations as text). Not a
//! tokenizer: ember keeps tokenising. Handles SentencePiece pieces (`▁` is a space, `<0xNN>` a
//! byte) and GPT-2 byte-level BPE pieces (`tokenizer.ggml.model = "gpt2"`, e.g. SmolLM2).

use crate::gguf::Gguf;

/// The vocabulary's pieces and how to turn them into bytes.
pub struct Vocab {
    pieces: Vec<String>,
    byte_level: bool,
}

/// GPT-2's byte-to-unicode table, inverted: the char each byte was mapped to -> the byte.
fn gpt2_byte_of(c: char) -> Option<u8> {
    let printable = |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let u = c as u32;
    if u < 256 && printable(u) {
        return Some(u as u8);
    }
    // Non-printable bytes were mapped, in byte order, to 256, 257, ...
    let mut next = 256;
    for b in 0u32..256 {
        if !printable(b) {
            if next == u {
                return Some(b as u8);
            }
            next += 1;
        }
    }
    None
}

impl Vocab {
    /// Reads `tokenizer.ggml.tokens` (and `tokenizer.ggml.model`); `None` when absent.
    pub fn from_gguf(g: &Gguf) -> Option<Vocab> {
        let pieces = g.get("tokenizer.ggml.tokens")?.as_array()?.iter().map(|v| v.as_str().unwrap_or("").to_string()).collect();
        let byte_level = g.get("tokenizer.ggml.model").and_then(|v| v.as_str()) == Some("gpt2");
        Some(Vocab { pieces, byte_level })
    }

    /// The bytes of one token (empty for an unknown id).
    pub fn bytes(&self, id: u32) -> Vec<u8> {
        let Some(p) = self.pieces.get(id as usize) else { return Vec::new() };
        if self.byte_level {
            return p.chars().map(|c| gpt2_byte_of(c).unwrap_or(b'?')).collect();
        }
        if p.len() == 6 && p.starts_with("<0x") && p.ends_with('>') {
            if let Ok(b) = u8::from_str_radix(&p[3..5], 16) {
                return vec![b];
            }
        }
        p.replace('\u{2581}', " ").into_bytes()
    }

    /// The text of a token sequence (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&i| self.bytes(i)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
