/*
 * convert.c - FP8 to FP8 (issue 13): a quantize plan run over an FP8
 * checkpoint through a source (fp8_quant_source in quantize.h).  The plan sees
 * each FP8 weight either as itself, copied byte for byte with a re-labelled
 * scale made here (the exact path), or as an F32 tensor of its values
 * q * s, which quantize's own band quantizer turns into the target (the
 * value path).  dequantize.c finds the weights and scales and computes the
 * values; quantize.c writes everything.
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "layout/formats.h"
#include "layout/kvscale.h"
#include "layout/parallel.h"
#include "common/types.h"
#include "compute/quant_cpu.h"
#include "ops/convert_cast.h"
#include "ops/dequantize.h"
#include "ops/quantize.h"

/* A tensor the plan sees that the input does not hold: a weight's values
 * (F32) or a weight's re-labelled scale. */
typedef struct {
    fp8_tensor_info info; /* first: the plan's pointer is this struct's */
    uint64_t shape[3];
    size_t weight;        /* index into the convert's weights */
} virtual_tensor;

typedef struct {
    fp8_convert_weight pub;
    const fp8_tensor_info *w, *scale; /* in the convert's checkpoint */
    size_t shard, scale_shard;
    uint64_t rows, cols, src_rows, src_cols; /* per matrix; the input's group */
    uint64_t gr, gc, trows, tcols; /* the target's group; groups down and across a matrix */
    virtual_tensor values, out_scale, codes; /* codes: the exact path's, read through checks */
    bool pow2;      /* every input scale an F32 power of two (a UE8M0 scale's value) */
    bool e8m0;      /* ... each within E8M0's 2^-127 .. 2^127: an MX scale byte holds it */
    bool fits_bf16, fits_f16; /* every input scale's value exact in that dtype */
    /* MX input to ue8m0 blocks by shifting (plan_shift): each block's
     * exponent byte, the largest of its groups', blocks in the output
     * scale's order */
    bool shift;
    uint8_t *tiles;
    char *scale_name;
} weight;

/* A KV-cache or activation scale the output carries under another name
 * (and shape: [] for ModelOpt, [1] otherwise), or an activation scale
 * carried as it is: its bytes are the input's. */
typedef struct {
    fp8_tensor_info info; /* first: the plan's pointer is this struct's */
    uint64_t shape[1];
    const fp8_tensor_info *src;
    size_t shard;
} kv_renamed;

struct fp8_convert {
    fp8_convert_options opts;
    const fmt_spec *spec;
    fp8_checkpoint *ck;
    dq_weights *dq;
    weight *weights;   /* in name order */
    size_t n, *by_scale, dropped;
    size_t nkv;           /* KV-cache scales carried */
    kv_renamed *kv;       /* those renamed, in input order */
    size_t nkv_renamed;
    const char *kv_names; /* the output's naming convention; NULL: the input's */
    /* static activation scales: how many the input holds (by name), and
     * those the output carries (plan_acts), sorted by the input's name */
    size_t nacts_in, nacts;
    kv_renamed *acts;
    fp8_format input_format; /* the format the input declares */
    fp8_quant_source source;
    fp8_quant_plan *plan;
    cast_plan *cast;   /* packed-FP4 input: its cast (then no plan, no weights) */
    pthread_mutex_t lock;
};

static uint64_t clamp(uint64_t g, uint64_t dim) { return g < dim ? g : dim ? dim : 1; }

static int cmp_weight_name(const void *key, const void *elem)
{
    return strcmp(key, ((const weight *)elem)->w->name);
}

static weight *find_weight(const fp8_convert *c, const char *name)
{
    return bsearch(name, c->weights, c->n, sizeof *c->weights, cmp_weight_name);
}

/* by_scale is sorted by the input scale's name */
static const char *by_scale_name(const void *arg, size_t i)
{
    const fp8_convert *c = arg;
    return c->weights[c->by_scale[i]].scale->name;
}

static int cmp_by_scale(const void *a, const void *b, void *arg)
{
    const fp8_convert *c = arg;
    return strcmp(c->weights[*(const size_t *)a].scale->name,
                  c->weights[*(const size_t *)b].scale->name);
}

static weight *find_by_scale(const fp8_convert *c, const char *name)
{
    size_t i = fp8_name_find(name, c->n, by_scale_name, c);
    return i < c->n ? &c->weights[c->by_scale[i]] : NULL;
}

/* The target's group of one [M, N] matrix, as rows x columns. */
static void target_group(const fp8_quant_options *o, uint64_t m, uint64_t n, uint64_t *gr,
                         uint64_t *gc)
{
    fp8_geometry g;
    fp8_scheme_geometry(o->scheme, o->block_rows, o->block_cols, m, n, &g);
    *gr = clamp(g.group_rows, m);
    *gc = clamp(g.group_cols, n);
}

/* Whether target groups of g along a dimension of `dim` each lie inside one
 * input group of G. */
static bool nests(uint64_t g, uint64_t G, uint64_t dim) { return G >= dim || G % g == 0; }

/* NULL when weight w can take the exact path; else why not (in buf). */
static const char *why_not_exact(const fp8_convert *c, const weight *w, bool ue8m0_input,
                                 char *buf, size_t cap)
{
    const fp8_quant_options *o = &c->opts.target;
    bool mx_input = fp8_dtype_holds_pow2_scales(w->scale->dtype);
    /* a ue8m0 block's F32 power of two is an E8M0 byte: 128x128 blocks to
     * MXFP8 keep every code (issue 25) */
    if (fp8_scheme_get(o->scheme)->pow2_scales && !mx_input && !w->e8m0)
        return "MX scales are powers of two: only an MX input's scales, or F32 ones that are "
               "powers of two (ue8m0), are copied";
    /* undeclared F32 powers of two in E8M0's range (compressed-tensors holds
     * no ue8m0 claim) are ue8m0 scales as they are: copied */
    if (fp8_scheme_has_block(o->scheme) && o->scale_ue8m0 && !mx_input && !ue8m0_input &&
        !w->e8m0)
        return "ue8m0 scales are powers of two: the input's are not all F32 powers of two "
               "in E8M0's range";
    if (!nests(w->gr, w->src_rows, w->rows) || !nests(w->gc, w->src_cols, w->cols)) {
        snprintf(buf, cap, "a %llux%llu group of the output does not lie inside one %llux%llu "
                 "group of the input",
                 (unsigned long long)w->gr, (unsigned long long)w->gc,
                 (unsigned long long)w->src_rows, (unsigned long long)w->src_cols);
        return buf;
    }
    return NULL;
}

