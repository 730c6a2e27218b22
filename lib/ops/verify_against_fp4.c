/*
 * verify_against_fp4.c - verify --against SRC's packed FP4 weights, items of
 * verify_against.c's jobs (fp8conv(1), verify;
 * fp8conv-formats(5), ERROR BOUND): each element against its source under
 * its group's scale and each group scale against its group's largest
 * element (E2M1's bound, quant_ref.c's fp8_e2m1_bound_group_ref), and SRC
 * re-quantized in memory, band by band, with quantize's own plan, global
 * pass and row quantizer, to say which packed weights it reproduces byte
 * for byte (codes, group scales, NVFP4's stored second level).  Each band
 * adds what it found to its weight's totals (sums, a minimum, flags), so
 * the report is the same for any number of threads.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/verify.h"
#include "compute/fp4_cpu.h"
#include "compute/quant_ref.h"
#include "layout/fp4.h"
#include "ops/quantize_run.h"

/* ---------------------------------------------------------------- the weights */

typedef struct {
    const fp8_tensor_info *t; /* the packed weight in v->ck */
    size_t shard;
    fp4_weight w;             /* its layout, scale and geometry; w.l NULL: malformed */
    const fp8_tensor_info *x; /* its source in SRC (w.out_name); NULL: none usable */
    size_t xshard;
    quant_part *part;         /* x is one expert's weight of SRC's fused experts */
    bool bound;               /* its values are checked against x */
    bool requant;             /* it is in the re-quantized count */
    size_t item;              /* its plan item; SIZE_MAX when the plan does not quantize it */
    fp8_group_rule rule;
    uint64_t rows, cols;
    /* found, over its jobs (atomic, or under the lock) */
    uint64_t bad, clipped, bad_scales, first, first_scale;
    double first_x, first_d, first_m, first_s;
    unsigned first_code;
    bool differs;
} vf4_item;

#define FP4_PLANS 4 /* packed schemes one checkpoint may hold */

struct vf4_against {
    fp8_verify *v;
    fp8_checkpoint *src;
    const char *src_path;
    cJSON *src_config;        /* SRC's config.json; NULL when none */
    vf4_item *items; /* in v->ck's order (by name) */
    size_t n;
    const char **ck_owned, **src_owned; /* sorted */
    size_t nck, nsrc;
    /* a plan per FP4 scheme re-quantized (nplans of them, in the order of
     * the schemes); NULL: refused */
    fp8_quant_plan *plans[FP4_PLANS];
    fp8_scheme plan_scheme[FP4_PLANS];
    int nplans;
    bool impossible; /* quantize refuses SRC, or a row of it */
    pthread_mutex_t lock;
};

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

