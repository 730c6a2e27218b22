/*
 * model_rules.c - what the built-in rules keep unquantized (embeddings,
 * heads, norms, routers, towers), and which tensors are MoE experts, by
 * name and shape as the loaders' model files build them.
 */
#define _GNU_SOURCE
#include <string.h>

#include "layout/model_rules.h"
#include "common/types.h"

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
    { ".block_sparse_moe.input_linear.", "_scale", { [FP8_LOADER_TRANSFORMERS] = HF_GRANITE_EXPERTS } },
    { ".block_sparse_moe.output_linear.", "_scale", { [FP8_LOADER_TRANSFORMERS] = HF_GRANITE_EXPERTS } },
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
