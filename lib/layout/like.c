/*
 * like.c - a checkpoint against a reference FP8 checkpoint (issue 13):
 * verify --like lists every difference of layout, and quantize / convert
 * --like take the reference's layout as their options.
 */
#define _GNU_SOURCE
#include <libgen.h>
#include <stdarg.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "layout/like.h"
#include "io/checkpoint.h"
#include "layout/formats.h"
#include "layout/fp4.h"
#include "layout/kvscale.h"
#include "common/types.h"


/* REF: a checkpoint directory (with its config.json), a .safetensors file
 * (no config), or a config.json (no tensors: *ck stays NULL).  A directory's
 * config, or a file named config.json, is read as vLLM reads it: with
 * ModelOpt's hf_quant_config.json beside it when it declares nothing
 * (fmt_config_read). */
static fp8_status open_ref(fp8_ctx *ctx, const char *ref, fp8_checkpoint **ck, cJSON **config)
{
    struct stat sb;
    size_t n = strlen(ref);
    *ck = NULL;
    *config = NULL;
    if (stat(ref, &sb) != 0)
        return fp8_fail(ctx, FP8_ERR_IO, "--like %s: cannot open: no such file or directory",
                        ref);
    if (S_ISREG(sb.st_mode) && n >= 5 && strcmp(ref + n - 5, ".json") == 0) {
        char *a = fp8_strdup(ref), *b = fp8_strdup(ref);
        fp8_status st = !a || !b ? fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory")
                        : strcmp(basename(b), "config.json") == 0
                            ? fmt_config_read(ctx, dirname(a), config, NULL)
                            : ck_json_read(ctx, dirname(a), basename(b), config);
        free(a);
        free(b);
        return st;
    }
    fp8_status st = fp8_checkpoint_open(ctx, ref, ck);
    if (!st && S_ISDIR(sb.st_mode))
        st = fmt_config_read(ctx, ref, config, NULL);
    return st;
}

/* ---------------------------------------------------------------- calibrated data */

/* What fp8conv cannot make: it has no calibration data.  A KV-cache scale
 * is one of the KV table's names (layout/kvscale.c); a static activation
 * scale is input_scale, or Mistral's activation_scale (vLLM's
 * models/mistral3.py renames it input_scale). */
static bool is_kv_scale(const char *name)
{
    long layer;
    return kv_naming_of(name, &layer) != NULL;
}

static bool is_activation_scale(const char *name)
{
    const char *dot = strrchr(name, '.'), *last = dot ? dot + 1 : name;
    return strcmp(last, "input_scale") == 0 || strcmp(last, "activation_scale") == 0 ||
           strcmp(last, "input_global_scale") == 0; /* NVFP4 W4A4 */
}

/* A static FP8 activation scale of INPUT's own, which convert carries
 * (fp8conv(1), convert, ACTIVATION SCALES): input_scale or activation_scale. */
static bool is_mistral_act(const char *name) { return fp8_has_suffix(name, ".activation_scale"); }

static bool is_static_scale(const char *name)
{
    return is_activation_scale(name) && !fp8_has_suffix(name, ".input_global_scale");
}

/* The first tensor of `ck` (by name) that `is` takes, and how many; NULL
 * when none (or no tensors). */
static const char *first_of(const fp8_checkpoint *ck, bool (*is)(const char *), size_t *count)
{
    const char *first = NULL;
    *count = 0;
    for (size_t i = 0; ck && i < fp8_checkpoint_tensor_count(ck); i++) {
        const char *name = fp8_checkpoint_tensor(ck, i, NULL)->name;
        if (is(name) && !(*count)++)
            first = name;
    }
    return first;
}

/* The key of quantization_config that declares a calibrated KV cache:
 * compressed-tensors' kv_cache_scheme, ModelOpt's kv_cache_quant_algo. */
static bool is_kv_key(const char *path)
{
    return strcmp(path, "quantization_config.kv_cache_scheme") == 0 ||
           strcmp(path, "quantization_config.kv_cache_quant_algo") == 0;
}

/* ---------------------------------------------------------------- verify --like */

typedef struct {
    fp8_ctx *ctx;
    like_report report;
    void *arg;
    const char *here, *ref;
    fp8_status st;
} differ;

FP8_PRINTF(3, 4)
static void say(differ *d, const char *rule, const char *fmt, ...)
{
    va_list ap;
    char *msg;
    va_start(ap, fmt);
    int n = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (d->st)
        return;
    d->st = n < 0 ? fp8_fail(d->ctx, FP8_ERR_NOMEM, "out of memory")
                  : d->report(d->arg, d->ctx, rule, msg);
    if (n >= 0)
        free(msg);
}

/* Tensor by tensor, both lists sorted by name. */
static void compare_tensors(differ *d, const fp8_checkpoint *a, const fp8_checkpoint *b)
{
    size_t i = 0, j = 0, na = fp8_checkpoint_tensor_count(a), nb = fp8_checkpoint_tensor_count(b);
    while (i < na || j < nb) {
        const fp8_tensor_info *x = i < na ? fp8_checkpoint_tensor(a, i, NULL) : NULL;
        const fp8_tensor_info *y = j < nb ? fp8_checkpoint_tensor(b, j, NULL) : NULL;
        int c = !x ? 1 : !y ? -1 : strcmp(x->name, y->name);
        if (c < 0)
            say(d, "like-tensors", "%s: tensor '%s' (%s) is not in %s", d->here, x->name,
                fp8_dtype_name(x->dtype), d->ref);
        else if (c > 0 && is_kv_scale(y->name))
            say(d, "like-calibrated",
                "%s: tensor '%s' (%s) of %s is missing: a KV-cache scale, calibrated in %s; "
                "fp8conv has no calibration data",
                d->here, y->name, fp8_dtype_name(y->dtype), d->ref, d->ref);
        else if (c > 0)
            say(d, "like-tensors", "%s: tensor '%s' (%s) of %s is missing", d->here, y->name,
                fp8_dtype_name(y->dtype), d->ref);
        else if (x->dtype != y->dtype)
            say(d, "like-dtype", "%s: tensor '%s' is %s, %s in %s", d->here, x->name,
                fp8_dtype_name(x->dtype), fp8_dtype_name(y->dtype), d->ref);
        else if (x->rank != y->rank ||
                 memcmp(x->shape, y->shape, (size_t)x->rank * sizeof *x->shape) != 0) {
            char sx[96], sy[96];
            fp8_shape_text(x->rank, x->shape, sx, sizeof sx);
            fp8_shape_text(y->rank, y->shape, sy, sizeof sy);
            say(d, "like-shape", "%s: tensor '%s' has shape %s, %s in %s", d->here, x->name, sx,
                sy, d->ref);
        }
        i += c <= 0;
        j += c >= 0;
    }
}

