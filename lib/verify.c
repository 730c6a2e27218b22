/*
 * verify.c - offline checks of an FP8 checkpoint (fp8conv(1), verify): the container and
 * index, the config against the tensors (every FP8 weight has exactly the
 * scale its format's loader expects; no orphan scales; the ignore list), and
 * the values (NaN codes, scales that are not finite and positive, a false
 * ue8m0 claim; codes at +-448 are counted: without the source, a clipped
 * value cannot be told from the group's largest one).  Every problem is reported, not just the first.
 * With --against SRC, each FP8 weight is checked against its source within
 * E4M3's rounding error, and SRC is re-quantized in memory, band by band, as
 * quantize would write it, to say which weights it reproduces byte for byte.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "fp8_math.h"
#include "dequant.h"
#include "formats.h"
#include "jobs.h"
#include "like.h"
#include "parallel.h"
#include "quant.h"
#include "scheme.h"

/* fp8_format's values: DEFAULT (none declared), HF_FP8, COMPRESSED_TENSORS, MODELOPT */

struct fp8_verify {
    const fp8_verify_options *opts;
    bool assumed;          /* the declaration is --format's, not a config.json's */
    uint64_t done, total;  /* progress over all passes */
    char *config_dir;      /* where config.json is read: the checkpoint, or a lone file's folder */
    fp8_checkpoint *ck;
    const char *path;
    fp8_format format;
    fp8_scheme scheme;
    const fmt_spec *spec; /* the format table's row for what is declared */
    const char *ct_activations; /* compressed-tensors input_activations strategy */
    uint64_t experts;     /* the config's expert count */
    unsigned require;     /* loaders that must load it */
    uint32_t block_rows, block_cols;
    bool ue8m0_claim, has_ignore_list;
    char **ignore;
    size_t nignore;
    char *format_name; /* "hf-fp8 block 128x128", for the report */
    size_t n, cap;
    fp8_finding *findings;
    size_t fp8_weights;
    uint64_t saturated; /* codes at +-448 (atomic while scanning) */
    bool has_model;     /* config.json has the dims parallelism splits */
    bool f32_model;     /* config.json's torch_dtype (or dtype) is float32 */
    bool f16_model;     /* ... is float16 (else bfloat16, when not float32) */
    par_model model;
    uint64_t tp_ok;     /* bit t-1: loads at TP=t, for t in 1..64 */
    /* --against: FP8 weights re-quantized from SRC, and how many came out the
     * same bytes (weight and scale); -1 when not tried */
    long requantized, reproduced;
    uint64_t chunk;     /* bytes a job reads at a time (fp8_jobs_chunk) */
    char *first_unreproduced;
    fp8_verify_stats *stats; /* per FP8 weight, when values were scanned */
    size_t nstats;
};

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
FP8_PRINTF(5, 6)
static fp8_status add(fp8_ctx *ctx, fp8_verify *v, fp8_severity sev, const char *rule,
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
FP8_PRINTF(5, 6)
static fp8_status add_for(fp8_ctx *ctx, fp8_verify *v, unsigned loaders, const char *rule,
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
FP8_PRINTF(4, 5)
static fp8_status add_unanswered(fp8_ctx *ctx, fp8_verify *v, const char *rule, const char *fmt,
                                 ...)
{
    va_list ap;
    va_start(ap, fmt);
    fp8_status st = vadd(ctx, v, FP8_SEV_ERROR, 0, rule, fmt, ap);
    va_end(ap);
    return st;
}

#define SERVING FP8_LOADERS_SERVING
#define BIT(l) (1u << (l))

/* ---------------------------------------------------------------- config */

static fp8_status add_ignore(fp8_ctx *ctx, fp8_verify *v, const cJSON *list)
{
    const cJSON *e;
    v->has_ignore_list = v->has_ignore_list || cJSON_IsArray(list);
    cJSON_ArrayForEach(e, list)
    {
        if (!cJSON_IsString(e))
            continue;
        char **p = fp8_xreallocarray(v->ignore, v->nignore + 1, sizeof *p);
        if (!p || !(p[v->nignore] = fp8_strdup(e->valuestring))) {
            if (p)
                v->ignore = p;
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        }
        v->ignore = p;
        v->nignore++;
    }
    return FP8_OK;
}

static bool is_float(fp8_dtype d)
{
    return d == FP8_DTYPE_BF16 || d == FP8_DTYPE_F16 || d == FP8_DTYPE_F32;
}

/* What the config declares: format, scheme, block size, ignore list. */
static fp8_status read_declaration(fp8_ctx *ctx, fp8_verify *v)
{
    cJSON *config = NULL, *hq = NULL;
    fp8_status st = FP8_OK;
    /* a lone shard is verified against the config.json beside it, if any */
    if (fp8_checkpoint_is_directory(v->ck)) {
        v->config_dir = fp8_strdup(v->path);
    } else {
        const char *slash = strrchr(v->path, '/');
        char *dir = slash ? strndup(v->path, (size_t)(slash - v->path + (slash == v->path)))
                          : fp8_strdup(".");
        char *cfg = dir ? ck_join(dir, "config.json") : NULL;
        struct stat sb;
        if (cfg && lstat(cfg, &sb) == 0)
            v->config_dir = dir, dir = NULL;
        free(cfg);
        free(dir);
    }
    if (v->opts->assume_format != FP8_FORMAT_DEFAULT) {
        /* --format: the declaration quantize would write, for a file with none */
        const fmt_spec *spec = fmt_spec_find(v->opts->assume_format, v->opts->assume_scheme);
        if (v->config_dir)
            return fp8_fail(ctx, FP8_ERR_USAGE,
                            "%s: --format is for a checkpoint without config.json; %s/config.json "
                            "declares its own", v->path, v->config_dir);
        if (!spec)
            return fp8_fail(ctx, FP8_ERR_USAGE, "--format %s with --scheme %s: no such layout",
                            fp8_format_name(v->opts->assume_format),
                            fp8_scheme_name(v->opts->assume_scheme));
        fp8_quant_options qo = FP8_QUANT_OPTIONS_INIT;
        qo.scheme = v->opts->assume_scheme;
        if (v->opts->assume_block_rows) {
            qo.block_rows = v->opts->assume_block_rows;
            qo.block_cols = v->opts->assume_block_cols;
        }
        config = cJSON_CreateObject();
        cJSON_AddItemToObject(config, "quantization_config",
                              fmt_quantization_config(spec, &qo, NULL, 0));
        v->assumed = true;
    } else if (v->config_dir && (st = ck_config_read(ctx, v->config_dir, &config))) {
        if (st != FP8_ERR_BAD_INPUT) /* a config.json no loader parses is a finding */
            return st;
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", fp8_ctx_message(ctx));
        if ((st = add(ctx, v, FP8_SEV_ERROR, "config-json", "%s", msg)))
            return st;
    }
    fmt_declaration d;
    fmt_declaration_read(config, &d);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    v->format = d.format;
    v->scheme = d.scheme;
    v->block_rows = d.block_rows;
    v->block_cols = d.block_cols;
    v->ue8m0_claim = d.ue8m0;
    v->experts = fmt_config_experts(config);
    if (d.ct_activations && !(v->ct_activations = fp8_strdup(d.ct_activations)))
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (d.format != FP8_FORMAT_DEFAULT)
        v->spec = fmt_spec_find(d.format, d.scheme);
    if (st) {
    } else if (v->format == FP8_FORMAT_HF_FP8) {
        st = add_ignore(ctx, v, cJSON_GetObjectItemCaseSensitive(q, "modules_to_not_convert"));
    } else if (v->format == FP8_FORMAT_COMPRESSED_TENSORS) {
        st = add_ignore(ctx, v, cJSON_GetObjectItemCaseSensitive(q, "ignore"));
    } else if (v->format == FP8_FORMAT_MODELOPT) {
        st = add_ignore(ctx, v, cJSON_GetObjectItemCaseSensitive(q, "ignore"));
        /* ModelOpt's own file lists its exclusions too */
        if (!st && !(st = ck_json_read(ctx, v->config_dir, HF_QUANT_CONFIG, &hq)) && hq)
            st = add_ignore(ctx, v,
                            cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(hq, "quantization"),
                                "exclude_modules"));
    } else if (d.unknown_method) {
        st = add(ctx, v, FP8_SEV_ERROR, "quant-method",
                 "config.json: quant_method '%s' is not one verify knows (fp8, "
                 "compressed-tensors, modelopt)",
                 d.unknown_method);
    }
    if (!st && d.bad_key) {
        st = add(ctx, v, FP8_SEV_ERROR, "quant-config",
                 "config.json: quantization_config %s is not as loaders read it%s", d.bad_key,
                 strstr(d.bad_key, "group_size")
                     ? ""
                     : " (a block size is two integers from 1 to 65536)");
        v->block_rows = v->block_cols = 128; /* what the checks below then assume */
    }
    if (!st && v->format != FP8_FORMAT_DEFAULT) {
        char block[32] = "";
        if (fp8_scheme_has_block(v->scheme))
            snprintf(block, sizeof block, " %ux%u", v->block_rows, v->block_cols);
        if (asprintf(&v->format_name, "%s, scheme %s%s%s%s", fp8_format_name(v->format),
                     fp8_scheme_name(v->scheme), block, v->ue8m0_claim ? " ue8m0" : "",
                     v->assumed ? " (assumed: --format)" : "") < 0)
            v->format_name = NULL;
    }
    if (v->assumed) /* --format names no ignore list: which modules stay is unknown */
        v->has_ignore_list = false;
    if (!st && v->assumed)
        st = add(ctx, v, FP8_SEV_WARNING, "config-assumed",
                 "%s: no config.json: checked against the layout --format names; a loader needs "
                 "a config.json whose quantization_config declares it",
                 v->path);
    v->has_model = par_model_from_config(config, &v->model);
    if (!st && !v->has_model && cJSON_GetObjectItemCaseSensitive(config, "hidden_size") &&
        cJSON_GetObjectItemCaseSensitive(config, "num_attention_heads"))
        st = add(ctx, v, FP8_SEV_ERROR, "config-numbers",
                 "config.json: the model's sizes (hidden_size, num_attention_heads, "
                 "num_key_value_heads, head_dim, intermediate sizes, expert counts) must be "
                 "whole numbers up to 2^31, and num_attention_heads positive: loaders divide by "
                 "them");
    /* undeclared, transformers computes in the checkpoint's own float dtype
     * (all-MiniLM-L6-v2's config names none, and its weights are F32) */
    int f32 = fmt_config_is_f32(config);
    for (size_t i = 0; f32 < 0 && i < fp8_checkpoint_tensor_count(v->ck); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, NULL);
        if (t->rank >= 2 && is_float(t->dtype))
            f32 = t->dtype == FP8_DTYPE_F32;
    }
    v->f32_model = f32 > 0;
    v->f16_model = fmt_config_dtype(config) && strcmp(fmt_config_dtype(config), "float16") == 0;
    cJSON_Delete(config);
    cJSON_Delete(hq);
    return st;
}

