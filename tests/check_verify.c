/*
 * check_verify.c - fp8conv verify: every broken fixture of
 * testdata/verify/MANIFEST.tsv (made by testdata/gen_verify_fixtures.py,
 * independently of lib/) is reported under its rule, naming its tensor, with
 * the exit status its severity implies; the clean fixtures and everything
 * quantize writes are clean.
 */
#include "golden.h"
#include "compute/quant_cpu.h"

#define VERIFY_DIR "testdata/verify"
#define QUANT_CASES "tests/oracle/quant_cases.json"

typedef struct {
    char fixture[128], rule[64], severity[16], tensor[256];
} manifest_row;

/* Rules the fixtures exercise that verify cannot check from the checkpoint
 * alone: a clipped value looks like a group's largest; saturation is found
 * with --against (test_against_finds_saturation_from_floor_scales).  Their
 * fixtures must at least raise no error. */
static const char *const not_checked[] = { "saturation" };

static int read_manifest(manifest_row *rows, int max)
{
    char *text = tu_slurp(VERIFY_DIR "/MANIFEST.tsv", NULL), *save = NULL;
    int n = 0;
    for (char *line = strtok_r(text, "\n", &save); line && n < max;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || strncmp(line, "fixture\t", 8) == 0)
            continue;
        manifest_row *r = &rows[n];
        ck_assert_msg(sscanf(line, "%127[^\t]\t%63[^\t]\t%15[^\t]\t%255[^\t]", r->fixture, r->rule,
                             r->severity, r->tensor) == 4,
                      "bad MANIFEST line: %s", line);
        n++;
    }
    free(text);
    return n;
}

START_TEST(test_every_fixture_is_reported_under_its_rule)
{
    manifest_row rows[64];
    int n = read_manifest(rows, 64);
    ck_assert_int_ge(n, 20);
    int checked = 0;
    for (int i = 0; i < n; i++) {
        const manifest_row *r = &rows[i];
        char *path;
        ck_assert(asprintf(&path, "%s/%s", VERIFY_DIR, r->fixture) > 0);
        int rc;
        cJSON *j = verify_json(path, "", &rc);
        int errors = cJSON_GetObjectItem(j, "errors")->valueint;
        int warnings = cJSON_GetObjectItem(j, "warnings")->valueint;
        bool skip = false;
        for (size_t k = 0; k < sizeof not_checked / sizeof not_checked[0]; k++)
            skip |= strcmp(r->rule, not_checked[k]) == 0;
        if (strcmp(r->rule, "clean") == 0 || skip) {
            ck_assert_msg(rc == 0 && errors == 0, "%s: expected no error, got %d", r->fixture,
                          errors);
            /* what quantize writes has no warning either */
            if (strncmp(r->fixture, "clean-", 6) == 0)
                ck_assert_msg(warnings == 0, "%s: %d warnings", r->fixture, warnings);
        } else {
            const cJSON *f = verify_finding(j, r->rule);
            ck_assert_msg(f != NULL, "%s: no finding [%s]", r->fixture, r->rule);
            ck_assert_str_eq(cJSON_GetObjectItem(f, "severity")->valuestring, r->severity);
            if (strcmp(r->tensor, "-") != 0)
                ck_assert_msg(strstr(cJSON_GetObjectItem(f, "message")->valuestring, r->tensor),
                              "%s: the message does not name %s: %s", r->fixture, r->tensor,
                              cJSON_GetObjectItem(f, "message")->valuestring);
            bool error = strcmp(r->severity, "error") == 0;
            ck_assert_msg(rc == (error ? 1 : 0), "%s: exit %d", r->fixture, rc);
            if (!error) { /* --strict turns the warning into a failure */
                cJSON *s = verify_json(path, "--strict", &rc);
                ck_assert_int_eq(rc, 1);
                cJSON_Delete(s);
            }
            checked++;
        }
        cJSON_Delete(j);
        free(path);
    }
    ck_assert_int_ge(checked, 15);
}
END_TEST

/* What quantize writes passes verify --strict, except where quantize warned
 * that vLLM and SGLang would refuse it (a block size the model's layers do
 * not divide): there verify fails under the same rule. */
START_TEST(test_everything_quantize_writes_is_clean_or_warned)
{
    cJSON *cases = read_json(QUANT_CASES);
    const cJSON *c = cJSON_GetArrayItem(cases, _i);
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    char *dir = tu_tmpdir(), *args = join_args(cJSON_GetObjectItem(c, "args")), *cmd, *out, *report;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    ck_assert(asprintf(&cmd, "quantize --json %s '%s' '%s'", args,
                       cJSON_GetObjectItem(c, "input")->valuestring, out) > 0);
    ck_assert_int_eq(tu_run(cmd, &report, NULL), 0);
    cJSON *q = cJSON_Parse(report);
    ck_assert_msg(q != NULL, "%s: quantize --json: %s", name, report);
    int warned = cJSON_GetArraySize(cJSON_GetObjectItem(q, "warnings"));
    int rc;
    cJSON *j = verify_json(out, "--strict", &rc);
    int errors = cJSON_GetObjectItem(j, "errors")->valueint;
    int warnings = cJSON_GetObjectItem(j, "warnings")->valueint;
    if (!warned) {
        ck_assert_msg(rc == 0, "%s: verify --strict found %d errors, %d warnings", name, errors,
                      warnings);
    } else {
        ck_assert_msg(rc == 1 && errors > 0, "%s: quantize warned, verify passed", name);
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "findings"))
        {
            const char *rule = cJSON_GetObjectItem(f, "rule")->valuestring;
            ck_assert_msg(strcmp(rule, "tp") == 0 || strcmp(rule, "fused-block") == 0 ||
                              strcmp(rule, "router-quantized") == 0 ||
                              strcmp(rule, "mla-kv-b-block") == 0 ||
                              strcmp(rule, "indexer-wk-block") == 0 ||
                              strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "note") == 0,
                          "%s: verify found [%s], which quantize did not warn of", name, rule);
        }
    }
    cJSON_Delete(j);
    cJSON_Delete(q);
    free(report);
    free(cmd);
    free(args);
    free(out);
    cJSON_Delete(cases);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_no_values_reads_headers_only)
{
    int rc;
    cJSON *j = verify_json(VERIFY_DIR "/nan-code", "--no-values", &rc);
    ck_assert_int_eq(rc, 0); /* the NaN is in the data */
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "values_scanned")));
    cJSON_Delete(j);
    j = verify_json(VERIFY_DIR "/missing-scale", "--no-values", &rc);
    ck_assert_int_eq(rc, 1); /* a header problem is still found */
    cJSON_Delete(j);
}
END_TEST

START_TEST(test_all_problems_are_reported_not_just_the_first)
{
    /* one shard with three problems: a weight without a scale, a NaN scale,
     * an orphan scale */
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *config = "{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": "
                         "\"e4m3\", \"activation_scheme\": \"dynamic\", "
                         "\"weight_block_size\": [128, 128], \"modules_to_not_convert\": []}}";
    tu_spit(path, config, strlen(config));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    uint64_t wshape[2] = { 2, 64 }, sshape[2] = { 1, 1 };
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "a.weight", FP8_DTYPE_F8_E4M3, 2, wshape) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "b.weight", FP8_DTYPE_F8_E4M3, 2, wshape) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "b.weight_scale_inv", FP8_DTYPE_F32, 2, sshape) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "c.weight_scale_inv", FP8_DTYPE_F32, 2, sshape) == FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    unsigned char codes[128] = { 0x38 };
    float nan = __builtin_nanf(""), one = 1;
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const fp8_tensor_info *t = fp8_writer_tensor(w, i);
        const void *data = t->dtype == FP8_DTYPE_F8_E4M3 ? (const void *)codes
                           : strcmp(t->name, "b.weight_scale_inv") == 0 ? (const void *)&nan
                                                                        : (const void *)&one;
        ck_assert(fp8_writer_write(ctx, w, data, (size_t)fp8_tensor_nbytes(t)) == FP8_OK);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    int rc;
    cJSON *j = verify_json(dir, "", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "errors")->valueint, 3);
    ck_assert(verify_finding(j, "missing-scale") && verify_finding(j, "bad-scale") && verify_finding(j, "orphan-scale"));
    cJSON_Delete(j);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- parallelism */

/* A checkpoint directory with a real model's config.json (testdata/tp-configs)
 * and a shard holding no FP8 tensor: the TP answer comes from the config. */
static char *config_only(const char *dir, const char *config)
{
    char *ck, *cmd, path[512];
    ck_assert(asprintf(&ck, "%s/ck", dir) > 0);
    ck_assert(asprintf(&cmd, "mkdir -p %s && cp testdata/tp-configs/%s %s/config.json", ck, config,
                       ck) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    snprintf(path, sizeof path, "%s/model.safetensors", ck);
    /* one 128x128 FP8 weight and its block scale: an FP8 checkpoint (one
     * without FP8 weights is an error of its own) */
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    uint64_t one = 1, wshape[2] = { 128, 128 }, sshape[2] = { 1, 1 };
    uint16_t v = 0x3F80;
    float s = 1.0f;
    static unsigned char codes[128 * 128];
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "model.norm.weight", FP8_DTYPE_BF16, 1, &one) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "model.layers.0.self_attn.o_proj.weight",
                                    FP8_DTYPE_F8_E4M3, 2, wshape) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "model.layers.0.self_attn.o_proj.weight_scale_inv",
                                    FP8_DTYPE_F32, 2, sshape) == FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    /* in layout order: F32, BF16, then F8_E4M3 */
    ck_assert(fp8_writer_write(ctx, w, &s, 4) == FP8_OK);
    ck_assert(fp8_writer_write(ctx, w, &v, 2) == FP8_OK);
    ck_assert(fp8_writer_write(ctx, w, codes, sizeof codes) == FP8_OK);
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    return ck;
}

/* The "tp_sizes_that_load" of a report, as "1 2 4". */
static void sizes_text(const cJSON *report, char *buf, size_t cap)
{
    const cJSON *t;
    size_t o = 0;
    buf[0] = '\0';
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(report, "tp_sizes_that_load"))
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", o ? " " : "", t->valueint);
}

/* Every message of rule "tp" contains each of the `needles`. */
static void expect_tp_failures(const cJSON *report, const char *const *needles, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        bool found = false;
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
            found |= strstr(cJSON_GetObjectItem(f, "message")->valuestring, needles[k]) != NULL;
        ck_assert_msg(found, "no finding mentions '%s'", needles[k]);
    }
}

/* Real models' configs: where block 128x128 fails, why, the sizes that
 * load, and a parallel layout that does load. */
static const struct {
    const char *config, *fails, *why[2], *sizes, *loads;
} tp_cases[] = {
    /* 18432/32 = 576 and 2048/32 = 64 are not multiples of 128 */
    { "deepseek-v3.json", "--tp 32", { "18432/32 = 576", "2048/32 = 64" }, "1 2 4 8 16",
      "--tp 8" },
    /* intermediate 14336/32 = 448 = 3.5 blocks; 64 exceeds the 32 heads */
    { "llama-3-8b.json", "--tp 32", { "mlp.gate_proj/up_proj", "14336/32 = 448" },
      "1 2 4 8 16", "--tp 16" },
    /* moe_intermediate 768: 384 at TP=2, 192 at TP=4, 96 at TP=8; whole
     * experts on 8 expert-parallel ranks load */
    { "qwen3-30b-a3b.json", "--tp 8", { "mlp.experts", "768/8 = 96" }, "1 2",
      "--tp 8 --ep 8" },
};

/* fuzz_dir found it: "num_key_value_heads": 0 divided by zero in the TP
 * check (SIGFPE in verify --tp, or in any verify of such a config). */
