/*
 * diff_ref.h - what diff tells of a differing tensor, element by element:
 * how many elements differ, the first, the largest |a - b|, the largest
 * distance in ULPs between values of the same sign, and how many pairs of
 * floats lie on either side of zero (their distance across it, up to twice
 * the largest finite code, would say nothing of how far apart they are).  diff_ref.c holds the reference (the rule in code, one
 * element at a time through doubles); diff_cpu.c the fast path
 * (diff_cpu.h), which must give the same statistics (tests/check_diff.c
 * compares them).  diff_ref.c calls nothing of diff_cpu.c or diff.c.
 */
#ifndef FP8_DIFF_REF_H
#define FP8_DIFF_REF_H

#include "common/internal.h"

typedef struct {
    uint64_t differing, first_index; /* first_index: when differing > 0 */
    double max_abs;                  /* over differing numeric elements; NaN: none */
    uint64_t max_ulp;                /* over those whose values have the same sign */
    uint64_t sign_changes;           /* floats of opposite sign, neither zero: no ulp */
    fp8_quality quality;             /* the span's sums (fp8_quality), A's the reference */
} diff_stats;

#define DIFF_STATS_INIT { 0, 0, 0.0 / 0.0, 0, 0, { 0, 0, 0, 0 } }

/* The lanes of a span's quality sums: element i of the span in lane i % 8. */
#define DIFF_LANES 8
typedef struct {
    double ref_sq[DIFF_LANES], out_sq[DIFF_LANES], err_sq[DIFF_LANES];
} diff_lanes;

/* Adds the lanes, in order, to q's sums, and n elements to its count. */
void diff_lanes_end(const diff_lanes *l, uint64_t n, fp8_quality *q);

/* Whether diff sums the quality of tensors of dtype dt compared by bytes. */
bool diff_has_quality(fp8_dtype dt);

/* The quality sums of a span, added to q: by bytes (dt with
 * diff_has_quality), or of fp32 values. */
void diff_quality_bytes_ref(fp8_dtype dt, const void *a, const void *b, uint64_t n,
                            fp8_quality *q);
void diff_quality_values_ref(const float *a, const float *b, uint64_t n, fp8_quality *q);

/* Bytes per compared element: sub-byte and complex dtypes compare by byte. */
unsigned diff_element_size(fp8_dtype dt);

/* Folds the statistics of a span into those of the spans before or after
 * it: the result does not depend on the order of the merges, but for the
 * quality sums, which add in it (merge spans in their order). */
void diff_stats_merge(diff_stats *into, const diff_stats *from);

/* Elements `base`.. of a tensor, n of them, stored in `dt` on both sides
 * (diff_element_size(dt) bytes each): elements whose bytes differ count.
 * The _ref functions leave the quality sums to diff_quality_*_ref; the fast
 * ones (diff_cpu.h) sum them too, over the span, in the same pass. */
void diff_bytes_ref(fp8_dtype dt, const void *a, const void *b, uint64_t n, uint64_t base,
                    diff_stats *s);

/* The same for values held as fp32 (diff --dequant): elements whose values
 * differ count (+0 equals -0, a NaN equals any NaN).  `dt` (F32, BF16 or
 * F16) is the dtype the values are compared in, which holds each of them
 * exactly: ULPs are its own. */
void diff_values_ref(fp8_dtype dt, const float *a, const float *b, uint64_t n, uint64_t base,
                     diff_stats *s);

/* n BF16, F16 or F32 elements as fp32, bits kept (NaN payloads too). */
void diff_to_f32_ref(fp8_dtype dt, const void *x, uint64_t n, float *y);

#endif
