/*
 * quantize.c - the quantize plan: which tensors become FP8 and how, in the
 * output formats of fp8conv-formats(5), FORMATS (scale names, dtypes,
 * shapes), and what the output will not do (warnings).  quantize_run.c
 * writes it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ops/quantize.h"
#include "io/checkpoint.h"
#include "layout/formats.h"
#include "layout/parallel.h"
#include "layout/fp4.h"
#include "common/types.h"
#include "compute/quant_cpu.h"

#define MAX_BLOCK 4096

/* ---------------------------------------------------------------- names */

/* ---------------------------------------------------------------- the plan */


static uint64_t unfused_count(const fp8_quant_plan *p, const fp8_tensor_info *t, bool *in_out);

/* NULL when `t` is to be quantized; otherwise why not (maybe allocated into *owned). */
static const char *keep_reason(const fp8_quant_plan *p, const fp8_tensor_info *t, bool *warn,
                               char **owned)
{
    const char *rule;
    *warn = false;
    bool matrix = t->rank == 2 && fp8_has_suffix(t->name, ".weight");
    bool experts = t->rank == 3 && fmt_is_expert(t->name);
    if (!matrix && !experts)
        return "not a 2-D .weight or 3-D experts tensor";
    /* a fused experts tensor has no .weight suffix, so its name must not be
     * a scale's (experts.k_scale, a KV-cache scale: dequantize and verify
     * read it as one; found by fuzz_dir, 2026-11-24) */
    const char *last = strrchr(t->name, '.');
    if (!matrix && strstr(last ? last + 1 : t->name, "scale"))
        return "named as a scale, not a weight";
    if (t->dtype == FP8_DTYPE_F64) { /* a weight the loaders must be told is not FP8 */
        *warn = p->opts.no_default_ignore ||
                !fmt_default_keep(t->name, t->rank, t->shape, p->experts, p->model_type);
        return "f64 is not quantized (cast it to f32 to quantize it); it goes in the ignore list";
    }
    if (!fp8_dtype_is_float(t->dtype))
        return "not bf16, f16 or f32";
    if (!p->opts.no_default_ignore &&
        (rule = fmt_default_keep(t->name, t->rank, t->shape, p->experts, p->model_type)))
        return rule;
    for (size_t i = 0; i < p->npatterns; i++)
        if (fmt_pattern_match(&p->patterns[i], t->name))
            return asprintf(owned, "matches --ignore '%s'", p->opts.ignore[i]) < 0
                       ? (*owned = NULL, "matches --ignore")
                       : *owned;
    if (t->elements == 0)
        return "empty";
    bool expert;
    const char *read = experts ? fmt_expert_scale_suffix(t->name, &expert) : NULL;
    if (read && p->spec && strcmp(read, p->spec->scale_suffix)) {
        *warn = true;
        return asprintf(owned, "fused experts whose loader reads only their weight%s scale "
                        "(vLLM's granitemoehybrid.py): --format %s names it weight%s, so they "
                        "stay unquantized (use --format compressed-tensors)",
                        read, fp8_format_name(p->format), p->spec->scale_suffix) < 0
                   ? (*owned = NULL, "fused experts whose loader reads another scale name")
                   : *owned;
    }
    /* fused experts stored [E, in, out]: vLLM transposes the weight and its
     * scale when it loads them (fmt_experts_in_out), so only square blocks
     * land on the groups its kernels use; a row or column scale would run
     * along the input axis, and MX groups along the output axis */
    bool in_out = false; /* written apart: each weight read transposed, if need be */
    uint64_t parts = unfused_count(p, t, &in_out);
    if (!parts && fmt_experts_in_out(t->name, t->rank, t->shape, p->hidden) &&
        !(p->opts.scheme == FP8_SCHEME_BLOCK && p->opts.block_rows == p->opts.block_cols)) {
        *warn = true;
        return asprintf(owned, "fused experts stored [E, in, out] (Llama-4, gpt-oss: vLLM's "
                        "llama4.py transposes them and their scale when it loads them): "
                        "--scheme %s would put its scales along the wrong axis, so they stay "
                        "unquantized, which vLLM's FP8 MoE layer does not load (use --scheme "
                        "block with square blocks)",
                        fp8_scheme_name(p->opts.scheme)) < 0
                   ? (*owned = NULL, "fused experts stored [E, in, out]")
                   : *owned;
    }
    const fp8_scheme_traits *sch = fp8_scheme_get(p->opts.scheme);
    uint64_t inner = parts ? t->shape[in_out ? 1 : 2] : t->shape[t->rank - 1];
    uint32_t run = fp8_scheme_run(sch, p->opts.block_cols);
    if (sch->group == FP8_GROUP_RUN && inner % run) {
        *warn = true;
        return asprintf(owned, "%s needs the %s (%llu) to be a multiple of %u",
                        fp8_scheme_name(p->opts.scheme),
                        parts ? "input dimension of each expert's weight" : "last dimension",
                        (unsigned long long)inner, run) < 0
                   ? (*owned = NULL, "mxfp8 needs the last dimension to be a multiple of 32")
                   : *owned;
    }
    return NULL;
}

