/*
 * make_model.c - writes a Llama-shaped bf16 checkpoint directory for the
 * quantize benchmark: hidden 4096, intermediate 14336, 8 KV heads, LAYERS
 * layers (2 give 1.0 GiB), two shards plus an index, config.json.  Values
 * are finite pseudo-random weights of a realistic spread (|x| < 0.25), the
 * same on every run, whose largest magnitude changes from one 32-row,
 * 64-column patch to the next, so that every scale layout has scales that
 * differ (a scale applied to the wrong rows shows).
 *
 * usage: make_model DIR [LAYERS [HIDDEN]]   (HIDDEN: 4096 unless given; the
 * GPU tests use a narrow one, whose down_proj still spans several jobs)
 *        make_model DIR experts in-out|out-in
 *
 * The second form writes one layer of fused MoE experts of Llama-4 Scout's
 * sizes (hidden 5120, expert intermediate 8192; 2 experts: 503 MB), as
 * Llama-4 stores them, [E, in, out] (gate_up_proj [E, H, 2I], down_proj
 * [E, I, H], transformers' Llama4TextExperts), or as transformers v5's
 * Qwen3-MoE does, [E, out, in], with a config that says which.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fp8conv.h"

#define INTER 14336
#define VOCAB 16000
static uint64_t HIDDEN = 4096, KV = 1024;

static uint64_t state = 0x2545F4914F6CDD1Dull;

static uint16_t next_bf16(uint64_t row, uint64_t col)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    /* sign, exponent 2^-14 .. 2^-3 (the top 2^-7 .. 2^-3 by patch), 7 mantissa bits */
    unsigned top = 120 + (unsigned)((row >> 5) + (col >> 6)) % 5;
    uint16_t sign = (uint16_t)(state >> 63) << 15, exp = (uint16_t)(top - (state >> 40) % 8);
    return sign | (uint16_t)(exp << 7) | (uint16_t)((state >> 20) & 0x7F);
}

static void die(fp8_ctx *ctx, const char *what)
{
    fprintf(stderr, "make_model: %s: %s\n", what, fp8_ctx_message(ctx));
    exit(1);
}

typedef struct {
    char name[96];
    uint64_t rows, cols, experts; /* experts: 0 for a matrix, else [experts, rows, cols] */
} spec;

static void write_shard(fp8_ctx *ctx, const char *path, const spec *ts, size_t n)
{
    fp8_writer *w;
    static uint16_t buf[1 << 20];
    if (fp8_writer_create(ctx, path, &w))
        die(ctx, path);
    for (size_t i = 0; i < n; i++) {
        uint64_t matrix[2] = { ts[i].rows, ts[i].cols };
        uint64_t fused[3] = { ts[i].experts, ts[i].rows, ts[i].cols };
        if (fp8_writer_add_tensor(ctx, w, ts[i].name, FP8_DTYPE_BF16,
                                  ts[i].experts ? 3 : ts[i].cols ? 2 : 1,
                                  ts[i].experts ? fused : matrix))
            die(ctx, ts[i].name);
    }
    if (fp8_writer_begin(ctx, w))
        die(ctx, path);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const fp8_tensor_info *t = fp8_writer_tensor(w, i);
        for (uint64_t done = 0; done < t->elements;) {
            size_t k = t->elements - done < (1 << 20) ? (size_t)(t->elements - done) : (1 << 20);
            uint64_t cols = t->rank >= 2 ? t->shape[t->rank - 1] : 1;
            for (size_t j = 0; j < k; j++)
                buf[j] = strstr(t->name, "norm") ? 0x3F80
                                                 : next_bf16((done + j) / cols, (done + j) % cols);
            if (fp8_writer_write(ctx, w, buf, k * 2))
                die(ctx, path);
            done += k;
        }
    }
    if (fp8_writer_commit(ctx, w))
        die(ctx, path);
    fp8_writer_free(w);
}

