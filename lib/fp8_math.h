/*
 * fp8_math.h - bit-exact number conversions, shared by the C code and the
 * CUDA kernels (every function is __host__ __device__ under nvcc).  This is
 * the spec of SPEC section 3 in code; tests/check_fp8_math.c checks it
 * exhaustively against NVIDIA's host implementation in cuda_fp8.h.
 *
 * Everything works on the bits, so no compiler flag, FPU mode or library
 * rounding can change a result.
 */
#ifndef FP8_MATH_H
#define FP8_MATH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FP8_HD __host__ __device__ __forceinline__
#else
#define FP8_HD static inline
#endif

FP8_HD uint32_t fp8_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

FP8_HD float fp8_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Round `v` right by `shift` bits (1..31), to nearest, ties to even. */
FP8_HD uint32_t fp8_shift_rne(uint32_t v, unsigned shift)
{
    uint32_t r = v >> shift, rem = v & ((1u << shift) - 1), half = 1u << (shift - 1);
    return r + (rem > half || (rem == half && (r & 1)));
}

/* ------------------------------------------------------------ 16-bit inputs */

FP8_HD float fp8_bf16_to_f32(uint16_t b)
{
    return fp8_f32_from_bits((uint32_t)b << 16);
}

/* IEEE binary16 to fp32, exactly (subnormals, infinities, NaN payloads). */
FP8_HD float fp8_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0x1F)
        return fp8_f32_from_bits(sign | 0x7F800000 | m << 13);
    if (e != 0)
        return fp8_f32_from_bits(sign | (e + 112) << 23 | m << 13);
    if (m == 0)
        return fp8_f32_from_bits(sign);
    /* subnormal: m * 2^-24, exact in fp32 */
    float v = (float)m * fp8_f32_from_bits(0x33800000); /* 2^-24 */
    return sign ? -v : v;
}

/* fp32 to bf16, round to nearest even; NaN stays a (quiet) NaN. */
FP8_HD uint16_t fp8_f32_to_bf16(float x)
{
    uint32_t u = fp8_f32_bits(x);
    if ((u & 0x7FFFFFFF) > 0x7F800000)
        return (uint16_t)((u >> 16) | 0x0040);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

/* ------------------------------------------------------------ E4M3 (OCP fn) */

#define FP8_E4M3_MAX 448.0f
#define FP8_E4M3_MAX_CODE 0x7E
#define FP8_E4M3_NAN 0x7F

/*
 * fp32 to E4M3 as __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) and PTX
 * cvt.rn.satfinite.e4m3x2.f32: round to nearest even on the exact value,
 * subnormals kept, signed zero kept, finite values and infinities beyond 448
 * saturate to +-448, and every NaN gives the canonical NaN code 0x7F (sign
 * dropped, as NVIDIA's conversion does).
 */
FP8_HD uint8_t fp8_f32_to_e4m3(float x)
{
    uint32_t u = fp8_f32_bits(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    uint32_t a = u & 0x7FFFFFFF;
    if (a > 0x7F800000)
        return FP8_E4M3_NAN;
    if (a >= 0x43E00000) /* 448 and beyond, infinity included */
        return sign | FP8_E4M3_MAX_CODE;
    if (a >= 0x3C800000) /* 2^-6, the smallest normal: rebias, keep 3 bits */
        return sign | (uint8_t)fp8_shift_rne(a - 0x3C000000, 20);
    /* subnormal range: the result counts units of 2^-9; fp32 subnormals are far below */
    uint32_t e = a >> 23;
    if (e < 117) /* below 2^-10: less than half a unit, so zero */
        return sign;
    uint32_t mant = (a & 0x7FFFFF) | 0x800000; /* value = mant * 2^(e-150) */
    return sign | (uint8_t)fp8_shift_rne(mant, 141 - e);
}

FP8_HD float fp8_e4m3_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80) << 24, e = (b >> 3) & 0xF, m = b & 7;
    if (e == 0xF && m == 7)
        return fp8_f32_from_bits(sign | 0x7FC00000);
    if (e != 0)
        return fp8_f32_from_bits(sign | (e + 120) << 23 | m << 20);
    float v = (float)m * fp8_f32_from_bits(0x3B000000); /* m * 2^-9 */
    return sign ? -v : v;
}

#endif
