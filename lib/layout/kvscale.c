/*
 * kvscale.c - the KV-cache scale table (kvscale.h): one row per naming
 * fact, each citing where it comes from, and the loaders' known drops.
 */
#define _GNU_SOURCE
#include "layout/kvscale.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp8_math.h"
#include "common/text.h"
#include "common/types.h"

#define WU "vLLM model_executor/model_loader/weight_utils.py maybe_remap_kv_scale_name"
#define CT "vLLM quantization/compressed_tensors/compressed_tensors.py get_cache_scale"

static const kv_naming namings[] = {
    /* ModelOpt: per projection, F32 [] (its modelopt_scale_names branch) */
    { "modelopt", ".self_attn.k_proj.k_scale", KV_ROLE_K, ".self_attn.attn.k_scale", WU },
    { "modelopt", ".self_attn.v_proj.v_scale", KV_ROLE_V, ".self_attn.attn.v_scale", WU },
    /* llm-compressor (compressed-tensors kv_cache_scheme): on the attention
     * module, [1] (the generic .k_scale/.v_scale branch; q_scale and
     * prob_scale since vLLM's [qkv]_scale pattern, vllm PR #54624) */
    { "llm-compressor", ".self_attn.k_scale", KV_ROLE_K, ".self_attn.attn.k_scale", WU },
    { "llm-compressor", ".self_attn.v_scale", KV_ROLE_V, ".self_attn.attn.v_scale", WU },
    { "llm-compressor", ".self_attn.q_scale", KV_ROLE_Q, ".self_attn.attn.q_scale",
      "vllm PR #54624 (weight_utils.py [qkv]_scale)" },
    { "llm-compressor", ".self_attn.prob_scale", KV_ROLE_PROB, ".self_attn.attn.prob_scale",
      "vLLM quantization/kv_cache.py BaseKVCacheMethod" },
    /* llm-compressor under the fused projection (vllm issue #25047; mapped
     * by vllm PR #35656, sglang issue #39942) */
    { "fused-qkv", ".self_attn.qkv_proj.k_scale", KV_ROLE_K, ".self_attn.attn.k_scale",
      "vllm issue #25047, PR #35656" },
    { "fused-qkv", ".self_attn.qkv_proj.v_scale", KV_ROLE_V, ".self_attn.attn.v_scale",
      "vllm issue #25047, PR #35656" },
    /* older compressed-tensors: the projections' output scales */
    { "ct-output", ".self_attn.k_proj.output_scale", KV_ROLE_K, ".self_attn.attn.k_scale", CT },
    { "ct-output", ".self_attn.v_proj.output_scale", KV_ROLE_V, ".self_attn.attn.v_scale", CT },
    { "ct-output", ".self_attn.q_proj.output_scale", KV_ROLE_Q, ".self_attn.attn.q_scale",
      "vLLM quantization/fp8.py get_cache_scale" },
    { "ct-output", ".self_attn.prob_output_scale", KV_ROLE_PROB, ".self_attn.attn.prob_scale",
      "vLLM quantization/fp8.py get_cache_scale" },
    /* deprecated: one tensor, remapped to k_scale and copied to v_scale */
    { "kv-scale", ".self_attn.kv_scale", KV_ROLE_KV, ".self_attn.attn.k_scale", WU },
    /* TensorRT-LLM's checkpoint name (no vLLM rule maps it) */
    { "tensorrt-llm", ".kv_cache_scaling_factor", KV_ROLE_KV, NULL, WU " (no rule for it)" },
};
#define NNAMINGS (sizeof namings / sizeof *namings)

const kv_naming *kv_naming_of(const char *name, long *layer)
{
    *layer = -1;
    for (size_t i = 0; i < NNAMINGS; i++) {
        if (!fp8_has_suffix(name, namings[i].suffix))
            continue;
        /* the layer index: the first integer component ("layers.L.") */
        const char *p = strstr(name, "layers.");
        if (p && p[7] >= '0' && p[7] <= '9')
            *layer = strtol(p + 7, NULL, 10);
        return &namings[i];
    }
    return NULL;
}

const kv_naming *kv_naming_for(const char *convention, kv_role role)
{
    for (size_t i = 0; i < NNAMINGS; i++)
        if (!strcmp(namings[i].convention, convention) && namings[i].role == role)
            return &namings[i];
    return NULL;
}

/* The known drops: a loader, the model_types (NULL: every one), the
 * conventions ("*": all), and why. */
