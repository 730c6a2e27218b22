/*
 * diff_cpu.h - the fast path of diff's statistics (diff_cpu.c), what
 * diff.c calls: the same functions as the reference's in diff_ref.h, whose
 * results they must equal (tests/check_diff.c compares them).  The call
 * graph has no cycle: diff.c calls diff_cpu.c and diff_ref.c, diff_cpu.c
 * calls diff_ref.c, diff_ref.c calls neither.
 */
#ifndef FP8_DIFF_CPU_H
#define FP8_DIFF_CPU_H

#include "compute/diff_ref.h"

void diff_bytes(fp8_dtype dt, const void *a, const void *b, uint64_t n, uint64_t base,
                diff_stats *s);
void diff_values(fp8_dtype dt, const float *a, const float *b, uint64_t n, uint64_t base,
                 diff_stats *s);
/* The same, each side as it is stored (da, db: BF16, F16 or F32) and read
 * as fp32 a block at a time. */
void diff_values_stored(fp8_dtype dt, fp8_dtype da, const void *a, fp8_dtype db, const void *b,
                        uint64_t n, uint64_t base, diff_stats *s);
void diff_to_f32(fp8_dtype dt, const void *x, uint64_t n, float *y);
/* diff_quality_values_ref's sums, fast (verify --against: a row a span). */
void diff_quality_values(const float *a, const float *b, uint64_t n, fp8_quality *q);

#endif
