/*
 * verify_against_set.c - verify --against SRC: the packed weights of the
 * checkpoint (fp8conv(1), verify; fp8conv-formats(5), ERROR BOUND), each with
 * its logical weight in SRC and, where quantize writes its layout, the plan
 * (quantize's own, with its global pass) that re-quantizes it; their bands
 * and findings are verify_against.c's.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "ops/verify_passes.h"

/* ---------------------------------------------------------------- the weights */

/* The slot of plans[] of a re-quantized item's scheme. */
static int plan_of(const vf4_against *f, const vf4_item *it)
{
    int k = 0;
    while (f->plan_scheme[k] != (fp8_scheme)(it->rule.scheme - fp8_scheme_table))
        k++;
    return k;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static bool in_sorted(const char *const *names, size_t n, const char *name)
{
    return n && bsearch(&name, names, n, sizeof *names, cmp_name) != NULL;
}

bool verify_fp4_against_owns(const vf4_against *f, const char *name, bool src_side)
{
    return f && (src_side ? in_sorted(f->src_owned, f->nsrc, name)
                          : in_sorted(f->ck_owned, f->nck, name));
}

static vf4_item *item_named(const vf4_against *f, const char *name)
{
    size_t lo = 0, hi = f ? f->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(f->items[mid].t->name, name);
        if (c == 0)
            return &f->items[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Whether quantize writes layout l: a format's row of its scheme names it. */
static bool requantizable(const fp4_layout *l)
{
    fp8_scheme sch = (fp8_scheme)(l->scheme - fp8_scheme_table);
    for (int f = 0; f <= FP8_FORMAT_MODELOPT; f++)
        if (fmt_code_layout(fmt_spec_find((fp8_format)f, sch)) == l)
            return true;
    return false;
}

/* Its source: the logical weight w.out_name of SRC, with the unpacked shape
 * and a float dtype; an against-set finding when it is not so. */
static fp8_status find_source(fp8_ctx *ctx, vf4_against *f, vf4_item *it)
{
    fp8_verify *v = f->v;
    int rank;
    uint64_t shape[3];
    char want[96], got[96];
    fp4_layout_out_shape(it->w.l, it->w.experts, it->w.rows, it->w.cols, &rank, shape);
    const fp8_tensor_info *x = fp8_checkpoint_find(f->src, it->w.out_name, &it->xshard);
    /* a weight quantize wrote apart from SRC's fused experts */
    if (!x && (it->part = quant_part_find(f->src, f->src_config, it->w.out_name, &it->xshard)))
        x = &it->part->t;
    if (!x)
        return verify_add(ctx, v, FP8_SEV_ERROR, "against-set",
                          "%s: %s: packed %s, but its weight %s is not in %s", v->path,
                          it->t->name, it->w.l->name, it->w.out_name, f->src_path);
    if (!verify_has_shape(x, rank, shape)) {
        fp8_shape_text(rank, shape, want, sizeof want);
        fp8_shape_text(x->rank, x->shape, got, sizeof got);
        return verify_add(ctx, v, FP8_SEV_ERROR, "against-set",
                          "%s: %s: packed %s, its weight %s %s, but %s in %s", v->path,
                          it->t->name, it->w.l->name, it->w.out_name, want, got, f->src_path);
    }
    if (!verify_is_float(x->dtype))
        return verify_add(ctx, v, FP8_SEV_ERROR, "against-set",
                          "%s: %s: packed %s, but its weight %s is %s in %s, not bf16, f16 or f32",
                          v->path, it->t->name, it->w.l->name, it->w.out_name,
                          fp8_dtype_name(x->dtype), f->src_path);
    it->x = x;
    return FP8_OK;
}

/* Owns name `name` on one side (the FP8 loops leave it alone). */
static fp8_status own(fp8_ctx *ctx, const char ***names, size_t *n, size_t *cap, const char *name)
{
    if (!fp8_grow(names, *n, cap, sizeof **names))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    (*names)[(*n)++] = name;
    return FP8_OK;
}

/* One tensor of v->ck: a packed FP4 weight that SRC does not hold as it is
 * (a packed tensor quantize kept, gpt-oss _blocks beside bf16 weights, is
 * the FP8 loops' kept tensor). */
static fp8_status collect_one(fp8_ctx *ctx, vf4_against *f, const fp8_tensor_info *t,
                              size_t shard, size_t *cap, size_t *ckcap, size_t *srccap)
{
    fp8_verify *v = f->v;
    char *sname = NULL, *oname = NULL;
    const fp4_layout *l = fp4_layout_match(v->ck, t->name, t->dtype, t->rank, &sname, &oname);
    const fp8_tensor_info *kept = l ? fp8_checkpoint_find(f->src, t->name, NULL) : NULL;
    bool as_is = kept && kept->dtype == t->dtype && verify_has_shape(kept, t->rank, t->shape);
    fp8_status st = l && !sname ? fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory") : FP8_OK;
    if (st || !l || as_is)
        goto out;
    fp4_weight w;
    fp8_ctx *wctx = fp8_ctx_create();
    /* a packed weight that falls short is verify's own finding (missing-scale,
     * scale-shape, ...): here it is only left unjudged */
    fp8_status found = wctx ? fp4_weight_find(wctx, v->ck, t, shard, "checked", &w) : FP8_ERR_NOMEM;
    fp8_ctx_free(wctx);
    if (found == FP8_ERR_NOMEM || found == FP8_ERR_IO) {
        st = fp8_fail(ctx, found, "%s: tensor '%s': cannot read its scales", v->path, t->name);
        goto out;
    }
    if (!found && !w.l) /* an int8 tensor, not packed FP4 */
        goto out;
    if (!fp8_grow(&f->items, f->n, cap, sizeof *f->items)) {
        if (!found)
            fp4_weight_free(&w);
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    vf4_item *it = &f->items[f->n++];
    *it = (vf4_item){ .t = t, .shard = shard, .item = SIZE_MAX, .first = UINT64_MAX,
                      .first_scale = UINT64_MAX };
    if (!found)
        it->w = w;
    it->requant = requantizable(l);
    st = own(ctx, &f->ck_owned, &f->nck, ckcap, t->name);
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, sname, NULL);
    if (!st && s)
        st = own(ctx, &f->ck_owned, &f->nck, ckcap, s->name);
    if (!st && l->global_suffix) { /* NVFP4's second level, found or not */
        char name[1024];
        snprintf(name, sizeof name, "%.*s%s",
                 (int)(strlen(t->name) - strlen(l->weight_suffix)), t->name, l->global_suffix);
        const fp8_tensor_info *g = fp8_checkpoint_find(v->ck, name, NULL);
        if (g)
            st = own(ctx, &f->ck_owned, &f->nck, ckcap, g->name);
    }
    const fp8_tensor_info *x = fp8_checkpoint_find(f->src, oname, NULL);
    if (!st && x)
        st = own(ctx, &f->src_owned, &f->nsrc, srccap, x->name);
    if (st || !it->w.l)
        goto out;
    if ((st = find_source(ctx, f, it)) || !it->x)
        goto out;
    if (it->part) /* SRC's fused tensor, which the weights written apart account for */
        st = own(ctx, &f->src_owned, &f->nsrc, srccap, it->part->fused->name);
    it->rows = it->w.rows;
    it->cols = it->w.cols;
    /* gpt-oss stores its experts transposed ([E, cols, rows] unpacked):
     * left out of the bound, with a note */
    it->bound = l->weight_rank == 2 && !l->transpose;
    it->rule = (fp8_group_rule){ .scheme = l->scheme, .divides = l->global_divides,
                           .second = it->w.second ? it->w.global : 1 };
    for (int k = 0; it->requant && k <= f->nplans; k++) { /* its scheme's plan, in order */
        fp8_scheme sch = (fp8_scheme)(l->scheme - fp8_scheme_table), *at = &f->plan_scheme[k];
        if (k < f->nplans && *at == sch)
            break;
        if (k == f->nplans || *at > sch) {
            memmove(at + 1, at, (size_t)(f->nplans++ - k) * sizeof *at);
            *at = sch;
            break;
        }
    }
out:
    free(sname);
    free(oname);
    return st;
}

/* The layouts left out (quantize does not write them; gpt-oss's values are
 * stored transposed): one note each, naming the first weight. */
static fp8_status note_skipped(fp8_ctx *ctx, vf4_against *f)
{
    fp8_status st = FP8_OK;
    for (int id = 0; id < FP4_LAYOUT_COUNT && !st; id++) {
        const fp4_layout *l = fp4_layout_get((fp4_layout_id)id);
        size_t count = 0, unbound = 0;
        const vf4_item *first = NULL;
        for (size_t i = 0; i < f->n; i++)
            if (f->items[i].w.l == l && f->items[i].x && !f->items[i].requant) {
                first = first ? first : &f->items[i];
                count++;
                unbound += !f->items[i].bound;
            }
        if (count)
            st = verify_add(ctx, f->v, FP8_SEV_NOTE, "against-skipped",
                            "%s: %s: %zu packed %s weight%s not re-quantized from %s: quantize "
                            "does not write that layout%s",
                            f->v->path, first->t->name, count, l->name, count == 1 ? "" : "s",
                            f->src_path,
                            unbound ? "; nor are their values checked against it (stored "
                                      "transposed)"
                                    : "");
    }
    return st;
}

fp8_status verify_fp4_against_open(fp8_ctx *ctx, fp8_verify *v, fp8_checkpoint *src,
                                   const char *src_path, vf4_against **out)
{
    vf4_against *f = calloc(1, sizeof *f);
    *out = NULL;
    if (!f)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    f->v = v;
    f->src = src;
    f->src_path = src_path;
    pthread_mutex_init(&f->lock, NULL);
    if (fp8_checkpoint_is_directory(src)) { /* no config: no fused experts written apart */
        fp8_ctx *cctx = fp8_ctx_create();
        if (cctx && ck_config_read(cctx, src_path, &f->src_config))
            f->src_config = NULL;
        fp8_ctx_free(cctx);
    }
    size_t cap = 0, ckcap = 0, srccap = 0;
    fp8_status st = FP8_OK;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(v->ck) && !st; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &shard);
        st = collect_one(ctx, f, t, shard, &cap, &ckcap, &srccap);
    }
    if (f->nck)
        qsort(f->ck_owned, f->nck, sizeof *f->ck_owned, cmp_name);
    if (f->nsrc)
        qsort(f->src_owned, f->nsrc, sizeof *f->src_owned, cmp_name);
    if (!st)
        st = note_skipped(ctx, f);
    if (st) {
        verify_fp4_against_free(f);
        return st;
    }
    *out = f;
    return FP8_OK;
}

void verify_fp4_against_free(vf4_against *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        fp4_weight_free(&f->items[i].w);
        quant_part_free(f->items[i].part);
    }
    cJSON_Delete(f->src_config);
    free(f->items);
    free(f->ck_owned);
    free(f->src_owned);
    for (int k = 0; k < f->nplans; k++)
        fp8_quant_plan_free(f->plans[k]);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* ---------------------------------------------------------------- re-quantization's plans */

typedef struct {
    const char **names; /* sorted */
    size_t n;
} wanted_by;

/* The source tensors a plan quantizes: the logical weights of the packed
 * weights of its scheme that are re-quantized. */
static bool wanted(void *user, const char *name)
{
    const wanted_by *w = user;
    return in_sorted(w->names, w->n, name);
}

/* Quantize's plan for SRC with each FP4 scheme the checkpoint holds,
 * compressed-tensors' (the ModelOpt twin's codes and group scales are the
 * same; its second level is the reciprocal), quantizing what the
 * checkpoint holds packed; then NVFP4's global pass.  What quantize refuses
 * (an f16 weight, a NaN) makes re-quantizing impossible. */
fp8_status verify_fp4_against_plan(fp8_ctx *ctx, vf4_against *f, int threads,
                                  const volatile sig_atomic_t *cancel)
{
    for (int k = 0; k < f->nplans; k++) {
        fp8_quant_options o = FP8_QUANT_OPTIONS_INIT;
        o.scheme = f->plan_scheme[k];
        o.format = FP8_FORMAT_COMPRESSED_TENSORS;
        o.no_default_ignore = true;
        o.threads = threads;
        o.device = FP8_DEVICE_CPU;
        o.cancel = cancel;
        wanted_by w = { fp8_xcalloc(f->n + 1, sizeof *w.names), 0 };
        for (size_t i = 0; w.names && i < f->n; i++)
            if (f->items[i].requant && f->items[i].x && plan_of(f, &f->items[i]) == k)
                w.names[w.n++] = f->items[i].x->name;
        if (w.names)
            qsort(w.names, w.n, sizeof *w.names, cmp_name);
        fp8_ctx *qctx = fp8_ctx_create();
        fp8_status st = qctx && w.names ? quant_plan_create_only(qctx, f->src_path, &o, wanted,
                                                                 &w, &f->plans[k])
                                        : FP8_ERR_NOMEM;
        free(w.names);
        if (!st) {
            f->plans[k]->device = FP8_DEVICE_CPU;
            st = quant_plan_fp4_globals(qctx, f->plans[k]);
        }
        if (st == FP8_ERR_IO || st == FP8_ERR_NOMEM) {
            st = fp8_fail(ctx, st, "--against %s: %s", f->src_path,
                          qctx ? fp8_ctx_message(qctx) : "out of memory");
            fp8_ctx_free(qctx);
            return st;
        }
        fp8_ctx_free(qctx);
        if (st) {
            f->impossible = true;
            fp8_quant_plan_free(f->plans[k]);
            f->plans[k] = NULL;
        }
    }
    for (size_t i = 0; i < f->n; i++) {
        vf4_item *it = &f->items[i];
        const fp8_quant_plan *p = it->requant && it->x ? f->plans[plan_of(f, it)] : NULL;
        if (p)
            it->item = quant_plan_find(p, it->x->name);
        it->plan = p;
        if (it->item == SIZE_MAX) {
            it->differs = true;
            continue;
        }
        /* the stored second level: compressed-tensors' global, or ModelOpt's
         * fp32 reciprocal of it (convert --format modelopt's) */
        if (it->w.second) {
            float g = p->entries[it->item].global, want = it->w.l->global_divides ? g : 1.0f / g;
            it->differs = fp8_f32_bits(want) != fp8_f32_bits(it->w.global);
        }
    }
    return FP8_OK;
}

/* ---------------------------------------------------------------- what it reproduced */

size_t verify_fp4_against_requantized(const vf4_against *f)
{
    size_t n = 0;
    for (size_t i = 0; f && i < f->n; i++)
        n += f->items[i].requant;
    return n;
}

bool verify_fp4_against_possible(const vf4_against *f)
{
    return !f || !f->impossible;
}

int verify_fp4_against_reproduced(const vf4_against *f, const char *name)
{
    const vf4_item *it = item_named(f, name);
    if (!it || !it->requant)
        return -1;
    return it->item != SIZE_MAX && !it->differs;
}