static const struct {
    int loader;
    const char *model_types[4];
    const char *conventions[4];
    const char *why;
} drops[] = {
    /* Qwen3.5's load_weights hands names to AutoWeightsLoader with no remap */
    { FP8_LOADER_VLLM, { "qwen3_5", "qwen3_5_moe" }, { "*" },
      "vLLM's models/qwen3_5.py load_weights does not call maybe_remap_kv_scale_name "
      "(vllm issue #54623)" },
    /* DeepSeek MLA (issue 44): the generic .k_scale branch maps
     * self_attn.k_scale to self_attn.attn.k_scale, a module MLA attention
     * (models/deepseek_v2.py) does not have, so the remapped name is no
     * parameter and maybe_remap_kv_scale_name logs and skips it */
    { FP8_LOADER_VLLM, { "deepseek_v3", "deepseek_v32", "kimi_k2", "deepseek_v2" },
      { "llm-compressor", "kv-scale" },
      "vLLM's maybe_remap_kv_scale_name (model_loader/weight_utils.py) maps them to "
      "self_attn.attn.k_scale / v_scale, which its MLA attention (models/deepseek_v2.py) does not "
      "have, and skips them with a log line that the kv_scale is not loaded" },
    /* SGLang's hand-written loaders of these three lose three namings */
    { FP8_LOADER_SGLANG, { "qwen3_moe", "qwen2", "mixtral" }, { "fused-qkv", "modelopt", "kv-scale" },
      "SGLang's Qwen3MoeForCausalLM, Qwen2ForCausalLM and MixtralForCausalLM load_weights "
      "do not remap this naming (sglang issue #39942)" },
};

static bool listed(const char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n && list[i]; i++)
        if (!strcmp(list[i], "*") || (s && !strcmp(list[i], s)))
            return true;
    return false;
}

const char *kv_dropped_by(int loader, const kv_naming *n, const char *model_type)
{
    /* vLLM routes a name through maybe_remap_kv_scale_name or a config's
     * get_cache_scale: a row neither maps (vllm_to NULL) never loads */
    if (loader == FP8_LOADER_VLLM && !n->vllm_to)
        return "no rule of vLLM's maybe_remap_kv_scale_name (model_loader/weight_utils.py) or "
               "a quantization config's get_cache_scale maps this name";
    for (size_t i = 0; i < sizeof drops / sizeof *drops; i++) {
        if (drops[i].loader != loader || !listed(drops[i].conventions, 4, n->convention))
            continue;
        if (!drops[i].model_types[0] || listed(drops[i].model_types, 4, model_type))
            return drops[i].why;
    }
    return NULL;
}

bool kv_scale_value(fp8_dtype dt, const unsigned char *p, float *out)
{
    switch (dt) {
    case FP8_DTYPE_F32: memcpy(out, p, 4); return true;
    case FP8_DTYPE_BF16: *out = fp8_bf16_to_f32((uint16_t)(p[0] | p[1] << 8)); return true;
    case FP8_DTYPE_F16: *out = fp8_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); return true;
    default: return false;
    }
}

fp8_status kv_scale_judge(fp8_ctx *ctx, const fp8_checkpoint *ck, const fp8_tensor_info *t,
                          size_t shard, bool values, const char **rule, char **why)
{
    const char *file = fp8_checkpoint_shard_name(ck, shard);
    unsigned char raw[4];
    float x = 0;
    int rc = 0;
    *rule = NULL;
    *why = NULL;
    if (t->elements != 1 || !fp8_dtype_is_float(t->dtype)) {
        *rule = "kv-scale-shape";
        rc = asprintf(why, "%s: %s: a KV-cache scale is one F32, BF16 or F16 value ([] or [1]), "
                      "not %s of %llu elements",
                      file, t->name, fp8_dtype_name(t->dtype), (unsigned long long)t->elements);
    } else if (values) {
        fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(ck, shard), t, 0, raw,
                                      fp8_dtype_bits(t->dtype) / 8);
        if (st)
            return st;
        kv_scale_value(t->dtype, raw, &x);
        if (!(x > 0 && x <= 3.4028234663852886e38f)) {
            *rule = "kv-scale-value";
            rc = asprintf(why, "%s: %s: KV-cache scale %g is not finite and > 0: the cache "
                          "cannot be dequantized with it",
                          file, t->name, (double)x);
        }
    }
    if (rc < 0) {
        *why = NULL;
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    return FP8_OK;
}

fp8_status fp8_checkpoint_kv_scales(fp8_ctx *ctx, const fp8_checkpoint *ck, fp8_kv_scales *out,
                                    size_t cap, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++) {
        size_t shard;
        long layer;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &shard);
        const kv_naming *k = kv_naming_of(t->name, &layer);
        if (!k)
            continue;
        size_t j = 0;
        while (j < *n && strcmp(out[j].convention, k->convention))
            j++;
        if (j == *n) {
            if (j == cap)
                continue;
            out[j] = (fp8_kv_scales){ .convention = k->convention, .dtype = t->dtype,
                                      .values = true, .min = 0, .max = 0 };
            (*n)++;
        }
        fp8_kv_scales *e = &out[j];
        if (e->dtype != t->dtype)
            e->dtype = FP8_DTYPE_COUNT;
        fp8_file *f = fp8_checkpoint_shard(ck, shard);
        unsigned char raw[4];
        float x;
        size_t len = t->dtype == FP8_DTYPE_F32 ? 4 : 2;
        if (e->values && t->elements >= 1 && !fp8_file_is_compressed(f) &&
            fp8_tensor_nbytes(t) >= len &&
            fp8_dtype_is_float(t->dtype)) {
            fp8_status st = fp8_file_read(ctx, f, t, 0, raw, len);
            if (st)
                return st;
            kv_scale_value(t->dtype, raw, &x);
            e->min = e->count == 0 || x < e->min || x != x ? x : e->min;
            e->max = e->count == 0 || x > e->max || x != x ? x : e->max;
        } else {
            e->values = false;
        }
        e->count++;
    }
    return FP8_OK;
}
