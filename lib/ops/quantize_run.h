/*
 * quantize_run.h - what of quantize's run (quantize_run.c) another operation
 * runs on a plan of its own: NVFP4's global pass, which verify --against
 * runs before it re-quantizes a source as quantize would.
 */
#ifndef FP8_QUANTIZE_RUN_H
#define FP8_QUANTIZE_RUN_H

#include "ops/quantize.h"

/* NVFP4 (a scheme of two scale levels): every quantized item's second level
 * (plan_entry.global), from the amax of its fused set over the whole input,
 * as the run computes it before it writes a shard
 * (fp8conv-formats(5), FP4 QUANTIZATION); nothing for another scheme.  A NaN
 * or infinity in a quantized tensor is FP8_ERR_BAD_INPUT. */
fp8_status quant_plan_fp4_globals(fp8_ctx *ctx, fp8_quant_plan *p);

/* Item i's second level (its entry's global) as its F32 tensor stores it:
 * the global scale, a divisor (compressed-tensors), or its nearest fp32
 * reciprocal, a factor (ModelOpt's weight_scale_2). */
uint32_t quant_plan_global_bits(const fp8_quant_plan *p, size_t i);

/* Item i's one scale of a matrix (the per-tensor schemes) of largest
 * magnitude amax under the plan's profile: the factor its elements are
 * divided by or multiplied with, its stored bits in *bits; 0, with the
 * message naming `where` and the tensor, where no scale serves. */
float quant_plan_tensor_scale(fp8_ctx *ctx, const fp8_quant_plan *p, size_t i, float amax,
                              const char *where, uint32_t *bits, fp8_status *st);

#endif
