/*
 * lanes.h - the quality sums' inner loop (diff_ref.c's lane_add, fast),
 * shared by diff_cpu.c (diff, verify --against's rows) and quant_cpu.c
 * (verify --against's bound, which sums the values it has decoded in the
 * same pass).  Each file compiles it into its own clones.
 */
#ifndef FP8_LANES_H
#define FP8_LANES_H

#include <string.h>

#include "compute/diff_ref.h"

/* The quality sums of fp32 values (diff_ref.c's lane_add): the DIFF_LANES
 * lanes are one vector of doubles (GCC's vector extension, one AVX-512
 * register, two AVX2 or four SSE2 ones: each lane adds in element order
 * whatever the width, so every CPU gets the same sums).  The values start
 * at a multiple of DIFF_LANES elements of their span. */
typedef float lanes_f __attribute__((vector_size(DIFF_LANES * 4)));
typedef double lanes_d __attribute__((vector_size(DIFF_LANES * 8)));

static inline __attribute__((always_inline)) void lanes_sums_f32(const float *a, const float *b,
                                                                 size_t n, diff_lanes *out)
{
    lanes_d ra, rb, re;
    memcpy(&ra, out->ref_sq, sizeof ra);
    memcpy(&rb, out->out_sq, sizeof rb);
    memcpy(&re, out->err_sq, sizeof re);
    size_t i = 0;
    for (; i + DIFF_LANES <= n; i += DIFF_LANES) {
        lanes_f fa, fb;
        memcpy(&fa, a + i, sizeof fa);
        memcpy(&fb, b + i, sizeof fb);
        lanes_d x = __builtin_convertvector(fa, lanes_d), y = __builtin_convertvector(fb, lanes_d);
        lanes_d d = x - y;
        ra += x * x;
        rb += y * y;
        re += d * d;
    }
    memcpy(out->ref_sq, &ra, sizeof ra);
    memcpy(out->out_sq, &rb, sizeof rb);
    memcpy(out->err_sq, &re, sizeof re);
    for (int k = 0; i + k < n; k++) { /* the span's last elements */
        double x = a[i + k], y = b[i + k], d = x - y;
        out->ref_sq[k] += x * x;
        out->out_sq[k] += y * y;
        out->err_sq[k] += d * d;
    }
}

#endif
