/*
 * check_formats.c - the format table (lib/layout/formats.c) and the model rules
 * (lib/layout/model_rules.c):
 * what each MoE family calls its router (read from their modelling code),
 * the fused gate/up weights a loader splits, the expert count of a config,
 * and that every row of the table reads back from the config it writes.
 */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <time.h>

#include "layout/formats.h"

static const char *keep(const char *name, uint64_t rows, uint64_t cols, uint64_t experts)
{
    uint64_t shape[2] = { rows, cols };
    return fmt_default_keep(name, 2, shape, experts, NULL);
}

static bool is_router(const char *name, uint64_t rows, uint64_t experts)
{
    const char *r = keep(name, rows, 256, experts);
    return r && strcmp(r, "MoE router") == 0;
}

/* The router of each MoE family vLLM serves, by its name in the checkpoint. */
START_TEST(test_every_moe_family_router_stays_unquantized)
{
    static const struct {
        const char *family, *name;
        uint64_t experts;
    } routers[] = {
        { "Mixtral", "model.layers.0.block_sparse_moe.gate.weight", 8 },
        { "Phi-MoE", "model.layers.3.block_sparse_moe.gate.weight", 16 },
        { "Qwen2/3-MoE, OLMoE", "model.layers.0.mlp.gate.weight", 64 },
        { "DeepSeek-V2/V3, GLM-4-MoE", "model.layers.5.mlp.gate.weight", 256 },
        { "Qwen2-MoE shared expert", "model.layers.0.mlp.shared_expert_gate.weight", 60 },
        { "GPT-OSS", "model.layers.0.mlp.router.weight", 32 },
        { "Llama-4", "language_model.model.layers.1.feed_forward.router.weight", 16 },
        { "DBRX", "transformer.blocks.0.ffn.router.layer.weight", 16 },
        { "Jamba", "model.layers.1.feed_forward.router.weight", 16 },
        { "Granite-MoE", "model.layers.0.block_sparse_moe.router.layer.weight", 40 },
        /* no name rule: the expert count tells */
        { "Arctic-like", "model.layers.0.block_sparse_moe.moe.gate.weight", 128 },
        { "ERNIE-like", "model.layers.2.mlp.moe.wg.weight", 64 },
    };
    for (size_t i = 0; i < sizeof routers / sizeof routers[0]; i++)
        ck_assert_msg(is_router(routers[i].name, routers[i].experts, routers[i].experts),
                      "%s: %s is quantized", routers[i].family, routers[i].name);
}
END_TEST

START_TEST(test_linear_layers_named_gate_are_not_routers)
{
    /* a gate projection, a gate whose rows are not the expert count, and a
     * dense model's gate */
    ck_assert(!keep("model.layers.0.mlp.gate_proj.weight", 512, 256, 8));
    ck_assert(!keep("model.layers.0.mlp.experts.3.gate_proj.weight", 8, 256, 8));
    ck_assert(!keep("model.layers.0.mlp.moe.gate.weight", 512, 256, 8));
    ck_assert(!keep("model.layers.0.attn.gate.weight", 8, 256, 0));
    ck_assert_str_eq(keep("model.embed_tokens.weight", 512, 256, 0), "embedding");
    ck_assert_str_eq(keep("lm_head.weight", 512, 256, 0), "output head");
    ck_assert_str_eq(keep("model.layers.0.input_layernorm.weight", 1, 256, 0), "normalization");
    ck_assert_str_eq(keep("model.layers.0.self_attn.q_norm.weight", 1, 256, 0), "normalization");
    ck_assert_str_eq(keep("vision.blocks.0.norm1.weight", 1, 256, 0), "normalization");
    ck_assert_str_eq(keep("model.norm.weight", 1, 256, 0), "normalization");
    ck_assert_str_eq(keep("model.norm_out.weight", 1, 256, 0), "normalization");
    /* the letters alone are no norm (check-fp4-quant's adversarial model) */
    ck_assert(!keep("adv.subnormal.down_proj.weight", 4, 64, 0));
    ck_assert(!keep("model.layers.0.normalizer_proj.weight", 4, 64, 0));
    ck_assert_str_eq(keep("model.layers.61.eh_proj.weight", 256, 512, 0),
                     "MTP projection (eh_proj)");
}
END_TEST

