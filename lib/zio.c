/*
 * zio.c - byte sources (plain file, memory, zstd stream) and atomic sinks.
 *
 * The only user of zstd.  Compressed files are never decompressed to disk:
 * reads are served from one streaming decompressor, which moves forward by
 * decompressing into a scratch buffer and restarts from the beginning only
 * when asked for an earlier offset.
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
#include <zstd.h>

#include "zio.h"

enum { ZIO_PLAIN, ZIO_MEMORY, ZIO_ZSTD };

#define ZIO_ZSTD_MAGIC 0xFD2FB528u
#define ZIO_BUF (1u << 20)

struct zio_reader {
    int kind;
    char *name;
    int fd;
    uint64_t file_size;    /* size of the file on disk (compressed for zstd) */
    const unsigned char *mem;
    uint64_t delivered;    /* zio_reader_bytes_read() */
    /* zstd state, behind the lock (plain and memory reads need none) */
    pthread_mutex_t lock;
    ZSTD_DCtx *dctx;
    unsigned char *inbuf, *scratch;
    ZSTD_inBuffer in;
    uint64_t in_offset;    /* next compressed byte to fetch */
    bool in_eof;
    size_t last_ret;       /* ZSTD_decompressStream's hint; 0 = at a frame boundary */
    uint64_t pos;          /* decompressed bytes produced so far */
    bool size_known;
    uint64_t size;
};

bool zio_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* pread until `len` bytes or end of file; *got reports how many. */
static fp8_status pread_full(fp8_ctx *ctx, int fd, const char *name, void *buf, size_t len,
                             uint64_t offset, size_t *got)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot read %zu bytes at offset %llu: %s",
                            name, len - done, (unsigned long long)(offset + done),
                            strerror(errno));
        if (n == 0)
            break;
        done += (size_t)n;
    }
    *got = done;
    return FP8_OK;
}

static fp8_status reader_new(fp8_ctx *ctx, const char *name, int kind, zio_reader **out)
{
    zio_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->name = fp8_strdup(name))) {
        free(r);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", name);
    }
    r->kind = kind;
    r->fd = -1;
    pthread_mutex_init(&r->lock, NULL);
    *out = r;
    return FP8_OK;
}

static fp8_status zstd_rewind(fp8_ctx *ctx, zio_reader *r)
{
    size_t rc = ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
    if (ZSTD_isError(rc))
        return fp8_fail(ctx, FP8_ERR_IO, "%s: zstd: %s", r->name, ZSTD_getErrorName(rc));
    r->in.src = r->inbuf;
    r->in.size = r->in.pos = 0;
    r->in_offset = 0;
    r->in_eof = false;
    r->last_ret = 0;
    r->pos = 0;
    return FP8_OK;
}

/* Decompresses up to `cap` bytes into dst; *produced < cap only at the end. */
static fp8_status zstd_pull(fp8_ctx *ctx, zio_reader *r, void *dst, size_t cap, size_t *produced)
{
    ZSTD_outBuffer out = { dst, cap, 0 };
    while (out.pos < out.size) {
        if (r->in.pos == r->in.size && !r->in_eof) {
            size_t got;
            fp8_status st = pread_full(ctx, r->fd, r->name, r->inbuf, ZIO_BUF, r->in_offset, &got);
            if (st)
                return st;
            r->in_offset += got;
            r->in.size = got;
            r->in.pos = 0;
            r->in_eof = got == 0;
        }
        size_t out_before = out.pos, in_before = r->in.pos;
        size_t ret = ZSTD_decompressStream(r->dctx, &out, &r->in);
        if (ZSTD_isError(ret))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: corrupt zstd stream: %s", r->name,
                            ZSTD_getErrorName(ret));
        /* With nothing left to read, a call at a frame boundary returns the
         * next frame's header size: only a call that moved tells the truth. */
        if (out.pos != out_before || r->in.pos != in_before)
            r->last_ret = ret;
        else if (r->in.pos == r->in.size && r->in_eof)
            break;
    }
    if (out.pos < out.size && r->last_ret != 0)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: zstd stream is truncated", r->name);
    r->pos += out.pos;
    *produced = out.pos;
    return FP8_OK;
}

