/*
 * fp4_cpu.c - the fast path of the packed-FP4 decode (fp4_cpu.h).
 */
#include <string.h>

#include "common/fp4_math.h"
#include "compute/fp4_cpu.h"
#include "compute/quant_cpu.h"

void fp4_fast_init(fp4_fast *f, const fp4_table *t)
{
    f->t = t;
    for (unsigned b = 0; b < 256; b++) {
        bool clean = !t->nan_scale[b];
        for (unsigned c = 0; c < 16; c++) {
            f->v16[b][c] = (uint16_t)t->value[b][c];
            clean = clean && !t->inf[b][c];
        }
        f->clean[b] = clean;
    }
}

fp4_deq_result fp4_fast_row(const fp4_fast *f, const uint8_t *packed, const uint8_t *scales,
                            uint64_t n, void *y, uint64_t *where)
{
    const fp4_table *t = f->t;
    uint64_t groups = n / t->group, half = t->group / 2;
    for (uint64_t g = 0; g < groups; g++)
        if (!f->clean[scales[g]])
            return fp4_dequant_row(packed, scales, n, t, y, 1, where);
    for (uint64_t g = 0; g < groups; g++) {
        const uint8_t *p = packed + g * half;
        if (t->out == FP8_DTYPE_F32) {
            const uint32_t *v = t->value[scales[g]];
            uint32_t *og = (uint32_t *)y + g * t->group;
            for (uint64_t k = 0; k < half; k++) {
                og[2 * k] = v[p[k] & 15];
                og[2 * k + 1] = v[p[k] >> 4];
            }
            continue;
        }
        const uint16_t *v = f->v16[scales[g]];
        uint16_t *og = (uint16_t *)y + g * t->group;
        for (uint64_t k = 0; k < half; k++) {
            og[2 * k] = v[p[k] & 15];
            og[2 * k + 1] = v[p[k] >> 4];
        }
    }
    return FP4_DEQ_OK;
}

bool fp4_fast_cols(const fp4_fast *f, const uint8_t *packed, uint64_t ld_codes,
                   const uint8_t *scales, uint64_t ld_scales, uint64_t nr, uint64_t n, void *y,
                   uint64_t ld_out)
{
    const fp4_table *t = f->t;
    uint64_t groups = n / t->group, half = t->group / 2;
    for (uint64_t r = 0; r < nr; r++)
        for (uint64_t g = 0; g < groups; g++)
            if (!f->clean[scales[r * ld_scales + g]])
                return false;
    enum { TR = 32 };
    for (uint64_t r0 = 0; r0 < nr; r0 += TR) {
        uint64_t m = nr - r0 < TR ? nr - r0 : TR;
        for (uint64_t g = 0; g < groups; g++) {
            const uint8_t *p = packed + r0 * ld_codes + g * half;
            const uint8_t *s = scales + r0 * ld_scales + g;
            uint64_t c0 = g * t->group;
            if (t->out == FP8_DTYPE_F32) {
                const uint32_t *v[TR];
                for (uint64_t r = 0; r < m; r++)
                    v[r] = t->value[s[r * ld_scales]];
                uint32_t *o = (uint32_t *)y + c0 * ld_out + r0;
                for (uint64_t k = 0; k < half; k++, o += 2 * ld_out)
                    for (uint64_t r = 0; r < m; r++) {
                        unsigned b = p[r * ld_codes + k];
                        o[r] = v[r][b & 15];
                        o[ld_out + r] = v[r][b >> 4];
                    }
            } else {
                const uint16_t *v[TR];
                for (uint64_t r = 0; r < m; r++)
                    v[r] = f->v16[s[r * ld_scales]];
                uint16_t *o = (uint16_t *)y + c0 * ld_out + r0;
                for (uint64_t k = 0; k < half; k++, o += 2 * ld_out) {
                    const uint8_t *pk = p + k;
                    uint64_t r = 0;
                    for (; r + 2 <= m; r += 2) { /* two rows: a value pair a column */
                        unsigned b0 = pk[r * ld_codes], b1 = pk[(r + 1) * ld_codes];
                        uint16_t lo[2] = { v[r][b0 & 15], v[r + 1][b1 & 15] };
                        uint16_t hi[2] = { v[r][b0 >> 4], v[r + 1][b1 >> 4] };
                        memcpy(o + r, lo, 4);
                        memcpy(o + ld_out + r, hi, 4);
                    }
                    for (; r < m; r++) {
                        unsigned b = pk[r * ld_codes];
                        o[r] = v[r][b & 15];
                        o[ld_out + r] = v[r][b >> 4];
                    }
                }
            }
        }
    }
    return true;
}

/* ---------------------------------------------------------------- quantization */

/*
 * Two rules let the fast paths skip steps of the reference (fp4_math.h)
 * without changing a byte:
 *
 * MXFP4 multiplies by 1/d where the reference divides by d.  d is
 * 2^(b - 127) for the scale byte b, and 1/d = 2^(127 - b) is an fp32 for
 * every b in [0, 254]: a normal one down to 2^-126 (b <= 253), and 2^-127,
 * a subnormal, at b = 254 (fp4_mx_byte gives at most 252: 254 is E8M0's
 * largest exponent, and it subtracts 2).  x / d and x * (1/d) are then the
 * same real number, and IEEE rounds each correctly, once, to the same fp32
 * (subnormal results included: FTZ and DAZ are off).
 * tests/check_fp4_quant.c test_mx_reciprocal_is_exact checks every bf16
 * and many fp32 values against every byte.
 *
 * MXFP4 from bf16 rounds the quotient v = x / d to bf16 before its code
 * (fp4_quotient).  v is x times a power of two, exactly x's 8 significant
 * bits, except where it falls below 2^-126, in fp32's and bf16's
 * subnormals: so rounding changes no v that reaches a threshold (0.25 and
 * up), and where it does round (below 2^-126, code 0 either way) it
 * decides only the sign bit, which the reference takes from v < 0 after
 * rounding.  bf16's subnormals are multiples of 2^-133, so a v of at most
 * 2^-134 in magnitude rounds to a zero (2^-134 itself a tie, to the even
 * zero) and anything larger to a nonzero bf16: the sign bit is v <
 * -2^-134 on the unrounded fp32 v.  NVFP4 and fp32 sources keep v < 0.
 */
