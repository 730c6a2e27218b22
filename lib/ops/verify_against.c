/*
 * verify_against.c - verify --against SRC: each FP8 weight against its source within
 * E4M3's rounding error (fp8conv-formats(5), ERROR BOUND; the bound itself is
 * quant_ref.c's fp8_bound_span_ref and quant_cpu.c's fp8_bound_span), each
 * packed weight against its logical weight in SRC, group by group, and SRC
 * re-quantized in memory, band by band, as quantize would write it (a packed
 * weight: with quantize's own plan for its scheme, global pass included), to
 * say which weights it reproduces byte for byte.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/verify_passes.h"
#include "io/safetensors.h"
#include "compute/diff_cpu.h"
#include "compute/int4_ref.h"
#include "compute/quant_cpu.h"
#include "ops/dequantize.h"
#include "ops/quantize.h"

/* One item of --against: an FP8 weight (its values checked against the
 * source, re-quantized, or both), a source tensor quantize quantizes that
 * the checkpoint holds no FP8 weight for, a packed weight (w.l set), or a
 * kept tensor (copy).  Jobs are bands of whole rows of one matrix. */
typedef struct {
    const char *name;
    const fp8_tensor_info *t; /* the weight in v->ck; NULL when none */
    const fp8_tensor_info *s; /* an FP8 weight's scale, as the declared format names it */
    size_t shard, sshard;
    const fp8_tensor_info *x; /* the source tensor; NULL: none usable */
    size_t xshard;
    size_t item;   /* its quantize plan item; SIZE_MAX when the plan does not quantize it */
    bool bound;    /* its values are checked against the source */
    /* the bound reads the codes and scales itself (the scale has the declared
     * layout, which dequantize reads as it does); otherwise dq_weights_read */
    bool own;
    bool compare;  /* the weight and its scale can be compared with the re-quantized bytes */
    bool copy;     /* a tensor quantize keeps: t's bytes against x's (rows are bytes) */
    uint64_t experts, rows, cols, band;
    size_t first_job;
    size_t at;     /* per-tensor scheme: its first matrix in against.amax */
    /* a packed weight */
    fp4_weight w;             /* its layout, scale and geometry; w.l NULL: not packed */
    quant_part *part;         /* x is one expert's weight of SRC's fused experts */
    bool requant;             /* it is in the re-quantized count */
    const fp8_quant_plan *plan; /* the plan of its scheme, when it re-quantizes it */
    fp8_group_rule rule;
    /* found, over its jobs (atomic, or under the lock) */
    uint64_t bad, clipped, first, bad_scales, first_scale;
    double first_x, first_y, first_d, first_m, first_s;
    unsigned first_code;
    bool differs[2]; /* re-quantized with the plan's scales; with floor-rounded MX scales */
    fp8_quality quality; /* its jobs' (against.job_quality), in job order */
} ag_item;

#define FP4_PLANS 4 /* packed schemes one checkpoint may hold */

/* --against's state: the packed weights (packed_open), then every item
 * (against_items) and what the passes found. */
typedef struct {
    fp8_verify *v;
    fp8_checkpoint *src;
    const char *src_path;
    cJSON *src_config;     /* SRC's config.json; NULL when none */
    dq_weights *w;
    fp8_quant_plan *plan;  /* NULL: no re-quantization */
    ag_item *items;        /* the npacked packed weights first, by name; then the others */
    size_t npacked, n, *by_tensor; /* by_tensor: v->ck's tensor -> item, SIZE_MAX when none */
    const char **ck_owned, **src_owned; /* the packed weights' tensors, sorted */
    size_t nck, nsrc;
    /* a plan per FP4 scheme re-quantized (nplans of them, in the order of
     * the schemes); NULL: refused */
    fp8_quant_plan *plans[FP4_PLANS];
    fp8_scheme plan_scheme[FP4_PLANS];
    int nplans;
    size_t nrequant;       /* packed weights in the re-quantized count */
    bool fp4_impossible;   /* quantize refuses SRC, or a row of it, for a packed scheme */
    size_t njobs;
    bool amax_pass;        /* the per-tensor scheme's first pass */
    bool floor_pass;       /* a re-quantize-only pass into differs[1]: MX scales rounded
                            * down (they were not reproduced rounded up), or */
    bool profile_pass;     /* with another profile's plan (--profile auto) */
    uint64_t max_band, max_src, max_scales, max_cols; /* a band's elements, source bytes, ... */
    float *amax;           /* per-tensor scheme: by matrix */
    float *scale;
    uint32_t *scale_bits;
    size_t nmatrices;
    bool impossible;       /* quantize refuses a source value or scale: nothing to compare */
    fp8_quality *job_quality; /* by job: the quality sums of its rows, each row a span */
    pthread_mutex_t lock;
} against;

/* ---------------------------------------------------------------- the weights */

/* The slot of plans[] of a re-quantized item's scheme. */
static int plan_of(const against *f, const ag_item *it)
{
    int k = 0;
    while (f->plan_scheme[k] != (fp8_scheme)(it->rule.scheme - fp8_scheme_table))
        k++;
    return k;
}

static bool in_sorted(const char *const *names, size_t n, const char *name)
{
    return n && bsearch(&name, names, n, sizeof *names, fp8_cmp_str) != NULL;
}

/* Whether tensor `name` of v->ck (src_side false: a packed weight, its
 * scales) or of SRC (true: a packed weight's logical weight) is a packed
 * weight's, which the FP8 loops leave alone. */
static bool packed_owns(const against *f, const char *name, bool src_side)
{
    return src_side ? in_sorted(f->src_owned, f->nsrc, name)
                    : in_sorted(f->ck_owned, f->nck, name);
}

/* bsearch of the packed weights (in v->ck's order, by name) for a name */
static int cmp_item(const void *name, const void *item)
{
    return strcmp(name, ((const ag_item *)item)->t->name);
}

/* Whether quantize writes layout l: a format's row of its scheme names it. */
static bool requantizable(const fp4_layout *l)
{
    fp8_scheme sch = (fp8_scheme)(l->scheme - fp8_scheme_table);
    for (int f = 0; f <= FP8_FORMAT_FBGEMM_FP8; f++)
        if (fmt_code_layout(fmt_spec_find((fp8_format)f, sch)) == l)
            return true;
    return false;
}

/* Its source: the logical weight w.out_name of SRC, with the unpacked shape
 * and a float dtype; an against-set finding when it is not so. */
