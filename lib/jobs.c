/*
 * jobs.c - threads running a list of jobs in order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "gpu.h"
#include "jobs.h"
#include "zio.h"

/* ---------------------------------------------------------------- jobs */

typedef struct {
    const fp8_jobs *spec;
    size_t next;     /* the next job to take (atomic) */
    bool failed;     /* atomic: stop taking jobs */
    pthread_mutex_t lock;
    size_t err_job;  /* the lowest failed job, under lock */
    fp8_status err_st;
    char *err_msg;
} job_queue;

typedef struct {
    job_queue *q;
    fp8_worker w;
    bool main_thread;
} job_thread;

static void record_error(job_queue *q, size_t j, fp8_status st, const char *msg)
{
    pthread_mutex_lock(&q->lock);
    if (j < q->err_job) {
        free(q->err_msg);
        q->err_msg = fp8_strdup(msg);
        q->err_st = st;
        q->err_job = j;
    }
    __atomic_store_n(&q->failed, true, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&q->lock);
}

static void *work(void *arg)
{
    job_thread *t = arg;
    job_queue *q = t->q;
    const fp8_jobs *s = q->spec;
    for (;;) {
        if (__atomic_load_n(&q->failed, __ATOMIC_SEQ_CST))
            break;
        size_t j = __atomic_fetch_add(&q->next, 1, __ATOMIC_SEQ_CST);
        if (j >= s->njobs)
            break;
        fp8_status st = s->cancel && *s->cancel
                            ? fp8_fail(t->w.ctx, FP8_ERR_IO, "%s: interrupted", s->what)
                            : s->run(s->arg, &t->w, j);
        if (st)
            record_error(q, j, st, fp8_ctx_message(t->w.ctx));
        uint64_t done = s->done ? __atomic_add_fetch(s->done, s->bytes(s->arg, j), __ATOMIC_RELAXED) : 0;
        if (t->main_thread && s->progress)
            s->progress(s->progress_user, done, s->total);
    }
    return NULL;
}

fp8_status fp8_jobs_run(fp8_ctx *ctx, const fp8_jobs *s)
{
    long n = s->threads > 0 ? s->threads : sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n;
    n = s->device == FP8_DEVICE_CUDA && n < 2 ? 2 : n;
    n = (size_t)n > s->njobs ? (long)(s->njobs ? s->njobs : 1) : n;
    job_queue q = { .spec = s, .err_job = SIZE_MAX };
    job_thread *ts = fp8_xcalloc((size_t)n, sizeof *ts);
    pthread_t *tids = fp8_xcalloc((size_t)n, sizeof *tids);
    fp8_status st = FP8_OK;
    int started = 0;
    pthread_mutex_init(&q.lock, NULL);
    if (!ts || !tids) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (long i = 0; i < n; i++) {
        ts[i] = (job_thread){ .q = &q, .main_thread = i == 0 };
        bool ok = (ts[i].w.ctx = fp8_ctx_create()) != NULL;
        if (ok && s->device == FP8_DEVICE_CUDA) {
            if ((st = fp8_gpu_create(ctx, s->bufsize, &ts[i].w.gpu, ts[i].w.buf)))
                goto out;
            continue;
        }
        for (int b = 0; b < 3; b++)
            ok = (ts[i].w.buf[b] = malloc(s->bufsize[b] ? s->bufsize[b] : 1)) && ok;
        if (!ok) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory for the work buffers");
            goto out;
        }
    }
    for (started = 1; started < n; started++)
        if (pthread_create(&tids[started], NULL, work, &ts[started]) != 0)
            break; /* fewer helpers; the work still gets done */
    work(&ts[0]);
    for (int i = 1; i < started; i++)
        pthread_join(tids[i], NULL);
    if (q.err_job != SIZE_MAX)
        st = fp8_fail(ctx, q.err_st, "%s", q.err_msg ? q.err_msg : "out of memory");
out:
    for (long i = 0; ts && i < n; i++) {
        fp8_ctx_free(ts[i].w.ctx);
        if (ts[i].w.gpu) {
            fp8_gpu_free(ts[i].w.gpu); /* and its pinned buffers */
            continue;
        }
        for (int b = 0; b < 3; b++)
            free(ts[i].w.buf[b]);
    }
    free(ts);
    free(tids);
    free(q.err_msg);
    pthread_mutex_destroy(&q.lock);
    return st;
}
