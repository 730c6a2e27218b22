/*
 * verify_rules.c - verify's structure pass: every FP8 weight has exactly the scale
 * its format's loader expects (name, dtype, shape), no orphan scales, the
 * ignore list, and the rules each loader applies beyond the format
 * (fp8conv-formats(5), FORMATS and LOADER RULES); each packed-FP4 weight has
 * its scale as its layout's loaders read it (fp4.h;
 * fp8conv-formats(5), 2026 LAYOUTS: missing-scale, fp4-shape, scale-dtype,
 * scale-shape, bad-scale, NVFP4's second level too), and the E8M0 NaN bytes
 * of DeepSeek-V4's FP8 block scales (X.scale), which the values pass does
 * not read.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "ops/verify_passes.h"
#include "layout/formats.h"
#include "layout/fp4.h"
#include "ops/dequantize.h"

/* ---------------------------------------------------------------- structure */

/* The loaders that read `module` as named by the ignore list (0: none),
 * matched as the declared format's loaders match it (fmt_ignore_match). */
static unsigned ignored(const fp8_verify *v, const char *module)
{
    switch (v->ignore_set ? fmt_ignore_set_match(v->ignore_set, module, NULL) : FMT_IGNORES_NONE) {
    case FMT_IGNORES_ALL: return FP8_LOADERS_ALL;
    case FMT_IGNORES_LOOSE: return BIT(FP8_LOADER_TRANSFORMERS);
    default: return 0;
    }
}