static fp8_status find_source(fp8_ctx *ctx, against *f, ag_item *it)
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
    if (!fp8_dtype_is_float(x->dtype))
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
static fp8_status collect_one(fp8_ctx *ctx, against *f, const fp8_tensor_info *t,
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
    if (!fp8_grow(&f->items, f->npacked, cap, sizeof *f->items)) {
        if (!found)
            fp4_weight_free(&w);
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    ag_item *it = &f->items[f->npacked++];
    *it = (ag_item){ .t = t, .shard = shard, .item = SIZE_MAX, .first = UINT64_MAX,
                     .first_scale = UINT64_MAX };
    if (!found)
        it->w = w;
    it->requant = requantizable(l);
    f->nrequant += it->requant;
    st = own(ctx, &f->ck_owned, &f->nck, ckcap, t->name);
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, sname, NULL);
    if (!st && s)
        st = own(ctx, &f->ck_owned, &f->nck, ckcap, s->name);
    /* NVFP4's second level, INT4's shape: found or not */
    const char *side[] = { l->global_suffix, l->shape_suffix };
    for (int k = 0; k < 2 && !st; k++) {
        const fp8_tensor_info *g =
            side[k] ? ck_find_with(v->ck, t->name, strlen(t->name) - strlen(l->weight_suffix),
                                   side[k], NULL)
                    : NULL;
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
    it->bound = l->weight_rank == 2 && !l->transpose && fp8_scheme_has_group_bound(l->scheme);
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
static fp8_status note_skipped(fp8_ctx *ctx, against *f)
{
    fp8_status st = FP8_OK;
    for (int id = 0; id < FP4_LAYOUT_COUNT && !st; id++) {
        const fp4_layout *l = fp4_layout_get((fp4_layout_id)id);
        size_t count = 0, unbound = 0;
        const ag_item *first = NULL;
        for (size_t i = 0; i < f->npacked; i++)
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

static void packed_free(against *f)
{
    for (size_t i = 0; i < f->npacked; i++) {
        fp4_weight_free(&f->items[i].w);
        quant_part_free(f->items[i].part);
    }
    cJSON_Delete(f->src_config);
    free(f->items);
    free(f->ck_owned);
    free(f->src_owned);
    for (int k = 0; k < f->nplans; k++)
        fp8_quant_plan_free(f->plans[k]);
}

/* The packed weights of v->ck that SRC does not hold as they are, each
 * with its logical weight in SRC (an against-set finding where there is
 * none; a note for the layouts quantize does not write). */
static fp8_status packed_open(fp8_ctx *ctx, against *f)
{
    fp8_verify *v = f->v;
    if (fp8_checkpoint_is_directory(f->src)) { /* no config: no fused experts written apart */
        fp8_ctx *cctx = fp8_ctx_create();
        if (cctx && ck_config_read(cctx, f->src_path, &f->src_config))
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
        qsort(f->ck_owned, f->nck, sizeof *f->ck_owned, fp8_cmp_str);
    if (f->nsrc)
        qsort(f->src_owned, f->nsrc, sizeof *f->src_owned, fp8_cmp_str);
    return st ? st : note_skipped(ctx, f);
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

/* Quantize's plan for SRC with options `o`, of the tensors `want` says (all
 * for NULL), with NVFP4's global pass when `globals`: *plan NULL when
 * quantize refuses SRC (then re-quantizing is not possible); an error only
 * when it cannot read SRC. */
static fp8_status plan_make(fp8_ctx *ctx, const char *src_path, const fp8_quant_options *o,
                            bool (*want)(void *user, const char *name), void *user, bool globals,
                            fp8_quant_plan **plan)
{
    fp8_ctx *qctx = fp8_ctx_create();
    fp8_status st = qctx ? quant_plan_create_only(qctx, src_path, o, want, user, plan)
                         : FP8_ERR_NOMEM;
    if (!st && globals) {
        (*plan)->device = FP8_DEVICE_CPU;
        st = quant_plan_fp4_globals(qctx, *plan);
    }
    if (st == FP8_ERR_IO || st == FP8_ERR_NOMEM) {
        st = fp8_fail(ctx, st, "--against %s: %s", src_path,
                      qctx ? fp8_ctx_message(qctx) : "out of memory");
    } else if (st) {
        fp8_quant_plan_free(*plan);
        *plan = NULL;
        st = FP8_OK;
    }
    fp8_ctx_free(qctx);
    return st;
}

/* Quantize's plan for SRC with each FP4 scheme the checkpoint holds,
 * compressed-tensors' (the ModelOpt twin's codes and group scales are the
 * same; its second level is the reciprocal), quantizing what the
 * checkpoint holds packed; then NVFP4's global pass.  What quantize refuses
 * (an f16 weight, a NaN) makes re-quantizing impossible. */
static fp8_status packed_plans(fp8_ctx *ctx, against *f, int threads,
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
        wanted_by w = { fp8_xcalloc(f->npacked + 1, sizeof *w.names), 0 };
        for (size_t i = 0; w.names && i < f->npacked; i++)
            if (f->items[i].requant && f->items[i].x && plan_of(f, &f->items[i]) == k) {
                w.names[w.n++] = f->items[i].x->name;
                if (fp8_scheme_get(o.scheme)->run_alt) /* the group the checkpoint chose (INT4) */
                    o.block_cols = f->items[i].w.run;
            }
        if (w.names)
            qsort(w.names, w.n, sizeof *w.names, fp8_cmp_str);
        fp8_status st = w.names ? plan_make(ctx, f->src_path, &o, wanted, &w, true, &f->plans[k])
                                : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        free(w.names);
        if (st)
            return st;
        f->fp4_impossible |= !f->plans[k];
    }
    for (size_t i = 0; i < f->npacked; i++) {
        ag_item *it = &f->items[i];
        const fp8_quant_plan *p = it->requant && it->x ? f->plans[plan_of(f, it)] : NULL;
        if (p)
            it->item = quant_plan_find(p, it->x->name);
        it->plan = p;
        if (it->item == SIZE_MAX) {
            it->differs[0] = true;
            continue;
        }
        /* the stored second level: compressed-tensors' global, or ModelOpt's
         * fp32 reciprocal of it (convert --format modelopt's) */
        if (it->w.second) {
            float g = p->entries[it->item].global, want = it->w.l->global_divides ? g : 1.0f / g;
            it->differs[0] = fp8_f32_bits(want) != fp8_f32_bits(it->w.global);
        }
    }
    return FP8_OK;
}


/* ---------------------------------------------------------------- --against */

/*
 * One pass over the source and the checkpoint, in memory: each FP8 weight's
 * values against its source tensor (within E4M3's rounding error), and each
 * tensor that quantize would quantize re-quantized band by band, with
 * quantize's own plan and band quantizer, and compared with the
 * checkpoint's codes and scales.  Jobs are bands of whole rows of one
 * matrix; each adds what it found to its tensor's totals (sums, a minimum,
 * flags), so the report is the same for any number of threads.
 */

/* Elements in a job's band, about: fixed, not the thread count's
 * (fp8_jobs_chunk), for the quality sums add band by band (fp8_quality). */
#define BAND_ELEMS(v) ((uint64_t)FP8_CHUNK_BYTES / 16)

static uint64_t src_at(const ag_item *it, uint64_t x, uint64_t row0)
{
    return (x * it->rows + row0) * it->cols;
}

/* Job j's item, matrix and rows. */
static ag_item *job_band(const against *a, size_t j, uint64_t *x, uint64_t *row0, uint64_t *nrows)
{
    ag_item *it = &a->items[fp8_jobs_item_of(a->items, a->n, sizeof *it,
                                             offsetof(ag_item, first_job), j)];
    uint64_t per = (it->rows + it->band - 1) / it->band, k = j - it->first_job;
    *x = k / per;
    *row0 = k % per * it->band;
    *nrows = it->rows - *row0 < it->band ? it->rows - *row0 : it->band;
    return it;
}

/* The stored scales of the declared layout that rows [row0, row0 + nrows)
 * of matrix x use: the first one's index, and how many. */
static void scale_span(const fp8_verify *v, const ag_item *it, uint64_t x, uint64_t row0,
                       uint64_t nrows, uint64_t *first, uint64_t *count)
{
    fp8_geometry g;
    fp8_scheme_geometry(v->scheme, v->block_rows, v->block_cols, it->rows, it->cols, &g);
    fp8_geometry_span(&g, x, row0, nrows, first, count);
}

/* Adds a span's counts to its item's; the first element outside the bound
 * (flat index `at` + i) is found again, element by element, when it may be
 * the item's first. */
static void bound_add(against *a, ag_item *it, fp8_dtype dt, const void *x, const uint8_t *q,
                      const float *y, const float *s, uint64_t n, uint64_t at,
                      fp8_quality *quality)
{
    uint64_t counts[2] = { 0, 0 };
    if (quality) { /* over codes: the quality sums in the same pass */
        diff_lanes sums = { { 0 }, { 0 }, { 0 } };
        fp8_bound_sums_span(dt, x, q, s, n, counts, &sums);
        diff_lanes_end(&sums, n, quality);
    } else {
        fp8_bound_span(dt, x, q, y, s, n, counts);
    }
    if (counts[0])
        __atomic_add_fetch(&it->clipped, counts[0], __ATOMIC_RELAXED);
    if (!counts[1])
        return;
    __atomic_add_fetch(&it->bad, counts[1], __ATOMIC_RELAXED);
    for (uint64_t i = 0; i < n; i++) {
        float yf = q ? fp8_e4m3_to_f32(q[i]) * s[i] : y[i], xf = fp8_load_f32(dt, x, i);
        if (!(fp8_bound_test(xf, yf, s[i]) & 2))
            continue;
        pthread_mutex_lock(&a->lock);
        if (at + i < it->first) {
            it->first = at + i;
            it->first_x = xf;
            it->first_y = yf;
        }
        pthread_mutex_unlock(&a->lock);
        break;
    }
}


/* Adds the quality sums of one row (a span, fp8_quality) of n source
 * elements of dt at x against their dequantized values y.  buf holds n
 * floats. */
static void quality_row(fp8_dtype dt, const void *x, const float *y, uint64_t n, float *buf,
                        fp8_quality *sum)
{
    diff_to_f32(dt, x, n, buf);
    diff_quality_values(buf, y, n, sum);
}

/* The bound of a band whose codes and stored scales are read here, failing
 * as dequantize fails on them (and as dq_weights_read did for verify): a
 * scale that is not finite and positive, then a NaN code. */
static fp8_status bound_own(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                            uint64_t nrows, const unsigned char *src, const uint8_t *codes,
                            const unsigned char *raw, uint64_t sfirst, uint64_t scount,
                            float *sf, float *se, fp8_quality *quality)
{
    const fp8_verify *v = a->v;
    uint64_t N = it->cols, n = nrows * N, at = src_at(it, x, row0);
    fp8_geometry geo;
    fp8_scheme_geometry(v->scheme, v->block_rows, v->block_cols, it->rows, N, &geo);
    uint64_t grows = geo.group_rows, gcols = geo.group_cols;
    for (uint64_t k = 0; k < scount; k++)
        if (!dq_scale_value(it->s->dtype, raw, k, &sf[k]))
            return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': element %llu is not a finite positive scale",
                            fp8_checkpoint_shard_name(v->ck, it->sshard), it->s->name,
                            (unsigned long long)(sfirst + k));
    uint64_t k = fp8_nan_code_at(codes, n);
    if (k < n)
        return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': element %llu is the E4M3 NaN code 0x%02x; no value "
                        "can be exported",
                        fp8_checkpoint_shard_name(v->ck, it->shard), it->t->name,
                        (unsigned long long)(at + k), (unsigned)codes[k]);
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    for (uint64_t r = 0; r < nrows; r++) {
        /* each element's scale: rows of one row of groups share them */
        uint64_t k0 = ((row0 + r) / grows - row0 / grows) * fp8_ceil_div(N, gcols);
        if (r == 0 || (row0 + r) % grows == 0)
            for (uint64_t c0 = 0, g = k0; c0 < N; c0 += gcols, g++) {
                uint64_t width = N - c0 < gcols ? N - c0 : gcols;
                float sg = sf[g];
                for (uint64_t c = 0; c < width; c++)
                    se[c0 + c] = sg;
            }
        /* decoded once, in one pass: the bound and the quality sums */
        bound_add(a, it, it->x->dtype, src + r * N * xs, codes + r * N, NULL, se, N, at + r * N,
                  quality);
    }
    return FP8_OK;
}

/* The bound of a band as dequantize reads it, for a weight whose scale is
 * not of the declared layout. */
static fp8_status bound_dq(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                           uint64_t nrows, const unsigned char *src, float *qbuf,
                           fp8_quality *quality)
{
    uint64_t n = nrows * it->cols, at = src_at(it, x, row0);
    float *y = malloc(n * 4 + 4), *sc = malloc(n * 4 + 4);
    fp8_status st = y && sc ? dq_weights_read(w->ctx, a->w, it->name, at, n, FP8_DTYPE_F32, y, sc)
                            : fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st)
        bound_add(a, it, it->x->dtype, src, NULL, y, sc, n, at, NULL);
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    for (uint64_t r = 0; !st && r < nrows; r++)
        quality_row(it->x->dtype, src + r * it->cols * xs, y + r * it->cols, it->cols, qbuf, quality);
    free(y);
    free(sc);
    return st;
}

/* Re-quantizes a band of the source as quantize does and compares it with
 * the checkpoint's codes and stored scales (`codes` and `raw`, from scale
 * `sfirst` on): with the plan's scales, or (the floor pass) MX scales
 * rounded down. */
static void requantize_band(against *a, ag_item *it, uint64_t x, uint64_t row0, uint64_t nrows,
                            const unsigned char *src, const uint8_t *codes,
                            const unsigned char *raw, uint64_t sfirst, uint8_t *q,
                            unsigned char *scales)
{
    const fp8_verify *v = a->v;
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    /* bands of one block row each, as quantize's jobs are */
    uint64_t step = fp8_scheme_has_block(v->scheme) ? v->block_rows : nrows;
    for (int k = a->floor_pass; k < 1 + a->floor_pass; k++) {
        bool same = true;
        uint64_t nscales = 0, where;
        unsigned ssize = 0;
        for (uint64_t r = 0; r < nrows; r += step) {
            fp8_band b;
            uint64_t first, k0 = r * it->cols;
            fp8_quant_plan_band(a->plan, it->item, x, row0 + r,
                                nrows - r < step ? nrows - r : step, 0, it->cols, &b, &first);
            if (k && !a->profile_pass)
                b.kind = FP8_SCALE_E8M0_FLOOR;
            if (b.fixed)
                b.scale = a->scale[it->at + x];
            ssize = fp8_scale_size(b.kind);
            if (fp8_band_quantize(&b, src + k0 * xs, q + k0, scales + (first - sfirst) * ssize,
                                  &where) != FP8_BAND_OK) {
                __atomic_store_n(&a->impossible, true, __ATOMIC_RELAXED);
                return;
            }
            nscales += fp8_band_scale_count(&b);
        }
        if (!it->compare)
            continue;
        same = memcmp(q, codes, nrows * it->cols) == 0;
        if (fp8_scheme_get(v->scheme)->fixed) { /* once per matrix */
            uint32_t bits = a->scale_bits[it->at + x];
            unsigned char stored[4];
            for (unsigned i = 0; i < 4; i++)
                stored[i] = (unsigned char)(bits >> (8 * i));
            same = same && (row0 || memcmp(stored, raw, ssize) == 0);
        } else {
            same = same && memcmp(scales, raw, nscales * ssize) == 0;
        }
        if (!same)
            __atomic_store_n(&it->differs[k], true, __ATOMIC_RELAXED);
    }
}

/* The per-tensor scheme's first pass: the amax of each matrix. */
static fp8_status amax_one(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                           uint64_t nrows)
{
    uint64_t n = nrows * it->cols, where;
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    float m = 0;
    fp8_status st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->x,
                                  src_at(it, x, row0) * xs, w->buf[0], n * xs);
    if (st)
        return st;
    if (fp8_amax(it->x->dtype, w->buf[0], n, &m, &where) != FP8_BAND_OK) {
        __atomic_store_n(&a->impossible, true, __ATOMIC_RELAXED);
        return FP8_OK;
    }
    pthread_mutex_lock(&a->lock);
    a->amax[it->at + x] = m > a->amax[it->at + x] ? m : a->amax[it->at + x];
    pthread_mutex_unlock(&a->lock);
    return FP8_OK;
}

/* Bytes [at, at + n) of a kept tensor, in the checkpoint and the source. */
static fp8_status copy_one(against *a, fp8_worker *w, ag_item *it, uint64_t at, uint64_t n)
{
    fp8_status st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->v->ck, it->shard), it->t, at,
                                  w->buf[1], n);
    if (!st)
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->x, at,
                           w->buf[0], n);
    if (!st && memcmp(w->buf[0], w->buf[1], n) != 0)
        __atomic_store_n(&it->differs[0], true, __ATOMIC_RELAXED);
    return st;
}