START_TEST(test_zero_kv_heads_is_a_finding_not_a_crash)
{
    char *dir = tu_tmpdir(), *ck = config_only(dir, "llama-3-8b.json"), *cmd;
    ck_assert(asprintf(&cmd, "sed -i 's/\"num_key_value_heads\": 8/\"num_key_value_heads\": 0/' "
                             "%s/config.json && grep -q '\"num_key_value_heads\": 0' %s/config.json",
                       ck, ck) > 0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    free(cmd);
    int rc;
    cJSON *j = verify_json(ck, "--tp 2", &rc);
    ck_assert_int_eq(rc, 1);
    static const char *const why[1] = { "num_key_value_heads is 0" };
    expect_tp_failures(j, why, 1);
    cJSON_Delete(j);
    free(ck);
    tu_tmpdir_free(dir);
}
END_TEST

/* GLM-4.5-Air's dense layer 0 (intermediate_size 10944 = 85.5 blocks) in a
 * Llama-3-8B config: vLLM 0.32 no longer refuses the merged gate_up up front
 * (linear.py _maybe_allow_fp8_block_shape_mismatch) but the up part's 86 scale
 * rows at row 86 overrun the merged scale's 171 (adjust_block_scale_shard,
 * parameter.py load_merged_column_weight; seen with tests/loaders/matrix.py
 * OFF_BLOCK_CASES): verify refuses TP 1 and says why vLLM fails. 10952
 * (85.5625 blocks) loads there and scales up's rows 0-55 with gate's last
 * block; FusedMoE's gate/up has no such skip (no such note). */
START_TEST(test_tp_merged_parts_off_the_block_say_what_vllm_does)
{
    static const struct {
        const char *inter, *needles[2];
    } cases[] = {
        { "10944", { "10944/1 = 10944",
                     "the load fails: up's 86 scale rows at row 86 overrun the merged scale's 171" } },
        { "10952", { "_maybe_allow_fp8_block_shape_mismatch",
                     "it computes wrong: up's rows 0-55 get gate's last block's scale" } },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *dir = tu_tmpdir(), *ck = config_only(dir, "llama-3-8b.json"), *cmd;
        ck_assert(asprintf(&cmd, "sed -i 's/\"intermediate_size\": 14336/\"intermediate_size\": %s/' "
                                 "%s/config.json && grep -q '\"intermediate_size\": %s' %s/config.json",
                           cases[k].inter, ck, cases[k].inter, ck) > 0);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
        free(cmd);
        int rc;
        cJSON *j = verify_json(ck, "--tp 1", &rc);
        ck_assert_int_eq(rc, 1);
        expect_tp_failures(j, cases[k].needles, 2);
        char sizes[256];
        sizes_text(j, sizes, sizeof sizes);
        ck_assert_str_eq(sizes, "");
        cJSON_Delete(j);
        free(ck);
        tu_tmpdir_free(dir);
    }
    /* experts: validate_fp8_block_shape_moe refuses with no skip */
    char *dir = tu_tmpdir(), *ck = config_only(dir, "qwen3-30b-a3b.json");
    int rc;
    cJSON *j = verify_json(ck, "--tp 8", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "findings"))
        ck_assert_msg(!strstr(cJSON_GetObjectItem(f, "message")->valuestring, "PR #30836"),
                      "FusedMoE finding names the linear skip: %s",
                      cJSON_GetObjectItem(f, "message")->valuestring);
    cJSON_Delete(j);
    free(ck);
    tu_tmpdir_free(dir);
}
END_TEST

/* DeepSeek MLA's q_a_proj and kv_a_proj_with_mqa: vLLM loads them as one
 * merged layer, fused_qkv_a_proj (models/deepseek_v2.py), SGLang as one
 * concatenated fused_qkv_a_proj_with_mqa; a q_lora_rank off the 128-row block
 * puts kv_a's scales after q_a's whole blocks.  DeepSeek-V3's own sizes
 * (1536, 512 + 64) load at TP 1; q_lora_rank 64 with them overruns the
 * merged scale, and with the old corpus copies' kv_lora_rank 64 + rope 16
 * kv_a's rows 0-63 take q_a's scale (seen in vLLM 0.32 with stand-ins,
 * issue 44). */
START_TEST(test_tp_mla_q_lora_off_the_block_is_named)
{
    static const struct {
        const char *sed, *needles[3];
    } cases[] = {
        { "s/\"q_lora_rank\": 1536/\"q_lora_rank\": 64/",
          { "self_attn.q_a_proj (fused_qkv_a_proj, merged, replicated): output partition 64/1 = 64",
            "SGLang (deepseek_v2.py load_weights: fused_qkv_a_proj_with_mqa",
            "the load fails: kv_a_proj_with_mqa's 5 scale rows at row 1 overrun the merged "
            "scale's 5" } },
        { "s/\"q_lora_rank\": 1536/\"q_lora_rank\": 64/; s/\"kv_lora_rank\": 512/\"kv_lora_rank\": 64/; "
          "s/\"qk_rope_head_dim\": 64/\"qk_rope_head_dim\": 16/",
          { "output partition 64/1 = 64",
            "it computes wrong: kv_a_proj_with_mqa's rows 0-63 get q_a_proj's last block's scale",
            "_maybe_allow_fp8_block_shape_mismatch" } },
    };
    char *dir = tu_tmpdir(), *ck = config_only(dir, "deepseek-v3.json"), sizes[256];
    int rc;
    cJSON *j = verify_json(ck, "--tp 1", &rc); /* the release's sizes: clean */
    ck_assert_int_eq(rc, 0);
    sizes_text(j, sizes, sizeof sizes);
    ck_assert_str_eq(sizes, "1 2 4 8 16");
    cJSON_Delete(j);
    free(ck);
    tu_tmpdir_free(dir);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *cmd;
        dir = tu_tmpdir();
        ck = config_only(dir, "deepseek-v3.json");
        ck_assert(asprintf(&cmd, "sed -i '%s' %s/config.json && grep -q '\"q_lora_rank\": 64' "
                                 "%s/config.json", cases[k].sed, ck, ck) > 0);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
        free(cmd);
        j = verify_json(ck, "--tp 1", &rc);
        ck_assert_int_eq(rc, 1);
        expect_tp_failures(j, cases[k].needles, 3);
        sizes_text(j, sizes, sizeof sizes);
        ck_assert_str_eq(sizes, "");
        cJSON_Delete(j);
        free(ck);
        tu_tmpdir_free(dir);
    }
}
END_TEST

START_TEST(test_tp_answers_for_real_configs)
{
    char *dir = tu_tmpdir(), *ck = config_only(dir, tp_cases[_i].config), sizes[256];
    int rc;
    cJSON *j = verify_json(ck, tp_cases[_i].fails, &rc);
    ck_assert_int_eq(rc, 1);
    expect_tp_failures(j, tp_cases[_i].why, 2);
    sizes_text(j, sizes, sizeof sizes);
    ck_assert_str_eq(sizes, tp_cases[_i].sizes);
    cJSON_Delete(j);
    j = verify_json(ck, tp_cases[_i].loads, &rc);
    ck_assert_msg(rc == 0, "%s %s should load", tp_cases[_i].config, tp_cases[_i].loads);
    cJSON_Delete(j);
    free(ck);
    tu_tmpdir_free(dir);
}
END_TEST

/* A copy of fixture `from` with its config.json's quantization_config
 * replaced by `qconfig` (JSON text). */
static char *with_quant_config(const char *dir, const char *from, const char *qconfig)
{
    char *ck, *cmd;
    ck_assert(asprintf(&ck, "%s/ck", dir) > 0);
    ck_assert(asprintf(&cmd, "cp -r %s/%s %s", VERIFY_DIR, from, ck) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", ck);
    cJSON *config = read_json(path);
    cJSON_ReplaceItemInObject(config, "quantization_config", cJSON_Parse(qconfig));
    char *text = cJSON_Print(config);
    tu_spit(path, text, strlen(text));
    free(text);
    cJSON_Delete(config);
    return ck;
}

START_TEST(test_config_rules)
{
    static const struct {
        const char *qconfig, *rule;
    } cases[] = {
        { "{\"quant_method\": \"bitsandbytes\"}", "quant-method" },
        { "{\"quant_method\": \"fp8\", \"weight_block_size\": [0, 128]}", "quant-config" },
        /* the block the scales were made with is 128x128: 64x64 makes every scale shape wrong */
        { "{\"quant_method\": \"fp8\", \"weight_block_size\": [64, 64], "
          "\"modules_to_not_convert\": [\"lm_head\", \"model.embed_tokens\"]}",
          "scale-shape" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *dir = tu_tmpdir(), *ck = with_quant_config(dir, "clean-block-hf-fp8", cases[k].qconfig);
        int rc;
        cJSON *j = verify_json(ck, "", &rc);
        ck_assert_int_eq(rc, 1);
        ck_assert_msg(verify_finding(j, cases[k].rule), "no [%s]", cases[k].rule);
        cJSON_Delete(j);
        free(ck);
        tu_tmpdir_free(dir);
    }
}
END_TEST

START_TEST(test_fp8_tensor_of_rank_1_is_an_error)
{
    char *dir = tu_tmpdir(), *ck = with_quant_config(dir, "clean-block-hf-fp8",
                                                      "{\"quant_method\": \"fp8\", "
                                                      "\"weight_block_size\": [128, 128]}");
    char path[512];
    snprintf(path, sizeof path, "%s/extra.safetensors", ck);
    /* a directory with an index lists its shards: make one without an index */
    char *cmd;
    ck_assert(asprintf(&cmd, "rm %s/model.safetensors.index.json", ck) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    uint64_t n = 4;
    unsigned char codes[4] = { 0x38, 0x38, 0x38, 0x38 };
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "odd.weight", FP8_DTYPE_F8_E4M3, 1, &n) == FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    ck_assert(fp8_writer_write(ctx, w, codes, 4) == FP8_OK);
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    int rc;
    cJSON *j = verify_json(ck, "", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "fp8-rank");
    ck_assert(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring, "odd.weight"));
    cJSON_Delete(j);
    free(ck);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_zero_blocks_are_counted_per_tensor)
{
    /* quant-edge's gate_proj [300, 200] has one all-zero 128x128 block (its
     * experts' gate_up_proj of 300 rows, whose blocks span the halves, is
     * an error of its own) */
    char *dir = tu_tmpdir(), *args = quantize_into(dir, "", "testdata/quant-edge");
    int rc;
    cJSON *j = verify_json(args, "", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert(verify_finding(j, "fused-block") != NULL);
    const cJSON *t;
    bool found = false;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "tensors"))
    {
        if (strcmp(cJSON_GetObjectItem(t, "name")->valuestring,
                   "model.layers.0.mlp.gate_proj.weight") != 0)
            continue;
        found = true;
        ck_assert_int_eq(cJSON_GetObjectItem(t, "zero_groups")->valueint, 1);
        ck_assert_int_eq(cJSON_GetObjectItem(t, "groups")->valueint, 6);
    }
    ck_assert(found);
    cJSON_Delete(j);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- loader rules */

/* quantize --json's warnings joined, and its exit status. */
static char *quantize_warnings(const char *options, const char *input, const char *out, int *rc)
{
    char *args, *report;
    ck_assert(asprintf(&args, "quantize --json %s '%s' '%s'", options, input, out) > 0);
    *rc = tu_run(args, &report, NULL);
    cJSON *j = cJSON_Parse(report), *w;
    ck_assert_msg(j != NULL, "%s: %s", args, report);
    size_t len = 1;
    char *all = calloc(1, 1);
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(j, "warnings"))
    {
        len += strlen(w->valuestring) + 1;
        all = realloc(all, len);
        strcat(strcat(all, w->valuestring), "\n");
    }
    cJSON_Delete(j);
    free(report);
    free(args);
    return all;
}

static const char MIXTRAL_CONFIG[] =
    "{\"model_type\": \"mixtral\", \"hidden_size\": 128, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 2, \"intermediate_size\": 128, \"num_local_experts\": 4}\n";
