/*
 * quantize_run.c - the quantize run: the streaming, multi-threaded writer of
 * a plan (quantize.c), and the index and config beside the shards.  A job's
 * own work (read a band, quantize it, write it) is quantize_jobs.c.
 *
 * The run cuts every tensor into jobs of at most a chunk of input
 * (fp8_jobs_chunk: smaller with many threads; a band of rows, for block
 * scaling a band of one block row, split by columns when wide), which
 * threads take in order.  A job's output depends only on its
 * input, and each job writes its own bytes of the output file, so the output
 * is the same for any number of threads, and memory is a few jobs' worth.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/quantize_run.h"
#include "ops/quantize_jobs.h"
#include "io/checkpoint.h"
#include "io/output.h"
#include "io/parts.h"
#include "io/safetensors.h"
#include "io/st_writer.h"
#include "io/zio.h"
#include "layout/formats.h"
#include "common/types.h"
#include "compute/gpu.h"
#include "compute/jobs.h"
#include "compute/fp4_cpu.h"
#include "compute/quant_cpu.h"
#include "layout/fp4.h"

/* Declares shard s's output tensors to a writer: each kept tensor as it is,
 * each quantized one as its codes (bytes of the code dtype: two E2M1 codes a
 * U8), its scale and a two-level scheme's second level. */
static fp8_status declare_shard(fp8_ctx *ctx, const fp8_quant_plan *p, size_t s, fp8_writer *w)
{
    fp8_status st = FP8_OK;
    for (size_t i = 0; i < p->n && !st; i++) {
        const fp8_quant_item *it = &p->items[i];
        const fp8_tensor_info *t = it->tensor;
        if (p->entries[i].shard != s)
            continue;
        if (!it->quantize) {
            st = fp8_writer_add_tensor(ctx, w, t->name, t->dtype, t->rank, t->shape);
            continue;
        }
        uint64_t one = 1;
        st = fp8_writer_add_tensor(ctx, w, quant_code_name(it), it->code_dtype, t->rank,
                                   it->code_shape);
        if (!st && it->global_name)
            st = fp8_writer_add_tensor(ctx, w, it->global_name, FP8_DTYPE_F32, it->global_rank,
                                       &one);
        if (!st)
            st = fp8_writer_add_tensor(ctx, w, it->scale_name, it->scale_dtype, it->scale_rank,
                                       it->scale_shape);
        uint64_t two = 2;
        if (!st && it->shape_name)
            st = fp8_writer_add_tensor(ctx, w, it->shape_name, FP8_DTYPE_I64, 1, &two);
    }
    return st;
}

/* The files a directory output writes itself rather than copying. */
static const char *const written_not_copied[] = { "config.json", HF_QUANT_CONFIG, NULL };

fp8_status fp8_quant_plan_copied(fp8_ctx *ctx, const fp8_quant_plan *p, fp8_copy_totals *totals)
{
    memset(totals, 0, sizeof *totals);
    return fp8_checkpoint_is_directory(p->ck)
               ? ck_other_files_count(ctx, p->ck, written_not_copied, totals)
               : FP8_OK;
}

fp8_status fp8_quant_plan_output_bytes(fp8_ctx *ctx, const fp8_quant_plan *p, uint64_t *bytes)
{
    fp8_status st = FP8_OK;
    *bytes = 0;
    for (size_t s = 0; s < fp8_checkpoint_shard_count(p->ck) && !st; s++) {
        fp8_writer *w = NULL;
        uint64_t size = 0;
        if (!(st = fp8_writer_create(ctx, p->out_shards[s], &w)) &&
            !(st = declare_shard(ctx, p, s, w)) && !(st = fp8_writer_size(ctx, w, &size)))
            *bytes += size;
        fp8_writer_free(w);
    }
    return st;
}

/* ---------------------------------------------------------------- the run: shards at once */

/* Output shards written at once, their jobs interleaved (place j runs job
 * slot[j].job of shard slot[j].shard): the threads then mostly write
 * different files, where in one file every write waits for the file's lock. */
#define SHARDS_AT_ONCE 4

typedef struct {
    size_t shard, job;
    double at; /* where the job starts in its shard's work, from 0 to 1 */
} slot;

typedef struct {
    fp8_quant_plan *plan;
    shard_run *r;
    size_t n;
    slot *slots;
    size_t nslots;
} shard_group;

