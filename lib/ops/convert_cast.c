/*
 * convert_cast.c - convert's casts of packed-FP4 weights (fp8conv(1)
 * convert, CASTS; fp8conv-formats(5), 2026 LAYOUTS): cast_plan_create finds
 * the cast a checkpoint takes, and cast_plan_write writes the plan the cast
 * made (convert_cast.h): each shard's tensors in output-name order, each by its
 * item's kind, then the index, config.json and every other file.  The casts
 * are convert_dsv4.c (DeepSeek-V4's MXFP4 experts to FP8 128x128 blocks)
 * and convert_nvfp4.c (NVFP4 between ModelOpt and compressed-tensors, and
 * compressed-tensors MXFP4 to NVFP4).
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp8_math.h"
#include "io/checkpoint.h"
#include "io/output.h"
#include "layout/formats.h"
#include "layout/fp4.h"
#include "ops/convert_dsv4.h"
#include "ops/convert_cast.h"
#include "ops/convert_items.h"
#include "ops/convert_nvfp4.h"
#include "ops/dequantize.h"

static uint64_t out_bytes(const cast_item *it)
{
    if (it->kind == CAST_COPY)
        return fp8_tensor_nbytes(it->t);
    return (it->kind == CAST_TRUNK_SCALE ? it->t->elements : it->out_shape[0] * it->out_shape[1]) *
           fp8_dtype_bits(it->out_dtype) / 8;
}

static fp8_status copy_tensor(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                              fp8_writer *out, const fp8_tensor_info *wt)
{
    enum { CHUNK = 1 << 20 };
    uint64_t n = fp8_tensor_nbytes(it->t);
    unsigned char *buf = malloc(CHUNK);
    fp8_status st = buf ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t at = 0; !st && at < n; at += CHUNK) {
        size_t len = n - at < CHUNK ? (size_t)(n - at) : CHUNK;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->shard), it->t, at, buf, len);
        if (!st)
            st = fp8_writer_pwrite(ctx, out, wt, at, buf, len);
    }
    free(buf);
    return st;
}

static int cmp_by_out(const void *a, const void *b, void *arg)
{
    const cast_plan *p = arg;
    return strcmp(cast_out_name(&p->items[*(const size_t *)a]),
                  cast_out_name(&p->items[*(const size_t *)b]));
}

static fp8_status write_recip(fp8_ctx *ctx, const cast_item *it, fp8_writer *out,
                              const fp8_tensor_info *wt)
{
    uint32_t bits = fp8_f32_bits(it->value);
    unsigned char le[4] = { (unsigned char)bits, (unsigned char)(bits >> 8),
                            (unsigned char)(bits >> 16), (unsigned char)(bits >> 24) };
    return fp8_writer_pwrite(ctx, out, wt, 0, le, 4);
}

static fp8_status write_shard(fp8_ctx *ctx, const cast_plan *p, size_t s, const char *path)
{
    fp8_writer *out = NULL;
    fp8_status st = fp8_writer_create(ctx, path, &out);
    for (size_t i = 0; !st && i < p->n; i++) {
        const cast_item *it = &p->items[i];
        if (it->shard != s)
            continue;
        bool own = it->kind == CAST_COPY || it->kind == CAST_TRUNK_SCALE; /* the input's shape */
        st = fp8_writer_add_tensor(ctx, out, cast_out_name(it), it->out_dtype,
                                   own ? it->t->rank : it->out_rank, own ? it->t->shape : it->out_shape);
    }
    if (!st) {
        fp8_writer_set_durable(out, !p->opts.target.no_sync);
        st = fp8_writer_begin(ctx, out);
    }
    /* in the writer's order, each run of experts' tensors at once */
    for (size_t k = 0, from = 0, n = fp8_writer_tensor_count(out); !st && k <= n; k++) {
        const fp8_tensor_info *wt = k < n ? fp8_writer_tensor(out, k) : NULL;
        const cast_item *it = wt ? cast_item_named(p, wt->name, true) : NULL;
        if (it && (it->kind == CAST_WEIGHT || it->kind == CAST_SCALE))
            continue;
        st = from < k ? dsv4_write_experts(ctx, p, out, from, k) : FP8_OK;
        from = k + 1;
        if (!st && it)
            st = it->kind == CAST_COPY        ? copy_tensor(ctx, p, it, out, wt)
                 : it->kind == CAST_RECIP     ? write_recip(ctx, it, out, wt)
                 : it->kind == CAST_TRUNK_SCALE ? dsv4_write_trunk_scale(ctx, p, it, out, wt)
                                                : mx_write_scale(ctx, p, it, out, wt);
    }
    if (!st)
        st = fp8_writer_commit(ctx, out);
    fp8_writer_free(out);
    return st;
}

static fp8_status write_index(fp8_ctx *ctx, const cast_plan *p, const char *dir)
{
    ck_index_entry *map = fp8_xcalloc(p->n + 1, sizeof *map);
    if (!map)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++) {
        map[i] = (ck_index_entry){ cast_out_name(&p->items[i]), p->names[p->items[i].shard] };
        total += out_bytes(&p->items[i]);
    }
    fp8_status st = ck_index_write(ctx, dir, map, p->n, total);
    free(map);
    return st;
}

void cast_plan_free(cast_plan *p)
{
    if (!p)
        return;
    ck_output_names_free(p->names, fp8_checkpoint_shard_count(p->ck));
    for (size_t i = 0; p->items && i < p->n; i++)
        free(p->items[i].out_name);
    free(p->items);
    free(p->by_out);
    cJSON_Delete(p->config);
    free(p);
}