static fp8_status check_weight(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t, size_t shard)
{
    const char *file = fp8_checkpoint_shard_name(v->ck, shard);
    char want[96], got[96];
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
    /* the scale's name is t->name's first `keep` bytes then `suffix`, the
     * other spelling t->name then `alt`: built nowhere (names run to the
     * header's limit) */
    size_t keep = strlen(t->name);
    const char *alt = strcmp(suffix, "_scale") == 0 ? "_scale_inv" : "_scale";
    /* DeepSeek-V4 names X.weight's scale X.scale, F8_E8M0 (fp4.h's row) */
    bool module_scale = v->family && v->family->trunk_scale_suffix &&
                        fp8_has_suffix(t->name, ".weight");
    if (module_scale) {
        keep -= 7;
        suffix = v->family->trunk_scale_suffix;
        float_dtype = false;
    }
    size_t sshard;
    const char *found = NULL;
    const fp8_tensor_info *s = module_scale ? ck_find_with(v->ck, t->name, keep, suffix, &sshard)
                                            : verify_find_scale(v, t, &sshard, &found);
    if (module_scale)
        found = suffix;
    const fp8_tensor_info *o = ck_find_with(v->ck, t->name, strlen(t->name), alt, NULL);
    if (s && found != suffix) { /* the layout's other name: then the first is the other */
        o = ck_find_with(v->ck, t->name, keep, suffix, NULL);
        suffix = found;
    }
    int n = (int)keep;
    if (!s && o)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-name",
                   "%s: %s: its scale is named '%s%s', but a %s loader looks for '%.*s%s'", file,
                   t->name, t->name, alt, v->format_name, n, t->name, suffix);
    if (!s)
        return verify_add(ctx, v, FP8_SEV_ERROR, "missing-scale",
                   "%s: %s: no scale '%.*s%s'; the loader cannot dequantize it", file, t->name,
                   n, t->name, suffix);
    if (o)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-name", "%s: %s: has both '%s' and '%s%s'",
                   file, t->name, s->name, t->name, alt);
    const char *sfile = fp8_checkpoint_shard_name(v->ck, sshard);
    /* vLLM's DeepseekV4Model.load_weights views every float8_e8m0fnu expert
     * weight_scale as uint8, the packed experts' parameter, whatever the
     * expert_dtype (models/deepseek_v4/nvidia/model.py): under "fp8" its
     * byte lands in the float32 parameter as a number (vLLM PR 51946) */
    if (module_scale && v->family_fp8_experts && s->dtype == v->family->scale_dtype &&
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
                        ? fp8_dtype_is_float(s->dtype)
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
    bool shape_ok = verify_has_shape(s, rank, shape);
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
    /* FP8 experts a loader's expert row rules out (fmt_expert_no_load): the first, and why */
    size_t blocked[FP8_LOADER_COUNT];
    const char *first_blocked[FP8_LOADER_COUNT], *blocked_why[FP8_LOADER_COUNT];
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
    const char *keep = fmt_default_keep(t->name, t->rank, t->shape, v->experts, v->model_type);
    if (keep && strcmp(keep, "MoE router") == 0)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "router-quantized",
                 "%s: %s is F8_E4M3, but it is an MoE router (its %llu rows are the %llu "
                 "experts): transformers runs the router on the raw FP8 codes and vLLM keeps "
                 "routers unquantized; it must stay in bf16",
                 file, t->name, (unsigned long long)t->shape[t->rank - 2],
                 (unsigned long long)v->experts);
    /* a tower some loaders build without the quant config (fmt_tower_unquantized) */
    unsigned tower = fmt_tower_unquantized(v->model_type, t->name);
    if (!st && tower)
        st = verify_add_for(ctx, v, tower, "tower-quantized",
                     "%s: %s is F8_E4M3, but it is in the vision tower or projector of a %s "
                     "model, which %s builds unquantized whatever the config declares; keep it in "
                     "bf16 (quantize does unless --no-default-ignore)",
                     file, t->name, v->model_type,
                     tower == BIT(FP8_LOADER_VLLM)     ? "vLLM"
                     : tower == BIT(FP8_LOADER_SGLANG) ? "SGLang"
                                                       : "vLLM and SGLang");
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
    /* an FP8 indexer weights_proj: vLLM and SGLang build it unquantized
     * (fmt_default_keep), so its codes load as bf16 values with no scale */
    if (!st && keep && strcmp(keep, INDEXER_WEIGHTS_PROJ) == 0)
        st = verify_add_for(ctx, v, SERVING, "indexer-quantized",
                     "%s: %s is F8_E4M3, but it is DeepSeek-V3.2's indexer weights_proj: vLLM "
                     "(models/deepseek_v2.py Indexer) and SGLang (nsa_indexer.py) build it with "
                     "no quantization, so its codes would be read as values without their "
                     "scale; the release keeps it in bf16",
                     file, t->name);
    /* DeepSeek weights whose block scales vLLM re-reads from the shapes
     * (MLA kv_b_proj, V3.2's indexer wk: fmt_vllm_block_shape) */
    const char *vrule = NULL, *vwhy = NULL;
    if (!st && t->rank == 2 && fp8_scheme_has_block(v->scheme) &&
        (vwhy = fmt_vllm_block_shape(t->name, t->shape[0], t->shape[1], v->format,
                                     v->block_rows, v->block_cols, &vrule)))
        st = verify_add_for(ctx, v, BIT(FP8_LOADER_VLLM), vrule,
                     "%s: %s: [%llu, %llu] is not whole %ux%u blocks: %s", file, t->name,
                     (unsigned long long)t->shape[0], (unsigned long long)t->shape[1],
                     v->block_rows, v->block_cols, vwhy);
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
    for (int l = 0; l < FP8_LOADER_COUNT; l++) {
        const char *why = fmt_expert_no_load(t->name, (fp8_loader)l);
        if (why && !lr->blocked[l]++) {
            lr->first_blocked[l] = t->name;
            lr->blocked_why[l] = why;
        }
    }
    if (fp8_scheme_has_block(v->scheme) &&
        (rows % v->block_rows || t->shape[t->rank - 1] % v->block_cols) && !lr->partial++)
        lr->first_partial = t->name;
    if (v->spec->needs_input_scale || v->static_acts) { /* Mistral's activation_scale: vLLM
                                                          * models/mistral3.py renames it */
        size_t stem = strlen(t->name) - (fp8_has_suffix(t->name, ".weight") ? 7 : 0);
        if (!ck_find_with(v->ck, t->name, stem, ".input_scale", NULL) &&
            !ck_find_with(v->ck, t->name, stem, ".activation_scale", NULL) && !lr->no_input_scale++)
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
        if (!st && lr->blocked[l] && !v->spec->no_experts[l])
            st = verify_add_for(ctx, v, BIT(l), "loader-experts", "%s: %zu FP8 expert weights (%s, ...): "
                         "%s: %s", v->path, lr->blocked[l], lr->first_blocked[l],
                         fmt_loader_title((fp8_loader)l), lr->blocked_why[l]);
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

/* ---------------------------------------------------------------- packed FP4 */

/* The first byte of scale tensor `s` (elements of type `e`) that is no
 * scale (fp8_elem_scale_ok: E8M0 0xFF, E4M3 NaN or negative), read a MiB
 * at a time; *at its index, or UINT64_MAX for none.  Float scales (an
 * element without NaN codes: INT4's, in the weight's dtype): the first that
 * is not finite and positive, *at its byte. */
static fp8_status find_nan(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *s, size_t shard,
                           fp8_elem e, uint64_t *at)
{
    const fp8_elem_traits *et = fp8_elem_get(e);
    bool bytes = et->is_nan != NULL, ok[256];
    for (unsigned b = 0; bytes && b < 256; b++) /* fp8_elem_scale_ok, looked up */
        ok[b] = fp8_elem_scale_ok(et, (uint8_t)b);
    enum { CHUNK = 1 << 20 };
    uint64_t n = fp8_tensor_nbytes(s);
    unsigned char *buf = malloc(CHUNK);
    *at = UINT64_MAX;
    if (!buf)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_status st = FP8_OK;
    for (uint64_t off = 0; off < n && !st && *at == UINT64_MAX; off += CHUNK) {
        uint64_t len = n - off < CHUNK ? n - off : CHUNK;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, off, buf, len);
        unsigned sz = bytes ? 1 : fp8_dtype_bits(s->dtype) / 8;
        for (uint64_t k = 0; !st && k + sz <= len && *at == UINT64_MAX; k += sz) {
            float f;
            if (bytes ? !ok[buf[k]] : !dq_scale_value(s->dtype, buf + k, 0, &f))
                *at = off + k;
        }
    }
    free(buf);
    return st;
}

