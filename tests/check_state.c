/*
 * check_state.c - the state-dict API of fp8conv.h (fp8_quant_plan_create_memory
 * and its items), through the public header only: the plan made over a
 * checkpoint's tensors given in memory (names, dtypes, shapes and the
 * config.json text) is the plan quantize makes of the checkpoint itself,
 * item for item, with the same quantization_config; its items quantized
 * from the checkpoint's data (NVFP4: with their fused set's largest amax)
 * are the bytes the quantize run writes; weights of fused experts are
 * written apart as the plan says where they come from; bad input is
 * refused with its status.  tests/python/check_python.py holds every
 * scheme and format against the CLI through quantize_state_dict.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "fp8conv.h"

#define MOE "testdata/deepseek-moe-tiny"

/* A checkpoint's tensors as the state-dict API takes them (pointing into ck). */
static fp8_tensor_info *tensors_of(const fp8_checkpoint *ck, size_t *n)
{
    *n = fp8_checkpoint_tensor_count(ck);
    fp8_tensor_info *t = calloc(*n, sizeof *t);
    for (size_t i = 0; i < *n; i++)
        t[i] = *fp8_checkpoint_tensor(ck, i, NULL);
    return t;
}

static fp8_quant_plan *memory_plan(fp8_ctx *ctx, const fp8_checkpoint *ck, const char *config,
                                   const fp8_state_options *so)
{
    size_t n;
    fp8_tensor_info *t = tensors_of(ck, &n);
    fp8_state_options o = *so;
    o.config_json = config;
    fp8_quant_plan *p = NULL;
    ck_assert_msg(fp8_quant_plan_create_memory(ctx, &o, t, n, &p) == FP8_OK, "%s",
                  fp8_ctx_message(ctx));
    free(t);
    return p;
}

static fp8_quant_options file_options(const fp8_state_options *so)
{
    fp8_quant_options qo = FP8_QUANT_OPTIONS_INIT;
    qo.scheme = so->tensor.scheme;
    qo.format = so->tensor.format;
    qo.block_rows = so->tensor.block_rows;
    qo.block_cols = so->tensor.block_cols;
    qo.ignore = so->ignore;
    qo.nignore = so->nignore;
    qo.no_default_ignore = so->no_default_ignore;
    qo.device = FP8_DEVICE_CPU;
    qo.no_sync = true;
    return qo;
}

static void same_str(const char *a, const char *b, const char *what, const char *name)
{
    ck_assert_msg((!a && !b) || (a && b && !strcmp(a, b)), "%s: %s: memory '%s', file '%s'", name,
                  what, a ? a : "(null)", b ? b : "(null)");
}

/* The memory plan of MOE's tensors against quantize's plan of MOE. */
static void same_plan(const fp8_state_options *so)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck = NULL;
    ck_assert_int_eq(fp8_checkpoint_open(ctx, MOE, &ck), FP8_OK);
    char *config = tu_slurp(MOE "/config.json", NULL);
    fp8_quant_plan *m = memory_plan(ctx, ck, config, so), *f = NULL;
    fp8_quant_options qo = file_options(so);
    ck_assert_msg(fp8_quant_plan_create(ctx, MOE, &qo, &f) == FP8_OK, "%s", fp8_ctx_message(ctx));
    ck_assert_uint_eq(fp8_quant_plan_count(m), fp8_quant_plan_count(f));
    for (size_t i = 0; i < fp8_quant_plan_count(m); i++) {
        const fp8_quant_item *a = fp8_quant_plan_item(m, i), *b = fp8_quant_plan_item(f, i);
        const char *name = b->tensor->name;
        same_str(a->tensor->name, name, "name", name);
        ck_assert_int_eq(a->quantize, b->quantize);
        same_str(a->reason, b->reason, "reason", name);
        same_str(a->packed_name, b->packed_name, "packed name", name);
        same_str(a->scale_name, b->scale_name, "scale name", name);
        same_str(a->global_name, b->global_name, "second level", name);
        same_str(a->shape_name, b->shape_name, "shape tensor", name);
        ck_assert_int_eq(a->code_dtype, b->code_dtype);
        ck_assert_int_eq(a->scale_dtype, b->scale_dtype);
        ck_assert_int_eq(a->scale_rank, b->scale_rank);
        ck_assert(!memcmp(a->scale_shape, b->scale_shape, sizeof a->scale_shape));
        ck_assert(!memcmp(a->code_shape, b->code_shape, sizeof a->code_shape));
    }
    char *qa = fp8_quant_plan_quantization_config(m), *qb = fp8_quant_plan_quantization_config(f);
    ck_assert_str_eq(qa, qb);
    free(qa);
    free(qb);
    fp8_quant_plan_free(m);
    fp8_quant_plan_free(f);
    free(config);
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
}

