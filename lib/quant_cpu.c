/*
 * quant_cpu.c - the fast CPU path of the band quantizer.  Same bytes as
 * quant_ref.c (tests/check_quantize.c compares them on every scale kind and
 * odd shapes); faster because
 *   - the amax of a group is an integer maximum over the magnitude bits (the
 *     order of IEEE magnitudes), and the non-finite check falls out of it;
 *   - the per-element loops are branch-free, so the compiler vectorizes them,
 *     and are compiled for AVX2 and AVX-512 too, picked at run time.
 * The division stays a true fp32 division per element (SPEC 3): SIMD
 * division is correctly rounded exactly as the scalar one.
 */
#include "quant.h"

/*
 * fp32 to E4M3 without branches; equal to fp8_f32_to_e4m3 for every input
 * (tests/check_fp8_math.c checks).  Normal results round the rebiased bits
 * to nearest even; below 2^-6, adding 2^14 makes the FPU round |x| to a
 * multiple of 2^-9 (the ulp of 2^14), to nearest even, which is exactly the
 * E4M3 subnormal grid.
 */
static inline uint8_t e4m3_branchless(float x)
{
    uint32_t u = fp8_f32_bits(x), a = u & 0x7FFFFFFF;
    uint32_t normal = (a - 0x3C000000 + 0x7FFFF + ((a >> 20) & 1)) >> 20;
    uint32_t sub = fp8_f32_bits(fp8_f32_from_bits(a) + 16384.0f) - 0x46800000;
    uint32_t r = a >= 0x3C800000 ? normal : sub;
    r = a >= 0x43E00000 ? FP8_E4M3_MAX_CODE : r;
    r |= (u >> 24) & 0x80;
    return (uint8_t)(a > 0x7F800000 ? FP8_E4M3_NAN : r);
}

uint8_t fp8_e4m3_fast(float x) { return e4m3_branchless(x); }

/* Magnitude bits at or above this are infinity or NaN. */
static uint32_t inf_bits(fp8_dtype src)
{
    return src == FP8_DTYPE_BF16 ? 0x7F80 : src == FP8_DTYPE_F16 ? 0x7C00 : 0x7F800000;
}

FP8_CLONES static uint32_t amax_bits32(const uint32_t *p, uint64_t n)
{
    uint32_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t a = p[i] & 0x7FFFFFFF;
        m = a > m ? a : m;
    }
    return m;
}

FP8_CLONES static uint32_t amax_bits16(const uint16_t *p, uint64_t n)
{
    uint16_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint16_t a = p[i] & 0x7FFF;
        m = a > m ? a : m;
    }
    return m;
}

/* Largest magnitude bits of a row segment: for IEEE formats the magnitude
 * order is the integer order of the bits without the sign. */
static uint32_t amax_bits(fp8_dtype src, const void *x, uint64_t n)
{
    return src == FP8_DTYPE_F32 ? amax_bits32(x, n) : amax_bits16(x, n);
}

static float bits_to_f32(fp8_dtype src, uint32_t bits)
{
    return src == FP8_DTYPE_BF16  ? fp8_bf16_to_f32((uint16_t)bits)
           : src == FP8_DTYPE_F16 ? fp8_f16_to_f32((uint16_t)bits)
                                  : fp8_f32_from_bits(bits);
}

FP8_CLONES static void quantize_bf16(const uint16_t *p, uint64_t n, float s, uint8_t *q)
{
    for (uint64_t i = 0; i < n; i++)
        q[i] = e4m3_branchless(fp8_f32_from_bits((uint32_t)p[i] << 16) / s);
}

FP8_CLONES static void quantize_f32(const float *p, uint64_t n, float s, uint8_t *q)
{
    for (uint64_t i = 0; i < n; i++)
        q[i] = e4m3_branchless(p[i] / s);
}

/* mxfp8 on bf16, the common case, in one call: a group of 32 is too short to
 * pay for a call per group. */
