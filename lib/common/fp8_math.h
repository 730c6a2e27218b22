/*
 * fp8_math.h - bit-exact number conversions, shared by the C code and the
 * CUDA kernels (every function is __host__ __device__ under nvcc).  This is
 * fp8conv-formats(5), ELEMENT TYPES, in code; tests/check_fp8_math.c checks it
 * exhaustively against NVIDIA's host implementation in cuda_fp8.h.
 *
 * Everything works on the bits, so no compiler flag, FPU mode or library
 * rounding can change a result.
 */
#ifndef FP8_MATH_H
#define FP8_MATH_H

#include <stdbool.h>
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

/* Neither NaN nor an infinity (no libm: the kernels share it). */
FP8_HD bool fp8_f32_finite(float x) { return (fp8_f32_bits(x) & 0x7F800000) != 0x7F800000; }

FP8_HD float fp8_f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ceil(a / b) for b > 0: the groups a dimension of a elements has. */
FP8_HD uint64_t fp8_ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
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

/* fp32 to IEEE binary16, round to nearest even, subnormals kept, overflow to
 * infinity (as __float2half_rn). */
FP8_HD uint16_t fp8_f32_to_f16(float x)
{
    uint32_t u = fp8_f32_bits(x), a = u & 0x7FFFFFFF;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if (a > 0x7F800000)
        return sign | 0x7E00;
    if (a >= 0x477FF000) /* 65520, halfway to 2^16: rounds to infinity */
        return sign | 0x7C00;
    if (a >= 0x38800000) /* 2^-14, the smallest normal: rebias 127 -> 15 */
        return sign | (uint16_t)fp8_shift_rne(a - 0x38000000, 13);
    uint32_t e = a >> 23;
    if (e < 102) /* below 2^-25: at most half a unit of 2^-24 */
        return sign;
    return sign | (uint16_t)fp8_shift_rne((a & 0x7FFFFF) | 0x800000, 126 - e);
}

/* ------------------------------------------------------------ E4M3 (OCP fn) */

#define FP8_E4M3_MAX 448.0f
#define FP8_E4M3_MAX_CODE 0x7E
/* Anything up to this, in units of the scale, rounds to 448 (the tie at 464
 * goes to 448's even code): beyond it an element saturates. */
#define FP8_E4M3_NO_CLIP 464.0f
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

/* ------------------------------------------- scales (fp8conv-formats(5), SCHEMES) */

/* 2^e as fp32, exactly, for e in [-149, 127]. */
FP8_HD float fp8_pow2(int e)
{
    return fp8_f32_from_bits(e >= -126 ? (uint32_t)(e + 127) << 23 : 1u << (e + 149));
}

/* For a finite amax > 0: the smallest integer E with amax <= 448 * 2^E, from
 * the bits (448 = 1.75 * 2^8, so E = e - 8, plus one when the significand
 * of amax exceeds 1.75). */
FP8_HD int fp8_exp_ceil(float amax, int *floor_log2)
{
    uint32_t a = fp8_f32_bits(amax) & 0x7FFFFFFF;
    int e = (int)(a >> 23) - 127;
    if (a < 0x00800000) { /* subnormal: normalise */
        e = -126;
        while (!(a & 0x00800000)) {
            a <<= 1;
            e--;
        }
    }
    if (floor_log2)
        *floor_log2 = e;
    return e - 8 + ((a & 0x7FFFFF) > 0x600000);
}

/* How a scale is computed from a group's amax and stored. */
typedef enum {
    FP8_SCALE_F32,       /* amax / 448 in fp32 */
    FP8_SCALE_BF16,      /* amax / 448 rounded to bf16 (compressed-tensors, bf16 weights) */
    FP8_SCALE_F16,       /* amax / 448 rounded to f16 (compressed-tensors, f16 weights) */
    FP8_SCALE_UE8M0_F32, /* 2^E rounded up, stored as fp32 (--scale-fmt ue8m0) */
    FP8_SCALE_E8M0_RCEIL, /* MX: byte E + 127, E rounded up (never saturates) */
    FP8_SCALE_E8M0_FLOOR, /* MX: byte E + 127, E = floor(log2 amax) - 8 (OCP v1.0) */
} fp8_scale_kind;

/* Bytes of one stored scale of that kind. */
FP8_HD unsigned fp8_scale_size(fp8_scale_kind kind)
{
    return kind == FP8_SCALE_BF16 || kind == FP8_SCALE_F16 ? 2
           : kind >= FP8_SCALE_E8M0_RCEIL                  ? 1
                                                           : 4;
}

