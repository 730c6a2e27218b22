/*
 * formats.c - the format table (one row per scheme x format pair), the
 * declarations it reads and writes, and the config facts every command
 * shares (model_rules.c: what stays unquantized; ignore.c: the ignore
 * lists).  Each loader rule below was found by running the loader on
 * fp8conv's output (make check-loaders) and is documented in the man page
 * under LOADERS.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "layout/formats.h"
#include "layout/fp4.h"
#include "common/types.h"

#define VLLM FP8_LOADER_VLLM
#define SGLANG FP8_LOADER_SGLANG
#define HF FP8_LOADER_TRANSFORMERS

static const char MODELOPT_STATIC[] =
    "vLLM reads ModelOpt quant_algo FP8 as static per-tensor activation quantization and needs a "
    "calibrated input_scale beside every FP8 weight (without one it keeps a -3.4e38 placeholder "
    "and the linear layers compute garbage); fp8conv has no calibration data: use --format hf-fp8 "
    "or --format compressed-tensors for per-tensor weights";
static const char MODELOPT_MOE_CHANNEL[] =
    "vLLM's ModelOptFp8MoEMethod registers per-tensor expert scales only (per-channel expert "
    "scales fail with \"shape '[]' is invalid for input of size N\" in "
    "_load_per_tensor_weight_scale): use --format compressed-tensors for per-channel MoE models";
static const char HF_FP8_TENSOR_TRANSFORMERS[] =
    "its FineGrainedFP8 quantizer (quant_method fp8) looks for weight_scale_inv and per-block "
    "scales; a per-tensor hf-fp8 checkpoint's weight_scale is left unused (vLLM and SGLang load "
    "it): use --format compressed-tensors for transformers";
static const char NO_MODELOPT_TRANSFORMERS[] =
    "it has no quantizer for quant_method modelopt and loads the quantized codes as plain "
    "weights";
/* fbgemm FP8 is read (verify, export, convert from it), not written: its
 * codes and per-row scales are compressed-tensors' channel layout, which
 * every loader reads too. */
static const char FBGEMM_READ_ONLY[] =
    "fp8conv reads quant_method fbgemm_fp8 and does not write it: use --format "
    "compressed-tensors --scheme channel, the same codes and per-row scales";
/* vLLM quantization/fbgemm_fp8.py FBGEMMFp8Config.get_quant_method gives a
 * method to LinearBase layers only: a FusedMoE layer is built unquantized. */
static const char FBGEMM_MOE[] =
    "its fbgemm_fp8 config quantizes linear layers only (FBGEMMFp8Config.get_quant_method) and "
    "builds MoE experts unquantized";
/* transformers 5.19 on a CPU: FineGrainedFP8 dequantizes at load
 * (integrations/finegrained_fp8.py, Fp8Dequantize) with full blocks only:
 * "Weight shape (320, 352) not divisible by scale grid (3, 3)", or, where the
 * shapes happen to divide, other weights (a [192, 256] weight with 128 x 128
 * blocks: 196 ulp off); compressed-tensors' block decompressor fails too
 * ("The size of tensor a (4) must match the size of tensor b (3)"). */
static const char HF_WHOLE_BLOCKS[] =
    "its block dequantizers take whole blocks only (FineGrainedFP8 Fp8Dequantize: \"Weight "
    "shape ... not divisible by scale grid\", or other weights where the shapes happen to "
    "divide; compressed-tensors: a tensor size mismatch): use a block that divides every FP8 "
    "weight";
static const char HF_CT_EXPERTS[] =
    "its compressed-tensors loader cannot decompress block or MX scales of fused MoE experts "
    "(DecompressExperts: \"The size of tensor a (256) must match the size of tensor b (2)\"): "
    "use --scheme channel or tensor for transformers";
static const char HF_CT_MX_F32[] =
    "its compressed-tensors loader decompresses MX weights to bf16, and a float32 model's "
    "forward then fails (\"self and mat2 must have the same dtype, but got Float and "
    "BFloat16\")";

/* transformers 5.19 (seen in make check-loaders on fp8conv convert's exact
 * relabelling of hf-fp8 block scales): 14 of 15 linears 1 ulp off the
 * export, compressed-tensors' own decompression exact, vLLM exact. */
static const char HF_CT_MODEL_DTYPE_SCALES[] =
    "it keeps weight_scale in the model's dtype, so an F32 scale that dtype cannot hold is "
    "rounded when loaded and the layer computes with other weights (1 ulp off; vLLM keeps F32 "
    "scales): write the scales in the model's dtype, as fp8conv quantize does";

