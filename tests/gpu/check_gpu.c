/*
 * check_gpu.c - the CUDA kernels against the CPU reference, byte for byte
 * (make check-gpu; needs an NVIDIA GPU).  Every scheme's scale kind, BF16,
 * F16 and F32 sources, odd shapes and group shapes, random data of every
 * magnitude and the targeted cases: exact ties, subnormals, zeros, values
 * above 448 after scaling, all-zero groups, underflowing scales, bands big
 * enough for the kernels' grid-stride loops; then amax and dequantization.
 * On a machine without a usable GPU it fails: nothing was tested.
 */
#include "testutil.h"

#include "fill.h"
#include "gpu.h"
#include "quant.h"

static unsigned src_size(fp8_dtype d) { return d == FP8_DTYPE_F32 ? 4 : 2; }

/* A GPU with buffers for bands of up to `elems` F32 elements. */
static fp8_gpu *gpu_open(uint64_t elems, unsigned char *host[3])
{
    fp8_ctx *ctx = fp8_ctx_create();
    size_t bytes[3] = { elems * 4, elems * 4, elems * 4 };
    fp8_gpu *g = NULL;
    fp8_status st = fp8_gpu_create(ctx, bytes, &g, host);
    ck_assert_msg(st == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_ctx_free(ctx);
    return g;
}

/* Quantizes band b of x on the GPU and with the reference; asserts the same
 * codes and scales, or that the GPU flagged what the reference rejects. */
static void expect_band_equal(fp8_gpu *g, unsigned char *host[3], const fp8_band *b,
                              const void *x, const char *what)
{
    uint64_t n = b->rows * b->cols, ns = fp8_band_scale_count(b), where = 0;
    unsigned ssz = fp8_scale_size(b->kind);
    uint8_t *q = malloc(n ? n : 1), *s = malloc(ns * ssz + 1);
    fp8_band_result want = fp8_band_quantize_ref(b, x, q, s, &where);
    memcpy(host[0], x, n * src_size(b->src));
    fp8_ctx *ctx = fp8_ctx_create();
    bool bad = false;
    ck_assert_msg(fp8_gpu_quantize(ctx, g, b, &bad) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_ctx_free(ctx);
    ck_assert_msg(bad == (want != FP8_BAND_OK), "%s: GPU flag %d, reference result %d", what, bad,
                  want);
    if (want == FP8_BAND_OK) {
        for (uint64_t i = 0; i < n; i++)
            ck_assert_msg(q[i] == host[1][i], "%s: code %llu: reference 0x%02x, GPU 0x%02x", what,
                          (unsigned long long)i, q[i], host[1][i]);
        ck_assert_msg(memcmp(s, host[2], ns * ssz) == 0, "%s: scales differ", what);
    }
    free(q);
    free(s);
}

static const fp8_dtype dtypes[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };

START_TEST(test_random_bands_equal_reference)
{
    static const uint64_t dims[][2] = { { 1, 1 },     { 3, 7 },    { 128, 128 }, { 129, 257 },
                                        { 37, 96 },   { 256, 160 }, { 100, 4096 }, { 2, 20480 } };
    unsigned char *host[3];
    fp8_gpu *g = gpu_open(100 * 4096, host);
    void *x = malloc(100 * 4096 * 4);
    uint64_t cases = 0;
    for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++)
        for (size_t d = 0; d < 3; d++)
            for (size_t k = 0; k < sizeof dims / sizeof *dims; k++)
                for (int shape = 0; shape < 8; shape++) {
                    fp8_band b = { .src = dtypes[d], .kind = (fp8_scale_kind)kind,
                                   .rows = dims[k][0], .cols = dims[k][1], .scale = 0.37f };
                    /* one block row (what quantize runs), 128x128 tiles, a row, MX,
                     * 64x32, 1x128, 128x1, a fixed scale */
                    static const uint64_t gr[] = { 0, 128, 1, 1, 64, 1, 128, 1 };
                    static const uint64_t gc[] = { 128, 128, 0, 32, 32, 128, 1, 1 };
                    b.group_rows = gr[shape] ? gr[shape] : b.rows;
                    b.group_cols = gc[shape] ? gc[shape] : b.cols;
                    b.fixed = shape == 7;
                    fill(b.src, x, b.rows * b.cols);
                    if (k % 2) /* an all-zero row */
                        memset(x, 0, b.cols * src_size(b.src));
                    char what[160];
                    snprintf(what, sizeof what, "kind %d, %s, %llux%llu, groups %llux%llu%s", kind,
                             fp8_dtype_name(b.src), (unsigned long long)b.rows,
                             (unsigned long long)b.cols, (unsigned long long)b.group_rows,
                             (unsigned long long)b.group_cols, b.fixed ? " fixed" : "");
                    expect_band_equal(g, host, &b, x, what);
                    cases++;
                }
    ck_assert_uint_eq(cases, 6 * 3 * 8 * 8);
    free(x);
    fp8_gpu_free(g);
}
END_TEST

/* E4M3 midpoints: with amax 448 an F32 scale is exactly 1, so each value is
 * quantized as is, and halfway values must round to the even code. */
START_TEST(test_ties_subnormals_zeros_and_saturation)
{
    unsigned char *host[3];
    fp8_gpu *g = gpu_open(4096, host);
    float x[4 * 256];
    int n = 0;
    x[n++] = 448.0f;
    for (int c = 0; c < 0x7E; c++) { /* every midpoint between neighbours, both signs */
        float mid = (fp8_e4m3_to_f32((uint8_t)c) + fp8_e4m3_to_f32((uint8_t)(c + 1))) / 2;
        x[n++] = mid;
        x[n++] = -mid;
    }
    x[n++] = -0.0f;
    x[n++] = 0x1p-149f;   /* the smallest fp32 subnormal */
    x[n++] = -0x1p-126f;  /* fp32's smallest normal */
    x[n++] = 0x1p-10f;    /* exactly half the smallest E4M3 subnormal: ties to 0 */
    x[n++] = 0x1.8p-9f;   /* 1.5 units of 2^-9: ties to 2 */
    while (n % 32)
        x[n++] = 0;
    for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++) {
        fp8_band b = { .src = FP8_DTYPE_F32, .kind = (fp8_scale_kind)kind, .rows = 1,
                       .cols = (uint64_t)n, .group_rows = 1, .group_cols = (uint64_t)n };
        expect_band_equal(g, host, &b, x, "ties, one group");
        b.group_cols = 32; /* MX-sized groups: some all zero, some tiny */
        expect_band_equal(g, host, &b, x, "ties, groups of 32");
    }
    /* above 448 after scaling: floor MX with a significand above 1.75 saturates */
    float sat[32];
    for (int i = 0; i < 32; i++)
        sat[i] = (i % 2 ? -1.0f : 1.0f) * (1.99f - 0.01f * (float)i) * 0x1p20f;
    fp8_band mx = { .src = FP8_DTYPE_F32, .kind = FP8_SCALE_E8M0_FLOOR, .rows = 1, .cols = 32,
                    .group_rows = 1, .group_cols = 32 };
    expect_band_equal(g, host, &mx, sat, "floor saturation");
    /* scales that underflow: amax far below 448 * the smallest scale */
    float tiny[64];
    for (int i = 0; i < 64; i++)
        tiny[i] = fp8_f32_from_bits((uint32_t)(i + 1)); /* 2^-149 .. 64 * 2^-149 */
    for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++) {
        fp8_band b = { .src = FP8_DTYPE_F32, .kind = (fp8_scale_kind)kind, .rows = 2, .cols = 32,
                       .group_rows = 1, .group_cols = 32 };
        expect_band_equal(g, host, &b, tiny, "underflowing scales");
    }
    /* BF16 and F16 subnormal sources */
    uint16_t h[256];
    for (int i = 0; i < 256; i++)
        h[i] = (uint16_t)((i & 1) << 15 | (i >> 1));
    for (size_t d = 0; d < 2; d++)
        for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++) {
            fp8_band b = { .src = dtypes[d], .kind = (fp8_scale_kind)kind, .rows = 2, .cols = 128,
                           .group_rows = 2, .group_cols = 32 };
            expect_band_equal(g, host, &b, h, "16-bit subnormals");
        }
    fp8_gpu_free(g);
}
END_TEST

