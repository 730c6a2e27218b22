/*
 * check_fp4_cpu.c - the CPU's fast packed-FP4 decode (fp4_cpu.h) against
 * the reference (fp4_ref.h): the same result, the same element named, the
 * same bytes, for every (scale byte, code) pair in both nibbles, each
 * layout's scale type and second level, every output dtype, and random
 * rows with NaN scales and overflows among them;
 * and end to end, a gpt-oss weight of experts large enough for the ways
 * dequantize-for-export cuts a transposed weight into jobs (a whole expert
 * in several bands of output rows; an expert over 16 MiB of codes in
 * bands of its rows, written a stretch a column; a band with a scale byte
 * that is not clean, decoded row by row), every value against a
 * decode in double here, the same bytes for -j 1 and -j 3.
 */
#include "testutil.h"

#include "common/fp8_math.h"
#include "compute/fp4_cpu.h"
#include "compute/quant_ref.h"

#define MX &fp8_scheme_table[FP8_SCHEME_MXFP4]
#define NV &fp8_scheme_table[FP8_SCHEME_NVFP4]
static fp8_dequant_spec specs[] = {
    { .scheme = MX, .group = 32 },                       /* MXFP4 */
    { .scheme = NV, .group = 16, .global = 3.7194e-5f }, /* NVFP4, ModelOpt: * global */
    /* NVFP4, compressed-tensors: / global */
    { .scheme = NV, .group = 16, .global = 26886.1f, .divides = true },
    { .scheme = NV, .group = 16, .global = 1e30f }, /* overflows under many scale bytes */
};
static const fp8_dtype outs[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };

static double e2m1(unsigned c)
{
    static const double m[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };
    return c & 8 ? -m[c & 7] : m[c & 7];
}

static uint64_t lcg(uint64_t *x) { return (*x = *x * 6364136223846793005ull + 1442695040888963407ull) >> 33; }

/* Decodes one row both ways into poisoned buffers; fails on any difference. */
static void same_row(const fp4_fast *f, const uint8_t *packed, const uint8_t *scales, uint64_t n,
                     uint64_t stride, const char *what)
{
    size_t sz = f->t->out == FP8_DTYPE_F32 ? 4 : 2, len = (size_t)(n * stride) * sz;
    unsigned char *a = malloc(len), *b = malloc(len);
    ck_assert(a && b);
    memset(a, 0xA5, len);
    memset(b, 0xA5, len);
    uint64_t wa = 7, wb = 7;
    fp4_deq_result ra = fp4_dequant_row(packed, scales, n, f->t, a, stride, &wa);
    fp4_deq_result rb = fp4_fast_row(f, packed, scales, n, b, &wb);
    if (ra != rb || (ra != FP4_DEQ_OK && wa != wb))
        ck_abort_msg("%s: result %d at %llu, reference %d at %llu", what, rb,
                     (unsigned long long)wb, ra, (unsigned long long)wa);
    if (memcmp(a, b, len)) /* (one assertion a row: check reports each to its parent) */
        for (size_t i = 0; i < len; i++)
            ck_assert_msg(a[i] == b[i], "%s: byte %zu is 0x%02x, reference 0x%02x", what, i, b[i],
                          a[i]);
    free(a);
    free(b);
}

START_TEST(test_every_scale_byte_and_code)
{
    fp4_table *t = malloc(sizeof *t);
    fp4_fast *f = malloc(sizeof *f);
    ck_assert(t && f);
    int bad = 0;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (size_t o = 0; o < 3; o++) {
            specs[s].out = outs[o];
            fp4_table_init(t, &specs[s]);
            fp4_fast_init(f, t);
            /* 512 codes a row: every byte value, both nibbles of it, under one scale byte */
            uint64_t n = 512, groups = n / specs[s].group;
            uint8_t packed[256], scales[32];
            for (unsigned k = 0; k < 256; k++)
                packed[k] = (uint8_t)k;
            for (unsigned b = 0; b < 256; b++) {
                memset(scales, (int)b, groups);
                bad += !f->clean[b];
                char what[96];
                snprintf(what, sizeof what, "spec %zu, out %zu, scale 0x%02x", s, o, b);
                same_row(f, packed, scales, n, 1, what);
            }
        }
    ck_assert(bad > 0); /* NaN scale bytes and overflows were among them */
    free(t);
    free(f);
}
END_TEST

