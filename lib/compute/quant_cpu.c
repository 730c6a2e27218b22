/*
 * quant_cpu.c - the fast CPU path of the band quantizer.  Same bytes as
 * quant_ref.c (tests/check_quantize.c compares them on every scale kind and
 * odd shapes); faster because
 *   - the amax of a group is an integer maximum over the magnitude bits (the
 *     order of IEEE magnitudes), and the non-finite check falls out of it;
 *   - the per-element loops are branch-free, so the compiler vectorizes them,
 *     and are compiled for AVX2 and AVX-512 too, picked at run time; the
 *     E4M3 encoder of bf16 has an explicit AVX-512 loop as well;
 *   - a loop walks a whole tile, or a whole row of blocks row by row (runs
 *     the prefetchers follow), in one call.
 * The division stays a true fp32 division per element (fp8conv-formats(5),
 * ELEMENT TYPES): SIMD
 * division is correctly rounded exactly as the scalar one.
 *
 * Dequantization (fp8_dequant_row) goes from codes to the output dtype in
 * one pass, the NaN-code and overflow checks folded into the loop; when
 * they find something, the reference runs again to say what and where
 * (tests/check_dequantize.c compares every path with it).
 */
#include <math.h>

#include "compute/quant_cpu.h"
#include "compute/lanes.h"
#include "compute/fp4_cpu.h"
#include "compute/int4_ref.h"
#include "common/types.h"

#include <stdlib.h>
#include <string.h>

/*
 * fp32 to E4M3 without branches, for what the fast loops divide or
 * multiply: x is no NaN (their amax pass sends a group with a non-finite
 * element to the reference, and their factor is finite and nonzero), so
 * this is fp8_f32_to_e4m3 for every other input, infinities included
 * (tests/check_fp8_math.c checks).  Magnitudes from 448 up are clamped to
 * 448, the largest finite code's value, by an integer minimum; normal
 * results round the rebiased bits to nearest even; below 2^-6, adding 2^14
 * makes the FPU round |x| to a multiple of 2^-9 (the ulp of 2^14), to
 * nearest even, which is exactly the E4M3 subnormal grid.  The code is
 * returned in 32 bits, narrowed by the caller's store: the compiler then
 * vectorizes the loops in 32-bit lanes throughout.
 */
static inline uint32_t e4m3_finite(float x)
{
    uint32_t u = fp8_f32_bits(x), a = u & 0x7FFFFFFF;
    a = a < 0x43E00000 ? a : 0x43E00000;
    uint32_t normal = (a - 0x3C000000 + 0x7FFFF + ((a >> 20) & 1)) >> 20;
    uint32_t sub = fp8_f32_bits(fp8_f32_from_bits(a) + 16384.0f) - 0x46800000;
    return (a >= 0x3C800000 ? normal : sub) | ((u >> 24) & 0x80);
}

uint8_t fp8_e4m3_fast(float x) { return (uint8_t)e4m3_finite(x); }

/* The loops below walk a tile: rows of w elements, ld apart (codes: ldq
 * apart), in one call, so that the constants are set up once a tile; the
 * maxima are kept by lane over the rows and reduced once. */
#define AMAX_LANES 32
FP8_CLONES static uint32_t amax_bits32(const uint32_t *p, uint64_t rows, uint64_t w, uint64_t ld)
{
    uint32_t acc[AMAX_LANES] = { 0 }, tail = 0;
    for (uint64_t r = 0; r < rows; r++, p += ld) {
        uint64_t i = 0;
        for (; i + AMAX_LANES <= w; i += AMAX_LANES)
            for (int j = 0; j < AMAX_LANES; j++) {
                uint32_t a = p[i + j] & 0x7FFFFFFF;
                acc[j] = a > acc[j] ? a : acc[j];
            }
        for (; i < w; i++)
            tail = (p[i] & 0x7FFFFFFF) > tail ? p[i] & 0x7FFFFFFF : tail;
    }
    uint32_t m = tail;
    for (int j = 0; j < AMAX_LANES; j++)
        m = acc[j] > m ? acc[j] : m;
    return m;
}

FP8_CLONES static uint32_t amax_bits16(const uint16_t *p, uint64_t rows, uint64_t w, uint64_t ld)
{
    uint16_t acc[AMAX_LANES] = { 0 }, tail = 0;
    for (uint64_t r = 0; r < rows; r++, p += ld) {
        uint64_t i = 0;
        for (; i + AMAX_LANES <= w; i += AMAX_LANES)
            for (int j = 0; j < AMAX_LANES; j++) {
                uint16_t a = p[i + j] & 0x7FFF;
                acc[j] = a > acc[j] ? a : acc[j];
            }
        for (; i < w; i++)
            tail = (p[i] & 0x7FFF) > tail ? p[i] & 0x7FFF : tail;
    }
    uint16_t m = tail;
    for (int j = 0; j < AMAX_LANES; j++)
        m = acc[j] > m ? acc[j] : m;
    return m;
}

/* Largest magnitude bits of a tile: for IEEE formats the magnitude order
 * is the integer order of the bits without the sign. */
static uint32_t amax_bits(fp8_dtype src, const void *x, uint64_t rows, uint64_t w, uint64_t ld)
{
    return src == FP8_DTYPE_F32 ? amax_bits32(x, rows, w, ld) : amax_bits16(x, rows, w, ld);
}

static float bits_to_f32(fp8_dtype src, uint32_t bits)
{
    return src == FP8_DTYPE_BF16  ? fp8_bf16_to_f32((uint16_t)bits)
           : src == FP8_DTYPE_F16 ? fp8_f16_to_f32((uint16_t)bits)
                                  : fp8_f32_from_bits(bits);
}

/* The codes of `rows` rows (ld apart; codes ldq apart) of n groups of gc
 * elements each, group g under factor f[g] (finite, nonzero): x / f[g], or
 * x * f[g] where mul (a profile that multiplies, fp8_numerics_mul: rounded
 * once, as the engines' fp32 product is). */
FP8_CLONES static void quantize_bf16(const uint16_t *p, uint64_t rows, uint64_t n, uint64_t gc,
                                     uint64_t ld, const float *f, bool mul, uint8_t *q,
                                     uint64_t ldq)
{
    for (uint64_t r = 0; r < rows; r++, p += ld, q += ldq)
        for (uint64_t g = 0; g < n; g++) {
            const uint16_t *x = p + g * gc;
            uint8_t *c = q + g * gc;
            float s = f[g];
            if (mul)
                for (uint64_t i = 0; i < gc; i++)
                    c[i] = (uint8_t)e4m3_finite(fp8_f32_from_bits((uint32_t)x[i] << 16) * s);
            else
                for (uint64_t i = 0; i < gc; i++)
                    c[i] = (uint8_t)e4m3_finite(fp8_f32_from_bits((uint32_t)x[i] << 16) / s);
        }
}