static bool string_array(const cJSON *a)
{
    const cJSON *e;
    if (!cJSON_IsArray(a))
        return false;
    cJSON_ArrayForEach(e, a) if (!cJSON_IsString(e)) return false;
    return true;
}

static bool has_string(const cJSON *a, const char *s)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, a) if (strcmp(e->valuestring, s) == 0) return true;
    return false;
}

/* Each key (recursively) whose value differs; lists of names as sets. */
static void compare_json(differ *d, const char *path, const cJSON *x, const cJSON *y)
{
    char sub[512];
    const cJSON *e;
    if (!x && !y)
        return;
    if (!x && is_kv_key(path)) { /* REF's KV-cache scheme: its scales are calibrated */
        char *b = cJSON_PrintUnformatted(y);
        say(d, "like-calibrated",
            "%s: config.json %s is absent, %s in %s: calibrated in %s; fp8conv has no "
            "calibration data",
            d->here, path, b ? b : "set", d->ref, d->ref);
        free(b);
        return;
    }
    if (cJSON_IsObject(x) && cJSON_IsObject(y)) {
        cJSON_ArrayForEach(e, x)
        {
            snprintf(sub, sizeof sub, "%s.%s", path, e->string);
            compare_json(d, sub, e, cJSON_GetObjectItemCaseSensitive(y, e->string));
        }
        cJSON_ArrayForEach(e, y)
        {
            snprintf(sub, sizeof sub, "%s.%s", path, e->string);
            if (!cJSON_GetObjectItemCaseSensitive(x, e->string))
                compare_json(d, sub, NULL, e);
        }
        return;
    }
    if (string_array(x) && string_array(y)) {
        cJSON_ArrayForEach(e, x) if (!has_string(y, e->valuestring))
            say(d, "like-config", "%s: config.json %s has '%s', %s's does not", d->here, path,
                e->valuestring, d->ref);
        cJSON_ArrayForEach(e, y) if (!has_string(x, e->valuestring))
            say(d, "like-config", "%s: config.json %s lacks '%s' of %s", d->here, path,
                e->valuestring, d->ref);
        return;
    }
    char *a = x ? cJSON_PrintUnformatted(x) : NULL, *b = y ? cJSON_PrintUnformatted(y) : NULL;
    if (!a || !b || strcmp(a, b) != 0)
        say(d, "like-config", "%s: config.json %s is %s, %s in %s", d->here, path,
            a ? a : "absent", b ? b : "absent", d->ref);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- what a loader reads */

static void drop(cJSON *o, const char *key)
{
    while (cJSON_GetObjectItemCaseSensitive(o, key))
        cJSON_DeleteItemFromObjectCaseSensitive(o, key);
}

/* `key` dropped where its value is null (or, with `empty`, {} or [] too):
 * how a reader that defaults it to None reads its absence. */
static void drop_if_null(cJSON *o, const char *key, bool empty)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (v && (cJSON_IsNull(v) ||
              (empty && (cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child)))
        drop(o, key);
}

static void set_default(cJSON *o, const char *key, cJSON *value)
{
    if (!cJSON_GetObjectItemCaseSensitive(o, key) ||
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, key))) {
        drop(o, key);
        cJSON_AddItemToObject(o, key, value);
    } else {
        cJSON_Delete(value);
    }
}

static void lower_string(cJSON *o, const char *key)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v))
        for (char *c = v->valuestring; *c; c++)
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
}

static bool number_is(const cJSON *v, long want)
{
    if (cJSON_IsNumber(v))
        return v->valuedouble == (double)want;
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", want);
    return cJSON_IsRaw(v) && strcmp(v->valuestring, buf) == 0;
}

/* compressed-tensors' QuantizationArgs as it reads them: each field its
 * default when absent or null (quantization/quant_args.py, QuantizationArgs:
 * num_bits 8, type int, symmetric true, dynamic false, group_size,
 * block_structure, actorder, scale_dtype, zp_dtype None), the strategy it
 * infers from group_size when there is none (validate_model_after: None ->
 * tensor, -1 -> channel, > 0 -> group), strings lower-cased (its
 * validators), actorder false as None (validate_actorder), zp_dtype None
 * when symmetric (serialize_dtype), and "RxC" block structures as [R, C]
 * (validate_block_structure).  observer and observer_kwargs only say how
 * llm-compressor calibrated (QuantizationArgs.observer: "the method of
 * computing quantization parameters"; dynamic args drop it): a loader
 * reads the scales, never the observer. */
static void ct_args_read(cJSON *a)
{
    if (!cJSON_IsObject(a))
        return;
    drop(a, "observer");
    drop(a, "observer_kwargs");
    set_default(a, "num_bits", cJSON_CreateNumber(8));
    set_default(a, "type", cJSON_CreateString("int"));
    set_default(a, "symmetric", cJSON_CreateTrue());
    set_default(a, "dynamic", cJSON_CreateFalse());
    lower_string(a, "type");
    lower_string(a, "strategy");
    lower_string(a, "dynamic");
    drop_if_null(a, "group_size", false);
    drop_if_null(a, "block_structure", false);
    drop_if_null(a, "scale_dtype", false);
    cJSON *actorder = cJSON_GetObjectItemCaseSensitive(a, "actorder");
    if (cJSON_IsFalse(actorder) || cJSON_IsNull(actorder))
        drop(a, "actorder");
    else if (cJSON_IsTrue(actorder)) {
        drop(a, "actorder");
        cJSON_AddStringToObject(a, "actorder", "group");
    }
    lower_string(a, "actorder");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "symmetric")))
        drop(a, "zp_dtype");
    drop_if_null(a, "zp_dtype", false);
    cJSON *gs = cJSON_GetObjectItemCaseSensitive(a, "group_size");
    if (!cJSON_GetObjectItemCaseSensitive(a, "strategy") ||
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(a, "strategy"))) {
        drop(a, "strategy");
        cJSON_AddStringToObject(a, "strategy", !gs ? "tensor" : number_is(gs, -1) ? "channel" : "group");
    }
    cJSON *bs = cJSON_GetObjectItemCaseSensitive(a, "block_structure");
    unsigned r, c;
    if (cJSON_IsString(bs) && sscanf(bs->valuestring, "%ux%u", &r, &c) == 2) {
        int v[2] = { (int)r, (int)c };
        drop(a, "block_structure");
        cJSON_AddItemToObject(a, "block_structure", cJSON_CreateIntArray(v, 2));
    }
}

