/*
 * tensor.c - one tensor in memory quantized as quantize writes it, and
 * back as dequantize-for-export writes it (fp8conv.h, tensors in memory).
 *
 * No twin of the command: the tensor's plan is quantize's
 * (quant_plan_create_tensor: the scale layout, dtypes, shapes and names of
 * its item), each band is the plan's (fp8_quant_plan_band) through the
 * same quantizer (fp8_band_quantize), and the per-tensor scale and NVFP4's
 * second level come from the amax as the run makes them.  Only the reads
 * and writes differ: a band's rows lie in the caller's arrays, so a job
 * quantizes them in place, whole rows (the run's split of a wide block
 * row by columns gives the same bytes).  Dequantization is the export's
 * codec (fp8_dequant) row by row.  Jobs are bands of rows: the output is
 * the same for any thread count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/dequantize.h"
#include "ops/quantize.h"
#include "ops/quantize_run.h"
#include "compute/gpu.h"
#include "compute/jobs.h"
#include "compute/quant_cpu.h"
#include "layout/fp4.h"

/* The tensor's name in the plan: a 2-D weight, or fused experts; the
 * parts' names are given without the stem. */
static const char *const tensor_name[4] = { [2] = "tensor.weight",
                                            [3] = "tensor.experts.weight" };

typedef struct {
    fp8_quant_plan *p;
    fp8_tensor_info t;
    uint64_t shape[3];
} tq;

static fp8_status tq_open(fp8_ctx *ctx, const fp8_tensor_options *opts, fp8_dtype dtype, int rank,
                          const uint64_t *shape, tq *q)
{
    memset(q, 0, sizeof *q);
    fp8_quant_options o;
    quant_options_of_tensor(opts, &o);
    if (rank != 2 && rank != 3)
        return fp8_fail(ctx, FP8_ERR_USAGE, "a tensor of %d dimensions: quantize takes a matrix "
                        "[rows, cols] or stacked experts [experts, rows, cols]", rank);
    if (!fp8_dtype_is_float(dtype))
        return fp8_fail(ctx, FP8_ERR_USAGE, "a tensor of %s: quantize takes bf16, f16 or f32",
                        fp8_dtype_name(dtype) ? fp8_dtype_name(dtype) : "an unknown dtype");
    uint64_t n = 1;
    for (int k = 0; k < rank; k++) {
        if (shape[k] && n > UINT64_MAX / 4 / shape[k])
            return fp8_fail(ctx, FP8_ERR_USAGE, "a tensor of more than 2^62 bytes");
        n *= shape[k];
        q->shape[k] = shape[k];
    }
    q->t = (fp8_tensor_info){ .name = tensor_name[rank], .dtype = dtype, .rank = rank,
                              .shape = q->shape, .elements = n,
                              .end = n * (fp8_dtype_bits(dtype) / 8) };
    return quant_plan_create_tensor(ctx, &o, &q->t, &q->p);
}

static void part_set(fp8_tensor_part *pt, const char *name, fp8_dtype dtype, int rank,
                     const uint64_t *shape)
{
    const char *stem = strrchr(name, '.'); /* the tensor's own name ends ".weight" */
    snprintf(pt->name, sizeof pt->name, "%s", stem ? stem + 1 : name);
    pt->dtype = dtype;
    pt->rank = rank;
    uint64_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= pt->shape[k] = shape[k];
    pt->nbytes = n * fp8_dtype_bits(dtype) / 8;
}

static void layout_of(const tq *q, fp8_tensor_layout *out)
{
    const fp8_quant_item *it = fp8_quant_plan_item(q->p, 0);
    static const uint64_t one[1] = { 1 };
    memset(out, 0, sizeof *out);
    out->format = fp8_quant_plan_format(q->p);
    part_set(&out->part[FP8_PART_CODES], it->packed_name ? it->packed_name : it->tensor->name,
             it->code_dtype, it->tensor->rank, it->code_shape);
    part_set(&out->part[FP8_PART_SCALE], it->scale_name, it->scale_dtype, it->scale_rank,
             it->scale_shape);
    if (it->global_name)
        part_set(&out->part[FP8_PART_SCALE2], it->global_name, FP8_DTYPE_F32, it->global_rank,
                 one);
}

