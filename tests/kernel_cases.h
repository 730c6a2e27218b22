/*
 * kernel_cases.h - what the kernels must get right, byte for byte against
 * the CPU reference: every scale kind, BF16, F16 and F32 sources, odd shapes
 * and group shapes, random data of every magnitude, and the targeted cases:
 * exact ties, subnormals, zeros, values above 448 after scaling, all-zero
 * groups, underflowing scales, NaN and infinity, F16 scale overflow; amax;
 * dequantization to BF16, F16 and F32 for every scale layout; the packed-FP4
 * decode (MXFP4, NVFP4 as ModelOpt and compressed-tensors write it) against
 * fp4_dequant_row on every (scale byte, code) pair in both nibbles and on
 * random rows, in bands and transposed; the FP4 quantize (NVFP4, MXFP4)
 * against fp4_quantize_row from BF16 and F32 on random magnitudes,
 * threshold ties, zeros, subnormals, tiny quotients and bad input.  Two suites
 * run them: tests/check_kernels.c on the CPU emulation of the kernels (every
 * build), tests/gpu/check_gpu.c on a GPU (make check-gpu).
 */
#ifndef FP8_KERNEL_CASES_H
#define FP8_KERNEL_CASES_H

#include "testutil.h"

#include "fill.h"
#include "compute/gpu.h"
#include "compute/quant_cpu.h"

/* A band of packed FP4 as the FP4 decode kernel takes it (fp8_gpu_dequant's
 * fields for a packed element). */
typedef struct {
    uint64_t rows, cols, group, c0, width;
    bool transpose, upload;
} fp8_gpu_fp4_band;

/* What runs the kernels; each call returns the kernels' "bad" flag. */
typedef struct {
    bool (*quantize)(const fp8_band *b, const void *x, uint8_t *q, void *scales);
    bool (*amax)(fp8_dtype src, const void *x, uint64_t n, float *amax);
    /* the scales `sf` as fp8_gpu_dequant describes them; y gets the values */
    bool (*dequantize)(const fp8_gpu_dequant *d, const uint8_t *q, const float *sf, void *y);
    bool quick; /* the emulation: smaller cases */
    /* packed FP4: the band d of codes q, the table (FP8_GPU_FP4_TABLE_BYTES,
     * fp8_gpu_dequant_prepare) and the rows' scale bytes; y gets the values */
    bool (*fp4)(const fp8_gpu_fp4_band *d, fp8_dtype out, const uint8_t *q,
                const unsigned char *table, const uint8_t *scales, void *y);
    /* FP4 quantize: n elements x (whole rows) to n / 2 packed bytes and
     * n / run scale bytes */
    bool (*fp4q)(fp8_scheme scheme, fp8_dtype src, const void *x, uint64_t n, float global,
                 uint8_t *packed, uint8_t *scales);
} kc_engine;

static inline unsigned kc_src_size(fp8_dtype d) { return d == FP8_DTYPE_F32 ? 4 : 2; }

static const fp8_dtype kc_dtypes[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };

/* Quantizes band b of x with the engine and with the reference; the same
 * codes and scales, or the engine flags what the reference rejects. */
static inline void kc_expect_band(const kc_engine *e, const fp8_band *b, const void *x,
                                  const char *what)
{
    uint64_t n = b->rows * b->cols, ns = fp8_band_scale_count(b), where = 0;
    unsigned ssz = fp8_scale_size(b->kind);
    uint8_t *q = malloc(n + 1), *s = malloc(ns * ssz + 1);
    uint8_t *gq = malloc(n + 1), *gs = malloc(ns * ssz + 1);
    fp8_band_result want = fp8_band_quantize_ref(b, x, q, s, &where);
    bool bad = e->quantize(b, x, gq, gs);
    ck_assert_msg(bad == (want != FP8_BAND_OK), "%s: kernel flag %d, reference result %d", what,
                  bad, want);
    if (want == FP8_BAND_OK) {
        for (uint64_t i = 0; i < n; i++)
            ck_assert_msg(q[i] == gq[i], "%s: code %llu: reference 0x%02x, kernel 0x%02x", what,
                          (unsigned long long)i, q[i], gq[i]);
        ck_assert_msg(memcmp(s, gs, ns * ssz) == 0, "%s: scales differ", what);
    }
    free(q);
    free(s);
    free(gq);
    free(gs);
}

