/*
 * parallel.c - will a quantized checkpoint load at tensor-parallel size TP
 * and expert-parallel size EP?  From config.json alone, each parallel layer's
 * per-rank partition is computed as vLLM and SGLang split it:
 *   - column-parallel layers (q/k/v, gate/up, MLA q_b/kv_b) split their
 *     output dim; merged ones (qkv, gate_up, MLA's replicated q_a/kv_a) are
 *     checked per part at any TP
 *     (vLLM's validate_fp8_block_shape checks the output partitions of a
 *     merged layer; since PR #30836 it skips that when a part is off the
 *     block, and then does not compute right: merged_outcome), single ones
 *     only when split;
 *   - row-parallel layers (o_proj, down_proj) split their input dim;
 *   - KV heads are replicated when TP exceeds them;
 *   - MoE experts split their intermediate size by TP, or are distributed
 *     whole over EP ranks.
 * With block scaling every output partition must be a multiple of the
 * block's rows and every input partition of its columns (vLLM
 * validate_fp8_block_shape; FusedMoE checks intermediate % block_n at any
 * TP); with mxfp8 every input partition a multiple of 32.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout/parallel.h"
#include "common/types.h"

/* Config numbers divide and multiply: each is trusted only as a whole
 * number up to 2^31 (so that products of two stay exact); anything else,
 * and a 0 where a count must be positive, makes the model unknown. */
#define CFG_MAX (1ull << 31)
#define CFG_BAD UINT64_MAX

static uint64_t cfg_u64(const cJSON *config, const char *key, uint64_t dflt)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(config, key);
    if (!item || cJSON_IsNull(item))
        return dflt;
    /* numbers are raw text (ck_config_read keeps them exact) or cJSON numbers */
    const char *s = cJSON_IsRaw(item) || cJSON_IsNumber(item) ? item->valuestring : NULL;
    if (s && *s && strlen(s) <= 10 && strspn(s, "0123456789") == strlen(s)) {
        uint64_t x = strtoull(s, NULL, 10);
        return x <= CFG_MAX ? x : CFG_BAD;
    }
    if (!s && cJSON_IsNumber(item) && item->valuedouble >= 0 &&
        item->valuedouble <= (double)CFG_MAX && item->valuedouble == (double)(uint64_t)item->valuedouble)
        return (uint64_t)item->valuedouble;
    return CFG_BAD;
}

typedef struct {
    const cJSON *config;
    bool bad;
    const char *bad_key; /* the first key read that is not such a number */
} cfg_reader;

static uint64_t get(cfg_reader *c, const char *key, uint64_t dflt)
{
    uint64_t x = cfg_u64(c->config, key, dflt);
    if (x == CFG_BAD && !c->bad)
        c->bad_key = key;
    c->bad |= x == CFG_BAD;
    return x == CFG_BAD ? 0 : x;
}

/* vLLM sizes the model from the text config (ModelConfig.hf_text_config:
 * vllm/transformers_utils/config.py get_hf_text_config, which takes
 * transformers' PretrainedConfig.get_text_config(), the text_config of a
 * multimodal config such as Llama4Config or Mistral3Config). */
const cJSON *par_text_config(const cJSON *config)
{
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(config, "text_config");
    if (cJSON_IsObject(text) && !cJSON_GetObjectItemCaseSensitive(config, "hidden_size"))
        return text;
    return config;
}

