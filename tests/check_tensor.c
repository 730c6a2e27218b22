/*
 * check_tensor.c - the tensor API of fp8conv.h (lib/ops/tensor.c), through
 * the public header only: a tensor in memory quantized by
 * fp8_tensor_quantize has the bytes, dtypes and shapes the quantize run
 * (fp8_quant_plan_run, what `fp8conv quantize` runs) writes for the same
 * tensor in a file, for any thread count; fp8_tensor_dequantize has
 * dequantize-for-export's; bad shapes, dtypes and values are refused with
 * their status.  tests/python/check_python.py holds every scheme and format
 * against the CLI through the Python package.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "fp8conv.h"

/* n seeded values of dtype dt (BF16 or F32), of several magnitudes. */
static void *values(fp8_dtype dt, uint64_t n, unsigned seed)
{
    unsigned sz = fp8_dtype_bits(dt) / 8;
    unsigned char *x = malloc(n * sz);
    uint32_t s = seed * 2654435761u + 1;
    for (uint64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float v = ((float)(s >> 8) / 16777216.0f - 0.5f) * (float)(1u << (s % 7)) / 16;
        uint32_t bits;
        memcpy(&bits, &v, 4);
        if (sz == 2) {
            uint16_t h = (uint16_t)(bits >> 16);
            memcpy(x + 2 * i, &h, 2);
        } else {
            memcpy(x + 4 * i, &bits, 4);
        }
    }
    return x;
}

static uint64_t elements(int rank, const uint64_t *shape)
{
    uint64_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= shape[k];
    return n;
}

/* A file holding tensor `name` (dt, shape) = x, written by the library's writer. */
static void write_input(const char *path, const char *name, fp8_dtype dt, int rank,
                        const uint64_t *shape, const void *x)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w = NULL;
    ck_assert_int_eq(fp8_writer_create(ctx, path, &w), FP8_OK);
    ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, name, dt, rank, shape), FP8_OK);
    ck_assert_int_eq(fp8_writer_begin(ctx, w), FP8_OK);
    ck_assert_int_eq(fp8_writer_write(ctx, w, x, elements(rank, shape) * fp8_dtype_bits(dt) / 8),
                     FP8_OK);
    ck_assert_int_eq(fp8_writer_commit(ctx, w), FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
}

/* Tensor `name` of file `path`: its bytes (malloc'ed), checked against part p. */
static void expect_part(const char *path, const char *stem, const fp8_tensor_part *p,
                        const void *got)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f = NULL;
    char name[128];
    snprintf(name, sizeof name, "%s%s", stem, p->name);
    ck_assert_int_eq(fp8_file_open(ctx, path, &f), FP8_OK);
    const fp8_tensor_info *t = fp8_file_find(f, name);
    ck_assert_msg(t, "%s: no tensor '%s'", path, name);
    ck_assert_int_eq(t->dtype, p->dtype);
    ck_assert_int_eq(t->rank, p->rank);
    for (int k = 0; k < p->rank; k++)
        ck_assert_uint_eq(t->shape[k], p->shape[k]);
    ck_assert_uint_eq(fp8_tensor_nbytes(t), p->nbytes);
    unsigned char *want = malloc(p->nbytes ? p->nbytes : 1);
    ck_assert_int_eq(fp8_file_read(ctx, f, t, 0, want, p->nbytes), FP8_OK);
    ck_assert_msg(memcmp(want, got, p->nbytes) == 0, "%s: '%s' differs from the run's", path,
                  name);
    free(want);
    fp8_file_close(f);
    fp8_ctx_free(ctx);
}

/* One tensor through the quantize run and through fp8_tensor_quantize
 * (threads 1 and 3): the same parts; then both dequantized. */
