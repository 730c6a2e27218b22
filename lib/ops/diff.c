/*
 * diff.c - tensor-by-tensor comparison of two checkpoints whatever their
 * sharding (fp8conv(1), diff).  Content hashes are hash.c's, the statistics
 * of a differing tensor diff_cpu.c's (the fast path) over diff_ref.c's (the
 * reference).  With dequant, quantized weights (FP8, and packed ones of
 * fp4.h's layouts under their unpacked names and shapes) are read by
 * dequantize.c's dq_weights.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/types.h"
#include "io/checkpoint.h"
#include "compute/diff_cpu.h"
#include "compute/jobs.h"
#include "ops/dequantize.h"
#include "ops/hash.h"

/* ---------------------------------------------------------------- diff */

/*
 * Two runs of jobs.  The first hashes every tensor of A and of B (a hash
 * is sequential over a tensor's bytes: one job per tensor); the second
 * compares, element by element, the pairs of one dtype and shape whose
 * hashes differ, and the pairs compared by dequantized value, in bands of
 * a MiB, so that a large tensor keeps every thread busy.  Each band has
 * its own statistics, merged in band order: the report is the same for any
 * thread count.  Each run reads every file it needs once, a compressed one
 * in file order (lanes).
 */

/* Bytes of a band on each side, and fp32 values of one (whole rows): fixed,
 * not the thread count's (fp8_jobs_chunk), for the quality sums add band by
 * band (fp8_quality). */
#define BAND_BYTES ((uint64_t)FP8_CHUNK_BYTES / 4)
#define BAND_VALUES (BAND_BYTES / 4)

typedef struct {
    size_t entry;
    uint64_t first, n; /* elements */
    diff_stats stats;
} diff_band;

/* One side's tensors as they pair up: by name, or the unpacked name. */
typedef struct {
    const char *name;
    size_t index;
} diff_view;

struct fp8_diff {
    fp8_checkpoint *ck[2];
    dq_weights *w[2];
    bool dequant;
    uint64_t chunk; /* bytes a hash reads at a time; a band is half of it */
    size_t n;
    fp8_diff_entry *e;
    size_t *shard[2]; /* by entry: the shard of its tensor on each side */
    size_t *index[2]; /* by entry: its tensor's index in each checkpoint */
    fp8_hash_hex *hashes[2], digest[2];
    diff_band *bands;
    size_t nbands;
};

/* Entry k's stored tensor on one side, and whether diff reads it by
 * dequantize's reader (with dequant: a quantized weight). */
static const fp8_tensor_info *stored(const fp8_diff *d, int side, size_t k)
{
    return fp8_checkpoint_tensor(d->ck[side], d->index[side][k], NULL);
}

static bool read_by_dq(const fp8_diff *d, int side, size_t k)
{
    return d->dequant && dq_weights_role(d->w[side], stored(d, side, k)->name) == DQ_DEQUANT;
}

/* ---- the first run: hashes */

static const fp8_tensor_info *side_tensor(fp8_diff *d, size_t j, int *side, size_t *shard)
{
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]);
    *side = j >= na;
    return fp8_checkpoint_tensor(d->ck[*side], j - (*side ? na : 0), shard);
}

static fp8_status hash_side(void *arg, fp8_worker *w, size_t j)
{
    fp8_diff *d = arg;
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]);
    return j < na ? hash_tensor(w->ctx, d->ck[0], j, w->buf[0], d->chunk, d->hashes[0][j])
                  : hash_tensor(w->ctx, d->ck[1], j - na, w->buf[0], d->chunk, d->hashes[1][j - na]);
}

/* Lanes: A's shards, then B's. */
static void hash_side_describe(void *arg, size_t j, fp8_job_info *info)
{
    fp8_diff *d = arg;
    int side;
    size_t s;
    const fp8_tensor_info *t = side_tensor(d, j, &side, &s);
    info->bytes = fp8_tensor_nbytes(t);
    info->label = t->name;
    info->lane = ck_lane(d->ck[side], s, t, 0, side ? fp8_checkpoint_shard_count(d->ck[0]) : 0,
                         &info->offset);
}

