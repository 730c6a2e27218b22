/*
 * check_edges.c - issue 23's edge inputs of convert, quantize, verify and
 * diff, each as the test that found it: empty FP8 weights, NaN codes and
 * overflowing products on convert's exact path, F64 weights, checkpoints
 * with nothing to quantize, NaN in kept tensors, bad configs and --like
 * references, a shard that shrinks during a run, and diff's ULP figure.
 */
#include "golden.h"

#include <stdarg.h>

/* One tensor of a synthetic checkpoint: every element holds `bits` (the
 * dtype's raw pattern, little-endian), except element `at` (when `one`)
 * which holds `at_bits`. */
typedef struct {
    const char *name;
    fp8_dtype dtype;
    int rank;
    uint64_t shape[3];
    uint32_t bits;
    bool one;
    uint64_t at;
    uint32_t at_bits;
} edge_tensor;

static unsigned dtype_size(fp8_dtype d)
{
    return d == FP8_DTYPE_F64 ? 8 : d == FP8_DTYPE_F32 ? 4 : d == FP8_DTYPE_BF16 ? 2 : 1;
}

/* Writes `path` (a .safetensors file) holding the tensors. */
static void write_file(const char *path, const edge_tensor *t, size_t n)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fp8_writer_add_tensor(ctx, w, t[i].name, t[i].dtype, t[i].rank,
                                            t[i].shape) == FP8_OK,
                      "%s", fp8_ctx_message(ctx));
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    for (size_t k = 0; k < fp8_writer_tensor_count(w); k++) { /* in the writer's order */
        size_t i = 0;
        while (strcmp(t[i].name, fp8_writer_tensor(w, k)->name))
            i++;
        uint64_t elems = 1;
        for (int d = 0; d < t[i].rank; d++)
            elems *= t[i].shape[d];
        unsigned sz = dtype_size(t[i].dtype);
        unsigned char *buf = malloc(elems * sz + 1);
        for (uint64_t e = 0; e < elems; e++) {
            uint64_t bits = t[i].one && e == t[i].at ? t[i].at_bits : t[i].bits;
            if (t[i].dtype == FP8_DTYPE_F64) { /* bits: an F32 pattern, widened */
                float f;
                uint32_t b32 = (uint32_t)bits;
                memcpy(&f, &b32, 4);
                double x = f;
                memcpy(&bits, &x, 8);
            }
            memcpy(buf + e * sz, &bits, sz);
        }
        if (elems)
            ck_assert(fp8_writer_write(ctx, w, buf, elems * sz) == FP8_OK);
        free(buf);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
}

/* A directory checkpoint DIR/NAME: one model.safetensors and config.json
 * (when `config` is not NULL); returns its path. */
