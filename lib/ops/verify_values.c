/*
 * verify_values.c - verify's values pass: NaN codes, scales that are not finite and
 * positive, a false ue8m0 claim, products that overflow the model's dtype,
 * codes at +-448; per-weight statistics.  The per-element loops are
 * quant_cpu.c's (fp8_code_stats_span).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "ops/verify_passes.h"
#include "io/checkpoint.h"
#include "layout/fp4.h"
#include "compute/quant_cpu.h"
#include "ops/dequantize.h"
#include "layout/kvscale.h"

/* ---------------------------------------------------------------- values */

typedef struct {
    fp8_verify *v;
    size_t *weights; /* checkpoint indexes of the FP8 weights and scales to scan */
    size_t n;
    fp8_finding *found; /* one slot per job: at most one finding each */
    fp8_verify_stats *stats; /* one slot per job: FP8 and packed weights fill theirs */
    fp4_weight *layout; /* one slot per job: a packed weight's layout (l NULL: none) */
} value_scan;

/* A packed weight's codes (fp4.h's layouts, two a byte): codes at the
 * element's largest magnitude (E2M1 +-6, INT4 7 and -8) and its groups of
 * `run` codes that are all zeros (fp8_nibble_stats), read whole groups a
 * chunk at a time. */
static fp8_status scan_packed(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t,
                              fp8_file *f, const fp4_weight *pw, unsigned char *buf,
                              fp8_verify_stats *out)
{
    fp8_nibble_rule rule;
    fp8_nibble_rule_init(&rule, fp8_elem_get(pw->l->scheme->elem));
    uint64_t nbytes = fp8_tensor_nbytes(t), run = pw->run ? pw->run : 2;
    uint64_t per = run / 2 ? run / 2 : 1; /* bytes of a group */
    uint64_t chunk = v->chunk > per ? v->chunk / per * per : per;
    *out = (fp8_verify_stats){ t->name, 0, 0, nbytes / per, { 0, 0, 0, 0 } };
    for (uint64_t off = 0; off < nbytes; off += chunk) {
        size_t len = nbytes - off < chunk ? (size_t)(nbytes - off) : chunk;
        fp8_status st = fp8_file_read(ctx, f, t, off, buf, len);
        if (st)
            return st;
        fp8_nibble_stats(&rule, buf, len, per, &out->saturated, &out->zero_groups);
    }
    __atomic_add_fetch(&v->saturated_packed, out->saturated, __ATOMIC_RELAXED);
    return FP8_OK;
}

/* The E4M3 codes of weight t, read a band of whole rows at a time so that
 * every scale group is a contiguous span of a row: NaN codes (the first
 * one's flat index), codes at +-448, and each group's largest code
 * magnitude (seen[g] = code & 0x7F, NaN aside, when `seen` is not NULL,
 * numbered as fp8conv-formats(5), FORMATS lays out the scale tensor).  A row longer than the worker's buffer gets its own. */