static int cmp_slot(const void *a, const void *b)
{
    const slot *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

static shard_run *slot_run(const shard_group *g, size_t j, const job **jb)
{
    shard_run *r = &g->r[g->slots[j].shard];
    *jb = &r->jobs[g->slots[j].job];
    return r;
}

static void record_partial(shard_run *r, bool stop);

/* SHARD.partial is rewritten as items finish, at most once per
 * RECORD_BYTES of their input or RECORD_NS, whichever comes first: what
 * a kill -9 or a power loss leaves is then the file and its record. */
enum { RECORD_BYTES = 64 << 20 };
#define RECORD_NS 1000000000LL

static void record_finished(shard_run *r, size_t item)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t pend = __atomic_add_fetch(&r->rec_pend, fp8_tensor_nbytes(r->plan->items[item].tensor),
                                       __ATOMIC_RELAXED);
    if (pthread_mutex_trylock(&r->rec_mu) != 0)
        return;
    long long ns = (now.tv_sec - r->rec_at.tv_sec) * 1000000000LL + now.tv_nsec - r->rec_at.tv_nsec;
    if (__atomic_load_n(&r->rec, __ATOMIC_RELAXED) && (pend >= RECORD_BYTES || ns >= RECORD_NS)) {
        __atomic_store_n(&r->rec_pend, 0, __ATOMIC_RELAXED);
        record_partial(r, false);
        r->rec_at = now;
    }
    pthread_mutex_unlock(&r->rec_mu);
}

static fp8_status run_one(void *arg, fp8_worker *fw, size_t j)
{
    const job *jb;
    shard_run *r = slot_run(arg, j, &jb);
    worker w = { r, fw->ctx, fw->buf[0], fw->buf[1], fw->buf[2], fw->gpu, fw };
    fp8_status st = quant_job_run(&w, jb);
    /* an item whose last job is done is whole: what a stop keeps */
    if (!st && jb->kind != JOB_AMAX &&
        __atomic_sub_fetch(&r->left[jb->item], 1, __ATOMIC_ACQ_REL) == 0)
    {
        __atomic_store_n(&r->fin[jb->item], 1, __ATOMIC_RELEASE);
        if (__atomic_load_n(&r->rec, __ATOMIC_RELAXED))
            record_finished(r, jb->item);
    }
    return st;
}

/* A compressed shard is one lane, read in file order. */
static void describe(void *arg, size_t j, fp8_job_info *info)
{
    const shard_group *g = arg;
    const job *jb;
    const shard_run *r = slot_run(g, j, &jb);
    const fp8_tensor_info *t = r->plan->items[jb->item].tensor;
    info->bytes = quant_job_bytes(r, jb);
    info->label = t->name;
    info->offset = t->begin + quant_job_offset(r, jb);
    info->lane = fp8_file_is_compressed(r->in) ? g->slots[j].shard : FP8_NO_LANE;
}

/* Runs every planned job of the group's shards, interleaved by how far into
 * its shard each one starts, so that the shards end together. */