/* hf-fp8 scales of any 16-bit float dtype (Qwen3-*-FP8: BF16 block scales;
 * Qwen3-4B-Instruct-2507-FP8: F16): vLLM creates the scale parameter F32
 * (model_executor/layers/quantization/utils/fp8_utils.py,
 * create_fp8_scale_parameter) and its weight loaders copy_ the checkpoint's
 * tensor into it (model_executor/parameter.py, BlockQuantScaleParameter and
 * PerTensorScaleParameter), which widens BF16 and F16 exactly; SGLang holds
 * the same F32 parameters (python/sglang/srt/layers/quantization/fp8_utils.py,
 * create_fp8_scale_parameter, adapted from vLLM's), and transformers'
 * FP8Linear an F32 weight_scale_inv (integrations/finegrained_fp8.py). */
static const fmt_spec table[] = {
    { .format = FP8_FORMAT_HF_FP8, .scheme = FP8_SCHEME_BLOCK, .scale_suffix = "_scale_inv",
      .scale_dtype = FMT_SCALE_F32, .f16_scales = true, .scheme_default = true,
      .whole_blocks = { [HF] = HF_WHOLE_BLOCKS } },
    /* Per-tensor weight_scale_inv (Mistral's FP8 releases: Ministral-3,
     * Devstral-2, with quant_method fp8 and no weight_block_size): vLLM's
     * models/mistral3.py maps .weight_scale_inv to .weight_scale and
     * .activation_scale to .input_scale, SGLang's models/llama.py load_weights
     * renames both the same way, and transformers' FineGrainedFP8 looks for
     * weight_scale_inv (integrations/finegrained_fp8.py, FP8Linear). */
    { .format = FP8_FORMAT_HF_FP8, .scheme = FP8_SCHEME_TENSOR, .scale_suffix = "_scale",
      .alt_scale_suffix = "_scale_inv", .scale_dtype = FMT_SCALE_F32, .f16_scales = true,
      .scheme_default = true, .no_load = { [HF] = HF_FP8_TENSOR_TRANSFORMERS } },
    { .format = FP8_FORMAT_COMPRESSED_TENSORS, .scheme = FP8_SCHEME_BLOCK,
      .scale_suffix = "_scale", .scale_dtype = FMT_SCALE_WEIGHT, .ct_weights = "block",
      .ct_activations = "group", .whole_blocks = { [HF] = HF_WHOLE_BLOCKS },
      .no_experts = { [HF] = HF_CT_EXPERTS },
      .model_dtype_scales = { [HF] = HF_CT_MODEL_DTYPE_SCALES } },
    { .format = FP8_FORMAT_COMPRESSED_TENSORS, .scheme = FP8_SCHEME_CHANNEL,
      .scale_suffix = "_scale", .scale_dtype = FMT_SCALE_WEIGHT, .keepdim = true,
      .scheme_default = true, .ct_weights = "channel", .ct_activations = "token",
      .ct_moe_activations = "token",
      .model_dtype_scales = { [HF] = HF_CT_MODEL_DTYPE_SCALES } },
    /* vLLM's CompressedTensorsW8A8Fp8MoEMethod pairs tensor weights with
     * tensor activations only (token activations: a bare AssertionError) */
    { .format = FP8_FORMAT_COMPRESSED_TENSORS, .scheme = FP8_SCHEME_TENSOR,
      .scale_suffix = "_scale", .scale_dtype = FMT_SCALE_WEIGHT, .keepdim = true,
      .ct_weights = "tensor", .ct_activations = "tensor", .ct_moe_activations = "tensor",
      .model_dtype_scales = { [HF] = HF_CT_MODEL_DTYPE_SCALES } },
    { .format = FP8_FORMAT_COMPRESSED_TENSORS, .scheme = FP8_SCHEME_MXFP8,
      .scale_suffix = "_scale", .scale_dtype = FMT_SCALE_U8, .scheme_default = true,
      .ct_weights = "group",
      .ct_activations = "group", .no_experts = { [HF] = HF_CT_EXPERTS },
      .no_f32_model = { [HF] = HF_CT_MX_F32 } },
    /* Weight-only FP4 as llm-compressor's NVFP4A16 and MXFP4A16 write it
     * (compressed-tensors quantization/quant_scheme.py; config/base.py
     * CompressionFormat): the packed tensors of fp4.c's rows; vLLM loads
     * them with compressed_tensors_w4a16_nvfp4.py and _w4a16_mxfp4.py. */
    { .format = FP8_FORMAT_COMPRESSED_TENSORS, .scheme = FP8_SCHEME_NVFP4,
      .scale_suffix = "_scale", .scale_dtype = FMT_SCALE_E4M3, .scheme_default = true,
      .ct_weights = "tensor_group", .packed = true, .fp4_layout = FP4_LAYOUT_NVFP4_CT,
      .experts_apart = true,
      .ct_format = "nvfp4-pack-quantized" },
    { .format = FP8_FORMAT_COMPRESSED_TENSORS, .scheme = FP8_SCHEME_MXFP4,
      .scale_suffix = "_scale", .scale_dtype = FMT_SCALE_U8, .scheme_default = true,
      .ct_weights = "group", .packed = true, .fp4_layout = FP4_LAYOUT_MXFP4_CT,
      .experts_apart = true,
      .ct_format = "mxfp4-pack-quantized" },
    /* INT4 weight-only as llm-compressor's W4A16 writes it (compressed-tensors
     * quant_scheme.py W4A16; fp8conv-formats(5), INT4 WEIGHT ONLY): fp4.c's
     * INT4 row; vLLM loads it with compressed_tensors_wNa16.py */
    { .format = FP8_FORMAT_COMPRESSED_TENSORS, .scheme = FP8_SCHEME_INT4,
      .scale_suffix = "_scale", .scale_dtype = FMT_SCALE_WEIGHT, .scheme_default = true,
      .ct_weights = "group", .packed = true, .fp4_layout = FP4_LAYOUT_INT4_CT,
      .experts_apart = true, .ct_format = "pack-quantized", .ct_type = "int",
      .ct_observer = "memoryless_minmax" },
    { .format = FP8_FORMAT_MODELOPT, .scheme = FP8_SCHEME_CHANNEL, .scale_suffix = "_scale",
      .scale_dtype = FMT_SCALE_F32, .modelopt_algo = "FP8_PER_CHANNEL_PER_TOKEN",
      .no_experts = { [VLLM] = MODELOPT_MOE_CHANNEL, [SGLANG] = MODELOPT_MOE_CHANNEL },
      .no_load = { [HF] = NO_MODELOPT_TRANSFORMERS } },
    { .format = FP8_FORMAT_MODELOPT, .scheme = FP8_SCHEME_TENSOR, .scale_suffix = "_scale",
      .scale_dtype = FMT_SCALE_F32, .modelopt_algo = "FP8", .refused = MODELOPT_STATIC,
      .needs_input_scale = true, .no_load = { [HF] = NO_MODELOPT_TRANSFORMERS } },
    { .format = FP8_FORMAT_MODELOPT, .scheme = FP8_SCHEME_MXFP8, .scale_suffix = "_scale",
      .scale_dtype = FMT_SCALE_U8, .modelopt_algo = "MXFP8",
      .no_load = { [HF] = NO_MODELOPT_TRANSFORMERS } },
    /* Weight-only NVFP4 as ModelOpt's export writes it (W4A16_NVFP4_CFG;
     * export/model_config.py QUANTIZATION_W4A16_NVFP4): fp4.c's ModelOpt row,
     * weight_scale_2 the reference's global scale inverted; vLLM
     * quantization/modelopt.py ModelOptNvFp4Config reads quant_algo
     * W4A16_NVFP4 and NVFP4, the latter with a calibrated input_scale per
     * linear (W4A4, not written). */
    { .format = FP8_FORMAT_MODELOPT, .scheme = FP8_SCHEME_NVFP4, .scale_suffix = "_scale",
      .scale_dtype = FMT_SCALE_E4M3, .modelopt_algo = "W4A16_NVFP4",
      .modelopt_algo_acts = "NVFP4", .packed = true, .fp4_layout = FP4_LAYOUT_NVFP4_MODELOPT,
      .experts_apart = true,
      .no_load = { [HF] = NO_MODELOPT_TRANSFORMERS } },
    /* Meta's fbgemm FP8 (Llama-3.1-405B-Instruct-FP8), as
     * fp8conv-formats(5), fbgemm FP8 describes it: vLLM
     * quantization/fbgemm_fp8.py FBGEMMFp8LinearMethod and transformers integrations/fbgemm_fp8.py FbgemmFp8Linear hold
     * weight_scale F32 [out, 1]; activations per row at run time, bounded by
     * activation_scale_ub, no input scale tensor. */
    { .format = FP8_FORMAT_FBGEMM_FP8, .scheme = FP8_SCHEME_CHANNEL, .scale_suffix = "_scale",
      .scale_dtype = FMT_SCALE_F32, .keepdim = true, .refused = FBGEMM_READ_ONLY,
      .no_experts = { [VLLM] = FBGEMM_MOE } },
};

