/*
 * ignore.c - the modules a checkpoint leaves unquantized: where each format
 * lists them, how the loaders match an entry against a module (regexes,
 * prefixes, transformers' loose match), and fp8conv's own --ignore
 * patterns.  The rules are documented in fp8conv-formats(5), FORMATS.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/ignore.h"

/* Per format, where its list of modules left unquantized sits: a key of
 * quantization_config, and one of the side file's "quantization" object
 * (fp8conv-formats(5), FORMATS).  quantize writes there; verify and --like
 * read there (fmt_ignore_read). */
static const struct {
    const char *config_key, *side_file, *side_key;
    /* transformers' should_convert_module reads the list (fmt_ignore_match) */
    bool hf_loose;
} ignore_keys[] = {
    [FP8_FORMAT_HF_FP8] = { "modules_to_not_convert", NULL, NULL, true },
    [FP8_FORMAT_COMPRESSED_TENSORS] = { "ignore", NULL, NULL, false },
    [FP8_FORMAT_MODELOPT] = { "ignore", HF_QUANT_CONFIG, "exclude_modules", false },
    /* vLLM fbgemm_fp8.py from_config; transformers quantizer_fbgemm_fp8.py */
    [FP8_FORMAT_FBGEMM_FP8] = { "modules_to_not_convert", NULL, NULL, true },
};
#define KNOWN_FORMAT(f) ((unsigned)(f) < sizeof ignore_keys / sizeof *ignore_keys && ignore_keys[f].config_key)

const char *fmt_ignore_key(fp8_format f) { return KNOWN_FORMAT(f) ? ignore_keys[f].config_key : NULL; }
const char *fmt_side_file_name(fp8_format f) { return KNOWN_FORMAT(f) ? ignore_keys[f].side_file : NULL; }
const char *fmt_ignore_side_key(fp8_format f) { return KNOWN_FORMAT(f) ? ignore_keys[f].side_key : NULL; }

/* Whether `re` has a back-reference (\\1 to \\9). */
static bool has_backref(const char *re)
{
    for (; *re; re++)
        if (*re == '\\' && *++re >= '1' && *re <= '9')
            return true;
        else if (!*re)
            break;
    return false;
}

int fmt_pattern_compile(fmt_pattern *p, const char *pattern, char *why, size_t n)
{
    p->on_module = strncmp(pattern, "re:", 3) == 0;
    const char *body = pattern + (p->on_module ? 3 : 0);
    if (has_backref(body)) {
        snprintf(why, n, "a back-reference (\\1 to \\9) can take minutes to match a long name; "
                 "fp8conv takes none");
        return -1;
    }
    char *re = NULL;
    if (p->on_module && asprintf(&re, "^(%s)", body) < 0) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    int rc = regcomp(&p->re, re ? re : body, REG_EXTENDED | REG_NOSUB);
    free(re);
    p->literal = p->module = NULL;
    size_t len = strlen(body);
    if (!rc && !p->on_module && len >= 2 && body[0] == '^' && body[len - 1] == '$' &&
        (p->literal = malloc(len))) { /* a whole name, each special character escaped */
        char *o = p->literal;
        for (const char *c = body + 1; c < body + len - 1 && p->literal; c++)
            if (*c == '\\' && c + 1 < body + len - 1 && strchr(".[]()*+?{}|^$\\", c[1]))
                *o++ = *++c;
            else if (strchr(".[]()*+?{}|^$\\", *c))
                free(p->literal), p->literal = NULL;
            else
                *o++ = *c;
        if (p->literal)
            *o = '\0';
    }
    if (rc) {
        char msg[128];
        regerror(rc, &p->re, msg, sizeof msg);
        snprintf(why, n, "not a POSIX extended regex: %s", msg);
    }
    return rc;
}

void fmt_pattern_free(fmt_pattern *p)
{
    regfree(&p->re);
    free(p->literal);
    free(p->module);
}

/* The length of `tensor`'s module name: up to its last dot. */
static size_t module_len(const char *tensor)
{
    const char *dot = strrchr(tensor, '.');
    return dot ? (size_t)(dot - tensor) : strlen(tensor);
}

int fmt_pattern_module(fmt_pattern *p, const char *pattern, const char *tensor)
{
    size_t n = module_len(tensor);
    if (p->on_module || p->literal || p->module || strlen(pattern) != n ||
        strncmp(pattern, tensor, n))
        return 0;
    return (p->module = fp8_strdup(pattern)) ? 1 : -1;
}