/* Stores scale i (its bits from fp8_scale_make) in an array of `size`-byte scales. */
FP8_HD void fp8_scale_store(void *scales, unsigned size, uint64_t i, uint32_t bits)
{
    if (size == 4)
        ((uint32_t *)scales)[i] = bits;
    else if (size == 2)
        ((uint16_t *)scales)[i] = (uint16_t)bits;
    else
        ((uint8_t *)scales)[i] = (uint8_t)bits;
}

/*
 * The scale for a group whose largest magnitude is `amax` (finite, >= 0):
 * *stored gets its bits as written to the file (in the low bytes), and the
 * return value is the fp32 value that elements are divided by, which is
 * exactly the stored value.  An all-zero group gets 1 (byte 0, 2^-127, for
 * MX); a scale that would underflow to 0 gets the smallest positive value of
 * its dtype.  Returns 0 when no scale of the kind serves: an F16 scale above
 * 65504 cannot be stored, and a group whose largest element would read back
 * as infinity (its code times the scale past the fp32 range: a power-of-two
 * scale rounded up, 2^120, with amax at or above 248 * 2^120, or an amax near
 * FLT_MAX) cannot be written at all.
 *
 * BF16 and F16 scales are amax / 448 rounded to nearest, which can fall a
 * little below it: the largest elements then round to 448 as they would
 * anyway, as long as amax <= 464 s (464 is the midpoint between 448 and the
 * 480 that E4M3 lacks).  Only a subnormal scale, whose relative spacing is
 * coarse, can fall further; it is taken one step up, so that no element
 * saturates.
 */
FP8_HD float fp8_scale_round(fp8_scale_kind kind, float amax, uint32_t *stored)
{
    float s = amax / FP8_E4M3_MAX;
    int e;
    switch (kind) {
    case FP8_SCALE_F32:
        s = amax == 0 ? 1.0f : s == 0 ? fp8_pow2(-149) : s;
        *stored = fp8_f32_bits(s);
        return s;
    case FP8_SCALE_BF16: {
        uint16_t b = amax == 0 ? 0x3F80 : fp8_f32_to_bf16(s);
        b = (b & 0x7FFF) ? b : 0x0001; /* 2^-133 */
        b += amax > FP8_E4M3_NO_CLIP * fp8_bf16_to_f32(b); /* subnormal: see above */
        *stored = b;
        return fp8_bf16_to_f32(b);
    }
    case FP8_SCALE_F16: {
        if (s > 65504.0f)
            return 0;
        uint16_t h = amax == 0 ? 0x3C00 : fp8_f32_to_f16(s);
        h = (h & 0x7FFF) ? h : 0x0001; /* 2^-24 */
        h += amax > FP8_E4M3_NO_CLIP * fp8_f16_to_f32(h); /* subnormal: see above */
        *stored = h;
        return fp8_f16_to_f32(h);
    }
    case FP8_SCALE_UE8M0_F32:
        e = amax == 0 ? 0 : fp8_exp_ceil(amax, NULL);
        s = fp8_pow2(e < -149 ? -149 : e);
        *stored = fp8_f32_bits(s);
        return s;
    case FP8_SCALE_E8M0_RCEIL:
    case FP8_SCALE_E8M0_FLOOR:
        if (amax == 0) {
            e = -127;
        } else {
            int fl;
            e = fp8_exp_ceil(amax, &fl);
            if (kind == FP8_SCALE_E8M0_FLOOR)
                e = fl - 8;
            e = e < -127 ? -127 : e > 127 ? 127 : e;
        }
        *stored = (uint32_t)(e + 127);
        return fp8_pow2(e);
    }
    return 0;
}

/* fp8_scale_round, or 0 where the group's largest element would read back
 * as infinity (see above). */
FP8_HD float fp8_scale_make(fp8_scale_kind kind, float amax, uint32_t *stored)
{
    float s = fp8_scale_round(kind, amax, stored);
    /* below 2^126, code * s stays under 2^128: the code of amax is at most
     * amax / s rounded to 3 bits, less than 1.07 amax / s */
    const float flt_max = 0x1.fffffep127f;
    if (amax >= 0x1p126f && s != 0 && fp8_e4m3_to_f32(fp8_f32_to_e4m3(amax / s)) * s > flt_max)
        return 0;
    return s;
}


/* ------------------------------------ engine numerics (fp8conv-formats(5), PROFILES) */