#define NROWS (sizeof table / sizeof *table)

/* In fp8_format's order from FP8_FORMAT_HF_FP8 on: the one list of names. */
const char *const fp8_format_names[] = { "hf-fp8", "compressed-tensors", "modelopt", "fbgemm-fp8",
                                         NULL };
#define NFORMATS (sizeof fp8_format_names / sizeof *fp8_format_names - 1)

const char *fp8_format_name(fp8_format f)
{
    return f == FP8_FORMAT_DEFAULT        ? "default"
           : (unsigned)f - 1 < NFORMATS ? fp8_format_names[f - 1]
                                          : "?";
}

const fp4_layout *fmt_code_layout(const fmt_spec *spec)
{
    return spec && spec->packed ? fp4_layout_get((fp4_layout_id)spec->fp4_layout) : NULL;
}

const fmt_spec *fmt_spec_find(fp8_format format, fp8_scheme scheme)
{
    for (size_t i = 0; i < NROWS; i++)
        if (table[i].format == format && table[i].scheme == scheme)
            return &table[i];
    return NULL;
}

fp8_format fp8_format_default(fp8_scheme s)
{
    for (size_t i = 0; i < NROWS; i++)
        if (table[i].scheme == s && table[i].scheme_default)
            return table[i].format;
    return FP8_FORMAT_COMPRESSED_TENSORS;
}

