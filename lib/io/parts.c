/*
 * parts.c - what lets a conversion be cut into parts and survive a crash:
 * which input shards part I of N converts, the record of each finished
 * output shard (its size and the XXH3-128 of its bytes, read back from the
 * file), and the options a run's bytes depend on.
 *
 * Records live in a directory (.fp8conv-parts) inside the directory the
 * shards are written to: one file per finished shard, SHARD.done, written
 * whole under a temporary name and renamed, and `options`, created once by
 * whichever run comes first (link(2): it never replaces) and compared by
 * every later one.  Nothing here depends on pids or locks, so that the parts
 * of one conversion may run on several hosts of one shared file system.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/xxh.h"

#include "io/parts.h"
#include "io/checkpoint.h"
#include "io/zio.h"

#define OPTIONS "options"

/* ---------------------------------------------------------------- the split */

/* Contiguous ranges by cumulative bytes: shard s goes to the part its
 * middle byte falls in, so each part gets about total/N bytes and the
 * split depends only on the shards' sizes and N. */
unsigned fp8_part_of(const uint64_t *bytes, size_t n, size_t s, unsigned parts)
{
    unsigned __int128 total = 0, before = 0;
    for (size_t k = 0; k < n; k++) {
        total += bytes[k];
        before += k < s ? bytes[k] : 0;
    }
    if (!total) /* empty shards: by count */
        return (unsigned)(s * parts / n) + 1;
    unsigned __int128 mid = 2 * before + bytes[s];
    unsigned part = (unsigned)(mid * parts / (2 * total));
    return (part < parts ? part : parts - 1) + 1;
}

/* ---------------------------------------------------------------- small files */

/* Writes `text` to dir/name through a temporary file and a rename. */
static fp8_status write_text(fp8_ctx *ctx, const char *path, const char *text, bool durable)
{
    zio_writer *w = NULL;
    fp8_status st = zio_writer_create(ctx, path, UINT64_MAX, &w);
    if (!st) {
        zio_writer_set_durable(w, durable);
        if (!(st = zio_writer_write(ctx, w, text, strlen(text))))
            st = zio_writer_commit(ctx, w);
    }
    zio_writer_free(w);
    return st;
}

/* The file's text (NUL-terminated), NULL when it cannot be read. */
static char *read_text(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    char *text = NULL;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size < (1 << 24) &&
        (text = malloc((size_t)sb.st_size + 1))) {
        ssize_t got = pread(fd, text, (size_t)sb.st_size, 0);
        if (got != sb.st_size) {
            free(text);
            text = NULL;
        } else {
            text[got] = '\0';
        }
    }
    if (fd >= 0)
        close(fd);
    return text;
}

/* ---------------------------------------------------------------- records */

fp8_status fp8_records_dir(fp8_ctx *ctx, const char *dir, char **records)
{
    if (!(*records = fp8_path_join(dir, FP8_RECORDS)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (mkdir(*records, 0777) != 0 && errno != EEXIST)
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create: %s", *records, strerror(errno));
    return FP8_OK;
}

/* h's XXH3-128 as 32 hex digits, in canonical (big-endian) order. */
static void digest_hex(XXH3_state_t *h, char hex[33])
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", c.digest[i]);
}

/* XXH3-128 of the file's bytes, as 32 hex digits; its size. */
static fp8_status hash_file(fp8_ctx *ctx, const char *path, char hex[33], uint64_t *size)
{
    enum { BUF = 1 << 20 };
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char *buf = malloc(BUF);
    XXH3_state_t *h = XXH3_createState();
    fp8_status st = FP8_OK;
    if (fd < 0)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (!buf || !h)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    *size = 0;
    if (!st)
        XXH3_128bits_reset(h);
    for (ssize_t n = 1; !st && n > 0; *size += (uint64_t)n) {
        n = pread(fd, buf, BUF, (off_t)*size);
        if (n < 0 && errno == EINTR)
            n = 0;
        else if (n < 0)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        else
            XXH3_128bits_update(h, buf, (size_t)n);
    }
    if (!st && zio_drops_cache())
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (!st)
        digest_hex(h, hex);
    XXH3_freeState(h);
    free(buf);
    if (fd >= 0)
        close(fd);
    return st;
}

fp8_status fp8_record_write(fp8_ctx *ctx, const char *records, const char *dir, const char *name,
                            bool durable)
{
    char hex[33], *file = fp8_path_join(dir, name), *rec = NULL, text[128];
    uint64_t size = 0;
    fp8_status st = file ? hash_file(ctx, file, hex, &size)
                         : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st && asprintf(&rec, "%s/%s.done", records, name) < 0) {
        rec = NULL;
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        snprintf(text, sizeof text, "size %llu\nxxh3-128 %s\n", (unsigned long long)size, hex);
        st = write_text(ctx, rec, text, durable);
    }
    free(rec);
    free(file);
    return st;
}

