/*
 * verify_rules.c - verify's structure pass: every FP8 weight has exactly the scale
 * its format's loader expects (name, dtype, shape), no orphan scales, the
 * ignore list, and the rules each loader applies beyond the format
 * (fp8conv-formats(5), FORMATS and LOADER RULES).
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/verify.h"
#include "common/fp8_math.h"
#include "io/checkpoint.h"
#include "layout/formats.h"
#include "layout/like.h"
#include "layout/parallel.h"
#include "common/types.h"
#include "compute/jobs.h"
#include "compute/quant_cpu.h"
#include "ops/dequantize.h"

/* ---------------------------------------------------------------- structure */

/* The scale a loader of the declared format expects for weight `t`. */
void verify_expected_scale(const fp8_verify *v, const fp8_tensor_info *t, const char **suffix,
                           int *rank, uint64_t shape[3], bool *float_dtype)
{
    *suffix = v->spec->scale_suffix;
    *float_dtype = v->spec->scale_dtype != FMT_SCALE_U8;
    fmt_scale_shape(v->spec, t->rank, t->shape, v->block_rows, v->block_cols, rank, shape);
}

const fp8_tensor_info *verify_find_scale(const fp8_verify *v, const fp8_tensor_info *t,
                                         size_t *shard, const char **suffix)
{
    const char *const names[] = { v->spec->scale_suffix, v->spec->alt_scale_suffix };
    for (int k = 0; k < 2 && names[k]; k++) {
        char name[1024];
        snprintf(name, sizeof name, "%s%s", t->name, names[k]);
        const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, name, shard);
        if (s) {
            if (suffix)
                *suffix = names[k];
            return s;
        }
    }
    return NULL;
}

/* The loaders that read `module` as named by the ignore list (0: none),
 * matched as the declared format's loaders match it (fmt_ignore_match). */
static unsigned ignored(const fp8_verify *v, const char *module)
{
    unsigned loaders = 0;
    for (size_t i = 0; i < v->nignore; i++)
        switch (fmt_ignore_match(v->format, v->ignore[i], module)) {
        case FMT_IGNORES_ALL: return FP8_LOADERS_ALL;
        case FMT_IGNORES_LOOSE: loaders |= BIT(FP8_LOADER_TRANSFORMERS); break;
        case FMT_IGNORES_NONE: break;
        }
    return loaders;
}