fp8_status quant_plan_warn(fp8_ctx *ctx, fp8_quant_plan *p, char *message)
{
    char **w = message ? fp8_xreallocarray(p->warnings, p->nwarnings + 1, sizeof *w) : NULL;
    if (!w) {
        free(message);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    p->warnings = w;
    p->warnings[p->nwarnings++] = message;
    return FP8_OK;
}

/* "stem" + suffix, owned by the entry's *slot. */
static fp8_status name_with(fp8_ctx *ctx, const char *stem, size_t n, const char *suffix,
                            char **slot)
{
    if (asprintf(slot, "%.*s%s", (int)n, stem, suffix) < 0) {
        *slot = NULL;
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    return FP8_OK;
}

/* An FP4 scheme's tensors, named and shaped by fp4.h's row of the layout
 * written: X.weight becomes X.weight_packed (U8, two codes a byte, low
 * nibble first; ModelOpt: X.weight, U8), X.weight_scale and, for NVFP4,
 * X.weight_global_scale ([1]; ModelOpt: X.weight_scale_2, []). */
static fp8_status packed_layout(fp8_ctx *ctx, fp8_quant_plan *p, fp8_quant_item *it,
                                plan_entry *e, const fp4_layout *l)
{
    const fp8_tensor_info *t = it->tensor;
    const char *scheme = fp8_scheme_name(p->opts.scheme);
    if (t->rank != 2)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': --scheme %s writes 2-D weights, one per expert; "
                        "fused 3-D experts tensors are written apart only as gate_up_proj "
                        "or down_proj, beside a config.json whose hidden size tells their "
                        "axes apart, and without gpt-oss's interleaved gate/up and biases "
                        "(fp8conv-formats(5), FP4 QUANTIZATION)",
                        it->shard, t->name, scheme);
    if (t->dtype == FP8_DTYPE_F16 && !l->scale_in_weight_dtype)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': --scheme %s takes bf16 or f32 weights, not f16: its "
                        "reference computes the scales in the weight's dtype, where f16 "
                        "overflows (fp8conv-formats(5), FP4 QUANTIZATION)",
                        it->shard, t->name, scheme);
    size_t stem = strlen(t->name) - strlen(".weight");
    fp8_status st;
    if ((st = name_with(ctx, t->name, stem, l->weight_suffix, &e->owned_packed_name)) ||
        (st = name_with(ctx, t->name, stem, l->scale_suffix, &e->owned_scale_name)) ||
        (l->global_suffix &&
         (st = name_with(ctx, t->name, stem, l->global_suffix, &e->owned_global_name))) ||
        (l->shape_suffix &&
         (st = name_with(ctx, t->name, stem, l->shape_suffix, &e->owned_shape_name))))
        return st;
    it->packed_name = e->owned_packed_name;
    it->code_dtype = l->weight_dtype;
    it->code_shape[t->rank - 1] /= fp8_dtype_bits(l->weight_dtype) / 8; /* INT4: I32 words */
    it->scale_name = e->owned_scale_name;
    it->global_name = e->owned_global_name;
    it->global_rank = l->global_rank;
    it->scale_dtype = l->scale_dtype;
    it->shape_name = e->owned_shape_name;
    if (l->scale_in_weight_dtype) {
        it->scale_dtype = t->dtype;
        e->kind = t->dtype == FP8_DTYPE_BF16  ? FP8_SCALE_BF16
                  : t->dtype == FP8_DTYPE_F16 ? FP8_SCALE_F16
                                              : FP8_SCALE_F32;
    }
    fmt_scale_shape(p->spec, t->rank, t->shape, 1, p->opts.block_cols, &it->scale_rank,
                    it->scale_shape);
    const char *names[] = { it->packed_name, it->scale_name, it->global_name, it->shape_name };
    for (int k = 0; k < 4; k++)
        if (names[k] && strcmp(names[k], t->name) && p->ck &&
            fp8_checkpoint_find(p->ck, names[k], NULL))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': the input already has '%s', a name the output "
                            "gives its quantized form",
                            it->shard, t->name, names[k]);
    return FP8_OK;
}