bool fp8_format_supports(fp8_format f, fp8_scheme s)
{
    if (f == FP8_FORMAT_DEFAULT)
        f = fp8_format_default(s);
    const fmt_spec *spec = fmt_spec_find(f, s);
    return spec && !spec->refused;
}

void fmt_pairs_text(fp8_text *b)
{
    for (size_t s = 0; fp8_scheme_names[s]; s++) {
        size_t n = 0, k = 0;
        for (size_t f = 1; f <= NFORMATS; f++)
            n += fp8_format_supports((fp8_format)f, (fp8_scheme)s);
        if (!n)
            continue;
        if (b->len)
            fp8_text_str(b, "; ");
        fp8_text_str(b, fp8_scheme_names[s]);
        fp8_text_str(b, " with ");
        for (size_t f = 1; f <= NFORMATS; f++) {
            if (!fp8_format_supports((fp8_format)f, (fp8_scheme)s))
                continue;
            if (k)
                fp8_text_str(b, k + 1 == n ? " or " : ", ");
            fp8_text_str(b, fp8_format_names[f - 1]);
            k++;
        }
    }
    fp8_text_put(b, "", 1);
}

static const char *const loader_names[] = { "vllm", "sglang", "transformers" };
static const char *const loader_titles[] = { "vLLM", "SGLang", "transformers" };

const char *fp8_loader_name(fp8_loader l) { return (unsigned)l < FP8_LOADER_COUNT ? loader_names[l] : "?"; }
const char *fmt_loader_title(fp8_loader l) { return (unsigned)l < FP8_LOADER_COUNT ? loader_titles[l] : "?"; }

bool fp8_loader_from_name(const char *name, fp8_loader *l)
{
    for (int i = 0; i < FP8_LOADER_COUNT; i++)
        if (strcmp(name, loader_names[i]) == 0) {
            *l = (fp8_loader)i;
            return true;
        }
    return false;
}

fp8_dtype fmt_scale_dtype_of(const fmt_spec *f, fp8_dtype source)
{
    return f->scale_dtype == FMT_SCALE_U8     ? FP8_DTYPE_U8
           : f->scale_dtype == FMT_SCALE_E4M3 ? FP8_DTYPE_F8_E4M3
           : f->scale_dtype == FMT_SCALE_WEIGHT ? source
                                                : FP8_DTYPE_F32;
}

const char *fmt_scale_suffix_of(const fmt_spec *f, const fp8_quant_options *o)
{
    return o->scale_alt_name && f->alt_scale_suffix ? f->alt_scale_suffix : f->scale_suffix;
}

void fmt_scale_shape(const fmt_spec *f, int wrank, const uint64_t *wshape, uint32_t R, uint32_t C,
                     int *rank, uint64_t shape[3])
{
    uint64_t m = wshape[wrank - 2], n = wshape[wrank - 1];
    int r = 0;
    if (wrank == 3)
        shape[r++] = wshape[0];
    fp8_geometry g;
    fp8_scheme_geometry(f->scheme, R, C, m, n, &g);
    /* a grid of groups keeps both dimensions; a row or matrix group drops the
     * columns (and a matrix the rows), unless the layout keeps them as 1 */
    switch (fp8_scheme_get(f->scheme)->group) {
    case FP8_GROUP_TILE:
    case FP8_GROUP_RUN:
        shape[r++] = g.row_groups;
        shape[r++] = g.col_groups;
        break;
    case FP8_GROUP_ROW:
        shape[r++] = g.row_groups;
        if (f->keepdim)
            shape[r++] = 1;
        break;
    case FP8_GROUP_MATRIX:
        if (f->keepdim)
            shape[r++] = 1;
        break;
    }
    *rank = r;
}

/* ---------------------------------------------------------------- declarations */

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static uint64_t u64_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    const char *s = v && (cJSON_IsRaw(v) || cJSON_IsNumber(v)) ? v->valuestring : NULL;
    if (s && *s && strspn(s, "0123456789") == strlen(s))
        return strtoull(s, NULL, 10);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* A [R, C] pair of integers 1..65536 (ck_config_read keeps numbers as raw
 * text, so 128.5 or 1e3 or 2^32 + 128 are seen as written; plain cJSON
 * numbers are taken when integral). */