/* ---------------------------------------------------------------- packed weights */

/* Adds a group's verdict to its weight's totals; `at` is its first
 * element's flat index, `g` the group's. */
static void group_add(against *a, ag_item *it, const fp8_group_bound *r, const void *x,
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
    uint32_t run = it->w.run;
    double m = 0, s = fp8_elem_get(it->rule.scheme->scale_elem[0])->decode(scale);
    double d = fp8_group_divisor(&it->rule, scale);
    for (uint32_t i = 0; i < run; i++) {
        double ax = fabs((double)fp8_load_f32(it->x->dtype, x, i));
        m = ax > m ? ax : m;
    }
    pthread_mutex_lock(&a->lock);
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
    pthread_mutex_unlock(&a->lock);
}

/* The bound and the re-quantization of rows [row0, row0 + nrows) of a
 * packed weight, read as against_one reads every band. */
static void packed_band(against *a, ag_item *it, uint64_t row0, uint64_t nrows,
                        const unsigned char *src, const uint8_t *codes, const uint8_t *scales,
                        uint8_t *q, uint8_t *sq, float *qbuf, fp8_quality *quality)
{
    uint32_t run = it->w.run;
    uint64_t n = nrows * it->cols, at = row0 * it->cols, xs = fp8_dtype_bits(it->x->dtype) / 8;
    /* each row's values: an E2M1 code times its group's divisor (a NaN
     * scale: NaN); INT4's as its dequantizer reads them */
    const fp8_elem_traits *ce = fp8_elem_get(it->rule.scheme->elem),
                          *se = fp8_elem_get(it->rule.scheme->scale_elem[0]);
    bool e2m1 = fp8_scheme_has_group_bound(it->rule.scheme);
    float value[16];
    for (unsigned c = 0; e2m1 && c < 16; c++)
        value[c] = ce->decode((uint8_t)c);
    uint64_t sb = fp8_dtype_bits(it->s->dtype) / 8, bad_at;
    for (uint64_t r = 0; run && r < nrows; r++) {
        float *y = qbuf + it->cols;
        double d = 0;
        for (uint64_t c0 = 0, i = r * it->cols; e2m1 && c0 < it->cols; c0 += run, i += run) {
            uint8_t sc = scales[i / run]; /* a row is whole groups, of an even run */
            d = se->is_nan(sc) ? 0.0 / 0.0 : fp8_group_divisor(&it->rule, sc);
            for (uint64_t k = 0; k < run; k += 2) {
                uint8_t b = codes[(i + k) / 2];
                y[c0 + k] = (float)(value[b & 0xF] * d);
                y[c0 + k + 1] = (float)(value[b >> 4] * d);
            }
        }
        if (!e2m1 && fp8_int4_dequant_row(codes + r * it->cols / 2, scales + r * it->cols / run * sb,
                                          it->s->dtype, it->cols, run, FP8_DTYPE_F32, y,
                                          &bad_at) == FP8_INT4_DEQ_BAD_SCALE)
            for (uint64_t c = 0; c < it->cols; c++)
                y[c] = 0.0f / 0.0f;
        quality_row(it->x->dtype, src + r * it->cols * xs, y, it->cols, qbuf, quality);
    }
    for (uint64_t g = 0; it->bound && g < n / run; g++) {
        fp8_group_bound r;
        const unsigned char *x = src + g * run * xs;
        fp8_e2m1_bound_group_ref(&it->rule, it->x->dtype, x, codes + g * run / 2, run, scales[g], &r);
        group_add(a, it, &r, x, codes + g * run / 2, scales[g], at + g * run, at / run + g);
    }
    if (it->item == SIZE_MAX)
        return;
    /* quantize's band of the plan: the scheme's row, its second level */
    fp8_band b;
    uint64_t first, where;
    fp8_quant_plan_band(it->plan, it->item, 0, row0, nrows, 0, it->cols, &b, &first);
    if (fp8_band_quantize(&b, src, q, sq, &where) != FP8_BAND_OK)
        __atomic_store_n(&a->fp4_impossible, true, __ATOMIC_RELAXED);
    else if (memcmp(q, codes, n / 2) != 0 ||
             memcmp(sq, scales, n / run * (fp8_dtype_bits(it->s->dtype) / 8)) != 0)
        __atomic_store_n(&it->differs[0], true, __ATOMIC_RELAXED);
}

