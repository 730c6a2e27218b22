/*
 * verify_kv.c - verify's KV-cache pass: every FP8 KV-cache scale the table
 * of layout/kvscale.h recognises is judged (one finite positive value, k
 * and v per attention layer), the config's KV-cache declaration against
 * them, and, per loader and model_type, whether the loader's name
 * remapping keeps them (fp8conv-formats(5), KV CACHE SCALES).
 */
#include <math.h>
#include <strings.h>
#include <stdlib.h>

#include "io/checkpoint.h"
#include "layout/kvscale.h"
#include "ops/verify_passes.h"

/* The first tensor seen of a convention, and how many. */
typedef struct {
    const kv_naming *naming;
    const char *first, *file;
    size_t count;
} kv_seen;

/* What the config declares for the KV cache: 1 a static FP8 scheme, 0
 * none, and whether the loader needs the declaration to load scales. */
static void kv_declared(const fp8_verify *v, const cJSON *config, const cJSON *side,
                        bool *declared, bool *needed, const char **key)
{
    const cJSON *q = cJSON_GetObjectItem(config, "quantization_config");
    *declared = false;
    *needed = true;
    switch (v->format) {
    case FP8_FORMAT_COMPRESSED_TENSORS:
        /* vLLM compressed_tensors.py get_quant_method gives Attention a
         * CompressedTensorsKVCacheMethod only with a kv_cache_scheme */
        *key = "kv_cache_scheme";
        *declared = cJSON_IsObject(cJSON_GetObjectItem(q, "kv_cache_scheme"));
        break;
    case FP8_FORMAT_MODELOPT: {
        /* SGLang modelopt_quant.py and vLLM modelopt.py get_quant_method:
         * ModelOptFp8KVCacheMethod only when kv_cache_quant_algo is set */
        const cJSON *a = cJSON_GetObjectItem(q, "kv_cache_quant_algo");
        if (!cJSON_IsString(a))
            a = cJSON_GetObjectItem(cJSON_GetObjectItem(side, "quantization"), "kv_cache_quant_algo");
        *key = "kv_cache_quant_algo";
        *declared = cJSON_IsString(a);
        break;
    }
    case FP8_FORMAT_HF_FP8:
        /* vLLM quantization/fp8.py get_quant_method: every Attention gets
         * Fp8KVCacheMethod; nothing to declare */
        *key = NULL;
        *needed = false;
        break;
    default:
        *key = "quantization_config";
        break;
    }
}

static const char *model_type_of(const cJSON *config)
{
    const cJSON *m = cJSON_GetObjectItem(config, "model_type");
    if (!cJSON_IsString(m))
        m = cJSON_GetObjectItem(cJSON_GetObjectItem(config, "text_config"), "model_type");
    return cJSON_IsString(m) ? m->valuestring : NULL;
}

static long layers_of(const cJSON *config)
{
    const cJSON *c = cJSON_GetObjectItem(config, "text_config");
    const cJSON *n = cJSON_GetObjectItem(config, "num_hidden_layers");
    if (!n && c)
        n = cJSON_GetObjectItem(c, "num_hidden_layers");
    /* hybrid models (layer_types, full_attention_interval) have attention
     * in some layers only: no count to hold the scales to */
    if (cJSON_GetObjectItem(config, "layer_types") || cJSON_GetObjectItem(config, "full_attention_interval") ||
        (c && (cJSON_GetObjectItem(c, "layer_types") || cJSON_GetObjectItem(c, "full_attention_interval"))))
        return -1;
    /* numbers are raw text (ck_config_read keeps them exact) */
    const char *s = n && (cJSON_IsRaw(n) || cJSON_IsNumber(n)) ? n->valuestring : NULL;
    if (s && *s && strlen(s) <= 6 && strspn(s, "0123456789") == strlen(s))
        return strtol(s, NULL, 10);
    return cJSON_IsNumber(n) && n->valuedouble >= 1 && n->valuedouble < 1e6 ? (long)n->valuedouble : -1;
}