static const tu_tensor MIXTRAL[] = {
    { "model.layers.0.block_sparse_moe.gate.weight", 2, { 4, 128 } },
    { "model.layers.0.block_sparse_moe.experts.0.w1.weight", 2, { 128, 128 } },
    { "model.layers.0.block_sparse_moe.experts.0.w2.weight", 2, { 128, 128 } },
    { "model.layers.0.block_sparse_moe.experts.0.w3.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.q_proj.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.k_proj.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.v_proj.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.o_proj.weight", 2, { 128, 128 } },
};

/* Mixtral's router (block_sparse_moe.gate) stays bf16 by default; quantized
 * under --no-default-ignore, quantize warns and verify fails. */
START_TEST(test_mixtral_router_stays_bf16_or_fails_verify)
{
    char *dir = tu_tmpdir(), out[512], out2[512];
    char *model = make_named_model(dir, "mixtral", MIXTRAL_CONFIG, MIXTRAL, 8);
    snprintf(out, sizeof out, "%s/fp8", dir);
    snprintf(out2, sizeof out2, "%s/fp8-all", dir);
    int rc;
    char *w = quantize_warnings("", model, out, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(w, "");
    free(w);
    cJSON *j = verify_json(out, "--strict", &rc);
    ck_assert_msg(rc == 0, "verify --strict: %d errors", cJSON_GetObjectItem(j, "errors")->valueint);
    cJSON_Delete(j);
    w = quantize_warnings("--no-default-ignore", model, out2, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(w, "block_sparse_moe.gate.weight") && strstr(w, "router"), "%s", w);
    free(w);
    j = verify_json(out2, "", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "router-quantized");
    ck_assert(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring,
                          "model.layers.0.block_sparse_moe.gate.weight"));
    cJSON_Delete(j);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* DeepSeek-V3's MTP layer keeps its output head model.layers.61.shared_head.head
 * in BF16 (the release's model.safetensors.index.json; vLLM's deepseek_mtp.py
 * builds it as an unquantized ParallelLMHead): quantize and quantize --like
 * keep it, and an FP8 one (--no-default-ignore) fails verify. */
static const char MTP_CONFIG[] =
    "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 128, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 2, \"intermediate_size\": 128, \"vocab_size\": 256, "
    "\"num_hidden_layers\": 1, \"num_nextn_predict_layers\": 1}\n";
static const tu_tensor MTP[] = {
    { "model.layers.0.self_attn.o_proj.weight", 2, { 128, 128 } },
    { "model.layers.1.self_attn.o_proj.weight", 2, { 128, 128 } },
    { "model.layers.1.shared_head.head.weight", 2, { 256, 128 } },
    { "model.layers.1.shared_head.norm.weight", 1, { 128 } },
};

START_TEST(test_mtp_shared_head_stays_bf16_or_fails_verify)
{
    char *dir = tu_tmpdir(), out[512], like[512], ref[512], all[512];
    char *model = make_named_model(dir, "dsv3", MTP_CONFIG, MTP, 4);
    snprintf(out, sizeof out, "%s/fp8", dir);
    snprintf(like, sizeof like, "%s/fp8-like", dir);
    snprintf(ref, sizeof ref, "%s/ref.json", dir);
    snprintf(all, sizeof all, "%s/fp8-all", dir);
    static const char ref_config[] =
        "{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
        "\"activation_scheme\": \"dynamic\", \"weight_block_size\": [128, 128]}}\n";
    tu_spit(ref, ref_config, strlen(ref_config));
    int rc;
    char *opts[] = { "", NULL };
    char *likeopt;
    ck_assert(asprintf(&likeopt, "--like '%s'", ref) > 0);
    opts[1] = likeopt;
    const char *outs[] = { out, like };
    for (int k = 0; k < 2; k++) {
        char *w = quantize_warnings(opts[k], model, outs[k], &rc);
        ck_assert_msg(rc == 0, "quantize %s: %s", opts[k], w);
        free(w);
        /* kept in bf16; plain quantize lists it, --like writes the
         * reference's list, which a DeepSeek-V3 release does not have */
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_checkpoint *ck;
        ck_assert(fp8_checkpoint_open(ctx, outs[k], &ck) == FP8_OK);
        const fp8_tensor_info *head =
            fp8_checkpoint_find(ck, "model.layers.1.shared_head.head.weight", NULL);
        ck_assert_msg(head && head->dtype == FP8_DTYPE_BF16, "quantize %s: shared_head.head "
                      "not kept in bf16", opts[k]);
        fp8_checkpoint_close(ck);
        fp8_ctx_free(ctx);
        char *path, *config;
        ck_assert(asprintf(&path, "%s/config.json", outs[k]) > 0);
        config = tu_slurp(path, NULL);
        ck_assert_msg(k == 1 || strstr(config, "\"model.layers.1.shared_head.head\""),
                      "quantize %s: shared_head.head not listed: %s", opts[k], config);
        free(config);
        free(path);
        cJSON *j = verify_json(outs[k], "--strict --no-values", &rc);
        ck_assert_msg(rc == 0 && !verify_finding(j, "mtp-head-quantized"), "verify --strict %s: %d",
                      outs[k], rc);
        cJSON_Delete(j);
    }
    free(likeopt);
    char *w = quantize_warnings("--no-default-ignore", model, all, &rc);
    ck_assert_int_eq(rc, 0);
    free(w);
    cJSON *j = verify_json(all, "--no-values", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "mtp-head-quantized");
    ck_assert(f && strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "error") == 0 &&
              strstr(cJSON_GetObjectItem(f, "message")->valuestring,
                     "model.layers.1.shared_head.head.weight"));
    cJSON_Delete(j);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* DeepSeek-V3.2's indexer weights_proj: quantize keeps it bf16, as vLLM and
 * SGLang build it; one quantized anyway (--no-default-ignore) is an error
 * naming it, and verify --strict fails (issue 44). */
START_TEST(test_indexer_weights_proj_stays_bf16_or_fails_verify)
{
    char *dir = tu_tmpdir(), *bf, *out, *all;
    int rc;
    ck_assert(asprintf(&bf, "%s/bf16", dir) > 0 && asprintf(&out, "%s/q", dir) > 0 &&
              asprintf(&all, "%s/all", dir) > 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q "
                                      "testdata/releases/deepseek-v3.2-exp '%s'", bf), 0);
    char *w = quantize_warnings("", bf, out, &rc);
    ck_assert_msg(rc == 0, "quantize: %s", w);
    free(w);
    cJSON *j = verify_json(out, "--strict --no-values", &rc);
    ck_assert_msg(rc == 0 && !verify_finding(j, "indexer-quantized"), "verify --strict: %d", rc);
    cJSON_Delete(j);
    w = quantize_warnings("--no-default-ignore", bf, all, &rc);
    ck_assert_int_eq(rc, 0);
    free(w);
    j = verify_json(all, "--no-values", &rc);
    const cJSON *f = verify_finding(j, "indexer-quantized");
    ck_assert_msg(rc == 1 && f &&
                  !strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "error") &&
                  strstr(cJSON_GetObjectItem(f, "message")->valuestring,
                         "model.layers.0.self_attn.indexer.weights_proj.weight"), "exit %d", rc);
    cJSON_Delete(j);
    free(bf);
    free(out);
    free(all);
    tu_tmpdir_free(dir);
}
END_TEST

/* DeepSeek-V3.2 as vLLM loads it (hf-fp8 128x128 blocks): an indexer wk
 * [index_head_dim, hidden] whose hidden size is not whole blocks (136: vLLM's
 * _try_load_fp8_indexer_wk derives a 128x68 block from the shapes) and an MLA
 * kv_b_proj whose kv_lora_rank is not (64: scaled_dequantize's assertion in
 * split_kv_b_proj) are each named for vLLM alone; the release's whole
 * blocks (the copy: hidden 128, kv_lora_rank 128) are clean. */
