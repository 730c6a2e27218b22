/*
 * check_like.c - quantize --like REL reproduces a release's layout, and
 * verify --like REL then says nothing (issue 24, item 7).  Each release is a
 * tiny synthetic one with the names, dtypes, shapes and quantization_config
 * of a real family (headers only matter: verify --like reads no values of
 * REL):
 *   - RedHatAI FP8-dynamic (compressed-tensors, channel scales, the config
 *     as llm-compressor writes it: observer, actorder, version, ...);
 *   - RedHatAI FP8-BLOCK (block_structure [128, 128], group activations);
 *   - Qwen3-*-FP8 (hf-fp8, BF16 block scales, modules_to_not_convert
 *     ["lm_head"]) and Qwen3-4B-Instruct-2507-FP8 (F16 block scales);
 *   - DeepSeek-V3 (hf-fp8, F32 scales, no modules_to_not_convert: the router
 *     gate and lm_head simply BF16).
 * A changed release (another block, another ignore set, another scale
 * dtype) gives exit 1 with the rule.  What a release holds calibrated is
 * not made: its KV-cache scales are a warning of quantize --like and
 * like-calibrated warnings of verify --like; static activation scales
 * (Mistral's activation_scale, ModelOpt FP8's input_scale) a refusal.
 */
#include "golden.h"

#include <regex.h>
#include <time.h>

#define H 256 /* hidden */
#define I 384 /* intermediate: 3 blocks of 128 */
#define V 64  /* vocabulary */
#define E 4   /* routed experts (DeepSeek) */

/* HF_TENSOR: Mistral's per-tensor weight_scale_inv with a static
 * activation_scale; MO_TENSOR: ModelOpt FP8, weight_scale and input_scale */
typedef enum { CT_CHANNEL, CT_BLOCK, HF_BLOCK, HF_TENSOR, MO_TENSOR } layout;

typedef struct {
    layout layout;
    const char *scale_dtype;  /* "BF16", "F16", "F32" */
    unsigned block;           /* block rows = cols */
    bool moe;                 /* DeepSeek: a router and experts */
    const char *config;       /* the quantization_config, JSON */
    const char *bf16_modules; /* a regex: more modules the release keeps BF16 */
    bool kv;                  /* calibrated self_attn.k_scale and v_scale (BF16 []) */
} release;

typedef struct {
    char name[160];
    const char *dtype;
    int rank;
    uint64_t shape[2];
} tensor;

typedef struct {
    tensor t[96];
    size_t n;
} tensors;

static void add(tensors *ts, const char *name, const char *dtype, int rank, uint64_t r, uint64_t c)
{
    ck_assert(ts->n < sizeof ts->t / sizeof *ts->t);
    tensor *t = &ts->t[ts->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->rank = rank;
    t->shape[0] = r;
    t->shape[1] = c;
}

static size_t dtype_size(const char *d)
{
    return !strcmp(d, "F32") || !strcmp(d, "I32") ? 4 : !strcmp(d, "I64") ? 8
           : !strcmp(d, "F8_E4M3")                  ? 1
                                                    : 2;
}

/* bf16 values in (-0.125, 0.125), never all zero, from the element's index */
static void fill_bf16(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t h = (uint32_t)(i + 1) * 2654435761u ^ seed * 40503u;
        float f = (float)((int)(h >> 8) % 2001 - 1000) / 8000.0f;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        p[2 * i] = (unsigned char)(bits >> 16);
        p[2 * i + 1] = (unsigned char)(bits >> 24);
    }
}

/* A safetensors file of `ts`; with `values`, BF16 tensors get values (the
 * rest stays zero). */
static void write_st(const char *path, const tensors *ts, bool values)
{
    cJSON *h = cJSON_CreateObject();
    size_t off = 0;
    for (size_t i = 0; i < ts->n; i++) {
        const tensor *t = &ts->t[i];
        size_t n = dtype_size(t->dtype);
        cJSON *e = cJSON_AddObjectToObject(h, t->name), *shape = cJSON_AddArrayToObject(e, "shape");
        cJSON_AddStringToObject(e, "dtype", t->dtype);
        for (int k = 0; k < t->rank; k++) {
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[k]));
            n *= t->shape[k];
        }
        double o[2] = { (double)off, (double)(off + n) };
        cJSON_AddItemToObject(e, "data_offsets", cJSON_CreateDoubleArray(o, 2));
        off += n;
    }
    char *json = cJSON_PrintUnformatted(h);
    size_t hl = strlen(json), pad = (8 - hl % 8) % 8;
    FILE *fp = fopen(path, "wb");
    ck_assert(fp != NULL);
    uint64_t len = hl + pad;
    unsigned char le[8];
    for (int k = 0; k < 8; k++)
        le[k] = (unsigned char)(len >> (8 * k));
    fwrite(le, 1, 8, fp);
    fwrite(json, 1, hl, fp);
    for (size_t k = 0; k < pad; k++)
        fputc(' ', fp);
    for (size_t i = 0; i < ts->n; i++) {
        const tensor *t = &ts->t[i];
        size_t n = 1;
        for (int k = 0; k < t->rank; k++)
            n *= t->shape[k];
        unsigned char *buf = calloc(n, dtype_size(t->dtype));
        if (values && !strcmp(t->dtype, "BF16"))
            fill_bf16(buf, n, (unsigned)i);
        fwrite(buf, dtype_size(t->dtype), n, fp);
        free(buf);
    }
    ck_assert(fclose(fp) == 0);
    free(json);
    cJSON_Delete(h);
}

