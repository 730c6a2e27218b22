/*
 * verify_packed.h - verify --against's packed weights (verify_packed.c).
 */
#ifndef FP8_VERIFY_PACKED_H
#define FP8_VERIFY_PACKED_H

#include <signal.h>

#include "ops/verify_against.h"

/* Whether tensor `name` of v->ck (src_side false: a packed weight, its
 * scales) or of SRC (true: a packed weight's logical weight) is a packed
 * weight's, which the FP8 loops leave alone. */
bool against_packed_owns(const against *f, const char *name, bool src_side);
void against_packed_free(against *f);
/* The packed weight of v->ck named `name`; NULL when none. */
const ag_item *against_packed_find(const against *f, const char *name);
/* The packed weights of v->ck that SRC does not hold as they are, each
 * with its logical weight in SRC (an against-set finding where there is
 * none; a note for the layouts quantize does not write). */
fp8_status against_packed_open(fp8_ctx *ctx, against *f);
/* Quantize's plan for SRC with each FP4 scheme the checkpoint holds,
 * compressed-tensors' (the ModelOpt twin's codes and group scales are the
 * same; its second level is the reciprocal), quantizing what the
 * checkpoint holds packed; then NVFP4's global pass.  What quantize refuses
 * (an f16 weight, a NaN) makes re-quantizing impossible.  With `profile`'s
 * numerics; called again (--profile auto) it replaces the plans. */
fp8_status against_packed_plans(fp8_ctx *ctx, against *f, fp8_profile profile, int threads,
                                const volatile sig_atomic_t *cancel);
/* The bound and the re-quantization of rows [row0, row0 + nrows) of a
 * packed weight, read as against_one reads every band. */
void against_packed_band(against *a, ag_item *it, uint64_t row0, uint64_t nrows,
                         const unsigned char *src, const uint8_t *codes, const uint8_t *scales,
                         uint8_t *q, uint8_t *sq, float *qbuf, fp8_quality *quality);
/* A packed weight's findings: against-scale, against-bound, against-clipped. */
fp8_status against_packed_report(fp8_ctx *ctx, const against *f, const ag_item *it);
/* Quantize's plan for SRC with options `o`, of the tensors `want` says (all
 * for NULL), with NVFP4's global pass when `globals`: *plan NULL when
 * quantize refuses SRC (then re-quantizing is not possible); an error only
 * when it cannot read SRC. */
fp8_status against_plan_make(fp8_ctx *ctx, const char *src_path, const fp8_quant_options *o,
                             bool (*want)(void *user, const char *name), void *user, bool globals,
                             fp8_quant_plan **plan);

#endif