/* A profile whose quotient is a bf16 (fp8_numerics' in_kind, bf16 scales): x / s
 * rounded to bf16 to nearest even (finite: no NaN branch), then to E4M3. */
FP8_CLONES static void quantize_bf16_in_bf16(const uint16_t *p, uint64_t n, float s, uint8_t *q)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u = fp8_f32_bits(fp8_f32_from_bits((uint32_t)p[i] << 16) / s);
        q[i] = (uint8_t)e4m3_finite(fp8_f32_from_bits((u + 0x7FFF + (u >> 16 & 1)) & 0xFFFF0000u));
    }
}

FP8_CLONES static void quantize_f32(const float *p, uint64_t rows, uint64_t n, uint64_t gc,
                                    uint64_t ld, const float *f, bool mul, uint8_t *q,
                                    uint64_t ldq)
{
    for (uint64_t r = 0; r < rows; r++, p += ld, q += ldq)
        for (uint64_t g = 0; g < n; g++) {
            const float *x = p + g * gc;
            uint8_t *c = q + g * gc;
            float s = f[g];
            if (mul)
                for (uint64_t i = 0; i < gc; i++)
                    c[i] = (uint8_t)e4m3_finite(x[i] * s);
            else
                for (uint64_t i = 0; i < gc; i++)
                    c[i] = (uint8_t)e4m3_finite(x[i] / s);
        }
}

/* The lane maxima of a row of blocks read row by row across its width, so
 * that the prefetchers follow: n groups of gc elements (a multiple of
 * AMAX_LANES), rows ld apart, into acc[n][AMAX_LANES] (zeroed first). */
FP8_CLONES static void amax_bf16_groups(const uint16_t *p, uint64_t rows, uint64_t n, uint64_t gc,
                                        uint64_t ld, uint16_t (*acc)[AMAX_LANES])
{
    memset(acc, 0, n * sizeof *acc);
    for (uint64_t r = 0; r < rows; r++, p += ld)
        for (uint64_t g = 0; g < n; g++)
            for (uint64_t i = 0; i < gc; i += AMAX_LANES)
                for (int j = 0; j < AMAX_LANES; j++) {
                    uint16_t a = p[g * gc + i + j] & 0x7FFF;
                    acc[g][j] = a > acc[g][j] ? a : acc[g][j];
                }
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FP8_NO_CLONES)
#include <immintrin.h>
#define FP8_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

static bool cpu_has_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

/* e4m3_finite on 16 lanes, its steps one instruction each: the clamp a
 * minimum, the sub-2^-6 result a masked subtract, the sign a ternary-logic
 * or, the narrowing vpmovdb (gcc makes about half as many instructions
 * again of the portable loop).  tests/check_fp8_math.c checks it on every
 * input it checks e4m3_finite on. */
FP8_AVX512 static inline __m128i e4m3_finite16(__m512 y)
{
    __m512i u = _mm512_castps_si512(y);
    __m512i a = _mm512_min_epu32(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                 _mm512_set1_epi32(0x43E00000));
    __mmask16 sub = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(0x3C800000));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32(0x7FFFF - 0x3C000000)), odd), 20);
    __m512 t = _mm512_add_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(16384.0f));
    r = _mm512_mask_sub_epi32(r, sub, _mm512_castps_si512(t), _mm512_set1_epi32(0x46800000));
    /* 0xF8: r | (u >> 24 & 0x80) */
    r = _mm512_ternarylogic_epi32(r, _mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80), 0xF8);
    return _mm512_cvtepi32_epi8(r);
}

/* quantize_bf16 on AVX-512, the same bytes (check_quantize compares the
 * band quantizer with the reference on the CPU it runs on). */
FP8_AVX512 static void quantize_bf16_avx512(const uint16_t *p, uint64_t rows, uint64_t n,
                                            uint64_t gc, uint64_t ld, const float *f, bool mul,
                                            uint8_t *q, uint64_t ldq)
{
    for (uint64_t r = 0; r < rows; r++, p += ld, q += ldq)
        for (uint64_t g = 0; g < n; g++) {
            __m512 s = _mm512_set1_ps(f[g]);
            uint64_t i = g * gc, end = i + gc;
            for (; i + 16 <= end; i += 16) { /* masked stores are slow on AMD: only the tail's */
                __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)(p + i)));
                __m512 x = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
                _mm_storeu_si128((void *)(q + i), e4m3_finite16(mul ? _mm512_mul_ps(x, s)
                                                                    : _mm512_div_ps(x, s)));
            }
            if (i < end) {
                __mmask16 k = (__mmask16)((1u << (end - i)) - 1);
                __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p + i));
                __m512 x = _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
                _mm_mask_storeu_epi8(q + i, k, e4m3_finite16(mul ? _mm512_mul_ps(x, s)
                                                                 : _mm512_div_ps(x, s)));
            }
        }
}

FP8_AVX512 static __m128i avx512_encode(const float *x)
{
    return e4m3_finite16(_mm512_loadu_ps(x));
}

bool fp8_e4m3_fast16(const float x[16], uint8_t q[16])
{
    if (!cpu_has_avx512())
        return false;
    _mm_storeu_si128((__m128i *)(void *)q, avx512_encode(x));
    return true;
}
#else
static bool cpu_has_avx512(void) { return false; }
static void quantize_bf16_avx512(const uint16_t *p, uint64_t rows, uint64_t n, uint64_t gc,
                                 uint64_t ld, const float *f, bool mul, uint8_t *q, uint64_t ldq)
{
    quantize_bf16(p, rows, n, gc, ld, f, mul, q, ldq);
}

bool fp8_e4m3_fast16(const float x[16], uint8_t q[16]) { return false; }
#endif

/* mxfp8 on bf16, the common case, in one call: an MX group is too short to
 * pay for a call per group. */
