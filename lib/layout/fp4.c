/*
 * fp4.c - the packed-FP4 layout table (fp4.h;
 * fp8conv-formats(5), 2026 LAYOUTS).  Every row packs E2M1 codes two a byte, element 2i in the low
 * nibble; MXFP4 rows share one E8M0 scale 2^(b - 127) per 32 elements of a
 * row, NVFP4 rows one E4M3 scale per 16 and an F32 for the tensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "io/checkpoint.h"
#include "layout/fp4.h"

/* The schemes' rows (types.h): E2M1 codes, MXFP4 one E8M0 scale per
 * FP8_MX_GROUP elements of a row, NVFP4 one E4M3 per 16 and an F32 for the
 * tensor. */
#define mxfp4 fp8_scheme_table[FP8_SCHEME_MXFP4]
#define nvfp4 fp8_scheme_table[FP8_SCHEME_NVFP4]
#define int4 fp8_scheme_table[FP8_SCHEME_INT4]

/* compressed-tensors' MXFP4 scales: 127 + floor(log2(scale)) - 2 before
 * commit a333c877 "Use standard E8M0 scale format for MXFP4 (#538)" (2026-01-09;
 * compressors/quantized_compressors/fp4_quantized.py MXFP4PackedCompressor
 * compress_scale), i.e. bias 125; the MXFP4 compressor first shipped in
 * 0.13.0 (#502), the fix first in 0.14.0 (git tag --contains).  Builds in
 * between are "0.13.1.aYYYYMMDD" (nightly) or "0.13.1.devN" (setup.py
 * version_func: setuptools_scm's guessed next version). */
static const fp4_old_bias ct_mxfp4_bias = {
    .producer = "compressed-tensors", .bias = 125, .last_old = "0.13.0", .first_fixed = "0.14.0", .fixed_on = 20260109,
    .fix = "compressed-tensors a333c877 \"Use standard E8M0 scale format for MXFP4 (#538)\"",
};