static bool model_read(const cJSON *config, par_model *m, cfg_reader *r)
{
    config = par_text_config(config);
    cfg_reader c = { config, false, NULL };
    memset(m, 0, sizeof *m);
    m->hidden = get(&c, "hidden_size", 0);
    m->heads = get(&c, "num_attention_heads", 0);
    *r = c;
    if (!m->hidden || !m->heads || c.bad)
        return false;
    m->kv_heads = get(&c, "num_key_value_heads", m->heads);
    m->head_dim = get(&c, "head_dim", m->hidden / m->heads);
    m->inter = get(&c, "intermediate_size", 0);
    /* MLA (DeepSeek-V2/V3) */
    m->kv_lora_rank = get(&c, "kv_lora_rank", 0);
    if (m->kv_lora_rank) {
        uint64_t nope = get(&c, "qk_nope_head_dim", 0);
        m->q_head_dim = nope + get(&c, "qk_rope_head_dim", 0);
        m->kv_b_head_dim = nope + get(&c, "v_head_dim", 0);
        m->v_head_dim = get(&c, "v_head_dim", 0);
        m->q_lora_rank = get(&c, "q_lora_rank", 0); /* null: no q_a (DeepSeek-V2-Lite) */
        m->kv_a_rows = m->kv_lora_rank + get(&c, "qk_rope_head_dim", 0);
    }
    /* MoE: DeepSeek n_routed_experts, Qwen num_experts, Mixtral num_local_experts */
    m->experts = get(&c, "n_routed_experts",
                     get(&c, "num_experts", get(&c, "num_local_experts", 0)));
    if (m->experts) {
        m->moe_inter = get(&c, "moe_intermediate_size", m->inter);
        /* Granite's shared_mlp: vLLM and SGLang GraniteMoeSharedMLP, a merged
         * column-parallel input_linear and a row-parallel output_linear */
        m->shared_inter = m->moe_inter * get(&c, "n_shared_experts", 0) +
                          get(&c, "shared_expert_intermediate_size", 0) +
                          get(&c, "shared_intermediate_size", 0);
        /* dense MLP layers beside the MoE ones: DeepSeek's first_k_dense_replace,
         * Qwen's mlp_only_layers; Mixtral has none */
        const cJSON *only = cJSON_GetObjectItemCaseSensitive(config, "mlp_only_layers");
        m->dense_mlp = get(&c, "first_k_dense_replace", 0) > 0 || cJSON_GetArraySize(only) > 0;
    } else {
        m->dense_mlp = m->inter > 0;
    }
    /* Mamba2 layers (Granite-4.0-H's mamba_n_heads, mamba_n_groups) */
    m->mamba_heads = get(&c, "mamba_n_heads", 0);
    m->mamba_groups = get(&c, "mamba_n_groups", 1);
    /* num_key_value_heads 0 stays: par_check reports it at every TP */
    *r = c;
    return !c.bad;
}

bool par_model_from_config(const cJSON *config, par_model *m)
{
    cfg_reader c;
    return model_read(config, m, &c);
}

const char *par_config_bad_key(const cJSON *config, const char **text)
{
    par_model m;
    cfg_reader c;
    model_read(config, &m, &c);
    const cJSON *item = c.bad_key ? cJSON_GetObjectItemCaseSensitive(c.config, c.bad_key) : NULL;
    *text = item && item->valuestring ? item->valuestring : "not a number";
    return c.bad_key;
}

fp8_status par_config_check(fp8_ctx *ctx, const char *dir, const cJSON *config)
{
    const char *text, *key = config ? par_config_bad_key(config, &text) : NULL;
    return key ? fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s/config.json: %s is %s, not a whole number up to 2^31: loaders "
                          "size the model with it and divide by it",
                          dir, key, text)
               : FP8_OK;
}

typedef struct {
    const par_quant *q;
    int tp, ep;
    void (*report)(void *arg, const char *message);
    void *arg;
    int failures;
} checker;

FP8_PRINTF(2, 3)
static void fail(checker *c, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->failures++;
    if (c->report)
        c->report(c->arg, msg);
}

/* What the loaders do with a merged linear layer whose first output part
 * is not whole blocks: they place each part's block scales at a whole
 * block while the kernel scales merged rows [r*block_n, (r+1)*block_n) with
 * scale row r, so the part after one that ends mid-block either overruns the
 * merged scale (the load fails) or has its first rows scaled with the
 * previous part's last block.  Seen with vLLM 0.32 in tests/loaders/matrix.py
 * OFF_BLOCK_CASES (gate/up) and on deepseek-v3.2-exp with q_lora_rank 64
 * (fused_qkv_a_proj, issue 44).  A row per kind of merged layer: its parts'
 * names (NULL: three parts, q/k/v, said in general) and how the loaders come
 * to place the scales so. */
typedef enum { PART_SINGLE, PART_MERGED, PART_GATE_UP, PART_MLA_A, PART_MOE } part_kind;

#define VLLM_SKIP                                                                                   \
    "vLLM since PR #30836 skips its check for a merged layer (linear.py "                         \
    "_maybe_allow_fp8_block_shape_mismatch) but still places each part's block scales at a "     \
    "whole block (adjust_block_scale_shard)"

