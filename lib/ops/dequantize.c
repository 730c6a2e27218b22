/*
 * dequantize.c - FP8 checkpoints to bf16/f16/f32 (fp8conv-formats(5), DEQUANTIZATION): every format
 * that quantize writes plus the official DeepSeek-V3/R1 layout.  Each FP8
 * weight is found with its scale (by name, through the whole checkpoint, so a
 * scale in another shard is found), the scale's kind follows from its shape,
 * and y = q * s is one fp32 multiplication rounded to the output dtype.  The
 * work runs on the job engine of jobs.c, as quantize does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/dequantize.h"
#include "io/checkpoint.h"
#include "io/output.h"
#include "io/parts.h"
#include "io/safetensors.h"
#include "io/zio.h"
#include "layout/formats.h"
#include "layout/fp4.h"
#include "layout/kvscale.h"
#include "common/types.h"
#include "compute/diff_cpu.h"
#include "compute/gpu.h"
#include "compute/jobs.h"
#include "compute/quant_cpu.h"

/* Input bytes per job.  On the CPU, a job's codes and its values stay in a
 * core's L2 cache from the read through the kernel to the write, which
 * copies them into the page cache from there (and the worker buffers stay
 * small); the GPU wants big transfers. */
#define JOB_BYTES_CPU ((uint64_t)256 << 10)
#define JOB_BYTES_GPU ((uint64_t)FP8_CHUNK_BYTES)
/* a weight of a packed layout on the CPU (plan_jobs): values a job, for
 * the table each job builds to be a few percent of its time; a transposed
 * weight's codes a job at most, and its output a band of columns */
#define PACKED_JOB_VALUES ((uint64_t)2 << 20)
#define T_CODES_MAX ((uint64_t)16 << 20)
#define T_OUT_BAND ((uint64_t)4 << 20)
#define TILE 32 /* rows of a transposed weight decoded before they are written as columns */

typedef struct {
    const fp8_tensor_info *t;
    size_t shard;
    dq_action action;
    /* DQ_DEQUANT: the scale and how it maps onto the weight */
    const fp8_tensor_info *scale;
    size_t scale_shard;
    const fp8_scheme_traits *scheme; /* the layout the scale's shape and dtype match */
    fp8_geometry groups;             /* of one matrix, in that layout */
    uint64_t experts, rows, cols, job_values;
    float global; /* the second-level scale */
    bool divides; /* y = q * s / global */
    /* a weight of a packed layout (fp4.h): the layout, the unpacked
     * weight's name (NULL: the weight's own) and shape, and whether it is
     * the transposed matrix */
    const fp4_layout *layout;
    char *out_name;
    int out_rank;
    uint64_t out_shape[3];
    bool transpose;
    fp8_tensor_info shown; /* the weight as diff shows it: unpacked, its element's dtype */
} dq_item;

struct dq_plan {
    const fp8_dequant_options *opts;
    fp8_checkpoint *ck;
    const char *input;
    uint32_t block_rows, block_cols;
    size_t n;
    dq_item *items;
    char **out_shards;
    uint64_t input_bytes, *done;
    fp8_device device;     /* resolved */
    bool layouts;          /* read fp4.h's layouts too (dequantize-for-export, diff) */
    const char *verb;      /* what a packed weight's values cannot be, when not found */
};
typedef struct dq_plan dq_plan;

static unsigned out_size(fp8_dtype d) { return d == FP8_DTYPE_F32 ? 4 : 2; }

/* The exported weight's elements and name. */
static uint64_t out_elements(const dq_item *it) { return it->experts * it->rows * it->cols; }
static const char *out_name(const dq_item *it) { return it->out_name ? it->out_name : it->t->name; }

/* Activation and KV-cache scales of static schemes: meaningless without FP8
 * (a bf16 export has no FP8 KV cache); KV-cache scales under every naming
 * of layout/kvscale.h.  activation_scale is Mistral's name for input_scale
 * (Ministral-3, Devstral-2: vllm models/mistral3.py and sglang
 * models/llama.py rename .activation_scale to .input_scale). */
static bool is_activation_scale(const char *name)
{
    long layer;
    if (kv_naming_of(name, &layer))
        return true;
    const char *last = strrchr(name, '.');
    last = last ? last + 1 : name;
    /* input_global_scale: compressed-tensors NVFP4's activation global scale */
    return strcmp(last, "input_scale") == 0 || strcmp(last, "activation_scale") == 0 ||
           strcmp(last, "k_scale") == 0 || strcmp(last, "v_scale") == 0 ||
           strcmp(last, "input_global_scale") == 0;
}

/* The block size the config declares (the format table's reading of
 * weight_block_size or block_structure); 128 x 128 otherwise. */
static fp8_status block_size(fp8_ctx *ctx, const char *dir, const cJSON *config, uint32_t *rows,
                             uint32_t *cols)
{
    fmt_declaration d;
    fmt_declaration_read(config, &d);
    *rows = d.block_rows;
    *cols = d.block_cols;
    if (d.bad_key)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s/config.json: quantization_config %s is not as loaders read it (a "
                        "block size is two integers from 1 to 65536)",
                        dir, d.bad_key);
    return FP8_OK;
}


/* Matches a scale's shape to one of the layouts of fp8conv-formats(5), DEQUANTIZATION for `it`. */
static fp8_status classify_scale(fp8_ctx *ctx, const dq_plan *p, dq_item *it)
{
    const fp8_tensor_info *t = it->t, *s = it->scale;
    const char *file = fp8_checkpoint_shard_name(p->ck, it->scale_shard);
    it->experts = t->rank == 3 ? t->shape[0] : 1;
    it->rows = t->shape[t->rank - 2];
    it->cols = t->shape[t->rank - 1];
    /* the per-matrix part of the scale's shape */
    const uint64_t *d = s->shape;
    int r = s->rank;
    if (t->rank == 3) {
        if (r < 1 || d[0] != it->experts)
            goto mismatch;
        d++;
        r--;
    }
    uint64_t per = 1;
    for (int k = 0; k < r; k++)
        per *= d[k];
    fp8_scheme kind;
    fp8_geometry mx;
    fp8_scheme_geometry(FP8_SCHEME_MXFP8, 1, 1, it->rows, it->cols, &mx);
    if (fp8_dtype_holds_pow2_scales(s->dtype)) {
        if (r == 2 && it->cols % mx.group_cols == 0 && d[0] == mx.row_groups &&
            d[1] == mx.col_groups) {
            kind = FP8_SCHEME_MXFP8;
            goto found;
        }
        /* DeepSeek-V4's trunk: E8M0 block scales [ceil(M/128), ceil(N/128)]
         * (fp8conv-formats(5), 2026 LAYOUTS; vLLM models/deepseek_v4) */
        fp8_geometry eb;
        fp8_scheme_geometry(FP8_SCHEME_BLOCK, p->block_rows, p->block_cols, it->rows, it->cols,
                            &eb);
        if (r == 2 && d[0] == eb.row_groups && d[1] == eb.col_groups) {
            kind = FP8_SCHEME_BLOCK;
            goto found;
        }
        goto mismatch;
    }
    if (s->dtype != FP8_DTYPE_F32 && s->dtype != FP8_DTYPE_BF16 && s->dtype != FP8_DTYPE_F16)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': scale dtype %s is not F32, BF16, F16 or U8 (E8M0)",
                        file, s->name, fp8_dtype_name(s->dtype));
    fp8_geometry block;
    fp8_scheme_geometry(FP8_SCHEME_BLOCK, p->block_rows, p->block_cols, it->rows, it->cols,
                        &block);
    if (per == 1 && r <= 1)
        kind = FP8_SCHEME_TENSOR;
    else if ((r == 1 || (r == 2 && d[1] == 1)) && d[0] == it->rows)
        kind = FP8_SCHEME_CHANNEL;
    else if (r == 2 && d[0] == block.row_groups && d[1] == block.col_groups)
        kind = FP8_SCHEME_BLOCK;
    else
        goto mismatch;
