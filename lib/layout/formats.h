/*
 * formats.h - the one description of each output format (fp8conv-formats(5),
 * FORMATS, as corrected by the real loaders: LOADER RULES): per scheme x
 * format pair, the scale tensor's name, dtype and shape, the config keys, and
 * what each loader makes of it.  quantize writes from this table, verify
 * checks against it and dequantize-for-export reads with it; the loader rules
 * live here and nowhere else.  Also the model rules every command shares
 * (fp8conv-formats(5), MODEL RULES): what stays unquantized (embeddings,
 * heads, norms, routers) and which weights are fused gate/up.
 */
#ifndef FP8_FORMATS_H
#define FP8_FORMATS_H

#include <cjson/cJSON.h>
#include <regex.h>

#include "common/internal.h"
#include "layout/fp4.h"

typedef enum {
    FMT_SCALE_F32,    /* F32 whatever the weight was */
    FMT_SCALE_WEIGHT, /* the source weight's own float dtype (compressed-tensors) */
    FMT_SCALE_U8,     /* E8M0 bytes stored as U8 */
    FMT_SCALE_E4M3,   /* F8_E4M3 (NVFP4's group scales) */
} fmt_scale_dtype;

typedef struct {
    fp8_format format;
    fp8_scheme scheme;
    const char *scale_suffix;  /* "_scale_inv" or "_scale" */
    /* Non-NULL: the other name the loaders also take for the scale (what
     * quantize writes is scale_suffix); convert keeps the input's name. */
    const char *alt_scale_suffix;
    fmt_scale_dtype scale_dtype;
    /* The loaders also take BF16 and F16 scales where scale_dtype is F32:
     * they copy them into an F32 parameter, exactly. */
    bool f16_scales;
    bool keepdim;              /* channel [M, 1] and tensor [1] rather than [M] and [] */
    /* config.json: compressed-tensors weights/input_activations strategies,
     * ModelOpt's quant_algo */
    const char *ct_weights, *ct_activations;
    /* The only input_activations strategy vLLM's compressed-tensors FP8 MoE
     * method takes with these weights; NULL: no such rule. */
    const char *ct_moe_activations;
    const char *modelopt_algo;
    /* ModelOpt: the quant_algo of the same weights with calibrated
     * activations in the scheme too (NVFP4's W4A4), which fp8conv reads and
     * does not write; its declaration is read as this row's scheme. */
    const char *modelopt_algo_acts;
    /* Non-NULL: fp8conv does not write the pair, because of this loader rule. */
    const char *refused;
    /* Non-NULL: the loader cannot load MoE experts (3-D or per expert) in this
     * layout, because of this rule. */
    const char *no_experts[FP8_LOADER_COUNT];
    /* Non-NULL: the loader cannot load the layout at all, because of this rule. */
    const char *no_load[FP8_LOADER_COUNT];
    /* The same, for a checkpoint whose scales all carry alt_scale_suffix. */
    const char *no_load_alt[FP8_LOADER_COUNT];
    /* Non-NULL: the loader cannot load a weight whose dims are not whole
     * blocks (it refuses, or computes other weights), because of this rule. */
    const char *whole_blocks[FP8_LOADER_COUNT];
    /* Non-NULL: the loader fails on a float32 model (config torch_dtype or
     * dtype "float32") in this layout, because of this rule. */
    const char *no_f32_model[FP8_LOADER_COUNT];
    /* Non-NULL: the loader holds weight scales in the model's dtype, so an
     * F32 scale that dtype cannot hold is rounded at load and the layer
     * computes with other weights, because of this rule. */
    const char *model_dtype_scales[FP8_LOADER_COUNT];
    /* The loader needs a calibrated input_scale beside every FP8 weight. */
    bool needs_input_scale;
    /* The format --format DEFAULT picks for the scheme. */
    bool scheme_default;
    /* FP4 schemes: the packed layout written (fp4.h's table names its
     * tensors), and compressed-tensors' "format" for it. */
    bool packed;
    int fp4_layout;
    const char *ct_format;
    /* Fused 3-D MoE experts are written one weight per expert (the loaders
     * of these layouts read no fused tensor:
     * fp8conv-formats(5), FP4 QUANTIZATION); elsewhere a fused tensor is kept. */
    bool experts_apart;
    /* compressed-tensors' weights args where not FP4's: "type" (NULL:
     * "float") and the observer llm-compressor records (INT4: "int",
     * "memoryless_minmax", group_size the chosen run, scale_dtype null) */
    const char *ct_type, *ct_observer;
} fmt_spec;

