/*
 * diff.c - tensor-by-tensor comparison of two checkpoints whatever their
 * sharding (SPEC 8), and content hashes (XXH3-128 from libxxhash).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "dequant.h"
#include "diff_stats.h"
#include "fp8_math.h"
#include "checkpoint.h"
#include "jobs.h"
#include "quant.h"

#define CHUNK FP8_CHUNK_BYTES  /* bytes read per side per step */
#define BAND_ELEMENTS (FP8_CHUNK_BYTES / 4) /* dequantized elements per step */

/* ---------------------------------------------------------------- hashes */

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

/* XXH3-128 of name, dtype, shape (as text, NUL-separated) and bytes. */
static fp8_status hash_tensor(fp8_ctx *ctx, fp8_checkpoint *ck, size_t i, unsigned char *buf,
                              fp8_hash_hex out)
{
    size_t s;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &s);
    XXH3_state_t *h = hash_begin(ctx, t);
    if (!h)
        return FP8_ERR_NOMEM;
    fp8_status st = FP8_OK;
    for (uint64_t off = 0; off < fp8_tensor_nbytes(t) && !st; off += CHUNK) {
        size_t len = fp8_tensor_nbytes(t) - off < CHUNK ? (size_t)(fp8_tensor_nbytes(t) - off)
                                                        : CHUNK;
        if (!(st = fp8_file_read(ctx, fp8_checkpoint_shard(ck, s), t, off, buf, len)))
            XXH3_128bits_update(h, buf, len);
    }
    if (!st)
        hex_of(XXH3_128bits_digest(h), out);
    XXH3_freeState(h);
    return st;
}

/* XXH3-128 of the tensors' hashes in name order (the hex strings with their
 * terminating NULs, as they lie in the array). */
static void digest_of(const fp8_hash_hex *hashes, size_t n, fp8_hash_hex out)
{
    hex_of(XXH3_128bits(hashes, n * sizeof *hashes), out);
}

typedef struct {
    fp8_checkpoint *ck;
    fp8_hash_hex *hashes;
} hash_job;

static fp8_status hash_one(void *arg, fp8_worker *w, size_t j)
{
    hash_job *h = arg;
    return hash_tensor(w->ctx, h->ck, j, w->buf[0], h->hashes[j]);
}

static uint64_t hash_bytes(void *arg, size_t j)
{
    return fp8_tensor_nbytes(fp8_checkpoint_tensor(((hash_job *)arg)->ck, j, NULL));
}

static const char *hash_label(void *arg, size_t j)
{
    return fp8_checkpoint_tensor(((hash_job *)arg)->ck, j, NULL)->name;
}

static size_t hash_lane(void *arg, size_t j, uint64_t *offset)
{
    hash_job *h = arg;
    size_t s;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(h->ck, j, &s);
    return ck_lane(h->ck, s, t, 0, 0, offset);
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
    hash_job h = { ck, hashes };
    uint64_t done = 0;
    fp8_jobs spec = { .njobs = fp8_checkpoint_tensor_count(ck), .bufsize = { CHUNK },
                      .threads = o->threads, .run = hash_one, .bytes = hash_bytes, .arg = &h,
                      .what = "hash", .lane = hash_lane,
                      .nlanes = fp8_checkpoint_shard_count(ck), .label = hash_label,
                      .progress = o->progress,
                      .progress_user = o->progress_user, .done = &done };
    for (size_t j = 0; j < spec.njobs; j++)
        spec.total += hash_bytes(&h, j);
    fp8_status st = fp8_jobs_run(ctx, &spec);
    if (!st)
        digest_of(hashes, fp8_checkpoint_tensor_count(ck), digest);
    return st;
}

/* ---------------------------------------------------------------- element values */

/* The reference of the statistics (diff_cpu.c is the fast path): one
 * element at a time, through doubles. */

unsigned diff_element_size(fp8_dtype dt)
{
    unsigned bits = fp8_dtype_bits(dt);
    return bits >= 8 && dt != FP8_DTYPE_C64 ? bits / 8 : 1;
}

/* An element's value and its position on the ordered line of its dtype (so
 * that the distance of two positions counts ULPs); false for dtypes without
 * numeric values here (F4, F6, C64, FNUZ). */
