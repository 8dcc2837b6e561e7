// A tokenizer and chat template built from a GGUF's own metadata, with well-kept libraries:
// @huggingface/tokenizers (tokenizer.json semantics) and @huggingface/jinja (the chat template).
// The GGUF's tokenizer.ggml.* keys are turned into the tokenizer.json that reproduces what
// llama.cpp's tokenizer (src/llama-vocab.cpp) does with the same keys; tests/tokenizer.test.mjs
// checks the ids against llama.cpp's llama-tokenize (tests/fixtures/tokenizer-llama-cpp.json).
//
// Two GGUF tokenizer models:
// - "gpt2": byte-level BPE with the GGUF's merges, split first by the pre-tokenizer regexes that
//   llama.cpp uses for tokenizer.ggml.pre (PRE_TOKENIZERS), then mapped to GPT-2's byte alphabet.
// - "llama": SentencePiece vocabularies (Llama 2, Phi-3, Gemma, TinyStories). llama.cpp merges
//   the adjacent pair whose concatenation is the vocabulary entry with the highest score (leftmost
//   on ties), after replacing spaces with U+2581 and prefixing one to each text run (unless
//   tokenizer.ggml.add_space_prefix is false, as in Gemma); a character outside the vocabulary
//   becomes its UTF-8 bytes' <0xNN> tokens. That is a BPE whose merge list is every split of every
//   entry into two entries, ordered by the entry's score, with byte_fallback (spmJson).
import { Tokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
const UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4;
const SPACE_MARK = '\u2581';

// llama.cpp's pre-tokenizer regexes, as their models' tokenizer.json spell them (the Oniguruma
// forms, which the library translates). GPT-2's split.
const GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3's: case-insensitive contractions, letters with one leading non-letter, numbers in runs
// of up to 3 digits, newlines kept with the punctuation before them.
const LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2's: Llama 3's with every digit on its own.
const QWEN2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// GPT-4o's (Phi-4-mini): words split at lower-to-upper case changes, contractions attached.
const GPT4O = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const split = (regex) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false });
const bytes = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false };
const sequence = (...regexes) => ({ type: 'Sequence', pretokenizers: [...regexes.map(split), bytes] });
// tokenizer.ggml.pre values -> { pre_tokenizer, ignoreMerges } (llama.cpp's llama_vocab::impl::load:
// Llama 3 pre-tokenizers look a whole pre-token up in the vocabulary before merging).
const llama3 = { pre: sequence(LLAMA3), ignoreMerges: true };
const qwen2 = { pre: sequence(QWEN2) };
const digitsThenGpt2 = { pre: sequence('\\p{N}', GPT2) };
const gpt2 = { pre: sequence(GPT2) };
// llama.cpp's fallback for a BPE vocabulary without tokenizer.ggml.pre (or "default"): punctuation
// runs, GPT-2's split, digit runs, then digits in threes.
const fallback = { pre: sequence('[\\p{P}\\$\\+<=>\\^~\\|]+', GPT2, '\\p{N}+', '[0-9][0-9][0-9]') };
const PRE_TOKENIZERS = {
  'llama-bpe': llama3, llama3, 'llama-v3': llama3,   // Llama 3, SmolLM3
  qwen2, 'deepseek-r1-qwen': qwen2,                   // Qwen2/2.5/3
  smollm: digitsThenGpt2, refact: digitsThenGpt2,     // SmolLM/SmolLM2; Granite 3
  starcoder: digitsThenGpt2,
  'gpt-4o': { pre: sequence(GPT4O) },                 // Phi-4-mini
  gpt2, 'gpt-2': gpt2, default: fallback,
};