/* A quantization_config as its loaders read it: what they never read and
 * each default dropped or spelled out, one spelling of each value; the
 * ignore list is compared apart (compare_ignore), so it is dropped here. */
static cJSON *as_loaders_read(const cJSON *q, fp8_format format, const char *ignore_key)
{
    cJSON *c = cJSON_Duplicate(q, true);
    if (!cJSON_IsObject(c))
        return c;
    if (ignore_key)
        drop(c, ignore_key);
    if (format == FP8_FORMAT_HF_FP8) {
        /* fmt names the one FP8 type these loaders take (vLLM's Fp8Config.
         * from_config never reads it; "e4m3" and torch's "float8_e4m3fn"
         * are the same type); activation_scheme defaults to dynamic
         * (transformers utils/quantization_config.py FineGrainedFP8Config);
         * weight_block_size null is a per-tensor layout, as its absence */
        cJSON *fmt = cJSON_GetObjectItemCaseSensitive(c, "fmt");
        if (!fmt || cJSON_IsNull(fmt) ||
            (cJSON_IsString(fmt) && (!strcmp(fmt->valuestring, "e4m3") ||
                                     !strcmp(fmt->valuestring, "float8_e4m3fn"))))
            drop(c, "fmt");
        set_default(c, "activation_scheme", cJSON_CreateString("dynamic"));
        drop_if_null(c, "weight_block_size", false);
        drop_if_null(c, "scale_fmt", false);
    } else if (format == FP8_FORMAT_COMPRESSED_TENSORS) {
        /* quantization/quant_config.py QuantizationConfig: kv_cache_scheme
         * and global_compression_ratio None by default, the latter only
         * informational; unknown keys ignored (extra="ignore"): version,
         * and sparsity_config / transform_config, which say nothing when
         * null or empty */
        drop(c, "version");
        drop(c, "global_compression_ratio");
        drop_if_null(c, "kv_cache_scheme", false);
        drop_if_null(c, "sparsity_config", true);
        drop_if_null(c, "transform_config", true);
        cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(c, "config_groups"))
        {
            /* quant_scheme.py QuantizationScheme: these default to None */
            drop_if_null(g, "output_activations", false);
            drop_if_null(g, "input_activations", false);
            drop_if_null(g, "format", false);
            /* a group's format is the config's unless it names another
             * (vLLM quantization/compressed_tensors/compressed_tensors.py
             * get_scheme: the scheme dict's "format", else the config's) */
            cJSON *gf = cJSON_GetObjectItemCaseSensitive(g, "format"),
                  *cf = cJSON_GetObjectItemCaseSensitive(c, "format");
            if (cJSON_IsString(gf) && cJSON_IsString(cf) && !strcmp(gf->valuestring, cf->valuestring))
                drop(g, "format");
            ct_args_read(cJSON_GetObjectItemCaseSensitive(g, "weights"));
            ct_args_read(cJSON_GetObjectItemCaseSensitive(g, "input_activations"));
            ct_args_read(cJSON_GetObjectItemCaseSensitive(g, "output_activations"));
        }
        ct_args_read(cJSON_GetObjectItemCaseSensitive(c, "kv_cache_scheme"));
    }
    return c;
}

/* The modules of both checkpoints: every tensor "X.weight", as X, each
 * once in the order first seen. */
static fp8_status modules_of(fp8_ctx *ctx, const fp8_checkpoint *a, const fp8_checkpoint *b,
                             char ***out, size_t *n)
{
    const fp8_checkpoint *cks[2] = { a, b };
    size_t cap = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; cks[k] && i < fp8_checkpoint_tensor_count(cks[k]); i++) {
            const char *name = fp8_checkpoint_tensor(cks[k], i, NULL)->name;
            size_t len = strlen(name);
            if (len < 8 || strcmp(name + len - 7, ".weight") != 0)
                continue;
            if (*n == cap) {
                char **l = fp8_xreallocarray(*out, cap = 2 * cap + 16, sizeof *l);
                if (!l)
                    return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
                *out = l;
            }
            if (!((*out)[*n] = strndup(name, len - 7)))
                return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            (*n)++;
        }
    return fmt_unique(ctx, *out, n);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The two ignore lists as the sets of modules they keep (a regex and the
 * explicit names it matches are the same list), by each loader's matching
 * (hf-fp8: vLLM's and transformers'; fmt_ignore_set, so that a list of a
 * million entries takes seconds); an entry that selects no module of
 * either checkpoint compared as it is written. */
