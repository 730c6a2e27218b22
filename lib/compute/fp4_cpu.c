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

/* Elements i..i+7 as fp32 into v (macros, not functions: a 32-byte vector
 * argument or result would change the ABI between the clones). */
#define LOAD8(v, src, x, i)                                                        \
    do {                                                                           \
        if ((src) == FP8_DTYPE_BF16) {                                             \
            const uint16_t *p_ = (const uint16_t *)(x) + (i);                      \
            v8i u_ = { p_[0], p_[1], p_[2], p_[3], p_[4], p_[5], p_[6], p_[7] };   \
            (v) = (v8f)(u_ << 16);                                                 \
        } else {                                                                   \
            memcpy(&(v), (const float *)(x) + (i), sizeof(v));                     \
        }                                                                          \
    } while (0)
#define ABS8(v) ((v8f)((v8i)(v) & 0x7FFFFFFF))

/* The row, the groups' scales by the reference's steps and the elements 8 at
 * a time; static, as FP8_CLONES needs (quant_cpu.h). */
FP8_CLONES static fp4_q_result quantize_row_clones(fp8_scheme scheme, fp8_dtype src, const void *x,
                                                   uint64_t n, float global, uint8_t *packed,
                                                   uint8_t *scales, uint64_t *where)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    uint32_t run = t->run;
    bool nv = t->levels == 2, tiny_matters = !nv && src == FP8_DTYPE_BF16;
    for (uint64_t g = 0; g < n / run; g++) {
        v8f mx = { 0 }, v;
        v8i ok = { 0 };
        ok = ok == 0;
        for (uint64_t i = g * run; i < (g + 1) * run; i += 8) {
            LOAD8(v, src, x, i);
            v8f a = ABS8(v);
            ok &= a <= 3.4028234663852886e38f; /* false for NaN */
            v8i gt = a > mx;
            mx = (v8f)(((v8i)a & gt) | ((v8i)mx & ~gt));
        }
        float m = 0;
        bool finite = true;
        for (int k = 0; k < 8; k++) {
            m = mx[k] > m ? mx[k] : m;
            finite = finite && ok[k];
        }
        if (!finite)
            return fp4_quantize_row(scheme, src, x, n, global, packed, scales, where);
        float d;
        if (nv) {
            scales[g] = fp4_nvfp4_scale(src, m, global, &d);
        } else {
            int b = fp4_mxfp4_scale(src, m, &d);
            if (b > 255)
                return fp4_quantize_row(scheme, src, x, n, global, packed, scales, where);
            scales[g] = (uint8_t)b;
        }
        for (uint64_t i = g * run; i < (g + 1) * run; i += 8) {
            LOAD8(v, src, x, i);
            v /= d;
            v8f a = ABS8(v);
            if (tiny_matters) {
                v8i tiny = (a > 0.0f) & (a < 0x1p-126f);
                for (int k = 0; k < 8; k++)
                    if (tiny[k])
                        return fp4_quantize_row(scheme, src, x, n, global, packed, scales, where);
            }
            /* fp4_math.h's fp4_e2m1_code: each threshold passed adds one */
            v8i c = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) +
                    (a >= 3.5f) + (a > 5.0f);
            c = -c | ((v < 0.0f) & 8);
            for (int k = 0; k < 4; k++)
                packed[i / 2 + (uint64_t)k] = (uint8_t)(c[2 * k] | c[2 * k + 1] << 4);
        }
    }
    return FP4_Q_OK;
}

fp4_q_result fp4_fast_quantize_row(fp8_scheme scheme, fp8_dtype src, const void *x, uint64_t n,
                                   float global, uint8_t *packed, uint8_t *scales,
                                   uint64_t *where)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    if ((src != FP8_DTYPE_BF16 && src != FP8_DTYPE_F32) || t->run % 8)
        return fp4_quantize_row(scheme, src, x, n, global, packed, scales, where);
    return quantize_row_clones(scheme, src, x, n, global, packed, scales, where);
}