static fp8_status run_jobs(fp8_ctx *ctx, shard_group *g)
{
    const fp8_quant_options *o = &g->plan->opts;
    size_t n = 0, bufsize[3] = { 0 };
    for (size_t k = 0; k < g->n; k++)
        n += g->r[k].njobs;
    free(g->slots);
    if (!(g->slots = fp8_xcalloc(n ? n : 1, sizeof *g->slots)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    g->nslots = 0;
    for (size_t k = 0; k < g->n; k++) {
        shard_run *r = &g->r[k];
        uint64_t total = 0, at = 0;
        for (size_t j = 0; j < r->njobs; j++)
            total += quant_job_bytes(r, &r->jobs[j]);
        for (size_t j = 0; j < r->njobs; j++) {
            g->slots[g->nslots++] = (slot){ k, j, total ? (double)at / (double)total : 0 };
            at += quant_job_bytes(r, &r->jobs[j]);
        }
        bufsize[0] = r->max_src > bufsize[0] ? r->max_src : bufsize[0];
        bufsize[1] = r->max_q > bufsize[1] ? r->max_q : bufsize[1];
        bufsize[2] = r->max_scales > bufsize[2] ? r->max_scales : bufsize[2];
    }
    qsort(g->slots, g->nslots, sizeof *g->slots, cmp_slot);
    fp8_jobs spec = { .njobs = g->nslots, .bufsize = { bufsize[0], bufsize[1], bufsize[2] },
                      .threads = o->threads, .device = g->plan->device, .run = run_one,
                      .describe = describe, .arg = g, .what = g->plan->input,
                      .cancel = o->cancel, .progress = o->progress,
                      .progress_user = o->progress_user, .done = g->r[0].done,
                      .total = &g->plan->work_bytes, .nlanes = g->n };
    return fp8_jobs_run(ctx, &spec);
}

/* Per-tensor scheme, after the amax pass: one scale per expert matrix,
 * written to the scale tensor. */
static fp8_status finish_tensor_scales(fp8_ctx *ctx, shard_run *r, const size_t *items,
                                       size_t nitems)
{
    const fp8_quant_plan *p = r->plan;
    size_t total = 0;
    for (size_t k = 0; k < nitems; k++) {
        r->scale_at[items[k]] = total;
        total += p->entries[items[k]].experts;
    }
    float *amax = fp8_xcalloc(total ? total : 1, sizeof *amax);
    r->tensor_scale = fp8_xcalloc(total ? total : 1, sizeof *r->tensor_scale);
    r->tensor_stored = fp8_xcalloc(total ? total : 1, 4);
    if (!amax || !r->tensor_scale || !r->tensor_stored) {
        free(amax);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    for (size_t j = 0; j < r->njobs; j++) {
        float *m = &amax[r->scale_at[r->jobs[j].item] + r->jobs[j].expert];
        *m = r->amax[j] > *m ? r->amax[j] : *m;
    }
    fp8_status st = FP8_OK;
    for (size_t k = 0; k < nitems && !st; k++) {
        size_t i = items[k];
        const plan_entry *e = &p->entries[i];
        unsigned ssize = fp8_scale_size(e->kind);
        unsigned char bytes[4];
        for (uint64_t x = 0; x < e->experts && !st; x++) {
            uint32_t bits = 0;
            float s = quant_plan_tensor_scale(ctx, p, i, amax[r->scale_at[i] + x],
                                              fp8_file_path(r->in), &bits, &st);
            if (s == 0)
                break;
            r->tensor_scale[r->scale_at[i] + x] = s;
            for (unsigned b = 0; b < ssize; b++)
                bytes[b] = (unsigned char)(bits >> (8 * b));
            memcpy(r->tensor_stored + 4 * (r->scale_at[i] + x), bytes, ssize);
            st = fp8_writer_pwrite(ctx, r->out, fp8_writer_find(r->out, p->items[i].scale_name),
                                   x * ssize, bytes, ssize);
        }
    }
    free(amax);
    return st;
}

static int cmp_item_offset(const void *a, const void *b, void *plan)
{
    const fp8_quant_plan *p = plan;
    uint64_t x = p->items[*(const size_t *)a].tensor->begin;
    uint64_t y = p->items[*(const size_t *)b].tensor->begin;
    return x < y ? -1 : x > y;
}

/* Items of shard s (only those quantized, if `quantized`) in the input's
 * byte order, so that reads move forward through the file; returns how many. */
static size_t shard_items(const fp8_quant_plan *p, size_t s, bool quantized, size_t *items)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->entries[i].shard == s && (!quantized || p->items[i].quantize))
            items[n++] = i;
    qsort_r(items, n, sizeof *items, cmp_item_offset, (void *)p);
    return n;
}

/* shard_items less those a stopped run wrote whole (r->fin). */
static size_t todo_items(const shard_run *r, size_t s, bool quantized, size_t *items)
{
    size_t n = shard_items(r->plan, s, quantized, items), m = 0;
    for (size_t k = 0; k < n; k++)
        if (!r->fin[items[k]])
            items[m++] = items[k];
    return m;
}

/* ---------------------------------------------------------------- a shard kept half written */

/* SHARD.partial (parts.h): the file a run left half written, as its inode
 * (the header, checked at --resume, fixes every offset), and the items it
 * had written whole, by their index in the plan (the same for the same
 * options and input, which --resume checked).  The items are read before
 * the file is synced: one that finishes meanwhile waits for the next
 * record.  `stop`: the run is over, the file is kept for --resume; else it
 * goes on (record_finished).  A failure leaves the last record. */
static void record_partial(shard_run *r, bool stop)
{
    fp8_quant_plan *p = r->plan;
    size_t n = 0;
    fp8_text items = { 0 }, t = { 0 };
    for (size_t i = 0; i < p->n; i++)
        if (p->entries[i].shard == r->shard && __atomic_load_n(&r->fin[i], __ATOMIC_ACQUIRE)) {
            fp8_text_str(&items, " ");
            fp8_text_u64(&items, i);
            n++;
        }
    fp8_ctx *ctx = n ? fp8_ctx_create() : NULL; /* the stop's message stays the run's */
    const char *file;
    struct stat sb;
    fp8_status st = !ctx || items.oom ? FP8_ERR_NOMEM
                    : stop            ? st_writer_keep(ctx, r->out, &file)
                                      : st_writer_sync(ctx, r->out, &file);
    if (!st && stat(file, &sb) != 0)
        st = FP8_ERR_IO;
    if (!st) {
        char line[64];
        fp8_text_str(&t, "file ");
        fp8_text_str(&t, fp8_basename(file));
        snprintf(line, sizeof line, "\nino %llu\nitems", (unsigned long long)sb.st_ino);
        fp8_text_str(&t, line);
        fp8_text_str(&t, items.p);
        fp8_text_str(&t, "\n");
        st = t.oom ? FP8_ERR_NOMEM
                   : fp8_partial_write(ctx, r->rec->records, p->out_shards[r->shard], t.p, true);
    }
    if (!st && stop) {
        r->rec->partial_shards++;
        r->rec->partial_items += n;
    }
    if (st) /* no more records for this shard */
        __atomic_store_n(&r->rec, NULL, __ATOMIC_RELAXED);
    free(items.p);
    free(t.p);
    fp8_ctx_free(ctx);
}

/* --resume: writes on into the file a stopped run kept of shard s, its
 * items written whole marked in r->fin, when its record and identity hold;
 * *resumed false (and the file removed) otherwise. */
static fp8_status resume_partial(fp8_ctx *ctx, fp8_quant_plan *p, fp8_output *out, size_t s,
                                 shard_run *r, bool *resumed)
{
    char *text = fp8_partial_read(out->records, p->out_shards[s]), *path = NULL;
    const char *nl = text && !strncmp(text, "file ", 5) ? strchr(text, '\n') : NULL;
    unsigned long long ino;
    int at = 0;
    struct stat sb;
    size_t n = 0;
    fp8_ctx *quiet = NULL;
    *resumed = false;
    if (!nl || !(path = malloc((size_t)(nl - text) + 1)))
        goto out;
    memcpy(path, text + 5, (size_t)(nl - text) - 5);
    path[nl - text - 5] = 0;
    char *full = fp8_path_join(out->tmp, path);
    free(path);
    path = full;
    if (!path || memchr(text + 5, '/', (size_t)(nl - text) - 5) ||
        sscanf(nl, "\nino %llu\nitems%n", &ino, &at) != 1 || !at || stat(path, &sb) != 0 ||
        (unsigned long long)sb.st_ino != ino)
        goto out;
    uint64_t written = 0, fsize;
    quiet = fp8_ctx_create();
    bool laid = quiet && !fp8_writer_size(quiet, r->out, &fsize); /* fp8_writer_find's names */
    for (const char *q = nl + at; laid && *q == ' ';) {
        char *end;
        unsigned long long i = strtoull(q + 1, &end, 10);
        if (end == q + 1 || i >= p->n || p->entries[i].shard != s)
            goto out;
        q = end;
        const fp8_quant_item *it = &p->items[i];
        const fp8_tensor_info *c = fp8_writer_find(r->out, it->quantize ? quant_code_name(it)
                                                                        : it->tensor->name);
        const fp8_tensor_info *sc = it->quantize ? fp8_writer_find(r->out, it->scale_name) : NULL;
        written += (c ? fp8_tensor_nbytes(c) : 0) + (sc ? fp8_tensor_nbytes(sc) : 0);
        n += !r->fin[i];
        r->fin[i] = 1;
    }
    *resumed = laid && !st_writer_resume(quiet, r->out, path, written);
out:
    fp8_ctx_free(quiet);
    if (!*resumed) {
        memset(r->fin, 0, p->n);
        if (path)
            unlink(path);
    } else {
        fp8_notify(ctx, "%s: kept %zu tensors of %s that the stopped run wrote; writing the rest",
                   out->path, n, p->out_shards[s]);
    }
    if (!*resumed) /* else it holds until the next record: a kill -9 keeps it */
        fp8_partial_remove(out->records, p->out_shards[s]);
    free(path);
    free(text);
    return FP8_OK;
}

/* ---------------------------------------------------------------- NVFP4's second level */

typedef struct {
    char *key;
    size_t item;
} keyed;

/*
 * NVFP4: the amax of every quantized matrix, over the whole input before
 * any shard is written (a fused layer's parts may lie in different shards),
 * then each matrix's second level from the largest amax of its fused layer,
 * as llm-compressor gives the parts one (observers/base.py get_global_scale
 * over FusionHandler's group) and vLLM needs 
 * (fp8conv-formats(5), FP4 QUANTIZATION).
 */
static fp8_status global_pass(fp8_ctx *ctx, fp8_quant_plan *p, uint64_t *done)
{
    size_t nshards = fp8_checkpoint_shard_count(p->ck);
    float *amax = fp8_xcalloc(p->n ? p->n : 1, sizeof *amax);
    size_t *items = fp8_xcalloc(p->n ? p->n : 1, sizeof *items);
    keyed *keys = fp8_xcalloc(p->n ? p->n : 1, sizeof *keys);
    fp8_status st = amax && items && keys ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    uint64_t chunk = fp8_jobs_chunk(p->opts.threads, p->device);
    for (size_t s0 = 0; s0 < nshards && !st; s0 += SHARDS_AT_ONCE) {
        shard_run r[SHARDS_AT_ONCE] = { 0 };
        shard_group g = { .plan = p, .r = r, .n = 0 };
        for (size_t s = s0; s < nshards && s < s0 + SHARDS_AT_ONCE && !st; s++, g.n++) {
            r[g.n] = (shard_run){ .plan = p, .in = fp8_checkpoint_shard(p->ck, s), .done = done,
                                  .chunk = chunk };
            size_t ni = shard_items(p, s, true, items);
            for (size_t i = 0; i < ni && !st; i++)
                st = quant_jobs_plan(ctx, &r[g.n], items[i], JOB_AMAX);
            if (!st && !(r[g.n].amax = fp8_xcalloc(r[g.n].njobs ? r[g.n].njobs : 1,
                                                   sizeof *r[g.n].amax)))
                st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        }
        if (!st)
            st = run_jobs(ctx, &g);
        for (size_t k = 0; k < g.n; k++) {
            for (size_t j = 0; !st && j < r[k].njobs; j++) {
                float *m = &amax[r[k].jobs[j].item];
                *m = r[k].amax[j] > *m ? r[k].amax[j] : *m;
            }
            free(r[k].jobs);
            free(r[k].amax);
        }
        free(g.slots);
    }
    size_t nk = 0;
    for (size_t i = 0; i < p->n && !st; i++)
        if (p->items[i].quantize &&
            !(keys[nk++] = (keyed){ quant_fused_key(p->items[i].tensor->name), i }).key)
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st)
        qsort(keys, nk, sizeof *keys, fp8_cmp_str);
    for (size_t a = 0, b; a < nk && !st; a = b) {
        float m = 0;
        for (b = a; b < nk && !strcmp(keys[b].key, keys[a].key); b++)
            m = amax[keys[b].item] > m ? amax[keys[b].item] : m;
        for (size_t k = a; k < b; k++)
            p->entries[keys[k].item].global =
                fp4_nvfp4_global(fp8_profile_numerics(p->opts.profile, p->opts.scheme),
                                 p->items[keys[k].item].tensor->dtype, m);
    }
    for (size_t k = 0; k < nk; k++)
        free(keys[k].key);
    free(keys);
    free(items);
    free(amax);
    return st;
}