static const struct {
    const char *first, *second, *how;
} merged_rows[] = {
    [PART_MERGED] = { NULL, NULL, VLLM_SKIP },
    [PART_GATE_UP] = { "gate", "up", VLLM_SKIP },
    /* vLLM models/deepseek_v2.py DeepseekV2MLAAttention: fused_qkv_a_proj, a
     * MergedColumnParallelLinear [q_lora_rank, kv_lora_rank + qk_rope_head_dim]
     * with disable_tp, loaded from both (load_weights stacked_params_mapping);
     * SGLang models/deepseek_v2.py DeepseekV2ForCausalLM.load_weights
     * concatenates both weights, their block scales with them, along dim 0
     * into fused_qkv_a_proj_with_mqa (a ReplicatedLinear) */
    [PART_MLA_A] = { "q_a_proj", "kv_a_proj_with_mqa",
                     "vLLM (models/deepseek_v2.py fused_qkv_a_proj; linear.py "
                     "_maybe_allow_fp8_block_shape_mismatch skips the check) and SGLang "
                     "(deepseek_v2.py load_weights: fused_qkv_a_proj_with_mqa, the scales "
                     "concatenated) load both parts as one layer with each part's block scales "
                     "at a whole block" },
};

/* The outcome of a merged layer's first part of p rows off the block, the
 * second of `next` rows (0: not known). */
static void merged_outcome(char *buf, size_t cap, part_kind kind, uint64_t p, uint64_t next,
                           uint64_t bn)
{
    const char *first = merged_rows[kind].first, *second = merged_rows[kind].second;
    uint64_t each = (p + bn - 1) / bn, later = (next + bn - 1) / bn, all = (p + next + bn - 1) / bn;
    if (first && each + later > all)
        snprintf(buf, cap, "; %s, so the load fails: %s's %llu scale rows at row %llu overrun the "
                 "merged scale's %llu", merged_rows[kind].how, second, (unsigned long long)later,
                 (unsigned long long)each, (unsigned long long)all);
    else if (first)
        snprintf(buf, cap, "; %s, so it computes wrong: %s's rows 0-%llu get %s's last block's "
                 "scale, its later blocks shifted by as many rows",
                 merged_rows[kind].how, second, (unsigned long long)(bn - p % bn - 1), first);
    else
        snprintf(buf, cap, "; %s, so it fails to load or scales a later part's rows with another "
                 "block's scale", merged_rows[kind].how);
}

/* A layer whose dim `full` is split `ways` ways; `output` says which dim.
 * How its parts are checked (kind): one layer split by TP, a merged linear
 * layer (every part but the last checked, at any TP: its rows say which;
 * `next`: the size of the part after this one, 0 when not known), or
 * FusedMoE's gate/up (validate_fp8_block_shape_moe: no skip). */
static void check_split(checker *c, const char *layer, uint64_t full, uint64_t ways, bool output,
                        part_kind kind, uint64_t next)
{
    bool merged = kind != PART_SINGLE;
    if (!full)
        return;
    if (full % ways) {
        fail(c, "%s: %s size %llu is not divisible by %s=%llu", layer, output ? "output" : "input",
             (unsigned long long)full, ways == (uint64_t)c->tp ? "TP" : "the split",
             (unsigned long long)ways);
        return;
    }
    uint64_t part = full / ways;
    bool split = ways > 1 || merged;
    const fp8_scheme_traits *sch = fp8_scheme_get(c->q->scheme);
    if (sch->group == FP8_GROUP_TILE && split) {
        uint64_t block = output ? c->q->block_n : c->q->block_k;
        char outcome[800] = "";
        if (part % block && output && kind != PART_MOE && kind != PART_SINGLE)
            merged_outcome(outcome, sizeof outcome, kind, part, next, block);
        if (part % block)
            fail(c, "%s: %s partition %llu/%llu = %llu is not a multiple of the block's %llu %s%s",
                 layer, output ? "output" : "input", (unsigned long long)full,
                 (unsigned long long)ways, (unsigned long long)part, (unsigned long long)block,
                 output ? "rows" : "columns", outcome);
    }
    if (sch->group == FP8_GROUP_RUN && !output && ways > 1 && part % sch->run)
        fail(c, "%s: input partition %llu/%llu = %llu is not a multiple of %u (%s)", layer,
             (unsigned long long)full, (unsigned long long)ways, (unsigned long long)part,
             sch->run, fp8_scheme_name(c->q->scheme));
}