/* ---- the second run: bands */

/* Bytes of one element of the entry's tensor on one side, as read. */
static unsigned side_size(const fp8_diff *d, const fp8_diff_entry *e, int side)
{
    return diff_element_size(side ? e->b->dtype : e->a->dtype);
}

/* Bytes read for elements [first, first + n) of entry k on one side: the
 * stored tensor, and where in it the read starts (for lanes, progress). */
static const fp8_tensor_info *side_span(const fp8_diff *d, int side, size_t k, uint64_t first,
                                        uint64_t n, uint64_t *at, uint64_t *bytes)
{
    const fp8_diff_entry *e = &d->e[k];
    if (read_by_dq(d, side, k))
        return dq_weights_span(d->w[side], stored(d, side, k)->name, first, n, at, bytes);
    unsigned size = side_size(d, e, side);
    *at = first * size;
    *bytes = n * size;
    return side ? e->b : e->a;
}

/* Elements [first, first + n) of one side's tensor into y (4n bytes):
 * dequantized, as fp32 in the compared dtype (*dt F32), or as stored (*dt
 * its dtype: BF16, F16 or F32), which diff_values_stored reads as fp32 a
 * block at a time. */
static fp8_status side_values(fp8_ctx *ctx, fp8_diff *d, int side, size_t k, uint64_t first,
                              uint64_t n, void *y, fp8_dtype *dt)
{
    const fp8_tensor_info *t = side ? d->e[k].b : d->e[k].a;
    *dt = FP8_DTYPE_F32;
    if (read_by_dq(d, side, k))
        return dq_weights_read(ctx, d->w[side], stored(d, side, k)->name, first, n,
                               d->e[k].compared, y, NULL);
    *dt = t->dtype;
    unsigned size = diff_element_size(t->dtype);
    return fp8_file_read(ctx, fp8_checkpoint_shard(d->ck[side], d->shard[side][k]), t,
                         first * size, y, n * size);
}

static fp8_status compare_band(fp8_ctx *ctx, fp8_diff *d, fp8_worker *w, diff_band *b)
{
    fp8_diff_entry *e = &d->e[b->entry];
    size_t k = b->entry;
    unsigned char *ba = w->buf[0], *bb = w->buf[1], *own = NULL;
    fp8_status st = FP8_OK;
    if (!e->dequantized) {
        unsigned size = side_size(d, e, 0);
        if (!(st = fp8_file_read(ctx, fp8_checkpoint_shard(d->ck[0], d->shard[0][k]), e->a,
                                 b->first * size, ba, b->n * size)) &&
            !(st = fp8_file_read(ctx, fp8_checkpoint_shard(d->ck[1], d->shard[1][k]), e->b,
                                 b->first * size, bb, b->n * size))) {
            fp8_worker_end_turn(w);
            diff_bytes(e->a->dtype, ba, bb, b->n, b->first, &b->stats);
        }
        return st;
    }
    if (b->n > BAND_VALUES) { /* one row longer than a band: a buffer of its own */
        own = malloc(2 * b->n * 4);
        if (!own)
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        ba = own, bb = own + b->n * 4;
    }
    fp8_dtype da, db;
    if (!(st = side_values(ctx, d, 0, k, b->first, b->n, ba, &da)) &&
        !(st = side_values(ctx, d, 1, k, b->first, b->n, bb, &db))) {
        fp8_worker_end_turn(w);
        diff_values_stored(e->compared, da, ba, db, bb, b->n, b->first, &b->stats);
    }
    free(own);
    return st;
}

static fp8_status band_one(void *arg, fp8_worker *w, size_t j)
{
    fp8_diff *d = arg;
    return compare_band(w->ctx, d, w, &d->bands[j]);
}

/* A band goes in the lane of A's shard when that one is compressed, else in
 * that of B's. */
