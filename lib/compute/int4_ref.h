/*
 * int4_ref.h - the INT4 weight-only codec (int4_ref.c): compressed-tensors'
 * pack-quantized, symmetric, as llm-compressor's W4A16 preset writes it
 * (fp8conv-formats(5), INT4 WEIGHT ONLY).  The reference quantizer, the
 * steps its fast path (quant_cpu.c) shares, and the dequantizer.
 *
 * Every step rounds where the reference's CPU torch arithmetic rounds, in
 * the weight's dtype (BF16 or F16: the fp32 result rounded to nearest
 * even; F32: as is), compressed-tensors 0.19.0:
 *   scale  s = max(|min|, |max|) / 7.5 in the weight's dtype
 *          (quantization/utils/helpers.py calculate_qparams: bit_range 15
 *          over 2), 0 replaced by the dtype's eps (_get_dtype_eps: BF16
 *          2^-7, F16 2^-10, F32 2^-23);
 *   code   q = round_half_even(clamp(x / s rounded to the weight's dtype,
 *          -8, 7)) (forward_helpers.py _quantize, quant_args.py
 *          round_to_quantized_type_args), stored as q + 8, eight to an I32
 *          word, element i in bits 4 (i % 8) (pack_quantized/helpers.py
 *          pack_to_int32);
 *   value  y = q * s in the scale's dtype (_dequantize: x_q.to(scale.dtype)
 *          * scale): q * s is exact in fp32 for a 16-bit scale, so one
 *          fp32 product rounded into the output is the decompressor's.
 */
#ifndef FP8_INT4_REF_H
#define FP8_INT4_REF_H

#include "common/internal.h"
#include "common/types.h"
#include "compute/codec.h"

/* x rounded into the weight's dtype `src` (BF16, F16 or F32), as fp32. */
static inline float fp8_int4_round_src(fp8_dtype src, float x)
{
    if (src == FP8_DTYPE_BF16)
        return fp8_bf16_to_f32(fp8_f32_to_bf16(x));
    if (src == FP8_DTYPE_F16)
        return fp8_f16_to_f32(fp8_f32_to_f16(x));
    return x;
}

/* A group's scale from its largest magnitude m (finite), in the weight's
 * dtype: calculate_qparams' m / 7.5, then eps where that is 0 (an all-zero
 * group, or one whose quotient underflows). */
static inline float fp8_int4_scale(fp8_dtype src, float m)
{
    float s = fp8_int4_round_src(src, m / 7.5f);
    if (s == 0)
        s = src == FP8_DTYPE_BF16 ? 0x1p-7f : src == FP8_DTYPE_F16 ? 0x1p-10f : 0x1p-23f;
    return s;
}

/* The stored nibble (q + 8) of element x under scale s. */
static inline uint8_t fp8_int4_code(fp8_dtype src, float x, float s)
{
    float t = fp8_int4_round_src(src, x / s);
    t = t < -8.0f ? -8.0f : t > 7.0f ? 7.0f : t;
    /* round half to even (torch.round): exact for |t| <= 8 */
    t = (t + 0x1.8p23f) - 0x1.8p23f;
    return (uint8_t)((int)t + 8);
}

/* A scale as stored: its bits in the dtype of `kind` (F32, BF16 or F16: the
 * weight's, where compressed-tensors keeps it). */
static inline uint32_t fp8_int4_scale_bits(fp8_scale_kind kind, float s)
{
    return kind == FP8_SCALE_BF16  ? fp8_f32_to_bf16(s)
           : kind == FP8_SCALE_F16 ? fp8_f32_to_f16(s)
                                   : fp8_f32_bits(s);
}

/*
 * The band (group_rows 1, group_cols the chosen run, cols a multiple of
 * it) into rows * cols / 2 packed bytes, element 2i in the low nibble of
 * byte i (an I32 word's bytes, little-endian), and one scale per group,
 * fp8_band_scale_size() bytes each.  FP8_BAND_NONFINITE: *where is the
 * first NaN or infinity (the reference would store its garbage); no
 * other failure: m / 7.5 of a finite m is finite.
 */
fp8_band_result fp8_int4_quantize_ref(const fp8_band *b, const void *src, uint8_t *q,
                                      void *scales, uint64_t *where);

/*
 * Dequantization of n elements of one row (n a multiple of `group`):
 * `packed` n / 2 bytes as above, `scales` n / group scales of dtype `sdt`
 * (BF16, F16 or F32); y = (nibble - 8) * s in fp32, rounded once into
 * `out` (BF16, F16 or F32), n elements.  On a result other than OK, *where
 * is the element: FP8_INT4_DEQ_BAD_SCALE the first of a group whose scale
 * is NaN or infinite (y unwritten); FP8_INT4_DEQ_OVERFLOW the first value
 * infinite in `out`, y written whole, each overflow an infinity as the
 * decompressor's (-8 * s passes the dtype's largest where the group's
 * amax is near it: x / s = -7.5 rounds to -8).
 */
typedef enum { FP8_INT4_DEQ_OK, FP8_INT4_DEQ_BAD_SCALE, FP8_INT4_DEQ_OVERFLOW } fp8_int4_deq_result;
fp8_int4_deq_result fp8_int4_dequant_row(const uint8_t *packed, const void *scales, fp8_dtype sdt,
                                         uint64_t n, uint64_t group, fp8_dtype out, void *y,
                                         uint64_t *where);

#endif
