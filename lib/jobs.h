/*
 * jobs.h - the work engines of quantize and dequantize share: a list of
 * jobs run by threads in order, and an output built beside its final path.
 */
#ifndef FP8_JOBS_H
#define FP8_JOBS_H

#include "internal.h"

/* ---------------------------------------------------------------- jobs */

/* What one worker thread owns: its error context, its buffers and, when the
 * run is on the GPU, its share of it (the buffers are then pinned). */
typedef struct {
    fp8_ctx *ctx;
    unsigned char *buf[3];
    struct fp8_gpu *gpu;
    struct fp8_lanes *lanes; /* the turn it holds, if any (fp8_worker_end_turn) */
    size_t lane;
    bool turn;
} fp8_worker;

#define FP8_NO_LANE SIZE_MAX

typedef struct {
    size_t njobs;
    size_t bufsize[3];          /* bytes of each worker buffer */
    int threads;                /* 0: one per online CPU */
    fp8_device device;          /* CPU or CUDA (resolved); CUDA runs at least two workers */
    fp8_status (*run)(void *arg, fp8_worker *w, size_t job);
    uint64_t (*bytes)(void *arg, size_t job); /* input bytes of a job, for progress */
    void *arg;
    const char *what;           /* named in "interrupted" */
    const volatile sig_atomic_t *cancel;
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    const char *(*label)(void *arg, size_t job); /* the tensor a job works on, for progress */
    void *progress_user;
    uint64_t *done, total;      /* progress over several runs */
    /* Jobs that read a compressed (stream) file take turns: lane() names a
     * job's lane (below nlanes; FP8_NO_LANE for none) and the file offset
     * where its reads start.  A lane's jobs run in offset order (ties in job
     * order), each once the one before has ended its turn (returned, or
     * called fp8_worker_end_turn after its last read), so that the stream
     * is only read forward.  Jobs of no lane keep their place and run as
     * before.  NULL: no lanes. */
    size_t (*lane)(void *arg, size_t job, uint64_t *offset);
    size_t nlanes;
} fp8_jobs;

/*
 * Runs jobs 0..njobs-1 on the calling thread and helpers.  Jobs are taken in
 * order (lanes reorder a lane's jobs among their places) and no new one is
 * taken after a failure, so every job taken before a failed one has run: the
 * error returned is the first failed job's, the same for any thread count.
 * Progress is reported from the calling thread only (with the job's label),
 * and once more when all jobs are done (helpers may have run all of them).
 * On CUDA each worker has its own stream, so one worker's copies and kernel
 * overlap another's file reads and writes: at least two workers run.  On
 * the CPU, fewer workers than `threads` run where their buffers together
 * would pass FP8_JOBS_MEMORY (at least one).
 */
fp8_status fp8_jobs_run(fp8_ctx *ctx, const fp8_jobs *spec);

/* The bytes a job of a run with `threads` moves at a time (its input, or a
 * read): FP8_CHUNK_BYTES, halved (down to a sixteenth of it) while the
 * workers' buffers, about two chunks each, would pass FP8_JOBS_MEMORY;
 * always FP8_CHUNK_BYTES on CUDA, whose pinned buffers are per stream.
 * What a command computes never depends on it. */
uint64_t fp8_jobs_chunk(int threads, fp8_device device);

/* Lets the next job of the worker's lane start reading (a no-op without a
 * turn): for a job whose reads are done but whose work is not. */
void fp8_worker_end_turn(fp8_worker *w);

/* ---------------------------------------------------------------- outputs */

/*
 * An output (a directory or a file) built in a temporary directory beside
 * its final path (.NAME.tmp-XXXXXX, same file system, holding a record of
 * its owner) and published by fp8_output_commit; fp8_output_end removes
 * whatever is left.  output.c says what may be replaced and how.
 *
 * With work (fp8_output_open), a directory output is written shard by
 * shard, each finished one recorded (parts.c): --part I/N writes its share
 * of the shards into .NAME.parts beside OUTPUT, which every part shares,
 * and publishes nothing; --finish checks that every shard there is
 * recorded and whole and publishes that directory; a durable run records
 * its shards in its temporary directory, which --resume adopts after the
 * run died.
 */
typedef struct {
    const fp8_checkpoint *ck; /* the input */
    char *const *names;       /* the output shard names, by input shard */
    const char *options;      /* what the bytes depend on, one "--option value" line each */
    fp8_run_options run;      /* --part I/N, --finish, --resume */
} fp8_output_work;

typedef struct {
    char *path, *tmp;
    const char *base;
    int dirlen;
    bool exists, is_dir, durable;
    fp8_output_work work;
    char *records;   /* where finished shards are recorded; NULL: nowhere */
    bool *todo;      /* by input shard: whether this run writes it */
    bool staged;     /* tmp is the shared .NAME.parts: kept unless published */
    bool committed;
    bool complete;   /* --resume found OUTPUT written already: nothing to do */
} fp8_output;

/* Checks OUTPUT (a name, not empty, "." or ".."; not existing unless
 * `force`, and then only what fp8conv wrote; neither INPUT, inside it, nor
 * holding it; a file output not .zst), removes the temporary directories of
 * dead runs on the same OUTPUT (saying so through fp8_notify), and creates
 * this run's. */
fp8_status fp8_output_begin(fp8_ctx *ctx, fp8_output *o, const char *input, const char *output,
                            bool is_dir, bool force, bool durable);
/* The same with work (NULL: as fp8_output_begin); then only the shards
 * o->todo names are to be written, each passed to fp8_output_shard_done once
 * committed.  A --part or --finish whose options differ from those recorded
 * fails with FP8_ERR_USAGE naming the option; a --finish with shards missing
 * fails with FP8_ERR_USAGE naming them and their parts (FP8_ERR_IO when
 * all are there but some do not match their records). */
fp8_status fp8_output_open(fp8_ctx *ctx, fp8_output *o, const char *input, const char *output,
                           bool is_dir, bool force, bool durable, const fp8_output_work *work);
/* Records input shard s's output as finished (a no-op without records). */
fp8_status fp8_output_shard_done(fp8_ctx *ctx, fp8_output *o, size_t s);
/* Whether this run publishes OUTPUT (a --part does not: --finish does). */
bool fp8_output_publishes(const fp8_output *o);
/* Where to write `name` (a directory output) or the file (a file output;
 * `name` unused); NULL when out of memory. */
char *fp8_output_file(const fp8_output *o, const char *name);
/* Publishes the result: OUTPUT is at every moment absent, the old output or
 * the new one (never replaced unless `force`). */
fp8_status fp8_output_commit(fp8_ctx *ctx, fp8_output *o);
void fp8_output_end(fp8_output *o);

#endif
