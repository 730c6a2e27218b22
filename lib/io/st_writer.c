/*
 * st_writer.c - writes safetensors files byte for byte as the reference
 * writer (safetensors/src/tensor.rs, `prepare` and `serialize`) does:
 *   - tensors laid out by dtype descending (the Dtype enum order), then name
 *     ascending (bytewise), with no gaps; header entries in that same order;
 *   - "__metadata__" first; its keys sorted (the reference keeps a HashMap,
 *     so only sorting makes the output deterministic);
 *   - compact JSON, keys "dtype", "shape", "data_offsets" in that order,
 *     strings escaped as serde_json escapes them;
 *   - the header padded with spaces to a multiple of 8 bytes.
 * The header is formatted here, not by cJSON, because cJSON prints numbers
 * from doubles and a data offset is a 64-bit integer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "io/st_writer.h"
#include "io/zio.h"

typedef struct {
    char *key, *value;
} wr_meta;

struct fp8_writer {
    char *path;
    zio_writer *out;
    size_t n, cap;
    fp8_tensor_info *tensors;
    const fp8_tensor_info **by_name; /* once laid out: for fp8_writer_find */
    size_t nmeta;
    wr_meta *meta;
    bool laid_out, begun, volatile_ok;
    char *header; /* padded JSON, once laid out */
    size_t header_len;
    uint64_t data_size, written;
};

fp8_status fp8_writer_create(fp8_ctx *ctx, const char *path, fp8_writer **out)
{
    fp8_writer *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w || !(w->path = fp8_strdup(path))) {
        free(w);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = w;
    return fp8_writer_set_metadata(ctx, w, "format", "pt");
}

void fp8_writer_free(fp8_writer *w)
{
    if (!w)
        return;
    zio_writer_free(w->out);
    for (size_t i = 0; i < w->n; i++) {
        free((char *)w->tensors[i].name);
        free((uint64_t *)w->tensors[i].shape);
    }
    for (size_t i = 0; i < w->nmeta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->tensors);
    free(w->by_name);
    free(w->meta);
    free(w->header);
    free(w->path);
    free(w);
}

static fp8_status check_text(fp8_ctx *ctx, const fp8_writer *w, const char *what, const char *s)
{
    size_t bad;
    if (!st_utf8_valid((const unsigned char *)s, strlen(s), &bad))
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: %s is not valid UTF-8", w->path, what);
    return FP8_OK;
}

fp8_status fp8_writer_set_metadata(fp8_ctx *ctx, fp8_writer *w, const char *key,
                                   const char *value)
{
    fp8_status st;
    if (w->laid_out)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: metadata set after the header was written",
                        w->path);
    if ((st = check_text(ctx, w, "a metadata key", key)) ||
        (st = check_text(ctx, w, "a metadata value", value)))
        return st;
    char *v = fp8_strdup(value);
    if (!v)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", w->path);
    for (size_t i = 0; i < w->nmeta; i++) {
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].value);
            w->meta[i].value = v;
            return FP8_OK;
        }
    }
    wr_meta *m = fp8_xreallocarray(w->meta, w->nmeta + 1, sizeof *m);
    char *k = fp8_strdup(key);
    if (!m || !k) {
        if (m)
            w->meta = m;
        free(k);
        free(v);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", w->path);
    }
    w->meta = m;
    w->meta[w->nmeta++] = (wr_meta){ k, v };
    return FP8_OK;
}

fp8_status fp8_writer_add_tensor(fp8_ctx *ctx, fp8_writer *w, const char *name, fp8_dtype dtype,
                                 int rank, const uint64_t *shape)
{
    fp8_status st;
    if (w->laid_out)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s' added after the header was written",
                        w->path, name);
    if ((unsigned)dtype >= FP8_DTYPE_COUNT || rank < 0)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s': invalid dtype or rank", w->path,
                        name);
    if (strcmp(name, "__metadata__") == 0)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: '__metadata__' cannot name a tensor", w->path);
    if ((st = check_text(ctx, w, "a tensor name", name)))
        return st;
    fp8_tensor_info t = { .dtype = dtype, .rank = rank };
    uint64_t nbytes;
    const char *why;
    if (st_tensor_size(shape, rank, dtype, &t.elements, &nbytes, &why))
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s': %s", w->path, name, why);
    t.end = nbytes; /* a size until begin() assigns offsets */
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        fp8_tensor_info *p = fp8_xreallocarray(w->tensors, cap, sizeof *p);
        if (!p)
            return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", w->path);
        w->tensors = p;
        w->cap = cap;
    }
    uint64_t *dims = fp8_xcalloc((size_t)rank, sizeof *dims);
    t.name = fp8_strdup(name);
    if (!dims || !t.name) {
        free(dims);
        free((char *)t.name);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", w->path);
    }
    if (rank)
        memcpy(dims, shape, (size_t)rank * sizeof *dims);
    t.shape = dims;
    w->tensors[w->n++] = t;
    return FP8_OK;
}

