/*
 * verify_passes.h - what verify's passes share, a header of no source file
 * of its own so that the passes sit below verify.c.  verify.c (the config and
 * parallelism passes, the API) calls the passes: verify_rules.c (structure,
 * loader rules, packed-FP4 weights), verify_kv.c (KV-cache scales),
 * verify_values.c (the values), verify_against.c (--against); each pass
 * calls only verify_findings.c below it (the findings, and the scale
 * lookups every pass makes).
 */
#ifndef FP8_VERIFY_PASSES_H
#define FP8_VERIFY_PASSES_H

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>

#include "common/internal.h"
#include "common/types.h"
#include "compute/jobs.h"
#include "layout/conditions.h"
#include "layout/formats.h"
#include "layout/fp4.h"
#include "layout/parallel.h"
#include "ops/quantize_run.h"

/* fp8_format's values: DEFAULT (none declared), HF_FP8, COMPRESSED_TENSORS, MODELOPT */

struct fp8_verify {
    const fp8_verify_options *opts;
    bool assumed;          /* the declaration is --format's, not a config.json's */
    uint64_t done, total;  /* progress over all passes */
    char *config_dir;      /* where config.json is read: the checkpoint, or a lone file's folder */
    fp8_checkpoint *ck;
    const char *path;
    fp8_format format;
    fp8_scheme scheme;
    const fmt_spec *spec; /* the format table's row for what is declared */
    const char *ct_activations; /* compressed-tensors input_activations strategy */
    bool static_acts;           /* the config declares static activations (fmt_declaration) */
    uint64_t experts;     /* the config's expert count */
    uint64_t hidden;      /* the config's hidden size, 0 when none */
    unsigned require;     /* loaders that must load it */
    uint32_t block_rows, block_cols;
    bool ue8m0_claim, has_ignore_list;
    char **ignore;
    size_t nignore;
    fmt_ignore_set *ignore_set; /* the ignore list, indexed */
    char *format_name; /* "hf-fp8 block 128x128", for the report */
    size_t n, cap;
    fp8_finding *findings;
    size_t fp8_weights;
    size_t fp4_weights;  /* packed-FP4 weights with a scale (verify_rules.c) */
    /* the FP4 layout of the config's model family (fp4.h), NULL for none:
     * DeepSeek-V4's FP8 weights name their scales X.scale */
    const fp4_layout *family;
    char *model_type;           /* config.json's (NULL: none) */
    const loader_condition *cond[FP8_LOADER_COUNT]; /* layout/conditions.h, NULL: none */
    fp8_dtype family_scale_dtype; /* its FP8 scales' (fp4_family_scale_dtype) */
    bool family_fp8_experts;      /* its experts are FP8, not packed */
    uint64_t saturated; /* codes at +-448 (atomic while scanning) */
    uint64_t saturated_packed; /* packed codes at their element's largest magnitude (atomic) */
    bool has_model;     /* config.json has the dims parallelism splits */
    bool f32_model;     /* config.json's torch_dtype (or dtype) is float32 */
    bool f16_model;     /* ... is float16 (else bfloat16, when not float32) */
    par_model model;
    uint64_t tp_ok;     /* bit t-1: loads at TP=t, for t in 1..64 */
    /* --against: FP8 weights re-quantized from SRC, and how many came out the
     * same bytes (weight and scale); -1 when not tried */
    long requantized, reproduced;
    long requantized_fp4; /* of requantized, the packed FP4 weights */
    long profiles;        /* profile_auto: those reproducing every weight; -1 not tried */
    unsigned profiles_tried;
    uint64_t chunk;     /* bytes a job reads at a time (fp8_jobs_chunk) */
    char *first_unreproduced;
    fp8_verify_stats *stats; /* per FP8 weight, when values were scanned */
    size_t nstats;
    fp8_quality quality; /* --against: over the weights compared (fp8_verify_quality) */
};

#define SERVING FP8_LOADERS_SERVING
#define BIT(l) (1u << (l))

/* verify_findings.c.  Findings: verify_add: an error stops every loader, a warning
 * none; verify_add_for: a finding that stops `loaders` only, an error when
 * one of them is required, else a note; verify_add_unanswered: an error
 * that says nothing of the loaders. */
FP8_PRINTF(5, 6)
fp8_status verify_add(fp8_ctx *ctx, fp8_verify *v, fp8_severity sev, const char *rule,
                      const char *fmt, ...);
FP8_PRINTF(5, 6)
fp8_status verify_add_for(fp8_ctx *ctx, fp8_verify *v, unsigned loaders, const char *rule,
                          const char *fmt, ...);
FP8_PRINTF(4, 5)
fp8_status verify_add_unanswered(fp8_ctx *ctx, fp8_verify *v, const char *rule, const char *fmt,
                                 ...);
/* Whether tensor t has shape [shape[0], ..., shape[rank - 1]]. */
bool verify_has_shape(const fp8_tensor_info *t, int rank, const uint64_t *shape);
/* The scale a weight needs in the declared layout: its name suffix, rank,
 * shape and whether its dtype is a float. */
void verify_expected_scale(const fp8_verify *v, const fp8_tensor_info *t, const char **suffix,
                           int *rank, uint64_t shape[3], bool *float_dtype);

/* The scale of FP8 weight `t` under the names the declared layout's loaders
 * take (its scale_suffix, then its alt_scale_suffix); NULL when neither is
 * there.  *suffix: the one found (may be NULL). */
const fp8_tensor_info *verify_find_scale(const fp8_verify *v, const fp8_tensor_info *t,
                                         size_t *shard, const char **suffix);


/* The passes, in the order fp8_verify_run runs them. */
fp8_status verify_check_structure(fp8_ctx *ctx, fp8_verify *v);
fp8_status verify_check_kv(fp8_ctx *ctx, fp8_verify *v); /* verify_kv.c */
/* The loaders' conditions (layout/conditions.h): each one found is a note. */
fp8_status verify_check_conditions(fp8_ctx *ctx, fp8_verify *v);
fp8_status verify_check_values(fp8_ctx *ctx, fp8_verify *v, int threads);
fp8_status verify_check_against(fp8_ctx *ctx, fp8_verify *v, const char *src_path, int threads,
                                const volatile sig_atomic_t *cancel);
#endif
