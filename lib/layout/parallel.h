/*
 * parallel.h - tensor- and expert-parallel partition checks (parallel.c).
 */
#ifndef FP8_PARALLEL_H
#define FP8_PARALLEL_H

#include <cjson/cJSON.h>

#include "common/internal.h"

/* The dimensions of a model that parallelism splits, from config.json. */
typedef struct {
    uint64_t hidden, heads, kv_heads, head_dim, inter;
    uint64_t kv_lora_rank, q_head_dim, kv_b_head_dim, v_head_dim; /* MLA */
    uint64_t q_lora_rank, kv_a_rows; /* MLA's merged q_a / kv_a (0: no q_a) */
    uint64_t experts, moe_inter, shared_inter;
    uint64_t mamba_heads, mamba_groups; /* Mamba2 layers (Granite-4.0-H); 0: none */
    bool dense_mlp;
} par_model;

typedef struct {
    fp8_scheme scheme;
    uint64_t block_n, block_k; /* block scheme: rows (output) and columns (input) */
} par_quant;

/* The object of a config that holds the text model's dimensions: the
 * config itself, or its text_config when the top level has no hidden_size
 * (Llama-4, Mistral-3 / Ministral-3 nest it there). */
const cJSON *par_text_config(const cJSON *config);
/* false when the config (par_text_config) lacks hidden_size or
 * num_attention_heads, or one of the numbers read is not a whole number up
 * to 2^31. */
bool par_model_from_config(const cJSON *config, par_model *m);
/* The first of those numbers present that is not a whole number up to 2^31
 * (1e999, 1.5, -1, a string), NULL when none; *text gets its value as
 * written. */
const char *par_config_bad_key(const cJSON *config, const char **text);
/* FP8_ERR_BAD_INPUT naming that number when there is one (quantize and
 * convert write no model whose sizes a loader cannot read). */
fp8_status par_config_check(fp8_ctx *ctx, const char *dir, const cJSON *config);
/* The number of layers that would not load at TP=tp (EP=ep when > 1), each
 * described to `report` (may be NULL). */
int par_check(const par_model *m, const par_quant *q, int tp, int ep,
              void (*report)(void *arg, const char *message), void *arg);

#endif