static bool block_pair(const cJSON *b, uint32_t *rows, uint32_t *cols)
{
    if (cJSON_GetArraySize(b) != 2)
        return false;
    uint32_t v[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *e = cJSON_GetArrayItem(b, i);
        const char *s = e && (cJSON_IsRaw(e) || cJSON_IsNumber(e)) ? e->valuestring : NULL;
        unsigned long long x;
        if (s) {
            if (!*s || strspn(s, "0123456789") != strlen(s))
                return false;
            x = strtoull(s, NULL, 10);
        } else if (cJSON_IsNumber(e) && e->valuedouble >= 1 && e->valuedouble <= 65536 &&
                   e->valuedouble == (double)(unsigned long long)e->valuedouble) {
            x = (unsigned long long)e->valuedouble; /* a config parsed by plain cJSON */
        } else {
            return false;
        }
        if (x < 1 || x > 65536)
            return false;
        v[i] = (uint32_t)x;
    }
    *rows = v[0];
    *cols = v[1];
    return true;
}

bool fmt_modelopt_algo_scheme(const char *algo, fp8_scheme *scheme)
{
    for (size_t i = 0; algo && i < NROWS; i++)
        if ((table[i].modelopt_algo && strcasecmp(table[i].modelopt_algo, algo) == 0) ||
            (table[i].modelopt_algo_acts && strcasecmp(table[i].modelopt_algo_acts, algo) == 0)) {
            *scheme = table[i].scheme;
            return true;
        }
    return false;
}

void fmt_declaration_read(const cJSON *config, fmt_declaration *d)
{
    memset(d, 0, sizeof *d);
    d->format = FP8_FORMAT_DEFAULT;
    d->block_rows = d->block_cols = 128;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const char *method = str_of(q, "quant_method");
    const cJSON *b = NULL;
    if (!method)
        return;
    if (strcmp(method, "fp8") == 0) {
        d->format = FP8_FORMAT_HF_FP8;
        b = cJSON_GetObjectItemCaseSensitive(q, "weight_block_size");
        d->scheme = b && !cJSON_IsNull(b) ? FP8_SCHEME_BLOCK : FP8_SCHEME_TENSOR;
        const char *sf = str_of(q, "scale_fmt");
        d->ue8m0 = sf && strcmp(sf, "ue8m0") == 0;
        if (b && !cJSON_IsNull(b) && !block_pair(b, &d->block_rows, &d->block_cols))
            d->bad_key = "weight_block_size";
    } else if (strcmp(method, "compressed-tensors") == 0) {
        d->format = FP8_FORMAT_COMPRESSED_TENSORS;
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(q, "config_groups");
        g = g ? g->child : NULL;
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(g, "weights");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(g, "input_activations");
        const char *strategy = str_of(w, "strategy");
        d->ct_activations = str_of(a, "strategy");
        d->scheme = FP8_SCHEME_TENSOR;
        /* a packed FP4 format names its row; the FP8 rows go by strategy */
        const char *fmt = str_of(q, "format");
        bool packed = false;
        for (size_t i = 0; fmt && i < NROWS; i++)
            packed = packed || (table[i].ct_format && strcmp(table[i].ct_format, fmt) == 0);
        for (size_t i = 0; strategy && i < NROWS; i++)
            if (table[i].ct_weights && strcmp(table[i].ct_weights, strategy) == 0 &&
                table[i].packed == packed && (!packed || strcmp(table[i].ct_format, fmt) == 0))
                d->scheme = table[i].scheme;
        if (d->scheme == FP8_SCHEME_MXFP8) {
            const cJSON *gs = cJSON_GetObjectItemCaseSensitive(w, "group_size");
            const char *s = gs && (cJSON_IsRaw(gs) || cJSON_IsNumber(gs)) ? gs->valuestring : NULL;
            char run[16];
            snprintf(run, sizeof run, "%d", FP8_MX_GROUP);
            if (s ? strcmp(s, run) != 0 : !(cJSON_IsNumber(gs) && gs->valuedouble == FP8_MX_GROUP))
                d->bad_key = "weights.group_size (MX blocks are 32 elements)";
        }
        uint64_t group = u64_of(w, "group_size");
        d->group = group <= 65536 ? (uint32_t)group : 0;
        b = cJSON_GetObjectItemCaseSensitive(w, "block_structure");
        if (d->scheme == FP8_SCHEME_BLOCK && b && !block_pair(b, &d->block_rows, &d->block_cols))
            d->bad_key = "block_structure";
    } else if (strcmp(method, "modelopt") == 0) {
        d->format = FP8_FORMAT_MODELOPT;
        d->scheme = FP8_SCHEME_TENSOR;
        fmt_modelopt_algo_scheme(str_of(q, "quant_algo"), &d->scheme);
    } else if (strcmp(method, "fbgemm_fp8") == 0) {
        /* vLLM fbgemm_fp8.py FBGEMMFp8Config: per-row scales, nothing else to choose */
        d->format = FP8_FORMAT_FBGEMM_FP8;
        d->scheme = FP8_SCHEME_CHANNEL;
    } else {
        d->unknown_method = method;
    }
    if (d->bad_key)
        d->block_rows = d->block_cols = 0;
}