/* A packed weight's findings: against-scale, against-bound, against-clipped. */
static fp8_status packed_report(fp8_ctx *ctx, const against *f, const ag_item *it)
{
    fp8_verify *v = f->v;
    fp8_status st = FP8_OK;
    if (!it->bound || !it->x)
        return FP8_OK;
    uint64_t elems = it->rows * it->cols, run = it->w.run;
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
    return st;
}

/*
 * A job: rows [row0, row0 + nrows) of matrix x of an item.  The worker's
 * buffers: buf[0] the source; buf[1] the checkpoint's codes, then the
 * re-quantized ones; buf[2] the stored scales, the re-quantized ones, the
 * scales as fp32, each element's scale.
 */
static fp8_status against_one(void *arg, fp8_worker *w, size_t j)
{
    against *a = arg;
    const fp8_verify *v = a->v;
    uint64_t x, row0, nrows;
    ag_item *it = job_band(a, j, &x, &row0, &nrows);
    if (a->amax_pass)
        return !it->w.l && it->item != SIZE_MAX ? amax_one(a, w, it, x, row0, nrows) : FP8_OK;
    if (a->floor_pass && (!it->compare || (a->profile_pass && it->w.l)))
        return FP8_OK;
    if (it->copy)
        return copy_one(a, w, it, row0, nrows);
    uint64_t n = nrows * it->cols, at = src_at(it, x, row0), sfirst = 0, scount = 0;
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8, per = 1, ssize = 1; /* codes a byte */
    unsigned char *src = w->buf[0], *raw = w->buf[2];
    uint8_t *codes = w->buf[1], *q = w->buf[1] + a->max_band;
    unsigned char *scales = raw + 4 * a->max_scales;
    float *sf = (float *)(void *)(raw + 8 * a->max_scales), *se = sf + a->max_scales;
    bool requant = it->item != SIZE_MAX;
    fp8_status st = FP8_OK;
    if (it->w.l) { /* a packed weight: two codes a byte, a scale a run */
        per = 2;
        sfirst = at / it->w.run;
        scount = n / it->w.run;
        ssize = fp8_dtype_bits(it->s->dtype) / 8;
    } else if (it->own || requant) {
        scale_span(v, it, x, row0, nrows, &sfirst, &scount);
        ssize = it->s ? fp8_dtype_bits(it->s->dtype) / 8 : 1;
    }
    if (it->w.l || it->own || it->compare) {
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->sshard), it->s,
                           sfirst * ssize, raw, scount * ssize);
        if (!st)
            st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->shard), it->t, at / per,
                               codes, n / per);
    }
    if (!st && it->part)
        st = quant_part_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->part, at * xs,
                             src, n * xs, false);
    else if (!st)
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->x, at * xs, src,
                           n * xs);
    fp8_worker_end_turn(w);
    float *qbuf = st ? NULL : malloc(8 * it->cols + 8); /* quality_row's */
    if (!st && !qbuf)
        st = fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st && it->w.l) {
        packed_band(a, it, row0, nrows, src, codes, raw, q, scales, qbuf, &a->job_quality[j]);
        free(qbuf);
        return FP8_OK;
    }
    if (!st && it->bound && !a->floor_pass)
        st = it->own ? bound_own(a, w, it, x, row0, nrows, src, codes, raw, sfirst, scount, sf, se,
                                 &a->job_quality[j])
                     : bound_dq(a, w, it, x, row0, nrows, src, qbuf, &a->job_quality[j]);
    free(qbuf);
    if (!st && requant)
        requantize_band(a, it, x, row0, nrows, src, codes, raw, sfirst, q, scales);
    return st;
}

