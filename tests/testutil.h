/*
 * testutil.h - helpers for the Check suites.  Tests run from the repository
 * root (make test does so); FP8_BUILD_DIR names the build directory.
 */
#ifndef FP8_TESTUTIL_H
#define FP8_TESTUTIL_H

#define _GNU_SOURCE
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fp8conv.h"

#define FP8CONV_BIN FP8_BUILD_DIR "/fp8conv"

/* The whole file, NUL-terminated; *len gets its size.  Fails the test if unreadable. */
static inline char *tu_slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert(buf && fread(buf, 1, (size_t)n, fp) == (size_t)n);
    buf[n] = '\0';
    fclose(fp);
    if (len)
        *len = (size_t)n;
    return buf;
}

static inline void tu_spit(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_msg(fp != NULL, "cannot create %s", path);
    ck_assert(fwrite(data, 1, len, fp) == len);
    ck_assert(fclose(fp) == 0);
}

/* A fresh temporary directory (removed by the caller with tu_rmrf). */
static inline char *tu_tmpdir(void)
{
    char *d = strdup("/tmp/fp8conv-test-XXXXXX");
    ck_assert(d && mkdtemp(d));
    return d;
}

static inline void tu_rmrf(const char *path)
{
    char *cmd;
    ck_assert(asprintf(&cmd, "rm -rf '%s'", path) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
}

/* Removes a tu_tmpdir() directory with its contents, and frees its name. */
static inline void tu_tmpdir_free(char *dir)
{
    tu_rmrf(dir);
    free(dir);
}

/* Runs `fp8conv ARGS` through the shell; returns the exit status and the
 * captured stdout/stderr (NUL-terminated, caller frees; pass NULL to drop). */
static inline int tu_run(const char *args, char **out, char **err)
{
    char *dir = tu_tmpdir(), *cmd;
    ck_assert(asprintf(&cmd, "%s %s >%s/out 2>%s/err </dev/null", FP8CONV_BIN, args, dir, dir) > 0);
    int status = system(cmd);
    free(cmd);
    ck_assert_msg(WIFEXITED(status), "fp8conv %s did not exit normally (signal?)", args);
    char path[512];
    snprintf(path, sizeof path, "%s/out", dir);
    if (out)
        *out = tu_slurp(path, NULL);
    snprintf(path, sizeof path, "%s/err", dir);
    if (err)
        *err = tu_slurp(path, NULL);
    tu_rmrf(dir);
    free(dir);
    return WEXITSTATUS(status);
}

/* tu_run with the arguments formatted; the stdout is dropped. */
static inline int tu_run_fmt(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tu_run_fmt(char **err, const char *fmt, ...)
{
    char *args;
    va_list ap;
    va_start(ap, fmt);
    ck_assert(vasprintf(&args, fmt, ap) > 0);
    va_end(ap);
    int rc = tu_run(args, NULL, err);
    free(args);
    return rc;
}

/* The deterministic byte pattern of testdata/golden/cases.json. */
static inline void tu_pattern(unsigned char *buf, size_t n, unsigned seed)
{
    for (size_t j = 0; j < n; j++)
        buf[j] = (unsigned char)((seed * 131u + j * 29u + (j >> 8)) & 0xFF);
}

static inline int tu_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
