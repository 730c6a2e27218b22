/*
 * check_dequantize.c - fp8conv dequantize-for-export end to end:
 *   - every case of tests/oracle/dequant_cases.json against the goldens the
 *     independent numpy/ml_dtypes oracle wrote (testdata/golden/dequant/),
 *     for every format quantize writes and the official DeepSeek-V3 layout
 *     with scales in another shard;
 *   - the round trip quantize -> dequantize -> quantize;
 *   - bad input (no scale, NaN code, E8M0 0xFF, f16 overflow) leaves nothing;
 *   - every fast path of fp8_dequant_row that this CPU runs against
 *     fp8_dequant_row_ref: every code against every kind of scale, every
 *     output dtype, odd widths and group sizes, NaN codes and overflows.
 */
#include "golden.h"

#include <signal.h>

#include "fill.h"
#include "compute/quant_cpu.h"

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
    const char *argv[] = { "dequantize-for-export", "-q", "--json", "-j", "1", "--dtype", "f32",
                           fp8, NULL, NULL };
    expect_interrupt_leaves_nothing(dir, argv, 8, SIGINT);
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

/* The checkpoint exports (exit 0) with the given options. */
static void expect_exports(const char *model, const char *dir, const char *extra)
{
    char *args;
    ck_assert(asprintf(&args, "dequantize-for-export -q %s '%s' '%s/out'", extra, model, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
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

/* A NaN code past the first row is named by its flat index, by
 * dequantize-for-export and by diff --dequant (which read the values
 * through the same fused pass). */
START_TEST(test_nan_code_in_a_later_row_is_named_by_its_index)
{
    float one = 1;
    char *dir = tu_tmpdir(), *file, *args, *err;
    char *model = make_fp8(dir, 0x38, "w.weight_scale", FP8_DTYPE_F32, 0, NULL, &one, 4);
    ck_assert(asprintf(&file, "%s/model.safetensors", model) > 0);
    size_t len;
    unsigned char *bytes = (unsigned char *)tu_slurp(file, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | bytes[i];
    char *h = strndup((char *)bytes + 8, hlen);
    const char *at = strstr(h, "\"w.weight\":{\"dtype\":\"F8_E4M3\",\"shape\":[2,64],"
                               "\"data_offsets\":[");
    ck_assert_msg(at, "header: %s", h);
    unsigned long begin = strtoul(strstr(at, "data_offsets\":[") + 15, NULL, 10);
    bytes[8 + hlen + begin + 64 + 5] = 0xFF; /* row 1, column 5: element 69 */
    tu_spit(file, bytes, len);
    expect_bad(model, dir, "", "element 69 is the E4M3 NaN code 0xff");
    ck_assert(asprintf(&args, "diff --dequant '%s' '%s'", model, model) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, "element 69 is the E4M3 NaN code 0xff"), "message: %s", err);
    free(err);
    free(args);
    free(h);
    free(bytes);
    free(file);
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
    expect_exports(model, dir, ""); /* the same checkpoint exports to bf16 */
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- fast paths */

static const fp8_dtype dq_outs[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };

static unsigned dq_size(fp8_dtype out) { return out == FP8_DTYPE_F32 ? 4 : 2; }

/* One row on `path` and on the reference: the same result, the same index,
 * the same bytes (up to the bad element, where the reference stops). */
static void expect_row_equal(fp8_deq_path path, const uint8_t *q, uint64_t n, const float *s,
                             uint64_t group, fp8_dtype out, const char *what)
{
    unsigned size = dq_size(out);
    unsigned char *want = malloc(n * size + 1), *got = malloc(n * size + 1);
    uint64_t wwhere = UINT64_MAX, gwhere = UINT64_MAX;
    fp8_deq_result wr = fp8_dequant_row_ref(q, n, s, group, out, want, &wwhere);
    fp8_deq_result gr = fp8_dequant_row_on(path, q, n, s, group, out, got, &gwhere);
    /* no ck_assert per element: Check writes a record for each */
    if (wr != gr || (wr != FP8_DEQ_OK && wwhere != gwhere))
        ck_abort_msg("%s, %s, %s, n %llu group %llu: result %d at %llu, the reference's %d at %llu",
                     what, fp8_dequant_path_name(path), fp8_dtype_name(out), (unsigned long long)n,
                     (unsigned long long)group, gr, (unsigned long long)gwhere, wr,
                     (unsigned long long)wwhere);
    uint64_t upto = wr == FP8_DEQ_OK ? n : wr == FP8_DEQ_OVERFLOW ? wwhere + 1 : 0;
    for (uint64_t i = 0; i < upto; i++)
        if (memcmp(want + i * size, got + i * size, size) != 0)
            ck_abort_msg("%s, %s, %s: element %llu (code 0x%02x, scale %a) differs", what,
                         fp8_dequant_path_name(path), fp8_dtype_name(out), (unsigned long long)i,
                         q[i], (double)s[i / group]);
    free(want);
    free(got);
}

/* Scales of every kind a checkpoint holds or a bad one could: every E8M0
 * power of two, every bf16 and f16 positive finite value (sampled), random
 * fp32 values of every magnitude, fp32 subnormals, the edges of the AVX-512
 * path's range (2^-117, 2^120) and values whose products overflow. */
static size_t scale_zoo(float *s, size_t cap)
{
    size_t n = 0;
    for (int e = -127; e <= 127; e++)
        s[n++] = fp8_pow2(e);
    for (uint32_t b = 0x0001; b < 0x7F80; b += 37) /* bf16, subnormals included */
        s[n++] = fp8_bf16_to_f32((uint16_t)b);
    for (uint32_t h = 0x0001; h < 0x7C00; h += 29) /* f16 */
        s[n++] = fp8_f16_to_f32((uint16_t)h);
    static const uint32_t edges[] = { 0x00000001, 0x007FFFFF, 0x00800000, 0x05000000, 0x04FFFFFF,
                                      0x05000001, 0x7B800000, 0x7B7FFFFF, 0x7B800001, 0x7F7FFFFF,
                                      0x3F800000, 0x3F7FFFFF };
    for (size_t k = 0; k < sizeof edges / sizeof edges[0]; k++)
        s[n++] = fp8_f32_from_bits(edges[k]);
    s[n++] = fp8_f32_from_bits(0x7F7FC000) / 448.0f; /* 448 s: finite, but infinite as bf16 */
    while (n < cap) {
        uint32_t r = next_u32() % 0x7F7FFFFF + 1; /* (0, FLT_MAX], a third subnormal */
        s[n] = fp8_f32_from_bits(n % 3 ? r : r % 0x00800000 + 1);
        n++;
    }
    return n;
}

START_TEST(test_fast_dequant_every_code_every_scale_equals_reference)
{
    enum { ZOO = 3000 };
    float *scales = malloc(ZOO * sizeof *scales);
    size_t nscales = scale_zoo(scales, ZOO);
    uint8_t codes[254];
    for (int b = 0, k = 0; b < 256; b++)
        if ((b & 0x7F) != 0x7F)
            codes[k++] = (uint8_t)b;
    for (fp8_deq_path path = 0; path < FP8_DEQ_PATH_COUNT; path++) {
        if (!fp8_dequant_path_runs(path)) {
            fprintf(stderr, "dequant path %s: not run on this CPU\n", fp8_dequant_path_name(path));
            continue;
        }
        fprintf(stderr, "dequant path %s: tested\n", fp8_dequant_path_name(path));
        for (size_t o = 0; o < 3; o++)
            for (size_t k = 0; k < nscales; k++) {
                /* all codes in one group, then each code alone (an overflow
                 * stops the row: the codes after it are checked alone) */
                expect_row_equal(path, codes, 254, &scales[k], 254, dq_outs[o], "all codes");
                for (int c = 0; c < 254; c++)
                    expect_row_equal(path, &codes[c], 1, &scales[k], 1, dq_outs[o], "one code");
            }
    }
    free(scales);
}
END_TEST

/* Random codes of every class (zeros, -0, subnormals, +-448) in rows of odd
 * widths, cut into the groups of every scale layout. */
START_TEST(test_fast_dequant_odd_widths_and_groups_equal_reference)
{
    static const uint64_t widths[] = { 1, 7, 15, 16, 17, 31, 33, 127, 129, 1000, 4096 };
    static const uint64_t groups[] = { 0 /* the width: per tensor or channel */, 32, 128, 1, 7 };
    uint8_t q[4096];
    float s[4096];
    for (fp8_deq_path path = 0; path < FP8_DEQ_PATH_COUNT; path++) {
        if (!fp8_dequant_path_runs(path))
            continue;
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
            for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
                for (int variant = 0; variant < 4; variant++) {
                    uint64_t n = widths[w], group = groups[g] ? groups[g] : n;
                    for (uint64_t i = 0; i < n; i++) {
                        uint32_t r = next_u32();
                        static const uint8_t special[] = { 0x00, 0x80, 0x01, 0x87, 0x7E, 0xFE, 0x08 };
                        q[i] = r % 4 ? (uint8_t)(r >> 8) : special[(r >> 8) % 7];
                        q[i] = (q[i] & 0x7F) == 0x7F ? 0x7E : q[i];
                    }
                    for (uint64_t k = 0; k < (n + group - 1) / group; k++) {
                        uint32_t r = next_u32();
                        switch (variant) {
                        case 0: s[k] = fp8_f32_from_bits(r % 0x3F000000 + 1); break; /* f32 */
                        case 1: s[k] = fp8_bf16_to_f32((uint16_t)(r % 0x3F00 + 1)); break;
                        case 2: s[k] = fp8_f16_to_f32((uint16_t)(r % 0x7C00 + 1)); break;
                        default: s[k] = fp8_pow2((int)(r % 255) - 127); /* E8M0 */
                        }
                    }
                    for (size_t o = 0; o < 3; o++)
                        expect_row_equal(path, q, n, s, group, dq_outs[o], "random codes");
                }
    }
}
END_TEST

/* A NaN code is named wherever it is, before any overflow in its row. */
START_TEST(test_fast_dequant_names_the_first_nan_code)
{
    static const uint64_t widths[] = { 1, 33, 1000 };
    uint8_t q[1000];
    float s[1000];
    for (fp8_deq_path path = 0; path < FP8_DEQ_PATH_COUNT; path++) {
        if (!fp8_dequant_path_runs(path))
            continue;
        for (size_t w = 0; w < 3; w++) {
            uint64_t n = widths[w], at[3] = { 0, n / 2, n - 1 };
            for (int k = 0; k < 3; k++)
                for (int overflow = 0; overflow < 2; overflow++)
                    for (size_t o = 0; o < 3; o++) {
                        for (uint64_t i = 0; i < n; i++) {
                            q[i] = (uint8_t)(i % 0x7E);
                            s[i] = 1;
                        }
                        q[at[k]] = k == 1 ? 0x7F : 0xFF;
                        if (overflow && at[k]) /* an infinite value before the NaN code */
                            q[0] = 0x7E, s[0] = 1e38f;
                        if (at[k] + 1 < n)
                            q[n - 1] = 0xFF; /* a second NaN code, after the first */
                        uint64_t where = UINT64_MAX;
                        unsigned char y[4000];
                        ck_assert_int_eq(fp8_dequant_row_on(path, q, n, s, 1, dq_outs[o], y, &where),
                                         FP8_DEQ_NAN_CODE);
                        ck_assert_uint_eq(where, at[k]);
                        expect_row_equal(path, q, n, s, 1, dq_outs[o], "NaN code");
                    }
        }
    }
}
END_TEST

/* An infinite value is an overflow, named by its index: fp32 products
 * beyond FLT_MAX, f16 beyond 65504, and fp32 values that round to bf16's
 * infinity. */
START_TEST(test_fast_dequant_names_the_first_overflow)
{
    static const struct {
        float scale;
        fp8_deq_result bf16, f16, f32;
    } cases[] = {
        { 1000.0f, FP8_DEQ_OK, FP8_DEQ_OVERFLOW, FP8_DEQ_OK },
        { 1e37f, FP8_DEQ_OVERFLOW, FP8_DEQ_OVERFLOW, FP8_DEQ_OVERFLOW },
        { 0x1.fffp127f / 448.0f, FP8_DEQ_OVERFLOW, FP8_DEQ_OVERFLOW, FP8_DEQ_OK },
    };
    uint8_t q[300];
    float s[300];
    unsigned char y[1200];
    for (fp8_deq_path path = 0; path < FP8_DEQ_PATH_COUNT; path++) {
        if (!fp8_dequant_path_runs(path))
            continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (uint64_t at = 0; at < 300; at += 149) {
                for (int i = 0; i < 300; i++) {
                    q[i] = 0x38 | (i & 0x80); /* +-1 */
                    s[i] = i == (int)at ? cases[c].scale : 1.0f;
                }
                q[at] = 0xFE; /* -448 */
                fp8_deq_result want[] = { cases[c].bf16, cases[c].f16, cases[c].f32 };
                for (size_t o = 0; o < 3; o++) {
                    uint64_t where = UINT64_MAX;
                    ck_assert_int_eq(fp8_dequant_row_on(path, q, 300, s, 1, dq_outs[o], y, &where),
                                     want[o]);
                    if (want[o])
                        ck_assert_uint_eq(where, at);
                    expect_row_equal(path, q, 300, s, 1, dq_outs[o], "overflow");
                }
            }
    }
}
END_TEST

/* diff's and verify's fp32 values. */
START_TEST(test_dequant_span_equals_reference)
{
    enum { ZOO = 3000 };
    float *scales = malloc(ZOO * sizeof *scales), y[256];
    size_t nscales = scale_zoo(scales, ZOO);
    uint8_t codes[256];
    for (int b = 0; b < 256; b++)
        codes[b] = (uint8_t)((b & 0x7F) == 0x7F ? 0 : b);
    for (size_t k = 0; k < nscales; k++) {
        fp8_dequant_span(codes, 256, scales[k], y);
        for (int b = 0; b < 256; b++) {
            float want = fp8_e4m3_to_f32(codes[b]) * scales[k];
            if (fp8_f32_bits(y[b]) != fp8_f32_bits(want))
                ck_abort_msg("code 0x%02x * %a", b, (double)scales[k]);
        }
    }
    free(scales);
}
END_TEST

START_TEST(test_bf16_overflow_is_bad_input)
{
    float big = 1e37f; /* 448 * 1e37 is beyond fp32 */
    char *dir = tu_tmpdir();
    char *model = make_fp8(dir, 0x7E, "w.weight_scale_inv", FP8_DTYPE_F32, 0, NULL, &big, 4);
    expect_bad(model, dir, "", "overflows bf16");
    expect_bad(model, dir, "--dtype f32", "overflows fp32");
    big = 0x1.fffp127f / 448.0f; /* finite in fp32, infinite once rounded to bf16 */
    free(model);
    tu_tmpdir_free(dir);
    dir = tu_tmpdir();
    model = make_fp8(dir, 0x7E, "w.weight_scale_inv", FP8_DTYPE_F32, 0, NULL, &big, 4);
    expect_bad(model, dir, "", "overflows bf16");
    expect_exports(model, dir, "--dtype f32");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* Mistral's FP8 releases carry activation_scale, their name for input_scale
 * (vllm models/mistral3.py, sglang models/llama.py rename it): the bf16
 * export drops it with the weight scales and the quantization_config, since
 * a loader of the export rejects tensors its model does not have. */
START_TEST(test_mistral_export_drops_activation_scales)
{
    char *dir = tu_tmpdir(), *out, *cfg;
    char *model = make_mistral3_fp8(dir, "ministral", 0);
    ck_assert(asprintf(&out, "%s/bf16", dir) > 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q '%s' '%s'", model, out), 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
    ck_assert_int_eq(fp8_checkpoint_tensor_count(ck), 4); /* 2 weights, embed, head */
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
        ck_assert_msg(!strstr(t->name, "scale") && t->dtype == FP8_DTYPE_BF16, "%s", t->name);
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    ck_assert(asprintf(&cfg, "%s/config.json", out) > 0);
    char *text = tu_slurp(cfg, NULL);
    ck_assert(!strstr(text, "quantization_config") && strstr(text, "text_config"));
    free(text);
    free(cfg);
    free(out);
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
    tcase_add_test(tc, test_nan_code_in_a_later_row_is_named_by_its_index);
    tcase_add_test(tc, test_e8m0_nan_scale_is_bad_input);
    tcase_add_test(tc, test_scale_of_no_known_shape_is_bad_input);
    tcase_add_test(tc, test_f16_overflow_is_bad_input);
    tcase_add_test(tc, test_bf16_overflow_is_bad_input);
    suite_add_tcase(s, tc);

    tc = tcase_create("fast paths");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fast_dequant_every_code_every_scale_equals_reference);
    tcase_add_test(tc, test_fast_dequant_odd_widths_and_groups_equal_reference);
    tcase_add_test(tc, test_fast_dequant_names_the_first_nan_code);
    tcase_add_test(tc, test_fast_dequant_names_the_first_overflow);
    tcase_add_test(tc, test_dequant_span_equals_reference);
    tcase_add_test(tc, test_mistral_export_drops_activation_scales);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