fp8_status fp8_tensor_layout_get(fp8_ctx *ctx, const fp8_tensor_options *opts, fp8_dtype dtype,
                                 int rank, const uint64_t *shape, fp8_tensor_layout *out)
{
    tq q;
    fp8_status st = tq_open(ctx, opts, dtype, rank, shape, &q);
    if (!st)
        layout_of(&q, out);
    fp8_quant_plan_free(q.p);
    return st;
}

/* ---------------------------------------------------------------- quantize */

typedef struct {
    const fp8_quant_plan *p;
    size_t i;                /* the plan's item */
    const plan_entry *e;
    fp8_dtype dt;
    const unsigned char *x;  /* quantize: the source; dequantize: the codes */
    uint8_t *codes;
    unsigned char *scales;
    uint64_t band, bands;    /* rows a job, bands a matrix */
    uint64_t width, pieces;  /* columns a job, jobs a band (blocks: a wide band cut) */
    float *amax;             /* the amax pass: by job (NULL: the quantize pass) */
    const float *tscale;     /* per-tensor scheme: by expert */
    const fp8_dequant_spec *d; /* dequantize */
    fp8_geometry g;
    void *y;
} tq_run;

static fp8_status nonfinite(fp8_ctx *ctx, const tq_run *r, uint64_t flat, float v)
{
    uint64_t row = flat / r->e->cols % r->e->rows, col = flat % r->e->cols;
    return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                    "%s: tensor '%s': element %llu (row %llu, column %llu) is %s; only finite "
                    "values can be quantized",
                    QUANT_MEMORY, r->p->items[r->i].tensor->name, (unsigned long long)flat,
                    (unsigned long long)row, (unsigned long long)col,
                    v != v ? "NaN" : v > 0 ? "+infinity" : "-infinity");
}

/* Job j: rows [row0, row0 + n) of matrix x, columns [c0, c0 + w) (all of
 * them, or a piece of a wide block row: gathered into the worker's buffer
 * and its codes put in place after, so that the band stays in the core's
 * cache between the quantizer's passes, as the run's jobs do). */
static fp8_status quantize_job(void *arg, fp8_worker *fw, size_t j)
{
    const tq_run *r = arg;
    const plan_entry *e = r->e;
    unsigned sz = fp8_dtype_bits(r->dt) / 8;
    uint64_t x = j / (r->bands * r->pieces), row0 = j / r->pieces % r->bands * r->band;
    uint64_t c0 = j % r->pieces * r->width, w = e->cols - c0 < r->width ? e->cols - c0 : r->width;
    uint64_t n = e->rows - row0 < r->band ? e->rows - row0 : r->band, where = 0;
    uint64_t flat = (x * e->rows + row0) * e->cols + c0;
    bool piece = w != e->cols;
    const unsigned char *src = r->x + flat * sz;
    if (r->amax) { /* whole rows: no piece */
        if (fp8_amax(r->dt, src, n * e->cols, &r->amax[j], &where) == FP8_BAND_OK)
            return FP8_OK;
        return nonfinite(fw->ctx, r, flat + where, fp8_load_f32(r->dt, src, where));
    }
    fp8_band b;
    uint64_t first;
    fp8_quant_plan_band(r->p, r->i, x, row0, n, c0, w, &b, &first);
    if (b.fixed)
        b.scale = r->tscale[x];
    uint8_t *q = r->codes + fp8_band_code_bytes(&b, flat);
    if (piece) {
        for (uint64_t k = 0; k < n; k++)
            memcpy(fw->buf[0] + k * w * sz, src + k * e->cols * sz, w * sz);
        src = fw->buf[0];
        q = fw->buf[1];
    }
    fp8_band_result res = fp8_band_quantize(&b, src, q, r->scales + first * fp8_band_scale_size(&b),
                                            &where);
    if (res == FP8_BAND_NONFINITE) {
        flat += where / w * e->cols + where % w;
        return nonfinite(fw->ctx, r, flat, fp8_load_f32(r->dt, src, where));
    }
    if (res != FP8_BAND_OK)
        return fp8_fail(fw->ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s': the group at element %llu: "
                        "%s", QUANT_MEMORY, r->p->items[r->i].tensor->name,
                        (unsigned long long)(flat + where / w * e->cols + where % w),
                        fp8_band_no_scale_why(&b));
    uint64_t cb = fp8_band_code_bytes(&b, w), rb = fp8_band_code_bytes(&b, e->cols);
    for (uint64_t k = 0; piece && k < n; k++)
        memcpy(r->codes + fp8_band_code_bytes(&b, flat) + k * rb, q + k * cb, cb);
    return FP8_OK;
}

