/*
 * dequantize.h - the FP8 weights of a checkpoint (and for diff the packed
 * ones of fp4.h's layouts), each with its scale, as dequantize-for-export
 * finds them; diff --dequant and verify --against read their values.
 */
#ifndef FP8_DEQUANTIZE_H
#define FP8_DEQUANTIZE_H

#include <cjson/cJSON.h>

#include "common/internal.h"

typedef struct dq_plan dq_weights;

typedef enum { DQ_COPY, DQ_DEQUANT, DQ_DROP } dq_action;

/* Finds the FP8 weights of `ck` (borrowed; `dir` is its directory, for
 * config.json, or NULL) and their scales; fails as dequantize would. */
fp8_status dq_weights_open(fp8_ctx *ctx, fp8_checkpoint *ck, const char *dir, dq_weights **out);
/* The same, packed weights too: each under its unpacked name and shape
 * (dq_weights_shown), its scales DQ_DROP. */
fp8_status dq_weights_open_packed(fp8_ctx *ctx, fp8_checkpoint *ck, const char *dir,
                                  dq_weights **out);
void dq_weights_free(dq_weights *w);
/* DQ_DEQUANT for an FP8 weight, DQ_DROP for a scale or an activation scale,
 * DQ_COPY for anything else. */
dq_action dq_weights_role(const dq_weights *w, const char *name);
/* Tensor `name` as diff shows it: a packed weight unpacked, else itself. */
const fp8_tensor_info *dq_weights_shown(const dq_weights *w, const char *name);
/* The stored tensor that elements [first, first + n) of weight `name` are
 * read from, where that read starts and its bytes (for lanes, progress). */
const fp8_tensor_info *dq_weights_span(const dq_weights *w, const char *name, uint64_t first,
                                       uint64_t n, uint64_t *at, uint64_t *bytes);
/* Elements [first, first + n) of weight `name` (as shown), dequantized to fp32
 * (q * s) and rounded once into dt (BF16 or F16, as the export writes them;
 * F32: not rounded), held as fp32 in y, and (when scales_out is not NULL)
 * each element's scale; `first` and `n` must be whole rows.  An overflow is
 * kept as its infinity. */
fp8_status dq_weights_read(fp8_ctx *ctx, const dq_weights *w, const char *name, uint64_t first,
                           uint64_t n, fp8_dtype dt, float *y, float *scales_out);

/* The scale of FP8 weight `name` (in shard *shard) and the elements each of
 * its values scales: group_rows x group_cols of one [M, N] matrix
 * (UINT64_MAX rows: all of them). */
const fp8_tensor_info *dq_weights_scale(const dq_weights *w, const char *name, size_t *shard,
                                        uint64_t *group_rows, uint64_t *group_cols);

/* Stored scale i of a scale tensor of dtype dt (F32, BF16, F16, or E8M0 /
 * U8: 2^(b - 127)) as fp32; false when it is not finite and positive (E8M0
 * 0xFF is its NaN). */
bool dq_scale_value(fp8_dtype dt, const unsigned char *p, uint64_t i, float *s);

/* The dtype the value rules judge a checkpoint's products in (verify's
 * overflow, convert): the model's, bf16, or fp32 for a float32 model
 * (config.json's torch_dtype or dtype, else its float tensors'). */
fp8_dtype dq_judged_dtype(const cJSON *config, const fp8_checkpoint *ck);

/* Whether every weight of w dequantizes into dt as dequantize-for-export
 * reads it: each scale judged by fp8_dequant_judge under its element's
 * largest code, and where one fails, the weight's rows read as the export
 * reads them; FP8_ERR_BAD_INPUT with the export's message (file, tensor,
 * element) where not.  Convert's value rules (fp8conv(1), convert). */
fp8_status dq_weights_check(fp8_ctx *ctx, const dq_weights *w, fp8_dtype dt);

#endif