/* ---------------------------------------------------------------- the source */

static int cmp_src_name(const void *key, const void *elem)
{
    return strcmp(key, ((const kv_renamed *)elem)->src->name);
}

static int cmp_src(const void *a, const void *b)
{
    return strcmp(((const kv_renamed *)a)->src->name, ((const kv_renamed *)b)->src->name);
}

static const fp8_tensor_info *source_tensor(void *user, const fp8_tensor_info *t,
                                            const char **keep)
{
    fp8_convert *c = user;
    weight *w = find_weight(c, t->name);
    if (w) {
        *keep = w->pub.exact ? "FP8 codes copied (exact)" : NULL;
        return w->pub.exact ? &w->codes.info : &w->values.info;
    }
    if ((w = find_by_scale(c, t->name))) {
        *keep = "scale copied (exact)";
        return w->pub.exact ? &w->out_scale.info : NULL;
    }
    const kv_renamed *a = c->nacts ? bsearch(t->name, c->acts, c->nacts, sizeof *c->acts,
                                             cmp_src_name)
                                   : NULL;
    if (a) {
        *keep = "activation scale (static)";
        return &a->info;
    }
    long layer;
    if (kv_naming_of(t->name, &layer)) {
        for (size_t i = 0; i < c->nkv_renamed; i++)
            if (!strcmp(c->kv[i].src->name, t->name)) { /* the plan's checkpoint is its own */
                *keep = "KV-cache scale, renamed";
                return &c->kv[i].info;
            }
        *keep = "KV-cache scale";
        return t;
    }
    if (dq_weights_role(c->dq, t->name) == DQ_DROP)
        return NULL; /* an activation scale */
    *keep = "not an FP8 weight";
    return t;
}

/* Elements [e0, e1) of a weight's values: whole rows from dequantize.c
 * (which refuses NaN codes; an infinite product dq_weights_check refused). */
static fp8_status read_values(fp8_ctx *ctx, const fp8_convert *c, const weight *w, uint64_t e0,
                              uint64_t e1, float *y)
{
    uint64_t r0 = e0 / w->cols, r1 = fp8_ceil_div(e1, w->cols);
    float *rows = malloc((r1 - r0) * w->cols * sizeof *rows);
    if (!rows)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_status st = dq_weights_read(ctx, c->dq, w->w->name, r0 * w->cols, (r1 - r0) * w->cols,
                                    FP8_DTYPE_F32, rows, NULL);
    if (!st)
        memcpy(y, rows + (e0 - r0 * w->cols), (e1 - e0) * sizeof *y);
    free(rows);
    return st;
}

/* ---------------------------------------------------------------- MX to ue8m0 blocks */

/* MXFP8 to ue8m0 blocks (issue 25; fp8conv(1) convert, the exact path):
 * each code q of a group with byte b becomes q * 2^(b - B), B its block's
 * largest group byte, by fp8_elem_shift_e4m3: shift_table[255 - d][q] is
 * q * 2^-d (fp8_elem_shift_rows). */
static uint8_t shift_table[256][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static void shift_table_init(void)
{
    fp8_elem_shift_rows(fp8_elem_get(fp8_scheme_get(FP8_SCHEME_MXFP8)->elem), -255, 256, 256,
                        shift_table[0]);
}

/* The block of flat element e of weight w, in its tiles. */
static uint64_t tile_of(const weight *w, uint64_t e)
{
    uint64_t x = e / (w->rows * w->cols), r = e / w->cols % w->rows, col = e % w->cols;
    return (x * w->trows + r / w->gr) * w->tcols + col / w->gc;
}

/* Codes [offset, offset + len) of weight w shifted to their blocks' exponents
 * (in place); *bad: the first element that has no shifted code, or
 * UINT64_MAX. */
static fp8_status shift_span(fp8_ctx *ctx, const fp8_convert *c, const weight *w,
                             uint64_t offset, uint8_t *q, size_t len, uint64_t *bad)
{
    uint64_t g0 = offset / FP8_MX_GROUP, g1 = fp8_ceil_div(offset + len, FP8_MX_GROUP);
    uint8_t *sc = malloc(g1 - g0 + 1);
    fp8_status st = sc ? fp8_file_read(ctx, fp8_checkpoint_shard(c->ck, w->scale_shard), w->scale,
                                       g0, sc, g1 - g0)
                       : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    *bad = UINT64_MAX;
    pthread_once(&shift_once, shift_table_init);
    for (size_t k = 0; !st && k < len; k++) {
        uint64_t e = offset + k;
        unsigned d = (unsigned)(w->tiles[tile_of(w, e)] - sc[e / FP8_MX_GROUP - g0]);
        q[k] = shift_table[255 - d][q[k]];
        if (q[k] == FP8_NO_SHIFT && *bad == UINT64_MAX)
            *bad = e;
    }
    free(sc);
    return st;
}

/* Whether weight w (MX input, a ue8m0 block target whose blocks hold whole
 * groups) keeps every value with its codes shifted: its blocks' bytes
 * first, then every code tried.  *why says where not. */
static fp8_status plan_shift(fp8_ctx *ctx, fp8_convert *c, weight *w, char *why, size_t cap)
{
    enum { STEP = 1 << 20 };
    uint64_t experts = w->w->elements / (w->rows * w->cols), groups = w->cols / FP8_MX_GROUP;
    w->tiles = calloc(experts * w->trows * w->tcols + 1, 1);
    uint8_t *buf = malloc(STEP);
    fp8_status st = w->tiles && buf ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    uint64_t n = w->scale->elements, bad = UINT64_MAX;
    for (uint64_t k0 = 0; !st && k0 < n; k0 += STEP) { /* scale k: group k % groups of row k / groups */
        uint64_t m = n - k0 < STEP ? n - k0 : STEP;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(c->ck, w->scale_shard), w->scale, k0, buf, m);
        for (uint64_t k = k0; !st && k < k0 + m; k++) {
            uint8_t *t = &w->tiles[tile_of(w, k / groups * w->cols + k % groups * FP8_MX_GROUP)];
            *t = buf[k - k0] > *t ? buf[k - k0] : *t;
        }
    }
    for (uint64_t e0 = 0; !st && bad == UINT64_MAX && e0 < w->w->elements; e0 += STEP) {
        uint64_t m = w->w->elements - e0 < STEP ? w->w->elements - e0 : STEP;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(c->ck, w->shard), w->w, e0, buf, m);
        if (!st)
            st = shift_span(ctx, c, w, e0, buf, m, &bad);
    }
    free(buf);
    w->shift = !st && bad == UINT64_MAX;
    if (!st && !w->shift)
        snprintf(why, cap, "element %llu loses a bit when its MX group's codes are shifted to "
                 "its %llux%llu block's largest exponent (or is NaN)",
                 (unsigned long long)bad, (unsigned long long)w->gr, (unsigned long long)w->gc);
    return st;
}