static inline void kc_random_bands(const kc_engine *e)
{
    static const uint64_t dims[][2] = { { 1, 1 },    { 3, 7 },     { 129, 257 },  { 37, 96 },
                                        { 128, 128 }, { 256, 160 }, { 100, 4096 }, { 2, 20480 } };
    /* one block row (what quantize runs), 128x128 tiles, a row, MX, 64x32,
     * 1x128, 128x1, a fixed scale */
    static const uint64_t gr[] = { 0, 128, 1, 1, 64, 1, 128, 1 };
    static const uint64_t gc[] = { 128, 128, 0, 32, 32, 128, 1, 1 };
    size_t ndims = e->quick ? 4 : 8;
    void *x = malloc(100 * 4096 * 4);
    for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++)
        for (size_t d = 0; d < 3; d++)
            for (size_t k = 0; k < ndims; k++)
                for (int shape = 0; shape < 8; shape++) {
                    if (e->quick && (kind + (int)d + shape) % 3) /* a third of the mix */
                        continue;
                    fp8_band b = { .src = kc_dtypes[d], .kind = (fp8_scale_kind)kind,
                                   .rows = dims[k][0], .cols = dims[k][1], .scale = 0.37f };
                    b.group_rows = gr[shape] ? gr[shape] : b.rows;
                    b.group_cols = gc[shape] ? gc[shape] : b.cols;
                    b.fixed = shape == 7;
                    fill(b.src, x, b.rows * b.cols);
                    if (k % 2) /* an all-zero row */
                        memset(x, 0, b.cols * kc_src_size(b.src));
                    char what[160];
                    snprintf(what, sizeof what, "kind %d, %s, %llux%llu, groups %llux%llu%s", kind,
                             fp8_dtype_name(b.src), (unsigned long long)b.rows,
                             (unsigned long long)b.cols, (unsigned long long)b.group_rows,
                             (unsigned long long)b.group_cols, b.fixed ? " fixed" : "");
                    kc_expect_band(e, &b, x, what);
                }
    free(x);
}

/* Every profile's arithmetic (fp8_numerics, common/types.h's rows): the
 * kernel's codes and scales are the reference's on random rows and the
 * classes the profiles differ on (fill_profile_rows), in block rows, rows
 * and with a fixed factor; what the reference refuses is flagged. */
static inline void kc_profiles(const kc_engine *e)
{
    static const uint64_t dims[][2] = { { 4, 7 }, { 129, 257 }, { 128, 128 }, { 4, 4096 } };
    static const uint64_t gr[] = { 0, 1, 1 }, gc[] = { 128, 0, 0 };
    void *x = malloc(129 * 257 * 4);
    /* each row's arithmetic and each scheme's own (fp8_profile_numerics) */
    for (int p = 0; p < FP8_PROFILE_COUNT; p++)
        for (int s = -1; s <= FP8_SCHEME_INT4; s++) {
            const fp8_profile_traits *t = fp8_profile_get((fp8_profile)p);
            if (s >= 0 && !(t->own >> s & 1))
                continue;
            const fp8_numerics num = s < 0 ? t->num : t->by_scheme[s];
            /* a quotient in the scale's dtype (in_kind): bf16 and f16 scales too; an MX
             * rule (mx_up): E8M0 bytes */
            const fp8_scale_kind kinds[] = { FP8_SCALE_F32,
                                             num.in_kind ? FP8_SCALE_BF16 : FP8_SCALE_E8M0_RCEIL,
                                             FP8_SCALE_F16 };
            for (size_t kd = 0; kd < (num.in_kind ? 3 : num.mx_up ? 2 : 1); kd++)
            for (size_t d = 0; d < 3; d++)
                for (size_t k = 0; k < (e->quick ? 2 : 4); k++)
                    for (int shape = 0; shape < 3; shape++) {
                        fp8_band b = { .src = kc_dtypes[d], .kind = kinds[kd],
                                       .rows = dims[k][0], .cols = dims[k][1], .scale = 0.37f,
                                       .num = num };
                        b.group_rows = gr[shape] ? gr[shape] : b.rows;
                        b.group_cols = gc[shape] ? gc[shape] : b.cols;
                        b.fixed = shape == 2;
                        fill_profile_rows(b.src, x, b.rows, b.cols);
                        char what[160];
                        snprintf(what, sizeof what, "profile %s%s%s kind %d, %s, %llux%llu, groups %llux%llu%s",
                                 fp8_profile_name((fp8_profile)p), s < 0 ? "" : " scheme ",
                                 s < 0 ? "" : fp8_scheme_name((fp8_scheme)s), (int)b.kind, fp8_dtype_name(b.src),
                                 (unsigned long long)b.rows, (unsigned long long)b.cols,
                                 (unsigned long long)b.group_rows, (unsigned long long)b.group_cols,
                                 b.fixed ? " fixed" : "");
                        kc_expect_band(e, &b, x, what);
                    }
        }
    free(x);
}