fp8_status quant_plan_fp4_globals(fp8_ctx *ctx, fp8_quant_plan *p)
{
    uint64_t done = 0;
    return fp8_scheme_has_second_level(p->opts.scheme) ? global_pass(ctx, p, &done) : FP8_OK;
}

float quant_plan_tensor_scale(fp8_ctx *ctx, const fp8_quant_plan *p, size_t i, float amax,
                              const char *where, uint32_t *bits, fp8_status *st)
{
    const plan_entry *e = &p->entries[i];
    const fp8_numerics *num = fp8_profile_numerics(p->opts.profile, p->opts.scheme);
    float s = fp8_numerics_scale(num, e->kind, amax, bits);
    if (s == 0) {
        fp8_band b = { .scheme = p->opts.scheme, .kind = e->kind, .num = *num };
        *st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s': %s", where,
                       p->items[i].tensor->name, fp8_band_no_scale_why(&b));
    }
    return s;
}

uint32_t quant_plan_global_bits(const fp8_quant_plan *p, size_t i)
{
    float g = p->entries[i].global;
    bool divides = fp4_layout_get((fp4_layout_id)p->spec->fp4_layout)->global_divides;
    return fp8_f32_bits(divides ? g : 1.0f / g);
}

/* NVFP4: shard s's second-level scales, one F32 each: the global scale, a
 * divisor (compressed-tensors), or its nearest fp32 reciprocal, a factor
 * (ModelOpt's weight_scale_2; fp8conv-formats(5), FP4 QUANTIZATION).
 * INT4: each weight's unpacked shape, I64 [rows, cols]. */
