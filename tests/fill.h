/*
 * fill.h - deterministic random inputs for comparing a fast path (the CPU's
 * or the GPU's) with the reference: finite values of every magnitude,
 * subnormals, zeros and near-ties, in BF16, F16 or F32.
 */
#ifndef FP8_FILL_H
#define FP8_FILL_H

#include <stdint.h>

#include "fp8conv.h"
#include "common/fp8_math.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static inline uint32_t next_u32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static inline void fill(fp8_dtype dt, void *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint32_t r = next_u32();
        float v;
        switch (r % 8) {
        case 0: v = 0; break;
        case 1: v = fp8_e4m3_to_f32((uint8_t)(r >> 8)) * 1.0625f; break;
        case 2: v = fp8_f32_from_bits(next_u32() & 0x807FFFFF); break; /* subnormal */
        default: v = fp8_f32_from_bits((next_u32() & 0x80FFFFFF) | (uint32_t)(100 + r % 56) << 23);
        }
        if (v != v || (fp8_f32_bits(v) & 0x7F800000) == 0x7F800000)
            v = 1;
        if (dt == FP8_DTYPE_F32)
            ((float *)x)[i] = v;
        else if (dt == FP8_DTYPE_BF16)
            ((uint16_t *)x)[i] = fp8_f32_to_bf16(v);
        else {
            uint16_t h = fp8_f32_to_f16(v);
            ((uint16_t *)x)[i] = (h & 0x7C00) == 0x7C00 ? 0x3C00 : h;
        }
    }
}

/* Rows of the classes engine profiles differ on (fp8_numerics): fill()'s
 * random rows, then row 0 all zero, row 1 tiny (below each profile's amax
 * floor: f32 and bf16 about 2^-118, f16 2^-24), row 2 huge (2^127, f16
 * 2^15), and row 3 an E4M3 midpoint pattern under amax 448 (so that a
 * scale near 1 decides the ties). */
static inline void fill_profile_rows(fp8_dtype dt, void *x, uint64_t rows, uint64_t cols)
{
    fill(dt, x, rows * cols);
    for (uint64_t r = 0; r < rows && r < 4; r++)
        for (uint64_t c = 0; c < cols; c++) {
            float v = r == 0   ? 0
                      : r == 1 ? (dt == FP8_DTYPE_F16 ? 0x1p-24f : 0x1p-118f) * (1 + c % 5)
                      : r == 2 ? (dt == FP8_DTYPE_F16 ? 0x1p15f : 0x1p127f) * (c % 2 ? -1.5f : 1)
                      : c == 0 ? 448.0f
                               : fp8_e4m3_to_f32((uint8_t)(c % 126)) +
                                     (fp8_e4m3_to_f32((uint8_t)(c % 126 + 1)) -
                                      fp8_e4m3_to_f32((uint8_t)(c % 126))) / 2;
            if (dt == FP8_DTYPE_F32)
                ((float *)x)[r * cols + c] = v;
            else
                ((uint16_t *)x)[r * cols + c] =
                    dt == FP8_DTYPE_BF16 ? fp8_f32_to_bf16(v) : fp8_f32_to_f16(v);
        }
}

/* FP4 quantize's input classes (tests/check_fp4_quant.c, kernel_cases.h):
 * n elements of class k (as fp32 in f):
 * 0 random magnitudes over many binades, 1 exact threshold ties under a
 * group max of 6, 2 zeros and -0, 3 small values beside a group max of
 * 2^100 (MXFP4 quotients below 2^-126, which bf16 rounds, to -0 for
 * some), 4 a NaN, 5 an infinity, 6 an element past E8M0's range, 7 fp32
 * and bf16 subnormals, 8 MXFP4 quotients about 2^-134 (bf16 rounds those
 * of at most 2^-134 to zero, with the sign bit clear) under group maxima
 * from 2^-10 to 2^20 (scale bytes 115 to 145: that edge 2^(byte - 261) a
 * bf16 subnormal or normal), or bf16 subnormals under maxima from 2^-130
 * to 2^-114 (bytes 0 to 11), powers of two among them (for the CPU's
 * 16-bit MXFP4 path: check_fp4_quant takes it, kernel_cases.h 0 to 7). */
static inline void fill_fp4q(int k, uint64_t n, float *f)
{
    static const float ties[] = { 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f };
    int e8 = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t r = next_u32();
        float u = (float)(r & 0xFFFF) / 65536.0f, sign = r & 0x10000 ? -1.0f : 1.0f;
        switch (k) {
        case 0: f[i] = sign * u * fp8_pow2((int)(r >> 17 & 31) - 16); break;
        case 1: f[i] = i % 16 == 0 ? 6.0f : sign * ties[r % 8] * (r & 0x20000 ? 1.0f : 0.5f); break;
        case 2: f[i] = r % 3 == 0 ? 0.0f : r % 3 == 1 ? -0.0f : sign * u; break;
        case 3: f[i] = i % 32 == 0 ? 0x1p100f : sign * fp8_pow2(-30 - (int)(r % 12)) * (1 + u); break;
        case 7: f[i] = sign * u * fp8_pow2(-126 - (int)(r >> 17 & 15)); break;
        case 8: /* per 32: the maximum 2^e8, then elements about 2^(e8 - 136) */
            if (i % 32 == 0) {
                e8 = r & 0x200000 ? (int)((r >> 22) % 31) - 10 : (int)((r >> 22) % 17) - 130;
                f[i] = sign * fp8_pow2(e8);
            } else {
                int e = e8 - 139 + (int)(r >> 17 & 7);
                f[i] = sign * fp8_pow2(e < -149 ? -136 + (int)(r >> 17 & 15) : e) *
                       (r & 0x100000 ? 1.0f : 1.0f + u);
            }
            break;
        default: f[i] = sign * u;
        }
    }
    if (k == 4)
        f[n / 2 + 3] = NAN;
    if (k == 5)
        f[n - 1] = -INFINITY;
    if (k == 6)
        f[n / 3] = 3.0e38f;
}

#endif
