/*
 * fp4.h - the packed-FP4 weight layouts fp8conv reads (fp8conv-formats(5),
 * 2026 LAYOUTS): one row per layout, saying how the weight and its scale are
 * named, stored and shaped, the scheme they follow (E2M1 codes in groups
 * of 32 sharing an E8M0 scale: MXFP4, from types.h's element table) and how
 * the unpacked weight is named and oriented for the loaders that read it in
 * bf16.  dequantize-for-export reads with this table.
 */
#ifndef FP8_FP4_H
#define FP8_FP4_H

#include <cjson/cJSON.h>

#include "common/internal.h"
#include "common/types.h"

typedef enum {
    FP4_LAYOUT_GPT_OSS,   /* gpt-oss mlp.experts.{gate_up,down}_proj_blocks */
    FP4_LAYOUT_DSV4,      /* DeepSeek-V4 routed experts ffn.experts.E.w{1,2,3}.weight */
    FP4_LAYOUT_NVFP4_MODELOPT, /* ModelOpt NVFP4 X.weight, weight_scale, weight_scale_2 */
    FP4_LAYOUT_NVFP4_CT,  /* compressed-tensors nvfp4-pack-quantized X.weight_packed, ... */
    FP4_LAYOUT_MXFP4_CT,  /* compressed-tensors mxfp4-pack-quantized X.weight_packed, U8 scale */
    FP4_LAYOUT_INT4_CT,   /* compressed-tensors pack-quantized X.weight_packed I32, weight_shape */
    FP4_LAYOUT_COUNT
} fp4_layout_id;

/* E8M0 scales that a producer's older versions wrote with another bias, as
 * config.json's quantization_config "version" tells (compressed-tensors
 * MXFP4: 125 up to 0.13.0, 127 from 0.14.0). */
typedef struct {
    const char *producer;    /* "compressed-tensors" */
    int bias;                /* what the old versions wrote: 125 */
    const char *last_old;    /* the last release with it: "0.13.0" */
    const char *first_fixed; /* the first release without it: "0.14.0" */
    /* the fix's commit day, YYYYMMDD: a nightly "X.Y.Z.aYYYYMMDD" between
     * the two releases was built before it (old bias) or after it */
    unsigned long fixed_on;
    const char *fix;         /* the fix, for messages */
} fp4_old_bias;

typedef struct {
    const char *name;          /* "gpt-oss mxfp4", for messages */
    const char *weight_suffix; /* the packed weight's name ends so */
    const char *scale_suffix;  /* replaces weight_suffix in the scale's name */
    const char *out_suffix;    /* replaces weight_suffix in the unpacked weight's name */
    fp8_dtype weight_dtype;    /* the packed bytes' dtype */
    fp8_dtype scale_dtype;     /* the group scales' dtype (E8M0 bytes, or F8_E4M3) */
    int weight_rank;           /* 4: [E, rows, G, 16]; 2: [rows, cols / 2] */
    bool transpose;            /* unpacked as [E, cols, rows] rather than [E, rows, cols] */
    /* E2M1 codes, a scale per `run` elements of a row (MXFP4: 32, E8M0;
     * NVFP4: 16, E4M3, and a second level, one F32 for the tensor) */
    const fp8_scheme_traits *scheme;
    /* NVFP4's second level: replaces weight_suffix in its name (NULL: no
     * second level), and whether the value is divided by it (compressed-
     * tensors) rather than multiplied (ModelOpt) */
    const char *global_suffix;
    bool global_divides;
    int global_rank;           /* its shape: 0 [] (ModelOpt), 1 [1] (compressed-tensors) */
    /* the weight's name must hold this (NULL: any name) */
    const char *name_needs;
    /* the name and dtype alone say it is packed (gpt-oss's _blocks): without
     * its scale it is bad input; else a tensor without the scale is not one */
    bool by_name;
    /* config.json's quantization_config quant_method that declares the
     * layout; NULL when another format's declaration carries it (DeepSeek-V4:
     * quant_method fp8 beside expert_dtype "fp4") */
    const char *quant_method;
    /* config.json's model_type of the family, and the suffix that family's
     * FP8 weights X.weight name their scale with (X.scale), NULL when the
     * format's own (_scale_inv, ...) */
    const char *model_type;
    const char *trunk_scale_suffix;
    /* the family's config key saying its experts are FP8, not packed
     * (DeepSeek-V4's expert_dtype "fp8", at the top level or inside
     * quantization_config; missing: packed), and the dtype of every FP8
     * scale then and otherwise (fp4_family_scale_dtype) */
    const char *fp8_experts_key, *fp8_experts_value;
    fp8_dtype fp8_experts_scale_dtype, packed_experts_scale_dtype;
    const char *source;        /* where the facts come from */
    const fp4_old_bias *old_bias; /* NULL: every version wrote bias 127 */
    /* config.json's declaration of the layout (its quantization_config, or
     * ModelOpt's hf_quant_config.json taken in): quant_method decl_method
     * and, when decl_key is set, quantization_config[decl_key] (or a
     * config_groups entry's) holding decl_value.  decl_exclusive: the
     * declaration names this layout alone, so declaring it without any of
     * its tensors is a mismatch (not DeepSeek-V4's quant_method fp8, which an
     * FP8-experts checkpoint has too). */
    const char *decl_method, *decl_key, *decl_value;
    bool decl_exclusive;
    /* Per loader (fp8_loader order: vLLM, SGLang, transformers): the code
     * that reads the layout (cited), and when the loader does not load it,
     * why (NULL: it loads).  verify's loader-layout findings. */
    struct {
        const char *reads;
        const char *refuses;
        /* Non-NULL: it loads the layout but not MoE experts (one weight
         * per expert) in it, because of this rule */
        const char *experts_refuses;
    } loaders[FP8_LOADER_COUNT];
    /* NVFP4 W4A4: the activations' second level, named and ruled as the
     * weight's (global_suffix): ModelOpt input_scale F32 [] <->
     * compressed-tensors input_global_scale F32 [1] (vLLM
     * compressed_tensors_w4a4_nvfp4.py takes 1 / input_global_scale where
     * ModelOptNvFp4LinearMethod takes input_scale; testdata/gen_fp4.py) */
    const char *input_suffix;
    /* INT4 (compressed-tensors pack-quantized): the group scales are in the
     * weight's dtype (scale_dtype is then the default, BF16), and
     * shape_suffix replaces weight_suffix in the name of the unpacked
     * shape, I64 [2] = [rows, cols] (NULL: none) */
    bool scale_in_weight_dtype;
    const char *shape_suffix;
    /* why convert refuses the layout where no cast row takes it (NULL: none) */
    const char *no_cast;
} fp4_layout;

