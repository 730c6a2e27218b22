/*
 * convert_dsv4.h - DeepSeek-V4's MXFP4 experts cast to FP8 (convert_dsv4.c):
 * its plan, the writers of its item kinds, its config.json.
 */
#ifndef FP8_CONVERT_DSV4_H
#define FP8_CONVERT_DSV4_H

#include <cjson/cJSON.h>

#include "common/internal.h"
#include "ops/convert_cast.h"

/* The plan of a DeepSeek-V4 checkpoint (model_type's FP4 layout is
 * FP4_LAYOUT_DSV4): each expert's weight and scale, each trunk .scale;
 * *handled when it has an expert, and then the options are checked. */
fp8_status dsv4_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, bool *handled);
/* The writers of CAST_WEIGHT and CAST_SCALE, and of CAST_TRUNK_SCALE. */
fp8_status dsv4_write_experts(fp8_ctx *ctx, const cast_plan *p, fp8_writer *out, size_t from,
                              size_t to);
fp8_status dsv4_write_trunk_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                                  fp8_writer *out, const fp8_tensor_info *wt);
fp8_status dsv4_write_config(fp8_ctx *ctx, const cast_plan *p, const char *dir);

#endif