START_TEST(test_memory_plan_is_quantizes_plan_of_the_checkpoint)
{
    fp8_state_options so = FP8_STATE_OPTIONS_INIT;
    same_plan(&so); /* block 128x128, hf-fp8: the router, norms, embeddings kept */
    const char *ignore[] = { "re:.*shared_experts", "kv_b_proj" };
    so.ignore = ignore;
    so.nignore = 2;
    so.tensor.scheme = FP8_SCHEME_NVFP4;
    so.tensor.format = FP8_FORMAT_MODELOPT;
    same_plan(&so);
    so.no_default_ignore = true;
    so.tensor.scheme = FP8_SCHEME_INT4;
    so.tensor.format = FP8_FORMAT_COMPRESSED_TENSORS;
    so.tensor.block_cols = 32;
    same_plan(&so);
}
END_TEST

/* The bytes of tensor `name` of checkpoint or file `path` (malloc'ed). */
static void *read_tensor(fp8_ctx *ctx, const char *path, const char *name,
                         const fp8_tensor_info **info, fp8_checkpoint **ck)
{
    size_t shard;
    ck_assert_int_eq(fp8_checkpoint_open(ctx, path, ck), FP8_OK);
    const fp8_tensor_info *t = fp8_checkpoint_find(*ck, name, &shard);
    ck_assert_msg(t, "%s: no tensor '%s'", path, name);
    void *buf = malloc(fp8_tensor_nbytes(t) ? fp8_tensor_nbytes(t) : 1);
    ck_assert_int_eq(fp8_file_read(ctx, fp8_checkpoint_shard(*ck, shard), t, 0, buf,
                                   fp8_tensor_nbytes(t)),
                     FP8_OK);
    *info = t;
    return buf;
}

static void expect_tensor(fp8_ctx *ctx, const char *dir, const char *name, const void *got,
                          uint64_t nbytes)
{
    fp8_checkpoint *ck = NULL;
    const fp8_tensor_info *t;
    void *want = read_tensor(ctx, dir, name, &t, &ck);
    ck_assert_uint_eq(fp8_tensor_nbytes(t), nbytes);
    ck_assert_msg(!memcmp(want, got, nbytes), "'%s' differs from the run's", name);
    free(want);
    fp8_checkpoint_close(ck);
}

static uint64_t count(int rank, const uint64_t *shape)
{
    uint64_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= shape[k];
    return n;
}

/* Every quantized item of MOE's memory plan, from MOE's data, against the
 * quantize run's output: each set's largest amax for NVFP4. */
