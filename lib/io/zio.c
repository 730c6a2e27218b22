/*
 * zio.c - byte sources (plain file, memory, zstd stream) and atomic sinks.
 *
 * The only user of zstd.  Compressed files are never decompressed to disk:
 * reads are served from one streaming decompressor, which only moves
 * forward.  What it decompressed stays in a window of blocks in memory while
 * it may still be wanted: bytes that a read skipped over (a weight's rows
 * skipped to reach its scales), and a little behind the last read.  Only a
 * read before the window restarts the stream from the beginning.  Callers
 * visit a compressed file's tensors in file order (see fp8_jobs' lanes), so
 * that each byte is decompressed once.
 *
 * Plain files do not keep their descriptor: a small pool of open
 * descriptors, bounded well under RLIMIT_NOFILE, serves every reader, so
 * that a checkpoint of thousands of shards opens.  A file reopened is
 * checked to be the one whose header was parsed (device, inode, size,
 * modification time).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "io/zio.h"

enum { ZIO_PLAIN, ZIO_MEMORY, ZIO_ZSTD };

#define ZIO_ZSTD_MAGIC 0xFD2FB528u
#define ZIO_BUF (1u << 20)
#define ZIO_BLOCK ZIO_BUF            /* window blocks, aligned on the stream */
#define ZIO_BEHIND (1u << 20)        /* kept behind the furthest read */
#define ZIO_WINDOW (512ull << 20)    /* the most a window holds */

struct zio_reader {
    int kind;
    char *name;
    /* the descriptor, behind fd_lock: open while in the pool (fd >= 0),
     * kept open while users > 0 */
    int fd;
    int users;
    zio_reader *lru_prev, *lru_next;
    dev_t dev;             /* what the file was when opened */
    ino_t ino;
    struct timespec mtime;
    uint64_t file_size;    /* size of the file on disk (compressed for zstd) */
    const unsigned char *mem;
    uint64_t delivered;    /* zio_reader_bytes_read() */
    /* zstd state, behind the lock (plain and memory reads need none) */
    pthread_mutex_t lock;
    ZSTD_DCtx *dctx;
    unsigned char *inbuf;
    ZSTD_inBuffer in;
    uint64_t in_offset;    /* next compressed byte to fetch */
    bool in_eof;
    size_t last_ret;       /* ZSTD_decompressStream's hint; 0 = at a frame boundary */
    uint64_t pos;          /* decompressed bytes produced so far */
    bool out_eof;          /* the content ends at pos */
    /* the window: content [win_start, pos) in blocks of ZIO_BLOCK */
    unsigned char **blk;
    size_t nblk, blkcap;
    uint64_t win_start;
    uint64_t consumed;     /* read up to here, skipped bytes after it kept */
    bool size_known;
    uint64_t size;
};

/* ---------------------------------------------------------------- descriptors */

static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t decompressed_total; /* atomic: zio_decompressed_total() */
static zio_reader *lru_head, *lru_tail; /* readers with an open descriptor, latest first */
static size_t fd_open, fd_cap;

/* A quarter of RLIMIT_NOFILE, at most 64: the rest is the caller's. */
static size_t pool_cap(void)
{
    if (!fd_cap) {
        struct rlimit rl;
        rlim_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
        fd_cap = lim / 4 < 4 ? 4 : lim / 4 > 64 ? 64 : (size_t)(lim / 4);
    }
    return fd_cap;
}

static void lru_unlink(zio_reader *r)
{
    *(r->lru_prev ? &r->lru_prev->lru_next : &lru_head) = r->lru_next;
    *(r->lru_next ? &r->lru_next->lru_prev : &lru_tail) = r->lru_prev;
    r->lru_prev = r->lru_next = NULL;
}

static void lru_push(zio_reader *r)
{
    r->lru_next = lru_head;
    *(lru_head ? &lru_head->lru_prev : &lru_tail) = r;
    lru_head = r;
}

/* Closes the least recently used idle descriptors beyond the cap. */
static void pool_trim(void)
{
    for (zio_reader *r = lru_tail, *prev; r && fd_open > pool_cap(); r = prev) {
        prev = r->lru_prev;
        if (r->users)
            continue;
        lru_unlink(r);
        close(r->fd);
        r->fd = -1;
        fd_open--;
    }
}

