/*
 * internal.h - shared by lib/ only; never installed, never included by cli/.
 */
#ifndef FP8_INTERNAL_H
#define FP8_INTERNAL_H

#include "fp8conv.h"

#if defined(__GNUC__)
#define FP8_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define FP8_PRINTF(f, a)
#endif

/* The bytes a streaming loop moves at a time (4 MiB: a job of quantize and
 * dequantize, a read of verify and diff).  The fuzz build makes it small, so
 * that each input is cheap (a large buffer is costly under ASan) and tiny
 * tensors still cross job and chunk boundaries. */
#ifndef FP8_CHUNK_BYTES
#define FP8_CHUNK_BYTES (4u << 20)
#endif
/* What the workers' buffers may hold between them on the CPU, so that peak
 * memory does not grow with the core count: with many threads each job takes
 * a smaller chunk (fp8_jobs_chunk), and where jobs cannot shrink enough
 * (a block row of a very wide matrix) fewer threads run (fp8_jobs_run). */
#define FP8_JOBS_MEMORY ((uint64_t)48 << 20)

/* Records the message for the failure and returns `status`, so that an error
 * is raised in one line:  return fp8_fail(ctx, FP8_ERR_IO, "%s: ...", path); */
fp8_status fp8_fail(fp8_ctx *ctx, fp8_status status, const char *fmt, ...) FP8_PRINTF(3, 4);

/* Passes a message to the context's notify callback (fp8_ctx_set_notify). */
void fp8_notify(fp8_ctx *ctx, const char *fmt, ...) FP8_PRINTF(2, 3);

/* The file name to use in messages: the base name of `path`. */
const char *fp8_basename(const char *path);

/* Checked allocation helpers: NULL on overflow or exhaustion. */
void *fp8_xcalloc(size_t n, size_t size);
void *fp8_xreallocarray(void *p, size_t n, size_t size);
char *fp8_strdup(const char *s);

/* Makes room for one more element in a growable array (*items, *count of
 * *cap, each `size` bytes); false when out of memory. */
bool fp8_grow(void *items, size_t count, size_t *cap, size_t size);

/* Overflow-checked u64 arithmetic: false on overflow. */
static inline bool fp8_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool fp8_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* A growable text buffer; `oom` records a failed allocation (checked once,
 * at the end).  Start with fp8_text t = { 0 }; free(t.p) when done. */
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} fp8_text;

void fp8_text_put(fp8_text *b, const char *s, size_t n);
void fp8_text_str(fp8_text *b, const char *s);
void fp8_text_u64(fp8_text *b, uint64_t v);
/* A JSON string as serde_json writes it: escapes for '"', '\\' and control
 * characters only (short forms where JSON has them), UTF-8 as is. */
void fp8_text_json_string(fp8_text *b, const char *s);

#endif