/* E4M3 midpoints: with amax 448 an F32 scale is exactly 1, so each value is
 * quantized as is, and halfway values must round to the even code. */
static inline void kc_targeted(const kc_engine *e)
{
    float x[288];
    int n = 0;
    x[n++] = 448.0f;
    for (int c = 0; c < 0x7E; c++) { /* every midpoint between neighbours, both signs */
        float mid = (fp8_e4m3_to_f32((uint8_t)c) + fp8_e4m3_to_f32((uint8_t)(c + 1))) / 2;
        x[n++] = mid;
        x[n++] = -mid;
    }
    x[n++] = -0.0f;
    x[n++] = 0x1p-149f;  /* the smallest fp32 subnormal */
    x[n++] = -0x1p-126f; /* fp32's smallest normal */
    x[n++] = 0x1p-10f;   /* half the smallest E4M3 subnormal: ties to 0 */
    x[n++] = 0x1.8p-9f;  /* 1.5 units of 2^-9: ties to 2 */
    while (n % 32)
        x[n++] = 0;
    for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++) {
        fp8_band b = { .src = FP8_DTYPE_F32, .kind = (fp8_scale_kind)kind, .rows = 1,
                       .cols = (uint64_t)n, .group_rows = 1, .group_cols = (uint64_t)n };
        kc_expect_band(e, &b, x, "ties, one group");
        b.group_cols = 32; /* MX-sized groups: some all zero, some tiny */
        kc_expect_band(e, &b, x, "ties, groups of 32");
    }
    /* above 448 after scaling: floor MX with a significand above 1.75 saturates */
    float sat[32];
    for (int i = 0; i < 32; i++)
        sat[i] = (i % 2 ? -1.0f : 1.0f) * (1.99f - 0.01f * (float)i) * 0x1p20f;
    fp8_band mx = { .src = FP8_DTYPE_F32, .kind = FP8_SCALE_E8M0_FLOOR, .rows = 1, .cols = 32,
                    .group_rows = 1, .group_cols = 32 };
    kc_expect_band(e, &mx, sat, "floor saturation");
    /* scales that underflow: amax far below 448 times the smallest scale */
    float tiny[64];
    for (int i = 0; i < 64; i++)
        tiny[i] = fp8_f32_from_bits((uint32_t)(i + 1));
    for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++) {
        fp8_band b = { .src = FP8_DTYPE_F32, .kind = (fp8_scale_kind)kind, .rows = 2, .cols = 32,
                       .group_rows = 1, .group_cols = 32 };
        kc_expect_band(e, &b, tiny, "underflowing scales");
    }
    /* BF16 and F16 subnormal sources */
    uint16_t h[256];
    for (int i = 0; i < 256; i++)
        h[i] = (uint16_t)((i & 1) << 15 | (i >> 1));
    for (size_t d = 0; d < 2; d++)
        for (int kind = FP8_SCALE_F32; kind <= FP8_SCALE_E8M0_FLOOR; kind++) {
            fp8_band b = { .src = kc_dtypes[d], .kind = (fp8_scale_kind)kind, .rows = 2,
                           .cols = 128, .group_rows = 2, .group_cols = 32 };
            kc_expect_band(e, &b, h, "16-bit subnormals");
        }
}

static inline void kc_bad_input(const kc_engine *e)
{
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
            kc_expect_band(e, &b, y, "a NaN or infinity");
        }
    float big[64];
    for (int i = 0; i < 64; i++)
        big[i] = 1e36f; /* amax / 448 above 65504: an F16 scale cannot hold it */
    fp8_band f16 = { .src = FP8_DTYPE_F32, .kind = FP8_SCALE_F16, .rows = 1, .cols = 64,
                     .group_rows = 1, .group_cols = 64 };
    kc_expect_band(e, &f16, big, "F16 scale overflow");
}