static fp8_status scan_codes(fp8_ctx *ctx, const fp8_verify *v, const fp8_tensor_info *t,
                             fp8_file *f, unsigned char *buf, unsigned char *seen,
                             uint64_t *first_nan, uint64_t *saturated)
{
    uint64_t N = t->rank >= 1 ? t->shape[t->rank - 1] : 1;
    uint64_t M = t->rank >= 2 ? t->shape[t->rank - 2] : 1;
    if (!t->elements || !N)
        return FP8_OK;
    unsigned char *own = N > v->chunk ? malloc(N) : NULL;
    if (N > v->chunk && !own)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    buf = own ? own : buf;
    uint64_t rows = t->elements / N, band = own ? 1 : v->chunk / N;
    fp8_geometry g;
    fp8_scheme_geometry(v->scheme, v->block_rows, v->block_cols, M, N, &g);
    uint64_t step = seen ? g.group_cols : N;
    fp8_status st = FP8_OK;
    for (uint64_t r0 = 0; r0 < rows && !st; r0 += band) {
        uint64_t k = rows - r0 < band ? rows - r0 : band;
        if ((st = fp8_file_read(ctx, f, t, r0 * N, buf, k * N)))
            break;
        for (uint64_t rr = 0; rr < k; rr++) {
            const uint8_t *p = buf + rr * N;
            uint64_t row = r0 + rr, x = row / M, r = row % M;
            for (uint64_t c0 = 0; c0 < N; c0 += step) {
                fp8_code_stats cs;
                uint64_t w = N - c0 < step ? N - c0 : step;
                fp8_code_stats_span(p + c0, w, &cs);
                *saturated += cs.saturated;
                for (uint64_t i = 0; cs.nan && *first_nan == UINT64_MAX && i < w; i++)
                    if ((p[c0 + i] & 0x7F) == 0x7F)
                        *first_nan = row * N + c0 + i;
                /* past the last whole run (a row not a multiple of MX's
                 * 32): no group of its own in the scale tensor */
                if (!seen || !cs.nonzero || c0 / step >= g.col_groups)
                    continue;
                unsigned char *s = &seen[fp8_geometry_index(&g, x, r, c0)];
                *s = cs.most > *s ? cs.most : *s;
            }
        }
    }
    free(own);
    return st;
}

/* The output dtype verify's overflow rule judges in: the model's (bf16,
 * or fp32 for an fp32 model), as an export to it would be. */
static fp8_dtype judged_out(const fp8_verify *v)
{
    return v->f32_model ? FP8_DTYPE_F32 : FP8_DTYPE_BF16;
}

/* The first scale group of weight t whose largest code times its scale
 * is not finite in the model's dtype, by fp8_dequant_judge (the rule
 * dequantize-for-export and convert apply).  A scale tensor of another
 * shape or dtype is the structure checks' to report, as a scale that is
 * not finite and positive is the scales' scan's. */
static fp8_status find_overflow(fp8_ctx *ctx, const fp8_verify *v, const fp8_tensor_info *t,
                                const unsigned char *most, uint64_t ngroups, uint64_t *first)
{
    size_t shard;
    const fp8_tensor_info *s = NULL;
    char *module = NULL; /* DeepSeek-V4's X.scale of X.weight (check_weight's rule) */
    if (v->family && v->family->trunk_scale_suffix && fp8_has_suffix(t->name, ".weight")) {
        if (asprintf(&module, "%.*s%s", (int)strlen(t->name) - 7, t->name,
                     v->family->trunk_scale_suffix) < 0)
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        s = fp8_checkpoint_find(v->ck, module, &shard);
        free(module);
    } else {
        s = verify_find_scale(v, t, &shard, NULL);
    }
    if (!s || s->elements != ngroups ||
        !(fp8_dtype_holds_pow2_scales(s->dtype) || fp8_dtype_is_float(s->dtype)))
        return FP8_OK;
    fp8_dequant_spec d = { .scheme = fp8_scheme_get(FP8_SCHEME_BLOCK), .out = judged_out(v) };
    unsigned char *raw = malloc(fp8_tensor_nbytes(s) ? fp8_tensor_nbytes(s) : 1);
    if (!raw || !fp8_dequant_init(&d)) {
        free(raw);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, 0, raw,
                                  fp8_tensor_nbytes(s));
    for (uint64_t g = 0; !st && g < ngroups; g++) {
        float sc;
        if (most[g] && dq_scale_value(s->dtype, raw, g, &sc) &&
            fp8_dequant_judge(&d, &sc, most[g]) == FP8_DEQ_OVERFLOW) {
            *first = g;
            break;
        }
    }
    fp8_dequant_free(&d);
    free(raw);
    return st;
}