static bool matches(const char *regex, const char *name)
{
    regex_t re;
    if (!regex)
        return false;
    ck_assert(regcomp(&re, regex, REG_EXTENDED | REG_NOSUB) == 0);
    bool m = regexec(&re, name, 0, NULL, 0) == 0;
    regfree(&re);
    return m;
}

/* One Linear weight [out, in]: BF16 in the model; F8_E4M3 and its scale in
 * the release unless the release keeps it. */
static void linear(tensors *ts, const release *r, const char *module, uint64_t out, uint64_t in)
{
    char name[160];
    snprintf(name, sizeof name, "%s.weight", module);
    if (!r || matches(r->bf16_modules, module)) {
        add(ts, name, "BF16", 2, out, in);
        return;
    }
    add(ts, name, "F8_E4M3", 2, out, in);
    snprintf(name, sizeof name, "%s.weight%s", module,
             r->layout == HF_BLOCK || r->layout == HF_TENSOR ? "_scale_inv" : "_scale");
    if (r->layout == HF_TENSOR || r->layout == MO_TENSOR) {
        add(ts, name, "F32", 0, 0, 0);
        snprintf(name, sizeof name, "%s.%s", module,
                 r->layout == HF_TENSOR ? "activation_scale" : "input_scale");
        add(ts, name, "F32", 0, 0, 0);
    } else if (r->layout == CT_CHANNEL)
        add(ts, name, r->scale_dtype, 2, out, 1);
    else
        add(ts, name, r->scale_dtype, 2, (out + r->block - 1) / r->block,
            (in + r->block - 1) / r->block);
}

/* The tensors of the model (r NULL: the bf16 source) or of release r. */
static void model_tensors(tensors *ts, const release *r, bool moe)
{
    static const char *const attn[] = { "q_proj", "k_proj", "v_proj", "o_proj" };
    static const char *const mlp[] = { "gate_proj", "up_proj", "down_proj" };
    char m[160];
    ts->n = 0;
    add(ts, "model.embed_tokens.weight", "BF16", 2, V, H);
    add(ts, "model.norm.weight", "BF16", 1, H, 0);
    add(ts, "lm_head.weight", "BF16", 2, V, H);
    add(ts, "model.layers.0.input_layernorm.weight", "BF16", 1, H, 0);
    add(ts, "model.layers.0.post_attention_layernorm.weight", "BF16", 1, H, 0);
    for (int k = 0; k < 4; k++) {
        snprintf(m, sizeof m, "model.layers.0.self_attn.%s", attn[k]);
        linear(ts, r, m, H, H);
    }
    for (int e = moe ? 0 : -1; e < (moe ? E : 0); e++)
        for (int k = 0; k < 3; k++) {
            if (e < 0)
                snprintf(m, sizeof m, "model.layers.0.mlp.%s", mlp[k]);
            else
                snprintf(m, sizeof m, "model.layers.0.mlp.experts.%d.%s", e, mlp[k]);
            linear(ts, r, m, k == 2 ? H : I, k == 2 ? I : H);
        }
    if (moe) /* the router: BF16 in the release, in no list */
        add(ts, "model.layers.0.mlp.gate.weight", "BF16", 2, E, H);
    if (r && r->kv) {
        add(ts, "model.layers.0.self_attn.k_scale", "BF16", 0, 0, 0);
        add(ts, "model.layers.0.self_attn.v_scale", "BF16", 0, 0, 0);
    }
}