bool fmt_pattern_match(const fmt_pattern *p, const char *tensor)
{
    if (p->literal)
        return strcmp(tensor, p->literal) == 0;
    if (p->module)
        return module_len(tensor) == strlen(p->module) &&
               strncmp(tensor, p->module, strlen(p->module)) == 0;
    /* the module's name without a copy: glibc's REG_STARTEND bounds the subject */
    const char *dot = p->on_module ? strrchr(tensor, '.') : NULL;
    regmatch_t m = { 0, (regoff_t)(dot ? (size_t)(dot - tensor) : strlen(tensor)) };
    return regexec(&p->re, tensor, 1, &m, REG_STARTEND) == 0;
}

static fp8_status ignore_add(fp8_ctx *ctx, const cJSON *list, char ***out, size_t *n, bool *present)
{
    const cJSON *e;
    size_t cap = *n;
    *present = *present || cJSON_IsArray(list);
    cJSON_ArrayForEach(e, list)
    {
        if (!cJSON_IsString(e))
            continue;
        if (*n == cap) {
            char **p = fp8_xreallocarray(*out, cap = 2 * cap + 16, sizeof *p);
            if (!p)
                return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            *out = p;
        }
        if (!((*out)[*n] = fp8_strdup(e->valuestring)))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        (*n)++;
    }
    return FP8_OK;
}

static int cmp_entry_at(const void *a, const void *b, void *list)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(((char **)list)[i], ((char **)list)[j]);
    return c ? c : (i > j) - (i < j);
}

/* Each entry once, the first kept in place (ModelOpt lists some twice), in
 * O(n log n). */
fp8_status fmt_unique(fp8_ctx *ctx, char **list, size_t *n)
{
    size_t *order = fp8_xcalloc(*n ? *n : 1, sizeof *order), m = 0;
    if (!order)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < *n; i++)
        order[i] = i;
    qsort_r(order, *n, sizeof *order, cmp_entry_at, list);
    for (size_t k = 1, kept = 0; k < *n; k++)
        if (strcmp(list[order[k]], list[order[kept]]) == 0) {
            free(list[order[k]]);
            list[order[k]] = NULL;
        } else {
            kept = k;
        }
    for (size_t i = 0; i < *n; i++)
        if (list[i])
            list[m++] = list[i];
    *n = m;
    free(order);
    return FP8_OK;
}

fp8_status fmt_ignore_read(fp8_ctx *ctx, fp8_format format, const cJSON *config, const cJSON *side,
                           char ***list, size_t *n, bool *present)
{
    *present = false;
    if (!KNOWN_FORMAT(format))
        return FP8_OK;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    fp8_status st = ignore_add(ctx, cJSON_GetObjectItemCaseSensitive(q, ignore_keys[format].config_key),
                               list, n, present);
    /* The side file is read only when config.json declares nothing: vLLM
     * takes config.json's quantization_config alone whenever there is one
     * (model_loader/weight_utils.py get_quant_config), and ModelOpt's loaders
     * then read the exclusions from its "ignore" alone, a missing one as none
     * (vLLM quantization/modelopt.py ModelOptQuantConfigBase.from_config,
     * SGLang modelopt_quant.py ModelOptFp4Config.from_config): a flat
     * "exclude_modules" there, or hf_quant_config.json's, excludes nothing. */
    const cJSON *nested = cJSON_GetObjectItemCaseSensitive(q, "quantization");
    if (!ignore_keys[format].side_key || st) {
    } else if (q && !cJSON_IsObject(nested)) {
        *present = true;
    } else {
        /* no quantization_config, or the one fmt_config_read made from the
         * side file (its "quantization" nested in it) */
        st = ignore_add(ctx,
                        cJSON_GetObjectItemCaseSensitive(
                            q ? nested : cJSON_GetObjectItemCaseSensitive(side, "quantization"),
                            ignore_keys[format].side_key),
                        list, n, present);
    }
    return st ? st : fmt_unique(ctx, *list, n);
}

/* Whether POSIX extended `re` matches `s` from its start, as Python's
 * re.match does (false when it does not compile). */
static bool match_from_start(const char *re, const char *s)
{
    regex_t r;
    char *anchored;
    if (asprintf(&anchored, "^(%s)", re) < 0)
        return false;
    bool ok = regcomp(&r, anchored, REG_EXTENDED | REG_NOSUB) == 0;
    free(anchored);
    bool m = ok && regexec(&r, s, 0, NULL, 0) == 0;
    if (ok)
        regfree(&r);
    return m;
}

