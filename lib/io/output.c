/*
 * output.c - outputs built beside their final path and published whole.
 *
 * A run writes into .NAME.tmp-XXXXXX beside OUTPUT (the same file system),
 * with a record of its owner (pid, its start time, host) in it, and
 * publishes the result with one rename: RENAME_NOREPLACE, so that a second
 * run on the same OUTPUT fails instead of silently replacing the first, or,
 * under --force, RENAME_EXCHANGE, so that OUTPUT is at every moment the old
 * tree or the new one.  A later run on the same OUTPUT removes the
 * temporary directories whose owner is gone (kill -9, power loss).
 *
 * --force replaces only what fp8conv wrote: a directory output carries a
 * marker (.fp8conv-output) listing its entries, and a directory without
 * one, or with entries the marker does not list, is left alone.  OUTPUT may
 * never be INPUT, lie inside it or hold it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/output.h"
#include "io/checkpoint.h"
#include "io/parts.h"
#include "io/zio.h"

#define MARKER ".fp8conv-output"
#define OWNER ".fp8conv-owner"
#define MARKER_HEAD "# written by fp8conv; --force replaces this directory while it holds only:\n"

/* ---------------------------------------------------------------- names */

/* The real path OUTPUT would have: its parent resolved, its name as given. */
static char *real_output(const char *path, int dirlen, const char *base)
{
    char *parent = dirlen ? strndup(path, (size_t)dirlen) : fp8_strdup(".");
    char *real = parent ? realpath(parent, NULL) : NULL, *out = NULL;
    if (real && asprintf(&out, "%s/%s", strcmp(real, "/") ? real : "", base) < 0)
        out = NULL;
    free(parent);
    free(real);
    return out;
}

static bool is_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '/' || (n == 1 && dir[0] == '/'));
}

/* OUTPUT must not be INPUT, lie inside it or hold it: --force would remove
 * the input, and a copy of the input's folders would copy itself. */
static fp8_status check_apart(fp8_ctx *ctx, const fp8_output *o, const char *input)
{
    char *in = realpath(input, NULL), *out = real_output(o->path, o->dirlen, o->base);
    char *out_target = o->exists ? realpath(o->path, NULL) : NULL;
    fp8_status st = FP8_OK;
    struct stat a, b;
    if (!in || !out)
        st = in ? fp8_fail(ctx, FP8_ERR_IO, "%s: cannot resolve its directory: %s", o->path,
                           strerror(errno))
                : fp8_fail(ctx, FP8_ERR_IO, "%s: cannot open: %s", input, strerror(errno));
    else if (strcmp(in, out) == 0 || (out_target && strcmp(in, out_target) == 0) ||
             (o->exists && stat(input, &a) == 0 && stat(o->path, &b) == 0 &&
              a.st_dev == b.st_dev && a.st_ino == b.st_ino))
        st = fp8_fail(ctx, FP8_ERR_USAGE, "%s: OUTPUT is the INPUT; write to a new path", o->path);
    else if (is_under(out, in))
        st = fp8_fail(ctx, FP8_ERR_USAGE, "%s: OUTPUT lies inside the INPUT %s; write it elsewhere",
                      o->path, input);
    else if (is_under(in, out))
        st = fp8_fail(ctx, FP8_ERR_USAGE,
                      "%s: OUTPUT holds the INPUT %s; --force would remove it; write to a new path",
                      o->path, input);
    free(in);
    free(out);
    free(out_target);
    return st;
}

/* ---------------------------------------------------------------- owners */

/* This process's start time (clock ticks since boot), telling a live pid
 * from a reused one; 0 when /proc cannot say. */
static unsigned long long start_time(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long t = 0;
    for (int field = 2; p && *p && field < 22; p++)
        if (*p == ' ' && ++field == 22)
            t = strtoull(p + 1, NULL, 10);
    return t;
}

static fp8_status write_owner(fp8_ctx *ctx, const char *dir, const char *output_base)
{
    char host[256] = "", *path = fp8_path_join(dir, OWNER);
    gethostname(host, sizeof host - 1);
    FILE *f = path ? fopen(path, "we") : NULL;
    fp8_status st = FP8_OK;
    if (!f || fprintf(f, "pid %ld\nstart %llu\nhost %s\noutput %s\n", (long)getpid(),
                      start_time((long)getpid()), host, output_base) < 0)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot write: %s", path ? path : dir, strerror(errno));
    if (f && fclose(f) != 0 && !st)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    free(path);
    return st;
}

typedef enum { OWNER_NONE, OWNER_OTHER_OUTPUT, OWNER_ALIVE, OWNER_ELSEWHERE, OWNER_GONE } owner_state;

/* Whose temporary directory `dir` is: a live run's, one on another host, or
 * a dead one's (its pid gone, or reused by a process started later). */