/*
 * The content size without decompressing: only for a file holding exactly
 * one zstd frame that declares its size.  The frame's extent is found by
 * walking its 3-byte block headers (RFC 8878, 3.1.1).
 */
static bool zstd_declared_size(zio_reader *r, uint64_t *size)
{
    unsigned char h[18]; /* the largest frame header (RFC 8878, 3.1.1.1) */
    size_t got;
    if (pread_full(NULL, r->fd, r->name, h, sizeof h, 0, &got) || got < 6)
        return false;
    unsigned long long fcs = ZSTD_getFrameContentSize(h, got);
    if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR)
        return false;
    unsigned fhd = h[4];
    static const unsigned did_size[4] = { 0, 1, 2, 4 }, fcs_size[4] = { 0, 2, 4, 8 };
    bool single_segment = (fhd >> 5) & 1;
    uint64_t off = 5 + !single_segment + did_size[fhd & 3] +
                   (fcs_size[fhd >> 6] ? fcs_size[fhd >> 6] : single_segment);
    for (;;) {
        unsigned char b[3];
        if (pread_full(NULL, r->fd, r->name, b, 3, off, &got) || got < 3)
            return false;
        uint32_t bh = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16;
        unsigned type = (bh >> 1) & 3;
        if (type == 3)
            return false;
        off += 3 + (type == 1 ? 1 : bh >> 3);
        if (bh & 1)
            break;
    }
    off += ((fhd >> 2) & 1) ? 4 : 0;
    if (off != r->file_size)
        return false; /* more frames follow, or garbage: count by decompressing */
    *size = fcs;
    return true;
}

fp8_status zio_reader_open(fp8_ctx *ctx, const char *path, zio_reader **out)
{
    zio_reader *r = NULL;
    fp8_status st = reader_new(ctx, path, ZIO_PLAIN, &r);
    if (st)
        return st;
    struct stat sb;
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (r->fd < 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(r->fd, &sb) != 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: not a regular file (%s)", path,
                      S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISDIR(sb.st_mode) ? "a directory"
                                                                                : "a device or socket");
        goto out;
    }
    r->file_size = (uint64_t)sb.st_size;
    r->size_known = true;
    r->size = r->file_size;

    unsigned char magic[4];
    size_t got;
    if ((st = pread_full(ctx, r->fd, path, magic, 4, 0, &got)))
        goto out;
    if (got == 4 && (magic[0] | magic[1] << 8 | magic[2] << 16 | (uint32_t)magic[3] << 24) ==
                        ZIO_ZSTD_MAGIC) {
        r->kind = ZIO_ZSTD;
        r->dctx = ZSTD_createDCtx();
        r->inbuf = malloc(ZIO_BUF);
        r->scratch = malloc(ZIO_BUF);
        if (!r->dctx || !r->inbuf || !r->scratch) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        r->size_known = zstd_declared_size(r, &r->size);
        st = zstd_rewind(ctx, r);
    }
out:
    if (st) {
        zio_reader_close(r);
        r = NULL;
    }
    *out = r;
    return st;
}

fp8_status zio_reader_open_memory(fp8_ctx *ctx, const char *name, const void *data, size_t size,
                                  zio_reader **out)
{
    fp8_status st = reader_new(ctx, name, ZIO_MEMORY, out);
    if (st)
        return st;
    (*out)->mem = data;
    (*out)->size = (*out)->file_size = size;
    (*out)->size_known = true;
    return FP8_OK;
}

void zio_reader_close(zio_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    pthread_mutex_destroy(&r->lock);
    ZSTD_freeDCtx(r->dctx);
    free(r->inbuf);
    free(r->scratch);
    free(r->name);
    free(r);
}

