/*
 * quantize_jobs.c - a job of quantize's run: the jobs an item is cut into
 * (bands of whole blocks, tiles of transposed experts, byte ranges of kept
 * tensors), and each job's read, quantization (CPU or GPU) and write of its
 * own bytes of the output.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/quantize_jobs.h"
#include "io/checkpoint.h"
#include "io/parts.h"
#include "io/safetensors.h"
#include "io/zio.h"
#include "layout/formats.h"
#include "common/types.h"
#include "compute/fp4_cpu.h"
#include "compute/quant_cpu.h"
#include "layout/fp4.h"

/* The tensor a quantized item's codes are written as: its own name, or
 * the packed layout's (X.weight_packed). */
const char *quant_code_name(const fp8_quant_item *it)
{
    return it->packed_name ? it->packed_name : it->tensor->name;
}

static unsigned src_size(fp8_dtype d) { return fp8_dtype_bits(d) / 8; } /* bf16, f16, f32 */

/* The rows of a tiled band transposed and quantized at a time. */
#define TILE_SLICE 256

/* Whether item e's quantize jobs take a transposed expert weight a tile of
 * PART_TILE input rows at a time (on the CPU; the GPU takes whole bands):
 * a band's source is then never whole in memory, so a band is as many rows
 * as tiled_codes holds, and each read of a tile is that long. */
static bool tiled(const fp8_quant_plan *p, const plan_entry *e)
{
    const fp8_scheme_traits *t = fp8_scheme_get(p->opts.scheme);
    return e->part && e->part->in_out && p->device != FP8_DEVICE_CUDA &&
           t->group == FP8_GROUP_RUN && e->cols % t->run == 0;
}

/* The packed codes a tiled band holds: the more, the fewer and longer its
 * reads (one per input row of each band), so half a worker's share of
 * FP8_JOBS_MEMORY (the other half: a chunk of input, the scales, the
 * tile), from a chunk to four.  2 cores: 12 MiB, bands of 4096 rows and
 * reads of 8 KiB for Llama-4 Scout's gate and up, against a chunk's 1638
 * rows and 3.2 KiB (bench/RESULTS.md). */
static uint64_t tiled_codes(const fp8_quant_plan *p, uint64_t chunk)
{
    uint64_t half = fp8_jobs_share(p->opts.threads, p->device) / 2;
    return half < chunk ? chunk : half > 4 * chunk ? 4 * chunk : half;
}

static fp8_status add_job(fp8_ctx *ctx, shard_run *r, job j)
{
    if (!fp8_grow(&r->jobs, r->njobs, &r->cap, sizeof *r->jobs))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    const fp8_quant_plan *p = r->plan;
    if (j.kind == JOB_COPY) {
        r->max_src = j.len > r->max_src ? j.len : r->max_src;
    } else {
        const plan_entry *e = &p->entries[j.item];
        uint64_t elems = j.nrows * j.ncols, sz = src_size(p->items[j.item].tensor->dtype);
        /* a job's rows lie in one block row: its scales are its own groups' */
        fp8_geometry g;
        fp8_scheme_geometry(p->opts.scheme, p->opts.block_rows, p->opts.block_cols, j.nrows,
                            j.ncols, &g);
        uint64_t nscales = fp8_scheme_get(p->opts.scheme)->fixed ? 0 : g.row_groups * g.col_groups;
        uint64_t src = elems * sz;
        if (j.kind == JOB_QUANTIZE && tiled(p, e)) /* a tile; it transposed; its codes, scales */
            src = quant_part_tile_bytes(e->part, j.nrows) + TILE_SLICE * PART_TILE * (sz + 1);
        r->max_src = src > r->max_src ? src : r->max_src;
        uint64_t q = fp8_scheme_code_bytes(p->opts.scheme, elems);
        r->max_q = q > r->max_q ? q : r->max_q;
        nscales *= fp8_scheme_scale_size(p->opts.scheme, e->kind);
        r->max_scales = nscales > r->max_scales ? nscales : r->max_scales;
    }
    r->jobs[r->njobs++] = j;
    return FP8_OK;
}