/* INT4's weight_shape, I64 [2] = [rows, cols] (fp4_weight_find's rule and
 * message): an error "weight-shape" where it is missing or disagrees. */
static fp8_status check_shape(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t,
                              size_t shard)
{
    fp8_ctx *wctx = fp8_ctx_create();
    fp4_weight w;
    fp8_status found = wctx ? fp4_weight_find(wctx, v->ck, t, shard, "checked", &w)
                            : FP8_ERR_NOMEM;
    fp8_status st = found == FP8_ERR_NOMEM ? fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory")
                    : found ? verify_add(ctx, v, FP8_SEV_ERROR, "weight-shape", "%s",
                                         fp8_ctx_message(wctx))
                            : FP8_OK;
    if (!found)
        fp4_weight_free(&w);
    fp8_ctx_free(wctx);
    return st;
}

/* NVFP4's second level: one finite positive F32 beside the weight. */
static fp8_status check_global(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                               const fp8_tensor_info *t, const char *file)
{
    size_t shard;
    float g;
    int stem = (int)(strlen(t->name) - strlen(l->weight_suffix));
    const fp8_tensor_info *s = ck_find_with(v->ck, t->name, (size_t)stem, l->global_suffix, &shard);
    if (!s)
        return verify_add(ctx, v, FP8_SEV_ERROR, "missing-scale",
                          "%s: %s: packed %s, but no second-level scale '%.*s%s'; the loader "
                          "cannot dequantize it (%s)",
                          file, t->name, l->name, stem, t->name, l->global_suffix, l->source);
    const char *sfile = fp8_checkpoint_shard_name(v->ck, shard);
    if (s->dtype != FP8_DTYPE_F32)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-dtype",
                          "%s: %s: dtype %s, but %s's second-level scale is F32 (%s)", sfile,
                          s->name, fp8_dtype_name(s->dtype), l->name, l->source);
    if (s->elements != 1)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-shape",
                          "%s: %s: %llu elements, but %s's second-level scale is one (%s)", sfile,
                          s->name, (unsigned long long)s->elements, l->name, l->source);
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, 0, &g, 4);
    if (!st && !(g > 0 && g <= 3.4028234663852886e38f))
        st = verify_add(ctx, v, FP8_SEV_ERROR, "bad-scale",
                        "%s: %s: %g is not a finite positive scale", sfile, s->name, (double)g);
    return st;
}

/* The F32 of second-level scale `name`; *g NaN when it is not one F32
 * (check_global's finding). */
static fp8_status read_global(fp8_ctx *ctx, fp8_verify *v, const char *name, float *g)
{
    size_t shard;
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, name, &shard);
    *g = __builtin_nanf("");
    if (!s || s->dtype != FP8_DTYPE_F32 || s->elements != 1)
        return FP8_OK;
    return fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, 0, g, 4);
}