static const fp4_layout layouts[FP4_LAYOUT_COUNT] = {
    /* gpt-oss: blocks U8 [E, rows, G, 16], scales U8 [E, rows, G], rows the
     * output dim; transformers unpacks to [E, G * 32, rows] (gate_up_proj
     * [E, H, 2I] with gate/up interleaved as stored, even columns gate;
     * down_proj [E, I, H]): transformers integrations/mxfp4.py
     * convert_moe_packed_tensors (low nibble -> even element, ldexp by
     * scale - 127, then transpose(1, 2)); the names without _blocks are
     * models/gpt_oss/modeling_gpt_oss.py GptOssExperts' parameters. */
    [FP4_LAYOUT_GPT_OSS] = {
        .name = "gpt-oss mxfp4", .weight_suffix = "_blocks", .scale_suffix = "_scales",
        .out_suffix = "", .weight_dtype = FP8_DTYPE_U8, .scale_dtype = FP8_DTYPE_U8,
        .weight_rank = 4, .transpose = true, .scheme = &mxfp4, .name_needs = "experts.",
        .by_name = true, .quant_method = "mxfp4", .model_type = "gpt_oss",
        .source = "transformers integrations/mxfp4.py convert_moe_packed_tensors",
        .decl_method = "mxfp4", .decl_exclusive = true,
        .loaders = {
            [FP8_LOADER_VLLM] = { "vLLM model_executor/layers/quantization/mxfp4.py Mxfp4Config "
                                  "(quant_method mxfp4), models/gpt_oss.py" },
            [FP8_LOADER_SGLANG] = { "SGLang srt/layers/quantization/mxfp4.py, models/gpt_oss.py" },
            [FP8_LOADER_TRANSFORMERS] = { "transformers quantizers/quantizer_mxfp4.py "
                                          "Mxfp4HfQuantizer (without its kernels it dequantizes: "
                                          "integrations/mxfp4.py convert_moe_packed_tensors)" },
        } },
    /* DeepSeek-V4 routed experts: weight I8 [out, in / 2], scale F8_E8M0
     * [out, in / 32], both named by the module (.weight, .scale): vLLM
     * vllm/models/deepseek_v4/ (expert_dtype "fp4", its default), DeepSeek's
     * inference/convert.py as quoted in radixark/miles
     * tools/convert_mxfp4_to_fp8.py. */
    [FP4_LAYOUT_DSV4] = {
        .name = "DeepSeek-V4 mxfp4 expert", .weight_suffix = ".weight", .scale_suffix = ".scale",
        .out_suffix = ".weight", .weight_dtype = FP8_DTYPE_I8, .scale_dtype = FP8_DTYPE_F8_E8M0,
        .weight_rank = 2, .scheme = &mxfp4, .name_needs = "experts.", .model_type = "deepseek_v4",
        .trunk_scale_suffix = ".scale",
        /* vLLM models/deepseek_v4/quant_config.py DeepseekV4FP8Config:
         * expert_dtype "fp4" (its default; DeepSeek-V4-Flash) has E8M0
         * (e8m0fnu) FP8 scales, "fp8" (DeepSeek-V4-Flash-Base, FP8 block
         * experts) float32 ones (is_scale_e8m0 only for "fp4"; fp8.py makes
         * the scale parameters float32 otherwise) */
        .fp8_experts_key = "expert_dtype", .fp8_experts_value = "fp8",
        .fp8_experts_scale_dtype = FP8_DTYPE_F32, .packed_experts_scale_dtype = FP8_DTYPE_F8_E8M0,
        .source = "vLLM models/deepseek_v4; DeepSeek inference/convert.py",
        .decl_method = "fp8",
        .loaders = {
            [FP8_LOADER_VLLM] = { "vLLM models/deepseek_v4 (expert_dtype \"fp4\", its default)" },
            [FP8_LOADER_SGLANG] = { "SGLang srt/models/deepseek_v4.py DeepseekV4ForCausalLM "
                                    "(load_weights maps the V4 names)" },
            [FP8_LOADER_TRANSFORMERS] = {
                "transformers models/deepseek_v4",
                "its DeepseekV4Config is written for DeepSeek-V4-Flash-Base (FP8 experts) and has "
                "no expert_dtype; no reader of I8 packed E2M1 experts with E8M0 scales is "
                "established in transformers (not loaded as FP4)" },
        } },
    /* ModelOpt NVFP4: weight U8 [N, K / 2], weight_scale F8_E4M3 [N, K / 16],
     * weight_scale_2 F32 [] = amax / (6 * 448); value = e2m1 * weight_scale *
     * weight_scale_2: ModelOpt export/unified_export_hf.py and
     * qtensor/nvfp4_tensor.py (element 2i in the low nibble). */
    [FP4_LAYOUT_NVFP4_MODELOPT] = {
        .name = "ModelOpt nvfp4", .weight_suffix = ".weight", .scale_suffix = ".weight_scale",
        .out_suffix = ".weight", .weight_dtype = FP8_DTYPE_U8, .scale_dtype = FP8_DTYPE_F8_E4M3,
        .weight_rank = 2, .scheme = &nvfp4, .global_suffix = ".weight_scale_2",
        .input_suffix = ".input_scale",
        .source = "ModelOpt export/unified_export_hf.py, qtensor/nvfp4_tensor.py",
        /* quant_algo NVFP4 (or W4A16_NVFP4): vLLM modelopt.py ModelOptNvFp4Config */
        .decl_method = "modelopt", .decl_key = "quant_algo", .decl_value = "NVFP4",
        .decl_exclusive = true,
        .loaders = {
            [FP8_LOADER_VLLM] = { "vLLM layers/quantization/modelopt.py ModelOptNvFp4Config "
                                  "(quant_algo NVFP4), ModelOptNvFp4LinearMethod" },
            [FP8_LOADER_SGLANG] = { "SGLang srt/layers/quantization/modelopt_quant.py "
                                    "ModelOptFp4Config" },
            [FP8_LOADER_TRANSFORMERS] = {
                "transformers quantizers/auto.py",
                "it has no quantizer for quant_method modelopt (quantizers/auto.py "
                "AUTO_QUANTIZER_MAPPING)" },
        } },
    /* compressed-tensors nvfp4-pack-quantized: weight_packed U8 [N, K / 2],
     * weight_scale F8_E4M3 [N, K / 16], weight_global_scale F32 [1] =
     * (6 * 448) / amax, a divisor: value = e2m1 * weight_scale /
     * weight_global_scale: compressed-tensors compressors/nvfp4/helpers.py
     * (unpacking, low nibble first) and lifecycle/forward_helpers.py; vLLM
     * compressed_tensors_w4a4_nvfp4.py takes 1 / weight_global_scale. */
    [FP4_LAYOUT_NVFP4_CT] = {
        .name = "compressed-tensors nvfp4", .weight_suffix = ".weight_packed",
        .scale_suffix = ".weight_scale", .out_suffix = ".weight", .weight_dtype = FP8_DTYPE_U8,
        .scale_dtype = FP8_DTYPE_F8_E4M3, .weight_rank = 2, .scheme = &nvfp4,
        .global_suffix = ".weight_global_scale", .global_divides = true,
        .input_suffix = ".input_global_scale",
        .global_rank = 1,
        /* a U8 weight_packed is compressed-tensors' packed FP4 whatever else is
         * there: one whose scale is lost is missing-scale (issue 44) */
        .by_name = true,
        .source = "compressed-tensors compressors/nvfp4/helpers.py, lifecycle/forward_helpers.py",
        /* compressed-tensors config/base.py CompressionFormat.nvfp4_pack_quantized */
        .decl_method = "compressed-tensors", .decl_key = "format",
        .decl_value = "nvfp4-pack-quantized", .decl_exclusive = true,
        .loaders = {
            [FP8_LOADER_VLLM] = { "vLLM compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py, "
                                  "compressed_tensors_w4a16_nvfp4.py" },
            [FP8_LOADER_SGLANG] = { "SGLang compressed_tensors/schemes/compressed_tensors_w4a4_nvfp4.py, "
                                    "compressed_tensors_w4a16_nvfp4.py" },
            /* seen in make check-loaders-fp4 (quantize-nvfp4-moe, transformers
             * 5.19, DeepseekV3ForCausalLM): the experts' weight_global_scale are
             * unexpected keys and 93% of their elements differ from the export;
             * MXFP4 experts (no global) load bit-equal */
            [FP8_LOADER_TRANSFORMERS] = { "transformers quantizers/quantizer_compressed_tensors.py, "
                                          "decompressed by compressed-tensors compressors/nvfp4/"
                                          "base.py NVFP4PackedCompressor",
                                          .experts_refuses =
                                          "it merges one weight per expert into fused experts "
                                          "and drops their weight_global_scale (unexpected "
                                          "keys), so it computes the experts from other values "
                                          "(transformers 5.19, seen on DeepseekV3ForCausalLM)" },
        } },
    /* compressed-tensors mxfp4-pack-quantized: weight_packed U8 [N, K / 2]
     * (the NVFP4 packing, low nibble first: MXFP4PackedCompressor subclasses
     * NVFP4PackedCompressor), weight_scale U8 [N, K / 32] holding E8M0
     * exponents 127 + log2(scale) (compressors/mx_utils.py compress_mx_scale,
     * scale_dtype torch.uint8 in quantization/quant_scheme.py MXFP4A16 and
     * MXFP4), no weight_global_scale (compressors/mxfp4/base.py
     * compression_param_names: strategy group, not tensor_group); vLLM
     * compressed_tensors_w4a16_mxfp4.py and _w4a4_mxfp4.py allocate
     * weight_packed uint8 [N, K / 2] and weight_scale uint8 [N, K / 32]. */
    [FP4_LAYOUT_MXFP4_CT] = {
        .name = "compressed-tensors mxfp4", .weight_suffix = ".weight_packed",
        .scale_suffix = ".weight_scale", .out_suffix = ".weight", .weight_dtype = FP8_DTYPE_U8,
        .scale_dtype = FP8_DTYPE_U8, .weight_rank = 2, .scheme = &mxfp4,
        .by_name = true, /* as compressed-tensors nvfp4's */
        .source = "compressed-tensors compressors/mxfp4/base.py, compressors/mx_utils.py",
        .old_bias = &ct_mxfp4_bias,
        /* compressed-tensors config/base.py CompressionFormat.mxfp4_pack_quantized */
        .decl_method = "compressed-tensors", .decl_key = "format",
        .decl_value = "mxfp4-pack-quantized", .decl_exclusive = true,
        .loaders = {
            [FP8_LOADER_VLLM] = { "vLLM compressed_tensors/schemes/compressed_tensors_w4a16_mxfp4.py, "
                                  "compressed_tensors_w4a4_mxfp4.py (uint8 weight_scale [N, K/32])" },
            [FP8_LOADER_SGLANG] = { "SGLang compressed_tensors/schemes/compressed_tensors_w4a16_mxfp4.py "
                                    "(uint8 weight_scale [N, K/32]; mxfp4 w4a4 served weight-only)" },
            [FP8_LOADER_TRANSFORMERS] = { "transformers quantizers/quantizer_compressed_tensors.py, "
                                          "decompressed by compressed-tensors compressors/mxfp4/"
                                          "base.py (MXFP4 decompression since 0.16.0: 717c24d6, "
                                          "#683; earlier versions raise NotImplementedError)" },
        } },
    /* INT4 weight-only as llm-compressor's W4A16 writes it (fp8conv-formats(5),
     * INT4 WEIGHT ONLY): weight_packed I32 [N, K/8], weight_scale in the
     * weight's dtype [N, K/G], weight_shape I64 [2] */
    [FP4_LAYOUT_INT4_CT] = {
        .name = "compressed-tensors int4", .weight_suffix = ".weight_packed",
        .scale_suffix = ".weight_scale", .out_suffix = ".weight", .weight_dtype = FP8_DTYPE_I32,
        .scale_dtype = FP8_DTYPE_BF16, .weight_rank = 2, .scheme = &int4,
        /* an I32 weight_packed is pack-quantized whatever else is there: one
         * whose scale is lost is missing-scale, not a plain tensor (issue 44) */
        .by_name = true,
        .source = "compressed-tensors compressors/pack_quantized/base.py, helpers.py",
        .decl_method = "compressed-tensors", .decl_key = "format",
        .decl_value = "pack-quantized", .decl_exclusive = true,
        .loaders = {
            [FP8_LOADER_VLLM] = { "vLLM compressed_tensors/schemes/compressed_tensors_wNa16.py "
                                  "(uint4b8, weight_packed I32 [N, K/8])" },
            [FP8_LOADER_SGLANG] = { "SGLang compressed_tensors/schemes/compressed_tensors_wNa16.py" },
            [FP8_LOADER_TRANSFORMERS] = { "transformers quantizers/quantizer_compressed_tensors.py, "
                                          "decompressed by compressed-tensors compressors/"
                                          "pack_quantized/base.py" },
        },
        .scale_in_weight_dtype = true, .shape_suffix = ".weight_shape",
        .no_cast = "INT4 to FP8 is lossy (a group's 16 levels times a scale in the weight's "
                   "dtype are not E4M3 codes under one scale), so convert refuses it: "
                   "dequantize-for-export it, then quantize the result" },
};