static fp8_status run_jobs(fp8_ctx *ctx, tq_run *r, int threads,
                           fp8_status (*run)(void *, fp8_worker *, size_t))
{
    uint64_t piece = r->pieces > 1 ? r->band * r->width : 0;
    fp8_jobs spec = { .njobs = r->e->experts * r->bands * r->pieces, .threads = threads,
                      .device = FP8_DEVICE_CPU, .run = run, .arg = r, .what = QUANT_MEMORY,
                      .bufsize = { piece * (fp8_dtype_bits(r->dt) / 8),
                                   fp8_scheme_code_bytes(r->p->opts.scheme, piece) } };
    return spec.njobs ? fp8_jobs_run(ctx, &spec) : FP8_OK;
}

/* The jobs of r: bands of the plan's block rows where it has blocks, else
 * bands of about a chunk.  A band of blocks is quantized in place, tile by
 * tile (a tile stays in the core's cache between the quantizer's two
 * passes over it); only a matrix of too few bands to give each thread four
 * is cut by columns too, into pieces of about a chunk of input, gathered. */
static void cut(tq_run *r, unsigned size)
{
    const fp8_quant_plan *p = r->p;
    const plan_entry *e = r->e;
    uint64_t row = e->cols * size, chunk = fp8_jobs_chunk(p->opts.threads, FP8_DEVICE_CPU);
    r->band = row && chunk / row ? chunk / row : 1;
    r->width = e->cols;
    if (fp8_scheme_has_block(p->opts.scheme)) {
        uint64_t tile = (uint64_t)p->opts.block_rows * p->opts.block_cols * size;
        r->band = p->opts.block_rows;
        uint64_t bands = (e->rows + r->band - 1) / r->band;
        if (r->band * row > chunk &&
            bands < 4 * (uint64_t)fp8_jobs_threads(p->opts.threads, FP8_DEVICE_CPU))
            r->width = (chunk / tile ? chunk / tile : 1) * p->opts.block_cols;
    }
    r->bands = (e->rows + r->band - 1) / r->band;
    r->pieces = e->cols ? (e->cols + r->width - 1) / r->width : 1;
}

/* The amax pass (per-tensor scheme, NVFP4): each expert's largest
 * magnitude into amax[expert]. */
static fp8_status amax_pass(fp8_ctx *ctx, tq_run *r, float *amax)
{
    size_t njobs = r->e->experts * r->bands;
    float *jobs = fp8_xcalloc(njobs ? njobs : 1, sizeof *jobs);
    if (!jobs)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    r->amax = jobs; /* no blocks: r's jobs are whole rows */
    fp8_status st = run_jobs(ctx, r, r->p->opts.threads, quantize_job);
    for (size_t j = 0; j < njobs && !st; j++)
        amax[j / r->bands] = jobs[j] > amax[j / r->bands] ? jobs[j] : amax[j / r->bands];
    r->amax = NULL;
    free(jobs);
    return st;
}

/* Item i of plan p, its weight x (its tensor's dtype and shape), into
 * out[FP8_ITEM_*] (SHAPE: written when given): as the run writes it.  NVFP4's second level from
 * *set_amax, the largest amax of its fused set (NULL: x's own). */