/* Bytes [offset, offset + len) of an exact weight's codes, which are copied
 * only when each has a finite value: no NaN code (a product beyond the
 * model's dtype: dq_weights_check, as dequantize-for-export refuses it). */
static fp8_status read_codes(fp8_ctx *ctx, const fp8_convert *c, const weight *w,
                             uint64_t offset, uint8_t *q, size_t len)
{
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(c->ck, w->shard), w->w, offset, q, len);
    uint64_t bad;
    if (!st && w->shift) /* plan_shift tried every code */
        st = shift_span(ctx, c, w, offset, q, len, &bad);
    fp8_code_stats cs = { 0 };
    if (!st)
        fp8_code_stats_span(q, len, &cs); /* the fast test */
    for (size_t k = 0; !st && cs.nan && k < len; k++)
        if ((q[k] & 0x7F) == 0x7F)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': element %llu is the E4M3 NaN code 0x%02x; it has no "
                          "value to convert",
                          fp8_checkpoint_shard_name(c->ck, w->shard), w->w->name,
                          (unsigned long long)(offset + k), (unsigned)q[k]);
    return st;
}

/* Output scales [k0, k1) of an exact weight: each the input scale of the
 * group that holds its group. */
static fp8_status read_scales(fp8_ctx *ctx, const fp8_convert *c, const weight *w, uint64_t k0,
                              uint64_t k1, unsigned char *out)
{
    uint64_t gr = w->gr, gc = w->gc, m = w->rows, n = w->cols, trows = w->trows, tcols = w->tcols;
    uint64_t GR = clamp(w->src_rows, m), GC = clamp(w->src_cols, n);
    uint64_t srows = fp8_ceil_div(m, GR), scols = fp8_ceil_div(n, GC);
    fp8_dtype odt = w->out_scale.info.dtype;
    unsigned isz = fp8_dtype_bits(w->scale->dtype) / 8, osz = fp8_dtype_bits(odt) / 8;
    if (w->shift) { /* each block's 2^(B - 127): 2^-127 at least, an fp32 subnormal, exact */
        for (uint64_t k = k0; k < k1; k++) {
            float f = fp8_pow2((int)w->tiles[k] - 127);
            memcpy(out + 4 * (k - k0), &f, 4);
        }
        return FP8_OK;
    }
    uint64_t *src = malloc((k1 - k0 + 1) * sizeof *src), lo = UINT64_MAX, hi = 0;
    unsigned char *in = NULL;
    fp8_status st = src ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t k = k0; !st && k < k1; k++) {
        uint64_t x = k / (trows * tcols), i = k / tcols % trows, j = k % tcols;
        src[k - k0] = (x * srows + i * gr / GR) * scols + j * gc / GC;
        lo = src[k - k0] < lo ? src[k - k0] : lo;
        hi = src[k - k0] > hi ? src[k - k0] : hi;
    }
    if (!st && k1 > k0 && !(in = malloc((hi - lo + 1) * isz)))
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st && k1 > k0)
        st = fp8_file_read(ctx, fp8_checkpoint_shard(c->ck, w->scale_shard), w->scale, lo * isz, in,
                           (hi - lo + 1) * isz);
    for (uint64_t k = k0; !st && k < k1; k++) {
        float s;
        if (!dq_scale_value(w->scale->dtype, in, src[k - k0] - lo, &s))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': element %llu is not a finite positive scale",
                          fp8_checkpoint_shard_name(c->ck, w->scale_shard), w->scale->name,
                          (unsigned long long)src[k - k0]);
        else if (osz == 1) /* an MX byte: the input's, or the exponent of its F32 power of two */
            out[(k - k0)] = isz == 1 ? in[src[k - k0] - lo] : (unsigned char)(ilogbf(s) + 127);
        else if (osz == 2) { /* --like's BF16 or F16, each value exact in it (plan_weight) */
            uint16_t h = odt == FP8_DTYPE_BF16 ? fp8_f32_to_bf16(s) : fp8_f32_to_f16(s);
            memcpy(out + 2 * (k - k0), &h, 2);
        } else
            memcpy(out + 4 * (k - k0), &s, 4);
    }
    free(in);
    free(src);
    return st;
}

static fp8_status source_read(void *user, fp8_ctx *ctx, const fp8_tensor_info *t,
                              uint64_t offset, void *buf, size_t len)
{
    const fp8_convert *c = user;
    const kv_renamed *k = (const kv_renamed *)t;
    if ((c->nkv_renamed && k >= c->kv && k < c->kv + c->nkv_renamed) ||
        (c->nacts && k >= c->acts && k < c->acts + c->nacts))
        return fp8_file_read(ctx, fp8_checkpoint_shard(c->ck, k->shard), k->src, offset, buf, len);
    const virtual_tensor *v = (const virtual_tensor *)t;
    const weight *w = &c->weights[v->weight];
    if (v == &w->values)
        return read_values(ctx, c, w, offset / 4, (offset + len) / 4, buf);
    if (v == &w->codes)
        return read_codes(ctx, c, w, offset, buf, len);
    unsigned osz = fp8_dtype_bits(t->dtype) / 8;
    return read_scales(ctx, c, w, offset / osz, (offset + len) / osz, buf);
}

