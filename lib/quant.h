/*
 * quant.h - the quantization engine, inside lib/: a band of rows in, E4M3
 * codes and scales out.  quant_ref.c is the reference (the spec in code);
 * quant_cpu.c is the fast CPU path, which must produce the same bytes.
 */
#ifndef FP8_QUANT_H
#define FP8_QUANT_H

#include "fp8_math.h"
#include "internal.h"

/* Per-element loops are compiled for plain x86-64, AVX2 and AVX-512 and the
 * best is picked at run time.  Keep such functions static: clang (14) emits
 * no resolver for an external target_clones function used from another file. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(FP8_NO_CLONES)
#define FP8_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define FP8_CLONES
#endif

/*
 * A band: `rows` rows of `cols` source elements each, contiguous and
 * row-major (a piece of one [M, N] matrix).  The band is cut into groups
 * of `group_rows` x `group_cols` elements (partial at the right edge), each
 * with its own scale:
 *   block 128x128: group_rows = rows (<= 128), group_cols = 128
 *   channel:       group_rows = 1, group_cols = cols
 *   mxfp8:         group_rows = 1, group_cols = 32
 * With `fixed` (per-tensor), the whole band uses `scale` and stores none.
 */
typedef struct {
    fp8_dtype src;          /* BF16, F16 or F32 */
    fp8_scale_kind kind;
    uint64_t rows, cols;
    uint64_t group_rows, group_cols;
    bool fixed;
    float scale;
} fp8_band;

typedef enum {
    FP8_BAND_OK,
    FP8_BAND_NONFINITE,      /* *where: flat index in the band of the first NaN or infinity */
    FP8_BAND_SCALE_OVERFLOW, /* *where: flat index of the first element of the group */
} fp8_band_result;

/* Scales a band produces: ceil(rows / group_rows) * ceil(cols / group_cols). */
uint64_t fp8_band_scale_count(const fp8_band *b);

/* q gets rows * cols codes (contiguous, row-major); scales gets the stored
 * scales of the groups, row-major, fp8_scale_size() bytes each. */
fp8_band_result fp8_band_quantize_ref(const fp8_band *b, const void *src, uint8_t *q,
                                      void *scales, uint64_t *where);
fp8_band_result fp8_band_quantize(const fp8_band *b, const void *src, uint8_t *q, void *scales,
                                  uint64_t *where);

/* The band quantize writes for rows [row0, row0 + nrows) and columns
 * [col0, col0 + ncols) of expert x of quantized item i of a plan (with block
 * scaling, rows of one block row): its source dtype, scale kind and groups,
 * and *first, the index of its first scale in the item's scale tensor.  The
 * per-tensor scheme's band is `fixed`: its scale, made from the matrix's
 * amax (fp8_scale_make with the band's kind), is the caller's to set.
 * verify --against re-quantizes with it, so that it compares the bytes
 * quantize would write. */
void fp8_quant_plan_band(const fp8_quant_plan *p, size_t i, uint64_t x, uint64_t row0,
                         uint64_t nrows, uint64_t col0, uint64_t ncols, fp8_band *b,
                         uint64_t *first);

/*
 * convert (lib/convert.c) runs a quantize plan over an FP8 checkpoint: its
 * source says what the plan sees of each input tensor, and gives the bytes
 * of what it made up.  `tensor` returns t itself (kept, copied as it is),
 * another tensor (an F32 weight to quantize from its values q * s, or a
 * scale re-labelled exactly; `read` gives its bytes), or NULL (a scale the
 * output replaces, an activation scale); *keep is NULL for a tensor to
 * quantize, else why it is copied.  `quantized` sees each band quantize
 * made (rows from row0 and columns from col0 of matrix `expert`): its
 * values in, codes and stored scales out (from any thread).
 */
typedef struct {
    void *user;
    const fp8_tensor_info *(*tensor)(void *user, const fp8_tensor_info *t, const char **keep);
    fp8_status (*read)(void *user, fp8_ctx *ctx, const fp8_tensor_info *t, uint64_t offset,
                       void *buf, size_t len);
    fp8_status (*quantized)(void *user, fp8_ctx *ctx, const fp8_tensor_info *t, uint64_t expert,
                            uint64_t row0, uint64_t col0, const fp8_band *b, const float *in,
                            const uint8_t *q, const void *scales);
} fp8_quant_source;