/* The first group of packed weight t (resolved as pw) whose largest code
 * times its scale (and second level) is not finite in the model's dtype,
 * by fp8_dequant_judge of each code, as dequantize-for-export computes it:
 * group k holds code bytes [k * run / 2, (k + 1) * run / 2) and scale k.
 * Codes are read only where a scale overflows under the largest code.  A scale
 * that is no scale is the structure checks' bad-scale (check_one). */
static fp8_status find_packed_overflow(fp8_ctx *ctx, const fp8_verify *v,
                                       const fp8_tensor_info *t, fp8_file *f,
                                       const fp4_weight *pw, unsigned char *buf, uint64_t *first)
{
    fp8_dequant_spec d = { .scheme = pw->l->scheme, .out = judged_out(v), .group = pw->run,
                           .global = pw->global, .divides = pw->l->global_divides };
    uint64_t half = pw->run / 2, per = half ? v->chunk / half : 0, groups = pw->scale->elements;
    unsigned ssz = fp8_dtype_bits(pw->scale->dtype) / 8; /* a byte, or INT4's float scales */
    unsigned char *sc = malloc(per ? per * ssz : 1);
    if (!sc || !fp8_dequant_init(&d)) {
        free(sc);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    fp8_status st = FP8_OK;
    uint8_t most = fp8_elem_largest_code(fp8_elem_get(d.scheme->elem));
    bool hot[256]; /* a scale byte under which the largest code overflows */
    for (unsigned b = 0; d.scale_size == 1 && b < 256; b++)
        hot[b] = fp8_dequant_judge(&d, &(uint8_t){ (uint8_t)b }, most) == FP8_DEQ_OVERFLOW;
    for (uint64_t g0 = 0; per && !st && *first == UINT64_MAX && g0 < groups; g0 += per) {
        uint64_t n = groups - g0 < per ? groups - g0 : per;
        bool read = false; /* the codes, once a scale might overflow under them */
        if ((st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, pw->scale_shard), pw->scale,
                                g0 * ssz, sc, n * ssz)))
            break;
        for (uint64_t k = 0; !st && k < n && *first == UINT64_MAX; k++) {
            float fs; /* as fp8_dequant takes it: the byte, or the float scale as fp32 */
            const void *s = d.scale_size == 1 ? (const void *)&sc[k] : &fs;
            if (d.scale_size == 1 ? !hot[sc[k]] : !dq_scale_value(pw->scale->dtype, sc, k, &fs))
                continue; /* no overflow, or bad-scale: check_one's */
            if ((d.scale_size != 1 && fp8_dequant_judge(&d, s, most) != FP8_DEQ_OVERFLOW) ||
                (!read && (st = fp8_file_read(ctx, f, t, g0 * half, buf, n * half))))
                continue;
            read = true;
            for (uint64_t i = k * half; i < (k + 1) * half; i++) /* two codes a byte */
                if (fp8_dequant_judge(&d, s, buf[i] & 15) == FP8_DEQ_OVERFLOW ||
                    fp8_dequant_judge(&d, s, buf[i] >> 4) == FP8_DEQ_OVERFLOW) {
                    *first = g0 + k;
                    break;
                }
        }
    }
    fp8_dequant_free(&d);
    free(sc);
    return st;
}

