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
    if (!fp8_numerics_own(&b->num))
        return "the profile's rule gives it no finite positive fp32 scale (an amax too small "
               "for its reciprocal), or its largest element would read back as infinity";
    return b->kind == FP8_SCALE_F16 ? "a scale above 65504 cannot be stored in F16"
                                    : "its largest element times any scale of this format would "
                                      "read back as infinity (past the fp32 range)";
}

/* The first non-finite element of the band, in row-major order. */
static uint64_t first_nonfinite(const fp8_band *b, const void *src)
{
    for (uint64_t r = 0; r < b->rows; r++)
        for (uint64_t c = 0; c < b->cols; c++)
            if (!fp8_f32_finite(fp8_load_f32(b->src, src, r * b->cols + c)))
                return r * b->cols + c;
    return 0;
}

fp8_band_result fp8_band_quantize_ref(const fp8_band *b, const void *src, uint8_t *q,
                                      void *scales, uint64_t *where)
{
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_E2M1) /* groups within rows: one run */
        return (fp8_band_result)fp4_quantize_row(&b->num, b->scheme, b->src, src,
                                                 b->rows * b->cols, b->global, q, scales, where);
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_I4) /* its own codec: int4_ref.c */
        return fp8_int4_quantize_ref(b, src, q, scales, where);
    for (uint64_t r = 0; r < b->rows; r++)
        for (uint64_t c = 0; c < b->cols; c++)
            if (!fp8_f32_finite(fp8_load_f32(b->src, src, r * b->cols + c))) {
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
                s = fp8_numerics_scale(&b->num, b->kind, amax, &bits);
                if (s == 0) {
                    *where = r0 * b->cols + c0;
                    return FP8_BAND_SCALE_OVERFLOW;
                }
                fp8_scale_store(scales, fp8_scale_size(b->kind), g, bits);
            }
            for (uint64_t r = r0; r < r1; r++)
                for (uint64_t c = c0; c < c1; c++)
                    q[r * b->cols + c] =
                        fp8_numerics_code(&b->num, b->kind,
                                          fp8_load_f32(b->src, src, r * b->cols + c), s);
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
        if (!fp8_f32_finite(a)) {
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
        bool inf = fp8_store_out(out, y, i, v);
        if (inf) {
            *where = i;
            return FP8_DEQ_OVERFLOW;
        }
    }
    return FP8_DEQ_OK;
}

