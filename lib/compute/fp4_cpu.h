/*
 * fp4_cpu.h - the CPU's fast path of the packed-FP4 decode: the values of
 * fp4_ref.h's table (the one numeric reference), looked up a nibble at a
 * time with no per-element checks.  A group whose scale byte is NaN, or
 * under which some code overflows, is left to fp4_dequant_row, which then
 * decodes the row and says what and where; so the bytes and the result
 * are fp4_dequant_row's for every input (tests/check_fp4_cpu.c).
 */
#ifndef FP8_FP4_CPU_H
#define FP8_FP4_CPU_H

#include "compute/fp4_ref.h"

typedef struct {
    const fp4_table *t;
    uint16_t v16[256][16]; /* t->value as 16 bits (bf16, f16 outputs) */
    bool clean[256];       /* scale byte b: not NaN, and no code overflows */
} fp4_fast;

/* Prepares the lookup of table t (kept by pointer: t must outlive f). */
void fp4_fast_init(fp4_fast *f, const fp4_table *t);

/* fp4_dequant_row(packed, scales, n, f->t, y, 1, where), faster. */
fp4_deq_result fp4_fast_row(const fp4_fast *f, const uint8_t *packed, const uint8_t *scales,
                            uint64_t n, void *y, uint64_t *where);

/*
 * A band of a packed matrix, transposed: nr rows of n values (n a multiple
 * of the group), row r's codes at packed + r * ld_codes and its scales at
 * scales + r * ld_scales; value (r, c) goes to y[c * ld_out + r].  The
 * values fp4_fast_row gives; false (and nothing written) when a scale of
 * the band is NaN or lets a code overflow: fp4_fast_row then says what.
 */
bool fp4_fast_cols(const fp4_fast *f, const uint8_t *packed, uint64_t ld_codes,
                   const uint8_t *scales, uint64_t ld_scales, uint64_t nr, uint64_t n, void *y,
                   uint64_t ld_out);

/*
 * fp4_quantize_row (fp4_ref.h), faster: the group scales by the reference's
 * own steps (fp4_nvfp4_scale, fp4_mxfp4_scale) eight groups at a time, the
 * elements 8 at a time (NVFP4: one fp32 division each, as the reference's;
 * MXFP4: the product with the scale's exact reciprocal, the same fp32; the
 * thresholds as counts of comparisons; fp4_cpu.c says why no bf16 rounding
 * is needed).  A row with a NaN or infinity, or an MX scale past E8M0's
 * range, is left to fp4_quantize_row, which then writes it and says what
 * and where; so the bytes and the result are the reference's for every
 * input (tests/check_fp4_quant.c, on every path).
 */
fp4_q_result fp4_fast_quantize_row(const fp8_numerics *num, fp8_scheme scheme, fp8_dtype src,
                                   const void *x, uint64_t n, float global, uint8_t *packed,
                                   uint8_t *scales, uint64_t *where);

/* Whether the fast paths take numerics num (NULL: fp8conv's own); else
 * fp4_fast_quantize_row runs the reference, and quantize says so (a note). */
bool fp4_cpu_takes(const fp8_numerics *num);

/* The paths of fp4_fast_quantize_row, each with the reference's bytes;
 * fp4_fast_quantize_row takes the best the CPU runs.  A path the CPU does
 * not run falls back to the clones. */
typedef enum {
    FP4_Q_PATH_CLONES, /* GCC vectors, compiled by FP8_CLONES */
    FP4_Q_PATH_AVX2,   /* explicit AVX2; from bf16 the codes in 16-bit lanes (fp4_cpu.c) */
    FP4_Q_PATH_COUNT
} fp4_q_path;
bool fp4_q_path_runs(fp4_q_path path);
const char *fp4_q_path_name(fp4_q_path path);
fp4_q_result fp4_fast_quantize_row_on(fp4_q_path path, const fp8_numerics *num,
                                      fp8_scheme scheme, fp8_dtype src,
                                      const void *x, uint64_t n, float global, uint8_t *packed,
                                      uint8_t *scales, uint64_t *where);

#endif