fp8_record_state fp8_record_check(fp8_ctx *ctx, const char *records, const char *dir,
                                  const char *name)
{
    char *rec = NULL, *file = fp8_path_join(dir, name), *text = NULL, hex[33], want[33] = "";
    unsigned long long size = 0;
    uint64_t got = 0;
    struct stat sb;
    fp8_record_state state = FP8_RECORD_NONE;
    if (!file || asprintf(&rec, "%s/%s.done", records, name) < 0)
        rec = NULL;
    else if ((text = read_text(rec)))
        state = sscanf(text, "size %llu\nxxh3-128 %32s", &size, want) == 2 &&
                        stat(file, &sb) == 0 && (uint64_t)sb.st_size == size &&
                        hash_file(ctx, file, hex, &got) == FP8_OK && got == size &&
                        strcmp(hex, want) == 0
                    ? FP8_RECORD_OK
                    : FP8_RECORD_BAD;
    free(text);
    free(rec);
    free(file);
    return state;
}

void fp8_record_remove(const char *records, const char *name)
{
    char *rec;
    if (asprintf(&rec, "%s/%s.done", records, name) >= 0) {
        unlink(rec);
        free(rec);
    }
}

fp8_status fp8_partial_write(fp8_ctx *ctx, const char *records, const char *name,
                             const char *text, bool durable)
{
    char *rec;
    if (asprintf(&rec, "%s/%s.partial", records, name) < 0)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_status st = write_text(ctx, rec, text, durable);
    free(rec);
    return st;
}

char *fp8_partial_read(const char *records, const char *name)
{
    char *rec, *text = NULL;
    if (records && asprintf(&rec, "%s/%s.partial", records, name) >= 0) {
        text = read_text(rec);
        free(rec);
    }
    return text;
}

void fp8_partial_remove(const char *records, const char *name)
{
    char *rec;
    if (records && asprintf(&rec, "%s/%s.partial", records, name) >= 0) {
        unlink(rec);
        free(rec);
    }
}

/* ---------------------------------------------------------------- options */

/* The line of `text` starting at *at, without its newline; *at moves past it. */
static const char *next_line(const char **at, size_t *len)
{
    const char *line = *at;
    if (!*line)
        return NULL;
    *len = strcspn(line, "\n");
    *at = line + *len + (line[*len] == '\n');
    return line;
}

/* Whether the line is compared: a --finish does not name the part count. */
static bool compared(const char *line, size_t len, bool skip_parts)
{
    return !(skip_parts && len >= 8 && strncmp(line, "--parts ", 8) == 0);
}

/* The first lines where the two differ, *a from `mine` and *b from
 * `theirs` (NULL where one ended first); false when they do not. */
static bool first_difference(const char *mine, const char *theirs, bool skip_parts,
                             const char **a, size_t *na, const char **b, size_t *nb)
{
    const char *pa = mine, *pb = theirs;
    for (;;) {
        while ((*a = next_line(&pa, na)) && !compared(*a, *na, skip_parts))
            ;
        while ((*b = next_line(&pb, nb)) && !compared(*b, *nb, skip_parts))
            ;
        if (!*a || !*b)
            return *a || *b;
        if (*na != *nb || memcmp(*a, *b, *na) != 0)
            return true;
    }
}

/* A fingerprint line's option and value, for a message ("none" when absent). */
static void split_line(const char *line, size_t len, char *opt, size_t cap, const char **value,
                       int *vlen)
{
    size_t n = line ? strcspn(line, " \n") : 0;
    snprintf(opt, cap, "%.*s", (int)n, line ? line : "");
    *value = line && n < len ? line + n + 1 : "none";
    *vlen = line && n < len ? (int)(len - n - 1) : 4;
}

/* A fingerprint line's value as a person reads it: a shard's size and
 * modification time (UTC), not "SIZE SECONDS.NANOSECONDS HASH"; `fine`:
 * the nanoseconds and the content sample's hash, for two lines that read
 * the same without them. */