found:
    it->scheme = fp8_scheme_get(kind);
    it->job_values = JOB_BYTES_CPU;
    it->out_rank = t->rank;
    memcpy(it->out_shape, t->shape, t->rank * sizeof *t->shape);
    fp8_scheme_geometry(kind, p->block_rows, p->block_cols, it->rows, it->cols, &it->groups);
    return FP8_OK;
mismatch:;
    char shape[96];
    fp8_shape_text(s->rank, s->shape, shape, sizeof shape);
    return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                    "%s: tensor '%s': scale %s %s fits no per-tensor, per-channel, %ux%u block "
                    "or mxfp8 layout of weight '%s'",
                    file, s->name, fp8_dtype_name(s->dtype), shape, p->block_rows,
                    p->block_cols, t->name);
}

static const char *item_name(const void *arg, size_t i)
{
    return ((const dq_plan *)arg)->items[i].t->name;
}

/* The index of the item named `name` (items are sorted by name, as the
 * checkpoint lists them); p->n when none. */
static size_t item_index(const dq_plan *p, const char *name)
{
    return fp8_name_find(name, p->n, item_name, p);
}

/* Whether `it` is a weight of a packed layout of fp4.h (fp4_weight_find);
 * if so, marks it and its scales.  An I8 or U8 tensor without its layout's
 * scale, the name not saying it is packed, is copied (an int8 weight). */
static fp8_status decide_packed(fp8_ctx *ctx, dq_plan *p, dq_item *it)
{
    fp4_weight w;
    fp8_status st = fp4_weight_find(ctx, p->ck, it->t, it->shard, p->verb, &w);
    if (st || !w.l)
        return st;
    it->layout = w.l;
    it->scheme = w.l->scheme;
    it->divides = w.l->global_divides;
    it->transpose = w.l->transpose;
    it->job_values = PACKED_JOB_VALUES;
    it->out_name = w.out_name;
    it->experts = w.experts;
    it->rows = w.rows;
    it->cols = w.cols;
    it->global = w.global;
    it->scale = w.scale;
    it->scale_shard = w.scale_shard;
    it->groups = (fp8_geometry){ 1, w.run, it->rows, it->cols / w.run };
    fp4_layout_out_shape(w.l, it->experts, it->rows, it->cols, &it->out_rank, it->out_shape);
    it->shown = (fp8_tensor_info){ .name = w.out_name, .rank = it->out_rank,
                                   .dtype = fp8_elem_get(w.l->scheme->elem)->dtype,
                                   .shape = it->out_shape, .elements = out_elements(it) };
    it->action = DQ_DEQUANT;
    p->items[item_index(p, w.scale->name)].action = DQ_DROP;
    if (w.second)
        p->items[item_index(p, w.second->name)].action = DQ_DROP;
    if (w.shape)
        p->items[item_index(p, w.shape->name)].action = DQ_DROP;
    return FP8_OK;
}

/* Finds each FP8 weight's scale and decides every tensor's fate. */
static fp8_status decide(fp8_ctx *ctx, dq_plan *p)
{
    fp8_checkpoint *ck = p->ck;
    p->n = fp8_checkpoint_tensor_count(ck);
    p->items = fp8_xcalloc(p->n ? p->n : 1, sizeof *p->items);
    if (!p->items)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < p->n; i++) {
        dq_item *it = &p->items[i];
        it->t = fp8_checkpoint_tensor(ck, i, &it->shard);
        it->shown = *it->t;
        it->action = is_activation_scale(it->t->name) ? DQ_DROP : DQ_COPY;
        p->input_bytes += fp8_tensor_nbytes(it->t);
    }
    for (size_t i = 0; i < p->n; i++) {
        dq_item *it = &p->items[i];
        const char *file = fp8_checkpoint_shard_name(ck, it->shard);
        fp8_dtype dt = it->t->dtype;
        if (p->layouts) {
            fp8_status st = decide_packed(ctx, p, it);
            if (st)
                return st;
            if (it->layout)
                continue;
        }
        if (dt == FP8_DTYPE_F8_E5M2 || dt == FP8_DTYPE_F8_E4M3FNUZ || dt == FP8_DTYPE_F8_E5M2FNUZ)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': %s weights are not supported (E4M3 only)", file,
                            it->t->name, fp8_dtype_name(dt));
        if (!fp8_dtype_holds_codes(dt) || it->action == DQ_DROP) /* DROP: NVFP4's E4M3 scales */
            continue;
        if (!p->layouts && fp4_is_group_scale(ck, it->t->name)) /* diff reads FP4 itself */
            continue;
        if (it->t->rank != 2 && it->t->rank != 3)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': an F8_E4M3 tensor of rank %d (2 or 3 expected)",
                            file, it->t->name, it->t->rank);
        size_t si = 0, found = 0;
        /* DeepSeek-V4 names a weight's scale by its module, X.weight's
         * X.scale (fp8conv-formats(5), 2026 LAYOUTS; vLLM models/deepseek_v4) */
        static const char *const suffixes[] = { "_scale_inv", "_scale", ".scale" };
        size_t len = strlen(it->t->name);
        bool module = len > 7 && strcmp(it->t->name + len - 7, ".weight") == 0;
        for (int k = 0; k < 3; k++) {
            if (k == 2 && !module)
                continue;
            size_t shard;
            const fp8_tensor_info *s =
                ck_find_with(ck, it->t->name, k == 2 ? len - 7 : len, suffixes[k], &shard);
            if (!s)
                continue;
            found++;
            it->scale = s;
            it->scale_shard = shard;
            si = item_index(p, s->name);
        }
        if (found != 1)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            found ? "%s: tensor '%s' has more than one scale ('%s_scale_inv', "
                                    "'%s_scale', '%.*s.scale'); which one is meant?"
                                  : "%s: tensor '%s' is F8_E4M3 but has no scale ('%s_scale_inv', "
                                    "'%s_scale' or '%.*s.scale'); its values cannot be recovered",
                            file, it->t->name, it->t->name, it->t->name,
                            (int)(module ? len - 7 : len), it->t->name);
        fp8_status st = classify_scale(ctx, p, it);
        if (st)
            return st;
        it->action = DQ_DEQUANT;
        p->items[si].action = DQ_DROP;
    }
    return FP8_OK;
}