static void same_bytes_as_run(const fp8_state_options *so)
{
    fp8_ctx *ctx = fp8_ctx_create();
    char *dir = tu_tmpdir(), out[512];
    snprintf(out, sizeof out, "%s/out", dir);
    fp8_quant_options qo = file_options(so);
    fp8_quant_plan *f = NULL;
    ck_assert_int_eq(fp8_quant_plan_create(ctx, MOE, &qo, &f), FP8_OK);
    ck_assert_msg(fp8_quant_plan_run(ctx, f, out) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_quant_plan_free(f);
    fp8_checkpoint *ck = NULL;
    ck_assert_int_eq(fp8_checkpoint_open(ctx, MOE, &ck), FP8_OK);
    char *config = tu_slurp(MOE "/config.json", NULL);
    fp8_quant_plan *m = memory_plan(ctx, ck, config, so);
    size_t n = fp8_quant_plan_count(m), checked = 0;
    for (size_t i = 0; i < n; i++) {
        const fp8_quant_item *it = fp8_quant_plan_item(m, i);
        if (!it->quantize)
            continue;
        fp8_item_source src;
        ck_assert_int_eq(fp8_quant_plan_item_source(ctx, m, i, &src), FP8_OK);
        ck_assert(!src.apart);
        /* the set's largest amax, over its items */
        float amax = 0;
        for (size_t j = 0; j < n; j++) {
            fp8_item_source s2;
            const fp8_quant_item *o = fp8_quant_plan_item(m, j);
            ck_assert_int_eq(fp8_quant_plan_item_source(ctx, m, j, &s2), FP8_OK);
            if (!o->quantize || strcmp(s2.set, src.set))
                continue;
            fp8_checkpoint *c2 = NULL;
            const fp8_tensor_info *t;
            void *x = read_tensor(ctx, MOE, o->tensor->name, &t, &c2);
            float a;
            ck_assert_int_eq(fp8_quant_plan_item_amax(ctx, m, j, x, &a), FP8_OK);
            amax = a > amax ? a : amax;
            free(x);
            fp8_checkpoint_close(c2);
        }
        fp8_checkpoint *c2 = NULL;
        const fp8_tensor_info *t;
        void *x = read_tensor(ctx, MOE, it->tensor->name, &t, &c2);
        uint64_t bytes[FP8_ITEM_COUNT] = {
            count(it->tensor->rank, it->code_shape) * fp8_dtype_bits(it->code_dtype) / 8,
            count(it->scale_rank, it->scale_shape) * fp8_dtype_bits(it->scale_dtype) / 8,
            it->global_name ? 4 : 0, it->shape_name ? 16 : 0
        };
        void *parts[FP8_ITEM_COUNT];
        for (int k = 0; k < FP8_ITEM_COUNT; k++)
            parts[k] = bytes[k] ? malloc(bytes[k]) : NULL;
        ck_assert_msg(fp8_quant_plan_item_quantize(ctx, m, i, x, amax, parts) == FP8_OK, "%s",
                      fp8_ctx_message(ctx));
        const char *names[FP8_ITEM_COUNT] = {
            it->packed_name ? it->packed_name : it->tensor->name, it->scale_name,
            it->global_name, it->shape_name
        };
        for (int k = 0; k < FP8_ITEM_COUNT; k++)
            if (parts[k])
                expect_tensor(ctx, out, names[k], parts[k], bytes[k]);
        for (int k = 0; k < FP8_ITEM_COUNT; k++)
            free(parts[k]);
        free(x);
        fp8_checkpoint_close(c2);
        checked++;
    }
    ck_assert_uint_gt(checked, 10);
    fp8_quant_plan_free(m);
    free(config);
    fp8_checkpoint_close(ck);
    tu_tmpdir_free(dir);
    fp8_ctx_free(ctx);
}

START_TEST(test_items_are_the_runs_bytes_nvfp4_sets_share_the_second_level)
{
    fp8_state_options so = FP8_STATE_OPTIONS_INIT;
    so.tensor.scheme = FP8_SCHEME_NVFP4;
    so.tensor.format = FP8_FORMAT_COMPRESSED_TENSORS;
    same_bytes_as_run(&so); /* q_a/kv_a and each expert's gate/up: one global each */
}
END_TEST

START_TEST(test_items_are_the_runs_bytes_int4_weight_shape_and_block)
{
    fp8_state_options so = FP8_STATE_OPTIONS_INIT;
    so.tensor.scheme = FP8_SCHEME_INT4;
    so.tensor.format = FP8_FORMAT_COMPRESSED_TENSORS;
    so.tensor.block_cols = 32;
    same_bytes_as_run(&so);
    so = (fp8_state_options)FP8_STATE_OPTIONS_INIT;
    so.tensor.block_rows = so.tensor.block_cols = 32;
    same_bytes_as_run(&so);
}
END_TEST

START_TEST(test_fused_experts_written_apart_name_their_slice)
{
    fp8_ctx *ctx = fp8_ctx_create();
    uint64_t gu[3] = { 2, 192, 64 }, dn[3] = { 2, 64, 96 };
    fp8_tensor_info t[2] = {
        { .name = "model.layers.0.mlp.experts.gate_up_proj", .dtype = FP8_DTYPE_BF16, .rank = 3,
          .shape = gu },
        { .name = "model.layers.0.mlp.experts.down_proj", .dtype = FP8_DTYPE_BF16, .rank = 3,
          .shape = dn },
    };
    fp8_state_options so = FP8_STATE_OPTIONS_INIT;
    so.tensor.scheme = FP8_SCHEME_MXFP4;
    so.tensor.format = FP8_FORMAT_COMPRESSED_TENSORS;
    so.config_json = "{\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"num_experts\": 2}";
    fp8_quant_plan *p = NULL;
    ck_assert_msg(fp8_quant_plan_create_memory(ctx, &so, t, 2, &p) == FP8_OK, "%s",
                  fp8_ctx_message(ctx));
    ck_assert_uint_eq(fp8_quant_plan_count(p), 6); /* 2 experts: gate, up, down each */
    fp8_item_source s;
    const fp8_quant_item *it = fp8_quant_plan_item(p, 5); /* experts.1.up_proj, by name */
    ck_assert_str_eq(it->tensor->name, "model.layers.0.mlp.experts.1.up_proj.weight");
    ck_assert_int_eq(fp8_quant_plan_item_source(ctx, p, 5, &s), FP8_OK);
    ck_assert_str_eq(s.tensor, "model.layers.0.mlp.experts.gate_up_proj");
    ck_assert(s.apart && !s.in_out);
    ck_assert_uint_eq(s.expert, 1);
    ck_assert_uint_eq(s.row0, 96);
    ck_assert_uint_eq(s.rows, 96);
    ck_assert_str_eq(s.set, "model.layers.0.mlp.experts.1.gate_proj");
    ck_assert_int_eq(fp8_quant_plan_run(ctx, p, "/nonexistent/out"), FP8_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "fp8_quant_plan_item_quantize"));
    fp8_quant_plan_free(p);
    /* without the config's hidden size the axes are not told apart: refused, as quantize does */
    so.config_json = NULL;
    ck_assert_int_eq(fp8_quant_plan_create_memory(ctx, &so, t, 2, &p), FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "config.json"));
    fp8_ctx_free(ctx);
}
END_TEST