#define NEG_LIMIT(nv, src) (!(nv) && (src) == FP8_DTYPE_BF16 ? -0x1p-134f : 0.0f)

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));
typedef uint8_t v8b __attribute__((vector_size(8)));

/* Elements i..i+7 as fp32 into v (macros, not functions: a 32-byte vector
 * argument or result would change the ABI between the clones). */
#define LOAD8(v, src, x, i)                                                        \
    do {                                                                           \
        if ((src) == FP8_DTYPE_BF16) {                                             \
            v8h h_;                                                                \
            memcpy(&h_, (const uint16_t *)(x) + (i), sizeof h_);                   \
            (v) = (v8f)(__builtin_convertvector(h_, v8u) << 16);                   \
        } else {                                                                   \
            memcpy(&(v), (const float *)(x) + (i), sizeof(v));                     \
        }                                                                          \
    } while (0)
#define ABS8(v) ((v8f)((v8i)(v) & 0x7FFFFFFF))
#define MAX8(a, b) ((v8f)(((v8i)(a) & ((a) > (b))) | ((v8i)(b) & ~((a) > (b)))))
/* lanes of a and b (0-7: a's, 8-15: b's), in GCC's and clang's spelling */
#if defined(__clang__)
#define SHUF(a, b, ...) __builtin_shufflevector((a), (b), __VA_ARGS__)
#else
#define SHUF(a, b, ...) __builtin_shuffle((a), (b), (v8i){ __VA_ARGS__ })
#endif

/*
 * Groups g0..g0+7 of a row, each `run` elements: 8 scales at once, then the
 * elements 8 at a time.  The scales by the reference's steps in vector form
 * (fp4_math.h fp4_nv_scale, fp4_mx_byte): m / 6 in fp32, to bf16 by nearest
 * even (an fp32 that is finite and positive: the carry of the rounding bit
 * into the kept bits), times the global, at most 448, to E4M3 by nearest
 * even (normal: 3 mantissa bits kept the same way; below 2^-6: the sum with
 * 2^14, whose fp32 ulp is E4M3's subnormal 2^-9), zero to 0.125; MXFP4's
 * exponent byte from m's bits plus the rounding carry, and its reciprocal
 * 2^(127 - byte) (above).  False where the reference must take the row: a
 * NaN or infinity, an E8M0 overflow.
 */