/* The bytes a job reads. */
static uint64_t against_bytes(const against *a, const ag_item *it, uint64_t nrows)
{
    uint64_t n = nrows * it->cols, xs = fp8_dtype_bits(it->x->dtype) / 8;
    if (it->w.l) /* the source and the E2M1 codes */
        return a->amax_pass || a->floor_pass ? 0 : n * xs + n / 2;
    if (a->amax_pass)
        return it->item != SIZE_MAX ? n * xs : 0;
    if (it->copy)
        return a->floor_pass ? 0 : 2 * n;
    if (a->floor_pass)
        return it->compare ? n * xs + n : 0;
    return n * xs + (it->bound || it->compare ? n : 0);
}

/* In the lane of the weight's shard when compressed, else of the source's
 * (a packed weight's: its codes'). */
static void against_describe(void *arg, size_t j, fp8_job_info *info)
{
    const against *a = arg;
    uint64_t x, row0, nrows;
    const ag_item *it = job_band(a, j, &x, &row0, &nrows);
    uint64_t at = src_at(it, x, row0), xs = it->copy ? 1 : fp8_dtype_bits(it->x->dtype) / 8;
    info->bytes = against_bytes(a, it, nrows);
    info->label = it->name;
    if (it->w.l || (!a->amax_pass && (it->bound || it->compare || it->copy)))
        info->lane = ck_lane(a->v->ck, it->shard, it->t, it->w.l ? at / 2 : at, 0, &info->offset);
    if (info->lane == FP8_NO_LANE) /* a weight written apart: its fused tensor's */
        info->lane = ck_lane(a->src, it->xshard, it->part ? it->part->fused : it->x,
                             it->part ? 0 : at * xs, fp8_checkpoint_shard_count(a->v->ck),
                             &info->offset);
}

static fp8_status against_run(fp8_ctx *ctx, against *a, int threads,
                              const volatile sig_atomic_t *cancel, const char *src_path)
{
    fp8_verify *v = a->v;
    fp8_jobs spec = { .njobs = a->njobs, .threads = threads, .run = against_one,
                      .describe = against_describe, .arg = a, .what = src_path, .cancel = cancel,
                      .progress = v->opts->progress, .progress_user = v->opts->progress_user,
                      .done = &v->done, .total = &v->total, .count = true,
                      .nlanes = fp8_checkpoint_shard_count(v->ck) +
                                fp8_checkpoint_shard_count(a->src),
                      .bufsize = { a->max_src, a->max_band * 2,
                                   a->max_scales * 12 + a->max_cols * 4 } };
    fp8_status st = fp8_jobs_run(ctx, &spec);
    if (!st && cancel && *cancel)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", src_path);
    return st;
}

/* The quantize plan for SRC with the declared scheme; NULL when quantize
 * refuses it (the scheme cannot be written, SRC looks quantized): then
 * re-quantizing is "not possible". */
static fp8_status against_plan(fp8_ctx *ctx, const fp8_verify *v, const char *src_path,
                               fp8_profile profile, fp8_quant_plan **plan)
{
    static const fp8_format formats[] = { FP8_FORMAT_DEFAULT, FP8_FORMAT_HF_FP8,
                                          FP8_FORMAT_COMPRESSED_TENSORS, FP8_FORMAT_MODELOPT,
                                          FP8_FORMAT_FBGEMM_FP8 };
    fp8_quant_options o = FP8_QUANT_OPTIONS_INIT;
    o.scheme = v->scheme;
    o.format = formats[v->format];
    o.block_rows = v->block_rows;
    o.block_cols = v->block_cols;
    o.scale_ue8m0 = v->ue8m0_claim;
    o.mx_rounding = FP8_MX_RCEIL; /* the default; floor is tried too */
    o.profile = profile;
    /* every FP8 weight of the checkpoint is re-quantized, whatever the
     * default keep rules say (a norm quantized with --no-default-ignore:
     * fuzz_dir, 2026-11-24); the plan is only looked up for those */
    o.no_default_ignore = true;
    return plan_make(ctx, src_path, &o, NULL, NULL, false, plan);
}