/* Counts what a band changed: codes against the input's (read again, one
 * byte each), values q * s against its input values. */
static fp8_status source_quantized(void *user, fp8_ctx *ctx, const fp8_tensor_info *t,
                                   uint64_t expert, uint64_t row0, uint64_t col0,
                                   const fp8_band *b, const float *in, const uint8_t *q,
                                   const void *scales)
{
    fp8_convert *c = user;
    weight *w = &c->weights[((const virtual_tensor *)t)->weight];
    fp8_dtype sdt = fp8_scale_size(b->kind) == 1 ? FP8_DTYPE_U8 : FP8_DTYPE_F32;
    uint64_t per_row = fp8_ceil_div(b->cols, b->group_cols), changed = 0, codes = 0;
    double most = 0;
    uint8_t *old = malloc(b->rows * b->cols + 1);
    if (!old)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    /* the input's codes of the band: one read when it spans whole rows */
    fp8_file *f = fp8_checkpoint_shard(c->ck, w->shard);
    uint64_t at = (expert * w->rows + row0) * w->cols + col0;
    fp8_status st = FP8_OK;
    for (uint64_t r = 0; !st && r < b->rows; r += b->cols == w->cols ? b->rows : 1)
        st = fp8_file_read(ctx, f, w->w, at + r * w->cols, old + r * b->cols,
                           b->cols == w->cols ? b->rows * b->cols : b->cols);
    if (st) {
        free(old);
        return st;
    }
    for (uint64_t k = 0; k < b->rows * b->cols; k++)
        codes += old[k] != q[k];
    for (uint64_t r = 0; r < b->rows; r++) {
        for (uint64_t c0 = 0; c0 < b->cols; c0 += b->group_cols) {
            float s; /* as stored (a fixed band's one scale too; its factor may differ) */
            dq_scale_value(sdt, scales,
                           b->fixed ? 0 : r / b->group_rows * per_row + c0 / b->group_cols, &s);
            uint64_t end = c0 + b->group_cols < b->cols ? c0 + b->group_cols : b->cols;
            for (uint64_t k = r * b->cols + c0; k < r * b->cols + end; k += 1024) {
                float y[1024];
                uint64_t n = r * b->cols + end - k < 1024 ? r * b->cols + end - k : 1024;
                fp8_dequant_span(q + k, n, s, y);
                for (uint64_t e = 0; e < n; e++) {
                    double d = fabs((double)y[e] - (double)in[k + e]); /* as diff does */
                    changed += y[e] != in[k + e];
                    most = d > most ? d : most;
                }
            }
        }
    }
    free(old);
    pthread_mutex_lock(&c->lock);
    w->pub.codes_changed += codes;
    w->pub.changed += changed;
    w->pub.max_change = most > w->pub.max_change ? most : w->pub.max_change;
    pthread_mutex_unlock(&c->lock);
    return FP8_OK;
}

/* ---------------------------------------------------------------- the plan */

/* An hf-fp8 block output of an input that cannot declare "scale_fmt":
 * "ue8m0" (compressed-tensors, ModelOpt) declares it when every weight takes
 * the exact path and every input scale is an F32 power of two: the claim is
 * then true of every scale written (fp8conv(1), convert, --scale-fmt). */
static void recover_ue8m0(fp8_convert *c)
{
    fp8_quant_options *o = &c->opts.target;
    fp8_format declared = c->input_format;
    if (c->opts.scale_fmt_set || o->scale_ue8m0 || !c->spec || declared == FP8_FORMAT_HF_FP8 ||
        declared == FP8_FORMAT_DEFAULT || o->format != FP8_FORMAT_HF_FP8 ||
        o->scheme != FP8_SCHEME_BLOCK || !c->n)
        return;
    for (size_t i = 0; i < c->n; i++)
        if (!c->weights[i].pub.exact || !c->weights[i].pow2)
            return;
    o->scale_ue8m0 = true;
}

/* A static activation scale's names: input_scale (compressed-tensors,
 * ModelOpt, hf-fp8 activation_scheme static) and Mistral's activation_scale
 * (vLLM models/mistral3.py and SGLang models/llama.py load_weights rename it
 * input_scale).  The length of name's stem, or 0 when it is neither. */
static const char *const act_suffixes[] = { ".input_scale", ".activation_scale" };

static size_t act_stem(const char *name)
{
    for (size_t i = 0; i < sizeof act_suffixes / sizeof *act_suffixes; i++)
        if (fp8_has_suffix(name, act_suffixes[i]))
            return strlen(name) - strlen(act_suffixes[i]);
    return 0;
}

/* Whether format f's layout of scheme s declares static activations, which
 * an input with activation scales carries into it (fmt_spec static_acts). */
static bool takes_static(fp8_format f, fp8_scheme s)
{
    const fmt_spec *spec = fmt_spec_find(f == FP8_FORMAT_DEFAULT ? fp8_format_default(s) : f, s);
    return spec && spec->static_acts;
}