static fp8_status check_weight(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t, size_t shard)
{
    const char *file = fp8_checkpoint_shard_name(v->ck, shard);
    char name[1024], other[1024], want[96], got[96];
    if (t->rank != 2 && t->rank != 3)
        return verify_add(ctx, v, FP8_SEV_ERROR, "fp8-rank",
                   "%s: %s: an F8_E4M3 tensor of rank %d (loaders take 2-D weights and 3-D "
                   "experts)",
                   file, t->name, t->rank);
    fp8_status st = FP8_OK;
    if (!t->elements) {
        fp8_shape_text(t->rank, t->shape, got, sizeof got);
        st = verify_add(ctx, v, FP8_SEV_WARNING, "empty-weight",
                        "%s: %s: shape %s holds no values: loaders build the layer from "
                        "config.json's sizes, which no real layer has as 0, and convert refuses it",
                        file, t->name, got);
        if (st)
            return st;
    }
    const char *suffix;
    int rank;
    uint64_t shape[3];
    bool float_dtype;
    verify_expected_scale(v, t, &suffix, &rank, shape, &float_dtype);
    snprintf(name, sizeof name, "%s%s", t->name, suffix);
    snprintf(other, sizeof other, "%s%s", t->name,
             strcmp(suffix, "_scale") == 0 ? "_scale_inv" : "_scale");
    /* DeepSeek-V4 names X.weight's scale X.scale, F8_E8M0 (fp4.h's row) */
    bool module_scale = v->family && v->family->trunk_scale_suffix &&
                        fp8_has_suffix(t->name, ".weight");
    if (module_scale) {
        snprintf(name, sizeof name, "%.*s%s", (int)strlen(t->name) - 7, t->name,
                 v->family->trunk_scale_suffix);
        float_dtype = false;
    }
    size_t sshard;
    const char *found = NULL;
    const fp8_tensor_info *s = module_scale ? fp8_checkpoint_find(v->ck, name, &sshard)
                                            : verify_find_scale(v, t, &sshard, &found);
    if (module_scale)
        found = suffix;
    const fp8_tensor_info *o = fp8_checkpoint_find(v->ck, other, NULL);
    if (s && found != suffix) { /* the layout's other name: then the first is the other */
        o = fp8_checkpoint_find(v->ck, name, NULL);
        snprintf(name, sizeof name, "%s%s", t->name, found);
    }
    if (!s && o)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-name",
                   "%s: %s: its scale is named '%s', but a %s loader looks for '%s'", file,
                   t->name, other, v->format_name, name);
    if (!s)
        return verify_add(ctx, v, FP8_SEV_ERROR, "missing-scale",
                   "%s: %s: no scale '%s'; the loader cannot dequantize it", file, t->name, name);
    if (o)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-name", "%s: %s: has both '%s' and '%s'", file,
                   t->name, name, other);
    const char *sfile = fp8_checkpoint_shard_name(v->ck, sshard);
    /* vLLM's DeepseekV4Model.load_weights views every float8_e8m0fnu expert
     * weight_scale as uint8, the packed experts' parameter, whatever the
     * expert_dtype (models/deepseek_v4/nvidia/model.py): under "fp8" its
     * byte lands in the float32 parameter as a number (vLLM PR 51946) */
    if (module_scale && v->family_fp8_experts && s->dtype == FP8_DTYPE_F8_E8M0 &&
        fmt_is_expert(t->name))
        return verify_add_for(ctx, v, BIT(FP8_LOADER_VLLM), "e8m0-expert-scale",
                   "%s: %s: F8_E8M0 scale of an FP8 expert under %s \"%s\": vLLM's "
                   "DeepseekV4Model.load_weights views an E8M0 expert scale as its bytes (the "
                   "packed experts' uint8 parameter), so the float32 parameter of an FP8 expert "
                   "gets 2^k's byte as its value; write it F32, as DeepSeek-V4-Flash-Base does",
                   fp8_checkpoint_shard_name(v->ck, sshard), s->name,
                   v->family->fp8_experts_key, v->family->fp8_experts_value);
    bool dtype_ok = module_scale ? s->dtype == v->family_scale_dtype
                    : v->spec->scale_dtype == FMT_SCALE_WEIGHT || v->spec->f16_scales
                        ? verify_is_float(s->dtype)
                        : s->dtype == fmt_scale_dtype_of(v->spec, s->dtype);
    if (!dtype_ok)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "scale-dtype", "%s: %s: dtype %s, but %s expects %s",
                 sfile, s->name, fp8_dtype_name(s->dtype), v->format_name,
                 module_scale ? (v->family_fp8_experts
                                     ? "F32 (expert_dtype \"fp8\": vLLM's scale parameters are float32)"
                                     : "F8_E8M0 (expert_dtype \"fp4\", the default: vLLM's scale parameters are float8_e8m0fnu)")
                 : !float_dtype ? "U8 (E8M0)"
                 : v->spec->scale_dtype == FMT_SCALE_WEIGHT
                     ? "the weight's original dtype (BF16, F16 or F32)"
                 : v->spec->f16_scales
                     ? "a float scale (F32, BF16 or F16), which the loaders copy into their F32 "
                       "scale parameter; other dtypes are copied as numbers, not as scales"
                     : "F32");
    bool shape_ok = s->rank == rank;
    for (int d = 0; shape_ok && d < rank; d++)
        shape_ok = s->shape[d] == shape[d];
    /* one scale for the matrix, [] or [1]: vLLM's and SGLang's per-tensor
     * scale loaders reshape a [] scale to [1] (sglang layers/parameter.py,
     * PerTensorScaleParameter; vllm model_executor/parameter.py) */
    if (!shape_ok && v->spec->alt_scale_suffix && rank == 0 && s->rank == 1 && s->shape[0] == 1)
        shape_ok = true;
    if (!st && !shape_ok) {
        fp8_shape_text(rank, shape, want, sizeof want);
        fp8_shape_text(s->rank, s->shape, got, sizeof got);
        st = verify_add(ctx, v, FP8_SEV_ERROR, "scale-shape",
                 "%s: %s: shape %s, but %s expects %s for weight %s", sfile, s->name, got,
                 v->format_name, want, t->name);
    }
    return st;
}

/* ---------------------------------------------------------------- loader rules */

/* What the loader rules of the whole checkpoint need: its FP8 experts and
 * the FP8 weights without a calibrated input_scale (first of each). */
typedef struct {
    size_t experts, no_input_scale, partial;
    size_t alt_named, named; /* scales under the layout's alt_scale_suffix, and under its own */
    const char *first_expert, *first_no_input_scale, *first_partial;
} loader_tally;

