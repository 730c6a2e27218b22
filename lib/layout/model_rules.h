/*
 * model_rules.h - the model rules every command shares (fp8conv-formats(5),
 * MODEL RULES): what stays unquantized (embeddings, heads, norms, routers,
 * towers) and which weights are MoE experts or fused gate/up.
 */
#ifndef FP8_MODEL_RULES_H
#define FP8_MODEL_RULES_H

#include "common/internal.h"

/* Whether a 3-D fused experts tensor is stored [E, in, out] (Llama-4,
 * gpt-oss), as its shape against the hidden size says. */
bool fmt_experts_in_out(const char *name, int rank, const uint64_t *shape, uint64_t hidden);

/* Why a tensor stays unquantized by the built-in rules (a multimodal
 * model's vision tower or projector, embedding, output head, norm, MoE
 * router, MTP projection); NULL when no rule keeps it.
 * `experts` is the config's expert count (0: none): a 2-D gate or router
 * weight whose output dimension equals it is a router, whatever the family
 * calls it. `model_type` (the config's, NULL: none) adds the towers
 * fmt_tower_unquantized names for it. */
const char *fmt_default_keep(const char *name, int rank, const uint64_t *shape, uint64_t experts,
                             const char *model_type);
#define FMT_KEEP_TOWER "vision tower or multimodal projector"
/* The loaders (FP8_LOADER_* bits) that build the tower holding `name`
 * unquantized for `model_type` (its config's), whatever the config declares. */
unsigned fmt_tower_unquantized(const char *model_type, const char *name);

/* fmt_default_keep's answer for DeepSeek-V3.2's indexer weights_proj */
#define INDEXER_WEIGHTS_PROJ "indexer weights_proj (DeepSeek-V3.2)"

/* Whether `name` is a fused gate/up weight ([2I, H], or [E, 2I, H] for
 * experts): gate_up_proj, w13, ... whose halves a loader splits. */
bool fmt_is_fused_gate_up(const char *name);
/* Whether `name` is an MoE expert weight (3-D, or one expert's 2-D). */
/* The weight-scale suffix (quantize's scale_suffix) the loaders read for
 * the experts tensor `name`, NULL for any; *expert: whether it is one. */
const char *fmt_expert_scale_suffix(const char *name, bool *expert);
/* Why loader l cannot load an FP8 expert weight of this name (its expert
 * row's rule: Granite's fused experts in transformers); NULL when it can. */
const char *fmt_expert_no_load(const char *name, fp8_loader l);
bool fmt_is_expert(const char *name);

#endif
