/*
 * formats.c - the format table (one row per scheme x format pair) and the
 * model rules every command shares.  Each loader rule below was found by
 * running the loader on fp8conv's output (make check-loaders) and is
 * documented in the man page under LOADERS.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <regex.h>
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

/* Whether a dot-separated component of `name` satisfies `pred`. */
static bool any_component(const char *name, bool (*pred)(const char *p, size_t n))
{
    for (const char *p = name;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (pred(p, n))
            return true;
        if (!dot)
            return false;
        p = dot + 1;
    }
}

#define IS(s) (n == sizeof(s) - 1 && memcmp(p, s, n) == 0)
static bool embedding_component(const char *p, size_t n)
{
    return IS("embed_tokens") || IS("wte") || IS("wpe") || IS("tok_embeddings") ||
           (n >= 10 && memcmp(p + n - 10, "embeddings", 10) == 0);
}
static bool head_component(const char *p, size_t n) { return IS("lm_head"); }
static bool mtp_component(const char *p, size_t n) { return IS("eh_proj"); }
/* The MTP layer's output head, "shared_head.head" (DeepSeek-V3's
 * model.layers.61.shared_head.head.weight, GLM-4.5's MTP layers): vLLM builds
 * it as a ParallelLMHead (vllm model_executor/models/deepseek_mtp.py,
 * SharedHead), which Fp8Config.get_quant_method leaves unquantized (it
 * quantizes LinearBase and FusedMoE only), as the releases keep it BF16. */
static bool mtp_head(const char *name)
{
    const char *p = strstr(name, "shared_head.head");
    return p && (p == name || p[-1] == '.') && (p[16] == '\0' || p[16] == '.');
}
/* a normalization's module: norm, q_norm, input_layernorm, norm1, norm_out
 * (a name that ends in "norm" but for digits, or starts with "norm"); not
 * every name holding the letters ("subnormal": found by check-fp4-quant's
 * adversarial model, which llm-compressor quantizes) */
static bool norm_component(const char *p, size_t n)
{
    while (n && p[n - 1] >= '0' && p[n - 1] <= '9')
        n--;
    return (n >= 4 && memcmp(p + n - 4, "norm", 4) == 0) ||
           (n >= 4 && memcmp(p, "norm", 4) == 0 && (n == 4 || p[4] == '_'));
}
/* A multimodal model's vision tower or projector, as llm-compressor's
 * examples keep them bf16 (examples/quantization_w8a8_fp8/llava1.5_example.py:
 * ignore "re:multi_modal_projector.*", "re:vision_tower.*";
 * multimodal_vision/mllama_example.py: "re:vision_model.*";
 * qwen_2_5_vl_example.py: "re:visual.*", "re:model.visual.*") and so do
 * the FP8 VLM releases; mm_projector is LLaVA-NeXT's original name.
 * Mistral's own names (Pixtral, Mistral-Small-3.x): vLLM's pixtral.py builds
 * vision_encoder, patch_merger, pre_mm_projector_norm and
 * vision_language_adapter from plain nn.Linear/RMSNorm, no quant_config. */
static bool tower_component(const char *p, size_t n)
{
    return IS("visual") || IS("vision_tower") || IS("vision_model") ||
           IS("multi_modal_projector") || IS("mm_projector") || IS("vision_encoder") ||
           IS("vision_language_adapter") || IS("patch_merger") || IS("pre_mm_projector_norm");
}
/* gate (Qwen, DeepSeek, OLMoE, GLM), router (GPT-OSS, Llama-4, DBRX, Jamba, Granite) */
static bool router_component(const char *p, size_t n)
{
    return IS("gate") || IS("router") || IS("wg") || memmem(p, n, "router", 6) != NULL;
}
#undef IS

