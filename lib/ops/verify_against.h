/*
 * verify_against.h - verify --against's state, shared by its two files:
 * verify_against.c (the FP8 weights, the passes, the report) and
 * verify_packed.c (the packed FP4 and INT4 weights and their plans).
 */
#ifndef FP8_VERIFY_AGAINST_H
#define FP8_VERIFY_AGAINST_H

#include <pthread.h>

#include "ops/verify_passes.h"
#include "ops/dequantize.h"
#include "ops/quantize.h"

/* One item of --against: an FP8 weight (its values checked against the
 * source, re-quantized, or both), a source tensor quantize quantizes that
 * the checkpoint holds no FP8 weight for, a packed weight (w.l set), or a
 * kept tensor (copy).  Jobs are bands of whole rows of one matrix. */
typedef struct {
    const char *name;
    const fp8_tensor_info *t; /* the weight in v->ck; NULL when none */
    const fp8_tensor_info *s; /* an FP8 weight's scale, as the declared format names it */
    size_t shard, sshard;
    const fp8_tensor_info *x; /* the source tensor; NULL: none usable */
    size_t xshard;
    size_t item;   /* its quantize plan item; SIZE_MAX when the plan does not quantize it */
    bool bound;    /* its values are checked against the source */
    /* the bound reads the codes and scales itself (the scale has the declared
     * layout, which dequantize reads as it does); otherwise dq_weights_read */
    bool own;
    bool compare;  /* the weight and its scale can be compared with the re-quantized bytes */
    bool copy;     /* a tensor quantize keeps: t's bytes against x's (rows are bytes) */
    uint64_t experts, rows, cols, band;
    size_t first_job;
    size_t at;     /* per-tensor scheme: its first matrix in against.amax */
    /* a packed weight */
    fp4_weight w;             /* its layout, scale and geometry; w.l NULL: not packed */
    quant_part *part;         /* x is one expert's weight of SRC's fused experts */
    bool requant;             /* it is in the re-quantized count */
    const fp8_quant_plan *plan; /* the plan of its scheme, when it re-quantizes it */
    fp8_group_rule rule;
    /* found, over its jobs (atomic, or under the lock) */
    uint64_t bad, clipped, first, bad_scales, first_scale;
    double first_x, first_y, first_d, first_m, first_s;
    unsigned first_code;
    bool differs[2]; /* re-quantized with the plan's scales; with floor-rounded MX scales */
    fp8_quality quality; /* its jobs' (against.job_quality), in job order */
} ag_item;

#define FP4_PLANS 4 /* packed schemes one checkpoint may hold */

/* --against's state: the packed weights (packed_open), then every item
 * (against_items) and what the passes found. */
typedef struct {
    fp8_verify *v;
    fp8_checkpoint *src;
    const char *src_path;
    cJSON *src_config;     /* SRC's config.json; NULL when none */
    dq_weights *w;
    fp8_quant_plan *plan;  /* NULL: no re-quantization */
    ag_item *items;        /* the npacked packed weights first, by name; then the others */
    size_t npacked, n, *by_tensor; /* by_tensor: v->ck's tensor -> item, SIZE_MAX when none */
    const char **ck_owned, **src_owned; /* the packed weights' tensors, sorted */
    size_t nck, nsrc;
    /* a plan per FP4 scheme re-quantized (nplans of them, in the order of
     * the schemes); NULL: refused */
    fp8_quant_plan *plans[FP4_PLANS];
    fp8_scheme plan_scheme[FP4_PLANS];
    int nplans;
    size_t nrequant;       /* packed weights in the re-quantized count */
    bool fp4_impossible;   /* quantize refuses SRC, or a row of it, for a packed scheme */
    size_t njobs;
    bool amax_pass;        /* the per-tensor scheme's first pass */
    bool floor_pass;       /* a re-quantize-only pass into differs[1]: MX scales rounded
                            * down (they were not reproduced rounded up), or */
    bool profile_pass;     /* with another profile's plan (--profile auto) */
    bool fp4_pass;         /* the packed weights re-quantized with another profile's plans
                            * (--profile auto): differs[0] only, no quality or bound */
    uint64_t max_band, max_src, max_scales, max_cols; /* a band's elements, source bytes, ... */
    float *amax;           /* per-tensor scheme: by matrix */
    float *scale;
    uint32_t *scale_bits;
    size_t nmatrices;
    bool impossible;       /* quantize refuses a source value or scale: nothing to compare */
    fp8_quality *job_quality; /* by job: the quality sums of its rows, each row a span */
    pthread_mutex_t lock;
} against;

#endif
