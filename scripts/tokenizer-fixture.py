#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer-llama-cpp.json: what llama.cpp makes of the chat demo's inputs,
for tests/tokenizer.test.mjs to compare www/tokenizer.js with (CI does not build llama.cpp).

1. Token ids. For each case, a metadata-only GGUF (the base model's key-values with a few keys
   rewritten, no tensors: llama.cpp loads the vocabulary alone) is written with gguf-py into
   .tokenizer-variants/ (ignored by git), and scripts/tokenizer-reference.cpp tokenizes every
   string of STRINGS with llama_tokenize, the function llama.cpp's llama-tokenize tool calls
   (`llama-tokenize --ids`: the vocabulary's BOS rule, special tokens parsed).
2. Chat prompts. Each family's chat template (the models' own Jinja templates, as llama.cpp's
   models/templates/ directory ships them, read from the llama-cpp-python sdist's vendored tree;
   Gemma 3's from tests/fixtures/chat-templates/) rendered for a two-turn conversation by
   (a) Jinja2 the way Hugging Face transformers' apply_chat_template renders it (sandboxed
   environment, trim_blocks and lstrip_blocks, raise_exception), the models' documented format,
   (b) llama.cpp's built-in formats (llama_chat_apply_template), which it picks by the
   template's markers, and (c) with --chat-ref, llama.cpp's own Jinja engine
   (common_chat_templates_apply, what llama-server --jinja prompts with).

Usage (llama.cpp from the tree in .devcarry/llama-src.tar.xz of the main checkout; CPU only; the
llama-tokenize target builds libllama and llama-common too, which the two small tools link):
    cmake -S LLAMA -B BUILD -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \\
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \\
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
    cmake --build BUILD --target llama-tokenize -j2
    LIBS="BUILD/common/libllama-common.a BUILD/common/libllama-common-base.a BUILD/src/libllama.a
          BUILD/ggml/src/libggml.a BUILD/ggml/src/libggml-cpu.a BUILD/ggml/src/libggml-base.a
          BUILD/vendor/cpp-httplib/libcpp-httplib.a -lpthread -ldl"
    INC="-ILLAMA/include -ILLAMA/ggml/include -ILLAMA/vendor -ILLAMA/common"
    g++ -O1 -std=c++17 $INC scripts/tokenizer-reference.cpp -o /tmp/tokref $LIBS
    g++ -O1 -std=c++17 $INC scripts/chat-template-reference.cpp -o /tmp/chatref $LIBS
    pip download --no-deps --no-binary :all: llama-cpp-python   # its sdist vendors llama.cpp's
                                                                # models/templates/
    python3 scripts/tokenizer-fixture.py --tokref /tmp/tokref --chat-ref /tmp/chatref \\
        --llama-tokenize BUILD/bin/llama-tokenize \\
        --templates SDIST_DIR/vendor/llama.cpp/models/templates