static bool element(fp8_dtype dt, const unsigned char *p, double *v, int64_t *ord)
{
    uint64_t u = 0;
    unsigned size = diff_element_size(dt); /* what the caller holds: a byte of C64 */
    for (unsigned i = 0; i < size; i++)
        u |= (uint64_t)p[i] << (8 * i);
    uint64_t sign = u >> (8 * size - 1), mag = u & ~(sign << (8 * size - 1));
    *ord = sign ? -(int64_t)mag : (int64_t)mag;
    switch (dt) {
    case FP8_DTYPE_F32: *v = fp8_f32_from_bits((uint32_t)u); return true;
    case FP8_DTYPE_BF16: *v = fp8_bf16_to_f32((uint16_t)u); return true;
    case FP8_DTYPE_F16: *v = fp8_f16_to_f32((uint16_t)u); return true;
    case FP8_DTYPE_F8_E4M3: *v = fp8_e4m3_to_f32((uint8_t)u); return true;
    case FP8_DTYPE_F8_E5M2: *v = fp8_f16_to_f32((uint16_t)(u << 8)); return true;
    case FP8_DTYPE_F64: memcpy(v, &u, 8); return true;
    case FP8_DTYPE_F8_E8M0:
        *v = u == 0xFF ? 0.0 / 0.0 : (double)fp8_pow2((int)u - 127);
        *ord = (int64_t)u;
        return true;
    case FP8_DTYPE_BOOL: case FP8_DTYPE_U8: case FP8_DTYPE_U16: case FP8_DTYPE_U32:
    case FP8_DTYPE_U64:
        *ord = (int64_t)u;
        *v = (double)u;
        return true;
    case FP8_DTYPE_I8: case FP8_DTYPE_I16: case FP8_DTYPE_I32: case FP8_DTYPE_I64:
        *ord = size == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
        *v = (double)*ord;
        return true;
    default: return false;
    }
}

static uint64_t distance(int64_t a, int64_t b)
{
    int64_t d;
    if (__builtin_sub_overflow(a, b, &d))
        return UINT64_MAX;
    return d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
}

/* Folds one differing element into the statistics. */
static void count_difference(diff_stats *s, uint64_t index, bool numeric, double va, double vb,
                             int64_t oa, int64_t ob)
{
    if (s->differing++ == 0)
        s->first_index = index;
    if (!numeric)
        return;
    double d = fabs(va - vb); /* +0 for +0 against -0, never -0 */
    if (d == d && (s->max_abs != s->max_abs || d > s->max_abs))
        s->max_abs = d;
    uint64_t u = distance(oa, ob);
    s->max_ulp = u > s->max_ulp ? u : s->max_ulp;
}

void diff_bytes_ref(fp8_dtype dt, const void *a, const void *b, uint64_t n, uint64_t base,
                    diff_stats *s)
{
    unsigned size = diff_element_size(dt);
    const unsigned char *pa = a, *pb = b;
    for (uint64_t i = 0; i < n; i++, pa += size, pb += size) {
        if (memcmp(pa, pb, size) == 0)
            continue;
        double va = 0, vb = 0;
        int64_t oa = 0, ob = 0;
        bool numeric = element(dt, pa, &va, &oa) && element(dt, pb, &vb, &ob);
        count_difference(s, base + i, numeric, va, vb, oa, ob);
    }
}

void diff_values_ref(const float *a, const float *b, uint64_t n, uint64_t base, diff_stats *s)
{
    for (uint64_t i = 0; i < n; i++) {
        if (a[i] == b[i] || (a[i] != a[i] && b[i] != b[i]))
            continue;
        double va, vb;
        int64_t oa, ob;
        element(FP8_DTYPE_F32, (const unsigned char *)&a[i], &va, &oa);
        element(FP8_DTYPE_F32, (const unsigned char *)&b[i], &vb, &ob);
        count_difference(s, base + i, true, va, vb, oa, ob);
    }
}

void diff_to_f32_ref(fp8_dtype dt, const void *x, uint64_t n, float *y)
{
    for (uint64_t i = 0; i < n; i++)
        y[i] = fp8_load_f32(dt, x, i);
}

void diff_stats_merge(diff_stats *into, const diff_stats *from)
{
    if (!from->differing)
        return;
    if (!into->differing || from->first_index < into->first_index)
        into->first_index = from->first_index;
    into->differing += from->differing;
    double d = from->max_abs; /* NaN: none, as in count_difference */
    if (d == d && (into->max_abs != into->max_abs || d > into->max_abs))
        into->max_abs = d;
    into->max_ulp = from->max_ulp > into->max_ulp ? from->max_ulp : into->max_ulp;
}