FP8_CLONES static bool quantize_mx_bf16(const uint16_t *p, uint64_t groups, fp8_scale_kind kind,
                                        uint8_t *q, uint8_t *scales)
{
    for (uint64_t g = 0; g < groups; g++, p += FP8_MX_GROUP, q += FP8_MX_GROUP) {
        uint16_t m = 0;
        for (int i = 0; i < FP8_MX_GROUP; i++) {
            uint16_t a = p[i] & 0x7FFF;
            m = a > m ? a : m;
        }
        uint32_t bits = 0;
        if (m >= 0x7F80 || fp8_scale_make(kind, fp8_bf16_to_f32(m), &bits) == 0)
            return false;
        scales[g] = (uint8_t)bits;
        /* x / 2^E and x * 2^-E are the same real number, rounded once either
         * way, so the multiplication gives the division's bits; 2^-E is an
         * fp32 for every E in [-127, 127] */
        float r = fp8_pow2(127 - (int)bits);
        for (int i = 0; i < FP8_MX_GROUP; i++)
            q[i] = (uint8_t)e4m3_finite(fp8_f32_from_bits((uint32_t)p[i] << 16) * r);
    }
    return true;
}

/* A tile under factor s of the band's arithmetic: divided by it, or
 * multiplied (fp8_numerics_mul). */
static void quantize_tile(const fp8_band *b, const void *x, uint64_t rows, uint64_t w, float s,
                          uint8_t *q)
{
    bool mul = fp8_numerics_mul(&b->num);
    /* a quotient in the scale's dtype (in_kind): bf16 scales come with bf16 weights */
    bool in_kind = b->num.in_kind && b->kind != FP8_SCALE_F32;
    if (in_kind && b->src == FP8_DTYPE_BF16 && b->kind == FP8_SCALE_BF16 && !mul && isfinite(s) &&
        s != 0) {
        for (uint64_t r = 0; r < rows; r++)
            quantize_bf16_in_bf16((const uint16_t *)x + r * b->cols, w, s, q + r * b->cols);
    } else if (!in_kind && b->src == FP8_DTYPE_BF16 && isfinite(s) && s != 0) {
        (cpu_has_avx512() ? quantize_bf16_avx512 : quantize_bf16)(x, rows, 1, w, b->cols, &s, mul,
                                                                  q, b->cols);
    } else if (!in_kind && b->src == FP8_DTYPE_F32 && isfinite(s) && s != 0) {
        quantize_f32(x, rows, 1, w, b->cols, &s, mul, q, b->cols);
    } else { /* f16 (rare in checkpoints), or a factor off the fast loops: the exact steps */
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t i = 0; i < w; i++)
                q[r * b->cols + i] = fp8_numerics_code(&b->num, b->kind,
                                                       fp8_load_f32(b->src, x, r * b->cols + i), s);
    }
}

/* Blocks of bf16 a whole row of blocks at a time, read row by row across
 * the band's width twice (the lane maxima, then the codes): runs that the
 * prefetchers follow, where a tile's rows are a row apart.  For bands of at
 * most BLOCK_ROW_GROUPS whole groups; false where a group is not finite or
 * has no scale (the reference then says what and where). */
#define BLOCK_ROW_GROUPS 512
static bool block_rows_bf16(const fp8_band *b, const uint16_t *x, uint8_t *q, void *scales)
{
    uint16_t acc[BLOCK_ROW_GROUPS][AMAX_LANES];
    float f[BLOCK_ROW_GROUPS];
    uint64_t n = b->cols / b->group_cols, gc = b->group_cols, g = 0;
    bool mul = fp8_numerics_mul(&b->num);
    for (uint64_t r0 = 0; r0 < b->rows; r0 += b->group_rows) {
        uint64_t rows = b->rows - r0 < b->group_rows ? b->rows - r0 : b->group_rows;
        amax_bf16_groups(x + r0 * b->cols, rows, n, gc, b->cols, acc);
        for (uint64_t k = 0; k < n; k++, g++) {
            uint16_t m = 0;
            for (int j = 0; j < AMAX_LANES; j++)
                m = acc[k][j] > m ? acc[k][j] : m;
            uint32_t bits = 0;
            if (m >= 0x7F80 || !((f[k] = fp8_numerics_scale(&b->num, b->kind, fp8_bf16_to_f32(m),
                                                            &bits)) != 0 && isfinite(f[k])))
                return false;
            fp8_scale_store(scales, fp8_scale_size(b->kind), g, bits);
        }
        (cpu_has_avx512() ? quantize_bf16_avx512 : quantize_bf16)(
            x + r0 * b->cols, rows, n, gc, b->cols, f, mul, q + r0 * b->cols, b->cols);
    }
    return true;
}

/* An INT4 band of bf16 or f32 in one call, group by group (int4_ref.h's
 * steps; the bf16 rounding without fp8_f32_to_bf16's NaN branch, as x / s
 * is finite): codes into c, then packed two a byte, low nibble first, so
 * that both loops vectorize.  false on a NaN or infinity (the reference
 * then says where). */