static bool requantizable(const fp4_layout *l)
{
    return l == fp4_layout_get(FP4_LAYOUT_NVFP4_CT) ||
           l == fp4_layout_get(FP4_LAYOUT_NVFP4_MODELOPT) ||
           l == fp4_layout_get(FP4_LAYOUT_MXFP4_CT);
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

/* ---------------------------------------------------------------- its part of verify_against.c's jobs */

size_t verify_fp4_against_count(const vf4_against *f)
{
    return f ? f->n : 0;
}

bool verify_fp4_against_weight(const vf4_against *f, size_t i, const fp8_tensor_info **t,
                               size_t *shard, const fp8_tensor_info **x, size_t *xshard,
                               uint64_t *rows, uint64_t *cols)
{
    const vf4_item *it = &f->items[i];
    *t = it->t;
    *shard = it->shard;
    *x = it->x;
    *xshard = it->xshard;
    *rows = it->rows;
    *cols = it->cols;
    return it->x && (it->bound || it->item != SIZE_MAX) && it->rows && it->cols;
}

/* Adds a group's verdict to its weight's totals; `at` is its first
 * element's flat index, `g` the group's. */
static void group_add(vf4_against *f, vf4_item *it, const fp8_group_bound *r, const void *x,
                      const uint8_t *packed, uint8_t scale, uint64_t at, uint64_t g)
{
    if (r->clipped)
        __atomic_add_fetch(&it->clipped, r->clipped, __ATOMIC_RELAXED);
    if (r->bad)
        __atomic_add_fetch(&it->bad, r->bad, __ATOMIC_RELAXED);
    if (r->bad_scale)
        __atomic_add_fetch(&it->bad_scales, 1, __ATOMIC_RELAXED);
    if (!r->bad && !r->bad_scale)
        return;
    uint32_t run = it->w.l->scheme->run;
    double m = 0, s = fp8_elem_get(it->rule.scheme->scale_elem[0])->decode(scale);
    double d = fp8_group_divisor(&it->rule, scale);
    for (uint32_t i = 0; i < run; i++) {
        double a = fabs((double)fp8_load_f32(it->x->dtype, x, i));
        m = a > m ? a : m;
    }
    pthread_mutex_lock(&f->lock);
    if (r->bad_scale && g < it->first_scale) {
        it->first_scale = g;
        it->first_m = m;
        it->first_s = s;
    }
    if (r->bad && at + r->first_bad < it->first) {
        it->first = at + r->first_bad;
        it->first_x = fp8_load_f32(it->x->dtype, x, r->first_bad);
        it->first_d = d;
        it->first_code = packed[r->first_bad / 2] >> (4 * (r->first_bad & 1)) & 0xF;
    }
    pthread_mutex_unlock(&f->lock);
}

fp8_status verify_fp4_against_band(vf4_against *f, size_t i, fp8_worker *w, uint64_t row0,
                                  uint64_t nrows)
{
    const fp8_verify *v = f->v;
    vf4_item *it = &f->items[i];
    uint32_t run = it->w.l->scheme->run;
    uint64_t n = nrows * it->cols, at = row0 * it->cols, xs = fp8_dtype_bits(it->x->dtype) / 8;
    unsigned char *src = w->buf[0];
    uint8_t *codes = w->buf[1], *q = w->buf[1] + n / 2;
    uint8_t *scales = w->buf[2], *sq = w->buf[2] + n / run;
    fp8_status st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->shard), it->t, at / 2,
                                  codes, n / 2);
    if (!st)
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->w.scale_shard), it->w.scale,
                           at / run, scales, n / run);
    if (!st && it->part)
        st = quant_part_read(w->ctx, fp8_checkpoint_shard(f->src, it->xshard), it->part, at * xs,
                             src, n * xs, false);
    else if (!st)
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(f->src, it->xshard), it->x, at * xs, src,
                           n * xs);
    fp8_worker_end_turn(w);
    if (st)
        return st;
    for (uint64_t g = 0; it->bound && g < n / run; g++) {
        fp8_group_bound r;
        const unsigned char *x = src + g * run * xs;
        fp8_e2m1_bound_group_ref(&it->rule, it->x->dtype, x, codes + g * run / 2, run, scales[g], &r);
        group_add(f, it, &r, x, codes + g * run / 2, scales[g], at + g * run, at / run + g);
    }
    if (it->item == SIZE_MAX)
        return FP8_OK;
    const fp8_quant_plan *p = f->plans[plan_of(f, it)];
    float global = p->entries[it->item].global;
    bool same = true;
    for (uint64_t r = 0; r < nrows; r++) {
        uint64_t where;
        if (fp4_fast_quantize_row(p->opts.scheme, it->x->dtype, src + r * it->cols * xs, it->cols,
                                  global, q + r * it->cols / 2, sq + r * it->cols / run,
                                  &where) != FP4_Q_OK) {
            __atomic_store_n(&f->impossible, true, __ATOMIC_RELAXED);
            return FP8_OK;
        }
    }
    same = memcmp(q, codes, n / 2) == 0 && memcmp(sq, scales, n / run) == 0;
    if (!same)
        __atomic_store_n(&it->differs, true, __ATOMIC_RELAXED);
    return FP8_OK;
}