#define EIGHT_GROUPS(run)                                                                    \
    do {                                                                                     \
        v8f m[8], v;                                                                         \
        v8i ok = (v8i){ 0 } == 0;                                                            \
        for (int j = 0; j < 8; j++) {                                                        \
            m[j] = (v8f){ 0 };                                                               \
            for (uint64_t i = (g0 + j) * (run); i < (g0 + j + 1) * (run); i += 8) {          \
                LOAD8(v, src, x, i);                                                         \
                v8f a = ABS8(v);                                                             \
                ok &= a <= 3.4028234663852886e38f;                                           \
                m[j] = MAX8(a, m[j]);                                                        \
            }                                                                                \
        }                                                                                    \
        for (int k = 0; k < 8; k++)                                                          \
            if (!ok[k])                                                                      \
                return false;                                                                \
        v8f p[4], q[2], lo, hi, M;                                                           \
        for (int j = 0; j < 4; j++) {                                                        \
            lo = SHUF(m[2 * j], m[2 * j + 1], 0, 8, 2, 10, 4, 12, 6, 14);                     \
            hi = SHUF(m[2 * j], m[2 * j + 1], 1, 9, 3, 11, 5, 13, 7, 15);                     \
            p[j] = MAX8(lo, hi);                                                             \
        }                                                                                    \
        for (int j = 0; j < 2; j++) {                                                        \
            lo = SHUF(p[2 * j], p[2 * j + 1], 0, 1, 8, 9, 4, 5, 12, 13);                      \
            hi = SHUF(p[2 * j], p[2 * j + 1], 2, 3, 10, 11, 6, 7, 14, 15);                    \
            q[j] = MAX8(lo, hi);                                                             \
        }                                                                                    \
        lo = SHUF(q[0], q[1], 0, 1, 2, 3, 8, 9, 10, 11);                                     \
        hi = SHUF(q[0], q[1], 4, 5, 6, 7, 12, 13, 14, 15);                                   \
        M = MAX8(lo, hi); /* M[j]: group g0 + j's largest magnitude */                       \
        v8f d;                                                                               \
        v8u byte;                                                                            \
        if (nv) {                                                                            \
            v8f s = M / 6.0f;                                                                \
            if (src == FP8_DTYPE_BF16) {                                                     \
                v8u u = (v8u)s;                                                              \
                s = (v8f)((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);                    \
            }                                                                                \
            s = global * s;                                                                  \
            v8i big = s > 448.0f;                                                            \
            s = (v8f)(((v8i)s & ~big) | ((v8i)((v8f){ 0 } + 448.0f) & big));                 \
            v8u u = (v8u)s;                                                                  \
            v8u nrm = (u + 0x7FFFFu + ((u >> 20) & 1u)) & 0xFFF00000u;                        \
            v8f sub = (s + 16384.0f) - 16384.0f;                                             \
            v8i normal = s >= 0x1p-6f;                                                       \
            v8f r = (v8f)(((v8i)nrm & normal) | ((v8i)sub & ~normal));                       \
            v8u bn = (((nrm >> 23) - 120u) << 3) | ((nrm >> 20) & 7u);                       \
            v8u bs = __builtin_convertvector(sub * 512.0f, v8u);                             \
            byte = (v8u)(((v8i)bn & normal) | ((v8i)bs & ~normal));                          \
            v8i zero = r == 0.0f;                                                            \
            byte = (v8u)(((v8i)byte & ~zero) | (0x20 & zero));                               \
            r = (v8f)(((v8i)r & ~zero) | ((v8i)((v8f){ 0 } + 0.125f) & zero));               \
            d = r / global;                                                                  \
        } else {                                                                             \
            v8u u = (v8u)M;                                                                  \
            /* bf16's 1 << 5 and fp32's 1 << 21 are the same bit */                          \
            v8u e = ((u + 0x200000u) & 0xFF800000u) >> 23;                                   \
            for (int k = 0; k < 8; k++)                                                      \
                if (e[k] == 255)                                                             \
                    return false;                                                            \
            byte = (v8u)((v8i)(e - 2u) & (e > 2u));                                          \
            d = (v8f)((254u - byte) << 23); /* 1 / 2^(byte - 127), byte <= 252 */            \
        }                                                                                    \
        v8b b8 = __builtin_convertvector(byte, v8b);                                         \
        memcpy(scales + g0, &b8, 8);                                                         \
        for (int j = 0; j < 8; j++)                                                          \
            for (uint64_t i = (g0 + j) * (run); i < (g0 + j + 1) * (run); i += 8)            \
                codes8(src, x, i, nv, d[j], neg, packed);                                    \
    } while (0)

/* Elements i..i+7 divided by d (NVFP4) or times MXFP4's reciprocal f, to
 * E2M1 codes (fp4_math.h fp4_e2m1_code: each threshold passed adds one; the
 * sign bit for v < neg, above), packed into packed[i / 2 ..]. */
static inline __attribute__((always_inline)) void codes8(fp8_dtype src, const void *x, uint64_t i,
                                                         bool nv, float f, float neg,
                                                         uint8_t *packed)
{
    v8f v;
    LOAD8(v, src, x, i);
    v = nv ? v / f : v * f;
    v8f a = ABS8(v);
    v8i c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
            (a >= 3.5f) + (a > 5.0f);
    c = -c | ((v < neg) & 8);
    c |= SHUF(c, c, 1, 0, 3, 2, 5, 4, 7, 6) << 4; /* lanes 0, 2, 4, 6: the bytes */
    v8b b = __builtin_convertvector(c, v8b);
    uint64_t w;
    memcpy(&w, &b, 8);
    w = (w & 0xFF) | (w >> 8 & 0xFF00) | (w >> 16 & 0xFF0000) | (w >> 24 & 0xFF000000);
    uint32_t four = (uint32_t)w;
    memcpy(packed + i / 2, &four, 4);
}

/* The row in blocks of 8 groups, the rest group by group as the reference;
 * false where the reference must take it. */
FP8_CLONES static bool quantize_row_clones(fp8_scheme scheme, fp8_dtype src, const void *x,
                                           uint64_t n, float global, uint8_t *packed,
                                           uint8_t *scales)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    uint64_t groups = n / t->run, g0 = 0;
    bool nv = t->levels == 2;
    float neg = NEG_LIMIT(nv, src);
    for (; g0 + 8 <= groups; g0 += 8) {
        if (t->run == 16)
            EIGHT_GROUPS(16);
        else
            EIGHT_GROUPS(32);
    }
    for (; g0 < groups; g0++) {
        float m = 0, d;
        for (uint64_t i = g0 * t->run; i < (g0 + 1) * t->run; i++) {
            float a = __builtin_fabsf(src == FP8_DTYPE_BF16
                                          ? fp8_bf16_to_f32(((const uint16_t *)x)[i])
                                          : ((const float *)x)[i]);
            if (!(a <= 3.4028234663852886e38f))
                return false;
            m = a > m ? a : m;
        }
        if (nv) {
            scales[g0] = fp4_nvfp4_scale(src, m, global, &d);
        } else {
            int b = fp4_mxfp4_scale(src, m, &d);
            if (b > 255)
                return false;
            scales[g0] = (uint8_t)b;
            d = fp8_pow2(127 - b);
        }
        for (uint64_t i = g0 * t->run; i < (g0 + 1) * t->run; i += 8)
            codes8(src, x, i, nv, d, neg, packed);
    }
    return true;
}

/* ---------------------------------------------------------------- quantization: AVX2 */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FP8_NO_CLONES)
#include <immintrin.h>
#define FP4_AVX2 __attribute__((target("avx2"), always_inline)) static inline

static bool cpu_has_avx2(void) { return __builtin_cpu_supports("avx2"); }

#define SET32(v) _mm256_set1_epi32((int)(v))
#define SET16(v) _mm256_set1_epi16((short)(v))
#define LOADU(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* Elements 0..7 at p (bf16 or fp32) as fp32. */
FP4_AVX2 __m256 avx2_load8(bool bf16, const void *p)
{
    if (bf16)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps((const float *)p);
}