START_TEST(test_random_rows)
{
    fp4_table *t = malloc(sizeof *t);
    fp4_fast *f = malloc(sizeof *f);
    ck_assert(t && f);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (size_t o = 0; o < 3; o++) {
            specs[s].out = outs[o];
            fp4_table_init(t, &specs[s]);
            fp4_fast_init(f, t);
            for (int r = 0; r < 300; r++) {
                uint8_t packed[1440], scales[180];
                uint64_t groups = 1 + r % 90, n = groups * specs[s].group;
                for (uint64_t k = 0; k < n / 2; k++)
                    packed[k] = (uint8_t)((x = x * 6364136223846793005ull + 1) >> 56);
                for (uint64_t g = 0; g < groups; g++) {
                    x = x * 6364136223846793005ull + 1;
                    /* mostly a realistic scale, now and then any byte (NaN, huge) */
                    scales[g] = (x >> 60) ? (uint8_t)(specs[s].scheme->pow2_scales /* E8M0 */
                                                          ? 118 + (x >> 33) % 8
                                                          : 0x30 + (x >> 33) % 0x40)
                                          : (uint8_t)(x >> 40);
                }
                char what[64];
                snprintf(what, sizeof what, "spec %zu, out %zu, row %d", s, o, r);
                same_row(f, packed, scales, n, 1, what);
            }
        }
    free(t);
    free(f);
}
END_TEST

START_TEST(test_transposed_bands)
{
    fp4_table *t = malloc(sizeof *t);
    fp4_fast *f = malloc(sizeof *f);
    ck_assert(t && f);
    uint64_t x = 0x1234567ull;
    enum { NR = 75, COLS = 192, LD = 80 }; /* 75 rows: two 32-row tiles and a partial one */
    static uint8_t packed[NR * COLS / 2], scales[NR * COLS / 16];
    static uint32_t ya[COLS * LD], yb[COLS * LD];
    int refused = 0;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (size_t o = 0; o < 3; o++) {
            specs[s].out = outs[o];
            fp4_table_init(t, &specs[s]);
            fp4_fast_init(f, t);
            uint64_t per_row = COLS / specs[s].group, sz = outs[o] == FP8_DTYPE_F32 ? 4 : 2;
            for (int k = 0; k < 20; k++) {
                for (size_t i = 0; i < sizeof packed; i++)
                    packed[i] = (uint8_t)lcg(&x);
                for (uint64_t i = 0; i < NR * per_row; i++)
                    scales[i] = (uint8_t)(specs[s].scheme->pow2_scales ? 118 + lcg(&x) % 8
                                                                       : 0x30 + lcg(&x) % 0x40);
                if (k % 4 == 3) /* now and then a scale byte of any value */
                    scales[lcg(&x) % (NR * per_row)] = (uint8_t)lcg(&x);
                /* columns [64, 64 + 96) of the rows, each row by the reference at stride LD */
                uint64_t c0 = 64, n = 96, where;
                memset(ya, 0xA5, sizeof ya);
                memset(yb, 0xA5, sizeof yb);
                bool clean = true;
                for (uint64_t r = 0; r < NR; r++)
                    clean = fp4_dequant_row(packed + (r * COLS + c0) / 2,
                                            scales + r * per_row + c0 / specs[s].group, n, t,
                                            (unsigned char *)ya + r * sz, LD, &where) ==
                                FP4_DEQ_OK && clean;
                bool ok = fp4_fast_cols(f, packed + c0 / 2, COLS / 2, scales + c0 / specs[s].group,
                                        per_row, NR, n, yb, LD);
                ck_assert(!ok || clean);
                if (!ok) { /* refused: a scale not clean, and nothing written */
                    refused++;
                    bool any = false;
                    for (uint64_t r = 0; r < NR; r++)
                        for (uint64_t g = 0; g < n / specs[s].group; g++)
                            any = any || !f->clean[scales[r * per_row + c0 / specs[s].group + g]];
                    ck_assert(any);
                    memset(ya, 0xA5, sizeof ya);
                }
                ck_assert_msg(!memcmp(ya, yb, sizeof ya), "spec %zu, out %zu, band %d differs", s, o, k);
            }
        }
    ck_assert(refused > 0);
    free(t);
    free(f);
}
END_TEST

/* ---------------------------------------------------------------- end to end */