int par_check(const par_model *m, const par_quant *q, int tp, int ep,
              void (*report)(void *arg, const char *message), void *arg)
{
    checker c = { q, tp, ep, report, arg, 0 };
    uint64_t t = (uint64_t)tp;
    if (m->heads % t)
        fail(&c, "self_attn: num_attention_heads %llu is not divisible by TP=%d",
             (unsigned long long)m->heads, tp);
    if (m->kv_lora_rank) { /* MLA: q_a/kv_a are replicated, merged when there is a q_a */
        check_split(&c, "self_attn.q_a_proj (fused_qkv_a_proj, merged, replicated)",
                    m->q_lora_rank, 1, true, PART_MLA_A, m->kv_a_rows);
        check_split(&c, "self_attn.q_b_proj (column-parallel)", m->heads * m->q_head_dim, t, true,
                    PART_SINGLE, 0);
        check_split(&c, "self_attn.kv_b_proj (column-parallel)", m->heads * m->kv_b_head_dim, t,
                    true, PART_SINGLE, 0);
        check_split(&c, "self_attn.o_proj (row-parallel)", m->heads * m->v_head_dim, t, false,
                    PART_SINGLE, 0);
    } else {
        check_split(&c, "self_attn.q_proj (qkv, column-parallel)", m->heads * m->head_dim, t,
                    true, PART_MERGED, 0);
        /* fewer KV heads than ranks: each rank holds one, replicated */
        if (!m->kv_heads)
            fail(&c, "self_attn: num_key_value_heads is 0");
        else if (m->kv_heads >= t && m->kv_heads % t)
            fail(&c, "self_attn: num_key_value_heads %llu is not divisible by TP=%d",
                 (unsigned long long)m->kv_heads, tp);
        else if (m->kv_heads < t && t % m->kv_heads)
            fail(&c, "self_attn: TP=%d is not a multiple of num_key_value_heads %llu", tp,
                 (unsigned long long)m->kv_heads);
        uint64_t kv_part = (m->kv_heads >= t ? m->kv_heads / t : 1) * m->head_dim;
        check_split(&c, "self_attn.k_proj/v_proj (qkv, column-parallel)", kv_part, 1, true, PART_MERGED, 0);
        check_split(&c, "self_attn.o_proj (row-parallel)", m->heads * m->head_dim, t, false,
                    PART_SINGLE, 0);
    }
    /* vLLM layers/mamba/mamba2/mamba_mixer2.py MambaMixer2.__init__: "Tensor
     * parallel world size must divide num heads", and n_groups divisible by
     * TP or 1 (a single group is replicated to every head shard) */
    if (m->mamba_heads && m->mamba_heads % t)
        fail(&c, "mamba: mamba_n_heads %llu is not divisible by TP=%d",
             (unsigned long long)m->mamba_heads, tp);
    if (m->mamba_heads && m->mamba_groups != 1 && m->mamba_groups % t)
        fail(&c, "mamba: mamba_n_groups %llu is neither 1 nor divisible by TP=%d",
             (unsigned long long)m->mamba_groups, tp);
    if (m->dense_mlp) {
        check_split(&c, "mlp.gate_proj/up_proj (column-parallel)", m->inter, t, true, PART_GATE_UP,
                    m->inter / t);
        check_split(&c, "mlp.down_proj (row-parallel)", m->inter, t, false, PART_SINGLE, 0);
    }
    if (m->shared_inter) {
        check_split(&c, "mlp.shared_experts gate/up (column-parallel)", m->shared_inter, t, true,
                    PART_GATE_UP, m->shared_inter / t);
        check_split(&c, "mlp.shared_experts.down_proj (row-parallel)", m->shared_inter, t, false,
                    PART_SINGLE, 0);
    }
    if (m->experts) {
        if (ep > 1) { /* whole experts per rank; their intermediate is not split */
            if (m->experts % (uint64_t)ep)
                fail(&c, "mlp.experts: %llu experts are not divisible by EP=%d",
                     (unsigned long long)m->experts, ep);
            check_split(&c, "mlp.experts gate/up (FusedMoE)", m->moe_inter, 1, true, PART_MOE, 0);
        } else {
            check_split(&c, "mlp.experts gate/up (FusedMoE, split by TP)", m->moe_inter, t, true,
                        PART_MOE, 0);
            check_split(&c, "mlp.experts.down_proj (FusedMoE, split by TP)", m->moe_inter, t,
                        false, PART_SINGLE, 0);
        }
    }
    return c.failures;
}