START_TEST(test_fused_gate_up_names)
{
    ck_assert(fmt_is_fused_gate_up("model.layers.0.mlp.gate_up_proj.weight"));
    ck_assert(fmt_is_fused_gate_up("model.layers.0.mlp.experts.gate_up_proj"));
    ck_assert(fmt_is_fused_gate_up("model.layers.0.block_sparse_moe.experts.w13_weight"));
    ck_assert(!fmt_is_fused_gate_up("model.layers.0.mlp.gate_proj.weight"));
    ck_assert(!fmt_is_fused_gate_up("model.layers.0.mlp.up_proj.weight"));
}
END_TEST

START_TEST(test_expert_count_of_each_config_key)
{
    static const struct {
        const char *json;
        uint64_t experts;
    } cases[] = {
        { "{\"n_routed_experts\": 256}", 256 },
        { "{\"num_experts\": 128}", 128 },
        { "{\"num_local_experts\": 8}", 8 },
        { "{\"ffn_config\": {\"moe_num_experts\": 16}}", 16 },
        { "{\"text_config\": {\"num_local_experts\": 16}}", 16 },
        { "{\"hidden_size\": 4096}", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *c = cJSON_Parse(cases[i].json);
        ck_assert_uint_eq(fmt_config_experts(c), cases[i].experts);
        cJSON_Delete(c);
    }
}
END_TEST

/* What a config declares reads back as the pair that wrote it; a
 * malformed block size is named, not replaced by 128. */
START_TEST(test_declarations_read_back)
{
    static const struct {
        const char *json;
        fp8_format format;
        fp8_scheme scheme;
        uint32_t rows, cols;
    } cases[] = {
        { "{\"quant_method\": \"fp8\", \"weight_block_size\": [64, 32]}", FP8_FORMAT_HF_FP8,
          FP8_SCHEME_BLOCK, 64, 32 },
        { "{\"quant_method\": \"fp8\"}", FP8_FORMAT_HF_FP8, FP8_SCHEME_TENSOR, 128, 128 },
        { "{\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"group_0\": "
          "{\"weights\": {\"strategy\": \"channel\"}, \"input_activations\": {\"strategy\": "
          "\"token\"}}}}",
          FP8_FORMAT_COMPRESSED_TENSORS, FP8_SCHEME_CHANNEL, 128, 128 },
        { "{\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"group_0\": "
          "{\"weights\": {\"strategy\": \"group\", \"group_size\": 32}}}}",
          FP8_FORMAT_COMPRESSED_TENSORS, FP8_SCHEME_MXFP8, 128, 128 },
        { "{\"quant_method\": \"modelopt\", \"quant_algo\": \"FP8_PER_CHANNEL_PER_TOKEN\"}",
          FP8_FORMAT_MODELOPT, FP8_SCHEME_CHANNEL, 128, 128 },
        { "{\"quant_method\": \"modelopt\", \"quant_algo\": \"MXFP8\"}", FP8_FORMAT_MODELOPT,
          FP8_SCHEME_MXFP8, 128, 128 },
        { "{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 0]}", FP8_FORMAT_HF_FP8,
          FP8_SCHEME_BLOCK, 0, 0 },
        /* Llama-3.1-405B-Instruct-FP8 (issue 44): per-row scales */
        { "{\"quant_method\": \"fbgemm_fp8\", \"activation_scale_ub\": 1200.0, "
          "\"modules_to_not_convert\": [\"lm_head\"]}",
          FP8_FORMAT_FBGEMM_FP8, FP8_SCHEME_CHANNEL, 128, 128 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text;
        ck_assert(asprintf(&text, "{\"quantization_config\": %s}", cases[i].json) > 0);
        cJSON *c = cJSON_Parse(text);
        fmt_declaration d;
        fmt_declaration_read(c, &d);
        ck_assert_msg(d.format == cases[i].format && d.scheme == cases[i].scheme, "%s", text);
        ck_assert_uint_eq(d.block_rows, cases[i].rows);
        ck_assert_uint_eq(d.block_cols, cases[i].cols);
        ck_assert((d.bad_key != NULL) == (cases[i].rows == 0));
        cJSON_Delete(c);
        free(text);
    }
}
END_TEST

/* fbgemm FP8 is read, not written, and its modules_to_not_convert is
 * matched as transformers' should_convert_module reads it (issue 44). */
START_TEST(test_fbgemm_read_only_loose_ignore)
{
    ck_assert(!fp8_format_supports(FP8_FORMAT_FBGEMM_FP8, FP8_SCHEME_CHANNEL));
    ck_assert_str_eq(fp8_format_name(FP8_FORMAT_FBGEMM_FP8), "fbgemm-fp8");
    ck_assert_int_eq(fmt_ignore_match(FP8_FORMAT_FBGEMM_FP8, "o_proj", "model.layers.1.self_attn.o_proj"),
                     FMT_IGNORES_LOOSE);
    ck_assert_int_eq(fmt_ignore_match(FP8_FORMAT_COMPRESSED_TENSORS, "o_proj",
                                      "model.layers.1.self_attn.o_proj"),
                     FMT_IGNORES_NONE);
}
END_TEST

/* The table's scale shapes, for a [300, 200] weight and [3, 300, 200]
 * experts with 128 x 128 blocks. */
START_TEST(test_scale_shapes_of_the_table)
{
    static const struct {
        fp8_format f;
        fp8_scheme s;
        int rank2;
        uint64_t d2[2];
    } cases[] = {
        { FP8_FORMAT_HF_FP8, FP8_SCHEME_BLOCK, 2, { 3, 2 } },
        { FP8_FORMAT_HF_FP8, FP8_SCHEME_TENSOR, 0, { 0, 0 } },
        { FP8_FORMAT_COMPRESSED_TENSORS, FP8_SCHEME_CHANNEL, 2, { 300, 1 } },
        { FP8_FORMAT_COMPRESSED_TENSORS, FP8_SCHEME_TENSOR, 1, { 1, 0 } },
        { FP8_FORMAT_MODELOPT, FP8_SCHEME_CHANNEL, 1, { 300, 0 } },
        { FP8_FORMAT_MODELOPT, FP8_SCHEME_MXFP8, 2, { 300, 6 } },
    };
    uint64_t w2[2] = { 300, 200 }, w3[3] = { 3, 300, 200 }, shape[3];
    int rank;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fmt_spec *f = fmt_spec_find(cases[i].f, cases[i].s);
        ck_assert(f != NULL);
        fmt_scale_shape(f, 2, w2, 128, 128, &rank, shape);
        ck_assert_int_eq(rank, cases[i].rank2);
        for (int d = 0; d < rank; d++)
            ck_assert_uint_eq(shape[d], cases[i].d2[d]);
        fmt_scale_shape(f, 3, w3, 128, 128, &rank, shape);
        ck_assert_int_eq(rank, cases[i].rank2 + 1);
        ck_assert_uint_eq(shape[0], 3);
    }
    /* the pairs that do not exist, and the one refused */
    ck_assert(fmt_spec_find(FP8_FORMAT_HF_FP8, FP8_SCHEME_CHANNEL) == NULL);
    ck_assert(fmt_spec_find(FP8_FORMAT_MODELOPT, FP8_SCHEME_BLOCK) == NULL);
    ck_assert(fmt_spec_find(FP8_FORMAT_MODELOPT, FP8_SCHEME_TENSOR)->refused != NULL);
}
END_TEST


/* issue 43: the indexed ignore list answers as fmt_ignore_match over every
 * entry does (a '.' of an hf-fp8 entry aside, taken as itself), for each
 * format, and a long list with repeats is read once each, in order (how
 * fast is the benchmark's to say, not a test's). */
START_TEST(test_ignore_set_is_the_entries_matched_one_by_one)
{
    static const char *const entries[] = {
        "lm_head", "re:.*mlp[.]gate$", "re:model.visual", "*.shared_expert_gate",
        "model.layers.3.mlp", "gate", "q_proj", "model.layers.1.self_attn.o_proj", "ate",
        "(k|v)_proj", "re:(", "", "proj", "lm_head",
    };
    static const char *const modules[] = {
        "lm_head", "model.lm_head", "model.layers.0.mlp.gate", "model.layers.0.mlp.gate_proj",
        "model.layers.3.mlp.down_proj", "model.layers.1.self_attn.o_proj", "model.visual.blocks.0.qkv",
        "x.shared_expert_gate", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.q_proj",
        "ate", "model.embed_tokens", "a", "model.layers.1.self_attn.o_proj_x",
    };
    const size_t ne = sizeof entries / sizeof *entries;
    static const fp8_format formats[] = { FP8_FORMAT_HF_FP8, FP8_FORMAT_COMPRESSED_TENSORS,
                                          FP8_FORMAT_MODELOPT };
    fp8_ctx *ctx = fp8_ctx_create();
    for (size_t f = 0; f < 3; f++)
        for (size_t take = 1; take <= ne; take++) { /* each prefix of the list */
            fmt_ignore_set *set;
            ck_assert(fmt_ignore_set_create(ctx, formats[f], (char *const *)entries, take, &set) == FP8_OK);
            for (size_t m = 0; m < sizeof modules / sizeof *modules; m++) {
                fmt_ignores want = FMT_IGNORES_NONE;
                for (size_t e = 0; e < take && want != FMT_IGNORES_ALL; e++) {
                    fmt_ignores h = fmt_ignore_match(formats[f], entries[e], modules[m]);
                    want = h > want ? h : want;
                }
                const char *by;
                ck_assert_msg(fmt_ignore_set_match(set, modules[m], &by) == want,
                              "%s, %zu entries, %s: %d, not %d", fp8_format_name(formats[f]), take,
                              modules[m], fmt_ignore_set_match(set, modules[m], NULL), want);
                ck_assert(want ? fmt_ignore_match(formats[f], by, modules[m]) == want : !by);
                for (int loose = 0; loose <= 1; loose++) { /* every entry that selects it */
                    bool selected[sizeof entries / sizeof *entries] = { false };
                    fmt_ignore_set_select(set, modules[m], loose, selected);
                    for (size_t e = 0; e < take; e++) {
                        fmt_ignores h = fmt_ignore_match(formats[f], entries[e], modules[m]);
                        bool sel = h == FMT_IGNORES_ALL || (loose && h == FMT_IGNORES_LOOSE);
                        /* a repeated entry is marked at one of its places */
                        bool marked = false;
                        for (size_t k = 0; k < take; k++)
                            marked = marked || (selected[k] && !strcmp(entries[k], entries[e]));
                        ck_assert_msg(marked == sel, "%s, %s, entry '%s', loose %d",
                                      fp8_format_name(formats[f]), modules[m], entries[e], loose);
                    }
                }
            }
            fmt_ignore_set_free(set);
        }
    /* 100,000 entries, each listed twice: once each, in their order */
    size_t n = 200000;
    cJSON *config = cJSON_CreateObject(), *q = cJSON_AddObjectToObject(config, "quantization_config");
    cJSON *list = cJSON_AddArrayToObject(q, "ignore");
    char name[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "model.layers.%zu.mlp", (i * 7919) % (n / 2));
        cJSON_AddItemToArray(list, cJSON_CreateString(name));
    }
    char **read = NULL;
    size_t nread = 0;
    bool present;
    ck_assert(fmt_ignore_read(ctx, FP8_FORMAT_MODELOPT, config, NULL, &read, &nread, &present) == FP8_OK);
    ck_assert_uint_eq(nread, n / 2);
    ck_assert_str_eq(read[1], "model.layers.7919.mlp");
    fmt_ignore_set *set;
    ck_assert(fmt_ignore_set_create(ctx, FP8_FORMAT_MODELOPT, read, nread, &set) == FP8_OK);
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj", i);
        ck_assert(fmt_ignore_set_match(set, name, NULL) == FMT_IGNORES_ALL);
    }
    ck_assert(fmt_ignore_set_match(set, "model.layers.x.mlp.down_proj", NULL) == FMT_IGNORES_NONE);
    fmt_ignore_set_free(set);
    for (size_t i = 0; i < nread; i++)
        free(read[i]);
    free(read);
    cJSON_Delete(config);
    fp8_ctx_free(ctx);
}
END_TEST