static fp8_status write_globals(fp8_ctx *ctx, const fp8_quant_plan *p, size_t s, fp8_writer *w)
{
    fp8_status st = FP8_OK;
    for (size_t i = 0; i < p->n && !st; i++) {
        const fp8_quant_item *it = &p->items[i];
        if (p->entries[i].shard != s || !it->quantize)
            continue;
        if (it->shape_name) {
            unsigned char b[16] = { 0 };
            for (int k = 0; k < 16; k++)
                b[k] = (unsigned char)(it->tensor->shape[k / 8] >> (8 * (k % 8)));
            st = fp8_writer_pwrite(ctx, w, fp8_writer_find(w, it->shape_name), 0, b, 16);
        }
        if (st || !it->global_name)
            continue;
        uint32_t bits = quant_plan_global_bits(p, i);
        unsigned char b[4] = { (unsigned char)bits, (unsigned char)(bits >> 8),
                               (unsigned char)(bits >> 16), (unsigned char)(bits >> 24) };
        st = fp8_writer_pwrite(ctx, w, fp8_writer_find(w, it->global_name), 0, b, 4);
    }
    return st;
}

/* Writes output shards shards[0 .. n-1] (n <= SHARDS_AT_ONCE) at once. */
static fp8_status write_shards(fp8_ctx *ctx, fp8_quant_plan *p, fp8_output *out,
                               const size_t *shards, size_t n, uint64_t *done)
{
    shard_run r[SHARDS_AT_ONCE] = { 0 };
    shard_group g = { .plan = p, .r = r, .n = n };
    size_t *items = fp8_xcalloc(p->n ? p->n : 1, sizeof *items), ni;
    uint64_t chunk = fp8_jobs_chunk(p->opts.threads, p->device);
    fp8_status st = items ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n && !st; k++) {
        r[k] = (shard_run){ .plan = p, .in = fp8_checkpoint_shard(p->ck, shards[k]), .done = done,
                            .chunk = chunk,
                            .scale_at = fp8_xcalloc(p->n ? p->n : 1, sizeof *r[k].scale_at),
                            .left = fp8_xcalloc(p->n ? p->n : 1, sizeof *r[k].left),
                            .fin = fp8_xcalloc(p->n ? p->n : 1, 1), .shard = shards[k],
                            .rec_mu = PTHREAD_MUTEX_INITIALIZER };
        char *path = fp8_output_file(out, p->out_shards[shards[k]]);
        bool resumed = false;
        if (!path || !r[k].scale_at || !r[k].left || !r[k].fin)
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        else if (!(st = fp8_writer_create(ctx, path, &r[k].out)) &&
                 !(st = declare_shard(ctx, p, shards[k], r[k].out))) {
            fp8_writer_set_durable(r[k].out, !p->opts.no_sync);
            st = resume_partial(ctx, p, out, shards[k], &r[k], &resumed);
            if (!st && !resumed)
                st = fp8_writer_begin(ctx, r[k].out);
            /* recorded as items finish where a stop is kept (below) */
            if (out->records && !out->staged && !p->opts.no_sync)
                r[k].rec = out;
            clock_gettime(CLOCK_MONOTONIC, &r[k].rec_at);
            if (!st)
                st = write_globals(ctx, p, shards[k], r[k].out);
        }
        free(path);
    }
    if (!st && fp8_scheme_get(p->opts.scheme)->fixed) { /* pass 1: amax of each matrix */
        for (size_t k = 0; k < n && !st; k++) {
            ni = todo_items(&r[k], shards[k], true, items);
            for (size_t i = 0; i < ni && !st; i++)
                st = quant_jobs_plan(ctx, &r[k], items[i], JOB_AMAX);
            if (!st && !(r[k].amax = fp8_xcalloc(r[k].njobs ? r[k].njobs : 1, sizeof *r[k].amax)))
                st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        }
        if (!st)
            st = run_jobs(ctx, &g);
        for (size_t k = 0; k < n && !st; k++) {
            ni = todo_items(&r[k], shards[k], true, items);
            st = finish_tensor_scales(ctx, &r[k], items, ni);
            r[k].njobs = 0;
        }
    }
    for (size_t k = 0; k < n && !st; k++) {
        ni = todo_items(&r[k], shards[k], false, items);
        for (size_t i = 0; i < ni && !st; i++)
            st = quant_jobs_plan(ctx, &r[k], items[i], p->items[items[i]].quantize ? JOB_QUANTIZE : JOB_COPY);
        for (size_t j = 0; j < r[k].njobs; j++)
            r[k].left[r[k].jobs[j].item]++;
        for (size_t i = 0; i < ni; i++) /* no bytes: whole already */
            r[k].fin[items[i]] = !r[k].left[items[i]];
    }
    if (!st)
        st = run_jobs(ctx, &g);
    /* stopped (Ctrl-C, SIGTERM): each shard in progress is kept with the
     * items it wrote whole, for --resume, where a whole run records */
    bool stopped = st && p->opts.cancel && *p->opts.cancel && out->records && !out->staged;
    for (size_t k = 0; k < n && stopped; k++)
        if (r[k].out && fp8_writer_tensor(r[k].out, 0)) {
            r[k].rec = out;
            record_partial(&r[k], true);
        }
    for (size_t k = 0; k < n && !st; k++)
        if (!(st = fp8_writer_commit(ctx, r[k].out)))
            st = fp8_output_shard_done(ctx, out, shards[k]);
    for (size_t k = 0; k < n && !stopped; k++) /* finished, or its file removed below */
        fp8_partial_remove(out->records, p->out_shards[shards[k]]);
    for (size_t k = 0; k < n && !st; k++)
        st_file_drop_cache(r[k].in);
    for (size_t k = 0; k < n; k++) {
        fp8_writer_free(r[k].out);
        free(r[k].jobs);
        free(r[k].amax);
        free(r[k].tensor_scale);
        free(r[k].tensor_stored);
        free(r[k].scale_at);
        free(r[k].left);
        free(r[k].fin);
    }
    free(g.slots);
    free(items);
    return st;
}

