/*
 * int4_ref.c - the INT4 weight-only codec's reference (int4_ref.h):
 * fp8conv-formats(5), INT4 WEIGHT ONLY, in code.  quant_cpu.c's fast
 * path is tested byte for byte against it (tests/check_int4.c), and both
 * against compressed-tensors' own quantizer and decompressor
 * (tests/oracle/int4_oracle.py).
 */
#include "compute/int4_ref.h"

#include <string.h>

fp8_band_result fp8_int4_quantize_ref(const fp8_band *b, const void *src, uint8_t *q,
                                      void *scales, uint64_t *where)
{
    uint64_t n = b->rows * b->cols, G = b->group_cols;
    for (uint64_t i = 0; i < n; i++)
        if (!fp8_f32_finite(fp8_load_f32(b->src, src, i))) {
            *where = i;
            return FP8_BAND_NONFINITE;
        }
    memset(q, 0, n / 2);
    for (uint64_t g = 0; g < n / G; g++) {
        float m = 0;
        for (uint64_t i = g * G; i < (g + 1) * G; i++) {
            float a = __builtin_fabsf(fp8_load_f32(b->src, src, i));
            m = a > m ? a : m;
        }
        float s = fp8_int4_scale(b->src, m);
        fp8_scale_store(scales, fp8_scale_size(b->kind), g, fp8_int4_scale_bits(b->kind, s));
        for (uint64_t i = g * G; i < (g + 1) * G; i++)
            q[i / 2] |= (uint8_t)(fp8_int4_code(b->src, fp8_load_f32(b->src, src, i), s)
                                  << (i % 2 * 4));
    }
    return FP8_BAND_OK;
}

fp8_int4_deq_result fp8_int4_dequant_row(const uint8_t *packed, const void *scales, fp8_dtype sdt,
                                         uint64_t n, uint64_t group, fp8_dtype out, void *y,
                                         uint64_t *where)
{
    for (uint64_t i = 0; i < n; i += group)
        if (!fp8_f32_finite(fp8_load_f32(sdt, scales, i / group))) {
            *where = i;
            return FP8_INT4_DEQ_BAD_SCALE;
        }
    fp8_int4_deq_result r = FP8_INT4_DEQ_OK;
    for (uint64_t i = 0; i < n; i++) {
        float v = (float)((packed[i / 2] >> (i % 2 * 4) & 15) - 8) * fp8_load_f32(sdt, scales, i / group);
        bool inf = fp8_store_out(out, y, i, v);
        if (inf && !r) {
            *where = i;
            r = FP8_INT4_DEQ_OVERFLOW;
        }
    }
    return r;
}
