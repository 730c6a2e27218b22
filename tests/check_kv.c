/*
 * check_kv.c - FP8 KV-cache scales (fp8conv-formats(5), KV CACHE SCALES):
 * inspect lists them per naming convention, verify judges them (kv-scale-*,
 * kv-scheme-*), convert carries and renames them, dequantize-for-export
 * drops them and says so.  The fixtures are a tiny two-layer Llama
 * quantized by fp8conv, with a second shard of scales written here under
 * each naming:
 *   ModelOpt       model.layers.L.self_attn.k_proj.k_scale, v_proj.v_scale, F32 []
 *                  (vLLM weight_utils.py maybe_remap_kv_scale_name, modelopt_scale_names)
 *   llm-compressor model.layers.L.self_attn.k_scale, v_scale, F32 [1]
 *                  (same function, the generic .k_scale/.v_scale branch)
 *   fused          model.layers.L.self_attn.qkv_proj.k_scale (vllm issue 25047,
 *                  sglang issue 39942)
 *   TensorRT-LLM   ...kv_cache_scaling_factor (no vLLM rule maps it)
 */
#include "golden.h"

static const char LLAMA2[] =
    "{\"model_type\": \"%s\", \"hidden_size\": 128, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 2, \"intermediate_size\": 128, \"num_hidden_layers\": 2}\n";
static const tu_tensor ATTN2[] = {
    { "model.layers.0.self_attn.q_proj.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.k_proj.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.v_proj.weight", 2, { 128, 128 } },
    { "model.layers.0.self_attn.o_proj.weight", 2, { 128, 128 } },
    { "model.layers.1.self_attn.q_proj.weight", 2, { 128, 128 } },
    { "model.layers.1.self_attn.k_proj.weight", 2, { 128, 128 } },
    { "model.layers.1.self_attn.v_proj.weight", 2, { 128, 128 } },
    { "model.layers.1.self_attn.o_proj.weight", 2, { 128, 128 } },
};

typedef struct {
    const char *name;
    int rank;      /* 0: [], 1: [n] */
    uint64_t n;
    float value;
} kv_tensor;

/* dir/name: the two-layer model of `model_type`, quantized per channel in
 * compressed-tensors, plus kv.safetensors holding `kv` (F32). */
static char *fp8_model(const char *dir, const char *name, const char *model_type,
                       const kv_tensor *kv, size_t nkv)
{
    char config[512], *src, *out, *path;
    snprintf(config, sizeof config, LLAMA2, model_type);
    ck_assert(asprintf(&src, "%s-bf16", name) > 0);
    char *model = make_named_model(dir, src, config, ATTN2, 8);
    ck_assert(asprintf(&out, "%s/%s", dir, name) > 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "quantize -q --scheme channel --format compressed-tensors "
                                      "'%s' '%s'", model, out), 0);
    ck_assert(asprintf(&path, "%s/kv.safetensors", out) > 0);
    if (nkv) {
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_writer *w;
        ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
        ck_assert(fp8_writer_set_metadata(ctx, w, "format", "pt") == FP8_OK);
        for (size_t i = 0; i < nkv; i++) {
            uint64_t shape[1] = { kv[i].n };
            ck_assert(fp8_writer_add_tensor(ctx, w, kv[i].name, FP8_DTYPE_F32, kv[i].rank,
                                            shape) == FP8_OK);
        }
        ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
        for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
            const fp8_tensor_info *t = fp8_writer_tensor(w, i);
            const kv_tensor *k = NULL;
            for (size_t j = 0; j < nkv; j++)
                if (!strcmp(kv[j].name, t->name))
                    k = &kv[j];
            float v[8];
            for (uint64_t e = 0; e < t->elements && e < 8; e++)
                v[e] = k->value;
            ck_assert(fp8_writer_write(ctx, w, v, t->elements * 4) == FP8_OK);
        }
        ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
        fp8_writer_free(w);
        fp8_ctx_free(ctx);
    }
    free(path);
    free(model);
    free(src);
    return out;
}

