/*
 * verify_against.c - verify --against SRC: each FP8 weight against its source within
 * E4M3's rounding error (fp8conv-formats(5), ERROR BOUND; the bound itself is
 * quant_ref.c's fp8_bound_span_ref and quant_cpu.c's fp8_bound_span), and SRC
 * re-quantized in memory, band by band, as quantize would write it, to say
 * which weights it reproduces byte for byte.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/verify_passes.h"
#include "compute/quant_cpu.h"
#include "ops/dequantize.h"
#include "ops/quantize.h"

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

#define BAND_ELEMS(v) ((v)->chunk / 4) /* elements in a job's band, about */

typedef struct {
    const char *name;
    const fp8_tensor_info *t; /* the FP8 weight in v->ck; NULL when none */
    const fp8_tensor_info *s; /* its scale, as the declared format names it; NULL when none */
    size_t shard, sshard;
    const fp8_tensor_info *x; /* the source tensor */
    size_t xshard;
    size_t item;   /* its quantize plan item; SIZE_MAX when quantize keeps it */
    size_t layout_item; /* a packed FP4 weight: 1 + its index in against.f4; 0: none */
    bool bound;    /* its values are checked against the source */
    /* the bound reads the codes and scales itself (the scale has the declared
     * layout, which dequantize reads as it does); otherwise dq_weights_read */
    bool own;
    bool compare;  /* the weight and its scale can be compared with the re-quantized bytes */
    bool copy;     /* a tensor quantize keeps: t's bytes against x's (rows are bytes) */
    uint64_t experts, rows, cols, band;
    size_t first_job;
    size_t at;     /* per-tensor scheme: its first matrix in against.amax */
    /* found, over its jobs (atomic, or under against.lock) */
    uint64_t bad, clipped, first;
    double first_x, first_y;
    bool differs[2]; /* re-quantized with the plan's scales; with floor-rounded MX scales */
} ag_item;

typedef struct {
    fp8_verify *v;
    fp8_checkpoint *src;
    dq_weights *w;
    fp8_quant_plan *plan; /* NULL: no re-quantization */
    vf4_against *f4;      /* the packed weights, verify_against_set.c's */
    ag_item *items;
    size_t n, *by_tensor;  /* by_tensor: v->ck's tensor -> item, SIZE_MAX when none */
    size_t njobs;
    bool amax_pass;        /* the per-tensor scheme's first pass */
    bool floor_pass;       /* MX scales not reproduced rounded up: re-quantize rounded down */
    uint64_t max_band, max_src, max_scales, max_cols; /* a band's elements, source bytes, ... */
    float *amax;           /* per-tensor scheme: by matrix */
    float *scale;
    uint32_t *scale_bits;
    size_t nmatrices;
    bool impossible;       /* quantize refuses a source value or scale: nothing to compare */
    pthread_mutex_t lock;
} against;

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
                      const float *y, const float *s, uint64_t n, uint64_t at)
{
    uint64_t counts[2] = { 0, 0 };
    fp8_bound_span(dt, x, q, y, s, n, counts);
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


/* The bound of a band whose codes and stored scales are read here, failing
 * as dequantize fails on them (and as dq_weights_read did for verify): a
 * scale that is not finite and positive, then a NaN code. */
static fp8_status bound_own(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                            uint64_t nrows, const unsigned char *src, const uint8_t *codes,
                            const unsigned char *raw, uint64_t sfirst, uint64_t scount,
                            float *sf, float *se)
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
    fp8_code_stats cs;
    fp8_code_stats_span(codes, n, &cs);
    for (uint64_t k = 0; cs.nan && k < n; k++)
        if ((codes[k] & 0x7F) == 0x7F)
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
        bound_add(a, it, it->x->dtype, src + r * N * xs, codes + r * N, NULL, se, N, at + r * N);
    }
    return FP8_OK;
}

/* The bound of a band as dequantize reads it, for a weight whose scale is
 * not of the declared layout. */
static fp8_status bound_dq(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                           uint64_t nrows, const unsigned char *src)
{
    uint64_t n = nrows * it->cols, at = src_at(it, x, row0);
    float *y = malloc(n * 4 + 4), *sc = malloc(n * 4 + 4);
    fp8_status st = y && sc ? dq_weights_read(w->ctx, a->w, it->name, at, n, FP8_DTYPE_F32, y, sc)
                            : fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st)
        bound_add(a, it, it->x->dtype, src, NULL, y, sc, n, at);
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
            if (k)
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