FP8_CLONES static bool int4_band_fast(fp8_dtype src, const void *x, uint64_t groups, uint64_t G,
                                      fp8_scale_kind kind, uint8_t *q, void *scales)
{
    const uint16_t *h = x;
    const float *f = x;
    uint8_t c[256];
    for (uint64_t g = 0; g < groups; g++, q += G / 2) {
        uint32_t m = 0;
        for (uint64_t i = 0; i < G; i++) {
            uint32_t a = src == FP8_DTYPE_BF16 ? h[g * G + i] & 0x7FFFu
                                               : fp8_f32_bits(f[g * G + i]) & 0x7FFFFFFFu;
            m = a > m ? a : m;
        }
        if (m >= (src == FP8_DTYPE_BF16 ? 0x7F80u : 0x7F800000u))
            return false;
        float s = fp8_int4_scale(src, src == FP8_DTYPE_BF16 ? fp8_bf16_to_f32((uint16_t)m)
                                                            : fp8_f32_from_bits(m));
        fp8_scale_store(scales, fp8_scale_size(kind), g, fp8_int4_scale_bits(kind, s));
        for (uint64_t i = 0; i < G; i++) {
            float t;
            if (src == FP8_DTYPE_BF16) {
                uint32_t u = fp8_f32_bits(fp8_f32_from_bits((uint32_t)h[g * G + i] << 16) / s);
                t = fp8_f32_from_bits((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u);
            } else {
                t = f[g * G + i] / s;
            }
            t = t < -8.0f ? -8.0f : t > 7.0f ? 7.0f : t;
            c[i] = (uint8_t)((int)((t + 0x1.8p23f) - 0x1.8p23f) + 8);
        }
        for (uint64_t i = 0; i < G / 2; i++)
            q[i] = (uint8_t)(c[2 * i] | c[2 * i + 1] << 4);
    }
    return true;
}

/* An INT4 band (int4_ref.h): the fast loop on bf16 and f32 with groups of
 * up to 256, else (f16, rare) and on a NaN or infinity the reference. */
static fp8_band_result int4_band(const fp8_band *b, const void *src, uint8_t *q, void *scales,
                                 uint64_t *where)
{
    uint64_t G = b->group_cols;
    if (b->src != FP8_DTYPE_F16 && G % 2 == 0 && G <= 256 &&
        int4_band_fast(b->src, src, b->rows * b->cols / G, G, b->kind, q, scales))
        return FP8_BAND_OK;
    return fp8_int4_quantize_ref(b, src, q, scales, where);
}

static const void *elem(fp8_dtype src, const void *x, uint64_t i)
{
    return (const char *)x + i * (src == FP8_DTYPE_F32 ? 4 : 2);
}

fp8_band_result fp8_band_quantize(const fp8_band *b, const void *src, uint8_t *q, void *scales,
                                  uint64_t *where)
{
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_E2M1) /* groups within rows: one run */
        return (fp8_band_result)fp4_fast_quantize_row(&b->num, b->scheme, b->src, src,
                                                      b->rows * b->cols, b->global, q, scales,
                                                      where);
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_I4)
        return int4_band(b, src, q, scales, where);
    unsigned ssize = fp8_scale_size(b->kind);
    uint64_t g = 0;
    if (b->src == FP8_DTYPE_BF16 && !b->fixed && b->group_rows == 1 &&
        b->group_cols == FP8_MX_GROUP && b->cols % FP8_MX_GROUP == 0 && ssize == 1 &&
        fp8_numerics_own(&b->num)) {
        if (quantize_mx_bf16(src, b->rows * b->cols / FP8_MX_GROUP, b->kind, q, scales))
            return FP8_BAND_OK;
        return fp8_band_quantize_ref(b, src, q, scales, where); /* says what and where */
    }
    if (b->src == FP8_DTYPE_BF16 && !b->fixed && b->group_rows > 1 &&
        b->group_cols % AMAX_LANES == 0 && b->cols % b->group_cols == 0 &&
        b->cols / b->group_cols <= BLOCK_ROW_GROUPS &&
        (!b->num.in_kind || b->kind == FP8_SCALE_F32)) { /* (its loops: an fp32 quotient) */
        if (block_rows_bf16(b, src, q, scales))
            return FP8_BAND_OK;
        return fp8_band_quantize_ref(b, src, q, scales, where); /* says what and where */
    }
    for (uint64_t r0 = 0; r0 < b->rows; r0 += b->group_rows) {
        uint64_t r1 = r0 + b->group_rows < b->rows ? r0 + b->group_rows : b->rows;
        for (uint64_t c0 = 0; c0 < b->cols; c0 += b->group_cols, g++) {
            uint64_t w = b->cols - c0 < b->group_cols ? b->cols - c0 : b->group_cols;
            uint32_t m = amax_bits(b->src, elem(b->src, src, r0 * b->cols + c0), r1 - r0, w, b->cols);
            if (m >= fp8_dtype_inf_bits(b->src))
                return fp8_band_quantize_ref(b, src, q, scales, where); /* finds the first */
            float s = b->scale;
            if (!b->fixed) {
                uint32_t bits = 0;
                if ((s = fp8_numerics_scale(&b->num, b->kind, bits_to_f32(b->src, m), &bits)) == 0)
                    return fp8_band_quantize_ref(b, src, q, scales, where);
                fp8_scale_store(scales, ssize, g, bits);
            }
            quantize_tile(b, elem(b->src, src, r0 * b->cols + c0), r1 - r0, w, s,
                          q + r0 * b->cols + c0);
        }
    }
    return FP8_BAND_OK;
}

fp8_band_result fp8_amax(fp8_dtype src, const void *x, uint64_t n, float *amax, uint64_t *where)
{
    uint32_t m = amax_bits(src, x, 1, n, n);
    if (m >= fp8_dtype_inf_bits(src))
        return fp8_amax_ref(src, x, n, amax, where);
    *amax = bits_to_f32(src, m);
    return FP8_BAND_OK;
}

/* ---------------------------------------------------------------- dequantize */

/* E4M3 (not NaN) to fp32 without branches, in integers only (a
 * floating-point operation under a condition keeps GCC from vectorizing):
 * normal codes rebias; a subnormal m * 2^-9 becomes normal with m's leading
 * bit, at p, as the implicit one. */
static inline float e4m3_decode(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80) << 24, e = (b >> 3) & 15, m = b & 7;
    uint32_t normal = (e + 120) << 23 | m << 20;
    uint32_t p = (m >= 2) + (m >= 4);
    uint32_t sub = m ? (118 + p) << 23 | ((m << (23 - p)) & 0x7FFFFF) : 0;
    return fp8_f32_from_bits(sign | (e ? normal : sub));
}

/*
 * fp32 to f16 without branches; equal to fp8_f32_to_f16 for every input that
 * is not NaN (a product of a code that is not NaN and a finite scale never
 * is).  Normal results rebias and round the bits to nearest even, and
 * 65520 and beyond round up to infinity's bits by themselves; below 2^-14,
 * adding 0.5 makes the FPU round |x| to a multiple of 2^-24 (the ulp of
 * 0.5), to nearest even, which is exactly the f16 subnormal grid.
 */
static inline uint16_t f16_branchless(float x)
{
    uint32_t u = fp8_f32_bits(x), a = u & 0x7FFFFFFF;
    uint32_t normal = (a - 0x38000000 + 0xFFF + ((a >> 13) & 1)) >> 13;
    uint32_t sub = fp8_f32_bits(fp8_f32_from_bits(a) + 0.5f) - 0x3F000000;
    uint32_t r = a >= 0x38800000 ? normal : sub;
    r = a >= 0x47800000 ? 0x7C00 : r;
    return (uint16_t)(r | ((u >> 16) & 0x8000));
}


/* One element of the fused loops, per output dtype: its value in *y, and 1
 * when its code is NaN or its value infinite (the reference then says
 * which).  A NaN code decodes to a finite value here (480), so no test
 * comes before the product. */