static fp8_status scan_one(void *arg, fp8_worker *w, size_t j)
{
    value_scan *sc = arg;
    fp8_verify *v = sc->v;
    size_t shard;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, sc->weights[j], &shard);
    fp8_file *f = fp8_checkpoint_shard(v->ck, shard);
    const fp4_weight *pw = &sc->layout[j]; /* a packed weight's, or l NULL */
    const char *file = fp8_checkpoint_shard_name(v->ck, shard);
    uint64_t nbytes = fp8_tensor_nbytes(t), saturated = 0, first_nan = UINT64_MAX;
    unsigned esize = fp8_dtype_bits(t->dtype) / 8;
    uint64_t bad = UINT64_MAX, not_pow2 = UINT64_MAX, not_held = UINT64_MAX;
    /* loaders that hold an F32 weight scale in the model's 16-bit dtype */
    unsigned narrow = 0;
    for (int l = 0; v->spec && t->dtype == FP8_DTYPE_F32 && !v->f32_model && l < FP8_LOADER_COUNT; l++)
        narrow |= v->spec->model_dtype_scales[l] && fp8_has_suffix(t->name, "weight_scale") ? BIT(l) : 0;
    /* all-zero scale groups of a weight of the declared scheme: a byte per
     * group, set when a nonzero code is seen; (x, r, c) walk the elements */
    bool groups = !pw->l && fp8_dtype_holds_codes(t->dtype) && v->format != FP8_FORMAT_DEFAULT &&
                  (t->rank == 2 || t->rank == 3) && t->elements;
    uint64_t ngroups = 0;
    unsigned char *seen = NULL;
    if (groups) {
        const char *suffix;
        int rank;
        uint64_t shape[3];
        bool fl;
        verify_expected_scale(v, t, &suffix, &rank, shape, &fl);
        ngroups = 1;
        for (int d = 0; d < rank; d++)
            ngroups *= shape[d];
        if (fp8_scheme_get(v->scheme)->fixed && t->rank == 3)
            ngroups = t->shape[0];
        if (!(seen = calloc(ngroups ? ngroups : 1, 1)))
            return fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    }
    uint64_t overflow = UINT64_MAX;
    if (pw->l) { /* a packed weight's codes; one that falls short is check_one's */
        fp8_status st = find_packed_overflow(w->ctx, v, t, f, pw, w->buf[0], &overflow);
        if (st || (st = scan_packed(w->ctx, v, t, f, pw, w->buf[0], &sc->stats[j])))
            return st;
        nbytes = 0;
    }
    if (!pw->l && fp8_dtype_holds_codes(t->dtype)) {
        fp8_status st = scan_codes(w->ctx, v, t, f, w->buf[0], seen, &first_nan, &saturated);
        if (!st && seen)
            st = find_overflow(w->ctx, v, t, seen, ngroups, &overflow);
        if (st) {
            free(seen);
            return st;
        }
        nbytes = 0; /* done: the loop below is for scales */
    }
    /* a one-byte scale (E8M0, an NVFP4 group's E4M3) is a scale or not by
     * its byte alone: a table, not a decode per group */
    bool bad_byte[256];
    for (unsigned b = 0; esize == 1 && b < 256; b++) {
        float s;
        bad_byte[b] = !dq_scale_value(t->dtype, &(uint8_t){ (uint8_t)b }, 0, &s);
    }
    for (uint64_t off = 0; off < nbytes; off += v->chunk) {
        size_t len = nbytes - off < v->chunk ? (size_t)(nbytes - off) : v->chunk;
        fp8_status st = fp8_file_read(w->ctx, f, t, off, w->buf[0], len);
        if (st) {
            free(seen);
            return st;
        }
        const unsigned char *p = w->buf[0];
        for (size_t i = 0; esize == 1 && bad == UINT64_MAX && i < len; i++)
            if (bad_byte[p[i]])
                bad = off + i;
        for (size_t i = 0; esize > 1 && i < len; i += esize) {
            uint64_t idx = (off + i) / esize;
            float s;
            if (!dq_scale_value(t->dtype, p + i, 0, &s) && bad == UINT64_MAX)
                bad = idx;
            if (t->dtype == FP8_DTYPE_U8) /* E8M0 */
                continue;
            uint32_t u = fp8_f32_bits(s); /* an F32's bits (the claim is of F32 only) */
            /* a power of two: a normal with no fraction bits, or a subnormal with one bit */
            uint32_t exp = (u >> 23) & 0xFF, frac = u & 0x7FFFFF;
            bool pow2 = exp ? frac == 0 : (frac & (frac - 1)) == 0;
            if (v->ue8m0_claim && t->dtype == FP8_DTYPE_F32 && !pow2 && not_pow2 == UINT64_MAX)
                not_pow2 = idx;
            if (!narrow || not_held != UINT64_MAX)
                continue;
            float held = v->f16_model ? fp8_f16_to_f32(fp8_f32_to_f16(s)) : fp8_bf16_to_f32(fp8_f32_to_bf16(s));
            if (held != s)
                not_held = idx;
        }
    }
    fp8_finding *out = &sc->found[j];
    int rc = 0;
    if (first_nan != UINT64_MAX) {
        *out = (fp8_finding){ FP8_SEV_ERROR, "nan-code", NULL, FP8_LOADERS_ALL };
        rc = asprintf(&out->message, "%s: %s: element %llu is the E4M3 NaN code", file, t->name,
                      (unsigned long long)first_nan);
    } else if (overflow != UINT64_MAX) {
        *out = (fp8_finding){ FP8_SEV_ERROR, "overflow", NULL, FP8_LOADERS_ALL };
        rc = asprintf(&out->message,
                      "%s: %s: scale group %llu: its largest code times its scale overflows %s "
                      "(dequantize-for-export refuses it; a loader computes inf)",
                      file, t->name, (unsigned long long)overflow,
                      v->f32_model ? "fp32" : "bf16");
    } else if (bad != UINT64_MAX) {
        *out = (fp8_finding){ FP8_SEV_ERROR, "bad-scale", NULL, FP8_LOADERS_ALL };
        rc = asprintf(&out->message,
                      t->dtype == FP8_DTYPE_U8
                          ? "%s: %s: element %llu is 0xFF, the E8M0 NaN"
                          : "%s: %s: element %llu is not a finite positive scale",
                      file, t->name, (unsigned long long)bad);
    } else if (not_pow2 != UINT64_MAX) {
        *out = (fp8_finding){ FP8_SEV_ERROR, "ue8m0-claim", NULL, FP8_LOADERS_ALL };
        rc = asprintf(&out->message,
                      "%s: %s: element %llu is not a power of two, but the config says "
                      "scale_fmt ue8m0",
                      file, t->name, (unsigned long long)not_pow2);
    } else if (not_held != UINT64_MAX) {
        int l = 0;
        while (!(narrow & BIT(l)))
            l++;
        *out = (fp8_finding){ FP8_SEV_NOTE, "scale-dtype", NULL, narrow }; /* see add_for */
        rc = asprintf(&out->message, "%s: %s: element %llu is an F32 scale that %s cannot hold: "
                      "%s: %s", file, t->name, (unsigned long long)not_held,
                      v->f16_model ? "float16" : "bfloat16", fmt_loader_title((fp8_loader)l),
                      v->spec->model_dtype_scales[l]);
    }
    if (rc < 0)
        return fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    __atomic_add_fetch(&v->saturated, saturated, __ATOMIC_RELAXED);
    if (fp8_dtype_holds_codes(t->dtype)) {
        uint64_t zero = 0;
        for (uint64_t g = 0; seen && g < ngroups; g++)
            zero += !seen[g];
        sc->stats[j] = (fp8_verify_stats){ t->name, saturated, zero, ngroups, { 0, 0, 0, 0 } };
    }
    free(seen);
    return FP8_OK;
}