/* ---------------------------------------------------------------- parallelism */

typedef struct {
    fp8_ctx *ctx;
    fp8_verify *v;
    int tp;
    fp8_status st;
} tp_report;

static void report_tp(void *arg, const char *message)
{
    tp_report *r = arg;
    if (!r->st)
        r->st = add_for(r->ctx, r->v, SERVING, "tp", "%s: at TP=%d: %s", r->v->path, r->tp,
                        message);
}

static void first_message(void *arg, const char *message)
{
    char *first = arg;
    if (!*first)
        snprintf(first, 512, "%s", message);
}

/* Which TP sizes load; with --tp, the layers that would not load at it. */
static fp8_status check_parallel(fp8_ctx *ctx, fp8_verify *v, int tp, int ep)
{
    if (!v->has_model || v->format == FP8_FORMAT_DEFAULT) {
        if (tp > 1 || ep > 1)
            return add_unanswered(ctx, v, "tp",
                                  "%s: --tp/--ep need config.json with hidden_size, "
                                  "num_attention_heads and a quantization_config",
                                  v->path);
        return FP8_OK;
    }
    /* EP's own rule, whatever the TP: whole experts per rank */
    if (ep > 1 && v->model.experts % (uint64_t)ep) {
        fp8_status st = add_for(ctx, v, SERVING, "ep",
                                "%s: --ep %d: the %llu experts do not divide over %d ranks", v->path,
                                ep, (unsigned long long)v->model.experts, ep);
        if (st)
            return st;
    }
    par_quant q = { v->scheme, v->block_rows, v->block_cols };
    for (int t = 1; t <= 64; t++)
        if (par_check(&v->model, &q, t, ep, NULL, NULL) == 0)
            v->tp_ok |= 1ull << (t - 1);
    tp_report r = { ctx, v, tp, FP8_OK };
    if (tp > 0) {
        par_check(&v->model, &q, tp, ep, report_tp, &r);
    } else if (!v->tp_ok) {
        char why[512] = "";
        par_check(&v->model, &q, 1, ep, first_message, why);
        r.st = add_for(ctx, v, SERVING, "tp",
                       "%s: vLLM and SGLang load it at no TP size from 1 to 64; at TP=1: %s",
                       v->path, why);
    }
    return r.st;
}

/* ---------------------------------------------------------------- structure */

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}


static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* The scale a loader of the declared format expects for weight `t`. */
static void expected_scale(const fp8_verify *v, const fp8_tensor_info *t, const char **suffix,
                           int *rank, uint64_t shape[3], bool *float_dtype)
{
    *suffix = v->spec->scale_suffix;
    *float_dtype = v->spec->scale_dtype != FMT_SCALE_U8;
    fmt_scale_shape(v->spec, t->rank, t->shape, v->block_rows, v->block_cols, rank, shape);
}