/* How an ignore entry names a module, as the declared format's loaders
 * match it (fp8conv-formats(5), FORMATS):
 *  - every format, every loader: the whole name, a "re:" regex matched from
 *    the start, a glob pattern; for compressed-tensors nothing more (vllm
 *    quantization/compressed_tensors/utils.py, should_ignore_layer ->
 *    check_equal_or_regex_match: the name equal, or "re:" with re.match), so
 *    a bare "gate" names no layer there;
 *  - hf-fp8 and fbgemm-fp8 (modules_to_not_convert), transformers only: should_convert_module
 *    (transformers quantizers/quantizers_utils.py) skips a module when the
 *    entry, as a regex, matches from the start of its name, or when the name
 *    ends with it ("gate" names model.layers.0.mlp.gate, and
 *    "model.layers.0.mlp.gate" names model.layers.0.mlp.gate_proj too);
 *    vLLM's Fp8Config matches whole names (quant_utils.py, is_layer_skipped);
 *  - modelopt (exclude_modules), every loader: vllm quantization/modelopt.py,
 *    ModelOptQuantConfigBase.is_layer_excluded, and SGLang's, also skip a
 *    module whose name contains the entry. */
fmt_ignores fmt_ignore_match(fp8_format format, const char *entry, const char *module)
{
    size_t ne = strlen(entry), nm = strlen(module);
    if (strcmp(entry, module) == 0)
        return FMT_IGNORES_ALL;
    if (strncmp(entry, "re:", 3) == 0 ? match_from_start(entry + 3, module)
                                      : strpbrk(entry, "*?[") && fnmatch(entry, module, 0) == 0)
        return FMT_IGNORES_ALL;
    if (format == FP8_FORMAT_MODELOPT && ne && strstr(module, entry))
        return FMT_IGNORES_ALL;
    if (KNOWN_FORMAT(format) && ignore_keys[format].hf_loose && ne &&
        ((ne <= nm && memcmp(module + nm - ne, entry, ne) == 0) || match_from_start(entry, module)))
        return FMT_IGNORES_LOOSE;
    return FMT_IGNORES_NONE;
}

struct fmt_ignore_set {
    fp8_format format;
    char *const *entries;
    size_t *names;      /* the other entries' indices, sorted by their text */
    size_t nnames;
    size_t *globs;      /* entries with * ? [ */
    size_t nglobs;
    regex_t *res;       /* "re:" entries, and hf-fp8's entries as regexes */
    size_t *res_at;     /* their entries */
    bool *res_loose;    /* the hf-fp8 ones: transformers only */
    size_t nres;
};

#define NAME(set, k) ((set)->entries[(set)->names[k]])

static int cmp_names(const void *a, const void *b, void *entries)
{
    return strcmp(((char *const *)entries)[*(const size_t *)a],
                  ((char *const *)entries)[*(const size_t *)b]);
}

/* `e` against the first `len` bytes of `s`, as strcmp would order them. */
static int cmp_bounded(const char *e, const char *s, size_t len)
{
    int c = strncmp(e, s, len);
    return c ? c : e[len] != '\0';
}

/* The index in names of the greatest name not above s's first len bytes,
 * or nnames when every name is above them. */
static size_t floor_name(const fmt_ignore_set *set, const char *s, size_t len)
{
    size_t lo = 0, hi = set->nnames; /* the first name above */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_bounded(NAME(set, mid), s, len) > 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo ? lo - 1 : set->nnames;
}

/* The names that are nonempty prefixes of s's first len bytes, longest
 * first, each given to `take` (which returns true to stop): the greatest
 * name not above them is one, or shares with them every prefix of theirs
 * that is a name, so the search goes on within their common prefix. */
static bool prefix_names(const fmt_ignore_set *set, const char *s, size_t len,
                         bool (*take)(void *arg, size_t entry), void *arg)
{
    while (len) {
        size_t k = floor_name(set, s, len);
        if (k == set->nnames)
            return false;
        const char *e = NAME(set, k);
        size_t common = 0;
        while (common < len && e[common] == s[common])
            common++;
        if (!e[common]) {
            if (!common || take(arg, set->names[k]))
                return common > 0;
            common--;
        }
        len = common;
    }
    return false;
}

/* The entry equal to s, or (size_t)-1. */
static size_t name_entry(const fmt_ignore_set *set, const char *s)
{
    size_t len = strlen(s), k = floor_name(set, s, len);
    return k < set->nnames && strcmp(NAME(set, k), s) == 0 ? set->names[k] : (size_t)-1;
}

void fmt_ignore_set_free(fmt_ignore_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nres; i++)
        regfree(&s->res[i]);
    free(s->res), free(s->res_at), free(s->res_loose), free(s->names), free(s->globs), free(s);
}