--llama-tokenize: every string is also tokenized by llama.cpp's tool (`-f FILE --ids`: special
tokens parsed, its default) and must give the same ids as tokenizer-reference.
--chat-ref: records llama.cpp's own Jinja rendering of each template (tests skip it without).
Needs gguf-py (pip install .whl/gguf-0.19.0-py3-none-any.whl) and jinja2.
"""
import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

import gguf
import jinja2
import jinja2.sandbox

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "tokenizer-llama-cpp.json"
VARIANTS = ROOT / ".tokenizer-variants"
SMOLLM2 = ".models/SmolLM2-135M-Instruct.Q4_1.gguf"
STORIES = "../shared/models/stories260K.gguf"

# SmolLM2's vocabulary has no token of two digits, so Llama 3's digit runs of up to 3 and Qwen2's
# single digits would give the same ids: these tokens and merges, appended, tell them apart.
DIGITS = {"tokenizer.ggml.tokens": ["12", "123", "45", "456", "78", "90"],
          "tokenizer.ggml.token_type": [1, 1, 1, 1, 1, 1],
          "tokenizer.ggml.merges": ["1 2", "12 3", "4 5", "45 6", "7 8", "9 0"]}

PHI3_TOKENS = {"tokenizer.ggml.tokens": ["<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>"],
               "tokenizer.ggml.token_type": [3, 3, 3, 3]}

# (name, base GGUF relative to the repository root, metadata keys rewritten, arrays appended to)
CASES = [
    ("smollm2", SMOLLM2, {}, {}),
    ("smollm2-digits", SMOLLM2, {}, DIGITS),
    ("smollm2-digits-as-qwen2", SMOLLM2, {"tokenizer.ggml.pre": "qwen2"}, DIGITS),
    ("smollm2-digits-as-llama-bpe", SMOLLM2, {"tokenizer.ggml.pre": "llama-bpe"}, DIGITS),
    ("smollm2-digits-as-gpt2", SMOLLM2, {"tokenizer.ggml.pre": "gpt-2"}, DIGITS),
    ("smollm2-digits-as-refact", SMOLLM2, {"tokenizer.ggml.pre": "refact"}, DIGITS),
    ("smollm2-digits-as-gpt-4o", SMOLLM2, {"tokenizer.ggml.pre": "gpt-4o"}, DIGITS),
    ("smollm2-digits-as-default", SMOLLM2, {"tokenizer.ggml.pre": "default"}, DIGITS),
    ("stories260K", STORIES, {}, {}),
    # Gemma's vocabularies: no space prefix.
    ("stories260K-no-space-prefix", STORIES, {"tokenizer.ggml.add_space_prefix": False}, {}),
    # Phi-3's (llama.cpp knows them by general.name): whitespace after most special tokens is
    # stripped. Phi-3's chat tokens are appended (llama.cpp looks <|endoftext|> up by name).
    ("stories260K-as-phi-3", STORIES, {"general.name": "Phi-3 mini"}, PHI3_TOKENS),
]

STRINGS = [
    "Hello world", "hello", " hello", "  hello", "Hello, World!", "HELLO World", "\n", " ", "   ", "\t",
    "Hello\nworld", "line one\n\nline two\n", "  leading and trailing  ", "tabs\tand\r\nreturns",
    "1", "12", "123", "1234", "12345678901", "3.14159", "v1.2.3-rc4", "$1,000,000.00", "10:45 am",
    "I'm can't won't they're we've I'll he'd IT'S DON'T",
    "Once upon a time, there was a little girl named Lily.",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX",
    "camelCaseWords and PascalCase and snake_case and SCREAMING_CASE",
    "helloWORLD fooBAR iPhone McDONALD's aB cD", "THEY'LL WE'VE You'RE",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))\n",
    "for (let i = 0; i < n; i++) { sum += x[i] * 2; }",
    "<div class=\"x\">&nbsp;</div>", "https://example.com/path?q=1&r=2#frag",
    "ünïcödé café naïve résumé Ωμέγα", "Привет, мир! Как дела?", "日本語のテキストです。中文文本。",
    "한국어 텍스트", "مرحبا بالعالم", "हिन्दी पाठ", "emoji 🦙🔥👍🏽 and 👨‍👩‍👧 family",
    "math: ∑ x² ≤ ∞ ± √2", "ＦＵＬＬ ｗｉｄｔｈ", "zero\u200bwidth", "a\u00a0b",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|user|>\nHi there<|end|>\n<|assistant|>\n  Hello<|end|>  \n", "<|endoftext|>  x",
    "<|endoftext|>text after<|endoftext|>", "<s>[INST] question [/INST] answer</s>",
    "</s>   spaces after", "<unk> unknown", "<|im_start|>", "not a token <|im_start",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "................", "!!!???...",
    "'s 't 're", "x'y", "it’s curly", "\n\n\n\n", "   \n   \n", "end with space ",
]

# A two-turn conversation (user, assistant, user) for the chat templates.
MESSAGES = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
    {"role": "user", "content": "And of Italy?"},
]
# Files of llama.cpp's models/templates/ (and Gemma 3's), with the special-token values and any
# extra variables the test passes to both renderers. strftime_now (Llama 3's and Granite's
# "Today Date") is given the fixed date NOW in both, so that the prompts do not depend on the day.
NOW = datetime.datetime(2024, 7, 26, 12, 0, 0, tzinfo=datetime.timezone.utc)
TEMPLATES = [
    ("qwen2.5", "Qwen-Qwen2.5-7B-Instruct.jinja", "<|endoftext|>", "<|im_end|>", {}),
    ("qwen3", "Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>", {}),
    ("phi-3.5", "microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>", {}),
    ("gemma-2", "google-gemma-2-2b-it.jinja", "<bos>", "<eos>", {}),
    ("gemma-3", "google-gemma-3-it.jinja", "<bos>", "<eos>", {}),
    ("smollm3", "HuggingFaceTB-SmolLM3-3B.jinja", "", "<|im_end|>", {}),
    ("llama-3.2", "meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", {}),
    ("granite-3.3", "ibm-granite-granite-3.3-2B-Instruct.jinja", "", "<|end_of_text|>", {}),
]


def write_variant(name, base, overrides, append):
    """A metadata-only GGUF: base's key-values (arrays and all) with overrides applied and the
    arrays of `append` extended (tokenizer.ggml.scores, where present, by zeros to match)."""
    if append and "tokenizer.ggml.tokens" in append:
        append = {**append, "tokenizer.ggml.scores": [0.0] * len(append["tokenizer.ggml.tokens"])}
    reader = gguf.GGUFReader(ROOT / base)
    arch = reader.get_field("general.architecture").contents()
    writer = gguf.GGUFWriter(VARIANTS / f"{name}.gguf", arch)
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key in overrides:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if key in append:
            value = value + append[key]
        writer.add_key_value(key, value, vtype, sub_type=sub)
    for key, value in overrides.items():
        vtype = gguf.GGUFValueType.BOOL if isinstance(value, bool) else gguf.GGUFValueType.STRING
        writer.add_key_value(key, value, vtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return VARIANTS / f"{name}.gguf"


def llama_cpp(tool, request):
    out = subprocess.run([tool], input=json.dumps(request), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def llama_tokenize_ids(binary, model, text):
    """The ids `llama-tokenize --ids` prints for text (read from a file, verbatim)."""
    scratch = VARIANTS / "text.txt"
    scratch.write_bytes(text.encode())
    out = subprocess.run([binary, "-m", str(model), "-f", str(scratch), "--ids", "--no-escape",
                          "--log-disable"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def transformers_render(source, bos, eos, extra):
    """Renders as transformers' apply_chat_template does (its Jinja2 environment and globals)."""
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source).render(messages=MESSAGES, add_generation_prompt=True,
                                          bos_token=bos, eos_token=eos, **extra)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokref", required=True, help="scripts/tokenizer-reference.cpp, built")
    ap.add_argument("--templates", required=True, type=Path, help="llama.cpp's models/templates directory")
    ap.add_argument("--llama-tokenize", help="llama.cpp's llama-tokenize, to cross-check the ids")
    ap.add_argument("--chat-ref", help="scripts/chat-template-reference.cpp, built")
    args = ap.parse_args()
    tool, templates_dir, llama_tokenize = args.tokref, args.templates, args.llama_tokenize
    VARIANTS.mkdir(exist_ok=True)
    tokenizers = []
    for name, base, overrides, append in CASES:
        path = write_variant(name, base, overrides, append)
        ids = llama_cpp(tool, {"model": str(path), "texts": STRINGS})["ids"]
        if llama_tokenize:
            for text, expected in zip(STRINGS, ids):
                got = llama_tokenize_ids(llama_tokenize, path, text)
                if got != expected:
                    sys.exit(f"{name}: llama-tokenize gives {got} for {text!r}, llama_tokenize {expected}")
        tokenizers.append({"name": name, "base": base, "overrides": overrides, "append": append, "ids": ids})
        print(f"{name}: {sum(map(len, ids))} tokens", file=sys.stderr)
    local = ROOT / "tests" / "fixtures" / "chat-templates"
    chats = []
    for name, file, bos, eos, extra in TEMPLATES:
        path = local / file if (local / file).exists() else templates_dir / file
        source = path.read_text()
        chat = {
            "name": name, "file": file, "template": source, "bos_token": bos, "eos_token": eos, "extra": extra,
            "transformers": transformers_render(source, bos, eos, extra),
            "llama_cpp_builtin": llama_cpp(tool, {"template": source, "messages": MESSAGES})["prompt"],
        }
        if args.chat_ref:
            now = int(NOW.timestamp())
            prompt = llama_cpp(args.chat_ref, {"template": source, "bos_token": bos, "eos_token": eos,
                                               "now": now, "messages": MESSAGES})["prompt"]
            # llama.cpp's strftime_now reads the clock, not the inputs' time: its date (the only
            # part that depends on the day) becomes NOW's, in the formats these templates print.
            today = datetime.datetime.now()
            for fmt in ("%d %b %Y", "%B %d, %Y"):
                prompt = prompt.replace(today.strftime(fmt), NOW.strftime(fmt))
            chat["llama_cpp_jinja"] = prompt
        chats.append(chat)
    fixture = {
        "about": "Made by scripts/tokenizer-fixture.py: llama.cpp's token ids (llama_tokenize, add_special and "
                 "parse_special on; with --llama-tokenize also checked against llama-tokenize) and chat prompts "
                 "for tests/tokenizer.test.mjs.",
        "strings": STRINGS, "messages": MESSAGES, "now": NOW.isoformat(), "tokenizers": tokenizers, "chats": chats,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
