/*
 * check_int4.c - the INT4 weight-only codec (lib/compute/int4_ref.h):
 *   - against compressed-tensors' own quantizer, packer, unpacker and
 *     decompressor: testdata/int4/goldens.bin, written by
 *     tests/oracle/int4_oracle.py (compressed-tensors 0.19.0, torch
 *     2.15.0 on the CPU; the script says how), bf16, f16 and f32 weights,
 *     groups of 128 and 32, edge classes (zero, -0, tiny and subnormal
 *     groups, ties of torch.round, near-ties the dtype's rounding decides,
 *     the dtype's largest values, groups whose amax is their minimum) and
 *     decompress-only cases (subnormal scales, large products);
 *   - the fast path (quant_cpu.c) against the reference on random data of
 *     every magnitude, odd row counts, both groups, every dtype;
 *   - the row: INT4's element and scheme rows and its run choice.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "fill.h"

#include "common/types.h"
#include "compute/int4_ref.h"
#include "compute/quant_cpu.h"
#include "compute/quant_ref.h"

#define GOLDENS "testdata/int4/goldens.bin"

static const fp8_dtype dtypes[3] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };
static const fp8_scale_kind kinds[3] = { FP8_SCALE_BF16, FP8_SCALE_F16, FP8_SCALE_F32 };

static uint32_t rd32(const unsigned char **p)
{
    uint32_t v;
    memcpy(&v, *p, 4);
    *p += 4;
    return v;
}

static fp8_band int4_band(int d, uint64_t rows, uint64_t cols, uint64_t group)
{
    return (fp8_band){ .src = dtypes[d], .kind = kinds[d], .rows = rows, .cols = cols,
                       .group_rows = 1, .group_cols = group, .scheme = FP8_SCHEME_INT4 };
}

START_TEST(test_codec_is_compressed_tensors)
{
    size_t len = 0;
    unsigned char *data = (unsigned char *)tu_slurp(GOLDENS, &len);
    const unsigned char *p = data + 8;
    ck_assert_int_eq(memcmp(data, "INT4GLD1", 8), 0);
    uint32_t ncases = rd32(&p), nquant = 0;
    ck_assert_uint_ge(ncases, 10);
    for (uint32_t k = 0; k < ncases; k++) {
        uint32_t d = rd32(&p), rows = rd32(&p), cols = rd32(&p), group = rd32(&p), quant = rd32(&p);
        ck_assert_uint_lt(d, 3);
        unsigned es = d == 2 ? 4 : 2;
        uint64_t n = (uint64_t)rows * cols, ns = n / group;
        const unsigned char *x = p, *packed = x + n * es, *scales = packed + n / 2,
                            *deq = scales + ns * es;
        p = deq + n * es;
        ck_assert((size_t)(p - (const unsigned char *)data) <= len);
        if (quant) {
            fp8_band b = int4_band((int)d, rows, cols, group);
            uint8_t *q[2] = { malloc(n / 2), malloc(n / 2) };
            unsigned char *s[2] = { malloc(ns * es), malloc(ns * es) };
            uint64_t where = 0;
            ck_assert_int_eq(fp8_band_quantize_ref(&b, x, q[0], s[0], &where), FP8_BAND_OK);
            ck_assert_int_eq(fp8_band_quantize(&b, x, q[1], s[1], &where), FP8_BAND_OK);
            for (int f = 0; f < 2; f++) {
                for (uint64_t i = 0; i < n / 2; i++)
                    ck_assert_msg(q[f][i] == packed[i],
                                  "case %u (%s, group %u) %s: byte %llu is %02x, "
                                  "compressed-tensors %02x", k, fp8_dtype_name(dtypes[d]), group,
                                  f ? "fast" : "reference", (unsigned long long)i, q[f][i],
                                  packed[i]);
                ck_assert_msg(memcmp(s[f], scales, ns * es) == 0, "case %u: scales differ", k);
            }
            for (int f = 0; f < 2; f++) {
                free(q[f]);
                free(s[f]);
            }
            nquant++;
        }
        unsigned char *y = malloc(n * es);
        for (uint32_t r = 0; r < rows; r++) {
            uint64_t where = 0;
            fp8_int4_deq_result res = fp8_int4_dequant_row(
                packed + (uint64_t)r * cols / 2, scales + (uint64_t)r * cols / group * es,
                dtypes[d], cols, group, dtypes[d], y + (uint64_t)r * cols * es, &where);
            /* an overflow is an infinity in the decompressor's output too */
            if (res == FP8_INT4_DEQ_OVERFLOW)
                ck_assert(!__builtin_isfinite(fp8_load_f32(dtypes[d], deq,
                                                           (uint64_t)r * cols + where)));
            else
                ck_assert_int_eq(res, FP8_INT4_DEQ_OK);
        }
        for (uint64_t i = 0; i < n * es; i++)
            ck_assert_msg(y[i] == deq[i], "case %u: dequantized byte %llu differs", k,
                          (unsigned long long)i);
        free(y);
    }
    ck_assert_ptr_eq(p, data + len);
    ck_assert_uint_ge(nquant, 10);
    free(data);
}
END_TEST