/* Cuts item i (in the shard) into jobs of the given kind. */
fp8_status quant_jobs_plan(fp8_ctx *ctx, shard_run *r, size_t i, job_kind kind)
{
    const fp8_quant_plan *p = r->plan;
    const plan_entry *e = &p->entries[i];
    const fp8_tensor_info *t = p->items[i].tensor;
    fp8_status st = FP8_OK;
    if (kind == JOB_COPY) {
        for (uint64_t off = 0; off < fp8_tensor_nbytes(t) && !st; off += r->chunk) {
            uint64_t len = fp8_tensor_nbytes(t) - off;
            st = add_job(ctx, r, (job){ .kind = JOB_COPY, .item = i, .offset = off,
                                        .len = len < r->chunk ? len : r->chunk });
        }
        return st;
    }
    uint64_t row_bytes = e->cols * src_size(t->dtype), rows = e->rows;
    if (kind == JOB_AMAX && e->part) /* with its up_proj, or none (quant_part) */
        rows *= e->part->amax_parts;
    uint64_t band = r->chunk / row_bytes ? r->chunk / row_bytes : 1, width = e->cols;
    if (tiled(p, e) && rows) {
        uint64_t q = 2 * tiled_codes(p, r->chunk) / e->cols, amax = 2 * PART_TILE * q / e->cols;
        /* an amax job reads, as stored, what two of a band's tiles hold */
        band = kind == JOB_QUANTIZE ? (q ? q : 1) : (amax ? amax : 1);
        uint64_t bands = (rows + band - 1) / band; /* as even as they go */
        band = (rows + bands - 1) / bands;
    }
    if (fp8_scheme_has_block(p->opts.scheme)) { /* whole block rows */
        band = p->opts.block_rows;
        uint64_t tile = band * p->opts.block_cols * src_size(t->dtype);
        if (band * row_bytes > r->chunk) /* wide: split the block row by columns */
            width = (r->chunk / tile ? r->chunk / tile : 1) * p->opts.block_cols;
    }
    for (uint64_t x = 0; x < e->experts; x++)
        for (uint64_t r0 = 0; r0 < rows; r0 += band)
            for (uint64_t c0 = 0; c0 < e->cols && !st; c0 += width) {
                job j = { .kind = kind, .item = i, .expert = x, .row0 = r0, .col0 = c0 };
                j.nrows = rows - r0 < band ? rows - r0 : band;
                j.ncols = e->cols - c0 < width ? e->cols - c0 : width;
                st = add_job(ctx, r, j);
            }
    return st;
}

/* Where element (row, col) of expert x lies in the tensor, in elements. */
static uint64_t flat_index(const plan_entry *e, uint64_t x, uint64_t row, uint64_t col)
{
    return (x * e->rows + row) * e->cols + col;
}

/* Bytes of item i's tensor: from its file, or (convert) from the source. */
static fp8_status read_item(worker *w, size_t i, uint64_t offset, void *buf, size_t len)
{
    const fp8_quant_plan *p = w->r->plan;
    const fp8_tensor_info *t = p->items[i].tensor;
    if (p->entries[i].part)
        return quant_part_read(w->ctx, w->r->in, p->entries[i].part, offset, buf, len, false);
    if (p->entries[i].from_source)
        return p->source->read(p->source->user, w->ctx, t, offset, buf, len);
    return fp8_file_read(w->ctx, w->r->in, t, offset, buf, len);
}

/* Reads or writes the job's rectangle: one call when it spans whole rows. */
static fp8_status read_rect(worker *w, const job *j, unsigned sz, void *buf)
{
    shard_run *r = w->r;
    const plan_entry *e = &r->plan->entries[j->item];
    if (j->ncols == e->cols)
        return read_item(w, j->item, flat_index(e, j->expert, j->row0, 0) * sz, buf,
                         j->nrows * j->ncols * sz);
    for (uint64_t k = 0; k < j->nrows; k++) {
        fp8_status st = read_item(w, j->item, flat_index(e, j->expert, j->row0 + k, j->col0) * sz,
                                  (char *)buf + k * j->ncols * sz, j->ncols * sz);
        if (st)
            return st;
    }
    return FP8_OK;
}