static fp8_status item_quantize(fp8_ctx *ctx, fp8_quant_plan *p, size_t i, const void *x,
                                const float *set_amax, void *const out[FP8_ITEM_COUNT])
{
    float *amax = NULL;
    fp8_status st = FP8_OK;
    plan_entry *e = &p->entries[i];
    const fp8_quant_item *it = &p->items[i];
    fp8_dtype dtype = it->tensor->dtype;
    tq_run r = { .p = p, .i = i, .e = e, .dt = dtype, .x = x, .codes = out[FP8_ITEM_CODES],
                 .scales = out[FP8_ITEM_SCALE] };
    if (i >= p->n || !it->quantize)
        return fp8_fail(ctx, FP8_ERR_USAGE, "item %zu: not a quantized item of the plan", i);
    cut(&r, fp8_dtype_bits(dtype) / 8);
    if (!x || !r.codes || !r.scales || (it->global_name && !out[FP8_ITEM_SCALE2]))
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s': a NULL buffer", QUANT_MEMORY,
                        it->tensor->name);
    if (fp8_scheme_reads_twice(p->opts.scheme) && !(it->global_name && set_amax)) {
        if (!(amax = fp8_xcalloc(e->experts ? e->experts : 1, sizeof *amax))) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((st = amax_pass(ctx, &r, amax)))
            goto out;
    }
    if (it->global_name) { /* NVFP4 (a matrix): its second level, as the run writes it */
        e->global = fp4_nvfp4_global(fp8_profile_numerics(p->opts.profile, p->opts.scheme), dtype,
                                     set_amax ? *set_amax : amax[0]);
        fp8_scale_store(out[FP8_ITEM_SCALE2], 4, 0, quant_plan_global_bits(p, i));
    }
    for (int k = 0; it->shape_name && out[FP8_ITEM_SHAPE] && k < 16; k++) /* INT4: I64 [2] */
        ((unsigned char *)out[FP8_ITEM_SHAPE])[k] =
            (unsigned char)(it->tensor->shape[k / 8] >> (8 * (k % 8)));
    if (fp8_scheme_get(p->opts.scheme)->fixed) { /* one scale per matrix, as the run makes it */
        for (uint64_t k = 0; k < e->experts; k++) {
            uint32_t bits = 0;
            if ((amax[k] = quant_plan_tensor_scale(ctx, p, i, amax[k], QUANT_MEMORY, &bits,
                                                   &st)) == 0)
                goto out;
            fp8_scale_store(r.scales, fp8_scale_size(e->kind), k, bits);
        }
        r.tscale = amax;
    }
    st = run_jobs(ctx, &r, p->opts.threads, quantize_job);
out:
    free(amax);
    return st;
}

fp8_status fp8_tensor_quantize(fp8_ctx *ctx, const fp8_tensor_options *opts, fp8_dtype dtype,
                               int rank, const uint64_t *shape, const void *x,
                               void *const out[FP8_PART_COUNT])
{
    tq q;
    fp8_status st = tq_open(ctx, opts, dtype, rank, shape, &q);
    void *const parts[FP8_ITEM_COUNT] = { out[FP8_PART_CODES], out[FP8_PART_SCALE],
                                          out[FP8_PART_SCALE2], NULL };
    if (!st)
        st = item_quantize(ctx, q.p, 0, x, NULL, parts);
    fp8_quant_plan_free(q.p);
    return st;
}

/* ---------------------------------------------------------------- on a CUDA device */

/* A flag a kernel raised (a NaN or infinity, a scale its kind cannot
 * store, an FP4 quotient the CPU rounds): the CPU path, on a host copy of
 * x, says what and where, or writes the bytes, copied to the device. */
static fp8_status cuda_redo(fp8_ctx *ctx, tq *q, const void *x, void *const out[FP8_PART_COUNT],
                            void *stream)
{
    fp8_tensor_layout lay;
    layout_of(q, &lay);
    size_t at[FP8_PART_COUNT + 1] = { q->t.end };
    for (int k = 0; k < FP8_PART_COUNT; k++)
        at[k + 1] = at[k] + lay.part[k].nbytes;
    unsigned char *h = malloc(at[FP8_PART_COUNT] ? at[FP8_PART_COUNT] : 1);
    if (!h)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    void *const parts[FP8_ITEM_COUNT] = { h + at[0], h + at[1], h + at[2], NULL };
    fp8_status st = fp8_gpu_dev_copy(ctx, h, x, q->t.end, true, true, stream);
    if (!st)
        st = item_quantize(ctx, q->p, 0, h, NULL, parts);
    for (int k = 0; !st && k < FP8_PART_COUNT; k++)
        if (lay.part[k].nbytes)
            st = fp8_gpu_dev_copy(ctx, out[k], h + at[k], lay.part[k].nbytes, false,
                                  k == FP8_PART_COUNT - 1 || !lay.part[k + 1].nbytes, stream);
    free(h);
    return st;
}