static void describe(const char *opt, const char *v, int vlen, bool fine, char *buf, size_t cap)
{
    char name[256], hash[33] = "";
    unsigned long long size;
    long long sec;
    long nsec;
    struct tm tm;
    char when[32] = "";
    snprintf(buf, cap, "%.*s", vlen, v);
    if (strcmp(opt, "--input-shard") == 0 &&
        sscanf(buf, "%255s %llu %lld.%ld %32s", name, &size, &sec, &nsec, hash) >= 4) {
        time_t t = (time_t)sec;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
        if (fine)
            snprintf(buf, cap, "%s of %llu bytes modified %s.%09ld UTC, content sample %.16s",
                     name, size, when, nsec, *hash ? hash : "unrecorded");
        else
            snprintf(buf, cap, "%s of %llu bytes modified %s UTC", name, size, when);
    } else if (strcmp(opt, "--input-config") == 0) {
        snprintf(buf, cap, "config.json of content hash %.*s", vlen, v);
    }
}

/* The option a fingerprint line stands for, as the user gives it. */
static const char *option_name(const char *opt)
{
    return strcmp(opt, "--parts") == 0     ? "N of --part I/N"
           : strcmp(opt, "--fp8conv") == 0 ? "command or fp8conv version"
                                           : opt;
}

fp8_status fp8_options_check(fp8_ctx *ctx, const char *records, const char *mine,
                             bool create, bool skip_parts, const char *what, bool *matches)
{
    char *path = fp8_path_join(records, OPTIONS), *theirs = NULL, *tmp = NULL, host[64] = "";
    fp8_status st = FP8_OK;
    *matches = false;
    if (!path)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!(theirs = read_text(path)) && create) {
        /* first come: a whole file under a name of our own, linked into place */
        gethostname(host, sizeof host - 1);
        if (asprintf(&tmp, "%s/.options-%s-%ld", records, host, (long)getpid()) < 0)
            tmp = NULL;
        st = tmp ? write_text(ctx, tmp, mine, true)
                 : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        if (!st && link(tmp, path) != 0 && errno != EEXIST &&
            rename(tmp, path) != 0) /* a file system without hard links */
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        if (tmp)
            unlink(tmp);
        theirs = st ? NULL : read_text(path);
    }
    if (!st && !theirs)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    const char *a = NULL, *b = NULL, *va, *vb;
    size_t na = 0, nb = 0;
    int la, lb;
    bool diff = !st && first_difference(mine, theirs, skip_parts, &a, &na, &b, &nb);
    if (diff && what) {
        char opt[64], other[64], key[72];
        split_line(a, na, opt, sizeof opt, &va, &la);
        split_line(b, nb, other, sizeof other, &vb, &lb);
        /* an option one side has and the other has not (--ignore) */
        snprintf(key, sizeof key, "\n%s ", a ? opt : other);
        if (a && b && strcmp(opt, other) != 0)
            strstr(theirs, key) ? (void)(a = NULL, va = "none", la = 4)
                                : (void)(b = NULL, vb = "none", lb = 4);
        int dirlen = (int)(strrchr(records, '/') ? strrchr(records, '/') - records : 0);
        const char *name = a ? opt : other;
        char here[384], there[384];
        describe(name, va, la, false, here, sizeof here);
        describe(name, vb, lb, false, there, sizeof there);
        if (strcmp(here, there) == 0) {
            describe(name, va, la, true, here, sizeof here);
            describe(name, vb, lb, true, there, sizeof there);
        }
        st = strncmp(name, "--input", 7) == 0
                 ? fp8_fail(ctx, FP8_ERR_USAGE,
                            "%s: INPUT is not the one the work in %s was made from ('%s' here, "
                            "'%s' there: a shard or config.json changed, or another INPUT); use "
                            "that INPUT, or remove %.*s to start over",
                            what, records, here, there, dirlen, records)
                 : fp8_fail(ctx, FP8_ERR_USAGE,
                            "%s: option %s differs from the work in %s: '%s' here, '%s' there; "
                            "give every part and --finish the same options (%s has them), or "
                            "remove %.*s to start over",
                            what, option_name(name), records, here, there, path, dirlen, records);
    }
    *matches = !st && !diff;
    free(tmp);
    free(theirs);
    free(path);
    return st;
}