static char *make_ck(const char *dir, const char *name, const char *config, const edge_tensor *t,
                     size_t n)
{
    char *model, *path;
    ck_assert(asprintf(&model, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    write_file(path, t, n);
    free(path);
    if (config) {
        ck_assert(asprintf(&path, "%s/config.json", model) > 0);
        tu_spit(path, config, strlen(config));
        free(path);
    }
    return model;
}

/* Runs fp8conv with the formatted arguments; returns the exit status, and
 * stdout and stderr together in *text (caller frees). */
__attribute__((format(printf, 2, 3)))
static int run(char **text, const char *fmt, ...)
{
    va_list ap;
    char *args, *out, *err;
    va_start(ap, fmt);
    ck_assert(vasprintf(&args, fmt, ap) > 0);
    va_end(ap);
    int rc = tu_run(args, &out, &err);
    ck_assert(asprintf(text, "fp8conv %s\n%s%s", args, out, err) > 0);
    free(args);
    free(out);
    free(err);
    return rc;
}

/* The value of BF16 bits b. */
static float bf16_value(uint32_t b)
{
    uint32_t u = b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A tensor of one value everywhere. */
#define T(n, dt, r, s0, s1, s2, b)                                                         \
    { .name = (n), .dtype = (dt), .rank = (r), .shape = { (s0), (s1), (s2) }, .bits = (b) }

#define F32_ONE 0x3f800000u
#define BF16_ONE 0x3f80u
#define E4M3_ONE 0x38u
#define HF_FP8_CONFIG                                                                      \
    "{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": \"fp8\", "     \
    "\"fmt\": \"e4m3\", \"activation_scheme\": \"dynamic\", \"weight_block_size\": [128, " \
    "128]}}\n"
#define LLAMA_CONFIG "{\"model_type\": \"llama\"}\n"

/* ---------------------------------------------------------------- empty weights */

/* 23.1: convert divided by a column count of 0 (SIGFPE), leaving its
 * temporary directory; it refuses the weight now, and verify warns */
static const char *const empty_options[] = { "--scheme channel", "--scheme tensor",
                                             "--scheme mxfp8", "--block 64x64",
                                             "--block 256x256" };

START_TEST(test_convert_refuses_an_empty_fp8_weight)
{
    bool experts = _i == 4;
    const char *w = experts ? "model.layers.0.mlp.experts.gate_up_proj"
                            : "model.layers.0.mlp.down_proj.weight";
    char *dir = tu_tmpdir(), *scale, *text;
    ck_assert(asprintf(&scale, "%s_scale_inv", w) > 0);
    edge_tensor t[] = {
        T(w, FP8_DTYPE_F8_E4M3, experts ? 3 : 2, experts ? 4 : 256, experts ? 256 : 0, 0,
          E4M3_ONE),
        T(scale, FP8_DTYPE_F32, experts ? 3 : 2, experts ? 4 : 2, experts ? 2 : 0, 0, F32_ONE),
        T("model.layers.0.mlp.up_proj.weight", FP8_DTYPE_F8_E4M3, 2, 128, 128, 0, E4M3_ONE),
        T("model.layers.0.mlp.up_proj.weight_scale_inv", FP8_DTYPE_F32, 2, 1, 1, 0, F32_ONE),
    };
    char *in = make_ck(dir, "in", HF_FP8_CONFIG, t, 4);
    int rc = run(&text, "convert %s '%s' '%s/out'", empty_options[_i], in, dir);
    ck_assert_msg(rc == 3, "exit %d: %s", rc, text);
    ck_assert_msg(strstr(text, w) && strstr(text, "dimension of 0"), "%s", text);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    ck_assert_int_eq(count_entries(dir, ".out"), 0);
    free(text);
    rc = run(&text, "verify --strict --no-values '%s'", in);
    ck_assert_msg(rc == 1 && strstr(text, "[empty-weight]") && strstr(text, w), "exit %d: %s", rc,
                  text);
    free(text);
    /* the other commands take it as they always did: no values, nothing to do */
    ck_assert_int_eq(run(&text, "dequantize-for-export -q '%s' '%s/bf16'", in, dir), 0);
    free(text);
    ck_assert_int_eq(run(&text, "diff -q --dequant '%s' '%s'", in, in), 0);
    free(text);
    free(in);
    free(scale);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- bad values */

/* 23.2, 23.3: the exact path copied NaN codes and codes whose product with
 * their scale overflows, exit 0; the value path called the overflow
 * "+infinity; only finite values can be quantized" */
static const struct {
    const char *options, *path;
} bad_value_targets[] = {
    { "--block 64x64", "exact" },          { "--format compressed-tensors", "exact" },
    { "--scheme channel", "exact" },       { "--block 96x96", "exact" },
    { "--scheme mxfp8", "values" },        { "--scheme mxfp8 --format modelopt", "values" },
};

START_TEST(test_convert_refuses_nan_codes_and_overflowing_products)
{
    char *dir = tu_tmpdir(), *text;
    const char *w = "model.layers.0.mlp.up_proj.weight";
    for (int overflow = 0; overflow < 2; overflow++) {
        edge_tensor t[] = {
            { .name = w, .dtype = FP8_DTYPE_F8_E4M3, .rank = 2, .shape = { 128, 128 },
              .bits = E4M3_ONE, .one = true, .at = 300, .at_bits = overflow ? 0x7E : 0x7F },
            T("model.layers.0.mlp.up_proj.weight_scale_inv", FP8_DTYPE_F32, 2, 1, 1, 0,
              overflow ? 0x7f61b1e6u /* 3e38 */ : F32_ONE),
            T("model.norm.weight", FP8_DTYPE_BF16, 1, 128, 0, 0, BF16_ONE),
        };
        char *in = make_ck(dir, overflow ? "overflow" : "nan", HF_FP8_CONFIG, t, 3);
        int rc = run(&text, "convert -q %s '%s' '%s/out'", bad_value_targets[_i].options, in, dir);
        ck_assert_msg(rc == 3, "exit %d: %s", rc, text);
        ck_assert_msg(strstr(text, w) && strstr(text, "model.safetensors") &&
                          strstr(text, "element 300"),
                      "%s", text);
        ck_assert_msg(strstr(text, overflow ? "0x7e (448) times its scale 3e+38 overflows fp32"
                                            : "NaN code 0x7f"),
                      "%s", text);
        ck_assert_int_eq(count_entries(dir, "out"), 0);
        ck_assert_int_eq(count_entries(dir, ".out"), 0);
        free(text);
        /* a scale that large under codes that do not overflow converts */
        if (overflow) {
            t[0].one = false;
            char *ok = make_ck(dir, "ok", HF_FP8_CONFIG, t, 3);
            rc = run(&text, "convert -q %s '%s' '%s/out'", bad_value_targets[_i].options, ok, dir);
            ck_assert_msg(rc == 0, "%s", text);
            free(text);
            free(ok);
        }
        free(in);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* The same on MX input, whose E8M0 scales are copied exactly: a scale byte
 * 0xFE (2^127) over codes that are not zero */
START_TEST(test_convert_refuses_an_overflowing_mx_scale)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--scheme mxfp8", "testdata/llama-tiny");
    char *shard, *text;
    const char *name = "model.layers.0.mlp.down_proj.weight_scale";
    ck_assert(asprintf(&shard, "%s/model-00001-of-00002.safetensors", fp8) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f;
    ck_assert(fp8_file_open(ctx, shard, &f) == FP8_OK);
    const fp8_tensor_info *t = NULL;
    for (size_t i = 0; i < fp8_file_tensor_count(f); i++)
        if (!strcmp(fp8_file_tensor(f, i)->name, name))
            t = fp8_file_tensor(f, i);
    ck_assert(t && t->dtype == FP8_DTYPE_U8);
    FILE *fp = fopen(shard, "r+b");
    ck_assert(fp && fseek(fp, (long)(8 + fp8_file_header_size(f) + t->begin + 20), SEEK_SET) == 0);
    ck_assert(fputc(0xFE, fp) == 0xFE && fclose(fp) == 0);
    fp8_file_close(f);
    fp8_ctx_free(ctx);
    /* scale 20, of 17 a row: row 1's fourth group, elements 544 + 3 * 32 = 640 to 671 */
    int rc = run(&text, "convert -q --format modelopt '%s' '%s/out'", fp8, dir);
    const char *at = strstr(text, "model.layers.0.mlp.down_proj.weight': element ");
    ck_assert_msg(rc == 3 && at && strstr(text, "overflows bf16"), "%s", text);
    long e = strtol(at + strlen("model.layers.0.mlp.down_proj.weight': element "), NULL, 10);
    ck_assert_msg(e >= 640 && e < 672, "%s", text);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    free(text);
    free(shard);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- F64 weights */

/* The ignore list of the quantization_config of DIR/config.json (a cJSON
 * array; the caller deletes *config). */
static const cJSON *ignore_list(const char *dir, cJSON **config)
{
    char *path;
    ck_assert(asprintf(&path, "%s/config.json", dir) > 0);
    *config = read_json(path);
    free(path);
    return cJSON_GetObjectItem(cJSON_GetObjectItem(*config, "quantization_config"),
                               "modules_to_not_convert");
}

/* 23.4: a 2-D F64 .weight was kept, left out of the ignore list (so a
 * loader expects FP8 codes for it), and verify said nothing */
START_TEST(test_f64_weight_is_kept_in_the_ignore_list_and_verify_checks_it)
{
    char *dir = tu_tmpdir(), *text, *out;
    edge_tensor t[] = {
        T("model.layers.0.mlp.down_proj.weight", FP8_DTYPE_F64, 2, 128, 128, 0, 0x3f000000u),
        T("model.layers.0.mlp.up_proj.weight", FP8_DTYPE_BF16, 2, 128, 128, 0, BF16_ONE),
        T("model.norm.weight", FP8_DTYPE_BF16, 1, 128, 0, 0, BF16_ONE),
    };
    char *in = make_ck(dir, "in", LLAMA_CONFIG, t, 3);
    int rc = run(&text, "quantize '%s' '%s/out'", in, dir);
    ck_assert_msg(rc == 0 && strstr(text, "warning") &&
                      strstr(text, "'model.layers.0.mlp.down_proj.weight' stays F64"),
                  "%s", text);
    free(text);
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    cJSON *config;
    const cJSON *list = ignore_list(out, &config);
    ck_assert_int_eq(cJSON_GetArraySize(list), 1);
    ck_assert_str_eq(cJSON_GetArrayItem(list, 0)->valuestring, "model.layers.0.mlp.down_proj");
    rc = run(&text, "verify --strict --no-values '%s'", out);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    /* without it in the ignore list, verify says so */
    char *path, *json;
    cJSON_DeleteItemFromArray((cJSON *)list, 0);
    ck_assert(asprintf(&path, "%s/config.json", out) > 0);
    json = cJSON_Print(config);
    tu_spit(path, json, strlen(json));
    rc = run(&text, "verify --strict --no-values '%s'", out);
    ck_assert_msg(rc == 1 && strstr(text, "[not-in-ignore-list]") &&
                      strstr(text, "down_proj.weight stays F64"),
                  "%s", text);
    free(text);
    free(json);
    free(path);
    cJSON_Delete(config);
    free(out);
    free(in);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- nothing quantized */

/* 23.7, 23.8: a quantize that quantized nothing wrote a quantization_config
 * without a word, and warned that vLLM would not load q_proj's blocks at
 * TP=1 (the block 48x48 does not divide llama-tiny's 64 k_proj rows) */
START_TEST(test_nothing_quantized_is_warned_without_tp_warning)
{
    char *dir = tu_tmpdir(), *text;
    int rc = run(&text, "quantize --block 48x48 --ignore . testdata/llama-tiny '%s/out'", dir);
    ck_assert_msg(rc == 0 && strstr(text, "no tensor was quantized") &&
                      strstr(text, "declares a quantization_config all the same"),
                  "%s", text);
    ck_assert_msg(!strstr(text, "TP="), "%s", text);
    free(text);
    /* the same block with something quantized: the TP warning */
    rc = run(&text, "quantize --block 48x48 testdata/llama-tiny '%s/out2'", dir);
    ck_assert_msg(rc == 0 && strstr(text, "TP=1") && !strstr(text, "no tensor was quantized"),
                  "%s", text);
    free(text);
    tu_tmpdir_free(dir);
}
END_TEST

/* 23.8: a single file quantized had no config.json for its
 * quantization_config, and quantize said nothing (but of a block size other
 * than 128x128); it prints the quantization_config now, and that config,
 * put beside the output, makes it load */
START_TEST(test_single_file_says_the_quantization_config_it_needs)
{
    char *dir = tu_tmpdir(), *text, *path;
    int rc = run(&text, "quantize --block 32x32 testdata/llama-tiny/model-00001-of-00002.safetensors "
                        "'%s/x.safetensors'", dir);
    const char *key = "the model's config.json needs \"quantization_config\": ";
    char *at = strstr(text, key);
    ck_assert_msg(rc == 0 && at, "%s", text);
    at += strlen(key);
    *strchr(at, '\n') = '\0';
    cJSON *qc = cJSON_Parse(at);
    ck_assert_msg(qc != NULL, "not JSON: %s", at);
    ck_assert_str_eq(cJSON_GetObjectItem(qc, "quant_method")->valuestring, "fp8");
    ck_assert_int_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(qc, "weight_block_size"), 1)->valueint,
                     32);
    free(text);
    rc = run(&text, "verify --no-values '%s/x.safetensors'", dir);
    ck_assert_msg(rc == 1 && strstr(text, "[no-quant-config]"), "%s", text);
    free(text);
    cJSON *config = read_json("testdata/llama-tiny/config.json");
    cJSON_AddItemToObject(config, "quantization_config", qc);
    char *json = cJSON_Print(config);
    ck_assert(asprintf(&path, "%s/config.json", dir) > 0);
    tu_spit(path, json, strlen(json));
    rc = run(&text, "verify --strict --no-values '%s/x.safetensors'", dir);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    free(path);
    free(json);
    cJSON_Delete(config);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- a shard cut during a run */

/* 23.10: a shard that shrank after it was opened (and validated) is an I/O
 * error, exit 4 as fp8conv(1) has it, not bad input (3) */
START_TEST(test_shard_cut_after_open_is_an_io_error)
{
    char *dir = tu_tmpdir(), *path;
    edge_tensor t[] = {
        T("a.weight", FP8_DTYPE_BF16, 2, 64, 64, 0, BF16_ONE),
        T("b.weight", FP8_DTYPE_BF16, 2, 64, 64, 0, BF16_ONE),
    };
    ck_assert(asprintf(&path, "%s/m.safetensors", dir) > 0);
    write_file(path, t, 2);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f;
    ck_assert(fp8_file_open(ctx, path, &f) == FP8_OK);
    const fp8_tensor_info *last = fp8_file_tensor(f, 1);
    struct stat sb;
    ck_assert(stat(path, &sb) == 0);
    ck_assert(truncate(path, sb.st_size - 100) == 0);
    unsigned char buf[64 * 64 * 2];
    ck_assert_int_eq(fp8_file_read(ctx, f, last, 0, buf, sizeof buf), FP8_ERR_IO);
    ck_assert_msg(strstr(fp8_ctx_message(ctx), "changed during the run"), "%s",
                  fp8_ctx_message(ctx));
    fp8_file_close(f);
    /* opened after the cut, it is malformed: bad input */
    ck_assert_int_eq(fp8_file_open(ctx, path, &f), FP8_ERR_BAD_INPUT);
    fp8_ctx_free(ctx);
    free(path);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- bad configs */

/* 23.5: a quantization_config that is no object was ignored, and the
 * scales (of 32x32 blocks, then taken for 128x128) reported as bad */
static const char *const bad_qc[][2] = { { "\"fp8\"", "a string" }, { "[1, 2]", "an array" } };

START_TEST(test_quantization_config_of_the_wrong_type_is_the_configs_problem)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", "testdata/llama-tiny");
    char *path, *text, *want;
    ck_assert(asprintf(&path, "%s/config.json", fp8) > 0);
    cJSON *config = read_json(path);
    cJSON_ReplaceItemInObject(config, "quantization_config", cJSON_Parse(bad_qc[_i][0]));
    char *json = cJSON_Print(config);
    tu_spit(path, json, strlen(json));
    ck_assert(asprintf(&want, "config.json: quantization_config is %s, expected an object",
                       bad_qc[_i][1]) > 0);
    const char *commands[] = { "dequantize-for-export -q", "convert -q --block 16x16" };
    for (int k = 0; k < 2; k++) {
        int rc = run(&text, "%s '%s' '%s/out'", commands[k], fp8, dir);
        ck_assert_msg(rc == 3 && strstr(text, want) && !strstr(text, "scale"), "%s", text);
        free(text);
    }
    int rc = run(&text, "verify --no-values '%s'", fp8);
    ck_assert_msg(rc == 1 && strstr(text, "[quant-config]") && strstr(text, want), "%s", text);
    free(text);
    free(want);
    free(json);
    cJSON_Delete(config);
    free(path);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* 23.6: a bad "re:" entry of a --like reference was reported as an
 * "--ignore '^(...)'" the user never gave */
START_TEST(test_like_names_the_references_bad_regex)
{
    char *dir = tu_tmpdir(), *ref = quantize_into(dir, "--scheme channel", "testdata/llama-tiny");
    char *path, *text;
    ck_assert(asprintf(&path, "%s/config.json", ref) > 0);
    cJSON *config = read_json(path);
    cJSON *ignore = cJSON_GetObjectItem(cJSON_GetObjectItem(config, "quantization_config"),
                                        "ignore");
    ck_assert(cJSON_IsArray(ignore));
    cJSON_AddItemToArray(ignore, cJSON_CreateString("re:model.(layers"));
    char *json = cJSON_Print(config);
    tu_spit(path, json, strlen(json));
    int rc = run(&text, "quantize --like '%s' testdata/llama-tiny '%s/out'", ref, dir);
    ck_assert_msg(rc == 3 && strstr(text, "--like") && strstr(text, ref) &&
                      strstr(text, "'re:model.(layers'") && strstr(text, "not a POSIX extended regex") &&
                      !strstr(text, "--ignore"),
                  "%s", text);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    free(text);
    free(json);
    cJSON_Delete(config);
    free(path);
    free(ref);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- NaN kept */

/* A 3-D experts tensor named as a scale (experts.k_scale, a KV-cache scale
 * name) was quantized like fused experts, and dequantize then found no FP8
 * weight in quantize's output (found by fuzz_dir, 2026-11-24): quantize keeps
 * it, and its output dequantizes. */
START_TEST(test_experts_tensor_named_as_a_scale_is_kept)
{
    char *dir = tu_tmpdir(), *text;
    edge_tensor t[] = {
        T("model.layers.0.mlp.experts.k_scale", FP8_DTYPE_BF16, 3, 2, 32, 1, BF16_ONE),
        T("model.layers.0.mlp.experts.gate_up_proj", FP8_DTYPE_BF16, 3, 2, 128, 128, BF16_ONE),
    };
    char *in = make_ck(dir, "in", LLAMA_CONFIG, t, 2);
    int rc = run(&text, "quantize --json '%s' '%s/out'", in, dir);
    ck_assert_msg(rc == 0 && strstr(text, "named as a scale, not a weight"), "%s", text);
    free(text);
    rc = run(&text, "inspect '%s/out'", dir);
    ck_assert_msg(rc == 0 && strstr(text, "model.layers.0.mlp.experts.k_scale ") &&
                      !strstr(text, "k_scale_scale"),
                  "%s", text);
    free(text);
    rc = run(&text, "dequantize-for-export '%s/out' '%s/bf16'", dir, dir);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    free(in);
    tu_tmpdir_free(dir);
}
END_TEST

/* verify --against re-quantizes every FP8 weight of the checkpoint, also one
 * the default keep rules would have kept (a norm quantized with
 * --no-default-ignore: fuzz_dir, 2026-11-24, found it counted as not
 * reproduced). */
START_TEST(test_against_requantizes_weights_kept_by_default)
{
    char *dir = tu_tmpdir(), *text;
    edge_tensor t[] = {
        T("model.layers.0.mlp.up_proj.weight", FP8_DTYPE_BF16, 2, 64, 64, 0, BF16_ONE),
        T("model.norm.weight", FP8_DTYPE_BF16, 2, 64, 64, 0, BF16_ONE),
    };
    char *in = make_ck(dir, "in", LLAMA_CONFIG, t, 2);
    int rc = run(&text, "quantize -q --no-default-ignore --block 32x16 '%s' '%s/q'", in, dir);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    rc = run(&text, "verify --against '%s' '%s/q'", in, dir);
    ck_assert_msg(rc == 0 && strstr(text, "reproduces 2 of 2 FP8 weights"), "%s", text);
    free(text);
    free(in);
    tu_tmpdir_free(dir);
}
END_TEST

/* A key twice in one object of config.json (found by fuzz_dir, 2026-11-24):
 * cJSON reads the first and Python's json, which every loader uses, the last,
 * so dequantize-for-export judged and wrote what no loader reads (it dropped
 * the first quantization_config and kept the second).  Every command refuses
 * it now, naming the file and the key (exit 3; verify: a [container]
 * error, exit 1); a nested duplicate too. */
START_TEST(test_duplicate_json_key_is_refused)
{
    char *dir = tu_tmpdir(), *text;
    edge_tensor t[] = {
        T("model.layers.0.mlp.up_proj.weight", FP8_DTYPE_BF16, 2, 128, 128, 0, BF16_ONE),
    };
    static const char *const configs[] = {
        "{\"model_type\": \"llama\", \"quantization_config\": {\"quant_method\": \"fp8\"}, "
        "\"quantization_config\": \"ue8m0\"}\n",
        "{\"model_type\": \"llama\", \"text_config\": {\"hidden_size\": 128, "
        "\"hidden_size\": 256}}\n",
    };
    static const char *const keys[] = { "'quantization_config'", "'hidden_size'" };
    for (int k = 0; k < 2; k++) {
        char name[16];
        snprintf(name, sizeof name, "dup%d", k);
        char *in = make_ck(dir, name, configs[k], t, 1);
        const char *cmds[] = { "inspect '%s'", "verify '%s'", "quantize '%s' '%s.out'",
                               "dequantize-for-export '%s' '%s.out'" };
        for (size_t c = 0; c < sizeof cmds / sizeof *cmds; c++) {
            int rc = run(&text, cmds[c], in, in);
            ck_assert_msg(rc == (c == 1 ? 1 : 3) && (c != 1 || strstr(text, "[container]")) &&
                              strstr(text, "config.json: key ") && strstr(text, keys[k]) &&
                              strstr(text, "appears twice"),
                          "%d: %s", rc, text);
            free(text);
            char *out;
            ck_assert(asprintf(&out, "%s.out", in) > 0);
            ck_assert_msg(access(out, F_OK) != 0, "%s left behind", out);
            free(out);
        }
        free(in);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* 23.9: a NaN in a kept tensor (a norm) was copied without a word */
START_TEST(test_nan_in_a_kept_tensor_is_warned)
{
    char *dir = tu_tmpdir(), *text;
    edge_tensor t[] = {
        T("model.layers.0.mlp.up_proj.weight", FP8_DTYPE_BF16, 2, 128, 128, 0, BF16_ONE),
        { .name = "model.norm.weight", .dtype = FP8_DTYPE_BF16, .rank = 1, .shape = { 128 },
          .bits = BF16_ONE, .one = true, .at = 7, .at_bits = 0x7fc0 },
        { .name = "model.embed_tokens.weight", .dtype = FP8_DTYPE_F32, .rank = 2,
          .shape = { 64, 128 }, .bits = F32_ONE, .one = true, .at = 4099, .at_bits = 0xffc00001u },
    };
    char *in = make_ck(dir, "in", LLAMA_CONFIG, t, 3);
    int rc = run(&text, "quantize '%s' '%s/out'", in, dir);
    ck_assert_msg(rc == 0, "%s", text);
    ck_assert_msg(strstr(text, "tensor 'model.norm.weight' (kept as BF16) holds NaN, first at "
                               "element 7") &&
                      strstr(text, "tensor 'model.embed_tokens.weight' (kept as F32) holds NaN, "
                                   "first at element 4099"),
                  "%s", text);
    ck_assert_msg(!strstr(text, "up_proj.weight' (kept"), "%s", text);
    free(text);
    rc = run(&text, "convert --block 64x64 '%s/out' '%s/c'", dir, dir);
    ck_assert_msg(rc == 0 && strstr(text, "'model.norm.weight' (kept as BF16) holds NaN"), "%s",
                  text);
    free(text);
    /* and nothing is said of a NaN-free model */
    t[1].one = t[2].one = false;
    char *clean = make_ck(dir, "clean", LLAMA_CONFIG, t, 3);
    rc = run(&text, "quantize '%s' '%s/out2'", clean, dir);
    ck_assert_msg(rc == 0 && !strstr(text, "NaN"), "%s", text);
    free(text);
    free(clean);
    free(in);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- diff's ulps */

/* 23.11: a value whose sign flipped counted as the distance across zero
 * (2 x 0x3A83 ulps of BF16 for 0.001 against -0.001), hiding every real
 * ulp figure; it is a sign change now, counted apart */
START_TEST(test_diff_counts_sign_changes_apart_from_ulps)
{
    char *dir = tu_tmpdir(), *text;
    edge_tensor t[] = {
        T("x.weight", FP8_DTYPE_BF16, 2, 8, 8, 0, 0x3A83),
        T("y.weight", FP8_DTYPE_BF16, 2, 8, 8, 0, 0x3A83),
    };
    char *a = make_ck(dir, "a", LLAMA_CONFIG, t, 2);
    t[0].one = t[1].one = true;
    t[0].at = 5, t[0].at_bits = 0xBA83; /* the sign flipped */
    t[1].at = 2, t[1].at_bits = 0x3A86; /* 3 ulp */
    char *b = make_ck(dir, "b", LLAMA_CONFIG, t, 2);
    int rc = run(&text, "diff '%s' '%s'", a, b);
    ck_assert_msg(rc == 1, "%s", text);
    float v = bf16_value(0x3A83), w = bf16_value(0x3A86);
    char want_x[160], want_y[160];
    snprintf(want_x, sizeof want_x, "x.weight: 1 of 64 elements, first at 5 [0, 5], "
             "max |a - b| %.9g, max 0 ulp of BF16, 1 of opposite sign, rel error 0.25, "
             "cosine 0.968750, SNR 12.04 dB\n", 2.0 * v); /* 2v of 8v; 62/64; 10 log10 16 */
    snprintf(want_y, sizeof want_y, "y.weight: 1 of 64 elements, first at 2 [0, 2], "
             "max |a - b| %.9g, max 3 ulp of BF16, rel error ", (double)w - v);
    ck_assert_msg(strstr(text, want_x) && strstr(text, want_y), "%s", text);
    free(text);
    rc = run(&text, "diff --json '%s' '%s'", a, b);
    char *json = strchr(text, '{');
    cJSON *r = json ? cJSON_Parse(json) : NULL;
    ck_assert_msg(rc == 1 && r, "%s", text);
    const cJSON *x = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "differences"), 0);
    const cJSON *y = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "differences"), 1);
    ck_assert_int_eq(cJSON_GetObjectItem(x, "max_ulp")->valueint, 0);
    ck_assert_int_eq(cJSON_GetObjectItem(x, "sign_changes")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(y, "max_ulp")->valueint, 3);
    ck_assert(cJSON_GetObjectItem(y, "sign_changes") == NULL);
    cJSON_Delete(r);
    free(text);
    free(a);
    free(b);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("edges");
    TCase *tc = tcase_create("edges");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_convert_refuses_an_empty_fp8_weight, 0,
                        sizeof empty_options / sizeof *empty_options);
    tcase_add_loop_test(tc, test_convert_refuses_nan_codes_and_overflowing_products, 0,
                        sizeof bad_value_targets / sizeof *bad_value_targets);
    tcase_add_test(tc, test_convert_refuses_an_overflowing_mx_scale);
    tcase_add_test(tc, test_f64_weight_is_kept_in_the_ignore_list_and_verify_checks_it);
    tcase_add_test(tc, test_nothing_quantized_is_warned_without_tp_warning);
    tcase_add_test(tc, test_single_file_says_the_quantization_config_it_needs);
    tcase_add_test(tc, test_shard_cut_after_open_is_an_io_error);
    tcase_add_loop_test(tc, test_quantization_config_of_the_wrong_type_is_the_configs_problem, 0,
                        sizeof bad_qc / sizeof *bad_qc);
    tcase_add_test(tc, test_like_names_the_references_bad_regex);
    tcase_add_test(tc, test_nan_in_a_kept_tensor_is_warned);
    tcase_add_test(tc, test_diff_counts_sign_changes_apart_from_ulps);
    tcase_add_test(tc, test_duplicate_json_key_is_refused);
    tcase_add_test(tc, test_experts_tensor_named_as_a_scale_is_kept);
    tcase_add_test(tc, test_against_requantizes_weights_kept_by_default);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