/* vLLM loads q/k/v and gate/up as one layer (models/llama.py
 * packed_modules_mapping) and keeps one second-level scale for it: the
 * parts' largest (compressed_tensors_w4a4_nvfp4.py and modelopt.py
 * process_weights_after_loading, weight_global_scale.max() and
 * weight_scale_2.max()), the gate's for MoE experts (w13_..._scale[:, 0]).
 * A part whose own differs is computed with other values than the
 * checkpoint's, so the producers give the parts one (llm-compressor
 * modifiers/utils/helpers.py update_fused_layer_weight_global_scales,
 * ModelOpt export/quant_utils.py preprocess_linear_fusion): verify's
 * fused-global-scale, convert's cast to NVFP4. */
const char *const fp4_fused_parts[FP4_FUSED_COUNT][3] = {
    { "q_proj", "k_proj", "v_proj" },
    { "gate_proj", "up_proj", NULL },
    /* DeepSeek's fused_qkv_a_proj (vLLM models/deepseek_v2.py), and the
     * w1/w3 experts (Mixtral, DeepSeek-V4): llm-compressor's
     * observers/helpers.py FUSED_LAYER_NAMES */
    { "q_a_proj", "kv_a_proj_with_mqa", NULL },
    { "w1", "w3", NULL },
    /* DeepSeek-V4's names for q_a / kv_a (llm-compressor
     * entrypoints/model_free/microscale.py DEFAULT_FUSED_MAPPINGS) */
    { "wq_a", "wkv_a_with_mqa", NULL },
};