const fp4_layout *fp4_layout_get(fp4_layout_id id);
/* The layout of a family's model_type ("gpt_oss", "deepseek_v4"); NULL for none. */
const fp4_layout *fp4_layout_of_model(const char *model_type);
/* Whether tensor `name` of the checkpoint is the group scale of a packed-FP4
 * weight there (NVFP4's F8_E4M3 weight_scale, which is no FP8 weight). */
bool fp4_is_group_scale(const fp8_checkpoint *ck, const char *name);
/* The dtype of the FP8 scales (X.scale) of family `l` under `config`
 * (fp8_experts_key); *fp8_experts whether its experts are FP8. */
fp8_dtype fp4_family_scale_dtype(const fp4_layout *l, const cJSON *config, bool *fp8_experts);
/* The layout a quant_method declares (gpt-oss's "mxfp4"); NULL for none. */
const fp4_layout *fp4_layout_of_method(const char *quant_method);

/*
 * The layout a tensor's name, dtype and rank say it is in; NULL for none.
 * Where two layouts name their tensors alike (compressed-tensors' NVFP4 and
 * MXFP4: X.weight_packed, X.weight_scale), the scale in `ck` (may be NULL)
 * tells them apart: the layout whose scale dtype it has, else whose scale
 * element its dtype names (F8_E8M0: an E8M0 layout), else the first.
 * For a match: *scale_name is the scale's name, *out_name the unpacked
 * weight's (each malloc'ed, the caller frees them).
 */
const fp4_layout *fp4_layout_match(const fp8_checkpoint *ck, const char *name, fp8_dtype dtype,
                                   int rank, char **scale_name, char **out_name);

/*
 * The geometry of a packed weight of shape `shape` in layout `l`: experts,
 * rows (output dim) and cols (unpacked input dim), and the scale shape it
 * needs (*srank dims in sshape).  False when the packed shape itself does
 * not fit the layout (e.g. gpt-oss's last dim not 16).
 */
bool fp4_layout_geometry(const fp4_layout *l, int rank, const uint64_t *shape, uint64_t *experts,
                         uint64_t *rows, uint64_t *cols, int *srank, uint64_t sshape[3]);

/*
 * Whether the scales of layout `l` in a checkpoint whose config.json is
 * `config` (may be NULL) hold another bias than 127, or may: the
 * quantization_config "version" is an old one, or one between the old and
 * the fixed release that cannot be told.  Then true, and `why` says what
 * the version is, why it matters and what to do (no file or tensor name).
 * False for a layout without old_bias, a config without a version (not the
 * producer's own writer: the standard bias assumed), or a fixed version.
 */
bool fp4_layout_bias_refused(const fp4_layout *l, const cJSON *config, char *why, size_t n);

/* Whether config.json `config` (may be NULL) declares layout `l` (its decl_
 * fields). */
/* ModelOpt MIXED_PRECISION's per-layer declaration: quantization_config's
 * quantized_layers (or hf_quant_config.json's, nested under "quantization"),
 * module -> {"quant_algo": ...}; NULL when there is none. */
const cJSON *fp4_quantized_layers(const cJSON *config);
bool fp4_layout_declared(const fp4_layout *l, const cJSON *config);