static void shape_text(int rank, const uint64_t *shape, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "",
                              (unsigned long long)shape[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* Whether `module` is in the ignore list: names, "re:" Python-style regexes
 * (matched from the start, as compressed-tensors does) and glob patterns
 * (ModelOpt's exclude_modules). */
static bool ignored(const fp8_verify *v, const char *module)
{
    for (size_t i = 0; i < v->nignore; i++) {
        const char *e = v->ignore[i];
        if (strcmp(e, module) == 0)
            return true;
        if (strncmp(e, "re:", 3) == 0) {
            regex_t re;
            char *anchored;
            if (asprintf(&anchored, "^(%s)", e + 3) < 0)
                continue;
            bool ok = regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB) == 0;
            free(anchored);
            if (ok) {
                bool m = regexec(&re, module, 0, NULL, 0) == 0;
                regfree(&re);
                if (m)
                    return true;
            }
        } else if (strpbrk(e, "*?[") && fnmatch(e, module, 0) == 0) {
            return true;
        }
    }
    return false;
}

static fp8_status check_weight(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t, size_t shard)
{
    const char *file = fp8_checkpoint_shard_name(v->ck, shard);
    char name[1024], other[1024], want[96], got[96];
    if (t->rank != 2 && t->rank != 3)
        return add(ctx, v, FP8_SEV_ERROR, "fp8-rank",
                   "%s: %s: an F8_E4M3 tensor of rank %d (loaders take 2-D weights and 3-D "
                   "experts)",
                   file, t->name, t->rank);
    const char *suffix;
    int rank;
    uint64_t shape[3];
    bool float_dtype;
    expected_scale(v, t, &suffix, &rank, shape, &float_dtype);
    snprintf(name, sizeof name, "%s%s", t->name, suffix);
    snprintf(other, sizeof other, "%s%s", t->name,
             strcmp(suffix, "_scale") == 0 ? "_scale_inv" : "_scale");
    size_t sshard;
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, name, &sshard);
    const fp8_tensor_info *o = fp8_checkpoint_find(v->ck, other, NULL);
    if (!s && o)
        return add(ctx, v, FP8_SEV_ERROR, "scale-name",
                   "%s: %s: its scale is named '%s', but a %s loader looks for '%s'", file,
                   t->name, other, v->format_name, name);
    if (!s)
        return add(ctx, v, FP8_SEV_ERROR, "missing-scale",
                   "%s: %s: no scale '%s'; the loader cannot dequantize it", file, t->name, name);
    if (o)
        return add(ctx, v, FP8_SEV_ERROR, "scale-name", "%s: %s: has both '%s' and '%s'", file,
                   t->name, name, other);
    const char *sfile = fp8_checkpoint_shard_name(v->ck, sshard);
    bool dtype_ok = v->spec->scale_dtype == FMT_SCALE_WEIGHT ? is_float(s->dtype)
                    : s->dtype == fmt_scale_dtype_of(v->spec, s->dtype);
    fp8_status st = FP8_OK;
    if (!dtype_ok)
        st = add(ctx, v, FP8_SEV_ERROR, "scale-dtype", "%s: %s: dtype %s, but %s expects %s",
                 sfile, s->name, fp8_dtype_name(s->dtype), v->format_name,
                 !float_dtype ? "U8 (E8M0)"
                 : v->spec->scale_dtype == FMT_SCALE_WEIGHT
                     ? "the weight's original dtype (BF16, F16 or F32)"
                     : "F32");
    bool shape_ok = s->rank == rank;
    for (int d = 0; shape_ok && d < rank; d++)
        shape_ok = s->shape[d] == shape[d];
    if (!st && !shape_ok) {
        shape_text(rank, shape, want, sizeof want);
        shape_text(s->rank, s->shape, got, sizeof got);
        st = add(ctx, v, FP8_SEV_ERROR, "scale-shape",
                 "%s: %s: shape %s, but %s expects %s for weight %s", sfile, s->name, got,
                 v->format_name, want, t->name);
    }
    return st;
}

/* ---------------------------------------------------------------- loader rules */

/* What the loader rules of the whole checkpoint need: its FP8 experts and
 * the FP8 weights without a calibrated input_scale (first of each). */
typedef struct {
    size_t experts, no_input_scale, partial;
    const char *first_expert, *first_no_input_scale, *first_partial;
} loader_tally;

/* The rules a real loader applies to one FP8 weight beyond its scale:
 * routers stay unquantized, a block must not span a fused gate/up weight's
 * halves, static schemes need input_scale. */
static fp8_status check_loader_rules(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t,
                                     const char *file, loader_tally *lr)
{
    fp8_status st = FP8_OK;
    if (t->rank < 2 || t->rank > 3) /* fp8-rank said it; the rules below need rows */
        return FP8_OK;
    const char *keep = fmt_default_keep(t->name, t->rank, t->shape, v->experts);
    if (keep && strcmp(keep, "MoE router") == 0)
        st = add(ctx, v, FP8_SEV_ERROR, "router-quantized",
                 "%s: %s is F8_E4M3, but it is an MoE router (its %llu rows are the %llu "
                 "experts): transformers runs the router on the raw FP8 codes and vLLM keeps "
                 "routers unquantized; it must stay in bf16",
                 file, t->name, (unsigned long long)t->shape[t->rank - 2],
                 (unsigned long long)v->experts);
    uint64_t rows = t->shape[t->rank - 2];
    if (!st && fp8_scheme_has_block(v->scheme) && fmt_is_fused_gate_up(t->name) &&
        (rows % 2 || (rows / 2) % v->block_rows))
        st = add_for(ctx, v, SERVING, "fused-block",
                     "%s: %s: a fused gate/up weight of %llu rows whose %u-row blocks span the "
                     "gate and up halves; vLLM and SGLang split the halves when they load it and "
                     "cannot split a block's scale",
                     file, t->name, (unsigned long long)rows, v->block_rows);
    if (t->rank == 3 || fmt_is_expert(t->name)) {
        if (!lr->experts++)
            lr->first_expert = t->name;
    }
    if (fp8_scheme_has_block(v->scheme) &&
        (rows % v->block_rows || t->shape[t->rank - 1] % v->block_cols) && !lr->partial++)
        lr->first_partial = t->name;
    if (v->spec->needs_input_scale) {
        char name[1024];
        snprintf(name, sizeof name, "%.*s.input_scale",
                 (int)(strlen(t->name) - (has_suffix(t->name, ".weight") ? 7 : 0)), t->name);
        if (!fp8_checkpoint_find(v->ck, name, NULL) && !lr->no_input_scale++)
            lr->first_no_input_scale = t->name;
    }
    return st;
}

/* The loader rules of the format table that concern the whole checkpoint. */
static fp8_status check_loader_totals(fp8_ctx *ctx, fp8_verify *v, const loader_tally *lr)
{
    fp8_status st = FP8_OK;
    if (!v->spec)
        return FP8_OK;
    for (int l = 0; l < FP8_LOADER_COUNT && !st; l++) {
        if (v->spec->no_load[l])
            st = add_for(ctx, v, BIT(l), "loader-format", "%s: %s: %s", v->path,
                         fmt_loader_title((fp8_loader)l), v->spec->no_load[l]);
        if (!st && lr->experts && v->spec->no_experts[l])
            st = add_for(ctx, v, BIT(l), "loader-experts", "%s: %zu FP8 expert weights (%s, ...): "
                         "%s: %s", v->path, lr->experts, lr->first_expert,
                         fmt_loader_title((fp8_loader)l), v->spec->no_experts[l]);
        if (!st && lr->partial && v->spec->whole_blocks[l])
            st = add_for(ctx, v, BIT(l), "partial-blocks",
                         "%s: %zu FP8 weights (%s, ...) are not whole %ux%u blocks: %s: %s",
                         v->path, lr->partial, lr->first_partial, v->block_rows, v->block_cols,
                         fmt_loader_title((fp8_loader)l), v->spec->whole_blocks[l]);
        if (!st && v->f32_model && v->spec->no_f32_model[l])
            st = add_for(ctx, v, BIT(l), "loader-dtype", "%s: a float32 model: %s: %s", v->path,
                         fmt_loader_title((fp8_loader)l), v->spec->no_f32_model[l]);
    }
    /* vLLM's compressed-tensors FP8 MoE method pairs tensor weights with
     * tensor activations and channel weights with token activations */
    const fmt_spec *ct = fmt_spec_find(FP8_FORMAT_COMPRESSED_TENSORS, v->scheme);
    const char *want = ct ? ct->ct_moe_activations : NULL;
    if (!st && v->format == FP8_FORMAT_COMPRESSED_TENSORS && lr->experts && want &&
        (!v->ct_activations || strcmp(v->ct_activations, want) != 0))
        st = add_for(ctx, v, SERVING, "moe-activations",
                     "%s: %zu FP8 expert weights (%s, ...) with %s weights and %s activations: "
                     "vLLM's CompressedTensorsW8A8Fp8MoEMethod takes %s weights only with "
                     "input_activations strategy \"%s\" (else a bare AssertionError)",
                     v->path, lr->experts, lr->first_expert, fp8_scheme_name(v->scheme),
                     v->ct_activations ? v->ct_activations : "no", fp8_scheme_name(v->scheme),
                     want);
    if (!st && lr->no_input_scale)
        st = add_for(ctx, v, SERVING, "input-scale",
                     "%s: %zu FP8 weights (%s, ...) have no input_scale, but %s declares static "
                     "activation scales: vLLM keeps a -3.4e38 placeholder and the layers compute "
                     "garbage",
                     v->path, lr->no_input_scale, lr->first_no_input_scale, v->format_name);
    return st;
}

/* Headers, index, config against tensors. */
static fp8_status check_structure(fp8_ctx *ctx, fp8_verify *v)
{
    fp8_checkpoint *ck = v->ck;
    fp8_status st = FP8_OK;
    uint64_t bytes = 0, total;
    loader_tally lr = { 0 };
    for (size_t s = 0; s < fp8_checkpoint_shard_count(ck) && !st; s++) {
        const char *fmt = fp8_file_metadata_get(fp8_checkpoint_shard(ck, s), "format");
        if (!fmt || strcmp(fmt, "pt") != 0)
            st = add(ctx, v, FP8_SEV_WARNING, "metadata-format",
                     "%s: __metadata__ has no \"format\": \"pt\" (older transformers refuse it)",
                     fp8_checkpoint_shard_name(ck, s));
    }
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++)
        bytes += fp8_tensor_nbytes(fp8_checkpoint_tensor(ck, i, NULL));
    if (!st && fp8_checkpoint_index_total_size(ck, &total) && total != bytes)
        st = add(ctx, v, FP8_SEV_WARNING, "total-size",
                 "model.safetensors.index.json: metadata.total_size is %llu, but the tensors "
                 "hold %llu bytes",
                 (unsigned long long)total, (unsigned long long)bytes);
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck) && !st; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &shard);
        const char *file = fp8_checkpoint_shard_name(ck, shard);
        if (t->dtype == FP8_DTYPE_F8_E4M3) {
            v->fp8_weights++;
            if (v->format == FP8_FORMAT_DEFAULT)
                continue;
            st = check_weight(ctx, v, t, shard);
            if (!st)
                st = check_loader_rules(ctx, v, t, file, &lr);
            char module[1024];
            snprintf(module, sizeof module, "%.*s", (int)(strlen(t->name) - (has_suffix(t->name, ".weight") ? 7 : 0)), t->name);
            if (!st && ignored(v, module))
                st = add(ctx, v, FP8_SEV_ERROR, "ignored-but-quantized",
                         "%s: %s is F8_E4M3, but the ignore list names '%s': the loader will "
                         "read it as unquantized",
                         file, t->name, module);
            continue;
        }
        /* a scale needs its FP8 weight */
        const char *suffix = has_suffix(t->name, "_scale_inv") ? "_scale_inv"
                             : has_suffix(t->name, "_scale") && !has_suffix(t->name, "input_scale") &&
                                       !has_suffix(t->name, "k_scale") && !has_suffix(t->name, "v_scale")
                                 ? "_scale"
                                 : NULL;
        if (suffix) {
            char base[1024];
            snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - strlen(suffix)), t->name);
            const fp8_tensor_info *w = fp8_checkpoint_find(ck, base, NULL);
            /* a bare X_scale with no tensor X and no weight in its name is a
             * model's own parameter (CLIP's logit_scale), not a quantization scale */
            bool parameter = !w && !strcmp(suffix, "_scale") && !has_suffix(base, "weight");
            if (!parameter && (!w || w->dtype != FP8_DTYPE_F8_E4M3))
                st = add(ctx, v, FP8_SEV_ERROR, "orphan-scale",
                         "%s: %s: a scale without an F8_E4M3 weight '%s'", file, t->name, base);
            continue;
        }
        /* an unquantized Linear-like weight the config does not declare */
        if (v->format != FP8_FORMAT_DEFAULT && v->has_ignore_list && t->rank == 2 &&
            is_float(t->dtype) && has_suffix(t->name, ".weight")) {
            char module[1024];
            snprintf(module, sizeof module, "%.*s", (int)(strlen(t->name) - 7), t->name);
            if (!ignored(v, module))
                st = add(ctx, v, FP8_SEV_WARNING, "not-in-ignore-list",
                         "%s: %s stays %s but '%s' is not in the config's ignore list", file,
                         t->name, fp8_dtype_name(t->dtype), module);
        }
    }
    if (!st && v->fp8_weights && v->format == FP8_FORMAT_DEFAULT)
        st = add(ctx, v, FP8_SEV_ERROR, "no-quant-config",
                 "%s: %zu F8_E4M3 tensors, but %s declares no quantization_config: loaders will "
                 "read them as plain weights",
                 v->path, v->fp8_weights,
                 v->config_dir ? "config.json" : "a single file with no config.json beside it");
    if (!st && !v->fp8_weights)
        st = add_unanswered(ctx, v, "no-fp8-weights",
                            "%s: no F8_E4M3 weights: not an FP8 checkpoint (quantize makes one)",
                            v->path);
    if (!st)
        st = check_loader_totals(ctx, v, &lr);
    return st;
}

/* ---------------------------------------------------------------- values */

typedef struct {
    fp8_verify *v;
    size_t *weights; /* checkpoint indexes of the FP8 weights and scales to scan */
    size_t n;
    fp8_finding *found; /* one slot per job: at most one finding each */
    fp8_verify_stats *stats; /* one slot per job: FP8 weights fill theirs */
} value_scan;

/* The largest code magnitude of a span, NaN codes aside (branch-free, so
 * that it vectorizes). */
FP8_CLONES static unsigned char largest_code(const uint8_t *p, uint64_t n)
{
    uint8_t most = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t m = p[i] & 0x7F;
        m &= (uint8_t)-(m != 0x7F);
        most = m > most ? m : most;
    }
    return most;
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
                if (!seen || !cs.nonzero)
                    continue;
                unsigned char most = largest_code(p + c0, w);
                unsigned char *s = &seen[fp8_geometry_index(&g, x, r, c0)];
                *s = most > *s ? most : *s;
            }
        }
    }
    free(own);
    return st;
}

/* The first scale group of weight t whose largest code times its scale
 * is not finite in the model's dtype (one fp32 multiplication, then bf16
 * rounding unless the model is fp32), as dequantization computes it.  A
 * scale tensor of another shape or dtype is the structure checks' to
 * report. */
static fp8_status find_overflow(fp8_ctx *ctx, const fp8_verify *v, const fp8_tensor_info *t,
                                const unsigned char *most, uint64_t ngroups, uint64_t *first)
{
    char name[1024];
    size_t shard;
    snprintf(name, sizeof name, "%s%s", t->name, v->spec->scale_suffix);
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, name, &shard);
    bool u8 = v->spec->scale_dtype == FMT_SCALE_U8;
    if (!s || s->elements != ngroups || (u8 ? s->dtype != FP8_DTYPE_U8 : !is_float(s->dtype)))
        return FP8_OK;
    unsigned char *raw = malloc(fp8_tensor_nbytes(s) ? fp8_tensor_nbytes(s) : 1);
    if (!raw)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, 0, raw,
                                  fp8_tensor_nbytes(s));
    for (uint64_t g = 0; !st && g < ngroups; g++) {
        if (!most[g])
            continue;
        float sc;
        switch (s->dtype) {
        case FP8_DTYPE_U8: sc = raw[g] == 0xFF ? 0 : fp8_pow2(raw[g] - 127); break;
        case FP8_DTYPE_F32: memcpy(&sc, raw + 4 * g, 4); break;
        case FP8_DTYPE_BF16: sc = fp8_bf16_to_f32((uint16_t)(raw[2 * g] | raw[2 * g + 1] << 8)); break;
        default: sc = fp8_f16_to_f32((uint16_t)(raw[2 * g] | raw[2 * g + 1] << 8)); break;
        }
        float y = fp8_e4m3_to_f32(most[g]) * sc;
        uint32_t mag = fp8_f32_bits(y) & 0x7FFFFFFF;
        /* bf16 rounds to nearest even: from 0x7F7F8000 up it is inf */
        if (y == y && (v->f32_model ? mag >= 0x7F800000 : mag >= 0x7F7F8000)) {
            *first = g;
            break;
        }
    }
    free(raw);
    return st;
}