START_TEST(test_bad_input_is_flagged)
{
    unsigned char *host[3];
    fp8_gpu *g = gpu_open(4096, host);
    float x[300];
    fill(FP8_DTYPE_F32, x, 300);
    static const uint32_t bad_bits[] = { 0x7FC00000, 0xFF800000, 0x7F800000, 0x7F800001 };
    for (int k = 0; k < 4; k++)
        for (int fixed = 0; fixed < 2; fixed++) {
            float y[300];
            memcpy(y, x, sizeof y);
            y[211] = fp8_f32_from_bits(bad_bits[k]);
            fp8_band b = { .src = FP8_DTYPE_F32, .kind = FP8_SCALE_F32, .rows = 3, .cols = 100,
                           .group_rows = 3, .group_cols = 128, .fixed = fixed, .scale = 2 };
            expect_band_equal(g, host, &b, y, "a NaN or infinity");
        }
    float big[64];
    for (int i = 0; i < 64; i++)
        big[i] = 1e36f; /* amax / 448 above 65504: an F16 scale cannot hold it */
    fp8_band f16 = { .src = FP8_DTYPE_F32, .kind = FP8_SCALE_F16, .rows = 1, .cols = 64,
                     .group_rows = 1, .group_cols = 64 };
    expect_band_equal(g, host, &f16, big, "F16 scale overflow");
    fp8_gpu_free(g);
}
END_TEST