static void band_describe(void *arg, size_t j, fp8_job_info *info)
{
    fp8_diff *d = arg;
    const diff_band *b = &d->bands[j];
    uint64_t at[2], n[2];
    const fp8_tensor_info *ta = side_span(d, 0, b->entry, b->first, b->n, &at[0], &n[0]);
    const fp8_tensor_info *tb = side_span(d, 1, b->entry, b->first, b->n, &at[1], &n[1]);
    info->bytes = n[0] + n[1];
    info->label = d->e[b->entry].name;
    info->lane = ck_lane(d->ck[0], d->shard[0][b->entry], ta, at[0], 0, &info->offset);
    if (info->lane == FP8_NO_LANE)
        info->lane = ck_lane(d->ck[1], d->shard[1][b->entry], tb, at[1],
                             fp8_checkpoint_shard_count(d->ck[0]), &info->offset);
}

/* The bands of the entries left to compare by element: a pair of one dtype
 * and shape whose hashes are equal is identical (their name, dtype and shape
 * are, and XXH3-128 tells their bytes apart). */
static fp8_status plan_bands(fp8_ctx *ctx, fp8_diff *d)
{
    size_t cap = 0;
    for (size_t k = 0; k < d->n; k++) {
        fp8_diff_entry *e = &d->e[k];
        if (e->kind != FP8_DIFF_VALUES)
            continue;
        uint64_t step;
        if (e->dequantized) {
            const fp8_tensor_info *t = e->a;
            uint64_t cols = t->rank ? t->shape[t->rank - 1] : 1;
            uint64_t rows = cols ? BAND_VALUES / cols : 0;
            e->elements = t->elements;
            step = (rows ? rows : 1) * cols;
        } else {
            unsigned size = side_size(d, e, 0);
            e->elements = fp8_tensor_nbytes(e->a) / size;
            if (strcmp(d->hashes[0][d->index[0][k]], d->hashes[1][d->index[1][k]]) == 0) {
                e->kind = FP8_DIFF_SAME;
                continue;
            }
            step = BAND_BYTES / size;
        }
        for (uint64_t first = 0; step && first < e->elements; first += step) {
            if (!fp8_grow(&d->bands, d->nbands, &cap, sizeof *d->bands))
                return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            d->bands[d->nbands++] = (diff_band){
                .entry = k, .first = first,
                .n = e->elements - first < step ? e->elements - first : step,
                .stats = DIFF_STATS_INIT };
        }
    }
    return FP8_OK;
}

/* Each entry's statistics: its bands', in order (the quality sums add in it). */
static void merge_bands(fp8_diff *d)
{
    for (size_t j = 0; j < d->nbands; j++) {
        fp8_diff_entry *e = &d->e[d->bands[j].entry];
        diff_stats s = { e->differing, e->first_index, e->max_abs, e->max_ulp, e->sign_changes,
                         e->quality };
        diff_stats_merge(&s, &d->bands[j].stats);
        e->quality = s.quality;
        e->sign_changes = s.sign_changes;
        e->differing = s.differing;
        e->first_index = s.first_index;
        e->max_abs = s.max_abs;
        e->max_ulp = s.max_ulp;
    }
    for (size_t k = 0; k < d->n; k++)
        if (d->e[k].kind == FP8_DIFF_VALUES && d->e[k].differing == 0)
            d->e[k].kind = FP8_DIFF_SAME;
}