/* The scale tensor of the format table's row for a quantized tensor. */
static fp8_status scale_layout(fp8_ctx *ctx, fp8_quant_plan *p, fp8_quant_item *it,
                               plan_entry *e)
{
    const fp8_tensor_info *t = it->tensor;
    const fp8_quant_options *o = &p->opts;
    e->experts = t->rank == 3 ? t->shape[0] : 1;
    e->rows = t->shape[t->rank - 2];
    e->cols = t->shape[t->rank - 1];
    memcpy(it->code_shape, t->shape, t->rank * sizeof *t->shape);
    it->code_shape[t->rank - 1] = fp8_scheme_code_bytes(o->scheme, e->cols);
    const fp4_layout *codes = fmt_code_layout(p->spec);
    if (codes)
        return packed_layout(ctx, p, it, e, codes);
    it->code_dtype = fp8_elem_get(fp8_scheme_get(o->scheme)->elem)->dtype;
    it->scale_dtype = fmt_scale_dtype_of(p->spec, t->dtype);
    /* --like: the reference's float scale dtype (not convert's: it keeps its own) */
    if (o->scale_dtype_set && !p->source && it->scale_dtype != FP8_DTYPE_U8 && !o->scale_ue8m0)
        it->scale_dtype = o->scale_dtype;
    fmt_scale_shape(p->spec, t->rank, t->shape, o->block_rows, o->block_cols, &it->scale_rank,
                    it->scale_shape);
    e->kind = it->scale_dtype == FP8_DTYPE_BF16  ? FP8_SCALE_BF16
              : it->scale_dtype == FP8_DTYPE_F16 ? FP8_SCALE_F16
                                                 : FP8_SCALE_F32;
    if (fp8_scheme_has_block(o->scheme) && o->scale_ue8m0)
        e->kind = FP8_SCALE_UE8M0_F32;
    if (fp8_scheme_get(o->scheme)->pow2_scales) /* MX: E8M0 bytes */
        e->kind = o->mx_rounding == FP8_MX_FLOOR ? FP8_SCALE_E8M0_FLOOR : FP8_SCALE_E8M0_RCEIL;
    if (!fp8_numerics_takes_kind(fp8_profile_numerics(o->profile, o->scheme), e->kind))
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: tensor '%s': --profile %s computes F32 scales; --format %s stores "
                        "this weight's as %s", it->shard, t->name, fp8_profile_name(o->profile),
                        fp8_format_name(p->format), fp8_dtype_name(it->scale_dtype));
    if (asprintf(&e->owned_scale_name, "%s%s", t->name, fmt_scale_suffix_of(p->spec, o)) < 0) {
        e->owned_scale_name = NULL;
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    it->scale_name = e->owned_scale_name;
    /* any scale name beside the one written: a loader would find two */
    static const char *const suffixes[] = { "_scale_inv", "_scale" };
    for (int k = 0; k < 2 && !p->source && p->ck; k++) {
        const fp8_tensor_info *s = ck_find_with(p->ck, t->name, strlen(t->name), suffixes[k], NULL);
        if (s)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': the input already has '%s', a scale's name: "
                            "beside the scale fp8conv writes ('%s'), a loader would find two",
                            it->shard, t->name, s->name, it->scale_name);
    }
    /* a block that spans the gate and up halves of a fused weight cannot be
     * split by a loader: vLLM shards gate_up_proj into its two halves
     * (transformers, which runs the fused weight whole, is not affected) */
    /* [E, in, out] experts split their halves along the last axis (vLLM's
     * llama4.py: chunk(2, dim=-1)) */
    bool in_out = fmt_experts_in_out(t->name, t->rank, t->shape, p->hidden);
    uint64_t split = in_out ? e->cols : e->rows, half = split / 2;
    uint32_t block = in_out ? o->block_cols : o->block_rows;
    char *msg = NULL;
    if (fp8_scheme_has_block(o->scheme) && fmt_is_fused_gate_up(t->name) &&
        (split % 2 || half % block) &&
        (asprintf(&msg, "%s: tensor '%s': a fused gate/up weight of %llu %ss: its %u-%s "
                  "blocks span the gate and up halves (%llu %ss each), which vLLM and SGLang "
                  "split when they load it: they will refuse the output (use --block with a "
                  "%s count dividing %llu%s)",
                  it->shard, t->name, (unsigned long long)split, in_out ? "column" : "row",
                  block, in_out ? "column" : "row", (unsigned long long)half,
                  in_out ? "column" : "row", in_out ? "column" : "row",
                  (unsigned long long)half, in_out ? "" : ", or --scheme channel") < 0 ||
         quant_plan_warn(ctx, p, msg)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    /* DeepSeek weights vLLM re-reads the block of (verify's rule too) */
    const char *vrule = NULL, *vwhy = NULL;
    if (fp8_scheme_has_block(o->scheme) && t->rank == 2 &&
        (vwhy = fmt_vllm_block_shape(t->name, e->rows, e->cols, p->format, o->block_rows,
                                     o->block_cols, &vrule)) &&
        (asprintf(&msg, "%s: tensor '%s': [%llu, %llu] is not whole %ux%u blocks: %s (verify: "
                  "%s)",
                  it->shard, t->name, (unsigned long long)e->rows, (unsigned long long)e->cols,
                  o->block_rows, o->block_cols, vwhy, vrule) < 0 ||
         quant_plan_warn(ctx, p, msg)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    /* only --no-default-ignore gets here with a router */
    const char *rule = fmt_default_keep(t->name, t->rank, t->shape, p->experts, p->model_type);
    if (rule && strcmp(rule, "MoE router") == 0 &&
        (asprintf(&msg, "%s: tensor '%s' is an MoE router and is quantized "
                  "(--no-default-ignore): transformers runs it on the raw FP8 codes and vLLM "
                  "keeps routers unquantized",
                  it->shard, t->name) < 0 ||
         quant_plan_warn(ctx, p, msg)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    /* loader rules of the format table on MoE experts: refused where a
     * serving stack cannot load them (transformers' rules are verify's notes) */
    for (int l = 0; l < FP8_LOADER_COUNT; l++)
        if ((FP8_LOADERS_SERVING >> l & 1) && p->spec->no_experts[l] && fmt_is_expert(t->name))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': --scheme %s --format %s cannot be loaded for MoE "
                            "experts: %s",
                            it->shard, t->name, fp8_scheme_name(o->scheme),
                            fp8_format_name(p->format), p->spec->no_experts[l]);
    return FP8_OK;
}

static fp8_status check_options(fp8_ctx *ctx, fp8_quant_plan *p)
{
    fp8_quant_options *o = &p->opts;
    if (!fp8_scheme_get(o->scheme) || (unsigned)o->format > FP8_FORMAT_FBGEMM_FP8)
        return fp8_fail(ctx, FP8_ERR_USAGE, "unknown scheme or format");
    p->format = o->format == FP8_FORMAT_DEFAULT ? fp8_format_default(o->scheme) : o->format;
    p->spec = fmt_spec_find(p->format, o->scheme);
    const fp8_scheme_traits *sch = fp8_scheme_get(o->scheme);
    if (sch->run_alt && o->block_cols != sch->run && o->block_cols != sch->run_alt)
        return fp8_fail(ctx, FP8_ERR_USAGE, "--group: %u is not a group size of --scheme %s "
                        "(%u or %u)", o->block_cols, fp8_scheme_name(o->scheme), sch->run,
                        sch->run_alt);
    /* a pair refused for want of calibrated activation scales is written
     * with the input's (convert: fmt_spec static_acts) */
    if (p->spec && p->spec->refused && !(o->static_acts && p->spec->static_acts))
        return fp8_fail(ctx, FP8_ERR_USAGE, "--scheme %s --format %s is not written: %s",
                        fp8_scheme_name(o->scheme), fp8_format_name(p->format),
                        p->spec->refused);
    if (!p->spec) {
        fp8_text pairs = { 0 };
        fmt_pairs_text(&pairs);
        fp8_status st = pairs.oom ? fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory")
                                    : fp8_fail(ctx, FP8_ERR_USAGE,
                                               "--scheme %s cannot be written as --format %s; "
                                               "the pairs that exist: %s",
                                               fp8_scheme_name(o->scheme),
                                               fp8_format_name(p->format), pairs.p);
        free(pairs.p);
        return st;
    }
    if (p->source && fmt_code_layout(p->spec))
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "convert --scheme %s: convert re-quantizes FP8 checkpoints to FP8 "
                        "schemes; quantize writes %s from bf16 or f32 weights",
                        fp8_scheme_name(o->scheme), fp8_scheme_name(o->scheme));
    if (o->block_rows < 1 || o->block_rows > MAX_BLOCK || o->block_cols < 1 ||
        o->block_cols > MAX_BLOCK)
        return fp8_fail(ctx, FP8_ERR_USAGE, "--block %ux%u: each side must be 1 to %d",
                        o->block_rows, o->block_cols, MAX_BLOCK);
    if (o->scale_ue8m0 && (!fp8_scheme_has_block(o->scheme) || p->format != FP8_FORMAT_HF_FP8))
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "--scale-fmt ue8m0 applies to --scheme block with --format hf-fp8 only");
    char defined[64];
    if (!fp8_profile_get(o->profile))
        return fp8_fail(ctx, FP8_ERR_USAGE, "unknown profile");
    if (!fp8_profile_defines(o->profile, o->scheme, defined, sizeof defined))
        return fp8_fail(ctx, FP8_ERR_USAGE, "--profile %s does not define --scheme %s (it defines: %s)",
                        fp8_profile_name(o->profile), fp8_scheme_name(o->scheme), defined);
    const fp8_profile_traits *prof = fp8_profile_get(o->profile);
    if (o->scale_ue8m0 && !fp8_numerics_any_kind(fp8_profile_numerics(o->profile, o->scheme)))
        return fp8_fail(ctx, FP8_ERR_USAGE, "--profile %s computes F32 scales of its own; "
                        "--scale-fmt ue8m0 is fp8conv's power-of-two rule",
                        fp8_profile_name(o->profile));
    if (prof->ue8m0 && p->format != FP8_FORMAT_HF_FP8) /* it defines block only */
        return fp8_fail(ctx, FP8_ERR_USAGE, "--profile %s writes ue8m0 scales: --format hf-fp8 "
                        "only", fp8_profile_name(o->profile));
    o->scale_ue8m0 |= prof->ue8m0;
    p->patterns = fp8_xcalloc(o->nignore ? o->nignore : 1, sizeof *p->patterns);
    if (!p->patterns)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (; p->npatterns < o->nignore; p->npatterns++) {
        char why[160];
        const char *pattern = o->ignore[p->npatterns];
        if (fmt_pattern_compile(&p->patterns[p->npatterns], pattern, why, sizeof why))
            return fp8_fail(ctx, FP8_ERR_USAGE, "--ignore '%s': %s", pattern, why);
    }
    return FP8_OK;
}

/* An input that is already quantized is refused: quantizing FP8 data again
 * would silently compound the error. */
static fp8_status check_not_quantized(fp8_ctx *ctx, const fp8_quant_plan *p)
{
    const fp8_checkpoint *ck = p->ck;
    if (fp8_checkpoint_has_quant_config(ck))
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s/config.json: already has a quantization_config (quant_method %s); "
                        "quantize takes bf16, f16 or f32 checkpoints (to re-quantize, export it "
                        "first: fp8conv dequantize-for-export --dtype f32 %s DIR)",
                        p->input,
                        fp8_checkpoint_quant_method(ck) ? fp8_checkpoint_quant_method(ck) : "?",
                        p->input);
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++) {
        size_t s;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &s);
        size_t n = strlen(t->name);
        bool scale_name = (n >= 13 && !strcmp(t->name + n - 13, ".weight_scale")) ||
                          (n >= 10 && !strcmp(t->name + n - 10, "_scale_inv"));
        if (scale_name)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s' is named as an FP8 weight's scale: the input looks "
                            "quantized already; quantize takes bf16, f16 or f32 checkpoints "
                            "(export it first: fp8conv dequantize-for-export --dtype f32 %s DIR)",
                            fp8_checkpoint_shard_name(ck, s), t->name, p->input);
        if (fp8_dtype_is_float8(t->dtype))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s' is already %s; quantize takes bf16, f16 or f32 "
                            "checkpoints (export it first: fp8conv dequantize-for-export "
                            "--dtype f32 %s DIR)",
                            fp8_checkpoint_shard_name(ck, s), t->name,
                            fp8_dtype_name(t->dtype), p->input);
    }
    if (fp8_checkpoint_is_directory(ck)) {
        char *hq = fp8_path_join(p->input, HF_QUANT_CONFIG);
        struct stat sb;
        bool found = hq && stat(hq, &sb) == 0;
        free(hq);
        if (found)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: has an %s (a ModelOpt quantized checkpoint); quantize takes "
                            "bf16, f16 or f32 checkpoints",
                            p->input, HF_QUANT_CONFIG);
    }
    return FP8_OK;
}