START_TEST(test_fast_path_is_the_reference)
{
    static const uint64_t rows_list[] = { 1, 3, 5 }, cols_list[] = { 128, 256, 384 };
    for (int d = 0; d < 3; d++)
        for (int gi = 0; gi < 2; gi++)
            for (int ri = 0; ri < 3; ri++)
                for (int ci = 0; ci < 3; ci++) {
                    uint64_t G = gi ? 32 : 128, rows = rows_list[ri], cols = cols_list[ci];
                    if (cols % G)
                        continue;
                    uint64_t n = rows * cols, ns = n / G;
                    unsigned es = d == 2 ? 4 : 2;
                    void *x = malloc(n * es);
                    fill(dtypes[d], x, n);
                    fp8_band b = int4_band(d, rows, cols, G);
                    uint8_t *q0 = malloc(n / 2), *q1 = malloc(n / 2);
                    unsigned char *s0 = malloc(ns * es), *s1 = malloc(ns * es);
                    uint64_t where = 0;
                    ck_assert_int_eq(fp8_band_quantize_ref(&b, x, q0, s0, &where), FP8_BAND_OK);
                    ck_assert_int_eq(fp8_band_quantize(&b, x, q1, s1, &where), FP8_BAND_OK);
                    ck_assert_int_eq(memcmp(q0, q1, n / 2), 0);
                    ck_assert_int_eq(memcmp(s0, s1, ns * es), 0);
                    free(x), free(q0), free(q1), free(s0), free(s1);
                }
}
END_TEST

START_TEST(test_nonfinite_says_where)
{
    float x[256];
    for (int i = 0; i < 256; i++)
        x[i] = (float)i / 100;
    x[77] = fp8_f32_from_bits(0x7F800000);
    x[200] = fp8_f32_from_bits(0x7FC00000);
    fp8_band b = int4_band(2, 2, 128, 32);
    uint8_t q[128];
    float s[8];
    uint64_t where = 0;
    ck_assert_int_eq(fp8_band_quantize_ref(&b, x, q, s, &where), FP8_BAND_NONFINITE);
    ck_assert_uint_eq(where, 77);
    where = 0;
    ck_assert_int_eq(fp8_band_quantize(&b, x, q, s, &where), FP8_BAND_NONFINITE);
    ck_assert_uint_eq(where, 77);
}
END_TEST

START_TEST(test_zero_group_scale_is_eps_and_codes_are_8)
{
    uint16_t x[32] = { 0 };
    x[5] = 0x8000; /* -0 */
    fp8_band b = int4_band(0, 1, 32, 32);
    uint8_t q[16];
    uint16_t s = 0;
    uint64_t where = 0;
    ck_assert_int_eq(fp8_band_quantize(&b, x, q, &s, &where), FP8_BAND_OK);
    ck_assert_uint_eq(s, fp8_f32_to_bf16(0x1p-7f)); /* torch.finfo(torch.bfloat16).eps */
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(q[i], 0x88);
}
END_TEST