/* An item's jobs, none unless `any`: bands of whole rows (of whole blocks of
 * `align` rows) of about BAND_ELEMS elements; and the buffers its band
 * needs, of source elements of xs bytes.  Returns the band's rows. */
static uint64_t item_jobs(against *a, ag_item *it, bool any, uint64_t align, unsigned xs)
{
    it->band = it->cols && BAND_ELEMS(a->v) / it->cols ? BAND_ELEMS(a->v) / it->cols : 1;
    it->band = it->band < align ? align : it->band / align * align;
    it->first_job = a->njobs;
    a->njobs += any ? it->experts * fp8_ceil_div(it->rows, it->band) : 0;
    uint64_t band = it->band < it->rows ? it->band : it->rows, n = band * it->cols;
    a->max_band = n > a->max_band ? n : a->max_band;
    a->max_src = n * xs > a->max_src ? n * xs : a->max_src;
    a->max_cols = it->cols > a->max_cols ? it->cols : a->max_cols;
    return band;
}

/* What an item does, and its jobs' geometry. */
static void against_item(against *a, ag_item *it, bool bound, size_t item)
{
    const fp8_verify *v = a->v;
    const fp8_tensor_info *t = it->t, *x = it->x;
    it->item = item;
    it->bound = bound;
    it->first = UINT64_MAX;
    it->experts = x->rank == 3 ? x->shape[0] : 1;
    it->rows = x->rank >= 2 ? x->shape[x->rank - 2] : 1;
    it->cols = x->rank >= 1 ? x->shape[x->rank - 1] : 1;
    if (t && v->spec) {
        const char *suffix = v->spec->scale_suffix;
        it->s = verify_find_scale(v, t, &it->sshard, &suffix);
        const char *other = strcmp(suffix, "_scale") == 0 ? "_scale_inv" : "_scale";
        const fp8_tensor_info *s = it->s;
        int rank;
        uint64_t shape[3];
        const fp8_scheme_traits *sch = fp8_scheme_get(v->scheme);
        bool mx = sch->pow2_scales;
        /* dequantize reads a directory's block size from its config.json,
         * and takes 128x128 for a lone file */
        bool same_blocks = !fp8_scheme_has_block(v->scheme) ||
                           (fp8_checkpoint_is_directory(v->ck) && !v->assumed) ||
                           (v->block_rows == 128 && v->block_cols == 128);
        if (bound && s && !ck_find_with(v->ck, t->name, strlen(t->name), other, NULL) && same_blocks &&
            (mx ? s->dtype == FP8_DTYPE_U8 || s->dtype == fp8_elem_get(sch->scale_elem[0])->dtype
                : fp8_dtype_is_float(s->dtype))) {
            fmt_scale_shape(v->spec, t->rank, t->shape, v->block_rows, v->block_cols, &rank, shape);
            it->own = verify_has_shape(s, rank, shape);
        }
        const fp8_quant_item *qi = item != SIZE_MAX ? fp8_quant_plan_item(a->plan, item) : NULL;
        uint64_t n, bytes;
        const char *why;
        it->compare = qi && s && fp8_dtype_holds_codes(t->dtype) && t->elements == x->elements &&
                      s->dtype == qi->scale_dtype &&
                      !st_tensor_size(qi->scale_shape, qi->scale_rank, qi->scale_dtype, &n, &bytes,
                                      &why) &&
                      fp8_tensor_nbytes(s) == bytes;
    }
    uint64_t first, count;
    scale_span(v, it, 0, 0,
               item_jobs(a, it, x->elements, fp8_scheme_has_block(v->scheme) ? v->block_rows : 1,
                         fp8_dtype_bits(x->dtype) / 8),
               &first, &count);
    a->max_scales = count > a->max_scales ? count : a->max_scales;
    if (item != SIZE_MAX) {
        it->at = a->nmatrices;
        a->nmatrices += it->experts;
    }
}

/* The items: the FP8 weights checked against the source (`bound`, by
 * tensor of v->ck) or re-quantized, then the source tensors quantize
 * quantizes that the checkpoint holds no FP8 weight for (a NaN there still
 * makes re-quantizing impossible). */
static fp8_status against_items(fp8_ctx *ctx, against *a, const bool *bound, const bool *copy)
{
    fp8_verify *v = a->v;
    size_t nt = fp8_checkpoint_tensor_count(v->ck);
    size_t np = a->plan ? fp8_quant_plan_count(a->plan) : 0;
    size_t nf = a->npacked, cap = nf + 3 * nt + np + 1;
    ag_item *items = realloc(a->items, cap * sizeof *items);
    a->by_tensor = fp8_xcalloc(nt + 1, sizeof *a->by_tensor);
    if (items) {
        a->items = items;
        memset(items + nf, 0, (cap - nf) * sizeof *items);
    }
    if (!items || !a->by_tensor)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (a->n = 0; a->n < nf; a->n++) { /* packed weights */
        ag_item *it = &a->items[a->n];
        it->first_job = a->njobs;
        if (!it->x || !(it->bound || it->item != SIZE_MAX) || !it->rows || !it->cols)
            continue;
        it->name = it->t->name;
        it->s = it->w.scale;
        it->sshard = it->w.scale_shard;
        it->experts = 1;
        uint64_t n = item_jobs(a, it, true, 1, fp8_dtype_bits(it->x->dtype) / 8) * it->cols;
        a->max_scales = n / 16 + 1 > a->max_scales ? n / 16 + 1 : a->max_scales;
    }
    for (size_t i = 0; i < nt; i++) {
        ag_item *it = &a->items[a->n];
        a->by_tensor[i] = SIZE_MAX;
        it->t = fp8_checkpoint_tensor(v->ck, i, &it->shard);
        it->x = fp8_checkpoint_find(a->src, it->t->name, &it->xshard);
        size_t item = it->x ? quant_plan_find(a->plan, it->t->name) : SIZE_MAX;
        if (!fp8_dtype_holds_codes(it->t->dtype) || !it->x || (!bound[i] && item == SIZE_MAX) ||
            packed_owns(a, it->t->name, false))
            continue;
        it->name = it->t->name;
        against_item(a, it, bound[i], item);
        a->by_tensor[i] = a->n++;
    }
    for (size_t k = 0; k < np; k++) {
        const fp8_quant_item *qi = fp8_quant_plan_item(a->plan, k);
        const fp8_tensor_info *t = fp8_checkpoint_find(v->ck, qi->tensor->name, NULL);
        if (!qi->quantize || (t && fp8_dtype_holds_codes(t->dtype)) ||
            packed_owns(a, qi->tensor->name, true))
            continue;
        ag_item *it = &a->items[a->n++];
        it->name = qi->tensor->name;
        it->x = fp8_checkpoint_find(a->src, it->name, &it->xshard);
        against_item(a, it, false, k);
    }
    for (size_t i = 0; i < nt; i++) { /* kept tensors, a band of bytes at a time */
        if (!copy[i])
            continue;
        ag_item *it = &a->items[a->n++];
        it->t = fp8_checkpoint_tensor(v->ck, i, &it->shard);
        it->name = it->t->name;
        it->x = fp8_checkpoint_find(a->src, it->name, &it->xshard);
        it->item = SIZE_MAX;
        it->copy = true;
        it->experts = it->cols = 1;
        it->rows = fp8_tensor_nbytes(it->t);
        item_jobs(a, it, true, 1, 1);
    }
    a->amax = fp8_xcalloc(a->nmatrices + 1, sizeof *a->amax);
    a->scale = fp8_xcalloc(a->nmatrices + 1, sizeof *a->scale);
    a->scale_bits = fp8_xcalloc(a->nmatrices + 1, sizeof *a->scale_bits);
    if (!a->amax || !a->scale || !a->scale_bits)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    return FP8_OK;
}