/* A later part of a fused layer (fp4.h's fp4_fused_parts) whose
 * second-level scale is not the first part's.  Each later part is
 * compared with the first. */
static fp8_status check_fused_global(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                                     const fp8_tensor_info *t, const char *file)
{
    char *stem = fp8_name_with(t->name, strlen(t->name) - strlen(l->weight_suffix), ""),
         *mine = NULL, *first = NULL;
    size_t f, base;
    float a, b;
    fp8_status st = FP8_OK;
    if (stem && (!fp4_fused_part(stem, &f, &base) || !strcmp(stem + base, fp4_fused_parts[f][0])))
        goto out; /* no part, or the first */
    if (!stem || asprintf(&mine, "%s%s", stem, l->global_suffix) < 0 ||
        asprintf(&first, "%.*s%s%s", (int)base, stem, fp4_fused_parts[f][0], l->global_suffix) < 0) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", file);
        goto out;
    }
    st = read_global(ctx, v, mine, &a);
    if (st || (st = read_global(ctx, v, first, &b)) || a != a || b != b || !memcmp(&a, &b, 4))
        goto out;
    st = verify_add_for(ctx, v, BIT(FP8_LOADER_VLLM), "fused-global-scale",
                        "%s: %s: second-level scale %s is %.9g, but %s is %.9g: vLLM "
                        "loads %s with %s as one layer with one such scale (the "
                        "largest; an MoE expert's gate's), so it computes other values "
                        "than this checkpoint's for one of them; llm-compressor and "
                        "ModelOpt give the parts one, from their largest amax",
                        file, t->name, mine, (double)a, first, (double)b, stem + base,
                        fp4_fused_parts[f][0]);
out:
    free(stem);
    free(mine);
    free(first);
    return st;
}

static fp8_status check_one(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                            const fp8_tensor_info *t, size_t shard, const char *sname)
{
    const char *file = fp8_checkpoint_shard_name(v->ck, shard);
    size_t sshard;
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, sname, &sshard);
    char want[96], got[96];
    uint64_t experts, rows, cols, sshape[3], at;
    int srank;
    if (!s)
        return verify_add(ctx, v, FP8_SEV_ERROR, "missing-scale",
                          "%s: %s: packed %s, but no scale '%s'; the loader cannot dequantize it "
                          "(%s)",
                          file, t->name, l->name, sname, l->source);
    v->fp4_weights++;
    if (!fp4_layout_geometry(l, t->rank, t->shape, &experts, &rows, &cols, &srank, sshape)) {
        fp8_shape_text(t->rank, t->shape, got, sizeof got);
        snprintf(want, sizeof want, "[rows, cols / %u], cols a multiple of ", /* codes a word */
                 fp8_dtype_bits(l->weight_dtype) / fp8_elem_get(l->scheme->elem)->bits);
        return verify_add(ctx, v, FP8_SEV_ERROR, "fp4-shape",
                          "%s: %s: packed shape %s is not %s's (%s%u; %s)", file, t->name, got,
                          l->name,
                          t->rank == 4 ? "[experts, rows, groups, 16], codes a group: " : want,
                          l->scheme->run, l->source);
    }
    const char *sfile = fp8_checkpoint_shard_name(v->ck, sshard);
    fp8_status st = FP8_OK;
    bool dtype_ok = fp4_layout_scale_dtype_ok(l, s->dtype);
    uint32_t run = fp4_layout_run(l, s, srank, cols);
    sshape[srank - 1] = cols / run;
    if (!dtype_ok)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "scale-dtype",
                        "%s: %s: dtype %s, but %s scales are %s (%s; %s)", sfile, s->name,
                        fp8_dtype_name(s->dtype), l->name, fp8_dtype_name(l->scale_dtype),
                        l->scale_dtype == FP8_DTYPE_U8 ? "E8M0 bytes, as its loaders allocate them"
                                                       : fp8_elem_get(l->scheme->scale_elem[0])->name,
                        l->source);
    bool shape_ok = verify_has_shape(s, srank, sshape);
    if (!st && !shape_ok) {
        fp8_shape_text(srank, sshape, want, sizeof want);
        fp8_shape_text(s->rank, s->shape, got, sizeof got);
        st = verify_add(ctx, v, FP8_SEV_ERROR, "scale-shape",
                        "%s: %s: shape %s, but %s expects %s for weight %s (one scale per %u "
                        "elements of a row)",
                        sfile, s->name, got, l->name, want, t->name, run);
    }
    fp8_elem se = l->scheme->scale_elem[0];
    uint8_t nan_byte = 0;
    if (!st && dtype_ok && shape_ok &&
        !(st = find_nan(ctx, v, s, sshard, se, &at)) && at != UINT64_MAX &&
        !(st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, sshard), s, at, &nan_byte, 1)))
        st = fp8_elem_get(se)->is_nan
                 ? verify_add(ctx, v, FP8_SEV_ERROR, "bad-scale",
                              "%s: %s: element %llu is 0x%02x, %s %s %s: the %u values it "
                              "scales are %s",
                              sfile, s->name, (unsigned long long)at, nan_byte,
                              fp8_elem_get(se)->is_nan(nan_byte) ? "the" : "a negative",
                              fp8_elem_get(se)->name,
                              fp8_elem_get(se)->is_nan(nan_byte) ? "NaN" : "scale", run,
                              fp8_elem_get(se)->is_nan(nan_byte) ? "NaN" : "of the wrong sign")
                 : verify_add(ctx, v, FP8_SEV_ERROR, "bad-scale",
                              "%s: %s: element %llu is not a finite positive scale (NaN, "
                              "infinite, zero or negative): the %u values it scales cannot be "
                              "recovered",
                              sfile, s->name,
                              (unsigned long long)(at / (fp8_dtype_bits(s->dtype) / 8)), run);
    if (!st && l->global_suffix && !(st = check_global(ctx, v, l, t, file)))
        st = check_fused_global(ctx, v, l, t, file);
    if (!st && l->shape_suffix && dtype_ok && shape_ok) /* INT4's weight_shape: fp4_weight_find's rule */
        st = check_shape(ctx, v, t, shard);
    return st;
}