static int cmp_layout(const void *a, const void *b)
{
    const fp8_tensor_info *x = a, *y = b;
    if (x->dtype != y->dtype)
        return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp((*(const fp8_tensor_info *const *)a)->name,
                  (*(const fp8_tensor_info *const *)b)->name);
}

/* Fixes the layout: sorts the tensors, assigns their offsets, formats the header. */
static fp8_status layout(fp8_ctx *ctx, fp8_writer *w)
{
    if (w->laid_out)
        return FP8_OK;
    if (w->n)
        qsort(w->tensors, w->n, sizeof *w->tensors, cmp_layout);
    qsort(w->meta, w->nmeta, sizeof *w->meta, fp8_cmp_str);
    /* by name: a job finds its tensor in O(log n), not by a scan (a shard of
     * a million tensors), and a name added twice, whatever its dtypes, is seen */
    free(w->by_name);
    if (!(w->by_name = fp8_xcalloc(w->n, sizeof *w->by_name)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", w->path);
    for (size_t i = 0; i < w->n; i++)
        w->by_name[i] = &w->tensors[i];
    if (w->n)
        qsort(w->by_name, w->n, sizeof *w->by_name, cmp_by_name);
    for (size_t i = 1; i < w->n; i++)
        if (strcmp(w->by_name[i - 1]->name, w->by_name[i]->name) == 0)
            return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s' added twice", w->path,
                            w->by_name[i]->name);

    fp8_text b = { 0 };
    fp8_text_str(&b, "{\"__metadata__\":{");
    for (size_t i = 0; i < w->nmeta; i++) {
        if (i)
            fp8_text_str(&b, ",");
        fp8_text_json_string(&b, w->meta[i].key);
        fp8_text_str(&b, ":");
        fp8_text_json_string(&b, w->meta[i].value);
    }
    fp8_text_str(&b, "}");
    uint64_t offset = 0;
    for (size_t i = 0; i < w->n; i++) {
        fp8_tensor_info *t = &w->tensors[i];
        uint64_t nbytes = t->end;
        t->begin = offset;
        t->end = offset + nbytes;
        offset = t->end;
        fp8_text_str(&b, ",");
        fp8_text_json_string(&b, t->name);
        fp8_text_str(&b, ":{\"dtype\":\"");
        fp8_text_str(&b, fp8_dtype_name(t->dtype));
        fp8_text_str(&b, "\",\"shape\":[");
        for (int d = 0; d < t->rank; d++) {
            if (d)
                fp8_text_str(&b, ",");
            fp8_text_u64(&b, t->shape[d]);
        }
        fp8_text_str(&b, "],\"data_offsets\":[");
        fp8_text_u64(&b, t->begin);
        fp8_text_str(&b, ",");
        fp8_text_u64(&b, t->end);
        fp8_text_str(&b, "]}");
    }
    fp8_text_str(&b, "}");
    while (b.len % 8)
        fp8_text_str(&b, " ");
    if (b.oom) {
        free(b.p);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", w->path);
    }
    w->header = b.p;
    w->header_len = b.len;
    w->data_size = offset;
    w->laid_out = true;
    return FP8_OK;
}

fp8_status fp8_writer_size(fp8_ctx *ctx, fp8_writer *w, uint64_t *file_size)
{
    fp8_status st = layout(ctx, w);
    if (!st)
        *file_size = 8 + w->header_len + w->data_size;
    return st;
}

fp8_status fp8_writer_begin(fp8_ctx *ctx, fp8_writer *w)
{
    fp8_status st;
    if (w->begun)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: header already written", w->path);
    if ((st = layout(ctx, w)))
        return st;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)w->header_len >> (8 * i));
    if ((st = zio_writer_create(ctx, w->path, 8 + w->header_len + w->data_size, &w->out)))
        return st;
    zio_writer_set_durable(w->out, !w->volatile_ok);
    if ((st = zio_writer_write(ctx, w->out, len8, 8)) ||
        (st = zio_writer_write(ctx, w->out, w->header, w->header_len)) ||
        (st = zio_writer_flush(ctx, w->out)))
        return st;
    w->begun = true;
    return FP8_OK;
}