static inline unsigned deq_bf16(uint8_t q, float s, uint16_t *y)
{
    uint32_t u = fp8_f32_bits(e4m3_decode(q) * s);
    *y = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
    return ((q & 0x7F) == 0x7F) | ((*y & 0x7F80) == 0x7F80);
}

static inline unsigned deq_f16(uint8_t q, float s, uint16_t *y)
{
    *y = f16_branchless(e4m3_decode(q) * s);
    return ((q & 0x7F) == 0x7F) | ((*y & 0x7C00) == 0x7C00);
}

static inline unsigned deq_f32(uint8_t q, float s, float *y)
{
    *y = e4m3_decode(q) * s;
    return ((q & 0x7F) == 0x7F) | ((fp8_f32_bits(*y) & 0x7F800000) == 0x7F800000);
}

/* The groups of a row segment.  GCC (12) at -O2 vectorizes only loops whose
 * trip count is a multiple of the vector width; these loops ask for its
 * usual cost model, which vectorizes them with a scalar tail. */
#if defined(__GNUC__) && !defined(__clang__)
#define DEQ_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define DEQ_VECTORIZE
#endif
#define DEQ_GROUPS(one)                                                                           \
    unsigned bad = 0;                                                                             \
    for (uint64_t c0 = 0, g = 0; c0 < n; c0 += group, g++) {                                      \
        uint64_t c1 = n - c0 < group ? n : c0 + group;                                            \
        float sg = s[g];                                                                          \
        for (uint64_t i = c0; i < c1; i++)                                                        \
            bad |= one(q[i], sg, &y[i]);                                                          \
    }                                                                                             \
    return bad

DEQ_VECTORIZE FP8_CLONES static unsigned dequant_bf16(const uint8_t *restrict q, uint64_t n,
                                        const float *restrict s, uint64_t group,
                                        uint16_t *restrict y)
{
    DEQ_GROUPS(deq_bf16);
}

DEQ_VECTORIZE FP8_CLONES static unsigned dequant_f16(const uint8_t *restrict q, uint64_t n,
                                       const float *restrict s, uint64_t group,
                                       uint16_t *restrict y)
{
    DEQ_GROUPS(deq_f16);
}

DEQ_VECTORIZE FP8_CLONES static unsigned dequant_f32(const uint8_t *restrict q, uint64_t n,
                                       const float *restrict s, uint64_t group,
                                       float *restrict y)
{
    DEQ_GROUPS(deq_f32);
}

DEQ_VECTORIZE FP8_CLONES static void dequant_span(const uint8_t *restrict q, uint64_t n, float s,
                                    float *restrict y)
{
    for (uint64_t i = 0; i < n; i++)
        y[i] = e4m3_decode(q[i]) * s;
}

void fp8_dequant_span(const uint8_t *q, uint64_t n, float s, float *y) { dequant_span(q, n, s, y); }

static unsigned dequant_clones(const uint8_t *q, uint64_t n, const float *s, uint64_t group,
                               fp8_dtype out, void *y)
{
    return out == FP8_DTYPE_BF16  ? dequant_bf16(q, n, s, group, y)
           : out == FP8_DTYPE_F16 ? dequant_f16(q, n, s, group, y)
                                  : dequant_f32(q, n, s, group, y);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FP8_NO_CLONES)