static void compare_ignore(differ *d, fp8_format format, const char *key, char **x, size_t nx,
                           char **y, size_t ny, char **modules, size_t nmodules)
{
    fmt_ignore_set *sets[2] = { NULL, NULL };
    char **lists[2] = { x, y }, **sorted[2] = { NULL, NULL };
    size_t ns[2] = { nx, ny };
    bool *selected[2] = { NULL, NULL };
    for (int k = 0; k < 2; k++) {
        selected[k] = fp8_xcalloc(ns[k] + 1, sizeof *selected[k]);
        sorted[k] = fp8_xcalloc(ns[k] + 1, sizeof *sorted[k]);
        if (!selected[k] || !sorted[k]) {
            d->st = fp8_fail(d->ctx, FP8_ERR_NOMEM, "out of memory");
            goto out;
        }
        if ((d->st = fmt_ignore_set_create(d->ctx, format, lists[k], ns[k], &sets[k])))
            goto out;
        if (ns[k]) /* an empty list may be NULL */
            memcpy(sorted[k], lists[k], ns[k] * sizeof *sorted[k]);
        qsort(sorted[k], ns[k], sizeof *sorted[k], cmp_str);
    }
    for (size_t i = 0; i < nmodules; i++) {
        const char *ex, *ey;
        fmt_ignores hx = fmt_ignore_set_match(sets[0], modules[i], &ex),
                    hy = fmt_ignore_set_match(sets[1], modules[i], &ey);
        for (int k = 0; k < 2; k++)
            fmt_ignore_set_select(sets[k], modules[i], true, selected[k]);
        for (int loose = 0; loose <= (format == FP8_FORMAT_HF_FP8); loose++) {
            fmt_ignores least = loose ? FMT_IGNORES_LOOSE : FMT_IGNORES_ALL;
            bool kx = hx >= least, ky = hy >= least;
            const char *how = loose ? " as transformers matches entries" : "";
            if (kx && !ky)
                say(d, "like-config", "%s: config.json quantization_config.%s keeps '%s' "
                    "unquantized (entry '%s')%s, %s's does not", d->here, key, modules[i], ex,
                    how, d->ref);
            else if (!kx && ky)
                say(d, "like-config", "%s: config.json quantization_config.%s does not keep "
                    "'%s' unquantized%s, %s's does (entry '%s')", d->here, key, modules[i], how,
                    d->ref, ey);
            if (kx != ky)
                break; /* one finding a module */
        }
    }
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < ns[k]; i++) {
            bool other = bsearch(&lists[k][i], sorted[1 - k], ns[1 - k], sizeof *sorted[1 - k],
                                 cmp_str) != NULL;
            if (!selected[k][i] && !other)
                say(d, "like-config", k == 0 ? "%s: config.json quantization_config.%s has '%s' "
                    "(no module of either checkpoint), %s's does not"
                    : "%s: config.json quantization_config.%s lacks '%s' of %s (no module of "
                    "either checkpoint)", d->here, key, lists[k][i], d->ref);
        }
out:
    for (int k = 0; k < 2; k++) {
        fmt_ignore_set_free(sets[k]);
        free(selected[k]);
        free(sorted[k]);
    }
}

fp8_status like_compare(fp8_ctx *ctx, const fp8_checkpoint *ck, const char *config_dir,
                        const char *ref, like_report report, void *arg)
{
    fp8_checkpoint *rck = NULL;
    cJSON *rconfig = NULL, *config = NULL, *hx = NULL, *hy = NULL, *qx = NULL, *qy = NULL;
    char **ix = NULL, **iy = NULL, **modules = NULL;
    size_t nix = 0, niy = 0, nmodules = 0;
    bool lx = false, ly = false; /* a list or none: the same to a loader, an empty one */
    differ d = { ctx, report, arg, config_dir ? config_dir : fp8_checkpoint_shard_name(ck, 0),
                 ref, FP8_OK };
    fp8_status st = open_ref(ctx, ref, &rck, &rconfig);
    if (!st && config_dir)
        st = fmt_config_read(ctx, config_dir, &config, NULL);
    if (st)
        goto out;
    if (rck)
        compare_tensors(&d, ck, rck);
    /* the quantization_config as loaders read it (each format's ignore list
     * as the modules it selects) */
    fmt_declaration dx, dy;
    fmt_declaration_read(config, &dx);
    fmt_declaration_read(rconfig, &dy);
    const char *key = dx.format == dy.format ? fmt_ignore_key(dx.format) : NULL;
    const char *side = key ? fmt_side_file_name(dx.format) : NULL;
    if (side && config_dir)
        st = ck_json_read(ctx, config_dir, side, &hx);
    if (!st && side && rck && fp8_checkpoint_is_directory(rck))
        st = ck_json_read(ctx, ref, side, &hy);
    if (!st && key)
        st = fmt_ignore_read(ctx, dx.format, config, hx, &ix, &nix, &lx);
    if (!st && key)
        st = fmt_ignore_read(ctx, dy.format, rconfig, hy, &iy, &niy, &ly);
    if (!st && key)
        st = modules_of(ctx, ck, rck, &modules, &nmodules);
    if (st)
        goto out;
    qx = as_loaders_read(cJSON_GetObjectItemCaseSensitive(config, "quantization_config"),
                         dx.format, key);
    qy = as_loaders_read(cJSON_GetObjectItemCaseSensitive(rconfig, "quantization_config"),
                         dy.format, key);
    compare_json(&d, "quantization_config", qx, qy);
    if (key)
        compare_ignore(&d, dx.format, key, ix, nix, iy, niy, modules, nmodules);
    st = d.st;
out:
    cJSON_Delete(qx);
    cJSON_Delete(qy);
    cJSON_Delete(hx);
    cJSON_Delete(hy);
    fp8_strings_free(ix, nix);
    fp8_strings_free(iy, niy);
    fp8_strings_free(modules, nmodules);
    cJSON_Delete(config);
    cJSON_Delete(rconfig);
    fp8_checkpoint_close(rck);
    return st;
}

/* ---------------------------------------------------------------- quantize and convert --like */

struct fp8_like {
    fmt_declaration decl;
    char **ignore, **notes;
    size_t nignore, nnotes;
    /* the reference's ignore list as the output's config declares it: its
     * entries, explicit names mapped onto INPUT's; listed: it has one */
    char **declared;
    size_t ndeclared;
    bool listed;
    /* the dtype of the reference's float scales, when it has tensors and
     * they all have one */
    bool scale_set;
    fp8_dtype scale_dtype;
    /* every scale of the reference has its layout's alt_scale_suffix */
    bool scale_alt_name;
    /* compressed-tensors: the targets of its one config group */
    char **targets;
    size_t ntargets;
    /* the reference and INPUT have the same FP8 weights, by name */
    bool same_weights;
    /* the naming convention of the reference's KV-cache scales, when they
     * all have one with k and v names (kvscale.c's rows); else NULL */
    const char *kv_names;
    /* "activation_scale" when every static activation scale of the
     * reference has Mistral's name; else NULL */
    const char *act_name;
    /* INPUT's X.weight names in the order of X without its model prefix
     * (unprefixed), made when a reference module is not INPUT's own */
    const char **stems;
    size_t nstems;
};

