/* convert_items.c - the cast plan's items looked up (convert_items.h). */
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

fp8_status cast_pair(fp8_ctx *ctx, const cast_plan *p, const fp4_layout *l,
                     const fp8_tensor_info *w, size_t wshard, const fp8_tensor_info *s,
                     size_t sshard, uint64_t *rows, uint64_t *cols)
{
    uint64_t experts, sshape[3];
    int srank;
    /* a scale dtype not the scale element's own holds its bytes */
    bool own = fp8_elem_get(l->scheme->scale_elem[0])->dtype == l->scale_dtype;
    if (!fp4_layout_geometry(l, w->rank, w->shape, &experts, rows, cols, &srank, sshape))
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': a %s weight needs whole groups of %u elements a row",
                        fp8_checkpoint_shard_name(p->ck, wshard), w->name, l->name,
                        l->scheme->run);
    if (s->dtype != l->scale_dtype || s->rank != srank || s->shape[0] != sshape[0] ||
        s->shape[1] != sshape[1])
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': the scale of %s weight '%s' must be %s [%llu, %llu] "
                        "(one %sper %u elements of a row)",
                        fp8_checkpoint_shard_name(p->ck, sshard), s->name, l->name, w->name,
                        fp8_dtype_name(l->scale_dtype), (unsigned long long)sshape[0],
                        (unsigned long long)sshape[1], own ? "" : "E8M0 byte ", l->scheme->run);
    return FP8_OK;
}

cast_item *cast_scale_of(const cast_plan *p, const fp8_tensor_info *t, const fp4_layout **l)
{
    char *sname = NULL, *oname = NULL;
    *l = fp4_layout_match(p->ck, t->name, t->dtype, t->rank, &sname, &oname);
    cast_item *s = *l && sname ? cast_item_named(p, sname, false) : NULL;
    free(sname);
    free(oname);
    return s;
}