/* kv_scale_judge's finding, its value where the values are read. */
static fp8_status check_one(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t, size_t shard)
{
    const char *rule;
    char *why;
    bool values = v->opts->values && !fp8_file_is_compressed(fp8_checkpoint_shard(v->ck, shard));
    fp8_status st = kv_scale_judge(ctx, v->ck, t, shard, values, &rule, &why);
    if (!st && rule)
        st = verify_add(ctx, v, FP8_SEV_ERROR, rule, "%s", why);
    free(why);
    return st;
}

fp8_status verify_check_kv(fp8_ctx *ctx, fp8_verify *v)
{
    cJSON *config = NULL, *side = NULL;
    kv_seen seen[16];
    size_t nseen = 0, total = 0;
    struct kv_layer { unsigned char kv; const char *name, *file; } *kv = NULL; /* bit 0 k, bit 1 v */
    long nlayers = 0;
    const char *first_file = NULL;
    fp8_status st = FP8_OK;
    if (v->config_dir && !v->assumed) {
        /* read_declaration has parsed them once; a malformed one is its
         * finding, and this pass reads it as absent */
        if (ck_config_read(ctx, v->config_dir, &config) == FP8_OK)
            (void)ck_json_read(ctx, v->config_dir, HF_QUANT_CONFIG, &side);
    }
    for (size_t i = 0; !st && i < fp8_checkpoint_tensor_count(v->ck); i++) {
        size_t shard;
        long layer;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &shard);
        const kv_naming *k = kv_naming_of(t->name, &layer);
        if (!k)
            continue;
        const char *file = fp8_checkpoint_shard_name(v->ck, shard);
        first_file = first_file ? first_file : file;
        total++;
        size_t j = 0;
        while (j < nseen && seen[j].naming->convention != k->convention)
            j++;
        if (j == nseen && nseen < sizeof seen / sizeof *seen)
            seen[nseen++] = (kv_seen){ k, t->name, file, 0 };
        if (j < nseen)
            seen[j].count++;
        st = check_one(ctx, v, t, shard);
        if (st || layer < 0 || layer > 100000 ||
            (k->role != KV_ROLE_K && k->role != KV_ROLE_V && k->role != KV_ROLE_KV))
            continue;
        if (layer >= nlayers) {
            struct kv_layer *p = fp8_xreallocarray(kv, (size_t)layer + 1, sizeof *p);
            if (!p) {
                st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
                break;
            }
            memset(p + nlayers, 0, (size_t)(layer + 1 - nlayers) * sizeof *p);
            kv = p;
            nlayers = layer + 1;
        }
        if (!kv[layer].kv)
            kv[layer].name = t->name, kv[layer].file = file;
        kv[layer].kv |= k->role == KV_ROLE_K ? 1 : k->role == KV_ROLE_V ? 2 : 3;
    }
    /* k and v: both or neither, in every layer that has one */
    long with = 0, first_missing = -1, want = layers_of(config);
    for (long l = 0; !st && l < nlayers; l++) {
        /* vLLM and SGLang quantization/kv_cache.py process_weights_after_loading
         * use the one scale loaded for both (as for the deprecated kv_scale) */
        if (kv[l].kv == 1 || kv[l].kv == 2)
            st = verify_add(ctx, v, FP8_SEV_WARNING, "kv-scale-unpaired",
                            "%s: %s: layer %ld has a KV-cache %s scale and no %s scale: the "
                            "loaders use the %s scale for the %s cache too",
                            kv[l].file, kv[l].name, l, kv[l].kv == 1 ? "k" : "v",
                            kv[l].kv == 1 ? "v" : "k", kv[l].kv == 1 ? "k" : "v",
                            kv[l].kv == 1 ? "v" : "k");
        with += kv[l].kv != 0;
        if (!kv[l].kv && first_missing < 0)
            first_missing = l;
    }
    if (!st && total && want > 0 && with < want && with > 0)
        st = verify_add(ctx, v, FP8_SEV_WARNING, "kv-scale-partial",
                        "KV-cache scales for %ld of the config's %ld layers (first without: %ld): "
                        "the others run their FP8 cache at scale 1.0",
                        with, want, first_missing >= 0 ? first_missing : nlayers);
    bool declared, needed;
    const char *key = NULL;
    kv_declared(v, config, side, &declared, &needed, &key);
    if (!st && total && needed && !declared)
        st = verify_add(ctx, v, FP8_SEV_WARNING, "kv-scheme-undeclared",
                        "%s: %zu KV-cache scales (%s, first %s), but the config declares no %s: "
                        "the loader creates no KV-cache scales to load them into and runs "
                        "its FP8 cache at 1.0",
                        first_file, total, seen[0].naming->convention, seen[0].first, key);
    if (!st && !total && declared)
        st = verify_add(ctx, v, FP8_SEV_WARNING, "kv-scheme-without-scales",
                        "the config declares %s, but no tensor is a KV-cache scale: every "
                        "layer runs its FP8 cache at scale 1.0",
                        key);
    /* vLLM 0.32 quantization/modelopt.py: ModelOptQuantConfigBase.from_config
     * reads config.json's quantization_config (preferred to
     * hf_quant_config.json: model_loader/weight_utils.py get_quant_config)
     * for the KV cache from kv_cache_scheme only (a dict, type float,
     * num_bits 8), not kv_cache_quant_algo, and
     * ModelOptMixedPrecisionConfig.get_quant_method gives attention a
     * KV-cache method only with one (the other ModelOpt configs always) */
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *algo = cJSON_GetObjectItemCaseSensitive(q, "quant_algo");
    const cJSON *ks = cJSON_GetObjectItemCaseSensitive(q, "kv_cache_scheme");
    const cJSON *kt = cJSON_GetObjectItemCaseSensitive(ks, "type");
    const cJSON *kb = cJSON_GetObjectItemCaseSensitive(ks, "num_bits");
    if (!st && total && v->format == FP8_FORMAT_MODELOPT && cJSON_IsObject(q) &&
        !cJSON_GetObjectItemCaseSensitive(q, "quantization") && cJSON_IsString(algo) &&
        !strcasecmp(algo->valuestring, "MIXED_PRECISION") &&
        !(cJSON_IsString(kt) && !strcmp(kt->valuestring, "float") &&
          ((cJSON_IsNumber(kb) && kb->valuedouble == 8) ||
           (cJSON_IsRaw(kb) && !strcmp(kb->valuestring, "8"))))) /* numbers are kept raw */
        st = verify_add(ctx, v, FP8_SEV_WARNING, "kv-scale-dropped",
                        "%s: %s (%zu KV-cache scales): vLLM drops them: config.json's "
                        "quantization_config (quant_algo MIXED_PRECISION), which vLLM reads "
                        "before hf_quant_config.json, has no kv_cache_scheme {type float, "
                        "num_bits 8} (kv_cache_quant_algo is read only from "
                        "hf_quant_config.json: modelopt.py from_config), and "
                        "ModelOptMixedPrecisionConfig.get_quant_method builds attention no "
                        "KV-cache method without one; its FP8 KV cache runs at scale 1.0 "
                        "(ModelOpt's export writes kv_cache_scheme: convert_hf_config.py)",
                        first_file, seen[0].first, total);
    /* the loaders' name remapping, per convention and model_type */
    const char *mt = model_type_of(config);
    static const char *const loader_name[] = { "vLLM", "SGLang" };
    for (size_t j = 0; !st && j < nseen; j++)
        for (int l = FP8_LOADER_VLLM; !st && l <= FP8_LOADER_SGLANG; l++) {
            const char *why = kv_dropped_by(l, seen[j].naming, mt);
            if (why)
                st = verify_add(ctx, v, FP8_SEV_WARNING, "kv-scale-dropped",
                                "%s: %s (%zu %s scale%s, model_type %s): %s drops them: %s; "
                                "its FP8 KV cache runs at scale 1.0",
                                seen[j].file, seen[j].first, seen[j].count,
                                seen[j].naming->convention, seen[j].count == 1 ? "" : "s",
                                mt ? mt : "(none)", loader_name[l], why);
        }
    free(kv);
    cJSON_Delete(config);
    cJSON_Delete(side);
    return st;
}