size_t verify_fp4_against_lane(const vf4_against *f, size_t i, uint64_t row0, uint64_t *offset)
{
    const vf4_item *it = &f->items[i];
    uint64_t at = row0 * it->cols;
    size_t lane = ck_lane(f->v->ck, it->shard, it->t, at / 2, 0, offset);
    if (lane == FP8_NO_LANE) /* a weight written apart: its fused tensor's */
        lane = ck_lane(f->src, it->xshard, it->part ? it->part->fused : it->x,
                       it->part ? 0 : at * (fp8_dtype_bits(it->x->dtype) / 8),
                       fp8_checkpoint_shard_count(f->v->ck), offset);
    return lane;
}

/* The weights' findings: against-scale, against-bound, against-clipped. */
fp8_status verify_fp4_against_report(fp8_ctx *ctx, vf4_against *f)
{
    fp8_verify *v = f->v;
    fp8_status st = FP8_OK;
    for (size_t i = 0; i < f->n && !st; i++) {
        const vf4_item *it = &f->items[i];
        if (!it->bound || !it->x)
            continue;
        uint64_t elems = it->rows * it->cols, run = it->w.l->scheme->run;
        bool pow2 = it->rule.scheme->pow2_scales;
        const char *d = pow2               ? "d = 2^(scale - 127)"
                        : it->rule.divides ? "d = scale / global"
                                           : "d = scale * weight_scale_2";
        const char *serves = pow2 ? "largest / d in [3, 8)"
                             : it->rule.divides
                                 ? "within one E4M3 code of largest * global / 6"
                                 : "within one E4M3 code of largest / (6 * weight_scale_2)";
        if (it->bad_scales)
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-scale",
                            "%s: %s: %llu of %llu group scales of %s do not serve their group's "
                            "largest element of %s (wanted: %s); first: group %llu (row %llu, columns "
                            "%llu..%llu), largest |x| = %.9g, scale = %.9g",
                            v->path, it->w.scale->name, (unsigned long long)it->bad_scales,
                            (unsigned long long)(elems / run), it->t->name, f->src_path, serves,
                            (unsigned long long)it->first_scale,
                            (unsigned long long)(it->first_scale * run / it->cols),
                            (unsigned long long)(it->first_scale * run % it->cols),
                            (unsigned long long)(it->first_scale * run % it->cols + run - 1),
                            it->first_m, it->first_s);
        if (!st && it->bad)
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-bound",
                            "%s: %s: %llu of %llu elements are not the E2M1 value nearest x / d "
                            "of %s (%s, their group's divisor); first at %llu (row %llu, column "
                            "%llu): x = %.9g, x / d = %.9g, code %u = %g",
                            v->path, it->t->name, (unsigned long long)it->bad,
                            (unsigned long long)elems, f->src_path, d,
                            (unsigned long long)it->first,
                            (unsigned long long)(it->first / it->cols),
                            (unsigned long long)(it->first % it->cols), it->first_x,
                            it->first_x / it->first_d, it->first_code,
                            (double)fp8_elem_get(it->rule.scheme->elem)->decode((uint8_t)it->first_code));
        /* a scale that serves its group may still clip: E4M3's subnormal
         * steps (2^-9) are coarse, so t rounded down leaves largest / d past
         * 7; no fault of the checkpoint, said as a note */
        if (!st && it->clipped)
            st = verify_add(ctx, v, FP8_SEV_NOTE, "against-clipped",
                            "%s: %s: %llu element%s of %s beyond 7 * d (%s) clipped to +-6 under "
                            "group scales that serve their groups",
                            v->path, it->t->name, (unsigned long long)it->clipped,
                            it->clipped == 1 ? "" : "s", f->src_path, d);
    }
    return st;
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