/* Per-tensor scheme: each matrix's scale from its amax, as quantize makes it. */
static void against_tensor_scales(against *a)
{
    for (size_t i = 0; i < a->n; i++) {
        const ag_item *it = &a->items[i];
        for (uint64_t x = 0; !it->w.l && it->item != SIZE_MAX && x < it->experts; x++) {
            fp8_band b;
            uint64_t first;
            fp8_quant_plan_band(a->plan, it->item, x, 0, 1, 0, it->cols, &b, &first);
            a->scale[it->at + x] = fp8_numerics_scale(&b.num, b.kind, a->amax[it->at + x],
                                                  &a->scale_bits[it->at + x]);
            if (a->scale[it->at + x] == 0) /* no scale serves: see fp8_scale_make */
                a->impossible = true;
        }
    }
}

/* --profile auto: one re-quantize-only pass with each other profile that
 * defines the declared scheme (its own plan, its per-tensor scales from the
 * amaxes of the first pass), each counted as the main pass is; v->profiles
 * gets those that reproduce every weight.  The main pass's counts stay. */
static fp8_status against_reproduced(fp8_ctx *ctx, fp8_verify *v, const against *a);
static fp8_status against_profiles(fp8_ctx *ctx, fp8_verify *v, against *a, const char *src_path,
                                   int threads, const volatile sig_atomic_t *cancel)
{
    long requantized = v->requantized, reproduced = v->reproduced, fp4 = v->requantized_fp4;
    char *first = v->first_unreproduced;
    fp8_quant_plan *main_plan = a->plan;
    bool impossible = a->impossible;
    fp8_status st = FP8_OK;
    v->first_unreproduced = NULL;
    v->profiles = 0;
    for (int p = 0; p < FP8_PROFILE_COUNT && !st; p++) {
        if (!fp8_profile_defines((fp8_profile)p, v->scheme, NULL, 0))
            continue;
        v->profiles_tried |= 1u << p;
        if (p == (int)v->opts->profile) { /* the main pass */
            v->profiles |= (long)(reproduced == requantized) << p;
            continue;
        }
        fp8_quant_plan *plan = NULL;
        if ((st = against_plan(ctx, v, src_path, (fp8_profile)p, &plan)) || !plan)
            continue;
        a->plan = plan;
        a->impossible = false;
        for (size_t i = 0; i < a->n; i++)
            a->items[i].differs[1] = false;
        if (fp8_scheme_get(v->scheme)->fixed)
            against_tensor_scales(a);
        a->floor_pass = a->profile_pass = true;
        if (!(st = against_run(ctx, a, threads, cancel, src_path)))
            st = against_reproduced(ctx, v, a);
        a->floor_pass = a->profile_pass = false;
        if (!st && v->reproduced >= 0 && v->reproduced == v->requantized)
            v->profiles |= 1l << p;
        free(v->first_unreproduced);
        v->first_unreproduced = NULL;
        a->plan = main_plan;
        fp8_quant_plan_free(plan);
    }
    a->impossible = impossible;
    v->requantized = requantized;
    v->reproduced = reproduced;
    v->requantized_fp4 = fp4;
    v->first_unreproduced = first;
    return st;
}

/* How many weights re-quantizing reproduces (FP8 with the MX scales of the
 * latest pass, and packed FP4) and the first that it does not, in name
 * order; -1 when it was not possible. */