/* ---------------------------------------------------------------- config, index */

/* model.safetensors.index.json for the output. */
static fp8_status write_index(fp8_ctx *ctx, const fp8_quant_plan *p, const char *dir)
{
    ck_index_entry *map = fp8_xcalloc(p->n * 4 + 1, sizeof *map);
    if (!map)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++) {
        const fp8_quant_item *it = &p->items[i];
        map[n++] = (ck_index_entry){ quant_code_name(it), it->shard };
        if (!it->quantize) {
            total += fp8_tensor_nbytes(it->tensor);
            continue;
        }
        uint64_t scales = fp8_dtype_bits(it->scale_dtype) / 8;
        for (int d = 0; d < it->scale_rank; d++)
            scales *= it->scale_shape[d];
        total += fp8_scheme_code_bytes(p->opts.scheme, it->tensor->elements) + scales;
        map[n++] = (ck_index_entry){ it->scale_name, it->shard };
        if (it->global_name) {
            total += 4;
            map[n++] = (ck_index_entry){ it->global_name, it->shard };
        }
        if (it->shape_name) {
            total += 16;
            map[n++] = (ck_index_entry){ it->shape_name, it->shard };
        }
    }
    fp8_status st = ck_index_write(ctx, dir, map, n, total);
    free(map);
    return st;
}