/*
 * Fused experts under an FP4 scheme are written apart, one 2-D weight per
 * expert and projection, as llm-compressor writes them (its Llama-4 NVFP4
 * and FP8 releases: P.experts.N.gate_proj.weight [I, H], up_proj, down_proj
 * [H, I]) and as vLLM loads them (models/llama4.py: expert_params_mapping
 * with gate_proj, up_proj and down_proj names when the name has an expert
 * index).  A 3-D P.experts.gate_up_proj holds gate then up on its output
 * axis (vLLM's chunk(2, dim=-1); transformers v5's Concatenate of gate and
 * up); stored [E, in, out] (Llama-4, fmt_experts_in_out) each weight is read
 * transposed.  Told apart by the config's hidden size, so a config is
 * needed; where both axes are the hidden size, by the model: Llama-4's are
 * [E, in, out], the others [E, out, in].  gpt-oss interleaves gate and up
 * and has biases (its gate_up_proj_bias): not written apart, refused as
 * before.  llm-compressor's model_free_ptq splits every fused tensor on
 * axis 1 as [E, out, in] (converter.py split_fused_moe_experts), Llama-4's
 * too, where vLLM reads the transpose: fp8conv follows vLLM.
 */

/* How many weights fused experts tensor t of ck is written apart as: 2E
 * for gate_up_proj, E for down_proj; 0 when it is not (not fused experts,
 * gpt-oss's, an orientation the config does not tell). */
static uint64_t parts_of(const fp8_checkpoint *ck, const cJSON *config, const fp8_tensor_info *t,
                         bool *in_out)
{
    bool gate_up = fp8_has_suffix(t->name, ".experts.gate_up_proj");
    if (t->rank != 3 || !fp8_dtype_is_float(t->dtype) ||
        (!gate_up && !fp8_has_suffix(t->name, ".experts.down_proj")))
        return 0;
    uint64_t hidden = fmt_config_hidden(config);
    if (!hidden)
        return 0;
    if (ck_find_with(ck, t->name, strlen(t->name), "_bias", NULL)) /* gpt-oss */
        return 0;
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(config, "text_config");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(text ? text : config, "model_type");
    bool llama4 = cJSON_IsString(type) && !strncmp(type->valuestring, "llama4", 6);
    *in_out = fmt_experts_in_out(t->name, t->rank, t->shape, hidden) ||
              (llama4 && t->shape[1] == hidden && t->shape[2] == hidden);
    /* [E, out, in]: the hidden size is gate_up's input, down's output */
    if (!*in_out && (llama4 || t->shape[gate_up ? 2 : 1] != hidden))
        return 0;
    uint64_t out = t->shape[*in_out ? 2 : 1];
    if (!t->shape[0] || !out || (gate_up && out % 2))
        return 0;
    return gate_up ? 2 * t->shape[0] : t->shape[0];
}

/* Whether the plan writes tensor t apart (an FP4 scheme's; convert writes
 * FP8 only), and as how many weights. */
static uint64_t unfused_count(const fp8_quant_plan *p, const fp8_tensor_info *t, bool *in_out)
{
    return p->spec->experts_apart && !p->source ? parts_of(p->ck, p->config, t, in_out) : 0;
}

/* Part k of the n that fused tensor t is written apart as: its name, shape
 * and place (the name allocated). */
static bool part_make(const fp8_tensor_info *t, uint64_t k, uint64_t n, bool in_out,
                      quant_part *part)
{
    bool gate_up = n == 2 * t->shape[0];
    uint64_t in = t->shape[in_out ? 1 : 2], rows = t->shape[in_out ? 2 : 1] / (gate_up ? 2 : 1);
    size_t stem = strlen(t->name) - strlen(gate_up ? "gate_up_proj" : "down_proj");
    uint64_t x = gate_up ? k / 2 : k, half = gate_up ? k % 2 : 0;
    *part = (quant_part){ .fused = t, .expert = x, .at = half * rows, .in_out = in_out,
                          .shape = { rows, in }, .amax_parts = 1 };
    if (asprintf(&part->name, "%.*s%llu.%s.weight", (int)stem, t->name, (unsigned long long)x,
                 gate_up ? (half ? "up_proj" : "gate_proj") : "down_proj") < 0)
        return part->name = NULL, false;
    part->t = (fp8_tensor_info){ .name = part->name, .dtype = t->dtype, .rank = 2,
                                 .shape = part->shape, .elements = rows * in, .begin = 0,
                                 .end = rows * in * fp8_dtype_bits(t->dtype) / 8 };
    return true;
}

quant_part *quant_part_find(const fp8_checkpoint *ck, const cJSON *config, const char *name,
                            size_t *shard)
{
    static const char *const projs[] = { ".gate_proj.weight", ".up_proj.weight",
                                         ".down_proj.weight" };
    int proj = 0; /* gate, up, down */
    while (proj < 3 && !fp8_has_suffix(name, projs[proj]))
        proj++;
    const char *dot = proj < 3 ? name + strlen(name) - strlen(projs[proj]) : NULL;
    const char *digits = dot;
    while (digits && digits > name && digits[-1] >= '0' && digits[-1] <= '9')
        digits--;
    if (!dot || digits == dot || digits - name < 9 || strncmp(digits - 9, ".experts.", 9))
        return NULL;
    const fp8_tensor_info *t = ck_find_with(ck, name, (size_t)(digits - name),
                                            proj == 2 ? "down_proj" : "gate_up_proj", shard);
    bool in_out;
    uint64_t n = t ? parts_of(ck, config, t, &in_out) : 0;
    uint64_t x = strtoull(digits, NULL, 10), k = proj == 2 ? x : 2 * x + (uint64_t)proj;
    quant_part *part = n && k < n ? calloc(1, sizeof *part) : NULL;
    if (part && (!part_make(t, k, n, in_out, part) || strcmp(part->name, name))) {
        quant_part_free(part); /* "experts.01.": not a name fp8conv writes */
        return NULL;
    }
    return part;
}