/* The E8M0 scale X.scale of FP8 weight X.weight in a family that names
 * scales so (DeepSeek-V4): a NaN byte makes 128 x 128 values NaN.  Its name,
 * dtype and shape are verify_rules.c's check_weight's to judge. */
static fp8_status check_module_scale(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t)
{
    size_t shard;
    uint64_t at;
    const fp8_tensor_info *s = ck_find_with(v->ck, t->name, strlen(t->name) - 7,
                                            v->family->trunk_scale_suffix, &shard);
    if (!s || s->dtype != v->family->scale_dtype) /* its experts' E8M0 */
        return FP8_OK;
    fp8_status st = find_nan(ctx, v, s, shard, v->family->scheme->scale_elem[0], &at);
    if (!st && at != UINT64_MAX)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "bad-scale",
                        "%s: %s: element %llu is 0xff, the E8M0 NaN: the block of %s it scales "
                        "is NaN",
                        fp8_checkpoint_shard_name(v->ck, shard), s->name, (unsigned long long)at,
                        t->name);
    return st;
}

/* The layouts whose scales config.json's producer version says hold
 * another bias (fp4.h, fp4_layout_bias_refused): one finding per layout,
 * naming its first weight and how many there are; none when `config` is
 * NULL (no config.json, or one read_declaration reported). */
static fp8_status check_bias(fp8_ctx *ctx, fp8_verify *v, const cJSON *config,
                             const fp4_layout *l, const fp8_tensor_info *first, size_t shard,
                             size_t count)
{
    char why[1024], more[64] = "";
    if (!count || !fp4_layout_bias_refused(l, config, why, sizeof why))
        return FP8_OK;
    if (count > 1)
        snprintf(more, sizeof more, " (this weight and %zu more)", count - 1);
    return verify_add(ctx, v, FP8_SEV_ERROR, "scale-bias", "%s: %s: %s%s",
                      fp8_checkpoint_shard_name(v->ck, shard), first->name, why, more);
}

/* Per loader, whether it loads the packed weights of layout `l` (fp4.h's
 * loaders column): a finding that stops that loader only, naming the
 * layout's first weight and the loader's rule, for each one that does not. */