/* Packed-FP4 scales that config.json's producer version says hold another
 * bias than the one every loader reads (fp4.h, fp4_layout_bias_refused:
 * compressed-tensors MXFP4 up to 0.13.0) are bad input: decoded with 127
 * they would be 4 times too small, so nothing is written. */
static fp8_status check_bias(fp8_ctx *ctx, const dq_plan *p, const cJSON *config)
{
    char why[1024];
    for (size_t i = 0; i < p->n; i++) {
        const dq_item *it = &p->items[i];
        if (it->layout && fp4_layout_bias_refused(it->layout, config, why, sizeof why))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: tensor '%s' (%s): %s", p->input,
                            it->t->name, it->layout->name, why);
    }
    return FP8_OK;
}

/* A copy of a bf16 checkpoint is not an export: a pipeline pointed at the
 * wrong directory must not pass. */
static fp8_status check_has_fp8(fp8_ctx *ctx, const dq_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->items[i].action == DQ_DEQUANT)
            return FP8_OK;
    return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                    "%s: no F8_E4M3 weight: not an FP8 checkpoint, nothing to dequantize "
                    "(fp8conv quantize makes one from it)",
                    p->input);
}

/* ---------------------------------------------------------------- jobs */

typedef struct {
    size_t item;
    uint64_t expert, row0, nrows; /* DQ_DEQUANT: whole rows of one expert */
    uint64_t offset, len;         /* DQ_COPY: a byte range */
} dq_job;

typedef struct {
    dq_plan *plan;
    size_t shard;
    fp8_writer *out;
    dq_job *jobs;
    size_t njobs, cap;
    size_t max_in, max_scales, max_out;
} dq_run;

/* Weight `it`'s codec into dt (quant_ref.h, fp8_dequant_spec); keep_inf
 * for the values diff and verify compare. */
static fp8_dequant_spec spec_of(const dq_item *it, fp8_dtype dt, bool keep_inf)
{
    return (fp8_dequant_spec){ .scheme = it->scheme, .out = dt, .group = it->groups.group_cols,
                               .global = it->global, .divides = it->divides,
                               .keep_inf = keep_inf };
}

/* Bytes of the codes of `n` elements of a weight (its element row's bits). */
static uint64_t code_bytes(const dq_item *it, uint64_t n)
{
    return n * fp8_elem_get(it->scheme->elem)->bits / 8;
}

/* The columns a job of nrows rows decodes at a time: all of them, but for
 * a transposed layout whole groups whose output, nrows values a column, is
 * about T_OUT_BAND bytes (all of them when fewer). */
static uint64_t col_band(const dq_item *it, uint64_t nrows, fp8_dtype out)
{
    uint64_t g = it->groups.group_cols, cw = T_OUT_BAND / (nrows * out_size(out)) / g * g;
    cw = cw ? cw : g;
    return it->transpose && cw < it->cols ? cw : it->cols;
}

static fp8_status add_job(fp8_ctx *ctx, dq_run *r, dq_job j)
{
    if (!fp8_grow(&r->jobs, r->njobs, &r->cap, sizeof *r->jobs))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    const dq_item *it = &r->plan->items[j.item];
    if (it->action == DQ_COPY) {
        r->max_in = j.len > r->max_in ? j.len : r->max_in;
    } else {
        uint64_t codes = code_bytes(it, j.nrows * it->cols), first, count;
        fp8_dtype od = r->plan->opts->dtype;
        uint64_t outb = j.nrows * col_band(it, j.nrows, od) * out_size(od);
        r->max_in = codes > r->max_in ? codes : r->max_in;
        r->max_out = outb > r->max_out ? outb : r->max_out;
        /* what the GPU reads first (a table), the scales as fp8_dequant
         * takes them, then as stored */
        fp8_geometry_span(&it->groups, j.expert, j.row0, j.nrows, &first, &count);
        uint64_t need = FP8_GPU_DEQUANT_PREP_MAX +
                        count * (fp8_dequant_scale_size(it->scheme) +
                                 fp8_dtype_bits(it->scale->dtype) / 8);
        r->max_scales = need > r->max_scales ? need : r->max_scales;
    }
    r->jobs[r->njobs++] = j;
    return FP8_OK;
}

static fp8_status plan_jobs(fp8_ctx *ctx, dq_run *r, size_t i)
{
    const dq_item *it = &r->plan->items[i];
    bool gpu = r->plan->device == FP8_DEVICE_CUDA;
    fp8_status st = FP8_OK;
    if (it->action == DQ_COPY) {
        uint64_t job = gpu ? JOB_BYTES_GPU : JOB_BYTES_CPU;
        for (uint64_t off = 0; off < fp8_tensor_nbytes(it->t) && !st; off += job) {
            uint64_t len = fp8_tensor_nbytes(it->t) - off;
            st = add_job(ctx, r, (dq_job){ .item = i, .offset = off,
                                           .len = len < job ? len : job });
        }
        return st;
    }
    /* values a job: it->job_values on the CPU; a transposed weight
     * (gpt-oss) a whole expert when its codes fit T_CODES_MAX, so that its
     * output (columns of the expert's rows) is written a band of whole
     * output rows at a time (col_band), else rows whose output stretches
     * are still long writes */
    uint64_t job = gpu ? JOB_BYTES_GPU : it->job_values;
    if (it->transpose)
        job = code_bytes(it, it->rows * it->cols) <= T_CODES_MAX
                  ? it->rows * it->cols
                  : T_CODES_MAX * it->rows * it->cols / code_bytes(it, it->rows * it->cols);
    uint64_t band = it->cols && job / it->cols ? job / it->cols : 1;
    for (uint64_t x = 0; x < it->experts; x++)
        for (uint64_t r0 = 0; r0 < it->rows && !st; r0 += band)
            st = add_job(ctx, r, (dq_job){ .item = i, .expert = x, .row0 = r0,
                                           .nrows = it->rows - r0 < band ? it->rows - r0 : band });
    return st;
}