/* The job's codes, q (rows of ncols codes), to their place in `out`. */
static fp8_status write_rect(worker *w, const job *j, const fp8_tensor_info *out,
                             const uint8_t *q)
{
    shard_run *r = w->r;
    const plan_entry *e = &r->plan->entries[j->item];
    fp8_scheme s = r->plan->opts.scheme;
    if (j->ncols == e->cols)
        return fp8_writer_pwrite(w->ctx, r->out, out,
                                 fp8_scheme_code_bytes(s, flat_index(e, j->expert, j->row0, 0)),
                                 q, fp8_scheme_code_bytes(s, j->nrows * j->ncols));
    uint64_t row = fp8_scheme_code_bytes(s, j->ncols);
    for (uint64_t k = 0; k < j->nrows; k++) {
        fp8_status st = fp8_writer_pwrite(
            w->ctx, r->out, out,
            fp8_scheme_code_bytes(s, flat_index(e, j->expert, j->row0 + k, j->col0)), q + k * row,
            row);
        if (st)
            return st;
    }
    return FP8_OK;
}

static fp8_status nonfinite_at(worker *w, const job *j, const char *name, uint64_t row,
                               uint64_t col, float v)
{
    const fp8_quant_plan *p = w->r->plan;
    const plan_entry *e = &p->entries[j->item];
    char expert[48] = "";
    if (p->items[j->item].tensor->rank == 3)
        snprintf(expert, sizeof expert, "expert %llu, ", (unsigned long long)j->expert);
    return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT,
                    "%s: tensor '%s': element %llu (%srow %llu, column %llu) is %s; only finite "
                    "values can be quantized",
                    fp8_file_path(w->r->in), name,
                    (unsigned long long)flat_index(e, j->expert, row, col), expert,
                    (unsigned long long)row, (unsigned long long)col,
                    v != v ? "NaN" : v > 0 ? "+infinity" : "-infinity");
}

/* A GPU failure, with the file and tensor it was working on. */
static fp8_status gpu_error(worker *w, const job *j, fp8_status st)
{
    return fp8_fail(w->ctx, st, "%s: tensor '%s': %s", fp8_file_path(w->r->in),
                    w->r->plan->items[j->item].tensor->name, fp8_ctx_message(w->ctx));
}

/* Band b of the job, source x (its rows at row0, its columns at col0 of the
 * job's matrix), quantized on the CPU into q and scales; a bad element or
 * group is named at its row and column. */
static fp8_status quantize_band(worker *w, const job *j, const fp8_band *b, uint64_t row0,
                                uint64_t col0, const void *x, uint8_t *q, void *scales)
{
    const fp8_quant_plan *p = w->r->plan;
    const fp8_tensor_info *t = p->items[j->item].tensor;
    uint64_t where = 0;
    fp8_band_result res = fp8_band_quantize(b, x, q, scales, &where);
    if (res == FP8_BAND_OK)
        return FP8_OK;
    uint64_t row = row0 + where / b->cols, col = col0 + where % b->cols;
    if (res == FP8_BAND_NONFINITE)
        return nonfinite_at(w, j, t->name, row, col, fp8_load_f32(b->src, x, where));
    return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT,
                    "%s: tensor '%s': the group at element %llu (row %llu, column %llu): %s",
                    fp8_file_path(w->r->in), t->name,
                    (unsigned long long)flat_index(&p->entries[j->item], j->expert, row, col),
                    (unsigned long long)row, (unsigned long long)col, fp8_band_no_scale_why(b));
}

/* A slice's ns rows of m codes and scales (cb and sb bytes a row) into
 * their place in a band whose rows hold ib and isb bytes of them. */
static inline __attribute__((always_inline)) void put_rows(uint8_t *q, uint8_t *scales,
                                                           uint64_t ib, uint64_t isb,
                                                           const uint8_t *sq, const uint8_t *ssc,
                                                           uint64_t ns, uint64_t cb, uint64_t sb)
{
    for (uint64_t k = 0; k < ns; k++) {
        memcpy(q + k * ib, sq + k * cb, cb);
        memcpy(scales + k * isb, ssc + k * sb, sb);
    }
}

/* put_rows with a whole tile's bytes as constants for the two group sizes
 * of the scheme table's runs: copies of a fixed size, a few vector moves (a
 * variable size was a loop of 8-byte stores, each waiting on a band line;
 * bench/RESULTS.md). */
static void put_slice(uint8_t *q, uint8_t *scales, uint64_t ib, uint64_t isb, const uint8_t *sq,
                      const uint8_t *ssc, uint64_t ns, uint64_t cb, uint64_t sb)
{
    if (cb == PART_TILE / 2 && sb == PART_TILE / 16)
        put_rows(q, scales, ib, isb, sq, ssc, ns, PART_TILE / 2, PART_TILE / 16);
    else if (cb == PART_TILE / 2 && sb == PART_TILE / 32)
        put_rows(q, scales, ib, isb, sq, ssc, ns, PART_TILE / 2, PART_TILE / 32);
    else
        put_rows(q, scales, ib, isb, sq, ssc, ns, cb, sb);
}