static fp8_status scan_one(void *arg, fp8_worker *w, size_t j)
{
    value_scan *sc = arg;
    fp8_verify *v = sc->v;
    size_t shard;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, sc->weights[j], &shard);
    fp8_file *f = fp8_checkpoint_shard(v->ck, shard);
    const char *file = fp8_checkpoint_shard_name(v->ck, shard);
    uint64_t nbytes = fp8_tensor_nbytes(t), saturated = 0, first_nan = UINT64_MAX;
    unsigned esize = fp8_dtype_bits(t->dtype) / 8;
    uint64_t bad = UINT64_MAX, not_pow2 = UINT64_MAX, not_held = UINT64_MAX;
    /* loaders that hold an F32 weight scale in the model's 16-bit dtype */
    unsigned narrow = 0;
    for (int l = 0; v->spec && t->dtype == FP8_DTYPE_F32 && !v->f32_model && l < FP8_LOADER_COUNT; l++)
        narrow |= v->spec->model_dtype_scales[l] && has_suffix(t->name, "weight_scale") ? BIT(l) : 0;
    /* all-zero scale groups of a weight of the declared scheme: a byte per
     * group, set when a nonzero code is seen; (x, r, c) walk the elements */
    bool groups = t->dtype == FP8_DTYPE_F8_E4M3 && v->format != FP8_FORMAT_DEFAULT &&
                  (t->rank == 2 || t->rank == 3) && t->elements;
    uint64_t ngroups = 0;
    unsigned char *seen = NULL;
    if (groups) {
        const char *suffix;
        int rank;
        uint64_t shape[3];
        bool fl;
        expected_scale(v, t, &suffix, &rank, shape, &fl);
        ngroups = 1;
        for (int d = 0; d < rank; d++)
            ngroups *= shape[d];
        if (fp8_scheme_get(v->scheme)->fixed && t->rank == 3)
            ngroups = t->shape[0];
        if (!(seen = calloc(ngroups ? ngroups : 1, 1)))
            return fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    }
    uint64_t overflow = UINT64_MAX;
    if (t->dtype == FP8_DTYPE_F8_E4M3) {
        fp8_status st = scan_codes(w->ctx, v, t, f, w->buf[0], seen, &first_nan, &saturated);
        if (!st && seen)
            st = find_overflow(w->ctx, v, t, seen, ngroups, &overflow);
        if (st) {
            free(seen);
            return st;
        }
        nbytes = 0; /* done: the loop below is for scales */
    }
    for (uint64_t off = 0; off < nbytes; off += v->chunk) {
        size_t len = nbytes - off < v->chunk ? (size_t)(nbytes - off) : v->chunk;
        fp8_status st = fp8_file_read(w->ctx, f, t, off, w->buf[0], len);
        if (st) {
            free(seen);
            return st;
        }
        const unsigned char *p = w->buf[0];
        for (size_t i = 0; i < len; i += esize) {
            uint64_t idx = (off + i) / esize;
            float s;
            if (t->dtype == FP8_DTYPE_U8) { /* E8M0: 0xFF is its NaN */
                if (p[i] == 0xFF && bad == UINT64_MAX)
                    bad = idx;
                continue;
            }
            uint32_t u = esize == 4 ? (uint32_t)p[i] | (uint32_t)p[i + 1] << 8 |
                                          (uint32_t)p[i + 2] << 16 | (uint32_t)p[i + 3] << 24
                                    : 0;
            uint16_t h = (uint16_t)(p[i] | p[i + 1] << 8);
            s = t->dtype == FP8_DTYPE_F32    ? fp8_f32_from_bits(u)
                : t->dtype == FP8_DTYPE_BF16 ? fp8_bf16_to_f32(h)
                                             : fp8_f16_to_f32(h);
            if (!(s > 0 && s <= 3.4028234663852886e38f) && bad == UINT64_MAX)
                bad = idx;
            /* a power of two: a normal with no fraction bits, or a subnormal with one bit */
            uint32_t exp = (u >> 23) & 0xFF, frac = u & 0x7FFFFF;
            bool pow2 = exp ? frac == 0 : (frac & (frac - 1)) == 0;
            if (v->ue8m0_claim && t->dtype == FP8_DTYPE_F32 && !pow2 && not_pow2 == UINT64_MAX)
                not_pow2 = idx;
            float held = v->f16_model ? fp8_f16_to_f32(fp8_f32_to_f16(s)) : fp8_bf16_to_f32(fp8_f32_to_bf16(s));
            if (narrow && held != s && not_held == UINT64_MAX)
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
    if (t->dtype == FP8_DTYPE_F8_E4M3) {
        uint64_t zero = 0;
        for (uint64_t g = 0; seen && g < ngroups; g++)
            zero += !seen[g];
        sc->stats[j] = (fp8_verify_stats){ t->name, saturated, zero, ngroups };
    }
    free(seen);
    return FP8_OK;
}

static const char *scan_label(void *arg, size_t j)
{
    const value_scan *sc = arg;
    return fp8_checkpoint_tensor(sc->v->ck, sc->weights[j], NULL)->name;
}

static uint64_t scan_bytes(void *arg, size_t j)
{
    const value_scan *sc = arg;
    return fp8_tensor_nbytes(fp8_checkpoint_tensor(sc->v->ck, sc->weights[j], NULL));
}

static size_t scan_lane(void *arg, size_t j, uint64_t *offset)
{
    value_scan *sc = arg;
    size_t shard;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(sc->v->ck, sc->weights[j], &shard);
    return ck_lane(sc->v->ck, shard, t, 0, 0, offset);
}

static fp8_status check_values(fp8_ctx *ctx, fp8_verify *v, int threads)
{
    value_scan sc = { .v = v };
    size_t nt = fp8_checkpoint_tensor_count(v->ck);
    sc.weights = fp8_xcalloc(nt + 1, sizeof *sc.weights);
    for (size_t i = 0; sc.weights && i < nt; i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, NULL);
        bool scale = has_suffix(t->name, "_scale_inv") || has_suffix(t->name, "_scale");
        if (t->dtype == FP8_DTYPE_F8_E4M3 ||
            (scale && (is_float(t->dtype) || t->dtype == FP8_DTYPE_U8)))
            sc.weights[sc.n++] = i;
    }
    sc.found = fp8_xcalloc(sc.n + 1, sizeof *sc.found);
    sc.stats = fp8_xcalloc(sc.n + 1, sizeof *sc.stats);
    v->stats = fp8_xcalloc(sc.n + 1, sizeof *v->stats);
    fp8_status st = sc.weights && sc.found && sc.stats && v->stats ? FP8_OK
                                                       : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st) {
        for (size_t j = 0; j < sc.n; j++)
            v->total += scan_bytes(&sc, j);
        fp8_jobs spec = { .njobs = sc.n, .bufsize = { v->chunk }, .threads = threads,
                          .progress = v->opts->progress, .progress_user = v->opts->progress_user,
                          .done = &v->done, .total = v->total, .label = scan_label,
                          .run = scan_one, .bytes = scan_bytes, .arg = &sc, .what = "verify",
                          .lane = scan_lane, .nlanes = fp8_checkpoint_shard_count(v->ck) };
        st = fp8_jobs_run(ctx, &spec);
    }
    for (size_t j = 0; j < sc.n; j++) {
        if (!st && sc.found[j].message &&
            (st = add_for(ctx, v, sc.found[j].loaders, sc.found[j].rule, "%s", sc.found[j].message)))
            break;
    }
    for (size_t j = 0; sc.found && j < sc.n; j++) {
        free(sc.found[j].message);
    }
    /* the weights' statistics, in name order */
    for (size_t j = 0; !st && sc.stats && j < sc.n; j++)
        if (sc.stats[j].name)
            v->stats[v->nstats++] = sc.stats[j];
    free(sc.stats);
    free(sc.found);
    free(sc.weights);
    return st;
}

/* ---------------------------------------------------------------- --against */

/*
 * One pass over the source and the checkpoint, in memory: each FP8 weight's
 * values against its source tensor (within E4M3's rounding error), and each
 * tensor that quantize would quantize re-quantized band by band, with
 * quantize's own plan and band quantizer, and compared with the
 * checkpoint's codes and scales.  Jobs are bands of whole rows of one
 * matrix; each adds what it found to its tensor's totals (sums, a minimum,
 * flags), so the report is the same for any number of threads.
 */

#define BAND_ELEMS(v) ((v)->chunk / 4) /* elements in a job's band, about */

typedef struct {
    const char *name;
    const fp8_tensor_info *t; /* the FP8 weight in v->ck; NULL when none */
    const fp8_tensor_info *s; /* its scale, as the declared format names it; NULL when none */
    size_t shard, sshard;
    const fp8_tensor_info *x; /* the source tensor */
    size_t xshard;
    size_t item;   /* its quantize plan item; SIZE_MAX when quantize keeps it */
    bool bound;    /* its values are checked against the source */
    /* the bound reads the codes and scales itself (the scale has the declared
     * layout, which dequantize reads as it does); otherwise dq_weights_read */
    bool own;
    bool compare;  /* the weight and its scale can be compared with the re-quantized bytes */
    bool copy;     /* a tensor quantize keeps: t's bytes against x's (rows are bytes) */
    uint64_t experts, rows, cols, band;
    size_t first_job;
    size_t at;     /* per-tensor scheme: its first matrix in against.amax */
    /* found, over its jobs (atomic, or under against.lock) */
    uint64_t bad, clipped, first;
    double first_x, first_y;
    bool differs[2]; /* re-quantized with the plan's scales; with floor-rounded MX scales */
} ag_item;