/* An --ignore pattern: "re:" from the start of the module's name; any
 * other searched in the tensor's name, a ^NAME$ (--like's) compared. */
START_TEST(test_ignore_patterns_match_as_documented)
{
    static const struct {
        const char *pattern, *tensor;
        bool match;
    } cases[] = {
        { "re:.*q_proj$", "model.layers.0.self_attn.q_proj.weight", true },
        { "re:.*q_proj$", "model.layers.0.self_attn.q_proj_x.weight", false },
        { "re:self_attn", "model.layers.0.self_attn.q_proj.weight", false },
        { "re:model.visual", "model.visual.blocks.0.qkv.weight", true },
        { "re:lm_head", "lm_head.weight", true },
        { "re:lm_head$", "lm_head", true }, /* no dot: the name is the module's */
        { "q_proj", "model.layers.0.self_attn.q_proj.weight", true },
        { "lm_head", "lm_head.weight", true },
        { "^lm_head\\.weight$", "lm_head.weight", true },
        { "^lm_head\\.weight$", "x.lm_head.weight", false },
        { "^lm_head\\.weight$", "lm_head.weights", false },
        { "^lm.head\\.weight$", "lm_head.weight", true }, /* a regex: '.' any */
        { "^a\\(1\\)\\.weight$", "a(1).weight", true },
        { "layers\\.(0|1)\\.", "model.layers.1.mlp.up_proj.weight", true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fmt_pattern p;
        char why[160];
        ck_assert_msg(fmt_pattern_compile(&p, cases[i].pattern, why, sizeof why) == 0, "%s", why);
        ck_assert_msg(fmt_pattern_match(&p, cases[i].tensor) == cases[i].match, "%s on %s",
                      cases[i].pattern, cases[i].tensor);
        fmt_pattern_free(&p);
    }
    fmt_pattern p;
    char why[160];
    ck_assert(fmt_pattern_compile(&p, "(a)\\1", why, sizeof why) != 0);
    ck_assert_msg(strstr(why, "back-reference"), "%s", why);
    ck_assert(fmt_pattern_compile(&p, "re:(", why, sizeof why) != 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("formats");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_every_moe_family_router_stays_unquantized);
    tcase_add_test(tc, test_linear_layers_named_gate_are_not_routers);
    tcase_add_test(tc, test_fused_gate_up_names);
    tcase_add_test(tc, test_expert_count_of_each_config_key);
    tcase_add_test(tc, test_declarations_read_back);
    tcase_add_test(tc, test_fbgemm_read_only_loose_ignore);
    tcase_add_test(tc, test_scale_shapes_of_the_table);
    tcase_add_test(tc, test_ignore_set_is_the_entries_matched_one_by_one);
    tcase_add_test(tc, test_ignore_patterns_match_as_documented);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