static inline void kc_amax(const kc_engine *e)
{
    static const uint64_t sizes[] = { 1, 31, 1000, 65537, 3000001 };
    void *x = malloc(3000001 * 4);
    for (size_t d = 0; d < 3; d++)
        for (size_t k = 0; k < (e->quick ? 4u : 5u); k++)
            for (int poison = 0; poison < 2; poison++) {
                uint64_t n = sizes[k], where;
                fill(kc_dtypes[d], x, n);
                if (poison) { /* an infinity in the last element */
                    if (kc_dtypes[d] == FP8_DTYPE_F32)
                        ((float *)x)[n - 1] = fp8_f32_from_bits(0xFF800000);
                    else
                        ((uint16_t *)x)[n - 1] = kc_dtypes[d] == FP8_DTYPE_BF16 ? 0x7F80 : 0x7C00;
                }
                float want = 0, got = 0;
                fp8_band_result r = fp8_amax_ref(kc_dtypes[d], x, n, &want, &where);
                bool bad = e->amax(kc_dtypes[d], x, n, &got);
                ck_assert_int_eq(bad, r != FP8_BAND_OK);
                if (!bad)
                    ck_assert_msg(fp8_f32_bits(want) == fp8_f32_bits(got), "%s n %llu",
                                  fp8_dtype_name(kc_dtypes[d]), (unsigned long long)n);
            }
    free(x);
}

/* The reference's answer for one layout: the values rounded to d->out, or
 * false when a code is NaN or a value is infinite. */
static inline bool kc_cpu_dequant(const fp8_gpu_dequant *d, const uint8_t *q, const float *sf,
                                  void *y)
{
    uint64_t per_row = d->cols / d->group_cols + (d->cols % d->group_cols != 0), where;
    unsigned size = kc_src_size(d->out);
    for (uint64_t r = 0; r < d->rows; r++) {
        const float *sr = sf + ((d->row0 + r) / d->group_rows - d->row0 / d->group_rows) * per_row;
        if (fp8_dequant_row_ref(q + r * d->cols, d->cols, sr, d->group_cols, d->out,
                                (char *)y + r * d->cols * size, &where))
            return false;
    }
    return true;
}

static inline void kc_dequant(const kc_engine *e)
{
    static const fp8_dtype outs[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };
    /* rows, cols, row0, group rows, group cols: tensor, channel, blocks, MX;
     * on a GPU, rows past the 65535 grid rows */
    static const uint64_t layouts[][5] = {
        { 7, 300, 0, UINT64_MAX, 300 }, { 129, 257, 5, 1, 257 }, { 200, 300, 100, 128, 128 },
        { 64, 96, 0, 64, 32 },          { 33, 256, 3, 1, 32 },   { 70000, 64, 0, 128, 128 },
    };
    static const float special[] = { 1.0f, 0x1p-127f, 0x1p-149f, 3.7e-5f, 0.37f, 1e30f, 1e36f };
    uint64_t most = 70000 * 64;
    uint8_t *q = malloc(most);
    float *sf = malloc(most * 4);
    void *want_y = malloc(most * 4), *got_y = malloc(most * 4);
    for (size_t o = 0; o < 3; o++)
        for (size_t l = 0; l < (e->quick ? 5u : 6u); l++)
            for (int variant = 0; variant < 4; variant++) {
                fp8_gpu_dequant d = { outs[o],       layouts[l][0], layouts[l][1], layouts[l][2],
                                      layouts[l][3], layouts[l][4], 0, 0, layouts[l][1],
                                      false, true, FP8_ELEM_E4M3 };
                uint64_t n = d.rows * d.cols, per_row = (d.cols + d.group_cols - 1) / d.group_cols;
                uint64_t srows = d.group_rows == UINT64_MAX ? 1
                                                            : (d.row0 + d.rows - 1) / d.group_rows -
                                                                  d.row0 / d.group_rows + 1;
                d.nscales = srows * per_row;
                for (uint64_t i = 0; i < n; i++) {
                    q[i] = (uint8_t)next_u32();
                    q[i] = (q[i] & 0x7F) == 0x7F ? 0x7E : q[i];
                }
                for (uint64_t i = 0; i < d.nscales; i++) /* special ones, or in (0, 0.5] */
                    sf[i] = variant == 0 ? special[i % 6]
                                         : fp8_f32_from_bits(next_u32() % 0x3F000000 + 1);
                if (variant == 2 && l % 2) /* a NaN code */
                    q[n / 2] = 0xFF;
                else if (variant == 2) /* products beyond fp32 */
                    sf[d.nscales - 1] = special[6];
                if (variant == 3) { /* 448 s: finite in fp32, infinite as bf16 (and f16) */
                    q[n - 1] = 0x7E;
                    sf[d.nscales - 1] = fp8_f32_from_bits(0x7F7FC000) / 448.0f;
                }
                bool want = kc_cpu_dequant(&d, q, sf, want_y);
                bool bad = e->dequantize(&d, q, sf, got_y);
                ck_assert_msg(bad == !want, "out %s layout %zu variant %d: kernel flag %d",
                              fp8_dtype_name(d.out), l, variant, bad);
                if (want)
                    ck_assert_msg(memcmp(want_y, got_y, n * kc_src_size(d.out)) == 0,
                                  "out %s layout %zu variant %d: values differ",
                                  fp8_dtype_name(d.out), l, variant);
            }
    free(q);
    free(sf);
    free(want_y);
    free(got_y);
}