static void write_config(const char *dir, bool moe, const char *qc)
{
    char path[512], *text;
    ck_assert(asprintf(&text,
                       "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", "
                       "\"hidden_size\": %d, \"intermediate_size\": %d, \"vocab_size\": %d, "
                       "\"num_hidden_layers\": 1, \"torch_dtype\": \"bfloat16\"%s%s%s}\n",
                       moe ? "DeepseekV3ForCausalLM" : "Qwen3ForCausalLM",
                       moe ? "deepseek_v3" : "qwen3", H, I, V,
                       moe ? ", \"n_routed_experts\": 4" : "", qc ? ", \"quantization_config\": " : "",
                       qc ? qc : "") > 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    tu_spit(path, text, strlen(text));
    free(text);
}

/* dir/name: the release (r) or the bf16 model (r NULL); returns its path. */
static char *make_checkpoint(const char *dir, const char *name, const release *r, bool moe)
{
    char *path, st[512];
    ck_assert(asprintf(&path, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(path, 0755) == 0);
    tensors ts;
    model_tensors(&ts, r, moe);
    snprintf(st, sizeof st, "%s/model.safetensors", path);
    write_st(st, &ts, r == NULL);
    write_config(path, moe, r ? r->config : NULL);
    return path;
}

/* verify --json --no-values --like REF PATH: its report; *rc its exit. */
static cJSON *verify_like(const char *ref, const char *path, int *rc)
{
    char *extra;
    ck_assert(asprintf(&extra, "--no-values --like '%s'", ref) > 0);
    cJSON *r = verify_json(path, extra, rc);
    free(extra);
    return r;
}

static int count_rule(const cJSON *report, const char *prefix)
{
    int n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
        n += strncmp(cJSON_GetObjectItem(f, "rule")->valuestring, prefix, strlen(prefix)) == 0;
    return n;
}

static char *findings_text(const cJSON *report)
{
    return cJSON_Print(cJSON_GetObjectItem(report, "findings"));
}

/* ---------------------------------------------------------------- the releases */

/* as llm-compressor writes QuantizationArgs: every field spelled out */
#define CT_ARGS(dynamic, strategy, group, block, observer)                                   \
    "{\"actorder\": null, \"block_structure\": " block ", \"dynamic\": " dynamic ", "        \
    "\"group_size\": " group ", \"num_bits\": 8, \"observer\": " observer ", "               \
    "\"observer_kwargs\": {}, \"scale_dtype\": null, \"strategy\": \"" strategy "\", "       \
    "\"symmetric\": true, \"type\": \"float\", \"zp_dtype\": null}"

#define CT_CONFIG(weights, acts, ignore) CT_CONFIG_KV(weights, acts, ignore, "null")
#define CT_CONFIG_KV(weights, acts, ignore, kv)                                              \
    "{\"config_groups\": {\"group_0\": {\"format\": \"float-quantized\", "                   \
    "\"input_activations\": " acts ", \"output_activations\": null, "                        \
    "\"targets\": [\"Linear\"], \"weights\": " weights "}}, "                                 \
    "\"format\": \"float-quantized\", \"global_compression_ratio\": null, "                 \
    "\"ignore\": " ignore ", \"kv_cache_scheme\": " kv ", "                                   \
    "\"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\", "   \
    "\"sparsity_config\": {}, \"transform_config\": {}, \"version\": \"0.12.3.a20251114\"}"

/* RedHatAI FP8-dynamic releases */
static const release REDHAT_DYNAMIC = {
    CT_CHANNEL, "BF16", 0, false,
    CT_CONFIG(CT_ARGS("false", "channel", "null", "null", "\"minmax\""),
              CT_ARGS("true", "token", "null", "null", "null"), "[\"lm_head\"]"),
    NULL, false
};
/* RedHatAI FP8-BLOCK releases */
static const release REDHAT_BLOCK = {
    CT_BLOCK, "BF16", 128, false,
    CT_CONFIG(CT_ARGS("false", "block", "null", "[128, 128]", "\"static_minmax\""),
              CT_ARGS("true", "group", "128", "null", "null"), "[\"lm_head\"]"),
    NULL, false
};
/* Qwen/Qwen3-*-FP8 (sglang test/srt/test_quant_log.py quotes
 * Qwen3-4B-Thinking-2507-FP8's: modules_to_not_convert ["lm_head"]) */
#define QWEN_CONFIG(block, fmt)                                                              \
    "{\"activation_scheme\": \"dynamic\", \"modules_to_not_convert\": [\"lm_head\"], "       \
    "\"fmt\": \"" fmt "\", \"quant_method\": \"fp8\", \"weight_block_size\": " block "}"
static const release QWEN3 = { HF_BLOCK, "BF16", 128, false,
                               QWEN_CONFIG("[128, 128]", "e4m3"), NULL, false };
/* Qwen3-4B-Instruct-2507-FP8: F16 block scales */
static const release QWEN3_F16 = { HF_BLOCK, "F16", 128, false,
                                   QWEN_CONFIG("[128, 128]", "e4m3"), NULL, false };
/* deepseek-ai/DeepSeek-V3: no modules_to_not_convert at all */
#define DEEPSEEK_CONFIG(block)                                                               \
    "{\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\", "  \
    "\"weight_block_size\": " block "}"
static const release DEEPSEEK_V3 = { HF_BLOCK, "F32", 128, true, DEEPSEEK_CONFIG("[128, 128]"),
                                     NULL, false };

/* Findings of verify's own rules (not --like's) that other items of issue
 * 24 answer, on main at the time of writing: hf-fp8 block scales other than
 * F32 (item 1: "scale-dtype"), and an embedding that a list without it does
 * not name ("not-in-ignore-list"; no loader quantizes an embedding).  Once
 * both are merged, these releases reach exit 0 and this may go. */
static bool only_answered_elsewhere(const cJSON *report)
{
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
    {
        const char *rule = cJSON_GetObjectItem(f, "rule")->valuestring;
        const char *msg = cJSON_GetObjectItem(f, "message")->valuestring;
        if (strcmp(rule, "scale-dtype") != 0 &&
            !(strcmp(rule, "not-in-ignore-list") == 0 && strstr(msg, "embed_tokens.weight")))
            return false;
    }
    return true;
}

/* quantize --like REL of the bf16 model with the same names, then verify
 * --like REL: nothing a loader would see differs. */
static char *reproduce(const char *dir, const release *r, char **ref)
{
    char *model = make_checkpoint(dir, "model", NULL, r->moe), *out, *err;
    *ref = make_checkpoint(dir, "rel", r, r->moe);
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "quantize -q --like '%s' '%s' '%s'", *ref, model, out);
    ck_assert_msg(rc == 0, "quantize --like: exit %d: %s", rc, err);
    free(err);
    free(model);
    return out;
}

static const release *const releases[] = { &REDHAT_DYNAMIC, &REDHAT_BLOCK, &QWEN3, &QWEN3_F16,
                                           &DEEPSEEK_V3 };
static const char *const release_names[] = { "RedHatAI FP8-dynamic", "RedHatAI FP8-BLOCK",
                                             "Qwen3-FP8", "Qwen3-4B-Instruct-2507-FP8",
                                             "DeepSeek-V3" };

START_TEST(test_quantize_like_reproduces_a_release)
{
    char *dir = tu_tmpdir(), *ref, *out = reproduce(dir, releases[_i], &ref);
    int rc;
    cJSON *r = verify_like(ref, out, &rc);
    char *text = findings_text(r);
    /* exit 0, or (Qwen3: BF16/F16 hf-fp8 block scales, a list without the
     * embedding) only findings answered elsewhere */
    ck_assert_msg(count_rule(r, "like-") == 0 && (rc == 0 || only_answered_elsewhere(r)),
                  "%s: exit %d: %s", release_names[_i], rc, text);
    if (releases[_i]->layout != HF_BLOCK || !strcmp(releases[_i]->scale_dtype, "F32"))
        ck_assert_msg(rc == 0, "%s: exit %d: %s", release_names[_i], rc, text);
    free(text);
    cJSON_Delete(r);
    /* the scales in the release's dtype; the config's ignore list the
     * release's (DeepSeek-V3: none) */
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", out);
    cJSON *config = read_json(path), *q = cJSON_GetObjectItem(config, "quantization_config");
    const cJSON *list = cJSON_GetObjectItem(q, releases[_i]->layout == HF_BLOCK
                                                   ? "modules_to_not_convert" : "ignore");
    if (releases[_i]->moe) {
        ck_assert_msg(list == NULL, "%s", cJSON_PrintUnformatted(q));
    } else {
        ck_assert_int_eq(cJSON_GetArraySize(list), 1);
        ck_assert_str_eq(cJSON_GetArrayItem(list, 0)->valuestring, "lm_head");
    }
    cJSON_Delete(config);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
    const fp8_tensor_info *s = fp8_checkpoint_find(
        ck, releases[_i]->layout == HF_BLOCK ? "model.layers.0.self_attn.q_proj.weight_scale_inv"
                                             : "model.layers.0.self_attn.q_proj.weight_scale",
        NULL);
    ck_assert(s != NULL);
    ck_assert_str_eq(fp8_dtype_name(s->dtype), releases[_i]->scale_dtype);
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    free(ref);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* Another release, against the output made like the first: exit 1, `want`
 * findings of the rule (each with `says` in its message when not NULL). */
static void expect_difference_saying(const release *first, const release *changed,
                                     const char *rule, int want, const char *says)
{
    char *dir = tu_tmpdir(), *ref, *out = reproduce(dir, first, &ref);
    char *other = make_checkpoint(dir, "changed", changed, changed->moe);
    int rc;
    cJSON *r = verify_like(other, out, &rc);
    char *text = findings_text(r);
    ck_assert_msg(rc == 1 && count_rule(r, rule) == want, "exit %d, %d x %s wanted: %s", rc, want,
                  rule, text);
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(r, "findings"))
    {
        if (says && !strcmp(cJSON_GetObjectItem(f, "rule")->valuestring, rule))
            ck_assert_msg(strstr(cJSON_GetObjectItem(f, "message")->valuestring, says), "%s", text);
    }
    free(text);
    cJSON_Delete(r);
    free(other);
    free(ref);
    free(out);
    tu_tmpdir_free(dir);
}

static void expect_difference(const release *first, const release *changed, const char *rule,
                              int want)
{
    expect_difference_saying(first, changed, rule, want, NULL);
}

START_TEST(test_another_block_size_is_a_difference)
{
    /* CT block [128, 128] against [64, 128]: the config and the 7 scales */
    static const release block64 = {
        CT_BLOCK, "BF16", 64, false,
        CT_CONFIG(CT_ARGS("false", "block", "null", "[64, 64]", "\"static_minmax\""),
                  CT_ARGS("true", "group", "64", "null", "null"), "[\"lm_head\"]"),
        NULL, false
    };
    expect_difference(&REDHAT_BLOCK, &block64, "like-shape", 7);
    expect_difference(&REDHAT_BLOCK, &block64, "like-config", 2); /* block, group size */
    static const release ds64 = { HF_BLOCK, "F32", 64, true, DEEPSEEK_CONFIG("[64, 64]"), NULL,
                                  false };
    expect_difference(&DEEPSEEK_V3, &ds64, "like-config", 1);
}
END_TEST

START_TEST(test_another_ignore_set_is_a_difference)
{
    /* the release keeps every down_proj too (a regex): one module more */
    static const release more = {
        CT_CHANNEL, "BF16", 0, false,
        CT_CONFIG(CT_ARGS("false", "channel", "null", "null", "\"minmax\""),
                  CT_ARGS("true", "token", "null", "null", "null"),
                  "[\"lm_head\", \"re:.*down_proj$\"]"),
        "down_proj", false
    };
    expect_difference(&REDHAT_DYNAMIC, &more, "like-config", 1);
    expect_difference(&REDHAT_DYNAMIC, &more, "like-dtype", 1);
    /* DeepSeek-V3 has no list; one that keeps the attention output */
    static const release ds = { HF_BLOCK, "F32", 128, true,
                                "{\"activation_scheme\": \"dynamic\", \"quant_method\": \"fp8\", "
                                "\"weight_block_size\": [128, 128], \"modules_to_not_convert\": "
                                "[\"model.layers.0.self_attn.o_proj\"]}",
                                "o_proj", false };
    expect_difference(&DEEPSEEK_V3, &ds, "like-config", 1);
}
END_TEST

START_TEST(test_another_scale_dtype_is_a_difference)
{
    /* Qwen3's BF16 block scales (as quantize --like wrote them) against F16
     * ones: the 7 scales */
    expect_difference_saying(&QWEN3, &QWEN3_F16, "like-dtype", 7, "_scale_inv' is BF16, F16 in");
    expect_difference_saying(&QWEN3_F16, &QWEN3, "like-dtype", 7, "_scale_inv' is F16, BF16 in");
    static const release f32 = { CT_CHANNEL, "F32", 0, false, REDHAT_DYNAMIC.config, NULL, false };
    expect_difference_saying(&REDHAT_DYNAMIC, &f32, "like-dtype", 7, "_scale' is BF16, F32 in");
}
END_TEST

/* What says the same to a loader is no difference: a regex and the explicit
 * names it selects, spellings of one value, defaults spelled out or not. */
START_TEST(test_equal_to_a_loader_is_no_difference)
{
    static const release explicit_names = {
        CT_CHANNEL, "BF16", 0, false,
        CT_CONFIG(CT_ARGS("false", "channel", "null", "null", "\"minmax\""),
                  CT_ARGS("true", "token", "null", "null", "null"),
                  "[\"lm_head\", \"model.layers.0.mlp.down_proj\"]"),
        "down_proj", false
    };
    /* the same, with a regex, the defaults left out, other observers */
    static const release regex = {
        CT_CHANNEL, "BF16", 0, false,
        "{\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"weights\": "
        "{\"num_bits\": 8, \"type\": \"FLOAT\", \"strategy\": \"channel\", \"observer\": \"mse\", "
        "\"actorder\": false}, \"input_activations\": {\"type\": \"float\", \"dynamic\": true, "
        "\"strategy\": \"token\"}}}, \"format\": \"float-quantized\", "
        "\"ignore\": [\"re:.*lm_head\", \"re:.*mlp[.]down_proj$\"], "
        "\"quant_method\": \"compressed-tensors\", \"quantization_status\": \"compressed\"}",
        "down_proj", false
    };
    char *dir = tu_tmpdir(), *ref, *out = reproduce(dir, &explicit_names, &ref);
    char *other = make_checkpoint(dir, "regex", &regex, false);
    int rc;
    cJSON *r = verify_like(other, out, &rc);
    char *text = findings_text(r);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, text);
    free(text);
    cJSON_Delete(r);
    free(other);
    free(ref);
    free(out);
    tu_tmpdir_free(dir);
    /* DeepSeek-V3 with fmt float8_e4m3fn, no activation_scheme, an empty list */
    static const release ds = { HF_BLOCK, "F32", 128, true,
                                "{\"fmt\": \"float8_e4m3fn\", \"quant_method\": \"fp8\", "
                                "\"weight_block_size\": [128, 128], "
                                "\"modules_to_not_convert\": []}",
                                NULL, false };
    dir = tu_tmpdir();
    out = reproduce(dir, &DEEPSEEK_V3, &ref);
    other = make_checkpoint(dir, "spelled", &ds, true);
    r = verify_like(other, out, &rc);
    text = findings_text(r);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, text);
    free(text);
    cJSON_Delete(r);
    free(other);
    free(ref);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- calibrated data */