fp8_status fmt_ignore_set_create(fp8_ctx *ctx, fp8_format format, char *const *entries, size_t n,
                                 fmt_ignore_set **out)
{
    fmt_ignore_set *s = calloc(1, sizeof *s);
    *out = NULL;
    if (s) {
        s->format = format;
        s->entries = entries;
        s->names = fp8_xcalloc(n + 1, sizeof *s->names);
        s->globs = fp8_xcalloc(n + 1, sizeof *s->globs);
        s->res = fp8_xcalloc(n + 1, sizeof *s->res);
        s->res_at = fp8_xcalloc(n + 1, sizeof *s->res_at);
        s->res_loose = fp8_xcalloc(n + 1, sizeof *s->res_loose);
    }
    if (!s || !s->names || !s->globs || !s->res || !s->res_at || !s->res_loose) {
        fmt_ignore_set_free(s);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const char *e = entries[i], *re = NULL;
        bool loose = false;
        if (strncmp(e, "re:", 3) == 0)
            re = e + 3;
        else if (strpbrk(e, "*?["))
            s->globs[s->nglobs++] = i;
        else {
            s->names[s->nnames++] = i;
            /* hf-fp8's entries are regexes to transformers; one whose only
             * special character is '.' is looked up as a name (a '.' taken
             * as itself: no real module name differs from another there) */
            if (format == FP8_FORMAT_HF_FP8 && strpbrk(e, "()|+{}^$\\"))
                re = e, loose = true;
        }
        char *anchored;
        if (!re)
            continue;
        if (asprintf(&anchored, "^(%s)", re) < 0) {
            fmt_ignore_set_free(s);
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        }
        if (regcomp(&s->res[s->nres], anchored, REG_EXTENDED | REG_NOSUB) == 0) {
            s->res_at[s->nres] = i; /* (one that does not compile names nothing) */
            s->res_loose[s->nres++] = loose;
        }
        free(anchored);
    }
    qsort_r(s->names, s->nnames, sizeof *s->names, cmp_names, (void *)entries);
    *out = s;
    return FP8_OK;
}

typedef struct {
    fmt_ignores how; /* the best found */
    size_t entry;    /* its entry */
    bool *selected;  /* fmt_ignore_set_select: every entry found at `least` or above */
    fmt_ignores least;
} found;

/* An entry selects the module at `how`; true: the search may stop. */
static bool find(found *f, size_t entry, fmt_ignores how)
{
    if (how > f->how)
        f->how = how, f->entry = entry;
    if (f->selected && how >= f->least)
        f->selected[entry] = true;
    return !f->selected && f->how == FMT_IGNORES_ALL;
}
static bool find_all(void *f, size_t entry) { return find(f, entry, FMT_IGNORES_ALL); }
static bool find_loose(void *f, size_t entry) { return find(f, entry, FMT_IGNORES_LOOSE); }

/* fmt_ignore_match over every entry, each looked up rather than tried. */
static void search(const fmt_ignore_set *s, const char *module, found *f)
{
    size_t nm = strlen(module), e;
    if ((e = name_entry(s, module)) != (size_t)-1 && find(f, e, FMT_IGNORES_ALL))
        return;
    for (size_t i = 0; i < s->nglobs; i++)
        if (fnmatch(s->entries[s->globs[i]], module, 0) == 0 &&
            find(f, s->globs[i], FMT_IGNORES_ALL))
            return;
    for (size_t i = 0; i < s->nres; i++)
        if (regexec(&s->res[i], module, 0, NULL, 0) == 0 &&
            find(f, s->res_at[i], s->res_loose[i] ? FMT_IGNORES_LOOSE : FMT_IGNORES_ALL))
            return;
    for (size_t at = 0; at < nm; at++) {
        /* ModelOpt: a name within the module's; transformers: at its end */
        if (s->format == FP8_FORMAT_MODELOPT &&
            prefix_names(s, module + at, nm - at, find_all, f))
            return;
        if (s->format == FP8_FORMAT_HF_FP8 && (e = name_entry(s, module + at)) != (size_t)-1)
            find(f, e, FMT_IGNORES_LOOSE);
    }
    if (s->format == FP8_FORMAT_HF_FP8)
        prefix_names(s, module, nm, find_loose, f);
}

fmt_ignores fmt_ignore_set_match(const fmt_ignore_set *s, const char *module, const char **entry)
{
    found f = { FMT_IGNORES_NONE, 0, NULL, FMT_IGNORES_NONE };
    search(s, module, &f);
    if (entry)
        *entry = f.how ? s->entries[f.entry] : NULL;
    return f.how;
}

void fmt_ignore_set_select(const fmt_ignore_set *s, const char *module, bool loose, bool *selected)
{
    found f = { FMT_IGNORES_NONE, 0, selected, loose ? FMT_IGNORES_LOOSE : FMT_IGNORES_ALL };
    search(s, module, &f);
}