/* A packed weight resolved against its checkpoint (fp4_weight_find). */
typedef struct {
    const fp4_layout *l;                /* NULL: no packed weight */
    const fp8_tensor_info *scale, *second; /* its group scales; NVFP4's F32 (else NULL) */
    size_t scale_shard, second_shard;
    uint64_t experts, rows, cols;       /* rows the output dim, cols unpacked */
    float global;                       /* NVFP4's second level */
    char *out_name;                     /* the unpacked weight's name (malloc'ed) */
    uint32_t run;                       /* elements of a row a scale covers (INT4: 128 or 32) */
    const fp8_tensor_info *shape;       /* INT4's weight_shape (else NULL) */
    size_t shape_shard;
} fp4_weight;

/*
 * Whether tensor t of ck (in shard `shard`) is a packed-FP4 weight, as every
 * command reads one: w->l NULL when it is not (no layout's name, dtype and
 * rank; or no scale, where the name alone does not say it is packed: an
 * int8 tensor).  Else its scale is found with the layout's dtype and
 * shape, and NVFP4's second level read (one finite positive F32); a
 * packed weight that falls short is bad input, the message naming file,
 * tensor and rule and ending "its values cannot be `verb`".  Free with
 * fp4_weight_free.
 */
fp8_status fp4_weight_find(fp8_ctx *ctx, const fp8_checkpoint *ck, const fp8_tensor_info *t,
                           size_t shard, const char *verb, fp4_weight *w);
void fp4_weight_free(fp4_weight *w);

/*
 * The linears vLLM loads as one layer, which keeps one NVFP4 second-level
 * scale for all its parts (fp4.c): each row the parts' module names, the
 * first part first, NULL after the last.
 */
#define FP4_FUSED_COUNT 5
extern const char *const fp4_fused_parts[FP4_FUSED_COUNT][3];
/* Whether module `stem` (a weight's name without ".weight") is a part of
 * such a layer: its row of fp4_fused_parts, and the length of what comes
 * before the part's name (ending in '.'). */
bool fp4_fused_part(const char *stem, size_t *row, size_t *base);

/*
 * The casts convert makes of packed-FP4 input (fp8conv(1) convert, CASTS;
 * fp8conv-formats(5), 2026 LAYOUTS), each exact or refused: a row per
 * layout pair, its rule and the rule's numbers.
 */
typedef enum {
    /* E2M1 groups into FP8 tiles (DeepSeek's cast_e2m1fn_to_e4m3fn): a tile's
     * scale is its largest group scale over 2^shift, each code times
     * 2^(group exponent - tile exponent) its E4M3 code */
    FP4_CAST_TILE,
    /* NVFP4 re-labelled: codes and group scales copied, each second level
     * (weight's, activations') its reciprocal where one layout divides by
     * it and the other multiplies */
    FP4_CAST_INVERT,
    /* each MXFP4 group scale 2^k two NVFP4 E4M3 scales 2^(k - m) under a
     * global 2^m, m = k_max - shift (ModelOpt PR #1372) */
    FP4_CAST_SPLIT,
} fp4_cast_rule;

typedef struct {
    const char *name;       /* the report's: "mxfp4-experts-to-fp8" */
    fp4_layout_id from, to; /* to: FP4_LAYOUT_COUNT for FP8 */
    fp8_format input_format, format; /* the input's (its config), the output's */
    bool by_default;        /* the output when the options name no format */
    fp4_cast_rule rule;
    fp8_scheme scheme;      /* the output's */
    uint32_t tile;          /* TILE: a tile's rows and columns (0: no options name it) */
    /* TILE: log2 of DeepSeek's max_offset (6: E2M1's 6 * 2^6 = 384 <= 448);
     * SPLIT: the largest group's exponent (8: E4M3's largest power of two) */
    int shift;
    const char *usage;      /* what the options may ask (after "INPUT: ") */
} fp4_cast;

/* The cast of layout `from` to `format` (DEFAULT: the row by_default);
 * NULL when there is none.  fp4_cast_from: its first (NULL: none). */
const fp4_cast *fp4_cast_find(const fp4_layout *from, fp8_format format);
const fp4_cast *fp4_cast_from(const fp4_layout *from);
/* The row of the cast from `from` that convert's options ask for, into
 * *row; FP8_ERR_USAGE (the row's usage) when they ask for what no row
 * gives. */
fp8_status fp4_cast_pick(fp8_ctx *ctx, const char *input, const fp8_convert_options *o,
                         const fp4_cast **row, const fp4_layout *from);

/* The run (elements of a row a scale covers) of a weight of `cols` columns
 * whose scale is `s` (srank dims): the layout's, or for a row of two runs
 * (INT4: 128 or 32) the one the scale's last dimension says; and whether a
 * scale of `dtype` is the layout's (INT4: BF16, F16 or F32, the weight's). */
uint32_t fp4_layout_run(const fp4_layout *l, const fp8_tensor_info *s, int srank, uint64_t cols);
bool fp4_layout_scale_dtype_ok(const fp4_layout *l, fp8_dtype dtype);

/* The unpacked weight's shape (rank 2 or 3) for experts x rows x cols. */
void fp4_layout_out_shape(const fp4_layout *l, uint64_t experts, uint64_t rows, uint64_t cols,
                          int *rank, uint64_t shape[3]);

#endif