fp8_status fp8_quant_plan_create_from(fp8_ctx *ctx, const char *input,
                                      const fp8_quant_options *opts,
                                      const fp8_quant_source *source, fp8_quant_plan **out);

/* The largest magnitude of n contiguous elements (pass 1 of per-tensor
 * scaling); FP8_BAND_NONFINITE with *where on a NaN or infinity. */
fp8_band_result fp8_amax_ref(fp8_dtype src, const void *x, uint64_t n, float *amax,
                             uint64_t *where);
fp8_band_result fp8_amax(fp8_dtype src, const void *x, uint64_t n, float *amax,
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
typedef enum { FP8_DEQ_OK, FP8_DEQ_NAN_CODE, FP8_DEQ_OVERFLOW } fp8_deq_result;
fp8_deq_result fp8_dequant_row_ref(const uint8_t *q, uint64_t n, const float *s, uint64_t group,
                                   fp8_dtype out, void *y, uint64_t *where);

/* The fast paths of fp8_dequant_row (quant_cpu.c), each with the reference's
 * results; fp8_dequant_row takes the best the CPU runs. */
typedef enum {
    FP8_DEQ_PATH_CLONES,     /* branch-free loops, compiled by FP8_CLONES */
    FP8_DEQ_PATH_AVX512BF16, /* explicit AVX-512, with its f16 and bf16 conversions */
    FP8_DEQ_PATH_COUNT
} fp8_deq_path;
bool fp8_dequant_path_runs(fp8_deq_path path);
const char *fp8_dequant_path_name(fp8_deq_path path);
fp8_deq_result fp8_dequant_row_on(fp8_deq_path path, const uint8_t *q, uint64_t n,
                                  const float *s, uint64_t group, fp8_dtype out, void *y,
                                  uint64_t *where);
fp8_deq_result fp8_dequant_row(const uint8_t *q, uint64_t n, const float *s, uint64_t group,
                               fp8_dtype out, void *y, uint64_t *where);

/* y = decode(q) * s in fp32 for n codes that are not NaN (diff and verify
 * want the values themselves). */
void fp8_dequant_span(const uint8_t *q, uint64_t n, float s, float *y);

/* What verify wants to know of a span of E4M3 codes: whether any is
 * nonzero (ignoring the sign), any is NaN, and how many are +-448. */
typedef struct {
    bool nonzero, nan;
    uint64_t saturated;
} fp8_code_stats;
void fp8_code_stats_span(const uint8_t *q, uint64_t n, fp8_code_stats *st);
/* The largest code magnitude of a span, NaN codes aside (verify's scan of
 * each scale group). */
unsigned char fp8_largest_code(const uint8_t *p, uint64_t n);

/* verify --against's bound (fp8conv-formats(5), ERROR BOUND) over n elements: x the source (BF16,
 * F16 or F32), y its dequantized values (when q is not NULL, y = E4M3
 * q[i] * s[i] in fp32), s each element's scale.  counts[0] += the elements
 * beyond 464 * s (clipped), counts[1] += the others further from x than
 * max(|x|/16, s/1024), both with a 1e-6 margin, in double; n < 2^32.  The
 * reference tests each element; the fast one (quant_cpu.c) tests blocks in
 * fp32 first, and the blocks fp32 is unsure of as the reference does. */
void fp8_bound_span_ref(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                        const float *s, uint64_t n, uint64_t counts[2]);
void fp8_bound_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                    const float *s, uint64_t n, uint64_t counts[2]);

/* quant_cpu.c's branch-free fp32 -> E4M3, exposed for its exhaustive test. */
uint8_t fp8_e4m3_fast(float x);

/* Element i of a BF16/F16/F32 array, as fp32. */
static inline float fp8_load_f32(fp8_dtype src, const void *x, uint64_t i)
{
    if (src == FP8_DTYPE_BF16)
        return fp8_bf16_to_f32(((const uint16_t *)x)[i]);
    if (src == FP8_DTYPE_F16)
        return fp8_f16_to_f32(((const uint16_t *)x)[i]);
    return ((const float *)x)[i];
}

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

#endif
