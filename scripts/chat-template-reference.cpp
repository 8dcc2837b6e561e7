// llama.cpp's Jinja rendering of a chat template (common_chat_templates_apply, the path
// llama-server and llama-cli take with --jinja), for scripts/tokenizer-fixture.py.
//
// Reads {"template", "bos_token", "eos_token", "now" (seconds since 1970), "messages":
// [{"role", "content"}]} on stdin and writes {"prompt": "..."} on stdout.
// Build: links llama.cpp's llama-common library; see scripts/tokenizer-fixture.py.
#include "chat.h"
#include "llama.h"
#include "nlohmann/json.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

using json = nlohmann::ordered_json;

int main() {
    try {
        const json req = json::parse(std::cin);
        auto tmpls = common_chat_templates_init(nullptr, req.at("template").get<std::string>(),
                                                req.at("bos_token").get<std::string>(), req.at("eos_token").get<std::string>());
        common_chat_templates_inputs inputs;
        inputs.use_jinja = true;
        inputs.add_generation_prompt = true;
        inputs.now = std::chrono::system_clock::time_point(std::chrono::seconds(req.at("now").get<long long>()));
        for (const auto & m : req.at("messages")) {
            common_chat_msg msg;
            msg.role = m.at("role").get<std::string>();
            msg.content = m.at("content").get<std::string>();
            inputs.messages.push_back(msg);
        }
        const auto params = common_chat_templates_apply(tmpls.get(), inputs);
        std::cout << json{{"prompt", params.prompt}}.dump() << "\n";
    } catch (const std::exception & e) {
        std::fprintf(stderr, "chat-template-reference: %s\n", e.what());
        return 1;
    }
    return 0;
}