static void same_as_run(fp8_scheme scheme, fp8_format format, uint32_t br, uint32_t bc,
                        fp8_dtype dt, int rank, const uint64_t *shape)
{
    char *dir = tu_tmpdir(), in[512], out[512], deq[512];
    const char *name = rank == 2 ? "model.layers.0.mlp.down_proj.weight"
                                 : "model.layers.0.mlp.experts.weight";
    snprintf(in, sizeof in, "%s/in.safetensors", dir);
    snprintf(out, sizeof out, "%s/out.safetensors", dir);
    snprintf(deq, sizeof deq, "%s/deq.safetensors", dir);
    uint64_t n = elements(rank, shape);
    void *x = values(dt, n, (unsigned)scheme * 7 + (unsigned)rank);
    write_input(in, name, dt, rank, shape, x);

    fp8_ctx *ctx = fp8_ctx_create();
    fp8_quant_options qo = FP8_QUANT_OPTIONS_INIT;
    qo.scheme = scheme;
    qo.format = format;
    qo.block_rows = br;
    qo.block_cols = bc;
    qo.device = FP8_DEVICE_CPU;
    qo.no_sync = true;
    fp8_quant_plan *plan = NULL;
    ck_assert_msg(fp8_quant_plan_create(ctx, in, &qo, &plan) == FP8_OK, "%s",
                  fp8_ctx_message(ctx));
    ck_assert_msg(fp8_quant_plan_run(ctx, plan, out) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_quant_plan_free(plan);

    fp8_tensor_options to = FP8_TENSOR_OPTIONS_INIT;
    to.scheme = scheme;
    to.format = format;
    to.block_rows = br;
    to.block_cols = bc;
    fp8_tensor_layout lay;
    ck_assert_msg(fp8_tensor_layout_get(ctx, &to, dt, rank, shape, &lay) == FP8_OK, "%s",
                  fp8_ctx_message(ctx));
    char stem[128];
    snprintf(stem, sizeof stem, "%.*s", (int)(strrchr(name, '.') + 1 - name), name);
    for (int threads = 1; threads <= 3; threads += 2) {
        void *parts[FP8_PART_COUNT] = { 0 };
        for (int k = 0; k < FP8_PART_COUNT; k++)
            parts[k] = lay.part[k].name[0] ? malloc(lay.part[k].nbytes) : NULL;
        to.threads = threads;
        ck_assert_msg(fp8_tensor_quantize(ctx, &to, dt, rank, shape, x, parts) == FP8_OK, "%s",
                      fp8_ctx_message(ctx));
        for (int k = 0; k < FP8_PART_COUNT; k++)
            if (parts[k])
                expect_part(out, stem, &lay.part[k], parts[k]);
        if (threads == 1) { /* dequantize-for-export's bytes */
            fp8_dequant_options dopts = FP8_DEQUANT_OPTIONS_INIT;
            dopts.no_sync = true;
            ck_assert_msg(fp8_dequantize(ctx, out, deq, &dopts, NULL) == FP8_OK, "%s",
                          fp8_ctx_message(ctx));
            fp8_tensor_part p = { .dtype = FP8_DTYPE_BF16, .rank = rank, .nbytes = n * 2 };
            snprintf(p.name, sizeof p.name, "%s", strrchr(name, '.') + 1);
            memcpy(p.shape, shape, rank * sizeof *shape);
            void *y = malloc(n * 2);
            const void *in_parts[FP8_PART_COUNT] = { parts[0], parts[1], parts[2] };
            ck_assert_msg(fp8_tensor_dequantize(ctx, &to, dt, rank, shape, in_parts,
                                                FP8_DTYPE_BF16, y) == FP8_OK,
                          "%s", fp8_ctx_message(ctx));
            expect_part(deq, stem, &p, y);
            free(y);
        }
        for (int k = 0; k < FP8_PART_COUNT; k++)
            free(parts[k]);
    }
    fp8_ctx_free(ctx);
    free(x);
    tu_tmpdir_free(dir);
}

START_TEST(test_block_and_channel_odd_shape_are_the_runs_bytes)
{
    uint64_t shape[2] = { 300, 200 };
    same_as_run(FP8_SCHEME_BLOCK, FP8_FORMAT_HF_FP8, 128, 128, FP8_DTYPE_BF16, 2, shape);
    same_as_run(FP8_SCHEME_CHANNEL, FP8_FORMAT_COMPRESSED_TENSORS, 128, 128, FP8_DTYPE_F32, 2,
                shape);
    /* block rows of more than a job's input (4 MiB): cut by columns */
    uint64_t wide[2] = { 260, 20000 };
    same_as_run(FP8_SCHEME_BLOCK, FP8_FORMAT_HF_FP8, 128, 128, FP8_DTYPE_BF16, 2, wide);
}
END_TEST

START_TEST(test_nvfp4_modelopt_with_its_second_level_is_the_runs_bytes)
{
    uint64_t shape[2] = { 130, 96 };
    same_as_run(FP8_SCHEME_NVFP4, FP8_FORMAT_MODELOPT, 128, 128, FP8_DTYPE_BF16, 2, shape);
    same_as_run(FP8_SCHEME_NVFP4, FP8_FORMAT_COMPRESSED_TENSORS, 128, 128, FP8_DTYPE_F32, 2,
                shape);
}
END_TEST

START_TEST(test_tensor_scheme_stacked_experts_are_the_runs_bytes)
{
    uint64_t shape[3] = { 3, 70, 64 };
    same_as_run(FP8_SCHEME_TENSOR, FP8_FORMAT_COMPRESSED_TENSORS, 128, 128, FP8_DTYPE_BF16, 3,
                shape);
    same_as_run(FP8_SCHEME_MXFP8, FP8_FORMAT_COMPRESSED_TENSORS, 128, 128, FP8_DTYPE_BF16, 3,
                shape);
}
END_TEST

START_TEST(test_layout_names_dtypes_and_shapes)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
    fp8_tensor_layout lay;
    uint64_t shape[2] = { 300, 200 };
    ck_assert_int_eq(fp8_tensor_layout_get(ctx, &o, FP8_DTYPE_BF16, 2, shape, &lay), FP8_OK);
    ck_assert_int_eq(lay.format, FP8_FORMAT_HF_FP8);
    ck_assert_str_eq(lay.part[FP8_PART_CODES].name, "weight");
    ck_assert_int_eq(lay.part[FP8_PART_CODES].dtype, FP8_DTYPE_F8_E4M3);
    ck_assert_str_eq(lay.part[FP8_PART_SCALE].name, "weight_scale_inv");
    ck_assert_int_eq(lay.part[FP8_PART_SCALE].dtype, FP8_DTYPE_F32);
    ck_assert_uint_eq(lay.part[FP8_PART_SCALE].shape[0], 3); /* ceil(300 / 128) */
    ck_assert_uint_eq(lay.part[FP8_PART_SCALE].shape[1], 2);
    ck_assert_str_eq(lay.part[FP8_PART_SCALE2].name, "");
    o.scheme = FP8_SCHEME_NVFP4;
    o.format = FP8_FORMAT_COMPRESSED_TENSORS;
    shape[1] = 192;
    ck_assert_int_eq(fp8_tensor_layout_get(ctx, &o, FP8_DTYPE_BF16, 2, shape, &lay), FP8_OK);
    ck_assert_str_eq(lay.part[FP8_PART_CODES].name, "weight_packed");
    ck_assert_uint_eq(lay.part[FP8_PART_CODES].shape[1], 96); /* two codes a byte */
    ck_assert_str_eq(lay.part[FP8_PART_SCALE2].name, "weight_global_scale");
    ck_assert_uint_eq(lay.part[FP8_PART_SCALE2].nbytes, 4);
    fp8_ctx_free(ctx);
}
END_TEST

