/*
 * check_tensor_cuda.c - fp8_tensor_quantize_cuda (lib/ops/tensor.c, the
 * CUDA path of the tensor API) run by the kernels' CPU emulation
 * (tests/kernels_emu.cpp, where "device" memory is host memory and a stream
 * is synchronous), against fp8_tensor_quantize on the CPU: the same bytes
 * for bf16/f32 matrices and stacked experts under block, channel, tensor,
 * mxfp8, nvfp4, mxfp4 and a profile; a NaN or infinity reported as the CPU
 * reports it; int4 and --profile te's nvfp4 refused by name.  The binary links lib/compute/gpu.c
 * compiled with FP8_HAVE_CUDA (build/tests/gpu_emu.o) over the emulation,
 * in every build, HAVE_CUDA=0 too.  What a real GPU makes of it is the GPU
 * kit's (tests/gpu/tensor_cuda.py); this has not run on one.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "fill.h"
#include "fp8conv.h"

/* x (dt, shape) under o, on the CPU and through the CUDA path: the same
 * status, and the same bytes or the same message. */
static void same(const fp8_tensor_options *o, fp8_dtype dt, int rank, const uint64_t *shape,
                 const void *x)
{
    fp8_ctx *cpu = fp8_ctx_create(), *dev = fp8_ctx_create();
    fp8_tensor_layout lay;
    ck_assert_int_eq(fp8_tensor_layout_get(cpu, o, dt, rank, shape, &lay), FP8_OK);
    void *a[FP8_PART_COUNT] = { 0 }, *b[FP8_PART_COUNT] = { 0 };
    for (int k = 0; k < FP8_PART_COUNT; k++)
        if (lay.part[k].nbytes) {
            a[k] = malloc(lay.part[k].nbytes);
            b[k] = malloc(lay.part[k].nbytes);
            memset(a[k], 0xA5, lay.part[k].nbytes);
            memset(b[k], 0x5A, lay.part[k].nbytes);
        }
    fp8_status sa = fp8_tensor_quantize(cpu, o, dt, rank, shape, x, a);
    fp8_status sb = fp8_tensor_quantize_cuda(dev, o, dt, rank, shape, x, b, NULL);
    ck_assert_msg(sa == sb, "scheme %d: cpu %d (%s), cuda %d (%s)", o->scheme, sa,
                  fp8_ctx_message(cpu), sb, fp8_ctx_message(dev));
    if (sa)
        ck_assert_str_eq(fp8_ctx_message(dev), fp8_ctx_message(cpu));
    for (int k = 0; !sa && k < FP8_PART_COUNT; k++)
        ck_assert_msg(!lay.part[k].nbytes || !memcmp(a[k], b[k], lay.part[k].nbytes),
                      "scheme %d profile %d dtype %d: part %s differs", o->scheme, o->profile, dt,
                      lay.part[k].name);
    for (int k = 0; k < FP8_PART_COUNT; k++) {
        free(a[k]);
        free(b[k]);
    }
    fp8_ctx_free(cpu);
    fp8_ctx_free(dev);
}

static void *filled(fp8_dtype dt, uint64_t n)
{
    void *x = malloc(n * fp8_dtype_bits(dt) / 8);
    fill(dt, x, n);
    return x;
}

START_TEST(test_fp8_schemes_are_the_cpu_bytes)
{
    static const struct {
        fp8_scheme scheme;
        fp8_profile profile;
        uint32_t br, bc;
        int rank;
        uint64_t shape[3];
    } cases[] = {
        { FP8_SCHEME_BLOCK, FP8_PROFILE_FP8CONV, 128, 128, 2, { 300, 260 } },
        { FP8_SCHEME_BLOCK, FP8_PROFILE_FP8CONV, 32, 64, 3, { 3, 70, 130 } },
        { FP8_SCHEME_CHANNEL, FP8_PROFILE_FP8CONV, 128, 128, 2, { 257, 200 } },
        { FP8_SCHEME_CHANNEL, FP8_PROFILE_FP8CONV, 128, 128, 3, { 2, 33, 96 } },
        { FP8_SCHEME_TENSOR, FP8_PROFILE_FP8CONV, 128, 128, 2, { 130, 70 } },
        { FP8_SCHEME_TENSOR, FP8_PROFILE_FP8CONV, 128, 128, 3, { 4, 40, 64 } },
        { FP8_SCHEME_MXFP8, FP8_PROFILE_FP8CONV, 128, 128, 2, { 40, 96 } },
        { FP8_SCHEME_BLOCK, FP8_PROFILE_VLLM, 128, 128, 2, { 200, 130 } },
        { FP8_SCHEME_BLOCK, FP8_PROFILE_DEEPGEMM, 128, 128, 3, { 2, 130, 128 } },
        { FP8_SCHEME_BLOCK, FP8_PROFILE_TE, 64, 64, 2, { 100, 70 } },
    };
    static const fp8_dtype dts[] = { FP8_DTYPE_BF16, FP8_DTYPE_F32 };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t d = 0; d < 2; d++) {
            fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
            o.scheme = cases[c].scheme;
            o.profile = cases[c].profile;
            o.block_rows = cases[c].br;
            o.block_cols = cases[c].bc;
            o.threads = 2;
            uint64_t n = 1;
            for (int k = 0; k < cases[c].rank; k++)
                n *= cases[c].shape[k];
            void *x = filled(dts[d], n);
            same(&o, dts[d], cases[c].rank, cases[c].shape, x);
            free(x);
        }
}
END_TEST