typedef struct {
    fp8_verify *v;
    fp8_checkpoint *src;
    dq_weights *w;
    fp8_quant_plan *plan; /* NULL: no re-quantization */
    ag_item *items;
    size_t n, *by_tensor;  /* by_tensor: v->ck's tensor -> item, SIZE_MAX when none */
    size_t njobs;
    bool amax_pass;        /* the per-tensor scheme's first pass */
    bool floor_pass;       /* MX scales not reproduced rounded up: re-quantize rounded down */
    uint64_t max_band, max_src, max_scales, max_cols; /* a band's elements, source bytes, ... */
    float *amax;           /* per-tensor scheme: by matrix */
    float *scale;
    uint32_t *scale_bits;
    size_t nmatrices;
    bool impossible;       /* quantize refuses a source value or scale: nothing to compare */
    pthread_mutex_t lock;
} against;

static uint64_t src_at(const ag_item *it, uint64_t x, uint64_t row0)
{
    return (x * it->rows + row0) * it->cols;
}

/* Job j's item, matrix and rows. */
static ag_item *job_band(const against *a, size_t j, uint64_t *x, uint64_t *row0, uint64_t *nrows)
{
    size_t lo = 0, hi = a->n;
    while (hi - lo > 1) { /* the last item whose first job is at or before j */
        size_t mid = lo + (hi - lo) / 2;
        if (a->items[mid].first_job <= j)
            lo = mid;
        else
            hi = mid;
    }
    ag_item *it = &a->items[lo];
    uint64_t per = (it->rows + it->band - 1) / it->band, k = j - it->first_job;
    *x = k / per;
    *row0 = k % per * it->band;
    *nrows = it->rows - *row0 < it->band ? it->rows - *row0 : it->band;
    return it;
}

/* The stored scales of the declared layout that rows [row0, row0 + nrows)
 * of matrix x use: the first one's index, and how many. */
static void scale_span(const fp8_verify *v, const ag_item *it, uint64_t x, uint64_t row0,
                       uint64_t nrows, uint64_t *first, uint64_t *count)
{
    fp8_geometry g;
    fp8_scheme_geometry(v->scheme, v->block_rows, v->block_cols, it->rows, it->cols, &g);
    fp8_geometry_span(&g, x, row0, nrows, first, count);
}

/* One element against its bound: 1 when clipped (beyond 464 * scale: 448
 * is the nearest E4M3 value to anything up to 464, the midpoint to 480, a
 * tie that rounds to 448's even code, so a stored scale a little below
 * amax / 448, a BF16 scale rounded to nearest, only rounds the largest
 * elements), 2 when further from the source than max(|x|/16, s/1024), in
 * double as fp8conv-formats(5), ERROR BOUND states it (a NaN source is outside). */
static inline __attribute__((always_inline)) unsigned bound_test(float xf, float yf, float sf)
{
    double xv = xf, s = sf, d = fabs(xv - (double)yf), ax = fabs(xv), bound = ax / 16;
    unsigned clipped = ax > 464.0 * s * (1 + 1e-6);
    bound = bound > s / 1024.0 ? bound : s / 1024.0;
    unsigned outside = !clipped & !(d <= bound * (1 + 1e-6));
    return clipped | outside << 1;
}

/*
 * Whether fp32 cannot tell that an element is inside its bound and not
 * clipped.  It can when |x| is finite and at most 464 s, and |x - y| <=
 * max(|x|/16, s/1024) (1 + 2^-21) in fp32, that bound at least 2^-100: each
 * fp32 operation is then within 2^-24 of the exact one (the bound's terms
 * are exact, or the smaller), which keeps the whole inside bound_test's
 * 1e-6 margin.  E4M3 rounds within 1/17 of |x| (or s/1024, for subnormal
 * codes) and saturates from 464 s, so in a checkpoint that passes, fp32 is
 * unsure of next to no element.
 */
static inline __attribute__((always_inline)) unsigned bound_unsure(float xf, float yf, float sf)
{
    float ax = fabsf(xf), d = fabsf(xf - yf), b = ax / 16, t = sf / 1024;
    b = b > t ? b : t;
    unsigned sure = (ax <= 464.0f * sf) & (ax <= 3.4028234663852886e38f) &
                    (d <= b * (1 + 0x1p-21f)) & (b >= 0x1p-100f);
    return sure ^ 1;
}

/* E4M3 code b as fp32, branch-free (so that loops over codes vectorize):
 * fp8_e4m3_to_f32's value, NaN included. */
static inline __attribute__((always_inline)) float e4m3_value(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80) << 24, e = (b >> 3) & 15, m = b & 7;
    uint32_t normal = sign | (e + 120) << 23 | m << 20;
    uint32_t sub = sign | fp8_f32_bits((float)m * 0x1p-9f);
    uint32_t subnormal = -(uint32_t)(e == 0), nan = -(uint32_t)((b & 0x7F) == 0x7F);
    uint32_t bits = (normal & ~subnormal) | (sub & subnormal);
    return fp8_f32_from_bits((bits & ~nan) | (0x7FC00000u & nan));
}

/* The value an element dequantizes to: one fp32 multiplication, as in
 * fp8_dequant_span. */
#define BOUND_Y(q, y, s, i) ((q) ? e4m3_value((q)[i]) * (s)[i] : (y)[i])

void fp8_bound_span_ref(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                        const float *s, uint64_t n, uint64_t counts[2])
{
    for (uint64_t i = 0; i < n; i++) {
        float yf = q ? fp8_e4m3_to_f32(q[i]) * s[i] : y[i];
        unsigned r = bound_test(fp8_load_f32(dt, x, i), yf, s[i]);
        counts[0] += r & 1;
        counts[1] += r >> 1;
    }
}

/* The fast bound: spans of 256 in fp32, branch-free so that the compiler
 * vectorizes them; the elements fp32 is unsure of in double, as the
 * reference.  Each dtype and source of y gets its own loops. */
static inline __attribute__((always_inline)) void bound_loop(fp8_dtype dt, const void *x,
                                                             const uint8_t *q, const float *y,
                                                             const float *s, uint64_t n,
                                                             uint64_t counts[2])
{
    uint32_t c = 0, b = 0; /* n < 2^32: a band */
    for (uint64_t i = 0; i < n; i += 256) {
        unsigned m = n - i < 256 ? (unsigned)(n - i) : 256, any = 0;
        uint8_t unsure[256];
        for (unsigned k = 0; k < m; k++) {
            unsure[k] = (uint8_t)bound_unsure(fp8_load_f32(dt, x, i + k),
                                              BOUND_Y(q, y, s, i + k), s[i + k]);
            any |= unsure[k];
        }
        for (unsigned k = 0; any && k < m; k++) {
            if (!unsure[k])
                continue;
            unsigned r = bound_test(fp8_load_f32(dt, x, i + k), BOUND_Y(q, y, s, i + k), s[i + k]);
            c += r & 1;
            b += r >> 1;
        }
    }
    counts[0] += c;
    counts[1] += b;
}

FP8_CLONES static void bound_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                                  const float *s, uint64_t n, uint64_t counts[2])
{
    if (q && dt == FP8_DTYPE_BF16)
        bound_loop(FP8_DTYPE_BF16, x, q, NULL, s, n, counts);
    else if (q && dt == FP8_DTYPE_F16)
        bound_loop(FP8_DTYPE_F16, x, q, NULL, s, n, counts);
    else if (q)
        bound_loop(FP8_DTYPE_F32, x, q, NULL, s, n, counts);
    else if (dt == FP8_DTYPE_BF16)
        bound_loop(FP8_DTYPE_BF16, x, NULL, y, s, n, counts);
    else if (dt == FP8_DTYPE_F16)
        bound_loop(FP8_DTYPE_F16, x, NULL, y, s, n, counts);
    else
        bound_loop(FP8_DTYPE_F32, x, NULL, y, s, n, counts);
}

void fp8_bound_span(fp8_dtype dt, const void *x, const uint8_t *q, const float *y,
                    const float *s, uint64_t n, uint64_t counts[2])
{
    bound_span(dt, x, q, y, s, n, counts);
}

/* Adds a span's counts to its item's; the first element outside the bound
 * (flat index `at` + i) is found again, element by element, when it may be
 * the item's first. */
static void bound_add(against *a, ag_item *it, fp8_dtype dt, const void *x, const uint8_t *q,
                      const float *y, const float *s, uint64_t n, uint64_t at)
{
    uint64_t counts[2] = { 0, 0 };
    fp8_bound_span(dt, x, q, y, s, n, counts);
    if (counts[0])
        __atomic_add_fetch(&it->clipped, counts[0], __ATOMIC_RELAXED);
    if (!counts[1])
        return;
    __atomic_add_fetch(&it->bad, counts[1], __ATOMIC_RELAXED);
    for (uint64_t i = 0; i < n; i++) {
        float yf = BOUND_Y(q, y, s, i), xf = fp8_load_f32(dt, x, i);
        if (!(bound_test(xf, yf, s[i]) & 2))
            continue;
        pthread_mutex_lock(&a->lock);
        if (at + i < it->first) {
            it->first = at + i;
            it->first_x = xf;
            it->first_y = yf;
        }
        pthread_mutex_unlock(&a->lock);
        break;
    }
}


/* The bound of a band whose codes and stored scales are read here, failing
 * as dequantize fails on them (and as dq_weights_read did for verify): a
 * scale that is not finite and positive, then a NaN code. */