/* ---------------------------------------------------------------- diff */

struct fp8_diff {
    fp8_checkpoint *ck[2];
    dq_weights *w[2];
    bool dequant;
    size_t n;
    fp8_diff_entry *e;
    size_t *shard[2]; /* by entry: the shard of its tensor on each side */
    size_t *index[2]; /* by entry: its tensor's index in each checkpoint */
    bool *hashed[2];  /* by tensor: hashed by the comparison of its bytes */
    fp8_hash_hex *hashes[2], digest[2];
    bool values_pass; /* which of the two job lists runs, for progress */
};

static fp8_status compare_bytes(fp8_ctx *ctx, fp8_diff *d, fp8_diff_entry *e,
                                unsigned char *ba, unsigned char *bb, size_t k)
{
    fp8_file *fa = fp8_checkpoint_shard(d->ck[0], d->shard[0][k]);
    fp8_file *fb = fp8_checkpoint_shard(d->ck[1], d->shard[1][k]);
    unsigned size = diff_element_size(e->a->dtype);
    uint64_t nbytes = fp8_tensor_nbytes(e->a);
    diff_stats s = DIFF_STATS_INIT;
    e->elements = nbytes / size;
    /* the bytes are read once: both sides' hashes are taken on the way */
    XXH3_state_t *ha = hash_begin(ctx, e->a), *hb = ha ? hash_begin(ctx, e->b) : NULL;
    fp8_status st = ha && hb ? FP8_OK : FP8_ERR_NOMEM;
    for (uint64_t off = 0; off < nbytes && !st; off += CHUNK) {
        size_t len = nbytes - off < CHUNK ? (size_t)(nbytes - off) : CHUNK;
        if ((st = fp8_file_read(ctx, fa, e->a, off, ba, len)) ||
            (st = fp8_file_read(ctx, fb, e->b, off, bb, len)))
            continue;
        XXH3_128bits_update(ha, ba, len);
        XXH3_128bits_update(hb, bb, len);
        diff_bytes(e->a->dtype, ba, bb, len / size, off / size, &s);
    }
    e->differing = s.differing;
    e->first_index = s.first_index;
    e->max_abs = s.max_abs;
    e->max_ulp = s.max_ulp;
    if (!st) {
        hex_of(XXH3_128bits_digest(ha), d->hashes[0][d->index[0][k]]);
        hex_of(XXH3_128bits_digest(hb), d->hashes[1][d->index[1][k]]);
    }
    XXH3_freeState(ha);
    XXH3_freeState(hb);
    return st;
}

/* fp32 values of elements [first, first + n) of one side's tensor. */
static fp8_status side_values(fp8_ctx *ctx, fp8_diff *d, int side, size_t k, uint64_t first,
                              uint64_t n, unsigned char *raw, float *y)
{
    const fp8_tensor_info *t = side ? d->e[k].b : d->e[k].a;
    if (dq_weights_role(d->w[side], t->name) == DQ_DEQUANT)
        return dq_weights_read(ctx, d->w[side], t->name, first, n, y, NULL);
    unsigned size = fp8_dtype_bits(t->dtype) / 8;
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(d->ck[side], d->shard[side][k]), t,
                                  first * size, raw, n * size);
    if (!st)
        diff_to_f32(t->dtype, raw, n, y); /* exact: BF16, F16 and F32 all fit */
    return st;
}

static fp8_status compare_values(fp8_ctx *ctx, fp8_diff *d, size_t k)
{
    fp8_diff_entry *e = &d->e[k];
    const fp8_tensor_info *t = e->a;
    uint64_t cols = t->shape[t->rank - 1], rows = cols ? BAND_ELEMENTS / cols : 0;
    rows = rows ? rows : 1;
    uint64_t band = rows * cols;
    float *ya = malloc(band * 4 + 1), *yb = malloc(band * 4 + 1);
    unsigned char *raw = malloc(band * 4 + 1);
    fp8_status st = ya && yb && raw ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    diff_stats s = DIFF_STATS_INIT;
    e->elements = t->elements;
    for (uint64_t first = 0; !st && first < t->elements; first += band) {
        uint64_t n = t->elements - first < band ? t->elements - first : band;
        if ((st = side_values(ctx, d, 0, k, first, n, raw, ya)) ||
            (st = side_values(ctx, d, 1, k, first, n, raw, yb)))
            break;
        diff_values(ya, yb, n, first, &s);
    }
    e->differing = s.differing;
    e->first_index = s.first_index;
    e->max_abs = s.max_abs;
    e->max_ulp = s.max_ulp;
    free(ya);
    free(yb);
    free(raw);
    return st;
}