/* Lane j: the largest of v[j]'s eight lanes (unsigned), by three rounds of
 * pairing lanes of two vectors. */
FP4_AVX2 __m256i avx2_max_of_eight(const __m256i v[8])
{
    __m256i p[4], q[2];
    for (int j = 0; j < 4; j++) /* [a0|a2 b0|b2 a1|a3 b1|b3] in each half */
        p[j] = _mm256_max_epu32(_mm256_unpacklo_epi32(v[2 * j], v[2 * j + 1]),
                                _mm256_unpackhi_epi32(v[2 * j], v[2 * j + 1]));
    for (int j = 0; j < 2; j++) /* [a b c d] of each half's four lanes */
        q[j] = _mm256_max_epu32(_mm256_unpacklo_epi64(p[2 * j], p[2 * j + 1]),
                                _mm256_unpackhi_epi64(p[2 * j], p[2 * j + 1]));
    return _mm256_max_epu32(_mm256_permute2x128_si256(q[0], q[1], 0x20),
                            _mm256_permute2x128_si256(q[0], q[1], 0x31));
}

/* Lane j: the largest magnitude of group j of eight of `run` elements at x,
 * as fp32 bits: the unsigned maximum of the bits without the sign, the
 * order of IEEE magnitudes; above FLT_MAX's bits for a NaN or infinity.
 * bf16 in 16-bit lanes: the eight groups' vectors paired by interleaving
 * words, then dwords, then qwords (each round halves the lanes a group
 * has, the groups in order), then the two 128-bit halves. */
FP4_AVX2 __m256i avx2_maxima(unsigned run, bool bf16, const void *x)
{
    __m256i acc[8];
    if (bf16) {
        const __m256i mag = SET16(0x7FFF);
#pragma GCC unroll 8
        for (unsigned j = 0; j < 8; j++) {
            const uint16_t *h = (const uint16_t *)x + j * run;
            __m256i m = _mm256_and_si256(LOADU(h), mag);
            for (unsigned i = 16; i < run; i += 16)
                m = _mm256_max_epu16(m, _mm256_and_si256(LOADU(h + i), mag));
            acc[j] = m;
        }
        __m256i a[4], b[2], c;
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            a[j] = _mm256_max_epu16(_mm256_unpacklo_epi16(acc[2 * j], acc[2 * j + 1]),
                                    _mm256_unpackhi_epi16(acc[2 * j], acc[2 * j + 1]));
#pragma GCC unroll 2
        for (int j = 0; j < 2; j++)
            b[j] = _mm256_max_epu16(_mm256_unpacklo_epi32(a[2 * j], a[2 * j + 1]),
                                    _mm256_unpackhi_epi32(a[2 * j], a[2 * j + 1]));
        c = _mm256_max_epu16(_mm256_unpacklo_epi64(b[0], b[1]), _mm256_unpackhi_epi64(b[0], b[1]));
        __m128i d = _mm_max_epu16(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
        return _mm256_slli_epi32(_mm256_cvtepu16_epi32(d), 16);
    }
#pragma GCC unroll 8
    for (unsigned j = 0; j < 8; j++) {
        const float *f = (const float *)x + j * run;
        __m256i m = _mm256_and_si256(LOADU(f), SET32(0x7FFFFFFF));
        for (unsigned i = 8; i < run; i += 8)
            m = _mm256_max_epu32(m, _mm256_and_si256(LOADU(f + i), SET32(0x7FFFFFFF)));
        acc[j] = m;
    }
    return avx2_max_of_eight(acc);
}

/*
 * The scale bytes of eight groups of largest magnitudes M (fp32 bits) into
 * *byte (32-bit lanes) and what their elements are divided by (NVFP4, *f)
 * or multiplied by (MXFP4's reciprocal), by EIGHT_GROUPS' steps.  Returns a
 * mask, nonzero where the reference must take the row: a NaN or infinity,
 * an E8M0 overflow.
 */
FP4_AVX2 __m256i avx2_scales(bool nv, bool bf16, __m256i M, float global, __m256i *byte,
                             __m256 *f)
{
    __m256i bad = _mm256_cmpgt_epi32(M, SET32(0x7F7FFFFF));
    if (!nv) {
        /* bf16's 1 << 5 and fp32's 1 << 21 are the same bit */
        __m256i e = _mm256_srli_epi32(_mm256_and_si256(_mm256_add_epi32(M, SET32(0x200000)),
                                                       SET32(0xFF800000u)), 23);
        *byte = _mm256_max_epi32(_mm256_sub_epi32(e, SET32(2)), _mm256_setzero_si256());
        *f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(SET32(254), *byte), 23));
        return _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, SET32(255)));
    }
    __m256 s = _mm256_div_ps(_mm256_castsi256_ps(M), _mm256_set1_ps(6.0f));
    if (bf16) {
        __m256i u = _mm256_castps_si256(s);
        u = _mm256_add_epi32(_mm256_add_epi32(u, SET32(0x7FFF)),
                             _mm256_and_si256(_mm256_srli_epi32(u, 16), SET32(1)));
        s = _mm256_castsi256_ps(_mm256_and_si256(u, SET32(0xFFFF0000u)));
    }
    s = _mm256_min_ps(_mm256_mul_ps(_mm256_set1_ps(global), s), _mm256_set1_ps(448.0f));
    __m256i u = _mm256_castps_si256(s);
    __m256i nrm = _mm256_add_epi32(_mm256_add_epi32(u, SET32(0x7FFFF)),
                                   _mm256_and_si256(_mm256_srli_epi32(u, 20), SET32(1)));
    nrm = _mm256_and_si256(nrm, SET32(0xFFF00000u));
    __m256 big = _mm256_set1_ps(16384.0f), sub = _mm256_sub_ps(_mm256_add_ps(s, big), big);
    __m256i normal = _mm256_castps_si256(_mm256_cmp_ps(s, _mm256_set1_ps(0x1p-6f), _CMP_GE_OQ));
    __m256i r = _mm256_blendv_epi8(_mm256_castps_si256(sub), nrm, normal);
    __m256i bn = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_sub_epi32(_mm256_srli_epi32(nrm, 23), SET32(120)), 3),
        _mm256_and_si256(_mm256_srli_epi32(nrm, 20), SET32(7)));
    __m256i bs = _mm256_cvttps_epi32(_mm256_mul_ps(sub, _mm256_set1_ps(512.0f)));
    __m256i zero = _mm256_castps_si256(
        _mm256_cmp_ps(_mm256_castsi256_ps(r), _mm256_setzero_ps(), _CMP_EQ_OQ));
    *byte = _mm256_blendv_epi8(_mm256_blendv_epi8(bs, bn, normal), SET32(0x20), zero);
    r = _mm256_blendv_epi8(r, _mm256_castps_si256(_mm256_set1_ps(0.125f)), zero);
    *f = _mm256_div_ps(_mm256_castsi256_ps(r), _mm256_set1_ps(global));
    return bad;
}