/* Each rule's planner and config.json writer. */
static const struct {
    fp8_status (*plan)(fp8_ctx *, cast_plan *, const fp8_convert_options *, bool *handled);
    fp8_status (*write_config)(fp8_ctx *, const cast_plan *, const char *dir);
} rules[] = {
    [FP4_CAST_TILE] = { dsv4_plan, dsv4_write_config },
    [FP4_CAST_INVERT] = { nv_plan, nv_write_config },
    [FP4_CAST_SPLIT] = { mx_plan, nv_write_config },
};

fp8_status cast_plan_create(fp8_ctx *ctx, fp8_checkpoint *ck, const char *input,
                            const fp8_convert_options *opts, cast_plan **out)
{
    cast_plan *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    *p = (cast_plan){ .ck = ck, .input = input, .opts = *opts };
    fp8_status st = FP8_OK;
    bool handled = false;
    if (!fp8_checkpoint_is_directory(ck) || (st = ck_config_read(ctx, input, &p->config)) ||
        !p->config)
        goto out;
    p->n = fp8_checkpoint_tensor_count(ck);
    /* room for one new item a weight (MXFP4 -> NVFP4: the global scale) */
    if (!(p->items = fp8_xcalloc(p->n ? 2 * p->n : 1, sizeof *p->items)) ||
        !(p->by_out = fp8_xcalloc(p->n ? 2 * p->n : 1, sizeof *p->by_out))) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < p->n; i++) {
        p->items[i].t = fp8_checkpoint_tensor(ck, i, &p->items[i].shard);
        p->items[i].out_dtype = p->items[i].t->dtype; /* a copy's */
    }
    /* a family's cast by its model_type (then by it alone), else by its
     * weights: of the first packed weight (its scale there) whose layout has
     * one, the lowest rule first (NVFP4 before MXFP4); else the first packed
     * weight of a layout no cast takes is refused */
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(p->config, "model_type");
    const fp4_layout *family = fp4_layout_of_model(cJSON_IsString(mt) ? mt->valuestring : NULL);
    const fp4_cast *by_model = family ? fp4_cast_from(family) : NULL;
    const fp8_tensor_info *refused = NULL;
    const fp4_layout *l, *rl = NULL;
    p->cast = by_model;
    for (size_t i = 0; !by_model && i < p->n; i++) {
        if (!cast_scale_of(p, p->items[i].t, &l))
            continue;
        const fp4_cast *c = l->model_type ? NULL : fp4_cast_from(l);
        if (c && (!p->cast || c->rule < p->cast->rule))
            p->cast = c;
        if (l->no_cast && !refused)
            refused = p->items[i].t, rl = l;
    }
    if (!p->cast) {
        if (refused)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s' is packed %s: %s", input,
                          refused->name, rl->name, rl->no_cast);
        goto out;
    }
    /* the value rules first, as dequantize-for-export (and verify) judge them */
    dq_weights *dq = NULL;
    st = dq_weights_open_packed(ctx, ck, input, &dq);
    if (!st)
        st = dq_weights_check(ctx, dq, dq_judged_dtype(p->config, ck));
    dq_weights_free(dq);
    if (st)
        goto out;
    st = rules[p->cast->rule].plan(ctx, p, opts, &handled);
    for (size_t i = 0; i < p->n; i++) /* a plan may add items */
        p->by_out[i] = i;
    if (handled)
        qsort_r(p->by_out, p->n, sizeof *p->by_out, cmp_by_out, p);
out:
    if (st || !handled)
        cast_plan_free(p);
    else
        *out = p;
    return st;
}

fp8_status cast_plan_write(fp8_ctx *ctx, cast_plan *p, const char *output)
{
    const fp8_quant_options *o = &p->opts.target;
    fp8_output out = { 0 };
    fp8_status st = ck_output_names(ctx, p->ck, &p->names);
    if (!st)
        st = fp8_output_begin(ctx, &out, p->input, output, true, o->force, !o->no_sync);
    for (size_t s = 0; !st && s < fp8_checkpoint_shard_count(p->ck); s++) {
        char *path = fp8_output_file(&out, p->names[s]);
        st = path ? write_shard(ctx, p, s, path) : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        free(path);
    }
    const char *skip[] = { "config.json", HF_QUANT_CONFIG, NULL };
    if (!st && (fp8_checkpoint_has_index(p->ck) || fp8_checkpoint_shard_count(p->ck) > 1))
        st = write_index(ctx, p, out.tmp);
    if (!st)
        st = rules[p->cast->rule].write_config(ctx, p, out.tmp);
    if (!st)
        st = ck_copy_other_files(ctx, p->ck, out.tmp, skip, o->cancel);
    if (!st && o->cancel && *o->cancel)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", p->input);
    if (!st)
        st = fp8_output_commit(ctx, &out);
    fp8_output_end(&out);
    return st;
}

void cast_plan_report(const cast_plan *p, fp8_convert_report *r)
{
    const fp4_cast *c = p->cast;
    *r = (fp8_convert_report){ .cast = c->name, .to_nvfp4 = c->to != FP4_LAYOUT_COUNT,
                               .scheme = c->scheme, .block_rows = c->tile, .block_cols = c->tile,
                               .format = fp8_format_name(c->format), .experts = p->experts,
                               .nvfp4 = p->nvfp4 + p->mxfp4, .rounded = p->rounded };
    for (size_t i = 0; i < p->n; i++) {
        r->copied += p->items[i].kind == CAST_COPY;
        r->output_bytes += out_bytes(&p->items[i]);
    }
}
