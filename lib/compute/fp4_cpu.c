/*
 * fp4_cpu.c - the fast path of the packed-FP4 decode (fp4_cpu.h).
 */
#include <string.h>

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
                            uint64_t n, void *y, uint64_t stride, uint64_t *where)
{
    const fp4_table *t = f->t;
    uint64_t groups = n / t->group, half = t->group / 2;
    for (uint64_t g = 0; g < groups; g++)
        if (!f->clean[scales[g]])
            return fp4_dequant_row(packed, scales, n, t, y, stride, where);
    if (t->out == FP8_DTYPE_F32) {
        uint32_t *o = y;
        for (uint64_t g = 0; g < groups; g++) {
            const uint32_t *v = t->value[scales[g]];
            const uint8_t *p = packed + g * half;
            uint32_t *og = o + g * t->group * stride;
            for (uint64_t k = 0; k < half; k++) {
                og[2 * k * stride] = v[p[k] & 15];
                og[(2 * k + 1) * stride] = v[p[k] >> 4];
            }
        }
        return FP4_DEQ_OK;
    }
    uint16_t *o = y;
    if (stride == 1) {
        for (uint64_t g = 0; g < groups; g++) {
            const uint16_t *v = f->v16[scales[g]];
            const uint8_t *p = packed + g * half;
            uint16_t *og = o + g * t->group;
            for (uint64_t k = 0; k < half; k++) {
                og[2 * k] = v[p[k] & 15];
                og[2 * k + 1] = v[p[k] >> 4];
            }
        }
        return FP4_DEQ_OK;
    }
    for (uint64_t g = 0; g < groups; g++) {
        const uint16_t *v = f->v16[scales[g]];
        const uint8_t *p = packed + g * half;
        uint16_t *og = o + g * t->group * stride;
        for (uint64_t k = 0; k < half; k++) {
            og[2 * k * stride] = v[p[k] & 15];
            og[(2 * k + 1) * stride] = v[p[k] >> 4];
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
 * exponent byte from m's bits plus the rounding carry.  False where the
 * reference must take the row: a NaN or infinity, an E8M0 overflow, a tiny
 * MXFP4 quotient (fp4_cpu.h).
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
            d = (v8f)((byte << 23) | (0x00400000u & (byte == 0u)));                          \
        }                                                                                    \
        v8b b8 = __builtin_convertvector(byte, v8b);                                         \
        memcpy(scales + g0, &b8, 8);                                                         \
        for (int j = 0; j < 8; j++)                                                          \
            for (uint64_t i = (g0 + j) * (run); i < (g0 + j + 1) * (run); i += 8)            \
                if (!codes8(src, x, i, d[j], tiny_matters, packed))                          \
                    return false;                                                            \
    } while (0)

/* Elements i..i+7 divided by d, to E2M1 codes (fp4_math.h fp4_e2m1_code: each
 * threshold passed adds one), packed into packed[i / 2 ..]; false for a
 * tiny MXFP4 quotient. */
static inline __attribute__((always_inline)) bool codes8(fp8_dtype src, const void *x, uint64_t i,
                                                         float d, bool tiny_matters,
                                                         uint8_t *packed)
{
    v8f v;
    LOAD8(v, src, x, i);
    v /= d;
    v8f a = ABS8(v);
    if (tiny_matters) {
        v8i tiny = (a > 0.0f) & (a < 0x1p-126f);
        for (int k = 0; k < 8; k++)
            if (tiny[k])
                return false;
    }
    v8i c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
            (a >= 3.5f) + (a > 5.0f);
    c = -c | ((v < 0.0f) & 8);
    c |= SHUF(c, c, 1, 0, 3, 2, 5, 4, 7, 6) << 4; /* lanes 0, 2, 4, 6: the bytes */
    v8b b = __builtin_convertvector(c, v8b);
    uint64_t w;
    memcpy(&w, &b, 8);
    w = (w & 0xFF) | (w >> 8 & 0xFF00) | (w >> 16 & 0xFF0000) | (w >> 24 & 0xFF000000);
    uint32_t four = (uint32_t)w;
    memcpy(packed + i / 2, &four, 4);
    return true;
}

/* The row in blocks of 8 groups, the rest group by group as the reference;
 * false where the reference must take it. */
FP8_CLONES static bool quantize_row_clones(fp8_scheme scheme, fp8_dtype src, const void *x,
                                           uint64_t n, float global, uint8_t *packed,
                                           uint8_t *scales)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    uint64_t groups = n / t->run, g0 = 0;
    bool nv = t->levels == 2, tiny_matters = !nv && src == FP8_DTYPE_BF16;
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
        }
        for (uint64_t i = g0 * t->run; i < (g0 + 1) * t->run; i += 8)
            if (!codes8(src, x, i, d, tiny_matters, packed))
                return false;
    }
    return true;
}

fp4_q_result fp4_fast_quantize_row(fp8_scheme scheme, fp8_dtype src, const void *x, uint64_t n,
                                   float global, uint8_t *packed, uint8_t *scales,
                                   uint64_t *where)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    if ((src != FP8_DTYPE_BF16 && src != FP8_DTYPE_F32) || t->run % 8 ||
        !quantize_row_clones(scheme, src, x, n, global, packed, scales))
        return fp4_quantize_row(scheme, src, x, n, global, packed, scales, where);
    return FP4_Q_OK;
}