static fp8_status push(fp8_ctx *ctx, char ***list, size_t *n, char *s)
{
    char **l = s ? fp8_xreallocarray(*list, *n + 1, sizeof *l) : NULL;
    if (!l) {
        free(s);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    *list = l;
    l[(*n)++] = s;
    return FP8_OK;
}

/* `s` with the characters of POSIX extended regexes escaped; a glob's * and
 * ? made .* and . when `glob`. */
static char *regex_of(const char *s, bool glob)
{
    char *out = malloc(2 * strlen(s) + 16), *o = out;
    if (!out)
        return NULL;
    *o++ = '^';
    for (; *s; s++) {
        if (glob && (*s == '*' || *s == '?')) {
            o += sprintf(o, "%s", *s == '*' ? ".*" : ".");
            continue;
        }
        if (strchr(".[]()*+?{}|^$\\", *s))
            *o++ = '\\';
        *o++ = *s;
    }
    strcpy(o, "\\.weight$");
    return out;
}

/* A module name without its model prefix: what follows the last component
 * ending in "model" (model., language_model., text_model.). */
static const char *unprefixed(const char *name, size_t n)
{
    const char *rest = name;
    for (const char *p = name; p < name + n; p++)
        if (*p == '.' && p - name >= 5 && memcmp(p - 5, "model", 5) == 0)
            rest = p + 1;
    return rest;
}

/* A tensor name X.weight's X without its model prefix: at *n bytes. */
static const char *stem_of(const char *name, size_t *n)
{
    size_t len = strlen(name) - 7;
    const char *own = unprefixed(name, len);
    *n = (size_t)(name + len - own);
    return own;
}

/* The stem of `name` against the nref bytes of ref, as strcmp orders them. */
static int cmp_stem_text(const char *name, const char *ref, size_t nref)
{
    size_t n;
    const char *own = stem_of(name, &n);
    int c = memcmp(own, ref, n < nref ? n : nref);
    return c ? c : (n > nref) - (n < nref);
}

static int cmp_stems(const void *a, const void *b)
{
    size_t n;
    const char *own = stem_of(*(const char *const *)b, &n);
    return cmp_stem_text(*(const char *const *)a, own, n);
}

/* A REF module onto INPUT: its own name, or the one name that differs only
 * by its model prefix (model.language_model.x for model.x, or the reverse). */
static fp8_status keep_module(fp8_ctx *ctx, fp8_like *l, const fp8_checkpoint *ck,
                              const char *module, const char *input, const char *ref_path,
                              char **as)
{
    if (strncmp(module, "re:", 3) == 0) { /* quantize matches it as compressed-tensors does */
        fmt_pattern compiled;
        char why[160];
        /* said here: quantize would name it as an --ignore the user never gave */
        if (fmt_pattern_compile(&compiled, module, why, sizeof why))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "--like %s: the ignore list of its quantization_config has the "
                            "entry '%s': %s", ref_path, module, why);
        fmt_pattern_free(&compiled);
        return push(ctx, &l->ignore, &l->nignore, fp8_strdup(module));
    }
    if (strpbrk(module, "*?"))
        return push(ctx, &l->ignore, &l->nignore, regex_of(module, true));
    if (ck_find_with(ck, module, strlen(module), ".weight", NULL))
        return push(ctx, &l->ignore, &l->nignore, regex_of(module, false));
    const char *found = NULL, *ref = unprefixed(module, strlen(module));
    size_t matches = 0;
    if (!l->stems) { /* once: a binary search a module then, not a scan */
        size_t n = fp8_checkpoint_tensor_count(ck);
        if (!(l->stems = fp8_xcalloc(n + 1, sizeof *l->stems)))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            const char *name = fp8_checkpoint_tensor(ck, i, NULL)->name;
            if (strlen(name) >= 8 && fp8_has_suffix(name, ".weight"))
                l->stems[l->nstems++] = name;
        }
        qsort(l->stems, l->nstems, sizeof *l->stems, cmp_stems);
    }
    size_t lo = 0, hi = l->nstems, nref = strlen(ref);
    while (lo < hi) { /* the first stem not below ref */
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_stem_text(l->stems[mid], ref, nref) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < l->nstems && cmp_stem_text(l->stems[lo], ref, nref) == 0; lo++) {
        found = l->stems[lo];
        matches++;
    }
    char *msg = NULL;
    if (matches == 1) {
        free(*as);
        if (!(*as = fp8_name_with(found, strlen(found) - 7, "")))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        return push(ctx, &l->ignore, &l->nignore, regex_of(*as, false));
    }
    if (asprintf(&msg, "--like: the reference keeps module '%s' unquantized; %s has %s", module,
                 input, matches ? "several modules of that name: none is kept for it"
                                : "no such module") < 0)
        msg = NULL;
    return push(ctx, &l->notes, &l->nnotes, msg);
}

/* keep_module, and the entry the output's config declares for it: REF's
 * own, with an explicit name mapped onto INPUT's. */
static fp8_status map_module(fp8_ctx *ctx, fp8_like *l, const fp8_checkpoint *ck,
                             const char *module, const char *input, const char *ref_path)
{
    char *as = fp8_strdup(module);
    fp8_status st = as ? keep_module(ctx, l, ck, module, input, ref_path, &as)
                       : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st)
        return push(ctx, &l->declared, &l->ndeclared, as);
    free(as);
    return st;
}

/* The one dtype of REF's float scales (a scale: the format's suffix beside
 * an F8_E4M3 weight); false when it has none, or several. */
static bool scale_dtype_of_ref(const fp8_checkpoint *rck, const fmt_spec *spec, fp8_dtype *out)
{
    bool found = false;
    size_t n = rck && spec ? fp8_checkpoint_tensor_count(rck) : 0;
    for (size_t i = 0; i < n; i++) {
        const fp8_tensor_info *w = fp8_checkpoint_tensor(rck, i, NULL);
        if (!fp8_dtype_holds_codes(w->dtype))
            continue;
        const fp8_tensor_info *s = ck_find_with(rck, w->name, strlen(w->name), spec->scale_suffix,
                                                NULL);
        if (!s || (s->dtype != FP8_DTYPE_F32 && s->dtype != FP8_DTYPE_BF16 &&
                   s->dtype != FP8_DTYPE_F16))
            continue;
        if (found && s->dtype != *out)
            return false;
        found = true;
        *out = s->dtype;
    }
    return found;
}

