/*
 * quantize.h - what of quantize's plan (quantize.c) the other operations
 * use: convert runs the plan over an FP8 checkpoint, verify --against
 * re-quantizes bands as the plan would; and the plan itself, which its
 * run (quantize_run.c) writes.
 */
#ifndef FP8_QUANTIZE_H
#define FP8_QUANTIZE_H

#include <regex.h>

#include "io/checkpoint.h"
#include "layout/formats.h"
#include "compute/quant_ref.h"

/* The band quantize writes for rows [row0, row0 + nrows) and columns
 * [col0, col0 + ncols) of expert x of quantized item i of a plan (with block
 * scaling, rows of one block row): its source dtype, scale kind and groups,
 * the profile's numerics, and *first, the index of its first scale in the
 * item's scale tensor.  The per-tensor scheme's band is `fixed`: its scale,
 * the factor fp8_numerics_scale makes of the matrix's amax with the band's
 * numerics and kind, is the caller's to set.
 * verify --against re-quantizes with it, so that it compares the bytes
 * quantize would write. */
void fp8_quant_plan_band(const fp8_quant_plan *p, size_t i, uint64_t x, uint64_t row0,
                         uint64_t nrows, uint64_t col0, uint64_t ncols, fp8_band *b,
                         uint64_t *first);

/*
 * convert (lib/convert.c) runs a quantize plan over an FP8 checkpoint: its
 * source says what the plan sees of each input tensor, and gives the bytes
 * of what it made up.  `tensor` returns t itself (kept, copied as it is),
 * another tensor (an F32 weight to quantize from its values q * s, or a
 * scale re-labelled exactly; `read` gives its bytes), or NULL (a scale the
 * output replaces, an activation scale); *keep is NULL for a tensor to
 * quantize, else why it is copied.  `quantized` sees each band quantize
 * made (rows from row0 and columns from col0 of matrix `expert`): its
 * values in, codes and stored scales out (with `fixed`, the one stored
 * scale; from any thread).
 */
typedef struct {
    void *user;
    const fp8_tensor_info *(*tensor)(void *user, const fp8_tensor_info *t, const char **keep);
    fp8_status (*read)(void *user, fp8_ctx *ctx, const fp8_tensor_info *t, uint64_t offset,
                       void *buf, size_t len);
    fp8_status (*quantized)(void *user, fp8_ctx *ctx, const fp8_tensor_info *t, uint64_t expert,
                            uint64_t row0, uint64_t col0, const fp8_band *b, const float *in,
                            const uint8_t *q, const void *scales);
} fp8_quant_source;

fp8_status fp8_quant_plan_create_from(fp8_ctx *ctx, const char *input,
                                      const fp8_quant_options *opts,
                                      const fp8_quant_source *source, fp8_quant_plan **out);

/*
 * fp8_quant_plan_create, quantizing only the input tensors `wanted` accepts
 * (called once per tensor, with its name); every other one is kept, whatever
 * the keep rules and opts->ignore would say of it.  A wanted tensor still
 * meets the scheme's own rules (a shape it cannot write is kept, with its
 * reason).  verify --against re-quantizes so the weights a checkpoint holds
 * quantized, whatever ignore list made it: NVFP4's fused sets then share a
 * global among those only, as they did in the checkpoint's own run.
 */
fp8_status quant_plan_create_only(fp8_ctx *ctx, const char *input, const fp8_quant_options *opts,
                                  bool (*wanted)(void *user, const char *name), void *user,
                                  fp8_quant_plan **out);

/*
 * The plan of one tensor in memory, t (its data is not read): the item
 * quantize would make of it in a checkpoint named QUANT_MEMORY, under opts
 * (no ignore rule applies), for fp8_tensor_quantize (tensor.c).  A tensor
 * the scheme cannot write (an mxfp8 row not a multiple of 32, an empty
 * one, fused FP4 experts) is FP8_ERR_BAD_INPUT with the reason.
 */
#define QUANT_MEMORY "memory"
fp8_status quant_plan_create_tensor(fp8_ctx *ctx, const fp8_quant_options *opts,
                                    const fp8_tensor_info *t, fp8_quant_plan **out);

/* The options of one tensor in memory as quantize's (a CPU run). */
void quant_options_of_tensor(const fp8_tensor_options *t, fp8_quant_options *o);

/* The fused layer (layout/fp4.h's fp4_fused_parts) a weight `name` is part
 * of, as a key: its name with the first part's in place of its own (its
 * own name, less ".weight", when it is no part); allocated, NULL when out
 * of memory.  Quantize's items of one key share NVFP4's second level. */
char *quant_fused_key(const char *name);

/*
 * One expert's weight of fused 3-D experts, written apart under an FP4
 * scheme (quantize.c: which tensors, and why): a 2-D tensor read from the
 * fused one.  verify --against finds the same weights in SRC.
 */
