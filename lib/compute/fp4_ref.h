/*
 * fp4_ref.h - packed-FP4 rows to bf16/f16/f32
 * (fp8conv-formats(5), 2026 LAYOUTS).  MXFP4: y = e2m1 * 2^(b - 127); NVFP4: y = e2m1 * s * g (ModelOpt)
 * or e2m1 * s / g (compressed-tensors), s the group's E4M3 scale and g the
 * tensor's F32.  Each value is the exact real value rounded once into the
 * output dtype: e2m1 * s is exact in fp32, the product by g exact in
 * double, and a quotient is rounded to odd in double (its remainder
 * exact by fma), which a later rounding to fewer bits does not double-round.
 */
#ifndef FP8_FP4_REF_H
#define FP8_FP4_REF_H

#include "common/internal.h"
#include "common/types.h"
#include "compute/codec.h"

typedef enum { FP4_DEQ_OK, FP4_DEQ_NAN_SCALE, FP4_DEQ_OVERFLOW } fp4_deq_result;


/* Every output a layout can give: a code's value under each of the 256
 * scale bytes, rounded into the output dtype (fp4_round_out), computed
 * once per job by the element-wise rule above; whether each scale byte is
 * no scale (NaN, or negative: fp8_elem_scale_ok), and each output infinite. */
struct fp4_table {
    uint32_t value[256][16];
    bool nan_scale[256];
    bool inf[256][16];
    fp8_dtype out;
    uint32_t group;
};

/* The table of d's scheme (its scale element, second level), group and
 * output dtype. */
void fp4_table_init(fp4_table *t, const fp8_dequant_spec *d);

/*
 * n elements (a multiple of the group) of one row: `packed` holds n / 2
 * bytes, element 2i in the low nibble of byte i; `scales` n / group scale
 * bytes.  Element i goes to y[i * stride] (in elements of the table's
 * output dtype).  On a result other than FP4_DEQ_OK, *where is the element
 * (NaN scale: the first element of its group).
 */
fp4_deq_result fp4_dequant_row(const uint8_t *packed, const uint8_t *scales, uint64_t n,
                               const fp4_table *t, void *y, uint64_t stride, uint64_t *where);

/* x rounded once into `out` (F32, BF16 or F16), as its bits (an f32's, or
 * 16 bits); x is exact, or rounded to odd with more than 26 bits. */
uint32_t fp4_round_out(double x, fp8_dtype out);

/* ---------------------------------------------------------------- quantization
 * bf16/f32 rows to packed FP4, as the named reference computes them:
 * llm-compressor 0.14.0.1's model_free_ptq (schemes NVFP4A16, MXFP4A16) with
 * the compressed-tensors it pins, 0.19.0, whose CPU numerics are 0.17.0's
 * too (fp8conv-formats(5), FP4 QUANTIZATION).
 * Every step rounds where the reference's torch arithmetic rounds: in the
 * source dtype (BF16: fp32 then to nearest even) or in fp32.
 */
/* As fp8_band_result (codec.h), which an E2M1 band returns. */
typedef enum { FP4_Q_OK, FP4_Q_NONFINITE, FP4_Q_SCALE_OVERFLOW } fp4_q_result;

/* NVFP4's second level for a tensor (or fused tensors) of largest magnitude
 * `amax` in source dtype `src` (BF16 or F32): generate_gparam's
 * 448 * 6 / amax, which torch computes as reciprocal(amax) * 2688 in the
 * source dtype; 1 where that is not finite.  Under num->fp4_f32 (a
 * profile's numerics; NULL is fp8conv's own): fp4_nv_global_f32. */
float fp4_nvfp4_global(const fp8_numerics *num, fp8_dtype src, float amax);

/* A group's scale from its largest magnitude m, and the divisor of its
 * elements (*d): NVFP4's E4M3 byte under second level `global`; MXFP4's
 * E8M0 byte, 256 when none (past E8M0's range; *d is then 0).  The
 * reference's steps, shared by the fast path (fp4_cpu.h). */
uint8_t fp4_nvfp4_scale(fp8_dtype src, float m, float global, float *d);
int fp4_mxfp4_scale(fp8_dtype src, float m, float *d);

/*
 * n elements of one row (n a multiple of the scheme's run: 16 for NVFP4, 32
 * for MXFP4), in source dtype `src` (BF16 or F32), to n / 2 packed bytes
 * (element 2i in the low nibble of byte i) and n / run scale bytes (NVFP4:
 * E4M3 under second level `global`; MXFP4: E8M0).  FP4_Q_NONFINITE: *where
 * is the first NaN or infinity; FP4_Q_SCALE_OVERFLOW (MXFP4 only): *where is
 * the first element of a group whose scale would be E8M0 255 (NaN).
 * Under num->fp4_f32 (NVFP4; num NULL is fp8conv's own) the group scales
 * and codes are fp4_math.h's fp4_nv_scale_f32 and fp4_e2m1_code_f32.
 */
fp4_q_result fp4_quantize_row(const fp8_numerics *num, fp8_scheme scheme, fp8_dtype src, const void *x, uint64_t n,
                              float global, uint8_t *packed, uint8_t *scales, uint64_t *where);

#endif
