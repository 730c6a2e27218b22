/*
 * verify_against.c - verify --against SRC: each FP8 weight against its source within
 * E4M3's rounding error (fp8conv-formats(5), ERROR BOUND; the bound itself is
 * quant_ref.c's fp8_bound_span_ref and quant_cpu.c's fp8_bound_span), each
 * packed weight against its logical weight in SRC, group by group
 * (verify_packed.c), and SRC
 * re-quantized in memory, band by band, as quantize would write it (a packed
 * weight: with quantize's own plan for its scheme, global pass included), to
 * say which weights it reproduces byte for byte.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ops/verify_packed.h"
#include "io/safetensors.h"
#include "compute/diff_cpu.h"
#include "compute/int4_ref.h"
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
    if (!(a->fp4_pass && it->w.l) &&
        ((a->fp4_pass && !a->profile_pass) ||
         (a->floor_pass && (!it->compare || (a->profile_pass && it->w.l)))))
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
        against_packed_band(a, it, row0, nrows, src, codes, raw, q, scales, qbuf, &a->job_quality[j]);
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
    return against_plan_make(ctx, src_path, &o, NULL, NULL, false, plan);
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
            against_packed_owns(a, it->t->name, false))
            continue;
        it->name = it->t->name;
        against_item(a, it, bound[i], item);
        a->by_tensor[i] = a->n++;
    }
    for (size_t k = 0; k < np; k++) {
        const fp8_quant_item *qi = fp8_quant_plan_item(a->plan, k);
        const fp8_tensor_info *t = fp8_checkpoint_find(v->ck, qi->tensor->name, NULL);
        if (!qi->quantize || (t && fp8_dtype_holds_codes(t->dtype)) ||
            against_packed_owns(a, qi->tensor->name, true))
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
        /* the declared scheme (FP8 weights), and each packed scheme */
        bool defines = !main_plan || fp8_profile_defines((fp8_profile)p, v->scheme, NULL, 0);
        for (int k = 0; k < a->nplans; k++)
            defines = defines && fp8_profile_defines((fp8_profile)p, a->plan_scheme[k], NULL, 0);
        if (!defines)
            continue;
        v->profiles_tried |= 1u << p;
        if (p == (int)v->opts->profile) { /* the main pass */
            v->profiles |= (long)(reproduced == requantized) << p;
            continue;
        }
        fp8_quant_plan *plan = NULL;
        if (main_plan && ((st = against_plan(ctx, v, src_path, (fp8_profile)p, &plan)) || !plan))
            continue;
        if (a->nplans && (st = against_packed_plans(ctx, a, (fp8_profile)p, threads, cancel)))
            break;
        a->plan = plan ? plan : main_plan;
        a->impossible = false;
        for (size_t i = 0; i < a->n; i++)
            a->items[i].differs[1] = false;
        if (plan && fp8_scheme_get(v->scheme)->fixed)
            against_tensor_scales(a);
        a->floor_pass = a->profile_pass = plan != NULL;
        a->fp4_pass = a->nplans > 0;
        if (!(st = against_run(ctx, a, threads, cancel, src_path)))
            st = against_reproduced(ctx, v, a);
        a->floor_pass = a->profile_pass = a->fp4_pass = false;
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
        const ag_item *p = against_packed_find(a, t->name);
        bool ok;
        if (p && p->requant) {
            fp4++;
            ok = p->item != SIZE_MAX && !p->differs[0];
        } else if (fp8_dtype_holds_codes(t->dtype) &&
                   !against_packed_owns(a, t->name, false)) {
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
    if ((st = against_packed_open(ctx, &a))) {
        against_packed_free(&a);
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
        if (role == DQ_DROP || against_packed_owns(&a, t->name, false) ||
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
        if (!fp8_checkpoint_find(v->ck, x->name, NULL) && !against_packed_owns(&a, x->name, true))
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
    for (int k = 0; !st && k < a.nplans; k++) /* the packed weights' schemes */
        if (!fp8_profile_defines(v->opts->profile, a.plan_scheme[k], defined, sizeof defined))
            st = fp8_fail(ctx, FP8_ERR_USAGE,
                          "%s: --profile %s does not define the %s scheme of its packed weights "
                          "(it defines: %s)",
                          v->path, fp8_profile_name(v->opts->profile),
                          fp8_scheme_name(a.plan_scheme[k]), defined);
    if (!st && fp8_plan)
        st = against_plan(ctx, v, src_path, v->opts->profile, &a.plan);
    if (!st)
        st = against_packed_plans(ctx, &a, v->opts->profile, threads, cancel);
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
            st = against_packed_report(ctx, &a, it);
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
    if (!st && (a.plan || a.nplans) && v->opts->profile_auto && v->reproduced >= 0)
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
    against_packed_free(&a);
    dq_weights_free(w);
    fp8_checkpoint_close(src);
    return st;
}