bool dq_scale_value(fp8_dtype dt, const unsigned char *p, uint64_t i, float *s)
{
    switch (dt) {
    case FP8_DTYPE_F32: memcpy(s, p + 4 * i, 4); break;
    case FP8_DTYPE_BF16: *s = fp8_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
    case FP8_DTYPE_F16: *s = fp8_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8)); break;
    default: /* E8M0: 2^(b - 127); 0xFF is its NaN */
        if (p[i] == 0xFF)
            return false;
        *s = fp8_pow2(p[i] - 127);
        return true;
    }
    return *s > 0 && *s <= 3.4028234663852886e38f;
}

/* Reads rows [row0, row0 + nrows) of expert x of weight `it`, columns [c0,
 * c0 + cw) (all, or whole groups: a transposed layout's band, each row's
 * part read alone): the codes into `codes` and the scales they use (*count
 * of them) into sc as fp8_dequant takes them (scale_size bytes each), each
 * where whole rows put it: the stored bytes, or fp32 values from the stored
 * ones read into `raw`, each checked to be finite and positive. */
static fp8_status dq_load(fp8_ctx *ctx, const dq_plan *p, const dq_item *it, unsigned scale_size,
                          uint64_t x, uint64_t row0, uint64_t nrows, uint64_t c0, uint64_t cw,
                          uint8_t *codes, unsigned char *raw, unsigned char *sc, uint64_t *count)
{
    fp8_file *in = fp8_checkpoint_shard(p->ck, it->shard);
    fp8_file *sin = fp8_checkpoint_shard(p->ck, it->scale_shard);
    unsigned ssz = fp8_dtype_bits(it->scale->dtype) / 8;
    bool decode = scale_size == sizeof(float), whole = cw == it->cols;
    uint64_t first, g = it->groups.group_cols, gr = it->groups.group_rows;
    fp8_geometry_span(&it->groups, x, row0, nrows, &first, count);
    fp8_status st = FP8_OK;
    for (uint64_t r = 0; r < (whole ? 1 : nrows) && !st; r++) {
        uint64_t at = r * it->cols + c0, ns = whole ? *count : fp8_ceil_div(cw, g);
        uint64_t s = ((row0 + r) / gr - row0 / gr) * fp8_ceil_div(it->cols, g) + c0 / g;
        if (!(st = fp8_file_read(ctx, in, it->t,
                                 code_bytes(it, (x * it->rows + row0) * it->cols + at),
                                 codes + code_bytes(it, at),
                                 code_bytes(it, whole ? nrows * it->cols : cw))))
            st = fp8_file_read(ctx, sin, it->scale, (first + s) * ssz,
                               (decode ? raw : sc) + s * ssz, ns * ssz);
        for (uint64_t k = s; decode && !st && k < s + ns; k++)
            if (!dq_scale_value(it->scale->dtype, raw, k, (float *)(void *)sc + k))
                st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                              "%s: tensor '%s': element %llu is not a finite positive scale",
                              fp8_checkpoint_shard_name(p->ck, it->scale_shard), it->scale->name,
                              (unsigned long long)(first + k));
    }
    return st;
}

/* The scales of row `row` of a span that starts at row0, from column c0 on. */
static const unsigned char *row_scales(const dq_item *it, const fp8_dequant_spec *d,
                                       const unsigned char *sc, uint64_t row0, uint64_t row,
                                       uint64_t c0)
{
    uint64_t gr = it->groups.group_rows, per_row = fp8_ceil_div(it->cols, d->group);
    return sc + (((row0 + row) / gr - row0 / gr) * per_row + c0 / d->group) * d->scale_size;
}

/* An element type's name as messages write it (E4M3). */
static const char *upper(fp8_elem e, char b[8])
{
    snprintf(b, 8, "%s", fp8_elem_get(e)->name);
    for (char *c = b; *c; c++)
        *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
    return b;
}

/* The message of fp8_dequant's result `res` (not FP8_DEQ_OK) on element
 * `flat` of weight `it` (its code at q, its scale at s); `what` ends it:
 * what the values were for. */
static fp8_status dq_bad(fp8_ctx *ctx, const dq_plan *p, const dq_item *it,
                         const fp8_dequant_spec *d, fp8_deq_result res, uint64_t flat,
                         const uint8_t *q, const unsigned char *s)
{
    char e[8];
    const char *file = fp8_checkpoint_shard_name(p->ck, it->shard);
    if (res == FP8_DEQ_NAN_SCALE && it->layout && d->keep_inf) /* diff's words for a packed one */
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': element %llu is a %s scale 0x%02x (of element %llu of "
                        "'%s'); no value to compare",
                        fp8_checkpoint_shard_name(p->ck, it->scale_shard), it->scale->name,
                        (unsigned long long)(flat / d->group),
                        fp8_elem_get(it->scheme->scale_elem[0])->is_nan(*s) ? "NaN" : "negative",
                        (unsigned)*s,
                        (unsigned long long)flat, it->t->name);
    if (res == FP8_DEQ_NAN_CODE)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': element %llu is the %s NaN code 0x%02x; no value "
                        "can be exported",
                        file, it->t->name, (unsigned long long)flat, upper(it->scheme->elem, e),
                        (unsigned)*q);
    if (res == FP8_DEQ_NAN_SCALE)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': element %llu is %s %s %s 0x%02x (the scale of "
                        "element %llu of '%s'); no value can be exported",
                        fp8_checkpoint_shard_name(p->ck, it->scale_shard), it->scale->name,
                        (unsigned long long)(flat / d->group),
                        fp8_elem_get(it->scheme->scale_elem[0])->is_nan(*s) ? "the" : "a negative",
                        upper(it->scheme->scale_elem[0], e),
                        fp8_elem_get(it->scheme->scale_elem[0])->is_nan(*s) ? "NaN" : "scale", (unsigned)*s,
                        (unsigned long long)flat, it->t->name);
    /* the element's code (two a byte where packed) and its scale as stored
     * (a byte) or as fp8_dequant took it (an fp32) */
    const fp8_elem_traits *el = fp8_elem_get(it->scheme->elem);
    unsigned code = el->per_byte > 1 ? (flat % 2 ? *q >> 4 : *q & 15) : *q;
    char scale[32];
    float sf;
    memcpy(&sf, s, d->scale_size == 1 ? 0 : 4);
    if (d->scale_size == 1)
        snprintf(scale, sizeof scale, "byte 0x%02x", (unsigned)*s);
    else
        snprintf(scale, sizeof scale, "%g", (double)sf);
    if (d->out == FP8_DTYPE_F16)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': a value overflows f16; export as bf16 or f32", file,
                        it->t->name);
    return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                    "%s: tensor '%s': element %llu: its code 0x%02x (%g) times its scale %s "
                    "overflows %s (a value %s; a scale beyond any real checkpoint's)",
                    file, it->t->name, (unsigned long long)flat, code,
                    (double)el->decode((uint8_t)code), scale,
                    d->out == FP8_DTYPE_BF16 ? "bf16" : "fp32", el->deq_product);
}