/* One layer of fused experts, [E, in, out] or [E, out, in] (see the top). */
static int experts(const char *dir, bool in_out)
{
    enum { E = 2, H = 5120, I = 8192 };
    spec ts[2] = { { "", in_out ? H : 2 * I, in_out ? 2 * I : H, E },
                   { "", in_out ? I : H, in_out ? H : I, E } };
    const char *stem = in_out ? "language_model.model.layers.0.feed_forward.experts"
                              : "model.layers.0.mlp.experts";
    snprintf(ts[0].name, sizeof ts[0].name, "%s.gate_up_proj", stem);
    snprintf(ts[1].name, sizeof ts[1].name, "%s.down_proj", stem);
    char path[4096];
    mkdir(dir, 0755);
    fp8_ctx *ctx = fp8_ctx_create();
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_shard(ctx, path, ts, 2);
    fp8_ctx_free(ctx);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *cfg = fopen(path, "w");
    if (!cfg)
        return perror(path), 1;
    if (in_out)
        fprintf(cfg, "{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": "
                     "\"llama4_text\", \"hidden_size\": %d, \"intermediate_size\": %d, "
                     "\"num_local_experts\": %d}}\n", H, I, E);
    else
        fprintf(cfg, "{\"model_type\": \"qwen3_moe\", \"hidden_size\": %d, "
                     "\"moe_intermediate_size\": %d, \"num_experts\": %d}\n", H, I, E);
    fclose(cfg);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[2], "experts") == 0 &&
        (!strcmp(argv[3], "in-out") || !strcmp(argv[3], "out-in")))
        return experts(argv[1], strcmp(argv[3], "in-out") == 0);
    if (argc < 2) {
        fprintf(stderr, "usage: make_model DIR [LAYERS [HIDDEN]] | make_model DIR experts "
                        "in-out|out-in\n");
        return 2;
    }
    int layers = argc > 2 ? atoi(argv[2]) : 2;
    if (argc > 3 && (HIDDEN = strtoull(argv[3], NULL, 10)) < 4) {
        fprintf(stderr, "make_model: HIDDEN must be at least 4\n");
        return 2;
    }
    KV = HIDDEN / 4;
    const char *dir = argv[1];
    mkdir(dir, 0755);
    fp8_ctx *ctx = fp8_ctx_create();
    char path[4096];
    FILE *index;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!(index = fopen(path, "w")))
        return perror(path), 1;
    fprintf(index, "{\n  \"metadata\": {},\n  \"weight_map\": {\n");
    for (int shard = 0; shard < 2; shard++) {
        spec ts[64];
        size_t n = 0;
        char file[64];
        snprintf(file, sizeof file, "model-%05d-of-00002.safetensors", shard + 1);
        if (shard == 0)
            ts[n++] = (spec){ "model.embed_tokens.weight", VOCAB, HIDDEN, 0 };
        else
            ts[n++] = (spec){ "model.norm.weight", HIDDEN, 0, 0 };
        for (int l = shard * layers / 2; l < (shard + 1) * layers / 2; l++) {
            const struct { const char *n; uint64_t r, c; } lin[] = {
                { "self_attn.q_proj", HIDDEN, HIDDEN }, { "self_attn.k_proj", KV, HIDDEN },
                { "self_attn.v_proj", KV, HIDDEN },     { "self_attn.o_proj", HIDDEN, HIDDEN },
                { "mlp.gate_proj", INTER, HIDDEN },     { "mlp.up_proj", INTER, HIDDEN },
                { "mlp.down_proj", HIDDEN, INTER },
            };
            for (size_t k = 0; k < 7; k++) {
                ts[n] = (spec){ "", lin[k].r, lin[k].c, 0 };
                snprintf(ts[n++].name, sizeof ts[0].name, "model.layers.%d.%s.weight", l, lin[k].n);
            }
            ts[n] = (spec){ "", HIDDEN, 0, 0 };
            snprintf(ts[n++].name, sizeof ts[0].name, "model.layers.%d.input_layernorm.weight", l);
        }
        snprintf(path, sizeof path, "%s/%s", dir, file);
        write_shard(ctx, path, ts, n);
        for (size_t i = 0; i < n; i++)
            fprintf(index, "%s    \"%s\": \"%s\"", shard || i ? ",\n" : "", ts[i].name, file);
    }
    fprintf(index, "\n  }\n}\n");
    fclose(index);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *cfg = fopen(path, "w");
    if (!cfg)
        return perror(path), 1;
    fprintf(cfg, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                 "  \"hidden_size\": %llu,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
                 "  \"num_attention_heads\": 32,\n  \"num_key_value_heads\": 8,\n"
                 "  \"vocab_size\": %d,\n  \"torch_dtype\": \"bfloat16\"\n}\n",
            (unsigned long long)HIDDEN, INTER, layers, VOCAB);
    fclose(cfg);
    fp8_ctx_free(ctx);
    return 0;
}