/* ---------------------------------------------------------------- packed FP4 */

#define KC_MX &fp8_scheme_table[FP8_SCHEME_MXFP4]
#define KC_NV &fp8_scheme_table[FP8_SCHEME_NVFP4]
static fp8_dequant_spec kc_fp4_specs[] = {
    { .scheme = KC_MX, .group = 32 },                   /* MXFP4 (gpt-oss, DeepSeek-V4) */
    { .scheme = KC_NV, .group = 16, .global = 3.7194e-5f }, /* NVFP4, ModelOpt: * scale_2 */
    /* NVFP4, compressed-tensors: / global */
    { .scheme = KC_NV, .group = 16, .global = 26886.1f, .divides = true },
    { .scheme = KC_NV, .group = 16, .global = 1e30f }, /* many scale bytes overflow */
};

/* The reference's values of the band (fp4_dequant_row row by row, at the
 * band's place and stride); false when a row is bad input. */
static inline bool kc_fp4_ref(const fp8_gpu_fp4_band *d, const fp4_table *t, const uint8_t *q,
                              const uint8_t *scales, void *y)
{
    unsigned sz = t->out == FP8_DTYPE_F32 ? 4 : 2;
    bool ok = true;
    for (uint64_t r = 0; r < d->rows; r++) {
        uint64_t where;
        void *yr = (char *)y + (d->transpose ? r : r * d->width) * sz;
        ok = fp4_dequant_row(q + (r * d->cols + d->c0) / 2,
                             scales + r * (d->cols / d->group) + d->c0 / d->group, d->width, t, yr,
                             d->transpose ? d->rows : 1, &where) == FP4_DEQ_OK && ok;
    }
    return ok;
}

/* The engine's band against the reference: flagged exactly when a scale
 * byte of the band is not clean (NaN, or some code overflows under it), and
 * else the same bytes. */
static inline void kc_fp4_band(const kc_engine *e, const fp8_gpu_fp4_band *d, const fp4_table *t,
                               const unsigned char *table, const uint8_t *q, const uint8_t *scales,
                               const char *what)
{
    size_t len = d->rows * d->width * (t->out == FP8_DTYPE_F32 ? 4 : 2);
    unsigned char *want = malloc(len), *got = malloc(len);
    ck_assert(want && got);
    memset(want, 0xA5, len);
    memset(got, 0x5A, len);
    bool unclean = false;
    for (uint64_t r = 0; r < d->rows; r++)
        for (uint64_t g = d->c0 / d->group; g < (d->c0 + d->width) / d->group; g++)
            unclean = unclean || !table[256 * 16 * 4 + scales[r * (d->cols / d->group) + g]];
    bool ok = kc_fp4_ref(d, t, q, scales, want);
    bool bad = e->fp4(d, t->out, q, table, scales, got);
    ck_assert_msg(bad == unclean, "%s: kernel flag %d, a scale byte not clean %d", what, bad,
                  unclean);
    ck_assert_msg(unclean || ok, "%s: clean scales, but the reference refused", what);
    if (!bad)
        ck_assert_msg(memcmp(want, got, len) == 0, "%s: values differ", what);
    free(want);
    free(got);
}