static owner_state owner_of(const char *dir, const char *output_base, long *pid, char *host,
                            size_t hostcap)
{
    char *path = fp8_path_join(dir, OWNER), line[512], mine[256] = "";
    FILE *f = path ? fopen(path, "re") : NULL;
    free(path);
    if (!f)
        return OWNER_NONE;
    unsigned long long start = 0;
    bool same_output = false;
    *pid = 0;
    host[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "pid ", 4) == 0)
            *pid = strtol(line + 4, NULL, 10);
        else if (strncmp(line, "start ", 6) == 0)
            start = strtoull(line + 6, NULL, 10);
        else if (strncmp(line, "host ", 5) == 0)
            snprintf(host, hostcap, "%.255s", line + 5);
        else if (strncmp(line, "output ", 7) == 0)
            same_output = strcmp(line + 7, output_base) == 0;
    }
    fclose(f);
    gethostname(mine, sizeof mine - 1);
    if (!same_output || *pid <= 0)
        return same_output ? OWNER_NONE : OWNER_OTHER_OUTPUT;
    if (strcmp(host, mine) != 0)
        return OWNER_ELSEWHERE;
    if (kill((pid_t)*pid, 0) != 0 && errno == ESRCH)
        return OWNER_GONE;
    unsigned long long now = start_time(*pid);
    return now && start && now != start ? OWNER_GONE : OWNER_ALIVE;
}

/* Removes the .NAME.tmp-* and .NAME.old-* directories of dead runs on the
 * same OUTPUT, and names those it cannot judge. */
static void clean_stale(fp8_ctx *ctx, const fp8_output *o, const char *prefix)
{
    char *parent = o->dirlen ? strndup(o->path, (size_t)o->dirlen) : fp8_strdup(".");
    DIR *d = parent ? opendir(parent) : NULL;
    size_t n = strlen(prefix);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *rest = de->d_name + n;
        if (strncmp(de->d_name, prefix, n) != 0 ||
            (strncmp(rest, ".tmp-", 5) != 0 && strncmp(rest, ".old-", 5) != 0) ||
            strlen(rest) != 11)
            continue;
        char *dir = o->dirlen ? fp8_path_join(parent, de->d_name) : fp8_strdup(de->d_name), host[256];
        long pid;
        struct stat sb;
        if (!dir || lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            free(dir);
            continue;
        }
        switch (owner_of(dir, o->base, &pid, host, sizeof host)) {
        case OWNER_GONE:
            ck_remove_tree(dir);
            fp8_notify(ctx, "%s: removed %s, left by an fp8conv run (pid %ld) that is gone",
                       o->path, dir, pid);
            break;
        case OWNER_ELSEWHERE:
            fp8_notify(ctx, "%s: %s belongs to a run on host %s (pid %ld); left alone", o->path,
                       dir, host, pid);
            break;
        case OWNER_NONE:
            fp8_notify(ctx, "%s: %s looks like a leftover of an earlier run but has no owner "
                       "record; remove it yourself if no run is writing %s", o->path, dir,
                       o->path);
            break;
        default:
            break;
        }
        free(dir);
    }
    if (d)
        closedir(d);
    free(parent);
}

/* ---------------------------------------------------------------- markers */

/* The entries of `dir` (at the `top`, but the marker and owner record), sorted. */
static fp8_status list_entries(fp8_ctx *ctx, const char *dir, bool top, char ***names, size_t *n)
{
    DIR *d = opendir(dir);
    size_t cap = 0;
    *names = NULL;
    *n = 0;
    if (!d)
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot list directory: %s", dir, strerror(errno));
    fp8_status st = FP8_OK;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        const char *e = de->d_name;
        if (!strcmp(e, ".") || !strcmp(e, "..") ||
            (top && (!strcmp(e, MARKER) || !strcmp(e, OWNER))))
            continue;
        if (!fp8_grow(names, *n, &cap, sizeof **names) || !((*names)[*n] = fp8_strdup(e)))
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        else
            ++*n;
    }
    closedir(d);
    if (!st)
        qsort(*names, *n, sizeof **names, fp8_cmp_str);
    return st;
}

/* Every entry under `dir` (but the marker and owner record at its top),
 * as a path relative to it, a directory's ending in '/', sorted. */
static fp8_status list_tree(fp8_ctx *ctx, const char *dir, const char *rel, char ***all, size_t *n,
                            size_t *cap)
{
    char **names = NULL, *path = rel[0] ? fp8_path_join(dir, rel) : fp8_strdup(dir);
    size_t k = 0;
    fp8_status st = path ? list_entries(ctx, path, !rel[0], &names, &k)
                         : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < k; i++) {
        char *sub = NULL, *full = fp8_path_join(path, names[i]);
        struct stat sb;
        bool is_dir = full && lstat(full, &sb) == 0 && S_ISDIR(sb.st_mode);
        if (asprintf(&sub, "%s%s%s", rel, names[i], is_dir ? "/" : "") < 0)
            sub = NULL;
        if (!full || !sub || !fp8_grow(all, *n, cap, sizeof **all))
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        else
            (*all)[(*n)++] = sub, sub = NULL;
        if (!st && is_dir)
            st = list_tree(ctx, dir, (*all)[*n - 1], all, n, cap);
        free(sub);
        free(full);
    }
    fp8_strings_free(names, k);
    free(path);
    if (!st && !rel[0])
        qsort(*all, *n, sizeof **all, fp8_cmp_str);
    return st;
}