/* The bound and the re-quantization of rows [row0, row0 + nrows) of a
 * packed weight (the worker's buffers: buf[0] the source, buf[1] the codes,
 * then the re-quantized ones, buf[2] the scales, then the re-quantized
 * ones). */
static fp8_status packed_band(vf4_against *f, vf4_item *it, fp8_worker *w, uint64_t row0,
                              uint64_t nrows)
{
    const fp8_verify *v = f->v;
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
    /* quantize's band of the plan: the scheme's row, its second level */
    fp8_band b;
    uint64_t first, where;
    fp8_quant_plan_band(it->plan, it->item, 0, row0, nrows, 0, it->cols, &b, &first);
    if (fp8_band_quantize(&b, src, q, sq, &where) != FP8_BAND_OK) {
        __atomic_store_n(&f->impossible, true, __ATOMIC_RELAXED);
        return FP8_OK;
    }
    if (memcmp(q, codes, n / 2) != 0 || memcmp(sq, scales, n / run) != 0)
        __atomic_store_n(&it->differs, true, __ATOMIC_RELAXED);
    return FP8_OK;
}

/* The packed weights' findings: against-scale, against-bound, against-clipped. */
static fp8_status packed_report(fp8_ctx *ctx, vf4_against *f)
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

/* A packed weight's band's lane: its codes', or the source's. */
static size_t packed_lane(const vf4_against *f, const vf4_item *it, uint64_t row0, uint64_t *offset)
{
    uint64_t at = row0 * it->cols;
    size_t lane = ck_lane(f->v->ck, it->shard, it->t, at / 2, 0, offset);
    if (lane == FP8_NO_LANE) /* a weight written apart: its fused tensor's */
        lane = ck_lane(f->src, it->xshard, it->part ? it->part->fused : it->x,
                       it->part ? 0 : at * (fp8_dtype_bits(it->x->dtype) / 8),
                       fp8_checkpoint_shard_count(f->v->ck), offset);
    return lane;
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
    if (it->layout_item) /* a packed weight's band */
        return a->amax_pass || a->floor_pass
                   ? FP8_OK
                   : packed_band(a->f4, &a->f4->items[it->layout_item - 1], w, row0, nrows);
    if (a->amax_pass)
        return it->item != SIZE_MAX ? amax_one(a, w, it, x, row0, nrows) : FP8_OK;
    if (a->floor_pass && !it->compare)
        return FP8_OK;
    if (it->copy)
        return copy_one(a, w, it, row0, nrows);
    uint64_t n = nrows * it->cols, at = src_at(it, x, row0), sfirst = 0, scount = 0;
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    unsigned char *src = w->buf[0], *raw = w->buf[2];
    uint8_t *codes = w->buf[1], *q = w->buf[1] + a->max_band;
    unsigned char *scales = raw + 4 * a->max_scales;
    float *sf = (float *)(void *)(raw + 8 * a->max_scales), *se = sf + a->max_scales;
    bool requant = it->item != SIZE_MAX;
    fp8_status st = FP8_OK;
    if (it->own || requant)
        scale_span(v, it, x, row0, nrows, &sfirst, &scount);
    if (it->own || it->compare) {
        unsigned ssize = fp8_dtype_bits(it->s->dtype) / 8;
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->sshard), it->s,
                           sfirst * ssize, raw, scount * ssize);
        if (!st)
            st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->shard), it->t, at, codes,
                               n);
    }
    if (!st)
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->x, at * xs, src,
                           n * xs);
    fp8_worker_end_turn(w);
    if (!st && it->bound && !a->floor_pass)
        st = it->own ? bound_own(a, w, it, x, row0, nrows, src, codes, raw, sfirst, scount, sf, se)
                     : bound_dq(a, w, it, x, row0, nrows, src);
    if (!st && requant)
        requantize_band(a, it, x, row0, nrows, src, codes, raw, sfirst, q, scales);
    return st;
}

static const char *against_label(void *arg, size_t j)
{
    uint64_t x, row0, nrows;
    return job_band(arg, j, &x, &row0, &nrows)->name;
}

static uint64_t against_bytes(void *arg, size_t j)
{
    const against *a = arg;
    uint64_t x, row0, nrows;
    const ag_item *it = job_band(a, j, &x, &row0, &nrows);
    uint64_t n = nrows * it->cols, xs = fp8_dtype_bits(it->x->dtype) / 8;
    if (it->layout_item) /* the source and the E2M1 codes */
        return a->amax_pass || a->floor_pass ? 0 : n * xs + n / 2;
    if (a->amax_pass)
        return it->item != SIZE_MAX ? n * xs : 0;
    if (it->copy)
        return a->floor_pass ? 0 : 2 * n;
    if (a->floor_pass)
        return it->compare ? n * xs + n : 0;
    return n * xs + (it->bound || it->compare ? n : 0);
}