static inline void kc_fp4(const kc_engine *e)
{
    static const fp8_dtype outs[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };
    fp4_table *t = malloc(sizeof *t);
    unsigned char *table = malloc(FP8_GPU_FP4_TABLE_BYTES);
    uint8_t *q = malloc(256 * 256), *sc = malloc(256 * 32);
    ck_assert(t && table && q && sc);
    for (size_t s = 0; s < sizeof kc_fp4_specs / sizeof kc_fp4_specs[0]; s++)
        for (size_t o = 0; o < 3; o++) {
            fp8_dequant_spec *rs = &kc_fp4_specs[s];
            rs->out = outs[o];
            fp4_table_init(t, rs);
            fp8_gpu_dequant_prepare(&(fp8_dequant_spec){ .table = t }, table);
            char what[128];
            /* every clean scale byte a row of 512 codes: every byte value, so
             * each code in both nibbles; then each other byte alone, flagged */
            uint64_t rows = 0, cols = 512, per_row = cols / rs->group;
            for (unsigned b = 0; b < 256; b++) {
                if (!table[256 * 16 * 4 + b])
                    continue;
                for (uint64_t k = 0; k < cols / 2; k++)
                    q[rows * cols / 2 + k] = (uint8_t)k;
                memset(sc + rows * per_row, (int)b, per_row);
                rows++;
            }
            for (int tr = 0; tr < 2; tr++) {
                fp8_gpu_fp4_band d = { rows, cols, rs->group, 0, cols, tr, true };
                snprintf(what, sizeof what, "spec %zu, %s, every clean scale byte%s", s,
                         fp8_dtype_name(outs[o]), tr ? ", transposed" : "");
                kc_fp4_band(e, &d, t, table, q, sc, what);
            }
            for (unsigned b = 0; b < 256; b++) {
                if (table[256 * 16 * 4 + b])
                    continue;
                memset(sc, (int)b, per_row);
                fp8_gpu_fp4_band d = { 1, cols, rs->group, 0, cols, false, true };
                snprintf(what, sizeof what, "spec %zu, %s, scale byte 0x%02x", s,
                         fp8_dtype_name(outs[o]), b);
                kc_fp4_band(e, &d, t, table, q, sc, what);
            }
            /* random rows, bands of columns, transposed and not, sometimes a
             * scale byte of any value among realistic ones */
            for (int k = 0; k < (e->quick ? 8 : 40); k++) {
                uint64_t r_ = 1 + next_u32() % 75, c_ = rs->group * (2 + next_u32() % 12);
                uint64_t pr = c_ / rs->group, g0 = next_u32() % pr, gw = 1 + next_u32() % (pr - g0);
                for (uint64_t i = 0; i < r_ * c_ / 2; i++)
                    q[i] = (uint8_t)next_u32();
                for (uint64_t i = 0; i < r_ * pr; i++)
                    sc[i] = (uint8_t)(rs->scheme->pow2_scales ? 118 + next_u32() % 8 /* E8M0 */
                                                              : 0x30 + next_u32() % 0x40);
                if (k % 4 == 3)
                    sc[next_u32() % (r_ * pr)] = (uint8_t)next_u32();
                fp8_gpu_fp4_band d = { r_, c_, rs->group, g0 * rs->group, gw * rs->group, k % 2,
                                       true };
                snprintf(what, sizeof what, "spec %zu, %s, random band %d (%llux%llu)", s,
                         fp8_dtype_name(outs[o]), k, (unsigned long long)r_,
                         (unsigned long long)c_);
                kc_fp4_band(e, &d, t, table, q, sc, what);
            }
        }
    free(t);
    free(table);
    free(q);
    free(sc);
}

/* ---------------------------------------------------------------- FP4 quantize */


/* The engine against fp4_quantize_row: what the reference refuses is
 * flagged; what is not flagged has the reference's bytes; and only a tiny
 * quotient (class 3 or 7, MXFP4 from BF16) may be flagged besides. */