/* The target: what the options say, else what the input declares. */
static fp8_status resolve_target(fp8_ctx *ctx, fp8_convert *c, const cJSON *config, bool *ue8m0)
{
    fp8_quant_options *o = &c->opts.target;
    fmt_declaration d;
    fmt_declaration_read(config, &d);
    *ue8m0 = d.ue8m0;
    c->input_format = d.format;
    /* activations the input's loaders compute statically (a stray
     * input_scale beside dynamic ones is read by none: dropped) */
    const fmt_spec *in = fmt_spec_find(d.format, d.scheme);
    for (size_t i = 0; (d.static_acts || (in && in->needs_input_scale)) &&
                       i < fp8_checkpoint_tensor_count(c->ck); i++)
        c->nacts_in += act_stem(fp8_checkpoint_tensor(c->ck, i, NULL)->name) > 0;
    if (!c->opts.scheme_set)
        o->scheme = c->opts.block_set || d.format == FP8_FORMAT_DEFAULT ? FP8_SCHEME_BLOCK
                                                                        : d.scheme;
    if (!c->opts.block_set && fp8_scheme_has_block(d.scheme) && d.block_rows) {
        o->block_rows = d.block_rows;
        o->block_cols = d.block_cols;
    }
    if (o->format == FP8_FORMAT_DEFAULT)
        o->format = d.format != FP8_FORMAT_DEFAULT &&
                            (fp8_format_supports(d.format, o->scheme) ||
                             (c->nacts_in && takes_static(d.format, o->scheme)))
                        ? d.format
                        : fp8_format_default(o->scheme);
    if (!c->opts.scale_fmt_set)
        o->scale_ue8m0 = d.ue8m0 && fp8_scheme_has_block(o->scheme) &&
                         o->format == FP8_FORMAT_HF_FP8;
    if (c->opts.block_set && !fp8_scheme_has_block(o->scheme))
        return fp8_fail(ctx, FP8_ERR_USAGE, "--block applies to --scheme block only");
    c->spec = fmt_spec_find(o->format, o->scheme);
    /* the scheme came from config.json, not from an option: say so */
    if (!c->opts.scheme_set && c->spec && fmt_code_layout(c->spec))
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "config.json: quantization_config declares %s, which convert does not "
                        "write from FP8 weights (it re-quantizes FP8 checkpoints to FP8 "
                        "schemes): if the config does not describe these weights, correct it, "
                        "or give --scheme",
                        fp8_scheme_name(o->scheme));
    return FP8_OK; /* the plan says what is wrong with a pair the table lacks */
}

/* --profile: the arithmetic of the weights re-quantized from their values
 * (the exact path copies, whatever the profile: fp8conv(1), convert,
 * --profile).  A ue8m0 row's scales (deepgemm) decide the path: hf-fp8
 * blocks become ue8m0. */
static fp8_status take_profile(fp8_ctx *ctx, fp8_convert *c)
{
    fp8_quant_options *o = &c->opts.target;
    const fp8_profile_traits *prof = fp8_profile_get(o->profile);
    char defined[64];
    if (!prof)
        return fp8_fail(ctx, FP8_ERR_USAGE, "unknown profile");
    if (!fp8_profile_defines(o->profile, o->scheme, defined, sizeof defined))
        return fp8_fail(ctx, FP8_ERR_USAGE, "--profile %s does not define --scheme %s (it "
                        "defines: %s)", fp8_profile_name(o->profile), fp8_scheme_name(o->scheme),
                        defined);
    if (prof->ue8m0 && o->format == FP8_FORMAT_HF_FP8)
        o->scale_ue8m0 = true;
    return FP8_OK;
}

/* The plan's target: the profile only where a weight is re-quantized (else
 * fp8conv's own, which copies ue8m0 blocks under any profile); then an
 * input's ue8m0 claim that the profile's F32 scales cannot keep is refused,
 * naming the first such weight. */
static fp8_status plan_target(fp8_ctx *ctx, const fp8_convert *c, fp8_quant_options *t)
{
    const weight *w = NULL;
    size_t values = 0;
    for (size_t i = 0; i < c->n; i++)
        if (!c->weights[i].pub.exact && values++ == 0)
            w = &c->weights[i];
    *t = c->opts.target;
    if (!values)
        t->profile = FP8_PROFILE_FP8CONV;
    else if (t->scale_ue8m0 && !c->opts.scale_fmt_set &&
             !fp8_numerics_any_kind(fp8_profile_numerics(t->profile, t->scheme)))
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s' (and %zu more) must be re-quantized "
                        "(%s), and the input declares scale_fmt ue8m0, which --profile %s does "
                        "not compute (F32 block scales): give --scale-fmt float, or --profile "
                        "deepgemm for ue8m0 ones", fp8_checkpoint_shard_name(c->ck, w->shard),
                        w->w->name, values - 1, w->pub.why, fp8_profile_name(t->profile));
    return FP8_OK;
}

/* Whether every scale of weight w is an F32 power of two (w->pow2), each
 * within E8M0's range (w->e8m0). */
static fp8_status find_pow2(fp8_ctx *ctx, fp8_convert *c, weight *w)
{
    unsigned sz = fp8_dtype_bits(w->scale->dtype) / 8;
    uint64_t step = (1u << 20) / sz; /* scales at a time: MX ones are 1/32 of the weight */
    unsigned char *raw = malloc(step * sz);
    fp8_status st = raw ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    w->pow2 = w->scale->dtype == FP8_DTYPE_F32;
    w->fits_bf16 = w->fits_f16 = c->opts.target.scale_dtype_set; /* only --like asks */
    for (uint64_t k0 = 0; !st && (w->pow2 || w->fits_bf16 || w->fits_f16) &&
                          k0 < w->scale->elements;
         k0 += step) {
        uint64_t n = w->scale->elements - k0 < step ? w->scale->elements - k0 : step;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(c->ck, w->scale_shard), w->scale, k0 * sz,
                           raw, n * sz);
        for (uint64_t k = 0; !st && k < n; k++) {
            float s;
            int e = 0;
            bool ok = dq_scale_value(w->scale->dtype, raw, k, &s);
            w->fits_bf16 &= ok && fp8_bf16_to_f32(fp8_f32_to_bf16(s)) == s;
            w->fits_f16 &= ok && fp8_f16_to_f32(fp8_f32_to_f16(s)) == s;
            w->pow2 &= ok && s > 0 && isfinite(s) && frexpf(s, &e) == 0.5f;
            w->e8m0 = w->pow2 && (k0 + k == 0 || w->e8m0) && e - 1 >= -127 && e - 1 <= 127;
        }
    }
    w->e8m0 &= w->pow2;
    free(raw);
    return st;
}