/* A band past the launch caps, so that the grid-stride loops run: 2^24 MX
 * groups (above 2^20 CTAs of 8 warps), and the amax of its 2^29 values
 * (above 4096 CTAs of 256 threads times 8). */
START_TEST(test_large_bands_equal_cpu)
{
    uint64_t rows = 1 << 14, cols = 1 << 15, n = rows * cols;
    unsigned char *host[3];
    fp8_gpu *g = gpu_open(n / 2 + 1, host); /* n bf16 = n * 2 bytes */
    uint16_t *x = malloc(n * 2);
    uint8_t *q = malloc(n), *s = malloc(n / 32);
    fill(FP8_DTYPE_BF16, x, n);
    fp8_band b = { .src = FP8_DTYPE_BF16, .kind = FP8_SCALE_E8M0_RCEIL, .rows = rows,
                   .cols = cols, .group_rows = 1, .group_cols = 32 };
    uint64_t where;
    ck_assert_int_eq(fp8_band_quantize(&b, x, q, s, &where), FP8_BAND_OK); /* = reference */
    memcpy(host[0], x, n * 2);
    fp8_ctx *ctx = fp8_ctx_create();
    bool bad = true;
    ck_assert(fp8_gpu_quantize(ctx, g, &b, &bad) == FP8_OK && !bad);
    ck_assert(memcmp(q, host[1], n) == 0);
    ck_assert(memcmp(s, host[2], n / 32) == 0);
    float want, got;
    ck_assert_int_eq(fp8_amax_ref(FP8_DTYPE_BF16, x, n, &want, &where), FP8_BAND_OK);
    ck_assert(fp8_gpu_amax(ctx, g, FP8_DTYPE_BF16, n, &got, &bad) == FP8_OK && !bad);
    ck_assert(fp8_f32_bits(want) == fp8_f32_bits(got));
    fp8_ctx_free(ctx);
    free(x);
    free(q);
    free(s);
    fp8_gpu_free(g);
}
END_TEST

