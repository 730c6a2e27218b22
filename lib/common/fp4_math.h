/*
 * fp4_math.h - the per-element and per-group rules of FP4 quantization
 * (fp8conv-formats(5), FP4 QUANTIZATION), as FP8_HD functions: the one
 * description that the CPU reference (lib/compute/fp4_ref.c), its fast path
 * (fp4_cpu.c) and the CUDA kernel (kernels/quantize.cu) all call.  `bf16`
 * says the source dtype is BF16 (else F32): the reference (llm-compressor
 * 0.14.0.1 with the compressed-tensors it pins, 0.19.0; 0.17.0's CPU
 * numerics are the same) rounds each intermediate tensor to its dtype.
 */
#ifndef FP8_FP4_MATH_H
#define FP8_FP4_MATH_H

#include "common/fp8_math.h"

/* x rounded to the source dtype, as torch stores each intermediate tensor
 * of that dtype (BF16: to nearest even; F32: as is). */
FP8_HD float fp4_in_src(int bf16, float x)
{
    return bf16 ? fp8_bf16_to_f32(fp8_f32_to_bf16(x)) : x;
}

/* E2M1 code of v (clamped to [-6, 6] first), by FP4_E2M1_DATA.cast_to_fp4's
 * thresholds (round to nearest, ties to even), the sign bit from
 * signbit(sign(v) * |rounded|): set for v < 0, clear for -0. */
FP8_HD unsigned fp4_e2m1_code(float v)
{
    float a = v < 0 ? -v : v;
    unsigned c = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
               : a <= 2.5f  ? 4 : a < 3.5f  ? 5 : a <= 5.0f  ? 6 : 7;
    return c | (v < 0 ? 8u : 0u);
}

/* MXFP4's E8M0 byte for a group of largest magnitude m (mxfp_utils.py
 * generate_mx_scales): round_to_power_2 adds 1 << (mantissa bits - 2) to
 * m's bits and keeps sign and exponent (so from 1.75 * 2^e up it is
 * 2^(e+1)), then 127 + floor(log2) - 2, clamped to [0, 255] (log2(0) is
 * -inf: 0).  256 and up: no scale (E8M0 255 is NaN). */
FP8_HD int fp4_mx_byte(int bf16, float m)
{
    int e;
    if (bf16) {
        uint32_t b = ((uint32_t)fp8_f32_to_bf16(m) + (1u << 5)) & 0xFF80u;
        e = (int)(b >> 7);
    } else {
        uint32_t b = (fp8_f32_bits(m) + (1u << 21)) & 0xFF800000u;
        e = (int)(b >> 23);
    }
    if (e == 0) /* zero (or a subnormal below the carry): log2 is -inf, or below */
        return 0;
    if (e == 255)
        return 256;
    int byte = e - 2; /* 127 + (e - 127) - 2 */
    return byte < 0 ? 0 : byte;
}

/* MXFP4's group scale byte (fp4_mx_byte) and the divisor of its elements
 * (*d, 2^(byte - 127); 0 when the byte is 256: no scale). */
FP8_HD int fp4_mx_scale(int bf16, float m, float *d)
{
    int b = fp4_mx_byte(bf16, m);
    *d = b > 255 ? 0 : fp8_pow2(b - 127);
    return b;
}

/* NVFP4's group scale byte (E4M3) for a group of largest magnitude m under
 * second level `global`, and the divisor of its elements (*d).
 * calculate_qparams: max_val_pos / 6 in the dtype, times the global in fp32
 * (exact), to E4M3 after clamping to 448, and a zero scale replaced by
 * E4M3's eps 0.125; _quantize divides by scale / global, in fp32. */
FP8_HD uint8_t fp4_nv_scale(int bf16, float m, float global, float *d)
{
    float s = global * fp4_in_src(bf16, m / 6.0f);
    uint8_t b = fp8_f32_to_e4m3(s < 448.0f ? s : 448.0f);
    if (b == 0)
        b = fp8_f32_to_e4m3(0.125f);
    *d = fp8_e4m3_to_f32(b) / global;
    return b;
}

/* TE's NVFP4 1-D (fp8_numerics.fp4_f32; fp8conv-formats(5), PROFILES, te):
 * every step one fp32 operation rounded to nearest.  The second level of a
 * tensor of amax a: S_enc = 2688 / a, the largest fp32 where that is
 * infinite, 1 for a = 0. */
FP8_HD float fp4_nv_global_f32(float a)
{
    const float flt_max = 0x1.fffffep127f;
    float g = 2688.0f / a;
    g = g < flt_max ? g : flt_max;
    return a == 0 || g == 0 ? 1.0f : g;
}

/* TE's group scale byte, E4M3(m * fl(S_enc * fl(1/6))) rounded to nearest
 * and saturating (0 kept), and the factor its elements are multiplied by
 * (*k): fl(1 / fl(scale * fl(1/S_enc))), the largest fp32 where infinite. */
FP8_HD uint8_t fp4_nv_scale_f32(float m, float s_enc, float *k)
{
    const float flt_max = 0x1.fffffep127f;
    uint8_t b = fp8_f32_to_e4m3(m * (s_enc * (1.0f / 6.0f)));
    float r = 1.0f / (fp8_e4m3_to_f32(b) * (1.0f / s_enc));
    *k = r < flt_max ? r : flt_max;
    return b;
}

/* TE's element code: E2M1 of x * k rounded to nearest, saturating, its
 * sign bit the product's (cvt.rn.satfinite.e2m1x2.f32: -0 keeps it). */
FP8_HD unsigned fp4_e2m1_code_f32(float x, float k)
{
    float v = x * k;
    return fp4_e2m1_code(v) | (fp8_f32_bits(v) >> 28 & 8u);
}

/* One element's quotient by its group's divisor: NVFP4 in fp32 (the
 * element widened), MXFP4 in the dtype. */
FP8_HD float fp4_quotient(int nvfp4, int bf16, float x, float d)
{
    float v = x / d;
    return nvfp4 ? v : fp4_in_src(bf16, v);
}

#endif
