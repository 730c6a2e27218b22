/*
 * convert_cast.h - the plan that convert's casts of packed-FP4 weights fill
 * (convert_dsv4.c, convert_nvfp4.c) and convert_cast.c writes: an item per
 * output tensor, each written by its kind.
 */
#ifndef FP8_CONVERT_CAST_H
#define FP8_CONVERT_CAST_H

#include <cjson/cJSON.h>

#include "common/internal.h"
#include "layout/fp4.h"

/* COPY: the bytes as they are, under the item's output name; WEIGHT, SCALE:
 * a DeepSeek-V4 expert's codes, F32 tile scales; TRUNK_SCALE: a trunk FP8
 * weight's E8M0 .scale as F32; RECIP: an NVFP4 second-level scale, its
 * reciprocal (`value`, computed when planned). */
typedef enum {
    CAST_COPY, CAST_WEIGHT, CAST_SCALE, CAST_TRUNK_SCALE, CAST_RECIP,
    CAST_MX_SCALE /* an MXFP4 weight's E8M0 group scales as NVFP4 E4M3 ones */
} cast_kind;

typedef struct {
    const fp8_tensor_info *t; /* the input's tensor */
    size_t shard;
    cast_kind kind;
    /* an expert (both its weight's item and its scale's): */
    const fp8_tensor_info *w, *s;
    size_t wshard, sshard;
    uint64_t rows, cols;   /* unpacked: [rows, cols] */
    fp8_dtype out_dtype;   /* a copy's: the input's */
    int out_rank;
    uint64_t out_shape[2];
    char *out_name;        /* NULL: the input's name */
    float value;           /* RECIP */
    int mx_m;              /* MX_SCALE: the NVFP4 global scale's exponent m */
    unsigned mx_most;      /* MX_SCALE: the largest E8M0 byte of the weight's scale */
    bool mx_fused;         /* MX_SCALE: m is a fused layer's (fp4_fused_parts) */
} cast_item;

typedef struct {
    fp8_checkpoint *ck; /* fp8_convert's */
    const char *input;
    fp8_convert_options opts;
    cJSON *config;
    const fp4_cast *cast;      /* the cast's row (layout/fp4.h) */
    cast_item *items; /* in the checkpoint's (name) order */
    size_t *by_out;   /* items by output name */
    size_t n, experts, nvfp4, rounded, mxfp4;
    bool acts;        /* NVFP4: the activations have their second level too (W4A4) */
    char **names;     /* output shard names */
} cast_plan;

/* The cast INPUT (opened as ck, which the plan borrows) takes, planned:
 * *out NULL when it takes none (then nothing is checked). */
fp8_status cast_plan_create(fp8_ctx *ctx, fp8_checkpoint *ck, const char *input,
                            const fp8_convert_options *opts, cast_plan **out);
fp8_status cast_plan_write(fp8_ctx *ctx, cast_plan *p, const char *output);
void cast_plan_report(const cast_plan *p, fp8_convert_report *r);
void cast_plan_free(cast_plan *p);

#endif
