// llama.cpp's own answers for the chat demo's tokenizer test (scripts/tokenizer-fixture.py):
// token ids from llama_tokenize (the function llama.cpp's llama-tokenize tool wraps, with the
// model's BOS rule and special tokens parsed, as `llama-tokenize --ids` prints)
// and prompts from llama_chat_apply_template (llama.cpp's built-in chat formats).
//
// Reads one JSON request on stdin, writes one JSON answer on stdout:
//   {"model": "x.gguf", "texts": ["..."]}                -> {"ids": [[1, 2], ...]}
//   {"template": "...", "messages": [{"role", "content"}]} -> {"prompt": "..."} (empty on -1)
// Build: see scripts/tokenizer-fixture.py (links libllama and ggml).
#include "llama.h"
#include "nlohmann/json.hpp"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

using json = nlohmann::ordered_json;

static void quiet(ggml_log_level, const char *, void *) {}

static json tokenize_all(const std::string & path, const json & texts) {
    llama_model_params params = llama_model_default_params();
    params.vocab_only = true;
    llama_model * model = llama_model_load_from_file(path.c_str(), params);
    if (!model) {
        throw std::runtime_error("cannot load " + path);
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    json out = json::array();
    for (const auto & t : texts) {
        const std::string text = t.get<std::string>();
        // A first call with no room returns minus the count needed.
        int n = -llama_tokenize(vocab, text.data(), (int32_t) text.size(), nullptr, 0, true, true);
        std::vector<llama_token> ids(n > 0 ? n : 0);
        if (n > 0 && llama_tokenize(vocab, text.data(), (int32_t) text.size(), ids.data(), n, true, true) != n) {
            throw std::runtime_error("llama_tokenize disagreed with itself on the token count");
        }
        out.push_back(ids);
    }
    llama_model_free(model);
    return json{{"ids", out}};
}

static json apply_template(const std::string & tmpl, const json & messages) {
    std::vector<std::string> roles, contents;
    for (const auto & m : messages) {
        roles.push_back(m.at("role").get<std::string>());
        contents.push_back(m.at("content").get<std::string>());
    }
    std::vector<llama_chat_message> chat;
    for (size_t i = 0; i < roles.size(); i++) {
        chat.push_back({roles[i].c_str(), contents[i].c_str()});
    }
    std::vector<char> buf(1 << 16);
    int n = llama_chat_apply_template(tmpl.c_str(), chat.data(), chat.size(), true, buf.data(), (int32_t) buf.size());
    if (n < 0) {
        return json{{"prompt", ""}};
    }
    return json{{"prompt", std::string(buf.data(), n)}};
}

int main() {
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    try {
        const json req = json::parse(std::cin);
        const json res = req.contains("model") ? tokenize_all(req.at("model"), req.at("texts"))
                                               : apply_template(req.at("template"), req.at("messages"));
        std::cout << res.dump() << "\n";
    } catch (const std::exception & e) {
        std::fprintf(stderr, "tokenizer-reference: %s\n", e.what());
        return 1;
    }
    return 0;
}