const char *fmt_default_keep(const char *name, int rank, const uint64_t *shape, uint64_t experts,
                             const char *model_type)
{
    if (any_component(name, tower_component) || fmt_tower_unquantized(model_type, name))
        return FMT_KEEP_TOWER;
    if (any_component(name, embedding_component))
        return "embedding";
    if (any_component(name, head_component) || strcmp(name, "output.weight") == 0)
        return "output head";
    if (any_component(name, mtp_component))
        return "MTP projection (eh_proj)";
    if (mtp_head(name))
        return "MTP output head (shared_head.head)";
    /* DeepSeek-V3.2's sparse-attention indexer: vLLM models/deepseek_v2.py
     * Indexer and SGLang layers/attention/nsa/nsa_indexer.py build
     * weights_proj with no quantization config (wq_b and wk with the
     * model's); DeepSeek-V3.2-Exp keeps it BF16 */
    if (fp8_has_suffix(name, ".indexer.weights_proj.weight"))
        return INDEXER_WEIGHTS_PROJ;
    if (any_component(name, norm_component))
        return "normalization";
    /* Mixtral and Phi-MoE call it block_sparse_moe.gate; a router by any
     * name is a 2-D weight whose output dimension is the expert count */
    if (fp8_has_suffix(name, ".mlp.gate.weight") || fp8_has_suffix(name, ".block_sparse_moe.gate.weight") ||
        strstr(name, "router") || strstr(name, "shared_expert_gate") ||
        (experts > 1 && rank == 2 && shape[0] == experts && !fmt_is_expert(name) &&
         any_component(name, router_component)))
        return "MoE router";
    return NULL;
}

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

/* Towers the loaders build without a quantization config, whatever the
 * checkpoint's declares, so an FP8 weight there does not load (no parameter
 * for its scale, or its codes read as values). One row per model_type and
 * tower component, each from the loader's model file. The towers of the
 * other common VLMs take the checkpoint's quant config in vLLM, so a
 * quantized one loads: qwen2_vl, qwen2_5_vl, qwen3_vl (visual:
 * Qwen*VisionTransformer(..., quant_config)), llava (llava.py:
 * init_vision_tower_for_llava(config, quant_config),
 * LlavaMultiModalProjector(quant_config=)), mistral3 (mistral3.py, both),
 * idefics3 (idefics3.py Idefics3Model: vision_model and connector), mllama
 * (mllama.py: MllamaVisionModel(config, quant_config),
 * multi_modal_projector a ColumnParallelLinear with it), phi4mm (phi4mm.py:
 * Phi4MMImageEncoder(config, quant_config)). */
static const struct {
    const char *model_type, *component;
    unsigned loaders;
} unquantized_towers[] = {
    /* vLLM models/mllama4.py Llama4ForConditionalGeneration: Llama4VisionModel(..., quant_config=None) */
    { "llama4", "vision_model", 1u << FP8_LOADER_VLLM },
    /* SGLang srt/models/mllama4.py: Llama4MultiModalProjector(config), no quant_config */
    { "llama4", "multi_modal_projector", 1u << FP8_LOADER_SGLANG },
    /* vLLM models/gemma3_mm.py and SGLang srt/models/gemma3_mm.py: Gemma3MultiModalProjector(config), a plain nn.Parameter */
    { "gemma3", "multi_modal_projector", 1u << FP8_LOADER_VLLM | 1u << FP8_LOADER_SGLANG },
    /* vLLM models/internvl.py InternVLChatModel._init_mlp1(config): nn.Sequential of nn.Linear */
    { "internvl_chat", "mlp1", 1u << FP8_LOADER_VLLM },
    /* vLLM models/llava_next_video.py: LlavaNextMultiModalProjector(...), no quant_config */
    { "llava_next_video", "multi_modal_projector", 1u << FP8_LOADER_VLLM },
};

unsigned fmt_tower_unquantized(const char *model_type, const char *name)
{
    unsigned loaders = 0;
    size_t n = sizeof unquantized_towers / sizeof *unquantized_towers;
    for (size_t i = 0; model_type && i < n; i++) {
        const char *c = unquantized_towers[i].component, *at = strstr(name, c);
        size_t nc = strlen(c);
        if (strcmp(model_type, unquantized_towers[i].model_type) == 0 && at &&
            (at == name || at[-1] == '.') && (at[nc] == '.' || at[nc] == '\0'))
            loaders |= unquantized_towers[i].loaders;
    }
    return loaders;
}

/* MoE expert weights by name: X.experts.* and Granite's fused experts,
 * block_sparse_moe.input_linear [E, 2I, H] and output_linear [E, H, I] with
 * their channel scales [E, N, 1] (vLLM models/granitemoehybrid.py
 * load_weights, which splits both per expert with chunk(2, dim=0), and
 * routes .weight and .weight_scale only: scale_suffix) */