/* A weight's path, and the tensors the plan sees for it. */
static fp8_status plan_weight(fp8_ctx *ctx, fp8_convert *c, size_t i, bool ue8m0_input)
{
    weight *w = &c->weights[i];
    const fp8_tensor_info *t = w->w;
    const char *file = fp8_checkpoint_shard_name(c->ck, w->shard);
    char why[192];
    w->pub.name = t->name;
    w->pub.elements = t->elements;
    w->rows = t->shape[t->rank - 2];
    w->cols = t->shape[t->rank - 1];
    target_group(&c->opts.target, w->rows, w->cols, &w->gr, &w->gc);
    w->trows = fp8_ceil_div(w->rows, w->gr);
    w->tcols = fp8_ceil_div(w->cols, w->gc);
    w->scale = dq_weights_scale(c->dq, t->name, &w->scale_shard, &w->src_rows, &w->src_cols);
    if (!t->elements) /* no values: no scale to copy, nothing to re-quantize (and no loader
                        * builds a layer of that shape from config.json) */
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': an F8_E4M3 weight with a dimension of 0 holds no "
                        "values; convert refuses it (quantize keeps such a weight unquantized: "
                        "drop it, or dequantize-for-export and quantize)",
                        file, t->name);
    fp8_status st = find_pow2(ctx, c, w);
    if (st)
        return st;
    w->pub.why = c->spec ? why_not_exact(c, w, ue8m0_input, why, sizeof why) : "no such layout";
    const fp8_quant_options *o = &c->opts.target;
    bool mx_input = fp8_dtype_holds_pow2_scales(w->scale->dtype);
    if (w->pub.why && c->spec && mx_input && w->src_rows == 1 && w->src_cols == FP8_MX_GROUP &&
        w->cols % FP8_MX_GROUP == 0 && o->scheme == FP8_SCHEME_BLOCK && o->scale_ue8m0 &&
        (w->gc % FP8_MX_GROUP == 0 || w->gc == w->cols) &&
        fmt_scale_dtype_of(c->spec, FP8_DTYPE_F32) == FP8_DTYPE_F32) {
        if ((st = plan_shift(ctx, c, w, why, sizeof why)))
            return st;
        w->pub.why = w->shift ? NULL : why;
    }
    w->pub.exact = !w->pub.why;
    if (w->pub.why && !(w->pub.why = fp8_strdup(w->pub.why)))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (c->spec && !w->pub.exact && c->opts.exact)
        return fp8_fail(ctx, FP8_ERR_USAGE, "%s: tensor '%s': --exact: %s", file, t->name,
                        w->pub.why);
    const fp8_scheme_traits *sch = fp8_scheme_get(c->opts.target.scheme);
    if (c->spec && sch->group == FP8_GROUP_RUN && w->cols % sch->run)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': %s needs the last dimension (%llu) to be a "
                        "multiple of %u",
                        file, t->name, fp8_scheme_name(c->opts.target.scheme),
                        (unsigned long long)w->cols, sch->run);
    /* the codes, as they are; the values, an F32 tensor of the same name and shape */
    virtual_tensor *v = &w->codes;
    v->weight = i;
    v->info = *t;
    memcpy(v->shape, t->shape, (size_t)t->rank * sizeof *t->shape);
    w->values = *v;
    v->info.shape = v->shape;
    w->values.info = (fp8_tensor_info){ .name = t->name, .dtype = FP8_DTYPE_F32, .rank = t->rank,
                                        .shape = w->values.shape, .elements = t->elements,
                                        .end = t->elements * 4 };
    if (!w->pub.exact || !c->spec)
        return FP8_OK;
    /* the exact path's scale, named and shaped as the target's table row says */
    v = &w->out_scale;
    v->weight = i;
    /* a release's own name for a per-tensor scale ([] or [1]), where the
     * target's loaders take it too, is kept: a round trip renames nothing
     * (Mistral's per-tensor weight_scale_inv:
     * fp8conv-formats(5), RELEASE FAMILIES), and so is a --like reference's
     * (scale_alt_name).  A block scale's _scale_inv is the block layout's own
     * name, not that: a block to per-tensor convert writes the per-tensor name. */
    const char *alt = c->spec->alt_scale_suffix;
    size_t tn = strlen(t->name);
    bool keep_alt = alt && w->scale->rank <= 1 && w->scale->elements == 1 &&
                    strncmp(w->scale->name, t->name, tn) == 0 &&
                    strcmp(w->scale->name + tn, alt) == 0;
    const char *suffix = keep_alt ? alt : fmt_scale_suffix_of(c->spec, &c->opts.target);
    if (asprintf(&w->scale_name, "%s%s", t->name, suffix) < 0) {
        w->scale_name = NULL;
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    v->info.name = w->scale_name;
    v->info.dtype = fmt_scale_dtype_of(c->spec, FP8_DTYPE_F32);
    /* --like's scale dtype (Qwen3-*-FP8's BF16) where every value is exact in it */
    if (o->scale_dtype_set && !w->shift && v->info.dtype == FP8_DTYPE_F32 &&
        ((o->scale_dtype == FP8_DTYPE_BF16 && w->fits_bf16) ||
         (o->scale_dtype == FP8_DTYPE_F16 && w->fits_f16)))
        v->info.dtype = o->scale_dtype;
    fmt_scale_shape(c->spec, t->rank, t->shape, c->opts.target.block_rows,
                    c->opts.target.block_cols, &v->info.rank, v->shape);
    if (keep_alt && v->info.rank == 0 && w->scale->elements == 1 && w->scale->rank == 1) {
        v->info.rank = 1; /* and its [1] shape, which the loaders take as [] */
        v->shape[0] = 1;
    }
    v->info.shape = v->shape;
    const char *bad; /* a scale shape of a weight's: no overflow, whole bytes */
    st_tensor_size(v->shape, v->info.rank, v->info.dtype, &v->info.elements, &v->info.end, &bad);
    /* the loader rules quantize applies to the experts it writes */
    for (int l = 0; l < FP8_LOADER_COUNT; l++)
        if ((FP8_LOADERS_SERVING >> l & 1) && c->spec->no_experts[l] && fmt_is_expert(t->name))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': --scheme %s --format %s cannot be loaded for MoE "
                            "experts: %s",
                            file, t->name, fp8_scheme_name(c->opts.target.scheme),
                            fp8_format_name(c->opts.target.format), c->spec->no_experts[l]);
    return FP8_OK;
}