/* In the lane of the weight's shard when compressed, else of the source's. */
static size_t against_lane(void *arg, size_t j, uint64_t *offset)
{
    const against *a = arg;
    uint64_t x, row0, nrows;
    const ag_item *it = job_band(a, j, &x, &row0, &nrows);
    if (it->layout_item)
        return packed_lane(a->f4, &a->f4->items[it->layout_item - 1], row0, offset);
    uint64_t at = src_at(it, x, row0), xs = it->copy ? 1 : fp8_dtype_bits(it->x->dtype) / 8;
    size_t lane = FP8_NO_LANE;
    if (!a->amax_pass && (it->bound || it->compare || it->copy))
        lane = ck_lane(a->v->ck, it->shard, it->t, at, 0, offset);
    if (lane == FP8_NO_LANE)
        lane = ck_lane(a->src, it->xshard, it->x, at * xs, fp8_checkpoint_shard_count(a->v->ck),
                       offset);
    return lane;
}

static fp8_status against_run(fp8_ctx *ctx, against *a, int threads,
                              const volatile sig_atomic_t *cancel, const char *src_path)
{
    fp8_verify *v = a->v;
    for (size_t j = 0; j < a->njobs; j++)
        v->total += against_bytes(a, j);
    fp8_jobs spec = { .njobs = a->njobs, .threads = threads, .run = against_one,
                      .bytes = against_bytes, .arg = a, .what = src_path, .cancel = cancel,
                      .progress = v->opts->progress, .progress_user = v->opts->progress_user,
                      .done = &v->done, .total = v->total, .label = against_label,
                      .lane = against_lane,
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
                               fp8_quant_plan **plan)
{
    static const fp8_format formats[] = { FP8_FORMAT_DEFAULT, FP8_FORMAT_HF_FP8,
                                          FP8_FORMAT_COMPRESSED_TENSORS, FP8_FORMAT_MODELOPT };
    fp8_quant_options o = FP8_QUANT_OPTIONS_INIT;
    o.scheme = v->scheme;
    o.format = formats[v->format];
    o.block_rows = v->block_rows;
    o.block_cols = v->block_cols;
    o.scale_ue8m0 = v->ue8m0_claim;
    o.mx_rounding = FP8_MX_RCEIL; /* the default; floor is tried too */
    /* every FP8 weight of the checkpoint is re-quantized, whatever the
     * default keep rules say (a norm quantized with --no-default-ignore:
     * fuzz_dir, 2026-11-24); the plan is only looked up for those */
    o.no_default_ignore = true;
    fp8_ctx *qctx = fp8_ctx_create();
    fp8_status st = qctx ? fp8_quant_plan_create(qctx, src_path, &o, plan) : FP8_ERR_NOMEM;
    if (st == FP8_ERR_IO || st == FP8_ERR_NOMEM)
        st = fp8_fail(ctx, st, "--against %s: %s", src_path,
                      qctx ? fp8_ctx_message(qctx) : "out of memory");
    else
        st = FP8_OK;
    fp8_ctx_free(qctx);
    return st;
}

static uint64_t scale_bytes(fp8_dtype dt, int rank, const uint64_t *shape)
{
    uint64_t n = fp8_dtype_bits(dt) / 8;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    return n;
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
        char other[1024];
        const char *suffix = v->spec->scale_suffix;
        it->s = verify_find_scale(v, t, &it->sshard, &suffix);
        snprintf(other, sizeof other, "%s%s", t->name,
                 strcmp(suffix, "_scale") == 0 ? "_scale_inv" : "_scale");
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
        if (bound && s && !fp8_checkpoint_find(v->ck, other, NULL) && same_blocks &&
            (mx ? s->dtype == FP8_DTYPE_U8 || s->dtype == fp8_elem_get(sch->scale_elem[0])->dtype
                : verify_is_float(s->dtype))) {
            fmt_scale_shape(v->spec, t->rank, t->shape, v->block_rows, v->block_cols, &rank, shape);
            it->own = verify_has_shape(s, rank, shape);
        }
        const fp8_quant_item *qi = item != SIZE_MAX ? fp8_quant_plan_item(a->plan, item) : NULL;
        it->compare = qi && s && verify_is_fp8(t->dtype) && t->elements == x->elements &&
                      s->dtype == qi->scale_dtype &&
                      fp8_tensor_nbytes(s) ==
                          scale_bytes(qi->scale_dtype, qi->scale_rank, qi->scale_shape);
    }
    it->band = it->cols && BAND_ELEMS(v) / it->cols ? BAND_ELEMS(v) / it->cols : 1;
    if (fp8_scheme_has_block(v->scheme)) /* whole block rows */
        it->band = it->band < v->block_rows ? v->block_rows : it->band / v->block_rows * v->block_rows;
    it->first_job = a->njobs;
    if (x->elements)
        a->njobs += it->experts * fp8_ceil_div(it->rows, it->band);
    uint64_t band = it->band < it->rows ? it->band : it->rows, first, count;
    scale_span(v, it, 0, 0, band, &first, &count);
    uint64_t src = band * it->cols * (fp8_dtype_bits(x->dtype) / 8);
    a->max_band = band * it->cols > a->max_band ? band * it->cols : a->max_band;
    a->max_src = src > a->max_src ? src : a->max_src;
    a->max_scales = count > a->max_scales ? count : a->max_scales;
    a->max_cols = it->cols > a->max_cols ? it->cols : a->max_cols;
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
    a->items = fp8_xcalloc(3 * nt + np + 1, sizeof *a->items);
    a->by_tensor = fp8_xcalloc(nt + 1, sizeof *a->by_tensor);
    if (!a->items || !a->by_tensor)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nt; i++) {
        ag_item *it = &a->items[a->n];
        a->by_tensor[i] = SIZE_MAX;
        it->t = fp8_checkpoint_tensor(v->ck, i, &it->shard);
        it->x = fp8_checkpoint_find(a->src, it->t->name, &it->xshard);
        size_t item = it->x ? quant_plan_find(a->plan, it->t->name) : SIZE_MAX;
        if (!verify_is_fp8(it->t->dtype) || !it->x || (!bound[i] && item == SIZE_MAX) ||
            verify_fp4_against_owns(a->f4, it->t->name, false))
            continue;
        it->name = it->t->name;
        against_item(a, it, bound[i], item);
        a->by_tensor[i] = a->n++;
    }
    for (size_t k = 0; k < np; k++) {
        const fp8_quant_item *qi = fp8_quant_plan_item(a->plan, k);
        const fp8_tensor_info *t = fp8_checkpoint_find(v->ck, qi->tensor->name, NULL);
        if (!qi->quantize || (t && verify_is_fp8(t->dtype)) ||
            verify_fp4_against_owns(a->f4, qi->tensor->name, true))
            continue;
        ag_item *it = &a->items[a->n++];
        it->name = qi->tensor->name;
        it->x = fp8_checkpoint_find(a->src, it->name, &it->xshard);
        against_item(a, it, false, k);
    }
    for (size_t i = 0; a->f4 && i < a->f4->n; i++) { /* packed weights */
        const vf4_item *p = &a->f4->items[i];
        ag_item *it = &a->items[a->n];
        if (!p->x || !(p->bound || p->item != SIZE_MAX) || !p->rows || !p->cols)
            continue;
        it->t = p->t;
        it->shard = p->shard;
        it->x = p->x;
        it->xshard = p->xshard;
        it->rows = p->rows;
        it->cols = p->cols;
        it->name = it->t->name;
        it->layout_item = i + 1;
        it->item = SIZE_MAX;
        it->experts = 1;
        it->band = BAND_ELEMS(v) / it->cols ? BAND_ELEMS(v) / it->cols : 1;
        it->first_job = a->njobs;
        a->njobs += fp8_ceil_div(it->rows, it->band);
        uint64_t n = (it->band < it->rows ? it->band : it->rows) * it->cols;
        uint64_t src = n * (fp8_dtype_bits(it->x->dtype) / 8);
        a->max_band = n > a->max_band ? n : a->max_band;
        a->max_src = src > a->max_src ? src : a->max_src;
        a->max_scales = n / 16 + 1 > a->max_scales ? n / 16 + 1 : a->max_scales;
        a->n++;
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
        it->band = BAND_ELEMS(v);
        it->first_job = a->njobs;
        a->njobs += fp8_ceil_div(it->rows, it->band);
        uint64_t band = it->band < it->rows ? it->band : it->rows;
        a->max_band = band > a->max_band ? band : a->max_band;
        a->max_src = band > a->max_src ? band : a->max_src;
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
        for (uint64_t x = 0; it->item != SIZE_MAX && x < it->experts; x++) {
            fp8_band b;
            uint64_t first;
            fp8_quant_plan_band(a->plan, it->item, x, 0, 1, 0, it->cols, &b, &first);
            a->scale[it->at + x] = fp8_scale_make(b.kind, a->amax[it->at + x],
                                                  &a->scale_bits[it->at + x]);
            if (a->scale[it->at + x] == 0) /* no scale serves: see fp8_scale_make */
                a->impossible = true;
        }
    }
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
        int packed = verify_fp4_against_reproduced(a->f4, t->name);
        bool ok;
        if (packed >= 0) {
            fp4++;
            ok = packed;
        } else if (verify_is_fp8(t->dtype) &&
                   !verify_fp4_against_owns(a->f4, t->name, false)) {
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
    if (((fp8 || !fp4) && !fp8_possible) || (fp4 && !verify_fp4_against_possible(a->f4)))
        return FP8_OK;
    if (first && !(v->first_unreproduced = fp8_strdup(first)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    v->requantized = total;
    v->reproduced = same;
    v->requantized_fp4 = fp4;
    return FP8_OK;
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
     * loops below leave to verify_against_set.c; a packed tensor SRC holds as
     * it is (gpt-oss _blocks kept by quantize) is a kept tensor here */
    vf4_against *f4 = NULL;
    if ((st = verify_fp4_against_open(ctx, v, src, src_path, &f4))) {
        fp8_checkpoint_close(src);
        return st;
    }
    against a = { .v = v, .f4 = f4 };
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
        if (role == DQ_DROP || (!verify_is_fp8(t->dtype) && (fp8_has_suffix(t->name, "_scale") ||
                                                                  fp8_has_suffix(t->name, "_scale_inv"))) ||
            verify_fp4_against_owns(f4, t->name, false))
            continue;
        const fp8_tensor_info *x = fp8_checkpoint_find(src, t->name, NULL);
        if (!x)
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s is not in %s", v->path,
                     t->name, src_path);
        else if (!verify_has_shape(x, t->rank, t->shape))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s has another shape in %s",
                     v->path, t->name, src_path);
        else if (verify_is_fp8(t->dtype) && verify_is_float(x->dtype))
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
        if (!fp8_checkpoint_find(v->ck, x->name, NULL) && !verify_fp4_against_owns(f4, x->name, true))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s of %s is missing", v->path,
                     x->name, src_path);
    }
    a.src = src;
    a.w = w;
    /* a declared FP4 scheme's plan is the FP4 pass's, by layout */
    bool fp8_plan = can_dequantize && v->format != FP8_FORMAT_DEFAULT &&
                    fp8_elem_get(fp8_scheme_get(v->scheme)->elem)->per_byte == 1;
    if (!st && fp8_plan)
        st = against_plan(ctx, v, src_path, &a.plan);
    if (!st)
        st = verify_fp4_against_plan(ctx, f4, threads, cancel);
    if (!st)
        st = against_items(ctx, &a, bound, copy);
    if (!st && a.plan && fp8_scheme_get(v->scheme)->fixed) { /* pass 1: amax of each matrix */
        a.amax_pass = true;
        st = against_run(ctx, &a, threads, cancel, src_path);
        a.amax_pass = false;
        if (!st)
            against_tensor_scales(&a);
    }
    if (!st)
        st = against_run(ctx, &a, threads, cancel, src_path);
    for (size_t i = 0; i < a.n && !st; i++) {
        const ag_item *it = &a.items[i];
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
    if (!st)
        st = packed_report(ctx, f4);
    if (!st && ((can_dequantize && v->format != FP8_FORMAT_DEFAULT) ||
                verify_fp4_against_requantized(f4)))
        st = against_reproduced(ctx, v, &a);
    /* MX scales round up (rceil) by default; try floor when that misses */
    if (!st && a.plan && v->reproduced >= 0 && v->reproduced < v->requantized &&
        fp8_scheme_get(v->scheme)->pow2_scales) {
        a.floor_pass = true;
        if (!(st = against_run(ctx, &a, threads, cancel, src_path)))
            st = against_reproduced(ctx, v, &a);
    }
out:
    free(bound);
    free(copy);
    free(a.items);
    free(a.by_tensor);
    free(a.amax);
    free(a.scale);
    free(a.scale_bits);
    pthread_mutex_destroy(&a.lock);
    fp8_quant_plan_free(a.plan);
    verify_fp4_against_free(f4);
    dq_weights_free(w);
    fp8_checkpoint_close(src);
    return st;
}