static bool same_shape(const fp8_tensor_info *a, const fp8_tensor_info *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* What the headers tell about pair k: everything but the values. */
static void classify(fp8_diff *d, size_t k)
{
    fp8_diff_entry *e = &d->e[k];
    if (!e->a || !e->b) {
        e->kind = e->a ? FP8_DIFF_ONLY_A : FP8_DIFF_ONLY_B;
        return;
    }
    bool fa = read_by_dq(d, 0, k), fb = read_by_dq(d, 1, k);
    if (fa || fb) { /* by value: quantized against quantized, or against a float tensor */
        e->dequantized = (fa || fp8_dtype_is_float(e->a->dtype)) &&
                         (fb || fp8_dtype_is_float(e->b->dtype));
        /* both quantized: fp32; else the float side's dtype, each quantized
         * value rounded once into it, as dequantize-for-export writes it */
        e->compared = fa && fb ? FP8_DTYPE_F32 : fa ? e->b->dtype : e->a->dtype;
        e->kind = !e->dequantized            ? FP8_DIFF_DTYPE
                  : !same_shape(e->a, e->b) ? FP8_DIFF_SHAPE
                                            : FP8_DIFF_VALUES;
        return;
    }
    e->kind = e->a->dtype != e->b->dtype  ? FP8_DIFF_DTYPE
              : !same_shape(e->a, e->b) ? FP8_DIFF_SHAPE
                                        : FP8_DIFF_VALUES;
}

static int view_order(const void *x, const void *y)
{
    const diff_view *a = x, *b = y;
    int c = strcmp(a->name, b->name);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* One side's tensors to pair, sorted by the name they pair by: with dequant,
 * scales left out and packed-FP4 weights under their unpacked names. */
static fp8_status side_view(fp8_ctx *ctx, fp8_diff *d, int side, diff_view **out, size_t *nv)
{
    fp8_checkpoint *ck = d->ck[side];
    size_t n = fp8_checkpoint_tensor_count(ck);
    diff_view *v = fp8_xcalloc(n + 1, sizeof *v);
    fp8_status st = v ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    *nv = 0;
    for (size_t i = 0; i < n && !st; i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
        if (d->dequant && dq_weights_role(d->w[side], t->name) == DQ_DROP)
            continue;
        v[(*nv)++] = (diff_view){ d->dequant ? dq_weights_shown(d->w[side], t->name)->name
                                             : t->name, i };
    }
    if (!st)
        qsort(v, *nv, sizeof *v, view_order);
    for (size_t i = 1; i < *nv && !st; i++)
        if (strcmp(v[i - 1].name, v[i].name) == 0)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensors '%s' and '%s' are both the weight '%s' unpacked",
                          ck_path(ck), fp8_checkpoint_tensor(ck, v[i - 1].index, NULL)->name,
                          fp8_checkpoint_tensor(ck, v[i].index, NULL)->name, v[i].name);
    if (st) {
        free(v);
        v = NULL;
    }
    *out = v;
    return st;
}

/* The sorted union of both sides' names; with dequant, scales left out and
 * packed-FP4 weights under their unpacked names. */
static fp8_status pair_up(fp8_ctx *ctx, fp8_diff *d)
{
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]), nb = fp8_checkpoint_tensor_count(d->ck[1]);
    d->e = fp8_xcalloc(na + nb + 1, sizeof *d->e);
    d->shard[0] = fp8_xcalloc(na + nb + 1, sizeof *d->shard[0]);
    d->shard[1] = fp8_xcalloc(na + nb + 1, sizeof *d->shard[1]);
    d->index[0] = fp8_xcalloc(na + nb + 1, sizeof *d->index[0]);
    d->index[1] = fp8_xcalloc(na + nb + 1, sizeof *d->index[1]);
    if (!d->e || !d->shard[0] || !d->shard[1] || !d->index[0] || !d->index[1])
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    diff_view *va = NULL, *vb = NULL;
    fp8_status st = side_view(ctx, d, 0, &va, &na);
    if (!st)
        st = side_view(ctx, d, 1, &vb, &nb);
    size_t i = 0, j = 0;
    while (!st && (i < na || j < nb)) {
        size_t sa = 0, sb = 0, ia = i < na ? va[i].index : 0, ib = j < nb ? vb[j].index : 0;
        const fp8_tensor_info *a = i < na ? fp8_checkpoint_tensor(d->ck[0], ia, &sa) : NULL;
        const fp8_tensor_info *b = j < nb ? fp8_checkpoint_tensor(d->ck[1], ib, &sb) : NULL;
        int c = !a ? 1 : !b ? -1 : strcmp(va[i].name, vb[j].name);
        const char *name = c > 0 ? vb[j].name : va[i].name;
        if (c < 0)
            b = NULL, i++;
        else if (c > 0)
            a = NULL, j++;
        else
            i++, j++;
        size_t k = d->n++;
        d->shard[0][k] = sa;
        d->shard[1][k] = sb;
        d->index[0][k] = ia;
        d->index[1][k] = ib;
        /* a packed side shows as its unpacked weight */
        if (d->dequant && a)
            a = dq_weights_shown(d->w[0], a->name);
        if (d->dequant && b)
            b = dq_weights_shown(d->w[1], b->name);
        d->e[k] = (fp8_diff_entry){ .name = name, .a = a, .b = b, .max_abs = 0.0 / 0.0,
                                    .compared = FP8_DTYPE_F32 };
        classify(d, k);
    }
    free(va);
    free(vb);
    return st;
}

