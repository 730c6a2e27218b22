/*
 * codec.h - what every codec of compute/ shares, and only that: the band a
 * quantizer takes (its scheme row says the element and scale rule), the
 * results, the spec a dequantizer takes, and the per-element load and
 * store.  Header-only, so that the element codecs (quant_ref.c for E4M3
 * and the entries that dispatch on the row, fp4_ref.c, int4_ref.c) build
 * on it without calling each other.
 */
#ifndef FP8_CODEC_H
#define FP8_CODEC_H

#include "common/fp8_math.h"
#include "common/internal.h"
#include "common/types.h"

/*
 * A band: `rows` rows of `cols` source elements each, contiguous and
 * row-major (a piece of one [M, N] matrix).  The band is cut into groups
 * of `group_rows` x `group_cols` elements (partial at the right edge), each
 * with its own scale:
 *   block 128x128: group_rows = rows (<= 128), group_cols = 128
 *   channel:       group_rows = 1, group_cols = cols
 *   mxfp8:         group_rows = 1, group_cols = 32
 *   nvfp4, mxfp4:  group_rows = 1, group_cols = the scheme's run
 * With `fixed` (per-tensor), the whole band uses `scale` and stores none.
 * The scheme's row (common/types.h) says the codes' element type and how
 * they are packed; its scale rule is `kind` for an E4M3 scheme, and its
 * own (fp4_ref.h) for an E2M1 one, under the second level `global` where
 * it has two.
 */
typedef struct {
    fp8_dtype src;          /* BF16, F16 or F32 (E2M1 schemes: BF16 or F32) */
    fp8_scale_kind kind;
    uint64_t rows, cols;
    uint64_t group_rows, group_cols;
    bool fixed;
    float scale;
    fp8_scheme scheme;      /* its row; zero-initialized: block, E4M3 codes */
    float global;           /* a scheme of two scale levels: the second */
    /* an E4M3 scheme's arithmetic (fp8_numerics_scale); zero: fp8conv's.
     * With `fixed`, `scale` is its factor: elements are divided by it, or
     * multiplied (fp8_numerics_mul) */
    fp8_numerics num;
} fp8_band;

/* Bytes of n codes of the band's element type, and of one stored scale. */
static inline uint64_t fp8_band_code_bytes(const fp8_band *b, uint64_t n)
{
    return fp8_scheme_code_bytes(b->scheme, n);
}
static inline unsigned fp8_band_scale_size(const fp8_band *b)
{
    return fp8_scheme_scale_size(b->scheme, b->kind);
}

typedef enum {
    FP8_BAND_OK,
    FP8_BAND_NONFINITE,      /* *where: flat index in the band of the first NaN or infinity */
    FP8_BAND_SCALE_OVERFLOW, /* *where: flat index of the first element of the group */
} fp8_band_result;

/* Results of a dequantization (fp8_dequant_ref, quant_ref.h). */
typedef enum { FP8_DEQ_OK, FP8_DEQ_NAN_CODE, FP8_DEQ_OVERFLOW, FP8_DEQ_NAN_SCALE } fp8_deq_result;

typedef struct fp4_table fp4_table; /* fp4_ref.h */

/*
 * Dequantization of any element row: the one entry (fp8_dequant in
 * quant_cpu.h, fp8_dequant_ref here) dispatches on the scheme's element
 * row.  fp8_dequant_init (quant_cpu.h) fills the rest: a packed element
 * (E2M1) looks each value up by (scale byte, code) in fp4_ref.h's table
 * and takes the stored scale bytes; a one-byte element (E4M3) takes fp32
 * scales, which the caller decoded from the stored ones and checked.
 */
typedef struct fp8_dequant_spec fp8_dequant_spec;
struct fp8_dequant_spec {
    const fp8_scheme_traits *scheme; /* its elem decodes the codes, scale_elem[0] the scales */
    fp8_dtype out;                   /* BF16, F16 or F32 */
    uint64_t group;                  /* elements of a row that one scale covers */
    float global;                    /* the second level (a scheme of two levels) */
    bool divides;                    /* y = q * s / global (compressed-tensors), else * global */
    bool keep_inf;                   /* an overflow is kept as its infinity (diff), not bad input */
    /* fp8_dequant_init's: the bytes of a scale as passed (fp8_dequant_scale_size),
     * a packed element's table of values and its fast lookup (fp4_cpu.h) */
    unsigned scale_size;
    fp4_table *table;
    void *fast;
};

static inline unsigned fp8_dequant_scale_size(const fp8_scheme_traits *s)
{
    /* packed codes with byte scales: the scale codes; else fp32 scales */
    return fp8_elem_get(s->elem)->per_byte > 1 && fp8_elem_get(s->scale_elem[0])->per_byte == 1
               ? 1
               : 4;
}

/* v rounded into element i of y, an array of `out` (BF16 or F16: nearest
 * even; F32: as is); whether it is an infinity there. */
static inline bool fp8_store_out(fp8_dtype out, void *y, uint64_t i, float v)
{
    if (out == FP8_DTYPE_F32) {
        ((float *)y)[i] = v;
        return !fp8_f32_finite(v);
    }
    uint16_t h = out == FP8_DTYPE_BF16 ? fp8_f32_to_bf16(v) : fp8_f32_to_f16(v);
    ((uint16_t *)y)[i] = h;
    return (h & 0x7FFF) == fp8_dtype_inf_bits(out);
}

/* Element i of a BF16/F16/F32 array, as fp32. */
static inline float fp8_load_f32(fp8_dtype src, const void *x, uint64_t i)
{
    if (src == FP8_DTYPE_BF16)
        return fp8_bf16_to_f32(((const uint16_t *)x)[i]);
    if (src == FP8_DTYPE_F16)
        return fp8_f16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

#endif