/* Rows [row0, row0 + nrows) of expert x of weight `it`, columns [c0, c0 +
 * cw) (whole groups) of each (`codes` holds the rows' codes, `raw` the
 * stored scales they use), y = q * s rounded once into dt (F32: not) by
 * the export's own codec (fp8_dequant, fast paths and all), widened to fp32
 * in y (cw a row); an overflow of dt stays an infinity (diff and verify
 * compare values, they do not export them); other bad input is named by its
 * flat index.  sout (not NULL) gets each element's fp32 scale, for verify. */
static fp8_status dq_rows(fp8_ctx *ctx, const dq_plan *p, const dq_item *it, uint64_t x,
                          uint64_t row0, uint64_t nrows, uint64_t c0, uint64_t cw, uint8_t *codes,
                          unsigned char *raw, fp8_dtype dt, float *y, float *sout, bool keep_inf)
{
    uint64_t first, count;
    fp8_dequant_spec d = spec_of(it, dt, keep_inf);
    fp8_geometry_span(&it->groups, x, row0, nrows, &first, &count);
    unsigned char *sc = malloc(count * fp8_dequant_scale_size(it->scheme));
    uint16_t *h = dt == FP8_DTYPE_F32 ? NULL : malloc(cw * sizeof *h);
    fp8_status st = sc && (h || dt == FP8_DTYPE_F32) && fp8_dequant_init(&d)
                        ? dq_load(ctx, p, it, d.scale_size, x, row0, nrows, c0, cw, codes, raw,
                                  sc, &count)
                        : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t row = 0; row < nrows && !st; row++) {
        const uint8_t *q = codes + code_bytes(it, row * it->cols + c0);
        const unsigned char *sr = row_scales(it, &d, sc, row0, row, c0);
        float *yr = y + row * cw;
        uint64_t where = 0;
        fp8_deq_result res = fp8_dequant(&d, q, sr, cw, h ? (void *)h : yr, &where);
        if (res)
            st = dq_bad(ctx, p, it, &d, res, (x * it->rows + row0 + row) * it->cols + c0 + where,
                        q + code_bytes(it, where), sr + where / d.group * d.scale_size);
        else if (h)
            diff_to_f32(dt, h, cw, yr);
        for (uint64_t c = 0; sout && c < cw; c++) /* each element's scale, for verify */
            sout[row * cw + c] = ((const float *)(const void *)sr)[c / d.group];
    }
    fp8_dequant_free(&d);
    free(h);
    free(sc);
    return st;
}

/* Rows [r0, r0 + nr) of a band of cw columns, decoded row after row in
 * `tile` (nr rows of cw values of sz bytes), to their places in `y`, the
 * band's output laid out [cw, ld]: value (r, c) to y[c * ld + r]. */
static void tile_out(const unsigned char *tile, uint64_t r0, uint64_t nr, uint64_t cw, uint64_t ld,
                     unsigned sz, unsigned char *y)
{
    for (uint64_t c = 0; c < cw; c++) /* rare: a band with a scale that is not clean */
        for (uint64_t r = 0; r < nr; r++)
            memcpy(y + (c * ld + r0 + r) * sz, tile + (r * cw + c) * sz, sz);
}

/*
 * A job: rows [row0, row0 + nrows) of expert x, straight to the output
 * dtype, a band of columns at a time (all of them but for a transposed
 * layout), on the GPU when there is one, else by the element's fast path
 * (fp8_dequant), and where either finds bad input by the reference, which
 * names it (the first row that has some).  The worker's buffers: buf[0]
 * the codes, buf[1] what the GPU reads first (a table), the scales as
 * fp8_dequant takes them, then as stored, buf[2] the values in the output
 * dtype.  Transposed layouts (gpt-oss) land as columns of the [cols, rows]
 * output matrix: a band's values are laid out [band, nrows] in buf[2] and
 * written as one stretch when the job holds all the expert's rows, else a
 * stretch of nrows per output row.
 */
static fp8_status do_dequant(dq_run *r, fp8_worker *w, const dq_job *j)
{
    const dq_plan *p = r->plan;
    const dq_item *it = &p->items[j->item];
    fp8_dtype out = p->opts->dtype;
    unsigned osz = out_size(out);
    uint64_t first, count;
    fp8_dequant_spec d = spec_of(it, out, false);
    if (!fp8_dequant_init(&d))
        return fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    unsigned char *sc = w->buf[1] + fp8_gpu_dequant_prepare(&d, w->gpu ? w->buf[1] : NULL);
    uint8_t *codes = w->buf[0];
    fp8_geometry_span(&it->groups, j->expert, j->row0, j->nrows, &first, &count);
    fp8_status st = dq_load(w->ctx, p, it, d.scale_size, j->expert, j->row0, j->nrows, 0,
                            it->cols, codes, sc + count * d.scale_size, sc, &count);
    fp8_worker_end_turn(w);
    const fp8_tensor_info *ot = fp8_writer_find(r->out, out_name(it));
    bool tr = it->transpose;
    uint64_t cw = col_band(it, j->nrows, out);
    unsigned char *tile = tr ? malloc(TILE * cw * osz) : NULL;
    if (!st && tr && !tile)
        st = fp8_fail(w->ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t c0 = 0; c0 < it->cols && !st; c0 += cw) {
        uint64_t w_ = it->cols - c0 < cw ? it->cols - c0 : cw;
        /* the GPU's band (the rows uploaded with the first), unless it
         * finds bad input: then the CPU's */
        bool done = false;
        if (w->gpu) {
            fp8_gpu_dequant g = { out, j->nrows, it->cols, j->row0, it->groups.group_rows,
                                  it->groups.group_cols, count, c0, w_, tr, c0 == 0,
                                  it->scheme->elem };
            bool bad = true;
            if ((st = fp8_gpu_dequantize(w->ctx, w->gpu, &g, &bad))) {
                st = fp8_fail(w->ctx, st, "%s: tensor '%s': %s",
                              fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name,
                              fp8_ctx_message(w->ctx));
                break;
            }
            done = !bad;
        }
        /* transposed, every scale clean: straight to the output's layout */
        done = done || (tr && fp8_dequant_cols(&d, codes + code_bytes(it, c0),
                                               code_bytes(it, it->cols), sc + c0 / d.group,
                                               fp8_ceil_div(it->cols, d.group), j->nrows, w_,
                                               w->buf[2], j->nrows));
        for (uint64_t row = 0; row < j->nrows && !done && !st; row++) {
            uint64_t where = 0, at = row * it->cols + c0;
            /* transposed: TILE rows decoded into `tile`, then written out
             * as a stretch of TILE values per column */
            void *y = tr ? tile + (row % TILE) * w_ * osz : w->buf[2] + row * it->cols * osz;
            const unsigned char *sr = row_scales(it, &d, sc, j->row0, row, c0);
            fp8_deq_result res = fp8_dequant(&d, codes + code_bytes(it, at), sr, w_, y, &where);
            if (res)
                st = dq_bad(w->ctx, p, it, &d, res,
                            (j->expert * it->rows + j->row0) * it->cols + at + where,
                            codes + code_bytes(it, at + where),
                            sr + where / d.group * d.scale_size);
            else if (tr && (row % TILE == TILE - 1 || row == j->nrows - 1))
                tile_out(tile, row - row % TILE, row % TILE + 1, w_, j->nrows, osz, w->buf[2]);
        }
        if (st)
            break;
        if (!tr)
            st = fp8_writer_pwrite(w->ctx, r->out, ot,
                                   (j->expert * it->rows + j->row0) * it->cols * osz, w->buf[2],
                                   j->nrows * it->cols * osz);
        else if (j->nrows == it->rows) /* whole output rows: one stretch */
            st = fp8_writer_pwrite(w->ctx, r->out, ot,
                                   (j->expert * it->cols + c0) * it->rows * osz, w->buf[2],
                                   w_ * j->nrows * osz);
        else
            for (uint64_t c = 0; c < w_ && !st; c++)
                st = fp8_writer_pwrite(w->ctx, r->out, ot,
                                       ((j->expert * it->cols + c0 + c) * it->rows + j->row0) * osz,
                                       w->buf[2] + c * j->nrows * osz, j->nrows * osz);
    }
    free(tile);
    fp8_dequant_free(&d);
    return st;
}