static bool same_file(const zio_reader *r, const struct stat *sb)
{
    return sb->st_dev == r->dev && sb->st_ino == r->ino &&
           (uint64_t)sb->st_size == r->file_size && sb->st_mtim.tv_sec == r->mtime.tv_sec &&
           sb->st_mtim.tv_nsec == r->mtime.tv_nsec;
}

/* The reader's descriptor, reopened if the pool closed it; pair with fd_put. */
static fp8_status fd_get(fp8_ctx *ctx, zio_reader *r, int *fd)
{
    fp8_status st = FP8_OK;
    pthread_mutex_lock(&fd_lock);
    if (r->fd >= 0) {
        lru_unlink(r);
    } else {
        struct stat sb;
        r->fd = open(r->name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (r->fd < 0) {
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot reopen: %s", r->name, strerror(errno));
        } else if (fstat(r->fd, &sb) != 0 || !same_file(r, &sb)) {
            st = fp8_fail(ctx, FP8_ERR_IO,
                          "%s: the file changed since its header was read (replaced or modified)",
                          r->name);
            close(r->fd);
            r->fd = -1;
        }
        if (!st)
            fd_open++;
    }
    if (!st) {
        lru_push(r);
        r->users++;
        *fd = r->fd;
        pool_trim();
    }
    pthread_mutex_unlock(&fd_lock);
    return st;
}

static void fd_put(zio_reader *r)
{
    pthread_mutex_lock(&fd_lock);
    r->users--;
    pool_trim();
    pthread_mutex_unlock(&fd_lock);
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

static bool drop_cache;

void zio_cache_policy(fp8_cache cache, uint64_t input_bytes)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    uint64_t memory = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
    drop_cache = cache == FP8_CACHE_DROP || (cache == FP8_CACHE_AUTO && input_bytes > memory / 2);
}

bool zio_drops_cache(void) { return drop_cache; }

void zio_reader_drop_cache(zio_reader *r)
{
    int fd;
    if (drop_cache && r->kind != ZIO_MEMORY && fd_get(NULL, r, &fd) == FP8_OK) {
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        fd_put(r);
    }
}

/* pread_full on the reader's file, through the descriptor pool. */
static fp8_status reader_pread(fp8_ctx *ctx, zio_reader *r, void *buf, size_t len,
                               uint64_t offset, size_t *got)
{
    int fd;
    fp8_status st = fd_get(ctx, r, &fd);
    if (st)
        return st;
    st = pread_full(ctx, fd, r->name, buf, len, offset, got);
    if (drop_cache && !st && *got)
        posix_fadvise(fd, (off_t)offset, (off_t)*got, POSIX_FADV_DONTNEED);
    fd_put(r);
    return st;
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

static void window_clear(zio_reader *r)
{
    for (size_t i = 0; i < r->nblk; i++)
        free(r->blk[i]);
    r->nblk = 0;
    r->win_start = r->consumed = r->pos;
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
    r->out_eof = false;
    window_clear(r);
    return FP8_OK;
}

/* Decompresses up to `cap` bytes into dst; *produced < cap only at the end. */
static fp8_status zstd_pull(fp8_ctx *ctx, zio_reader *r, void *dst, size_t cap, size_t *produced)
{
    ZSTD_outBuffer out = { dst, cap, 0 };
    while (out.pos < out.size) {
        if (r->in.pos == r->in.size && !r->in_eof) {
            size_t got;
            fp8_status st = reader_pread(ctx, r, r->inbuf, ZIO_BUF, r->in_offset, &got);
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
    if (reader_pread(NULL, r, h, sizeof h, 0, &got) || got < 6)
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
        if (reader_pread(NULL, r, b, 3, off, &got) || got < 3)
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
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if (fstat(fd, &sb) != 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: not a regular file (%s)", path,
                      S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISDIR(sb.st_mode) ? "a directory"
                                                                                : "a device or socket");
        close(fd);
        goto out;
    }
    r->dev = sb.st_dev;
    r->ino = sb.st_ino;
    r->mtime = sb.st_mtim;
    r->file_size = (uint64_t)sb.st_size;
    r->size_known = true;
    r->size = r->file_size;
    pthread_mutex_lock(&fd_lock); /* into the pool, which may close it when idle */
    r->fd = fd;
    fd_open++;
    lru_push(r);
    pool_trim();
    pthread_mutex_unlock(&fd_lock);

    unsigned char magic[4];
    size_t got;
    if ((st = reader_pread(ctx, r, magic, 4, 0, &got)))
        goto out;
    if (got == 4 && (magic[0] | magic[1] << 8 | magic[2] << 16 | (uint32_t)magic[3] << 24) ==
                        ZIO_ZSTD_MAGIC) {
        r->kind = ZIO_ZSTD;
        r->dctx = ZSTD_createDCtx();
        r->inbuf = malloc(ZIO_BUF);
        if (!r->dctx || !r->inbuf) {
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
    pthread_mutex_lock(&fd_lock);
    if (r->fd >= 0) {
        lru_unlink(r);
        close(r->fd);
        fd_open--;
    }
    pthread_mutex_unlock(&fd_lock);
    pthread_mutex_destroy(&r->lock);
    ZSTD_freeDCtx(r->dctx);
    window_clear(r);
    free(r->blk);
    free(r->inbuf);
    free(r->name);
    free(r);
}

const char *zio_reader_name(const zio_reader *r) { return r->name; }
bool zio_reader_compressed(const zio_reader *r) { return r->kind == ZIO_ZSTD; }
uint64_t zio_decompressed_total(void)
{
    return __atomic_load_n(&decompressed_total, __ATOMIC_RELAXED);
}

uint64_t zio_reader_bytes_read(const zio_reader *r)
{
    return __atomic_load_n(&r->delivered, __ATOMIC_RELAXED);
}

/* Drops the blocks no longer wanted: those before `keep`, before the first
 * byte not yet read (r->consumed) and ZIO_BEHIND before the stream's
 * position; and any beyond ZIO_WINDOW behind it but before `keep` (a later
 * read there restarts the stream). */
static void window_trim(zio_reader *r, uint64_t keep)
{
    uint64_t behind = r->pos > ZIO_BEHIND ? r->pos - ZIO_BEHIND : 0;
    uint64_t from = r->consumed < behind ? r->consumed : behind;
    from = keep < from ? keep : from;
    if (r->pos > ZIO_WINDOW && from < r->pos - ZIO_WINDOW)
        from = keep < r->pos - ZIO_WINDOW ? keep : r->pos - ZIO_WINDOW;
    size_t drop = 0;
    while (drop + 1 < r->nblk && r->win_start + ZIO_BLOCK * (drop + 1) <= from)
        free(r->blk[drop++]);
    if (drop) {
        memmove(r->blk, r->blk + drop, (r->nblk - drop) * sizeof *r->blk);
        r->nblk -= drop;
        r->win_start += ZIO_BLOCK * drop;
    }
    if (r->consumed < r->win_start)
        r->consumed = r->win_start;
}

/* Decompresses until the window reaches `end` (or the content ends),
 * keeping what is wanted from `keep` on. */
static fp8_status zstd_advance(fp8_ctx *ctx, zio_reader *r, uint64_t end, uint64_t keep)
{
    while (r->pos < end && !r->out_eof) {
        size_t at = (size_t)(r->pos % ZIO_BLOCK);
        if (at == 0) {
            window_trim(r, keep);
            if (!fp8_grow(&r->blk, r->nblk, &r->blkcap, sizeof *r->blk) ||
                !(r->blk[r->nblk] = malloc(ZIO_BLOCK)))
                return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", r->name);
            if (r->nblk == 0)
                r->win_start = r->pos;
            r->nblk++;
        }
        uint64_t want = end - r->pos;
        size_t n = 0, cap = want < ZIO_BLOCK - at ? (size_t)want : ZIO_BLOCK - at;
        fp8_status st = zstd_pull(ctx, r, r->blk[r->nblk - 1] + at, cap, &n);
        if (st)
            return st;
        __atomic_add_fetch(&r->delivered, n, __ATOMIC_RELAXED);
        __atomic_add_fetch(&decompressed_total, n, __ATOMIC_RELAXED);
        r->out_eof = n < cap;
    }
    window_trim(r, keep);
    return FP8_OK;
}

/* Copies content [offset, offset + len) from the window, as far as it goes. */
static size_t window_copy(const zio_reader *r, uint64_t offset, void *buf, size_t len)
{
    size_t done = 0;
    while (done < len && offset + done < r->pos) {
        uint64_t o = offset + done - r->win_start;
        size_t at = (size_t)(o % ZIO_BLOCK), n = ZIO_BLOCK - at;
        n = n < len - done ? n : len - done;
        n = offset + done + n > r->pos ? (size_t)(r->pos - offset - done) : n;
        memcpy((char *)buf + done, r->blk[o / ZIO_BLOCK] + at, n);
        done += n;
    }
    return done;
}

static fp8_status zstd_read(fp8_ctx *ctx, zio_reader *r, uint64_t offset, void *buf, size_t len,
                            size_t *got)
{
    fp8_status st;
    uint64_t end = len > UINT64_MAX - offset ? UINT64_MAX : offset + len;
    if (offset < r->win_start && (st = zstd_rewind(ctx, r)))
        return st;
    if (offset > r->pos) /* skipped bytes stay in the window for a later read */
        r->consumed = r->consumed < r->pos ? r->consumed : r->pos;
    if ((st = zstd_advance(ctx, r, end, offset)))
        return st;
    *got = offset < r->pos ? window_copy(r, offset, buf, len) : 0;
    if (offset <= r->consumed && offset + *got > r->consumed)
        r->consumed = offset + *got;
    window_trim(r, UINT64_MAX);
    return FP8_OK;
}

fp8_status zio_reader_size(fp8_ctx *ctx, zio_reader *r, uint64_t *size)
{
    if (!r->size_known) {
        pthread_mutex_lock(&r->lock);
        /* counting keeps nothing: a later read restarts the stream */
        r->consumed = UINT64_MAX;
        fp8_status st = zstd_advance(ctx, r, UINT64_MAX, UINT64_MAX);
        r->consumed = r->win_start;
        if (!st) {
            r->size = r->pos;
            r->size_known = true;
        }
        pthread_mutex_unlock(&r->lock);
        if (st)
            return st;
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
        st = reader_pread(ctx, r, buf, len, offset, got);
        break;
    case ZIO_ZSTD:
        pthread_mutex_lock(&r->lock);
        st = zstd_read(ctx, r, offset, buf, len, got);
        pthread_mutex_unlock(&r->lock);
        return st; /* zstd_advance counted what it decompressed */
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
    if (fp8_has_suffix(path, ".zst")) {
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
    if (w->durable || drop_cache) /* dropping: clean pages go, dirty ones stay */
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
    if (drop_cache)
        posix_fadvise(w->fd, 0, 0, POSIX_FADV_DONTNEED);
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
        zio_sync_dir(slash ? dir : ".");
        free(dir);
    }
    return FP8_OK;
}

void zio_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

fp8_status zio_writer_keep(fp8_ctx *ctx, zio_writer *w, const char **tmp)
{
    fp8_status st = w->cctx ? fp8_fail(ctx, FP8_ERR_IO, "%s: a compressed stream is kept only "
                                       "whole", w->path)
                            : flush_buf(ctx, w);
    if (!st && w->durable && fsync(w->fd) != 0)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot sync: %s", w->tmp, strerror(errno));
    w->committed = !st; /* not removed by zio_writer_free */
    *tmp = w->tmp;
    return st;
}

fp8_status zio_writer_sync(fp8_ctx *ctx, zio_writer *w, const char **tmp)
{
    fp8_status st = w->cctx ? fp8_fail(ctx, FP8_ERR_IO, "%s: a compressed stream is kept only "
                                       "whole", w->path)
                            : FP8_OK;
    if (!st && fdatasync(w->fd) != 0)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot sync: %s", w->tmp, strerror(errno));
    *tmp = w->tmp;
    return st;
}

fp8_status zio_writer_reopen(fp8_ctx *ctx, const char *path, const char *existing,
                             zio_writer **out)
{
    zio_writer *w = calloc(1, sizeof *w);
    *out = NULL;
    if (!w || !(w->path = fp8_strdup(path)) || !(w->tmp = fp8_strdup(existing)) ||
        !(w->buf = malloc(ZIO_BUF))) {
        zio_writer_free(w);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    }
    w->durable = true;
    w->committed = true; /* until opened: a failure leaves the file as it was */
    w->fd = fp8_has_suffix(path, ".zst") ? -1 : open(existing, O_RDWR | O_CLOEXEC);
    if (w->fd < 0) {
        fp8_status st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", existing,
                                 fp8_has_suffix(path, ".zst") ? "compressed" : strerror(errno));
        zio_writer_free(w);
        return st;
    }
    w->committed = false;
    *out = w;
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
