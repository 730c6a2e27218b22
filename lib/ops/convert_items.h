/*
 * convert_items.h - the cast plan's items looked up (convert_items.c), for
 * the casts' planners (convert_dsv4.c, convert_nvfp4.c) and convert_cast.c's
 * writer, below them all.
 */
#ifndef FP8_CONVERT_ITEMS_H
#define FP8_CONVERT_ITEMS_H

#include "ops/convert_cast.h"

/* The item's output name: its own, else the input's. */
const char *cast_out_name(const cast_item *it);
/* The item of the scale of packed weight t (*l: its layout, NULL for none),
 * NULL when t is none or the input lacks it. */
cast_item *cast_scale_of(const cast_plan *p, const fp8_tensor_info *t, const fp4_layout **l);
/* Whether weight w (an MX layout l's, rank 2) and its scale s fit l: the
 * weight whole groups of a row, the scale l's dtype, one per group; *rows,
 * *cols: the weight's, unpacked. */
fp8_status cast_pair(fp8_ctx *ctx, const cast_plan *p, const fp4_layout *l,
                     const fp8_tensor_info *w, size_t wshard, const fp8_tensor_info *s,
                     size_t sshard, uint64_t *rows, uint64_t *cols);
/* The item whose input name (out: output name) is `name`, if any: the
 * items are in input-name order, by_out in output-name order (the writer's). */
cast_item *cast_item_named(const cast_plan *p, const char *name, bool out);

#endif