/* RedHatAI FP8-dynamic releases with a calibrated FP8 KV cache: a
 * kv_cache_scheme and self_attn.k_scale / v_scale */
static const release REDHAT_DYNAMIC_KV = {
    CT_CHANNEL, "BF16", 0, false,
    CT_CONFIG_KV(CT_ARGS("false", "channel", "null", "null", "\"minmax\""),
                 CT_ARGS("true", "token", "null", "null", "null"), "[\"lm_head\"]",
                 "{\"dynamic\": false, \"num_bits\": 8, \"strategy\": \"tensor\", "
                 "\"symmetric\": true, \"type\": \"float\"}"),
    NULL, true
};

static int count_severity(const cJSON *report, const char *rule, const char *severity)
{
    int n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
        n += !strcmp(cJSON_GetObjectItem(f, "rule")->valuestring, rule) &&
             !strcmp(cJSON_GetObjectItem(f, "severity")->valuestring, severity);
    return n;
}

/* The KV-cache scales and scheme are calibrated: quantize --like writes the
 * weights as the release does, declares no KV-cache scheme and says so in
 * one warning; verify --like warns (like-calibrated) and exits 0, 1 with
 * --strict. */
START_TEST(test_calibrated_kv_cache_is_a_warning)
{
    char *dir = tu_tmpdir(), *model = make_checkpoint(dir, "model", NULL, false), *out, *err;
    char *ref = make_checkpoint(dir, "rel", &REDHAT_DYNAMIC_KV, false);
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "quantize --like '%s' '%s' '%s'", ref, model, out);
    ck_assert_msg(rc == 0, "quantize --like: exit %d: %s", rc, err);
    int warnings = 0;
    for (const char *p = err; (p = strstr(p, "warning: ")); p++)
        warnings++;
    ck_assert_msg(warnings == 1 && strstr(err, "not reproduced: its calibrated KV cache") &&
                      strstr(err, "model.layers.0.self_attn.k_scale") &&
                      strstr(err, "kv_cache_scheme") && strstr(err, "no calibration data"),
                  "%s", err);
    free(err);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", out);
    cJSON *config = read_json(path), *q = cJSON_GetObjectItem(config, "quantization_config");
    const cJSON *kv = cJSON_GetObjectItem(q, "kv_cache_scheme");
    ck_assert_msg(!kv || cJSON_IsNull(kv), "%s", cJSON_PrintUnformatted(q));
    cJSON_Delete(config);
    cJSON *r = verify_like(ref, out, &rc);
    char *text = findings_text(r);
    /* the scheme and the two scales, warnings; nothing else differs */
    ck_assert_msg(rc == 0 && count_severity(r, "like-calibrated", "warning") == 3 &&
                      count_rule(r, "like-") == 3,
                  "exit %d: %s", rc, text);
    free(text);
    cJSON_Delete(r);
    rc = tu_run_fmt(NULL, "verify -q --strict --no-values --like '%s' '%s'", ref, out);
    ck_assert_int_eq(rc, 1);
    free(ref);
    free(model);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* Mistral's FP8 releases: per-tensor weight_scale_inv, static
 * activation_scale */