/* E2M1 codes of fp32 v as codes8 has them (each threshold passed adds one,
 * the sign bit for v < neg), one a 32-bit lane. */
FP4_AVX2 __m256i avx2_codes8(__m256 v, __m256 neg)
{
    __m256 a = _mm256_and_ps(v, _mm256_castsi256_ps(SET32(0x7FFFFFFF)));
#define PAST(t, op) _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(t), op))
    __m256i n = _mm256_add_epi32(
        _mm256_add_epi32(_mm256_add_epi32(PAST(0.25f, _CMP_GT_OQ), PAST(0.75f, _CMP_GE_OQ)),
                         _mm256_add_epi32(PAST(1.25f, _CMP_GT_OQ), PAST(1.75f, _CMP_GE_OQ))),
        _mm256_add_epi32(_mm256_add_epi32(PAST(2.5f, _CMP_GT_OQ), PAST(3.5f, _CMP_GE_OQ)),
                         PAST(5.0f, _CMP_GT_OQ)));
#undef PAST
    __m256i s = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(v, neg, _CMP_LT_OQ)),
                                 SET32(8));
    return _mm256_sub_epi32(s, n); /* n counts -1 a threshold */
}

/*
 * E2M1 codes of 16 quotients given as the upper halves of their fp32 bits
 * (h: sign and magnitude; y: the magnitude, 0..0x7FFF, or below 0x80 for
 * any quotient under 2^-126), one a 16-bit lane; the sign bit where h is
 * above `neg` (unsigned).  The thresholds of fp4_e2m1_code are fp32 values
 * whose low 17 bits are zero: a > t and a >= t are the same comparisons of
 * the upper halves once the lowest bit of a half is set where a's lower
 * half is not zero (the rounding's sticky bit; avx2_codes_mx_bf16's
 * quotients are exact in 16 bits); a >= t is a > t - 1 in integers.
 */
#define T16(t) { t, t, t, t, t, t, t, t, t, t, t, t, t, t, t, t }
static const int16_t codes16_thresholds[7][16] __attribute__((aligned(32))) = {
    T16(0x3E80), T16(0x3F3F), T16(0x3FA0), T16(0x3FDF), T16(0x4020), T16(0x405F), T16(0x40A0)
};
#undef T16

FP4_AVX2 __m256i avx2_codes16(__m256i y, __m256i h, __m256i neg)
{
    /* The thresholds read from memory as the comparisons' operands: GCC,
     * seeing constants, rebuilds each in the loop from an immediate (three
     * instructions) for want of registers; the empty asm hides where the
     * pointer points. */
    const __m256i *t = (const __m256i *)(const void *)codes16_thresholds;
    __asm__ volatile("" : "+r"(t));
#define PAST(k) _mm256_cmpgt_epi16(y, _mm256_load_si256(t + (k)))
    __m256i n = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(PAST(0), PAST(1)),
                                                  _mm256_add_epi16(PAST(2), PAST(3))),
                                 _mm256_add_epi16(_mm256_add_epi16(PAST(4), PAST(5)), PAST(6)));
#undef PAST
    /* h - neg, saturated at 0: nonzero where h > neg; 8 there */
    __m256i s = _mm256_slli_epi16(_mm256_min_epu16(_mm256_subs_epu16(h, neg), SET16(1)), 3);
    return _mm256_sub_epi16(s, n);
}

/* 32 codes, one a 32-bit lane (c0: elements 0-7, ...), as 16 bytes, two a
 * byte, the first in the low nibble: to bytes by saturating packs (which
 * interleave the 128-bit halves, put back in order by a permutation), then
 * each pair as b0 * 1 + b1 * 16. */
FP4_AVX2 void avx2_pack32(__m256i c0, __m256i c1, __m256i c2, __m256i c3, uint8_t *out)
{
    __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3));
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    __m256i w = _mm256_maddubs_epi16(b, SET16(0x1001));
    w = _mm256_permute4x64_epi64(_mm256_packus_epi16(w, w), 0x08);
    _mm_storeu_si128((__m128i *)(void *)out, _mm256_castsi256_si128(w));
}

/* 32 codes, one a 16-bit lane (c0: elements 0-15, c1: 16-31), as 16 bytes:
 * avx2_pack32's steps, its permutation on what one pack interleaves. */
