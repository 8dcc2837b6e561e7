// The chat demo's tokenizer and chat templates (www/tokenizer.js) against llama.cpp:
// tests/fixtures/tokenizer-llama-cpp.json holds llama.cpp's token ids for ~60 strings per
// vocabulary (byte-level BPE with each pre-tokenizer the model families declare, SentencePiece
// with and without the space prefix) and the families' chat templates rendered by transformers'
// Jinja2 rules and by llama.cpp's built-in formats; scripts/tokenizer-fixture.py says how they
// were made. Run: node --test tests/tokenizer.test.mjs (no GPU, no wasm package).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readGgufMetadata } from './gguf-metadata.mjs';
import { fromGgufMetadata, renderTemplate } from '../www/tokenizer.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const fixture = JSON.parse(readFileSync(join(ROOT, 'tests', 'fixtures', 'tokenizer-llama-cpp.json'), 'utf8'));
const metaCache = new Map();
const baseMeta = (base) => {
  if (!metaCache.has(base)) metaCache.set(base, readGgufMetadata(join(ROOT, base)));
  return metaCache.get(base);
};

for (const c of fixture.tokenizers) {
  test(`${c.name}: token ids equal llama.cpp's for ${fixture.strings.length} strings`, (t) => {
    if (!existsSync(join(ROOT, c.base))) { t.skip(`SKIPPED: ${c.base} is missing (scripts/fetch-models.sh, ../shared)`); return; }
    const base = baseMeta(c.base);
    const meta = { ...base, ...c.overrides };
    // Arrays the fixture extended (tokenizer.ggml.scores by zeros where the GGUF has them).
    for (const [key, extra] of Object.entries(c.append)) meta[key] = base[key].concat(extra);
    if (c.append['tokenizer.ggml.tokens'] && base['tokenizer.ggml.scores']) {
      meta['tokenizer.ggml.scores'] = base['tokenizer.ggml.scores'].concat(c.append['tokenizer.ggml.tokens'].map(() => 0));
    }
    const tok = fromGgufMetadata(meta);
    const bos = meta['tokenizer.ggml.bos_token_id'];
    const mismatches = [];
    fixture.strings.forEach((s, i) => {
      // llama.cpp's ids are add_special (BOS where the vocabulary adds it) and parse_special.
      const ours = tok.addBos ? [bos, ...tok.encode(s)] : tok.encode(s);
      if (JSON.stringify(ours) !== JSON.stringify(c.ids[i])) mismatches.push(`${JSON.stringify(s)}: ours ${JSON.stringify(ours)} llama.cpp ${JSON.stringify(c.ids[i])}`);
    });
    assert.deepEqual(mismatches, [], `${mismatches.length} of ${fixture.strings.length} strings differ`);
    // Decoding gives the text back (special tokens skipped; plain strings only).
    for (const s of ['Hello, World!', 'ünïcödé café 🦙', 'def add(a, b):\n    return a + b\n']) {
      assert.equal(tok.decode(tok.encode(s)), s);
    }
  });
}

for (const c of fixture.chats) {
  test(`${c.name} chat template: the prompt equals transformers' rendering and ends with llama.cpp's built-in format`, (t) => {
    // The fixture's date for strftime_now (Llama 3's and Granite's "Today Date").
    t.mock.timers.enable({ apis: ['Date'], now: new Date(fixture.now) });
    const ours = renderTemplate(c.template, fixture.messages, { bos: c.bos_token, eos: c.eos_token, extra: c.extra });
    assert.equal(ours, c.transformers);
    // llama.cpp's built-in formats write the turns only (no BOS, no default system prompt).
    assert.ok(c.llama_cpp_builtin.length > 0, 'llama.cpp recognised the template');
    assert.ok(ours.endsWith(c.llama_cpp_builtin), `${JSON.stringify(ours)}\ndoes not end with\n${JSON.stringify(c.llama_cpp_builtin)}`);
  });
  test(`${c.name} chat template: the prompt equals llama.cpp's Jinja rendering`, (t) => {
    if (c.llama_cpp_jinja === undefined) { t.skip('SKIPPED: the fixture was made without --chat-ref (scripts/tokenizer-fixture.py)'); return; }
    t.mock.timers.enable({ apis: ['Date'], now: new Date(fixture.now) });
    assert.equal(renderTemplate(c.template, fixture.messages, { bos: c.bos_token, eos: c.eos_token, extra: c.extra }), c.llama_cpp_jinja);
  });
}

