/*
 * status.c - the error context and status names.
 */
#define _GNU_SOURCE /* vasprintf */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

struct fp8_ctx {
    char *message; /* malloc'ed; NULL: none yet, or out of memory (lost) */
    bool lost;
    char *file, *tensor; /* what the message names (malloc'ed): fp8_ctx_file, fp8_ctx_tensor */
    void (*notify)(void *user, const char *message);
    void *notify_user;
};

const char *fp8_status_str(fp8_status status)
{
    switch (status) {
    case FP8_OK: return "success";
    case FP8_ERR_USAGE: return "usage error";
    case FP8_ERR_BAD_INPUT: return "bad input";
    case FP8_ERR_IO: return "I/O error";
    case FP8_ERR_NOMEM: return "out of memory";
    case FP8_ERR_DEVICE: return "device error";
    case FP8_ERR_EXISTS: return "output exists";
    }
    return "unknown status";
}

fp8_ctx *fp8_ctx_create(void)
{
    return calloc(1, sizeof(fp8_ctx));
}

void fp8_ctx_free(fp8_ctx *ctx)
{
    if (ctx) {
        free(ctx->message);
        free(ctx->file);
        free(ctx->tensor);
    }
    free(ctx);
}

const char *fp8_ctx_message(const fp8_ctx *ctx)
{
    return !ctx ? "" : ctx->message ? ctx->message : ctx->lost ? "out of memory for a message" : "";
}

/* Keeps the first and last `keep` bytes of s[0, n) with "..." between, cut
 * on UTF-8 character bounds; returns the new length. */
static size_t elide(char *s, size_t n, size_t keep)
{
    size_t head = keep, tail = n - keep;
    while (head && (s[head] & 0xC0) == 0x80)
        head--;
    while (tail < n && (s[tail] & 0xC0) == 0x80)
        tail++;
    memcpy(s + head, "...", 3);
    memmove(s + head + 3, s + tail, n - tail);
    return head + 3 + n - tail;
}

/* The message, malloc'ed (NULL when out of memory).  A message of names as
 * long as a header allows stays readable and keeps its reason: past
 * MESSAGE_MAX bytes each word (a run without spaces, a name as a rule
 * quotes it) over WORD_MAX bytes loses its middle, then, if still too long,
 * the message does. */
enum { MESSAGE_MAX = 8192, WORD_MAX = 512 };
static char *format(const char *fmt, va_list ap)
{
    char *s;
    if (vasprintf(&s, fmt, ap) < 0)
        return NULL;
    size_t n = strlen(s);
    if (n <= MESSAGE_MAX)
        return s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t w = strcspn(s + i, " ");
        memmove(s + o, s + i, w);
        o += w > WORD_MAX ? elide(s + o, w, WORD_MAX / 2 - 2) : w;
        i += w;
        if (i < n)
            s[o++] = s[i++];
    }
    if (o > MESSAGE_MAX)
        o = elide(s, o, MESSAGE_MAX / 2 - 2);
    s[o] = 0;
    return s;
}

void fp8_ctx_set_notify(fp8_ctx *ctx, void (*notify)(void *user, const char *message),
                        void *user)
{
    ctx->notify = notify;
    ctx->notify_user = user;
}

void fp8_notify(fp8_ctx *ctx, const char *fmt, ...)
{
    if (!ctx || !ctx->notify)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *msg = format(fmt, ap);
    va_end(ap);
    ctx->notify(ctx->notify_user, msg ? msg : "out of memory for a message");
    free(msg);
}

/* A copy of the text from `from` up to the first `end` (none: NULL). */
static char *part_of(const char *from, const char *end)
{
    const char *to = from ? strstr(from, end) : NULL;
    return to ? strndup(from, (size_t)(to - from)) : NULL;
}

/* The file and the tensor a message names, in the form every message of
 * lib/ takes: "FILE: tensor 'NAME': what" (FILE without a space). */
static void name_parts(fp8_ctx *ctx)
{
    const char *m = ctx->message ? ctx->message : "", *colon = strstr(m, ": ");
    const char *t = strstr(m, "tensor '");
    free(ctx->file);
    free(ctx->tensor);
    ctx->file = colon && !memchr(m, ' ', (size_t)(colon - m)) ? part_of(m, ": ") : NULL;
    ctx->tensor = part_of(t ? t + 8 : NULL, "'");
}

fp8_status fp8_fail(fp8_ctx *ctx, fp8_status status, const char *fmt, ...)
{
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        char *msg = format(fmt, ap); /* the old message may be an argument */
        va_end(ap);
        free(ctx->message);
        ctx->message = msg;
        ctx->lost = !msg;
        name_parts(ctx);
    }
    return status;
}

const char *fp8_ctx_file(const fp8_ctx *ctx) { return ctx && ctx->file ? ctx->file : ""; }
const char *fp8_ctx_tensor(const fp8_ctx *ctx) { return ctx && ctx->tensor ? ctx->tensor : ""; }

const char *fp8_status_rule(fp8_status status)
{
    switch (status) {
    case FP8_OK: return "ok";
    case FP8_ERR_USAGE: return "usage";
    case FP8_ERR_BAD_INPUT: return "bad_input";
    case FP8_ERR_IO: return "io";
    case FP8_ERR_NOMEM: return "out_of_memory";
    case FP8_ERR_DEVICE: return "device";
    case FP8_ERR_EXISTS: return "output_exists";
    }
    return "unknown";
}

const char *fp8_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

void *fp8_xcalloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size ? size : 1);
}

void *fp8_xreallocarray(void *p, size_t n, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(n, size, &bytes))
        return NULL;
    return realloc(p, bytes ? bytes : 1);
}

char *fp8_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

bool fp8_grow(void *items, size_t count, size_t *cap, size_t size)
{
    void **p = items;
    if (count < *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 256;
    void *q = fp8_xreallocarray(*p, n, size);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}