FP4_AVX2 void avx2_pack32_16(__m256i c0, __m256i c1, uint8_t *out)
{
    __m256i w = _mm256_maddubs_epi16(_mm256_packus_epi16(c0, c1), SET16(0x1001));
    w = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(w, w),
                                    _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
    _mm_storeu_si128((__m128i *)(void *)out, _mm256_castsi256_si128(w));
}

/* Codes of 8 groups of `run` elements in fp32: each divided by its group's
 * f (NVFP4) or multiplied by it (MXFP4), to codes as codes8 has them. */
FP4_AVX2 void avx2_codes_f32(bool nv, unsigned run, bool bf16, const void *x, __m256 f,
                             uint8_t *packed)
{
    float fs[8];
    _mm256_storeu_ps(fs, f);
    __m256 neg = _mm256_set1_ps(NEG_LIMIT(nv, bf16 ? FP8_DTYPE_BF16 : FP8_DTYPE_F32));
    unsigned sz = bf16 ? 2 : 4;
    for (unsigned i = 0; i < 8 * run; i += 32) {
        const char *p = (const char *)x + i * sz;
        /* NVFP4: two groups of 16; MXFP4: one of 32 */
        __m256 f0 = _mm256_broadcast_ss(&fs[i / run]);
        __m256 f1 = _mm256_broadcast_ss(&fs[(i + 16) / run]);
        __m256 v0 = avx2_load8(bf16, p), v1 = avx2_load8(bf16, p + 8 * sz);
        __m256 v2 = avx2_load8(bf16, p + 16 * sz), v3 = avx2_load8(bf16, p + 24 * sz);
        if (nv) {
            v0 = _mm256_div_ps(v0, f0), v1 = _mm256_div_ps(v1, f0);
            v2 = _mm256_div_ps(v2, f1), v3 = _mm256_div_ps(v3, f1);
        } else {
            v0 = _mm256_mul_ps(v0, f0), v1 = _mm256_mul_ps(v1, f0);
            v2 = _mm256_mul_ps(v2, f1), v3 = _mm256_mul_ps(v3, f1);
        }
        avx2_pack32(avx2_codes8(v0, neg), avx2_codes8(v1, neg), avx2_codes8(v2, neg),
                    avx2_codes8(v3, neg), packed + i / 2);
    }
}

/*
 * NVFP4 from bf16 without a division.  A group's elements are coded
 * fp4_e2m1_code(x / d), the quotient in fp32 (fp4_quotient), a
 * non-decreasing function of |x|: the magnitude code of x is the number of
 * thresholds t[1..7] that |x|'s bits pass (t[k]: the largest bf16
 * magnitude whose code is below k), and its sign bit is set where x is
 * negative and |x| passes t[0] (the largest magnitude whose quotient is
 * zero).  d is the group's E4M3 scale over the tensor's global, so each
 * thread keeps the thresholds of the scale bytes it met under the last few
 * globals it saw, each found by bisection with the reference's own
 * quotient and code.
 */
#define NV_GLOBALS 8

typedef struct {
    uint32_t global; /* fp32 bits; 0: none yet (a global is positive) */
    float g;
    uint8_t have[128];
    int16_t t[128][8];
} nv_way;

static _Thread_local struct {
    nv_way way[NV_GLOBALS];
    unsigned next;
} nv_tab;

/* Whether bf16 magnitude m (bits) has a code below k by divisor d (k = 0:
 * a quotient of zero). */
static bool nv_below(uint32_t m, float d, unsigned k)
{
    float v = fp4_quotient(1, 1, fp8_bf16_to_f32((uint16_t)m), d);
    return k ? (fp4_e2m1_code(v) & 7) < k : v == 0;
}

/* The largest finite bf16 magnitude (bits) with a code below k by d. */
static int16_t nv_threshold(float d, unsigned k)
{
    uint32_t lo = 0, hi = 0x7F7F; /* lo is below (0 always is); hi may be */
    if (nv_below(hi, d, k))
        return (int16_t)hi;
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (nv_below(mid, d, k))
            lo = mid;
        else
            hi = mid;
    }
    return (int16_t)lo;
}

/* This thread's thresholds under `global` (the least recently made ones
 * give way to a new global). */
static nv_way *nv_way_of(float global)
{
    uint32_t gb = fp8_f32_bits(global);
    for (unsigned w = 0; w < NV_GLOBALS; w++)
        if (nv_tab.way[w].global == gb)
            return &nv_tab.way[w];
    nv_way *w = &nv_tab.way[nv_tab.next];
    nv_tab.next = (nv_tab.next + 1) % NV_GLOBALS;
    w->global = gb, w->g = global;
    memset(w->have, 0, sizeof w->have);
    return w;
}

static __attribute__((noinline)) void nv_fill(nv_way *w, uint8_t b)
{
    float d = fp8_e4m3_to_f32(b) / w->g; /* fp4_nv_scale's divisor */
    for (unsigned k = 0; k < 8; k++)
        w->t[b][k] = nv_threshold(d, k);
    w->have[b] = 1;
}

/* The thresholds of scale byte b (its low 7 bits: a positive E4M3). */
static inline const int16_t *nv_row(nv_way *w, int32_t b)
{
    b &= 0x7F;
    if (__builtin_expect(!w->have[b], 0))
        nv_fill(w, (uint8_t)b);
    return w->t[b];
}