#define FP8_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/*
 * The explicit AVX-512 path, 16 codes at a time (vcvtph2ps and vcvtps2ph on
 * 512 bits are AVX-512F's own).  An E4M3 code is an f16
 * with its exponent 8 lower (the same 3 mantissa bits, subnormals included),
 * so vcvtph2ps decodes it exactly as decode(q) / 256; times 256 s, which is
 * exact while 256 s is finite, that is decode(q) * s rounded once.
 *
 * vcvtps2ph (nearest even) equals fp8_f32_to_f16 on every fp32 that is not
 * NaN: checked over all 2^32 inputs on a Zen 4.  vcvtneps2bf16 does not: it
 * ignores MXCSR and treats fp32 subnormal inputs as zero (Intel SDM), so
 * every subnormal gives +-0 where the rounding of fp8_f32_to_bf16 keeps a
 * bf16 subnormal (all 2^32 inputs checked: the subnormals are its only
 * difference; NaN is quieted alike).  A product is an fp32 subnormal only
 * when its scale is below 2^-117 (the smallest nonzero code is 2^-9), so
 * such groups, and those with 256 s infinite, take the branch-free loop.
 * tests/check_quantize.c compares this path with the reference on every
 * code against every kind of scale.
 */
static bool cpu_has_avx512bf16(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

FP8_AVX512BF16 static unsigned dequant_avx512bf16(const uint8_t *q, uint64_t n, const float *s,
                                                  uint64_t group, fp8_dtype out, void *y)
{
    const __m256i low7 = _mm256_set1_epi16(0x7F), sign = _mm256_set1_epi16(0x80);
    const __m256i mag16 = _mm256_set1_epi16(0x7FFF);
    const __m512i mag32 = _mm512_set1_epi32(0x7FFFFFFF);
    __m256i codes = _mm256_setzero_si256(), outs = _mm256_setzero_si256();
    __m512i outs32 = _mm512_setzero_si512();
    unsigned bad = 0;
    float lo = out == FP8_DTYPE_BF16 ? 0x1p-117f : 0;
    for (uint64_t c0 = 0, g = 0; c0 < n; c0 += group, g++) {
        uint64_t w = n - c0 < group ? n - c0 : group;
        float sg = s[g];
        if (!(sg >= lo && sg < 0x1p120f)) {
            bad |= dequant_clones(q + c0, w, &sg, w, out, (char *)y + c0 * (out == FP8_DTYPE_F32 ? 4 : 2));
            continue;
        }
        __m512 m = _mm512_set1_ps(sg * 256.0f);
        for (uint64_t i = c0; i < c0 + w; i += 16) {
            __mmask16 k = c0 + w - i >= 16 ? 0xFFFF : (__mmask16)((1u << (c0 + w - i)) - 1);
            __m256i b = _mm256_cvtepu8_epi16(_mm_maskz_loadu_epi8(k, q + i));
            __m256i m7 = _mm256_and_si256(b, low7);
            __m256i h = _mm256_or_si256(_mm256_slli_epi16(m7, 7),
                                        _mm256_slli_epi16(_mm256_and_si256(b, sign), 8));
            codes = _mm256_max_epu16(codes, m7);
            __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(h), m);
            if (out == FP8_DTYPE_F32) {
                outs32 = _mm512_max_epu32(outs32, _mm512_and_si512(_mm512_castps_si512(v), mag32));
                _mm512_mask_storeu_ps((float *)y + i, k, v);
                continue;
            }
            __m256i r = out == FP8_DTYPE_BF16
                            ? (__m256i)_mm512_cvtneps_pbh(v)
                            : _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            outs = _mm256_max_epu16(outs, _mm256_and_si256(r, mag16));
            _mm256_mask_storeu_epi16((uint16_t *)y + i, k, r);
        }
    }
    /* the largest magnitudes: a NaN code is 0x7F, an infinity all exponent bits */
    uint16_t c[16], o[16];
    uint32_t o32[16];
    _mm256_storeu_si256((__m256i *)(void *)c, codes);
    _mm256_storeu_si256((__m256i *)(void *)o, outs);
    _mm512_storeu_si512(o32, outs32);
    uint16_t inf = out == FP8_DTYPE_BF16 ? 0x7F80 : 0x7C00;
    for (int i = 0; i < 16; i++)
        bad |= (c[i] == 0x7F) | (o[i] >= inf) | (o32[i] >= 0x7F800000);
    return bad;
}
#else
static bool cpu_has_avx512bf16(void) { return false; }
static unsigned dequant_avx512bf16(const uint8_t *q, uint64_t n, const float *s, uint64_t group,
                                   fp8_dtype out, void *y)
{
    return dequant_clones(q, n, s, group, out, y);
}
#endif

bool fp8_dequant_path_runs(fp8_deq_path path)
{
    return path == FP8_DEQ_PATH_CLONES || (path == FP8_DEQ_PATH_AVX512BF16 && cpu_has_avx512bf16());
}

const char *fp8_dequant_path_name(fp8_deq_path path)
{
    return path == FP8_DEQ_PATH_AVX512BF16 ? "avx512bf16" : "clones";
}

/* A path that does not run here falls back to the clones. */
fp8_deq_result fp8_dequant_row_on(fp8_deq_path path, const uint8_t *q, uint64_t n,
                                  const float *s, uint64_t group, fp8_dtype out, void *y,
                                  uint64_t *where)
{
    unsigned bad = path == FP8_DEQ_PATH_AVX512BF16 && cpu_has_avx512bf16()
                       ? dequant_avx512bf16(q, n, s, group, out, y)
                       : dequant_clones(q, n, s, group, out, y);
    return bad ? fp8_dequant_row_ref(q, n, s, group, out, y, where) : FP8_DEQ_OK;
}

fp8_deq_result fp8_dequant_row(const uint8_t *q, uint64_t n, const float *s, uint64_t group,
                               fp8_dtype out, void *y, uint64_t *where)
{
    return fp8_dequant_row_on(FP8_DEQ_PATH_AVX512BF16, q, n, s, group, out, y, where);
}

bool fp8_dequant_init(fp8_dequant_spec *d)
{
    d->scale_size = fp8_dequant_scale_size(d->scheme);
    d->table = d->scale_size == 1 ? malloc(sizeof *d->table) : NULL;
    d->fast = d->table ? malloc(sizeof(fp4_fast)) : NULL;
    if (!d->fast) {
        fp8_dequant_free(d);
        return d->scale_size == 4;
    }
    fp4_table_init(d->table, d);
    if (d->keep_inf)
        memset(d->table->inf, 0, sizeof d->table->inf);
    fp4_fast_init(d->fast, d->table);
    return true;
}

fp8_deq_result fp8_dequant_judge(const fp8_dequant_spec *d, const void *scale, uint8_t most)
{
    if (d->table) {
        uint8_t b = *(const uint8_t *)scale;
        return d->table->nan_scale[b]      ? FP8_DEQ_NAN_SCALE
               : d->table->inf[b][most & 15] ? FP8_DEQ_OVERFLOW
                                             : FP8_DEQ_OK;
    }
    float s, y;
    memcpy(&s, scale, 4);
    if (!(s > 0 && s <= 3.4028234663852886e38f))
        return FP8_DEQ_NAN_SCALE;
    return fp8_store_out(d->out, &y, 0, fp8_elem_get(d->scheme->elem)->decode(most) * s)
               ? FP8_DEQ_OVERFLOW
               : FP8_DEQ_OK;
}

void fp8_dequant_free(fp8_dequant_spec *d)
{
    free(d->table);
    free(d->fast);
    d->table = d->fast = NULL;
}

fp8_deq_result fp8_dequant(const fp8_dequant_spec *d, const uint8_t *codes, const void *scales,
                           uint64_t n, void *y, uint64_t *where)
{
    if (d->scheme->elem == FP8_ELEM_I4) { /* int4_ref.h's codec, fp32 scales */
        fp8_int4_deq_result r = fp8_int4_dequant_row(codes, scales, FP8_DTYPE_F32, n, d->group,
                                                     d->out, y, where);
        return r == FP8_INT4_DEQ_BAD_SCALE             ? FP8_DEQ_NAN_SCALE
               : r == FP8_INT4_DEQ_OK || d->keep_inf ? FP8_DEQ_OK
                                                     : FP8_DEQ_OVERFLOW;
    }
    if (d->table)
        return fp4_fast_row(d->fast, codes, scales, n, y, where) == FP4_DEQ_OK
                   ? FP8_DEQ_OK
                   : fp8_dequant_ref(d, codes, scales, n, y, where);
    fp8_deq_result r = fp8_dequant_row(codes, n, scales, d->group, d->out, y, where);
    return r == FP8_DEQ_OVERFLOW && d->keep_inf ? fp8_dequant_ref(d, codes, scales, n, y, where)
                                                : r;
}

bool fp8_dequant_cols(const fp8_dequant_spec *d, const uint8_t *codes, uint64_t ld_codes,
                      const void *scales, uint64_t ld_scales, uint64_t nr, uint64_t n, void *y,
                      uint64_t ld_out)
{
    return d->table && fp4_fast_cols(d->fast, codes, ld_codes, scales, ld_scales, nr, n, y, ld_out);
}

/* ---------------------------------------------------------------- verify */

FP8_CLONES static void code_stats(const uint8_t *q, uint64_t n, fp8_code_stats *st)
{
    uint8_t any = 0, nan = 0, most = 0;
    uint64_t sat = 0;
    for (uint64_t i = 0; i < n; i += 1u << 30) {
        uint32_t k = n - i < 1u << 30 ? (uint32_t)(n - i) : 1u << 30, count = 0;
        for (uint32_t j = 0; j < k; j++) { /* one loop, one reduction each (verify calls it per group) */
            uint8_t m = q[i + j] & 0x7F, is_nan = (uint8_t)-(m == 0x7F);
            any |= m;
            nan |= is_nan;
            count += m == 0x7E;
            m &= (uint8_t)~is_nan;
            most = m > most ? m : most;
        }
        sat += count;
    }
    st->nonzero = any != 0;
    st->nan = nan != 0;
    st->saturated = sat;
    st->most = most;
}

void fp8_code_stats_span(const uint8_t *q, uint64_t n, fp8_code_stats *st) { code_stats(q, n, st); }

/* ---------------------------------------------------------------- verify's scans */


void fp8_nibble_rule_init(fp8_nibble_rule *r, const fp8_elem_traits *e)
{
    bool zero[16];
    unsigned ntop = 0, zbits = 0;
    r->top[0] = r->top[1] = r->top[2] = 0xFF;
    for (unsigned c = 0; c < 16; c++) {
        float x = e->decode((uint8_t)c);
        if ((x == e->max_finite || x == -e->max_finite ||
             (e->most_negative != 0 && x == e->most_negative)) && ntop < 3)
            r->top[ntop++] = (uint8_t)c;
        zero[c] = x == 0;
        zbits |= zero[c] ? c : 0;
    }
    unsigned mask = 0xF & ~zbits;
    r->by_word = true;
    for (unsigned b = 0; b < 256; b++) {
        r->zero[b] = zero[b & 0xF] & zero[b >> 4];
        r->by_word &= r->zero[b] == ((b & (mask | mask << 4)) == 0);
    }
    r->zero_word = 0;
    for (int k = 0; k < 16; k++)
        r->zero_word |= (uint64_t)mask << (4 * k);
}

/* Branch-free byte loops, vectorized: the top codes compared (counted in
 * 32 bits a span), a group's 8-byte words ANDed with the nonzero bits. */
FP8_CLONES static void nibble_stats(const fp8_nibble_rule *r, const uint8_t *p, uint64_t n,
                                    uint64_t per, uint64_t *top, uint64_t *zero_groups)
{
    uint8_t t0 = r->top[0], t1 = r->top[1], t2 = r->top[2];
    for (uint64_t i = 0; i < n; i += 1u << 16) {
        uint32_t m = n - i < 1u << 16 ? (uint32_t)(n - i) : 1u << 16, count = 0;
        for (uint32_t k = 0; k < m; k++) {
            uint8_t lo = p[i + k] & 15, hi = p[i + k] >> 4;
            count += (uint32_t)((lo == t0) + (lo == t1) + (lo == t2) + (hi == t0) + (hi == t1) +
                                (hi == t2));
        }
        *top += count;
    }
    uint64_t zeros = 0;
    for (uint64_t g = 0; g + per <= n; g += per) {
        uint64_t any = 0;
        if (r->by_word && per % 8 == 0)
            for (uint64_t k = 0; k < per; k += 8) {
                uint64_t w;
                memcpy(&w, p + g + k, 8);
                any |= w & r->zero_word;
            }
        else
            for (uint64_t k = 0; k < per; k++)
                any |= !r->zero[p[g + k]];
        zeros += any == 0;
    }
    *zero_groups += zeros;
}

void fp8_nibble_stats(const fp8_nibble_rule *r, const uint8_t *p, uint64_t n, uint64_t per,
                      uint64_t *top, uint64_t *zero_groups)
{
    nibble_stats(r, p, n, per, top, zero_groups);
}

/* Spans of 256 tested branch-free (vectorized), the one that has a NaN
 * code searched. */
FP8_CLONES static uint64_t nan_code_at(const uint8_t *q, uint64_t n)
{
    for (uint64_t i = 0; i < n; i += 256) {
        unsigned m = n - i < 256 ? (unsigned)(n - i) : 256;
        uint8_t nan = 0;
        for (unsigned k = 0; k < m; k++)
            nan |= (uint8_t)-((q[i + k] & 0x7F) == 0x7F);
        for (unsigned k = 0; nan && k < m; k++)
            if ((q[i + k] & 0x7F) == 0x7F)
                return i + k;
    }
    return n;
}

uint64_t fp8_nan_code_at(const uint8_t *q, uint64_t n) { return nan_code_at(q, n); }

/* An 8 x 8 block of 2-byte elements transposed in three rounds of
 * interleaving: pairs of elements, of words, of double words (SSE2's
 * unpacklo/hi, NEON's zip1/2; GCC 12 and clang write them from
 * __builtin_shufflevector). */
typedef uint16_t u16x8 __attribute__((vector_size(16)));
typedef uint32_t u32x4 __attribute__((vector_size(16)));
typedef uint64_t u64x2 __attribute__((vector_size(16)));

static void transpose8(const uint16_t *src, uint64_t ss, uint16_t *dst, uint64_t ds)
{
    u16x8 r[8], a[8];
    u32x4 b[8];
    for (int i = 0; i < 8; i++)
        memcpy(&r[i], src + i * ss, sizeof r[i]);
    for (int i = 0; i < 8; i += 2) {
        a[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 2, 10, 3, 11);
        a[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 4, 12, 5, 13, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; h++) {
            u32x4 x = (u32x4)a[i + h], y = (u32x4)a[i + h + 2];
            b[i + 2 * h] = __builtin_shufflevector(x, y, 0, 4, 1, 5);
            b[i + 2 * h + 1] = __builtin_shufflevector(x, y, 2, 6, 3, 7);
        }
    for (int i = 0; i < 4; i++) {
        u64x2 x = (u64x2)b[i], y = (u64x2)b[i + 4];
        u64x2 lo = __builtin_shufflevector(x, y, 0, 2), hi = __builtin_shufflevector(x, y, 1, 3);
        memcpy(dst + 2 * i * ds, &lo, sizeof lo);
        memcpy(dst + (2 * i + 1) * ds, &hi, sizeof hi);
    }
}

void fp8_transpose(unsigned size, const void *src, uint64_t src_stride, uint64_t m, uint64_t n,
                   void *dst, uint64_t dst_stride)
{
    uint64_t n8 = size == 2 ? n & ~(uint64_t)7 : 0, m8 = size == 2 ? m & ~(uint64_t)7 : 0;
    for (uint64_t k = 0; k < n8; k += 8)
        for (uint64_t c = 0; c < m8; c += 8)
            transpose8((const uint16_t *)src + c * src_stride + k, src_stride,
                       (uint16_t *)dst + k * dst_stride + c, dst_stride);
    /* the rest an element at a time: the rows below the blocks, the columns beside */
    for (uint64_t k = 0; k < n; k++)
        for (uint64_t c = k < n8 ? m8 : 0; c < m; c++)
            if (size == 2)
                ((uint16_t *)dst)[k * dst_stride + c] = ((const uint16_t *)src)[c * src_stride + k];
            else
                ((uint32_t *)dst)[k * dst_stride + c] = ((const uint32_t *)src)[c * src_stride + k];
}

/*
 * Whether fp32 cannot tell that an element is inside its bound and not
 * clipped.  It can when |x| is finite and at most 464 s, and |x - y| <=
 * max(|x|/16, s/1024) (1 + 2^-21) in fp32, that bound at least 2^-100: each
 * fp32 operation is then within 2^-24 of the exact one (the bound's terms
 * are exact, or the smaller), which keeps the whole inside bound_test's
 * 1e-6 margin.  E4M3 rounds within 1/17 of |x| (or s/1024, for subnormal
 * codes) and saturates from 464 s, so in a checkpoint that passes, fp32 is
 * unsure of next to no element.
 */
static inline __attribute__((always_inline)) unsigned bound_unsure(float xf, float yf, float sf)
{
    float ax = fabsf(xf), d = fabsf(xf - yf), b = ax / 16, t = sf / 1024;
    b = b > t ? b : t;
    unsigned sure = (ax <= 464.0f * sf) & (ax <= 3.4028234663852886e38f) &
                    (d <= b * (1 + 0x1p-21f)) & (b >= 0x1p-100f);
    return sure ^ 1;
}

/* E4M3 code b as fp32, branch-free (so that loops over codes vectorize):
 * fp8_e4m3_to_f32's value, NaN included. */
static inline __attribute__((always_inline)) float e4m3_value(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80) << 24, e = (b >> 3) & 15, m = b & 7;
    uint32_t normal = sign | (e + 120) << 23 | m << 20;
    uint32_t sub = sign | fp8_f32_bits((float)m * 0x1p-9f);
    uint32_t subnormal = -(uint32_t)(e == 0), nan = -(uint32_t)((b & 0x7F) == 0x7F);
    uint32_t bits = (normal & ~subnormal) | (sub & subnormal);
    return fp8_f32_from_bits((bits & ~nan) | (0x7FC00000u & nan));
}

/* The value an element dequantizes to: one fp32 multiplication, as in
 * fp8_dequant_span. */
#define BOUND_Y(q, y, s, i) ((q) ? e4m3_value((q)[i]) * (s)[i] : (y)[i])

/* The fast bound: spans of 256 in fp32, branch-free so that the compiler
 * vectorizes them; the elements fp32 is unsure of in double, as the
 * reference.  Each dtype and source of y gets its own loops. */
static inline __attribute__((always_inline)) void bound_loop(fp8_dtype dt, const void *x,
                                                             const uint8_t *q, const float *y,
                                                             const float *s, uint64_t n,
                                                             uint64_t counts[2], diff_lanes *sums)
{
    uint32_t c = 0, b = 0; /* n < 2^32: a band */
    for (uint64_t i = 0; i < n; i += 256) {
        unsigned m = n - i < 256 ? (unsigned)(n - i) : 256, any = 0;
        uint8_t unsure[256];
        float xf[256], yf[256];
        for (unsigned k = 0; k < m; k++) {
            xf[k] = fp8_load_f32(dt, x, i + k);
            yf[k] = BOUND_Y(q, y, s, i + k);
            unsure[k] = (uint8_t)bound_unsure(xf[k], yf[k], s[i + k]);
            any |= unsure[k];
        }
        if (sums) /* lanes in element order: the spans start at multiples of 256 */
            lanes_sums_f32(xf, yf, m, sums);
        for (unsigned k = 0; any && k < m; k++) {
            if (!unsure[k])
                continue;
            unsigned r = fp8_bound_test(fp8_load_f32(dt, x, i + k), BOUND_Y(q, y, s, i + k), s[i + k]);
            c += r & 1;
            b += r >> 1;
        }
    }
    counts[0] += c;
    counts[1] += b;
}

FP8_CLONES static void bound_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                                  const float *s, uint64_t n, uint64_t counts[2])
{
    if (q && dt == FP8_DTYPE_BF16)
        bound_loop(FP8_DTYPE_BF16, x, q, NULL, s, n, counts, NULL);
    else if (q && dt == FP8_DTYPE_F16)
        bound_loop(FP8_DTYPE_F16, x, q, NULL, s, n, counts, NULL);
    else if (q)
        bound_loop(FP8_DTYPE_F32, x, q, NULL, s, n, counts, NULL);
    else if (dt == FP8_DTYPE_BF16)
        bound_loop(FP8_DTYPE_BF16, x, NULL, y, s, n, counts, NULL);
    else if (dt == FP8_DTYPE_F16)
        bound_loop(FP8_DTYPE_F16, x, NULL, y, s, n, counts, NULL);
    else
        bound_loop(FP8_DTYPE_F32, x, NULL, y, s, n, counts, NULL);
}

/* The same over codes, with the quality sums of the values decoded (a
 * second pass over them cost verify --against a fifth of its time). */
FP8_CLONES static void bound_sums_span(fp8_dtype dt, const void *x, const uint8_t *q,
                                       const float *s, uint64_t n, uint64_t counts[2],
                                       diff_lanes *sums)
{
    if (!q || !sums) /* never: known here, so that BOUND_Y's test goes */
        return;
    if (dt == FP8_DTYPE_BF16)
        bound_loop(FP8_DTYPE_BF16, x, q, NULL, s, n, counts, sums);
    else if (dt == FP8_DTYPE_F16)
        bound_loop(FP8_DTYPE_F16, x, q, NULL, s, n, counts, sums);
    else
        bound_loop(FP8_DTYPE_F32, x, q, NULL, s, n, counts, sums);
}

void fp8_bound_sums_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *s,
                         uint64_t n, uint64_t counts[2], diff_lanes *sums)
{
    bound_sums_span(dt, x, q, s, n, counts, sums);
}

void fp8_bound_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                    const float *s, uint64_t n, uint64_t counts[2])
{
    bound_span(dt, x, q, y, s, n, counts);
}