/* The fp4.h row that names and shapes the codes the spec writes (its packed
 * layout); NULL where the spec's own suffixes do (the FP8 layouts). */
const fp4_layout *fmt_code_layout(const fmt_spec *spec);

/* ModelOpt's side file beside config.json. */
#define HF_QUANT_CONFIG "hf_quant_config.json"

/* The table's row for a pair; NULL when the table has none. */
const fmt_spec *fmt_spec_find(fp8_format format, fp8_scheme scheme);
/* The pairs fp8conv writes, for messages: "block with hf-fp8 or
 * compressed-tensors; channel with ..." (every scheme, its formats in
 * fp8_format order, refused pairs left out). */
void fmt_pairs_text(fp8_text *b);
/* config.json's quantization_config for a pair (fp8conv-formats(5), FORMATS):
 * what quantize writes, and what verify --format assumes for a checkpoint
 * without one. */
cJSON *fmt_quantization_config(const fmt_spec *spec, const fp8_quant_options *o,
                               char *const *ignore, size_t nignore);
/* ModelOpt NVFP4's quantization_config in config.json, as ModelOpt's
 * export converts it (config_groups, "ignore", quant_algo): weight-only
 * (W4A16_NVFP4), or with NVFP4 activations too (`acts`, W4A4: NVFP4).
 * Takes `ignore` (an array). */
cJSON *fmt_modelopt_fp4_config(cJSON *ignore, bool acts);
/* The side file a pair writes beside config.json (HF_QUANT_CONFIG for
 * ModelOpt); NULL when the format has none. */
cJSON *fmt_side_file(const fmt_spec *spec, const fp8_quant_options *o, char *const *ignore,
                     size_t nignore);
/* ModelOpt's hf_quant_config.json: "producer" (fp8conv) and "quantization"
 * with quant_algo `algo`, the exclusions (takes `ignore`, an array),
 * group_size when not 0, and kv_cache_quant_algo FP8 when `kv_fp8`. */
cJSON *fmt_modelopt_side(const char *algo, cJSON *ignore, uint32_t group_size, bool kv_fp8);
/* The side file of a format beside config.json (HF_QUANT_CONFIG for
 * ModelOpt); NULL when it has none. */
const char *fmt_side_file_name(fp8_format format);
/* The quantization_config key of a format's ignore list ("ignore",
 * "modules_to_not_convert"); NULL for FP8_FORMAT_DEFAULT. */
const char *fmt_ignore_key(fp8_format format);
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
/* "vLLM", "SGLang", "transformers" (fp8_loader_name() is the option's spelling). */
const char *fmt_loader_title(fp8_loader l);

/* The scale of weight `w` (rank 2, or 3 for experts) in this layout, for a
 * block scheme of R x C: its dtype (given the weight's source float dtype),
 * rank and shape. */
fp8_dtype fmt_scale_dtype_of(const fmt_spec *f, fp8_dtype source);
/* The weight-scale suffix written: the row's alt_scale_suffix where the
 * options ask for it (--like, scale_alt_name) and the row has one. */
const char *fmt_scale_suffix_of(const fmt_spec *f, const fp8_quant_options *o);
void fmt_scale_shape(const fmt_spec *f, int wrank, const uint64_t *wshape, uint32_t R, uint32_t C,
                     int *rank, uint64_t shape[3]);

/* What a config.json (and ModelOpt's hf_quant_config.json, may be NULL)
 * declares: the format and scheme (FP8_FORMAT_DEFAULT when none), the block
 * size (128 x 128 unless declared; 0 x 0 when declared but not two integers
 * from 1 to 65536), a ue8m0 claim, the compressed-tensors activation
 * strategy, and the unknown quant_method (NULL otherwise). */
