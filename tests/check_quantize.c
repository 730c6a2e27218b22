/*
 * check_quantize.c - fp8conv quantize end to end:
 *   - every case of tests/oracle/quant_cases.json against the goldens that
 *     the independent numpy/ml_dtypes oracle wrote (testdata/golden/quant/):
 *     tensor bytes, whole shard files, index, config.json, hf_quant_config;
 *   - the loader shape rules of fp8conv-formats(5), FORMATS, spelled out here
 *     per format;
 *   - the fast band quantizer against the reference on every scale kind,
 *     and the transpose of a transposed weight's tiles against its definition;
 *   - the same bytes for every thread count, on tensors cut into many jobs;
 *   - failures (NaN, infinity, already quantized, existing output, bad
 *     options, SIGINT/SIGTERM) leave nothing behind.
 */
#include "golden.h"

#include <glob.h>
#include <signal.h>
#include <time.h>

#include "fill.h"
#include "compute/quant_cpu.h"

#define CASES "tests/oracle/quant_cases.json"
#define GOLDEN_DIR "testdata/golden/quant"

START_TEST(test_quantize_matches_numpy_oracle)
{
    cJSON *cases = read_json(CASES);
    const cJSON *c = cJSON_GetArrayItem(cases, _i);
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const char *input = cJSON_GetObjectItem(c, "input")->valuestring;
    char *gpath, *dir = tu_tmpdir(), *out, *args, *cmd, *err;
    ck_assert(asprintf(&gpath, "%s/%s.json", GOLDEN_DIR, name) > 0);
    cJSON *golden = read_json(gpath);
    char *argstr = join_args(cJSON_GetObjectItem(c, "args"));
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    ck_assert(asprintf(&args, "quantize -q -j 2 %s '%s' '%s'", argstr, input, out) > 0);
    int rc = tu_run(args, NULL, &err);
    ck_assert_msg(rc == 0, "case %s: exit %d: %s", name, rc, err);

    check_golden_output(out, input, GOLDEN_DIR, name, golden);
    /* quantize always writes a quantization_config, last */
    ck_assert(asprintf(&cmd, "grep -q quantization_config '%s/config.json' || test ! -e "
                             "'%s/config.json'", out, out) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    free(err);
    free(args);
    free(argstr);
    free(out);
    free(gpath);
    cJSON_Delete(golden);
    cJSON_Delete(cases);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_every_case_has_a_golden)
{
    cJSON *cases = read_json(CASES);
    const cJSON *c;
    int n = 0;
    cJSON_ArrayForEach(c, cases)
    {
        char *g;
        ck_assert(asprintf(&g, "%s/%s.json", GOLDEN_DIR, cJSON_GetObjectItem(c, "name")->valuestring) > 0);
        ck_assert_msg(exists(g), "%s missing", g);
        free(g);
        n++;
    }
    ck_assert_int_eq(count_entries(GOLDEN_DIR, ""), n + 2); /* + "." and ".." */
    cJSON_Delete(cases);
}
END_TEST

/* ---------------------------------------------------------------- loader shape rules */

typedef struct {
    const char *args, *suffix, *dtype;
    const char *shape_2d, *shape_3d; /* for [300, 200] and [3, 136, 160] */
} shape_rule;

/* The table of fp8conv-formats(5), FORMATS, written out independently of lib/. */
static const shape_rule shape_rules[] = {
    { "--scheme block --format hf-fp8", "_scale_inv", "F32", "[3, 2]", "[3, 2, 2]" },
    { "--scheme block --format compressed-tensors", "_scale", "BF16", "[3, 2]", "[3, 2, 2]" },
    { "--scheme channel --format compressed-tensors", "_scale", "BF16", "[300, 1]",
      "[3, 136, 1]" },
    /* per-channel ModelOpt experts are refused (test_loader_rules_refuse_pairs) */
    { "--scheme channel --format modelopt --ignore experts", "_scale", "F32", "[300]", NULL },
    { "--scheme tensor --format hf-fp8", "_scale", "F32", "[]", "[3]" },
    { "--scheme tensor --format compressed-tensors", "_scale", "BF16", "[1]", "[3, 1]" },
    { "--scheme mxfp8 --format compressed-tensors", "_scale", "U8", NULL, "[3, 136, 5]" },
    { "--scheme mxfp8 --format modelopt", "_scale", "U8", NULL, "[3, 136, 5]" },
};

static void shape_str(const fp8_tensor_info *t, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->rank; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "",
                              (unsigned long long)t->shape[d]);
    snprintf(buf + o, cap - o, "]");
}

static void expect_scale(const fp8_checkpoint *ck, const char *weight, const shape_rule *r,
                         const char *shape)
{
    char name[256], got[64];
    snprintf(name, sizeof name, "%s%s", weight, r->suffix);
    const fp8_tensor_info *w = fp8_checkpoint_find(ck, weight, NULL);
    const fp8_tensor_info *s = fp8_checkpoint_find(ck, name, NULL);
    ck_assert_msg(w && w->dtype == FP8_DTYPE_F8_E4M3, "%s: %s not F8_E4M3", r->args, weight);
    ck_assert_msg(s != NULL, "%s: no %s", r->args, name);
    ck_assert_str_eq(fp8_dtype_name(s->dtype), r->dtype);
    shape_str(s, got, sizeof got);
    ck_assert_msg(strcmp(got, shape) == 0, "%s: %s has shape %s, loaders expect %s", r->args,
                  name, got, shape);
    /* exactly one scale: no tensor with the other suffix */
    snprintf(name, sizeof name, "%s%s", weight,
             strcmp(r->suffix, "_scale") == 0 ? "_scale_inv" : "_scale");
    ck_assert_msg(!fp8_checkpoint_find(ck, name, NULL), "%s: unexpected %s", r->args, name);
}

START_TEST(test_scale_names_dtypes_shapes_per_format)
{
    const shape_rule *r = &shape_rules[_i];
    char *dir = tu_tmpdir(), *args, *err;
    ck_assert(asprintf(&args, "quantize -q %s testdata/quant-edge %s/out", r->args, dir) > 0);
    ck_assert_msg(tu_run(args, NULL, &err) == 0, "%s", err);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck = NULL;
    char out[512];
    snprintf(out, sizeof out, "%s/out", dir);
    ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
    if (r->shape_2d)
        expect_scale(ck, "model.layers.0.mlp.gate_proj.weight", r, r->shape_2d);
    else /* mxfp8: 200 % 32 != 0, so it stays bf16 */
        ck_assert_int_eq(fp8_checkpoint_find(ck, "model.layers.0.mlp.gate_proj.weight", NULL)->dtype,
                         FP8_DTYPE_BF16);
    if (r->shape_3d)
        expect_scale(ck, "model.layers.0.mlp.experts.down_proj", r, r->shape_3d);
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    free(err);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- fast path = reference */

START_TEST(test_fast_band_equals_reference)
{
    static const fp8_dtype dts[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };
    /* { 129, 512 }: whole rows of 128-wide blocks (block_rows_bf16), the last group row one row */
    static const uint64_t dims[][2] = { { 1, 1 }, { 129, 257 }, { 128, 96 }, { 3, 64 }, { 129, 512 } };
    for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++)
        for (size_t d = 0; d < 3; d++)
            for (size_t s = 0; s < 5; s++)
                for (int g = 0; g < 4; g++) {
                    fp8_band b = { .src = dts[d], .kind = (fp8_scale_kind)kind,
                                   .rows = dims[s][0], .cols = dims[s][1] };
                    uint64_t gc[] = { 128, 32, b.cols, 7 };
                    b.group_rows = g == 0 ? (s == 4 ? 64 : b.rows) : 1;
                    b.group_cols = gc[g];
                    b.fixed = g == 3;
                    b.scale = 0.37f;
                    uint64_t n = b.rows * b.cols, w1 = 0, w2 = 0;
                    void *x = malloc(n * 4);
                    uint8_t *q1 = malloc(n), *q2 = malloc(n);
                    uint8_t *s1 = calloc(n, 4), *s2 = calloc(n, 4);
                    fill(b.src, x, n);
                    if (s == 2) /* an all-zero row */
                        memset(x, 0, b.cols * (b.src == FP8_DTYPE_F32 ? 4 : 2));
                    int r1 = fp8_band_quantize_ref(&b, x, q1, s1, &w1);
                    int r2 = fp8_band_quantize(&b, x, q2, s2, &w2);
                    ck_assert_int_eq(r1, r2);
                    if (r1 == FP8_BAND_OK) { /* after an error the output is unspecified */
                        ck_assert_msg(memcmp(q1, q2, n) == 0, "codes differ: kind %d dtype %zu",
                                      kind, d);
                        ck_assert(memcmp(s1, s2, n * 4) == 0);
                    } else {
                        ck_assert_uint_eq(w1, w2);
                    }
                    float a1, a2;
                    ck_assert_int_eq(fp8_amax_ref(b.src, x, n, &a1, &w1), fp8_amax(b.src, x, n, &a2, &w2));
                    ck_assert(fp8_f32_bits(a1) == fp8_f32_bits(a2));
                    free(x);
                    free(q1);
                    free(q2);
                    free(s1);
                    free(s2);
                }
}
END_TEST

