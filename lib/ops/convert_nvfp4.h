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

/* The NVFP4 layout of the input, if any: a weight of one NVFP4 row with
 * its group scale. */
const fp4_layout *nv_layout_of(const cast_plan *p);
/* The plan of an NVFP4 checkpoint of layout nv to the other NVFP4 format
 * (*to_ct: compressed-tensors'), after its options are checked. */
fp8_status nv_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, const fp4_layout *nv,
                   bool *to_ct);
/* The MXFP4 layout of the input, if any: a weight with its scale. */
const fp4_layout *mx_layout_of(const cast_plan *p);
/* The plan of an MXFP4 checkpoint of layout mx to NVFP4 (*to_ct:
 * compressed-tensors', else ModelOpt's), after its config and options are
 * checked; it adds items (p->n grows). */
fp8_status mx_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, const cJSON *config,
                   const fp4_layout *mx, bool *to_ct);
/* The writer of CAST_MX_SCALE. */
fp8_status mx_write_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it, fp8_writer *out,
                          const fp8_tensor_info *wt);
/* config.json (and ModelOpt's hf_quant_config.json) of the NVFP4 target. */
fp8_status nv_write_config(fp8_ctx *ctx, const cast_plan *p, cJSON *config, bool from_ct,
                           bool to_ct, bool acts, const char *dir);

#endif