START_TEST(test_deepseek_v32_block_shapes_vllm_derives)
{
    static const char config[] =
        "{\"architectures\": [\"DeepseekV32ForCausalLM\"], \"model_type\": \"deepseek_v32\", "
        "\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"quant_method\": \"fp8\", "
        "\"fmt\": \"e4m3\", \"activation_scheme\": \"dynamic\", \"weight_block_size\": "
        "[128, 128]}}\n";
    static const struct {
        uint64_t hidden, kv_lora;
        const char *rule;
    } cases[] = { { 128, 128, NULL }, { 136, 128, "indexer-wk-block" },
                  { 128, 64, "mla-kv-b-block" } };
    char *dir = tu_tmpdir();
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        uint64_t h = cases[k].hidden, r = cases[k].kv_lora;
        const tu_typed_tensor t[] = {
            { "model.layers.0.self_attn.indexer.wk.weight", FP8_DTYPE_F8_E4M3, 2, { 128, h } },
            { "model.layers.0.self_attn.indexer.wk.weight_scale_inv", FP8_DTYPE_F32, 2,
              { 1, (h + 127) / 128 } },
            { "model.layers.0.self_attn.kv_b_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, r } },
            { "model.layers.0.self_attn.kv_b_proj.weight_scale_inv", FP8_DTYPE_F32, 2,
              { 2, (r + 127) / 128 } },
        };
        char name[32];
        snprintf(name, sizeof name, "v32-%zu", k);
        char *m = make_typed_model(dir, name, config, t, sizeof t / sizeof *t);
        int rc;
        cJSON *j = verify_json(m, "--no-values", &rc);
        const char *rules[] = { "indexer-wk-block", "mla-kv-b-block" };
        for (int i = 0; i < 2; i++) {
            const cJSON *f = verify_finding(j, rules[i]);
            bool want = cases[k].rule && !strcmp(cases[k].rule, rules[i]);
            ck_assert_msg(!f == !want, "hidden %llu kv_lora %llu: %s %s", (unsigned long long)h,
                          (unsigned long long)r, rules[i], f ? "reported" : "missing");
            if (f)
                ck_assert_msg(strstr(cJSON_GetObjectItem(f, "message")->valuestring, "vLLM") &&
                                  !strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "error"),
                              "%s", cJSON_GetObjectItem(f, "message")->valuestring);
        }
        ck_assert_int_eq(rc, cases[k].rule ? 1 : 0);
        cJSON_Delete(j);
        free(m);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* ModelOpt MIXED_PRECISION's FP8 KV cache as vLLM 0.32 reads it: from
 * config.json's quantization_config it takes kv_cache_scheme only, so a
 * config with kv_cache_quant_algo there instead (the corpus copy before
 * issue 44's fix) has its KV-cache scales dropped, a warning naming vLLM;
 * the copy as ModelOpt's export writes it (kv_cache_scheme) has none. */
START_TEST(test_modelopt_mixed_kv_scheme_vllm_reads)
{
    char *dir = tu_tmpdir(), *cmd, path[600];
    ck_assert(asprintf(&cmd, "cp -r testdata/releases/modelopt-mixed '%s/m'", dir) > 0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    free(cmd);
    snprintf(path, sizeof path, "%s/m", dir);
    int rc;
    cJSON *j = verify_json(path, "--no-values", &rc);
    ck_assert_msg(rc == 0 && !verify_finding(j, "kv-scale-dropped"), "release copy: %d", rc);
    cJSON_Delete(j);
    snprintf(path, sizeof path, "%s/m/config.json", dir);
    cJSON *config = read_json(path);
    cJSON *q = cJSON_GetObjectItem(config, "quantization_config");
    cJSON_DeleteItemFromObject(q, "kv_cache_scheme");
    cJSON_AddStringToObject(q, "kv_cache_quant_algo", "FP8");
    char *text = cJSON_Print(config);
    tu_spit(path, text, strlen(text));
    free(text);
    cJSON_Delete(config);
    snprintf(path, sizeof path, "%s/m", dir);
    j = verify_json(path, "--no-values", &rc);
    const cJSON *f = verify_finding(j, "kv-scale-dropped");
    ck_assert_msg(rc == 0 && f && strstr(cJSON_GetObjectItem(f, "message")->valuestring,
                                         "vLLM drops them"), "planted: %d", rc);
    cJSON_Delete(j);
    tu_tmpdir_free(dir);
}
END_TEST

/* Replaces the ignore list of the checkpoint at `out` (format `format`) by the
 * JSON array `list`: config.json's, and for modelopt hf_quant_config.json's
 * exclude_modules too. */
static void set_ignore(const char *out, const char *format, const char *list)
{
    const char *files[] = { "config.json", "hf_quant_config.json" };
    for (int k = 0; k < (strcmp(format, "modelopt") == 0 ? 2 : 1); k++) {
        char *path, *text;
        ck_assert(asprintf(&path, "%s/%s", out, files[k]) > 0);
        cJSON *root = read_json(path);
        cJSON *q = cJSON_GetObjectItem(root, k ? "quantization" : "quantization_config");
        const char *key = k                                       ? "exclude_modules"
                          : strcmp(format, "hf-fp8") == 0 ? "modules_to_not_convert"
                                                                  : "ignore";
        ck_assert_msg(q && cJSON_GetObjectItem(q, key), "%s: no %s", path, key);
        cJSON_ReplaceItemInObject(q, key, cJSON_Parse(list));
        text = cJSON_Print(root);
        tu_spit(path, text, strlen(text));
        free(text);
        cJSON_Delete(root);
        free(path);
    }
}

/* A model with an embedding, a router (mlp.gate) beside a dense gate_proj,
 * and an output head. */
static const char IGN_CONFIG[] =
    "{\"model_type\": \"qwen2_moe\", \"hidden_size\": 128, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 2, \"intermediate_size\": 128, \"vocab_size\": 256}\n";
static const tu_tensor IGN[] = {
    { "model.embed_tokens.weight", 2, { 256, 128 } },
    { "model.layers.0.mlp.gate.weight", 2, { 4, 128 } },
    { "model.layers.0.mlp.gate_proj.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.o_proj.weight", 2, { 128, 128 } },
    { "lm_head.weight", 2, { 256, 128 } },
};

/* verify --strict --no-values of `out` after its ignore list is set to `list`:
 * the exit status, and whether `rule` was found naming `tensor`. */
static bool ignore_finding(const char *out, const char *format, const char *list,
                           const char *rule, const char *tensor, int *rc)
{
    set_ignore(out, format, list);
    cJSON *j = verify_json(out, "--strict --no-values", rc);
    const cJSON *f;
    bool found = false;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "findings"))
        found |= strcmp(cJSON_GetObjectItem(f, "rule")->valuestring, rule) == 0 &&
                 strstr(cJSON_GetObjectItem(f, "message")->valuestring, tensor);
    cJSON_Delete(j);
    return found;
}

/* llm-compressor and ModelOpt releases list only Linear modules (ignore:
 * ["lm_head"], as RedHatAI's and nvidia's FP8 releases): an unlisted embedding
 * is no finding under any format, since no FP8 loader quantizes one. */
START_TEST(test_unlisted_embedding_is_no_finding)
{
    const char *formats[] = { "hf-fp8", "compressed-tensors", "modelopt" };
    const char *schemes[] = { "block --block 64x64", "channel", "channel" };
    char *dir = tu_tmpdir();
    char *model = make_named_model(dir, "m", IGN_CONFIG, IGN, 5);
    for (int k = 0; k < 3; k++) {
        char out[512], *opt;
        snprintf(out, sizeof out, "%s/%s", dir, formats[k]);
        ck_assert(asprintf(&opt, "--scheme %s --format %s", schemes[k],
                           formats[k]) > 0);
        int rc;
        char *w = quantize_warnings(opt, model, out, &rc);
        ck_assert_msg(rc == 0, "%s: %s", opt, w);
        free(w);
        ck_assert_msg(!ignore_finding(out, formats[k],
                                      "[\"lm_head\", \"model.layers.0.mlp.gate\"]",
                                      "not-in-ignore-list", "model.embed_tokens.weight", &rc),
                      "%s: an embedding missing from the ignore list is a finding", formats[k]);
        /* a Linear weight left out still is */
        ck_assert_msg(ignore_finding(out, formats[k], "[\"model.layers.0.mlp.gate\"]",
                                     "not-in-ignore-list", "lm_head.weight", &rc),
                      "%s: lm_head left out of the list is not reported", formats[k]);
        free(opt);
    }
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ModelOpt's exclusions are read where vLLM and SGLang read them: config.json's
 * quantization_config alone when there is one, and there its "ignore" alone
 * (vLLM model_loader/weight_utils.py get_quant_config, quantization/modelopt.py
 * ModelOptQuantConfigBase.from_config); hf_quant_config.json's exclude_modules
 * only when config.json declares nothing. A flat "exclude_modules" in
 * config.json (the nvfp4-modelopt copies and convert's ModelOpt output had one)
 * leaves lm_head quantized in those loaders: lm_head stays BF16 but is not
 * excluded, a finding even though hf_quant_config.json names it. */
START_TEST(test_modelopt_exclusions_read_where_the_loaders_read_them)
{
    /* IGN without the router (ModelOpt's substring match of "mlp.gate" names gate_proj) */
    const tu_tensor MO[] = { IGN[0], IGN[2], IGN[3], IGN[4] };
    char *dir = tu_tmpdir(), out[512], *path;
    char *model = make_named_model(dir, "m", IGN_CONFIG, MO, 4);
    snprintf(out, sizeof out, "%s/mo", dir);
    int rc;
    char *w = quantize_warnings("--scheme channel --format modelopt", model, out, &rc);
    ck_assert_int_eq(rc, 0);
    free(w);
    cJSON *j = verify_json(out, "--strict --no-values", &rc);
    cJSON_Delete(j);
    ck_assert_int_eq(rc, 0); /* as quantize wrote it: "ignore" in config.json */
    /* config.json's list renamed exclude_modules, hf_quant_config.json's kept */
    ck_assert(asprintf(&path, "%s/config.json", out) > 0);
    cJSON *root = read_json(path);
    cJSON *q = cJSON_GetObjectItem(root, "quantization_config");
    cJSON *list = cJSON_DetachItemFromObject(q, "ignore");
    ck_assert(list);
    cJSON_AddItemToObject(q, "exclude_modules", list);
    char *text = cJSON_Print(root);
    tu_spit(path, text, strlen(text));
    free(text);
    j = verify_json(out, "--strict --no-values", &rc);
    const cJSON *f;
    bool lm = false;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "findings"))
        lm |= strcmp(cJSON_GetObjectItem(f, "rule")->valuestring, "not-in-ignore-list") == 0 &&
              strstr(cJSON_GetObjectItem(f, "message")->valuestring, "lm_head.weight");
    cJSON_Delete(j);
    ck_assert_msg(lm && rc != 0, "a flat exclude_modules in config.json excluded lm_head");
    /* no quantization_config in config.json: hf_quant_config.json's list is read */
    cJSON_DeleteItemFromObject(root, "quantization_config");
    text = cJSON_Print(root);
    tu_spit(path, text, strlen(text));
    free(text);
    cJSON_Delete(root);
    j = verify_json(out, "--strict --no-values", &rc);
    lm = false;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "findings"))
        lm |= strstr(cJSON_GetObjectItem(f, "message")->valuestring, "lm_head.weight") != NULL;
    cJSON_Delete(j);
    ck_assert_msg(!lm && rc == 0, "hf_quant_config.json's exclude_modules not read (rc %d)", rc);
    free(path);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* Each format's ignore entries match as its loaders match them:
 * compressed-tensors (vLLM should_ignore_layer): whole names and "re:" from
 * the start, so ignore: ["lm_head", "re:.*mlp.gate$"] (Qwen3 MoE llm-compressor
 * releases) names the router and a bare "gate" does not; hf-fp8
 * (transformers should_convert_module): modules_to_not_convert: ["gate"]
 * names model.layers.0.mlp.gate by its end; modelopt (vLLM
 * is_layer_excluded): an entry names every module containing it, so "gate"
 * names the FP8 gate_proj too. */