static fp8_status bound_own(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                            uint64_t nrows, const unsigned char *src, const uint8_t *codes,
                            const unsigned char *raw, uint64_t sfirst, uint64_t scount,
                            float *sf, float *se)
{
    const fp8_verify *v = a->v;
    uint64_t N = it->cols, n = nrows * N, at = src_at(it, x, row0);
    fp8_geometry geo;
    fp8_scheme_geometry(v->scheme, v->block_rows, v->block_cols, it->rows, N, &geo);
    uint64_t grows = geo.group_rows, gcols = geo.group_cols;
    for (uint64_t k = 0; k < scount; k++)
        if (!dq_scale_value(it->s->dtype, raw, k, &sf[k]))
            return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': element %llu is not a finite positive scale",
                            fp8_checkpoint_shard_name(v->ck, it->sshard), it->s->name,
                            (unsigned long long)(sfirst + k));
    fp8_code_stats cs;
    fp8_code_stats_span(codes, n, &cs);
    for (uint64_t k = 0; cs.nan && k < n; k++)
        if ((codes[k] & 0x7F) == 0x7F)
            return fp8_fail(w->ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': element %llu is the E4M3 NaN code 0x%02x; no value "
                            "can be exported",
                            fp8_checkpoint_shard_name(v->ck, it->shard), it->t->name,
                            (unsigned long long)(at + k), (unsigned)codes[k]);
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    for (uint64_t r = 0; r < nrows; r++) {
        /* each element's scale: rows of one row of groups share them */
        uint64_t k0 = ((row0 + r) / grows - row0 / grows) * ceil_div(N, gcols);
        if (r == 0 || (row0 + r) % grows == 0)
            for (uint64_t c0 = 0, g = k0; c0 < N; c0 += gcols, g++) {
                uint64_t width = N - c0 < gcols ? N - c0 : gcols;
                float sg = sf[g];
                for (uint64_t c = 0; c < width; c++)
                    se[c0 + c] = sg;
            }
        bound_add(a, it, it->x->dtype, src + r * N * xs, codes + r * N, NULL, se, N, at + r * N);
    }
    return FP8_OK;
}

/* The bound of a band as dequantize reads it, for a weight whose scale is
 * not of the declared layout. */
static fp8_status bound_dq(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                           uint64_t nrows, const unsigned char *src)
{
    uint64_t n = nrows * it->cols, at = src_at(it, x, row0);
    float *y = malloc(n * 4 + 4), *sc = malloc(n * 4 + 4);
    fp8_status st = y && sc ? dq_weights_read(w->ctx, a->w, it->name, at, n, y, sc)
                            : fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st)
        bound_add(a, it, it->x->dtype, src, NULL, y, sc, n, at);
    free(y);
    free(sc);
    return st;
}

/* Re-quantizes a band of the source as quantize does and compares it with
 * the checkpoint's codes and stored scales (`codes` and `raw`, from scale
 * `sfirst` on): with the plan's scales, or (the floor pass) MX scales
 * rounded down. */
static void requantize_band(against *a, ag_item *it, uint64_t x, uint64_t row0, uint64_t nrows,
                            const unsigned char *src, const uint8_t *codes,
                            const unsigned char *raw, uint64_t sfirst, uint8_t *q,
                            unsigned char *scales)
{
    const fp8_verify *v = a->v;
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    /* bands of one block row each, as quantize's jobs are */
    uint64_t step = fp8_scheme_has_block(v->scheme) ? v->block_rows : nrows;
    for (int k = a->floor_pass; k < 1 + a->floor_pass; k++) {
        bool same = true;
        uint64_t nscales = 0, where;
        unsigned ssize = 0;
        for (uint64_t r = 0; r < nrows; r += step) {
            fp8_band b;
            uint64_t first, k0 = r * it->cols;
            fp8_quant_plan_band(a->plan, it->item, x, row0 + r,
                                nrows - r < step ? nrows - r : step, 0, it->cols, &b, &first);
            if (k)
                b.kind = FP8_SCALE_E8M0_FLOOR;
            if (b.fixed)
                b.scale = a->scale[it->at + x];
            ssize = fp8_scale_size(b.kind);
            if (fp8_band_quantize(&b, src + k0 * xs, q + k0, scales + (first - sfirst) * ssize,
                                  &where) != FP8_BAND_OK) {
                __atomic_store_n(&a->impossible, true, __ATOMIC_RELAXED);
                return;
            }
            nscales += fp8_band_scale_count(&b);
        }
        if (!it->compare)
            continue;
        same = memcmp(q, codes, nrows * it->cols) == 0;
        if (fp8_scheme_get(v->scheme)->fixed) { /* once per matrix */
            uint32_t bits = a->scale_bits[it->at + x];
            unsigned char stored[4];
            for (unsigned i = 0; i < 4; i++)
                stored[i] = (unsigned char)(bits >> (8 * i));
            same = same && (row0 || memcmp(stored, raw, ssize) == 0);
        } else {
            same = same && memcmp(scales, raw, nscales * ssize) == 0;
        }
        if (!same)
            __atomic_store_n(&it->differs[k], true, __ATOMIC_RELAXED);
    }
}

/* The per-tensor scheme's first pass: the amax of each matrix. */
static fp8_status amax_one(against *a, fp8_worker *w, ag_item *it, uint64_t x, uint64_t row0,
                           uint64_t nrows)
{
    uint64_t n = nrows * it->cols, where;
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    float m = 0;
    fp8_status st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->x,
                                  src_at(it, x, row0) * xs, w->buf[0], n * xs);
    if (st)
        return st;
    if (fp8_amax(it->x->dtype, w->buf[0], n, &m, &where) != FP8_BAND_OK) {
        __atomic_store_n(&a->impossible, true, __ATOMIC_RELAXED);
        return FP8_OK;
    }
    pthread_mutex_lock(&a->lock);
    a->amax[it->at + x] = m > a->amax[it->at + x] ? m : a->amax[it->at + x];
    pthread_mutex_unlock(&a->lock);
    return FP8_OK;
}

/* Bytes [at, at + n) of a kept tensor, in the checkpoint and the source. */
static fp8_status copy_one(against *a, fp8_worker *w, ag_item *it, uint64_t at, uint64_t n)
{
    fp8_status st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->v->ck, it->shard), it->t, at,
                                  w->buf[1], n);
    if (!st)
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->x, at,
                           w->buf[0], n);
    if (!st && memcmp(w->buf[0], w->buf[1], n) != 0)
        __atomic_store_n(&it->differs[0], true, __ATOMIC_RELAXED);
    return st;
}

/*
 * A job: rows [row0, row0 + nrows) of matrix x of an item.  The worker's
 * buffers: buf[0] the source; buf[1] the checkpoint's codes, then the
 * re-quantized ones; buf[2] the stored scales, the re-quantized ones, the
 * scales as fp32, each element's scale.
 */
static fp8_status against_one(void *arg, fp8_worker *w, size_t j)
{
    against *a = arg;
    const fp8_verify *v = a->v;
    uint64_t x, row0, nrows;
    ag_item *it = job_band(a, j, &x, &row0, &nrows);
    if (a->amax_pass)
        return it->item != SIZE_MAX ? amax_one(a, w, it, x, row0, nrows) : FP8_OK;
    if (a->floor_pass && !it->compare)
        return FP8_OK;
    if (it->copy)
        return copy_one(a, w, it, row0, nrows);
    uint64_t n = nrows * it->cols, at = src_at(it, x, row0), sfirst = 0, scount = 0;
    unsigned xs = fp8_dtype_bits(it->x->dtype) / 8;
    unsigned char *src = w->buf[0], *raw = w->buf[2];
    uint8_t *codes = w->buf[1], *q = w->buf[1] + a->max_band;
    unsigned char *scales = raw + 4 * a->max_scales;
    float *sf = (float *)(void *)(raw + 8 * a->max_scales), *se = sf + a->max_scales;
    bool requant = it->item != SIZE_MAX;
    fp8_status st = FP8_OK;
    if (it->own || requant)
        scale_span(v, it, x, row0, nrows, &sfirst, &scount);
    if (it->own || it->compare) {
        unsigned ssize = fp8_dtype_bits(it->s->dtype) / 8;
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->sshard), it->s,
                           sfirst * ssize, raw, scount * ssize);
        if (!st)
            st = fp8_file_read(w->ctx, fp8_checkpoint_shard(v->ck, it->shard), it->t, at, codes,
                               n);
    }
    if (!st)
        st = fp8_file_read(w->ctx, fp8_checkpoint_shard(a->src, it->xshard), it->x, at * xs, src,
                           n * xs);
    fp8_worker_end_turn(w);
    if (!st && it->bound && !a->floor_pass)
        st = it->own ? bound_own(a, w, it, x, row0, nrows, src, codes, raw, sfirst, scount, sf, se)
                     : bound_dq(a, w, it, x, row0, nrows, src);
    if (!st && requant)
        requantize_band(a, it, x, row0, nrows, src, codes, raw, sfirst, q, scales);
    return st;
}