/* Sets quantization_config.kv_cache_scheme in dir/config.json (NULL: null). */
static void set_kv_scheme(const char *dir, const char *scheme)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = tu_slurp(path, NULL);
    cJSON *c = cJSON_Parse(text);
    cJSON *q = cJSON_GetObjectItem(c, "quantization_config");
    ck_assert(q);
    cJSON_DeleteItemFromObject(q, "kv_cache_scheme");
    cJSON_AddItemToObject(q, "kv_cache_scheme", scheme ? cJSON_Parse(scheme) : cJSON_CreateNull());
    char *s = cJSON_Print(c);
    tu_spit(path, s, strlen(s));
    free(s);
    cJSON_Delete(c);
    free(text);
}

#define STATIC_KV "{\"num_bits\": 8, \"type\": \"float\", \"dynamic\": false, \"strategy\": \"tensor\"}"

static cJSON *run_json(const char *fmt, const char *path, int *rc)
{
    char *args, *out;
    ck_assert(asprintf(&args, fmt, path) > 0);
    *rc = tu_run(args, &out, NULL);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "%s: not JSON: %s", args, out);
    free(out);
    free(args);
    return j;
}

/* The message of the finding of `rule`, NULL when absent. */
static const char *finding(const cJSON *report, const char *rule)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
        if (strcmp(cJSON_GetObjectItem(f, "rule")->valuestring, rule) == 0)
            return cJSON_GetObjectItem(f, "message")->valuestring;
    return NULL;
}

static size_t kv_findings(const cJSON *report)
{
    size_t n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
        n += !strncmp(cJSON_GetObjectItem(f, "rule")->valuestring, "kv-", 3);
    return n;
}

static const kv_tensor LLMC[] = {
    { "model.layers.0.self_attn.k_scale", 1, 1, 0.25f },
    { "model.layers.0.self_attn.v_scale", 1, 1, 0.5f },
    { "model.layers.1.self_attn.k_scale", 1, 1, 0.125f },
    { "model.layers.1.self_attn.v_scale", 1, 1, 2.0f },
};

START_TEST(test_inspect_lists_kv_scales_per_naming)
{
    char *dir = tu_tmpdir();
    char *m = fp8_model(dir, "llmc", "llama", LLMC, 4);
    int rc;
    cJSON *j = run_json("inspect --json '%s'", m, &rc);
    ck_assert_int_eq(rc, 0);
    const cJSON *kv = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "summary"), "kv_cache_scales");
    ck_assert_msg(cJSON_GetArraySize(kv) == 1, "kv_cache_scales: %d entries", cJSON_GetArraySize(kv));
    const cJSON *e = cJSON_GetArrayItem(kv, 0);
    ck_assert_str_eq(cJSON_GetObjectItem(e, "convention")->valuestring, "llm-compressor");
    ck_assert_int_eq(cJSON_GetObjectItem(e, "count")->valueint, 4);
    ck_assert_str_eq(cJSON_GetObjectItem(e, "dtype")->valuestring, "F32");
    ck_assert(cJSON_GetObjectItem(e, "min")->valuedouble == 0.125);
    ck_assert(cJSON_GetObjectItem(e, "max")->valuedouble == 2.0);
    cJSON_Delete(j);
    char *out;
    char *args;
    ck_assert(asprintf(&args, "inspect '%s'", m) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 0);
    ck_assert_msg(strstr(out, "kv-cache scales: llm-compressor naming, 4 tensors, F32, values "
                              "0.125 to 2"), "%s", out);
    free(out);
    free(args);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

/* Declared and complete: no kv- finding; the same scales with the scheme
 * left null: kv-scheme-undeclared; the scheme with no scales:
 * kv-scheme-without-scales. */
