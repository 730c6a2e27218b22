/*
 * quant_ref.h - the reference numerics (quant_ref.c): a band of rows in,
 * E4M3 codes and scales out; amax; dequantization; verify's error bound.
 * This is fp8conv-formats(5) in code.  The fast paths (quant_cpu.h) must
 * give the same bytes, and the tests compare them.
 */
#ifndef FP8_QUANT_REF_H
#define FP8_QUANT_REF_H

#include "common/fp8_math.h"
#include "common/internal.h"
#include "common/types.h"
#include "compute/codec.h"
#include "compute/fp4_ref.h"


/* Scales a band produces: ceil(rows / group_rows) * ceil(cols / group_cols). */
uint64_t fp8_band_scale_count(const fp8_band *b);

/* Why the band's scale rule found no scale for a group
 * (FP8_BAND_SCALE_OVERFLOW), for messages. */
const char *fp8_band_no_scale_why(const fp8_band *b);

/* q gets rows * cols codes (contiguous, row-major, fp8_band_code_bytes);
 * scales gets the stored scales of the groups, row-major,
 * fp8_band_scale_size() bytes each. */
fp8_band_result fp8_band_quantize_ref(const fp8_band *b, const void *src, uint8_t *q,
                                      void *scales, uint64_t *where);

/* The largest magnitude of n contiguous elements (pass 1 of per-tensor
 * scaling); FP8_BAND_NONFINITE with *where on a NaN or infinity. */
fp8_band_result fp8_amax_ref(fp8_dtype src, const void *x, uint64_t n, float *amax,
                             uint64_t *where);

/*
 * Dequantization of a row segment: n E4M3 codes, code i scaled by
 * s[i / group], y = decode(q) * s in one fp32 multiplication, rounded to
 * `out` (BF16 or F16: nearest even; F32: as is) into y, n elements.  Bad
 * input, checked in this order:
 *   FP8_DEQ_NAN_CODE: *where is the first NaN code (0x7F, 0xFF);
 *   FP8_DEQ_OVERFLOW: no NaN code; *where is the first value that is
 *   infinite in `out` (the fp32 product overflowed, or the rounding did).
 * y is then partly written.  The scales are finite and > 0.
 */
fp8_deq_result fp8_dequant_row_ref(const uint8_t *q, uint64_t n, const float *s, uint64_t group,
                                   fp8_dtype out, void *y, uint64_t *where);


/* n elements of a row (whole groups when packed), n * bits / 8 bytes of
 * codes, element i's scale at scales[i / group], into y.  On
 * FP8_DEQ_NAN_CODE, _NAN_SCALE (its group's first element) or _OVERFLOW,
 * *where is the element and y is partly written. */
fp8_deq_result fp8_dequant_ref(const fp8_dequant_spec *d, const uint8_t *codes,
                               const void *scales, uint64_t n, void *y, uint64_t *where);

/* verify --against's bound (fp8conv-formats(5), ERROR BOUND) over n elements: x the source (BF16,
 * F16 or F32), y its dequantized values (when q is not NULL, y = E4M3
 * q[i] * s[i] in fp32), s each element's scale.  counts[0] += the elements
 * beyond 464 * s (clipped), counts[1] += the others further from x than
 * max(|x|/16, s/1024), both with a 1e-6 margin, in double; n < 2^32.  The
 * reference tests each element (fp8_bound_test). */
void fp8_bound_span_ref(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                        const float *s, uint64_t n, uint64_t counts[2]);


/* One element against its bound: 1 when clipped (beyond 464 * scale: 448
 * is the nearest E4M3 value to anything up to 464, the midpoint to 480, a
 * tie that rounds to 448's even code, so a stored scale a little below
 * amax / 448, a BF16 scale rounded to nearest, only rounds the largest
 * elements), 2 when further from the source than max(|x|/16, s/1024), in
 * double as fp8conv-formats(5), ERROR BOUND states it (a NaN source is outside). */
static inline __attribute__((always_inline)) unsigned fp8_bound_test(float xf, float yf, float sf)
{
    double xv = xf, s = sf, d = __builtin_fabs(xv - (double)yf), ax = __builtin_fabs(xv), bound = ax / 16;
    unsigned clipped = ax > 464.0 * s * (1 + 1e-6);
    bound = bound > s / 1024.0 ? bound : s / 1024.0;
    unsigned outside = !clipped & !(d <= bound * (1 + 1e-6));
    return clipped | outside << 1;
}

/* ---------------------------------------------------------------- E2M1's bound (verify --against;
 * fp8conv-formats(5), ERROR BOUND) */

/* How a packed FP4 weight's group scales divide its elements: its scheme's
 * row (the scale element decodes the byte), and the stored second level
 * when there is one (compressed-tensors divides by it: d = scale / second;
 * ModelOpt multiplies: d = scale * second); second 1 for none (MXFP4's
 * E8M0 byte b: d = 2^(b - 127)). */
typedef struct {
    const fp8_scheme_traits *scheme;
    bool divides;
    double second;
} fp8_group_rule;

/* One group's verdict: elements whose code is not the E2M1 value nearest
 * x / d (within a relative 2^-20 of it, either way at a tie), the first of
 * them (UINT32_MAX: none), elements beyond 7 d stored as +-6 (clipped),
 * whether the scale does not serve the group's largest element (its
 * elements are then not judged), and a NaN or negative scale (left to bad-scale: not
 * judged). */
typedef struct {
    uint64_t bad, clipped;
    uint32_t first_bad;
    bool bad_scale, unjudged;
} fp8_group_bound;

/* The bound of one group of n elements of dtype dt at x, their codes
 * (`packed`, element 2i in the low nibble of byte i) and its scale byte. */
void fp8_e2m1_bound_group_ref(const fp8_group_rule *r, fp8_dtype dt, const void *x,
                               const uint8_t *packed, uint32_t n, uint8_t scale,
                               fp8_group_bound *out);
/* Whether a packed scheme's codes have that bound: E2M1's.  INT4 has none:
 * GPTQ and AWQ, which write most INT4 releases, choose codes other than the
 * nearest on purpose, so only re-quantizing judges them. */
static inline bool fp8_scheme_has_group_bound(const fp8_scheme_traits *t)
{
    return t->elem == FP8_ELEM_E2M1;
}
/* Its divisor d under scale byte `scale` (not NaN). */
double fp8_group_divisor(const fp8_group_rule *r, uint8_t scale);

#endif