static bool same_shape(const fp8_tensor_info *a, const fp8_tensor_info *b)
{
    if (a->rank != b->rank)
        return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

static const char *against_label(void *arg, size_t j)
{
    uint64_t x, row0, nrows;
    return job_band(arg, j, &x, &row0, &nrows)->name;
}

static uint64_t against_bytes(void *arg, size_t j)
{
    const against *a = arg;
    uint64_t x, row0, nrows;
    const ag_item *it = job_band(a, j, &x, &row0, &nrows);
    uint64_t n = nrows * it->cols, xs = fp8_dtype_bits(it->x->dtype) / 8;
    if (a->amax_pass)
        return it->item != SIZE_MAX ? n * xs : 0;
    if (it->copy)
        return a->floor_pass ? 0 : 2 * n;
    if (a->floor_pass)
        return it->compare ? n * xs + n : 0;
    return n * xs + (it->bound || it->compare ? n : 0);
}

/* In the lane of the weight's shard when compressed, else of the source's. */
static size_t against_lane(void *arg, size_t j, uint64_t *offset)
{
    const against *a = arg;
    uint64_t x, row0, nrows;
    const ag_item *it = job_band(a, j, &x, &row0, &nrows);
    uint64_t at = src_at(it, x, row0), xs = it->copy ? 1 : fp8_dtype_bits(it->x->dtype) / 8;
    size_t lane = FP8_NO_LANE;
    if (!a->amax_pass && (it->bound || it->compare || it->copy))
        lane = ck_lane(a->v->ck, it->shard, it->t, at, 0, offset);
    if (lane == FP8_NO_LANE)
        lane = ck_lane(a->src, it->xshard, it->x, at * xs, fp8_checkpoint_shard_count(a->v->ck),
                       offset);
    return lane;
}

static fp8_status against_run(fp8_ctx *ctx, against *a, int threads,
                              const volatile sig_atomic_t *cancel, const char *src_path)
{
    fp8_verify *v = a->v;
    for (size_t j = 0; j < a->njobs; j++)
        v->total += against_bytes(a, j);
    fp8_jobs spec = { .njobs = a->njobs, .threads = threads, .run = against_one,
                      .bytes = against_bytes, .arg = a, .what = src_path, .cancel = cancel,
                      .progress = v->opts->progress, .progress_user = v->opts->progress_user,
                      .done = &v->done, .total = v->total, .label = against_label,
                      .lane = against_lane,
                      .nlanes = fp8_checkpoint_shard_count(v->ck) +
                                fp8_checkpoint_shard_count(a->src),
                      .bufsize = { a->max_src, a->max_band * 2,
                                   a->max_scales * 12 + a->max_cols * 4 } };
    fp8_status st = fp8_jobs_run(ctx, &spec);
    if (!st && cancel && *cancel)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", src_path);
    return st;
}

/* The quantize plan for SRC with the declared scheme; NULL when quantize
 * refuses it (the scheme cannot be written, SRC looks quantized): then
 * re-quantizing is "not possible". */
static fp8_status against_plan(fp8_ctx *ctx, const fp8_verify *v, const char *src_path,
                               fp8_quant_plan **plan)
{
    static const fp8_format formats[] = { FP8_FORMAT_DEFAULT, FP8_FORMAT_HF_FP8,
                                          FP8_FORMAT_COMPRESSED_TENSORS, FP8_FORMAT_MODELOPT };
    fp8_quant_options o = FP8_QUANT_OPTIONS_INIT;
    o.scheme = v->scheme;
    o.format = formats[v->format];
    o.block_rows = v->block_rows;
    o.block_cols = v->block_cols;
    o.scale_ue8m0 = v->ue8m0_claim;
    o.mx_rounding = FP8_MX_RCEIL; /* the default; floor is tried too */
    fp8_ctx *qctx = fp8_ctx_create();
    fp8_status st = qctx ? fp8_quant_plan_create(qctx, src_path, &o, plan) : FP8_ERR_NOMEM;
    if (st == FP8_ERR_IO || st == FP8_ERR_NOMEM)
        st = fp8_fail(ctx, st, "--against %s: %s", src_path,
                      qctx ? fp8_ctx_message(qctx) : "out of memory");
    else
        st = FP8_OK;
    fp8_ctx_free(qctx);
    return st;
}

/* The plan's item for tensor `name`, SIZE_MAX when it has none or keeps it. */
static size_t plan_find(const fp8_quant_plan *p, const char *name)
{
    size_t lo = 0, hi = p ? fp8_quant_plan_count(p) : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(fp8_quant_plan_item(p, mid)->tensor->name, name);
        if (c == 0)
            return fp8_quant_plan_item(p, mid)->quantize ? mid : SIZE_MAX;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

static uint64_t scale_bytes(fp8_dtype dt, int rank, const uint64_t *shape)
{
    uint64_t n = fp8_dtype_bits(dt) / 8;
    for (int d = 0; d < rank; d++)
        n *= shape[d];
    return n;
}

/* What an item does, and its jobs' geometry. */
static void against_item(against *a, ag_item *it, bool bound, size_t item)
{
    const fp8_verify *v = a->v;
    const fp8_tensor_info *t = it->t, *x = it->x;
    it->item = item;
    it->bound = bound;
    it->first = UINT64_MAX;
    it->experts = x->rank == 3 ? x->shape[0] : 1;
    it->rows = x->rank >= 2 ? x->shape[x->rank - 2] : 1;
    it->cols = x->rank >= 1 ? x->shape[x->rank - 1] : 1;
    if (t && v->spec) {
        char name[1024], other[1024];
        snprintf(name, sizeof name, "%s%s", t->name, v->spec->scale_suffix);
        snprintf(other, sizeof other, "%s%s", t->name,
                 strcmp(v->spec->scale_suffix, "_scale") == 0 ? "_scale_inv" : "_scale");
        it->s = fp8_checkpoint_find(v->ck, name, &it->sshard);
        const fp8_tensor_info *s = it->s;
        int rank;
        uint64_t shape[3];
        bool mx = fp8_scheme_get(v->scheme)->scale_elem[0] == FP8_ELEM_E8M0;
        /* dequantize reads a directory's block size from its config.json,
         * and takes 128x128 for a lone file */
        bool same_blocks = !fp8_scheme_has_block(v->scheme) ||
                           (fp8_checkpoint_is_directory(v->ck) && !v->assumed) ||
                           (v->block_rows == 128 && v->block_cols == 128);
        if (bound && s && !fp8_checkpoint_find(v->ck, other, NULL) && same_blocks &&
            (mx ? s->dtype == FP8_DTYPE_U8 || s->dtype == FP8_DTYPE_F8_E8M0 : is_float(s->dtype))) {
            fmt_scale_shape(v->spec, t->rank, t->shape, v->block_rows, v->block_cols, &rank, shape);
            it->own = s->rank == rank;
            for (int d = 0; it->own && d < rank; d++)
                it->own = s->shape[d] == shape[d];
        }
        const fp8_quant_item *qi = item != SIZE_MAX ? fp8_quant_plan_item(a->plan, item) : NULL;
        it->compare = qi && s && t->dtype == FP8_DTYPE_F8_E4M3 && t->elements == x->elements &&
                      s->dtype == qi->scale_dtype &&
                      fp8_tensor_nbytes(s) ==
                          scale_bytes(qi->scale_dtype, qi->scale_rank, qi->scale_shape);
    }
    it->band = it->cols && BAND_ELEMS(v) / it->cols ? BAND_ELEMS(v) / it->cols : 1;
    if (fp8_scheme_has_block(v->scheme)) /* whole block rows */
        it->band = it->band < v->block_rows ? v->block_rows : it->band / v->block_rows * v->block_rows;
    it->first_job = a->njobs;
    if (x->elements)
        a->njobs += it->experts * ceil_div(it->rows, it->band);
    uint64_t band = it->band < it->rows ? it->band : it->rows, first, count;
    scale_span(v, it, 0, 0, band, &first, &count);
    uint64_t src = band * it->cols * (fp8_dtype_bits(x->dtype) / 8);
    a->max_band = band * it->cols > a->max_band ? band * it->cols : a->max_band;
    a->max_src = src > a->max_src ? src : a->max_src;
    a->max_scales = count > a->max_scales ? count : a->max_scales;
    a->max_cols = it->cols > a->max_cols ? it->cols : a->max_cols;
    if (item != SIZE_MAX) {
        it->at = a->nmatrices;
        a->nmatrices += it->experts;
    }
}

/* The items: the FP8 weights checked against the source (`bound`, by
 * tensor of v->ck) or re-quantized, then the source tensors quantize
 * quantizes that the checkpoint holds no FP8 weight for (a NaN there still
 * makes re-quantizing impossible). */
static fp8_status against_items(fp8_ctx *ctx, against *a, const bool *bound, const bool *copy)
{
    fp8_verify *v = a->v;
    size_t nt = fp8_checkpoint_tensor_count(v->ck);
    size_t np = a->plan ? fp8_quant_plan_count(a->plan) : 0;
    a->items = fp8_xcalloc(2 * nt + np + 1, sizeof *a->items);
    a->by_tensor = fp8_xcalloc(nt + 1, sizeof *a->by_tensor);
    if (!a->items || !a->by_tensor)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < nt; i++) {
        ag_item *it = &a->items[a->n];
        a->by_tensor[i] = SIZE_MAX;
        it->t = fp8_checkpoint_tensor(v->ck, i, &it->shard);
        it->x = fp8_checkpoint_find(a->src, it->t->name, &it->xshard);
        size_t item = it->x ? plan_find(a->plan, it->t->name) : SIZE_MAX;
        if (it->t->dtype != FP8_DTYPE_F8_E4M3 || !it->x || (!bound[i] && item == SIZE_MAX))
            continue;
        it->name = it->t->name;
        against_item(a, it, bound[i], item);
        a->by_tensor[i] = a->n++;
    }
    for (size_t k = 0; k < np; k++) {
        const fp8_quant_item *qi = fp8_quant_plan_item(a->plan, k);
        const fp8_tensor_info *t = fp8_checkpoint_find(v->ck, qi->tensor->name, NULL);
        if (!qi->quantize || (t && t->dtype == FP8_DTYPE_F8_E4M3))
            continue;
        ag_item *it = &a->items[a->n++];
        it->name = qi->tensor->name;
        it->x = fp8_checkpoint_find(a->src, it->name, &it->xshard);
        against_item(a, it, false, k);
    }
    for (size_t i = 0; i < nt; i++) { /* kept tensors, a band of bytes at a time */
        if (!copy[i])
            continue;
        ag_item *it = &a->items[a->n++];
        it->t = fp8_checkpoint_tensor(v->ck, i, &it->shard);
        it->name = it->t->name;
        it->x = fp8_checkpoint_find(a->src, it->name, &it->xshard);
        it->item = SIZE_MAX;
        it->copy = true;
        it->experts = it->cols = 1;
        it->rows = fp8_tensor_nbytes(it->t);
        it->band = BAND_ELEMS(v);
        it->first_job = a->njobs;
        a->njobs += ceil_div(it->rows, it->band);
        uint64_t band = it->band < it->rows ? it->band : it->rows;
        a->max_band = band > a->max_band ? band : a->max_band;
        a->max_src = band > a->max_src ? band : a->max_src;
    }
    a->amax = fp8_xcalloc(a->nmatrices + 1, sizeof *a->amax);
    a->scale = fp8_xcalloc(a->nmatrices + 1, sizeof *a->scale);
    a->scale_bits = fp8_xcalloc(a->nmatrices + 1, sizeof *a->scale_bits);
    if (!a->amax || !a->scale || !a->scale_bits)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    return FP8_OK;
}

/* Per-tensor scheme: each matrix's scale from its amax, as quantize makes it. */
static void against_tensor_scales(against *a)
{
    for (size_t i = 0; i < a->n; i++) {
        const ag_item *it = &a->items[i];
        for (uint64_t x = 0; it->item != SIZE_MAX && x < it->experts; x++) {
            fp8_band b;
            uint64_t first;
            fp8_quant_plan_band(a->plan, it->item, x, 0, 1, 0, it->cols, &b, &first);
            a->scale[it->at + x] = fp8_scale_make(b.kind, a->amax[it->at + x],
                                                  &a->scale_bits[it->at + x]);
            if (a->scale[it->at + x] == 0) /* an F16 scale above 65504 */
                a->impossible = true;
        }
    }
}

/* How many FP8 weights re-quantizing reproduces (with the MX scales of
 * the latest pass) and the first that it does not; -1 when it was not
 * possible. */
static fp8_status against_reproduced(fp8_ctx *ctx, fp8_verify *v, const against *a)
{
    long total = 0, same = 0;
    int k = a->floor_pass;
    v->requantized = v->reproduced = -1;
    free(v->first_unreproduced);
    v->first_unreproduced = NULL;
    if (!a->plan || a->impossible)
        return FP8_OK;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(v->ck); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, NULL);
        if (t->dtype != FP8_DTYPE_F8_E4M3)
            continue;
        const ag_item *it = a->by_tensor[i] != SIZE_MAX ? &a->items[a->by_tensor[i]] : NULL;
        bool ok = it && it->compare && !it->differs[k];
        total++;
        same += ok;
        if (!ok && !v->first_unreproduced && !(v->first_unreproduced = fp8_strdup(t->name)))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    v->requantized = total;
    v->reproduced = same;
    return FP8_OK;
}