/* The rules a real loader applies to one FP8 weight beyond its scale:
 * routers stay unquantized, a block must not span a fused gate/up weight's
 * halves, static schemes need input_scale. */
static fp8_status check_loader_rules(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t,
                                     const char *file, loader_tally *lr)
{
    fp8_status st = FP8_OK;
    if (t->rank < 2 || t->rank > 3) /* fp8-rank said it; the rules below need rows */
        return FP8_OK;
    const char *keep = fmt_default_keep(t->name, t->rank, t->shape, v->experts);
    if (keep && strcmp(keep, "MoE router") == 0)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "router-quantized",
                 "%s: %s is F8_E4M3, but it is an MoE router (its %llu rows are the %llu "
                 "experts): transformers runs the router on the raw FP8 codes and vLLM keeps "
                 "routers unquantized; it must stay in bf16",
                 file, t->name, (unsigned long long)t->shape[t->rank - 2],
                 (unsigned long long)v->experts);
    /* vLLM builds the MTP head as a ParallelLMHead (models/deepseek_mtp.py,
     * SharedHead), left unquantized by every FP8 config (get_quant_method
     * quantizes LinearBase and FusedMoE only): it has no parameter for the
     * weight's scale, and DeepSeekMTP.load_weights looks the scale's name up in
     * params_dict, a KeyError that stops the load */
    if (!st && keep && strstr(keep, "shared_head.head"))
        st = verify_add_for(ctx, v, BIT(FP8_LOADER_VLLM), "mtp-head-quantized",
                     "%s: %s is F8_E4M3, but it is the MTP layer's output head "
                     "(shared_head.head): vLLM builds it unquantized (a ParallelLMHead) and "
                     "fails on its scale with a KeyError; the releases keep it in bf16",
                     file, t->name);
    /* fused experts stored [E, in, out] (fmt_experts_in_out): vLLM's
     * Llama4Model.load_moe_expert_weights (models/llama4.py) splits gate_up_proj
     * and its scale with chunk(2, dim=-1) and transposes both with
     * transpose(-1, -2): a square block's scale grid transposes with its
     * weight; a channel, tensor or MX scale, or an oblong block, does not */
    bool in_out = fmt_experts_in_out(t->name, t->rank, t->shape, v->hidden);
    if (!st && in_out && !(v->scheme == FP8_SCHEME_BLOCK && v->block_rows == v->block_cols))
        st = verify_add_for(ctx, v, BIT(FP8_LOADER_VLLM), "experts-in-out",
                     "%s: %s: fused experts stored [E, in, out] (Llama-4, gpt-oss) with %s "
                     "scales: vLLM's llama4.py transposes the weight and its scale when it "
                     "loads them, so only square blocks keep each scale on its values",
                     file, t->name,
                     v->scheme == FP8_SCHEME_BLOCK ? "oblong block" : fp8_scheme_name(v->scheme));
    uint64_t rows = t->shape[t->rank - 2];
    uint64_t split = in_out ? t->shape[2] : rows;
    uint32_t block = in_out ? v->block_cols : v->block_rows;
    if (!st && fp8_scheme_has_block(v->scheme) && fmt_is_fused_gate_up(t->name) &&
        (split % 2 || (split / 2) % block))
        st = verify_add_for(ctx, v, SERVING, "fused-block",
                     "%s: %s: a fused gate/up weight of %llu %ss whose %u-%s blocks span the "
                     "gate and up halves; vLLM and SGLang split the halves when they load it and "
                     "cannot split a block's scale",
                     file, t->name, (unsigned long long)split, in_out ? "column" : "row", block,
                     in_out ? "column" : "row");
    const char *suffix = NULL;
    if (verify_find_scale(v, t, NULL, &suffix))
        suffix == v->spec->scale_suffix ? lr->named++ : lr->alt_named++;
    if (t->rank == 3 || fmt_is_expert(t->name)) {
        if (!lr->experts++)
            lr->first_expert = t->name;
    }
    if (fp8_scheme_has_block(v->scheme) &&
        (rows % v->block_rows || t->shape[t->rank - 1] % v->block_cols) && !lr->partial++)
        lr->first_partial = t->name;
    if (v->spec->needs_input_scale) {
        char name[1024];
        snprintf(name, sizeof name, "%.*s.input_scale",
                 (int)(strlen(t->name) - (fp8_has_suffix(t->name, ".weight") ? 7 : 0)), t->name);
        if (!fp8_checkpoint_find(v->ck, name, NULL) && !lr->no_input_scale++)
            lr->first_no_input_scale = t->name;
    }
    return st;
}

