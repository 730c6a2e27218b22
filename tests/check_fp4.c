/*
 * check_fp4.c - dequantize-for-export of the packed-FP4 layouts (fp4.h;
 * fp8conv-formats(5), 2026 LAYOUTS), end to end on tiny checkpoints written
 * here with the releases' names, dtypes and shapes:
 *   - gpt-oss MXFP4 experts (_blocks/_scales) come out in transformers'
 *     orientation, [E, cols, rows] (transformers integrations/mxfp4.py
 *     convert_moe_packed_tensors), named without _blocks, scales dropped;
 *   - DeepSeek-V4: the FP8 trunk with '.scale' E8M0 128x128 block scales and
 *     the MXFP4 routed experts (I8 [out, in / 2], '.scale' E8M0 [out, in / 32]);
 *     expert_dtype and quantization_config removed;
 *   - every value against this file's own decode in double (element 2i the
 *     low nibble, E8M0 2^(b - 127)), in f32, bf16 and f16;
 *   - the same bytes for any -j, across jobs and transposed writes;
 *   - verify: a valid gpt-oss or DeepSeek-V4 copy is clean, each planted
 *     defect named by its rule; inspect shows packed and logical shapes;
 *   - bad input (E8M0 NaN, a scale of the wrong shape, a missing scale)
 *     exits 3 and leaves nothing.
 */
#include "golden.h"

#include <math.h>

#include "common/fp8_math.h"

/* The test's own E2M1 and E8M0 decode, in double. */
static double e2m1(unsigned code)
{
    static const double v[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };
    return code & 8 ? -v[code & 7] : v[code & 7];
}
static double fp4_value(const uint8_t *packed, const uint8_t *scales, uint64_t row_elems,
                        uint64_t r, uint64_t c)
{
    uint8_t b = packed[(r * row_elems + c) / 2];
    return ldexp(e2m1(c % 2 ? b >> 4 : b & 15), (int)scales[(r * row_elems + c) / 32] - 127);
}

/* Value i of tensor `name` of out/model.safetensors, as a double. */
typedef struct {
    fp8_ctx *ctx;
    fp8_file *f;
    const fp8_tensor_info *t;
    unsigned char *data;
} out_tensor;

static void out_open(out_tensor *o, const char *out, const char *name)
{
    char *path;
    ck_assert(asprintf(&path, "%s/model.safetensors", out) > 0);
    o->ctx = fp8_ctx_create();
    ck_assert(fp8_file_open(o->ctx, path, &o->f) == FP8_OK);
    o->t = fp8_file_find(o->f, name);
    ck_assert_msg(o->t, "%s: no tensor %s", path, name);
    o->data = malloc(fp8_tensor_nbytes(o->t));
    ck_assert(fp8_file_read(o->ctx, o->f, o->t, 0, o->data, fp8_tensor_nbytes(o->t)) == FP8_OK);
    free(path);
}

static double out_value(const out_tensor *o, uint64_t i)
{
    uint16_t h;
    float f;
    switch (o->t->dtype) {
    case FP8_DTYPE_F32: memcpy(&f, o->data + 4 * i, 4); return f;
    case FP8_DTYPE_F16: memcpy(&h, o->data + 2 * i, 2); return fp8_f16_to_f32(h);
    default: memcpy(&h, o->data + 2 * i, 2); return fp8_bf16_to_f32(h);
    }
}

static void out_close(out_tensor *o)
{
    free(o->data);
    fp8_file_close(o->f);
    fp8_ctx_free(o->ctx);
}

static bool has_tensor(const char *out, const char *name)
{
    out_tensor o = { 0 };
    char *path;
    ck_assert(asprintf(&path, "%s/model.safetensors", out) > 0);
    o.ctx = fp8_ctx_create();
    ck_assert(fp8_file_open(o.ctx, path, &o.f) == FP8_OK);
    bool has = fp8_file_find(o.f, name) != NULL;
    fp8_file_close(o.f);
    fp8_ctx_free(o.ctx);
    free(path);
    return has;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    tu_pattern(b, n, seed);
}

/* scales from lo to lo + span - 1 */
static void fill_scales(uint8_t *b, size_t n, unsigned seed, unsigned lo, unsigned span)
{
    tu_pattern(b, n, seed);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(lo + b[i] % span);
}

static const char *const dtypes[] = { "f32", "bf16", "f16" };

/* ---------------------------------------------------------------- gpt-oss */

#define GE 2  /* experts */
#define GH 64 /* hidden: gate_up's cols, down's rows */
#define GI 32 /* intermediate: gate_up has 2I rows, down I cols */

static const char gpt_oss_config[] =
    "{\"architectures\": [\"GptOssForCausalLM\"], \"model_type\": \"gpt_oss\", "
    "\"hidden_size\": 64, \"num_local_experts\": 2, \"torch_dtype\": \"bfloat16\", "
    "\"quantization_config\": {\"quant_method\": \"mxfp4\", \"modules_to_not_convert\": "
    "[\"model.layers.*.self_attn\", \"model.layers.*.mlp.router\", \"model.embed_tokens\", "
    "\"lm_head\"]}}";

/* Checks `out`'s tensor `name` [E, cols, rows] against blocks [E, rows, cols/32, 16]. */
static void expect_transposed(const char *out, const char *name, const uint8_t *blocks,
                              const uint8_t *scales, uint64_t E, uint64_t rows, uint64_t cols,
                              const char *dtype)
{
    out_tensor o;
    out_open(&o, out, name);
    ck_assert_int_eq(o.t->rank, 3);
    ck_assert_msg(o.t->shape[0] == E && o.t->shape[1] == cols && o.t->shape[2] == rows,
                  "%s: shape [%llu, %llu, %llu]", name, (unsigned long long)o.t->shape[0],
                  (unsigned long long)o.t->shape[1], (unsigned long long)o.t->shape[2]);
    for (uint64_t e = 0; e < E; e++)
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t c = 0; c < cols; c++) {
                double want = fp4_value(blocks + e * rows * cols / 2, scales + e * rows * cols / 32,
                                        cols, r, c);
                double got = out_value(&o, (e * cols + c) * rows + r);
                /* exact in every dtype for the scales used here */
                ck_assert_msg(got == want && signbit(got) == signbit(want),
                              "%s %s [%llu, %llu, %llu]: %a, want %a", dtype, name,
                              (unsigned long long)e, (unsigned long long)c, (unsigned long long)r,
                              got, want);
            }
    out_close(&o);
}