fp8_deq_result fp8_dequant_ref(const fp8_dequant_spec *d, const uint8_t *codes,
                               const void *scales, uint64_t n, void *y, uint64_t *where)
{
    if (d->table) {
        fp4_deq_result r = fp4_dequant_row(codes, scales, n, d->table, y, 1, where);
        return r == FP4_DEQ_NAN_SCALE ? FP8_DEQ_NAN_SCALE
               : r == FP4_DEQ_OVERFLOW ? FP8_DEQ_OVERFLOW
                                       : FP8_DEQ_OK;
    }
    const float *s = scales;
    fp8_deq_result r = fp8_dequant_row_ref(codes, n, s, d->group, d->out, y, where);
    if (r != FP8_DEQ_OVERFLOW || !d->keep_inf)
        return r;
    /* no NaN code: every value, the infinities too */
    for (uint64_t i = 0; i < n; i++) {
        float v = fp8_e4m3_to_f32(codes[i]) * s[i / d->group];
        if (d->out == FP8_DTYPE_F32)
            ((float *)y)[i] = v;
        else
            ((uint16_t *)y)[i] = d->out == FP8_DTYPE_BF16 ? fp8_f32_to_bf16(v) : fp8_f32_to_f16(v);
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

/* ---------------------------------------------------------------- E2M1's bound (verify --against)
 *
 * Stated from the layouts and E2M1's grid alone, not from the quantizer's
 * steps (fp4_math.h): any producer that rounds to the nearest code under a
 * scale that serves the group passes it, the reference first among them
 * (tests/check_fp4_quant.c holds the reference's own rows to it). */

/* A relative margin on x / d: the producers divide in fp32 (two or three
 * roundings of 2^-24 each, ModelOpt's reciprocal second level among them). */
#define SLACK 0x1p-20

/* The edges of the interval that rounds to each E2M1 magnitude (code bits
 * 0-2): halfway to its neighbours, 0 below the first and no
 * edge above the last (what lies past 6 is clipped to it). */
static const double edge_lo[8] = { 0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 };
static const double edge_hi[8] = { 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, __builtin_inf() };

double fp8_group_divisor(const fp8_group_rule *r, uint8_t scale)
{
    double s = fp8_elem_get(r->scheme->scale_elem[0])->decode(scale);
    return r->divides ? s / r->second : s * r->second;
}

/* Whether a group scale serves a group of largest magnitude m > 0, whose
 * elements are divided by d: NVFP4's E4M3 byte lies within one code of t =
 * m / (6 * the second level's multiplier), clamped to 448 and rounded to
 * E4M3 (0.125, the reference's replacement of a zero scale, is taken where
 * t rounds to zero or to the smallest subnormal); MXFP4's m / d lies in
 * [3, 8), or below 8 under the smallest byte, 0. */
static bool scale_serves(const fp8_group_rule *r, uint8_t scale, double m, double d)
{
    if (r->scheme->pow2_scales)
        return m / d < 8 && (m / d >= 3 || scale == 0);
    double t = r->divides ? m * r->second / 6 : m / (6 * r->second);
    double top = fp8_elem_get(r->scheme->scale_elem[0])->max_finite;
    uint8_t n = fp8_f32_to_e4m3((float)(t < top ? t : top));
    if (scale == fp8_f32_to_e4m3(0.125f) && t < 0x1p-9)
        return true;
    return scale + 1 >= n && scale <= n + 1;
}

/* The element loops, one copy per source dtype (fp8_e2m1_bound_group_ref
 * passes a constant), so that they vectorize. */
static inline __attribute__((always_inline)) void e2m1_bound_group(const fp8_group_rule *r,
                                                                   fp8_dtype dt, const void *x,
                                                                   const uint8_t *packed,
                                                                   uint32_t n, uint8_t scale,
                                                                   fp8_group_bound *out)
{
    *out = (fp8_group_bound){ .first_bad = UINT32_MAX };
    double m = 0;
    for (uint32_t i = 0; i < n; i++) {
        double a = __builtin_fabs((double)fp8_load_f32(dt, x, i));
        m = a > m ? a : m; /* (a NaN is left out: it is outside the bound below) */
    }
    const fp8_elem_traits *se = fp8_elem_get(r->scheme->scale_elem[0]);
    if (!fp8_elem_scale_ok(se, scale)) { /* verify's bad-scale */
        out->unjudged = true;
        return;
    }
    double d = fp8_group_divisor(r, scale);
    /* an all-zero group has nothing to serve: only its codes are judged */
    if (m > 0 && !(d > 0 && d < __builtin_inf() && scale_serves(r, scale, m, d))) {
        out->bad_scale = true;
        return; /* its elements cannot be judged under a scale that is no scale */
    }
    double inv = m > 0 ? 1 / d : 0;
    /* counted without a branch (the loop vectorizes); the first bad one
     * found again when there is one */
    uint32_t bad = 0, clipped = 0;
    for (uint32_t i = 0; i < n; i++) {
        unsigned code = packed[i / 2] >> (4 * (i & 1)) & 0xF, k = code & 7;
        float xf = fp8_load_f32(dt, x, i);
        double a = __builtin_fabs((double)xf) * inv;
        bool ok = (a * (1 + SLACK) >= edge_lo[k]) & (a * (1 - SLACK) <= edge_hi[k]) &
                  ((k == 0) | ((code >> 3) == (xf < 0)));
        bad += !ok;
        clipped += ok & (k == 7) & (a * (1 - SLACK) > 7);
    }
    out->bad = bad;
    out->clipped = clipped;
    for (uint32_t i = 0; bad && i < n; i++) {
        unsigned code = packed[i / 2] >> (4 * (i & 1)) & 0xF, k = code & 7;
        float xf = fp8_load_f32(dt, x, i);
        double a = __builtin_fabs((double)xf) * inv;
        if (!(a * (1 + SLACK) >= edge_lo[k] && a * (1 - SLACK) <= edge_hi[k] &&
              (k == 0 || (code >> 3) == (xf < 0)))) {
            out->first_bad = i;
            break;
        }
    }
}

void fp8_e2m1_bound_group_ref(const fp8_group_rule *r, fp8_dtype dt, const void *x,
                               const uint8_t *packed, uint32_t n, uint8_t scale,
                               fp8_group_bound *out)
{
    if (dt == FP8_DTYPE_BF16)
        e2m1_bound_group(r, FP8_DTYPE_BF16, x, packed, n, scale, out);
    else if (dt == FP8_DTYPE_F16)
        e2m1_bound_group(r, FP8_DTYPE_F16, x, packed, n, scale, out);
    else
        e2m1_bound_group(r, FP8_DTYPE_F32, x, packed, n, scale, out);
}