/* Whether REF names every FP8 weight's scale with its layout's other name
 * (the row's alt_scale_suffix): false when it has no FP8 weight, or one
 * scale named with the row's own suffix or none. */
static bool scale_alt_of_ref(const fp8_checkpoint *rck, const fmt_spec *spec)
{
    bool found = false;
    size_t n = rck && spec && spec->alt_scale_suffix ? fp8_checkpoint_tensor_count(rck) : 0;
    for (size_t i = 0; i < n; i++) {
        const fp8_tensor_info *w = fp8_checkpoint_tensor(rck, i, NULL);
        if (!fp8_dtype_holds_codes(w->dtype))
            continue;
        if (!ck_find_with(rck, w->name, strlen(w->name), spec->alt_scale_suffix, NULL))
            return false;
        found = true;
    }
    return found;
}

/* The targets of REF's compressed-tensors config group, when it has one
 * group and each target is a string. */
static fp8_status ct_targets_of_ref(fp8_ctx *ctx, fp8_like *l, const cJSON *config)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(q, "config_groups");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArraySize(groups) == 1 ? groups->child : NULL, "targets"), *e;
    fp8_status st = FP8_OK;
    if (!cJSON_IsArray(t))
        return FP8_OK;
    cJSON_ArrayForEach(e, t)
        if (!cJSON_IsString(e))
            return FP8_OK;
    cJSON_ArrayForEach(e, t)
        if (!st)
            st = push(ctx, &l->targets, &l->ntargets, fp8_strdup(e->valuestring));
    return st;
}

/* The number of FP8 weights of a that b holds as FP8 weights too (by name). */
static size_t fp8_weights_in(const fp8_checkpoint *a, const fp8_checkpoint *b, size_t *all)
{
    size_t n = 0, in = 0;
    for (size_t i = 0; a && i < fp8_checkpoint_tensor_count(a); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(a, i, NULL), *u;
        if (!fp8_dtype_holds_codes(t->dtype))
            continue;
        n++;
        in += b && (u = fp8_checkpoint_find(b, t->name, NULL)) && fp8_dtype_holds_codes(u->dtype);
    }
    *all = n;
    return in;
}

/* The one naming convention of REF's KV-cache scales (a kvscale.c row's,
 * with both a k and a v name), NULL when it has none or several. */
static const char *kv_names_of_ref(const fp8_checkpoint *rck)
{
    const char *conv = NULL;
    size_t n = rck ? fp8_checkpoint_tensor_count(rck) : 0;
    for (size_t i = 0; i < n; i++) {
        long layer;
        const kv_naming *k = kv_naming_of(fp8_checkpoint_tensor(rck, i, NULL)->name, &layer);
        if (!k)
            continue;
        if (conv && strcmp(conv, k->convention))
            return NULL;
        conv = k->convention;
    }
    return conv && kv_naming_for(conv, KV_ROLE_K) && kv_naming_for(conv, KV_ROLE_V) ? conv : NULL;
}

/* Why REF's activations are static (calibrated input scales), as its
 * loaders read the declaration; NULL when they are dynamic.  fp8conv writes
 * dynamic activations only: with static ones the release's loaders compute
 * with a calibrated scale fp8conv cannot make. */
static const char *static_activations(const cJSON *config, const fmt_declaration *d)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(q, "activation_scheme");
    /* vLLM model_executor/layers/quantization/fp8.py, Fp8LinearMethod.
     * create_weights: activation_scheme "static" registers an input_scale
     * per FP8 linear, which process_weights_after_loading uses */
    if (d->format == FP8_FORMAT_HF_FP8 && cJSON_IsString(a) && strcmp(a->valuestring, "dynamic"))
        return "activation_scheme is not dynamic: vLLM's Fp8Config then reads an input_scale "
               "per FP8 linear";
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(q, "config_groups");
    a = cJSON_GetObjectItemCaseSensitive(g ? g->child : NULL, "input_activations");
    if (d->format == FP8_FORMAT_COMPRESSED_TENSORS &&
        cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(a, "dynamic")))
        return "input_activations dynamic false: compressed-tensors reads an input_scale per "
               "FP8 linear";
    /* the table's ModelOpt FP8 row (formats.c MODELOPT_STATIC: vLLM
     * quantization/modelopt.py, ModelOptFp8LinearMethod) */
    const fmt_spec *spec = fmt_spec_find(d->format, d->scheme);
    a = cJSON_GetObjectItemCaseSensitive(q, "quant_algo");
    if (spec && spec->needs_input_scale && spec->modelopt_algo && cJSON_IsString(a) &&
        strcasecmp(a->valuestring, spec->modelopt_algo) == 0)
        return "quant_algo FP8: vLLM's ModelOptFp8Config reads a static input_scale per FP8 "
               "linear";
    return NULL;
}

/* A packed-FP4 reference that quantizes activations too (W4A4): fp8conv
 * writes the weight-only forms.  NVFP4 activations need a calibrated
 * second-level scale per linear (vLLM compressed_tensors_w4a4_nvfp4.py,
 * CompressedTensorsW4A4Fp4.create_weights: input_global_scale; modelopt.py
 * ModelOptNvFp4LinearMethod, quant_algo NVFP4: input_scale): refused, as
 * static FP8 is; MXFP4's are dynamic: written weight-only, with a note. */
static fp8_status like_fp4_activations(fp8_ctx *ctx, fp8_like *l, const char *ref,
                                       const fp8_checkpoint *rck, const cJSON *config)
{
    const fmt_spec *spec = fmt_spec_find(l->decl.format, l->decl.scheme);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(q, "config_groups");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(g ? g->child : NULL, "input_activations");
    const cJSON *algo = cJSON_GetObjectItemCaseSensitive(q, "quant_algo");
    bool modelopt_acts = spec && spec->modelopt_algo_acts && cJSON_IsString(algo) &&
                         strcasecmp(algo->valuestring, spec->modelopt_algo_acts) == 0;
    if (!fmt_code_layout(spec) || !(cJSON_IsObject(a) || modelopt_acts))
        return FP8_OK;
    if (fp8_scheme_has_second_level(l->decl.scheme)) {
        size_t n;
        const char *first = first_of(rck, is_activation_scale, &n);
        bool mo = l->decl.format == FP8_FORMAT_MODELOPT;
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "--like %s: it is W4A4 NVFP4 (%s%s%s%s): vLLM's %s reads a calibrated "
                        "%s per linear, and fp8conv has no calibration data: quantize --scheme "
                        "nvfp4%s without --like writes the weight-only form (%s)",
                        ref, mo ? "quant_algo NVFP4" : "input_activations declared",
                        first ? "; calibrated: '" : "", first ? first : "", first ? "'" : "",
                        mo ? "ModelOptNvFp4LinearMethod" : "CompressedTensorsW4A4Fp4",
                        mo ? "input_scale" : "input_global_scale", mo ? " --format modelopt" : "",
                        mo ? "quant_algo W4A16_NVFP4" : "NVFP4A16");
    }
    char *msg;
    if (asprintf(&msg, "--like %s: its activations are %s too (W4A4, dynamic); fp8conv writes "
                 "the weight-only form (input_activations null)",
                 ref, fp8_scheme_name(l->decl.scheme)) < 0)
        msg = NULL;
    return push(ctx, &l->notes, &l->nnotes, msg);
}