static void scan_describe(void *arg, size_t j, fp8_job_info *info)
{
    value_scan *sc = arg;
    size_t shard;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(sc->v->ck, sc->weights[j], &shard);
    info->bytes = fp8_tensor_nbytes(t);
    info->label = t->name;
    info->lane = ck_lane(sc->v->ck, shard, t, 0, 0, &info->offset);
}

static int cmp_stats(const void *x, const void *y)
{
    return strcmp(((const fp8_verify_stats *)x)->name, ((const fp8_verify_stats *)y)->name);
}

fp8_status verify_check_values(fp8_ctx *ctx, fp8_verify *v, int threads)
{
    value_scan sc = { .v = v };
    size_t nt = fp8_checkpoint_tensor_count(v->ck);
    sc.weights = fp8_xcalloc(nt + 1, sizeof *sc.weights);
    sc.layout = fp8_xcalloc(nt + 1, sizeof *sc.layout);
    for (size_t i = 0; sc.weights && sc.layout && i < nt; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &shard);
        /* a packed weight (one that falls short is verify_rules.c's finding) */
        fp8_ctx *wctx = fp8_ctx_create();
        fp4_weight pw = { 0 };
        if (wctx && !fp4_weight_find(wctx, v->ck, t, shard, "checked", &pw) && pw.l) {
            sc.layout[sc.n] = pw;
            sc.weights[sc.n++] = i;
            fp8_ctx_free(wctx);
            continue;
        }
        fp8_ctx_free(wctx);
        bool scale = fp8_has_suffix(t->name, "_scale_inv") || fp8_has_suffix(t->name, "_scale");
        long layer;
        if (kv_naming_of(t->name, &layer)) /* KV-cache scales: verify_kv.c's kv_scale_judge */
            continue;
        if (fp4_is_group_scale(v->ck, t->name)) /* NVFP4's E4M3 scales: verify_rules.c */
            continue;
        /* X_scale with no tensor X and no weight in its name is a model's own
         * parameter (DeepSeek-V4's F32 hc_attn_scale: vLLM models/deepseek_v4;
         * CLIP's logit_scale), as the structure pass's orphan rule has it */
        if (scale && !fp8_has_suffix(t->name, "_scale_inv")) {
            size_t base = strlen(t->name) - 6;
            if (!ck_find_with(v->ck, t->name, base, "", NULL) &&
                !(base >= 6 && !memcmp(t->name + base - 6, "weight", 6)))
                scale = false;
        }
        if (fp8_dtype_holds_codes(t->dtype) ||
            (scale && (fp8_dtype_is_float(t->dtype) || t->dtype == FP8_DTYPE_U8)))
            sc.weights[sc.n++] = i;
    }
    sc.found = fp8_xcalloc(sc.n + 1, sizeof *sc.found);
    sc.stats = fp8_xcalloc(sc.n + 1, sizeof *sc.stats);
    v->stats = fp8_xcalloc(sc.n + 1, sizeof *v->stats);
    fp8_status st = sc.weights && sc.layout && sc.found && sc.stats && v->stats ? FP8_OK
                                                       : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st) {
        fp8_jobs spec = { .njobs = sc.n, .bufsize = { v->chunk }, .threads = threads,
                          .progress = v->opts->progress, .progress_user = v->opts->progress_user,
                          .done = &v->done, .total = &v->total, .count = true,
                          .run = scan_one, .describe = scan_describe, .arg = &sc,
                          .what = "verify", .nlanes = fp8_checkpoint_shard_count(v->ck) };
        st = fp8_jobs_run(ctx, &spec);
    }
    for (size_t j = 0; j < sc.n; j++) {
        if (!st && sc.found[j].message &&
            (st = verify_add_for(ctx, v, sc.found[j].loaders, sc.found[j].rule, "%s", sc.found[j].message)))
            break;
    }
    for (size_t j = 0; sc.found && j < sc.n; j++) {
        free(sc.found[j].message);
    }
    /* the weights' statistics, in name order */
    for (size_t j = 0; !st && sc.stats && j < sc.n; j++)
        if (sc.stats[j].name)
            v->stats[v->nstats++] = sc.stats[j];
    if (v->nstats) /* a packed weight's name may sort before its tensor's */
        qsort(v->stats, v->nstats, sizeof *v->stats, cmp_stats);
    for (size_t j = 0; sc.layout && j < sc.n; j++)
        fp4_weight_free(&sc.layout[j]);
    free(sc.layout);
    free(sc.stats);
    free(sc.found);
    free(sc.weights);
    return st;
}