static fp8_status run_one(void *arg, fp8_worker *w, size_t j)
{
    dq_run *r = arg;
    const dq_job *job = &r->jobs[j];
    const dq_item *it = &r->plan->items[job->item];
    if (it->action == DQ_DEQUANT)
        return do_dequant(r, w, job);
    fp8_status st = fp8_file_read(w->ctx, fp8_checkpoint_shard(r->plan->ck, it->shard), it->t,
                                  job->offset, w->buf[0], job->len);
    fp8_worker_end_turn(w);
    return st ? st
              : fp8_writer_pwrite(w->ctx, r->out, fp8_writer_find(r->out, it->t->name),
                                  job->offset, w->buf[0], job->len);
}

/* A compressed shard is read in file order (codes, and their scales when
 * they follow in the same shard, come from the stream's window). */
static void describe(void *arg, size_t j, fp8_job_info *info)
{
    dq_run *r = arg;
    const dq_job *job = &r->jobs[j];
    const dq_item *it = &r->plan->items[job->item];
    uint64_t at = it->action == DQ_COPY
                      ? job->offset
                      : code_bytes(it, (job->expert * it->rows + job->row0) * it->cols);
    info->bytes = it->action == DQ_COPY ? job->len : code_bytes(it, job->nrows * it->cols);
    info->label = it->t->name;
    info->lane = ck_lane(r->plan->ck, it->shard, it->t, at, 0, &info->offset) == FP8_NO_LANE
                     ? FP8_NO_LANE : 0;
}

static fp8_status write_shard(fp8_ctx *ctx, dq_plan *p, size_t s, const char *path)
{
    const fp8_dequant_options *o = p->opts;
    dq_run r = { .plan = p, .shard = s };
    fp8_status st = fp8_writer_create(ctx, path, &r.out);
    for (size_t i = 0; i < p->n && !st; i++) {
        const dq_item *it = &p->items[i];
        if (it->shard != s || it->action == DQ_DROP)
            continue;
        st = it->action == DQ_DEQUANT
                 ? fp8_writer_add_tensor(ctx, r.out, out_name(it), o->dtype, it->out_rank,
                                         it->out_shape)
                 : fp8_writer_add_tensor(ctx, r.out, it->t->name, it->t->dtype, it->t->rank,
                                         it->t->shape);
    }
    if (!st) {
        fp8_writer_set_durable(r.out, !o->no_sync);
        st = fp8_writer_begin(ctx, r.out);
    }
    for (size_t i = 0; i < p->n && !st; i++)
        if (p->items[i].shard == s && p->items[i].action != DQ_DROP)
            st = plan_jobs(ctx, &r, i);
    if (!st) {
        fp8_jobs spec = { .njobs = r.njobs, .bufsize = { r.max_in, r.max_scales, r.max_out },
                          .threads = o->threads, .device = p->device, .run = run_one,
                          .describe = describe, .arg = &r, .what = p->input,
                          .cancel = o->cancel, .progress = o->progress,
                          .progress_user = o->progress_user, .done = p->done,
                          .total = &p->input_bytes, .nlanes = 1 };
        st = fp8_jobs_run(ctx, &spec);
    }
    if (!st)
        st = fp8_writer_commit(ctx, r.out);
    fp8_writer_free(r.out);
    free(r.jobs);
    return st;
}

/* ---------------------------------------------------------------- side files */

static const char *torch_dtype_name(fp8_dtype d)
{
    return d == FP8_DTYPE_F32 ? "float32" : d == FP8_DTYPE_F16 ? "float16" : "bfloat16";
}

/* config.json without quantization_config, with torch_dtype (and dtype, the
 * newer spelling, when present) saying what the weights now are. */
static fp8_status write_config(fp8_ctx *ctx, const dq_plan *p, cJSON *config, const char *dir)
{
    cJSON_DeleteItemFromObjectCaseSensitive(config, "quantization_config");
    /* DeepSeek-V4's "fp4" experts are bf16 now; vLLM reads a missing
     * expert_dtype as "fp4" only under an FP8 quantization_config, which is
     * gone too (models/deepseek_v4) */
    cJSON_DeleteItemFromObjectCaseSensitive(config, "expert_dtype");
    const char *name = torch_dtype_name(p->opts->dtype);
    if (cJSON_GetObjectItemCaseSensitive(config, "torch_dtype"))
        cJSON_ReplaceItemInObjectCaseSensitive(config, "torch_dtype", cJSON_CreateString(name));
    else
        cJSON_AddStringToObject(config, "torch_dtype", name);
    if (cJSON_GetObjectItemCaseSensitive(config, "dtype"))
        cJSON_ReplaceItemInObjectCaseSensitive(config, "dtype", cJSON_CreateString(name));
    return ck_json_write(ctx, dir, "config.json", config);
}

static fp8_status write_index(fp8_ctx *ctx, const dq_plan *p, const char *dir)
{
    ck_index_entry *map = fp8_xcalloc(p->n + 1, sizeof *map);
    if (!map)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    size_t n = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++) {
        const dq_item *it = &p->items[i];
        if (it->action == DQ_DROP)
            continue;
        map[n++] = (ck_index_entry){ out_name(it),
                                     p->out_shards[it->shard] };
        total += it->action == DQ_DEQUANT ? out_elements(it) * out_size(p->opts->dtype)
                                          : fp8_tensor_nbytes(it->t);
    }
    fp8_status st = ck_index_write(ctx, dir, map, n, total);
    free(map);
    return st;
}