void quant_part_free(quant_part *part)
{
    if (part)
        free(part->name);
    free(part);
}

const quant_part *quant_part_stored_at(const quant_part *part, uint64_t flat, uint64_t *row,
                                       uint64_t *col)
{
    uint64_t out = part->shape[0], in = part->shape[1];
    *row = part->in_out ? flat % (out * part->amax_parts) : flat / in;
    *col = part->in_out ? flat / (out * part->amax_parts) : flat % in;
    if (*row < out)
        return part;
    *row -= out;
    return part->up;
}

/* The bytes of an element of the weight (bf16, f16 or f32). */
static unsigned elem_size(const quant_part *part) { return fp8_dtype_bits(part->fused->dtype) / 8; }

/* A tile row is a cache line longer than its n elements: at a stride of a
 * power of two, the transpose's column reads would fall in one cache set. */
uint64_t quant_part_tile_stride(const quant_part *part, uint64_t n)
{
    return n + 64 / elem_size(part);
}

size_t quant_part_tile_bytes(const quant_part *part, uint64_t n)
{
    return (size_t)PART_TILE * quant_part_tile_stride(part, n) * elem_size(part);
}

fp8_status quant_part_read_tile(fp8_ctx *ctx, fp8_file *f, const quant_part *part, uint64_t row0,
                                uint64_t n, uint64_t c0, void *tile)
{
    const fp8_tensor_info *t = part->fused;
    unsigned sz = elem_size(part);
    uint64_t in = part->shape[1], width = t->shape[2], stride = quant_part_tile_stride(part, n);
    uint64_t m = in - c0 < PART_TILE ? in - c0 : PART_TILE;
    fp8_status st = FP8_OK;
    for (uint64_t c = 0; c < m && !st; c++)
        st = fp8_file_read(ctx, f, t, ((part->expert * in + c0 + c) * width + part->at + row0) * sz,
                           (unsigned char *)tile + c * stride * sz, n * sz);
    return st;
}

fp8_status quant_part_read(fp8_ctx *ctx, fp8_file *f, const quant_part *part, uint64_t offset,
                           void *buf, size_t len, bool as_stored)
{
    const fp8_tensor_info *t = part->fused;
    unsigned sz = elem_size(part);
    uint64_t out = part->shape[0] * (as_stored ? part->amax_parts : 1), in = part->shape[1],
             width = t->shape[2];
    if (!part->in_out) /* a pair's up_proj follows its gate_proj */
        return fp8_file_read(ctx, f, t, (part->expert * t->shape[1] + part->at) * width * sz + offset,
                             buf, len);
    fp8_status st = FP8_OK;
    /* as stored, [in][out]: the part of each input row, a run each (one
     * run where the parts are the whole row, as a down_proj or a pair) */
    for (uint64_t e = offset / sz, end = e + len / sz; as_stored && e < end && !st;) {
        uint64_t c = e / out, k = e % out;
        uint64_t m = out == width ? end - e : (end - e < out - k ? end - e : out - k);
        st = fp8_file_read(ctx, f, t, ((part->expert * in + c) * width + part->at + k) * sz,
                           (unsigned char *)buf + (e - offset / sz) * sz, m * sz);
        e += m;
    }
    if (as_stored)
        return st;
    uint64_t row0 = offset / sz / in, n = len / sz / in; /* whole rows of the weight */
    unsigned char *tile = malloc(quant_part_tile_bytes(part, n));
    if (!tile)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t c0 = 0; c0 < in && !st; c0 += PART_TILE)
        if (!(st = quant_part_read_tile(ctx, f, part, row0, n, c0, tile)))
            fp8_transpose(sz, tile, quant_part_tile_stride(part, n),
                          in - c0 < PART_TILE ? in - c0 : PART_TILE, n,
                          (unsigned char *)buf + c0 * sz, in);
    free(tile);
    return st;
}

/* Adds the plan's items for fused experts tensor t of shard `shard`, written
 * apart (n of them, after unfused_count); verify's re-quantization quantizes
 * the parts it wants. */
static fp8_status unfuse(fp8_ctx *ctx, fp8_quant_plan *p, const fp8_tensor_info *t, size_t shard,
                         uint64_t n, bool in_out)
{
    fp8_status st;
    for (uint64_t k = 0; k < n; k++) {
        quant_part *part = &p->parts[p->nparts];
        if (!part_make(t, k, n, in_out, part))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        p->nparts++;
        if (fp8_checkpoint_find(p->ck, part->name, NULL))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': fused experts, which --scheme %s writes one weight "
                            "per expert, but the input already has '%s'",
                            p->out_shards[shard], t->name, fp8_scheme_name(p->opts.scheme),
                            part->name);
        size_t i = p->n++;
        fp8_quant_item *it = &p->items[i];
        plan_entry *e = &p->entries[i];
        it->tensor = &part->t;
        it->shard = p->out_shards[shard];
        e->shard = shard;
        e->part = part;
        p->input_bytes += fp8_tensor_nbytes(&part->t);
        if (p->wanted && !p->wanted(p->wanted_user, part->name)) {
            it->reason = "not asked for (kept)";
            continue;
        }
        it->quantize = true;
        p->nquantized++;
        if ((st = scale_layout(ctx, p, it, e)))
            return st;
        if (!fp8_scheme_has_second_level(p->opts.scheme))
            continue;
        p->work_bytes += fp8_tensor_nbytes(&part->t); /* an amax pass first */
        if (k % 2 && n == 2 * t->shape[0] && p->items[i - 1].quantize) { /* up_proj after gate */
            part[-1].amax_parts = 2, part[-1].up = part;
            part->amax_parts = 0;
        }
    }
    return FP8_OK;
}

static int cmp_item_name(const void *a, const void *b, void *items)
{
    const fp8_quant_item *it = items;
    return strcmp(it[*(const size_t *)a].tensor->name, it[*(const size_t *)b].tensor->name);
}

/* Items (and their entries) in name order again, after unfuse. */
static fp8_status sort_items(fp8_ctx *ctx, fp8_quant_plan *p)
{
    size_t *order = fp8_xcalloc(p->n ? p->n : 1, sizeof *order);
    fp8_quant_item *items = fp8_xcalloc(p->n ? p->n : 1, sizeof *items);
    plan_entry *entries = fp8_xcalloc(p->n ? p->n : 1, sizeof *entries);
    if (!order || !items || !entries) {
        free(order), free(items), free(entries);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < p->n; i++)
        order[i] = i;
    qsort_r(order, p->n, sizeof *order, cmp_item_name, p->items);
    for (size_t i = 0; i < p->n; i++)
        items[i] = p->items[order[i]], entries[i] = p->entries[order[i]];
    free(p->items), free(p->entries), free(order);
    p->items = items, p->entries = entries;
    return FP8_OK;
}