/* How a group's scale comes from its amax a (after the floor), in fp32 as
 * a GPU computes it: s is what is stored and what elements are divided by;
 * the inverted rules compute k, multiply elements by it and store fl(1/k)
 * (INV_APART: a * fl(1/448), computed beside k). */
typedef enum {
    FP8_RULE_DIV,       /* s = a / 448 (fp8conv: fp8_scale_make, every scale kind) */
    FP8_RULE_MUL_RECIP, /* s = a * fl(1/448): `amax / 448.0` on a CUDA tensor */
    FP8_RULE_INV_DIV,   /* k = 448 / a; FLT_MAX where that is infinite */
    FP8_RULE_INV_RECIP, /* k = fl(fl(1/a) * 448): torch's `448.0 / tensor` */
    FP8_RULE_INV_APART, /* k = 448 / a, and the stored s = a * fl(1/448) apart, not fl(1/k) */
} fp8_scale_rule;

/* A profile's numbers (common/types.h holds the rows): all zero is
 * fp8conv's own rule, today's bytes. */
typedef struct {
    uint8_t rule;      /* fp8_scale_rule */
    uint8_t recip;     /* DIV, MUL_RECIP: elements times fl(1/s), not divided by s */
    float amax_floor;  /* a = max(amax, amax_floor) first */
    float scale_floor; /* DIV, MUL_RECIP: s = max(s, scale_floor) after */
    /* DIV: s rounded to nearest in the scale kind's dtype (F32, BF16, F16), that
     * dtype's epsilon where it is 0, and x / s rounded to that dtype before E4M3:
     * torch's bf16 weight / bf16 scale, a bf16 tensor */
    uint8_t in_kind;
    /* E8M0 kinds (MX): E = amax's exponent, one more where its mantissa is 1.75 or
     * more, minus 8 (compressed-tensors' generate_mx_scales); not the rceil/floor rule */
    uint8_t mx_up;
    /* INV_DIV: where 448 / a is infinite, k is the input dtype's largest finite value
     * (TE's block kernels), which the band sets in inf_k (0: FLT_MAX, the row's own) */
    uint8_t inf_src;
    float inf_k;
    /* NVFP4: every step in fp32 (TE's NVFP4 1-D, fp4_math.h fp4_nv_global_f32 and
     * fp4_nv_scale_f32), not in the weight's dtype (compressed-tensors' steps) */
    uint8_t fp4_f32;
} fp8_numerics;

/* Whether n is fp8conv's own arithmetic (all zero, no amax floor either). */
FP8_HD bool fp8_numerics_own(const fp8_numerics *n)
{
    return n->rule == FP8_RULE_DIV && !n->recip && n->amax_floor == 0 && n->scale_floor == 0 &&
           !n->in_kind && !n->mx_up && !n->fp4_f32;
}

/* Whether n is fp8conv's rule on an amax floor (no other setting), which
 * takes every scale kind: fp8_scale_make of max(amax, amax_floor). */
FP8_HD bool fp8_numerics_any_kind(const fp8_numerics *n)
{
    return n->rule == FP8_RULE_DIV && !n->recip && n->scale_floor == 0 && !n->in_kind &&
           !n->mx_up;
}

/* Whether n computes scales of kind k: every kind (fp8_numerics_any_kind),
 * F32, and under in_kind BF16 and F16. */
FP8_HD bool fp8_numerics_takes_kind(const fp8_numerics *n, fp8_scale_kind k)
{
    return fp8_numerics_any_kind(n) || k == FP8_SCALE_F32 ||
           (n->in_kind && (k == FP8_SCALE_BF16 || k == FP8_SCALE_F16)) ||
           (n->mx_up && (k == FP8_SCALE_E8M0_RCEIL || k == FP8_SCALE_E8M0_FLOOR));
}

/* Whether elements are multiplied by the factor fp8_numerics_scale returns
 * (else divided by it). */
FP8_HD bool fp8_numerics_mul(const fp8_numerics *n)
{
    return n->recip || n->rule >= FP8_RULE_INV_DIV;
}

/* What an element's code is taken of under factor d (fp8_numerics_scale's)
 * and scale kind k: x / d or x * d, in k's dtype under in_kind. */
FP8_HD float fp8_numerics_value(const fp8_numerics *n, fp8_scale_kind k, float x, float d)
{
    float y = fp8_numerics_mul(n) ? x * d : x / d;
    if (n->in_kind && k == FP8_SCALE_BF16)
        return fp8_bf16_to_f32(fp8_f32_to_bf16(y));
    if (n->in_kind && k == FP8_SCALE_F16)
        return fp8_f16_to_f32(fp8_f32_to_f16(y));
    return y;
}

