/*
 * check_dequantize.c - fp8conv dequantize-for-export end to end:
 *   - every case of tests/oracle/dequant_cases.json against the goldens the
 *     independent numpy/ml_dtypes oracle wrote (testdata/golden/dequant/),
 *     for every format quantize writes and the official DeepSeek-V3 layout
 *     with scales in another shard;
 *   - the round trip quantize -> dequantize -> quantize;
 *   - bad input (no scale, NaN code, E8M0 0xFF, f16 overflow) leaves nothing.
 */
#include "golden.h"

#include <signal.h>

#define CASES "tests/oracle/dequant_cases.json"
#define QUANT_CASES "tests/oracle/quant_cases.json"
#define GOLDEN_DIR "testdata/golden/dequant"

static const cJSON *find_case(const cJSON *cases, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
        if (strcmp(cJSON_GetObjectItem(c, "name")->valuestring, name) == 0)
            return c;
    ck_abort_msg("no case %s", name);
    return NULL;
}

/* No key of the config mentions quantization, at any depth. */
static void expect_no_quant_key(const cJSON *item, const char *where)
{
    for (const cJSON *c = item ? item->child : NULL; c; c = c->next) {
        ck_assert_msg(!c->string || !strstr(c->string, "quant"), "%s: key %s remains", where,
                      c->string);
        expect_no_quant_key(c, where);
    }
}

START_TEST(test_dequantize_matches_numpy_oracle)
{
    cJSON *cases = read_json(CASES), *qcases = read_json(QUANT_CASES);
    const cJSON *c = cJSON_GetArrayItem(cases, _i);
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *in = cJSON_GetObjectItem(c, "input");
    char *dir = tu_tmpdir(), *input, *args, *err, *gpath, *out;
    const char *copied_from;
    if (cJSON_GetObjectItem(in, "quant_case")) { /* first make the FP8 checkpoint */
        const cJSON *q = find_case(qcases, cJSON_GetObjectItem(in, "quant_case")->valuestring);
        char *qargs = join_args(cJSON_GetObjectItem(q, "args"));
        copied_from = cJSON_GetObjectItem(q, "input")->valuestring;
        ck_assert(asprintf(&input, "%s/fp8", dir) > 0);
        ck_assert(asprintf(&args, "quantize -q %s '%s' '%s'", qargs, copied_from, input) > 0);
        ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
        free(args);
        free(qargs);
    } else {
        input = strdup(cJSON_GetObjectItem(in, "dir")->valuestring);
        copied_from = input;
    }
    char *argstr = join_args(cJSON_GetObjectItem(c, "args"));
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    ck_assert(asprintf(&args, "dequantize-for-export -q -j 2 %s '%s' '%s'", argstr, input, out) > 0);
    int rc = tu_run(args, NULL, &err);
    ck_assert_msg(rc == 0, "case %s: exit %d: %s", name, rc, err);
    ck_assert(asprintf(&gpath, "%s/%s.json", GOLDEN_DIR, name) > 0);
    cJSON *golden = read_json(gpath);
    check_golden_output(out, copied_from, GOLDEN_DIR, name, golden);
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", out);
    if (exists(path)) {
        cJSON *config = read_json(path);
        expect_no_quant_key(config, name);
        cJSON_Delete(config);
    }
    snprintf(path, sizeof path, "%s/hf_quant_config.json", out);
    ck_assert(!exists(path));
    cJSON_Delete(golden);
    free(gpath);
    free(err);
    free(args);
    free(argstr);
    free(out);
    free(input);
    cJSON_Delete(qcases);
    cJSON_Delete(cases);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- round trips */

/*
 * quantize -> dequantize (bf16) -> quantize gives the same FP8 bytes when
 * the scales are the float amax / 448: the largest element of a group comes
 * back as bf16(448 * s) = amax, so s is the same, and every other element
 * comes back within 2^-9 of q * s, far inside half an E4M3 step, so q is the
 * same.  Power-of-two scales (ue8m0, mxfp8 rceil) do not: an amax whose
 * code rounds down to 224 * 2^E comes back as exactly 224 * 2^E, for which
 * the next smaller exponent suffices; codes and scales differ, values agree
 * (diff --dequant).  Tensors that were F16 or F32 do not either: bf16 cannot
 * hold their amax.
 */
static const char *const exact_schemes[] = {
    "--scheme block --format hf-fp8",
    "--scheme block --format compressed-tensors",
    "--scheme block --format hf-fp8 --block 64x32",
    "--scheme channel --format compressed-tensors",
    "--scheme channel --format modelopt",
    "--scheme tensor --format hf-fp8",
    "--scheme tensor --format compressed-tensors",
    "--scheme mxfp8 --format compressed-tensors --mx-rounding floor",
};
static const char *const value_schemes[] = {
    "--scheme block --format hf-fp8 --scale-fmt ue8m0",
    "--scheme mxfp8 --format compressed-tensors",
    "--scheme mxfp8 --format modelopt",
};
static const char *const inputs[] = { "testdata/llama-tiny", "testdata/deepseek-moe-tiny",
                                      "testdata/quant-edge" };

/* Runs the round trip; returns the JSON report of `diff [--dequant] q1 q2`. */
static cJSON *round_trip(const char *dir, const char *scheme, const char *input, bool dequant,
                         int *rc)
{
    char *args, *out;
    ck_assert(asprintf(&args, "quantize -q %s %s %s/q1 && %s dequantize-for-export -q %s/q1 "
                              "%s/bf16 && %s quantize -q %s %s/bf16 %s/q2",
                       scheme, input, dir, FP8CONV_BIN, dir, dir, FP8CONV_BIN, scheme, dir,
                       dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    ck_assert(asprintf(&args, "diff --json %s %s/q1 %s/q2", dequant ? "--dequant" : "", dir,
                       dir) > 0);
    *rc = tu_run(args, &out, NULL);
    free(args);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "diff --json: %s", out);
    free(out);
    return j;
}

/* Only tensors made from the F16 and F32 weights of quant-edge may differ. */
static void expect_only_non_bf16_sources(const cJSON *report, const char *what)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(report, "differences"))
    {
        const char *name = cJSON_GetObjectItem(d, "name")->valuestring;
        ck_assert_msg(strstr(name, "self_attn.v_proj.weight") ||
                          strstr(name, "self_attn.o_proj.weight"),
                      "%s: %s changed in the round trip", what, name);
    }
}

