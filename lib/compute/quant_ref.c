/*
 * quant_ref.c - the scalar reference quantizer and dequantizer:
 * fp8conv-formats(5), SCHEMES and DEQUANTIZATION, in code.
 * Short and obvious on purpose; every fast path (quant_cpu.c, the CUDA
 * kernels) is tested byte for byte against it.
 */
#include "compute/quant_ref.h"
#include "compute/fp4_ref.h"
#include "compute/int4_ref.h"


_Static_assert((int)FP4_Q_OK == (int)FP8_BAND_OK && (int)FP4_Q_NONFINITE == (int)FP8_BAND_NONFINITE &&
                   (int)FP4_Q_SCALE_OVERFLOW == (int)FP8_BAND_SCALE_OVERFLOW,
               "an E2M1 band's result is its row's");

uint64_t fp8_band_scale_count(const fp8_band *b)
{
    return b->fixed ? 0 : fp8_ceil_div(b->rows, b->group_rows) * fp8_ceil_div(b->cols, b->group_cols);
}

const char *fp8_band_no_scale_why(const fp8_band *b)
{
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_E2M1) /* fp4_quantize_row: MXFP4's E8M0 */
        return "its largest element rounds to a power of two beyond E8M0's (its scale would be "
               "byte 255, NaN)";
    return b->kind == FP8_SCALE_F16 ? "a scale above 65504 cannot be stored in F16"
                                    : "its largest element times any scale of this format would "
                                      "read back as infinity (past the fp32 range)";
}

static bool finite(float x) { return (fp8_f32_bits(x) & 0x7F800000) != 0x7F800000; }

/* The first non-finite element of the band, in row-major order. */
static uint64_t first_nonfinite(const fp8_band *b, const void *src)
{
    for (uint64_t r = 0; r < b->rows; r++)
        for (uint64_t c = 0; c < b->cols; c++)
            if (!finite(fp8_load_f32(b->src, src, r * b->cols + c)))
                return r * b->cols + c;
    return 0;
}

fp8_band_result fp8_band_quantize_ref(const fp8_band *b, const void *src, uint8_t *q,
                                      void *scales, uint64_t *where)
{
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_E2M1) /* groups within rows: one run */
        return (fp8_band_result)fp4_quantize_row(b->scheme, b->src, src, b->rows * b->cols, b->global, q, scales,
                                where);
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_I4) /* its own codec: int4_ref.c */
        return fp8_int4_quantize_ref(b, src, q, scales, where);
    for (uint64_t r = 0; r < b->rows; r++)
        for (uint64_t c = 0; c < b->cols; c++)
            if (!finite(fp8_load_f32(b->src, src, r * b->cols + c))) {
                *where = first_nonfinite(b, src);
                return FP8_BAND_NONFINITE;
            }
    uint64_t gcols = fp8_ceil_div(b->cols, b->group_cols), g = 0;
    for (uint64_t r0 = 0; r0 < b->rows; r0 += b->group_rows) {
        uint64_t r1 = r0 + b->group_rows < b->rows ? r0 + b->group_rows : b->rows;
        for (uint64_t gc = 0; gc < gcols; gc++, g++) {
            uint64_t c0 = gc * b->group_cols;
            uint64_t c1 = c0 + b->group_cols < b->cols ? c0 + b->group_cols : b->cols;
            float amax = 0, s = b->scale;
            for (uint64_t r = r0; r < r1; r++)
                for (uint64_t c = c0; c < c1; c++) {
                    float a = __builtin_fabsf(fp8_load_f32(b->src, src, r * b->cols + c));
                    amax = a > amax ? a : amax;
                }
            if (!b->fixed) {
                uint32_t bits = 0;
                s = fp8_scale_make(b->kind, amax, &bits);
                if (s == 0) {
                    *where = r0 * b->cols + c0;
                    return FP8_BAND_SCALE_OVERFLOW;
                }
                fp8_scale_store(scales, fp8_scale_size(b->kind), g, bits);
            }
            for (uint64_t r = r0; r < r1; r++)
                for (uint64_t c = c0; c < c1; c++)
                    q[r * b->cols + c] =
                        fp8_f32_to_e4m3(fp8_load_f32(b->src, src, r * b->cols + c) / s);
        }
    }
    return FP8_BAND_OK;
}

fp8_band_result fp8_amax_ref(fp8_dtype src, const void *x, uint64_t n, float *amax,
                             uint64_t *where)
{
    float m = 0;
    for (uint64_t i = 0; i < n; i++) {
        float a = __builtin_fabsf(fp8_load_f32(src, x, i));
        if (!finite(a)) {
            *where = i;
            return FP8_BAND_NONFINITE;
        }
        m = a > m ? a : m;
    }
    *amax = m;
    return FP8_BAND_OK;
}

fp8_deq_result fp8_dequant_row_ref(const uint8_t *q, uint64_t n, const float *s, uint64_t group,
                                   fp8_dtype out, void *y, uint64_t *where)
{
    for (uint64_t i = 0; i < n; i++)
        if ((q[i] & 0x7F) == 0x7F) {
            *where = i;
            return FP8_DEQ_NAN_CODE;
        }
    for (uint64_t i = 0; i < n; i++) {
        float v = fp8_e4m3_to_f32(q[i]) * s[i / group];
        bool inf;
        if (out == FP8_DTYPE_F32) {
            ((float *)y)[i] = v;
            inf = !finite(v);
        } else if (out == FP8_DTYPE_BF16) {
            uint16_t h = fp8_f32_to_bf16(v);
            ((uint16_t *)y)[i] = h;
            inf = (h & 0x7FFF) == 0x7F80;
        } else {
            uint16_t h = fp8_f32_to_f16(v);
            ((uint16_t *)y)[i] = h;
            inf = (h & 0x7FFF) == 0x7C00;
        }
        if (inf) {
            *where = i;
            return FP8_DEQ_OVERFLOW;
        }
    }
    return FP8_DEQ_OK;
}

/* verify --against's bound, element by element (fp8conv-formats(5), ERROR BOUND). */
void fp8_bound_span_ref(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                        const float *s, uint64_t n, uint64_t counts[2])
{
    for (uint64_t i = 0; i < n; i++) {
        float yf = q ? fp8_e4m3_to_f32(q[i]) * s[i] : y[i];
        unsigned r = fp8_bound_test(fp8_load_f32(dt, x, i), yf, s[i]);
        counts[0] += r & 1;
        counts[1] += r >> 1;
    }
}