/* A file --force may replace: one fp8conv could have written, a
 * safetensors file whose header parses (or not a regular file at all: a
 * link is replaced, not what it points to). */
static fp8_status check_replaceable_file(fp8_ctx *ctx, const fp8_output *o, const struct stat *sb)
{
    fp8_file *f = NULL;
    if (!S_ISREG(sb->st_mode))
        return FP8_OK;
    fp8_ctx *quiet = fp8_ctx_create();
    fp8_status st = quiet ? fp8_file_open(quiet, o->path, &f) : FP8_ERR_NOMEM;
    fp8_file_close(f);
    fp8_ctx_free(quiet);
    return st ? fp8_fail(ctx, FP8_ERR_EXISTS,
                         "%s: exists and is not a safetensors file (its header does not parse), "
                         "so fp8conv did not write it; --force replaces only fp8conv's own "
                         "outputs: remove it yourself or choose another OUTPUT", o->path)
              : FP8_OK;
}

/* An existing directory OUTPUT may be replaced only when its marker lists
 * every entry in it, in every subfolder, with its type: fp8conv wrote all
 * of it.  Every entry it does not list is named. */
static fp8_status check_replaceable(fp8_ctx *ctx, const fp8_output *o)
{
    struct stat sb;
    if (lstat(o->path, &sb) != 0)
        return FP8_OK; /* gone meanwhile: nothing to replace */
    if (!o->is_dir)
        return S_ISDIR(sb.st_mode)
                   ? fp8_fail(ctx, FP8_ERR_EXISTS,
                              "%s: is a directory; --force replaces a file output only by a file",
                              o->path)
                   : check_replaceable_file(ctx, o, &sb);
    if (S_ISLNK(sb.st_mode))
        return fp8_fail(ctx, FP8_ERR_EXISTS,
                        "%s: is a symbolic link; fp8conv writes a directory there only where "
                        "nothing is: name the directory it points to, or remove the link",
                        o->path);
    if (!S_ISDIR(sb.st_mode))
        return fp8_fail(ctx, FP8_ERR_EXISTS,
                        "%s: is a file, not a directory fp8conv wrote; --force replaces a "
                        "directory output only by one", o->path);
    char *mpath = fp8_path_join(o->path, MARKER), **names = NULL, line[4352];
    size_t n = 0, cap = 0, foreign = 0;
    FILE *f = mpath ? fopen(mpath, "re") : NULL;
    fp8_status st = FP8_OK;
    fp8_text list = { 0 };
    if (!f) {
        st = fp8_fail(ctx, FP8_ERR_EXISTS,
                      "%s: exists and was not written by fp8conv (no %s in it); --force replaces "
                      "only fp8conv's own outputs: remove it yourself or choose another OUTPUT",
                      o->path, MARKER);
        goto out;
    }
    if ((st = list_tree(ctx, o->path, "", &names, &n, &cap)))
        goto out;
    bool *seen = fp8_xcalloc(n + 1, sizeof *seen);
    if (!seen) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *key = line;
        char **hit = line[0] == '#' ? NULL : bsearch(&key, names, n, sizeof *names, fp8_cmp_str);
        if (hit)
            seen[hit - names] = true;
    }
    const char *within = NULL; /* a foreign directory: its contents go with it */
    for (size_t i = 0; i < n; i++)
        if (!seen[i] && !(within && strncmp(names[i], within, strlen(within)) == 0)) {
            fp8_text_str(&list, foreign++ ? "', '" : "'");
            fp8_text_str(&list, names[i]);
            within = names[i][strlen(names[i]) - 1] == '/' ? names[i] : NULL;
        }
    free(seen);
    if (list.oom)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    else if (foreign)
        st = fp8_fail(ctx, FP8_ERR_EXISTS,
                      "%s: holds %zu entr%s fp8conv did not write (%s'); --force replaces only "
                      "fp8conv's own outputs: move %s away or choose another OUTPUT",
                      o->path, foreign, foreign == 1 ? "y" : "ies", list.p,
                      foreign == 1 ? "it" : "them");
out:
    if (f)
        fclose(f);
    free(list.p);
    fp8_strings_free(names, n);
    free(mpath);
    return st;
}

/* The marker of a finished directory output: its entries, one per line,
 * those in subfolders too (a directory's ending in '/'). */