START_TEST(test_round_trip_gives_the_same_fp8_bytes)
{
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        /* per-channel ModelOpt experts are refused (vLLM loads per-tensor
         * expert scales only): the dense llama alone */
        if (strstr(exact_schemes[_i], "channel --format modelopt") && i > 0)
            continue;
        char *dir = tu_tmpdir();
        int rc;
        cJSON *report = round_trip(dir, exact_schemes[_i], inputs[i], false, &rc);
        if (strcmp(inputs[i], "testdata/quant-edge") == 0)
            expect_only_non_bf16_sources(report, exact_schemes[_i]);
        else
            ck_assert_msg(rc == 0, "%s on %s: the round trip changed the FP8 bytes",
                          exact_schemes[_i], inputs[i]);
        cJSON_Delete(report);
        tu_tmpdir_free(dir);
    }
}
END_TEST

START_TEST(test_round_trip_with_power_of_two_scales_keeps_values)
{
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        char *dir = tu_tmpdir();
        int rc;
        cJSON *report = round_trip(dir, value_schemes[_i], inputs[i], true, &rc);
        if (strcmp(inputs[i], "testdata/quant-edge") == 0)
            expect_only_non_bf16_sources(report, value_schemes[_i]);
        else
            ck_assert_msg(rc == 0, "%s on %s: dequantized values changed", value_schemes[_i],
                          inputs[i]);
        cJSON_Delete(report);
        tu_tmpdir_free(dir);
    }
}
END_TEST