static fp8_status decide(fp8_ctx *ctx, fp8_quant_plan *p)
{
    fp8_status st;
    size_t count = fp8_checkpoint_tensor_count(p->ck), parts = 0;
    bool in_out;
    for (size_t k = 0; k < count; k++)
        parts += unfused_count(p, fp8_checkpoint_tensor(p->ck, k, NULL), &in_out);
    p->items = fp8_xcalloc(count + parts ? count + parts : 1, sizeof *p->items);
    p->entries = fp8_xcalloc(count + parts ? count + parts : 1, sizeof *p->entries);
    p->ignored = fp8_xcalloc(count ? count : 1, sizeof *p->ignored);
    p->parts = fp8_xcalloc(parts ? parts : 1, sizeof *p->parts);
    if (!p->items || !p->entries || !p->ignored || !p->parts)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < count; k++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(p->ck, k, &shard), *seen = t;
        const char *why = NULL;
        if (p->source && !(seen = p->source->tensor(p->source->user, t, &why)))
            continue; /* a scale that convert replaces or drops */
        uint64_t n = unfused_count(p, t, &in_out);
        char *owned = NULL;
        bool warn;
        if (n && !keep_reason(p, t, &warn, &owned)) {
            if ((st = unfuse(ctx, p, t, shard, n, in_out)))
                return st;
            continue;
        }
        free(owned);
        size_t i = p->n++;
        fp8_quant_item *it = &p->items[i];
        plan_entry *e = &p->entries[i];
        it->tensor = seen;
        e->shard = shard;
        e->from_source = seen != t;
        it->shard = p->out_shards[e->shard];
        if (p->source)
            it->reason = why;
        else if (p->wanted && !p->wanted(p->wanted_user, it->tensor->name))
            it->reason = "not asked for (kept)";
        else
            it->reason = keep_reason(p, it->tensor, &it->warn, &e->owned_reason);
        it->quantize = it->reason == NULL;
        p->nquantized += it->quantize;
        p->input_bytes += fp8_tensor_nbytes(it->tensor);
        char *msg;
        if (!it->quantize && !p->source && it->warn &&
            fmt_experts_in_out(seen->name, seen->rank, seen->shape, p->hidden) &&
            (asprintf(&msg, "%s: tensor '%s': %s", it->shard, seen->name, it->reason) < 0 ||
             quant_plan_warn(ctx, p, msg)))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        if (it->quantize) {
            if ((st = scale_layout(ctx, p, it, e)))
                return st;
            if (fp8_scheme_reads_twice(p->opts.scheme)) /* an amax pass first */
                p->work_bytes += fp8_tensor_nbytes(it->tensor);
        } else if (it->tensor->rank == 2 &&
                   (fp8_dtype_is_float(it->tensor->dtype) || it->tensor->dtype == FP8_DTYPE_F64) &&
                   fp8_has_suffix(it->tensor->name, ".weight")) {
            const char *name = it->tensor->name;
            if (!(p->ignored[p->nignored++] = strndup(name, strlen(name) - strlen(".weight"))))
                return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        }
    }
    p->work_bytes += p->input_bytes;
    qsort(p->ignored, p->nignored, sizeof *p->ignored, fp8_cmp_str);
    return p->nparts ? sort_items(ctx, p) : FP8_OK;
}

/* An --ignore pattern equal to a module's whole name names that module
 * only, as compressed-tensors compares a bare entry with module names. */
static fp8_status module_patterns(fp8_ctx *ctx, fp8_quant_plan *p)
{
    size_t count = fp8_checkpoint_tensor_count(p->ck);
    for (size_t i = 0; i + p->opts.nignore_like < p->npatterns; i++)
        for (size_t k = 0; k < count; k++) {
            int rc = fmt_pattern_module(&p->patterns[i], p->opts.ignore[i],
                                        fp8_checkpoint_tensor(p->ck, k, NULL)->name);
            if (rc < 0)
                return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            if (rc)
                break;
        }
    return FP8_OK;
}

/* Each ignore pattern names a tensor of INPUT, or is said not to: a
 * misspelt one would leave its layers quantized without a word.  (--like's
 * explicit names are INPUT's modules already, found by fp8_like_open; its
 * "re:" entries and '*' globs are tried, a scan of the tensors each.) */
static fp8_status check_patterns(fp8_ctx *ctx, fp8_quant_plan *p)
{
    size_t count = fp8_checkpoint_tensor_count(p->ck);
    for (size_t i = 0; i < p->npatterns; i++) {
        size_t k = 0;
        if (i >= p->npatterns - p->opts.nignore_like && strncmp(p->opts.ignore[i], "re:", 3) != 0 &&
            !strstr(p->opts.ignore[i], ".*"))
            continue;
        while (k < count &&
               !fmt_pattern_match(&p->patterns[i], fp8_checkpoint_tensor(p->ck, k, NULL)->name))
            k++;
        if (k < count)
            continue;
        const char *what = i >= p->npatterns - p->opts.nignore_like ? "--like's ignore entry"
                                                                    : "--ignore";
        if (p->opts.strict_ignore)
            return fp8_fail(ctx, FP8_ERR_USAGE, "%s '%s' matches no tensor of %s (--strict)", what,
                            p->opts.ignore[i], p->input);
        char *msg;
        if (asprintf(&msg, "%s '%s' matches no tensor of %s: it keeps nothing unquantized%s",
                     what, p->opts.ignore[i], p->input,
                     strncmp(p->opts.ignore[i], "re:", 3) == 0
                         ? " (a \"re:\" regex is matched from the start of the module's name)"
                         : "") < 0)
            msg = NULL;
        fp8_status st = quant_plan_warn(ctx, p, msg);
        if (st)
            return st;
    }
    return FP8_OK;
}

static void first_reason(void *arg, const char *message)
{
    char **first = arg;
    if (!*first)
        *first = fp8_strdup(message);
}

/* vLLM and SGLang split merged and tensor-parallel layers into partitions
 * that must each hold whole blocks (validate_fp8_block_shape): warn when the
 * output would load at TP=1 not at all, naming the layer and the TP sizes
 * that do load (verify makes it an error). */
static fp8_status check_loadable(fp8_ctx *ctx, fp8_quant_plan *p)
{
    par_model m;
    if (!p->config || !par_model_from_config(p->config, &m) || (!p->source && !p->nquantized))
        return FP8_OK; /* (convert's output always has FP8 weights) */
    par_quant q = { p->opts.scheme, p->opts.block_rows, p->opts.block_cols };
    char *why = NULL, list[256] = "";
    if (par_check(&m, &q, 1, 0, first_reason, &why) == 0)
        return FP8_OK;
    size_t o = 0;
    for (int t = 2; t <= 64 && o < sizeof list - 8; t++)
        if (par_check(&m, &q, t, 0, NULL, NULL) == 0)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", o ? ", " : "", t);
    char *msg = NULL;
    if (asprintf(&msg, "%s: vLLM and SGLang would not load the output at TP=1: %s; TP sizes "
                 "that load: %s", p->input, why ? why : "?", o ? list : "none (1..64)") < 0)
        msg = NULL;
    free(why);
    return quant_plan_warn(ctx, p, msg);
}

/* An output without config.json (a single file, or a directory whose input
 * has none) declares nothing: warn; a single file's block size other than
 * 128x128 is recorded nowhere, and readers take 128x128: say so, and the
 * quantization_config the model's config.json needs.  An output with
 * nothing quantized declares a quantization_config all the same: warn. */