/* transformers' GraniteMoeHybridParallelExperts holds a 3-D parameter, no
 * nn.Linear: llm-compressor's Granite-4 FP8 guide
 * (examples/quantization_w8a8_fp8/README_granite4.md) says loading such a
 * checkpoint with hf fails with an error about the weight_scale */
static const char HF_GRANITE_EXPERTS[] =
    "its GraniteMoeHybridParallelExperts is no Linear module and has no place for the fused "
    "experts' weight_scale (llm-compressor examples/quantization_w8a8_fp8/README_granite4.md: "
    "loading with hf fails \"related to the weight_scale\"); vLLM >= 0.10.1.1 loads it";

static const struct {
    const char *piece, *scale_suffix; /* NULL: any */
    const char *no_load[FP8_LOADER_COUNT]; /* the loader cannot load such an FP8 expert: why */
} expert_names[] = {
    { ".experts.", NULL, { NULL } },
    { ".block_sparse_moe.input_linear.", "_scale", { [HF] = HF_GRANITE_EXPERTS } },
    { ".block_sparse_moe.output_linear.", "_scale", { [HF] = HF_GRANITE_EXPERTS } },
};

const char *fmt_expert_no_load(const char *name, fp8_loader l)
{
    for (size_t i = 0; i < sizeof expert_names / sizeof *expert_names; i++)
        if (strstr(name, expert_names[i].piece))
            return expert_names[i].no_load[l];
    return NULL;
}

const char *fmt_expert_scale_suffix(const char *name, bool *expert)
{
    *expert = false;
    for (size_t i = 0; i < sizeof expert_names / sizeof *expert_names; i++)
        if (strstr(name, expert_names[i].piece)) {
            *expert = true;
            return expert_names[i].scale_suffix;
        }
    return NULL;
}

bool fmt_is_expert(const char *name)
{
    bool expert;
    fmt_expert_scale_suffix(name, &expert);
    return expert;
}

/* Llama-4 and gpt-oss store their fused experts [E, in, out]: transformers'
 * Llama4TextExperts and GptOssExperts hold gate_up_proj [E, H, 2I] and
 * down_proj [E, I, H], and vLLM's Llama4Model.load_moe_expert_weights
 * (models/llama4.py) splits gate_up_proj with chunk(2, dim=-1) and then
 * transposes each weight, and the tensor named after it with a scale suffix,
 * with transpose(-1, -2).  Other fused experts (transformers v5's Qwen3-MoE,
 * Mixtral) are [E, out, in].  Told apart by the hidden size: the input of
 * gate_up_proj, the output of down_proj. */
bool fmt_experts_in_out(const char *name, int rank, const uint64_t *shape, uint64_t hidden)
{
    if (rank != 3 || !hidden || !fmt_is_expert(name))
        return false;
    if (fp8_has_suffix(name, "gate_up_proj"))
        return shape[1] == hidden && shape[2] != hidden;
    if (fp8_has_suffix(name, "down_proj"))
        return shape[2] == hidden && shape[1] != hidden;
    return false;
}

bool fmt_is_fused_gate_up(const char *name)
{
    return strstr(name, "gate_up_proj") || strstr(name, ".w13") || strstr(name, "w1_w3") ||
           strstr(name, "gate_up.");
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
        cJSON_AddItemToObject(q, ignore_keys[spec->format].config_key, ignored);
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
        cJSON_AddItemToObject(q, ignore_keys[spec->format].config_key, ignored);
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
        cJSON_AddItemToObject(q, ignore_keys[spec->format].config_key, ignored);
        break;
    }
    if (o->declare_ignore && o->declare_no_list) /* --like: the reference has none */
        cJSON_DeleteItemFromObjectCaseSensitive(q, ignore_keys[spec->format].config_key);
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
    cJSON_AddItemToObject(q, ignore_keys[FP8_FORMAT_MODELOPT].config_key, ignore);
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
                                                ignore_keys[spec->format].side_key);
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
    cJSON_AddItemToObject(q, ignore_keys[FP8_FORMAT_MODELOPT].side_key, ignore);
    if (group_size)
        cJSON_AddNumberToObject(q, "group_size", group_size);
    return root;
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
