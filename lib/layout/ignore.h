/*
 * ignore.h - the modules a checkpoint leaves unquantized: where each format
 * lists them (fp8conv-formats(5), FORMATS), how its loaders match an entry,
 * and fp8conv's own --ignore patterns.
 */
#ifndef FP8_IGNORE_H
#define FP8_IGNORE_H

#include <cjson/cJSON.h>
#include <regex.h>

#include "common/internal.h"

/* ModelOpt's side file beside config.json. */
#define HF_QUANT_CONFIG "hf_quant_config.json"

/* The side file of a format beside config.json (HF_QUANT_CONFIG for
 * ModelOpt); NULL when it has none. */
const char *fmt_side_file_name(fp8_format format);
/* The quantization_config key of a format's ignore list ("ignore",
 * "modules_to_not_convert"); NULL for FP8_FORMAT_DEFAULT. */
const char *fmt_ignore_key(fp8_format format);
/* Its key in the side file's "quantization" object; NULL when none. */
const char *fmt_ignore_side_key(fp8_format format);
/* The modules a checkpoint of `format` declares unquantized: its
 * quantization_config's list, or, when config.json has no
 * quantization_config, its side file's (`side`, may be NULL; ModelOpt's
 * loaders read one or the other), each entry once, appended to *list (*n
 * entries, the caller frees them); *present: some list is there, even an
 * empty one (for ModelOpt, a quantization_config without "ignore": its
 * loaders read none).  Entries are module
 * names, "re:" regexes or globs, as the loaders match them (verify). */
fp8_status fmt_ignore_read(fp8_ctx *ctx, fp8_format format, const cJSON *config, const cJSON *side,
                           char ***list, size_t *n, bool *present);
/* How the loaders of `format` read ignore entry `entry` for `module`:
 * FMT_IGNORES_ALL, every loader keeps it unquantized; FMT_IGNORES_LOOSE,
 * only transformers' looser hf-fp8 match does; FMT_IGNORES_NONE.  One
 * matcher for verify's ignore-list rules and --like (formats.c). */
typedef enum { FMT_IGNORES_NONE, FMT_IGNORES_LOOSE, FMT_IGNORES_ALL } fmt_ignores;
fmt_ignores fmt_ignore_match(fp8_format format, const char *entry, const char *module);
/* A whole ignore list (borrowed: it must outlive the set) indexed for
 * fmt_ignore_match's answer over all its entries: O(log n) a module for
 * names (sorted; a module's substrings and suffixes looked up), one match
 * each for "re:", glob and (hf-fp8) regex entries, so that verify of a
 * 1,000,000-entry list takes seconds (issue 43).  An hf-fp8 name's '.' is
 * taken as itself, where transformers' regex reading takes any character
 * (no real module name differs from another only there). */
typedef struct fmt_ignore_set fmt_ignore_set;
fp8_status fmt_ignore_set_create(fp8_ctx *ctx, fp8_format format, char *const *entries, size_t n,
                                 fmt_ignore_set **out);
/* ... and *entry (when not NULL) one entry that selects it so, or NULL */
fmt_ignores fmt_ignore_set_match(const fmt_ignore_set *s, const char *module, const char **entry);
/* selected[i] set for every entry i that keeps `module` (for every loader,
 * or with `loose` for transformers too). */
void fmt_ignore_set_select(const fmt_ignore_set *s, const char *module, bool loose, bool *selected);
/* Each of list's n strings once, the first kept in place (the others
 * freed), in O(n log n). */
fp8_status fmt_unique(fp8_ctx *ctx, char **list, size_t *n);
void fmt_ignore_set_free(fmt_ignore_set *s);

/* An ignore pattern (fp8conv(1), --ignore), as llm-compressor and
 * compressed-tensors spell them (utils/match.py, _match_name: "re:" then a
 * regex given to Python's re.match on the module's name, so anchored at its
 * start only; any other entry equal to the module's name).  Here "re:"
 * takes a POSIX extended regex matched from the start of the module's name
 * (the tensor's name up to its last '.': model.x.q_proj owns
 * model.x.q_proj.weight); a pattern equal to the whole name of one of the
 * input's modules names that module only (fmt_pattern_module, as
 * compressed-tensors' equality test: model.layers.0.mlp.gate is the router,
 * not gate_proj); any other pattern is a POSIX extended regex searched
 * anywhere in the tensor's name.  A back-reference is refused: glibc's
 * matcher can take minutes on a long name with one. */
typedef struct {
    regex_t re;
    bool on_module; /* "re:": matched from the module name's start */
    char *literal;  /* ^NAME$ with NAME's special characters escaped (--like's
                       explicit names): compared, not matched; else NULL */
    char *module;   /* a module's whole name: its tensors only; else NULL */
} fmt_pattern;
/* 0, or nonzero with why it does not compile in why[n] */
int fmt_pattern_compile(fmt_pattern *p, const char *pattern, char *why, size_t n);
bool fmt_pattern_match(const fmt_pattern *p, const char *tensor);
/* Reads a pattern that is not "re:" and equals the module of `tensor` as
 * that module's name (p->module): 1; 0 when it is not one; -1 out of memory. */
int fmt_pattern_module(fmt_pattern *p, const char *pattern, const char *tensor);
void fmt_pattern_free(fmt_pattern *p);

#endif