test('stop tokens come from the GGUF (eos, eot) and the end-of-turn marker its template writes', (t) => {
  const base = '.models/SmolLM2-135M-Instruct.Q4_1.gguf';
  if (!existsSync(join(ROOT, base))) { t.skip(`SKIPPED: ${base} is missing (scripts/fetch-models.sh)`); return; }
  const meta = baseMeta(base);
  const id = (s) => meta['tokenizer.ggml.tokens'].indexOf(s);
  // SmolLM2's eos is <|im_end|> (2); with eos moved to <|endoftext|> the template's marker still stops.
  assert.deepEqual([...fromGgufMetadata(meta).stop], [id('<|im_end|>')]);
  const moved = fromGgufMetadata({ ...meta, 'tokenizer.ggml.eos_token_id': id('<|endoftext|>') });
  assert.deepEqual([...moved.stop].sort(), [id('<|endoftext|>'), id('<|im_end|>')].sort());
  const eot = fromGgufMetadata({ ...meta, 'tokenizer.ggml.eot_token_id': 7 });
  assert.ok(eot.stop.has(7));
});

test('chatIds adds BOS once where the vocabulary asks for it', (t) => {
  const base = '../shared/models/stories260K.gguf';
  if (!existsSync(join(ROOT, base))) { t.skip(`SKIPPED: ${base} is missing (../shared)`); return; }
  const meta = { ...baseMeta(base), 'tokenizer.chat_template': "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}" };
  const tok = fromGgufMetadata(meta);
  const ids = tok.chatIds([{ role: 'user', content: 'Once upon a time' }]);
  assert.equal(ids[0], meta['tokenizer.ggml.bos_token_id']);
  assert.notEqual(ids[1], meta['tokenizer.ggml.bos_token_id']);
  const plain = fromGgufMetadata({ ...meta, 'tokenizer.chat_template': "{% for m in messages %}{{ m['content'] }}{% endfor %}" });
  assert.deepEqual(plain.chatIds([{ role: 'user', content: 'Once upon a time' }]), ids);
});

test('unsupported tokenizers are named in the error', () => {
  assert.throws(() => fromGgufMetadata({ 'tokenizer.ggml.model': 't5', 'tokenizer.ggml.tokens': ['a'] }), /tokenizer\.ggml\.model "t5" is not supported.*"gpt2".*"llama"/);
  assert.throws(() => fromGgufMetadata({ 'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.pre': 'tekken', 'tokenizer.ggml.tokens': ['a'], 'tokenizer.ggml.merges': [] }),
                /tokenizer\.ggml\.pre "tekken" is not supported.*llama-bpe.*qwen2/);
  assert.throws(() => fromGgufMetadata({ 'tokenizer.ggml.model': 'llama', 'tokenizer.ggml.tokens': ['a'] }), /tokenizer\.ggml\.scores/);
  assert.throws(() => fromGgufMetadata({ 'tokenizer.ggml.model': 'gpt2' }), /tokenizer\.ggml\.tokens/);
});

test("each family's template gives its end-of-turn token as a stop token", () => {
  const expected = { 'qwen2.5': '<|im_end|>', qwen3: '<|im_end|>', smollm3: '<|im_end|>', 'phi-3.5': '<|end|>', 'gemma-2': '<end_of_turn>',
                     'gemma-3': '<end_of_turn>', 'llama-3.2': '<|eot_id|>', 'granite-3.3': '<|end_of_text|>' };
  // A vocabulary holding every family's markers as control tokens, eos elsewhere (id 0).
  const markers = [...new Set(Object.values(expected))];
  const tokens = ['<eos>', 'a', ...markers];
  for (const c of fixture.chats) {
    const tok = fromGgufMetadata({ 'tokenizer.ggml.model': 'gpt2', 'tokenizer.ggml.pre': 'gpt-2', 'tokenizer.ggml.tokens': tokens,
                                   'tokenizer.ggml.token_type': tokens.map((t) => (t === 'a' ? 1 : 3)), 'tokenizer.ggml.merges': [],
                                   'tokenizer.ggml.eos_token_id': 0, 'tokenizer.chat_template': c.template });
    assert.deepEqual([...tok.stop].sort(), [0, tokens.indexOf(expected[c.name])].sort(), c.name);
  }
});