/* Whether REF's weights, as compressed-tensors declares them
 * (quantization/quant_args.py QuantizationArgs: num_bits, symmetric,
 * group_size), are not the row fp8conv writes for a scheme that takes a
 * group (INT4: symmetric, the element's bits, a group of run or run_alt). */
static bool run_row_differs(const cJSON *config, const fmt_declaration *d)
{
    const fp8_scheme_traits *t = fp8_scheme_get(d->scheme);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(config, "quantization_config"), "config_groups");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(g ? g->child : NULL, "weights");
    const cJSON *bits = cJSON_GetObjectItemCaseSensitive(w, "num_bits");
    return t && t->run_alt && d->format == FP8_FORMAT_COMPRESSED_TENSORS &&
           ((d->group && d->group != t->run && d->group != t->run_alt) ||
            cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(w, "symmetric")) ||
            (bits && !number_is(bits, fp8_elem_get(t->elem)->bits)));
}

/* The refusal of a reference with static activations: one shape for every
 * format (REF, its first calibrated tensor, the rule, what to do). */
static fp8_status refuse_static(fp8_ctx *ctx, const char *ref, const fp8_checkpoint *rck,
                                const char *why)
{
    size_t n;
    const char *first = first_of(rck, is_activation_scale, &n);
    return first ? fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "--like %s: its activations are static: '%s' (and %zu more) is "
                            "calibrated (%s); fp8conv has no calibration data and writes dynamic "
                            "activations only: quantize without --like, with --format hf-fp8 or "
                            "--format compressed-tensors (dynamic activations), or --like what "
                            "'fp8conv convert %s DIR' writes (its scale names kept, "
                            "dynamic activations)",
                            ref, first, n - 1, why, ref)
                 : fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "--like %s: its activations are static: %s (%s); fp8conv has no "
                            "calibration data and writes dynamic activations only: quantize "
                            "without --like, with --format hf-fp8 or --format compressed-tensors "
                            "(dynamic activations)",
                            ref, rck ? "its config says so, with no input_scale"
                                     : "its config says so", why);
}

/* A warning for REF's calibrated KV cache: scales and a declared scheme the
 * output does not have.  vLLM then uses 1.0 only where the user asks for an
 * FP8 KV cache (quantization/kv_cache.py, BaseKVCacheMethod.
 * process_weights_after_loading: no scale loaded and kv_cache_dtype not
 * "auto" gives 1.0; "auto" uses none). */
static fp8_status note_kv_cache(fp8_ctx *ctx, fp8_like *l, const char *ref,
                                const fp8_checkpoint *rck, const fp8_checkpoint *ck,
                                const cJSON *config)
{
    size_t own;
    if (first_of(ck, is_kv_scale, &own)) /* INPUT's own: convert carries and declares them */
        return FP8_OK;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(q, "kv_cache_scheme");
    const cJSON *algo = cJSON_GetObjectItemCaseSensitive(q, "kv_cache_quant_algo");
    const char *key = cJSON_IsObject(scheme) ? "kv_cache_scheme"
                      : cJSON_IsString(algo) ? "kv_cache_quant_algo"
                                             : NULL;
    size_t n;
    const char *first = first_of(rck, is_kv_scale, &n);
    char count[48] = "", *msg;
    if (!key && !first)
        return FP8_OK;
    if (first)
        snprintf(count, sizeof count, "%zu scale%s: '", n, n == 1 ? "" : "s");
    if (asprintf(&msg,
                 "--like %s: not reproduced: its calibrated KV cache (%s%s%s%s%s%s): fp8conv has "
                 "no calibration data, so the output declares no KV-cache scheme (vLLM runs an "
                 "FP8 KV cache, where one is asked for, at scale 1.0)",
                 ref, count, first ? first : "", !first ? "" : n > 1 ? "', ..." : "'",
                 first && key ? "; " : "", key ? "quantization_config." : "", key ? key : "") < 0)
        msg = NULL;
    return push(ctx, &l->notes, &l->nnotes, msg);
}