/** The tokenizer.json (model, pre-tokenizer, normalizer, decoder) of a "gpt2" GGUF vocabulary. */
function bpeJson(meta, tokens, vocab) {
  const pre = meta['tokenizer.ggml.pre'] || 'default';
  const entry = PRE_TOKENIZERS[pre];
  if (!entry) throw new Error(`tokenizer.ggml.pre ${JSON.stringify(pre)} is not supported by this demo (supported: ${Object.keys(PRE_TOKENIZERS).join(', ')})`);
  const merges = meta['tokenizer.ggml.merges'];
  if (!Array.isArray(merges)) throw new Error('the GGUF has no tokenizer.ggml.merges (a "gpt2" tokenizer needs them)');
  return {
    normalizer: null, pre_tokenizer: entry.pre,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: !!entry.ignoreMerges, vocab, merges },
    addBos: meta['tokenizer.ggml.add_bos_token'] ?? !!entry.ignoreMerges,
  };
}

/**
 * The tokenizer.json of a SentencePiece ("llama") GGUF vocabulary: a BPE over Unicode characters
 * whose merges are all (left, right) splits of every entry, ranked by the entry's score (highest
 * first), which picks the same pair as llama.cpp's highest-score bigram; unknown characters fall
 * back to <0xNN> byte tokens.
 */
function spmJson(meta, tokens, vocab) {
  const scores = meta['tokenizer.ggml.scores'];
  if (!Array.isArray(scores) || scores.length !== tokens.length) throw new Error('the GGUF has no tokenizer.ggml.scores for its tokens (a "llama" tokenizer needs them)');
  const candidates = [];
  tokens.forEach((t, id) => {
    const chars = Array.from(t);
    for (let k = 1; k < chars.length; k++) {
      const left = chars.slice(0, k).join(''), right = chars.slice(k).join('');
      if (left in vocab && right in vocab) candidates.push([scores[id], id, left, right]);
    }
  });
  candidates.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  const prefix = meta['tokenizer.ggml.add_space_prefix'] ?? true;
  const replace = { type: 'Replace', pattern: { String: ' ' }, content: SPACE_MARK };
  return {
    normalizer: prefix ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: SPACE_MARK }, replace] } : replace,
    pre_tokenizer: null,
    decoder: { type: 'Sequence', decoders: [
      { type: 'Replace', pattern: { String: SPACE_MARK }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' },
      ...(prefix ? [{ type: 'Strip', content: ' ', start: 1, stop: 0 }] : [])] },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: true, ignore_merges: false, vocab,
             merges: candidates.map(([, , l, r]) => [l, r]) },
    addBos: meta['tokenizer.ggml.add_bos_token'] ?? true,
  };
}

/**
 * The tokens llama.cpp matches in the text before tokenizing the rest (its special-token cache:
 * CONTROL, USER_DEFINED and UNKNOWN types). Phi-3 vocabularies (general.name containing "phi-3"
 * or "phi3") strip the whitespace after their special tokens except <unk>, <s> and
 * <|endoftext|>, as llama.cpp sets for them.
 */
function addedTokens(meta, tokens) {
  const types = meta['tokenizer.ggml.token_type'] || [];
  const name = String(meta['general.name'] || '').toLowerCase();
  const phi3 = name.includes('phi-3') || name.includes('phi3');
  const added = [];
  tokens.forEach((content, id) => {
    const t = types[id];
    if (t !== CONTROL && t !== USER_DEFINED && t !== UNKNOWN) return;
    const rstrip = phi3 && !['<unk>', '<s>', '<|endoftext|>'].includes(content);
    added.push({ id, content, single_word: false, lstrip: false, rstrip, normalized: false, special: t !== USER_DEFINED });
  });
  return added;
}

/**
 * The tokens that end an assistant turn: the GGUF's EOS and EOT ids, plus the end-of-turn marker
 * its chat template writes after a message where that is a control token of the vocabulary
 * (e.g. <|im_end|> where eos is <|endoftext|>).
 */