typedef struct {
    fp8_format format;
    fp8_scheme scheme;
    uint32_t block_rows, block_cols;
    bool ue8m0;
    uint32_t group;              /* compressed-tensors weights.group_size; 0 when none */
    const char *ct_activations; /* borrowed from the config */
    const char *unknown_method;  /* borrowed from the config */
    const char *bad_key;         /* a key whose value is malformed, NULL when none */
} fmt_declaration;

void fmt_declaration_read(const cJSON *config, fmt_declaration *d);

/* `dir`/config.json (*config NULL when absent), with ModelOpt's older
 * declaration taken in: when config.json has no quantization_config and
 * HF_QUANT_CONFIG's "quantization" names a quant_algo (ModelOpt 0.29 and
 * earlier wrote only that file), *config gets the quantization_config
 * {"quant_method": "modelopt", "quant_algo": ...} vLLM reads from it, and
 * *side_declared (may be NULL) is set.  On an error *config is NULL. */
fp8_status fmt_config_read(fp8_ctx *ctx, const char *dir, cJSON **config, bool *side_declared);

/* The expert count a config declares (n_routed_experts, num_experts,
 * num_local_experts, ffn_config.moe_num_experts; also under text_config); 0
 * for a dense model. */
uint64_t fmt_config_experts(const cJSON *config);
/* hidden_size (or text_config's); 0 when absent. */
uint64_t fmt_config_hidden(const cJSON *config);
/* Whether a 3-D fused experts tensor is stored [E, in, out] (Llama-4,
 * gpt-oss), as its shape against the hidden size says. */
bool fmt_experts_in_out(const char *name, int rank, const uint64_t *shape, uint64_t hidden);

/* The dtype the config says the model computes in (torch_dtype, or
 * transformers 5's dtype): 1 "float32", 0 another, -1 none declared. */
int fmt_config_is_f32(const cJSON *config);
/* The config's model_type; NULL when none. */
const char *fmt_config_model_type(const cJSON *config);
/* The dtype the config declares (torch_dtype, or dtype); NULL when none. */
const char *fmt_config_dtype(const cJSON *config);

/* Why a tensor stays unquantized by the built-in rules (a multimodal
 * model's vision tower or projector, embedding, output head, norm, MoE
 * router, MTP projection); NULL when no rule keeps it.
 * `experts` is the config's expert count (0: none): a 2-D gate or router
 * weight whose output dimension equals it is a router, whatever the family
 * calls it. `model_type` (the config's, NULL: none) adds the towers
 * fmt_tower_unquantized names for it. */
const char *fmt_default_keep(const char *name, int rank, const uint64_t *shape, uint64_t experts,
                             const char *model_type);
#define FMT_KEEP_TOWER "vision tower or multimodal projector"
/* The loaders (FP8_LOADER_* bits) that build the tower holding `name`
 * unquantized for `model_type` (its config's), whatever the config declares. */
unsigned fmt_tower_unquantized(const char *model_type, const char *name);

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
/* The scheme of ModelOpt's quant_algo ALGO (a row's modelopt_algo or
 * modelopt_algo_acts); false, *scheme untouched, for none. */
bool fmt_modelopt_algo_scheme(const char *algo, fp8_scheme *scheme);
/* fmt_default_keep's answer for DeepSeek-V3.2's indexer weights_proj */
#define INDEXER_WEIGHTS_PROJ "indexer weights_proj (DeepSeek-V3.2)"

/* Whether `name` is a fused gate/up weight ([2I, H], or [E, 2I, H] for
 * experts): gate_up_proj, w13, ... whose halves a loader splits. */
bool fmt_is_fused_gate_up(const char *name);
/* Whether `name` is an MoE expert weight (3-D, or one expert's 2-D). */
/* The weight-scale suffix (quantize's scale_suffix) the loaders read for
 * the experts tensor `name`, NULL for any; *expert: whether it is one. */
const char *fmt_expert_scale_suffix(const char *name, bool *expert);
/* Why loader l cannot load an FP8 expert weight of this name (its expert
 * row's rule: Granite's fused experts in transformers); NULL when it can. */
const char *fmt_expert_no_load(const char *name, fp8_loader l);
bool fmt_is_expert(const char *name);

#endif