FP8_CLONES static bool quantize_mx_bf16(const uint16_t *p, uint64_t groups, fp8_scale_kind kind,
                                        uint8_t *q, uint8_t *scales)
{
    for (uint64_t g = 0; g < groups; g++, p += 32, q += 32) {
        uint16_t m = 0;
        for (int i = 0; i < 32; i++) {
            uint16_t a = p[i] & 0x7FFF;
            m = a > m ? a : m;
        }
        if (m >= 0x7F80)
            return false;
        uint32_t bits = 0;
        fp8_scale_make(kind, fp8_bf16_to_f32(m), &bits);
        scales[g] = (uint8_t)bits;
        /* x / 2^E and x * 2^-E are the same real number, rounded once either
         * way, so the multiplication gives the division's bits; 2^-E is an
         * fp32 for every E in [-127, 127] */
        float r = fp8_pow2(127 - (int)bits);
        for (int i = 0; i < 32; i++)
            q[i] = e4m3_branchless(fp8_f32_from_bits((uint32_t)p[i] << 16) * r);
    }
    return true;
}

static void quantize_row(fp8_dtype src, const void *x, uint64_t n, float s, uint8_t *q)
{
    if (src == FP8_DTYPE_BF16) {
        quantize_bf16(x, n, s, q);
    } else if (src == FP8_DTYPE_F16) { /* rare in checkpoints: the exact decoder, scalar */
        const uint16_t *p = x;
        for (uint64_t i = 0; i < n; i++)
            q[i] = e4m3_branchless(fp8_f16_to_f32(p[i]) / s);
    } else {
        quantize_f32(x, n, s, q);
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
    if (b->src == FP8_DTYPE_BF16 && !b->fixed && b->group_rows == 1 && b->group_cols == 32 &&
        b->cols % 32 == 0 && ssize == 1) {
        if (quantize_mx_bf16(src, b->rows * b->cols / 32, b->kind, q, scales))
            return FP8_BAND_OK;
        return fp8_band_quantize_ref(b, src, q, scales, where); /* finds the first NaN */
    }
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
                fp8_scale_store(scales, ssize, g, bits);
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

/* ---------------------------------------------------------------- dequantize */

/* E4M3 (not NaN) to fp32 without branches: normal codes rebias, subnormal
 * ones are m * 2^-9 (exact). */
static inline float e4m3_decode(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80) << 24, e = (b >> 3) & 15, m = b & 7;
    uint32_t normal = sign | (e + 120) << 23 | m << 20;
    uint32_t sub = sign | fp8_f32_bits((float)m * 0x1p-9f);
    return fp8_f32_from_bits(e ? normal : sub);
}

FP8_CLONES static void dequant_span(const uint8_t *q, uint64_t n, float s, float *y)
{
    for (uint64_t i = 0; i < n; i++)
        y[i] = e4m3_decode(q[i]) * s;
}

FP8_CLONES static bool round_span(const float *y, uint64_t n, fp8_dtype out, uint16_t *h)
{
    uint32_t inf = 0;
    if (out == FP8_DTYPE_BF16) {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t u = fp8_f32_bits(y[i]);
            inf |= (u & 0x7F800000) == 0x7F800000;
            h[i] = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
        }
    } else {
        for (uint64_t i = 0; i < n; i++) {
            h[i] = fp8_f32_to_f16(y[i]);
            inf |= (h[i] & 0x7C00) == 0x7C00;
        }
    }
    return !inf;
}

FP8_CLONES static bool finite_span(const float *y, uint64_t n)
{
    uint32_t inf = 0;
    for (uint64_t i = 0; i < n; i++)
        inf |= (fp8_f32_bits(y[i]) & 0x7F800000) == 0x7F800000;
    return !inf;
}

/* The multi-versioned functions stay static: clang (14) emits no resolver for
 * an external target_clones function used from another file. */
void fp8_dequant_span(const uint8_t *q, uint64_t n, float s, float *y) { dequant_span(q, n, s, y); }

bool fp8_round_span(const float *y, uint64_t n, fp8_dtype out, uint16_t *h)
{
    return round_span(y, n, out, h);
}

bool fp8_finite_span(const float *y, uint64_t n) { return finite_span(y, n); }

/* ---------------------------------------------------------------- verify */

FP8_CLONES static void code_stats(const uint8_t *q, uint64_t n, fp8_code_stats *st)
{
    unsigned any = 0, nan = 0;
    uint64_t sat = 0;
    for (uint64_t i = 0; i < n; i++) {
        unsigned m = q[i] & 0x7F;
        any |= m;
        nan |= m == 0x7F;
        sat += m == 0x7E;
    }
    st->nonzero = any != 0;
    st->nan = nan != 0;
    st->saturated = sat;
}

void fp8_code_stats_span(const uint8_t *q, uint64_t n, fp8_code_stats *st) { code_stats(q, n, st); }