START_TEST(test_dequant_reports_bad_scale_and_overflow)
{
    uint8_t packed[16];
    memset(packed, 0x0F, sizeof packed); /* -8 and 7 alternating... */
    packed[3] = 0x00;                    /* -8, -8 */
    float s[2] = { 1, fp8_f32_from_bits(0x7FC00000) };
    uint16_t y[32];
    uint64_t where = 0;
    ck_assert_int_eq(fp8_int4_dequant_row(packed, s, FP8_DTYPE_F32, 32, 16, FP8_DTYPE_BF16, y,
                                          &where),
                     FP8_INT4_DEQ_BAD_SCALE);
    ck_assert_uint_eq(where, 16);
    s[1] = 1;
    ck_assert_int_eq(fp8_int4_dequant_row(packed, s, FP8_DTYPE_F32, 32, 16, FP8_DTYPE_BF16, y,
                                          &where),
                     FP8_INT4_DEQ_OK);
    ck_assert_uint_eq(y[0], fp8_f32_to_bf16(7));  /* nibble 15: 7 */
    ck_assert_uint_eq(y[1], fp8_f32_to_bf16(-8)); /* nibble 0: -8 */
    s[0] = 1e4f;
    ck_assert_int_eq(fp8_int4_dequant_row(packed, s, FP8_DTYPE_F32, 32, 16, FP8_DTYPE_F16, y,
                                          &where),
                     FP8_INT4_DEQ_OVERFLOW);
    ck_assert_uint_eq(where, 0);
}
END_TEST

START_TEST(test_int4_rows)
{
    const fp8_elem_traits *e = fp8_elem_get(FP8_ELEM_I4);
    ck_assert_uint_eq(e->bits, 4);
    ck_assert_uint_eq(e->per_byte, 2);
    ck_assert(e->is_nan == NULL);
    ck_assert(e->max_finite == 7.0f && e->most_negative == -8.0f);
    ck_assert_int_eq(e->dtype, FP8_DTYPE_I32);
    for (unsigned c = 0; c < 16; c++)
        ck_assert(e->decode((uint8_t)c) == (float)((int)c - 8));
    const fp8_scheme_traits *t = fp8_scheme_get(FP8_SCHEME_INT4);
    ck_assert_int_eq(t->elem, FP8_ELEM_I4);
    ck_assert_int_eq(t->group, FP8_GROUP_RUN);
    ck_assert_uint_eq(t->run, 128);
    ck_assert_uint_eq(t->run_alt, 32);
    ck_assert_uint_eq(fp8_scheme_run(t, 32), 32);
    ck_assert_uint_eq(fp8_scheme_run(t, 128), 128);
    ck_assert_uint_eq(fp8_scheme_run(t, 64), 128);
    ck_assert_str_eq(fp8_scheme_name(FP8_SCHEME_INT4), "int4");
    /* [out, in/8] I32 words: in/2 bytes a row */
    ck_assert_uint_eq(fp8_scheme_code_bytes(FP8_SCHEME_INT4, 7168), 7168 / 8 * 4);
    ck_assert_uint_eq(fp8_scheme_scale_size(FP8_SCHEME_INT4, FP8_SCALE_BF16), 2);
    fp8_geometry g;
    fp8_scheme_geometry(FP8_SCHEME_INT4, 128, 32, 4, 256, &g);
    ck_assert_uint_eq(g.group_cols, 32);
    ck_assert_uint_eq(g.col_groups, 8);
    fp8_scheme_geometry(FP8_SCHEME_INT4, 128, 128, 4, 256, &g);
    ck_assert_uint_eq(g.group_cols, 128);
    ck_assert_uint_eq(g.col_groups, 2);
    /* the other RUN schemes keep their run whatever block_cols says */
    fp8_scheme_geometry(FP8_SCHEME_NVFP4, 128, 32, 4, 256, &g);
    ck_assert_uint_eq(g.group_cols, 16);
}
END_TEST

static Suite *int4_suite(void)
{
    Suite *s = suite_create("int4");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_codec_is_compressed_tensors);
    tcase_add_test(tc, test_fast_path_is_the_reference);
    tcase_add_test(tc, test_nonfinite_says_where);
    tcase_add_test(tc, test_zero_group_scale_is_eps_and_codes_are_8);
    tcase_add_test(tc, test_dequant_reports_bad_scale_and_overflow);
    tcase_add_test(tc, test_int4_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(int4_suite()); }