static inline void kc_fp4_quantize(const kc_engine *e)
{
    enum { NMAX = 32 * 1100 };
    float *f = malloc(NMAX * 4);
    uint16_t *b = malloc(NMAX * 2);
    uint8_t *q0 = malloc(NMAX / 2), *q1 = malloc(NMAX / 2), *s0 = malloc(NMAX / 16),
            *s1 = malloc(NMAX / 16);
    ck_assert(f && b && q0 && q1 && s0 && s1);
    int compared = 0, refused = 0;
    for (int rep = 0; rep < (e->quick ? 4 : 30); rep++)
        for (int k = 0; k < 8; k++)
            for (int sc = 0; sc < 2; sc++)
                for (int dt = 0; dt < 2; dt++) {
                    fp8_scheme scheme = sc ? FP8_SCHEME_MXFP4 : FP8_SCHEME_NVFP4;
                    fp8_dtype src = dt ? FP8_DTYPE_F32 : FP8_DTYPE_BF16;
                    /* once a class a band past the emulation's launch cap */
                    uint64_t n = 32 * (rep == 0 ? 1100 : 1 + next_u32() % 40);
                    fill_fp4q(k, n, f);
                    for (uint64_t i = 0; i < n; i++)
                        b[i] = fp8_f32_to_bf16(f[i]);
                    const void *x = dt ? (const void *)f : (const void *)b;
                    float global = rep % 3 == 0 ? 1.0f : fp4_nvfp4_global(NULL, src, 1.0f + (float)rep);
                    uint64_t where;
                    memset(q0, 0xAA, n / 2);
                    memset(q1, 0x55, n / 2);
                    memset(s0, 0xAA, n / 16);
                    memset(s1, 0x55, n / 16);
                    fp4_q_result want = fp4_quantize_row(NULL, scheme, src, x, n, global, q0, s0, &where);
                    bool bad = e->fp4q(scheme, src, x, n, global, q1, s1);
                    char what[96];
                    snprintf(what, sizeof what, "rep %d, class %d, %s from %s, %llu elements", rep,
                             k, sc ? "mxfp4" : "nvfp4", dt ? "f32" : "bf16",
                             (unsigned long long)n);
                    if (want != FP4_Q_OK) {
                        ck_assert_msg(bad, "%s: the reference refuses (%d), the kernel did not flag",
                                      what, want);
                        refused++;
                        continue;
                    }
                    if (bad) {
                        ck_assert_msg(sc && !dt && (k == 3 || k == 7),
                                      "%s: flagged, but the reference quantizes it", what);
                        continue;
                    }
                    uint64_t ns = n / fp8_scheme_get(scheme)->run;
                    for (uint64_t i = 0; i < n / 2; i++)
                        ck_assert_msg(q0[i] == q1[i], "%s: packed byte %llu: reference 0x%02x, "
                                      "kernel 0x%02x", what, (unsigned long long)i, q0[i], q1[i]);
                    for (uint64_t i = 0; i < ns; i++)
                        ck_assert_msg(s0[i] == s1[i], "%s: scale %llu: reference 0x%02x, kernel "
                                      "0x%02x", what, (unsigned long long)i, s0[i], s1[i]);
                    compared++;
                }
    ck_assert_int_gt(compared, e->quick ? 80 : 600);
    ck_assert_int_gt(refused, e->quick ? 15 : 100);
    free(f);
    free(b);
    free(q0);
    free(q1);
    free(s0);
    free(s1);
}

/* ---------------------------------------------------------------- the suite */

static const kc_engine *kc_under_test; /* set before Check forks the tests */

START_TEST(test_random_bands_equal_reference) { kc_random_bands(kc_under_test); }
END_TEST

START_TEST(test_ties_subnormals_zeros_and_saturation) { kc_targeted(kc_under_test); }
END_TEST

START_TEST(test_bad_input_is_flagged) { kc_bad_input(kc_under_test); }
END_TEST

START_TEST(test_amax_equals_reference) { kc_amax(kc_under_test); }
END_TEST

START_TEST(test_dequant_equals_cpu) { kc_dequant(kc_under_test); }
END_TEST

START_TEST(test_fp4_decode_equals_reference) { kc_fp4(kc_under_test); }
END_TEST

START_TEST(test_fp4_quantize_equals_reference) { kc_fp4_quantize(kc_under_test); }
END_TEST

START_TEST(test_every_profile_equals_reference) { kc_profiles(kc_under_test); }
END_TEST

/* Adds every case above, run by `e`, to tc. */
static inline void kc_add_tests(TCase *tc, const kc_engine *e)
{
    kc_under_test = e;
    tcase_add_test(tc, test_random_bands_equal_reference);
    tcase_add_test(tc, test_ties_subnormals_zeros_and_saturation);
    tcase_add_test(tc, test_bad_input_is_flagged);
    tcase_add_test(tc, test_amax_equals_reference);
    tcase_add_test(tc, test_dequant_equals_cpu);
    tcase_add_test(tc, test_fp4_decode_equals_reference);
    tcase_add_test(tc, test_fp4_quantize_equals_reference);
    tcase_add_test(tc, test_every_profile_equals_reference);
}

#endif