START_TEST(test_reject_bad_shape_dtype_and_values)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
    fp8_tensor_layout lay;
    uint64_t shape[2] = { 64, 48 };
    ck_assert_int_eq(fp8_tensor_layout_get(ctx, &o, FP8_DTYPE_BF16, 1, shape, &lay),
                     FP8_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "1 dimensions"));
    ck_assert_int_eq(fp8_tensor_layout_get(ctx, &o, FP8_DTYPE_I32, 2, shape, &lay),
                     FP8_ERR_USAGE);
    o.scheme = FP8_SCHEME_MXFP8;
    ck_assert_int_eq(fp8_tensor_layout_get(ctx, &o, FP8_DTYPE_BF16, 2, shape, &lay),
                     FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "multiple of 32"));
    o.scheme = FP8_SCHEME_BLOCK;
    ck_assert_int_eq(fp8_tensor_layout_get(ctx, &o, FP8_DTYPE_BF16, 2, shape, &lay), FP8_OK);
    float x[64 * 48];
    for (int i = 0; i < 64 * 48; i++)
        x[i] = (float)i;
    x[77] = 0.0f / 0.0f;
    void *parts[FP8_PART_COUNT] = { malloc(64 * 48), malloc(4), NULL };
    ck_assert_int_eq(fp8_tensor_quantize(ctx, &o, FP8_DTYPE_F32, 2, shape, x, parts),
                     FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "element 77 (row 1, column 29) is NaN"));
    free(parts[0]);
    free(parts[1]);
    fp8_ctx_free(ctx);
}
END_TEST

/* A library built without CUDA: the CUDA path is a clear FP8_ERR_DEVICE
 * (with CUDA, tests/check_tensor_cuda.c runs it under the emulation). */
START_TEST(test_cuda_path_without_cuda_is_a_device_error)
{
    if (fp8_cuda_compiled())
        return;
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_tensor_options o = FP8_TENSOR_OPTIONS_INIT;
    uint64_t shape[2] = { 64, 48 };
    static float x[64 * 48];
    static unsigned char q[64 * 48], sc[4];
    void *parts[FP8_PART_COUNT] = { q, sc, NULL };
    ck_assert_int_eq(fp8_tensor_quantize_cuda(ctx, &o, FP8_DTYPE_F32, 2, shape, x, parts, NULL),
                     FP8_ERR_DEVICE);
    ck_assert_str_eq(fp8_ctx_message(ctx), "memory: tensor 'tensor.weight': quantizing device "
                     "memory needs libfp8conv built with CUDA (make HAVE_CUDA=1); this one was "
                     "built without it");
    fp8_ctx_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_block_and_channel_odd_shape_are_the_runs_bytes);
    tcase_add_test(tc, test_nvfp4_modelopt_with_its_second_level_is_the_runs_bytes);
    tcase_add_test(tc, test_tensor_scheme_stacked_experts_are_the_runs_bytes);
    tcase_add_test(tc, test_layout_names_dtypes_and_shapes);
    tcase_add_test(tc, test_reject_bad_shape_dtype_and_values);
    tcase_add_test(tc, test_cuda_path_without_cuda_is_a_device_error);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
