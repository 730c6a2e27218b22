/*
 * check_gpu.c - the CUDA kernels against the CPU reference, byte for byte,
 * on a GPU (make check-gpu): the cases of kernel_cases.h through the same
 * slots (stream, pinned buffers, copies) that quantize and dequantize use,
 * and a band big enough for the kernels' grid-stride loops at their real
 * launch caps.  On a machine without a usable GPU it fails: nothing was
 * tested.
 */
#include "kernel_cases.h"

static unsigned char *host[3];

/* A GPU with buffers for bands of up to `elems` F32 elements. */
static fp8_gpu *gpu_open(uint64_t elems)
{
    fp8_ctx *ctx = fp8_ctx_create();
    size_t bytes[3] = { elems * 4, elems * 4, elems * 4 };
    fp8_gpu *g = NULL;
    fp8_status st = fp8_gpu_create(ctx, bytes, &g, host);
    ck_assert_msg(st == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_ctx_free(ctx);
    return g;
}

static fp8_gpu *gpu;

static void gpu_check(fp8_ctx *ctx, fp8_status st)
{
    ck_assert_msg(st == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_ctx_free(ctx);
}

static bool gpu_quantize(const fp8_band *b, const void *x, uint8_t *q, void *scales)
{
    fp8_ctx *ctx = fp8_ctx_create();
    bool bad = false;
    memcpy(host[0], x, b->rows * b->cols * kc_src_size(b->src));
    gpu_check(ctx, fp8_gpu_quantize(ctx, gpu, b, &bad));
    memcpy(q, host[1], b->rows * b->cols);
    memcpy(scales, host[2], fp8_band_scale_count(b) * fp8_scale_size(b->kind));
    return bad;
}

static bool gpu_amax(fp8_dtype src, const void *x, uint64_t n, float *amax)
{
    fp8_ctx *ctx = fp8_ctx_create();
    bool bad = false;
    memcpy(host[0], x, n * kc_src_size(src));
    gpu_check(ctx, fp8_gpu_amax(ctx, gpu, src, n, amax, &bad));
    return bad;
}

static bool gpu_dequantize(const fp8_gpu_dequant *d, const uint8_t *q, const float *sf, void *y)
{
    fp8_ctx *ctx = fp8_ctx_create();
    bool bad = false;
    memcpy(host[0], q, d->rows * d->cols);
    memcpy(host[1], sf, d->nscales * 4);
    gpu_check(ctx, fp8_gpu_dequantize(ctx, gpu, d, &bad));
    memcpy(y, host[2], d->rows * d->cols * kc_src_size(d->out));
    return bad;
}

static bool gpu_fp4(const fp8_gpu_fp4_band *d, fp8_dtype out, const uint8_t *q,
                    const unsigned char *table, const uint8_t *scales, void *y)
{
    fp8_ctx *ctx = fp8_ctx_create();
    bool bad = false;
    memcpy(host[0], q, d->rows * d->cols / 2);
    memcpy(host[1], table, FP8_GPU_FP4_TABLE_BYTES);
    memcpy(host[1] + FP8_GPU_FP4_TABLE_BYTES, scales, d->rows * d->cols / d->group);
    fp8_gpu_dequant g = { out,      d->rows,  d->cols,      0,         1, d->group,
                          0,        d->c0,    d->width,     d->transpose, d->upload,
                          FP8_ELEM_E2M1 };
    gpu_check(ctx, fp8_gpu_dequantize(ctx, gpu, &g, &bad));
    memcpy(y, host[2], d->rows * d->width * kc_src_size(out));
    return bad;
}

static bool gpu_fp4q(fp8_scheme scheme, fp8_dtype src, const void *x, uint64_t n, float global,
                     uint8_t *packed, uint8_t *scales)
{
    fp8_ctx *ctx = fp8_ctx_create();
    bool bad = false;
    memcpy(host[0], x, n * kc_src_size(src));
    gpu_check(ctx, fp8_gpu_fp4_quantize(ctx, gpu, scheme, src, n, global, &bad));
    memcpy(packed, host[1], n / 2);
    memcpy(scales, host[2], n / fp8_scheme_get(scheme)->run);
    return bad;
}

static const kc_engine engine = { gpu_quantize, gpu_amax, gpu_dequantize, false, gpu_fp4,
                                  gpu_fp4q };

static void setup(void) { gpu = gpu_open(70000 * 64 + 64); }
static void teardown(void) { fp8_gpu_free(gpu); }

START_TEST(test_large_bands_equal_cpu)
{
    uint64_t rows = 1 << 14, cols = 1 << 15, n = rows * cols;
    fp8_gpu *g = gpu_open(n / 2 + 1); /* n bf16 = n * 2 bytes */
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
    tcase_add_checked_fixture(tc, setup, teardown);
    kc_add_tests(tc, &engine);
    tcase_add_test(tc, test_large_bands_equal_cpu);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