static fp8_status check_against(fp8_ctx *ctx, fp8_verify *v, const char *src_path, int threads,
                                const volatile sig_atomic_t *cancel)
{
    fp8_checkpoint *src = NULL;
    dq_weights *w = NULL;
    against a = { .v = v };
    pthread_mutex_init(&a.lock, NULL);
    fp8_status st = fp8_checkpoint_open(ctx, src_path, &src);
    if (st)
        return st;
    fp8_ctx *wctx = fp8_ctx_create();
    bool can_dequantize = wctx && !dq_weights_open(wctx, v->ck,
                                                   fp8_checkpoint_is_directory(v->ck) ? v->path : NULL,
                                                   &w);
    fp8_ctx_free(wctx);
    size_t nt = fp8_checkpoint_tensor_count(v->ck);
    bool *bound = fp8_xcalloc(nt + 1, sizeof *bound), *copy = fp8_xcalloc(nt + 1, sizeof *copy);
    if (!bound || !copy) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the same tensors, with the same shapes; kept tensors copied bit for bit */
    for (size_t i = 0; i < nt && !st; i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, NULL);
        dq_action role = w ? dq_weights_role(w, t->name) : DQ_COPY;
        if (role == DQ_DROP || (t->dtype != FP8_DTYPE_F8_E4M3 && (has_suffix(t->name, "_scale") ||
                                                                  has_suffix(t->name, "_scale_inv"))))
            continue;
        const fp8_tensor_info *x = fp8_checkpoint_find(src, t->name, NULL);
        if (!x)
            st = add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s is not in %s", v->path,
                     t->name, src_path);
        else if (!same_shape(t, x))
            st = add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s has another shape in %s",
                     v->path, t->name, src_path);
        else if (t->dtype == FP8_DTYPE_F8_E4M3 && is_float(x->dtype))
            bound[i] = w != NULL;
        else if (t->dtype == x->dtype)
            copy[i] = true; /* compared by the jobs */
        else
            st = add(ctx, v, FP8_SEV_ERROR, "against-copy",
                     "%s: %s: not quantized, yet its bytes differ from %s's", v->path, t->name,
                     src_path);
    }
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(src) && !st; i++) {
        const fp8_tensor_info *x = fp8_checkpoint_tensor(src, i, NULL);
        if (!fp8_checkpoint_find(v->ck, x->name, NULL))
            st = add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s of %s is missing", v->path,
                     x->name, src_path);
    }
    a.src = src;
    a.w = w;
    if (!st && can_dequantize && v->format != FP8_FORMAT_DEFAULT)
        st = against_plan(ctx, v, src_path, &a.plan);
    if (!st)
        st = against_items(ctx, &a, bound, copy);
    if (!st && a.plan && fp8_scheme_get(v->scheme)->fixed) { /* pass 1: amax of each matrix */
        a.amax_pass = true;
        st = against_run(ctx, &a, threads, cancel, src_path);
        a.amax_pass = false;
        if (!st)
            against_tensor_scales(&a);
    }
    if (!st)
        st = against_run(ctx, &a, threads, cancel, src_path);
    for (size_t i = 0; i < a.n && !st; i++) {
        const ag_item *it = &a.items[i];
        if (it->copy && it->differs[0])
            st = add(ctx, v, FP8_SEV_ERROR, "against-copy",
                     "%s: %s: not quantized, yet its bytes differ from %s's", v->path, it->name,
                     src_path);
        if (!st && it->bad)
            st = add(ctx, v, FP8_SEV_ERROR, "against-bound",
                     "%s: %s: %llu of %llu elements are further from %s than E4M3 rounding "
                     "allows (max(|x|/16, scale/1024)); first at %llu: x = %.9g, q * scale = %.9g",
                     v->path, it->name, (unsigned long long)it->bad,
                     (unsigned long long)it->t->elements, src_path, (unsigned long long)it->first,
                     it->first_x, it->first_y);
        if (!st && it->clipped)
            st = add(ctx, v, FP8_SEV_WARNING, "saturation",
                     "%s: %s: %llu elements of %s exceed 464 * scale and were clipped to +-448",
                     v->path, it->name, (unsigned long long)it->clipped, src_path);
    }
    if (!st && can_dequantize && v->format != FP8_FORMAT_DEFAULT)
        st = against_reproduced(ctx, v, &a);
    /* MX scales round up (rceil) by default; try floor when that misses */
    if (!st && v->reproduced >= 0 && v->reproduced < v->requantized &&
        fp8_scheme_get(v->scheme)->scale_elem[0] == FP8_ELEM_E8M0) {
        a.floor_pass = true;
        if (!(st = against_run(ctx, &a, threads, cancel, src_path)))
            st = against_reproduced(ctx, v, &a);
    }
out:
    free(bound);
    free(copy);
    free(a.items);
    free(a.by_tensor);
    free(a.amax);
    free(a.scale);
    free(a.scale_bits);
    pthread_mutex_destroy(&a.lock);
    fp8_quant_plan_free(a.plan);
    dq_weights_free(w);
    fp8_checkpoint_close(src);
    return st;
}

/* ---------------------------------------------------------------- api */

/* --like REF: each difference of layout is an error. */
static fp8_status like_finding(void *arg, fp8_ctx *ctx, const char *rule, const char *message)
{
    return add_unanswered(ctx, arg, rule, "%s", message);
}

static int cmp_finding(const void *a, const void *b)
{
    const fp8_finding *x = a, *y = b;
    if (x->severity != y->severity)
        return x->severity < y->severity ? -1 : 1;
    return strcmp(x->message, y->message);
}

fp8_status fp8_verify_run(fp8_ctx *ctx, const char *path, const fp8_verify_options *opts,
                          fp8_verify **out)
{
    fp8_verify *v = calloc(1, sizeof *v);
    *out = NULL;
    if (!v)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    v->path = path;
    v->opts = opts;
    v->require = opts->require ? opts->require : FP8_LOADERS_SERVING;
    v->requantized = v->reproduced = -1;
    v->chunk = fp8_jobs_chunk(opts->threads, FP8_DEVICE_CPU);
    fp8_status st = fp8_checkpoint_open(ctx, path, &v->ck);
    if (st == FP8_ERR_BAD_INPUT) { /* the container or the index is the finding */
        const char *msg = fp8_ctx_message(ctx);
        st = add(ctx, v, FP8_SEV_ERROR,
                 strstr(msg, "index") || strstr(msg, "mapped") ? "index-mismatch" : "container",
                 "%s", msg);
    } else if (!st && !(st = read_declaration(ctx, v)) && !(st = check_structure(ctx, v)) &&
               !(st = check_parallel(ctx, v, opts->tp, opts->ep)) &&
               !(opts->like && (st = like_compare(ctx, v->ck, v->config_dir, opts->like,
                                                  like_finding, v))) &&
               opts->values &&
               !(st = check_values(ctx, v, opts->threads)) && opts->against) {
        st = check_against(ctx, v, opts->against, opts->threads, opts->cancel);
    }
    if (st) {
        fp8_verify_free(v);
        return st;
    }
    if (v->n)
        qsort(v->findings, v->n, sizeof *v->findings, cmp_finding);
    *out = v;
    return FP8_OK;
}

void fp8_verify_free(fp8_verify *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++)
        free(v->findings[i].message);
    free(v->config_dir);
    for (size_t i = 0; i < v->nignore; i++)
        free(v->ignore[i]);
    free(v->ignore);
    free(v->findings);
    free(v->format_name);
    free((char *)v->ct_activations);
    free(v->first_unreproduced);
    free(v->stats);
    fp8_checkpoint_close(v->ck);
    free(v);
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

size_t fp8_verify_count(const fp8_verify *v) { return v->n; }
const fp8_finding *fp8_verify_finding(const fp8_verify *v, size_t i)
{
    return i < v->n ? &v->findings[i] : NULL;
}
const char *fp8_verify_format(const fp8_verify *v)
{
    return v->format_name ? v->format_name : "none";
}
size_t fp8_verify_fp8_weights(const fp8_verify *v) { return v->fp8_weights; }
uint64_t fp8_verify_saturated(const fp8_verify *v) { return v->saturated; }
uint64_t fp8_verify_tp_sizes(const fp8_verify *v) { return v->tp_ok; }
long fp8_verify_reproduced(const fp8_verify *v, long *requantized, const char **first_miss)
{
    *requantized = v->requantized;
    *first_miss = v->first_unreproduced;
    return v->reproduced;
}
size_t fp8_verify_stats_count(const fp8_verify *v) { return v->nstats; }
const fp8_verify_stats *fp8_verify_stats_at(const fp8_verify *v, size_t i)
{
    return i < v->nstats ? &v->stats[i] : NULL;
}