static fp8_status check_lone_block(fp8_ctx *ctx, fp8_quant_plan *p)
{
    char *msg = NULL;
    if (!p->source && !p->nquantized) {
        if (asprintf(&msg, "%s: no tensor was quantized (every one is kept: --dry-run says "
                     "why); the output is a copy of the input%s", p->input,
                     p->config ? " whose config.json declares a quantization_config all the same"
                               : "") < 0)
            msg = NULL;
        return quant_plan_warn(ctx, p, msg);
    }
    if (fp8_checkpoint_is_directory(p->ck) && !p->config) {
        /* nothing to write the quantization_config into */
        if (asprintf(&msg, "%s: no config.json: the output declares no quantization_config, and "
                     "loaders will read its FP8 weights as plain ones (add the model's "
                     "config.json to the input)", p->input) < 0)
            msg = NULL;
        return quant_plan_warn(ctx, p, msg);
    }
    if (fp8_checkpoint_is_directory(p->ck))
        return FP8_OK;
    cJSON *qc = fmt_quantization_config(p->spec, &p->opts, p->ignored, p->nignored);
    char *json = qc ? cJSON_PrintUnformatted(qc) : NULL, block[160] = "";
    cJSON_Delete(qc);
    if (fp8_scheme_has_block(p->opts.scheme) &&
        (p->opts.block_rows != 128 || p->opts.block_cols != 128))
        snprintf(block, sizeof block, " to record the %ux%u block size; dequantize-for-export, "
                 "verify and loaders will read it as 128x128 (quantize the checkpoint's "
                 "directory instead)", p->opts.block_rows, p->opts.block_cols);
    if (!json || asprintf(&msg, "%s: a single-file output has no config.json%s; it declares "
                          "no quantization_config, and loaders read its FP8 weights as plain "
                          "ones: the model's config.json needs \"quantization_config\": %s",
                          p->input, block, json) < 0)
        msg = NULL;
    free(json);
    return quant_plan_warn(ctx, p, msg);
}

fp8_status fp8_quant_plan_create(fp8_ctx *ctx, const char *input, const fp8_quant_options *opts,
                                 fp8_quant_plan **out)
{
    return fp8_quant_plan_create_from(ctx, input, opts, NULL, out);
}

/* The plan's decisions, once its checkpoint and config are read. */
static fp8_status decide_all(fp8_ctx *ctx, fp8_quant_plan *p)
{
    fp8_status st;
    p->experts = fmt_config_experts(p->config);
    p->model_type = fmt_config_model_type(p->config);
    p->hidden = fmt_config_hidden(p->config);
    if ((st = par_config_check(ctx, p->input, p->config)) || (st = module_patterns(ctx, p)) ||
        (st = decide(ctx, p)) || (st = check_patterns(ctx, p)))
        return st;
    return check_loadable(ctx, p);
}

static fp8_status plan_create(fp8_ctx *ctx, const char *input, const fp8_quant_options *opts,
                              const fp8_quant_source *source,
                              bool (*wanted)(void *user, const char *name), void *user,
                              fp8_quant_plan **out)
{
    fp8_status st;
    fp8_quant_plan *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p || !(p->input = fp8_strdup(input))) {
        free(p);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    p->opts = *opts;
    p->source = source;
    p->wanted = wanted;
    p->wanted_user = user;
    if ((st = check_options(ctx, p)) || (st = fp8_checkpoint_open(ctx, input, &p->ck)) ||
        (!source && (st = check_not_quantized(ctx, p))) ||
        (st = ck_output_names(ctx, p->ck, &p->out_shards)) ||
        (fp8_checkpoint_is_directory(p->ck) && (st = ck_config_read(ctx, input, &p->config))) ||
        (st = decide_all(ctx, p)) || (st = check_lone_block(ctx, p))) {
        fp8_quant_plan_free(p);
        return st;
    }
    *out = p;
    return FP8_OK;
}

fp8_status fp8_quant_plan_create_from(fp8_ctx *ctx, const char *input,
                                      const fp8_quant_options *opts,
                                      const fp8_quant_source *source, fp8_quant_plan **out)
{
    return plan_create(ctx, input, opts, source, NULL, NULL, out);
}

fp8_status quant_plan_create_only(fp8_ctx *ctx, const char *input, const fp8_quant_options *opts,
                                  bool (*wanted)(void *user, const char *name), void *user,
                                  fp8_quant_plan **out)
{
    return plan_create(ctx, input, opts, NULL, wanted, user, out);
}

char *quant_fused_key(const char *name)
{
    size_t stem = strlen(name) - strlen(".weight"), row, base;
    char *s = strndup(name, stem), *key = NULL;
    if (s && fp4_fused_part(s, &row, &base) &&
        asprintf(&key, "%.*s%s", (int)base, s, fp4_fused_parts[row][0]) < 0)
        key = NULL;
    if (s && !key && !fp4_fused_part(s, &row, &base))
        return s;
    free(s);
    return key;
}

/* The options of one tensor (fp8_tensor_options) as quantize's. */
void quant_options_of_tensor(const fp8_tensor_options *t, fp8_quant_options *o)
{
    *o = (fp8_quant_options)FP8_QUANT_OPTIONS_INIT;
    o->scheme = t->scheme;
    o->format = t->format;
    o->block_rows = t->block_rows;
    o->block_cols = t->block_cols;
    o->scale_ue8m0 = t->scale_ue8m0;
    o->mx_rounding = t->mx_rounding;
    o->threads = t->threads;
    o->profile = t->profile;
    o->device = FP8_DEVICE_CPU;
}

fp8_status fp8_quant_plan_create_memory(fp8_ctx *ctx, const fp8_state_options *opts,
                                        const fp8_tensor_info *tensors, size_t n,
                                        fp8_quant_plan **out)
{
    fp8_status st;
    fp8_quant_plan *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p || !(p->input = fp8_strdup(QUANT_MEMORY))) {
        free(p);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    quant_options_of_tensor(&opts->tensor, &p->opts);
    p->opts.ignore = opts->ignore; /* a layer's call: a pattern may match another's */
    p->opts.nignore = opts->nignore;
    p->opts.no_default_ignore = opts->no_default_ignore;
    if (!(st = check_options(ctx, p)) && opts->config_json)
        st = ck_json_parse(ctx, QUANT_MEMORY "/config.json", opts->config_json,
                           strlen(opts->config_json), &p->config);
    if (!st && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(p->config, "quantization_config")))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s/config.json: already has a "
                      "quantization_config; quantize takes bf16, f16 or f32 models", p->input);
    if (!st && !(st = ck_open_tensors(ctx, "model.safetensors", tensors, n, &p->ck)) &&
        !(st = check_not_quantized(ctx, p)) &&
        !(st = ck_output_names(ctx, p->ck, &p->out_shards)))
        st = decide_all(ctx, p);
    if (st) {
        fp8_quant_plan_free(p);
        return st;
    }
    *out = p;
    return FP8_OK;
}