static const release MISTRAL = {
    HF_TENSOR, "F32", 0, false,
    "{\"activation_scheme\": \"static\", \"modules_to_not_convert\": [\"lm_head\"], "
    "\"quant_method\": \"fp8\"}",
    NULL, false
};
/* ModelOpt FP8 (the nvidia FP8 releases): static per-tensor, calibrated input_scale */
#define MODELOPT_CONFIG                                                                      \
    "{\"exclude_modules\": [\"lm_head\"], \"kv_cache_quant_algo\": \"FP8\", "                \
    "\"quant_algo\": \"FP8\", \"quant_method\": \"modelopt\"}"
static const release MODELOPT = { MO_TENSOR, "F32", 0, false, MODELOPT_CONFIG, NULL, false };

/* quantize --like REF refuses, exit 3, naming REF, its first calibrated
 * tensor, the rule and what to do; nothing written. */
static void expect_static_refused(const char *ref, const char *model, const char *out,
                                  const char *first, const char *rule)
{
    char *err;
    int rc = tu_run_fmt(&err, "quantize --like '%s' '%s' '%s'", ref, model, out);
    ck_assert_msg(rc == 3 && strstr(err, ref) && strstr(err, "its activations are static") &&
                      strstr(err, first) && strstr(err, rule) &&
                      strstr(err, "no calibration data") && strstr(err, "without --like") &&
                      strstr(err, "--format hf-fp8"),
                  "exit %d: %s", rc, err);
    struct stat sb;
    ck_assert_msg(stat(out, &sb) != 0, "%s was written", out);
    free(err);
}