START_TEST(test_amax_equals_reference)
{
    static const uint64_t sizes[] = { 1, 31, 1000, 65537, 3000001 };
    unsigned char *host[3];
    fp8_gpu *g = gpu_open(3000001, host);
    fp8_ctx *ctx = fp8_ctx_create();
    for (size_t d = 0; d < 3; d++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            for (int poison = 0; poison < 2; poison++) {
                uint64_t n = sizes[k], where;
                fill(dtypes[d], host[0], n);
                if (poison) { /* an infinity in the last element */
                    if (dtypes[d] == FP8_DTYPE_F32)
                        ((float *)(void *)host[0])[n - 1] = fp8_f32_from_bits(0xFF800000);
                    else
                        ((uint16_t *)(void *)host[0])[n - 1] =
                            dtypes[d] == FP8_DTYPE_BF16 ? 0x7F80 : 0x7C00;
                }
                float want = 0, got = 0;
                fp8_band_result r = fp8_amax_ref(dtypes[d], host[0], n, &want, &where);
                bool bad = false;
                ck_assert(fp8_gpu_amax(ctx, g, dtypes[d], n, &got, &bad) == FP8_OK);
                ck_assert_int_eq(bad, r != FP8_BAND_OK);
                if (!bad)
                    ck_assert_msg(fp8_f32_bits(want) == fp8_f32_bits(got), "%s n %llu",
                                  fp8_dtype_name(dtypes[d]), (unsigned long long)n);
            }
    fp8_ctx_free(ctx);
    fp8_gpu_free(g);
}
END_TEST

/* ---------------------------------------------------------------- dequantize */

/* The CPU's answer for one layout: values rounded to `out`, or false when
 * one is not finite (or a code is NaN). */
static bool cpu_dequant(const fp8_gpu_dequant *d, const uint8_t *q, const float *sf, void *y)
{
    uint64_t per_row = d->cols / d->group_cols + (d->cols % d->group_cols != 0);
    for (uint64_t r = 0; r < d->rows; r++) {
        const float *sr = sf + ((d->row0 + r) / d->group_rows - d->row0 / d->group_rows) * per_row;
        for (uint64_t c = 0; c < d->cols; c++) {
            uint64_t i = r * d->cols + c;
            float v;
            if ((q[i] & 0x7F) == 0x7F)
                return false;
            fp8_dequant_span(q + i, 1, sr[c / d->group_cols], &v);
            if (d->out == FP8_DTYPE_F32) {
                if (!fp8_finite_span(&v, 1))
                    return false;
                ((float *)y)[i] = v;
            } else if (!fp8_round_span(&v, 1, d->out, (uint16_t *)y + i)) {
                return false;
            }
        }
    }
    return true;
}

START_TEST(test_dequant_equals_cpu)
{
    static const fp8_dtype outs[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };
    /* rows, cols, row0, group rows, group cols: tensor, channel, blocks, MX, rows past
     * the 65535 grid rows */
    static const uint64_t layouts[][5] = {
        { 7, 300, 0, UINT64_MAX, 300 }, { 129, 257, 5, 1, 257 }, { 200, 300, 100, 128, 128 },
        { 64, 96, 0, 64, 32 },          { 33, 256, 3, 1, 32 },   { 70000, 64, 0, 128, 128 },
    };
    static const float special[] = { 1.0f, 0x1p-127f, 0x1p-149f, 3.7e-5f, 0.37f, 1e30f, 1e36f };
    unsigned char *host[3];
    fp8_gpu *g = gpu_open(70000 * 64 + 64, host);
    fp8_ctx *ctx = fp8_ctx_create();
    void *y = malloc((70000 * 64 + 64) * 4);
    for (size_t o = 0; o < 3; o++)
        for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++)
            for (int variant = 0; variant < 3; variant++) {
                fp8_gpu_dequant d = { outs[o],        layouts[l][0], layouts[l][1], layouts[l][2],
                                      layouts[l][3], layouts[l][4], 0 };
                uint64_t n = d.rows * d.cols, per_row = (d.cols + d.group_cols - 1) / d.group_cols;
                uint64_t srows = d.group_rows == UINT64_MAX
                                     ? 1
                                     : (d.row0 + d.rows - 1) / d.group_rows - d.row0 / d.group_rows + 1;
                d.nscales = srows * per_row;
                uint8_t *q = host[0];
                float *sf = (float *)(void *)host[1];
                for (uint64_t i = 0; i < n; i++) {
                    q[i] = (uint8_t)next_u32();
                    q[i] = (q[i] & 0x7F) == 0x7F ? 0x7E : q[i];
                }
                for (uint64_t i = 0; i < d.nscales; i++)
                    sf[i] = variant == 0 ? special[i % 6] /* else in (0, 0.5]: f16 holds 448 * s */
                                         : fp8_f32_from_bits(next_u32() % 0x3F000000 + 1);
                if (variant == 2) /* a NaN code, or a product beyond fp32 */
                    (l % 2 ? (void)(q[n / 2] = 0xFF) : (void)(sf[d.nscales - 1] = special[6]));
                bool want = cpu_dequant(&d, q, sf, y), bad = false;
                ck_assert(fp8_gpu_dequantize(ctx, g, &d, &bad) == FP8_OK);
                ck_assert_msg(bad == !want, "out %s layout %zu variant %d: GPU flag %d",
                              fp8_dtype_name(d.out), l, variant, bad);
                if (want)
                    ck_assert_msg(memcmp(y, host[2], n * src_size(d.out)) == 0,
                                  "out %s layout %zu variant %d: values differ",
                                  fp8_dtype_name(d.out), l, variant);
            }
    free(y);
    fp8_ctx_free(ctx);
    fp8_gpu_free(g);
}
END_TEST

int main(void)
{
    /* CUDA is first touched inside the tests, after Check's fork */
    if (system(FP8CONV_BIN " --version | grep -q '^gpu 0: '") != 0) {
        fprintf(stderr, "check-gpu: " FP8CONV_BIN " --version lists no GPU: nothing was tested\n");
        return 2;
    }
    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_random_bands_equal_reference);
    tcase_add_test(tc, test_ties_subnormals_zeros_and_saturation);
    tcase_add_test(tc, test_bad_input_is_flagged);
    tcase_add_test(tc, test_large_bands_equal_cpu);
    tcase_add_test(tc, test_amax_equals_reference);
    tcase_add_test(tc, test_dequant_equals_cpu);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
