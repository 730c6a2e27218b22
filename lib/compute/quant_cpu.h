/*
 * quant_cpu.h - the fast CPU paths of quant_ref.h's numerics (quant_cpu.c),
 * each with the reference's results, and what only the fast paths have:
 * the dequantize paths a CPU may run, code statistics for verify.
 */
#ifndef FP8_QUANT_CPU_H
#define FP8_QUANT_CPU_H

#include "compute/diff_ref.h"
#include "compute/quant_ref.h"

/* Per-element loops are compiled for plain x86-64, AVX2 and AVX-512 and the
 * best is picked at run time.  Keep such functions static: clang (14) emits
 * no resolver for an external target_clones function used from another file. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(FP8_NO_CLONES)
#define FP8_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define FP8_CLONES
#endif

/* As fp8_band_quantize_ref. */
fp8_band_result fp8_band_quantize(const fp8_band *b, const void *src, uint8_t *q, void *scales,
                                  uint64_t *where);

/* As fp8_amax_ref. */
fp8_band_result fp8_amax(fp8_dtype src, const void *x, uint64_t n, float *amax,
                         uint64_t *where);

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

/* Fills the rest of d from its element row (quant_ref.h); false when out of
 * memory.  fp8_dequant is fp8_dequant_ref by the element's fast path (the
 * FP4 table looked up, fp4_cpu.h; E4M3's fp8_dequant_row). */
bool fp8_dequant_init(fp8_dequant_spec *d);
void fp8_dequant_free(fp8_dequant_spec *d);
fp8_deq_result fp8_dequant(const fp8_dequant_spec *d, const uint8_t *codes, const void *scales,
                           uint64_t n, void *y, uint64_t *where);
/* The one judgement of a group's scale, which verify (bad-scale, overflow),
 * convert and dequantize-for-export all make, by fp8_dequant's own rule
 * (fp8conv(1), verify, overflow): FP8_DEQ_NAN_SCALE when `scale` (as
 * fp8_dequant takes it, d->scale_size bytes) is no scale (a NaN or negative
 * byte, fp8_elem_scale_ok; an fp32 not finite and positive),
 * FP8_DEQ_OVERFLOW when the group's code of largest magnitude `most` times
 * it is not finite in d->out, else FP8_DEQ_OK.  d: fp8_dequant_init's,
 * without keep_inf; `most` no NaN code. */
fp8_deq_result fp8_dequant_judge(const fp8_dequant_spec *d, const void *scale, uint8_t most);
/* nr rows of n values, row r's codes at codes + r * ld_codes bytes, its
 * scales at scales + r * ld_scales scales, value (r, c) to y[c * ld_out +
 * r] (a transposed layout's columns); false, nothing written, where the
 * element has no such path or a scale is bad (fp8_dequant says which). */
bool fp8_dequant_cols(const fp8_dequant_spec *d, const uint8_t *codes, uint64_t ld_codes,
                      const void *scales, uint64_t ld_scales, uint64_t nr, uint64_t n, void *y,
                      uint64_t ld_out);

/* y = decode(q) * s in fp32 for n codes that are not NaN (diff and verify
 * want the values themselves). */
void fp8_dequant_span(const uint8_t *q, uint64_t n, float s, float *y);

/* What verify wants to know of a span of E4M3 codes: whether any is
 * nonzero (ignoring the sign), any is NaN, how many are +-448, and the
 * largest magnitude, NaN codes aside. */
typedef struct {
    bool nonzero, nan;
    uint64_t saturated;
    unsigned char most;
} fp8_code_stats;
void fp8_code_stats_span(const uint8_t *q, uint64_t n, fp8_code_stats *st);
/* What verify counts in packed codes of two a byte (E2M1, INT4), from the
 * element's row: its top codes (+-max_finite and most_negative: E2M1 +-6,
 * INT4 7, -7 and -8), and the nibble bits no zero code has (E2M1 0x7, its
 * -0 being 8; INT4 0xF). */
typedef struct {
    uint8_t top[3];     /* 0xFF: none */
    uint64_t zero_word; /* those bits, in each nibble of a 64-bit word */
    bool by_word;       /* the bits tell every code (they do for E2M1 and INT4) */
    uint8_t zero[256];  /* else: a byte whose two codes are zeros */
} fp8_nibble_rule;
void fp8_nibble_rule_init(fp8_nibble_rule *r, const fp8_elem_traits *e);
/* Adds to *top the codes of p[0, n) at the top and to *zero_groups its
 * groups of `per` bytes (whole ones) that hold only zeros. */
void fp8_nibble_stats(const fp8_nibble_rule *r, const uint8_t *p, uint64_t n, uint64_t per,
                      uint64_t *top, uint64_t *zero_groups);

/* The index of a span's first E4M3 NaN code (0x7F, 0xFF), or n. */
uint64_t fp8_nan_code_at(const uint8_t *q, uint64_t n);

/* dst[k * dst_stride + c] = src[c * src_stride + k] for k < n and c < m,
 * elements of `size` bytes (2 or 4), strides in elements: a transposed
 * weight's tile to rows (fp8conv-formats(5), FP4 QUANTIZATION).  2-byte
 * elements go 8 x 8 at a time in vector registers. */
void fp8_transpose(unsigned size, const void *src, uint64_t src_stride, uint64_t m, uint64_t n,
                   void *dst, uint64_t dst_stride);

/* As fp8_bound_span_ref: tests blocks in fp32 first, and the blocks fp32 is
 * unsure of as the reference does. */
void fp8_bound_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                    const float *s, uint64_t n, uint64_t counts[2]);

/* fp8_bound_span over codes q, adding the quality sums of the source and
 * the decoded values (diff_ref.c's lanes; x's span starts a lane cycle). */
void fp8_bound_sums_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *s,
                         uint64_t n, uint64_t counts[2], diff_lanes *sums);

/* quant_cpu.c's branch-free fp32 -> E4M3 (x not NaN), exposed for its
 * exhaustive test. */
uint8_t fp8_e4m3_fast(float x);
/* Its AVX-512 twin on 16 values at once; false (q untouched) on a CPU
 * without AVX-512F, BW and VL. */
bool fp8_e4m3_fast16(const float x[16], uint8_t q[16]);

#endif