/* vLLM reads hf_quant_config.json when config.json has no
 * quantization_config (vllm/transformers_utils/config.py, get_config: it
 * sets the file's content as the quantization_config), and ModelOpt's
 * config class takes the older {"producer", "quantization": {"quant_algo",
 * ...}} form (vllm model_executor/layers/quantization/modelopt.py,
 * ModelOptFp8Config.from_config). */
fp8_status fmt_config_read(fp8_ctx *ctx, const char *dir, cJSON **config, bool *side_declared)
{
    cJSON *side = NULL;
    if (side_declared)
        *side_declared = false;
    fp8_status st = ck_config_read(ctx, dir, config);
    if (st || !*config || cJSON_GetObjectItemCaseSensitive(*config, "quantization_config"))
        return st;
    if ((st = ck_json_read(ctx, dir, HF_QUANT_CONFIG, &side)) || !side)
        goto out;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(side, "quantization");
    const char *algo = str_of(q, "quant_algo");
    if (algo) {
        /* with the side file's "quantization" in it: the nested form vLLM's
         * ModelOptQuantConfigBase.from_config reads (exclude_modules there) */
        cJSON *qc = cJSON_CreateObject();
        if (!qc || !cJSON_AddStringToObject(qc, "quant_method", "modelopt") ||
            !cJSON_AddStringToObject(qc, "quant_algo", algo) ||
            !cJSON_AddItemToObject(qc, "quantization", cJSON_Duplicate(q, true)) ||
            !cJSON_AddItemToObject(*config, "quantization_config", qc)) {
            cJSON_Delete(qc);
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        } else if (side_declared) {
            *side_declared = true;
        }
    }
    cJSON_Delete(side);
out:
    if (st) { /* nothing is returned with an error */
        cJSON_Delete(*config);
        *config = NULL;
    }
    return st;
}

/* ---------------------------------------------------------------- model rules */

uint64_t fmt_config_experts(const cJSON *config)
{
    static const char *const keys[] = { "n_routed_experts", "num_experts", "num_local_experts",
                                        "moe_num_experts" };
    const cJSON *where[] = { config, cJSON_GetObjectItemCaseSensitive(config, "text_config"),
                             cJSON_GetObjectItemCaseSensitive(config, "ffn_config") };
    for (size_t w = 0; w < 3; w++)
        for (size_t k = 0; where[w] && k < 4; k++) {
            uint64_t e = u64_of(where[w], keys[k]);
            if (e)
                return e;
        }
    return 0;
}

uint64_t fmt_config_hidden(const cJSON *config)
{
    uint64_t h = u64_of(config, "hidden_size");
    return h ? h : u64_of(cJSON_GetObjectItemCaseSensitive(config, "text_config"), "hidden_size");
}

const char *fmt_config_model_type(const cJSON *config) { return str_of(config, "model_type"); }

const char *fmt_config_dtype(const cJSON *config)
{
    const char *d = str_of(config, "torch_dtype");
    return d ? d : str_of(config, "dtype");
}

int fmt_config_is_f32(const cJSON *config)
{
    const char *d = fmt_config_dtype(config);
    return d ? strcmp(d, "float32") == 0 : -1;
}

/* ---------------------------------------------------------------- declarations */

/* The ignore list a config declares: the modules kept, or --like's. */
static cJSON *ignore_list(const fp8_quant_options *o, char *const *ignore, size_t nignore)
{
    cJSON *ignored = cJSON_CreateArray();
    if (o->declare_ignore)
        for (size_t i = 0; i < o->ndeclared_ignore; i++)
            cJSON_AddItemToArray(ignored, cJSON_CreateString(o->declared_ignore[i]));
    else
        for (size_t i = 0; i < nignore; i++)
            cJSON_AddItemToArray(ignored, cJSON_CreateString(ignore[i]));
    return ignored;
}

static cJSON *int_pair(uint32_t a, uint32_t b)
{
    int v[2] = { (int)a, (int)b };
    return cJSON_CreateIntArray(v, 2);
}