fp8_status fp8_like_open(fp8_ctx *ctx, const char *ref, const char *input, fp8_like **out)
{
    fp8_checkpoint *rck = NULL, *ck = NULL;
    cJSON *config = NULL, *hq = NULL;
    fp8_like *l = calloc(1, sizeof *l);
    *out = NULL;
    if (!l)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_status st = open_ref(ctx, ref, &rck, &config);
    if (!st && !config)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "--like %s: no config.json to copy a layout from",
                      ref);
    if (st)
        goto out;
    fmt_declaration_read(config, &l->decl);
    const fmt_declaration *d = &l->decl;
    const char *act = static_activations(config, d);
    /* INPUT has calibrated activation scales of its own (convert of a
     * static checkpoint): a static REF is reproduced with them */
    size_t calibrated = 0;
    if (act && !fp8_checkpoint_open(ctx, input, &ck))
        first_of(ck, is_static_scale, &calibrated);
    const fp4_layout *read_only = d->unknown_method ? fp4_layout_of_method(d->unknown_method) : NULL;
    if (read_only) /* gpt-oss: read (inspect, verify, export, diff), not written */
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "--like %s: its layout (%s, quant_method %s: fused 3-D experts as "
                      "_blocks and _scales) is one fp8conv reads but does not write: quantize "
                      "--scheme mxfp4 writes MXFP4 in compressed-tensors' layout "
                      "(mxfp4-pack-quantized), one weight per expert",
                      ref, read_only->name, d->unknown_method);
    else if (d->format == FP8_FORMAT_DEFAULT || d->bad_key)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "--like %s: config.json declares no FP8 layout fp8conv reads (%s)", ref,
                      d->bad_key ? d->bad_key
                      : d->unknown_method ? d->unknown_method
                                          : "no quantization_config");
    else if (act && !calibrated)
        st = refuse_static(ctx, ref, rck, act);
    else if (fmt_spec_find(d->format, d->scheme) && fmt_spec_find(d->format, d->scheme)->refused &&
             !(calibrated && fmt_spec_find(d->format, d->scheme)->static_acts))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "--like %s: its layout (%s, scheme %s) is not "
                      "written: %s", ref, fp8_format_name(d->format), fp8_scheme_name(d->scheme),
                      fmt_spec_find(d->format, d->scheme)->refused);
    else if (run_row_differs(config, d)) {
        const fp8_scheme_traits *t = fp8_scheme_get(d->scheme);
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "--like %s: its weights (config_groups) are not --scheme %s as fp8conv "
                      "writes it: symmetric, num_bits %u, group_size %u or %u",
                      ref, fp8_scheme_name(d->scheme), fp8_elem_get(t->elem)->bits, t->run_alt,
                      t->run);
    }
    else if (!(st = like_fp4_activations(ctx, l, ref, rck, config)) &&
             (ck || !(st = fp8_checkpoint_open(ctx, input, &ck))))
        st = note_kv_cache(ctx, l, ref, rck, ck, config);
    const fmt_spec *spec = fmt_spec_find(d->format, d->scheme);
    char *msg = NULL;
    if (!st && spec && d->ct_activations && spec->ct_activations &&
        strcmp(d->ct_activations, spec->ct_activations) != 0) {
        if (asprintf(&msg, "--like %s: its input activations are per '%s'; fp8conv writes "
                     "per '%s' for --scheme %s",
                     ref, d->ct_activations, spec->ct_activations,
                     fp8_scheme_name(d->scheme)) < 0)
            msg = NULL;
        st = push(ctx, &l->notes, &l->nnotes, msg);
    }
    const char *side = fmt_side_file_name(d->format); /* it lists them too */
    if (!st && side && rck && fp8_checkpoint_is_directory(rck))
        st = ck_json_read(ctx, ref, side, &hq);
    char **ignore = NULL;
    size_t nignore = 0;
    bool listed = false; /* read only when nothing was refused above */
    if (!st)
        st = fmt_ignore_read(ctx, d->format, config, hq, &ignore, &nignore, &listed);
    l->listed = listed;
    if (!st && spec && spec->scale_dtype != FMT_SCALE_U8 && !d->ue8m0)
        l->scale_set = scale_dtype_of_ref(rck, spec, &l->scale_dtype);
    if (!st) {
        l->scale_alt_name = scale_alt_of_ref(rck, spec);
        l->kv_names = kv_names_of_ref(rck);
        size_t nact, nmistral;
        first_of(rck, is_static_scale, &nact);
        first_of(rck, is_mistral_act, &nmistral);
        l->act_name = nact && nact == nmistral ? "activation_scale" : NULL;
        if (d->format == FP8_FORMAT_COMPRESSED_TENSORS)
            st = ct_targets_of_ref(ctx, l, config);
        size_t nref, ninput;
        l->same_weights = fp8_weights_in(rck, ck, &nref) == nref && nref &&
                          fp8_weights_in(ck, rck, &ninput) == ninput;
    }
    for (size_t i = 0; i < nignore; i++) {
        if (!st)
            st = map_module(ctx, l, ck, ignore[i], input, ref);
        free(ignore[i]);
    }
    free(ignore);
out:
    cJSON_Delete(config);
    cJSON_Delete(hq);
    fp8_checkpoint_close(rck);
    fp8_checkpoint_close(ck);
    if (st)
        fp8_like_free(l);
    else
        *out = l;
    return st;
}

void fp8_like_free(fp8_like *l)
{
    if (!l)
        return;
    fp8_strings_free(l->ignore, l->nignore);
    fp8_strings_free(l->notes, l->nnotes);
    fp8_strings_free(l->declared, l->ndeclared);
    fp8_strings_free(l->targets, l->ntargets);
    free(l->stems);
    free(l);
}

void fp8_like_apply(const fp8_like *l, fp8_quant_options *o)
{
    o->scheme = l->decl.scheme;
    o->format = l->decl.format;
    o->scale_ue8m0 = l->decl.ue8m0;
    if (fp8_scheme_has_block(l->decl.scheme)) {
        o->block_rows = l->decl.block_rows;
        o->block_cols = l->decl.block_cols;
    }
    if (l->decl.group && (fp8_scheme_options(l->decl.scheme) & FP8_SCHEME_TAKES_GROUP))
        o->block_cols = l->decl.group; /* a run along a row, as --group carries it */
    o->scale_dtype_set = l->scale_set;
    o->scale_dtype = l->scale_dtype;
    o->scale_alt_name = l->scale_alt_name;
    o->ct_targets = (const char *const *)l->targets;
    o->nct_targets = l->ntargets;
    /* the reference's list, not every module kept: an embedding or a norm
     * that fp8conv keeps is no entry of a release's list (DeepSeek-V3 has
     * none at all) */
    o->declare_ignore = true;
    o->declare_no_list = !l->listed && !l->ndeclared;
    o->declared_ignore = (const char *const *)l->declared;
    o->ndeclared_ignore = l->ndeclared;
}

const char *fp8_like_kv_names(const fp8_like *l) { return l->kv_names; }
const char *fp8_like_act_name(const fp8_like *l) { return l->act_name; }
bool fp8_like_same_weights(const fp8_like *l) { return l->same_weights; }
size_t fp8_like_ignore_count(const fp8_like *l) { return l->nignore; }
const char *fp8_like_ignore(const fp8_like *l, size_t i) { return i < l->nignore ? l->ignore[i] : NULL; }
size_t fp8_like_note_count(const fp8_like *l) { return l->nnotes; }
const char *fp8_like_note(const fp8_like *l, size_t i) { return i < l->nnotes ? l->notes[i] : NULL; }