static fp8_status write_config(fp8_ctx *ctx, const fp8_quant_plan *p, const char *dir)
{
    cJSON *config = NULL;
    fp8_status st = ck_config_read(ctx, p->input, &config);
    if (!st && config) {
        /* "quantization_config": null (or a repeated key) must not stay
         * beside the new one: readers differ on which of two they take */
        while (cJSON_GetObjectItemCaseSensitive(config, "quantization_config"))
            cJSON_DeleteItemFromObjectCaseSensitive(config, "quantization_config");
        cJSON_AddItemToObject(config, "quantization_config",
                              fmt_quantization_config(p->spec, &p->opts, p->ignored, p->nignored));
        st = ck_json_write_owned(ctx, dir, "config.json", config);
    }
    cJSON *side = fmt_side_file(p->spec, &p->opts, p->ignored, p->nignored);
    if (!st && side)
        st = ck_json_write_owned(ctx, dir, HF_QUANT_CONFIG, side);
    else
        cJSON_Delete(side);
    return st;
}

/* --finish on an OUTPUT published already: its parts' records went with
 * the publishing, but its config.json says the layout it was made with;
 * this command's must be the same (a --block 64x64 on a 128x128 output
 * would otherwise report what it never wrote). */
/* Whether a and b print the same (config.json's numbers are kept as their
 * text, which cJSON_Compare does not read as numbers). */