bool fp4_fused_part(const char *stem, size_t *row, size_t *base)
{
    size_t len = strlen(stem);
    for (size_t f = 0; f < FP4_FUSED_COUNT; f++)
        for (int j = 0; j < 3 && fp4_fused_parts[f][j]; j++) {
            size_t n = strlen(fp4_fused_parts[f][j]);
            if (len > n && stem[len - n - 1] == '.' && !strcmp(stem + len - n, fp4_fused_parts[f][j])) {
                *row = f;
                *base = len - n;
                return true;
            }
        }
    return false;
}

const fp4_layout *fp4_layout_get(fp4_layout_id id)
{
    return (unsigned)id < FP4_LAYOUT_COUNT ? &layouts[id] : NULL;
}

/* gpt-oss: transformers quantizers/quantizer_mxfp4.py and Mxfp4Config
 * (utils/quantization_config.py, quant_method "mxfp4") */
#define NV_USAGE(from, to)                                                                 \
    "an NVFP4 checkpoint (" from ") converts to the other NVFP4 format only: --format " to   \
    ", without --scheme, --block, --scale-fmt or --kv-names"
#define MX_USAGE                                                                           \
    "an MXFP4 checkpoint (compressed-tensors mxfp4) converts to NVFP4 only: --format "      \
    "compressed-tensors (the default) or --format modelopt, without --scheme, --block, "    \
    "--scale-fmt or --kv-names"

static const fp4_cast casts[] = {
    /* deepseek-ai DeepSeek-V4-Flash-0731 inference/convert.py, fp8_block_size 128 */
    { "mxfp4-experts-to-fp8", FP4_LAYOUT_DSV4, FP4_LAYOUT_COUNT, FP8_FORMAT_HF_FP8,
      FP8_FORMAT_HF_FP8, true, FP4_CAST_TILE, FP8_SCHEME_BLOCK, 128, 6,
      "DeepSeek-V4's MXFP4 experts cast to one layout only, DeepSeek's: --scheme block --block "
      "128x128 --scale-fmt ue8m0 --format hf-fp8 (the trunk's; --kv-names does not apply)" },
    { "nvfp4", FP4_LAYOUT_NVFP4_MODELOPT, FP4_LAYOUT_NVFP4_CT, FP8_FORMAT_MODELOPT,
      FP8_FORMAT_COMPRESSED_TENSORS, false, FP4_CAST_INVERT, FP8_SCHEME_NVFP4, 0, 0,
      NV_USAGE("ModelOpt nvfp4", "compressed-tensors") },
    { "nvfp4", FP4_LAYOUT_NVFP4_CT, FP4_LAYOUT_NVFP4_MODELOPT, FP8_FORMAT_COMPRESSED_TENSORS,
      FP8_FORMAT_MODELOPT, false, FP4_CAST_INVERT, FP8_SCHEME_NVFP4, 0, 0,
      NV_USAGE("compressed-tensors nvfp4", "modelopt") },
    /* NVIDIA Model-Optimizer PR #1372 examples/llm_ptq/cast_mxfp4_to_nvfp4.py */
    { "mxfp4-to-nvfp4", FP4_LAYOUT_MXFP4_CT, FP4_LAYOUT_NVFP4_CT, FP8_FORMAT_COMPRESSED_TENSORS,
      FP8_FORMAT_COMPRESSED_TENSORS, true, FP4_CAST_SPLIT, FP8_SCHEME_NVFP4, 0, 8, MX_USAGE },
    { "mxfp4-to-nvfp4", FP4_LAYOUT_MXFP4_CT, FP4_LAYOUT_NVFP4_MODELOPT,
      FP8_FORMAT_COMPRESSED_TENSORS, FP8_FORMAT_MODELOPT, false, FP4_CAST_SPLIT, FP8_SCHEME_NVFP4, 0, 8, MX_USAGE },
};