/* compressed-tensors' QuantizationArgs for the weights or the activations. */
static cJSON *ct_args(const fmt_spec *spec, const fp8_quant_options *o, bool weights)
{
    const fp8_scheme_traits *sch = fp8_scheme_get(o->scheme);
    if (!weights && !spec->ct_activations)
        return cJSON_CreateNull(); /* weight-only */
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "num_bits", fp8_elem_get(sch->elem)->bits);
    cJSON_AddStringToObject(a, "type", spec->ct_type ? spec->ct_type : "float");
    cJSON_AddBoolToObject(a, "symmetric", true);
    cJSON_AddBoolToObject(a, "dynamic", !weights);
    cJSON_AddStringToObject(a, "strategy", weights ? spec->ct_weights : spec->ct_activations);
    if (weights && o->scheme == FP8_SCHEME_BLOCK)
        cJSON_AddItemToObject(a, "block_structure", int_pair(o->block_rows, o->block_cols));
    if (weights && spec->ct_observer) { /* quant_scheme.py W4A16, as llm-compressor records it */
        cJSON_AddNumberToObject(a, "group_size", fp8_scheme_run(sch, o->block_cols));
        cJSON_AddNullToObject(a, "block_structure");
        cJSON_AddNullToObject(a, "actorder");
        cJSON_AddNullToObject(a, "scale_dtype");
        cJSON_AddNullToObject(a, "zp_dtype");
        cJSON_AddStringToObject(a, "observer", spec->ct_observer);
        cJSON_AddObjectToObject(a, "observer_kwargs");
    } else if (spec->packed) { /* quant_scheme.py NVFP4A16, MXFP4A16 */
        const char *sd = sch->scale_elem[0] == FP8_ELEM_E8M0 ? "torch.uint8" : "torch.float8_e4m3fn";
        cJSON_AddNumberToObject(a, "group_size", sch->run);
        cJSON_AddStringToObject(a, "scale_dtype", sd);
    } else if (o->scheme == FP8_SCHEME_MXFP8) {
        cJSON_AddNumberToObject(a, "group_size", FP8_MX_GROUP);
        cJSON_AddStringToObject(a, "scale_dtype", "torch.uint8");
    } else if (!weights && o->scheme == FP8_SCHEME_BLOCK) {
        /* activations are quantized per 1 x C group, matching the weight block */
        cJSON_AddNumberToObject(a, "group_size", o->block_cols);
    }
    return a;
}

/* compressed-tensors' kv_cache_scheme for static per-tensor FP8 KV-cache
 * scales, the one llm-compressor writes: 8-bit float, symmetric, static. */
static cJSON *kv_scheme(void)
{
    cJSON *k = cJSON_CreateObject();
    cJSON_AddNumberToObject(k, "num_bits", 8);
    cJSON_AddStringToObject(k, "type", "float");
    cJSON_AddBoolToObject(k, "symmetric", true);
    cJSON_AddBoolToObject(k, "dynamic", false);
    cJSON_AddStringToObject(k, "strategy", "tensor");
    return k;
}

cJSON *fmt_quantization_config(const fmt_spec *spec, const fp8_quant_options *o,
                               char *const *ignore, size_t nignore)
{
    cJSON *q = cJSON_CreateObject(), *ignored = ignore_list(o, ignore, nignore);
    switch (spec->format) {
    case FP8_FORMAT_HF_FP8:
        cJSON_AddStringToObject(q, "quant_method", "fp8");
        cJSON_AddStringToObject(q, "fmt", "e4m3");
        cJSON_AddStringToObject(q, "activation_scheme", "dynamic");
        if (o->scheme == FP8_SCHEME_BLOCK)
            cJSON_AddItemToObject(q, "weight_block_size", int_pair(o->block_rows, o->block_cols));
        if (o->scale_ue8m0)
            cJSON_AddStringToObject(q, "scale_fmt", "ue8m0");
        cJSON_AddItemToObject(q, fmt_ignore_key(spec->format), ignored);
        break;
    case FP8_FORMAT_COMPRESSED_TENSORS: {
        cJSON_AddStringToObject(q, "quant_method", "compressed-tensors");
        cJSON_AddStringToObject(q, "format", spec->ct_format                 ? spec->ct_format
                                             : o->scheme == FP8_SCHEME_MXFP8 ? "mxfp8-quantized"
                                                                             : "float-quantized");
        cJSON_AddStringToObject(q, "quantization_status", "compressed");
        cJSON *group = cJSON_AddObjectToObject(cJSON_AddObjectToObject(q, "config_groups"),
                                               "group_0");
        const char *linear = "Linear";
        if (spec->ct_format) /* llm-compressor names it in the group too */
            cJSON_AddStringToObject(group, "format", spec->ct_format);
        cJSON_AddItemToObject(group, "targets",
                              o->nct_targets ? cJSON_CreateStringArray(o->ct_targets,
                                                                       (int)o->nct_targets)
                                             : cJSON_CreateStringArray(&linear, 1));
        cJSON_AddItemToObject(group, "weights", ct_args(spec, o, true));
        cJSON_AddItemToObject(group, "input_activations", ct_args(spec, o, false));
        cJSON_AddItemToObject(q, fmt_ignore_key(spec->format), ignored);
        if (o->kv_cache_fp8) /* a static FP8 tensor scheme, as llm-compressor writes it
                              (compressed-tensors quantization/quant_args.py QuantizationArgs) */
            cJSON_AddItemToObject(q, "kv_cache_scheme", kv_scheme());
        else
            cJSON_AddNullToObject(q, "kv_cache_scheme");
        break;
    }
    default:
        if (spec->packed) {
            cJSON_Delete(q);
            q = fmt_modelopt_fp4_config(ignored, false);
            break;
        }
        cJSON_AddStringToObject(q, "quant_method", "modelopt");
        cJSON_AddStringToObject(q, "quant_algo", spec->modelopt_algo);
        if (o->kv_cache_fp8) /* vLLM modelopt.py, SGLang modelopt_quant.py */
            cJSON_AddStringToObject(q, "kv_cache_quant_algo", "FP8");
        cJSON_AddItemToObject(q, fmt_ignore_key(spec->format), ignored);
        break;
    }
    if (o->declare_ignore && o->declare_no_list) /* --like: the reference has none */
        cJSON_DeleteItemFromObjectCaseSensitive(q, fmt_ignore_key(spec->format));
    return q;
}