fp8_status st_writer_keep(fp8_ctx *ctx, fp8_writer *w, const char **file)
{
    if (!w->begun)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: nothing written to keep", w->path);
    return zio_writer_keep(ctx, w->out, file);
}

fp8_status st_writer_sync(fp8_ctx *ctx, fp8_writer *w, const char **file)
{
    if (!w->begun)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: nothing written to sync", w->path);
    return zio_writer_sync(ctx, w->out, file);
}

fp8_status st_writer_resume(fp8_ctx *ctx, fp8_writer *w, const char *file, uint64_t written)
{
    fp8_status st;
    if (w->begun)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: header already written", w->path);
    if ((st = layout(ctx, w)) || (st = zio_writer_reopen(ctx, w->path, file, &w->out)))
        return st;
    zio_writer_set_durable(w->out, !w->volatile_ok);
    /* the same header, byte for byte: then every offset is the same too */
    size_t n = 8 + w->header_len;
    unsigned char *have = malloc(n);
    FILE *f = have ? fopen(file, "rb") : NULL;
    bool same = f && fread(have, 1, n, f) == n && !memcmp(have + 8, w->header, w->header_len);
    for (int i = 0; same && i < 8; i++)
        same = have[i] == (unsigned char)((uint64_t)w->header_len >> (8 * i));
    if (f)
        fclose(f);
    free(have);
    if (!same) {
        zio_writer_free(w->out);
        w->out = NULL;
        return fp8_fail(ctx, FP8_ERR_IO, "%s: not the header this run writes", file);
    }
    w->begun = true;
    w->written = written;
    return FP8_OK;
}

size_t fp8_writer_tensor_count(const fp8_writer *w) { return w->n; }

const fp8_tensor_info *fp8_writer_tensor(const fp8_writer *w, size_t index)
{
    return w->begun && index < w->n ? &w->tensors[index] : NULL;
}

fp8_status fp8_writer_write(fp8_ctx *ctx, fp8_writer *w, const void *data, size_t len)
{
    if (!w->begun)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: data written before the header", w->path);
    if (len > w->data_size - w->written)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: more data than the declared tensors hold",
                        w->path);
    w->written += len;
    return zio_writer_write(ctx, w->out, data, len);
}

void fp8_writer_set_durable(fp8_writer *w, bool durable) { w->volatile_ok = !durable; }

const fp8_tensor_info *fp8_writer_find(const fp8_writer *w, const char *name)
{
    if (!w->laid_out || !w->n)
        return NULL;
    fp8_tensor_info key = { .name = name };
    const fp8_tensor_info *k = &key, *const *hit =
        bsearch(&k, w->by_name, w->n, sizeof *w->by_name, cmp_by_name);
    return hit ? *hit : NULL;
}

fp8_status fp8_writer_pwrite(fp8_ctx *ctx, fp8_writer *w, const fp8_tensor_info *t,
                             uint64_t offset, const void *data, size_t len)
{
    if (!w->begun)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: data written before the header", w->path);
    if (offset > fp8_tensor_nbytes(t) || len > fp8_tensor_nbytes(t) - offset)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s': write outside its bytes", w->path,
                        t->name);
    __atomic_add_fetch(&w->written, len, __ATOMIC_RELAXED);
    return zio_writer_pwrite(ctx, w->out, 8 + w->header_len + t->begin + offset, data, len);
}

fp8_status fp8_writer_commit(fp8_ctx *ctx, fp8_writer *w)
{
    if (!w->begun) {
        fp8_status st = fp8_writer_begin(ctx, w);
        if (st)
            return st;
    }
    if (w->written != w->data_size)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: %llu of %llu data bytes written", w->path,
                        (unsigned long long)w->written, (unsigned long long)w->data_size);
    return zio_writer_commit(ctx, w->out);
}