static fp8_status check_loaders(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                                const fp8_tensor_info *first, size_t shard, size_t count,
                                const fp8_tensor_info *expert, size_t eshard, size_t experts)
{
    fp8_status st = FP8_OK;
    for (int k = 0; k < FP8_LOADER_COUNT && experts && !st; k++)
        if (l->loaders[k].experts_refuses && !l->loaders[k].refuses)
            st = verify_add_for(ctx, v, BIT(k), "loader-layout",
                                "%s: %s: %s does not load MoE experts as %s weights: %s (%zu "
                                "expert weight%s)",
                                fp8_checkpoint_shard_name(v->ck, eshard), expert->name,
                                fmt_loader_title((fp8_loader)k), l->name,
                                l->loaders[k].experts_refuses, experts, experts == 1 ? "" : "s");
    for (int k = 0; k < FP8_LOADER_COUNT && count && !st; k++)
        if (l->loaders[k].refuses)
            st = verify_add_for(ctx, v, BIT(k), "loader-layout",
                                "%s: %s: %s does not load %s weights: %s (%zu packed "
                                "weight%s)",
                                fp8_checkpoint_shard_name(v->ck, shard), first->name,
                                fmt_loader_title((fp8_loader)k), l->name, l->loaders[k].refuses,
                                count, count == 1 ? "" : "s");
    return st;
}

/* What config.json declares, for messages: "quant_method X (format Y,
 * quant_algo Z)" or "no quantization_config". */
static void declaration_text(const cJSON *config, char *buf, size_t n)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(q, "quant_method");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(q, "format");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(q, "quant_algo");
    if (!cJSON_IsString(m)) {
        snprintf(buf, n, "no quantization_config with a quant_method");
        return;
    }
    snprintf(buf, n, "quant_method %s%s%s%s%s", m->valuestring,
             cJSON_IsString(f) ? ", format " : "", cJSON_IsString(f) ? f->valuestring : "",
             cJSON_IsString(a) ? ", quant_algo " : "", cJSON_IsString(a) ? a->valuestring : "");
}

/* config.json's declaration against the packed tensors (fp4.h's decl_
 * fields): each layout present must be declared, and a declaration that
 * names one layout alone needs some of its tensors.  Not without a
 * config.json. */
static fp8_status check_declaration(fp8_ctx *ctx, fp8_verify *v, const cJSON *config,
                                    const fp8_tensor_info *const *first,
                                    const size_t *first_shard, const size_t *count)
{
    char decl[256];
    fp8_status st = FP8_OK;
    if (!config) /* no config.json (or one read_declaration reported): nothing declared */
        return FP8_OK;
    declaration_text(config, decl, sizeof decl);
    size_t present = 0;
    for (int i = 0; i < FP4_LAYOUT_COUNT && !st; i++) {
        const fp4_layout *l = fp4_layout_get(i);
        present += count[i];
        if (count[i] && !fp4_layout_declared(l, config))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "format-mismatch",
                            "%s: %s: %zu packed %s weight%s, but config.json declares %s, not "
                            "quant_method %s%s%s%s%s: the loaders dispatch on the declaration "
                            "and would not read them as %s (%s)",
                            fp8_checkpoint_shard_name(v->ck, first_shard[i]), first[i]->name,
                            count[i], l->name, count[i] == 1 ? "" : "s", decl, l->decl_method,
                            l->decl_key ? ", " : "", l->decl_key ? l->decl_key : "",
                            l->decl_key ? " " : "", l->decl_key ? l->decl_value : "", l->name,
                            l->source);
    }
    for (int i = 0; i < FP4_LAYOUT_COUNT && !st; i++) {
        const fp4_layout *l = fp4_layout_get(i);
        /* with packed weights of another layout, the finding above names them */
        if (l->decl_exclusive && !present && fp4_layout_declared(l, config))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "format-mismatch",
                            "%s: config.json declares %s (%s), but no tensor is a packed %s "
                            "weight: the loader would look for tensors that are not there (%s)",
                            v->path, decl, l->name, l->name, l->source);
    }
    return st;
}

/* ModelOpt MIXED_PRECISION (fp8conv-formats(5), ModelOpt mixed precision):
 * vLLM's ModelOptMixedPrecisionConfig gives a layer the method its
 * quantized_layers entry names, and none to a layer without one; so every
 * quantized weight not an expert (expert entries may be templates) needs an
 * entry whose quant_algo is of its element (FP8, NVFP4). */