function stopTokens(meta, vocab, source) {
  const ids = [meta['tokenizer.ggml.eos_token_id'], meta['tokenizer.ggml.eot_token_id'], meta['tokenizer.ggml.eom_token_id']];
  const types = meta['tokenizer.ggml.token_type'] || [];
  if (typeof source === 'string') {
    try {
      const marker = 'MESSAGE-END-PROBE';
      const text = renderTemplate(source, [{ role: 'user', content: 'q' }, { role: 'assistant', content: marker }]);
      const after = text.slice(text.indexOf(marker) + marker.length).trimStart();
      const hit = Object.keys(vocab).filter((t) => types[vocab[t]] === CONTROL && t.length > 1 && after.startsWith(t))
        .sort((a, b) => b.length - a.length)[0];
      if (hit) ids.push(vocab[hit]);
    } catch { /* a template that rejects the probe adds no marker */ }
  }
  return new Set(ids.filter(Number.isInteger));
}

/**
 * A chat template (Jinja source) applied to [{ role, content }...] for the assistant's turn, with
 * the variables transformers' apply_chat_template gives: bos_token, eos_token and
 * add_generation_prompt, plus `extra` (@huggingface/jinja itself provides raise_exception and
 * strftime_now, the current date that Llama 3's and Granite's templates print).
 */
export function renderTemplate(source, messages, { bos = '', eos = '', extra = {} } = {}) {
  return new Template(source).render({ messages, add_generation_prompt: true, bos_token: bos, eos_token: eos, ...extra });
}

/**
 * Builds { tokenizer, encode(text), decode(ids), chat(messages), eos, stop, addBos } from GGUF
 * metadata (an object as readMetadata returns). encode treats the vocabulary's special tokens in
 * the text as those tokens (llama.cpp's parse_special) and adds no BOS; chatIds(messages) renders
 * the template and adds BOS where the vocabulary asks for it and the template did not write it.
 * Throws an Error naming what is unsupported.
 */
export function fromGgufMetadata(meta) {
  const model = meta['tokenizer.ggml.model'];
  const tokens = meta['tokenizer.ggml.tokens'];
  if (!Array.isArray(tokens)) throw new Error('the GGUF has no tokenizer.ggml.tokens');
  const vocab = Object.create(null);
  tokens.forEach((t, i) => { if (!(t in vocab)) vocab[t] = i; });
  let parts;
  if (model === 'gpt2') parts = bpeJson(meta, tokens, vocab);
  else if (model === 'llama') parts = spmJson(meta, tokens, vocab);
  else throw new Error(`tokenizer.ggml.model ${JSON.stringify(model)} is not supported by this demo (supported: "gpt2" byte-level BPE, "llama" SentencePiece)`);
  const { addBos, ...rest } = parts;
  const json = { version: '1.0', truncation: null, padding: null, added_tokens: addedTokens(meta, tokens), post_processor: null, ...rest };
  const name = (key) => (Number.isInteger(meta[key]) ? tokens[meta[key]] : undefined);
  const config = { bos_token: name('tokenizer.ggml.bos_token_id'), eos_token: name('tokenizer.ggml.eos_token_id'),
                   add_bos_token: false, clean_up_tokenization_spaces: false };
  const tokenizer = new Tokenizer(json, config);
  const source = meta['tokenizer.chat_template'];
  const template = typeof source === 'string' ? new Template(source) : null;
  const eos = meta['tokenizer.ggml.eos_token_id'];
  const bos = meta['tokenizer.ggml.bos_token_id'];
  const encode = (text) => tokenizer.encode(text, { add_special_tokens: false }).ids;
  const chat = (messages) => {
    if (!template) throw new Error('the GGUF has no tokenizer.chat_template');
    return renderTemplate(source, messages, { bos: config.bos_token ?? '', eos: config.eos_token ?? '' });
  };
  return {
    tokenizer, eos, stop: stopTokens(meta, vocab, source), hasTemplate: !!template, addBos: !!addBos,
    encode,
    decode: (ids) => tokenizer.decode(ids, { skip_special_tokens: true }),
    /** The chat template applied to [{ role, content }...], ready for the assistant's turn. */
    chat,
    /** chat(messages) as token ids, with BOS first where the vocabulary adds it (once). */
    chatIds(messages) {
      const ids = encode(chat(messages));
      return addBos && Number.isInteger(bos) && ids[0] !== bos ? [bos, ...ids] : ids;
    },
  };
}