/* The loader rules of the format table that concern the whole checkpoint. */
static fp8_status check_loader_totals(fp8_ctx *ctx, fp8_verify *v, const loader_tally *lr)
{
    fp8_status st = FP8_OK;
    if (!v->spec)
        return FP8_OK;
    for (int l = 0; l < FP8_LOADER_COUNT && !st; l++) {
        const char *no_load = lr->alt_named && !lr->named ? v->spec->no_load_alt[l]
                                                          : v->spec->no_load[l];
        if (no_load)
            st = verify_add_for(ctx, v, BIT(l), "loader-format", "%s: %s: %s", v->path,
                         fmt_loader_title((fp8_loader)l), no_load);
        if (!st && lr->experts && v->spec->no_experts[l])
            st = verify_add_for(ctx, v, BIT(l), "loader-experts", "%s: %zu FP8 expert weights (%s, ...): "
                         "%s: %s", v->path, lr->experts, lr->first_expert,
                         fmt_loader_title((fp8_loader)l), v->spec->no_experts[l]);
        if (!st && lr->partial && v->spec->whole_blocks[l])
            st = verify_add_for(ctx, v, BIT(l), "partial-blocks",
                         "%s: %zu FP8 weights (%s, ...) are not whole %ux%u blocks: %s: %s",
                         v->path, lr->partial, lr->first_partial, v->block_rows, v->block_cols,
                         fmt_loader_title((fp8_loader)l), v->spec->whole_blocks[l]);
        if (!st && v->f32_model && v->spec->no_f32_model[l])
            st = verify_add_for(ctx, v, BIT(l), "loader-dtype", "%s: a float32 model: %s: %s", v->path,
                         fmt_loader_title((fp8_loader)l), v->spec->no_f32_model[l]);
    }
    /* vLLM's compressed-tensors FP8 MoE method pairs tensor weights with
     * tensor activations and channel weights with token activations */
    const fmt_spec *ct = fmt_spec_find(FP8_FORMAT_COMPRESSED_TENSORS, v->scheme);
    const char *want = ct ? ct->ct_moe_activations : NULL;
    if (!st && v->format == FP8_FORMAT_COMPRESSED_TENSORS && lr->experts && want &&
        (!v->ct_activations || strcmp(v->ct_activations, want) != 0))
        st = verify_add_for(ctx, v, SERVING, "moe-activations",
                     "%s: %zu FP8 expert weights (%s, ...) with %s weights and %s activations: "
                     "vLLM's CompressedTensorsW8A8Fp8MoEMethod takes %s weights only with "
                     "input_activations strategy \"%s\" (else a bare AssertionError)",
                     v->path, lr->experts, lr->first_expert, fp8_scheme_name(v->scheme),
                     v->ct_activations ? v->ct_activations : "no", fp8_scheme_name(v->scheme),
                     want);
    if (!st && lr->no_input_scale)
        st = verify_add_for(ctx, v, SERVING, "input-scale",
                     "%s: %zu FP8 weights (%s, ...) have no input_scale, but %s declares static "
                     "activation scales: vLLM keeps a -3.4e38 placeholder and the layers compute "
                     "garbage",
                     v->path, lr->no_input_scale, lr->first_no_input_scale, v->format_name);
    return st;
}

