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

#include "compute/jobs.h"
#include "compute/gpu.h"

/* ---------------------------------------------------------------- jobs */

/* Lanes: which job runs at each place, and each lane's turns. */
struct fp8_lanes {
    size_t *job;     /* by place: the job that runs there */
    size_t *rank;    /* by place: the job's turn in its lane */
    size_t *lane;    /* by place */
    size_t *ended;   /* by lane: turns ended, under lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

void fp8_worker_end_turn(fp8_worker *w)
{
    if (!w->turn)
        return;
    struct fp8_lanes *l = w->lanes;
    pthread_mutex_lock(&l->lock);
    l->ended[w->lane]++;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    w->turn = false;
}

static void begin_turn(fp8_worker *w, struct fp8_lanes *l, size_t place)
{
    if (!l || l->lane[place] == FP8_NO_LANE)
        return;
    pthread_mutex_lock(&l->lock);
    while (l->ended[l->lane[place]] != l->rank[place])
        pthread_cond_wait(&l->cond, &l->lock);
    pthread_mutex_unlock(&l->lock);
    w->lanes = l;
    w->lane = l->lane[place];
    w->turn = true;
}

typedef struct {
    size_t job;
    size_t lane;
    uint64_t offset;
} lane_key;

static int cmp_lane_key(const void *a, const void *b)
{
    const lane_key *x = a, *y = b;
    if (x->lane != y->lane)
        return x->lane < y->lane ? -1 : 1;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

static fp8_job_info describe(const fp8_jobs *s, size_t j)
{
    fp8_job_info info = { .lane = FP8_NO_LANE };
    if (s->describe)
        s->describe(s->arg, j, &info);
    return info;
}

/* Each lane's places refilled with its jobs in offset order. */
static fp8_status lanes_plan(fp8_ctx *ctx, const fp8_jobs *s, struct fp8_lanes *l)
{
    size_t n = s->njobs;
    lane_key *k = fp8_xcalloc(n + 1, sizeof *k);
    size_t *at = fp8_xcalloc(s->nlanes + 1, sizeof *at), *start = fp8_xcalloc(s->nlanes + 1, sizeof *start);
    l->job = fp8_xcalloc(n + 1, sizeof *l->job);
    l->rank = fp8_xcalloc(n + 1, sizeof *l->rank);
    l->lane = fp8_xcalloc(n + 1, sizeof *l->lane);
    l->ended = fp8_xcalloc(s->nlanes + 1, sizeof *l->ended);
    fp8_status st = FP8_OK;
    if (!k || !at || !start || !l->job || !l->rank || !l->lane || !l->ended) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        fp8_job_info info = describe(s, j);
        k[j] = (lane_key){ j, info.lane, info.offset };
        l->lane[j] = k[j].lane;
        if (k[j].lane != FP8_NO_LANE)
            at[k[j].lane]++;
    }
    qsort(k, n, sizeof *k, cmp_lane_key); /* lanes first, by offset; then the rest */
    for (size_t i = 1; i < s->nlanes; i++)
        start[i] = start[i - 1] + at[i - 1];
    memset(at, 0, (s->nlanes + 1) * sizeof *at);
    for (size_t j = 0; j < n; j++) { /* place j: its own job, or its lane's next */
        size_t lane = l->lane[j];
        l->job[j] = lane == FP8_NO_LANE ? j : k[start[lane] + at[lane]].job;
        l->rank[j] = lane == FP8_NO_LANE ? 0 : at[lane]++;
    }
out:
    free(k);
    free(at);
    free(start);
    return st;
}

static void lanes_free(struct fp8_lanes *l)
{
    free(l->job);
    free(l->rank);
    free(l->lane);
    free(l->ended);
}

typedef struct {
    const fp8_jobs *spec;
    struct fp8_lanes *lanes;
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
        size_t place = __atomic_fetch_add(&q->next, 1, __ATOMIC_SEQ_CST);
        if (place >= s->njobs)
            break;
        size_t j = q->lanes ? q->lanes->job[place] : place;
        begin_turn(&t->w, q->lanes, place);
        fp8_status st = s->cancel && *s->cancel
                            ? fp8_fail(t->w.ctx, FP8_ERR_IO, "%s: interrupted", s->what)
                            : s->run(s->arg, &t->w, j);
        fp8_worker_end_turn(&t->w);
        if (st)
            record_error(q, place, st, fp8_ctx_message(t->w.ctx));
        fp8_job_info info = s->done ? describe(s, j) : (fp8_job_info){ 0 }; /* no progress */
        uint64_t done = s->done ? __atomic_add_fetch(s->done, info.bytes, __ATOMIC_RELAXED) : 0;
        if (t->main_thread && s->progress)
            s->progress(s->progress_user, done, *s->total, info.label);
    }
    return NULL;
}

/* The workers a run starts, before the cap at its job count. */
static long run_threads(int threads, fp8_device device)
{
    long n = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n;
    return device == FP8_DEVICE_CUDA && n < 2 ? 2 : n;
}

uint64_t fp8_jobs_chunk(int threads, fp8_device device)
{
    uint64_t chunk = FP8_CHUNK_BYTES, n = (uint64_t)run_threads(threads, device);
    while (device != FP8_DEVICE_CUDA && n * chunk * 2 > FP8_JOBS_MEMORY &&
           chunk > FP8_CHUNK_BYTES / 16)
        chunk /= 2;
    return chunk;
}

int fp8_jobs_threads(int threads, fp8_device device)
{
    return (int)run_threads(threads, device);
}

uint64_t fp8_jobs_share(int threads, fp8_device device)
{
    return FP8_JOBS_MEMORY / (uint64_t)run_threads(threads, device);
}

fp8_status fp8_jobs_run(fp8_ctx *ctx, const fp8_jobs *s)
{
    long n = run_threads(s->threads, s->device);
    uint64_t per = (uint64_t)s->bufsize[0] + s->bufsize[1] + s->bufsize[2];
    if (s->device != FP8_DEVICE_CUDA && per && (uint64_t)n * per > FP8_JOBS_MEMORY)
        n = FP8_JOBS_MEMORY / per > 1 ? (long)(FP8_JOBS_MEMORY / per) : 1;
    n = (size_t)n > s->njobs ? (long)(s->njobs ? s->njobs : 1) : n;
    job_queue q = { .spec = s, .err_job = SIZE_MAX };
    job_thread *ts = fp8_xcalloc((size_t)n, sizeof *ts);
    pthread_t *tids = fp8_xcalloc((size_t)n, sizeof *tids);
    struct fp8_lanes lanes = { 0 };
    fp8_status st = FP8_OK;
    int started = 0;
    pthread_mutex_init(&q.lock, NULL);
    pthread_mutex_init(&lanes.lock, NULL);
    pthread_cond_init(&lanes.cond, NULL);
    if (!ts || !tids) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; s->count && j < s->njobs; j++)
        *s->total += describe(s, j).bytes;
    if (s->nlanes) {
        if ((st = lanes_plan(ctx, s, &lanes)))
            goto out;
        q.lanes = &lanes;
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
    /* once more when all is done: helpers may have run every job */
    if (s->progress && s->done)
        s->progress(s->progress_user, __atomic_load_n(s->done, __ATOMIC_RELAXED), *s->total, NULL);
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
    lanes_free(&lanes);
    pthread_mutex_destroy(&lanes.lock);
    pthread_cond_destroy(&lanes.cond);
    return st;
}