static fp8_status write_marker(fp8_ctx *ctx, const fp8_output *o)
{
    char **names = NULL, *path = fp8_path_join(o->tmp, MARKER);
    size_t n = 0, cap = 0;
    fp8_status st = path ? list_tree(ctx, o->tmp, "", &names, &n, &cap)
                         : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    int fd = st ? -1 : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!st && !f)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (f) {
        fputs(MARKER_HEAD, f);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s\n", names[i]);
        if (fflush(f) != 0 || (o->durable && fsync(fileno(f)) != 0))
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        if (fclose(f) != 0 && !st)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    } else if (fd >= 0) {
        close(fd);
    }
    fp8_strings_free(names, n);
    free(path);
    return st;
}

/* Whether two files hold the same bytes. */
static bool same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "re"), *fb = fopen(b, "re");
    bool same = fa && fb;
    char ba[1 << 16], bb[1 << 16];
    while (same) {
        size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
        same = na == nb && memcmp(ba, bb, na) == 0;
        if (na < sizeof ba)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* --resume on a complete OUTPUT: whether what this run built is what
 * OUTPUT holds; if not, fails naming the first entry that differs. */
static fp8_status compare_built(fp8_ctx *ctx, fp8_output *o, const char *built)
{
    char **mine = NULL, **theirs = NULL, *diff = NULL;
    size_t n = 0, m = 0, cap = 0, cap2 = 0;
    fp8_status st = FP8_OK;
    if (!o->is_dir) {
        diff = same_file(built, o->path) ? NULL : fp8_strdup(o->base);
    } else if (!(st = list_tree(ctx, o->tmp, "", &mine, &n, &cap)) &&
               !(st = list_tree(ctx, o->path, "", &theirs, &m, &cap2))) {
        for (size_t i = 0; !diff && i < (n > m ? n : m); i++) {
            char *a = i < n ? fp8_path_join(o->tmp, mine[i]) : NULL;
            char *b = i < m ? fp8_path_join(o->path, theirs[i]) : NULL;
            if (i >= n || i >= m || strcmp(mine[i], theirs[i]) != 0 ||
                (mine[i][strlen(mine[i]) - 1] != '/' && !same_file(a, b)))
                diff = fp8_strdup(i < n ? mine[i] : theirs[i]);
            free(a);
            free(b);
        }
    }
    if (!st && diff)
        st = fp8_fail(ctx, FP8_ERR_USAGE,
                      "%s: --resume: OUTPUT is complete but is not what this command writes "
                      "(%s differs): it was made from another INPUT or with other options; "
                      "give those, or --force to replace it", o->path, diff);
    o->complete = !st;
    free(diff);
    fp8_strings_free(mine, n);
    fp8_strings_free(theirs, m);
    return st;
}

/* ---------------------------------------------------------------- begin, commit, end */

/* Whether .NAME.parts, which --part writes and --finish publishes, is there. */
static bool staging_exists(const fp8_output *o, const char *prefix)
{
    char *parts = NULL;
    struct stat sb;
    bool there = asprintf(&parts, "%.*s%s.parts", o->dirlen, o->path, prefix) >= 0 &&
                 lstat(parts, &sb) == 0;
    free(parts);
    return there;
}

/* --finish on an OUTPUT that a --finish published (before this one began,
 * or while it waited): nothing to do. */
static fp8_status finished_already(fp8_ctx *ctx, fp8_output *o, const char *how)
{
    o->complete = true;
    fp8_notify(ctx, "%s: finished already%s; --finish has nothing to do (the parts' records "
               "went with the publishing: only what its config.json declares can be checked)",
               o->path, how);
    return FP8_OK;
}

/* Checks OUTPUT (see fp8_output_begin); `prefix` gets .NAME, NAME cut so
 * that .NAME.tmp-XXXXXX fits a file name (the owner record has it whole). */
static fp8_status check_output(fp8_ctx *ctx, fp8_output *o, const char *input, const char *output,
                               bool force, const fp8_run_options *run, char prefix[NAME_MAX + 2])
{
    size_t len = strlen(output);
    while (len > 1 && output[len - 1] == '/') /* "model-fp8/" names model-fp8 */
        len--;
    if (len < strlen(output) && !o->is_dir)
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: ends in '/' but the output is one file; name the file", output);
    if (!(o->path = strndup(output, len)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    o->base = strrchr(o->path, '/') ? strrchr(o->path, '/') + 1 : o->path;
    o->dirlen = (int)(o->base - o->path);
    if (!*o->base || !strcmp(o->base, ".") || !strcmp(o->base, ".."))
        return fp8_fail(ctx, FP8_ERR_USAGE, "'%s': OUTPUT must name a new file or directory",
                        output);
    if (!o->is_dir && fp8_has_suffix(o->path, ".zst"))
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: compressed output is not supported; name it *.safetensors", output);
    char *parent = o->dirlen ? strndup(o->path, (size_t)o->dirlen) : fp8_strdup(".");
    long name_max = parent ? pathconf(parent, _PC_NAME_MAX) : -1;
    free(parent);
    name_max = name_max < 14 ? NAME_MAX : name_max;
    if (strlen(o->base) > (size_t)name_max)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: the name is longer than the %ld bytes a file "
                        "name may have here", output, name_max);
    snprintf(prefix, NAME_MAX + 2, ".%.*s", (int)(name_max - 12), o->base);
    struct stat sb;
    o->exists = lstat(o->path, &sb) == 0;
    fp8_status st = FP8_OK;
    if (o->exists && run && run->finish && !force && !(st = check_replaceable(ctx, o)) &&
        !(st = check_apart(ctx, o, input)) && !staging_exists(o, prefix))
        return finished_already(ctx, o, "");
    if (st)
        return st;
    if (o->exists && run && run->resume && !force) { /* finished: only fp8conv's own is */
        st = check_replaceable(ctx, o);
        o->recheck = !st; /* written again and compared: the same, or refused */
        return st ? st : check_apart(ctx, o, input);
    }
    /* what --force would refuse is said as such, without it too */
    if ((st = check_apart(ctx, o, input)) || (o->exists && (st = check_replaceable(ctx, o))))
        return st;
    if (o->exists && !force)
        return fp8_fail(ctx, FP8_ERR_EXISTS, "%s: already exists (--force replaces it)", output);
    if (o->exists && S_ISLNK(sb.st_mode)) /* a file output's: check_replaceable took it */
        fp8_notify(ctx, "%s: is a symbolic link: --force replaces the link by the output file "
                   "and leaves the file it points to as it was", output);
    return FP8_OK;
}

/* This run's own .NAME.tmp-XXXXXX, with its owner record. */
static fp8_status make_tmp(fp8_ctx *ctx, fp8_output *o, const char *prefix)
{
    if (asprintf(&o->tmp, "%.*s%s.tmp-XXXXXX", o->dirlen, o->path, prefix) < 0) {
        o->tmp = NULL;
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    if (!mkdtemp(o->tmp)) {
        free(o->tmp);
        o->tmp = NULL;
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create a temporary directory beside it: %s",
                        o->path, strerror(errno));
    }
    mode_t mask = umask(0);
    umask(mask);
    chmod(o->tmp, 0777 & ~mask); /* mkdtemp made it private; the output is not */
    return write_owner(ctx, o->tmp, o->base);
}

fp8_status fp8_output_begin(fp8_ctx *ctx, fp8_output *o, const char *input, const char *output,
                            bool is_dir, bool force, bool durable)
{
    return fp8_output_open(ctx, o, input, output, is_dir, force, durable, NULL);
}

/* --resume: the temporary directory of a dead run on this host, on the same
 * OUTPUT, made with the same options, becomes this run's. */
static void adopt(fp8_ctx *ctx, fp8_output *o, const char *prefix)
{
    char *parent = o->dirlen ? strndup(o->path, (size_t)o->dirlen) : fp8_strdup(".");
    DIR *d = parent ? opendir(parent) : NULL;
    size_t n = strlen(prefix);
    struct dirent *de;
    while (d && !o->tmp && (de = readdir(d))) {
        if (strncmp(de->d_name, prefix, n) != 0 || strncmp(de->d_name + n, ".tmp-", 5) != 0 ||
            strlen(de->d_name + n) != 11)
            continue;
        char *dir = o->dirlen ? fp8_path_join(parent, de->d_name) : fp8_strdup(de->d_name), host[256];
        char *records = dir ? fp8_path_join(dir, FP8_RECORDS) : NULL;
        long pid;
        bool same = false;
        if (!records || owner_of(dir, o->base, &pid, host, sizeof host) != OWNER_GONE) {
            /* a live run's, or one this host cannot judge: not ours to take */
        } else if (fp8_options_check(ctx, records, o->work.options, false, false, NULL, &same) ||
                   !same || write_owner(ctx, dir, o->base)) {
            fp8_notify(ctx, "%s: %s, left by a run (pid %ld) that is gone, was not made with "
                       "these options (or records nothing: --no-sync): not resumed", o->path,
                       dir, pid);
        } else {
            fp8_notify(ctx, "%s: resuming the run (pid %ld) that left %s", o->path, pid, dir);
            o->tmp = dir;
            o->records = records;
            dir = records = NULL;
        }
        free(records);
        free(dir);
    }
    if (d)
        closedir(d);
    free(parent);
}

/* --part: .NAME.parts, made by whichever part comes first; --finish: its
 * options must be this run's. */
static fp8_status open_staging(fp8_ctx *ctx, fp8_output *o, const char *prefix)
{
    bool same;
    struct stat sb;
    if (asprintf(&o->tmp, "%.*s%s.parts", o->dirlen, o->path, prefix) < 0) {
        o->tmp = NULL;
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    o->staged = true;
    if (!(o->records = fp8_path_join(o->tmp, FP8_RECORDS)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (o->work.run.finish) {
        /* one --finish at a time; one that waited finds OUTPUT published */
        o->lock = open(o->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        o->locked = o->lock >= 0;
        struct stat held;
        if (o->locked && (flock(o->lock, LOCK_EX) != 0 || fstat(o->lock, &held) != 0 ||
                             lstat(o->tmp, &sb) != 0 || sb.st_ino != held.st_ino ||
                             sb.st_dev != held.st_dev) &&
            lstat(o->path, &sb) == 0)
            return finished_already(ctx, o, " (by another --finish, while this one waited)");
        if (!o->locked && lstat(o->path, &sb) == 0)
            return finished_already(ctx, o, " (by another --finish, as this one began)");
        if (lstat(o->records, &sb) != 0)
            return fp8_fail(ctx, FP8_ERR_USAGE,
                            "%s: no parts to finish (%s does not exist or holds no records): run "
                            "every --part I/N first, then --finish", o->path, o->tmp);
        return fp8_options_check(ctx, o->records, o->work.options, false, true, o->path, &same);
    }
    if (mkdir(o->tmp, 0777) != 0 && errno != EEXIST)
        return fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create: %s", o->tmp, strerror(errno));
    if (lstat(o->tmp, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return fp8_fail(ctx, FP8_ERR_EXISTS, "%s: exists and is not a directory", o->tmp);
    /* an empty one is another part's, just made; one with other entries but
     * no records is not fp8conv's */
    DIR *d = lstat(o->records, &sb) != 0 ? opendir(o->tmp) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            strcmp(de->d_name, FP8_RECORDS)) {
            closedir(d);
            return fp8_fail(ctx, FP8_ERR_EXISTS,
                            "%s: exists and was not made by fp8conv (no %s in it); move it away",
                            o->tmp, FP8_RECORDS);
        }
    if (d)
        closedir(d);
    free(o->records);
    fp8_status st = fp8_records_dir(ctx, o->tmp, &o->records);
    return st ? st : fp8_options_check(ctx, o->records, o->work.options, true, false, o->path, &same);
}

/* The input bytes of each shard (the split is by them). */
static uint64_t *shard_bytes(const fp8_checkpoint *ck)
{
    uint64_t *bytes = fp8_xcalloc(fp8_checkpoint_shard_count(ck) + 1, sizeof *bytes);
    for (size_t i = 0; bytes && i < fp8_checkpoint_tensor_count(ck); i++) {
        size_t s;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &s);
        bytes[s] += fp8_tensor_nbytes(t);
    }
    return bytes;
}

/* Removes from o->tmp what is not a kept shard, the records or the owner
 * record: what a dead run left half written. */
static void prune(const fp8_output *o)
{
    size_t n = fp8_checkpoint_shard_count(o->work.ck);
    DIR *d = opendir(o->tmp);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const char *e = de->d_name;
        bool keep = !strcmp(e, ".") || !strcmp(e, "..") || !strcmp(e, FP8_RECORDS) ||
                    !strcmp(e, OWNER);
        for (size_t s = 0; s < n && !keep; s++) {
            keep = !o->todo[s] && !strcmp(e, o->work.names[s]);
            /* a shard a stopped run kept half written (SHARD.partial's first line) */
            char *text = o->todo[s] ? fp8_partial_read(o->records, o->work.names[s]) : NULL;
            size_t m = strlen(e);
            keep = keep || (text && !strncmp(text, "file ", 5) && !strncmp(text + 5, e, m) &&
                            text[5 + m] == '\n');
            free(text);
        }
        char *path = keep ? NULL : fp8_path_join(o->tmp, e);
        if (path)
            ck_remove_tree(path);
        free(path);
    }
    if (d)
        closedir(d);
}

/* Which shards this run writes: its part's (all of them for a whole run)
 * but those recorded and whole.  --finish writes none: each missing or
 * damaged shard is named, with its part. */
static fp8_status plan_shards(fp8_ctx *ctx, fp8_output *o)
{
    const fp8_output_work *w = &o->work;
    size_t n = fp8_checkpoint_shard_count(w->ck), kept = 0, missing = 0, bad = 0;
    uint64_t *bytes = shard_bytes(w->ck);
    unsigned parts = w->run.finish ? fp8_options_parts(o->records) : w->run.parts;
    fp8_text list = { 0 };
    if (!bytes || !(o->todo = fp8_xcalloc(n + 1, sizeof *o->todo))) {
        free(bytes);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    for (size_t s = 0; s < n; s++) {
        unsigned part = parts ? fp8_part_of(bytes, n, s, parts) : 0;
        if (w->run.parts && part != w->run.part)
            continue;
        fp8_record_state state = o->records ? fp8_record_check(ctx, o->records, o->tmp, w->names[s])
                                            : FP8_RECORD_NONE;
        if (state == FP8_RECORD_OK) {
            kept++;
            continue;
        }
        if (!w->run.finish) {
            o->todo[s] = true;
            if (state == FP8_RECORD_BAD)
                fp8_record_remove(o->records, w->names[s]);
            continue;
        }
        char line[128];
        snprintf(line, sizeof line, " (part %u of %u: %s)", part, parts,
                 state == FP8_RECORD_BAD ? "its size or hash does not match its record"
                                         : "not written");
        fp8_text_str(&list, missing + bad ? ", " : "");
        fp8_text_str(&list, w->names[s]);
        fp8_text_str(&list, line);
        missing += state == FP8_RECORD_NONE;
        bad += state == FP8_RECORD_BAD;
    }
    free(bytes);
    fp8_status st = FP8_OK;
    if (list.oom)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    else if (missing + bad)
        st = fp8_fail(ctx, missing ? FP8_ERR_USAGE : FP8_ERR_IO,
                      "%s: --finish: %zu of %zu shards not finished in %s: %s; run those parts "
                      "(again), then --finish", o->path, missing + bad, n, o->tmp, list.p);
    else if (kept && !w->run.parts && !w->run.finish) {
        o->finished = kept;
        fp8_notify(ctx, "%s: kept %zu of %zu shards that the dead run finished; writing the "
                   "other %zu", o->path, kept, n, n - kept);
    }
    free(list.p);
    if (!st && !w->run.parts && o->records) /* resumed or finishing: this run's alone now */
        prune(o);
    if (!st && w->run.finish)
        st = write_owner(ctx, o->tmp, o->base);
    return st;
}

fp8_status fp8_output_open(fp8_ctx *ctx, fp8_output *o, const char *input, const char *output,
                           bool is_dir, bool force, bool durable, const fp8_output_work *work)
{
    *o = (fp8_output){ .is_dir = is_dir, .durable = durable };
    char prefix[NAME_MAX + 2];
    fp8_status st = check_output(ctx, o, input, output, force, work ? &work->run : NULL, prefix);
    if (st || o->complete)
        return st;
    if (work)
        o->work = *work;
    if (work && (work->run.parts || work->run.finish)) {
        if (!is_dir)
            return fp8_fail(ctx, FP8_ERR_USAGE,
                            "%s: a single file: --part and --finish split the shards of a "
                            "checkpoint directory", input);
        st = open_staging(ctx, o, prefix);
    } else {
        if (work && work->run.resume && is_dir)
            adopt(ctx, o, prefix);
        if (work && work->run.resume && !o->tmp) /* said, not silent */
            fp8_notify(ctx, "%s: --resume: no stopped run of this OUTPUT to resume on this "
                       "host: converting from the beginning", o->path);
        clean_stale(ctx, o, prefix);
        if (!o->tmp)
            st = make_tmp(ctx, o, prefix);
        bool same;
        if (!st && !o->records && work && is_dir && durable && !work->unresumable &&
            !(st = fp8_records_dir(ctx, o->tmp, &o->records)))
            st = fp8_options_check(ctx, o->records, work->options, true, false, o->path, &same);
    }
    return st || !work || o->complete ? st : plan_shards(ctx, o);
}

fp8_status fp8_output_shard_done(fp8_ctx *ctx, fp8_output *o, size_t s)
{
    fp8_status st = o->records ? fp8_record_write(ctx, o->records, o->tmp, o->work.names[s],
                                                  o->durable)
                               : FP8_OK;
    o->finished += o->records && !st;
    if (!st)
        fp8_partial_remove(o->records, o->work.names[s]);
    return st;
}

void fp8_output_interrupted(fp8_ctx *ctx, fp8_output *o)
{
    if (o->staged || o->committed || !o->tmp)
        return; /* --part/--finish: .NAME.parts stays anyway */
    if (!o->records || (!o->finished && !o->partial_shards)) {
        fp8_notify(ctx, "%s: stopped; nothing is kept: %s, so a next run starts from the "
                   "beginning", o->path,
                   !o->is_dir      ? "a single-file output is kept only whole"
                   : o->work.unresumable ? "convert has no --resume"
                   : !o->records   ? "a --no-sync run records no shard"
                                   : "no output shard was finished and no tensor written whole");
        return;
    }
    o->keep = true;
    char partial[128] = "";
    if (o->partial_shards)
        snprintf(partial, sizeof partial, " and the %zu tensors it wrote whole of the %zu in "
                 "progress", o->partial_items, o->partial_shards);
    fp8_notify(ctx, "%s: stopped; the %zu of %zu shards it finished%s are kept in %s: run the "
               "same command with --resume to finish (a run without --resume removes them)",
               o->path, o->finished, fp8_checkpoint_shard_count(o->work.ck), partial, o->tmp);
}

bool fp8_output_publishes(const fp8_output *o) { return !o->work.run.parts; }

char *fp8_output_file(const fp8_output *o, const char *name)
{
    return fp8_path_join(o->tmp, o->is_dir ? name : o->base);
}

static fp8_status appeared(fp8_ctx *ctx, const fp8_output *o)
{
    return fp8_fail(ctx, FP8_ERR_EXISTS,
                    "%s: appeared while this run was working (another run?); this run's output "
                    "was not published", o->path);
}

/* Where renameat2 has no flags (an old kernel, some FUSE and network file
 * systems): a file is published with link(), which never replaces; a
 * directory after a check (a window in which a second run can win), and
 * --force moves the old output aside first (a window in which OUTPUT is
 * absent; the old tree then waits in .NAME.old-*). */
static fp8_status publish_fallback(fp8_ctx *ctx, fp8_output *o, const char *built)
{
    if (!o->exists) {
        if (!o->is_dir) {
            if (link(built, o->path) == 0)
                return unlink(built), FP8_OK;
        } else if (access(o->path, F_OK) != 0) {
            if (rename(built, o->path) == 0)
                return FP8_OK;
        } else {
            errno = EEXIST;
        }
        return errno == EEXIST || errno == ENOTEMPTY
                   ? appeared(ctx, o)
                   : fp8_fail(ctx, FP8_ERR_IO, "%s: cannot publish the output: %s", o->path,
                              strerror(errno));
    }
    char *aside = NULL, *old = NULL;
    fp8_status st = FP8_OK;
    if (asprintf(&aside, "%.*s.%s.old-XXXXXX", o->dirlen, o->path, o->base) < 0)
        aside = NULL;
    if (!aside || !mkdtemp(aside)) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create a directory beside it: %s", o->path,
                      strerror(errno));
        goto out;
    }
    if (!(old = fp8_path_join(aside, "old")) || write_owner(ctx, aside, o->base) ||
        rename(o->path, old) != 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot move the existing output aside: %s", o->path,
                      strerror(errno));
        goto out;
    }
    if (rename(built, o->path) != 0) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot rename the finished output into place: %s",
                      o->path, strerror(errno));
        rename(old, o->path);
    }
out:
    if (aside && access(aside, F_OK) == 0)
        ck_remove_tree(aside); /* the old output, or nothing if it was put back */
    free(old);
    free(aside);
    return st;
}

fp8_status fp8_output_commit(fp8_ctx *ctx, fp8_output *o)
{
    fp8_status st = FP8_OK;
    if (!fp8_output_publishes(o))
        return FP8_OK; /* --finish does */
    if (o->records) { /* what was finished matters no more */
        ck_remove_tree(o->records);
        free(o->records);
        o->records = NULL;
    }
    char *built = o->is_dir ? fp8_strdup(o->tmp) : fp8_path_join(o->tmp, o->base);
    char *owner = fp8_path_join(o->tmp, OWNER);
    if (!built || !owner) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (o->exists && (st = check_replaceable(ctx, o))) /* it may have changed meanwhile */
        goto out;
    if (o->is_dir && (unlink(owner) != 0 || (st = write_marker(ctx, o)))) {
        st = st ? st : fp8_fail(ctx, FP8_ERR_IO, "%s: cannot remove: %s", owner, strerror(errno));
        goto out;
    }
    if (o->recheck) { /* OUTPUT stays as it is either way */
        st = compare_built(ctx, o, built);
        goto out;
    }
    struct stat sb;
    bool replace = o->exists && lstat(o->path, &sb) == 0;
    if (renameat2(AT_FDCWD, built, AT_FDCWD, o->path,
                  replace ? RENAME_EXCHANGE : RENAME_NOREPLACE) == 0) {
        if (replace && o->is_dir) /* the old tree, now at o->tmp, is fp8_output_end's */
            write_owner(ctx, o->tmp, o->base);
    } else if (errno == EEXIST) {
        st = appeared(ctx, o);
    } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
        o->exists = replace;
        st = publish_fallback(ctx, o, built);
    } else {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot rename the finished output into place: %s",
                      o->path, strerror(errno));
    }
    if (!st && o->durable) {
        char *parent = o->dirlen ? strndup(o->path, (size_t)o->dirlen) : NULL;
        zio_sync_dir(parent ? parent : ".");
        free(parent);
    }
out:
    o->committed = !st;
    free(owner);
    free(built);
    return st;
}

void fp8_output_end(fp8_output *o)
{
    /* the old output after a swap, or what a failure left; the parts'
     * shared directory only once published */
    if (o->tmp && !o->keep && (!o->staged || o->committed))
        ck_remove_tree(o->tmp);
    if (o->locked)
        close(o->lock); /* after the removal: a --finish waiting finds it gone */
    free(o->records);
    free(o->todo);
    free(o->tmp);
    free(o->path);
    *o = (fp8_output){ 0 };
}