START_TEST(test_reject_bad_config_quantized_input_and_names)
{
    fp8_ctx *ctx = fp8_ctx_create();
    uint64_t shape[2] = { 64, 64 };
    fp8_tensor_info t[2] = {
        { .name = "a.weight", .dtype = FP8_DTYPE_BF16, .rank = 2, .shape = shape },
        { .name = "a.weight", .dtype = FP8_DTYPE_BF16, .rank = 2, .shape = shape },
    };
    fp8_state_options so = FP8_STATE_OPTIONS_INIT;
    fp8_quant_plan *p = NULL;
    ck_assert_int_eq(fp8_quant_plan_create_memory(ctx, &so, t, 2, &p), FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "'a.weight'"));
    so.config_json = "{\"model_type\": ";
    ck_assert_int_eq(fp8_quant_plan_create_memory(ctx, &so, t, 1, &p), FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "memory/config.json"));
    so.config_json = "{\"quantization_config\": {\"quant_method\": \"fp8\"}}";
    ck_assert_int_eq(fp8_quant_plan_create_memory(ctx, &so, t, 1, &p), FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "already has a quantization_config"));
    so.config_json = NULL;
    t[0].dtype = FP8_DTYPE_F8_E4M3;
    ck_assert_int_eq(fp8_quant_plan_create_memory(ctx, &so, t, 1, &p), FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "already F8_E4M3"));
    t[0].dtype = FP8_DTYPE_BF16;
    so.tensor.scheme = FP8_SCHEME_CHANNEL;
    so.tensor.format = FP8_FORMAT_HF_FP8;
    ck_assert_int_eq(fp8_quant_plan_create_memory(ctx, &so, t, 1, &p), FP8_ERR_USAGE);
    ck_assert_ptr_null(p);
    fp8_ctx_free(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("state");
    TCase *tc = tcase_create("state");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_memory_plan_is_quantizes_plan_of_the_checkpoint);
    tcase_add_test(tc, test_items_are_the_runs_bytes_nvfp4_sets_share_the_second_level);
    tcase_add_test(tc, test_items_are_the_runs_bytes_int4_weight_shape_and_block);
    tcase_add_test(tc, test_fused_experts_written_apart_name_their_slice);
    tcase_add_test(tc, test_reject_bad_config_quantized_input_and_names);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
