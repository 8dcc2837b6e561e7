// Reference logits from llama.cpp's CPU backend for the family models of scripts/families.py.
//
//   family-logits MODEL.gguf OUT.logits.f32 N_GREEDY TOKEN...
//
// Runs the prompt (the TOKENs, one batch, logits at every position), then N_GREEDY - 1 single-token
// steps feeding back the argmax, with an f32 KV cache and flash attention off. Writes little-endian
// f32 rows of n_vocab logits, row i being the logits after token i of prompt ++ greedy[:-1] (the
// format of ../shared/reference), and prints the greedy tokens, one per line, on stdout.
// Built by scripts/family-llama-build.sh; run by scripts/family-references.py.
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

static void quiet(enum ggml_log_level level, const char * text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN) {
        fputs(text, stderr);
    }
}

// Index of the largest value, the lowest index on ties (as the tests' greedy choice).
static int argmax(const float * x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[best]) {
            best = i;
        }
    }
    return best;
}

// Decodes `tokens` at positions pos0.. in one batch, asking for logits at every position.
static bool decode(llama_context * ctx, const std::vector<llama_token> & tokens, int pos0) {
    llama_batch batch = llama_batch_init((int32_t) tokens.size(), 0, 1);
    for (size_t i = 0; i < tokens.size(); i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = pos0 + (int) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = (int32_t) tokens.size();
    bool ok = llama_decode(ctx, batch) == 0;
    llama_batch_free(batch);
    return ok;
}

int main(int argc, char ** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL.gguf OUT.logits.f32 N_GREEDY TOKEN...\n", argv[0]);
        return 2;
    }
    const int n_greedy = atoi(argv[3]);
    std::vector<llama_token> prompt;
    for (int i = 4; i < argc; i++) {
        prompt.push_back((llama_token) atoi(argv[i]));
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params cp = llama_context_default_params();
    const int n_total = (int) prompt.size() + n_greedy;
    cp.n_ctx = (uint32_t) ((n_total + 255) / 256 * 256);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.swa_full = true;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }

    FILE * out = fopen(argv[2], "wb");
    if (!out) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 1;
    }
    if (!decode(ctx, prompt, 0)) {
        fprintf(stderr, "prompt decode failed\n");
        return 1;
    }
    for (size_t i = 0; i < prompt.size(); i++) {
        fwrite(llama_get_logits_ith(ctx, (int32_t) i), sizeof(float), n_vocab, out);
    }
    int next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    for (int j = 0; j < n_greedy; j++) {
        printf("%d\n", next);
        if (j + 1 == n_greedy) {
            break;
        }
        if (!decode(ctx, {next}, (int) prompt.size() + j)) {
            fprintf(stderr, "decode of step %d failed\n", j);
            return 1;
        }
        const float * row = llama_get_logits_ith(ctx, -1);
        fwrite(row, sizeof(float), n_vocab, out);
        next = argmax(row, n_vocab);
    }
    fclose(out);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