static fp8_status check_quantized_layers(fp8_ctx *ctx, fp8_verify *v, const cJSON *config)
{
    const cJSON *layers = fp4_quantized_layers(config);
    fp8_status st = FP8_OK;
    for (size_t i = 0; layers && i < fp8_checkpoint_tensor_count(v->ck) && !st; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &shard);
        char *sname = NULL, *oname = NULL;
        const fp4_layout *l = fp4_layout_match(v->ck, t->name, t->dtype, t->rank, &sname, &oname);
        bool packed = l && sname && fp8_checkpoint_find(v->ck, sname, NULL);
        const char *suffix = packed ? l->weight_suffix : ".weight";
        fp8_elem have = packed ? l->scheme->elem : fp8_scheme_get(v->scheme)->elem;
        free(sname);
        free(oname);
        if (!(packed || (fp8_dtype_holds_codes(t->dtype) && fp8_has_suffix(t->name, ".weight"))) ||
            fmt_is_expert(t->name))
            continue;
        char *module = fp8_name_with(t->name, strlen(t->name) - strlen(suffix), "");
        if (!module)
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(layers, module);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "quant_algo");
        fp8_scheme s;
        if (!cJSON_IsString(a))
            st = verify_add_for(ctx, v, SERVING, "quantized-layers",
                                "%s: %s: quantized, but quantization_config.quantized_layers "
                                "has no entry for '%s': vLLM's ModelOptMixedPrecisionConfig "
                                "builds that layer unquantized",
                                fp8_checkpoint_shard_name(v->ck, shard), t->name, module);
        else if (!fmt_modelopt_algo_scheme(a->valuestring, &s) ||
                 fp8_scheme_get(s)->elem != have)
            st = verify_add_for(ctx, v, SERVING, "quantized-layers",
                                "%s: %s: %s, but quantized_layers declares '%s' %s: the "
                                "loaders build that layer for the declared algorithm",
                                fp8_checkpoint_shard_name(v->ck, shard), t->name,
                                packed ? l->name : "F8_E4M3", module, a->valuestring);
        free(module);
    }
    return st;
}

/* The packed-FP4 weights: each has its scale, named, typed and shaped as its
 * layout's loaders read it, with no E8M0 NaN byte (fp4.h; fp8conv-formats(5),
 * 2026 LAYOUTS); the declaration, bias and loaders of each layout present. */
static fp8_status check_packed(fp8_ctx *ctx, fp8_verify *v)
{
    fp8_status st = FP8_OK;
    cJSON *config = NULL;
    const fp8_tensor_info *first[FP4_LAYOUT_COUNT] = { 0 }, *expert[FP4_LAYOUT_COUNT] = { 0 };
    size_t count[FP4_LAYOUT_COUNT] = { 0 }, first_shard[FP4_LAYOUT_COUNT] = { 0 };
    size_t experts[FP4_LAYOUT_COUNT] = { 0 }, expert_shard[FP4_LAYOUT_COUNT] = { 0 };
    /* a config.json no loader parses is read_declaration's finding */
    if (v->config_dir && fmt_config_read(ctx, v->config_dir, &config, NULL))
        config = NULL;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(v->ck) && !st; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &shard);
        char *sname, *oname;
        if (fp8_dtype_holds_codes(t->dtype) && v->family && v->family->trunk_scale_suffix &&
            fp8_has_suffix(t->name, ".weight")) {
            st = check_module_scale(ctx, v, t);
            continue;
        }
        const fp4_layout *l = fp4_layout_match(v->ck, t->name, t->dtype, t->rank, &sname, &oname);
        if (!l)
            continue;
        if (!sname) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            break;
        }
        /* an I8 expert weight is packed FP4 in the family that says so, or
         * when its scale is there; else an int8 checkpoint's, not ours */
        if (l->by_name || l == v->family || fp8_checkpoint_find(v->ck, sname, NULL)) {
            st = check_one(ctx, v, l, t, shard, sname);
            size_t id = (size_t)(l - fp4_layout_get(FP4_LAYOUT_GPT_OSS)); /* the table's row */
            if (!count[id]++)
                first[id] = t, first_shard[id] = shard;
            if (fmt_is_expert(t->name) && !experts[id]++)
                expert[id] = t, expert_shard[id] = shard;
        }
        free(sname);
        free(oname);
    }
    if (!st)
        st = check_declaration(ctx, v, config, first, first_shard, count);
    if (!st)
        st = check_quantized_layers(ctx, v, config);
    for (int i = 0; i < FP4_LAYOUT_COUNT && !st; i++)
        if (!(st = check_bias(ctx, v, config, fp4_layout_get(i), first[i], first_shard[i],
                              count[i])))
            st = check_loaders(ctx, v, fp4_layout_get(i), first[i], first_shard[i], count[i],
                               expert[i], expert_shard[i], experts[i]);
    cJSON_Delete(config);
    return st;
}

