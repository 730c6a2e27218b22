/*
 * jobs.h - the work engine of every command that streams tensors (jobs.c):
 * a list of jobs run by threads in order, on the CPU or CUDA streams.
 */
#ifndef FP8_JOBS_H
#define FP8_JOBS_H

#include <string.h>

#include "common/internal.h"

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

/* What a job tells of itself (fp8_jobs.describe; zeroed, with lane
 * FP8_NO_LANE, before it is asked). */
typedef struct {
    uint64_t bytes;             /* its input bytes, for progress */
    const char *label;          /* the tensor it works on, for progress */
    /* Jobs that read a compressed (stream) file take turns: the job's lane
     * (below nlanes; FP8_NO_LANE for none) and the file offset where its
     * reads start.  A lane's jobs run in offset order (ties in job order),
     * each once the one before has ended its turn (returned, or called
     * fp8_worker_end_turn after its last read), so that the stream is only
     * read forward.  Jobs of no lane keep their place and run as before. */
    size_t lane;
    uint64_t offset;
} fp8_job_info;

typedef struct {
    size_t njobs;
    size_t bufsize[3];          /* bytes of each worker buffer */
    int threads;                /* 0: one per online CPU */
    fp8_device device;          /* CPU or CUDA (resolved); CUDA runs at least two workers */
    fp8_status (*run)(void *arg, fp8_worker *w, size_t job);
    void (*describe)(void *arg, size_t job, fp8_job_info *info); /* NULL: nothing */
    void *arg;
    const char *what;           /* named in "interrupted" */
    const volatile sig_atomic_t *cancel;
    void (*progress)(void *user, uint64_t done, uint64_t total, const char *tensor);
    void *progress_user;
    uint64_t *done, *total;     /* progress over several runs (with progress: both set) */
    bool count;                 /* add the jobs' bytes to *total before running them */
    size_t nlanes;              /* 0: no lanes */
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
/* The workers a run with `threads` (0: one per online CPU) starts at most. */
int fp8_jobs_threads(int threads, fp8_device device);
/* The buffers one worker of such a run may hold on the CPU: its share of
 * FP8_JOBS_MEMORY, for a job that gains from more than a chunk (a
 * transposed read: fewer, longer reads). */
uint64_t fp8_jobs_share(int threads, fp8_device device);

/* Lets the next job of the worker's lane start reading (a no-op without a
 * turn): for a job whose reads are done but whose work is not. */
void fp8_worker_end_turn(fp8_worker *w);

/* Of n items `size` bytes apart from `items`, each with the number of its
 * first job in the size_t at byte `at` (ascending, the first item's 0), the
 * index of the one job j belongs to: the last whose first job is at most j. */
static inline size_t fp8_jobs_item_of(const void *items, size_t n, size_t size, size_t at,
                                      size_t j)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2, first;
        memcpy(&first, (const char *)items + mid * size + at, sizeof first);
        if (first <= j)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

#endif