START_TEST(test_ignore_entries_match_as_each_format_loaders_do)
{
    char *dir = tu_tmpdir(), ct[512], hf[512], mo[512];
    char *model = make_named_model(dir, "m", IGN_CONFIG, IGN, 5);
    snprintf(ct, sizeof ct, "%s/ct", dir);
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(mo, sizeof mo, "%s/mo", dir);
    int rc;
    char *w = quantize_warnings("--scheme channel --format compressed-tensors", model, ct, &rc);
    ck_assert_int_eq(rc, 0);
    free(w);
    w = quantize_warnings("--block 64x64", model, hf, &rc);
    ck_assert_int_eq(rc, 0);
    free(w);
    w = quantize_warnings("--scheme channel --format modelopt", model, mo, &rc);
    ck_assert_int_eq(rc, 0);
    free(w);
    const char *router = "model.layers.0.mlp.gate.weight";
    /* compressed-tensors */
    ck_assert(!ignore_finding(ct, "compressed-tensors", "[\"lm_head\", \"re:.*mlp.gate$\"]",
                              "not-in-ignore-list", router, &rc));
    ck_assert_int_eq(rc, 0);
    ck_assert(ignore_finding(ct, "compressed-tensors", "[\"lm_head\", \"gate\"]",
                             "not-in-ignore-list", router, &rc));
    /* hf-fp8 */
    ck_assert(!ignore_finding(hf, "hf-fp8", "[\"lm_head\", \"gate\"]", "not-in-ignore-list",
                              router, &rc));
    ck_assert_int_eq(rc, 0);
    ck_assert(ignore_finding(hf, "hf-fp8", "[\"lm_head\", \"mlp.gat\"]",
                             "not-in-ignore-list", router, &rc));
    /* hf-fp8: an entry transformers reads as a prefix regex reaches gate_proj */
    ck_assert(ignore_finding(hf, "hf-fp8", "[\"lm_head\", \"model.layers.0.mlp.gate\"]",
                             "ignored-but-quantized", "model.layers.0.mlp.gate_proj.weight",
                             &rc));
    /* modelopt */
    ck_assert(!ignore_finding(mo, "modelopt", "[\"lm_head\", \"*mlp.gate\"]",
                              "ignored-but-quantized", "gate_proj", &rc));
    ck_assert_int_eq(rc, 0);
    ck_assert(ignore_finding(mo, "modelopt", "[\"lm_head\", \"gate\"]", "ignored-but-quantized",
                             "model.layers.0.mlp.gate_proj.weight", &rc));
    ck_assert_int_eq(rc, 1);
    /* the router's whole name is a substring of its sibling gate_proj's */
    ck_assert(ignore_finding(mo, "modelopt", "[\"lm_head\", \"model.layers.0.mlp.gate\"]",
                             "ignored-but-quantized", "model.layers.0.mlp.gate_proj.weight", &rc));
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* Llama-4 (and gpt-oss) BF16 checkpoints store fused experts [E, in, out]:
 * feed_forward.experts.gate_up_proj [E, H, 2I] and down_proj [E, I, H]
 * (transformers Llama4TextExperts; vLLM's llama4.py chunks gate_up_proj on
 * its last axis and transposes each weight and its scale at load).  Square
 * blocks transpose with the weight: quantized, and verify passes; a channel
 * scale or an oblong block would run along the wrong axis: quantize keeps
 * them with a warning, and verify reports such FP8 experts (experts-in-out). */
static const char LLAMA4_CONFIG[] =
    "{\"model_type\": \"llama4_text\", \"hidden_size\": 64, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 2, \"intermediate_size\": 128, \"num_local_experts\": 2}\n";
static const char LLAMA4_CONFIG_NO_HIDDEN[] =
    "{\"model_type\": \"llama4_text\", \"num_local_experts\": 2}\n";
static const tu_tensor LLAMA4[] = {
    { "model.layers.0.feed_forward.experts.gate_up_proj", 3, { 2, 64, 256 } },
    { "model.layers.0.feed_forward.experts.down_proj", 3, { 2, 128, 64 } },
    { "model.layers.0.self_attn.o_proj.weight", 2, { 64, 64 } },
};

START_TEST(test_llama4_experts_in_out_quantize_square_blocks_only)
{
    char *dir = tu_tmpdir(), sq[512], ch[512], ob[512], bad[512];
    char *model = make_named_model(dir, "llama4", LLAMA4_CONFIG, LLAMA4, 3);
    snprintf(sq, sizeof sq, "%s/square", dir);
    snprintf(ch, sizeof ch, "%s/channel", dir);
    snprintf(ob, sizeof ob, "%s/oblong", dir);
    int rc;
    char *w;
    cJSON *j;
    /* 64x64: gate_up_proj's halves are its last 2 x 128 columns, not its 64 rows */
    const char *square[] = { "--block 32x32", "--block 64x64" };
    for (int k = 0; k < 2; k++) {
        snprintf(sq, sizeof sq, "%s/square%d", dir, k);
        w = quantize_warnings(square[k], model, sq, &rc);
        ck_assert_int_eq(rc, 0);
        ck_assert_msg(!*w, "quantize %s: %s", square[k], w);
        free(w);
        j = verify_json(sq, "--strict --no-values", &rc);
        ck_assert_msg(rc == 0, "verify --strict of %s: %d errors", square[k],
                      cJSON_GetObjectItem(j, "errors")->valueint);
        ck_assert_int_eq(cJSON_GetObjectItem(j, "fp8_weights")->valueint, 3);
        cJSON_Delete(j);
    }
    const char *opts[] = { "--scheme channel --format compressed-tensors", "--block 32x16" };
    const char *outs[] = { ch, ob };
    for (int k = 0; k < 2; k++) {
        w = quantize_warnings(opts[k], model, outs[k], &rc);
        ck_assert_int_eq(rc, 0);
        ck_assert_msg(strstr(w, "model.layers.0.feed_forward.experts.gate_up_proj") &&
                          strstr(w, "model.layers.0.feed_forward.experts.down_proj") &&
                          strstr(w, "[E, in, out]"),
                      "quantize %s: %s", opts[k], w);
        free(w);
    }
    /* an FP8 checkpoint with channel-scaled [E, in, out] experts: quantized
     * without the hidden size, which is then declared */
    char *m2 = make_named_model(dir, "llama4-nohidden", LLAMA4_CONFIG_NO_HIDDEN, LLAMA4, 3);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    w = quantize_warnings("--scheme channel --format compressed-tensors", m2, bad, &rc);
    ck_assert_int_eq(rc, 0);
    free(w);
    char *path;
    ck_assert(asprintf(&path, "%s/config.json", bad) > 0);
    cJSON *config = read_json(path);
    cJSON_AddNumberToObject(config, "hidden_size", 64);
    char *text = cJSON_Print(config);
    tu_spit(path, text, strlen(text));
    free(text);
    cJSON_Delete(config);
    free(path);
    j = verify_json(bad, "--no-values", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "experts-in-out");
    ck_assert(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring,
                          "model.layers.0.feed_forward.experts."));
    ck_assert_int_eq(cJSON_GetObjectItem(j, "errors")->valueint, 2);
    cJSON_Delete(j);
    free(m2);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* A fused gate_up_proj of 2 x 160 rows: 128-row blocks span its halves,
 * which vLLM splits (quantize warns, verify fails); 32-row blocks do not. */
START_TEST(test_blocks_spanning_fused_gate_up_halves)
{
    static const char config[] =
        "{\"model_type\": \"phi3\", \"hidden_size\": 128, \"num_attention_heads\": 2, "
        "\"num_key_value_heads\": 2, \"intermediate_size\": 160}\n";
    static const tu_tensor t[] = {
        { "model.layers.0.mlp.gate_up_proj.weight", 2, { 320, 128 } },
        { "model.layers.0.mlp.down_proj.weight", 2, { 128, 160 } },
    };
    char *dir = tu_tmpdir(), out[512], out2[512];
    char *model = make_named_model(dir, "phi", config, t, 2);
    snprintf(out, sizeof out, "%s/fp8", dir);
    snprintf(out2, sizeof out2, "%s/fp8-32", dir);
    int rc;
    char *w = quantize_warnings("", model, out, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(w, "gate_up_proj") && strstr(w, "span the gate and up halves"), "%s", w);
    free(w);
    cJSON *j = verify_json(out, "", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "fused-block");
    ck_assert(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring, "gate_up_proj"));
    cJSON_Delete(j);
    w = quantize_warnings("--block 32x32", model, out2, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(w, "");
    free(w);
    j = verify_json(out2, "--strict", &rc);
    ck_assert_int_eq(rc, 0);
    cJSON_Delete(j);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ModelOpt has no transformers quantizer: a note by default (vLLM and
 * SGLang are the loaders required), an error with --loader transformers. */
START_TEST(test_a_loader_not_required_is_a_note)
{
    char *dir = tu_tmpdir(),
         *out = quantize_into(dir, "--scheme channel --format modelopt", "testdata/llama-tiny");
    int rc;
    cJSON *j = verify_json(out, "--strict", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "notes")->valueint, 1);
    const cJSON *f = verify_finding(j, "loader-format"), *l;
    ck_assert(f && strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "note") == 0);
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(j, "loaders"))
    {
        bool hf = strcmp(cJSON_GetObjectItem(l, "name")->valuestring, "transformers") == 0;
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(l, "loads")) == !hf);
        ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(l, "required")) == !hf);
    }
    cJSON_Delete(j);
    j = verify_json(out, "--loader transformers", &rc);
    ck_assert_int_eq(rc, 1);
    f = verify_finding(j, "loader-format");
    ck_assert(f && strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "error") == 0);
    cJSON_Delete(j);
    char *args;
    ck_assert(asprintf(&args, "verify --loader tensorrt '%s'", out) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 2);
    free(args);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* transformers dequantizes whole blocks only: llama-tiny's down_proj has
 * 544 columns, 8.5 blocks of 64 (vLLM takes the partial edge block). */
START_TEST(test_partial_blocks_stop_transformers_only)
{
    char *dir = tu_tmpdir(), *out = quantize_into(dir, "--block 32x64", "testdata/llama-tiny");
    int rc;
    cJSON *j = verify_json(out, "--strict", &rc);
    ck_assert_int_eq(rc, 0);
    const cJSON *f = verify_finding(j, "partial-blocks");
    ck_assert(f && strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "note") == 0);
    ck_assert(strstr(cJSON_GetObjectItem(f, "message")->valuestring, "down_proj"));
    cJSON_Delete(j);
    j = verify_json(out, "--loader transformers", &rc);
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* compressed-tensors' MX decompression gives bf16 weights, which a float32
 * model's forward rejects in transformers. */
START_TEST(test_mx_on_a_float32_model_stops_transformers)
{
    char *dir = tu_tmpdir(), *cmd, *in;
    ck_assert(asprintf(&in, "%s/in", dir) > 0);
    ck_assert(asprintf(&cmd, "cp -r testdata/llama-tiny %s && sed -i 's/\"bfloat16\"/\"float32\"/' "
                             "%s/config.json",
                       in, in) > 0);
    ck_assert(system(cmd) == 0);
    char *out = quantize_into(dir, "--scheme mxfp8 --format compressed-tensors", in);
    int rc;
    cJSON *j = verify_json(out, "", &rc);
    ck_assert_int_eq(rc, 0);
    const cJSON *f = verify_finding(j, "loader-dtype");
    ck_assert(f && strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "note") == 0);
    cJSON_Delete(j);
    j = verify_json(out, "--loader transformers", &rc);
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    free(out);
    free(cmd);
    free(in);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_no_fp8_weights_is_an_error)
{
    int rc;
    cJSON *j = verify_json("testdata/llama-tiny", "", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert(verify_finding(j, "no-fp8-weights") != NULL);
    cJSON_Delete(j);
}
END_TEST

/* compressed-tensors per-tensor MoE experts with token activations: vLLM's
 * CompressedTensorsW8A8Fp8MoEMethod asserts tensor activations. */
START_TEST(test_tensor_experts_need_tensor_activations)
{
    char *dir = tu_tmpdir(), *out = quantize_into(dir, "--scheme tensor --format compressed-tensors",
                                                  "testdata/deepseek-moe-tiny");
    int rc;
    cJSON *j = verify_json(out, "", &rc);
    ck_assert(verify_finding(j, "moe-activations") == NULL);
    cJSON_Delete(j);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", out);
    char *text = tu_slurp(path, NULL);
    cJSON *config = cJSON_Parse(text);
    cJSON *a = cJSON_GetObjectItem(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(config, "quantization_config"), "config_groups"),
            "group_0"),
        "input_activations");
    ck_assert(a != NULL);
    cJSON_ReplaceItemInObject(a, "strategy", cJSON_CreateString("token"));
    char *edited = cJSON_Print(config);
    tu_spit(path, edited, strlen(edited));
    j = verify_json(out, "", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "moe-activations");
    ck_assert(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring, "AssertionError"));
    cJSON_Delete(j);
    free(edited);
    cJSON_Delete(config);
    free(text);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- --against */

START_TEST(test_against_the_source_is_clean_and_reproduced)
{
    /* 32x32 blocks: llama-tiny's intermediate size, 544, is no multiple of 128 */
    static const char *const schemes[] = { "--scheme block --block 32x32", "--scheme channel",
                                           "--scheme tensor", "--scheme mxfp8" };
    for (size_t k = 0; k < sizeof schemes / sizeof schemes[0]; k++) {
        char *dir = tu_tmpdir(), *args = quantize_into(dir, schemes[k], "testdata/llama-tiny");
        int rc;
        cJSON *j = verify_json(args, "--against testdata/llama-tiny", &rc);
        ck_assert_msg(rc == 0, "%s: %d errors", schemes[k], cJSON_GetObjectItem(j, "errors")->valueint);
        const cJSON *r = cJSON_GetObjectItem(j, "requantized");
        ck_assert_msg(cJSON_IsObject(r), "%s: not re-quantized", schemes[k]);
        ck_assert_int_eq(cJSON_GetObjectItem(r, "fp8_weights")->valueint, 14);
        ck_assert_int_eq(cJSON_GetObjectItem(r, "reproduced")->valueint, 14);
        cJSON_Delete(j);
        free(args);
        tu_tmpdir_free(dir);
    }
}
END_TEST

/* A deterministic xorshift stream. */
static uint32_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 16);
}

/* The fast bound (fp32 first, double where fp32 is unsure) counts what the
 * element-by-element double reference counts: sources of each dtype near
 * their bound on both sides, at 448..480 times the scale, NaN, infinite and
 * zero; scales from subnormal to 3e38; codes of every kind; odd lengths. */