static fp8_status find_weights(fp8_ctx *ctx, fp8_convert *c, const char *input)
{
    size_t count = fp8_checkpoint_tensor_count(c->ck);
    c->weights = fp8_xcalloc(count ? count : 1, sizeof *c->weights);
    c->by_scale = fp8_xcalloc(count ? count : 1, sizeof *c->by_scale);
    if (!c->weights || !c->by_scale)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < count; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(c->ck, i, &shard);
        long layer;
        if (kv_naming_of(t->name, &layer)) { /* carried, not dropped */
            c->nkv++;
            continue;
        }
        switch (dq_weights_role(c->dq, t->name)) {
        case DQ_DEQUANT:
            c->by_scale[c->n] = c->n;
            c->weights[c->n].shard = shard;
            c->weights[c->n++].w = t;
            break;
        case DQ_DROP: c->dropped++; break;
        case DQ_COPY: break;
        }
    }
    if (!c->n)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: no F8_E4M3 weight: not an FP8 checkpoint, nothing to convert "
                        "(fp8conv quantize makes one from it)",
                        input);
    c->dropped -= c->n; /* each weight's own scale is replaced, not dropped */
    return FP8_OK;
}

/* The KV-cache scales the output renames: to --kv-names, else to the
 * target format's convention when the target format is not the input's
 * (fp8conv-formats(5), KV CACHE SCALES).  A role the convention has no
 * name for (kv_scale, q and prob scales into modelopt) keeps its name. */
static fp8_status plan_kv(fp8_ctx *ctx, fp8_convert *c)
{
    fp8_format input_format = c->input_format;
    fp8_format to = c->opts.target.format;
    c->kv_names = c->opts.kv_names                        ? c->opts.kv_names
                  : to == input_format                    ? NULL
                  : to == FP8_FORMAT_MODELOPT             ? "modelopt"
                  : to == FP8_FORMAT_COMPRESSED_TENSORS   ? "llm-compressor"
                                                          : NULL;
    if (c->opts.kv_names && !(kv_naming_for(c->opts.kv_names, KV_ROLE_K) &&
                              kv_naming_for(c->opts.kv_names, KV_ROLE_V)))
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "--kv-names %s: not a naming with k and v scales (modelopt, "
                        "llm-compressor, fused-qkv, ct-output)",
                        c->opts.kv_names);
    c->opts.target.kv_cache_fp8 = c->nkv > 0;
    if (!c->nkv || !c->kv_names)
        return FP8_OK;
    c->kv = fp8_xcalloc(c->nkv, sizeof *c->kv);
    if (!c->kv)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(c->ck); i++) {
        size_t shard;
        long layer;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(c->ck, i, &shard);
        const kv_naming *from = kv_naming_of(t->name, &layer);
        const kv_naming *to_row = from ? kv_naming_for(c->kv_names, from->role) : NULL;
        if (!to_row || to_row == from || c->nkv_renamed == c->nkv)
            continue;
        kv_renamed *k = &c->kv[c->nkv_renamed];
        size_t stem = strlen(t->name) - strlen(from->suffix);
        char *name;
        if (asprintf(&name, "%.*s%s", (int)stem, t->name, to_row->suffix) < 0)
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        if (fp8_checkpoint_find(c->ck, name, NULL)) {
            fp8_status st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                                     "%s: tensor '%s': renamed to the %s naming it would be "
                                     "'%s', which the input holds already",
                                     fp8_checkpoint_shard_name(c->ck, shard), t->name,
                                     c->kv_names, name);
            free(name);
            return st;
        }
        k->src = t;
        k->shard = shard;
        k->info = *t;
        k->info.name = name;
        /* ModelOpt writes a scalar, llm-compressor [1] (vLLM loads either:
         * weight_utils.py default_weight_loader fills a one-element param) */
        k->info.rank = strcmp(c->kv_names, "modelopt") ? 1 : 0;
        k->shape[0] = 1;
        k->info.shape = k->shape;
        c->nkv_renamed++;
    }
    return FP8_OK;
}

/* The static activation scales the output carries (fp8conv(1), convert,
 * ACTIVATION SCALES): where the target layout declares static activations
 * (fmt_spec static_acts) and the input has activation scales, one beside
 * every FP8 weight, each one value, copied byte for byte; renamed
 * input_scale ([1] for compressed-tensors, [] otherwise) when the target
 * format is not the input's.  Elsewhere they are dropped (counted) and the
 * output declares dynamic activations, as vLLM's block, per-token and MX
 * methods quantize them. */
static fp8_status plan_acts(fp8_ctx *ctx, fp8_convert *c)
{
    const fp8_quant_options *o = &c->opts.target;
    if (!c->nacts_in || !c->spec || !c->spec->static_acts)
        return FP8_OK;
    c->opts.target.static_acts = true;
    c->acts = fp8_xcalloc(c->n, sizeof *c->acts);
    if (!c->acts)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    bool rename = o->format != c->input_format || c->opts.act_name;
    for (size_t i = 0; i < c->n; i++) {
        const weight *w = &c->weights[i];
        const char *wn = w->w->name, *file = fp8_checkpoint_shard_name(c->ck, w->shard);
        size_t stem = strlen(wn) - (fp8_has_suffix(wn, ".weight") ? 7 : 0);
        const fp8_tensor_info *a = NULL;
        size_t shard = 0;
        for (size_t k = 0; !a && k < sizeof act_suffixes / sizeof *act_suffixes; k++)
            a = ck_find_with(c->ck, wn, stem, act_suffixes[k], &shard);
        if (!a)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': the input has static activation scales (%zu) and "
                            "--scheme %s --format %s declares them static, but this FP8 weight "
                            "has none (%.*s.input_scale): its loaders would scale its inputs by "
                            "an uncalibrated value; give it one, or convert to a layout with "
                            "dynamic activations (--scheme channel or block)",
                            file, wn, c->nacts_in, fp8_scheme_name(o->scheme),
                            fp8_format_name(o->format), (int)stem, wn);
        if (a->elements != 1 || !fp8_dtype_is_float(a->dtype))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': a static activation scale is one F32, BF16 or F16 "
                            "value per tensor; this one is %s with %llu elements",
                            fp8_checkpoint_shard_name(c->ck, shard), a->name,
                            fp8_dtype_name(a->dtype), (unsigned long long)a->elements);
        kv_renamed *k = &c->acts[c->nacts++];
        k->src = a;
        k->shard = shard;
        k->info = *a;
        if (!rename)
            continue;
        char *name;
        if (asprintf(&name, "%.*s.%s", (int)stem, wn,
                     c->opts.act_name ? c->opts.act_name : "input_scale") < 0)
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        k->info.name = name;
        k->info.rank = o->format == FP8_FORMAT_COMPRESSED_TENSORS; /* llm-compressor: [1] */
        k->shape[0] = 1;
        k->info.shape = k->shape;
    }
    qsort(c->acts, c->nacts, sizeof *c->acts, cmp_src);
    c->dropped -= c->nacts;
    return FP8_OK;
}