typedef struct quant_part quant_part;
struct quant_part {
    fp8_tensor_info t;            /* the weight as written: 2-D, named apart */
    uint64_t shape[2];
    char *name;                   /* t.name, owned */
    const fp8_tensor_info *fused; /* the 3-D tensor it is read from */
    uint64_t expert, at;          /* its expert; its first index on the fused output axis */
    bool in_out;                  /* the fused tensor is [E, in, out]: read transposed */
    /* The parts NVFP4's amax pass reads as this one's: 1, or 2 for a
     * gate_proj whose up_proj (`up`) is quantized too.  The two are one
     * fused set, so only the larger amax of the two counts (their shared
     * global); read together, as stored, they are the expert's whole rows:
     * where [E, in, 2I] is transposed, reads of a job's length instead of a
     * read per input row for each.  The up_proj then has 0. */
    unsigned amax_parts;
    const quant_part *up;
};

/* The weight `name` of checkpoint ck (config: its config.json, or NULL)
 * would be written apart from fused experts as (allocated: free with
 * quant_part_free), and the shard of the fused tensor; NULL when none. */
quant_part *quant_part_find(const fp8_checkpoint *ck, const cJSON *config, const char *name,
                            size_t *shard);
void quant_part_free(quant_part *part);
/* Whole rows [offset, offset + len) (bytes) of the weight, from file f,
 * the fused tensor's.  as_stored: bytes [offset, offset + len) of the
 * weight's amax_parts parts as the fused tensor holds them, [in][out] for a
 * transposed one (its columns of each input row, a run each), for a pass
 * that does not care for order, such as an amax; quant_part_stored_at says
 * where an element of such a range lies, and in which part. */
fp8_status quant_part_read(fp8_ctx *ctx, fp8_file *f, const quant_part *part, uint64_t offset,
                           void *buf, size_t len, bool as_stored);
/* Element `flat` of the weight as stored (with its up_proj, amax_parts 2),
 * as (row, column) of the part returned: `part` or its `up`. */
const quant_part *quant_part_stored_at(const quant_part *part, uint64_t flat, uint64_t *row,
                                       uint64_t *col);

/* A transposed weight ([in, out] stored) is read in tiles of PART_TILE
 * input rows (columns of the weight): quant_part_read_tile reads the
 * columns [c0, c0 + PART_TILE) (fewer at the end) of the weight's rows
 * [row0, row0 + n), a read of n elements for each, into `tile`
 * (quant_part_tile_bytes(part, n) bytes), column c's n elements at
 * quant_part_tile_stride(part, n) elements apart: fp8_transpose
 * (quant_cpu.h) makes them rows.  Reading a transposed weight takes a read
 * per input row of each band: several times the plain layout's time
 * (fp8conv-formats(5), FP4 QUANTIZATION). */
#define PART_TILE 64
uint64_t quant_part_tile_stride(const quant_part *part, uint64_t n);
size_t quant_part_tile_bytes(const quant_part *part, uint64_t n);
fp8_status quant_part_read_tile(fp8_ctx *ctx, fp8_file *f, const quant_part *part, uint64_t row0,
                                uint64_t n, uint64_t c0, void *tile);

/* ---------------------------------------------------------------- the plan, as its run sees it */

/* What the plan keeps about a quantized tensor beside its public item. */
typedef struct {
    size_t shard;
    fp8_scale_kind kind;
    uint64_t experts, rows, cols; /* E, M, N; E = 1 for a matrix */
    char *owned_reason, *owned_scale_name, *owned_packed_name, *owned_global_name;
    char *owned_shape_name;
    char *owned_set;              /* its fused set's key (fp8_quant_plan_item_source) */
    float global;                 /* NVFP4: the second level, after the amax pass */
    const struct quant_part *part; /* a weight of fused experts written apart */
    bool from_source;             /* convert: the source's tensor, read through it */
    uint64_t nan_at;              /* a kept float tensor's first NaN element + 1; 0: none */
} plan_entry;

struct fp8_quant_plan {
    fp8_quant_options opts;
    fp8_format format;
    const fmt_spec *spec;  /* the format table's row for (format, scheme) */
    fp8_checkpoint *ck;
    cJSON *config;         /* config.json, NULL when none */
    uint64_t experts;      /* the config's expert count (routers have as many rows) */
    const char *model_type; /* the config's (in config), NULL when none */
    uint64_t hidden;       /* the config's hidden size, 0 when none */
    char **warnings;       /* about the whole output (loadability) */
    size_t nwarnings;
    char *input;
    size_t n, nquantized;  /* items, and those quantized */
    fp8_quant_item *items; /* sorted by name, as the checkpoint lists them */
    struct quant_part *parts; /* the weights fused experts are written apart as */
    size_t nparts;
    plan_entry *entries;
    size_t nignored;
    char **ignored;
    char **out_shards;     /* output shard names, by input shard */
    fmt_pattern *patterns; /* opts.ignore compiled */
    size_t npatterns;
    uint64_t input_bytes, work_bytes; /* work counts per-tensor inputs twice */
    fp8_device device;     /* resolved by the run */
    const fp8_quant_source *source; /* convert's FP8 input; NULL for quantize */
    bool (*wanted)(void *user, const char *name); /* quant_plan_create_only's; NULL: all */
    void *wanted_user;
};

/* The item of plan p (may be NULL) for tensor `name`, SIZE_MAX when it has
 * none or keeps the tensor. */
size_t quant_plan_find(const fp8_quant_plan *p, const char *name);

/* Adds a warning about the whole output (takes `message`; NULL: out of
 * memory). */
fp8_status quant_plan_warn(fp8_ctx *ctx, fp8_quant_plan *p, char *message);

#endif