const fp4_cast *fp4_cast_find(const fp4_layout *from, fp8_format format)
{
    for (size_t i = 0; i < sizeof casts / sizeof *casts; i++)
        if (&layouts[casts[i].from] == from &&
            (casts[i].format == format || (format == FP8_FORMAT_DEFAULT && casts[i].by_default)))
            return &casts[i];
    return NULL;
}

const fp4_cast *fp4_cast_from(const fp4_layout *from)
{
    for (size_t i = 0; i < sizeof casts / sizeof *casts; i++)
        if (&layouts[casts[i].from] == from)
            return &casts[i];
    return NULL;
}

fp8_status fp4_cast_pick(fp8_ctx *ctx, const char *input, const fp8_convert_options *o,
                         const fp4_cast **row, const fp4_layout *from)
{
    const fp8_quant_options *t = &o->target;
    const fp4_cast *c = fp4_cast_find(from, t->format);
    /* a cast to FP8 tiles takes the options that name its own layout */
    bool fits = c && (c->tile ? (!o->scheme_set || t->scheme == c->scheme) &&
                                    (!o->block_set ||
                                     (t->block_rows == c->tile && t->block_cols == c->tile)) &&
                                    (!o->scale_fmt_set || t->scale_ue8m0)
                              : !o->scheme_set && !o->block_set && !o->scale_fmt_set);
    if (!fits || o->kv_names)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: %s", input, (c ? c : fp4_cast_from(from))->usage);
    *row = c;
    return FP8_OK;
}

const fp4_layout *fp4_layout_of_method(const char *quant_method)
{
    for (int i = 0; quant_method && i < FP4_LAYOUT_COUNT; i++)
        if (layouts[i].quant_method && !strcmp(layouts[i].quant_method, quant_method))
            return &layouts[i];
    return NULL;
}

fp8_dtype fp4_family_scale_dtype(const fp4_layout *l, const cJSON *config, bool *fp8_experts)
{
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *v = l->fp8_experts_key ? cJSON_GetObjectItemCaseSensitive(config, l->fp8_experts_key)
                                        : NULL;
    if (!v && l->fp8_experts_key) /* V4.1 keeps it in quantization_config */
        v = cJSON_GetObjectItemCaseSensitive(qc, l->fp8_experts_key);
    *fp8_experts = cJSON_IsString(v) && !strcmp(v->valuestring, l->fp8_experts_value);
    return *fp8_experts ? l->fp8_experts_scale_dtype : l->packed_experts_scale_dtype;
}

const fp4_layout *fp4_layout_of_model(const char *model_type)
{
    for (int i = 0; model_type && i < FP4_LAYOUT_COUNT; i++)
        if (layouts[i].model_type && !strcmp(layouts[i].model_type, model_type))
            return &layouts[i];
    return NULL;
}

/* Whether a scale of dtype `d` is what layout `l` stores (2), names its
 * scale element (1: F8_E8M0 for an E8M0 layout, F8_E4M3 for E4M3), or
 * neither (0). */
static int scale_fit(const fp4_layout *l, fp8_dtype d)
{
    fp8_elem e = l->scheme->scale_elem[0];
    if (d == l->scale_dtype)
        return 2;
    return (d == FP8_DTYPE_F8_E8M0 && e == FP8_ELEM_E8M0) ||
           (d == FP8_DTYPE_F8_E4M3 && e == FP8_ELEM_E4M3);
}

const fp4_layout *fp4_layout_match(const fp8_checkpoint *ck, const char *name, fp8_dtype dtype,
                                   int rank, char **scale_name, char **out_name)
{
    const fp4_layout *best = NULL;
    int best_fit = -1;
    size_t stem = 0;
    *scale_name = *out_name = NULL;
    for (int i = 0; i < FP4_LAYOUT_COUNT && best_fit < 2; i++) {
        const fp4_layout *l = &layouts[i];
        if (dtype != l->weight_dtype || rank != l->weight_rank || !fp8_has_suffix(name, l->weight_suffix))
            continue;
        /* gpt-oss names its experts mlp.experts.*; DeepSeek-V4 ffn.experts.E.w{1,2,3} */
        if (l->name_needs && !strstr(name, l->name_needs))
            continue;
        stem = strlen(name) - strlen(l->weight_suffix);
        int fit = 0;
        char *sname = ck ? fp8_name_with(name, stem, l->scale_suffix) : NULL;
        const fp8_tensor_info *s = sname ? fp8_checkpoint_find(ck, sname, NULL) : NULL;
        if (s)
            fit = scale_fit(l, s->dtype);
        else if (ck && l->global_suffix) /* no scale: NVFP4 when its second level is there */
            fit = ck_find_with(ck, name, stem, l->global_suffix, NULL) ? 1 : -1;
        free(sname);
        if (fit > best_fit)
            best = l, best_fit = fit;
    }
    if (!best)
        return NULL;
    stem = strlen(name) - strlen(best->weight_suffix);
    *scale_name = fp8_name_with(name, stem, best->scale_suffix);
    *out_name = fp8_name_with(name, stem, best->out_suffix);
    if (!*scale_name || !*out_name) {
        free(*scale_name);
        free(*out_name);
        *scale_name = *out_name = NULL;
    }
    return best;
}