fp8_status fp8_tensor_quantize_cuda(fp8_ctx *ctx, const fp8_tensor_options *opts,
                                    fp8_dtype dtype, int rank, const uint64_t *shape,
                                    const void *x, void *const out[FP8_PART_COUNT], void *stream)
{
    tq q;
    unsigned *words = NULL, *bits = NULL; /* words[0]: the flags; then each expert's amax */
    unsigned char *scales = NULL;
    float *tscale = NULL; /* the per-tensor scheme: by expert */
    fp8_status st = tq_open(ctx, opts, dtype, rank, shape, &q);
    if (st)
        goto out;
    fp8_quant_plan *p = q.p;
    plan_entry *e = &p->entries[0];
    const fp8_quant_item *it = &p->items[0];
    const char *why = fp8_gpu_dev_no_kernel(
        fp8_profile_numerics(p->opts.profile, p->opts.scheme), p->opts.scheme, dtype);
    unsigned sz = fp8_dtype_bits(dtype) / 8, ssize = fp8_scale_size(e->kind);
    uint64_t n = e->rows * e->cols, experts = e->experts;
    if (!fp8_cuda_compiled() || why) {
        st = fp8_fail(ctx, FP8_ERR_DEVICE, "%s: tensor '%s': %s", QUANT_MEMORY, it->tensor->name,
                      why ? why : "quantizing device memory needs libfp8conv built with CUDA "
                                  "(make HAVE_CUDA=1); this one was built without it");
        goto out;
    }
    if (!x || !out[FP8_PART_CODES] || !out[FP8_PART_SCALE] ||
        (it->global_name && !out[FP8_PART_SCALE2])) {
        st = fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s': a NULL buffer", QUANT_MEMORY,
                      it->tensor->name);
        goto out;
    }
    if (!(bits = calloc(experts + 1, sizeof *bits)) || !(tscale = calloc(experts + 1, 4)) ||
        !(scales = calloc(experts + 1, ssize > 4 ? ssize : 4))) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((st = fp8_gpu_dev_words(ctx, experts + 1, stream, &words)))
        goto out;
    if (fp8_scheme_reads_twice(p->opts.scheme)) { /* the amax on the device, the scale here */
        for (uint64_t k = 0; k < experts && !st; k++)
            st = fp8_gpu_dev_amax(ctx, dtype, (const char *)x + k * n * sz, n, &words[k + 1],
                                  stream);
        if (st || (st = fp8_gpu_dev_copy(ctx, bits, words, (experts + 1) * sizeof *bits, true,
                                         true, stream)))
            goto out;
        for (uint64_t k = 0; k < experts; k++)
            if (bits[k + 1] >= fp8_dtype_inf_bits(dtype)) { /* a NaN or infinity: the CPU names it */
                st = cuda_redo(ctx, &q, x, out, stream);
                goto out;
            }
        for (uint64_t k = 0; k < experts; k++) {
            unsigned a = bits[k + 1]; /* in the source's own format */
            float amax = dtype == FP8_DTYPE_F32   ? fp8_f32_from_bits(a)
                         : dtype == FP8_DTYPE_F16 ? fp8_f16_to_f32((uint16_t)a)
                                                  : fp8_bf16_to_f32((uint16_t)a);
            uint32_t sbits = 0;
            if (it->global_name) { /* NVFP4 (a matrix): its second level */
                e->global = fp4_nvfp4_global(fp8_profile_numerics(p->opts.profile, p->opts.scheme),
                                             dtype, amax);
                fp8_scale_store(scales, 4, 0, quant_plan_global_bits(p, 0));
                st = fp8_gpu_dev_copy(ctx, out[FP8_PART_SCALE2], scales, 4, false, false, stream);
                if (st)
                    goto out;
            } else {
                if ((tscale[k] = quant_plan_tensor_scale(ctx, p, 0, amax, QUANT_MEMORY, &sbits,
                                                         &st)) == 0)
                    goto out; /* st says why */
                fp8_scale_store(scales, ssize, k, sbits);
            }
        }
        if (fp8_scheme_get(p->opts.scheme)->fixed &&
            (st = fp8_gpu_dev_copy(ctx, out[FP8_PART_SCALE], scales, experts * ssize, false,
                                   false, stream)))
            goto out;
    }
    for (uint64_t k = 0; k < experts && !st; k++) { /* each expert one band of all its rows */
        fp8_band b;
        uint64_t first;
        fp8_quant_plan_band(p, 0, k, 0, e->rows, 0, e->cols, &b, &first);
        if (b.fixed)
            b.scale = tscale[k];
        st = fp8_gpu_dev_quantize(ctx, &b, (const char *)x + k * n * sz,
                                  (uint8_t *)out[FP8_PART_CODES] + fp8_band_code_bytes(&b, k * n),
                                  b.fixed ? NULL
                                          : (unsigned char *)out[FP8_PART_SCALE] + first * ssize,
                                  words, stream);
    }
    /* the flags: the one wait, which errors need */
    if (!st && !(st = fp8_gpu_dev_copy(ctx, bits, words, sizeof *bits, true, true, stream)) &&
        bits[0])
        st = cuda_redo(ctx, &q, x, out, stream);