/* Jobs, in two runs.  The first hashes every tensor of A, then of B, then
 * compares the bytes of each entry of one dtype and shape (hashing both
 * sides on the way, so that their hash jobs have nothing to do); the second
 * compares the entries compared by value.  Each run reads every file once,
 * a compressed one in file order (lanes). */
static fp8_status diff_one(void *arg, fp8_worker *w, size_t j)
{
    fp8_diff *d = arg;
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]), nb = fp8_checkpoint_tensor_count(d->ck[1]);
    if (j < na)
        return d->hashed[0][j] ? FP8_OK
                               : hash_tensor(w->ctx, d->ck[0], j, w->buf[0], d->hashes[0][j]);
    if (j < na + nb)
        return d->hashed[1][j - na]
                   ? FP8_OK
                   : hash_tensor(w->ctx, d->ck[1], j - na, w->buf[0], d->hashes[1][j - na]);
    size_t k = j - na - nb;
    fp8_diff_entry *e = &d->e[k];
    if (e->kind != FP8_DIFF_VALUES || e->dequantized)
        return FP8_OK; /* decided from the headers, or the second run's */
    fp8_status st = compare_bytes(w->ctx, d, e, w->buf[0], w->buf[1], k);
    if (!st && e->differing == 0)
        e->kind = FP8_DIFF_SAME;
    return st;
}

static fp8_status values_one(void *arg, fp8_worker *w, size_t k)
{
    fp8_diff *d = arg;
    fp8_diff_entry *e = &d->e[k];
    if (e->kind != FP8_DIFF_VALUES || !e->dequantized)
        return FP8_OK;
    fp8_status st = compare_values(w->ctx, d, k);
    if (!st && e->differing == 0)
        e->kind = FP8_DIFF_SAME;
    return st;
}

/* Lanes: A's shards, then B's; an entry goes in A's shard's lane when that
 * one is compressed, else in B's. */
static size_t entry_lane(fp8_diff *d, size_t k, uint64_t *offset)
{
    size_t lane = d->e[k].a ? ck_lane(d->ck[0], d->shard[0][k], d->e[k].a, 0, 0, offset)
                            : FP8_NO_LANE;
    if (lane == FP8_NO_LANE && d->e[k].b)
        lane = ck_lane(d->ck[1], d->shard[1][k], d->e[k].b, 0,
                       fp8_checkpoint_shard_count(d->ck[0]), offset);
    return lane;
}

static size_t diff_lane(void *arg, size_t j, uint64_t *offset)
{
    fp8_diff *d = arg;
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]), nb = fp8_checkpoint_tensor_count(d->ck[1]);
    size_t s;
    *offset = 0;
    if (j < na) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(d->ck[0], j, &s);
        return d->hashed[0][j] ? FP8_NO_LANE : ck_lane(d->ck[0], s, t, 0, 0, offset);
    }
    if (j < na + nb) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(d->ck[1], j - na, &s);
        return d->hashed[1][j - na]
                   ? FP8_NO_LANE
                   : ck_lane(d->ck[1], s, t, 0, fp8_checkpoint_shard_count(d->ck[0]), offset);
    }
    size_t k = j - na - nb;
    if (d->e[k].kind != FP8_DIFF_VALUES || d->e[k].dequantized)
        return FP8_NO_LANE;
    return entry_lane(d, k, offset);
}

static size_t values_lane(void *arg, size_t k, uint64_t *offset)
{
    fp8_diff *d = arg;
    *offset = 0;
    if (d->e[k].kind != FP8_DIFF_VALUES || !d->e[k].dequantized)
        return FP8_NO_LANE;
    return entry_lane(d, k, offset);
}

/* The tensor a job works on, for progress. */
static const char *diff_label(void *arg, size_t j)
{
    fp8_diff *d = arg;
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]), nb = fp8_checkpoint_tensor_count(d->ck[1]);
    if (d->values_pass)
        return d->e[j].name;
    if (j < na)
        return fp8_checkpoint_tensor(d->ck[0], j, NULL)->name;
    if (j < na + nb)
        return fp8_checkpoint_tensor(d->ck[1], j - na, NULL)->name;
    return d->e[j - na - nb].name;
}