bool fp4_layout_geometry(const fp4_layout *l, int rank, const uint64_t *shape, uint64_t *experts,
                         uint64_t *rows, uint64_t *cols, int *srank, uint64_t sshape[3])
{
    /* a row's smallest run (INT4: its alternative, 32); codes a stored element */
    uint64_t run = l->scheme->run_alt && l->scheme->run_alt < l->scheme->run ? l->scheme->run_alt
                                                                              : l->scheme->run;
    uint64_t per = fp8_dtype_bits(l->weight_dtype) / 8 * fp8_elem_get(l->scheme->elem)->per_byte;
    if (rank != l->weight_rank)
        return false;
    if (rank == 4) { /* [E, rows, G, 16]: 16 bytes are one group's 32 codes */
        if (shape[3] != run / 2)
            return false;
        *experts = shape[0];
        *rows = shape[1];
        *cols = shape[2] * run;
        *srank = 3;
        sshape[0] = shape[0];
        sshape[1] = shape[1];
        sshape[2] = shape[2];
        return true;
    }
    /* [rows, cols / 2] (INT4: [rows, cols / 8]), whole groups */
    if ((shape[1] * per) % run)
        return false;
    *experts = 1;
    *rows = shape[0];
    *cols = shape[1] * per;
    *srank = 2;
    sshape[0] = shape[0];
    sshape[1] = *cols / run;
    return true;
}

void fp4_layout_out_shape(const fp4_layout *l, uint64_t experts, uint64_t rows, uint64_t cols,
                          int *rank, uint64_t shape[3])
{
    if (l->weight_rank == 2) {
        *rank = 2;
        shape[0] = rows;
        shape[1] = cols;
        return;
    }
    *rank = 3;
    shape[0] = experts;
    shape[1] = l->transpose ? cols : rows;
    shape[2] = l->transpose ? rows : cols;
}

const char *fp8_checkpoint_fp4_weight(const fp8_checkpoint *ck, const fp8_tensor_info *t,
                                      char **name, int *rank, uint64_t shape[3])
{
    char *sname, *oname;
    uint64_t experts, rows, cols, sshape[3];
    int srank;
    if (name)
        *name = NULL;
    const fp4_layout *l = fp4_layout_match(ck, t->name, t->dtype, t->rank, &sname, &oname);
    bool ok = l && sname && fp8_checkpoint_find(ck, sname, NULL) &&
              fp4_layout_geometry(l, t->rank, t->shape, &experts, &rows, &cols, &srank, sshape);
    if (ok)
        fp4_layout_out_shape(l, experts, rows, cols, rank, shape);
    if (ok && name)
        *name = oname, oname = NULL;
    free(sname);
    free(oname);
    return ok ? l->name : NULL;
}

/* NVFP4's second level of weight t: one finite positive F32. */
static fp8_status find_second(fp8_ctx *ctx, const fp8_checkpoint *ck, const fp8_tensor_info *t,
                              const char *file, const char *verb, fp4_weight *w)
{
    const fp4_layout *l = w->l;
    int stem = (int)(strlen(t->name) - strlen(l->weight_suffix));
    const fp8_tensor_info *g = ck_find_with(ck, t->name, (size_t)stem, l->global_suffix,
                                            &w->second_shard);
    if (!g)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s' is packed %s with scale '%s' but has no second-level "
                        "scale '%.*s%s'; its values cannot be %s (%s)", file, t->name, l->name,
                        w->scale->name, stem, t->name, l->global_suffix, verb, l->source);
    const char *name = g->name;
    file = fp8_checkpoint_shard_name(ck, w->second_shard);
    if (g->dtype != FP8_DTYPE_F32 || g->elements != 1)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': %s's second-level scale is one F32, not %s of %llu "
                        "elements (%s)",
                        file, name, l->name, fp8_dtype_name(g->dtype),
                        (unsigned long long)g->elements, l->source);
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(ck, w->second_shard), g, 0,
                                  &w->global, 4);
    if (!st && !(w->global > 0 && w->global <= 3.4028234663852886e38f))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s': %g is not a finite positive scale",
                      file, name, (double)w->global);
    w->second = g;
    return st;
}

uint32_t fp4_layout_run(const fp4_layout *l, const fp8_tensor_info *s, int srank, uint64_t cols)
{
    /* a row of two runs (INT4: 128 or 32): the one the scale's columns say */
    if (l->scheme->run_alt && s->rank == srank && s->shape[srank - 1] * l->scheme->run != cols)
        return l->scheme->run_alt;
    return l->scheme->run;
}

bool fp4_layout_scale_dtype_ok(const fp4_layout *l, fp8_dtype dtype)
{
    return dtype == l->scale_dtype ||
           (l->scale_in_weight_dtype && (dtype == FP8_DTYPE_F16 || dtype == FP8_DTYPE_F32));
}