fp8_status fp8_diff_run(fp8_ctx *ctx, const char *a, const char *b,
                        const fp8_diff_options *opts, fp8_diff **out)
{
    fp8_diff *d = calloc(1, sizeof *d);
    fp8_status st = d ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    const char *paths[2] = { a, b };
    *out = NULL;
    for (int s = 0; s < 2 && !st; s++) {
        if ((st = fp8_checkpoint_open(ctx, paths[s], &d->ck[s])))
            break;
        size_t n = fp8_checkpoint_tensor_count(d->ck[s]);
        if (!(d->hashes[s] = fp8_xcalloc(n + 1, sizeof *d->hashes[s])))
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        else if (opts->dequant)
            st = dq_weights_open_packed(ctx, d->ck[s],
                                 fp8_checkpoint_is_directory(d->ck[s]) ? paths[s] : NULL,
                                 &d->w[s]);
    }
    if (!st) {
        d->dequant = opts->dequant;
        st = pair_up(ctx, d);
    }
    if (!st) {
        size_t na = fp8_checkpoint_tensor_count(d->ck[0]);
        size_t nb = fp8_checkpoint_tensor_count(d->ck[1]);
        uint64_t done = 0, total = 0;
        d->chunk = fp8_jobs_chunk(opts->threads, FP8_DEVICE_CPU);
        fp8_jobs hash = { .njobs = na + nb, .bufsize = { d->chunk }, .threads = opts->threads,
                          .run = hash_side, .describe = hash_side_describe, .arg = d,
                          .what = "diff", .nlanes = fp8_checkpoint_shard_count(d->ck[0]) +
                                                    fp8_checkpoint_shard_count(d->ck[1]),
                          .progress = opts->progress, .progress_user = opts->progress_user,
                          .done = &done, .total = &total, .count = true };
        if (!(st = fp8_jobs_run(ctx, &hash)) && !(st = plan_bands(ctx, d))) {
            fp8_jobs bands = hash;
            bands.njobs = d->nbands;
            bands.bufsize[0] = bands.bufsize[1] = BAND_BYTES;
            bands.run = band_one;
            bands.describe = band_describe;
            st = fp8_jobs_run(ctx, &bands);
        }
        if (!st) {
            merge_bands(d);
            hash_digest(d->hashes[0], na, d->digest[0]);
            hash_digest(d->hashes[1], nb, d->digest[1]);
        }
    }
    if (st)
        fp8_diff_free(d);
    else
        *out = d;
    return st;
}

void fp8_diff_free(fp8_diff *d)
{
    if (!d)
        return;
    for (int s = 0; s < 2; s++) {
        dq_weights_free(d->w[s]);
        fp8_checkpoint_close(d->ck[s]);
        free(d->hashes[s]);
        free(d->shard[s]);
        free(d->index[s]);
    }
    free(d->e);
    free(d->bands);
    free(d);
}

bool fp8_diff_identical(const fp8_diff *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].kind != FP8_DIFF_SAME)
            return false;
    return true;
}

size_t fp8_diff_count(const fp8_diff *d) { return d->n; }
const fp8_diff_entry *fp8_diff_entry_at(const fp8_diff *d, size_t i)
{
    return i < d->n ? &d->e[i] : NULL;
}
const char *fp8_diff_digest(const fp8_diff *d, int side) { return d->digest[side ? 1 : 0]; }

fp8_quality fp8_diff_quality(const fp8_diff *d)
{
    fp8_quality q = { 0, 0, 0, 0 };
    for (size_t i = 0; i < d->n; i++)
        fp8_quality_add(&q, &d->e[i].quality);
    return q;
}