START_TEST(test_gpt_oss_jobs_of_every_shape)
{
    /* gate_up: 2 experts of 2900 x 1024 (5.9 MB of bf16 each: two bands of
     * output rows, 2900 rows a partial tile); down: 1 expert of 8250 x 4160
     * (17 MB of codes: bands of rows) */
    struct { const char *nm; uint64_t E, R, C; } w[2] = {
        { "gate_up_proj", 2, 2900, 1024 }, { "down_proj", 1, 8250, 4160 } };
    uint8_t *b[2], *s[2];
    uint64_t x = 77;
    char *dir = tu_tmpdir(), *model, *path;
    ck_assert(asprintf(&model, "%s/m", dir) > 0 && mkdir(model, 0755) == 0);
    ck_assert(asprintf(&path, "%s/model.safetensors", model) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *wr;
    ck_assert(fp8_writer_create(ctx, path, &wr) == FP8_OK);
    for (int k = 0; k < 2; k++) {
        uint64_t n = w[k].E * w[k].R * w[k].C;
        b[k] = malloc(n / 2);
        s[k] = malloc(n / 32);
        ck_assert(b[k] && s[k]);
        for (uint64_t i = 0; i < n / 2; i++)
            b[k][i] = (uint8_t)lcg(&x);
        for (uint64_t i = 0; i < n / 32; i++)
            s[k][i] = (uint8_t)(110 + lcg(&x) % 30);
        /* a group under 2^127, whose codes (magnitudes 0 .. 1.5) do not
         * overflow: that scale byte is not clean, so the band holding it is
         * decoded row by row through a tile, and must come out the same */
        uint64_t gi = n / 32 - 1 - 3 * (n / 32) / 7;
        s[k][gi] = 254;
        for (uint64_t i = gi * 16; i < gi * 16 + 16; i++)
            b[k][i] &= 0x33;
        char name[96];
        snprintf(name, sizeof name, "model.layers.0.mlp.experts.%s_blocks", w[k].nm);
        uint64_t bs[4] = { w[k].E, w[k].R, w[k].C / 32, 16 }, ss[3] = { w[k].E, w[k].R, w[k].C / 32 };
        ck_assert(fp8_writer_add_tensor(ctx, wr, name, FP8_DTYPE_U8, 4, bs) == FP8_OK);
        snprintf(name, sizeof name, "model.layers.0.mlp.experts.%s_scales", w[k].nm);
        ck_assert(fp8_writer_add_tensor(ctx, wr, name, FP8_DTYPE_U8, 3, ss) == FP8_OK);
    }
    ck_assert(fp8_writer_begin(ctx, wr) == FP8_OK);
    for (size_t i = 0; i < fp8_writer_tensor_count(wr); i++) {
        const fp8_tensor_info *t = fp8_writer_tensor(wr, i);
        int k = strstr(t->name, "gate_up") ? 0 : 1;
        ck_assert(fp8_writer_write(ctx, wr, strstr(t->name, "_blocks") ? b[k] : s[k],
                                   fp8_tensor_nbytes(t)) == FP8_OK);
    }
    ck_assert(fp8_writer_commit(ctx, wr) == FP8_OK);
    fp8_writer_free(wr);
    char *cfg;
    ck_assert(asprintf(&cfg, "%s/config.json", model) > 0);
    tu_spit(cfg, "{\"model_type\": \"gpt_oss\", \"quantization_config\": "
                 "{\"quant_method\": \"mxfp4\"}}\n", 76);
    char *first = NULL;
    size_t first_len = 0;
    for (int j = 1; j <= 3; j += 2) {
        char *out, *err = NULL, *opath;
        ck_assert(asprintf(&out, "%s/out%d", dir, j) > 0);
        int rc = tu_run_fmt(&err, "dequantize-for-export -q --no-sync -j %d '%s' '%s'", j, model, out);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        free(err);
        ck_assert(asprintf(&opath, "%s/model.safetensors", out) > 0);
        fp8_file *f;
        ck_assert(fp8_file_open(ctx, opath, &f) == FP8_OK);
        for (int k = 0; k < 2 && j == 1; k++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.0.mlp.experts.%s", w[k].nm);
            const fp8_tensor_info *t = fp8_file_find(f, name);
            ck_assert(t && t->dtype == FP8_DTYPE_BF16 && t->rank == 3 && t->shape[1] == w[k].C &&
                      t->shape[2] == w[k].R);
            uint16_t *y = malloc(fp8_tensor_nbytes(t));
            ck_assert(y && fp8_file_read(ctx, f, t, 0, y, fp8_tensor_nbytes(t)) == FP8_OK);
            uint64_t bad = 0, R = w[k].R, C = w[k].C;
            for (uint64_t e = 0; e < w[k].E; e++)
                for (uint64_t r = 0; r < R; r++)
                    for (uint64_t c = 0; c < C; c++) {
                        uint64_t i = (e * R + r) * C + c;
                        unsigned code = i & 1 ? b[k][i / 2] >> 4 : b[k][i / 2] & 15;
                        /* exact in bf16: 2 significant bits, a normal exponent */
                        float v = (float)ldexp(e2m1(code), (int)s[k][i / 32] - 127);
                        uint16_t want = (uint16_t)(fp8_f32_bits(v) >> 16);
                        bad += y[(e * C + c) * R + r] != want;
                    }
            ck_assert_msg(bad == 0, "%s: %llu values differ", name, (unsigned long long)bad);
            free(y);
        }
        fp8_file_close(f);
        size_t len;
        char *bytes = tu_slurp(opath, &len);
        if (!first) {
            first = bytes;
            first_len = len;
        } else {
            ck_assert_msg(len == first_len && !memcmp(bytes, first, len), "-j 3 differs from -j 1");
            free(bytes);
        }
        free(opath);
        free(out);
    }
    free(first);
    for (int k = 0; k < 2; k++) {
        free(b[k]);
        free(s[k]);
    }
    fp8_ctx_free(ctx);
    free(cfg);
    free(path);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fp4_cpu");
    TCase *tc = tcase_create("fast path");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_scale_byte_and_code);
    tcase_add_test(tc, test_random_rows);
    tcase_add_test(tc, test_transposed_bands);
    suite_add_tcase(s, tc);
    tc = tcase_create("end to end");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_gpt_oss_jobs_of_every_shape);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
