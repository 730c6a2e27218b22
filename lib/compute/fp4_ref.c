/*
 * fp4_ref.c - the packed-FP4 decode (fp4_ref.h): each value by one rule from
 * the element table of types.h (E2M1 codes, E8M0 or E4M3 scales), kept
 * in a table of every (scale byte, code) pair that the rows look up.
 */
#include <math.h>
#include <string.h>

#include "compute/fp4_ref.h"
#include "common/fp4_math.h"
#include "common/fp8_math.h"

/* x rounded to odd into fp32: the fp32 value toward zero, its last bit set
 * when inexact.  Rounding that to fewer bits (bf16, f16) is rounding x
 * once (26 bits or more of it kept). */
static float f32_round_odd(double x)
{
    float f = (float)x;
    if ((double)f == x || x != x)
        return f;
    if (fabs((double)f) > fabs(x))
        f = nextafterf(f, 0.0f);
    return fp8_f32_from_bits(fp8_f32_bits(f) | 1);
}

uint32_t fp4_round_out(double x, fp8_dtype out)
{
    switch (out) {
    case FP8_DTYPE_F32: return fp8_f32_bits((float)x);
    case FP8_DTYPE_F16: return fp8_f32_to_f16(f32_round_odd(x));
    default: return fp8_f32_to_bf16(f32_round_odd(x));
    }
}

/* p / g rounded to odd in double: the quotient's remainder p - q * g is
 * exact (fma), and says on which side of q the real quotient lies. */
static double div_round_odd(double p, double g)
{
    double q = p / g, r = fma(-q, g, p);
    if (r == 0)
        return q;
    uint64_t u;
    memcpy(&u, &q, sizeof u);
    if (u & 1) /* odd already: the real quotient lies between q and a neighbour */
        return q;
    return nextafter(q, (r > 0) == (g > 0) ? INFINITY : -INFINITY);
}

/* The value of code c under scale byte b, rounded once into `out`. */
static uint32_t one_value(const fp8_dequant_spec *d, unsigned b, unsigned c)
{
    float s = fp8_elem_get(d->scheme->scale_elem[0])->decode((uint8_t)b);
    /* e2m1 * s: at most 2 + 4 significant bits, exact in fp32 */
    double x = fp8_elem_get(d->scheme->elem)->decode((uint8_t)c) * s;
    if (d->scheme->levels > 1) /* a product of 6 and 24 bits is exact in double */
        x = d->divides ? div_round_odd(x, d->global) : x * d->global;
    return fp4_round_out(x, d->out);
}

void fp4_table_init(fp4_table *t, const fp8_dequant_spec *d)
{
    const fp8_elem_traits *st = fp8_elem_get(d->scheme->scale_elem[0]);
    fp8_dtype out = d->out;
    uint32_t inf = fp8_dtype_inf_bits(out);
    uint32_t mag = out == FP8_DTYPE_F32 ? 0x7FFFFFFFu : 0x7FFFu;
    t->out = out;
    t->group = (uint32_t)d->group;
    for (unsigned b = 0; b < 256; b++) {
        t->nan_scale[b] = !fp8_elem_scale_ok(st, (uint8_t)b);
        for (unsigned c = 0; c < 16; c++) {
            t->value[b][c] = t->nan_scale[b] ? 0 : one_value(d, b, c);
            t->inf[b][c] = !t->nan_scale[b] && (t->value[b][c] & mag) == inf;
        }
    }
}

fp4_deq_result fp4_dequant_row(const uint8_t *packed, const uint8_t *scales, uint64_t n,
                               const fp4_table *t, void *y, uint64_t stride, uint64_t *where)
{
    bool f32 = t->out == FP8_DTYPE_F32;
    for (uint64_t g = 0; g < n / t->group; g++) {
        unsigned b = scales[g];
        if (t->nan_scale[b]) {
            *where = g * t->group;
            return FP4_DEQ_NAN_SCALE;
        }
        const uint32_t *v = t->value[b];
        const bool *inf = t->inf[b];
        for (uint64_t i = g * t->group; i < (g + 1) * t->group; i++) {
            unsigned c = i & 1 ? packed[i / 2] >> 4 : packed[i / 2] & 15;
            if (inf[c]) {
                *where = i;
                return FP4_DEQ_OVERFLOW;
            }
            if (f32)
                ((uint32_t *)y)[i * stride] = v[c];
            else
                ((uint16_t *)y)[i * stride] = (uint16_t)v[c];
        }
    }
    return FP4_DEQ_OK;
}