fp8_status fp8_quant_plan_item_source(fp8_ctx *ctx, const fp8_quant_plan *p, size_t i,
                                      fp8_item_source *out)
{
    if (i >= p->n)
        return fp8_fail(ctx, FP8_ERR_USAGE, "item %zu of a plan of %zu", i, p->n);
    const quant_part *part = p->entries[i].part;
    const fp8_tensor_info *t = part ? part->fused : p->items[i].tensor;
    *out = (fp8_item_source){ .tensor = t->name, .apart = part != NULL,
                              .in_out = part && part->in_out, .expert = part ? part->expert : 0,
                              .row0 = part ? part->at : 0, .rows = part ? part->shape[0] : 0 };
    plan_entry *e = &p->entries[i];
    if (p->items[i].quantize && !e->owned_set &&
        !(e->owned_set = quant_fused_key(p->items[i].tensor->name)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    out->set = p->items[i].quantize ? e->owned_set : p->items[i].tensor->name;
    return FP8_OK;
}

char *fp8_quant_plan_quantization_config(const fp8_quant_plan *p)
{
    cJSON *qc = fmt_quantization_config(p->spec, &p->opts, p->ignored, p->nignored);
    char *json = qc ? cJSON_PrintUnformatted(qc) : NULL;
    cJSON_Delete(qc);
    return json;
}

fp8_status quant_plan_create_tensor(fp8_ctx *ctx, const fp8_quant_options *opts,
                                    const fp8_tensor_info *t, fp8_quant_plan **out)
{
    fp8_quant_plan *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p || !(p->input = fp8_strdup(QUANT_MEMORY)) ||
        !(p->items = fp8_xcalloc(1, sizeof *p->items)) ||
        !(p->entries = fp8_xcalloc(1, sizeof *p->entries))) {
        fp8_quant_plan_free(p);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    p->opts = *opts;
    /* one tensor, asked for: no ignore rule, built-in or given, applies */
    p->opts.ignore = NULL;
    p->opts.nignore = p->opts.nignore_like = 0;
    p->opts.no_default_ignore = true;
    p->opts.scale_dtype_set = false;
    p->n = 1;
    fp8_quant_item *it = &p->items[0];
    plan_entry *e = &p->entries[0];
    it->tensor = t;
    it->shard = p->input;
    bool warn;
    char shape[96];
    fp8_shape_text(t->rank, t->shape, shape, sizeof shape);
    fp8_status st = check_options(ctx, p);
    if (!st && (it->reason = keep_reason(p, t, &warn, &e->owned_reason)))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s' of shape %s is not quantized "
                      "by --scheme %s: %s", p->input, t->name, shape,
                      fp8_scheme_name(opts->scheme), it->reason);
    if (!st) {
        it->quantize = true;
        p->nquantized = 1;
        st = scale_layout(ctx, p, it, e);
    }
    if (st) {
        fp8_quant_plan_free(p);
        return st;
    }
    *out = p;
    return FP8_OK;
}

void fp8_quant_plan_free(fp8_quant_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->entries && i < p->n; i++) {
        free(p->entries[i].owned_reason);
        free(p->entries[i].owned_scale_name);
        free(p->entries[i].owned_packed_name);
        free(p->entries[i].owned_global_name);
        free(p->entries[i].owned_shape_name);
        free(p->entries[i].owned_set);
    }
    for (size_t i = 0; i < p->nparts; i++)
        free(p->parts[i].name);
    free(p->parts);
    fp8_strings_free(p->ignored, p->nignored);
    fp8_strings_free(p->warnings, p->nwarnings);
    cJSON_Delete(p->config);
    ck_output_names_free(p->out_shards, p->ck ? fp8_checkpoint_shard_count(p->ck) : 0);
    for (size_t i = 0; i < p->npatterns; i++)
        fmt_pattern_free(&p->patterns[i]);
    free(p->patterns);
    free(p->entries);
    free(p->items);
    fp8_checkpoint_close(p->ck);
    free(p->input);
    free(p);
}

fp8_format fp8_quant_plan_format(const fp8_quant_plan *p) { return p->format; }
fp8_device fp8_quant_plan_device(const fp8_quant_plan *p) { return p->device; }
size_t fp8_quant_plan_count(const fp8_quant_plan *p) { return p->n; }
const fp8_quant_item *fp8_quant_plan_item(const fp8_quant_plan *p, size_t i)
{
    return i < p->n ? &p->items[i] : NULL;
}
static const char *item_name(const void *arg, size_t i)
{
    return ((const fp8_quant_plan *)arg)->items[i].tensor->name;
}
size_t quant_plan_find(const fp8_quant_plan *p, const char *name)
{
    size_t n = p ? p->n : 0;
    size_t i = fp8_name_find(name, n, item_name, p); /* items are in name order */
    return i < n && p->items[i].quantize ? i : SIZE_MAX;
}
size_t fp8_quant_plan_ignored_count(const fp8_quant_plan *p) { return p->nignored; }
const char *fp8_quant_plan_ignored(const fp8_quant_plan *p, size_t i)
{
    return i < p->nignored ? p->ignored[i] : NULL;
}
uint64_t fp8_quant_plan_input_bytes(const fp8_quant_plan *p) { return p->input_bytes; }
size_t fp8_quant_plan_warning_count(const fp8_quant_plan *p) { return p->nwarnings; }
const char *fp8_quant_plan_warning(const fp8_quant_plan *p, size_t i)
{
    return i < p->nwarnings ? p->warnings[i] : NULL;
}

void fp8_quant_plan_band(const fp8_quant_plan *p, size_t i, uint64_t x, uint64_t row0,
                         uint64_t nrows, uint64_t col0, uint64_t ncols, fp8_band *b,
                         uint64_t *first)
{
    const plan_entry *e = &p->entries[i];
    fp8_geometry g;
    fp8_scheme_geometry(p->opts.scheme, p->opts.block_rows, p->opts.block_cols, e->rows, e->cols,
                        &g);
    bool fixed = fp8_scheme_get(p->opts.scheme)->fixed;
    /* the band lies in one row of groups: its groups are the rows it has */
    *b = (fp8_band){ .src = p->items[i].tensor->dtype, .kind = e->kind, .rows = nrows,
                     .cols = ncols, .group_rows = g.group_rows < nrows ? g.group_rows : nrows,
                     .group_cols = fixed ? ncols : g.group_cols, .fixed = fixed,
                     .scheme = p->opts.scheme, .global = e->global,
                     .num = *fp8_profile_numerics(p->opts.profile, p->opts.scheme) };
    if (fixed)
        b->group_rows = 1;
    if (b->num.inf_src) { /* the input dtype's largest finite value, as TE takes it */
        uint32_t w = (uint32_t)fp8_dtype_inf_bits(b->src) - 1;
        uint16_t h = (uint16_t)w;
        b->num.inf_k = fp8_load_f32(b->src, fp8_dtype_bits(b->src) == 16 ? (void *)&h : &w, 0);
    }
    *first = fixed ? 0 : fp8_geometry_index(&g, x, row0, col0);
}