/* ModelOpt's NVFP4 export (modelopt/torch/export/convert_hf_config.py
 * convert_hf_quant_config_format) writes config.json's quantization_config
 * with config_groups; vLLM reads config.json's alone when there is one
 * (model_loader/weight_utils.py get_quant_config) and its exclusions from
 * "ignore" alone (ModelOptQuantConfigBase.from_config: a flat
 * "exclude_modules" there leaves lm_head quantized), and takes null
 * activations in every group for weight-only (ModelOptNvFp4Config
 * ._from_config). */
cJSON *fmt_modelopt_fp4_config(cJSON *ignore, bool acts)
{
    cJSON *q = cJSON_CreateObject();
    cJSON *g0 = cJSON_AddObjectToObject(cJSON_AddObjectToObject(q, "config_groups"), "group_0");
    cJSON *w = cJSON_CreateObject();
    cJSON_AddFalseToObject(w, "dynamic");
    cJSON_AddNumberToObject(w, "group_size", fp8_scheme_get(FP8_SCHEME_NVFP4)->run);
    cJSON_AddNumberToObject(w, "num_bits", 4);
    cJSON_AddStringToObject(w, "type", "float");
    if (acts)
        cJSON_AddItemToObject(g0, "input_activations", cJSON_Duplicate(w, true));
    else
        cJSON_AddNullToObject(g0, "input_activations");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(g0, "targets"), cJSON_CreateString("Linear"));
    cJSON_AddItemToObject(g0, "weights", w);
    cJSON_AddItemToObject(q, fmt_ignore_key(FP8_FORMAT_MODELOPT), ignore);
    cJSON_AddStringToObject(q, "quant_algo", acts ? "NVFP4" : "W4A16_NVFP4");
    cJSON_AddStringToObject(q, "quant_method", "modelopt");
    return q;
}

/* ModelOpt's hf_quant_config.json. */
cJSON *fmt_side_file(const fmt_spec *spec, const fp8_quant_options *o, char *const *ignore,
                     size_t nignore)
{
    if (spec->format != FP8_FORMAT_MODELOPT)
        return NULL;
    const fp8_scheme_traits *sch = fp8_scheme_get(o->scheme);
    cJSON *root = fmt_modelopt_side(spec->modelopt_algo, ignore_list(o, ignore, nignore),
                                    sch->group == FP8_GROUP_RUN ? sch->run : 0, o->kv_cache_fp8);
    if (o->declare_ignore && o->declare_no_list) /* --like: the reference has none */
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "quantization"),
                                                fmt_ignore_side_key(spec->format));
    return root;
}

cJSON *fmt_modelopt_side(const char *algo, cJSON *ignore, uint32_t group_size, bool kv_fp8)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *producer = cJSON_AddObjectToObject(root, "producer");
    cJSON_AddStringToObject(producer, "name", "fp8conv");
    cJSON_AddStringToObject(producer, "version", FP8CONV_VERSION);
    cJSON *q = cJSON_AddObjectToObject(root, "quantization");
    cJSON_AddStringToObject(q, "quant_algo", algo);
    if (kv_fp8)
        cJSON_AddStringToObject(q, "kv_cache_quant_algo", "FP8");
    else if (strstr(algo, "NVFP4")) /* vLLM ModelOptNvFp4Config._from_config requires the
                                       key in this file (group_size, kv_cache_quant_algo,
                                       exclude_modules), null or not */
        cJSON_AddNullToObject(q, "kv_cache_quant_algo");
    cJSON_AddItemToObject(q, fmt_ignore_side_key(FP8_FORMAT_MODELOPT), ignore);
    if (group_size)
        cJSON_AddNumberToObject(q, "group_size", group_size);
    return root;
}