START_TEST(test_fast_bound_counts_what_the_reference_counts)
{
    static const fp8_dtype dtypes[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };
    enum { N = 1000 };
    static const float scales[] = { 1.0f, 0x1p-7f, 3.1e-5f, 0x1p-140f, 0x1p-149f, 2e-38f, 3e38f,
                                    1e30f, 0.0117f };
    float x[N], y[N], s[N];
    uint8_t q[N];
    uint16_t h[N];
    uint64_t state = 0x9E3779B97F4A7C15ull, seen[2] = { 0, 0 };
    for (int round = 0; round < 200; round++) {
        fp8_dtype dt = dtypes[round % 3];
        for (int i = 0; i < N; i++) {
            uint32_t r = next_random(&state);
            q[i] = (uint8_t)r;
            s[i] = scales[(r >> 8) % (sizeof scales / sizeof scales[0])];
            if (round % 7 == 0) /* one scale for the whole span, as a group has */
                s[i] = scales[round % (sizeof scales / sizeof scales[0])];
            y[i] = fp8_e4m3_to_f32(q[i]) * s[i];
            /* around the bound: a relative error of about 1/16, or about 448..480 scales */
            float rel = ((float)(r >> 16 & 0xFF) - 128) / 1024.0f;
            switch ((r >> 24) % 8) {
            case 0: x[i] = y[i] * (1 + 1.0f / 16 + rel / 64); break;
            case 1: x[i] = y[i] * (1 - 1.0f / 16 + rel / 64); break;
            case 2: x[i] = s[i] * (456 + rel * 64) * ((r & 1) ? -1 : 1); break;
            case 3: x[i] = y[i] + s[i] / 1024 * (1 + rel / 8); break;
            case 4: x[i] = (r & 2) ? NAN : (r & 1) ? INFINITY : 0; break;
            default: x[i] = y[i] * (1 + rel / 8); break;
            }
            if (dt == FP8_DTYPE_BF16)
                h[i] = fp8_f32_to_bf16(x[i]);
            else if (dt == FP8_DTYPE_F16)
                h[i] = fp8_f32_to_f16(x[i]);
        }
        const void *src = dt == FP8_DTYPE_F32 ? (const void *)x : (const void *)h;
        for (int n = round % 40; n <= N; n += n < 80 ? 1 : 307) {
            for (int given = 0; given < 2; given++) {
                uint64_t fast[2] = { 0, 0 }, ref[2] = { 0, 0 };
                const uint8_t *codes = given ? NULL : q;
                fp8_bound_span(dt, src, codes, y, s, (uint64_t)n, fast);
                fp8_bound_span_ref(dt, src, codes, y, s, (uint64_t)n, ref);
                ck_assert_msg(fast[0] == ref[0] && fast[1] == ref[1],
                              "dtype %d, n %d, y %s: clipped %llu vs %llu, outside %llu vs %llu",
                              (int)dt, n, given ? "given" : "from codes",
                              (unsigned long long)fast[0], (unsigned long long)ref[0],
                              (unsigned long long)fast[1], (unsigned long long)ref[1]);
                seen[0] += ref[0];
                seen[1] += ref[1];
            }
            /* over codes with the quality sums (verify --against): the same
             * counts, and the sums of the reference over the decoded values */
            uint64_t fast[2] = { 0, 0 }, ref[2] = { 0, 0 };
            diff_lanes lanes = { { 0 }, { 0 }, { 0 } };
            fp8_quality got = { 0 }, want = { 0 };
            float xf[N];
            for (int i = 0; i < n; i++)
                xf[i] = dt == FP8_DTYPE_F32 ? x[i]
                        : dt == FP8_DTYPE_BF16 ? fp8_bf16_to_f32(h[i]) : fp8_f16_to_f32(h[i]);
            fp8_bound_sums_span(dt, src, q, s, (uint64_t)n, fast, &lanes);
            diff_lanes_end(&lanes, (uint64_t)n, &got);
            fp8_bound_span_ref(dt, src, q, y, s, (uint64_t)n, ref);
            diff_quality_values_ref(xf, y, (uint64_t)n, &want);
            ck_assert(fast[0] == ref[0] && fast[1] == ref[1]);
            double g[3] = { got.ref_sq, got.out_sq, got.err_sq };
            double e[3] = { want.ref_sq, want.out_sq, want.err_sq };
            for (int k = 0; k < 3; k++)
                ck_assert_msg(g[k] == e[k] || (isnan(g[k]) && isnan(e[k])),
                              "dtype %d, n %d: sum %d %a vs %a", (int)dt, n, k, g[k], e[k]);
            ck_assert_uint_eq(got.elements, want.elements);
        }
    }
    ck_assert(seen[0] > 0 && seen[1] > 0); /* both counts were exercised */
}
END_TEST

/* verify's packed code statistics (fp8_nibble_stats, vectorized) count
 * what decoding each nibble counts: codes at +-max_finite or most_negative,
 * and whole groups of `per` bytes of zero codes (E2M1's -0 included), for
 * E2M1 and INT4, group sizes of a byte to 64, runs of zeros planted. */
START_TEST(test_nibble_stats_count_what_decoding_counts)
{
    static const fp8_scheme schemes[] = { FP8_SCHEME_NVFP4, FP8_SCHEME_INT4 };
    enum { N = 4096 };
    static uint8_t p[N];
    uint64_t state = 0x2545F4914F6CDD1Dull;
    for (size_t k = 0; k < sizeof schemes / sizeof *schemes; k++) {
        const fp8_elem_traits *e = fp8_elem_get(fp8_scheme_get(schemes[k])->elem);
        fp8_nibble_rule r;
        fp8_nibble_rule_init(&r, e);
        uint8_t zc[16];
        unsigned nz = 0;
        for (unsigned c = 0; c < 16; c++)
            if (e->decode((uint8_t)c) == 0)
                zc[nz++] = (uint8_t)c; /* E2M1: 0 and -0 (8); INT4: 8, its 0 */
        ck_assert(nz > 0);
        for (int round = 0; round < 40; round++) {
            for (size_t i = 0; i < N; i++) {
                uint32_t x = next_random(&state);
                /* odd rounds: runs of zero codes in a third of the 64-byte spans */
                p[i] = round % 2 && (i / 64) % 3 == 0
                           ? (uint8_t)(zc[x % nz] | zc[(x >> 8) % nz] << 4)
                           : (uint8_t)x;
            }
            static const uint64_t pers[] = { 1, 8, 16, 64 };
            for (size_t q = 0; q < 4; q++) {
                uint64_t per = pers[q], n = N - (uint64_t)round * 3, top = 0, zeros = 0;
                fp8_nibble_stats(&r, p, n, per, &top, &zeros);
                uint64_t want_top = 0, want_zeros = 0;
                for (uint64_t g = 0; g + per <= n; g += per) {
                    bool all = true;
                    for (uint64_t i = g; i < g + per; i++)
                        all &= e->decode(p[i] & 15) == 0 && e->decode(p[i] >> 4) == 0;
                    want_zeros += all;
                }
                for (uint64_t i = 0; i < n; i++)
                    for (int h = 0; h < 2; h++) {
                        float v = e->decode(h ? p[i] >> 4 : p[i] & 15);
                        want_top += v == e->max_finite || v == -e->max_finite ||
                                    (e->most_negative != 0 && v == e->most_negative);
                    }
                ck_assert_msg(top == want_top && zeros == want_zeros,
                              "scheme %d, per %llu: top %llu vs %llu, zero groups %llu vs %llu",
                              (int)schemes[k], (unsigned long long)per, (unsigned long long)top,
                              (unsigned long long)want_top, (unsigned long long)zeros,
                              (unsigned long long)want_zeros);
                ck_assert(round % 2 == 0 || per > 16 || want_zeros > 0); /* planted ones seen */
            }
        }
    }
}
END_TEST

/* Sets the first `count` bytes (all, for SIZE_MAX) of tensor `name` in the
 * shard file at `path` to `byte`, in place. */
static void overwrite_tensor(const char *path, const char *name, int byte, size_t count)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f;
    ck_assert(fp8_file_open(ctx, path, &f) == FP8_OK);
    const fp8_tensor_info *t = fp8_file_find(f, name);
    ck_assert(t != NULL);
    long at = (long)(8 + fp8_file_header_size(f) + t->begin);
    size_t len = (size_t)fp8_tensor_nbytes(t) < count ? (size_t)fp8_tensor_nbytes(t) : count;
    fp8_file_close(f);
    fp8_ctx_free(ctx);
    FILE *fp = fopen(path, "r+b");
    ck_assert(fp && fseek(fp, at, SEEK_SET) == 0);
    for (size_t i = 0; i < len; i++)
        fputc(byte, fp);
    ck_assert(fclose(fp) == 0);
}

/* verify --against of quantize's INT4 output (group 32, not the scheme's default 128): every
 * packed weight re-quantizes byte for byte, with no finding (INT4 has no per-element bound:
 * GPTQ and AWQ choose other codes on purpose); a changed code is the first weight that does
 * not. Before the fix it read one scale byte a 128-run and called E2M1's bound (a crash). */
