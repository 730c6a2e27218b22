/*
 * quant_cpu.c - the fast CPU path of the band quantizer.  Same bytes as
 * quant_ref.c (tests/check_quant.c compares them on every scheme and odd
 * shapes); faster because the amax of bf16/f16 data is an integer maximum
 * over the magnitude bits, and the non-finite check falls out of it.
 */
#include "quant.h"

/* Magnitude bits at or above this are infinity or NaN. */
static uint32_t inf_bits(fp8_dtype src)
{
    return src == FP8_DTYPE_BF16 ? 0x7F80 : src == FP8_DTYPE_F16 ? 0x7C00 : 0x7F800000;
}

/* Largest magnitude bits of a row segment: for IEEE formats the magnitude
 * order is the integer order of the bits without the sign. */
static uint32_t amax_bits(fp8_dtype src, const void *x, uint64_t n)
{
    uint32_t m = 0;
    if (src == FP8_DTYPE_F32) {
        const uint32_t *p = x;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t a = p[i] & 0x7FFFFFFF;
            m = a > m ? a : m;
        }
    } else {
        const uint16_t *p = x;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t a = p[i] & 0x7FFFu;
            m = a > m ? a : m;
        }
    }
    return m;
}

static float bits_to_f32(fp8_dtype src, uint32_t bits)
{
    return src == FP8_DTYPE_BF16  ? fp8_bf16_to_f32((uint16_t)bits)
           : src == FP8_DTYPE_F16 ? fp8_f16_to_f32((uint16_t)bits)
                                  : fp8_f32_from_bits(bits);
}

static void quantize_row(fp8_dtype src, const void *x, uint64_t n, float s, uint8_t *q)
{
    if (src == FP8_DTYPE_BF16) {
        const uint16_t *p = x;
        for (uint64_t i = 0; i < n; i++)
            q[i] = fp8_f32_to_e4m3(fp8_bf16_to_f32(p[i]) / s);
    } else if (src == FP8_DTYPE_F16) {
        const uint16_t *p = x;
        for (uint64_t i = 0; i < n; i++)
            q[i] = fp8_f32_to_e4m3(fp8_f16_to_f32(p[i]) / s);
    } else {
        const float *p = x;
        for (uint64_t i = 0; i < n; i++)
            q[i] = fp8_f32_to_e4m3(p[i] / s);
    }
}

static const void *elem(fp8_dtype src, const void *x, uint64_t i)
{
    return (const char *)x + i * (src == FP8_DTYPE_F32 ? 4 : 2);
}

fp8_band_result fp8_band_quantize(const fp8_band *b, const void *src, uint8_t *q, void *scales,
                                  uint64_t *where)
{
    unsigned ssize = fp8_scale_size(b->kind);
    uint64_t g = 0;
    for (uint64_t r0 = 0; r0 < b->rows; r0 += b->group_rows) {
        uint64_t r1 = r0 + b->group_rows < b->rows ? r0 + b->group_rows : b->rows;
        for (uint64_t c0 = 0; c0 < b->cols; c0 += b->group_cols, g++) {
            uint64_t w = b->cols - c0 < b->group_cols ? b->cols - c0 : b->group_cols;
            uint32_t m = 0;
            for (uint64_t r = r0; r < r1; r++) {
                uint32_t a = amax_bits(b->src, elem(b->src, src, r * b->cols + c0), w);
                m = a > m ? a : m;
            }
            if (m >= inf_bits(b->src))
                return fp8_band_quantize_ref(b, src, q, scales, where); /* finds the first */
            float s = b->scale;
            if (!b->fixed) {
                uint32_t bits = 0;
                if ((s = fp8_scale_make(b->kind, bits_to_f32(b->src, m), &bits)) == 0)
                    return fp8_band_quantize_ref(b, src, q, scales, where);
                if (ssize == 4)
                    ((uint32_t *)scales)[g] = bits;
                else if (ssize == 2)
                    ((uint16_t *)scales)[g] = (uint16_t)bits;
                else
                    ((uint8_t *)scales)[g] = (uint8_t)bits;
            }
            for (uint64_t r = r0; r < r1; r++)
                quantize_row(b->src, elem(b->src, src, r * b->cols + c0), w, s,
                             q + r * b->cols + c0);
        }
    }
    return FP8_BAND_OK;
}

fp8_band_result fp8_amax(fp8_dtype src, const void *x, uint64_t n, float *amax, uint64_t *where)
{
    uint32_t m = amax_bits(src, x, n);
    if (m >= inf_bits(src))
        return fp8_amax_ref(src, x, n, amax, where);
    *amax = bits_to_f32(src, m);
    return FP8_BAND_OK;
}