START_TEST(test_gpt_oss_exports_in_transformers_orientation)
{
    static uint8_t gu_b[GE * 2 * GI * GH / 2], gu_s[GE * 2 * GI * GH / 32];
    static uint8_t dn_b[GE * GH * GI / 2], dn_s[GE * GH * GI / 32];
    static uint16_t bias[GE * 2 * GI];
    fill(gu_b, sizeof gu_b, 1);
    fill(dn_b, sizeof dn_b, 2);
    fill((uint8_t *)bias, sizeof bias, 3);
    /* 2^-9 .. 2^8: every value normal and finite in f16 too */
    fill_scales(gu_s, sizeof gu_s, 4, 118, 18);
    fill_scales(dn_s, sizeof dn_s, 5, 118, 18);
    const char *p = "model.layers.0.mlp.experts.";
    char n1[128], n2[128], n3[128], n4[128], n5[128];
    snprintf(n1, sizeof n1, "%sgate_up_proj_blocks", p);
    snprintf(n2, sizeof n2, "%sgate_up_proj_scales", p);
    snprintf(n3, sizeof n3, "%sdown_proj_blocks", p);
    snprintf(n4, sizeof n4, "%sdown_proj_scales", p);
    snprintf(n5, sizeof n5, "%sgate_up_proj_bias", p);
    t_spec ts[] = {
        { n1, FP8_DTYPE_U8, 4, { GE, 2 * GI, GH / 32, 16 }, gu_b },
        { n2, FP8_DTYPE_U8, 3, { GE, 2 * GI, GH / 32 }, gu_s },
        { n3, FP8_DTYPE_U8, 4, { GE, GH, GI / 32, 16 }, dn_b },
        { n4, FP8_DTYPE_U8, 3, { GE, GH, GI / 32 }, dn_s },
        { n5, FP8_DTYPE_BF16, 2, { GE, 2 * GI }, bias },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "gpt-oss", ts, 5, gpt_oss_config);
    for (int d = 0; d < 3; d++) {
        char *out;
        ck_assert(asprintf(&out, "%s/out-%s", dir, dtypes[d]) > 0);
        char *err = NULL;
        int rc = tu_run_fmt(&err, "dequantize-for-export -q --dtype %s '%s' '%s'", dtypes[d],
                            model, out);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        free(err);
        char name[128];
        snprintf(name, sizeof name, "%sgate_up_proj", p);
        expect_transposed(out, name, gu_b, gu_s, GE, 2 * GI, GH, dtypes[d]);
        snprintf(name, sizeof name, "%sdown_proj", p);
        expect_transposed(out, name, dn_b, dn_s, GE, GH, GI, dtypes[d]);
        ck_assert(!has_tensor(out, n1) && !has_tensor(out, n2) && !has_tensor(out, n4));
        /* the bias is copied as it was */
        out_tensor o;
        out_open(&o, out, n5);
        ck_assert(o.t->dtype == FP8_DTYPE_BF16 && !memcmp(o.data, bias, sizeof bias));
        out_close(&o);
        char *cpath;
        ck_assert(asprintf(&cpath, "%s/config.json", out) > 0);
        cJSON *config = read_json(cpath);
        ck_assert(!cJSON_GetObjectItem(config, "quantization_config"));
        cJSON_Delete(config);
        free(cpath);
        free(out);
    }
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- DeepSeek-V4 */

static const char dsv4_config[] =
    "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"model_type\": \"deepseek_v4\", "
    "\"hidden_size\": 200, \"n_routed_experts\": 2, \"torch_dtype\": \"bfloat16\", "
    "\"expert_dtype\": \"fp4\", \"quantization_config\": {\"quant_method\": \"fp8\", "
    "\"fmt\": \"e4m3\", \"scale_fmt\": \"ue8m0\", \"activation_scheme\": \"dynamic\", "
    "\"weight_block_size\": [128, 128]}}";

#define DM 130 /* trunk rows: a partial block */
#define DN 200 /* trunk cols: a partial block */
#define XO 8   /* expert out */
#define XI 64  /* expert in */

START_TEST(test_deepseek_v4_exports_trunk_and_fp4_experts)
{
    static uint8_t wq[DM * DN], wq_s[2 * 2], x_w[XO * XI / 2], x_s[XO * XI / 32];
    static float sink[4] = { 1, 2, 3, 4 };
    fill(wq, sizeof wq, 6);
    for (size_t i = 0; i < sizeof wq; i++) /* no NaN code */
        if ((wq[i] & 0x7F) == 0x7F)
            wq[i] = 0x7E;
    fill_scales(wq_s, sizeof wq_s, 7, 120, 10);
    fill(x_w, sizeof x_w, 8);
    fill_scales(x_s, sizeof x_s, 9, 118, 18);
    t_spec ts[] = {
        { "layers.0.attn.wq_a.weight", FP8_DTYPE_F8_E4M3, 2, { DM, DN }, wq },
        { "layers.0.attn.wq_a.scale", FP8_DTYPE_F8_E8M0, 2, { 2, 2 }, wq_s },
        { "layers.0.ffn.experts.0.w1.weight", FP8_DTYPE_I8, 2, { XO, XI / 2 }, x_w },
        { "layers.0.ffn.experts.0.w1.scale", FP8_DTYPE_F8_E8M0, 2, { XO, XI / 32 }, x_s },
        { "layers.0.attn.attn_sink", FP8_DTYPE_F32, 1, { 4 }, sink },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "dsv4", ts, 5, dsv4_config);
    for (int d = 0; d < 3; d++) {
        char *out, *err = NULL;
        ck_assert(asprintf(&out, "%s/out-%s", dir, dtypes[d]) > 0);
        int rc = tu_run_fmt(&err, "dequantize-for-export -q --dtype %s '%s' '%s'", dtypes[d],
                            model, out);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        free(err);
        out_tensor o;
        out_open(&o, out, "layers.0.attn.wq_a.weight");
        ck_assert(o.t->rank == 2 && o.t->shape[0] == DM && o.t->shape[1] == DN);
        for (uint64_t r = 0; r < DM; r++)
            for (uint64_t c = 0; c < DN; c++) {
                /* E4M3 times a power of two: exact in f32 and bf16, and in f16
                 * unless it falls below f16's normals */
                double want = ldexp(fp8_e4m3_to_f32(wq[r * DN + c]),
                                    (int)wq_s[(r / 128) * 2 + c / 128] - 127);
                double got = out_value(&o, r * DN + c);
                double tol = d == 2 ? ldexp(1, -25) : 0;
                ck_assert_msg(fabs(got - want) <= tol, "%s wq_a [%llu, %llu]: %a, want %a",
                              dtypes[d], (unsigned long long)r, (unsigned long long)c, got, want);
            }
        out_close(&o);
        out_open(&o, out, "layers.0.ffn.experts.0.w1.weight");
        ck_assert(o.t->rank == 2 && o.t->shape[0] == XO && o.t->shape[1] == XI);
        for (uint64_t r = 0; r < XO; r++)
            for (uint64_t c = 0; c < XI; c++) {
                double want = fp4_value(x_w, x_s, XI, r, c), got = out_value(&o, r * XI + c);
                ck_assert_msg(got == want && signbit(got) == signbit(want),
                              "%s w1 [%llu, %llu]: %a, want %a", dtypes[d], (unsigned long long)r,
                              (unsigned long long)c, got, want);
            }
        out_close(&o);
        ck_assert(!has_tensor(out, "layers.0.attn.wq_a.scale"));
        ck_assert(!has_tensor(out, "layers.0.ffn.experts.0.w1.scale"));
        ck_assert(has_tensor(out, "layers.0.attn.attn_sink"));
        char *cpath;
        ck_assert(asprintf(&cpath, "%s/config.json", out) > 0);
        cJSON *config = read_json(cpath);
        ck_assert(!cJSON_GetObjectItem(config, "quantization_config"));
        ck_assert(!cJSON_GetObjectItem(config, "expert_dtype"));
        ck_assert(cJSON_GetObjectItem(config, "n_routed_experts"));
        cJSON_Delete(config);
        free(cpath);
        free(out);
    }
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

static bool rounded_once(double p, double g, bool divides, uint32_t y, fp8_dtype dtype);

/* Tensors big enough for several jobs (a job reads 256 KiB of codes): the
 * bytes do not depend on -j, and the values are right across job edges. */
START_TEST(test_same_bytes_for_any_thread_count)
{
    enum { GR = 9000, GC = 64, XR = 20000, XC = 64 };
    uint8_t *gb = malloc(GR * GC / 2), *gs = malloc(GR * GC / 32);
    uint8_t *xb = malloc(XR * XC / 2), *xs = malloc(XR * XC / 32), *ns = malloc(XR * XC / 16);
    fill(gb, GR * GC / 2, 11);
    fill_scales(gs, GR * GC / 32, 12, 100, 50);
    fill(xb, XR * XC / 2, 13);
    fill_scales(xs, XR * XC / 32, 14, 100, 50);
    fill_scales(ns, XR * XC / 16, 15, 0x30, 0x30); /* E4M3 2^-2 .. 2^4 */
    float g = 6 * 448 / 2.7f;
    t_spec ts[] = {
        /* NVFP4 (compressed-tensors), the same codes */
        { "model.layers.2.mlp.up_proj.weight_packed", FP8_DTYPE_U8, 2, { XR, XC / 2 }, xb },
        { "model.layers.2.mlp.up_proj.weight_scale", FP8_DTYPE_F8_E4M3, 2, { XR, XC / 16 }, ns },
        { "model.layers.2.mlp.up_proj.weight_global_scale", FP8_DTYPE_F32, 1, { 1 }, &g },
        { "model.layers.0.mlp.experts.down_proj_blocks", FP8_DTYPE_U8, 4, { 1, GR, GC / 32, 16 },
          gb },
        { "model.layers.0.mlp.experts.down_proj_scales", FP8_DTYPE_U8, 3, { 1, GR, GC / 32 }, gs },
        { "layers.1.ffn.experts.3.w2.weight", FP8_DTYPE_I8, 2, { XR, XC / 2 }, xb },
        { "layers.1.ffn.experts.3.w2.scale", FP8_DTYPE_F8_E8M0, 2, { XR, XC / 32 }, xs },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 7, NULL), *first = NULL;
    size_t first_len = 0;
    for (int j = 1; j <= 4; j += 3) {
        char *out, *path, *err = NULL;
        ck_assert(asprintf(&out, "%s/out-j%d", dir, j) > 0);
        int rc = tu_run_fmt(&err, "dequantize-for-export -q -j %d --dtype f32 '%s' '%s'", j,
                            model, out);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        free(err);
        expect_transposed(out, "model.layers.0.mlp.experts.down_proj", gb, gs, 1, GR, GC, "f32");
        out_tensor o;
        out_open(&o, out, "layers.1.ffn.experts.3.w2.weight");
        for (uint64_t r = 0; r < XR; r++)
            for (uint64_t c = 0; c < XC; c++)
                ck_assert(out_value(&o, r * XC + c) == fp4_value(xb, xs, XC, r, c));
        out_close(&o);
        out_open(&o, out, "model.layers.2.mlp.up_proj.weight");
        for (uint64_t r = 0; r < XR; r++)
            for (uint64_t c = 0; c < XC; c++) {
                uint8_t b = xb[(r * XC + c) / 2];
                double p = e2m1(c % 2 ? b >> 4 : b & 15) * (double)fp8_e4m3_to_f32(ns[(r * XC + c) / 16]);
                uint32_t y;
                memcpy(&y, o.data + 4 * (r * XC + c), 4);
                ck_assert(rounded_once(p, g, true, y, FP8_DTYPE_F32));
            }
        out_close(&o);
        ck_assert(asprintf(&path, "%s/model.safetensors", out) > 0);
        size_t len;
        char *bytes = tu_slurp(path, &len);
        if (!first) {
            first = bytes;
            first_len = len;
        } else {
            ck_assert(len == first_len && !memcmp(bytes, first, len));
            free(bytes);
        }
        free(path);
        free(out);
    }
    free(first);
    free(model);
    free(gb);
    free(gs);
    free(xb);
    free(xs);
    free(ns);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- bad input */

static void expect_bad(const char *dir, const char *model, const char *what1, const char *what2)
{
    char *err = NULL, *out;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "dequantize-for-export '%s' '%s'", model, out);
    ck_assert_msg(rc == 3 && strstr(err, what1) && strstr(err, what2), "exit %d: %s", rc, err);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    ck_assert_int_eq(count_entries(dir, ".out."), 0);
    free(err);
    free(out);
}

START_TEST(test_e8m0_nan_scale_of_fp4_weight_is_bad_input)
{
    uint8_t w[4 * 32], s[4 * 2];
    fill(w, sizeof w, 1);
    fill_scales(s, sizeof s, 2, 120, 8);
    s[5] = 0xFF; /* row 2, group 1: element 2 * 64 + 32 */
    t_spec ts[] = {
        { "layers.0.ffn.experts.0.w3.weight", FP8_DTYPE_I8, 2, { 4, 32 }, w },
        { "layers.0.ffn.experts.0.w3.scale", FP8_DTYPE_F8_E8M0, 2, { 4, 2 }, s },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 2, NULL);
    expect_bad(dir, model, "'layers.0.ffn.experts.0.w3.scale': element 5 is the E8M0 NaN",
               "element 160 of 'layers.0.ffn.experts.0.w3.weight'");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_fp4_value_overflowing_the_output_is_bad_input)
{
    uint8_t w[4 * 32], sc[4 * 2];
    memset(w, 0x11, sizeof w); /* 0.5 everywhere */
    memset(sc, 127, sizeof sc);
    w[3 * 32 + 5] = 0x71;     /* element 3 * 64 + 11 is 6 */
    sc[3 * 2] = 0xFE;         /* 2^127: 6 * 2^127 is beyond fp32 and bf16 */
    t_spec ts[] = {
        { "layers.0.ffn.experts.0.w1.weight", FP8_DTYPE_I8, 2, { 4, 32 }, w },
        { "layers.0.ffn.experts.0.w1.scale", FP8_DTYPE_F8_E8M0, 2, { 4, 2 }, sc },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 2, NULL);
    expect_bad(dir, model, "'layers.0.ffn.experts.0.w1.weight'", "overflows bf16");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_fp4_scale_of_wrong_shape_is_bad_input)
{
    uint8_t w[4 * 32], s[4 * 4];
    fill(w, sizeof w, 1);
    fill_scales(s, sizeof s, 2, 120, 8);
    /* [4, 4]: groups of 16 (NVFP4's), not MXFP4's 32 */
    t_spec ts[] = {
        { "layers.0.ffn.experts.0.w3.weight", FP8_DTYPE_I8, 2, { 4, 32 }, w },
        { "layers.0.ffn.experts.0.w3.scale", FP8_DTYPE_F8_E8M0, 2, { 4, 4 }, s },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 2, NULL);
    expect_bad(dir, model, "'layers.0.ffn.experts.0.w3.scale': scale F8_E8M0 [4, 4]",
               "needs F8_E8M0 [4, 2]");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_gpt_oss_blocks_without_scales_is_bad_input)
{
    uint8_t b[1 * 2 * 1 * 16];
    fill(b, sizeof b, 1);
    t_spec ts[] = {
        { "model.layers.0.mlp.experts.down_proj_blocks", FP8_DTYPE_U8, 4, { 1, 2, 1, 16 }, b },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 1, NULL);
    expect_bad(dir, model, "'model.layers.0.mlp.experts.down_proj_blocks' is packed gpt-oss mxfp4",
               "no scale 'model.layers.0.mlp.experts.down_proj_scales'");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST


/* ---------------------------------------------------------------- verify */

/* verify's exit status and report (stdout) for `model`. */
static int run_verify(const char *model, char **out)
{
    char *args;
    ck_assert(asprintf(&args, "verify '%s'", model) > 0);
    int rc = tu_run(args, out, NULL);
    free(args);
    return rc;
}

/* A DeepSeek-V4 copy with whole 128 x 128 blocks; `mutate` plants a defect. */
enum { VM = 256, VN = 128, VXO = 4, VXI = 64 };
typedef struct {
    uint8_t wq[VM * VN], wq_s[2], x_w[VXO * VXI / 2], x_s[VXO * VXI / 32];
    float sink[4], hc[3];
    bool drop_trunk_scale, expert_scale_f32_shape;
} dsv4_copy;

static char *write_dsv4(const char *dir, const char *sub, dsv4_copy *c)
{
    fill(c->wq, sizeof c->wq, 21);
    for (size_t i = 0; i < sizeof c->wq; i++)
        if ((c->wq[i] & 0x7F) == 0x7F)
            c->wq[i] = 0x7E;
    fill(c->x_w, sizeof c->x_w, 22);
    /* hc_attn_scale: a hyper-connection parameter, F32, no quantization
     * scale (its values no power of two, under scale_fmt ue8m0) */
    c->hc[0] = 0.3f, c->hc[1] = 1.7f, c->hc[2] = -0.2f;
    t_spec ts[6] = {
        { "layers.0.hc_attn_scale", FP8_DTYPE_F32, 1, { 3 }, c->hc },
        { "layers.0.attn.wq_a.weight", FP8_DTYPE_F8_E4M3, 2, { VM, VN }, c->wq },
        { "layers.0.ffn.experts.0.w2.weight", FP8_DTYPE_I8, 2, { VXO, VXI / 2 }, c->x_w },
        { "layers.0.ffn.experts.0.w2.scale", FP8_DTYPE_F8_E8M0, 2, { VXO, VXI / 32 }, c->x_s },
        { "layers.0.attn.attn_sink", FP8_DTYPE_F32, 1, { 4 }, c->sink },
        { "layers.0.attn.wq_a.scale", FP8_DTYPE_F8_E8M0, 2, { 2, 1 }, c->wq_s },
    };
    if (c->expert_scale_f32_shape) /* groups of 16: [4, 4] */
        ts[3].shape[1] = 4;
    return write_ck(dir, sub, ts, c->drop_trunk_scale ? 5 : 6, dsv4_config);
}

static void expect_finding(const char *model, const char *rule, const char *what)
{
    char *out = NULL, *want;
    ck_assert(asprintf(&want, "error [%s]", rule) > 0);
    int rc = run_verify(model, &out);
    ck_assert_msg(rc == 1 && strstr(out, want) && strstr(out, what), "exit %d: %s", rc, out);
    free(want);
    free(out);
}

START_TEST(test_verify_deepseek_v4_copy_is_clean)
{
    static dsv4_copy c;
    memset(&c, 0, sizeof c);
    fill_scales(c.wq_s, sizeof c.wq_s, 23, 120, 8);
    fill_scales(c.x_s, sizeof c.x_s, 24, 120, 8);
    char *dir = tu_tmpdir(), *model = write_dsv4(dir, "m", &c), *out = NULL;
    int rc = run_verify(model, &out);
    ck_assert_msg(rc == 0 && !strstr(out, "error ["), "exit %d: %s", rc, out);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_verify_gpt_oss_copy_is_clean)
{
    static uint8_t b[GE * GH * GI / 2], sc[GE * GH * GI / 32];
    fill(b, sizeof b, 25);
    fill_scales(sc, sizeof sc, 26, 120, 8);
    t_spec ts[] = {
        { "model.layers.0.mlp.experts.down_proj_blocks", FP8_DTYPE_U8, 4, { GE, GH, GI / 32, 16 },
          b },
        { "model.layers.0.mlp.experts.down_proj_scales", FP8_DTYPE_U8, 3, { GE, GH, GI / 32 }, sc },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 2, gpt_oss_config), *out = NULL;
    int rc = run_verify(model, &out);
    ck_assert_msg(rc == 0 && !strstr(out, "error ["), "exit %d: %s", rc, out);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
    /* scales stored F8_E8M0: transformers reads them as bytes (.to(int32) - 127) */
    dir = tu_tmpdir();
    ts[1].dtype = FP8_DTYPE_F8_E8M0;
    model = write_ck(dir, "m", ts, 2, gpt_oss_config);
    expect_finding(model, "scale-dtype", "model.layers.0.mlp.experts.down_proj_scales: dtype F8_E8M0");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_verify_names_deepseek_v4_defects)
{
    static dsv4_copy c;
    char *dir, *model;
    /* a NaN E8M0 byte in an expert's scale */
    memset(&c, 0, sizeof c);
    fill_scales(c.wq_s, sizeof c.wq_s, 23, 120, 8);
    fill_scales(c.x_s, sizeof c.x_s, 24, 120, 8);
    c.x_s[5] = 0xFF;
    dir = tu_tmpdir();
    model = write_dsv4(dir, "m", &c);
    expect_finding(model, "bad-scale", "layers.0.ffn.experts.0.w2.scale: element 5 is 0xff");
    free(model);
    tu_tmpdir_free(dir);
    /* a NaN E8M0 byte in a trunk weight's block scale (the values pass) */
    memset(&c, 0, sizeof c);
    fill_scales(c.wq_s, sizeof c.wq_s, 23, 120, 8);
    fill_scales(c.x_s, sizeof c.x_s, 24, 120, 8);
    c.wq_s[1] = 0xFF;
    dir = tu_tmpdir();
    model = write_dsv4(dir, "m", &c);
    expect_finding(model, "bad-scale", "layers.0.attn.wq_a.scale");
    free(model);
    tu_tmpdir_free(dir);
    /* the trunk weight's X.scale missing */
    memset(&c, 0, sizeof c);
    fill_scales(c.x_s, sizeof c.x_s, 24, 120, 8);
    c.drop_trunk_scale = true;
    dir = tu_tmpdir();
    model = write_dsv4(dir, "m", &c);
    expect_finding(model, "missing-scale", "no scale 'layers.0.attn.wq_a.scale'");
    free(model);
    tu_tmpdir_free(dir);
    /* an expert scale of NVFP4's group size */
    memset(&c, 0, sizeof c);
    fill_scales(c.wq_s, sizeof c.wq_s, 23, 120, 8);
    c.expert_scale_f32_shape = true;
    dir = tu_tmpdir();
    model = write_dsv4(dir, "m", &c);
    expect_finding(model, "scale-shape", "layers.0.ffn.experts.0.w2.scale: shape [4, 4]");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* An NVFP4 ModelOpt copy is clean (its E4M3 weight_scale is no FP8 weight);
 * a NaN group scale and a missing second level are named. */
START_TEST(test_verify_nvfp4_copy_is_clean_and_defects_named)
{
    static uint8_t w[16 * 32], sc[16 * 4];
    float g = 3.1f / (6 * 448);
    fill(w, sizeof w, 41);
    memset(sc, 0x38, sizeof sc);
    t_spec ts[] = {
        { "model.layers.0.self_attn.o_proj.weight", FP8_DTYPE_U8, 2, { 16, 32 }, w },
        { "model.layers.0.self_attn.o_proj.weight_scale", FP8_DTYPE_F8_E4M3, 2, { 16, 4 }, sc },
        { "model.layers.0.self_attn.o_proj.weight_scale_2", FP8_DTYPE_F32, 0, { 0 }, &g },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 3, NULL), *out = NULL;
    int rc = run_verify(model, &out);
    ck_assert_msg(rc == 0 && !strstr(out, "error ["), "exit %d: %s", rc, out);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
    sc[9] = 0x7F; /* the E4M3 NaN */
    dir = tu_tmpdir();
    model = write_ck(dir, "m", ts, 3, NULL);
    expect_finding(model, "bad-scale",
                   "model.layers.0.self_attn.o_proj.weight_scale: element 9 is 0x7f, the e4m3 NaN");
    free(model);
    tu_tmpdir_free(dir);
    sc[9] = 0x38;
    dir = tu_tmpdir();
    model = write_ck(dir, "m", ts, 2, NULL);
    expect_finding(model, "missing-scale",
                   "no second-level scale 'model.layers.0.self_attn.o_proj.weight_scale_2'");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- inspect */

START_TEST(test_inspect_shows_packed_and_logical_shapes)
{
    static uint8_t b[GE * 2 * GI * GH / 2], sc[GE * 2 * GI * GH / 32], x_w[8 * 32], x_s[8 * 2];
    t_spec ts[] = {
        { "model.layers.0.mlp.experts.gate_up_proj_blocks", FP8_DTYPE_U8, 4,
          { GE, 2 * GI, GH / 32, 16 }, b },
        { "model.layers.0.mlp.experts.gate_up_proj_scales", FP8_DTYPE_U8, 3,
          { GE, 2 * GI, GH / 32 }, sc },
        { "layers.0.ffn.experts.1.w3.weight", FP8_DTYPE_I8, 2, { 8, 32 }, x_w },
        { "layers.0.ffn.experts.1.w3.scale", FP8_DTYPE_F8_E8M0, 2, { 8, 2 }, x_s },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 4, NULL), *out = NULL, *args;
    ck_assert(asprintf(&args, "inspect '%s'", model) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 0);
    /* the packed shape in the table, the logical one below it */
    ck_assert_msg(strstr(out, "[2, 64, 2, 16]") &&
                      strstr(out, "model.layers.0.mlp.experts.gate_up_proj_blocks  gpt-oss mxfp4 -> "
                                  "model.layers.0.mlp.experts.gate_up_proj [2, 64, 64]") &&
                      strstr(out, "layers.0.ffn.experts.1.w3.weight  DeepSeek-V4 mxfp4 expert -> "
                                  "layers.0.ffn.experts.1.w3.weight [8, 64]"),
                  "%s", out);
    free(out);
    free(args);
    ck_assert(asprintf(&args, "inspect --json '%s'", model) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 0);
    cJSON *root = cJSON_Parse(out);
    const cJSON *t, *found = NULL;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "tensors"))
        if (!strcmp(cJSON_GetObjectItem(t, "name")->valuestring, "layers.0.ffn.experts.1.w3.weight"))
            found = cJSON_GetObjectItem(t, "fp4");
    ck_assert_msg(found, "%s", out);
    const cJSON *shape = cJSON_GetObjectItem(found, "shape");
    ck_assert(cJSON_GetArraySize(shape) == 2 && cJSON_GetArrayItem(shape, 1)->valuedouble == 64);
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(root, "tensors"))
        if (strstr(cJSON_GetObjectItem(t, "name")->valuestring, "scale"))
            ck_assert(!cJSON_GetObjectItem(t, "fp4"));
    cJSON_Delete(root);
    free(out);
    free(args);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- NVFP4 */

/* The exact real value of an NVFP4 element is e2m1 * s * g (ModelOpt) or
 * e2m1 * s / g (compressed-tensors).  `y` (bits of `dtype`) is that value
 * rounded once to nearest even iff no neighbour of y is nearer, and on a
 * tie y's last bit is even.  p = e2m1 * s is exact in double, and so are
 * the comparisons below: 2p vs (y + n) * g for a quotient, 2pg vs (y + n)
 * for a product, the sum of two adjacent outputs having at most 25 bits. */
static double bits_value(uint32_t b, fp8_dtype dtype)
{
    return dtype == FP8_DTYPE_F32   ? (double)fp8_f32_from_bits(b)
           : dtype == FP8_DTYPE_F16 ? (double)fp8_f16_to_f32((uint16_t)b)
                                    : (double)fp8_bf16_to_f32((uint16_t)b);
}

/* -1, 0, 1: the exact |value| below, at, above the midpoint of y and n (magnitudes) */
static int cmp_mid(double p, double g, bool divides, double y, double n)
{
    double lhs = divides ? 2 * p : 2 * p * g, rhs = divides ? (y + n) * g : y + n;
    return lhs < rhs ? -1 : lhs > rhs;
}

static bool rounded_once(double p, double g, bool divides, uint32_t y, fp8_dtype dtype)
{
    uint32_t sign = dtype == FP8_DTYPE_F32 ? 0x80000000u : 0x8000u;
    double ap = fabs(p);
    if (p != 0 && (y & sign) != (p < 0 ? sign : 0) && (y & ~sign))
        return false;
    uint32_t m = y & ~sign;
    double ym = bits_value(m, dtype);
    /* the neighbour above (inf's is none), then below (0's is none) */
    uint32_t inf = dtype == FP8_DTYPE_F32 ? 0x7F800000u : dtype == FP8_DTYPE_F16 ? 0x7C00u : 0x7F80u;
    if (m < inf) {
        int c = cmp_mid(ap, g, divides, ym, bits_value(m + 1, dtype));
        if (c > 0 || (c == 0 && (m & 1)))
            return false;
    }
    if (m > 0) {
        int c = cmp_mid(ap, g, divides, bits_value(m - 1, dtype), ym);
        if (c < 0 || (c == 0 && (m & 1)))
            return false;
    }
    return true;
}

enum { NN = 256, NK = 64 };

START_TEST(test_nvfp4_exports_the_exact_value_rounded_once)
{
    static uint8_t w[NN * NK / 2], sc[NN * NK / 16];
    fill(w, sizeof w, 31);
    fill(sc, sizeof sc, 32);
    for (size_t i = 0; i < sizeof sc; i++) /* E4M3 0x30..0x5f: 2^-2 .. 2^4, no NaN */
        sc[i] = (uint8_t)(0x30 + sc[i] % 0x30);
    /* realistic second levels: amax / (6 * 448) and its reciprocal-ish
     * divisor, neither a power of two */
    float g_mo = 3.1f / (6 * 448), g_ct = 6 * 448 / 2.7f, in = 0.01f;
    t_spec mo[] = {
        { "model.layers.0.mlp.down_proj.weight", FP8_DTYPE_U8, 2, { NN, NK / 2 }, w },
        { "model.layers.0.mlp.down_proj.weight_scale", FP8_DTYPE_F8_E4M3, 2, { NN, NK / 16 }, sc },
        { "model.layers.0.mlp.down_proj.weight_scale_2", FP8_DTYPE_F32, 0, { 0 }, &g_mo },
        { "model.layers.0.mlp.down_proj.input_scale", FP8_DTYPE_F32, 0, { 0 }, &in },
    };
    t_spec ct[] = {
        { "model.layers.0.mlp.down_proj.weight_packed", FP8_DTYPE_U8, 2, { NN, NK / 2 }, w },
        { "model.layers.0.mlp.down_proj.weight_scale", FP8_DTYPE_F8_E4M3, 2, { NN, NK / 16 }, sc },
        { "model.layers.0.mlp.down_proj.weight_global_scale", FP8_DTYPE_F32, 1, { 1 }, &g_ct },
        { "model.layers.0.mlp.down_proj.input_global_scale", FP8_DTYPE_F32, 1, { 1 }, &in },
    };
    char *dir = tu_tmpdir();
    char *models[2] = { write_ck(dir, "modelopt", mo, 4, NULL), write_ck(dir, "ct", ct, 4, NULL) };
    for (int f = 0; f < 2; f++)
        for (int d = 0; d < 3; d++) {
            fp8_dtype dt = d == 0 ? FP8_DTYPE_F32 : d == 1 ? FP8_DTYPE_BF16 : FP8_DTYPE_F16;
            char *out, *err = NULL;
            ck_assert(asprintf(&out, "%s/out-%d-%s", dir, f, dtypes[d]) > 0);
            int rc = tu_run_fmt(&err, "dequantize-for-export -q --dtype %s '%s' '%s'", dtypes[d],
                                models[f], out);
            ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
            free(err);
            out_tensor o;
            out_open(&o, out, "model.layers.0.mlp.down_proj.weight");
            ck_assert(o.t->dtype == dt && o.t->rank == 2 && o.t->shape[0] == NN &&
                      o.t->shape[1] == NK);
            double g = f ? g_ct : g_mo;
            uint64_t chain_differs = 0;
            for (uint64_t i = 0; i < (uint64_t)NN * NK; i++) {
                uint8_t b = w[i / 2];
                double p = e2m1(i % 2 ? b >> 4 : b & 15) * (double)fp8_e4m3_to_f32(sc[i / 16]);
                uint32_t y = 0;
                memcpy(&y, o.data + i * (d ? 2 : 4), d ? 2 : 4);
                ck_assert_msg(rounded_once(p, g, f == 1, y, dt),
                              "%s %s element %llu: 0x%x is not %.17g %s %.9g rounded once",
                              f ? "compressed-tensors" : "ModelOpt", dtypes[d],
                              (unsigned long long)i, y, p, f ? "/" : "*", g);
                /* an fp32 chain that folds the two scale levels into one
                 * group scale first (s * g, or s / g), then multiplies */
                float e = (float)e2m1(i % 2 ? b >> 4 : b & 15), s = fp8_e4m3_to_f32(sc[i / 16]);
                float v = f ? e * (s / g_ct) : e * (s * g_mo);
                uint32_t cb = d == 0 ? fp8_f32_bits(v) : d == 1 ? fp8_f32_to_bf16(v) : fp8_f32_to_f16(v);
                chain_differs += cb != y;
            }
            out_close(&o);
            if (d == 0) /* the test tells the chain from the exact value */
                ck_assert_msg(chain_differs > 0, "%s: no element where the fp32 chain differs",
                              f ? "compressed-tensors" : "ModelOpt");
            fprintf(stderr, "nvfp4 %s -> %s: the fp32 chain differs in %llu of %d elements\n",
                    f ? "compressed-tensors" : "ModelOpt", dtypes[d],
                    (unsigned long long)chain_differs, NN * NK);
            ck_assert(!has_tensor(out, "model.layers.0.mlp.down_proj.weight_scale") &&
                      !has_tensor(out, "model.layers.0.mlp.down_proj.weight_scale_2") &&
                      !has_tensor(out, "model.layers.0.mlp.down_proj.weight_global_scale") &&
                      !has_tensor(out, "model.layers.0.mlp.down_proj.input_global_scale") &&
                      !has_tensor(out, "model.layers.0.mlp.down_proj.input_scale"));
            free(out);
        }
    free(models[0]);
    free(models[1]);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_nvfp4_without_global_scale_is_bad_input)
{
    uint8_t w[4 * 16], sc[4 * 2];
    fill(w, sizeof w, 1);
    memset(sc, 0x38, sizeof sc);
    t_spec ts[] = {
        { "model.layers.0.mlp.up_proj.weight", FP8_DTYPE_U8, 2, { 4, 16 }, w },
        { "model.layers.0.mlp.up_proj.weight_scale", FP8_DTYPE_F8_E4M3, 2, { 4, 2 }, sc },
    };
    char *dir = tu_tmpdir(), *model = write_ck(dir, "m", ts, 2, NULL);
    expect_bad(dir, model, "'model.layers.0.mlp.up_proj.weight' is packed ModelOpt nvfp4",
               "no second-level scale 'model.layers.0.mlp.up_proj.weight_scale_2'");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- compressed-tensors MXFP4 */

/* compressed-tensors mxfp4-pack-quantized (fp4.c's row; compressors/mxfp4/base.py,
 * compressors/mx_utils.py): X.weight_packed U8 [N, K / 2], X.weight_scale U8
 * [N, K / 32] of E8M0 bytes 127 + log2(scale), no global scale.  `version`:
 * quantization_config's "version" (NULL: none written). */
static char *ct_config(const char *format, const char *version)
{
    char *c;
    ck_assert(asprintf(&c,
                       "{\"model_type\": \"llama\", \"quantization_config\": {\"config_groups\": "
                       "{\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, "
                       "\"type\": \"float\", \"strategy\": \"group\", \"group_size\": 32, "
                       "\"symmetric\": true, \"dynamic\": false, \"scale_dtype\": "
                       "\"torch.uint8\"}}}, \"format\": \"%s\", "
                       "\"ignore\": [\"lm_head\"], \"quant_method\": \"compressed-tensors\", "
                       "\"quantization_status\": \"compressed\"%s%s%s}}",
                       format, version ? ", \"version\": \"" : "", version ? version : "",
                       version ? "\"" : "") > 0);
    return c;
}

static char *ct_mxfp4_config(const char *version)
{
    return ct_config("mxfp4-pack-quantized", version);
}

enum { MN = 8, MK = 64 };

static char *write_ct_mxfp4(const char *dir, const char *sub, uint8_t *w, uint8_t *sc,
                            fp8_dtype scale_dtype, const char *version)
{
    t_spec ts[] = {
        { "model.layers.0.mlp.down_proj.weight_packed", FP8_DTYPE_U8, 2, { MN, MK / 2 }, w },
        { "model.layers.0.mlp.down_proj.weight_scale", scale_dtype, 2, { MN, MK / 32 }, sc },
    };
    char *config = ct_mxfp4_config(version), *model = write_ck(dir, sub, ts, 2, config);
    free(config);
    return model;
}

/* Exported as X.weight [N, K], every value e2m1 * 2^(b - 127) (this file's
 * own decode), the scale dropped; verify finds it clean.  Its names are
 * NVFP4 compressed-tensors' too: the U8 scale tells the layouts apart. */
START_TEST(test_ct_mxfp4_exports_and_verifies)
{
    static uint8_t w[MN * MK / 2], sc[MN * MK / 32];
    fill(w, sizeof w, 51);
    fill_scales(sc, sizeof sc, 52, 118, 16);
    char *dir = tu_tmpdir(), *model = write_ct_mxfp4(dir, "m", w, sc, FP8_DTYPE_U8, "0.14.0");
    char *out, *err = NULL, *vout = NULL;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "dequantize-for-export -q --dtype f32 '%s' '%s'", model, out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    out_tensor o;
    out_open(&o, out, "model.layers.0.mlp.down_proj.weight");
    ck_assert(o.t->dtype == FP8_DTYPE_F32 && o.t->rank == 2 && o.t->shape[0] == MN &&
              o.t->shape[1] == MK);
    for (uint64_t r = 0; r < MN; r++)
        for (uint64_t c = 0; c < MK; c++)
            ck_assert_msg(out_value(&o, r * MK + c) == fp4_value(w, sc, MK, r, c),
                          "element [%llu, %llu]: %.9g, not %.9g", (unsigned long long)r,
                          (unsigned long long)c, out_value(&o, r * MK + c),
                          fp4_value(w, sc, MK, r, c));
    out_close(&o);
    ck_assert(!has_tensor(out, "model.layers.0.mlp.down_proj.weight_scale") &&
              !has_tensor(out, "model.layers.0.mlp.down_proj.weight_packed"));
    rc = run_verify(model, &vout);
    ck_assert_msg(rc == 0 && !strstr(vout, "error ["), "exit %d: %s", rc, vout);
    free(vout);
    free(err);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* An F8_E8M0 weight_scale (compressed-tensors converts the exponent by
 * value into it, vLLM allocates uint8) is the MXFP4 layout's wrong dtype,
 * not NVFP4's: verify says so, and the export refuses it. */
START_TEST(test_ct_mxfp4_f8_e8m0_scale_is_wrong_dtype)
{
    static uint8_t w[MN * MK / 2], sc[MN * MK / 32];
    fill(w, sizeof w, 53);
    fill_scales(sc, sizeof sc, 54, 118, 16);
    char *dir = tu_tmpdir(), *model = write_ct_mxfp4(dir, "m", w, sc, FP8_DTYPE_F8_E8M0, "0.14.0");
    expect_finding(model, "scale-dtype",
                   "dtype F8_E8M0, but compressed-tensors mxfp4 scales are U8");
    expect_bad(dir, model, "model.layers.0.mlp.down_proj.weight_scale",
               "compressed-tensors mxfp4 weight");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* compressed-tensors 0.13.0 and earlier wrote MXFP4 scales with bias 125
 * (fixed by a333c877, #538, first in 0.14.0): config.json's
 * quantization_config version says which; an old one, or a build between
 * the releases that cannot be told, is verify's scale-bias error and bad
 * input for the export; a nightly dated after the fix, or no version, is
 * read with bias 127. */
START_TEST(test_ct_mxfp4_old_bias_is_refused)
{
    static uint8_t w[MN * MK / 2], sc[MN * MK / 32];
    fill(w, sizeof w, 55);
    fill_scales(sc, sizeof sc, 56, 118, 16);
    static const struct {
        const char *version, *said;
    } cases[] = {
        { "0.13.0", "0.13.0 and earlier wrote compressed-tensors mxfp4 scales with bias 125" },
        { "0.12.3.dev7", "would compute 4 times too small" },
        { "0.13.1.a20260105", "add 2 to every scale byte" },
        { "0.13.1.dev12+g3857fd9", "a build between the two releases" },
        { "0.13.1.a20260110", NULL },
        { "0.14.0", NULL },
        { NULL, NULL },
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *dir = tu_tmpdir(), *out = NULL;
        char *model = write_ct_mxfp4(dir, "m", w, sc, FP8_DTYPE_U8, cases[k].version);
        if (cases[k].said) {
            expect_finding(model, "scale-bias", cases[k].said);
            expect_bad(dir, model, "'model.layers.0.mlp.down_proj.weight_packed'", cases[k].said);
        } else {
            int rc = run_verify(model, &out);
            ck_assert_msg(rc == 0 && !strstr(out, "error ["), "%s: exit %d: %s",
                          cases[k].version ? cases[k].version : "no version", rc, out);
        }
        free(out);
        free(model);
        tu_tmpdir_free(dir);
    }
}
END_TEST

/* ---------------------------------------------------------------- loaders */

/* verify says per loader whether it loads a packed-FP4 layout, from the
 * layout table's loaders column: compressed-tensors MXFP4 in all three;
 * ModelOpt NVFP4 not in transformers (no quantizer for quant_method
 * modelopt), an error once transformers is required. */
START_TEST(test_verify_says_per_loader_whether_fp4_loads)
{
    static uint8_t w[MN * MK / 2], sc[MN * MK / 32], nw[16 * 16], nsc[16 * 2];
    fill(w, sizeof w, 57);
    fill_scales(sc, sizeof sc, 58, 118, 16);
    char *dir = tu_tmpdir(), *model = write_ct_mxfp4(dir, "ct", w, sc, FP8_DTYPE_U8, "0.14.0");
    char *out = NULL;
    int rc = run_verify(model, &out);
    ck_assert_msg(rc == 0 && strstr(out, "1 packed 4-bit weights") &&
                      strstr(out, "loads in: vllm yes (required), sglang yes (required), "
                                  "transformers yes"),
                  "exit %d: %s", rc, out);
    free(out);
    free(model);
    fill(nw, sizeof nw, 59);
    memset(nsc, 0x38, sizeof nsc);
    float g = 3.1f / (6 * 448);
    t_spec ts[] = {
        { "model.layers.0.mlp.up_proj.weight", FP8_DTYPE_U8, 2, { 16, 16 }, nw },
        { "model.layers.0.mlp.up_proj.weight_scale", FP8_DTYPE_F8_E4M3, 2, { 16, 2 }, nsc },
        { "model.layers.0.mlp.up_proj.weight_scale_2", FP8_DTYPE_F32, 0, { 0 }, &g },
    };
    model = write_ck(dir, "mo", ts, 3, NULL);
    rc = run_verify(model, &out);
    ck_assert_msg(rc == 0 && strstr(out, "note [loader-layout]") &&
                      strstr(out, "transformers does not load ModelOpt nvfp4 weights") &&
                      strstr(out, "transformers no"),
                  "exit %d: %s", rc, out);
    free(out);
    char *args;
    ck_assert(asprintf(&args, "verify --loader transformers '%s'", model) > 0);
    rc = tu_run(args, &out, NULL);
    ck_assert_msg(rc == 1 && strstr(out, "error [loader-layout]"), "exit %d: %s", rc, out);
    free(args);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- declaration */

/* verify holds config.json's declaration against the packed tensors
 * (format-mismatch): compressed-tensors MXFP4 tensors under a config with no
 * quantization_config, or declaring nvfp4-pack-quantized; gpt-oss's
 * quant_method mxfp4 with no packed tensor.  The matching declaration is
 * clean (test_ct_mxfp4_exports_and_verifies). */
START_TEST(test_verify_declaration_against_fp4_tensors)
{
    static uint8_t w[MN * MK / 2], sc[MN * MK / 32], e[4 * 8];
    fill(w, sizeof w, 61);
    fill_scales(sc, sizeof sc, 62, 118, 16);
    t_spec ts[] = {
        { "model.layers.0.mlp.down_proj.weight_packed", FP8_DTYPE_U8, 2, { MN, MK / 2 }, w },
        { "model.layers.0.mlp.down_proj.weight_scale", FP8_DTYPE_U8, 2, { MN, MK / 32 }, sc },
    };
    char *dir = tu_tmpdir();
    char *model = write_ck(dir, "none", ts, 2, "{\"model_type\": \"llama\"}");
    expect_finding(model, "format-mismatch",
                   "1 packed compressed-tensors mxfp4 weight, but config.json declares no "
                   "quantization_config with a quant_method, not quant_method "
                   "compressed-tensors, format mxfp4-pack-quantized");
    free(model);
    char *config = ct_config("nvfp4-pack-quantized", "0.14.0");
    model = write_ck(dir, "nvfp4", ts, 2, config);
    expect_finding(model, "format-mismatch", "format nvfp4-pack-quantized, not quant_method "
                                             "compressed-tensors, format mxfp4-pack-quantized");
    free(model);
    free(config);
    fill(e, sizeof e, 63);
    t_spec bf[] = { { "model.embed_tokens.weight", FP8_DTYPE_BF16, 2, { 4, 4 }, e } };
    model = write_ck(dir, "gpt-oss", bf, 1, gpt_oss_config);
    expect_finding(model, "format-mismatch",
                   "config.json declares quant_method mxfp4 (gpt-oss mxfp4), but no tensor is a "
                   "packed gpt-oss mxfp4 weight");
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* A config.json without quantization_config beside an hf_quant_config.json
 * that is no JSON: verify names the side file ([config-json]), and the
 * config read before it is freed (the ASan build's leak check; a fuzz
 * finding). */
START_TEST(test_verify_broken_side_file_beside_fp4)
{
    char *dir = tu_tmpdir(), *path, *out = NULL;
    size_t len;
    char *shard = tu_slurp("testdata/releases/nvfp4-modelopt/model.safetensors", &len);
    ck_assert(asprintf(&path, "%s/model.safetensors", dir) > 0);
    tu_spit(path, shard, len);
    free(path);
    static const char config[] = "{\"architectures\": [\"LlamaForCausalLM\"], "
                                 "\"model_type\": \"llama\"}";
    ck_assert(asprintf(&path, "%s/config.json", dir) > 0);
    tu_spit(path, config, strlen(config));
    free(path);
    ck_assert(asprintf(&path, "%s/hf_quant_config.json", dir) > 0);
    tu_spit(path, "{\"producer\": {", 14);
    free(path);
    int rc = run_verify(dir, &out);
    ck_assert_msg(rc == 1 && strstr(out, "error [config-json]") &&
                      strstr(out, "hf_quant_config.json: not valid JSON"),
                  "exit %d: %s", rc, out);
    free(out);
    free(shard);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fp4");
    TCase *tc = tcase_create("export");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gpt_oss_exports_in_transformers_orientation);
    tcase_add_test(tc, test_deepseek_v4_exports_trunk_and_fp4_experts);
    tcase_add_test(tc, test_same_bytes_for_any_thread_count);
    tcase_add_test(tc, test_nvfp4_exports_the_exact_value_rounded_once);
    suite_add_tcase(s, tc);
    tc = tcase_create("bad input");
    tcase_add_test(tc, test_e8m0_nan_scale_of_fp4_weight_is_bad_input);
    tcase_add_test(tc, test_fp4_scale_of_wrong_shape_is_bad_input);
    tcase_add_test(tc, test_fp4_value_overflowing_the_output_is_bad_input);
    tcase_add_test(tc, test_gpt_oss_blocks_without_scales_is_bad_input);
    tcase_add_test(tc, test_nvfp4_without_global_scale_is_bad_input);
    suite_add_tcase(s, tc);
    tc = tcase_create("verify");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_verify_deepseek_v4_copy_is_clean);
    tcase_add_test(tc, test_verify_gpt_oss_copy_is_clean);
    tcase_add_test(tc, test_verify_names_deepseek_v4_defects);
    tcase_add_test(tc, test_verify_nvfp4_copy_is_clean_and_defects_named);
    suite_add_tcase(s, tc);
    tc = tcase_create("inspect");
    tcase_add_test(tc, test_inspect_shows_packed_and_logical_shapes);
    suite_add_tcase(s, tc);
    tc = tcase_create("compressed-tensors mxfp4");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ct_mxfp4_exports_and_verifies);
    tcase_add_test(tc, test_ct_mxfp4_f8_e8m0_scale_is_wrong_dtype);
    tcase_add_test(tc, test_ct_mxfp4_old_bias_is_refused);
    tcase_add_test(tc, test_verify_says_per_loader_whether_fp4_loads);
    tcase_add_test(tc, test_verify_declaration_against_fp4_tensors);
    tcase_add_test(tc, test_verify_broken_side_file_beside_fp4);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