/* The bytes a job reads, for progress: every tensor once, by its hash job
 * or by the comparison of a pair that hashes both on the way; the values
 * pass reads the pairs compared by dequantized value again. */
static uint64_t job_bytes(void *arg, size_t j)
{
    fp8_diff *d = arg;
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]), nb = fp8_checkpoint_tensor_count(d->ck[1]);
    if (d->values_pass) {
        const fp8_diff_entry *e = &d->e[j];
        return e->kind == FP8_DIFF_VALUES && e->dequantized
                   ? fp8_tensor_nbytes(e->a) + fp8_tensor_nbytes(e->b)
                   : 0;
    }
    if (j < na)
        return d->hashed[0][j] ? 0 : fp8_tensor_nbytes(fp8_checkpoint_tensor(d->ck[0], j, NULL));
    if (j < na + nb)
        return d->hashed[1][j - na]
                   ? 0
                   : fp8_tensor_nbytes(fp8_checkpoint_tensor(d->ck[1], j - na, NULL));
    const fp8_diff_entry *e = &d->e[j - na - nb];
    return e->kind == FP8_DIFF_VALUES && !e->dequantized
               ? fp8_tensor_nbytes(e->a) + fp8_tensor_nbytes(e->b)
               : 0;
}

static bool is_float(fp8_dtype dt)
{
    return dt == FP8_DTYPE_BF16 || dt == FP8_DTYPE_F16 || dt == FP8_DTYPE_F32;
}

static bool same_shape(const fp8_tensor_info *a, const fp8_tensor_info *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

/* What the headers tell about the pair: everything but the values. */
static void classify(fp8_diff *d, fp8_diff_entry *e)
{
    if (!e->a || !e->b) {
        e->kind = e->a ? FP8_DIFF_ONLY_A : FP8_DIFF_ONLY_B;
        return;
    }
    bool fa = d->dequant && dq_weights_role(d->w[0], e->name) == DQ_DEQUANT;
    bool fb = d->dequant && dq_weights_role(d->w[1], e->name) == DQ_DEQUANT;
    if (fa || fb) { /* by value: FP8 against FP8, or FP8 against a float tensor */
        e->dequantized = (fa || is_float(e->a->dtype)) && (fb || is_float(e->b->dtype));
        e->kind = !e->dequantized            ? FP8_DIFF_DTYPE
                  : !same_shape(e->a, e->b) ? FP8_DIFF_SHAPE
                                            : FP8_DIFF_VALUES;
        return;
    }
    e->kind = e->a->dtype != e->b->dtype  ? FP8_DIFF_DTYPE
              : !same_shape(e->a, e->b) ? FP8_DIFF_SHAPE
                                        : FP8_DIFF_VALUES;
}

/* The sorted union of both sides' names; with dequant, scales left out. */
static fp8_status pair_up(fp8_ctx *ctx, fp8_diff *d)
{
    size_t na = fp8_checkpoint_tensor_count(d->ck[0]), nb = fp8_checkpoint_tensor_count(d->ck[1]);
    d->e = fp8_xcalloc(na + nb + 1, sizeof *d->e);
    d->shard[0] = fp8_xcalloc(na + nb + 1, sizeof *d->shard[0]);
    d->shard[1] = fp8_xcalloc(na + nb + 1, sizeof *d->shard[1]);
    d->index[0] = fp8_xcalloc(na + nb + 1, sizeof *d->index[0]);
    d->index[1] = fp8_xcalloc(na + nb + 1, sizeof *d->index[1]);
    d->hashed[0] = fp8_xcalloc(na + 1, sizeof *d->hashed[0]);
    d->hashed[1] = fp8_xcalloc(nb + 1, sizeof *d->hashed[1]);
    if (!d->e || !d->shard[0] || !d->shard[1] || !d->index[0] || !d->index[1] ||
        !d->hashed[0] || !d->hashed[1])
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        size_t sa = 0, sb = 0, ia = i, ib = j;
        const fp8_tensor_info *a = i < na ? fp8_checkpoint_tensor(d->ck[0], i, &sa) : NULL;
        const fp8_tensor_info *b = j < nb ? fp8_checkpoint_tensor(d->ck[1], j, &sb) : NULL;
        int c = !a ? 1 : !b ? -1 : strcmp(a->name, b->name);
        if (c < 0)
            b = NULL, i++;
        else if (c > 0)
            a = NULL, j++;
        else
            i++, j++;
        if (d->dequant && ((a && dq_weights_role(d->w[0], a->name) == DQ_DROP) ||
                           (b && dq_weights_role(d->w[1], b->name) == DQ_DROP)))
            continue;
        fp8_diff_entry *e = &d->e[d->n];
        *e = (fp8_diff_entry){ .name = a ? a->name : b->name, .a = a, .b = b,
                               .max_abs = 0.0 / 0.0 };
        d->shard[0][d->n] = sa;
        d->shard[1][d->n] = sb;
        d->index[0][d->n] = ia;
        d->index[1][d->n] = ib;
        classify(d, e);
        if (e->kind == FP8_DIFF_VALUES && !e->dequantized)
            d->hashed[0][ia] = d->hashed[1][ib] = true;
        d->n++;
    }
    return FP8_OK;
}

