/*
 * formats.h - the one description of each output format (fp8conv-formats(5),
 * FORMATS, as corrected by the real loaders: LOADER RULES): per scheme x
 * format pair, the scale tensor's name, dtype and shape, the config keys, and
 * what each loader makes of it.  quantize writes from this table, verify
 * checks against it and dequantize-for-export reads with it; the loader rules
 * live here and nowhere else.  The model rules every command shares are in
 * model_rules.h, the ignore lists in ignore.h.
 */
#ifndef FP8_FORMATS_H
#define FP8_FORMATS_H

#include <cjson/cJSON.h>

#include "common/internal.h"
#include "layout/fp4.h"
#include "layout/ignore.h"
#include "layout/model_rules.h"

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

/* The dtype the config says the model computes in (torch_dtype, or
 * transformers 5's dtype): 1 "float32", 0 another, -1 none declared. */
int fmt_config_is_f32(const cJSON *config);
/* The config's model_type; NULL when none. */
const char *fmt_config_model_type(const cJSON *config);
/* The dtype the config declares (torch_dtype, or dtype); NULL when none. */
const char *fmt_config_dtype(const cJSON *config);


/* The scheme of ModelOpt's quant_algo ALGO (a row's modelopt_algo or
 * modelopt_algo_acts); false, *scheme untouched, for none. */
bool fmt_modelopt_algo_scheme(const char *algo, fp8_scheme *scheme);

#endif