/* Headers, index, config against tensors. */
fp8_status verify_check_structure(fp8_ctx *ctx, fp8_verify *v)
{
    fp8_checkpoint *ck = v->ck;
    fp8_status st = FP8_OK;
    uint64_t bytes = 0, total;
    loader_tally lr = { 0 };
    if ((st = check_packed(ctx, v)))
        return st;
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
        if (fp4_is_group_scale(ck, t->name)) /* check_packed judges it */
            continue;
        if (fp8_dtype_holds_codes(t->dtype)) {
            v->fp8_weights++;
            if (v->format == FP8_FORMAT_DEFAULT)
                continue;
            st = check_weight(ctx, v, t, shard);
            if (!st)
                st = check_loader_rules(ctx, v, t, file, &lr);
            char *module = fp8_name_with(
                t->name, strlen(t->name) - (fp8_has_suffix(t->name, ".weight") ? 7 : 0), "");
            if (!st && !module)
                st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
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
            free(module);
            continue;
        }
        /* a scale needs its FP8 weight */
        const char *suffix = fp8_has_suffix(t->name, "_scale_inv") ? "_scale_inv"
                             : fp8_has_suffix(t->name, "_scale") && !fp8_has_suffix(t->name, "input_scale") &&
                                       !fp8_has_suffix(t->name, "k_scale") && !fp8_has_suffix(t->name, "v_scale")
                                 ? "_scale"
                                 : NULL;
        if (suffix) {
            int base = (int)(strlen(t->name) - strlen(suffix));
            const fp8_tensor_info *w = ck_find_with(ck, t->name, (size_t)base, "", NULL);
            /* a bare X_scale with no tensor X and no weight in its name is a
             * model's own parameter (CLIP's logit_scale), not a quantization scale */
            bool parameter = !w && !strcmp(suffix, "_scale") &&
                             !(base >= 6 && !memcmp(t->name + base - 6, "weight", 6));
            if (!parameter && (!w || !fp8_dtype_holds_codes(w->dtype)))
                st = verify_add(ctx, v, FP8_SEV_ERROR, "orphan-scale",
                         "%s: %s: a scale without an F8_E4M3 weight '%.*s'", file, t->name, base,
                         t->name);
            continue;
        }
        /* an unquantized Linear-like weight the config does not declare */
        /* an embedding is not one: every FP8 loader quantizes Linear layers only
         * (vLLM's Fp8Config, CompressedTensorsConfig and ModelOpt configs:
         * get_quant_method quantizes LinearBase and FusedMoE; transformers'
         * replace_with_fp8_linear replaces nn.Linear; llm-compressor and
         * ModelOpt target Linear modules), so the releases' ignore lists never
         * name embed_tokens, and need not */
        /* nor is a DeepSeek-style router, the module holding
         * e_score_correction_bias (DeepSeek-V3, Kimi-K2, GLM-4.5): transformers'
         * DeepseekV3TopkRouter is an nn.Module with a weight Parameter, no
         * nn.Linear a "Linear" target names, and vLLM's deepseek_v2.py builds
         * the gate with quant_config None; Kimi-K2-Thinking's ignore list does
         * not name it */
        const char *keep = fmt_default_keep(t->name, t->rank, t->shape, v->experts, v->model_type);
        if (v->format != FP8_FORMAT_DEFAULT && v->has_ignore_list && t->rank == 2 &&
            (fp8_dtype_is_float(t->dtype) || t->dtype == FP8_DTYPE_F64) &&
            fp8_has_suffix(t->name, ".weight") && !(keep && !strcmp(keep, "embedding"))) {
            char *module = fp8_name_with(t->name, strlen(t->name) - 7, "");
            bool topk_router = keep && !strcmp(keep, "MoE router") &&
                               ck_find_with(ck, t->name, strlen(t->name) - 7,
                                            ".e_score_correction_bias", NULL);
            if (!module)
                st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            else if (!topk_router && !ignored(v, module))
                st = verify_add(ctx, v, FP8_SEV_WARNING, "not-in-ignore-list",
                         "%s: %s stays %s but '%s' is not in the config's ignore list", file,
                         t->name, fp8_dtype_name(t->dtype), module);
            free(module);
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