START_TEST(test_int4_against_its_source)
{
    char *dir = tu_tmpdir(), *out, *text, *args, shard[600];
    const char *w = "model.layers.1.mlp.experts.0.down_proj.weight_packed";
    ck_assert(asprintf(&out, "%s/int4", dir) > 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "quantize -q --scheme int4 --group 32 "
                                      "testdata/deepseek-moe-tiny '%s'", out), 0);
    ck_assert(asprintf(&args, "verify --against testdata/deepseek-moe-tiny '%s'", out) > 0);
    int all = 0, same = -1;
    for (int pass = 0; pass < 2; pass++) {
        ck_assert_int_eq(tu_run(args, &text, NULL), 0);
        const char *r = strstr(text, "reproduces ");
        int n, k;
        ck_assert_msg(r && sscanf(r, "reproduces %d of %d", &k, &n) == 2, "%s", text);
        ck_assert_msg(strstr(text, "0 errors, 0 warnings"), "%s", text);
        if (pass == 0) {
            all = n;
            ck_assert_msg(k == n && n > 0, "%s", text);
            fp8_ctx *ctx = fp8_ctx_create();
            fp8_checkpoint *ck;
            size_t s;
            ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
            ck_assert(fp8_checkpoint_find(ck, w, &s) != NULL);
            snprintf(shard, sizeof shard, "%s/%s", out, fp8_checkpoint_shard_name(ck, s));
            fp8_checkpoint_close(ck);
            fp8_ctx_free(ctx);
            overwrite_tensor(shard, w, 0x88, 4); /* eight codes of 0 become 0x88's */
        } else {
            same = k;
            ck_assert_int_eq(n, all);
            ck_assert_msg(strstr(r, w), "%s", text);
        }
        free(text);
    }
    ck_assert_int_eq(same, all - 1);
    free(args);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_rounded_scales_pass_the_strictest_check)
{
    /* compressed-tensors stores channel scales rounded to nearest bf16/f16,
     * which can fall a little below amax / 448: the largest elements then
     * round to 448, as they would with any scale, and are not clipped */
    char *dir = tu_tmpdir(), *args = quantize_into(dir, "--scheme channel", "testdata/quant-edge");
    int rc;
    cJSON *j = verify_json(args, "--strict --against testdata/quant-edge", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(verify_finding(j, "saturation") == NULL);
    cJSON_Delete(j);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_against_finds_saturation_from_floor_scales)
{
    /* OCP floor rounding of MX scales maps a block's amax to [256, 512) and
     * saturates what lies beyond 464 * scale */
    char *dir = tu_tmpdir(),
         *args = quantize_into(dir, "--scheme mxfp8 --mx-rounding floor", "testdata/quant-edge");
    int rc;
    cJSON *j = verify_json(args, "--against testdata/quant-edge", &rc);
    ck_assert_int_eq(rc, 0);
    const cJSON *f = verify_finding(j, "saturation");
    ck_assert(f && strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "warning") == 0);
    ck_assert(strstr(cJSON_GetObjectItem(f, "message")->valuestring, "clipped"));
    cJSON_Delete(j);
    j = verify_json(args, "--strict --against testdata/quant-edge", &rc);
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_against_a_changed_source_finds_the_tensor)
{
    /* the source with one weight zeroed: its FP8 values are far from 0 */
    char *dir = tu_tmpdir(), *args, path[512];
    free(quantize_into(dir, "", "testdata/llama-tiny"));
    ck_assert(asprintf(&args, "cp -r testdata/llama-tiny %s/src", dir) > 0);
    ck_assert(system(args) == 0);
    free(args);
    snprintf(path, sizeof path, "%s/src/model-00001-of-00002.safetensors", dir);
    overwrite_tensor(path, "model.layers.0.mlp.up_proj.weight", 0, SIZE_MAX);
    char fp8[512], src[512];
    snprintf(fp8, sizeof fp8, "%s/fp8", dir);
    snprintf(src, sizeof src, "--against %s/src", dir);
    int rc;
    cJSON *j = verify_json(fp8, src, &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *b = verify_finding(j, "against-bound");
    ck_assert(b && strstr(cJSON_GetObjectItem(b, "message")->valuestring,
                          "model.layers.0.mlp.up_proj.weight"));
    const cJSON *r = cJSON_GetObjectItem(j, "requantized");
    ck_assert_int_eq(cJSON_GetObjectItem(r, "reproduced")->valueint, 13);
    ck_assert_str_eq(cJSON_GetObjectItem(r, "first_difference")->valuestring,
                     "model.layers.0.mlp.up_proj.weight");
    cJSON_Delete(j);
    /* a kept tensor changed: the norm is not quantized, so it must be copied */
    snprintf(path, sizeof path, "%s/src/model-00002-of-00002.safetensors", dir);
    overwrite_tensor(path, "model.norm.weight", 0x55, 1);
    j = verify_json(fp8, src, &rc);
    const cJSON *c = verify_finding(j, "against-copy");
    ck_assert(c && strstr(cJSON_GetObjectItem(c, "message")->valuestring, "model.norm.weight"));
    cJSON_Delete(j);
    /* another model entirely: the tensor sets differ */
    j = verify_json(fp8, "--against testdata/quant-edge", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert(verify_finding(j, "against-set") != NULL);
    cJSON_Delete(j);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_against_report_is_the_same_for_any_thread_count)
{
    /* 20480 columns: at -j 64 a channel job takes a sixteenth of the rows it
     * takes at -j 1 (fp8_jobs_chunk); a block job is a block row of 5 MiB,
     * so fewer workers run than asked (FP8_JOBS_MEMORY) */
    char *dir = tu_tmpdir(), *one = NULL, sub[512];
    char *model = make_model(dir, "m", 300, 20480, -1, 0);
    char *src = make_model(dir, "src", 300, 20480, 150 * 20480 + 7, 0x4700); /* 32768 */
    snprintf(sub, sizeof sub, "%s/%d", dir, _i);
    ck_assert(mkdir(sub, 0755) == 0);
    char *fp8 = quantize_into(sub, _i ? "--scheme channel" : "", model);
    const int threads[] = { 1, 2, 64 };
    for (int k = 0; k < 3; k++) {
        char *args, *out;
        ck_assert(asprintf(&args, "verify --json -j %d --against '%s' '%s'", threads[k], src,
                           fp8) > 0);
        ck_assert_int_eq(tu_run(args, &out, NULL), 1);
        ck_assert_msg(strstr(out, "model.layers.0.mlp.down_proj.weight"), "%s", out);
        if (!one)
            one = out;
        else {
            ck_assert_msg(strcmp(one, out) == 0, "-j %d:\n%s\n-j 1:\n%s", threads[k], out, one);
            free(out);
        }
        free(args);
    }
    free(one);
    free(src);
    free(fp8);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* transformers holds compressed-tensors' weight_scale in the model's dtype:
 * F32 scales that bfloat16 cannot hold (convert's exact relabelling of
 * ModelOpt's or hf-fp8's F32 scales) are rounded there, and it computes other weights
 * (make check-loaders saw 1 ulp); quantize writes them in bfloat16. */
static bool transformers_loads(const cJSON *report)
{
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(report, "loaders"))
        if (strcmp(cJSON_GetObjectItem(l, "name")->valuestring, "transformers") == 0)
            return cJSON_IsTrue(cJSON_GetObjectItem(l, "loads"));
    ck_abort_msg("no transformers in the report");
    return false;
}

START_TEST(test_ct_f32_scales_the_model_dtype_cannot_hold_are_a_transformers_finding)
{
    char *dir = tu_tmpdir(), *args, ct[512];
    char *fp8 = quantize_into(dir, "--scheme channel --format modelopt", "testdata/llama-tiny");
    snprintf(ct, sizeof ct, "%s/ct", dir);
    ck_assert(asprintf(&args, "convert -q --format compressed-tensors '%s' '%s'", fp8, ct) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    int rc;
    cJSON *j = verify_json(ct, "", &rc);
    ck_assert_int_eq(rc, 0);
    const cJSON *f = verify_finding(j, "scale-dtype");
    ck_assert(f && strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, "note") == 0);
    ck_assert(strstr(cJSON_GetObjectItem(f, "message")->valuestring, "bfloat16 cannot hold"));
    ck_assert(!transformers_loads(j));
    cJSON_Delete(j);
    j = verify_json(ct, "--loader transformers", &rc);
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    /* quantize's own compressed-tensors scales are bfloat16: nothing to round */
    char *direct = quantize_into(dir, "--scheme channel --format compressed-tensors --force",
                                 "testdata/llama-tiny");
    j = verify_json(direct, "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(!verify_finding(j, "scale-dtype") && transformers_loads(j));
    cJSON_Delete(j);
    free(direct);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- release families */

/* The official Qwen3 FP8 releases: hf-fp8 128x128 blocks whose
 * weight_scale_inv is BF16 (Qwen3-*-FP8) or F16 (Qwen3-4B-Instruct-2507-FP8).
 * vLLM and SGLang copy_ them into F32 scale parameters (fp8_utils.py,
 * create_fp8_scale_parameter; parameter.py), transformers' FP8Linear holds
 * an F32 weight_scale_inv (integrations/finegrained_fp8.py). */
static const char QWEN3_FP8_CONFIG[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"hidden_size\": 256, "
    "\"num_attention_heads\": 2, \"num_key_value_heads\": 2, \"head_dim\": 128, "
    "\"intermediate_size\": 256, \"torch_dtype\": \"bfloat16\", \"quantization_config\": "
    "{\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", "
    "\"weight_block_size\": [128, 128]}}\n";

static char *qwen3_like(const char *dir, const char *name, fp8_dtype q_scale, fp8_dtype down_scale)
{
    const tu_typed_tensor t[] = {
        { "lm_head.weight", FP8_DTYPE_BF16, 2, { 64, 256 } },
        { "model.embed_tokens.weight", FP8_DTYPE_BF16, 2, { 64, 256 } },
        { "model.layers.0.mlp.down_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.mlp.down_proj.weight_scale_inv", down_scale, 2, { 2, 2 } },
        { "model.layers.0.self_attn.q_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.self_attn.q_proj.weight_scale_inv", q_scale, 2, { 2, 2 } },
    };
    return make_typed_model(dir, name, QWEN3_FP8_CONFIG, t, sizeof t / sizeof *t);
}

START_TEST(test_qwen3_bf16_and_f16_block_scales_load)
{
    char *dir = tu_tmpdir();
    char *bf = qwen3_like(dir, "qwen3-bf16", FP8_DTYPE_BF16, FP8_DTYPE_F16);
    char *f32 = qwen3_like(dir, "qwen3-f32", FP8_DTYPE_F32, FP8_DTYPE_F32);
    char *u8 = qwen3_like(dir, "qwen3-u8", FP8_DTYPE_U8, FP8_DTYPE_BF16);
    int rc;
    cJSON *j = verify_json(bf, "--strict", &rc);
    ck_assert_msg(rc == 0 && !verify_finding(j, "scale-dtype"), "verify exit %d", rc);
    ck_assert(transformers_loads(j));
    cJSON_Delete(j);
    /* U8 bytes are no float scale: copy_ would take 0x78 as the number 120 */
    j = verify_json(u8, "", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "scale-dtype");
    ck_assert(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring,
                          "q_proj.weight_scale_inv: dtype U8"));
    cJSON_Delete(j);
    /* every reader takes q * (float)scale: the same values as F32 scales */
    ck_assert_int_eq(tu_run_fmt(NULL, "inspect -q '%s'", bf), 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "diff -q --dequant '%s' '%s'", bf, f32), 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q '%s' '%s/x-bf'", bf, dir), 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q '%s' '%s/x-f32'", f32, dir), 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "diff -q '%s/x-bf' '%s/x-f32'", dir, dir), 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "convert -q --format compressed-tensors '%s' '%s/ct'", bf,
                                dir), 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "diff -q --dequant '%s/ct' '%s'", dir, f32), 0);
    free(bf);
    free(f32);
    free(u8);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_mistral_per_tensor_scale_inv_loads)
{
    char *dir = tu_tmpdir();
    for (int rank = 0; rank <= 1; rank++) {
        char name[32];
        snprintf(name, sizeof name, "ministral-%d", rank);
        char *m = make_mistral3_fp8(dir, name, rank);
        int rc;
        cJSON *j = verify_json(m, "--strict", &rc);
        char *text = cJSON_Print(j);
        ck_assert_msg(rc == 0, "rank %d: %s", rank, text);
        ck_assert(!verify_finding(j, "scale-name") && transformers_loads(j));
        free(text);
        cJSON_Delete(j);
        free(m);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* Llama-4 and Mistral-3 / Ministral-3 configs nest the text model's
 * dimensions under text_config, where vLLM reads them (get_hf_text_config
 * in vllm/transformers_utils/config.py); without them anywhere, verify says
 * so rather than "none". */
START_TEST(test_tp_reads_text_config)
{
    char *dir = tu_tmpdir(), *out, sizes[256];
    char *m = make_mistral3_fp8(dir, "ministral", 0);
    int rc;
    cJSON *j = verify_json(m, "--tp 2", &rc);
    ck_assert_int_eq(rc, 0);
    sizes_text(j, sizes, sizeof sizes);
    ck_assert_str_eq(sizes, "1 2"); /* 2 attention heads */
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "tp_dimensions_found")));
    cJSON_Delete(j);
    j = verify_json(m, "--tp 4", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert(verify_finding(j, "tp"));
    cJSON_Delete(j);
    /* the same checkpoint with no dimensions at all */
    char *cmd;
    ck_assert(asprintf(&cmd, "sed -i 's/\"hidden_size\": 256, //' '%s/config.json'", m) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    j = verify_json(m, "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(!cJSON_IsTrue(cJSON_GetObjectItem(j, "tp_dimensions_found")));
    cJSON_Delete(j);
    ck_assert(asprintf(&cmd, "verify '%s'", m) > 0);
    ck_assert_int_eq(tu_run(cmd, &out, NULL), 0);
    ck_assert_msg(strstr(out, "dimensions were not found") && !strstr(out, "): none"), "%s", out);
    free(out);
    free(cmd);
    j = verify_json(m, "--tp 2", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *f = verify_finding(j, "tp");
    ck_assert(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring, "not found"));
    cJSON_Delete(j);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

/* ModelOpt 0.29 and earlier declared the quantization only in
 * hf_quant_config.json; vLLM reads that file when config.json has no
 * quantization_config (vllm/transformers_utils/config.py; modelopt.py
 * ModelOptFp8Config.from_config takes its "quantization" form). */
/* An MXFP8 weight whose rows are not whole runs of 32 (33 columns; a fuzz
 * finding): the values pass counts the all-zero groups of the whole runs
 * only, within the scale tensor's groups (the ASan build read past them). */
START_TEST(test_mxfp8_row_not_whole_runs)
{
    static uint8_t w[32 * 33], s[32];
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (uint8_t)(0x38 + i % 8);
    memset(s, 127, sizeof s);
    const t_spec ts[] = {
        { "model.layers.0.mlp.down_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 32, 33 }, w },
        { "model.layers.0.mlp.down_proj.weight_scale", FP8_DTYPE_U8, 2, { 32, 1 }, s },
    };
    char *dir = tu_tmpdir();
    char *model = write_ck(dir, "m", ts, 2,
                           "{\"torch_dtype\": \"bfloat16\", \"quantization_config\": "
                           "{\"quant_method\": \"modelopt\", \"quant_algo\": \"MXFP8\"}}");
    int rc;
    cJSON *j = verify_json(model, "", &rc);
    ck_assert_msg(rc == 0 || rc == 1, "exit %d", rc);
    cJSON_Delete(j);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_modelopt_side_file_declares_the_layout)
{
    static const char config[] =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
        "\"hidden_size\": 256, \"num_attention_heads\": 2, \"num_key_value_heads\": 2, "
        "\"head_dim\": 128, \"intermediate_size\": 256, \"torch_dtype\": \"bfloat16\"}\n";
    static const char side[] =
        "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.29.0\"}, \"quantization\": "
        "{\"quant_algo\": \"FP8\", \"kv_cache_quant_algo\": null, \"exclude_modules\": "
        "[\"lm_head\"]}}\n";
    const tu_typed_tensor t[] = {
        { "lm_head.weight", FP8_DTYPE_BF16, 2, { 64, 256 } },
        { "model.layers.0.mlp.down_proj.input_scale", FP8_DTYPE_F32, 0, { 0 } },
        { "model.layers.0.mlp.down_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.mlp.down_proj.weight_scale", FP8_DTYPE_F32, 0, { 0 } },
        { "model.layers.0.self_attn.q_proj.input_scale", FP8_DTYPE_F32, 0, { 0 } },
        { "model.layers.0.self_attn.q_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.self_attn.q_proj.weight_scale", FP8_DTYPE_F32, 0, { 0 } },
    };
    char *dir = tu_tmpdir(), *path, *err = NULL;
    char *m = make_typed_model(dir, "modelopt-0.29", config, t, sizeof t / sizeof *t);
    ck_assert(asprintf(&path, "%s/hf_quant_config.json", m) > 0);
    tu_spit(path, side, strlen(side));
    free(path);
    int rc;
    cJSON *j = verify_json(m, "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(!verify_finding(j, "no-quant-config"));
    ck_assert(strstr(cJSON_GetObjectItem(j, "format")->valuestring, "modelopt, scheme tensor"));
    cJSON_Delete(j);
    j = verify_json(m, "--tp 2", &rc);
    ck_assert_int_eq(rc, 0);
    cJSON_Delete(j);
    j = verify_json(m, "--format modelopt --scheme tensor", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(!verify_finding(j, "config-assumed"));
    cJSON_Delete(j);
    ck_assert_int_eq(tu_run_fmt(&err, "verify --format hf-fp8 '%s'", m), 2);
    ck_assert_msg(strstr(err, "hf_quant_config.json declares its own"), "%s", err);
    free(err);
    /* convert keeps the per-tensor scheme and the format: ModelOpt FP8 is
     * written with the input's static input_scale (fp8conv(1), convert,
     * ACTIVATION SCALES), every code copied */
    ck_assert_int_eq(tu_run_fmt(NULL, "convert -q --exact '%s' '%s/c'", m, dir), 0);
    ck_assert(asprintf(&path, "%s/c", dir) > 0);
    j = verify_json(path, "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(cJSON_GetObjectItem(j, "format")->valuestring, "modelopt, scheme tensor");
    cJSON_Delete(j);
    ck_assert_int_eq(tu_run_fmt(NULL, "diff -q --dequant '%s' '%s'", m, path), 0);
    free(path);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- quality numbers */

/* Each number within 1e-9 of numpy's (testdata/gen_quality.py). */
static void expect_quality(const cJSON *got, const cJSON *want, const char *what)
{
    static const char *const keys[] = { "rel_error", "cosine", "snr_db", "elements" };
    ck_assert_msg(cJSON_IsObject(got), "%s: no quality", what);
    for (int k = 0; k < 4; k++) {
        double g = cJSON_GetObjectItem(got, keys[k])->valuedouble;
        double w = cJSON_GetObjectItem(want, keys[k])->valuedouble;
        ck_assert_msg(fabs(g - w) <= 1e-9 * fabs(w), "%s: %s %.17g, numpy %.17g", what, keys[k],
                      g, w);
    }
}

START_TEST(test_against_quality_numbers_equal_numpy_for_fp8_and_fp4)
{
    char *text = tu_slurp("testdata/quality/verify_expected.json", NULL);
    cJSON *expected = cJSON_Parse(text), *recipe;
    ck_assert(expected);
    char *dir = tu_tmpdir();
    cJSON_ArrayForEach(recipe, expected) {
        char *cmd, *out, *again;
        ck_assert(asprintf(&cmd, "%s testdata/llama-tiny %s/%s",
                           cJSON_GetObjectItem(recipe, "command")->valuestring, dir,
                           recipe->string) > 0);
        ck_assert_int_eq(tu_run(cmd, NULL, NULL), 0);
        free(cmd);
        ck_assert(asprintf(&cmd, "verify --json -j 1 --against testdata/llama-tiny %s/%s", dir,
                           recipe->string) > 0);
        tu_run(cmd, &out, NULL);
        cJSON *j = cJSON_Parse(out);
        ck_assert_msg(j, "%s", out);
        expect_quality(cJSON_GetObjectItem(j, "quality"), cJSON_GetObjectItem(recipe, "model"),
                       recipe->string);
        /* every weight, FP8 or packed, in "tensors" with its numbers */
        const cJSON *want = cJSON_GetObjectItem(recipe, "tensors"), *t;
        int n = 0;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "tensors")) {
            const char *name = cJSON_GetObjectItem(t, "name")->valuestring;
            ck_assert_msg(cJSON_GetObjectItem(t, "groups")->valuedouble > 0, "%s", name);
            expect_quality(cJSON_GetObjectItem(t, "quality"), cJSON_GetObjectItem(want, name), name);
            n++;
        }
        ck_assert_int_eq(n, cJSON_GetArraySize(want));
        /* the same numbers, to the last digit, for another thread count */
        cmd[strlen("verify --json -j ")] = '3';
        tu_run(cmd, &again, NULL);
        cJSON *k = cJSON_Parse(again);
        char *q1 = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "quality"));
        char *q3 = cJSON_PrintUnformatted(cJSON_GetObjectItem(k, "quality"));
        ck_assert_str_eq(q1, q3);
        free(q1);
        free(q3);
        cJSON_Delete(k);
        cJSON_Delete(j);
        free(again);
        free(out);
        free(cmd);
        /* the text: the model's numbers, and the counts of the format's own codes */
        ck_assert(asprintf(&cmd, "verify --against testdata/llama-tiny %s/%s", dir,
                           recipe->string) > 0);
        tu_run(cmd, &out, NULL);
        ck_assert_msg(strstr(out, "quality against testdata/llama-tiny: 823296 elements, rel error "),
                      "%s", out);
        bool fp4 = strcmp(recipe->string, "mxfp4") == 0;
        ck_assert_msg(!strstr(out, "codes at +-448") == fp4, "%s", out);
        ck_assert_msg(!strstr(out, "packed codes at their largest magnitude") == !fp4, "%s", out);
        ck_assert_msg(!strstr(out, "of 0 (per tensor"), "%s", out);
        free(out);
        free(cmd);
    }
    tu_rmrf(dir);
    free(dir);
    cJSON_Delete(expected);
    free(text);
}
END_TEST

START_TEST(test_int4_weights_are_in_the_json_with_their_quality)
{
    char *dir = tu_tmpdir(), *cmd, *out;
    ck_assert(asprintf(&cmd, "quantize -q --scheme int4 --group 32 testdata/llama-tiny %s/i4", dir) > 0);
    ck_assert_int_eq(tu_run(cmd, NULL, NULL), 0);
    free(cmd);
    ck_assert(asprintf(&cmd, "verify --json --against testdata/llama-tiny %s/i4", dir) > 0);
    ck_assert_int_eq(tu_run(cmd, &out, NULL), 0);
    cJSON *j = cJSON_Parse(out), *t;
    ck_assert_msg(j, "%s", out);
    int n = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "tensors")) {
        ck_assert_msg(cJSON_GetObjectItem(t, "groups")->valuedouble > 0, "%s", out);
        const cJSON *q = cJSON_GetObjectItem(t, "quality");
        ck_assert_msg(cJSON_IsObject(q) && cJSON_GetObjectItem(q, "cosine")->valuedouble > 0.98,
                      "%s", out);
        n++;
    }
    ck_assert_int_eq(n, 14);
    ck_assert(cJSON_GetObjectItem(j, "saturated_packed_codes")->valuedouble > 0);
    cJSON_Delete(j);
    free(out);
    free(cmd);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("verify");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_every_fixture_is_reported_under_its_rule);
    tcase_add_loop_test(tc, test_everything_quantize_writes_is_clean_or_warned, 0, count_cases(QUANT_CASES));
    tcase_add_test(tc, test_no_values_reads_headers_only);
    tcase_add_test(tc, test_all_problems_are_reported_not_just_the_first);
    tcase_add_test(tc, test_zero_kv_heads_is_a_finding_not_a_crash);
    tcase_add_test(tc, test_tp_merged_parts_off_the_block_say_what_vllm_does);
    tcase_add_test(tc, test_tp_mla_q_lora_off_the_block_is_named);
    tcase_add_loop_test(tc, test_tp_answers_for_real_configs, 0,
                        (int)(sizeof tp_cases / sizeof tp_cases[0]));
    tcase_add_test(tc, test_config_rules);
    tcase_add_test(tc, test_fp8_tensor_of_rank_1_is_an_error);
    tcase_add_test(tc, test_zero_blocks_are_counted_per_tensor);
    tcase_add_test(tc, test_fast_bound_counts_what_the_reference_counts);
    tcase_add_test(tc, test_nibble_stats_count_what_decoding_counts);
    tcase_add_test(tc, test_against_the_source_is_clean_and_reproduced);
    tcase_add_test(tc, test_against_a_changed_source_finds_the_tensor);
    tcase_add_loop_test(tc, test_against_report_is_the_same_for_any_thread_count, 0, 2);
    tcase_add_test(tc, test_ct_f32_scales_the_model_dtype_cannot_hold_are_a_transformers_finding);
    tcase_add_test(tc, test_rounded_scales_pass_the_strictest_check);
    tcase_add_test(tc, test_against_finds_saturation_from_floor_scales);
    tcase_add_test(tc, test_mixtral_router_stays_bf16_or_fails_verify);
    tcase_add_test(tc, test_mtp_shared_head_stays_bf16_or_fails_verify);
    tcase_add_test(tc, test_indexer_weights_proj_stays_bf16_or_fails_verify);
    tcase_add_test(tc, test_deepseek_v32_block_shapes_vllm_derives);
    tcase_add_test(tc, test_modelopt_mixed_kv_scheme_vllm_reads);
    tcase_add_test(tc, test_llama4_experts_in_out_quantize_square_blocks_only);
    tcase_add_test(tc, test_unlisted_embedding_is_no_finding);
    tcase_add_test(tc, test_modelopt_exclusions_read_where_the_loaders_read_them);
    tcase_add_test(tc, test_ignore_entries_match_as_each_format_loaders_do);
    tcase_add_test(tc, test_blocks_spanning_fused_gate_up_halves);
    tcase_add_test(tc, test_no_fp8_weights_is_an_error);
    tcase_add_test(tc, test_a_loader_not_required_is_a_note);
    tcase_add_test(tc, test_partial_blocks_stop_transformers_only);
    tcase_add_test(tc, test_mx_on_a_float32_model_stops_transformers);
    tcase_add_test(tc, test_tensor_experts_need_tensor_activations);
    tcase_add_test(tc, test_qwen3_bf16_and_f16_block_scales_load);
    tcase_add_test(tc, test_mistral_per_tensor_scale_inv_loads);
    tcase_add_test(tc, test_tp_reads_text_config);
    tcase_add_test(tc, test_modelopt_side_file_declares_the_layout);
    tcase_add_test(tc, test_mxfp8_row_not_whole_runs);
    tcase_add_test(tc, test_int4_against_its_source);
    tcase_add_test(tc, test_against_quality_numbers_equal_numpy_for_fp8_and_fp4);
    tcase_add_test(tc, test_int4_weights_are_in_the_json_with_their_quality);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
