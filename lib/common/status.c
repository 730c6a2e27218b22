/*
 * status.c - the error context and status names.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

struct fp8_ctx {
    char message[1024];
    char file[512], tensor[512]; /* what the message names: fp8_ctx_file, fp8_ctx_tensor */
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
    free(ctx);
}

const char *fp8_ctx_message(const fp8_ctx *ctx)
{
    return ctx ? ctx->message : "";
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
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->notify(ctx->notify_user, msg);
}

/* The text of s from `from` up to the first `end` (none: "") into out. */
static void part_of(const char *from, const char *end, char *out, size_t size)
{
    const char *to = from ? strstr(from, end) : NULL;
    size_t n = to ? (size_t)(to - from) : 0;
    n = n < size ? n : size - 1;
    memcpy(out, from, n);
    out[n] = '\0';
}

/* The file and the tensor a message names, in the form every message of
 * lib/ takes: "FILE: tensor 'NAME': what" (FILE without a space). */
static void name_parts(fp8_ctx *ctx)
{
    const char *m = ctx->message, *colon = strstr(m, ": ");
    part_of(m, ": ", ctx->file, sizeof ctx->file);
    if (!colon || memchr(m, ' ', (size_t)(colon - m)))
        ctx->file[0] = '\0';
    const char *t = strstr(m, "tensor '");
    part_of(t ? t + 8 : NULL, "'", ctx->tensor, sizeof ctx->tensor);
}

fp8_status fp8_fail(fp8_ctx *ctx, fp8_status status, const char *fmt, ...)
{
    if (ctx) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->message, sizeof ctx->message, fmt, ap);
        va_end(ap);
        name_parts(ctx);
    }
    return status;
}

const char *fp8_ctx_file(const fp8_ctx *ctx) { return ctx ? ctx->file : ""; }
const char *fp8_ctx_tensor(const fp8_ctx *ctx) { return ctx ? ctx->tensor : ""; }

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