const char *zio_reader_name(const zio_reader *r) { return r->name; }
bool zio_reader_compressed(const zio_reader *r) { return r->kind == ZIO_ZSTD; }
uint64_t zio_reader_bytes_read(const zio_reader *r)
{
    return __atomic_load_n(&r->delivered, __ATOMIC_RELAXED);
}

/* Moves the stream forward to `offset` (or its end, if shorter). */
static fp8_status zstd_seek(fp8_ctx *ctx, zio_reader *r, uint64_t offset)
{
    fp8_status st;
    if (offset < r->pos && (st = zstd_rewind(ctx, r)))
        return st;
    while (r->pos < offset) {
        uint64_t want = offset - r->pos;
        size_t n, cap = want < ZIO_BUF ? (size_t)want : ZIO_BUF;
        if ((st = zstd_pull(ctx, r, r->scratch, cap, &n)))
            return st;
        r->delivered += n;
        if (n < cap)
            break;
    }
    return FP8_OK;
}

fp8_status zio_reader_size(fp8_ctx *ctx, zio_reader *r, uint64_t *size)
{
    if (!r->size_known) {
        fp8_status st = zstd_seek(ctx, r, UINT64_MAX);
        if (st)
            return st;
        r->size = r->pos;
        r->size_known = true;
    }
    *size = r->size;
    return FP8_OK;
}

fp8_status zio_reader_read(fp8_ctx *ctx, zio_reader *r, uint64_t offset, void *buf, size_t len,
                           size_t *got)
{
    fp8_status st = FP8_OK;
    *got = 0;
    switch (r->kind) {
    case ZIO_MEMORY:
        if (offset < r->size) {
            uint64_t avail = r->size - offset;
            *got = avail < len ? (size_t)avail : len;
            memcpy(buf, r->mem + offset, *got);
        }
        break;
    case ZIO_PLAIN:
        st = pread_full(ctx, r->fd, r->name, buf, len, offset, got);
        break;
    case ZIO_ZSTD:
        pthread_mutex_lock(&r->lock);
        if (!(st = zstd_seek(ctx, r, offset)) && r->pos >= offset)
            st = zstd_pull(ctx, r, buf, len, got);
        pthread_mutex_unlock(&r->lock);
        break;
    }
    __atomic_add_fetch(&r->delivered, *got, __ATOMIC_RELAXED);
    return st;
}

/* ------------------------------------------------------------------ writer */

struct zio_writer {
    char *path, *tmp;
    int fd;
    bool committed, durable;
    ZSTD_CCtx *cctx;
    unsigned char *buf;
    size_t fill;
};

static fp8_status write_all(fp8_ctx *ctx, zio_writer *w, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(w->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot write: %s", w->path, strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return FP8_OK;
}

static fp8_status flush_buf(fp8_ctx *ctx, zio_writer *w)
{
    fp8_status st = write_all(ctx, w, w->buf, w->fill);
    w->fill = 0;
    return st;
}

fp8_status zio_writer_create(fp8_ctx *ctx, const char *path, uint64_t content_size,
                             zio_writer **out)
{
    fp8_status st = FP8_OK;
    zio_writer *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->durable = true;
    const char *base = fp8_basename(path);
    int dirlen = (int)(base - path);
    w->path = fp8_strdup(path);
    w->buf = malloc(ZIO_BUF);
    if (!w->path || !w->buf || asprintf(&w->tmp, "%.*s.%s.tmp-XXXXXX", dirlen, path, base) < 0) {
        w->tmp = NULL;
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    w->fd = mkostemp(w->tmp, O_CLOEXEC);
    if (w->fd < 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create a temporary file beside it: %s", path,
                      strerror(errno));
        free(w->tmp);
        w->tmp = NULL;
        goto out;
    }
    if (fchmod(w->fd, 0644) != 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot set permissions: %s", w->tmp, strerror(errno));
        goto out;
    }
    if (zio_has_suffix(path, ".zst")) {
        w->cctx = ZSTD_createCCtx();
        if (!w->cctx) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, 3);
        ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1);
        if (content_size != UINT64_MAX)
            ZSTD_CCtx_setPledgedSrcSize(w->cctx, content_size);
    }