/* Every KV-cache scale of ck judged as verify judges it (kv_scale_judge):
 * one that verify reports is bad input, refused with verify's message. */
static fp8_status check_kv(fp8_ctx *ctx, const fp8_checkpoint *ck)
{
    fp8_status st = FP8_OK;
    for (size_t i = 0; !st && i < fp8_checkpoint_tensor_count(ck); i++) {
        size_t shard;
        long layer;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, &shard);
        const char *rule;
        char *why = NULL;
        if (kv_naming_of(t->name, &layer) &&
            !(st = kv_scale_judge(ctx, ck, t, shard,
                                  !fp8_file_is_compressed(fp8_checkpoint_shard(ck, shard)),
                                  &rule, &why)) &&
            rule)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s (verify: %s)", why, rule);
        free(why);
    }
    return st;
}

fp8_status fp8_convert_create(fp8_ctx *ctx, const char *input, const fp8_convert_options *opts,
                              fp8_convert **out)
{
    fp8_convert *c = calloc(1, sizeof *c);
    cJSON *config = NULL;
    bool ue8m0 = false;
    *out = NULL;
    if (!c)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&c->lock, NULL);
    c->opts = *opts;
    c->opts.target.ignore = NULL;
    c->opts.target.nignore = 0;
    fp8_status st = fp8_checkpoint_open(ctx, input, &c->ck);
    if (!st)
        st = check_kv(ctx, c->ck);
    if (!st)
        st = cast_plan_create(ctx, c->ck, input, opts, &c->cast);
    if (!st && c->cast) {
        *out = c;
        return FP8_OK;
    }
    if (!st && fp8_checkpoint_is_directory(c->ck))
        st = fmt_config_read(ctx, input, &config, NULL); /* ModelOpt's side file too */
    if (!st)
        st = par_config_check(ctx, input, config);
    if (!st)
        st = resolve_target(ctx, c, config, &ue8m0);
    if (!st)
        st = take_profile(ctx, c);
    if (!st)
        st = dq_weights_open(ctx, c->ck, fp8_checkpoint_is_directory(c->ck) ? input : NULL, &c->dq);
    if (!st) /* the value rules, as dequantize-for-export (and verify) judge them */
        st = dq_weights_check(ctx, c->dq, dq_judged_dtype(config, c->ck));
    if (!st)
        st = find_weights(ctx, c, input);
    if (!st)
        st = plan_kv(ctx, c);
    if (!st)
        st = plan_acts(ctx, c);
    for (size_t i = 0; !st && i < c->n; i++)
        st = plan_weight(ctx, c, i, ue8m0);
    if (!st)
        recover_ue8m0(c);
    if (!st) /* the plan's tensors are looked up by scale name too */
        qsort_r(c->by_scale, c->n, sizeof *c->by_scale, cmp_by_scale, c);
    c->source = (fp8_quant_source){ .user = c, .tensor = source_tensor, .read = source_read,
                                    .quantized = source_quantized };
    fp8_quant_options target;
    if (!st)
        st = plan_target(ctx, c, &target);
    if (!st)
        st = fp8_quant_plan_create_from(ctx, input, &target, &c->source, &c->plan);
    cJSON_Delete(config);
    if (st)
        fp8_convert_free(c);
    else
        *out = c;
    return st;
}

fp8_status fp8_convert_run(fp8_ctx *ctx, fp8_convert *c, const char *output)
{
    if (c->cast)
        return cast_plan_write(ctx, c->cast, output);
    for (size_t i = 0; i < c->n; i++)
        c->weights[i].pub.changed = c->weights[i].pub.codes_changed = 0,
        c->weights[i].pub.max_change = 0;
    return fp8_quant_plan_run(ctx, c->plan, output);
}

void fp8_convert_free(fp8_convert *c)
{
    if (!c)
        return;
    fp8_quant_plan_free(c->plan);
    cast_plan_free(c->cast);
    for (size_t i = 0; c->weights && i < c->n; i++) {
        free((char *)c->weights[i].pub.why);
        free(c->weights[i].scale_name);
        free(c->weights[i].tiles);
    }
    for (size_t i = 0; i < c->nkv_renamed; i++)
        free((char *)c->kv[i].info.name);
    for (size_t i = 0; i < c->nacts; i++)
        if (c->acts[i].info.name != c->acts[i].src->name)
            free((char *)c->acts[i].info.name);
    free(c->acts);
    free(c->kv);
    free(c->weights);
    free(c->by_scale);
    dq_weights_free(c->dq);
    fp8_checkpoint_close(c->ck);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const fp8_quant_options *fp8_convert_target(const fp8_convert *c) { return &c->opts.target; }
const fp8_quant_plan *fp8_convert_plan(const fp8_convert *c) { return c->plan; }
size_t fp8_convert_weight_count(const fp8_convert *c) { return c->n; }
const fp8_convert_weight *fp8_convert_weight_at(const fp8_convert *c, size_t i)
{
    return i < c->n ? &c->weights[i].pub : NULL;
}
void fp8_convert_get_report(const fp8_convert *c, fp8_convert_report *r)
{
    if (c->cast) {
        cast_plan_report(c->cast, r);
        return;
    }
    const fp8_quant_options *o = &c->opts.target;
    *r = (fp8_convert_report){ .scheme = o->scheme, .block_rows = o->block_rows,
                               .block_cols = o->block_cols,
                               .format = fp8_format_name(fp8_quant_plan_format(c->plan)),
                               .dropped = c->dropped, .act_scales = c->nacts,
                               .kv_scales = c->nkv,
                               .kv_renamed = c->nkv_renamed,
                               .kv_names = c->nkv_renamed ? c->kv_names : NULL };
    for (size_t i = 0; i < c->n; i++)
        r->exact += c->weights[i].pub.exact;
    r->requantized = c->n - r->exact;
}
