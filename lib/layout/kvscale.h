/*
 * kvscale.h - FP8 KV-cache scales: the naming conventions producers write
 * them under, one table row per (convention, tensor role), and what each
 * loader's name remapping does with each row for a model_type.  verify and
 * inspect read the table; fp8conv-formats(5), "KV CACHE SCALES", is its
 * prose.
 */
#ifndef FP8_KVSCALE_H
#define FP8_KVSCALE_H

#include "common/internal.h"

/* What one scale tensor scales. */
typedef enum {
    KV_ROLE_K,    /* the key cache */
    KV_ROLE_V,    /* the value cache */
    KV_ROLE_KV,   /* one tensor for both (deprecated kv_scale, TensorRT-LLM) */
    KV_ROLE_Q,    /* the query (FP8 attention) */
    KV_ROLE_PROB, /* the attention probabilities (FP8 attention) */
} kv_role;

typedef struct {
    const char *convention; /* "modelopt", "llm-compressor", ...: the --kv-names values */
    const char *suffix;     /* how the name ends, from the attention module on */
    kv_role role;
    /* what vLLM's remapping (maybe_remap_kv_scale_name, or the quantization
     * config's get_cache_scale) puts in place of `suffix`: the attention
     * layer's parameter; NULL when no rule maps the name */
    const char *vllm_to;
    const char *fact;       /* where the naming comes from (a source file or issue) */
} kv_naming;

/* The row whose suffix ends `name`, NULL when none.  *layer is the
 * layer index the name carries (model.layers.L...), -1 when none. */
const kv_naming *kv_naming_of(const char *name, long *layer);

/* The row of `convention` for `role`, NULL when that convention has none. */
const kv_naming *kv_naming_for(const char *convention, kv_role role);

/* What loader `loader` (0 vLLM, 1 SGLang: FP8_LOADER_*) does with a scale
 * named by row `n` in a model of `model_type` (NULL: none declared): NULL
 * when its remapping maps it onto the attention layer, else why the scale
 * is dropped and the layer runs at 1.0 (with the source). */
const char *kv_dropped_by(int loader, const kv_naming *n, const char *model_type);

/* The scale's single value as a float (F32, BF16, F16 at `p`); false for
 * another dtype. */
bool kv_scale_value(fp8_dtype dt, const unsigned char *p, float *out);

/* The one judgement of KV-cache scale t (shard `shard` of ck, as `file`
 * names it): one finite positive F32, BF16 or F16 value ([] or [1]), as
 * vLLM's and SGLang's kv_cache.py load it.  *rule is NULL when it is;
 * else "kv-scale-shape" (its dtype or shape) or "kv-scale-value" (NaN,
 * infinite, zero or negative; judged when `values`), and *why the message
 * (malloc'ed), which verify reports and convert refuses with. */
fp8_status kv_scale_judge(fp8_ctx *ctx, const fp8_checkpoint *ck, const fp8_tensor_info *t,
                          size_t shard, bool values, const char **rule, char **why);

#endif
