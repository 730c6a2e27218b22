/*
 * convert_nvfp4.h - the casts to NVFP4 (convert_nvfp4.c): NVFP4 between
 * ModelOpt and compressed-tensors, and compressed-tensors MXFP4 to NVFP4;
 * each its input's layout, its plan, and the config.json they share.
 */
#ifndef FP8_CONVERT_NVFP4_H
#define FP8_CONVERT_NVFP4_H

#include <cjson/cJSON.h>

#include "common/internal.h"
#include "layout/fp4.h"
#include "ops/convert_cast.h"

/* The plans of the two rules (layout/fp4.h's casts: FP4_CAST_INVERT,
 * FP4_CAST_SPLIT) from p->cast's input layout, the options checked first
 * (fp4_cast_pick); MXFP4's adds items (p->n grows). */
fp8_status nv_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, bool *handled);
fp8_status mx_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, bool *handled);
/* The writer of CAST_MX_SCALE. */
fp8_status mx_write_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it, fp8_writer *out,
                          const fp8_tensor_info *wt);
/* config.json (and ModelOpt's hf_quant_config.json) of the NVFP4 target. */
fp8_status nv_write_config(fp8_ctx *ctx, const cast_plan *p, const char *dir);

#endif