/* An element's code under factor d and scale kind k. */
FP8_HD uint8_t fp8_numerics_code(const fp8_numerics *n, fp8_scale_kind k, float x, float d)
{
    return fp8_f32_to_e4m3(fp8_numerics_value(n, k, x, d));
}

/*
 * The scale of a group of largest magnitude amax (finite, >= 0) under n:
 * *stored gets its bits (kind F32 unless fp8_numerics_any_kind), and the return value is the factor elements are
 * divided by or multiplied with (fp8_numerics_mul).  An all-zero group
 * that no floor lifts gets scale 1.  Returns 0 where none serves: as
 * fp8_scale_make, and where the profile's own scale or factor is no finite
 * positive fp32 (an amax below 2^-128 under an inverted rule, a tiny s
 * under fl(1/s)).
 */
FP8_HD float fp8_numerics_scale(const fp8_numerics *n, fp8_scale_kind kind, float amax,
                                uint32_t *stored)
{
    if (fp8_numerics_any_kind(n))
        return fp8_scale_make(kind, amax > n->amax_floor ? amax : n->amax_floor, stored);
    if (n->mx_up && (kind == FP8_SCALE_E8M0_RCEIL || kind == FP8_SCALE_E8M0_FLOOR)) {
        /* the exponent bits plus the carry of adding a quarter of the mantissa's range; an
         * amax of exponent 0 (zero, subnormal) or under 2^-119 gets byte 0; from 1.75 * 2^127
         * up the carry makes infinity, which the engine stores as byte 255 (NaN): none */
        uint32_t u = fp8_f32_bits(amax), eb = u >> 23, up = (u & 0x7FFFFF) >= 0x600000;
        if (eb + up > 254)
            return 0;
        int e = eb ? (int)(eb + up) - 127 - 8 : -127;
        e = e < -127 ? -127 : e;
        *stored = (uint32_t)(e + 127);
        return fp8_pow2(e);
    }
    const float inf = fp8_f32_from_bits(0x7F800000), flt_max = 0x1.fffffep127f;
    float a = amax > n->amax_floor ? amax : n->amax_floor, s, d;
    if (n->rule >= FP8_RULE_INV_DIV) {
        d = a == 0 ? 1.0f : n->rule != FP8_RULE_INV_RECIP ? FP8_E4M3_MAX / a
                                                           : 1.0f / a * FP8_E4M3_MAX;
        if (n->rule == FP8_RULE_INV_DIV && d == inf)
            d = n->inf_k > 0 ? n->inf_k : flt_max;
        s = n->rule == FP8_RULE_INV_APART && a != 0 ? a * (1.0f / FP8_E4M3_MAX) : 1.0f / d;
    } else {
        s = n->rule == FP8_RULE_DIV ? a / FP8_E4M3_MAX : a * (1.0f / FP8_E4M3_MAX);
        s = s > n->scale_floor ? s : n->scale_floor;
        s = a == 0 && s == 0 ? 1.0f : s;
        if (n->in_kind && kind == FP8_SCALE_BF16) { /* s: a's quotient, never 0 or NaN */
            uint16_t b = fp8_f32_to_bf16(a / FP8_E4M3_MAX);
            s = fp8_bf16_to_f32(b ? b : 0x3C00); /* bf16's epsilon, 2^-7 */
        } else if (n->in_kind && kind == FP8_SCALE_F16) {
            uint16_t h = fp8_f32_to_f16(a / FP8_E4M3_MAX);
            s = fp8_f16_to_f32(h ? h : 0x1400); /* f16's epsilon, 2^-10 */
        } else if (n->in_kind) {
            s = a == 0 ? 0x1p-23f : a / FP8_E4M3_MAX; /* fp32's epsilon */
        }
        d = n->recip ? 1.0f / s : s;
    }
    if (!(s > 0 && d > 0 && s < inf && d < inf))
        return 0;
    /* as fp8_scale_make: the largest element must read back finite */
    uint8_t top = fp8_numerics_code(n, kind, amax, d);
    if (amax >= 0x1p126f && fp8_e4m3_to_f32(top) * s > flt_max)
        return 0;
    *stored = !n->in_kind || kind == FP8_SCALE_F32 ? fp8_f32_bits(s)
              : kind == FP8_SCALE_BF16             ? fp8_f32_to_bf16(s)
                                                   : fp8_f32_to_f16(s);
    return d;
}

#endif
