/*
 * verify_findings.c - what verify found: each pass adds its findings here,
 * each an error, a warning or a note and the loaders it stops (verify_passes.h);
 * the API reads them back.  Below every pass, with what they share: the
 * scale a weight has and needs in the declared layout.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "ops/verify_passes.h"

static fp8_status vadd(fp8_ctx *ctx, fp8_verify *v, fp8_severity sev, unsigned loaders,
                       const char *rule, const char *fmt, va_list ap)
{
    if (!fp8_grow(&v->findings, v->n, &v->cap, sizeof *v->findings))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_finding *f = &v->findings[v->n];
    if (vasprintf(&f->message, fmt, ap) < 0)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    f->severity = sev;
    f->rule = rule;
    f->loaders = loaders;
    v->n++;
    return FP8_OK;
}

/* A finding: an error stops every loader, a warning none. */
fp8_status verify_add(fp8_ctx *ctx, fp8_verify *v, fp8_severity sev, const char *rule,
                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fp8_status st = vadd(ctx, v, sev, sev == FP8_SEV_ERROR ? FP8_LOADERS_ALL : 0, rule, fmt, ap);
    va_end(ap);
    return st;
}

/* A finding that stops some loaders only: an error when one of them is
 * required, else a note. */
fp8_status verify_add_for(fp8_ctx *ctx, fp8_verify *v, unsigned loaders, const char *rule,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fp8_status st = vadd(ctx, v, loaders & v->require ? FP8_SEV_ERROR : FP8_SEV_NOTE, loaders,
                         rule, fmt, ap);
    va_end(ap);
    return st;
}

/* An error that says nothing of the loaders: a question verify cannot
 * answer, or a checkpoint that is not what verify checks. */
fp8_status verify_add_unanswered(fp8_ctx *ctx, fp8_verify *v, const char *rule, const char *fmt,
                                 ...)
{
    va_list ap;
    va_start(ap, fmt);
    fp8_status st = vadd(ctx, v, FP8_SEV_ERROR, 0, rule, fmt, ap);
    va_end(ap);
    return st;
}

/* ---------------------------------------------------------------- what the passes share */

/* The scale a loader of the declared format expects for weight `t`. */
void verify_expected_scale(const fp8_verify *v, const fp8_tensor_info *t, const char **suffix,
                           int *rank, uint64_t shape[3], bool *float_dtype)
{
    *suffix = v->spec->scale_suffix;
    *float_dtype = v->spec->scale_dtype != FMT_SCALE_U8;
    fmt_scale_shape(v->spec, t->rank, t->shape, v->block_rows, v->block_cols, rank, shape);
}

const fp8_tensor_info *verify_find_scale(const fp8_verify *v, const fp8_tensor_info *t,
                                         size_t *shard, const char **suffix)
{
    const char *const names[] = { v->spec->scale_suffix, v->spec->alt_scale_suffix };
    for (int k = 0; k < 2 && names[k]; k++) {
        const fp8_tensor_info *s = ck_find_with(v->ck, t->name, strlen(t->name), names[k], shard);
        if (s) {
            if (suffix)
                *suffix = names[k];
            return s;
        }
    }
    return NULL;
}

bool verify_has_shape(const fp8_tensor_info *t, int rank, const uint64_t *shape)
{
    if (t->rank != rank)
        return false;
    for (int d = 0; d < rank; d++)
        if (t->shape[d] != shape[d])
            return false;
    return true;
}

const char *fp8_severity_name(fp8_severity s)
{
    return s == FP8_SEV_ERROR ? "error" : s == FP8_SEV_WARNING ? "warning" : "note";
}

bool fp8_verify_loads(const fp8_verify *v, fp8_loader loader)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->findings[i].loaders & BIT(loader))
            return false;
    return true;
}

const char *fp8_verify_condition(const fp8_verify *v, fp8_loader loader)
{
    return (unsigned)loader < FP8_LOADER_COUNT && v->cond[loader] ? v->cond[loader]->when : NULL;
}

/* A loader's condition is no finding against the checkpoint: a note that
 * names it, which stops no loader. */
fp8_status verify_check_conditions(fp8_ctx *ctx, fp8_verify *v)
{
    fp8_status st = FP8_OK;
    if (!v->fp8_weights && !v->fp4_weights)
        return st;
    for (int l = 0; !st && l < FP8_LOADER_COUNT; l++) {
        v->cond[l] = loader_condition_of(l, v->format, v->model_type);
        if (v->cond[l])
            st = verify_add(ctx, v, FP8_SEV_NOTE, "loader-condition", "%s: %s loads it only %s: %s",
                            v->path, fmt_loader_title((fp8_loader)l), v->cond[l]->when,
                            v->cond[l]->why);
    }
    return st;
}

size_t fp8_verify_count(const fp8_verify *v) { return v->n; }
const fp8_finding *fp8_verify_finding(const fp8_verify *v, size_t i)
{
    return i < v->n ? &v->findings[i] : NULL;
}