out:
    if (st)
        zio_writer_free(w);
    else
        *out = w;
    return st;
}

static fp8_status compress(fp8_ctx *ctx, zio_writer *w, const void *data, size_t len,
                           ZSTD_EndDirective mode)
{
    ZSTD_inBuffer in = { data, len, 0 };
    for (;;) {
        ZSTD_outBuffer out = { w->buf + w->fill, ZIO_BUF - w->fill, 0 };
        size_t left = ZSTD_compressStream2(w->cctx, &out, &in, mode);
        if (ZSTD_isError(left))
            return fp8_fail(ctx, FP8_ERR_IO, "%s: zstd: %s", w->path, ZSTD_getErrorName(left));
        w->fill += out.pos;
        if (w->fill == ZIO_BUF) {
            fp8_status st = flush_buf(ctx, w);
            if (st)
                return st;
        }
        bool done = mode == ZSTD_e_end ? left == 0 : in.pos == in.size;
        if (done)
            return FP8_OK;
    }
}

fp8_status zio_writer_write(fp8_ctx *ctx, zio_writer *w, const void *data, size_t len)
{
    if (w->cctx)
        return compress(ctx, w, data, len, ZSTD_e_continue);
    if (len >= ZIO_BUF) {
        fp8_status st = flush_buf(ctx, w);
        return st ? st : write_all(ctx, w, data, len);
    }
    if (w->fill + len > ZIO_BUF) {
        fp8_status st = flush_buf(ctx, w);
        if (st)
            return st;
    }
    memcpy(w->buf + w->fill, data, len);
    w->fill += len;
    return FP8_OK;
}

void zio_writer_set_durable(zio_writer *w, bool durable) { w->durable = durable; }

fp8_status zio_writer_flush(fp8_ctx *ctx, zio_writer *w)
{
    return w->cctx ? FP8_OK : flush_buf(ctx, w);
}

fp8_status zio_writer_pwrite(fp8_ctx *ctx, zio_writer *w, uint64_t offset, const void *data,
                             size_t len)
{
    if (w->cctx || w->fill)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: positioned write into a %s", w->path,
                        w->cctx ? "compressed output" : "writer with buffered data");
    const char *p = data;
    size_t total = len;
    while (len) {
        ssize_t n = pwrite(w->fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot write: %s", w->path, strerror(errno));
        p += n;
        offset += (uint64_t)n;
        len -= (size_t)n;
    }
    /* A durable file is fsynced at commit: start writing these pages to disk
     * now, so that the disk works while the CPU does, and commit waits for
     * little. */
    if (w->durable)
        sync_file_range(w->fd, (off_t)(offset - total), (off_t)total, SYNC_FILE_RANGE_WRITE);
    return FP8_OK;
}

fp8_status zio_writer_commit(fp8_ctx *ctx, zio_writer *w)
{
    fp8_status st;
    if (w->cctx && (st = compress(ctx, w, "", 0, ZSTD_e_end)))
        return st;
    if ((st = flush_buf(ctx, w)))
        return st;
    if (w->durable && fsync(w->fd) != 0)
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot sync: %s", w->path, strerror(errno));
    if (close(w->fd) != 0) {
        w->fd = -1;
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot close: %s", w->path, strerror(errno));
    }
    w->fd = -1;
    if (rename(w->tmp, w->path) != 0)
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot rename the temporary file into place: %s",
                        w->path, strerror(errno));
    w->committed = true;
    /* The rename is durable only once the directory entry is. */
    char *dir = w->durable ? fp8_strdup(w->path) : NULL;
    if (dir) {
        char *slash = strrchr(dir, '/');
        if (slash)
            *(slash == dir ? slash + 1 : slash) = '\0';
        int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(dir);
    }
    return FP8_OK;
}

void zio_writer_free(zio_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp && !w->committed)
        unlink(w->tmp);
    ZSTD_freeCCtx(w->cctx);
    free(w->buf);
    free(w->tmp);
    free(w->path);
    free(w);
}