/* Every engine profile's arithmetic (fp8_numerics): the fast path's codes
 * and scales are the reference's, on random rows and the classes the
 * profiles differ on (fill_profile_rows: zero, tiny and huge groups, E4M3
 * midpoints), in tiles, rows, MX-sized runs and with a fixed factor. */
START_TEST(test_fast_band_equals_reference_under_every_profile)
{
    static const fp8_dtype dts[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };
    static const uint64_t dims[][2] = { { 4, 7 }, { 129, 257 }, { 128, 96 }, { 5, 64 }, { 129, 512 } };
    /* a quotient in the scale's dtype (in_kind): bf16 and f16 scales too; an MX rule
     * (mx_up): E8M0 bytes */
    for (int p = 0; p < FP8_PROFILE_COUNT; p++)
        for (int sc = -1; sc <= FP8_SCHEME_INT4; sc++) { /* the row's, each scheme's own */
            const fp8_profile_traits *t = fp8_profile_get((fp8_profile)p);
            if (sc >= 0 && !(t->own >> sc & 1))
                continue;
            const fp8_numerics num = sc < 0 ? t->num : t->by_scheme[sc];
            const fp8_scale_kind kinds[] = { FP8_SCALE_F32,
                                             num.in_kind ? FP8_SCALE_BF16 : FP8_SCALE_E8M0_RCEIL,
                                             FP8_SCALE_F16 };
            for (size_t kd = 0; kd < (num.in_kind ? 3 : num.mx_up ? 2 : 1); kd++)
            for (size_t d = 0; d < 3; d++)
            for (size_t s = 0; s < 5; s++)
                for (int g = 0; g < 4; g++) {
                    fp8_band b = { .src = dts[d], .kind = kinds[kd], .rows = dims[s][0],
                                   .cols = dims[s][1], .scale = 0.37f, .num = num };
                    uint64_t gc[] = { 128, 32, b.cols, 7 };
                    b.group_rows = g == 0 ? (s == 4 ? 64 : b.rows) : 1;
                    b.group_cols = gc[g];
                    b.fixed = g == 3;
                    uint64_t n = b.rows * b.cols, w1 = 0, w2 = 0;
                    void *x = malloc(n * 4);
                    uint8_t *q1 = malloc(n), *q2 = malloc(n);
                    uint8_t *s1 = calloc(n, 4), *s2 = calloc(n, 4);
                    fill_profile_rows(b.src, x, b.rows, b.cols);
                    int r1 = fp8_band_quantize_ref(&b, x, q1, s1, &w1);
                    int r2 = fp8_band_quantize(&b, x, q2, s2, &w2);
                    ck_assert_int_eq(r1, r2);
                    if (r1 == FP8_BAND_OK) {
                        ck_assert_msg(memcmp(q1, q2, n) == 0,
                                      "codes differ: profile %s scheme %d kind %d dtype %zu",
                                      fp8_profile_name((fp8_profile)p), sc, (int)b.kind, d);
                        ck_assert(memcmp(s1, s2, n * 4) == 0);
                    } else {
                        ck_assert_uint_eq(w1, w2);
                    }
                    free(x);
                    free(q1);
                    free(q2);
                    free(s1);
                    free(s2);
                }
        }
}
END_TEST

/* fp8_transpose against the element-by-element definition, for 2- and
 * 4-byte elements, sizes around the 8 x 8 blocks and padded strides; what
 * lies outside the m x n result is left alone. */
START_TEST(test_transpose_equals_definition)
{
    enum { MAXM = 67, MAXN = 75, SS = MAXN + 5, DS = MAXM + 3 };
    static uint32_t src[MAXM * SS], dst[MAXN * DS];
    static const uint64_t ms[] = { 1, 7, 8, 16, 64, 67 }, ns[] = { 1, 8, 9, 15, 64, 75 };
    for (size_t i = 0; i < MAXM * SS; i++)
        src[i] = next_u32();
    for (unsigned size = 2; size <= 4; size += 2)
        for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
                uint64_t m = ms[a], n = ns[b];
                memset(dst, 0xA5, sizeof dst);
                fp8_transpose(size, src, SS, m, n, dst, DS);
                for (uint64_t k = 0; k < MAXN; k++)
                    for (uint64_t c = 0; c < DS; c++) {
                        uint32_t got, want = 0xA5A5A5A5u;
                        if (size == 2) {
                            got = ((const uint16_t *)dst)[k * DS + c];
                            want = k < n && c < m ? ((const uint16_t *)src)[c * SS + k] : 0xA5A5;
                        } else {
                            got = dst[k * DS + c];
                            want = k < n && c < m ? src[c * SS + k] : want;
                        }
                        ck_assert_msg(got == want, "size %u, %llu x %llu: [%llu][%llu]", size,
                                      (unsigned long long)m, (unsigned long long)n,
                                      (unsigned long long)k, (unsigned long long)c);
                    }
            }
}
END_TEST

START_TEST(test_nonfinite_found_at_first_index)
{
    uint16_t x[4 * 40] = { 0 };
    x[2 * 40 + 33] = 0x7FC0; /* NaN, row 2 col 33, in the second column group */
    x[3 * 40 + 1] = 0xFF80;  /* -inf, later in row order */
    fp8_band b = { .src = FP8_DTYPE_BF16, .kind = FP8_SCALE_F32, .rows = 4, .cols = 40,
                   .group_rows = 4, .group_cols = 32 };
    uint8_t q[160], s[8];
    uint64_t w = 0;
    ck_assert_int_eq(fp8_band_quantize(&b, x, q, s, &w), FP8_BAND_NONFINITE);
    ck_assert_uint_eq(w, 2 * 40 + 33);
    float amax;
    ck_assert_int_eq(fp8_amax(FP8_DTYPE_BF16, x, 160, &amax, &w), FP8_BAND_NONFINITE);
    ck_assert_uint_eq(w, 2 * 40 + 33);
}
END_TEST

START_TEST(test_scale_rules_of_spec)
{
    uint32_t bits;
    ck_assert(fp8_scale_make(FP8_SCALE_F32, 0, &bits) == 1.0f);          /* zero block */
    ck_assert(fp8_scale_make(FP8_SCALE_F32, 448, &bits) == 1.0f);
    ck_assert(fp8_scale_make(FP8_SCALE_F32, 0x1p-149f, &bits) == 0x1p-149f); /* underflow */
    ck_assert_uint_eq(bits, 1);
    ck_assert(fp8_scale_make(FP8_SCALE_BF16, 0x1p-140f, &bits) == 0x1p-133f);
    ck_assert(fp8_scale_make(FP8_SCALE_F16, 0x1p-30f, &bits) == 0x1p-24f);
    /* 16-bit scales round to nearest, even a little below amax / 448, as long
     * as amax <= 464 s: 448 * (1 + 2^-8) keeps the bf16 1.0 */
    ck_assert(fp8_scale_make(FP8_SCALE_BF16, 448 * (1 + 0x1p-8f), &bits) == 1.0f);
    /* a subnormal one nearer to amax / 448 than that goes one step up:
     * amax = 448 * 1.4 * 2^-24 rounds to the f16 2^-24, which would put
     * amax at 627 s */
    ck_assert(fp8_scale_make(FP8_SCALE_F16, 448 * 1.4f * 0x1p-24f, &bits) == 0x1p-23f);
    ck_assert_uint_eq(bits, 0x0002);
    ck_assert(fp8_scale_make(FP8_SCALE_BF16, 448 * 1.4f * 0x1p-133f, &bits) == 0x1p-132f);
    ck_assert_uint_eq(bits, 0x0002);
    ck_assert(fp8_scale_make(FP8_SCALE_UE8M0_F32, 448, &bits) == 1.0f);
    ck_assert(fp8_scale_make(FP8_SCALE_UE8M0_F32, 449, &bits) == 2.0f);
    ck_assert(fp8_scale_make(FP8_SCALE_UE8M0_F32, 0x1p-149f, &bits) == 0x1p-149f);
    ck_assert(fp8_scale_make(FP8_SCALE_E8M0_RCEIL, 0, &bits) == 0x1p-127f);
    ck_assert_uint_eq(bits, 0);
    fp8_scale_make(FP8_SCALE_E8M0_RCEIL, 1.9f, &bits);
    ck_assert_uint_eq(bits, 127 - 7); /* 1.9 > 1.75: 2^-7 */
    fp8_scale_make(FP8_SCALE_E8M0_FLOOR, 1.9f, &bits);
    ck_assert_uint_eq(bits, 127 - 8); /* floor: 2^-8, and 1.9 * 2^8 saturates */
    ck_assert_uint_eq(fp8_f32_to_e4m3(1.9f / fp8_pow2(-8)), 0x7E);
}
END_TEST