static fp8_status against_reproduced(fp8_ctx *ctx, fp8_verify *v, const against *a)
{
    long total = 0, same = 0, fp4 = 0, fp8 = 0;
    int k = a->floor_pass;
    const char *first = NULL;
    v->requantized = v->reproduced = v->requantized_fp4 = -1;
    free(v->first_unreproduced);
    v->first_unreproduced = NULL;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(v->ck); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, NULL);
        const ag_item *p = bsearch(t->name, a->items, a->npacked, sizeof *p, cmp_item);
        bool ok;
        if (p && p->requant) {
            fp4++;
            ok = p->item != SIZE_MAX && !p->differs[0];
        } else if (fp8_dtype_holds_codes(t->dtype) &&
                   !packed_owns(a, t->name, false)) {
            const ag_item *it = a->by_tensor[i] != SIZE_MAX ? &a->items[a->by_tensor[i]] : NULL;
            fp8++;
            ok = it && it->compare && !it->differs[k];
        } else {
            continue;
        }
        total++;
        same += ok;
        first = !ok && !first ? t->name : first;
    }
    bool fp8_possible = a->plan && !a->impossible;
    if (((fp8 || !fp4) && !fp8_possible) || (fp4 && a->fp4_impossible))
        return FP8_OK;
    if (first && !(v->first_unreproduced = fp8_strdup(first)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    v->requantized = total;
    v->reproduced = same;
    v->requantized_fp4 = fp4;
    return FP8_OK;
}

static int cmp_stats(const void *x, const void *y)
{
    return strcmp(((const fp8_verify_stats *)x)->name, ((const fp8_verify_stats *)y)->name);
}

static int cmp_items(const void *x, const void *y)
{
    return strcmp((*(const ag_item *const *)x)->name, (*(const ag_item *const *)y)->name);
}

/* Each item's quality sums: its jobs', in order; the model's: the items',
 * in name order; each FP8 weight's go to its statistics (fp8_verify_stats,
 * in name order), where it has them. */
static void against_quality(fp8_verify *v, against *a)
{
    const ag_item **order = fp8_xcalloc(a->n + 1, sizeof *order);
    size_t n = 0;
    for (size_t i = 0; i < a->n; i++) {
        ag_item *it = &a->items[i];
        uint64_t jobs = it->band ? it->experts * fp8_ceil_div(it->rows, it->band) : 0;
        for (uint64_t k = 0; k < jobs && it->first_job + k < a->njobs; k++)
            fp8_quality_add(&it->quality, &a->job_quality[it->first_job + k]);
        if (it->quality.elements && it->name && order)
            order[n++] = it;
    }
    if (n)
        qsort(order, n, sizeof *order, cmp_items);
    for (size_t k = 0; k < n; k++) {
        fp8_quality_add(&v->quality, &order[k]->quality);
        fp8_verify_stats key = { .name = order[k]->name };
        fp8_verify_stats *s = v->nstats ? bsearch(&key, v->stats, v->nstats, sizeof *v->stats,
                                                  cmp_stats)
                                        : NULL;
        if (s)
            s->quality = order[k]->quality;
    }
    free(order);
}

fp8_status verify_check_against(fp8_ctx *ctx, fp8_verify *v, const char *src_path, int threads,
                                const volatile sig_atomic_t *cancel)
{
    fp8_checkpoint *src = NULL;
    dq_weights *w = NULL;
    fp8_status st = fp8_checkpoint_open(ctx, src_path, &src);
    if (st)
        return st;
    /* the packed FP4 weights (SRC holds their logical weights), which the
     * FP8 loops below leave alone; a packed tensor SRC holds as it is
     * (gpt-oss _blocks kept by quantize) is a kept tensor here */
    against a = { .v = v, .src = src, .src_path = src_path };
    if ((st = packed_open(ctx, &a))) {
        packed_free(&a);
        fp8_checkpoint_close(src);
        return st;
    }
    pthread_mutex_init(&a.lock, NULL);
    fp8_ctx *wctx = fp8_ctx_create();
    bool can_dequantize = wctx && !dq_weights_open(wctx, v->ck,
                                                   fp8_checkpoint_is_directory(v->ck) ? v->path : NULL,
                                                   &w);
    fp8_ctx_free(wctx);
    size_t nt = fp8_checkpoint_tensor_count(v->ck);
    bool *bound = fp8_xcalloc(nt + 1, sizeof *bound), *copy = fp8_xcalloc(nt + 1, sizeof *copy);
    if (!bound || !copy) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the same tensors, with the same shapes; kept tensors copied bit for bit */
    for (size_t i = 0; i < nt && !st; i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, NULL);
        dq_action role = w ? dq_weights_role(w, t->name) : DQ_COPY;
        if (role == DQ_DROP || packed_owns(&a, t->name, false) ||
            (!fp8_dtype_holds_codes(t->dtype) &&
             (fp8_has_suffix(t->name, "_scale") || fp8_has_suffix(t->name, "_scale_inv"))))
            continue;
        const fp8_tensor_info *x = fp8_checkpoint_find(src, t->name, NULL);
        if (!x)
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s is not in %s", v->path,
                     t->name, src_path);
        else if (!verify_has_shape(x, t->rank, t->shape))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s has another shape in %s",
                     v->path, t->name, src_path);
        else if (fp8_dtype_holds_codes(t->dtype) && fp8_dtype_is_float(x->dtype))
            bound[i] = w != NULL;
        else if (t->dtype == x->dtype)
            copy[i] = true; /* compared by the jobs */
        else
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-copy",
                     "%s: %s: not quantized, yet its bytes differ from %s's", v->path, t->name,
                     src_path);
    }
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(src) && !st; i++) {
        const fp8_tensor_info *x = fp8_checkpoint_tensor(src, i, NULL);
        if (!fp8_checkpoint_find(v->ck, x->name, NULL) && !packed_owns(&a, x->name, true))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s of %s is missing", v->path,
                     x->name, src_path);
    }
    a.w = w;
    /* a declared FP4 scheme's plan is the FP4 pass's, by layout */
    bool fp8_plan = can_dequantize && v->format != FP8_FORMAT_DEFAULT &&
                    fp8_elem_get(fp8_scheme_get(v->scheme)->elem)->per_byte == 1;
    char defined[64];
    if (!st && v->format != FP8_FORMAT_DEFAULT &&
        !fp8_profile_defines(v->opts->profile, v->scheme, defined, sizeof defined))
        st = fp8_fail(ctx, FP8_ERR_USAGE,
                      "%s: --profile %s does not define the %s scheme it declares (it defines: %s)",
                      v->path, fp8_profile_name(v->opts->profile), fp8_scheme_name(v->scheme),
                      defined);
    if (!st && fp8_plan)
        st = against_plan(ctx, v, src_path, v->opts->profile, &a.plan);
    if (!st)
        st = packed_plans(ctx, &a, threads, cancel);
    if (!st)
        st = against_items(ctx, &a, bound, copy);
    if (!st && a.plan && fp8_scheme_get(v->scheme)->fixed) { /* pass 1: amax of each matrix */
        a.amax_pass = true;
        st = against_run(ctx, &a, threads, cancel, src_path);
        a.amax_pass = false;
        if (!st)
            against_tensor_scales(&a);
    }
    if (!st && !(a.job_quality = fp8_xcalloc(a.njobs + 1, sizeof *a.job_quality)))
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st)
        st = against_run(ctx, &a, threads, cancel, src_path);
    if (!st)
        against_quality(v, &a);
    for (size_t i = 0; i < a.n && !st; i++) {
        const ag_item *it = &a.items[i];
        if (it->w.l) {
            st = packed_report(ctx, &a, it);
            continue;
        }
        if (it->copy && it->differs[0])
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-copy",
                     "%s: %s: not quantized, yet its bytes differ from %s's", v->path, it->name,
                     src_path);
        if (!st && it->bad)
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-bound",
                     "%s: %s: %llu of %llu elements are further from %s than E4M3 rounding "
                     "allows (max(|x|/16, scale/1024)); first at %llu: x = %.9g, q * scale = %.9g",
                     v->path, it->name, (unsigned long long)it->bad,
                     (unsigned long long)it->t->elements, src_path, (unsigned long long)it->first,
                     it->first_x, it->first_y);
        if (!st && it->clipped)
            st = verify_add(ctx, v, FP8_SEV_WARNING, "saturation",
                     "%s: %s: %llu elements of %s exceed 464 * scale and were clipped to +-448",
                     v->path, it->name, (unsigned long long)it->clipped, src_path);
    }
    if (!st && ((can_dequantize && v->format != FP8_FORMAT_DEFAULT) ||
                a.nrequant))
        st = against_reproduced(ctx, v, &a);
    /* MX scales round up (rceil) by default; try floor when that misses */
    if (!st && a.plan && v->reproduced >= 0 && v->reproduced < v->requantized &&
        fp8_scheme_get(v->scheme)->pow2_scales) {
        a.floor_pass = true;
        if (!(st = against_run(ctx, &a, threads, cancel, src_path)))
            st = against_reproduced(ctx, v, &a);
    }
    /* (MX: fp8conv counts as reproducing with either rounding) */
    if (!st && a.plan && v->opts->profile_auto && v->reproduced >= 0)
        st = against_profiles(ctx, v, &a, src_path, threads, cancel);
out:
    free(bound);
    free(copy);
    free(a.by_tensor);
    free(a.amax);
    free(a.scale);
    free(a.scale_bits);
    free(a.job_quality);
    pthread_mutex_destroy(&a.lock);
    fp8_quant_plan_free(a.plan);
    packed_free(&a);
    dq_weights_free(w);
    fp8_checkpoint_close(src);
    return st;
}