/* A transposed expert weight's band b (tiled): PART_TILE input rows at a
 * time, read as stored, then TILE_SLICE of the band's rows at a time
 * transposed, quantized in one call (its groups lie within rows: PART_TILE
 * is a multiple of a group) and put in their place in the band's codes and
 * scales (a slice's rows, codes and scales stay in the core's cache). */
static fp8_status quantize_tiled(worker *w, const job *j, const fp8_band *b)
{
    const fp8_quant_plan *p = w->r->plan;
    const plan_entry *e = &p->entries[j->item];
    unsigned sz = src_size(b->src), ssize = fp8_band_scale_size(b);
    uint64_t in = j->ncols, n = j->nrows, stride = quant_part_tile_stride(e->part, n);
    uint64_t ib = fp8_band_code_bytes(b, in), isb = in / b->group_cols * ssize;
    unsigned char *tile = w->src, *rows = tile + quant_part_tile_bytes(e->part, n);
    uint8_t *q = rows + TILE_SLICE * PART_TILE * sz;
    uint8_t *sc = q + fp8_band_code_bytes(b, TILE_SLICE * PART_TILE);
    fp8_status st = FP8_OK;
    for (uint64_t c0 = 0; c0 < in && !st; c0 += PART_TILE) {
        uint64_t m = in - c0 < PART_TILE ? in - c0 : PART_TILE;
        uint64_t cb = fp8_band_code_bytes(b, m), sb = m / b->group_cols * ssize;
        st = quant_part_read_tile(w->ctx, w->r->in, e->part, j->row0, n, c0, tile);
        for (uint64_t k0 = 0; k0 < n && !st; k0 += TILE_SLICE) {
            uint64_t ns = n - k0 < TILE_SLICE ? n - k0 : TILE_SLICE;
            fp8_band slice = *b;
            slice.rows = ns;
            slice.cols = m;
            fp8_transpose(sz, tile + k0 * sz, stride, m, ns, rows, m);
            if ((st = quantize_band(w, j, &slice, j->row0 + k0, c0, rows, q, sc)))
                return st;
            put_slice(w->q + k0 * ib + fp8_band_code_bytes(b, c0),
                      w->scales + k0 * isb + c0 / b->group_cols * ssize, ib, isb, q, sc, ns, cb,
                      sb);
        }
    }
    return st;
}