START_TEST(test_static_activations_are_refused)
{
    char *dir = tu_tmpdir(), *model = make_checkpoint(dir, "model", NULL, false), *out;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    char *mistral = make_checkpoint(dir, "mistral", &MISTRAL, false);
    expect_static_refused(mistral, model, out, "'model.layers.0.mlp.down_proj.activation_scale'",
                          "activation_scheme");
    char *modelopt = make_checkpoint(dir, "modelopt", &MODELOPT, false);
    expect_static_refused(modelopt, model, out, "'model.layers.0.mlp.down_proj.input_scale'",
                          "quant_algo FP8");
    /* ModelOpt 0.29 and earlier: declared in hf_quant_config.json only */
    static const release old = { MO_TENSOR, "F32", 0, false, NULL, NULL, false };
    char *modelopt_old = make_checkpoint(dir, "modelopt-old", &old, false), path[512];
    static const char side[] = "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.27.0\"}, "
                               "\"quantization\": {\"exclude_modules\": [\"lm_head\"], "
                               "\"kv_cache_quant_algo\": \"FP8\", \"quant_algo\": \"FP8\"}}\n";
    snprintf(path, sizeof path, "%s/hf_quant_config.json", modelopt_old);
    tu_spit(path, side, strlen(side));
    expect_static_refused(modelopt_old, model, out, "'model.layers.0.mlp.down_proj.input_scale'",
                          "quant_algo FP8");
    free(mistral);
    free(modelopt);
    free(modelopt_old);
    free(model);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* A layout fp8conv reads but does not write (gpt-oss: quant_method mxfp4,
 * fused 3-D experts as _blocks/_scales) is refused with what quantize writes
 * instead, nothing left (it said "declares no FP8 layout fp8conv reads");
 * verify names the declaration (it said "declared: none"). */
START_TEST(test_read_only_layout_is_refused_with_what_is_written)
{
    char *dir = tu_tmpdir(), *out, *err, *text;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "quantize --like testdata/releases/gpt-oss testdata/llama-tiny '%s'",
                        out);
    ck_assert_msg(rc == 3 && strstr(err, "reads but does not write") &&
                      strstr(err, "--scheme mxfp4") && strstr(err, "mxfp4-pack-quantized"),
                  "exit %d: %s", rc, err);
    struct stat sb;
    ck_assert_msg(stat(out, &sb) != 0, "%s was written", out);
    free(err);
    ck_assert_int_eq(tu_run("verify testdata/releases/gpt-oss", &text, NULL), 0);
    ck_assert_msg(strstr(text, "declared: quant_method mxfp4 (gpt-oss mxfp4)"), "%s", text);
    free(text);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* Kimi-K2-Thinking's layout, its config as a copy (testdata/int4/kimi-k2-thinking: the routed
 * experts INT4 pack-quantized, symmetric, group 32; attention, shared experts, dense MLPs and
 * lm_head BF16 by its ignore list), with `group` for its group_size (0: as it is). */