/* 16 bf16 elements of a group with thresholds t, to codes in 16-bit lanes. */
FP4_AVX2 __m256i avx2_nv_group16(const uint16_t *x, const int16_t *t)
{
    __m256i v = LOADU(x), y = _mm256_and_si256(v, SET16(0x7FFF));
#define PAST(k) _mm256_cmpgt_epi16(y, _mm256_set1_epi16(t[k]))
    __m256i n = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(PAST(1), PAST(2)),
                                                  _mm256_add_epi16(PAST(3), PAST(4))),
                                 _mm256_add_epi16(_mm256_add_epi16(PAST(5), PAST(6)), PAST(7)));
    __m256i s = _mm256_and_si256(_mm256_and_si256(PAST(0), _mm256_srai_epi16(v, 15)), SET16(8));
#undef PAST
    return _mm256_sub_epi16(s, n); /* n counts -1 a threshold */
}

FP4_AVX2 void avx2_codes_nv_bf16(const uint16_t *x, const int32_t *byte, nv_way *w,
                                 uint8_t *packed)
{
    for (unsigned j = 0; j < 8; j += 2)
        avx2_pack32_16(avx2_nv_group16(x + 16 * j, nv_row(w, byte[j])),
                       avx2_nv_group16(x + 16 * j + 16, nv_row(w, byte[j + 1])), packed + 8 * j);
}

/*
 * MXFP4 from bf16, 8 groups of 32 whose scale bytes are all 3 or more, in
 * 16-bit lanes with no multiplication.  With k = 127 - byte, x 2^k is x's
 * magnitude bits plus k << 7 (the exponent plus k) wherever that sum is a
 * normal bf16: the quotient's own bits, which the reference's rounding to
 * bf16 keeps.  Elsewhere the sum still compares as the quotient's code 0:
 * a normal x whose quotient falls under 2^-126 leaves at most 0x7F (or a
 * negative sum), and a zero or subnormal x (at most 0x7F) at most 0x7F +
 * (124 << 7) = 0x3E7F, under 0.25's 0x3E80, where its quotient is at
 * most 127 2^-133 2^124 < 0.25 too (byte >= 3 keeps k <= 124).  No sum
 * passes 0x7FFF: a quotient is below 8 (fp4_mx_byte).
 * The sign bit (above) is v < -2^-134 for the fp32 quotient v; x's 8
 * significant bits keep |x| 2^k out of (2^-134, 2^-134 (1 + 2^-7)), so
 * v's rounding cannot come down to 2^-134, and it is x < 0 with |x| >
 * 2^(byte - 261): any nonzero x for byte < 128, x above the bf16
 * subnormal of 2^(byte - 128) units of 2^-133 for 128 to 134, above the
 * normal bits (byte - 134) << 7 from 135; that is, x (unsigned) above
 * 0x8000 plus those bits.
 */
FP4_AVX2 void avx2_codes_mx_bf16(const uint16_t *x, __m256i byte, uint8_t *packed)
{
    __m256i shift = _mm256_slli_epi32(_mm256_sub_epi32(SET32(127), byte), 7);
    __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(byte, SET32(134)), 7);
    /* vpsllvd gives 0 for a count above 31, as byte - 128 is below 128 */
    __m256i sub = _mm256_sllv_epi32(SET32(1), _mm256_sub_epi32(byte, SET32(128)));
    __m256i t = _mm256_blendv_epi8(sub, normal, _mm256_cmpgt_epi32(byte, SET32(134)));
    __m256i neg = _mm256_add_epi32(t, SET32(0x8000));
    int32_t ks[8], ns[8];
    _mm256_storeu_si256((__m256i *)(void *)ks, shift);
    _mm256_storeu_si256((__m256i *)(void *)ns, neg);
    for (unsigned j = 0; j < 8; j++) {
        __m256i k = SET16(ks[j]), nj = SET16(ns[j]);
        __m256i v0 = LOADU(x + 32 * j), v1 = LOADU(x + 32 * j + 16);
        __m256i c0 = avx2_codes16(_mm256_add_epi16(_mm256_and_si256(v0, SET16(0x7FFF)), k), v0, nj);
        __m256i c1 = avx2_codes16(_mm256_add_epi16(_mm256_and_si256(v1, SET16(0x7FFF)), k), v1, nj);
        avx2_pack32_16(c0, c1, packed + 16 * j);
    }
}

/*
 * The scales of eight groups of `run` elements at x (bf16 or fp32) into
 * scales[0..7], their bytes (32-bit lanes) into byte[0..7] and what the
 * elements are divided or multiplied by into f[0..7].  Returns a mask,
 * nonzero where the reference must take the row.
 */
FP4_AVX2 __m256i avx2_eight_scales(bool nv, unsigned run, bool bf16, const void *x, float global,
                                   int32_t *byte, float *f, uint8_t *scales)
{
    __m256i b;
    __m256 fs;
    __m256i bad = avx2_scales(nv, bf16, avx2_maxima(run, bf16, x), global, &b, &fs);
    _mm256_storeu_si256((__m256i *)(void *)byte, b);
    _mm256_storeu_ps(f, fs);
    /* the low byte of each lane, in order */
    __m256i sb = _mm256_shuffle_epi8(b, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1,
                                                         -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1,
                                                         -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    _mm_storel_epi64((__m128i *)(void *)scales,
                     _mm_unpacklo_epi32(_mm256_castsi256_si128(sb),
                                        _mm256_extracti128_si256(sb, 1)));
    return bad;
}

/* The codes of those eight groups into packed[0 .. 4 run - 1]. */
FP4_AVX2 void avx2_eight_codes(bool nv, unsigned run, bool bf16, const void *x,
                               const int32_t *byte, const float *f, nv_way *w, uint8_t *packed)
{
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)byte);
    if (bf16 && nv)
        avx2_codes_nv_bf16(x, byte, w, packed);
    else if (bf16 && _mm256_testz_si256(_mm256_cmpgt_epi32(SET32(3), b), SET32(-1)))
        avx2_codes_mx_bf16(x, b, packed);
    else
        avx2_codes_f32(nv, run, bf16, x, _mm256_loadu_ps(f), packed);
}