static fp8_status do_quantize(worker *w, const job *j)
{
    shard_run *r = w->r;
    const fp8_quant_plan *p = r->plan;
    const fp8_quant_item *it = &p->items[j->item];
    const plan_entry *e = &p->entries[j->item];
    fp8_dtype dt = it->tensor->dtype;
    uint64_t where = 0, n = j->nrows * j->ncols;
    fp8_band b;
    uint64_t first; /* index of the job's first scale in the scale tensor */
    fp8_quant_plan_band(p, j->item, j->expert, j->row0, j->nrows, j->col0, j->ncols, &b, &first);
    fp8_status st;
    if (j->kind == JOB_QUANTIZE && tiled(p, e)) {
        if ((st = quantize_tiled(w, j, &b)))
            return st;
        goto write;
    }
    /* an amax takes a transposed weight's range as stored: the same count of
     * elements, other ones, read in runs of a stored row */
    bool as_stored = j->kind == JOB_AMAX && e->part && e->part->in_out;
    st = as_stored ? quant_part_read(w->ctx, r->in, e->part, j->row0 * j->ncols * src_size(dt),
                                     w->src, n * src_size(dt), true)
                   : read_rect(w, j, src_size(dt), w->src);
    if (st)
        return st;
    fp8_worker_end_turn(w->fw);
    if (j->kind == JOB_AMAX) {
        bool bad = true;
        float *amax = &r->amax[j - r->jobs];
        if (w->gpu && (st = fp8_gpu_amax(w->ctx, w->gpu, dt, n, amax, &bad)))
            return gpu_error(w, j, st);
        /* the CPU says where: a stored range's element found in the weight */
        if (!bad || !fp8_amax(dt, w->src, n, amax, &where))
            return FP8_OK;
        uint64_t row = j->row0 + where / j->ncols, col = j->col0 + where % j->ncols;
        const char *name = it->tensor->name;
        if (as_stored)
            name = quant_part_stored_at(e->part, j->row0 * j->ncols + where, &row, &col)->name;
        return nonfinite_at(w, j, name, row, col, fp8_load_f32(dt, w->src, where));
    }
    if (b.fixed)
        b.scale = r->tensor_scale[r->scale_at[j->item] + j->expert];
    bool bad = true;
    if (w->gpu && (st = fp8_gpu_quantize(w->ctx, w->gpu, &b, &bad)))
        return gpu_error(w, j, st);
    /* the GPU's bytes are the CPU's; on bad input the CPU says what and where */
    if (bad && (st = quantize_band(w, j, &b, j->row0, j->col0, w->src, w->q, w->scales)))
        return st;
    /* a fixed band's scale as stored, not its factor (a profile may multiply by another) */
    const void *stored = b.fixed ? r->tensor_stored + 4 * (r->scale_at[j->item] + j->expert)
                                 : (const void *)w->scales;
    if (p->source && (st = p->source->quantized(p->source->user, w->ctx, it->tensor, j->expert,
                                                j->row0, j->col0, &b,
                                                (const float *)(void *)w->src, w->q, stored)))
        return st;
write:;
    uint64_t nscales = fp8_band_scale_count(&b), ssize = fp8_band_scale_size(&b);
    if ((st = write_rect(w, j, fp8_writer_find(r->out, quant_code_name(it)), w->q)))
        return st;
    return nscales ? fp8_writer_pwrite(w->ctx, r->out, fp8_writer_find(r->out, it->scale_name),
                                       first * ssize, w->scales, nscales * ssize)
                   : FP8_OK;
}

/* The first NaN among a kept float tensor's bytes [offset, offset + len),
 * kept in its entry (the smallest of all jobs'): copied as it is, and said. */
static void find_nan(const fp8_quant_plan *p, size_t i, uint64_t offset, const void *buf,
                     size_t len)
{
    fp8_dtype dt = p->items[i].tensor->dtype;
    unsigned sz = fp8_dtype_bits(dt) / 8;
    float amax;
    uint64_t where;
    if ((!fp8_dtype_is_float(dt) && dt != FP8_DTYPE_F64) ||
        (fp8_dtype_is_float(dt) && fp8_amax(dt, buf, len / sz, &amax, &where) == FP8_BAND_OK))
        return; /* (the fast test: all finite) */
    const unsigned char *b = buf;
    for (size_t k = 0; k + sz <= len; k += sz) {
        uint64_t v = 0;
        memcpy(&v, b + k, sz);
        if ((v & ((UINT64_C(1) << (8 * sz - 1)) - 1)) <= fp8_dtype_inf_bits(dt)) /* not NaN */
            continue;
        uint64_t at = (offset + k) / sz + 1, old = __atomic_load_n(&p->entries[i].nan_at, __ATOMIC_RELAXED);
        while ((!old || at < old) &&
               !__atomic_compare_exchange_n(&p->entries[i].nan_at, &old, at, false,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
        return;
    }
}

fp8_status quant_job_run(worker *w, const job *j)
{
    shard_run *r = w->r;
    if (j->kind != JOB_COPY)
        return do_quantize(w, j);
    const fp8_tensor_info *t = r->plan->items[j->item].tensor;
    fp8_status st = read_item(w, j->item, j->offset, w->src, j->len);
    if (!st)
        find_nan(r->plan, j->item, j->offset, w->src, j->len);
    return st ? st
              : fp8_writer_pwrite(w->ctx, r->out, fp8_writer_find(r->out, t->name), j->offset,
                                  w->src, j->len);
}

uint64_t quant_job_bytes(const shard_run *r, const job *j)
{
    if (j->kind == JOB_COPY)
        return j->len;
    return j->nrows * j->ncols * src_size(r->plan->items[j->item].tensor->dtype);
}

uint64_t quant_job_offset(const shard_run *r, const job *j)
{
    const fp8_tensor_info *t = r->plan->items[j->item].tensor;
    return j->kind == JOB_COPY
               ? j->offset
               : flat_index(&r->plan->entries[j->item], j->expert, j->row0, j->col0) *
                     src_size(t->dtype);
}

