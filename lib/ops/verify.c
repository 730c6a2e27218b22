/*
 * verify.c - offline checks of an FP8 checkpoint (fp8conv(1), verify): the container and
 * index, the config against the tensors (every FP8 weight has exactly the
 * scale its format's loader expects; no orphan scales; the ignore list), and
 * the values (NaN codes, scales that are not finite and positive, a false
 * ue8m0 claim; codes at +-448 are counted: without the source, a clipped
 * value cannot be told from the group's largest one).  Every problem is reported, not just the first.
 * With --against SRC, each FP8 weight is checked against its source within
 * E4M3's rounding error (each packed FP4 weight against its group's E2M1
 * grid), and SRC is re-quantized in memory, band by
 * band, as quantize would write it, to say which weights it reproduces byte
 * for byte.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ops/verify_passes.h"
#include "io/checkpoint.h"
#include "layout/like.h"
#include "ops/dequantize.h"


/* ---------------------------------------------------------------- config */

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
        char *cfg = dir ? fp8_path_join(dir, "config.json") : NULL;
        struct stat sb;
        if (cfg && lstat(cfg, &sb) == 0)
            v->config_dir = dir, dir = NULL;
        free(cfg);
        free(dir);
    }
    bool side_declared = false;
    if (v->config_dir && (st = fmt_config_read(ctx, v->config_dir, &config, &side_declared))) {
        if (st != FP8_ERR_BAD_INPUT) /* a config.json no loader parses is a finding */
            return st;
        if ((st = verify_add(ctx, v, FP8_SEV_ERROR, "config-json", "%s", fp8_ctx_message(ctx))))
            return st;
    }
    fmt_declaration d;
    fmt_declaration_read(config, &d);
    if (v->opts->assume_format != FP8_FORMAT_DEFAULT && v->config_dir &&
        (d.format != v->opts->assume_format || d.scheme != v->opts->assume_scheme)) {
        /* a declaration that says the same is taken as it is */
        char declared[160];
        if (d.format == FP8_FORMAT_DEFAULT)
            snprintf(declared, sizeof declared,
                     "config.json is there and declares no quantization_config, which a loader "
                     "needs: add one");
        else
            snprintf(declared, sizeof declared, "%s declares its own (%s, scheme %s)",
                     side_declared ? HF_QUANT_CONFIG : "config.json", fp8_format_name(d.format),
                     fp8_scheme_name(d.scheme));
        cJSON_Delete(config);
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: --format is for a checkpoint without config.json; %s/%s", v->path,
                        v->config_dir, declared);
    }
    if (v->opts->assume_format != FP8_FORMAT_DEFAULT && !v->config_dir) {
        /* --format: the declaration quantize would write, for a file with none */
        const fmt_spec *spec = fmt_spec_find(v->opts->assume_format, v->opts->assume_scheme);
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
        fmt_declaration_read(config, &d);
    }
    v->format = d.format;
    v->scheme = d.scheme;
    v->block_rows = d.block_rows;
    v->block_cols = d.block_cols;
    v->ue8m0_claim = d.ue8m0;
    v->experts = fmt_config_experts(config);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(config, "model_type");
    v->family = fp4_layout_of_model(cJSON_IsString(mt) ? mt->valuestring : NULL);
    if (cJSON_IsString(mt) && !(v->model_type = fp8_strdup(mt->valuestring)))
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (v->family)
        v->family_scale_dtype = fp4_family_scale_dtype(v->family, config, &v->family_fp8_experts);
    v->hidden = fmt_config_hidden(config);
    v->static_acts = d.static_acts;
    if (d.ct_activations && !(v->ct_activations = fp8_strdup(d.ct_activations)))
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (d.format != FP8_FORMAT_DEFAULT)
        v->spec = fmt_spec_find(d.format, d.scheme);
    if (st) {
    } else if (v->format != FP8_FORMAT_DEFAULT) {
        const char *side = fmt_side_file_name(v->format); /* it lists them too */
        if (side && v->config_dir)
            st = ck_json_read(ctx, v->config_dir, side, &hq);
        if (!st)
            st = fmt_ignore_read(ctx, v->format, config, hq, &v->ignore, &v->nignore,
                                 &v->has_ignore_list);
        if (!st)
            st = fmt_ignore_set_create(ctx, v->format, v->ignore, v->nignore, &v->ignore_set);
    } else if (d.unknown_method && !fp4_layout_of_method(d.unknown_method)) {
        st = verify_add(ctx, v, FP8_SEV_ERROR, "quant-method",
                 "config.json: quant_method '%s' is not one verify knows (fp8, "
                 "compressed-tensors, modelopt)",
                 d.unknown_method);
    }
    if (!st && d.bad_key) {
        st = verify_add(ctx, v, FP8_SEV_ERROR, "quant-config",
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
                     v->assumed       ? " (assumed: --format)"
                     : side_declared ? " (declared in " HF_QUANT_CONFIG ")"
                                     : "") < 0)
            v->format_name = NULL;
    }
    const fp4_layout *by_method = d.unknown_method ? fp4_layout_of_method(d.unknown_method) : NULL;
    if (!st && by_method && /* gpt-oss: quant_method mxfp4 declares its packed experts */
        asprintf(&v->format_name, "quant_method %s (%s)", d.unknown_method, by_method->name) < 0)
        v->format_name = NULL;
    if (v->assumed) /* --format names no ignore list: which modules stay is unknown */
        v->has_ignore_list = false;
    if (!st && v->assumed)
        st = verify_add(ctx, v, FP8_SEV_WARNING, "config-assumed",
                 "%s: no config.json: checked against the layout --format names; a loader needs "
                 "a config.json whose quantization_config declares it",
                 v->path);
    v->has_model = par_model_from_config(config, &v->model);
    const cJSON *text = par_text_config(config);
    const char *bad_text, *bad = par_config_bad_key(config, &bad_text);
    if (!st && !v->has_model && cJSON_GetObjectItemCaseSensitive(text, "hidden_size") &&
        cJSON_GetObjectItemCaseSensitive(text, "num_attention_heads"))
        st = verify_add(ctx, v, FP8_SEV_ERROR, "config-numbers",
                 "config.json: the model's sizes (hidden_size, num_attention_heads, "
                 "num_key_value_heads, head_dim, intermediate sizes, expert counts) must be "
                 "whole numbers up to 2^31, and num_attention_heads positive: loaders divide by "
                 "them%s%s%s%s%s", bad ? " (" : "", bad ? bad : "", bad ? " is " : "",
                 bad ? bad_text : "", bad ? ")" : "");
    v->f32_model = dq_judged_dtype(config, v->ck) == FP8_DTYPE_F32;
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
        r->st = verify_add_for(r->ctx, r->v, SERVING, "tp", "%s: at TP=%d: %s", r->v->path, r->tp,
                        message);
}