out:
    fp8_gpu_dev_words_free(words, stream);
    free(bits);
    free(tscale);
    free(scales);
    fp8_quant_plan_free(q.p);
    return st;
}

/* ---------------------------------------------------------------- a state dict's items */

fp8_status fp8_quant_plan_item_amax(fp8_ctx *ctx, const fp8_quant_plan *p, size_t i,
                                    const void *x, float *amax)
{
    if (i >= p->n || !p->items[i].quantize || !x)
        return fp8_fail(ctx, FP8_ERR_USAGE, "item %zu: not a quantized item of the plan, or "
                        "no data", i);
    tq_run r = { .p = p, .i = i, .e = &p->entries[i], .dt = p->items[i].tensor->dtype, .x = x };
    cut(&r, fp8_dtype_bits(r.dt) / 8);
    r.width = r.e->cols; /* whole rows */
    r.pieces = 1;
    float *m = fp8_xcalloc(r.e->experts ? r.e->experts : 1, sizeof *m);
    fp8_status st = m ? amax_pass(ctx, &r, m) : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    *amax = 0;
    for (uint64_t k = 0; !st && k < r.e->experts; k++)
        *amax = m[k] > *amax ? m[k] : *amax;
    free(m);
    return st;
}

fp8_status fp8_quant_plan_item_quantize(fp8_ctx *ctx, fp8_quant_plan *p, size_t i,
                                        const void *x, float set_amax,
                                        void *const out[FP8_ITEM_COUNT])
{
    return item_quantize(ctx, p, i, x, &set_amax, out);
}

/* ---------------------------------------------------------------- dequantize */

static fp8_status dequantize_job(void *arg, fp8_worker *w, size_t j)
{
    const tq_run *r = arg;
    const plan_entry *e = r->e;
    const fp8_dequant_spec *d = r->d;
    uint64_t x = j / r->bands, row0 = j % r->bands * r->band;
    uint64_t n = e->rows - row0 < r->band ? e->rows - row0 : r->band;
    unsigned osz = fp8_dtype_bits(d->out) / 8;
    for (uint64_t row = row0; row < row0 + n; row++) {
        uint64_t flat = (x * e->rows + row) * e->cols, where = 0;
        const uint8_t *q = r->x + fp8_scheme_code_bytes(r->p->opts.scheme, flat);
        const unsigned char *s = r->scales + fp8_geometry_index(&r->g, x, row, 0) * d->scale_size;
        fp8_deq_result res = fp8_dequant(d, q, s, e->cols, (char *)r->y + flat * osz, &where);
        if (res == FP8_DEQ_OK)
            continue;
        const char *name = r->p->items[0].tensor->name;
        flat += where;
        if (res == FP8_DEQ_NAN_CODE)
            return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s': element %llu is a NaN "
                            "code; no value can be exported", QUANT_MEMORY, name,
                            (unsigned long long)flat);
        if (res == FP8_DEQ_NAN_SCALE)
            return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s': the scale of element "
                            "%llu is NaN or negative; no value can be exported", QUANT_MEMORY,
                            name, (unsigned long long)flat);
        return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s': element %llu overflows %s",
                        QUANT_MEMORY, name, (unsigned long long)flat, fp8_dtype_name(d->out));
    }
    return FP8_OK;
}