START_TEST(test_fp4_schemes_are_the_cpu_bytes)
{
    static const fp8_scheme schemes[] = { FP8_SCHEME_NVFP4, FP8_SCHEME_MXFP4 };
    static const fp8_dtype dts[] = { FP8_DTYPE_BF16, FP8_DTYPE_F32 };
    uint64_t shape[2] = { 48, 96 };
    for (size_t s = 0; s < 2; s++)
        for (size_t d = 0; d < 2; d++) {
            fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
            o.scheme = schemes[s];
            void *x = filled(dts[d], 48 * 96);
            same(&o, dts[d], 2, shape, x);
            free(x);
        }
}
END_TEST

/* A NaN or infinity: the kernels flag it, the CPU path names it. */
START_TEST(test_nonfinite_is_named_as_on_the_cpu)
{
    static const fp8_scheme schemes[] = { FP8_SCHEME_BLOCK, FP8_SCHEME_CHANNEL, FP8_SCHEME_TENSOR,
                                          FP8_SCHEME_NVFP4 };
    uint64_t shape[2] = { 64, 48 };
    float x[64 * 48];
    for (size_t s = 0; s < 4; s++) {
        fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
        o.scheme = schemes[s];
        for (int i = 0; i < 64 * 48; i++)
            x[i] = (float)(i % 97) - 40;
        x[77] = s % 2 ? 1.0f / 0.0f : 0.0f / 0.0f;
        same(&o, FP8_DTYPE_F32, 2, shape, x);
    }
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
    x[77] = 0.0f / 0.0f;
    void *parts[FP8_PART_COUNT] = { malloc(64 * 48), malloc(4), NULL };
    ck_assert_int_eq(fp8_tensor_quantize_cuda(ctx, &o, FP8_DTYPE_F32, 2, shape, x, parts, NULL),
                     FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "element 77 (row 1, column 29) is NaN"));
    free(parts[0]);
    free(parts[1]);
    fp8_ctx_free(ctx);
}
END_TEST

START_TEST(test_no_kernel_is_a_device_error)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
    uint64_t shape[2] = { 8, 128 };
    static float x[8 * 128];
    static unsigned char q[8 * 128], s[64], g[64];
    void *parts[FP8_PART_COUNT] = { q, s, g };
    o.scheme = FP8_SCHEME_INT4;
    ck_assert_int_eq(fp8_tensor_quantize_cuda(ctx, &o, FP8_DTYPE_F32, 2, shape, x, parts, NULL),
                     FP8_ERR_DEVICE);
    ck_assert_str_eq(fp8_ctx_message(ctx),
                     "memory: tensor 'tensor.weight': scheme int4 has no CUDA kernel; "
                     "quantize it on the CPU");
    /* --profile te's nvfp4 (fp32 steps): no kernel takes them, refused by name */
    o.scheme = FP8_SCHEME_NVFP4;
    o.profile = FP8_PROFILE_TE;
    ck_assert_int_eq(fp8_tensor_quantize_cuda(ctx, &o, FP8_DTYPE_F32, 2, shape, x, parts, NULL),
                     FP8_ERR_DEVICE);
    ck_assert_str_eq(fp8_ctx_message(ctx),
                     "memory: tensor 'tensor.weight': the FP4 kernel computes in the weight's "
                     "dtype, not the profile's fp32 steps (fp8conv-formats(5), PROFILES); "
                     "quantize it on the CPU");
    o.profile = FP8_PROFILE_FP8CONV;
    /* a CUDA call that fails (the first, as FP8CONV_CUDA_FAULT=1 makes it) */
    o.scheme = FP8_SCHEME_BLOCK;
    setenv("FP8CONV_CUDA_FAULT", "1", 1);
    ck_assert_int_eq(fp8_tensor_quantize_cuda(ctx, &o, FP8_DTYPE_F32, 2, shape, x, parts, NULL),
                     FP8_ERR_DEVICE);
    ck_assert_str_eq(fp8_ctx_message(ctx), "cuda: allocating device memory failed: fault "
                     "injected by FP8CONV_CUDA_FAULT");
    unsetenv("FP8CONV_CUDA_FAULT");
    fp8_ctx_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor_cuda");
    TCase *tc = tcase_create("tensor_cuda");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fp8_schemes_are_the_cpu_bytes);
    tcase_add_test(tc, test_fp4_schemes_are_the_cpu_bytes);
    tcase_add_test(tc, test_nonfinite_is_named_as_on_the_cpu);
    tcase_add_test(tc, test_no_kernel_is_a_device_error);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