static void first_message(void *arg, const char *message)
{
    char *first = arg;
    if (!*first)
        snprintf(first, 1024, "%s", message);
}

/* Which TP sizes load; with --tp, the layers that would not load at it. */
static fp8_status check_parallel(fp8_ctx *ctx, fp8_verify *v, int tp, int ep)
{
    if (!v->has_model || v->format == FP8_FORMAT_DEFAULT) {
        if (tp > 1 || ep > 1)
            return verify_add_unanswered(ctx, v, "tp",
                                  "%s: --tp/--ep need config.json with hidden_size and "
                                  "num_attention_heads (at its top level or under text_config) "
                                  "and a quantization_config%s",
                                  v->path,
                                  !v->has_model ? ": the model's dimensions were not found"
                                                : ": it declares no quantization");
        return FP8_OK;
    }
    /* EP's own rule, whatever the TP: whole experts per rank */
    if (ep > 1 && v->model.experts % (uint64_t)ep) {
        fp8_status st = verify_add_for(ctx, v, SERVING, "ep",
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
        char why[1024] = "";
        par_check(&v->model, &q, 1, ep, first_message, why);
        r.st = verify_add_for(ctx, v, SERVING, "tp",
                       "%s: vLLM and SGLang load it at no TP size from 1 to 64; at TP=1: %s",
                       v->path, why);
    }
    return r.st;
}

/* ---------------------------------------------------------------- api */

/* --like REF: each difference of layout is an error, but what REF holds
 * calibrated (like-calibrated: its KV-cache scales and scheme), which
 * fp8conv cannot make and quantize --like says it leaves out, a warning. */
static fp8_status like_finding(void *arg, fp8_ctx *ctx, const char *rule, const char *message)
{
    if (strcmp(rule, "like-calibrated") == 0)
        return verify_add(ctx, arg, FP8_SEV_WARNING, rule, "%s", message);
    return verify_add_unanswered(ctx, arg, rule, "%s", message);
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
    v->requantized = v->reproduced = v->requantized_fp4 = v->profiles = -1;
    v->chunk = fp8_jobs_chunk(opts->threads, FP8_DEVICE_CPU);
    fp8_status st = fp8_checkpoint_open(ctx, path, &v->ck);
    if (st == FP8_ERR_BAD_INPUT) { /* the container or the index is the finding */
        const char *msg = fp8_ctx_message(ctx);
        st = verify_add(ctx, v, FP8_SEV_ERROR,
                 strstr(msg, "quantization_config is") ? "quant-config"
                 : strstr(msg, "index") || strstr(msg, "mapped") ? "index-mismatch"
                                                                 : "container",
                 "%s", msg);
    } else if (!st && !(st = read_declaration(ctx, v)) &&
               !(st = verify_check_structure(ctx, v)) && !(st = verify_check_kv(ctx, v)) &&
               !(st = verify_check_conditions(ctx, v)) &&
               !(st = check_parallel(ctx, v, opts->tp, opts->ep)) &&
               !(opts->like && (st = like_compare(ctx, v->ck, v->config_dir, opts->like,
                                                  like_finding, v))) &&
               opts->values &&
               !(st = verify_check_values(ctx, v, opts->threads)) && opts->against) {
        st = verify_check_against(ctx, v, opts->against, opts->threads, opts->cancel);
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
    fmt_ignore_set_free(v->ignore_set);
    free(v->model_type);
    free(v->findings);
    free(v->format_name);
    free((char *)v->ct_activations);
    free(v->first_unreproduced);
    free(v->stats);
    fp8_checkpoint_close(v->ck);
    free(v);
}

const char *fp8_verify_format(const fp8_verify *v)
{
    return v->format_name ? v->format_name : "none";
}
size_t fp8_verify_fp8_weights(const fp8_verify *v) { return v->fp8_weights; }
size_t fp8_verify_fp4_weights(const fp8_verify *v) { return v->fp4_weights; }
uint64_t fp8_verify_saturated(const fp8_verify *v) { return v->saturated; }
uint64_t fp8_verify_saturated_packed(const fp8_verify *v) { return v->saturated_packed; }
uint64_t fp8_verify_tp_sizes(const fp8_verify *v) { return v->tp_ok; }
bool fp8_verify_tp_known(const fp8_verify *v)
{
    return v->has_model && v->format != FP8_FORMAT_DEFAULT;
}
long fp8_verify_reproduced(const fp8_verify *v, long *requantized, const char **first_miss)
{
    *requantized = v->requantized;
    *first_miss = v->first_unreproduced;
    return v->reproduced;
}
long fp8_verify_requantized_fp4(const fp8_verify *v) { return v->requantized_fp4; }
long fp8_verify_profiles(const fp8_verify *v, unsigned *tried)
{
    *tried = v->profiles_tried;
    return v->profiles;
}
size_t fp8_verify_stats_count(const fp8_verify *v) { return v->nstats; }
fp8_quality fp8_verify_quality(const fp8_verify *v) { return v->quality; }
const fp8_verify_stats *fp8_verify_stats_at(const fp8_verify *v, size_t i)
{
    return i < v->nstats ? &v->stats[i] : NULL;
}