/* ---------------------------------------------------------------- threads, failures */

static const char *const schemes[] = { "--scheme block", "--scheme block --block 64x256",
                                       "--scheme channel", "--scheme tensor", "--scheme mxfp8" };

START_TEST(test_same_bytes_for_every_thread_count)
{
    char *dir = tu_tmpdir();
    /* 20480 columns: a 128-row band is 5 MiB, so block jobs split by columns;
     * 300 rows give partial bands.  At -j 64 each job takes a sixteenth of
     * the input the others do (fp8_jobs_chunk). */
    char *model = make_model(dir, "m", 300, 20480, -1, 0);
    char *args, *cmd;
    const int threads[] = { 1, 2, 3, 64 };
    for (int k = 0; k < 4; k++) {
        ck_assert(asprintf(&args, "quantize -q -j %d %s '%s' '%s/j%d'", threads[k], schemes[_i],
                           model, dir, threads[k]) > 0);
        ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
        free(args);
        ck_assert(asprintf(&cmd, "cmp %s/j1/model.safetensors %s/j%d/model.safetensors", dir, dir,
                           threads[k]) > 0);
        ck_assert_msg(system(cmd) == 0, "%s: -j %d differs from -j 1", schemes[_i], threads[k]);
        free(cmd);
    }
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* quantize OPTS of a model whose element 150 * 20480 + 7 (in the second
 * block row and a later job) has the bf16 bits given: refused with exit 3,
 * a message holding each of WHAT, and nothing left behind. */
static void expect_rejected(uint16_t bits, const char *opts, const char *const *what)
{
    char *dir = tu_tmpdir();
    char *model = make_model(dir, "m", 300, 20480, 150 * 20480 + 7, bits);
    char *args, *err, *out;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    for (int j = 1; j <= 2; j++) {
        ck_assert(asprintf(&args, "quantize -j %d %s '%s' '%s'", j, opts, model, out) > 0);
        ck_assert_int_eq(tu_run(args, NULL, &err), 3);
        ck_assert_msg(strstr(err, "model.layers.0.mlp.down_proj.weight"), "message: %s", err);
        for (size_t k = 0; what[k]; k++)
            ck_assert_msg(strstr(err, what[k]), "%s: no '%s' in: %s", opts, what[k], err);
        ck_assert(!exists(out));
        ck_assert_int_eq(count_entries(dir, ".out."), 0);
        free(err);
        free(args);
    }
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}

START_TEST(test_nan_is_bad_input_and_leaves_nothing)
{
    expect_rejected(0x7FC1, "", (const char *[]){ "element 3072007 (row 150, column 7)", "is NaN",
                                                  NULL });
}
END_TEST

START_TEST(test_infinity_is_bad_input_and_leaves_nothing)
{
    expect_rejected(0xFF80, "", (const char *[]){ "element 3072007 (row 150, column 7)",
                                                  "is -infinity", NULL });
}
END_TEST

/* The largest bf16, -3.39e38 = -1.9921875 * 2^127, needs a power-of-two
 * scale of 2^120 rounded up; it is then 255 codes of 2^120, which E4M3
 * rounds to 256, and 256 * 2^120 is past the fp32 range: the checkpoint
 * would compute with -infinity (found by fuzz_dir in CI, 2026-11-24).
 * The group is named by its first element.  Rounded down (floor) or as
 * amax / 448, the scale serves. */
START_TEST(test_scale_past_fp32_is_bad_input_and_leaves_nothing)
{
    const char *rule = "would read back as infinity";
    expect_rejected(0xFF7F, "--scheme mxfp8",
                    (const char *[]){ "group at element 3072000 (row 150, column 0)", rule, NULL });
    expect_rejected(0xFF7F, "--scale-fmt ue8m0",
                    (const char *[]){ "group at element 2621440 (row 128, column 0)", rule, NULL });
    char *dir = tu_tmpdir();
    char *model = make_model(dir, "m", 64, 256, 7, 0xFF7F);
    const char *fine[] = { "--scheme mxfp8 --mx-rounding floor", "--scheme block",
                           "--scheme channel", "--scheme tensor" };
    for (size_t k = 0; k < sizeof fine / sizeof *fine; k++) {
        char *args, *err;
        ck_assert(asprintf(&args, "quantize %s '%s' '%s/out%zu'", fine[k], model, dir, k) > 0);
        ck_assert_msg(tu_run(args, NULL, &err) == 0, "%s: %s", fine[k], err);
        free(err);
        free(args);
    }
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* A scale is refused exactly when the group's largest element would read
 * back as infinity, for every kind, near the top of the fp32 range. */
START_TEST(test_scale_make_refuses_only_what_reads_back_infinite)
{
    const fp8_scale_kind kinds[] = { FP8_SCALE_F32, FP8_SCALE_BF16, FP8_SCALE_UE8M0_F32,
                                     FP8_SCALE_E8M0_RCEIL, FP8_SCALE_E8M0_FLOOR };
    int refused = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        for (uint32_t u = 0x7E000000; u < 0x7F800000; u += 0x1001) {
            float amax = fp8_f32_from_bits(u);
            uint32_t bits;
            float s = fp8_scale_make(kinds[k], amax, &bits);
            float r = fp8_scale_round(kinds[k], amax, &bits); /* the scale before the check */
            double back = (double)fp8_e4m3_to_f32(fp8_f32_to_e4m3(amax / r)) * r;
            ck_assert_msg((s == 0) == (back > 0x1.fffffep127), "kind %zu, amax bits 0x%08x: "
                          "scale %g, reads back %g", k, u, s, back);
            ck_assert(s == 0 || s == r);
            refused += s == 0;
        }
    ck_assert_int_gt(refused, 0);
    uint32_t bits;
    ck_assert(fp8_scale_make(FP8_SCALE_E8M0_RCEIL, 248 * 0x1p120f, &bits) == 0);
    ck_assert(fp8_scale_make(FP8_SCALE_E8M0_RCEIL, 247 * 0x1p120f, &bits) == 0x1p120f);
    ck_assert(fp8_scale_make(FP8_SCALE_E8M0_FLOOR, 255 * 0x1p120f, &bits) == 0x1p119f);
}
END_TEST

START_TEST(test_already_quantized_input_is_refused)
{
    char *dir = tu_tmpdir(), *args, *err;
    free(quantize_into(dir, "", "testdata/quant-edge"));
    ck_assert(asprintf(&args, "quantize %s/fp8 %s/again", dir, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, "quantization_config"), "%s", err);
    free(err);
    free(args);
    /* FP8 tensors without a config: the single file */
    ck_assert(asprintf(&args, "quantize %s/fp8/model.safetensors %s/again.safetensors", dir,
                       dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, "already F8_E4M3"), "%s", err);
    ck_assert_int_eq(count_entries(dir, "again"), 0);
    ck_assert_int_eq(count_entries(dir, ".again"), 0);
    free(err);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_existing_output_needs_force)
{
    char *dir = tu_tmpdir(), *args, *err, *marker;
    ck_assert(asprintf(&marker, "%s/out/marker", dir) > 0);
    ck_assert(asprintf(&args, "%s/out", dir) > 0);
    ck_assert(mkdir(args, 0755) == 0);
    free(args);
    tu_spit(marker, "x", 1);
    ck_assert(asprintf(&args, "quantize testdata/llama-tiny %s/out", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 2);
    /* issue 23: not "--force replaces it", which --force would then refuse */
    ck_assert_msg(strstr(err, "not written by fp8conv") && !strstr(err, "--force replaces it"),
                  "%s", err);
    ck_assert(exists(marker));
    free(err);
    free(args);
    /* issue 11.2: --force replaces only what fp8conv wrote */
    ck_assert(asprintf(&args, "quantize -q --force testdata/llama-tiny %s/out", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 2);
    ck_assert_msg(strstr(err, "not written by fp8conv"), "%s", err);
    ck_assert(exists(marker));
    free(err);
    char *out = strndup(marker, strlen(marker) - strlen("/marker"));
    ck_assert(unlink(marker) == 0 && rmdir(out) == 0);
    ck_assert(asprintf(&err, "quantize -q testdata/llama-tiny %s", out) > 0);
    ck_assert_int_eq(tu_run(err, NULL, NULL), 0);
    free(err);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0); /* over its own output */
    tu_spit(marker, "x", 1);
    ck_assert_int_eq(tu_run(args, NULL, &err), 2);
    ck_assert_msg(strstr(err, "holds 1 entry fp8conv did not write ('marker')"), "%s", err);
    ck_assert(exists(marker));
    free(err);
    ck_assert(unlink(marker) == 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    ck_assert(asprintf(&args, "%s/out/config.json", dir) > 0);
    ck_assert(exists(args));
    free(args);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    free(out);
    free(marker);
    tu_tmpdir_free(dir);
}
END_TEST

/* issue 23: --force removes nothing fp8conv did not write, in subfolders
 * too, and names every foreign entry at once; a file OUTPUT only when it is
 * a safetensors file; a link to a directory is named as a link. */
START_TEST(test_force_refuses_what_fp8conv_did_not_write)
{
    char *dir = tu_tmpdir(), *err;
    char *cmd;
    ck_assert(asprintf(&cmd, "cp -r testdata/llama-tiny %s/in && mkdir %s/in/1_Pooling && "
                             "echo '{}' > %s/in/1_Pooling/config.json", dir, dir, dir) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    ck_assert_int_eq(tu_run_fmt(NULL, "quantize -q %s/in %s/out", dir, dir), 0);
    ck_assert(asprintf(&cmd, "echo mine > %s/out/1_Pooling/NOTES.txt && rm %s/out/tokenizer.json "
                             "&& mkdir %s/out/tokenizer.json && echo mine > "
                             "%s/out/tokenizer.json/a", dir, dir, dir, dir) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --force %s/in %s/out", dir, dir), 2);
    ck_assert_msg(strstr(err, "holds 2 entries fp8conv did not write ('1_Pooling/NOTES.txt', "
                              "'tokenizer.json/')"), "%s", err);
    free(err);
    char *notes, *a;
    ck_assert(asprintf(&notes, "%s/out/1_Pooling/NOTES.txt", dir) > 0);
    ck_assert(asprintf(&a, "%s/out/tokenizer.json/a", dir) > 0);
    ck_assert(exists(notes) && exists(a));
    /* without --force: the same reason, not "--force replaces it" */
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q %s/in %s/out", dir, dir), 2);
    ck_assert_msg(strstr(err, "did not write") && !strstr(err, "--force replaces it"), "%s",
                  err);
    free(err);
    ck_assert(unlink(notes) == 0 && unlink(a) == 0);
    a[strlen(a) - 2] = '\0';
    ck_assert(rmdir(a) == 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "quantize -q --force %s/in %s/out", dir, dir), 0);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q %s/in %s/in", dir, dir), 2);
    ck_assert_msg(strstr(err, "OUTPUT is the INPUT") && !strstr(err, "--force replaces it"), "%s",
                  err);
    free(err);
    /* a link to a directory */
    ck_assert(asprintf(&cmd, "ln -s out %s/link", dir) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --force %s/in %s/link", dir, dir), 2);
    ck_assert_msg(strstr(err, "is a symbolic link"), "%s", err);
    free(err);
    /* a file: a user's essay stays; fp8conv's own safetensors file is replaced */
    char *essay;
    ck_assert(asprintf(&essay, "%s/essay.txt", dir) > 0);
    tu_spit(essay, "my essay\n", 9);
    ck_assert_int_eq(tu_run_fmt(&err, "quantize -q --force testdata/quant-edge/model.safetensors "
                                      "%s", essay), 2);
    ck_assert_msg(strstr(err, "is not a safetensors file"), "%s", err);
    free(err);
    size_t len;
    char *text = tu_slurp(essay, &len);
    ck_assert(len == 9 && memcmp(text, "my essay\n", 9) == 0);
    free(text);
    ck_assert_int_eq(tu_run_fmt(NULL, "quantize -q testdata/quant-edge/model.safetensors "
                                      "%s/o.safetensors", dir), 0);
    ck_assert_int_eq(tu_run_fmt(NULL, "quantize -q --force testdata/quant-edge/model.safetensors "
                                      "%s/o.safetensors", dir), 0);
    free(essay);
    free(notes);
    free(a);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_single_file_in_single_file_out)
{
    char *dir = tu_tmpdir(), *args, *out;
    ck_assert(asprintf(&out, "%s/edge-fp8.safetensors", dir) > 0);
    ck_assert(asprintf(&args, "quantize -q testdata/quant-edge/model.safetensors %s", out) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    /* same tensors and bytes as the directory case's shard */
    expect_golden_file(out, GOLDEN_DIR, "edge-block-hf-fp8", "model.safetensors");
    ck_assert_int_eq(count_entries(dir, ""), 3); /* ".", "..", the file */
    free(args);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* A zstd-compressed shard is read as a stream (serialised between threads)
 * and written uncompressed under the name without .zst. */
START_TEST(test_zstd_input_gives_the_same_output)
{
    char *dir = tu_tmpdir(), *path, *args;
    ck_assert(asprintf(&path, "%s/in", dir) > 0);
    ck_assert(mkdir(path, 0755) == 0);
    free(path);
    ck_assert(asprintf(&path, "%s/in/model.safetensors.zst", dir) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f;
    fp8_writer *w;
    ck_assert(fp8_file_open(ctx, "testdata/quant-edge/model.safetensors", &f) == FP8_OK);
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    for (size_t i = 0; i < fp8_file_tensor_count(f); i++) {
        const fp8_tensor_info *t = fp8_file_tensor(f, i);
        ck_assert(fp8_writer_add_tensor(ctx, w, t->name, t->dtype, t->rank, t->shape) == FP8_OK);
    }
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const fp8_tensor_info *t = fp8_file_find(f, fp8_writer_tensor(w, i)->name);
        size_t n = (size_t)fp8_tensor_nbytes(t);
        void *buf = malloc(n ? n : 1);
        ck_assert(fp8_file_read(ctx, f, t, 0, buf, n) == FP8_OK);
        ck_assert(fp8_writer_write(ctx, w, buf, n) == FP8_OK);
        free(buf);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_file_close(f);
    fp8_ctx_free(ctx);
    ck_assert(asprintf(&args, "cp testdata/quant-edge/config.json %s/in/", dir) > 0);
    ck_assert(system(args) == 0);
    free(args);
    ck_assert(asprintf(&args, "quantize -q -j 2 %s/in %s/out", dir, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(path);
    ck_assert(asprintf(&path, "%s/out/model.safetensors", dir) > 0);
    expect_golden_file(path, GOLDEN_DIR, "edge-block-hf-fp8", "model.safetensors");
    free(args);
    free(path);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dry_run_writes_nothing_and_reports)
{
    char *dir = tu_tmpdir(), *args, *out, *err;
    ck_assert(asprintf(&args, "quantize --dry-run --json testdata/llama-tiny %s/out", dir) > 0);
    ck_assert_int_eq(tu_run(args, &out, &err), 0);
    ck_assert_int_eq(count_entries(dir, ""), 2);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "dry_run")));
    ck_assert_int_eq(cJSON_GetObjectItem(j, "quantized")->valueint, 14);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "ignored")), 2);
    free(args);
    /* the reported size is what a real run writes */
    ck_assert(asprintf(&args, "quantize -q testdata/llama-tiny %s/out", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    struct stat a, b;
    char p[512];
    snprintf(p, sizeof p, "%s/out/model-00001-of-00002.safetensors", dir);
    ck_assert(stat(p, &a) == 0);
    snprintf(p, sizeof p, "%s/out/model-00002-of-00002.safetensors", dir);
    ck_assert(stat(p, &b) == 0);
    ck_assert_uint_eq((uint64_t)(a.st_size + b.st_size),
                      (uint64_t)cJSON_GetObjectItem(j, "output_bytes")->valuedouble);
    cJSON_Delete(j);
    free(out);
    free(err);
    /* issue 23: a dry run over an existing OUTPUT says the run would refuse it */
    ck_assert_int_eq(tu_run_fmt(&err, "quantize --dry-run testdata/llama-tiny %s/out", dir), 0);
    ck_assert_msg(strstr(err, "out: exists; the run would refuse it"), "%s", err);
    free(err);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST


/* issue 45: llm-compressor's ignore entries, as compressed-tensors matches
 * them: "re:" and a regex matched from the start of the module's name (so
 * "$" ends at the module, not at ".weight"); a pattern that names nothing
 * is said (a warning, or an error with --strict). */
START_TEST(test_ignore_takes_llm_compressor_forms)
{
    char *dir = tu_tmpdir(), *args, *out, *err;
    ck_assert(asprintf(&args, "quantize --dry-run --json --ignore 're:.*q_proj$' "
                              "--ignore 're:model.layers.1.mlp' --ignore 're:self_attn' "
                              "--ignore 'lm_head' testdata/llama-tiny %s/out", dir) > 0);
    ck_assert_int_eq(tu_run(args, &out, &err), 0);
    free(args);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    const cJSON *t;
    size_t kept = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "tensors")) {
        const char *name = cJSON_GetObjectItem(t, "name")->valuestring;
        const cJSON *reason = cJSON_GetObjectItem(t, "reason");
        bool q = strstr(name, "q_proj.weight") || strstr(name, "layers.1.mlp.");
        if (q && strstr(name, ".weight")) {
            ck_assert_msg(reason && strstr(reason->valuestring, "matches --ignore 're:"), "%s", name);
            kept++;
        }
        if (strstr(name, "layers.0.mlp."))
            ck_assert_msg(!reason, "%s kept: %s", name, reason ? reason->valuestring : "");
    }
    ck_assert_uint_eq(kept, 5); /* two q_proj, layer 1's gate, up and down */
    /* anchored at the name's start: re:self_attn names no module */
    char *w = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "warnings"));
    ck_assert_msg(strstr(w, "--ignore 're:self_attn' matches no tensor"), "%s", w);
    ck_assert_msg(!strstr(w, "lm_head"), "%s", w);
    ck_assert_msg(strstr(err, "warning: --ignore 're:self_attn' matches no tensor"), "%s", err);
    free(w);
    cJSON_Delete(j);
    free(out);
    free(err);
    /* --like a release whose list has one: the same reading (it kept nothing) */
    ck_assert(asprintf(&args, "sed 's/^{/{\"quantization_config\": {\"quant_method\": \"fp8\", "
                              "\"activation_scheme\": \"dynamic\", \"weight_block_size\": [32, 32], "
                              "\"modules_to_not_convert\": [\"lm_head\", \"re:.*down_proj$\"]},/' "
                              "testdata/llama-tiny/config.json > %s/ref.json", dir) > 0);
    ck_assert(system(args) == 0);
    free(args);
    ck_assert(asprintf(&args, "quantize --dry-run --like %s/ref.json testdata/llama-tiny %s/out",
                       dir, dir) > 0);
    ck_assert_int_eq(tu_run(args, &out, &err), 0);
    ck_assert_msg(strstr(out, "not converted: lm_head model.embed_tokens model.layers.0.mlp.down_proj "
                              "model.layers.1.mlp.down_proj\n"), "%s", out);
    free(args);
    free(out);
    free(err);
    tu_tmpdir_free(dir);
}
END_TEST


/* issue 45: a bare --ignore entry equal to a module's whole name names
 * that module only, as compressed-tensors' equality test does: the router
 * model.layers.0.mlp.gate, not model.layers.0.mlp.gate_proj; one that is no
 * module's name stays a regex searched in the tensor's name. */
START_TEST(test_ignore_bare_module_name_is_exact)
{
    static uint16_t w[64 * 64];
    for (size_t i = 0; i < 64 * 64; i++)
        w[i] = (uint16_t)(0x3c00 + (i % 512));
    t_spec ts[3] = {
        { "model.layers.0.mlp.gate.weight", FP8_DTYPE_BF16, 2, { 64, 64 }, w },
        { "model.layers.0.mlp.gate_proj.weight", FP8_DTYPE_BF16, 2, { 64, 64 }, w },
        { "model.layers.0.mlp.down_proj.weight", FP8_DTYPE_BF16, 2, { 64, 64 }, w },
    };
    char *dir = tu_tmpdir(), *out, *err, *args;
    char *in = write_ck(dir, "in", ts, 3, "{\"model_type\": \"llama\"}");
    static const struct {
        const char *pattern;
        bool gate, gate_proj, down_proj; /* kept */
    } rows[] = {
        { "model.layers.0.mlp.gate", true, false, false },   /* a module: exact */
        { "model.layers.0.mlp.gate_proj", false, true, false },
        { "mlp.gate", true, true, false },                   /* no module: searched */
        { "re:model.layers.0.mlp.gate", true, true, false }, /* re.match from the start */
        { "re:model.layers.0.mlp.gate$", true, false, false },
    };
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        ck_assert(asprintf(&args, "quantize --dry-run --block 32x32 --no-default-ignore "
                                  "--ignore '%s' %s %s/out", rows[r].pattern, in, dir) > 0);
        ck_assert_int_eq(tu_run(args, &out, &err), 0);
        bool kept[3] = { rows[r].gate, rows[r].gate_proj, rows[r].down_proj };
        for (size_t k = 0; k < 3; k++) {
            char line[160];
            snprintf(line, sizeof line, "keep      %s BF16 [64, 64]: matches --ignore", ts[k].name);
            ck_assert_msg(!strstr(out, line) == !kept[k], "%s, %s:\n%s", rows[r].pattern,
                          ts[k].name, out);
        }
        free(args);
        free(out);
        free(err);
    }
    free(in);
    tu_tmpdir_free(dir);
}
END_TEST


/* issue 45: verify's tower-quantized per model_type (fmt_tower_unquantized):
 * a tower the loaders build with the checkpoint's quant config loads
 * quantized (Qwen2.5-VL's visual, Mllama's vision_model: no finding); one
 * vLLM builds unquantized is a finding (InternVL's mlp1, LLaVA-NeXT-Video's
 * projector), and quantize keeps it bf16 by default for that model_type. */
START_TEST(test_tower_rows_per_model_type)
{
    static uint16_t w[64 * 64];
    for (size_t i = 0; i < 64 * 64; i++)
        w[i] = (uint16_t)(0x3c00 + (i % 512));
    static const struct {
        const char *model_type, *tower;
        bool finding;
    } rows[] = {
        { "qwen2_5_vl", "visual.blocks.0.attn.qkv.weight", false },
        { "mllama", "vision_model.transformer.layers.0.mlp.fc1.weight", false },
        { "internvl_chat", "mlp1.1.weight", true },
        { "llava_next_video", "multi_modal_projector.linear_1.weight", true },
    };
    for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
        t_spec ts[2] = {
            { rows[r].tower, FP8_DTYPE_BF16, 2, { 64, 64 }, w },
            { "language_model.model.layers.0.mlp.down_proj.weight", FP8_DTYPE_BF16, 2, { 64, 64 }, w },
        };
        char *dir = tu_tmpdir(), *out, *err, *args, config[96], want[256];
        snprintf(config, sizeof config, "{\"model_type\": \"%s\"}", rows[r].model_type);
        char *in = write_ck(dir, "in", ts, 2, config);
        ck_assert(asprintf(&args, "quantize --dry-run --block 32x32 %s %s/out", in, dir) > 0);
        ck_assert_int_eq(tu_run(args, &out, &err), 0);
        free(args);
        snprintf(want, sizeof want, "keep      %s BF16 [64, 64]: vision tower or multimodal projector\n",
                 rows[r].tower);
        ck_assert_msg(strstr(out, want), "%s: %s", rows[r].model_type, out);
        free(out);
        free(err);
        ck_assert(asprintf(&args, "quantize -q --no-default-ignore --block 32x32 %s %s/all", in, dir) > 0);
        ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
        free(args);
        ck_assert(asprintf(&args, "verify --no-values --json %s/all", dir) > 0);
        tu_run(args, &out, &err);
        free(args);
        snprintf(want, sizeof want, "%s is F8_E4M3, but it is in the vision tower or projector of a %s model, which vLLM",
                 rows[r].tower, rows[r].model_type);
        ck_assert_msg(!strstr(out, want) == !rows[r].finding, "%s: %s", rows[r].model_type, out);
        ck_assert_msg(!strstr(out, "tower-quantized") == !rows[r].finding, "%s: %s", rows[r].model_type, out);
        free(out);
        free(err);
        free(in);
        tu_tmpdir_free(dir);
    }
}
END_TEST

/* issue 45: a multimodal model's vision tower and projector stay bf16 by
 * default, each named in the plan; verify says where a loader builds the
 * tower unquantized (Llama-4: vLLM's vision model, SGLang's projector). */
START_TEST(test_vision_towers_stay_bf16)
{
    static uint16_t w[64 * 64];
    for (size_t i = 0; i < 64 * 64; i++)
        w[i] = (uint16_t)(0x3c00 + (i % 512));
    static const char *const towers[] = {
        "model.visual.blocks.0.attn.qkv.weight", "multi_modal_projector.linear_1.weight",
        "vision_model.model.layers.0.mlp.fc1.weight", "vision_tower.encoder.layers.0.fc1.weight",
        "model.mm_projector.0.weight", "vision_encoder.transformer.layers.0.attention.wq.weight",
        "vision_language_adapter.w_in.weight", "patch_merger.merging_layer.weight",
        "pre_mm_projector_norm.weight",
    };
    enum { NT = sizeof towers / sizeof *towers };
    t_spec ts[NT + 1];
    for (size_t i = 0; i < NT; i++)
        ts[i] = (t_spec){ towers[i], FP8_DTYPE_BF16, 2, { 64, 64 }, w };
    ts[NT] = (t_spec){ "language_model.model.layers.0.mlp.down_proj.weight", FP8_DTYPE_BF16, 2,
                       { 64, 64 }, w };
    char *dir = tu_tmpdir(), *out, *err, *args;
    char *in = write_ck(dir, "in", ts, NT + 1, "{\"model_type\": \"llama4\"}");
    ck_assert(asprintf(&args, "quantize --dry-run --block 32x32 %s %s/out", in, dir) > 0);
    ck_assert_int_eq(tu_run(args, &out, &err), 0);
    free(args);
    for (size_t i = 0; i < NT; i++) {
        char want[256];
        snprintf(want, sizeof want, "keep      %s BF16 [64, 64]: vision tower or multimodal projector\n",
                 towers[i]);
        ck_assert_msg(strstr(out, want), "%s", out);
    }
    ck_assert_msg(strstr(out, "tensors: 1 quantized, 9 kept"), "%s", out);
    free(out);
    free(err);
    /* quantized all the same: what vLLM and SGLang would not load */
    ck_assert(asprintf(&args, "quantize -q --no-default-ignore --block 32x32 %s %s/all", in, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    ck_assert(asprintf(&args, "verify --no-values --json %s/all", dir) > 0);
    tu_run(args, &out, &err);
    free(args);
    ck_assert_msg(strstr(out, "vision_model.model.layers.0.mlp.fc1.weight is F8_E4M3, but it is in "
                              "the vision tower or projector of a llama4 model, which vLLM builds"),
                  "%s", out);
    ck_assert_msg(strstr(out, "multi_modal_projector.linear_1.weight is F8_E4M3, but it is in the "
                              "vision tower or projector of a llama4 model, which SGLang builds"),
                  "%s", out);
    ck_assert_msg(!strstr(out, "qkv.weight is F8_E4M3, but it is in the vision"), "%s", out);
    free(out);
    free(err);
    free(in);
    tu_tmpdir_free(dir);
}
END_TEST

/* Usage errors: exit 2, a message naming the rule, nothing written. */
static const struct {
    const char *args, *message;
} usage_cases[] = {
    { "--scheme channel --format hf-fp8", "pairs that exist" },
    { "--scheme block --format modelopt", "pairs that exist" },
    { "--scheme mxfp8 --format hf-fp8", "pairs that exist" },
    /* no correct output without calibration data: vLLM wants input_scale */
    { "--scheme tensor --format modelopt", "calibrated input_scale" },
    { "--scheme blocky", "not one of block, channel, tensor, mxfp8, nvfp4, mxfp4 or int4" },
    { "--format onnx", "not one of" },
    { "--block 128", "ROWSxCOLS" },
    { "--block 0x128", "ROWSxCOLS" },
    { "--block 128x5000", "ROWSxCOLS" },
    { "--scheme channel --block 64x64", "--block applies to --scheme block only" },
    { "--scheme block --mx-rounding floor", "--mx-rounding applies" },
    { "--scheme block --format compressed-tensors --scale-fmt ue8m0", "ue8m0" },
    { "--ignore '('", "not a POSIX extended regex" },
    { "--ignore 're:('", "not a POSIX extended regex" },
    /* issue 43: glibc takes minutes on a long name with one */
    { "--ignore '(a+)+\\1'", "a back-reference" },
    { "--ignore 're:(q)\\1'", "a back-reference" },
    { "--strict --ignore re:model.layers.9", "matches no tensor" },
    { "--bogus", "unknown option" },
    { "--profile vllm --scheme mxfp8", "--profile vllm does not define --scheme mxfp8 "
                                       "(it defines: block, channel, tensor)" },
    { "--profile llm-compressor --scheme nvfp4", "(it defines: block, channel, tensor, mxfp8)" },
    { "--profile sglang --scheme tensor", "(it defines: block)" },
    { "--profile deepgemm --scheme channel", "(it defines: block)" },
    { "--profile deepgemm --format compressed-tensors", "--format hf-fp8 only" },
    { "--profile transformers --scheme tensor --format compressed-tensors",
      "computes F32 scales" },
    { "--profile te --scale-fmt ue8m0", "--scale-fmt ue8m0 is fp8conv's" },
    { "--profile vllms", "not one of" },
};

/* sentence-transformers keeps modules in subfolders (1_Pooling/, 2_Dense/
 * with its own weights): copied whole, byte for byte; hidden entries and a
 * link to a directory (which could loop) are not. */
START_TEST(test_subfolders_are_copied)
{
    char *dir = tu_tmpdir(), *cmd;
    ck_assert(asprintf(&cmd,
                       "cp -r testdata/llama-tiny %s/in && mkdir -p %s/in/1_Pooling %s/in/2_Dense "
                       "%s/in/.cache && echo '{\"pooling_mode_mean_tokens\": true}' > "
                       "%s/in/1_Pooling/config.json && cp testdata/llama-tiny/"
                       "model-00002-of-00002.safetensors %s/in/2_Dense/model.safetensors && "
                       "echo x > %s/in/.cache/junk && ln -s . %s/in/loop",
                       dir, dir, dir, dir, dir, dir, dir, dir) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    char *in, *out;
    ck_assert(asprintf(&in, "%s/in", dir) > 0);
    out = quantize_into(dir, "--block 32x32", in);
    ck_assert(asprintf(&cmd, "cmp %s/1_Pooling/config.json %s/1_Pooling/config.json && "
                             "cmp %s/2_Dense/model.safetensors %s/2_Dense/model.safetensors && "
                             "test ! -e %s/.cache && test ! -e %s/loop",
                       in, out, in, out, out, out) > 0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    free(cmd);
    free(in);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* fuzz_dir found it: a config.json with "quantization_config": null (no
 * quantization, so accepted) came out with two quantization_config keys, the
 * null first: verify read none, Python's json (the loaders) the last. */
START_TEST(test_null_quantization_config_is_replaced_not_duplicated)
{
    char *dir = tu_tmpdir(), *cmd;
    ck_assert(asprintf(&cmd,
                       "cp -r testdata/llama-tiny %s/in && sed -i "
                       "'s/^{/{\\n  \"quantization_config\": null,/' %s/in/config.json && "
                       "grep -q '\"quantization_config\": null' %s/in/config.json",
                       dir, dir, dir) > 0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    free(cmd);
    char *in, *out, *path;
    ck_assert(asprintf(&in, "%s/in", dir) > 0);
    out = quantize_into(dir, "--block 32x32", in);
    ck_assert(asprintf(&path, "%s/config.json", out) > 0);
    size_t len;
    char *text = tu_slurp(path, &len);
    size_t keys = 0;
    for (const char *p = text; (p = strstr(p, "\"quantization_config\"")); p++)
        keys++;
    ck_assert_uint_eq(keys, 1);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_verify *v;
    fp8_verify_options o = FP8_VERIFY_OPTIONS_INIT;
    ck_assert(fp8_verify_run(ctx, out, &o, &v) == FP8_OK);
    ck_assert_str_eq(fp8_verify_format(v), "hf-fp8, scheme block 32x32");
    fp8_verify_free(v);
    fp8_ctx_free(ctx);
    free(text);
    free(path);
    free(in);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* A pair a loader cannot load for the model at hand is bad input: vLLM's
 * ModelOpt FP8 MoE method takes per-tensor expert scales only. */
START_TEST(test_loader_rules_refuse_pairs)
{
    char *dir = tu_tmpdir(), *args, *err;
    ck_assert(asprintf(&args, "quantize --scheme channel --format modelopt testdata/quant-edge "
                              "%s/out", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, "experts") && strstr(err, "ModelOptFp8MoEMethod") &&
                      strstr(err, "--format compressed-tensors"),
                  "%s", err);
    ck_assert_int_eq(count_entries(dir, ""), 2);
    free(err);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_usage_errors_exit_2_and_write_nothing)
{
    char *dir = tu_tmpdir(), *args, *err;
    ck_assert(asprintf(&args, "quantize %s testdata/llama-tiny %s/out", usage_cases[_i].args,
                       dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 2);
    ck_assert_msg(strstr(err, usage_cases[_i].message), "%s: %s", usage_cases[_i].args, err);
    ck_assert_int_eq(count_entries(dir, ""), 2);
    free(err);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

static void expect_signal_leaves_nothing(int sig)
{
    char *dir = tu_tmpdir();
    /* 96 MiB: long enough at -j 1 that the signal lands mid-run */
    char *model = make_model(dir, "m", 2048, 24576, -1, 0);
    const char *argv[] = { "quantize", "-q", "-j", "1", "--scheme", "tensor", model, NULL, NULL };
    expect_interrupt_leaves_nothing(dir, argv, 7, sig);
    free(model);
    tu_tmpdir_free(dir);
}

START_TEST(test_sigint_leaves_nothing)
{
    expect_signal_leaves_nothing(SIGINT);
}
END_TEST

START_TEST(test_sigterm_leaves_nothing)
{
    expect_signal_leaves_nothing(SIGTERM);
}
END_TEST

/* issue 11.7: a closed terminal, and `... 2>&1 | head` once head is gone */
START_TEST(test_sighup_leaves_nothing)
{
    expect_signal_leaves_nothing(SIGHUP);
}
END_TEST

START_TEST(test_sigpipe_leaves_nothing)
{
    expect_signal_leaves_nothing(SIGPIPE);
}
END_TEST

/* A checkpoint of `n` shards, one bf16 down_proj of rows x cols each, with
 * its index; returns DIR/NAME. */
static char *make_sharded(const char *dir, const char *name, int n, uint64_t rows, uint64_t cols)
{
    char *model, *path, *index = NULL;
    ck_assert(asprintf(&model, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    size_t cap = 64 + (size_t)n * 128, len = 0;
    index = malloc(cap);
    len += (size_t)snprintf(index, cap, "{\"metadata\": {}, \"weight_map\": {");
    uint16_t *buf = malloc(cols * 2);
    for (int k = 0; k < n; k++) {
        char shard[64], tensor[64];
        snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", k + 1, n);
        snprintf(tensor, sizeof tensor, "model.layers.%d.mlp.down_proj.weight", k);
        len += (size_t)snprintf(index + len, cap - len, "%s\"%s\": \"%s\"", k ? ", " : "",
                                tensor, shard);
        ck_assert(asprintf(&path, "%s/%s", model, shard) > 0);
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_writer *w;
        uint64_t shape[2] = { rows, cols };
        ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
        ck_assert(fp8_writer_add_tensor(ctx, w, tensor, FP8_DTYPE_BF16, 2, shape) == FP8_OK);
        ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
        for (uint64_t r = 0; r < rows; r++) {
            for (uint64_t c = 0; c < cols; c++)
                buf[c] = (uint16_t)(0x3000 + ((r * cols + c + (uint64_t)k) * 2654435761u >> 7) %
                                                 0x1800);
            ck_assert(fp8_writer_write(ctx, w, buf, cols * 2) == FP8_OK);
        }
        ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
        fp8_writer_free(w);
        fp8_ctx_free(ctx);
        free(path);
    }
    snprintf(index + len, cap - len, "}}\n");
    ck_assert(asprintf(&path, "%s/model.safetensors.index.json", model) > 0);
    tu_spit(path, index, strlen(index));
    free(path);
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    tu_spit(path, "{\"model_type\": \"llama\"}\n", 24);
    free(path);
    free(index);
    free(buf);
    return model;
}

/* issue 23: Slurm and Kubernetes stop a job with SIGTERM; the shards it
 * finished stay for --resume, which ends byte for byte as a run never
 * stopped. */
START_TEST(test_sigterm_keeps_finished_shards_for_resume)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 16, 1024, 4096), *cmd, *err;
    ck_assert(asprintf(&cmd, "quantize -q -j 1 %s %s/ref", model, dir) > 0);
    ck_assert_int_eq(tu_run(cmd, NULL, NULL), 0);
    free(cmd);
    char *out, *errfile, *pattern;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    ck_assert(asprintf(&errfile, "%s/err", dir) > 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        if (!freopen(errfile, "w", stderr))
            _exit(126);
        execl(FP8CONV_BIN, "fp8conv", "quantize", "-q", "-j", "1", model, out, (char *)NULL);
        _exit(127);
    }
    /* stopped once a shard is recorded, with most still to write (glob(3)
     * in this process: a poll far shorter than a shard) */
    ck_assert(asprintf(&pattern, "%s/.out.tmp-*/.fp8conv-parts/*.done", dir) > 0);
    glob_t g = { 0 };
    for (int i = 0; i < 2000000 && glob(pattern, 0, NULL, &g) != 0; i++)
        usleep(10);
    globfree(&g);
    kill(pid, SIGTERM);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 143, "status 0x%x", status);
    ck_assert(!exists(out));
    ck_assert_int_eq(count_entries(dir, ".out.tmp-"), 1);
    size_t len;
    err = tu_slurp(errfile, &len);
    ck_assert_msg(strstr(err, "of 16 shards it finished") && strstr(err, "are kept in") &&
                      strstr(err, "with --resume to finish"),
                  "%s", err);
    free(err);
    ck_assert(asprintf(&cmd, "quantize -q -j 1 --resume %s %s", model, out) > 0);
    ck_assert_int_eq(tu_run(cmd, NULL, &err), 0);
    ck_assert_msg(strstr(err, "resuming the run") && strstr(err, "of 16 shards that"), "%s", err);
    free(err);
    free(cmd);
    ck_assert(asprintf(&cmd, "diff -r %s/ref %s", dir, out) > 0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    free(cmd);
    free(pattern);
    free(errfile);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* issue 45.5: DIR/m, one shard of T bf16 [ROWS, COLS] matrices (128 MiB),
 * and DIR/ref, its quantize run never stopped; the model's path */
enum { T = 32, ROWS = 512, COLS = 4096 };
static char *stop_model(const char *dir)
{
    char *model, *path, *cmd;
    ck_assert(asprintf(&model, "%s/m", dir) > 0);
    ck_assert(mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    uint64_t shape[2] = { ROWS, COLS };
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    for (int t = 0; t < T; t++) {
        char name[64];
        snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", t);
        ck_assert(fp8_writer_add_tensor(ctx, w, name, FP8_DTYPE_BF16, 2, shape) == FP8_OK);
    }
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    uint16_t *row = malloc(COLS * 2);
    for (uint64_t r = 0; r < (uint64_t)T * ROWS; r++) {
        for (uint64_t c = 0; c < COLS; c++)
            row[c] = (uint16_t)(0x3000 + ((r * COLS + c) * 2654435761u >> 7) % 0x1800);
        ck_assert(fp8_writer_write(ctx, w, row, COLS * 2) == FP8_OK);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
    free(row);
    free(path);
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    tu_spit(path, "{\"model_type\": \"llama\"}\n", 24);
    free(path);
    ck_assert(asprintf(&cmd, "quantize -q -j 1 %s %s/ref", model, dir) > 0);
    ck_assert_int_eq(tu_run(cmd, NULL, NULL), 0);
    free(cmd);
    return model;
}

/* issue 45.5: a run stopped inside its only shard keeps the tensors it
 * wrote whole; --resume writes the rest, byte for byte a run never stopped */
START_TEST(test_sigterm_inside_a_shard_keeps_whole_tensors)
{
    char *dir = tu_tmpdir(), *model = stop_model(dir), *cmd, *err;
    char *out, *errfile, *pattern;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    ck_assert(asprintf(&errfile, "%s/err", dir) > 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        if (!freopen(errfile, "w", stderr))
            _exit(126);
        execl(FP8CONV_BIN, "fp8conv", "quantize", "-q", "-j", "1", model, out, (char *)NULL);
        _exit(127);
    }
    /* stopped once about a third of the shard's codes are written */
    ck_assert(asprintf(&pattern, "%s/.out.tmp-*/.model.safetensors.tmp-*", dir) > 0);
    struct stat sb = { 0 };
    for (int i = 0; i < 2000000; i++) {
        glob_t g = { 0 };
        bool far = glob(pattern, 0, NULL, &g) == 0 && stat(g.gl_pathv[0], &sb) == 0 &&
                   sb.st_size > (off_t)T * ROWS * COLS / 3;
        globfree(&g);
        if (far)
            break;
        usleep(10);
    }
    kill(pid, SIGTERM);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 143, "status 0x%x", status);
    err = tu_slurp(errfile, NULL);
    ck_assert_msg(strstr(err, "the 0 of 1 shards it finished and the ") &&
                      strstr(err, "tensors it wrote whole of the 1 in progress are kept in"),
                  "%s", err);
    free(err);
    ck_assert(asprintf(&cmd, "quantize -q -j 2 --resume %s %s", model, out) > 0);
    ck_assert_int_eq(tu_run(cmd, NULL, &err), 0);
    ck_assert_msg(strstr(err, "resuming the run") &&
                      strstr(err, "tensors of model.safetensors that the stopped run wrote"),
                  "%s", err);
    free(err);
    free(cmd);
    ck_assert(asprintf(&cmd, "diff -r %s/ref %s", dir, out) > 0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    free(cmd);
    free(pattern);
    free(errfile);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* issue 45.5: a run killed (kill -9, as a power loss) inside its only
 * shard keeps the tensors its last record names (SHARD.partial, written as
 * tensors finish); --resume writes the rest, byte for byte a clean run */
START_TEST(test_sigkill_inside_a_shard_keeps_recorded_tensors)
{
    char *dir = tu_tmpdir(), *model = stop_model(dir), *cmd, *err, *out, *pattern, *rec = NULL;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        execl(FP8CONV_BIN, "fp8conv", "quantize", "-q", "-j", "1", model, out, (char *)NULL);
        _exit(127);
    }
    /* killed as soon as a record names tensors written whole */
    ck_assert(asprintf(&pattern, "%s/.out.tmp-*/.fp8conv-parts/model.safetensors.partial", dir) > 0);
    glob_t g = { 0 };
    for (int i = 0; i < 2000000 && !rec; i++) {
        if (glob(pattern, 0, NULL, &g) == 0)
            ck_assert((rec = strdup(g.gl_pathv[0])));
        globfree(&g);
        if (!rec)
            usleep(10);
    }
    kill(pid, SIGKILL);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(rec && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
    char *text = tu_slurp(rec, NULL);
    const char *items = text ? strstr(text, "\nitems ") : NULL;
    ck_assert_msg(items && items[7] >= '0' && items[7] <= '9', "%s", text ? text : "(no record)");
    free(text);
    ck_assert(asprintf(&cmd, "quantize -q -j 2 --resume %s %s", model, out) > 0);
    ck_assert_int_eq(tu_run(cmd, NULL, &err), 0);
    ck_assert_msg(strstr(err, "resuming the run") &&
                      strstr(err, "tensors of model.safetensors that the stopped run wrote"),
                  "%s", err);
    free(err);
    free(cmd);
    ck_assert(asprintf(&cmd, "diff -r %s/ref %s", dir, out) > 0);
    ck_assert_msg(system(cmd) == 0, "%s", cmd);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    free(cmd);
    free(rec);
    free(pattern);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* issue 45.5: convert has no --resume: stopped with shards finished, it
 * keeps none and says so, rather than pointing to an option it refuses */
START_TEST(test_stopped_convert_keeps_nothing_and_says_why)
{
    char *dir = tu_tmpdir(), *model = make_sharded(dir, "m", 8, 1024, 4096), *cmd, *err;
    ck_assert(asprintf(&cmd, "quantize -q %s %s/f", model, dir) > 0);
    ck_assert_int_eq(tu_run(cmd, NULL, NULL), 0);
    free(cmd);
    char *in, *out, *errfile, *pattern;
    ck_assert(asprintf(&in, "%s/f", dir) > 0 && asprintf(&out, "%s/c", dir) > 0 &&
              asprintf(&errfile, "%s/err", dir) > 0);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        if (!freopen(errfile, "w", stderr))
            _exit(126);
        execl(FP8CONV_BIN, "fp8conv", "convert", "-q", "-j", "1", "--scheme", "channel", in, out,
              (char *)NULL);
        _exit(127);
    }
    /* stopped once its first shard is whole */
    ck_assert(asprintf(&pattern, "%s/.c.tmp-*/model-00001-of-00008.safetensors", dir) > 0);
    glob_t g = { 0 };
    for (int i = 0; i < 2000000 && glob(pattern, 0, NULL, &g) != 0; i++)
        usleep(10);
    globfree(&g);
    kill(pid, SIGTERM);
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 143, "status 0x%x", status);
    err = tu_slurp(errfile, NULL);
    ck_assert_msg(strstr(err, "nothing is kept: convert has no --resume") &&
                      !strstr(err, "with --resume to finish"), "%s", err);
    free(err);
    ck_assert_int_eq(count_entries(dir, ".c."), 0);
    free(pattern);
    free(errfile);
    free(out);
    free(in);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("quantize");
    TCase *tc = tcase_create("oracle");
    int ncases = count_cases(CASES);
    tcase_add_loop_test(tc, test_quantize_matches_numpy_oracle, 0, ncases);
    tcase_add_test(tc, test_every_case_has_a_golden);
    tcase_add_loop_test(tc, test_scale_names_dtypes_shapes_per_format, 0,
                        (int)(sizeof shape_rules / sizeof shape_rules[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("engine");
    tcase_add_test(tc, test_fast_band_equals_reference);
    tcase_add_test(tc, test_fast_band_equals_reference_under_every_profile);
    tcase_add_test(tc, test_transpose_equals_definition);
    tcase_add_test(tc, test_nonfinite_found_at_first_index);
    tcase_add_test(tc, test_scale_rules_of_spec);
    suite_add_tcase(s, tc);

    tc = tcase_create("job");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_same_bytes_for_every_thread_count, 0,
                        (int)(sizeof schemes / sizeof schemes[0]));
    tcase_add_test(tc, test_nan_is_bad_input_and_leaves_nothing);
    tcase_add_test(tc, test_infinity_is_bad_input_and_leaves_nothing);
    tcase_add_test(tc, test_scale_past_fp32_is_bad_input_and_leaves_nothing);
    tcase_add_test(tc, test_scale_make_refuses_only_what_reads_back_infinite);
    tcase_add_test(tc, test_already_quantized_input_is_refused);
    tcase_add_test(tc, test_existing_output_needs_force);
    tcase_add_test(tc, test_force_refuses_what_fp8conv_did_not_write);
    tcase_add_test(tc, test_single_file_in_single_file_out);
    tcase_add_test(tc, test_zstd_input_gives_the_same_output);
    tcase_add_test(tc, test_dry_run_writes_nothing_and_reports);
    tcase_add_test(tc, test_loader_rules_refuse_pairs);
    tcase_add_test(tc, test_subfolders_are_copied);
    tcase_add_test(tc, test_null_quantization_config_is_replaced_not_duplicated);
    tcase_add_loop_test(tc, test_usage_errors_exit_2_and_write_nothing, 0,
                        (int)(sizeof usage_cases / sizeof usage_cases[0]));
    tcase_add_test(tc, test_ignore_takes_llm_compressor_forms);
    tcase_add_test(tc, test_ignore_bare_module_name_is_exact);
    tcase_add_test(tc, test_vision_towers_stay_bf16);
    tcase_add_test(tc, test_tower_rows_per_model_type);
    tcase_add_test(tc, test_sigint_leaves_nothing);
    tcase_add_test(tc, test_sigterm_leaves_nothing);
    tcase_add_test(tc, test_sighup_leaves_nothing);
    tcase_add_test(tc, test_sigpipe_leaves_nothing);
    tcase_add_test(tc, test_sigterm_keeps_finished_shards_for_resume);
    tcase_add_test(tc, test_sigterm_inside_a_shard_keeps_whole_tensors);
    tcase_add_test(tc, test_sigkill_inside_a_shard_keeps_recorded_tensors);
    tcase_add_test(tc, test_stopped_convert_keeps_nothing_and_says_why);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