/* What the output's bytes depend on, for --part, --finish and --resume to
 * compare (parts.c). */
static fp8_status options_text(fp8_ctx *ctx, const dq_plan *p, fp8_text *t)
{
    fp8_text_str(t, "--fp8conv dequantize-for-export " FP8CONV_VERSION "\n--dtype ");
    fp8_text_str(t, torch_dtype_name(p->opts->dtype));
    fp8_text_str(t, "\n");
    return fp8_options_common(ctx, p->ck, p->opts->run.parts, t);
}

fp8_status fp8_dequantize(fp8_ctx *ctx, const char *input, const char *output,
                          const fp8_dequant_options *opts, fp8_dequant_report *report)
{
    fp8_status st;
    uint64_t done = 0;
    cJSON *config = NULL;
    dq_plan p = { .opts = opts, .input = input, .done = &done, .layouts = true,
                  .verb = "recovered" };
    fp8_output out = { 0 };
    fp8_text options = { 0 };
    if (opts->dtype != FP8_DTYPE_BF16 && opts->dtype != FP8_DTYPE_F16 &&
        opts->dtype != FP8_DTYPE_F32)
        return fp8_fail(ctx, FP8_ERR_USAGE, "the output dtype must be BF16, F16 or F32");
    if ((st = fp8_checkpoint_open(ctx, input, &p.ck)))
        return st;
    bool is_dir = fp8_checkpoint_is_directory(p.ck);
    if ((is_dir && (st = fmt_config_read(ctx, input, &config, NULL))) ||
        (st = ck_output_names(ctx, p.ck, &p.out_shards)))
        goto out;
    if ((st = block_size(ctx, input, config, &p.block_rows, &p.block_cols)) ||
        (st = decide(ctx, &p)) || (st = check_bias(ctx, &p, config)) ||
        (st = check_has_fp8(ctx, &p)) ||
        (st = fp8_device_resolve(ctx, opts->device, &p.device)) ||
        (st = options_text(ctx, &p, &options)))
        goto out;
    zio_cache_policy(opts->run.cache, p.input_bytes);
    fp8_output_work work = { .ck = p.ck, .names = p.out_shards, .options = options.p,
                             .run = opts->run };
    if ((st = fp8_output_open(ctx, &out, input, output, is_dir, opts->force, !opts->no_sync,
                              &work)))
        goto out;
    for (size_t s = 0; !st && !out.complete && s < fp8_checkpoint_shard_count(p.ck); s++) {
        char *path = out.todo[s] ? fp8_output_file(&out, p.out_shards[s]) : NULL;
        if (out.todo[s])
            st = path ? write_shard(ctx, &p, s, path)
                      : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        if (!st && out.todo[s])
            st = fp8_output_shard_done(ctx, &out, s);
        if (!st && out.todo[s])
            st_file_drop_cache(fp8_checkpoint_shard(p.ck, s));
        free(path);
    }
    if (!st && is_dir && !out.complete && fp8_output_publishes(&out)) {
        const char *skip[] = { "config.json", HF_QUANT_CONFIG, NULL };
        if (fp8_checkpoint_has_index(p.ck) || fp8_checkpoint_shard_count(p.ck) > 1)
            st = write_index(ctx, &p, out.tmp);
        if (!st && config)
            st = write_config(ctx, &p, config, out.tmp);
        if (!st)
            st = ck_copy_other_files(ctx, p.ck, out.tmp, skip, opts->cancel);
    }
    if (!st && opts->cancel && *opts->cancel)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", input);
    if (!st && !out.complete)
        st = fp8_output_commit(ctx, &out);
    if (!st && out.recheck && out.complete)
        fp8_notify(ctx, "%s: complete already, and the same as this command writes: left as it "
                   "was", output);
    if (!st && report) {
        *report = (fp8_dequant_report){ .input_bytes = p.input_bytes, .device = p.device };
        for (size_t i = 0; i < p.n; i++) {
            const dq_item *it = &p.items[i];
            report->dequantized += it->action == DQ_DEQUANT;
            report->dropped += it->action == DQ_DROP;
            long layer;
            report->kv_dropped += it->action == DQ_DROP && kv_naming_of(it->t->name, &layer);
            report->copied += it->action == DQ_COPY;
            report->output_bytes += it->action == DQ_DROP      ? 0
                                    : it->action == DQ_DEQUANT ? out_elements(it) * out_size(opts->dtype)
                                                               : fp8_tensor_nbytes(it->t);
        }
    }
out:
    if (st && opts->cancel && *opts->cancel)
        fp8_output_interrupted(ctx, &out);
    fp8_output_end(&out);
    free(options.p);
    ck_output_names_free(p.out_shards, p.ck ? fp8_checkpoint_shard_count(p.ck) : 0);
    for (size_t i = 0; p.items && i < p.n; i++)
        free(p.items[i].out_name);
    free(p.items);
    cJSON_Delete(config);
    fp8_checkpoint_close(p.ck);
    return st;
}

/* ---------------------------------------------------------------- for diff */

/* The reader of verify --against and convert (FP8 weights), and of diff
 * (packed weights too: `layouts`). */
static fp8_status weights_open(fp8_ctx *ctx, fp8_checkpoint *ck, const char *dir, bool layouts,
                               dq_weights **out)
{
    cJSON *config = NULL;
    dq_plan *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    p->ck = ck;
    p->input = fp8_checkpoint_shard_name(ck, 0);
    p->layouts = layouts;
    p->verb = "compared";
    fp8_status st = dir ? fmt_config_read(ctx, dir, &config, NULL) : FP8_OK;
    if (!st)
        st = block_size(ctx, dir, config, &p->block_rows, &p->block_cols);
    /* no check_bias: that is the export's; diff compares the values as a loader reads them */
    if (!st)
        st = decide(ctx, p);
    cJSON_Delete(config);
    if (st)
        dq_weights_free(p);
    else
        *out = p;
    return st;
}

fp8_status dq_weights_open(fp8_ctx *ctx, fp8_checkpoint *ck, const char *dir, dq_weights **out)
{
    return weights_open(ctx, ck, dir, false, out);
}

fp8_status dq_weights_open_packed(fp8_ctx *ctx, fp8_checkpoint *ck, const char *dir,
                                  dq_weights **out)
{
    return weights_open(ctx, ck, dir, true, out);
}

void dq_weights_free(dq_weights *w)
{
    for (size_t i = 0; w && i < w->n; i++)
        free(w->items[i].out_name);
    if (w) {
        free(w->items);
        free(w);
    }
}

