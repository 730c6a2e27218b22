/*
 * convert_items.h - the cast plan's items looked up (convert_items.c), for
 * the casts' planners and convert_cast.c's writer.
 */
#ifndef FP8_CONVERT_ITEMS_H
#define FP8_CONVERT_ITEMS_H

#include "ops/convert_cast.h"

/* The item's output name: its own, else the input's. */
const char *cast_out_name(const cast_item *it);
/* The item whose input name (out: output name) is `name`, if any: the
 * items are in input-name order, by_out in output-name order (the writer's). */
cast_item *cast_item_named(const cast_plan *p, const char *name, bool out);

#endif