/* What identifies input shard s beside its size and mtime, which
 * `touch -r`, `rsync -t` and `cp -p` restore: the XXH3-128 of its content
 * sampled -- its header (names, dtypes, shapes, offsets), the first
 * SAMPLE_HEAD bytes of each tensor's data, and SAMPLES pages of 4 KiB
 * spread evenly over the file (all of a file of up to SAMPLES pages).
 * Content, not ctime or inode, so that copies of INPUT on the hosts of a
 * --part run agree and a chmod or a restore from backup is no change; an
 * edit is seen when it touches the header, any tensor's first bytes, or
 * any run of size/SAMPLES bytes.  Compressed shards are sampled as stored. */
enum { SAMPLES = 1024, PAGE = 4096, SAMPLE_HEAD = 256 };
static fp8_status sample_hash(fp8_ctx *ctx, const fp8_checkpoint *ck, size_t s, struct stat *sb,
                              char hex[33])
{
    const fp8_file *f = fp8_checkpoint_shard(ck, s);
    const char *path = fp8_file_path(f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    XXH3_state_t *h = XXH3_createState();
    unsigned char *buf = malloc(PAGE);
    fp8_status st = FP8_OK;
    if (fd < 0 || fstat(fd, sb) != 0)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    else if (!h || !buf)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    uint64_t size = st ? 0 : (uint64_t)sb->st_size;
    bool raw = !st && !fp8_file_is_compressed(f);
    uint64_t data = raw ? 8 + fp8_file_header_size(f) : 0;
    if (!st)
        XXH3_128bits_reset(h);
    /* a span: [at, at + n) of the file, as much of it as there is */
    for (uint64_t k = 0, at = 0, n = 0; !st; k++) {
        if (k == 0) /* the header, read whole */
            at = 0, n = data;
        else if (k <= SAMPLES) /* the evenly spread pages */
            at = size <= (uint64_t)SAMPLES * PAGE ? (k - 1) * PAGE : (k - 1) * (size / SAMPLES),
            n = PAGE;
        else if (raw && k - SAMPLES - 1 < fp8_checkpoint_tensor_count(ck)) { /* tensor heads */
            size_t ts;
            const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, k - SAMPLES - 1, &ts);
            at = data + t->begin;
            n = ts == s ? (t->end - t->begin < SAMPLE_HEAD ? t->end - t->begin : SAMPLE_HEAD) : 0;
        } else
            break;
        for (uint64_t o = 0; !st && o < n && at + o < size;) {
            size_t want = n - o < PAGE ? (size_t)(n - o) : PAGE;
            ssize_t got = pread(fd, buf, want, (off_t)(at + o));
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0)
                st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            else if (!got)
                break;
            else
                XXH3_128bits_update(h, buf, (size_t)got), o += (uint64_t)got;
        }
    }
    if (!st)
        digest_hex(h, hex);
    XXH3_freeState(h);
    free(buf);
    if (fd >= 0)
        close(fd);
    return st;
}

fp8_status fp8_options_common(fp8_ctx *ctx, const fp8_checkpoint *ck, unsigned parts, fp8_text *t)
{
    if (parts) {
        char line[32];
        snprintf(line, sizeof line, "--parts %u\n", parts);
        fp8_text_str(t, line);
    }
    for (size_t s = 0; s < fp8_checkpoint_shard_count(ck); s++) {
        struct stat sb;
        char hex[33], line[128];
        fp8_status st = sample_hash(ctx, ck, s, &sb, hex);
        if (st)
            return st;
        snprintf(line, sizeof line, " %llu %lld.%09ld %s\n", (unsigned long long)sb.st_size,
                 (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec, hex);
        fp8_text_str(t, "--input-shard ");
        fp8_text_str(t, fp8_checkpoint_shard_name(ck, s));
        fp8_text_str(t, line);
    }
    /* config.json decides too (the expert count finds routers) */
    char *config = fp8_checkpoint_is_directory(ck) ? fp8_path_join(ck_path(ck), "config.json") : NULL;
    char *text = config ? read_text(config) : NULL;
    if (text) {
        char line[64];
        snprintf(line, sizeof line, "--input-config %016llx\n",
                 (unsigned long long)XXH3_64bits(text, strlen(text)));
        fp8_text_str(t, line);
    }
    free(text);
    free(config);
    return t->oom ? fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory") : FP8_OK;
}

unsigned fp8_options_parts(const char *records)
{
    char *path = fp8_path_join(records, OPTIONS), *text = path ? read_text(path) : NULL;
    const char *at = text ? strstr(text, "--parts ") : NULL;
    unsigned parts = at && (at == text || at[-1] == '\n') ? (unsigned)strtoul(at + 8, NULL, 10) : 0;
    free(text);
    free(path);
    return parts;
}