/* Headers, index, config against tensors. */
fp8_status verify_check_structure(fp8_ctx *ctx, fp8_verify *v)
{
    fp8_checkpoint *ck = v->ck;
    fp8_status st = FP8_OK;
    uint64_t bytes = 0, total;
    loader_tally lr = { 0 };
    for (size_t s = 0; s < fp8_checkpoint_shard_count(ck) && !st; s++) {
        const char *fmt = fp8_file_metadata_get(fp8_checkpoint_shard(ck, s), "format");
        if (!fmt || strcmp(fmt, "pt") != 0)
            st = verify_add(ctx, v, FP8_SEV_WARNING, "metadata-format",
                     "%s: __metadata__ has no \"format\": \"pt\" (older transformers refuse it)",
                     fp8_checkpoint_shard_name(ck, s));
    }
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++)
        bytes += fp8_tensor_nbytes(fp8_checkpoint_tensor(ck, i, NULL));
    if (!st && fp8_checkpoint_index_total_size(ck, &total) && total != bytes)
        st = verify_add(ctx, v, FP8_SEV_WARNING, "total-size",
                 "model.safetensors.index.json: metadata.total_size is %llu, but the tensors "
                 "hold %llu bytes",
                 (unsigned long long)total, (unsigned long long)bytes);
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck) && !st; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &shard);
        const char *file = fp8_checkpoint_shard_name(ck, shard);
        if (fp4_is_group_scale(ck, t->name)) /* verify_fp4.c judges it */
            continue;
        if (t->dtype == FP8_DTYPE_F8_E4M3) {
            v->fp8_weights++;
            if (v->format == FP8_FORMAT_DEFAULT)
                continue;
            st = check_weight(ctx, v, t, shard);
            if (!st)
                st = check_loader_rules(ctx, v, t, file, &lr);
            char module[1024];
            snprintf(module, sizeof module, "%.*s", (int)(strlen(t->name) - (fp8_has_suffix(t->name, ".weight") ? 7 : 0)), t->name);
            unsigned by = st ? 0 : ignored(v, module);
            if (by == FP8_LOADERS_ALL)
                st = verify_add(ctx, v, FP8_SEV_ERROR, "ignored-but-quantized",
                         "%s: %s is F8_E4M3, but the ignore list names '%s': the loader will "
                         "read it as unquantized",
                         file, t->name, module);
            else if (by)
                st = verify_add_for(ctx, v, by, "ignored-but-quantized",
                         "%s: %s is F8_E4M3, but an entry of modules_to_not_convert matches "
                         "'%s' as transformers matches them (a regex from the start of the "
                         "name, or the name's end): transformers will read it as unquantized",
                         file, t->name, module);
            continue;
        }
        /* a scale needs its FP8 weight */
        const char *suffix = fp8_has_suffix(t->name, "_scale_inv") ? "_scale_inv"
                             : fp8_has_suffix(t->name, "_scale") && !fp8_has_suffix(t->name, "input_scale") &&
                                       !fp8_has_suffix(t->name, "k_scale") && !fp8_has_suffix(t->name, "v_scale")
                                 ? "_scale"
                                 : NULL;
        if (suffix) {
            char base[1024];
            snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - strlen(suffix)), t->name);
            const fp8_tensor_info *w = fp8_checkpoint_find(ck, base, NULL);
            /* a bare X_scale with no tensor X and no weight in its name is a
             * model's own parameter (CLIP's logit_scale), not a quantization scale */
            bool parameter = !w && !strcmp(suffix, "_scale") && !fp8_has_suffix(base, "weight");
            if (!parameter && (!w || w->dtype != FP8_DTYPE_F8_E4M3))
                st = verify_add(ctx, v, FP8_SEV_ERROR, "orphan-scale",
                         "%s: %s: a scale without an F8_E4M3 weight '%s'", file, t->name, base);
            continue;
        }
        /* an unquantized Linear-like weight the config does not declare */
        /* an embedding is not one: every FP8 loader quantizes Linear layers only
         * (vLLM's Fp8Config, CompressedTensorsConfig and ModelOpt configs:
         * get_quant_method quantizes LinearBase and FusedMoE; transformers'
         * replace_with_fp8_linear replaces nn.Linear; llm-compressor and
         * ModelOpt target Linear modules), so the releases' ignore lists never
         * name embed_tokens, and need not */
        const char *keep = fmt_default_keep(t->name, t->rank, t->shape, v->experts);
        if (v->format != FP8_FORMAT_DEFAULT && v->has_ignore_list && t->rank == 2 &&
            (verify_is_float(t->dtype) || t->dtype == FP8_DTYPE_F64) &&
            fp8_has_suffix(t->name, ".weight") && !(keep && !strcmp(keep, "embedding"))) {
            char module[1024];
            snprintf(module, sizeof module, "%.*s", (int)(strlen(t->name) - 7), t->name);
            if (!ignored(v, module))
                st = verify_add(ctx, v, FP8_SEV_WARNING, "not-in-ignore-list",
                         "%s: %s stays %s but '%s' is not in the config's ignore list", file,
                         t->name, fp8_dtype_name(t->dtype), module);
        }
    }
    if (!st && v->fp8_weights && v->format == FP8_FORMAT_DEFAULT)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "no-quant-config",
                 "%s: %zu F8_E4M3 tensors, but %s declares no quantization_config: loaders will "
                 "read them as plain weights",
                 v->path, v->fp8_weights,
                 v->config_dir ? "config.json" : "a single file with no config.json beside it");
    if (!st && !v->fp8_weights && !v->fp4_weights)
        st = verify_add_unanswered(ctx, v, "no-fp8-weights",
                            "%s: no F8_E4M3 weights: not an FP8 checkpoint (quantize makes one)",
                            v->path);
    if (!st)
        st = check_loader_totals(ctx, v, &lr);
    return st;
}