dq_action dq_weights_role(const dq_weights *w, const char *name)
{
    size_t i = item_index(w, name);
    return i < w->n ? w->items[i].action : DQ_COPY;
}

const fp8_tensor_info *dq_weights_shown(const dq_weights *w, const char *name)
{
    return &w->items[item_index(w, name)].shown;
}

const fp8_tensor_info *dq_weights_span(const dq_weights *w, const char *name, uint64_t first,
                                       uint64_t n, uint64_t *at, uint64_t *bytes)
{
    const dq_item *it = &w->items[item_index(w, name)];
    uint64_t per_x = it->rows * it->cols;
    *at = code_bytes(it, it->transpose ? first / per_x * per_x : first);
    *bytes = code_bytes(it, n);
    return it->t;
}

const fp8_tensor_info *dq_weights_scale(const dq_weights *w, const char *name, size_t *shard,
                                        uint64_t *group_rows, uint64_t *group_cols)
{
    const dq_item *it = &w->items[item_index(w, name)];
    *group_rows = it->groups.group_rows;
    *group_cols = it->groups.group_cols;
    *shard = it->scale_shard;
    return it->scale;
}

/* A transposed layout's (gpt-oss: [E, cols, rows]) elements are columns
 * c.. of expert x: the groups that hold them, of every row, decoded at once
 * into `t` and put in their places. */
fp8_status dq_weights_read(fp8_ctx *ctx, const dq_weights *w, const char *name, uint64_t first,
                           uint64_t n, fp8_dtype dt, float *y, float *scales_out)
{
    const dq_item *it = &w->items[item_index(w, name)];
    uint64_t per_x = it->rows * it->cols, g = it->groups.group_cols;
    uint64_t row = first / it->cols, nrows = n / it->cols;
    uint64_t x = row / it->rows;
    row %= it->rows;
    uint8_t *codes = malloc(code_bytes(it, it->transpose ? per_x : n) + 1);
    unsigned char *scales = malloc(fp8_tensor_nbytes(it->scale) ? fp8_tensor_nbytes(it->scale) : 1);
    float *t = it->transpose ? malloc((n + 2 * g * it->rows) * sizeof *t) : y;
    fp8_status st = codes && scales && t ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t done = 0; it->transpose && !st && done < n;) {
        uint64_t at = first + done, c = at % per_x / it->rows, m = (n - done) / it->rows;
        m = m < it->cols - c ? m : it->cols - c;
        uint64_t c0 = c / g * g, c1 = fp8_ceil_div(c + m, g) * g;
        c1 = c1 < it->cols ? c1 : it->cols;
        st = dq_rows(ctx, w, it, at / per_x, 0, it->rows, c0, c1 - c0, codes, scales, dt, t, NULL,
                     true);
        for (uint64_t r = 0; !st && r < it->rows; r++)
            for (uint64_t k = 0; k < m; k++)
                y[done + k * it->rows + r] = t[r * (c1 - c0) + c - c0 + k];
        done += m * it->rows;
    }
    /* one expert matrix at a time: the rows of a read may span two */
    while (!it->transpose && !st && nrows) {
        uint64_t k = it->rows - row < nrows ? it->rows - row : nrows;
        st = dq_rows(ctx, w, it, x, row, k, 0, it->cols, codes, scales, dt, y, scales_out, true);
        y += k * it->cols;
        if (scales_out)
            scales_out += k * it->cols;
        nrows -= k;
        row = 0;
        x++;
    }
    if (it->transpose)
        free(t);
    free(codes);
    free(scales);
    return st;
}

fp8_dtype dq_judged_dtype(const cJSON *config, const fp8_checkpoint *ck)
{
    /* undeclared, transformers computes in the checkpoint's own float dtype
     * (all-MiniLM-L6-v2's config names none, and its weights are F32) */
    int f32 = fmt_config_is_f32(config);
    for (size_t i = 0; f32 < 0 && i < fp8_checkpoint_tensor_count(ck); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
        if (t->rank >= 2 && fp8_dtype_is_float(t->dtype))
            f32 = t->dtype == FP8_DTYPE_F32;
    }
    return f32 > 0 ? FP8_DTYPE_F32 : FP8_DTYPE_BF16;
}

/* Whether some scale of `it` fails fp8_dequant_judge under its element's
 * code of largest magnitude: only then are its codes read. */
static fp8_status dq_risky(fp8_ctx *ctx, const dq_plan *p, const dq_item *it,
                           const fp8_dequant_spec *d, bool *risky)
{
    uint8_t most = fp8_elem_largest_code(fp8_elem_get(it->scheme->elem));
    uint64_t n = fp8_tensor_nbytes(it->scale);
    unsigned char *raw = malloc(n ? n : 1);
    fp8_status st = raw ? fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->scale_shard),
                                        it->scale, 0, raw, n)
                        : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    *risky = false;
    for (uint64_t k = 0; !st && !*risky && k < it->scale->elements; k++) {
        float f = 0;
        if (d->scale_size == 1)
            *risky = fp8_dequant_judge(d, raw + k, most) != FP8_DEQ_OK;
        else
            *risky = !dq_scale_value(it->scale->dtype, raw, k, &f) ||
                     fp8_dequant_judge(d, &f, most) != FP8_DEQ_OK;
    }
    free(raw);
    return st;
}

fp8_status dq_weights_check(fp8_ctx *ctx, const dq_weights *w, fp8_dtype dt)
{
    fp8_status st = FP8_OK;
    for (size_t i = 0; !st && i < w->n; i++) {
        const dq_item *it = &w->items[i];
        if (it->action != DQ_DEQUANT || !it->scale)
            continue;
        fp8_dequant_spec d = spec_of(it, dt, false);
        bool risky = false;
        if (!fp8_dequant_init(&d))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        st = dq_risky(ctx, w, it, &d, &risky);
        fp8_dequant_free(&d);
        /* the export's own reading, a band of rows at a time, where it may refuse */
        uint64_t band = (1u << 20) / (it->cols ? it->cols : 1) + 1;
        band = band > it->rows ? it->rows : band;
        uint8_t *codes = risky ? malloc(code_bytes(it, band * it->cols) + 1) : NULL;
        unsigned char *raw = risky ? malloc(fp8_tensor_nbytes(it->scale) + 1) : NULL;
        float *y = risky ? malloc(band * it->cols * sizeof *y + 1) : NULL;
        if (!st && risky && !(codes && raw && y))
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        for (uint64_t x = 0; !st && risky && x < it->experts; x++)
            for (uint64_t r = 0; !st && r < it->rows; r += band)
                st = dq_rows(ctx, w, it, x, r, it->rows - r < band ? it->rows - r : band, 0,
                             it->cols, codes, raw, dt, y, NULL, false);
        free(codes);
        free(raw);
        free(y);
    }
    return st;
}