START_TEST(test_same_bytes_for_every_thread_count)
{
    /* 300 x 20480: several jobs per tensor, block rows spanning two jobs */
    char *dir = tu_tmpdir(), *model = make_model(dir, "m", 300, 20480, -1, 0), *args;
    static const char *const schemes[] = { "--scheme block", "--scheme channel",
                                           "--scheme mxfp8" };
    for (size_t k = 0; k < 3; k++) {
        ck_assert(asprintf(&args, "quantize -q %s '%s' '%s/fp8%zu'", schemes[k], model, dir, k) > 0);
        ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
        free(args);
        for (int j = 1; j <= 3; j += 2) {
            ck_assert(asprintf(&args, "dequantize-for-export -q -j %d '%s/fp8%zu' '%s/j%d-%zu'", j,
                               dir, k, dir, j, k) > 0);
            ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
            free(args);
        }
        ck_assert(asprintf(&args, "cmp %s/j1-%zu/model.safetensors %s/j3-%zu/model.safetensors", dir,
                           k, dir, k) > 0);
        ck_assert_msg(system(args) == 0, "%s: output depends on the thread count", schemes[k]);
        free(args);
    }
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_sigint_leaves_nothing)
{
    char *dir = tu_tmpdir(), *model = make_model(dir, "m", 2048, 24576, -1, 0), *fp8, *args;
    ck_assert(asprintf(&fp8, "%s/fp8", dir) > 0);
    ck_assert(asprintf(&args, "quantize -q --no-sync '%s' '%s'", model, fp8) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    const char *argv[] = { "dequantize-for-export", "-q", "-j", "1", "--dtype", "f32", fp8, NULL,
                           NULL };
    expect_interrupt_leaves_nothing(dir, argv, 7, SIGINT);
    free(args);
    free(fp8);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- bad input */

/* A one-shard FP8 checkpoint directory: weight "w.weight" [2, 64] with the
 * given codes' first byte, and a scale of the given dtype, name and bytes. */
static char *make_fp8(const char *dir, uint8_t code0, const char *scale_name, fp8_dtype sdtype,
                      int srank, const uint64_t *sshape, const void *sbytes, size_t slen)
{
    char *model, *path;
    ck_assert(asprintf(&model, "%s/fp8", dir) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    uint64_t shape[2] = { 2, 64 };
    uint8_t codes[128];
    for (int i = 0; i < 128; i++)
        codes[i] = (uint8_t)(i % 0x7E);
    codes[0] = code0;
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "w.weight", FP8_DTYPE_F8_E4M3, 2, shape) == FP8_OK);
    if (scale_name)
        ck_assert(fp8_writer_add_tensor(ctx, w, scale_name, sdtype, srank, sshape) == FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        bool weight = strcmp(fp8_writer_tensor(w, i)->name, "w.weight") == 0;
        ck_assert(fp8_writer_write(ctx, w, weight ? (const void *)codes : sbytes,
                                   weight ? sizeof codes : slen) == FP8_OK);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    free(path);
    return model;
}

static void expect_bad(const char *model, const char *dir, const char *extra, const char *message)
{
    char *args, *err;
    ck_assert(asprintf(&args, "dequantize-for-export %s '%s' '%s/out'", extra, model, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, message) && strstr(err, "w.weight"), "message: %s", err);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    free(err);
    free(args);
}

START_TEST(test_fp8_weight_without_scale_is_bad_input)
{
    char *dir = tu_tmpdir(), *model = make_fp8(dir, 0x38, NULL, FP8_DTYPE_F32, 0, NULL, NULL, 0);
    expect_bad(model, dir, "", "has no scale");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_nan_code_is_bad_input)
{
    float one = 1;
    char *dir = tu_tmpdir();
    char *model = make_fp8(dir, 0xFF, "w.weight_scale", FP8_DTYPE_F32, 0, NULL, &one, 4);
    expect_bad(model, dir, "", "NaN code 0xff");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_e8m0_nan_scale_is_bad_input)
{
    uint8_t scales[4] = { 127, 127, 0xFF, 127 };
    uint64_t shape[2] = { 2, 2 };
    char *dir = tu_tmpdir();
    char *model = make_fp8(dir, 0x38, "w.weight_scale", FP8_DTYPE_U8, 2, shape, scales, 4);
    expect_bad(model, dir, "", "not a finite positive scale");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_scale_of_no_known_shape_is_bad_input)
{
    float s[3] = { 1, 1, 1 };
    uint64_t shape[1] = { 3 };
    char *dir = tu_tmpdir();
    char *model = make_fp8(dir, 0x38, "w.weight_scale", FP8_DTYPE_F32, 1, shape, s, sizeof s);
    expect_bad(model, dir, "", "fits no");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_f16_overflow_is_bad_input)
{
    float big = 1e6f; /* 448 * 1e6 is far beyond f16 */
    char *dir = tu_tmpdir();
    char *model = make_fp8(dir, 0x7E, "w.weight_scale_inv", FP8_DTYPE_F32, 0, NULL, &big, 4);
    expect_bad(model, dir, "--dtype f16", "overflows f16");
    /* the same checkpoint exports to bf16 */
    char *args;
    ck_assert(asprintf(&args, "dequantize-for-export -q '%s' '%s/out'", model, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dequantize");
    TCase *tc = tcase_create("oracle");
    tcase_set_timeout(tc, 120);
    int ncases = count_cases(CASES);
    tcase_add_loop_test(tc, test_dequantize_matches_numpy_oracle, 0, ncases);
    suite_add_tcase(s, tc);

    tc = tcase_create("round trip");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_round_trip_gives_the_same_fp8_bytes, 0,
                        (int)(sizeof exact_schemes / sizeof exact_schemes[0]));
    tcase_add_loop_test(tc, test_round_trip_with_power_of_two_scales_keeps_values, 0,
                        (int)(sizeof value_schemes / sizeof value_schemes[0]));
    tcase_add_test(tc, test_same_bytes_for_every_thread_count);
    tcase_add_test(tc, test_sigint_leaves_nothing);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad input");
    tcase_add_test(tc, test_fp8_weight_without_scale_is_bad_input);
    tcase_add_test(tc, test_nan_code_is_bad_input);
    tcase_add_test(tc, test_e8m0_nan_scale_is_bad_input);
    tcase_add_test(tc, test_scale_of_no_known_shape_is_bad_input);
    tcase_add_test(tc, test_f16_overflow_is_bad_input);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