#define KIMI_INT4 "testdata/int4/kimi-k2-thinking/config.json"
static char *kimi_config(const char *dir, int group, bool symmetric)
{
    char *path;
    cJSON *c = read_json(KIMI_INT4);
    cJSON *w = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "quantization_config"),
                                                "config_groups"),
                            "group_0"),
        "weights");
    ck_assert(w != NULL);
    if (group)
        cJSON_ReplaceItemInObject(w, "group_size", cJSON_CreateNumber(group));
    cJSON_ReplaceItemInObject(w, "symmetric", cJSON_CreateBool(symmetric));
    char *text = cJSON_Print(c);
    ck_assert(asprintf(&path, "%s/kimi-%d-%d.json", dir, group, symmetric) > 0);
    tu_spit(path, text, strlen(text));
    free(text);
    cJSON_Delete(c);
    return path;
}

/* quantize --like of an INT4 release gives its scheme, format, group and ignore list, and verify
 * passes the output; a group or a symmetry fp8conv does not write is refused. The experts'
 * down_proj (96 wide) is INT4 at group 32 and stays BF16 at 128, so the group is the release's. */
START_TEST(test_like_int4_release_gives_its_group)
{
    static const struct {
        int group;
        bool symmetric;
        int rc;
        const char *down; /* experts.0.down_proj's tensor: "" when refused */
    } cases[] = { { 0, true, 0, "weight_packed" }, { 128, true, 0, "weight" },
                  { 64, true, 3, "" }, { 0, false, 3, "" } };
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *ref = kimi_config(dir, cases[i].group, cases[i].symmetric), *out, *err, path[512];
        ck_assert(asprintf(&out, "%s/out%zu", dir, i) > 0);
        int rc = tu_run_fmt(&err, "quantize -q --like '%s' testdata/deepseek-moe-tiny '%s'", ref,
                            out);
        ck_assert_msg(rc == cases[i].rc, "case %zu: exit %d: %s", i, rc, err);
        if (rc) {
            ck_assert_msg(strstr(err, "not --scheme int4 as fp8conv writes it") &&
                              strstr(err, "group_size 32 or 128"),
                          "case %zu: %s", i, err);
            free(err), free(out), free(ref);
            continue;
        }
        free(err);
        ck_assert_int_eq(tu_run_fmt(&err, "verify '%s'", out), 0);
        free(err);
        snprintf(path, sizeof path, "%s/config.json", out);
        cJSON *c = read_json(path), *q = cJSON_GetObjectItem(c, "quantization_config");
        cJSON *w = cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(q, "config_groups"), "group_0"), "weights");
        ck_assert_str_eq(cJSON_GetObjectItem(q, "format")->valuestring, "pack-quantized");
        ck_assert_int_eq(cJSON_GetObjectItem(w, "num_bits")->valueint, 4);
        ck_assert_int_eq(cJSON_GetObjectItem(w, "group_size")->valueint,
                         cases[i].group ? cases[i].group : 32);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(q, "ignore")), 4);
        cJSON_Delete(c);
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_checkpoint *ck;
        ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
        snprintf(path, sizeof path, "model.layers.1.mlp.experts.0.down_proj.%s", cases[i].down);
        ck_assert_msg(fp8_checkpoint_find(ck, path, NULL), "case %zu: no %s", i, path);
        static const char *const kept[] = { "model.layers.1.mlp.shared_experts.up_proj.weight",
                                            "model.layers.1.self_attn.o_proj.weight",
                                            "model.layers.0.mlp.gate_proj.weight" };
        for (size_t k = 0; k < sizeof kept / sizeof *kept; k++) {
            const fp8_tensor_info *t = fp8_checkpoint_find(ck, kept[k], NULL);
            ck_assert_msg(t && t->dtype == FP8_DTYPE_BF16, "case %zu: %s", i, kept[k]);
        }
        fp8_checkpoint_close(ck);
        fp8_ctx_free(ctx);
        free(out);
        free(ref);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* A packed INT4 weight of the wrong width: verify's message gives INT4's packing, eight codes to
 * an I32 word ([rows, cols / 8]), not E2M1's two to a byte. */
