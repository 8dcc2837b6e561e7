// A tokenizer and chat template built from a GGUF's own metadata, with well-kept libraries:
// @huggingface/tokenizers (tokenizer.json semantics) and @huggingface/jinja (the chat template).
// The GGUF's tokenizer.ggml.* keys are turned into the tokenizer.json a Hugging Face model ships:
// vocab (tokens), merges, added tokens (token types CONTROL and USER_DEFINED), and the
// pre-tokenizer llama.cpp uses for tokenizer.ggml.pre (see PRE_TOKENIZERS).
import { Tokenizer } from '@huggingface/tokenizers';
import { Template } from '@huggingface/jinja';

const CONTROL = 3, USER_DEFINED = 4;
const BYTE_LEVEL = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
// llama.cpp's pre-tokenizers (llama-vocab.cpp) as tokenizer.json pre_tokenizer configs. 'smollm'
// (SmolLM/SmolLM2): every digit on its own, then GPT-2's byte-level regex, as the model's own
// tokenizer.json (Sequence[Digits(individual_digits), ByteLevel]).
const PRE_TOKENIZERS = {
  smollm: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, BYTE_LEVEL] },
  gpt2: BYTE_LEVEL,
};

/**
 * Builds { tokenizer, encode(text), decode(ids), chat(messages), eos, stop } from GGUF metadata
 * (an object as readMetadata returns). Throws an Error naming what is unsupported.
 */
export function fromGgufMetadata(meta) {
  const model = meta['tokenizer.ggml.model'];
  if (model !== 'gpt2') throw new Error(`tokenizer.ggml.model ${JSON.stringify(model)} is not supported by this demo (byte-level BPE, "gpt2", only)`);
  const pre = meta['tokenizer.ggml.pre'] || 'gpt2';
  const preTokenizer = PRE_TOKENIZERS[pre];
  if (!preTokenizer) throw new Error(`tokenizer.ggml.pre ${JSON.stringify(pre)} is not supported by this demo (${Object.keys(PRE_TOKENIZERS).join(', ')})`);
  const tokens = meta['tokenizer.ggml.tokens'], merges = meta['tokenizer.ggml.merges'];
  if (!Array.isArray(tokens) || !Array.isArray(merges)) throw new Error('the GGUF has no tokenizer.ggml.tokens / tokenizer.ggml.merges');
  const types = meta['tokenizer.ggml.token_type'] || [];
  const vocab = Object.create(null);
  tokens.forEach((t, i) => { vocab[t] = i; });
  const added = [];
  tokens.forEach((content, id) => {
    if (types[id] === CONTROL || types[id] === USER_DEFINED) {
      added.push({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: types[id] === CONTROL });
    }
  });
  const json = {
    version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
    pre_tokenizer: preTokenizer, post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges },
  };
  const name = (key) => (Number.isInteger(meta[key]) ? tokens[meta[key]] : undefined);
  const config = { bos_token: name('tokenizer.ggml.bos_token_id'), eos_token: name('tokenizer.ggml.eos_token_id'),
                   add_bos_token: !!meta['tokenizer.ggml.add_bos_token'], clean_up_tokenization_spaces: false };
  const tokenizer = new Tokenizer(json, config);
  const source = meta['tokenizer.chat_template'];
  const template = typeof source === 'string' ? new Template(source) : null;
  const eos = meta['tokenizer.ggml.eos_token_id'];
  // Generation stops at EOS, at end-of-turn tokens of the template (e.g. <|im_end|>).
  const stop = new Set([eos, vocab['<|im_end|>'], vocab['<|eot_id|>'], vocab['<|end|>']].filter(Number.isInteger));
  return {
    tokenizer, eos, stop, hasTemplate: !!template,
    encode: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
    decode: (ids) => tokenizer.decode(ids, { skip_special_tokens: true }),
    /** The chat template applied to [{ role, content }...], ready for the assistant's turn. */
    chat(messages) {
      if (!template) throw new Error('the GGUF has no tokenizer.chat_template');
      return template.render({ messages, add_generation_prompt: true, bos_token: config.bos_token ?? '', eos_token: config.eos_token ?? '' });
    },
  };
}
