/*
 * quantize_jobs.h - the jobs of quantize's run (quantize_jobs.c): a shard's
 * run state, a thread's view of it, and the unit of work, a rectangle of one
 * expert's matrix or a byte range of a tensor copied.
 */
#ifndef FP8_QUANTIZE_JOBS_H
#define FP8_QUANTIZE_JOBS_H

#include <pthread.h>
#include <time.h>

#include "ops/quantize.h"
#include "io/output.h"
#include "io/st_writer.h"
#include "compute/gpu.h"
#include "compute/jobs.h"

typedef enum { JOB_AMAX, JOB_QUANTIZE, JOB_COPY } job_kind;

/* A unit of work: a rectangle of one expert's [M, N] matrix, or a byte range
 * of a tensor that is copied. */
typedef struct {
    job_kind kind;
    size_t item;
    uint64_t expert, row0, nrows, col0, ncols;
    uint64_t offset, len; /* JOB_COPY */
} job;

typedef struct {
    fp8_quant_plan *plan;
    fp8_file *in;
    fp8_writer *out;
    job *jobs;
    size_t njobs, cap;
    float *amax;            /* JOB_AMAX results, by job */
    float *tensor_scale;    /* per-tensor scheme: by item, expert (see scale_at) */
    unsigned char *tensor_stored; /* ... the stored scale's bytes, 4 each (the source's count) */
    size_t *scale_at;       /* by item: first index into tensor_scale */
    size_t max_src, max_q, max_scales; /* buffer sizes a worker needs */
    uint64_t *done;         /* bytes of work finished, over the whole run (atomic) */
    uint64_t chunk;         /* the most input a job takes */
    uint32_t *left;         /* by item: its last pass's jobs not yet done (atomic) */
    unsigned char *fin;     /* by item: written whole, or kept from a stopped run */
    fp8_output *rec;        /* where SHARD.partial goes as items finish (NULL: nowhere) */
    size_t shard;
    pthread_mutex_t rec_mu; /* one record at a time; a busy one is skipped */
    uint64_t rec_pend;      /* input bytes of items finished since the last record */
    struct timespec rec_at; /* when the last record was written */
} shard_run;

/* A job's view of its thread: the shard's run, the thread's context,
 * buffers (input, codes, scales) and GPU (NULL on the CPU). */
typedef struct {
    shard_run *r;
    fp8_ctx *ctx;
    unsigned char *src, *q, *scales;
    fp8_gpu *gpu;
    fp8_worker *fw;
} worker;

/* The tensor a quantized item's codes are written as: its own name, or
 * the packed layout's (X.weight_packed). */
const char *quant_code_name(const fp8_quant_item *it);
/* Cuts item i (in the shard) into jobs of the given kind. */
fp8_status quant_jobs_plan(fp8_ctx *ctx, shard_run *r, size_t i, job_kind kind);
/* Runs job j on thread w: quantizes its rectangle (the amax pass, or the
 * codes and scales) or copies its bytes. */
fp8_status quant_job_run(worker *w, const job *j);
/* The input bytes job j reads, and where they start in its tensor. */
uint64_t quant_job_bytes(const shard_run *r, const job *j);
uint64_t quant_job_offset(const shard_run *r, const job *j);

#endif