START_TEST(test_kv_scheme_declaration_against_the_scales)
{
    char *dir = tu_tmpdir();
    char *m = fp8_model(dir, "llmc", "llama", LLMC, 4);
    int rc;
    set_kv_scheme(m, STATIC_KV);
    cJSON *j = run_json("verify --json --strict '%s'", m, &rc);
    ck_assert_msg(rc == 0 && kv_findings(j) == 0, "rc %d, %zu kv findings", rc, kv_findings(j));
    cJSON_Delete(j);
    set_kv_scheme(m, NULL);
    j = run_json("verify --json '%s'", m, &rc);
    const char *msg = finding(j, "kv-scheme-undeclared");
    ck_assert_msg(msg && strstr(msg, "kv_cache_scheme") && strstr(msg, "model.layers.0.self_attn.k_scale"),
                  "%s", msg ? msg : "no kv-scheme-undeclared");
    ck_assert_int_eq(rc, 0); /* a warning */
    cJSON_Delete(j);
    char *bare = fp8_model(dir, "bare", "llama", NULL, 0);
    set_kv_scheme(bare, STATIC_KV);
    j = run_json("verify --json '%s'", bare, &rc);
    ck_assert(finding(j, "kv-scheme-without-scales"));
    cJSON_Delete(j);
    free(bare);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

/* k without v is a warning (vLLM's and SGLang's quantization/kv_cache.py
 * use the one scale for both); scales for one layer of two a warning; a
 * scale of two elements an error; a TensorRT-LLM factor of 0 an error. */
START_TEST(test_kv_scales_one_positive_value_k_and_v_per_layer)
{
    static const kv_tensor unpaired[] = {
        { "model.layers.0.self_attn.k_scale", 1, 1, 0.25f },
        { "model.layers.0.self_attn.v_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.k_scale", 1, 1, 0.25f },
    };
    static const kv_tensor partial[] = {
        { "model.layers.0.self_attn.k_proj.k_scale", 0, 1, 0.25f },
        { "model.layers.0.self_attn.v_proj.v_scale", 0, 1, 0.25f },
    };
    static const kv_tensor wide[] = {
        { "model.layers.0.self_attn.k_scale", 1, 2, 0.25f },
        { "model.layers.0.self_attn.v_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.k_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.v_scale", 1, 1, 0.25f },
    };
    static const kv_tensor zero[] = {
        { "model.layers.0.self_attn.kv_cache_scaling_factor", 1, 1, 0.0f },
        { "model.layers.1.self_attn.kv_cache_scaling_factor", 1, 1, 1.0f },
    };
    char *dir = tu_tmpdir();
    int rc;
    char *m = fp8_model(dir, "unpaired", "llama", unpaired, 3);
    set_kv_scheme(m, STATIC_KV);
    cJSON *j = run_json("verify --json '%s'", m, &rc);
    const char *msg = finding(j, "kv-scale-unpaired");
    ck_assert_msg(msg && strstr(msg, "model.layers.1.self_attn.k_scale") && strstr(msg, "no v scale"),
                  "%s", msg ? msg : "no kv-scale-unpaired");
    ck_assert_int_eq(rc, 0);
    cJSON_Delete(j);
    free(m);

    m = fp8_model(dir, "partial", "llama", partial, 2);
    j = run_json("verify --json '%s'", m, &rc);
    msg = finding(j, "kv-scale-partial");
    ck_assert_msg(msg && strstr(msg, "1 of the config's 2 layers"), "%s", msg ? msg : "no kv-scale-partial");
    cJSON_Delete(j);
    free(m);

    m = fp8_model(dir, "wide", "llama", wide, 4);
    j = run_json("verify --json '%s'", m, &rc);
    msg = finding(j, "kv-scale-shape");
    ck_assert_msg(msg && strstr(msg, "model.layers.0.self_attn.k_scale"), "%s", msg ? msg : "no kv-scale-shape");
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    free(m);

    m = fp8_model(dir, "zero", "llama", zero, 2);
    j = run_json("verify --json '%s'", m, &rc);
    msg = finding(j, "kv-scale-value");
    ck_assert_msg(msg && strstr(msg, "layers.0.self_attn.kv_cache_scaling_factor"), "%s",
                  msg ? msg : "no kv-scale-value");
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    j = run_json("verify --json --no-values '%s'", m, &rc); /* headers only: no value read */
    ck_assert(!finding(j, "kv-scale-value"));
    cJSON_Delete(j);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

/* The fused qkv_proj naming in a Qwen2: SGLang's Qwen2 loader drops it
 * (sglang issue 39942); in a Llama no known loader does.  TensorRT-LLM's
 * name: no vLLM rule maps it, whatever the model. */
START_TEST(test_kv_scale_dropped_per_loader_and_model_type)
{
    static const kv_tensor fused[] = {
        { "model.layers.0.self_attn.qkv_proj.k_scale", 1, 1, 0.25f },
        { "model.layers.0.self_attn.qkv_proj.v_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.qkv_proj.k_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.qkv_proj.v_scale", 1, 1, 0.25f },
    };
    static const kv_tensor trt[] = {
        { "model.layers.0.self_attn.kv_cache_scaling_factor", 1, 1, 0.5f },
        { "model.layers.1.self_attn.kv_cache_scaling_factor", 1, 1, 0.5f },
    };
    char *dir = tu_tmpdir();
    int rc;
    char *m = fp8_model(dir, "qwen2", "qwen2", fused, 4);
    set_kv_scheme(m, STATIC_KV);
    cJSON *j = run_json("verify --json '%s'", m, &rc);
    const char *msg = finding(j, "kv-scale-dropped");
    ck_assert_msg(msg && strstr(msg, "SGLang") && strstr(msg, "qwen2") &&
                  strstr(msg, "model.layers.0.self_attn.qkv_proj.k_scale") && !strstr(msg, "vLLM drops"),
                  "%s", msg ? msg : "no kv-scale-dropped");
    ck_assert_int_eq(rc, 0); /* a warning */
    cJSON_Delete(j);
    j = run_json("verify --json --strict '%s'", m, &rc);
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    free(m);
    m = fp8_model(dir, "llama", "llama", fused, 4);
    set_kv_scheme(m, STATIC_KV);
    j = run_json("verify --json '%s'", m, &rc);
    ck_assert(!finding(j, "kv-scale-dropped"));
    cJSON_Delete(j);
    free(m);
    /* DeepSeek MLA (issue 44): vLLM has no self_attn.attn to load them into */
    static const kv_tensor mla[] = {
        { "model.layers.0.self_attn.k_scale", 1, 1, 0.25f },
        { "model.layers.0.self_attn.v_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.k_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.v_scale", 1, 1, 0.25f },
    };
    m = fp8_model(dir, "mla", "deepseek_v3", mla, 4);
    set_kv_scheme(m, STATIC_KV);
    j = run_json("verify --json '%s'", m, &rc);
    msg = finding(j, "kv-scale-dropped");
    ck_assert_msg(msg && strstr(msg, "vLLM drops") && strstr(msg, "MLA attention") &&
                  strstr(msg, "model.layers.0.self_attn.k_scale"), "%s",
                  msg ? msg : "no kv-scale-dropped");
    cJSON_Delete(j);
    free(m);
    m = fp8_model(dir, "trt", "llama", trt, 2);
    set_kv_scheme(m, STATIC_KV);
    j = run_json("verify --json '%s'", m, &rc);
    msg = finding(j, "kv-scale-dropped");
    ck_assert_msg(msg && strstr(msg, "vLLM drops") && strstr(msg, "kv_cache_scaling_factor"), "%s",
                  msg ? msg : "no kv-scale-dropped");
    cJSON_Delete(j);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

/* The shape and value of tensor `name` in checkpoint `dir` (exit 0). */
static bool kv_value(const char *dir, const char *name, int *rank, float *value)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    ck_assert(fp8_checkpoint_open(ctx, dir, &ck) == FP8_OK);
    size_t shard;
    const fp8_tensor_info *t = fp8_checkpoint_find(ck, name, &shard);
    if (t) {
        *rank = t->rank;
        ck_assert(t->dtype == FP8_DTYPE_F32 && t->elements == 1);
        ck_assert(fp8_file_read(ctx, fp8_checkpoint_shard(ck, shard), t, 0, value, 4) == FP8_OK);
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    return t != NULL;
}

static cJSON *json_file(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = tu_slurp(path, NULL);
    cJSON *j = cJSON_Parse(text);
    free(text);
    return j;
}

/* compressed-tensors -> modelopt renames self_attn.k_scale [1] to
 * self_attn.k_proj.k_scale [] and declares kv_cache_quant_algo FP8 (config
 * and hf_quant_config.json); back again, kv_cache_scheme; the values are
 * the input's.  --kv-names picks another naming; an unknown one is a usage
 * error that writes nothing. */
START_TEST(test_convert_carries_and_renames_kv_scales)
{
    char *dir = tu_tmpdir(), mo[512], ct[512], fz[512], bad[512];
    char *m = fp8_model(dir, "llmc", "llama", LLMC, 4);
    set_kv_scheme(m, STATIC_KV);
    snprintf(mo, sizeof mo, "%s/mo", dir);
    snprintf(ct, sizeof ct, "%s/ct", dir);
    snprintf(fz, sizeof fz, "%s/fz", dir);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    ck_assert_int_eq(tu_run_fmt(NULL, "convert -q --format modelopt '%s' '%s'", m, mo), 0);
    int rank;
    float x;
    ck_assert(!kv_value(mo, "model.layers.1.self_attn.v_scale", &rank, &x));
    ck_assert(kv_value(mo, "model.layers.1.self_attn.v_proj.v_scale", &rank, &x));
    ck_assert_int_eq(rank, 0);
    ck_assert(x == 2.0f);
    cJSON *c = json_file(mo, "config.json"), *h = json_file(mo, "hf_quant_config.json");
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "quantization_config"),
                                         "kv_cache_quant_algo")->valuestring, "FP8");
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "quantization"),
                                         "kv_cache_quant_algo")->valuestring, "FP8");
    cJSON_Delete(c);
    cJSON_Delete(h);
    int rc;
    cJSON *j = run_json("verify --json --strict '%s'", mo, &rc);
    ck_assert_msg(kv_findings(j) == 0, "%zu kv findings", kv_findings(j));
    cJSON_Delete(j);

    ck_assert_int_eq(tu_run_fmt(NULL, "convert -q --format compressed-tensors '%s' '%s'", mo, ct), 0);
    ck_assert(kv_value(ct, "model.layers.0.self_attn.k_scale", &rank, &x));
    ck_assert_int_eq(rank, 1);
    ck_assert(x == 0.25f);
    c = json_file(ct, "config.json");
    const cJSON *s = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "quantization_config"), "kv_cache_scheme");
    ck_assert(cJSON_IsObject(s) && cJSON_IsFalse(cJSON_GetObjectItem(s, "dynamic")));
    cJSON_Delete(c);

    ck_assert_int_eq(tu_run_fmt(NULL, "convert -q --kv-names fused-qkv '%s' '%s'", m, fz), 0);
    ck_assert(kv_value(fz, "model.layers.1.self_attn.qkv_proj.k_scale", &rank, &x));
    ck_assert(x == 0.125f);

    char *err;
    ck_assert_int_eq(tu_run_fmt(&err, "convert -q --kv-names kv-scale '%s' '%s'", m, bad), 2);
    ck_assert_msg(strstr(err, "--kv-names kv-scale"), "%s", err);
    free(err);
    struct stat sb;
    ck_assert(stat(bad, &sb) != 0);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dequantize_drops_kv_scales_and_says_so)
{
    static const kv_tensor all[] = {
        { "model.layers.0.self_attn.kv_scale", 0, 1, 0.25f },
        { "model.layers.1.self_attn.k_proj.output_scale", 1, 1, 0.25f },
        { "model.layers.1.self_attn.v_proj.output_scale", 1, 1, 0.25f },
    };
    char *dir = tu_tmpdir(), out[512], *args, *text;
    char *m = fp8_model(dir, "kv", "llama", all, 3);
    snprintf(out, sizeof out, "%s/bf16", dir);
    ck_assert(asprintf(&args, "dequantize-for-export '%s' '%s'", m, out) > 0);
    ck_assert_int_eq(tu_run(args, &text, NULL), 0);
    ck_assert_msg(strstr(text, "3 FP8 KV-cache scales dropped: a BF16 export has no FP8 KV cache"),
                  "%s", text);
    int rank;
    float x;
    for (size_t i = 0; i < 3; i++)
        ck_assert_msg(!kv_value(out, all[i].name, &rank, &x), "%s kept", all[i].name);
    free(text);
    free(args);
    free(m);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kv");
    TCase *tc = tcase_create("kv");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_inspect_lists_kv_scales_per_naming);
    tcase_add_test(tc, test_kv_scheme_declaration_against_the_scales);
    tcase_add_test(tc, test_kv_scales_one_positive_value_k_and_v_per_layer);
    tcase_add_test(tc, test_kv_scale_dropped_per_loader_and_model_type);
    tcase_add_test(tc, test_convert_carries_and_renames_kv_scales);
    tcase_add_test(tc, test_dequantize_drops_kv_scales_and_says_so);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