/* INT4's weight_shape: I64 [2] holding [rows, cols] (compressed-tensors
 * decompresses to that shape). */
static fp8_status find_shape(fp8_ctx *ctx, const fp8_checkpoint *ck, const fp8_tensor_info *t,
                             const char *file, const char *verb, fp4_weight *w)
{
    const fp4_layout *l = w->l;
    int stem = (int)(strlen(t->name) - strlen(l->weight_suffix));
    const fp8_tensor_info *g = ck_find_with(ck, t->name, (size_t)stem, l->shape_suffix,
                                            &w->shape_shard);
    if (!g)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s' is packed %s but has no '%.*s%s'; its values cannot be "
                        "%s (%s)", file, t->name, l->name, stem, t->name, l->shape_suffix, verb,
                        l->source);
    const char *name = g->name;
    file = fp8_checkpoint_shard_name(ck, w->shape_shard);
    unsigned char b[16];
    uint64_t v[2] = { 0, 0 };
    fp8_status st = g->dtype == FP8_DTYPE_I64 && g->elements == 2
                        ? fp8_file_read(ctx, fp8_checkpoint_shard(ck, w->shape_shard), g, 0, b, 16)
                        : FP8_OK;
    for (int k = 0; k < 16; k++)
        v[k / 8] |= (uint64_t)b[k] << (8 * (k % 8));
    if (!st && (g->dtype != FP8_DTYPE_I64 || g->elements != 2 || v[0] != w->rows ||
                v[1] != w->cols))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: tensor '%s': %s's weight_shape is I64 [2] = [%llu, %llu], the "
                      "packed weight's rows and columns (%s)",
                      file, name, l->name, (unsigned long long)w->rows,
                      (unsigned long long)w->cols, l->source);
    w->shape = g;
    return st;
}

fp8_status fp4_weight_find(fp8_ctx *ctx, const fp8_checkpoint *ck, const fp8_tensor_info *t,
                           size_t shard, const char *verb, fp4_weight *w)
{
    char *sname, got[96], wanted[96];
    int srank;
    uint64_t sshape[3];
    *w = (fp4_weight){ 0 };
    const fp4_layout *l = fp4_layout_match(ck, t->name, t->dtype, t->rank, &sname, &w->out_name);
    if (!l)
        return FP8_OK;
    fp8_status st = FP8_OK;
    const char *file = fp8_checkpoint_shard_name(ck, shard);
    if (!sname) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    const fp8_tensor_info *s = fp8_checkpoint_find(ck, sname, &w->scale_shard);
    if (!s && !l->by_name) /* not packed FP4: an int8 or uint8 tensor */
        goto out;
    if (!s) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: tensor '%s' is packed %s (%s) but has no scale '%s'; its values "
                      "cannot be %s",
                      file, t->name, l->name, l->source, sname, verb);
        goto out;
    }
    if (!fp4_layout_geometry(l, t->rank, t->shape, &w->experts, &w->rows, &w->cols, &srank,
                             sshape)) {
        fp8_shape_text(t->rank, t->shape, got, sizeof got);
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: tensor '%s': packed shape %s is not %s's (%s%u; %s)", file, t->name,
                      got, l->name,
                      t->rank == 4 ? "[experts, rows, groups, 16], codes a group: "
                                   : "[rows, cols / 2], cols a multiple of ",
                      l->scheme->run, l->source);
        goto out;
    }
    w->run = fp4_layout_run(l, s, srank, w->cols);
    sshape[srank - 1] = w->cols / w->run;
    bool shape_ok = s->rank == srank;
    for (int k = 0; shape_ok && k < srank; k++)
        shape_ok = s->shape[k] == sshape[k];
    if (!fp4_layout_scale_dtype_ok(l, s->dtype) || !shape_ok) {
        fp8_shape_text(srank, sshape, wanted, sizeof wanted);
        fp8_shape_text(s->rank, s->shape, got, sizeof got);
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: tensor '%s': scale %s %s, but %s weight '%s' needs %s %s (one %s "
                      "scale per %u elements of a row; %s)",
                      fp8_checkpoint_shard_name(ck, w->scale_shard), s->name,
                      fp8_dtype_name(s->dtype), got, l->name, t->name,
                      fp8_dtype_name(l->scale_dtype), wanted,
                      fp8_elem_get(l->scheme->scale_elem[0])->name, w->run, l->source);
        goto out;
    }
    w->l = l;
    w->scale = s;
    if (l->global_suffix)
        st = find_second(ctx, ck, t, file, verb, w);
    if (l->shape_suffix)
        st = find_shape(ctx, ck, t, file, verb, w);
out:
    if (st || !w->l) {
        free(w->out_name);
        *w = (fp4_weight){ 0 };
    }
    free(sname);
    return st;
}

void fp4_weight_free(fp4_weight *w)
{
    free(w->out_name);
    w->out_name = NULL;
}