fp8_status fp8_tensor_dequantize(fp8_ctx *ctx, const fp8_tensor_options *opts, fp8_dtype dtype,
                                 int rank, const uint64_t *shape,
                                 const void *const in[FP8_PART_COUNT], fp8_dtype out, void *y)
{
    tq q;
    fp8_tensor_layout lay;
    unsigned char *decoded = NULL;
    fp8_dequant_spec d = { 0 };
    bool inited = false;
    fp8_status st = tq_open(ctx, opts, dtype, rank, shape, &q);
    if (st)
        goto out;
    if (!fp8_dtype_is_float(out)) {
        st = fp8_fail(ctx, FP8_ERR_USAGE, "dequantize to %s: bf16, f16 or f32 only",
                      fp8_dtype_name(out) ? fp8_dtype_name(out) : "an unknown dtype");
        goto out;
    }
    layout_of(&q, &lay);
    fp8_quant_plan *p = q.p;
    const plan_entry *e = &p->entries[0];
    const fp4_layout *l = fmt_code_layout(p->spec);
    const fp8_tensor_part *sp = &lay.part[FP8_PART_SCALE];
    if (!in[FP8_PART_CODES] || !in[FP8_PART_SCALE] || !y ||
        (lay.part[FP8_PART_SCALE2].nbytes && !in[FP8_PART_SCALE2])) {
        st = fp8_fail(ctx, FP8_ERR_USAGE, "fp8_tensor_dequantize: a NULL buffer");
        goto out;
    }
    tq_run r = { .p = p, .e = e, .dt = dtype, .x = in[FP8_PART_CODES], .y = y };
    fp8_scheme_geometry(p->opts.scheme, p->opts.block_rows, p->opts.block_cols, e->rows, e->cols,
                        &r.g);
    d = (fp8_dequant_spec){ .scheme = fp8_scheme_get(p->opts.scheme), .out = out,
                            .group = r.g.group_cols, .global = 1,
                            .divides = l && l->global_divides };
    if (lay.part[FP8_PART_SCALE2].nbytes)
        memcpy(&d.global, in[FP8_PART_SCALE2], 4);
    if (!(inited = fp8_dequant_init(&d))) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    r.d = &d;
    /* scales as fp8_dequant takes them: bytes, or fp32 decoded from the stored ones */
    uint64_t nscales = sp->nbytes / (fp8_dtype_bits(sp->dtype) / 8);
    r.scales = (unsigned char *)(uintptr_t)in[FP8_PART_SCALE];
    if (d.scale_size == 4) {
        if (!(decoded = malloc(nscales ? nscales * 4 : 1))) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (uint64_t k = 0; k < nscales; k++)
            if (!dq_scale_value(sp->dtype, in[FP8_PART_SCALE], k, (float *)(void *)decoded + k)) {
                st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s': element %llu is not a "
                              "finite positive scale", QUANT_MEMORY,
                              p->items[0].scale_name, (unsigned long long)k);
                goto out;
            }
        r.scales = decoded;
    }
    cut(&r, 2);
    r.width = e->cols; /* whole rows */
    r.pieces = 1;
    st = run_jobs(ctx, &r, p->opts.threads, dequantize_job);
out:
    if (inited)
        fp8_dequant_free(&d);
    free(decoded);
    fp8_quant_plan_free(q.p);
    return st;
}