/* ---------------------------------------------------------------- quantization */

/* The rules of one element and one group: common/fp4_math.h, which the
 * CUDA kernel calls too. */
float fp4_nvfp4_global(const fp8_numerics *num, fp8_dtype src, float amax)
{
    if (num && num->fp4_f32)
        return fp4_nv_global_f32(amax);
    /* generate_gparam: max_val_pos clamped to finfo(dtype).tiny (2^-126 for
     * both), then `448 * 6 / max_val_pos`: Tensor.__rtruediv__ is
     * reciprocal() * 2688, each rounded in the dtype; nan_to_num -> 1 */
    float a = amax > 0x1p-126f ? amax : 0x1p-126f;
    bool bf16 = src == FP8_DTYPE_BF16;
    float g = fp4_in_src(bf16, fp4_in_src(bf16, 1.0f / a) * 2688.0f);
    return g == g && g <= 3.4028234663852886e38f ? g : 1.0f;
}

uint8_t fp4_nvfp4_scale(fp8_dtype src, float m, float global, float *d)
{
    return fp4_nv_scale(src == FP8_DTYPE_BF16, m, global, d);
}

int fp4_mxfp4_scale(fp8_dtype src, float m, float *d)
{
    return fp4_mx_scale(src == FP8_DTYPE_BF16, m, d);
}

fp4_q_result fp4_quantize_row(const fp8_numerics *num, fp8_scheme scheme, fp8_dtype src,
                              const void *x, uint64_t n, float global, uint8_t *packed,
                              uint8_t *scales, uint64_t *where)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    uint32_t run = t->run;
    bool nv = t->levels == 2, f32 = nv && num && num->fp4_f32;
    for (uint64_t g = 0; g < n / run; g++) {
        float m = 0;
        for (uint64_t i = g * run; i < (g + 1) * run; i++) {
            float v = __builtin_fabsf(fp8_load_f32(src, x, i));
            if (!(v <= 3.4028234663852886e38f)) {
                *where = i;
                return FP4_Q_NONFINITE;
            }
            m = v > m ? v : m;
        }
        float d; /* the divisor of each element (fp4_f32: the factor) */
        if (f32) {
            scales[g] = fp4_nv_scale_f32(m, global, &d);
            for (uint64_t i = g * run; i < (g + 1) * run; i += 2)
                packed[i / 2] = (uint8_t)(fp4_e2m1_code_f32(fp8_load_f32(src, x, i), d) |
                                          fp4_e2m1_code_f32(fp8_load_f32(src, x, i + 1), d) << 4);
            continue;
        }
        if (nv) {
            scales[g] = fp4_nvfp4_scale(src, m, global, &d);
        } else {
            int b = fp4_mxfp4_scale(src, m, &d);
            if (b > 255) {
                *where = g * run;
                return FP4_Q_SCALE_OVERFLOW;
            }
            scales[g] = (uint8_t)b;
        }
        for (uint64_t i = g * run; i < (g + 1) * run; i += 2) {
            int bf16 = src == FP8_DTYPE_BF16;
            float v0 = fp4_quotient(nv, bf16, fp8_load_f32(src, x, i), d);
            float v1 = fp4_quotient(nv, bf16, fp8_load_f32(src, x, i + 1), d);
            packed[i / 2] = (uint8_t)(fp4_e2m1_code(v0) | fp4_e2m1_code(v1) << 4);
        }
    }
    return FP4_Q_OK;
}
