/*
 * convert_items.c - the cast plan's items (convert_cast.h) as the casts'
 * planners (convert_dsv4.c, convert_nvfp4.c) and convert_cast.c's writer
 * look them up, below them all.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "ops/convert_items.h"

const char *cast_out_name(const cast_item *it) { return it->out_name ? it->out_name : it->t->name; }

static const char *in_name(const void *p, size_t i)
{
    return ((const cast_plan *)p)->items[i].t->name;
}

static const char *by_out_name(const void *arg, size_t i)
{
    const cast_plan *p = arg;
    return cast_out_name(&p->items[p->by_out[i]]);
}

cast_item *cast_item_named(const cast_plan *p, const char *name, bool out)
{
    size_t i = fp8_name_find(name, p->n, out ? by_out_name : in_name, p);
    return i == p->n ? NULL : &p->items[out ? p->by_out[i] : i];
}
