/*
 * verify.c - offline checks of an FP8 checkpoint (SPEC 7): the container and
 * index, the config against the tensors (every FP8 weight has exactly the
 * scale its format's loader expects; no orphan scales; the ignore list), and
 * the values (NaN codes, scales that are not finite and positive, a false
 * ue8m0 claim; codes at +-448 are counted: without the source, a clipped
 * value cannot be told from the group's largest one).  Every problem is reported, not just the first.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
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
#include "parallel.h"
#include "quant.h"

#define CHUNK FP8_CHUNK_BYTES

/* fp8_format's values: DEFAULT (none declared), HF_FP8, COMPRESSED_TENSORS, MODELOPT */
typedef enum { FMT_NONE, FMT_HF_FP8, FMT_CT, FMT_MODELOPT } v_format;

struct fp8_verify {
    const fp8_verify_options *opts;
    bool assumed;          /* the declaration is --format's, not a config.json's */
    uint64_t done, total;  /* progress over all passes */
    char *config_dir;      /* where config.json is read: the checkpoint, or a lone file's folder */
    fp8_checkpoint *ck;
    const char *path;
    v_format format;
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
    par_model model;
    uint64_t tp_ok;     /* bit t-1: loads at TP=t, for t in 1..64 */
    /* --against: FP8 weights re-quantized from SRC, and how many came out the
     * same bytes (weight and scale); -1 when not tried */
    long requantized, reproduced;
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
    v->format = (v_format)d.format;
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
    } else if (v->format == FMT_HF_FP8) {
        st = add_ignore(ctx, v, cJSON_GetObjectItemCaseSensitive(q, "modules_to_not_convert"));
    } else if (v->format == FMT_CT) {
        st = add_ignore(ctx, v, cJSON_GetObjectItemCaseSensitive(q, "ignore"));
    } else if (v->format == FMT_MODELOPT) {
        st = add_ignore(ctx, v, cJSON_GetObjectItemCaseSensitive(q, "ignore"));
        /* ModelOpt's own file lists its exclusions too */
        if (!st && !(st = ck_json_read(ctx, v->config_dir, "hf_quant_config.json", &hq)) && hq)
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
    if (!st && v->format != FMT_NONE) {
        static const char *const fmt_names[] = { "", "hf-fp8", "compressed-tensors", "modelopt" };
        char block[32] = "";
        if (v->scheme == FP8_SCHEME_BLOCK)
            snprintf(block, sizeof block, " %ux%u", v->block_rows, v->block_cols);
        if (asprintf(&v->format_name, "%s, scheme %s%s%s%s", fmt_names[v->format],
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
    if (!v->has_model || v->format == FMT_NONE) {
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
    if (!st && v->scheme == FP8_SCHEME_BLOCK && fmt_is_fused_gate_up(t->name) &&
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
    if (v->scheme == FP8_SCHEME_BLOCK &&
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
    const char *want = v->scheme == FP8_SCHEME_TENSOR    ? "tensor"
                       : v->scheme == FP8_SCHEME_CHANNEL ? "token"
                                                         : NULL;
    if (!st && v->format == FMT_CT && lr->experts && want &&
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
            if (v->format == FMT_NONE)
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
        if (v->format != FMT_NONE && v->has_ignore_list && t->rank == 2 && is_float(t->dtype) &&
            has_suffix(t->name, ".weight")) {
            char module[1024];
            snprintf(module, sizeof module, "%.*s", (int)(strlen(t->name) - 7), t->name);
            if (!ignored(v, module))
                st = add(ctx, v, FP8_SEV_WARNING, "not-in-ignore-list",
                         "%s: %s stays %s but '%s' is not in the config's ignore list", file,
                         t->name, fp8_dtype_name(t->dtype), module);
        }
    }
    if (!st && v->fp8_weights && v->format == FMT_NONE)
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

/* The E4M3 codes of weight t, read a band of whole rows at a time so that
 * every scale group is a contiguous span of a row: NaN codes (the first
 * one's flat index), codes at +-448, and each group's largest code
 * magnitude (seen[g] = code & 0x7F, NaN aside, when `seen` is not NULL,
 * numbered as SPEC 5's scale tensor lays them out).  A row longer than the worker's buffer gets its own. */
static fp8_status scan_codes(fp8_ctx *ctx, const fp8_verify *v, const fp8_tensor_info *t,
                             fp8_file *f, unsigned char *buf, unsigned char *seen,
                             uint64_t *first_nan, uint64_t *saturated)
{
    uint64_t N = t->rank >= 1 ? t->shape[t->rank - 1] : 1;
    uint64_t M = t->rank >= 2 ? t->shape[t->rank - 2] : 1;
    if (!t->elements || !N)
        return FP8_OK;
    unsigned char *own = N > CHUNK ? malloc(N) : NULL;
    if (N > CHUNK && !own)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    buf = own ? own : buf;
    uint64_t rows = t->elements / N, band = own ? 1 : CHUNK / N;
    uint64_t R = v->block_rows, C = v->block_cols, rb = ceil_div(M, R), cb = ceil_div(N, C);
    uint64_t step = !seen                           ? N
                    : v->scheme == FP8_SCHEME_BLOCK ? C
                    : v->scheme == FP8_SCHEME_MXFP8 ? 32
                                                    : N;
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
                unsigned char most = 0;
                for (uint64_t i = 0; i < w; i++) {
                    unsigned char m = p[c0 + i] & 0x7F;
                    most = m > most && m != 0x7F ? m : most;
                }
                unsigned char *g = &seen[v->scheme == FP8_SCHEME_BLOCK ? (x * rb + r / R) * cb + c0 / C
                                         : v->scheme == FP8_SCHEME_MXFP8
                                             ? (x * M + r) * (N / 32) + c0 / 32
                                         : v->scheme == FP8_SCHEME_CHANNEL ? x * M + r
                                                                           : x];
                *g = most > *g ? most : *g;
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
    uint64_t bad = UINT64_MAX, not_pow2 = UINT64_MAX;
    /* all-zero scale groups of a weight of the declared scheme: a byte per
     * group, set when a nonzero code is seen; (x, r, c) walk the elements */
    bool groups = t->dtype == FP8_DTYPE_F8_E4M3 && v->format != FMT_NONE &&
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
        if (v->scheme == FP8_SCHEME_TENSOR && t->rank == 3)
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
    for (uint64_t off = 0; off < nbytes; off += CHUNK) {
        size_t len = nbytes - off < CHUNK ? (size_t)(nbytes - off) : CHUNK;
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
        fp8_jobs spec = { .njobs = sc.n, .bufsize = { CHUNK }, .threads = threads,
                          .progress = v->opts->progress, .progress_user = v->opts->progress_user,
                          .done = &v->done, .total = v->total, .label = scan_label,
                          .run = scan_one, .bytes = scan_bytes, .arg = &sc, .what = "verify",
                          .lane = scan_lane, .nlanes = fp8_checkpoint_shard_count(v->ck) };
        st = fp8_jobs_run(ctx, &spec);
    }
    for (size_t j = 0; j < sc.n; j++) {
        if (!st && sc.found[j].message &&
            (st = add(ctx, v, sc.found[j].severity, sc.found[j].rule, "%s", sc.found[j].message)))
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

/* Each FP8 weight against its bf16 source: within E4M3's rounding error. */
typedef struct {
    fp8_verify *v;
    fp8_checkpoint *src;
    dq_weights *w;
    size_t *weights; /* indexes in v->ck of the FP8 weights */
    size_t n;
    uint64_t *bad, *first, *clipped;
    double *worst_x, *worst_y;
} bound_scan;

static fp8_status bound_one(void *arg, fp8_worker *wk, size_t j)
{
    bound_scan *b = arg;
    size_t sshard;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(b->v->ck, b->weights[j], NULL);
    const fp8_tensor_info *x = fp8_checkpoint_find(b->src, t->name, &sshard);
    uint64_t cols = t->shape[t->rank - 1], band = cols ? ((CHUNK / 4) / cols) * cols : 0;
    band = band ? band : cols;
    unsigned xs = fp8_dtype_bits(x->dtype) / 8;
    float *y = malloc(band * 4 + 4), *sc = malloc(band * 4 + 4);
    unsigned char *raw = malloc(band * xs + 4);
    fp8_status st = y && sc && raw ? FP8_OK : fp8_fail(wk->ctx, FP8_ERR_NOMEM, "out of memory");
    b->first[j] = UINT64_MAX;
    for (uint64_t first = 0; !st && first < t->elements; first += band) {
        uint64_t n = t->elements - first < band ? t->elements - first : band;
        if ((st = dq_weights_read(wk->ctx, b->w, t->name, first, n, y, sc)) ||
            (st = fp8_file_read(wk->ctx, fp8_checkpoint_shard(b->src, sshard), x, first * xs, raw,
                                n * xs)))
            break;
        for (uint64_t i = 0; i < n; i++) {
            const unsigned char *p = raw + i * xs;
            uint16_t h = (uint16_t)(p[0] | p[1] << 8);
            double xv = x->dtype == FP8_DTYPE_BF16  ? fp8_bf16_to_f32(h)
                        : x->dtype == FP8_DTYPE_F16 ? fp8_f16_to_f32(h)
                                                    : fp8_f32_from_bits((uint32_t)p[0] |
                                                                        (uint32_t)p[1] << 8 |
                                                                        (uint32_t)p[2] << 16 |
                                                                        (uint32_t)p[3] << 24);
            double d = xv - y[i], ax = xv < 0 ? -xv : xv, bound = ax / 16;
            /* 448 is the nearest E4M3 value to anything up to 464 (the
             * midpoint to 480, a tie that rounds to 448's even code), so a
             * stored scale a little below amax / 448 (a BF16 scale rounded
             * to nearest) only rounds the largest elements; beyond 464 * s
             * the code saturated: a warning, not a wrong code */
            if (ax > 464.0 * sc[i] * (1 + 1e-6)) {
                b->clipped[j]++;
                continue;
            }
            bound = bound > sc[i] / 1024.0 ? bound : sc[i] / 1024.0;
            if ((d < 0 ? -d : d) <= bound * (1 + 1e-6))
                continue;
            if (b->bad[j]++ == 0) {
                b->first[j] = first + i;
                b->worst_x[j] = xv;
                b->worst_y[j] = y[i];
            }
        }
    }
    free(y);
    free(sc);
    free(raw);
    return st;
}

static const char *bound_label(void *arg, size_t j)
{
    const bound_scan *b = arg;
    return fp8_checkpoint_tensor(b->v->ck, b->weights[j], NULL)->name;
}

static uint64_t bound_bytes(void *arg, size_t j)
{
    const bound_scan *b = arg;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(b->v->ck, b->weights[j], NULL);
    const fp8_tensor_info *x = fp8_checkpoint_find(b->src, t->name, NULL);
    return fp8_tensor_nbytes(t) + (x ? fp8_tensor_nbytes(x) : 0);
}

/* In the lane of the weight's shard when compressed, else of the source's. */
static size_t bound_lane(void *arg, size_t j, uint64_t *offset)
{
    bound_scan *b = arg;
    size_t shard, sshard;
    const fp8_tensor_info *t = fp8_checkpoint_tensor(b->v->ck, b->weights[j], &shard);
    size_t lane = ck_lane(b->v->ck, shard, t, 0, 0, offset);
    const fp8_tensor_info *x = fp8_checkpoint_find(b->src, t->name, &sshard);
    if (lane == FP8_NO_LANE && x)
        lane = ck_lane(b->src, sshard, x, 0, fp8_checkpoint_shard_count(b->v->ck), offset);
    return lane;
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

/* Whether two tensors of two checkpoints hold the same bytes. */
static fp8_status same_bytes(fp8_ctx *ctx, fp8_checkpoint *ca, const fp8_tensor_info *a, size_t sa,
                             fp8_checkpoint *cb, const fp8_tensor_info *b, size_t sb, bool *same)
{
    *same = a->dtype == b->dtype && fp8_tensor_nbytes(a) == fp8_tensor_nbytes(b);
    unsigned char *x = malloc(CHUNK / 4), *y = malloc(CHUNK / 4);
    fp8_status st = x && y ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t off = 0; !st && *same && off < fp8_tensor_nbytes(a); off += CHUNK / 4) {
        size_t len = fp8_tensor_nbytes(a) - off < CHUNK / 4 ? (size_t)(fp8_tensor_nbytes(a) - off)
                                                             : CHUNK / 4;
        if (!(st = fp8_file_read(ctx, fp8_checkpoint_shard(ca, sa), a, off, x, len)) &&
            !(st = fp8_file_read(ctx, fp8_checkpoint_shard(cb, sb), b, off, y, len)))
            *same = memcmp(x, y, len) == 0;
    }
    free(x);
    free(y);
    return st;
}

/* Re-quantizes SRC with the declared scheme into a temporary directory and
 * counts the FP8 weights (with their scales) it reproduces byte for byte. */
/* The re-quantization's progress, after the passes before it. */
static void requantize_progress(void *user, uint64_t done, uint64_t total, const char *tensor)
{
    const fp8_verify *v = user;
    v->opts->progress(v->opts->progress_user, v->done + done, v->total + total, tensor);
}

static fp8_status requantize(fp8_ctx *ctx, fp8_verify *v, const char *src_path, int threads,
                             const volatile sig_atomic_t *cancel)
{
    static const fp8_format formats[] = { FP8_FORMAT_DEFAULT, FP8_FORMAT_HF_FP8,
                                          FP8_FORMAT_COMPRESSED_TENSORS, FP8_FORMAT_MODELOPT };
    fp8_quant_options o = FP8_QUANT_OPTIONS_INIT;
    o.scheme = v->scheme;
    o.format = formats[v->format];
    o.block_rows = v->block_rows;
    o.block_cols = v->block_cols;
    o.scale_ue8m0 = v->ue8m0_claim;
    o.threads = threads;
    o.no_sync = true;
    o.cancel = cancel;
    if (v->opts->progress) {
        o.progress = requantize_progress;
        o.progress_user = v;
    }
    const char *tmpdir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *dir = NULL, *out = NULL;
    fp8_quant_plan *plan = NULL;
    fp8_checkpoint *re = NULL;
    fp8_status st = FP8_OK;
    v->requantized = v->reproduced = 0;
    if (asprintf(&dir, "%s/fp8conv-verify-XXXXXX", tmpdir) < 0) {
        dir = NULL;
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    if (!mkdtemp(dir)) {
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: cannot create a directory for the re-quantized "
                      "copy: %s (TMPDIR sets where)", dir, strerror(errno));
        free(dir);
        dir = NULL;
        goto out;
    }
    if (asprintf(&out, "%s/out", dir) < 0) {
        out = NULL;
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        /* MX scales round up (rceil) by default; try floor when that misses */
        o.mx_rounding = attempt ? FP8_MX_FLOOR : FP8_MX_RCEIL;
        /* a plan the scheme refuses means "not possible"; failing to write
         * or read the copy (a full TMPDIR, a signal) is an I/O error */
        fp8_ctx *qctx = fp8_ctx_create();
        fp8_status qst = qctx ? fp8_quant_plan_create(qctx, src_path, &o, &plan) : FP8_ERR_NOMEM;
        if (!qst && (qst = fp8_quant_plan_run(qctx, plan, out)) == FP8_OK)
            qst = fp8_checkpoint_open(qctx, out, &re);
        bool io = !qctx || qst == FP8_ERR_IO || qst == FP8_ERR_NOMEM;
        if (io)
            st = fp8_fail(ctx, qst ? qst : FP8_ERR_NOMEM, "--against %s: re-quantizing into %s: %s",
                          src_path, dir, qctx ? fp8_ctx_message(qctx) : "out of memory");
        fp8_ctx_free(qctx);
        fp8_quant_plan_free(plan);
        plan = NULL;
        if (st || qst) {
            v->requantized = v->reproduced = -1;
            break;
        }
        long total = 0, same_count = 0;
        free(v->first_unreproduced);
        v->first_unreproduced = NULL;
        for (size_t i = 0; !st && i < fp8_checkpoint_tensor_count(v->ck); i++) {
            size_t sa, sb, ssa, ssb;
            const fp8_tensor_info *a = fp8_checkpoint_tensor(v->ck, i, &sa);
            if (a->dtype != FP8_DTYPE_F8_E4M3)
                continue;
            total++;
            const fp8_tensor_info *b = fp8_checkpoint_find(re, a->name, &sb);
            char name[1024];
            snprintf(name, sizeof name, "%s%s", a->name, v->spec->scale_suffix);
            const fp8_tensor_info *as = fp8_checkpoint_find(v->ck, name, &ssa);
            const fp8_tensor_info *bs = fp8_checkpoint_find(re, name, &ssb);
            bool same = b && as && bs;
            if (same)
                st = same_bytes(ctx, v->ck, a, sa, re, b, sb, &same);
            if (!st && same)
                st = same_bytes(ctx, v->ck, as, ssa, re, bs, ssb, &same);
            same_count += same;
            if (!same && !v->first_unreproduced)
                v->first_unreproduced = fp8_strdup(a->name);
        }
        fp8_checkpoint_close(re);
        re = NULL;
        ck_remove_tree(out);
        v->requantized = total;
        v->reproduced = same_count;
        if (st || same_count == total || v->scheme != FP8_SCHEME_MXFP8)
            break;
    }
out:
    if (dir)
        ck_remove_tree(dir);
    free(dir);
    free(out);
    return st;
}

static fp8_status check_against(fp8_ctx *ctx, fp8_verify *v, const char *src_path, int threads,
                                const volatile sig_atomic_t *cancel)
{
    fp8_checkpoint *src = NULL;
    dq_weights *w = NULL;
    bound_scan b = { .v = v };
    fp8_status st = fp8_checkpoint_open(ctx, src_path, &src);
    if (st)
        return st;
    fp8_ctx *wctx = fp8_ctx_create();
    bool can_dequantize = wctx && !dq_weights_open(wctx, v->ck,
                                                   fp8_checkpoint_is_directory(v->ck) ? v->path : NULL,
                                                   &w);
    fp8_ctx_free(wctx);
    size_t nt = fp8_checkpoint_tensor_count(v->ck);
    b.src = src;
    b.w = w;
    b.weights = fp8_xcalloc(nt + 1, sizeof *b.weights);
    if (!b.weights) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* the same tensors, with the same shapes; kept tensors copied bit for bit */
    for (size_t i = 0; i < nt && !st; i++) {
        size_t sa, sb;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &sa);
        dq_action role = w ? dq_weights_role(w, t->name) : DQ_COPY;
        if (role == DQ_DROP || (t->dtype != FP8_DTYPE_F8_E4M3 && (has_suffix(t->name, "_scale") ||
                                                                  has_suffix(t->name, "_scale_inv"))))
            continue;
        const fp8_tensor_info *x = fp8_checkpoint_find(src, t->name, &sb);
        bool same = false;
        if (!x)
            st = add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s is not in %s", v->path,
                     t->name, src_path);
        else if (!same_shape(t, x))
            st = add(ctx, v, FP8_SEV_ERROR, "against-set", "%s: %s has another shape in %s",
                     v->path, t->name, src_path);
        else if (t->dtype == FP8_DTYPE_F8_E4M3 && is_float(x->dtype))
            b.weights[b.n++] = i;
        else if (!(st = same_bytes(ctx, v->ck, t, sa, src, x, sb, &same)) && !same)
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
    if (st || !w || !b.n)
        goto requant;
    b.bad = fp8_xcalloc(b.n, sizeof *b.bad);
    b.first = fp8_xcalloc(b.n, sizeof *b.first);
    b.worst_x = fp8_xcalloc(b.n, sizeof *b.worst_x);
    b.worst_y = fp8_xcalloc(b.n, sizeof *b.worst_y);
    b.clipped = fp8_xcalloc(b.n, sizeof *b.clipped);
    if (!b.bad || !b.first || !b.worst_x || !b.worst_y || !b.clipped) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < b.n; j++)
        v->total += bound_bytes(&b, j);
    fp8_jobs spec = { .njobs = b.n, .threads = threads, .run = bound_one, .bytes = bound_bytes,
                      .progress = v->opts->progress, .progress_user = v->opts->progress_user,
                      .done = &v->done, .total = v->total, .label = bound_label,
                      .arg = &b, .what = "verify", .lane = bound_lane,
                      .nlanes = fp8_checkpoint_shard_count(v->ck) + fp8_checkpoint_shard_count(src) };
    st = fp8_jobs_run(ctx, &spec);
    for (size_t j = 0; j < b.n && !st; j++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, b.weights[j], NULL);
        if (b.bad[j])
            st = add(ctx, v, FP8_SEV_ERROR, "against-bound",
                     "%s: %s: %llu of %llu elements are further from %s than E4M3 rounding "
                     "allows (max(|x|/16, scale/1024)); first at %llu: x = %.9g, q * scale = %.9g",
                     v->path, t->name, (unsigned long long)b.bad[j],
                     (unsigned long long)t->elements, src_path, (unsigned long long)b.first[j],
                     b.worst_x[j], b.worst_y[j]);
        if (!st && b.clipped[j])
            st = add(ctx, v, FP8_SEV_WARNING, "saturation",
                     "%s: %s: %llu elements of %s exceed 464 * scale and were clipped to +-448",
                     v->path, t->name, (unsigned long long)b.clipped[j], src_path);
    }
requant:
    if (!st && can_dequantize && v->format != FMT_NONE)
        st = requantize(ctx, v, src_path, threads, cancel);
out:
    free(b.weights);
    free(b.bad);
    free(b.first);
    free(b.worst_x);
    free(b.worst_y);
    free(b.clipped);
    dq_weights_free(w);
    fp8_checkpoint_close(src);
    return st;
}

/* ---------------------------------------------------------------- api */

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
    fp8_status st = fp8_checkpoint_open(ctx, path, &v->ck);
    if (st == FP8_ERR_BAD_INPUT) { /* the container or the index is the finding */
        const char *msg = fp8_ctx_message(ctx);
        st = add(ctx, v, FP8_SEV_ERROR,
                 strstr(msg, "index") || strstr(msg, "mapped") ? "index-mismatch" : "container",
                 "%s", msg);
    } else if (!st && !(st = read_declaration(ctx, v)) && !(st = check_structure(ctx, v)) &&
               !(st = check_parallel(ctx, v, opts->tp, opts->ep)) && opts->values &&
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