bool fp4_is_group_scale(const fp8_checkpoint *ck, const char *name)
{
    for (int i = 0; i < FP4_LAYOUT_COUNT; i++) {
        const fp4_layout *l = &layouts[i];
        if (!fp8_has_suffix(name, l->scale_suffix))
            continue;
        char *w = fp8_name_with(name, strlen(name) - strlen(l->scale_suffix), l->weight_suffix);
        const fp8_tensor_info *t = w ? fp8_checkpoint_find(ck, w, NULL) : NULL;
        free(w);
        if (t && t->dtype == l->weight_dtype && t->rank == l->weight_rank &&
            (!l->name_needs || strstr(name, l->name_needs)))
            return true;
    }
    return false;
}

/* A version's release numbers (up to 4) and what follows them: "0.13.1.a20260105" ->
 * {0, 13, 1, 0}, "a20260105"; false when it does not begin with a number. */
static bool version_parse(const char *v, long rel[4], const char **rest)
{
    int k = 0;
    char *end;
    memset(rel, 0, 4 * sizeof *rel);
    if (!v || *v < '0' || *v > '9')
        return false;
    while (k < 4 && *v >= '0' && *v <= '9') {
        rel[k++] = strtol(v, &end, 10);
        v = end;
        if (*v == '.' && v[1] >= '0' && v[1] <= '9')
            v++;
        else
            break;
    }
    if (*v == '.')
        v++;
    *rest = v;
    return true;
}

static int version_cmp(const long a[4], const long b[4])
{
    for (int k = 0; k < 4; k++)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

bool fp4_layout_bias_refused(const fp4_layout *l, const cJSON *config, char *why, size_t n)
{
    const fp4_old_bias *b = l->old_bias;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(q, "version");
    long rel[4], last[4], fixed[4];
    const char *rest, *unused;
    if (!b || !ver)
        return false;
    const char *v = cJSON_IsString(ver) ? ver->valuestring : NULL;
    bool parsed = version_parse(v, rel, &rest);
    version_parse(b->last_old, last, &unused);
    version_parse(b->first_fixed, fixed, &unused);
    /* old: a release up to last_old (or a build before it); a nightly of
     * the next version dated before the fix.  Unknown: any other build
     * between the two releases, or a version that is no version. */
    bool old = parsed && version_cmp(rel, last) <= 0, unknown = !parsed;
    if (parsed && !old && version_cmp(rel, fixed) < 0 && *rest) {
        char *end;
        unsigned long day = rest[0] == 'a' ? strtoul(rest + 1, &end, 10) : 0;
        if (day >= 19700101 && day <= 99991231 && !*end && day != b->fixed_on)
            old = day < b->fixed_on;
        else
            unknown = true;
    }
    char told[160];
    snprintf(told, sizeof told, "%s %s and earlier wrote %s scales with bias %d, %s and later %d",
             b->producer, b->last_old, l->name, b->bias, b->first_fixed, 127);
    if (old)
        snprintf(why, n,
                 "config.json's quantization_config version %s: %s (%s): every loader decodes "
                 "2^(b - 127), so these weights would compute %d times too small: re-quantize "
                 "with %s %s or later, or add %d to every scale byte and set the version to %s",
                 v, told, b->fix, 1 << (127 - b->bias), b->producer, b->first_fixed,
                 127 - b->bias, b->first_fixed);
    else if (unknown)
        snprintf(why, n,
                 "config.json's quantization_config version %s%s%s: %s, so which bias these "
                 "scales hold cannot be told (%s; %s); read with the wrong one, the weights are "
                 "off by a factor of %d: if it was made with the fix, set the version to %s; if "
                 "not, add %d to every scale byte too",
                 v ? "'" : "", v ? v : "(not a string)", v ? "'" : "",
                 parsed ? "a build between the two releases" : "not a version",
                 told, b->fix, 1 << (127 - b->bias), b->first_fixed, 127 - b->bias);
    return old || unknown;
}

static bool holds(const cJSON *obj, const char *key, const char *value)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(x) && strstr(x->valuestring, value);
}

const cJSON *fp4_quantized_layers(const cJSON *config)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(q, "quantized_layers");
    if (!m) /* hf_quant_config.json's, nested (fmt_config_read) */
        m = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(q, "quantization"),
                                             "quantized_layers");
    return cJSON_IsObject(m) ? m : NULL;
}

bool fp4_layout_declared(const fp4_layout *l, const cJSON *config)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config"), *g;
    if (!l->decl_method || !holds(q, "quant_method", l->decl_method) ||
        strcmp(cJSON_GetObjectItemCaseSensitive(q, "quant_method")->valuestring, l->decl_method))
        return false;
    if (!l->decl_key || holds(q, l->decl_key, l->decl_value))
        return true;
    /* compressed-tensors' mixed-precision checkpoints name a format per
     * config group (config_groups.*.format) */
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(q, "config_groups"))
        if (holds(g, l->decl_key, l->decl_value))
            return true;
    /* and ModelOpt's quant_algo MIXED_PRECISION one per layer (vLLM
     * quantization/modelopt.py ModelOptMixedPrecisionConfig) */
    cJSON_ArrayForEach(g, fp4_quantized_layers(config))
        if (holds(g, l->decl_key, l->decl_value))
            return true;
    return false;
}