fp8_status fp8_diff_run(fp8_ctx *ctx, const char *a, const char *b,
                        const fp8_diff_options *opts, fp8_diff **out)
{
    fp8_diff *d = calloc(1, sizeof *d);
    fp8_status st = d ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    const char *paths[2] = { a, b };
    *out = NULL;
    for (int s = 0; s < 2 && !st; s++) {
        if ((st = fp8_checkpoint_open(ctx, paths[s], &d->ck[s])))
            break;
        size_t n = fp8_checkpoint_tensor_count(d->ck[s]);
        if (!(d->hashes[s] = fp8_xcalloc(n + 1, sizeof *d->hashes[s])))
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        else if (opts->dequant)
            st = dq_weights_open(ctx, d->ck[s],
                                 fp8_checkpoint_is_directory(d->ck[s]) ? paths[s] : NULL,
                                 &d->w[s]);
    }
    if (!st) {
        d->dequant = opts->dequant;
        st = pair_up(ctx, d);
    }
    if (!st) {
        size_t na = fp8_checkpoint_tensor_count(d->ck[0]);
        size_t nb = fp8_checkpoint_tensor_count(d->ck[1]);
        size_t lanes = fp8_checkpoint_shard_count(d->ck[0]) + fp8_checkpoint_shard_count(d->ck[1]);
        uint64_t done = 0;
        fp8_jobs spec = { .njobs = na + nb + d->n, .bufsize = { CHUNK, CHUNK },
                          .threads = opts->threads, .run = diff_one, .bytes = job_bytes,
                          .arg = d, .what = "diff", .lane = diff_lane, .nlanes = lanes,
                          .progress = opts->progress, .progress_user = opts->progress_user,
                          .done = &done, .label = diff_label };
        for (size_t j = 0; j < spec.njobs; j++)
            spec.total += job_bytes(d, j);
        st = fp8_jobs_run(ctx, &spec);
        if (!st) {
            spec.njobs = d->n;
            spec.run = values_one;
            spec.lane = values_lane;
            d->values_pass = true;
            for (size_t k = 0; k < d->n; k++)
                spec.total += job_bytes(d, k);
            st = fp8_jobs_run(ctx, &spec);
        }
        if (!st) {
            digest_of(d->hashes[0], na, d->digest[0]);
            digest_of(d->hashes[1], nb, d->digest[1]);
        }
    }
    if (st)
        fp8_diff_free(d);
    else
        *out = d;
    return st;
}

void fp8_diff_free(fp8_diff *d)
{
    if (!d)
        return;
    for (int s = 0; s < 2; s++) {
        dq_weights_free(d->w[s]);
        fp8_checkpoint_close(d->ck[s]);
        free(d->hashes[s]);
        free(d->shard[s]);
        free(d->index[s]);
        free(d->hashed[s]);
    }
    free(d->e);
    free(d);
}

bool fp8_diff_identical(const fp8_diff *d)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->e[i].kind != FP8_DIFF_SAME)
            return false;
    return true;
}

size_t fp8_diff_count(const fp8_diff *d) { return d->n; }
const fp8_diff_entry *fp8_diff_entry_at(const fp8_diff *d, size_t i)
{
    return i < d->n ? &d->e[i] : NULL;
}
const char *fp8_diff_digest(const fp8_diff *d, int side) { return d->digest[side ? 1 : 0]; }