START_TEST(test_int4_packed_shape_says_eight_codes_a_word)
{
    char *dir = tu_tmpdir(), *text, path[512];
    tensors ts = { .n = 0 };
    add(&ts, "model.layers.1.mlp.experts.0.down_proj.weight_packed", "I32", 2, 256, 11);
    add(&ts, "model.layers.1.mlp.experts.0.down_proj.weight_scale", "BF16", 2, 256, 3);
    add(&ts, "model.layers.1.mlp.experts.0.down_proj.weight_shape", "I64", 1, 2, 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_st(path, &ts, false);
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *config = tu_slurp(KIMI_INT4, NULL);
    tu_spit(path, config, strlen(config));
    free(config);
    ck_assert_int_eq(tu_run_fmt(NULL, "verify --no-values '%s'", dir), 1);
    char *args;
    ck_assert(asprintf(&args, "verify --no-values '%s'", dir) > 0);
    tu_run(args, &text, NULL);
    ck_assert_msg(strstr(text, "packed shape [256, 11] is not compressed-tensors int4's "
                               "([rows, cols / 8]"),
                  "%s", text);
    free(args);
    free(text);
    tu_tmpdir_free(dir);
}
END_TEST


/* issue 43: a reference listing 20,000 modules neither checkpoint has:
 * each is said once (the lists are compared through sorted copies, n log n;
 * the time is measured by hand, not here: see issue 43's note). */
START_TEST(test_long_ignore_list_says_each_entry_once)
{
    char *dir = tu_tmpdir(), *args, *out;
    ck_assert(asprintf(&args, "quantize -q --block 32x32 testdata/llama-tiny %s/fp8", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    char *text = tu_slurp("testdata/llama-tiny/config.json", NULL);
    cJSON *config = cJSON_Parse(text), *q = cJSON_CreateObject();
    free(text);
    cJSON_AddStringToObject(q, "quant_method", "fp8");
    cJSON_AddStringToObject(q, "activation_scheme", "dynamic");
    int block[2] = { 32, 32 };
    cJSON_AddItemToObject(q, "weight_block_size", cJSON_CreateIntArray(block, 2));
    cJSON *list = cJSON_AddArrayToObject(q, "modules_to_not_convert");
    cJSON_AddItemToArray(list, cJSON_CreateString("lm_head"));
    cJSON_AddItemToArray(list, cJSON_CreateString("model.embed_tokens"));
    char name[64];
    for (int i = 0; i < 20000; i++) {
        snprintf(name, sizeof name, "model.layers.%d.mlp.gone", i);
        cJSON_AddItemToArray(list, cJSON_CreateString(name));
    }
    cJSON_AddItemToObject(config, "quantization_config", q);
    char *json = cJSON_PrintUnformatted(config), *path;
    ck_assert(asprintf(&path, "%s/ref.json", dir) > 0);
    tu_spit(path, json, strlen(json));
    ck_assert(asprintf(&args, "verify --no-values --like %s %s/fp8", path, dir) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    size_t said = 0;
    for (const char *p = out; (p = strstr(p, "(no module of either checkpoint)")); p++)
        said++;
    ck_assert_uint_eq(said, 20000);
    free(out);
    free(args);
    free(path);
    free(json);
    cJSON_Delete(config);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("like");
    TCase *tc = tcase_create("like");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_quantize_like_reproduces_a_release, 0,
                        (int)(sizeof releases / sizeof *releases));
    tcase_add_test(tc, test_another_block_size_is_a_difference);
    tcase_add_test(tc, test_another_ignore_set_is_a_difference);
    tcase_add_test(tc, test_another_scale_dtype_is_a_difference);
    tcase_add_test(tc, test_equal_to_a_loader_is_no_difference);
    tcase_add_test(tc, test_long_ignore_list_says_each_entry_once);
    tcase_add_test(tc, test_calibrated_kv_cache_is_a_warning);
    tcase_add_test(tc, test_static_activations_are_refused);
    tcase_add_test(tc, test_read_only_layout_is_refused_with_what_is_written);
    tcase_add_test(tc, test_like_int4_release_gives_its_group);
    tcase_add_test(tc, test_int4_packed_shape_says_eight_codes_a_word);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