/*
 * A row of NVFP4 (run 16) or MXFP4 (run 32) in blocks of 8 groups; the last
 * groups padded with zeros to 8 (a group's bytes depend on it alone).  The
 * scales of AHEAD blocks are made before their codes: a block's codes wait
 * on its scales (a division, a store and the thresholds' loads), and made
 * apart the blocks' chains overlap.
 */
#define AHEAD 8
FP4_AVX2 bool avx2_row(bool nv, unsigned run, bool bf16, const void *x, uint64_t n, float global,
                       uint8_t *packed, uint8_t *scales)
{
    uint64_t groups = n / run, sz = bf16 ? 2 : 4;
    nv_way *w = nv && bf16 ? nv_way_of(global) : NULL;
    int32_t byte[AHEAD][8];
    float f[AHEAD][8];
    __m256i bad = _mm256_setzero_si256();
    for (uint64_t g0 = 0; g0 + 8 <= groups; g0 += 8 * AHEAD) {
        unsigned k, blocks = (groups - g0) / 8 < AHEAD ? (unsigned)((groups - g0) / 8) : AHEAD;
        const char *xs = (const char *)x + g0 * run * sz;
        for (k = 0; k < blocks; k++)
            bad = _mm256_or_si256(bad, avx2_eight_scales(nv, run, bf16, xs + 8 * k * run * sz,
                                                         global, byte[k], f[k],
                                                         scales + g0 + 8 * k));
        for (k = 0; k < blocks; k++)
            avx2_eight_codes(nv, run, bf16, xs + 8 * k * run * sz, byte[k], f[k], w,
                             packed + (g0 + 8 * k) * run / 2);
    }
    uint64_t g0 = groups / 8 * 8;
    if (g0 < groups) {
        uint64_t rest = groups - g0;
        _Alignas(32) unsigned char in[8 * 32 * 4] = { 0 };
        uint8_t q[8 * 32 / 2], s[8];
        memcpy(in, (const char *)x + g0 * run * sz, rest * run * sz);
        bad = _mm256_or_si256(bad, avx2_eight_scales(nv, run, bf16, in, global, byte[0], f[0], s));
        avx2_eight_codes(nv, run, bf16, in, byte[0], f[0], w, q);
        memcpy(packed + g0 * run / 2, q, rest * run / 2);
        memcpy(scales + g0, s, rest);
    }
    return _mm256_testz_si256(bad, bad);
}

__attribute__((target("avx2"))) static bool quantize_row_avx2(bool nv, bool bf16, const void *x,
                                                              uint64_t n, float global,
                                                              uint8_t *packed, uint8_t *scales)
{
    /* each a constant, so that every combination is compiled apart */
    if (nv)
        return bf16 ? avx2_row(true, 16, true, x, n, global, packed, scales)
                    : avx2_row(true, 16, false, x, n, global, packed, scales);
    return bf16 ? avx2_row(false, 32, true, x, n, global, packed, scales)
                : avx2_row(false, 32, false, x, n, global, packed, scales);
}
#else
static bool cpu_has_avx2(void) { return false; }
static bool quantize_row_avx2(bool nv, bool bf16, const void *x, uint64_t n, float global,
                              uint8_t *packed, uint8_t *scales)
{
    (void)nv, (void)bf16, (void)x, (void)n, (void)global, (void)packed, (void)scales;
    return false;
}
#endif

bool fp4_q_path_runs(fp4_q_path path)
{
    return path == FP4_Q_PATH_CLONES || (path == FP4_Q_PATH_AVX2 && cpu_has_avx2());
}

const char *fp4_q_path_name(fp4_q_path path)
{
    return path == FP4_Q_PATH_AVX2 ? "avx2" : "clones";
}

fp4_q_result fp4_fast_quantize_row_on(fp4_q_path path, const fp8_numerics *num,
                                      fp8_scheme scheme, fp8_dtype src, const void *x, uint64_t n,
                                      float global, uint8_t *packed, uint8_t *scales,
                                      uint64_t *where)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    bool nv = t->levels == 2, ok = false;
    /* no fast path takes fp4_f32 (TE's NVFP4): the reference's steps (fp4_cpu_takes) */
    if (fp4_cpu_takes(num) && (src == FP8_DTYPE_BF16 || src == FP8_DTYPE_F32) &&
        t->run == (nv ? 16u : 32u)) {
        if (path == FP4_Q_PATH_AVX2 && cpu_has_avx2())
            ok = quantize_row_avx2(nv, src == FP8_DTYPE_BF16, x, n, global, packed, scales);
        else
            ok = quantize_row_clones(scheme, src, x, n, global, packed, scales);
    }
    return ok ? FP4_Q_OK
              : fp4_quantize_row(num, scheme, src, x, n, global, packed, scales, where);
}

fp4_q_result fp4_fast_quantize_row(const fp8_numerics *num, fp8_scheme scheme, fp8_dtype src,
                                   const void *x, uint64_t n, float global, uint8_t *packed,
                                   uint8_t *scales, uint64_t *where)
{
    return fp4_fast_quantize_row_on(FP4_Q_PATH_AVX2, num, scheme, src, x, n, global, packed,
                                    scales, where);
}

bool fp4_cpu_takes(const fp8_numerics *num)
{
    return !num || !num->fp4_f32;
}
