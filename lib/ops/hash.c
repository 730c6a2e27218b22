/*
 * hash.c - content hashes of tensors and of a checkpoint (inspect --hash,
 * and diff's first pass): XXH3-128 from libxxhash, as fp8conv-formats(5),
 * CONTAINER defines them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include "common/xxh.h"

#include "ops/hash.h"
#include "io/checkpoint.h"
#include "compute/jobs.h"

static void hex_of(XXH128_hash_t h, fp8_hash_hex out)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", c.digest[i]);
}

/* Starts the XXH3-128 of a tensor: its name, dtype and shape (as text,
 * NUL-separated); its bytes follow. */
static XXH3_state_t *hash_begin(fp8_ctx *ctx, const fp8_tensor_info *t)
{
    XXH3_state_t *h = XXH3_createState();
    if (!h) {
        fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        return NULL;
    }
    char shape[512] = ""; /* a scalar's shape is the empty text */
    size_t o = 0;
    for (int d = 0; d < t->rank && o < sizeof shape; d++)
        o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%llu", d ? "," : "",
                              (unsigned long long)t->shape[d]);
    XXH3_128bits_reset(h);
    XXH3_128bits_update(h, t->name, strlen(t->name) + 1);
    XXH3_128bits_update(h, fp8_dtype_name(t->dtype), strlen(fp8_dtype_name(t->dtype)) + 1);
    XXH3_128bits_update(h, shape, strlen(shape) + 1);
    return h;
}

fp8_status hash_tensor(fp8_ctx *ctx, fp8_checkpoint *ck, size_t i, unsigned char *buf,
                       uint64_t chunk, fp8_hash_hex out)
{
    size_t s;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &s);
    XXH3_state_t *h = hash_begin(ctx, t);
    if (!h)
        return FP8_ERR_NOMEM;
    fp8_status st = FP8_OK;
    for (uint64_t off = 0; off < fp8_tensor_nbytes(t) && !st; off += chunk) {
        size_t len = (size_t)(fp8_tensor_nbytes(t) - off < chunk ? fp8_tensor_nbytes(t) - off : chunk);
        if (!(st = fp8_file_read(ctx, fp8_checkpoint_shard(ck, s), t, off, buf, len)))
            XXH3_128bits_update(h, buf, len);
    }
    if (!st)
        hex_of(XXH3_128bits_digest(h), out);
    XXH3_freeState(h);
    return st;
}

void hash_digest(const fp8_hash_hex *hashes, size_t n, fp8_hash_hex out)
{
    hex_of(XXH3_128bits(hashes, n * sizeof *hashes), out);
}

typedef struct {
    fp8_checkpoint *ck;
    fp8_hash_hex *hashes;
    uint64_t chunk; /* bytes a hash reads at a time */
} hash_job;

static fp8_status hash_one(void *arg, fp8_worker *w, size_t j)
{
    hash_job *h = arg;
    return hash_tensor(w->ctx, h->ck, j, w->buf[0], h->chunk, h->hashes[j]);
}

static void hash_describe(void *arg, size_t j, fp8_job_info *info)
{
    hash_job *h = arg;
    size_t s;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(h->ck, j, &s);
    info->bytes = fp8_tensor_nbytes(t);
    info->label = t->name;
    info->lane = ck_lane(h->ck, s, t, 0, 0, &info->offset);
}

fp8_status fp8_checkpoint_hash(fp8_ctx *ctx, fp8_checkpoint *ck, int threads,
                               fp8_hash_hex *hashes, fp8_hash_hex digest)
{
    fp8_hash_options o = { .threads = threads };
    return fp8_checkpoint_hash_with(ctx, ck, &o, hashes, digest);
}

fp8_status fp8_checkpoint_hash_with(fp8_ctx *ctx, fp8_checkpoint *ck, const fp8_hash_options *o,
                                    fp8_hash_hex *hashes, fp8_hash_hex digest)
{
    hash_job h = { ck, hashes, fp8_jobs_chunk(o->threads, FP8_DEVICE_CPU) };
    uint64_t done = 0, total = 0;
    fp8_jobs spec = { .njobs = fp8_checkpoint_tensor_count(ck), .bufsize = { h.chunk },
                      .threads = o->threads, .run = hash_one, .describe = hash_describe,
                      .arg = &h, .what = "hash", .nlanes = fp8_checkpoint_shard_count(ck),
                      .progress = o->progress, .progress_user = o->progress_user,
                      .done = &done, .total = &total, .count = true };
    fp8_status st = fp8_jobs_run(ctx, &spec);
    if (!st)
        hash_digest(hashes, fp8_checkpoint_tensor_count(ck), digest);
    return st;
}