static bool same_json(const cJSON *a, const cJSON *b)
{
    char *x = a ? cJSON_PrintUnformatted(a) : NULL, *y = b ? cJSON_PrintUnformatted(b) : NULL;
    bool same = x && y && strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

static fp8_status check_published(fp8_ctx *ctx, const fp8_quant_plan *p, const char *output)
{
    cJSON *config = NULL;
    cJSON *mine = fmt_quantization_config(p->spec, &p->opts, p->ignored, p->nignored);
    fp8_status st = ck_config_read(ctx, output, &config);
    const cJSON *theirs = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    if (!st && config && !same_json(theirs, mine)) {
        const cJSON *k = NULL, *a = NULL, *b = NULL;
        const cJSON *sides[2] = { theirs, mine };
        for (int side = 0; side < 2 && !k; side++) /* the first key either has that differs */
            cJSON_ArrayForEach(k, sides[side]) {
                a = cJSON_GetObjectItemCaseSensitive(theirs, k->string);
                b = cJSON_GetObjectItemCaseSensitive(mine, k->string);
                if (!same_json(a, b))
                    break;
            }
        char *x = a ? cJSON_PrintUnformatted(a) : NULL, *y = b ? cJSON_PrintUnformatted(b) : NULL;
        st = fp8_fail(ctx, FP8_ERR_USAGE,
                      "%s: --finish: published already with other options: its config.json's "
                      "quantization_config has \"%s\": %.200s, this command writes %.200s; give "
                      "the options it was made with (or --force without --finish to make it again)",
                      output, k && k->string ? k->string : "quantization_config",
                      x ? x : "nothing", y ? y : "nothing");
        free(x);
        free(y);
    }
    cJSON_Delete(config);
    cJSON_Delete(mine);
    return st;
}

/* ---------------------------------------------------------------- the run */

/* What the output's bytes depend on, one "--option value" line each, for
 * --part, --finish and --resume to compare (parts.c): every option but
 * those of how the run goes (-j, --device, --force, --no-sync, ...). */
static fp8_status options_text(fp8_ctx *ctx, const fp8_quant_plan *p, fp8_text *t)
{
    const fp8_quant_options *o = &p->opts;
    char line[512];
    snprintf(line, sizeof line,
             "--fp8conv quantize %s\n--scheme %s\n--format %s\n--block %ux%u\n--scale-fmt %s\n"
             "--mx-rounding %s\n--no-default-ignore %d\n",
             FP8CONV_VERSION, fp8_scheme_name(o->scheme), fp8_format_name(p->format),
             o->block_rows, o->block_cols, o->scale_ue8m0 ? "ue8m0" : "float",
             o->mx_rounding == FP8_MX_FLOOR ? "floor" : "rceil", o->no_default_ignore);
    fp8_text_str(t, line);
    if (o->profile) { /* absent for fp8conv's own, as before profiles */
        fp8_text_str(t, "--profile ");
        fp8_text_str(t, fp8_profile_name(o->profile));
        fp8_text_str(t, "\n");
    }
    for (size_t i = 0; i < o->nignore; i++) {
        fp8_text_str(t, "--ignore ");
        fp8_text_str(t, o->ignore[i]);
        fp8_text_str(t, "\n");
    }
    /* --like's scale dtype and declared ignore list */
    if (o->scale_dtype_set) {
        fp8_text_str(t, "--like-scale-dtype ");
        fp8_text_str(t, fp8_dtype_name(o->scale_dtype));
        fp8_text_str(t, "\n");
    }
    if (o->declare_ignore)
        fp8_text_str(t, o->declare_no_list ? "--like-ignore-list none\n" : "--like-ignore-list\n");
    for (size_t i = 0; o->declare_ignore && i < o->ndeclared_ignore; i++) {
        fp8_text_str(t, "--like-ignore ");
        fp8_text_str(t, o->declared_ignore[i]);
        fp8_text_str(t, "\n");
    }
    return fp8_options_common(ctx, p->ck, o->run.parts, t);
}

fp8_status fp8_quant_plan_run(fp8_ctx *ctx, fp8_quant_plan *p, const char *output)
{
    /* tensors in memory (fp8_quant_plan_create_memory): no file to read */
    if (!p->ck || (fp8_checkpoint_shard_count(p->ck) && !fp8_checkpoint_shard(p->ck, 0)))
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: a plan of tensors in memory is not run: its "
                        "items are quantized by fp8_quant_plan_item_quantize", p->input);
    bool is_dir = fp8_checkpoint_is_directory(p->ck);
    uint64_t done = 0;
    fp8_output out = { 0 };
    fp8_text options = { 0 };
    size_t nshards = fp8_checkpoint_shard_count(p->ck), todo[SHARDS_AT_ONCE], n = 0;
    fp8_status st = fp8_device_resolve(ctx, p->opts.device, &p->device);
    if (!st)
        st = options_text(ctx, p, &options);
    zio_cache_policy(p->opts.run.cache, p->input_bytes);
    fp8_output_work work = { .ck = p->ck, .names = p->out_shards, .options = options.p,
                             .run = p->opts.run, .unresumable = p->source != NULL };
    if (!st)
        st = fp8_output_open(ctx, &out, p->input, output, is_dir, p->opts.force,
                             !p->opts.no_sync, &work);
    if (!st && out.complete && !out.recheck && is_dir && p->config)
        st = check_published(ctx, p, output);
    bool any = false; /* shards to write (not --resume's finished ones) */
    for (size_t s = 0; !st && !out.complete && s < nshards; s++)
        any = any || out.todo[s];
    if (!st && !out.complete && any && fp8_scheme_has_second_level(p->opts.scheme))
        st = global_pass(ctx, p, &done);
    if (!st && !out.complete && any &&
        !fp4_cpu_takes(fp8_profile_numerics(p->opts.profile, p->opts.scheme)))
        fp8_notify(ctx, "--profile %s: scheme %s runs the reference quantizer (no fast path or "
                        "CUDA kernel takes the profile's fp32 steps); slower, the same bytes",
                   fp8_profile_name(p->opts.profile), fp8_scheme_name(p->opts.scheme));
    for (size_t s = 0; !st && !out.complete && s < nshards; s++) {
        if (out.todo[s])
            todo[n++] = s;
        if (n == SHARDS_AT_ONCE || (n && s == nshards - 1)) {
            st = write_shards(ctx, p, &out, todo, n, &done);
            n = 0;
        }
    }
    if (!st && is_dir && !out.complete && fp8_output_publishes(&out)) {
        if (fp8_checkpoint_has_index(p->ck) || fp8_checkpoint_shard_count(p->ck) > 1)
            st = write_index(ctx, p, out.tmp);
        if (!st)
            st = write_config(ctx, p, out.tmp);
        if (!st)
            st = ck_copy_other_files(ctx, p->ck, out.tmp, written_not_copied, p->opts.cancel);
    }
    if (!st && p->opts.cancel && *p->opts.cancel)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", p->input);
    for (size_t i = 0; !st && i < p->n; i++) {
        char *msg = NULL;
        if (p->entries[i].nan_at &&
            asprintf(&msg, "%s: tensor '%s' (kept as %s) holds NaN, first at element %llu: "
                     "copied as it is", p->items[i].shard, p->items[i].tensor->name,
                     fp8_dtype_name(p->items[i].tensor->dtype),
                     (unsigned long long)(p->entries[i].nan_at - 1)) >= 0)
            st = quant_plan_warn(ctx, p, msg);
        p->entries[i].nan_at = 0;
    }
    if (!st && !out.complete)
        st = fp8_output_commit(ctx, &out);
    if (!st && out.recheck && out.complete)
        fp8_notify(ctx, "%s: complete already, and the same as this command writes: left as it "
                   "was", output);
    if (st && p->opts.cancel && *p->opts.cancel)
        fp8_output_interrupted(ctx, &out);
    fp8_output_end(&out);
    free(options.p);
    if (!st && p->opts.progress)
        p->opts.progress(p->opts.progress_user, p->work_bytes, p->work_bytes, NULL);
    return st;
}
