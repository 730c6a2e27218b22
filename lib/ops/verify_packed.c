/*
 * verify_packed.c - verify --against SRC for the packed weights (NVFP4,
 * MXFP4, INT4): each found with its logical weight in SRC, checked group by
 * group against it (fp8conv-formats(5), ERROR BOUND: a group's scale serves
 * its largest element, each code is the nearest value), and re-quantized
 * with quantize's own plan for its scheme, global pass included.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/verify_packed.h"
#include "io/safetensors.h"
#include "compute/diff_cpu.h"
#include "compute/int4_ref.h"
#include "compute/quant_cpu.h"

/* ---------------------------------------------------------------- the weights */

/* The slot of plans[] of a re-quantized item's scheme. */
static int plan_of(const against *f, const ag_item *it)
{
    int k = 0;
    while (f->plan_scheme[k] != (fp8_scheme)(it->rule.scheme - fp8_scheme_table))
        k++;
    return k;
}

static bool in_sorted(const char *const *names, size_t n, const char *name)
{
    return n && bsearch(&name, names, n, sizeof *names, fp8_cmp_str) != NULL;
}

/* Whether tensor `name` of v->ck (src_side false: a packed weight, its
 * scales) or of SRC (true: a packed weight's logical weight) is a packed
 * weight's, which the FP8 loops leave alone. */
bool against_packed_owns(const against *f, const char *name, bool src_side)
{
    return src_side ? in_sorted(f->src_owned, f->nsrc, name)
                    : in_sorted(f->ck_owned, f->nck, name);
}

/* bsearch of the packed weights (in v->ck's order, by name) for a name */
static int cmp_item(const void *name, const void *item)
{
    return strcmp(name, ((const ag_item *)item)->t->name);
}

const ag_item *against_packed_find(const against *f, const char *name)
{
    return bsearch(name, f->items, f->npacked, sizeof *f->items, cmp_item);
}

/* Whether quantize writes layout l: a format's row of its scheme names it. */
static bool requantizable(const fp4_layout *l)
{
    fp8_scheme sch = (fp8_scheme)(l->scheme - fp8_scheme_table);
    for (int f = 0; f <= FP8_FORMAT_FBGEMM_FP8; f++)
        if (fmt_code_layout(fmt_spec_find((fp8_format)f, sch)) == l)
            return true;
    return false;
}

/* Its source: the logical weight w.out_name of SRC, with the unpacked shape
 * and a float dtype; an against-set finding when it is not so. */
static fp8_status find_source(fp8_ctx *ctx, against *f, ag_item *it)
{
    fp8_verify *v = f->v;
    int rank;
    uint64_t shape[3];
    char want[96], got[96];
    fp4_layout_out_shape(it->w.l, it->w.experts, it->w.rows, it->w.cols, &rank, shape);
    const fp8_tensor_info *x = fp8_checkpoint_find(f->src, it->w.out_name, &it->xshard);
    /* a weight quantize wrote apart from SRC's fused experts */
    if (!x && (it->part = quant_part_find(f->src, f->src_config, it->w.out_name, &it->xshard)))
        x = &it->part->t;
    if (!x)
        return verify_add(ctx, v, FP8_SEV_ERROR, "against-set",
                          "%s: %s: packed %s, but its weight %s is not in %s", v->path,
                          it->t->name, it->w.l->name, it->w.out_name, f->src_path);
    if (!verify_has_shape(x, rank, shape)) {
        fp8_shape_text(rank, shape, want, sizeof want);
        fp8_shape_text(x->rank, x->shape, got, sizeof got);
        return verify_add(ctx, v, FP8_SEV_ERROR, "against-set",
                          "%s: %s: packed %s, its weight %s %s, but %s in %s", v->path,
                          it->t->name, it->w.l->name, it->w.out_name, want, got, f->src_path);
    }
    if (!fp8_dtype_is_float(x->dtype))
        return verify_add(ctx, v, FP8_SEV_ERROR, "against-set",
                          "%s: %s: packed %s, but its weight %s is %s in %s, not bf16, f16 or f32",
                          v->path, it->t->name, it->w.l->name, it->w.out_name,
                          fp8_dtype_name(x->dtype), f->src_path);
    it->x = x;
    return FP8_OK;
}

/* Owns name `name` on one side (the FP8 loops leave it alone). */
static fp8_status own(fp8_ctx *ctx, const char ***names, size_t *n, size_t *cap, const char *name)
{
    if (!fp8_grow(names, *n, cap, sizeof **names))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    (*names)[(*n)++] = name;
    return FP8_OK;
}

/* One tensor of v->ck: a packed FP4 weight that SRC does not hold as it is
 * (a packed tensor quantize kept, gpt-oss _blocks beside bf16 weights, is
 * the FP8 loops' kept tensor). */
static fp8_status collect_one(fp8_ctx *ctx, against *f, const fp8_tensor_info *t,
                              size_t shard, size_t *cap, size_t *ckcap, size_t *srccap)
{
    fp8_verify *v = f->v;
    char *sname = NULL, *oname = NULL;
    const fp4_layout *l = fp4_layout_match(v->ck, t->name, t->dtype, t->rank, &sname, &oname);
    const fp8_tensor_info *kept = l ? fp8_checkpoint_find(f->src, t->name, NULL) : NULL;
    bool as_is = kept && kept->dtype == t->dtype && verify_has_shape(kept, t->rank, t->shape);
    fp8_status st = l && !sname ? fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory") : FP8_OK;
    if (st || !l || as_is)
        goto out;
    fp4_weight w;
    fp8_ctx *wctx = fp8_ctx_create();
    /* a packed weight that falls short is verify's own finding (missing-scale,
     * scale-shape, ...): here it is only left unjudged */
    fp8_status found = wctx ? fp4_weight_find(wctx, v->ck, t, shard, "checked", &w) : FP8_ERR_NOMEM;
    fp8_ctx_free(wctx);
    if (found == FP8_ERR_NOMEM || found == FP8_ERR_IO) {
        st = fp8_fail(ctx, found, "%s: tensor '%s': cannot read its scales", v->path, t->name);
        goto out;
    }
    if (!found && !w.l) /* an int8 tensor, not packed FP4 */
        goto out;
    if (!fp8_grow(&f->items, f->npacked, cap, sizeof *f->items)) {
        if (!found)
            fp4_weight_free(&w);
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    ag_item *it = &f->items[f->npacked++];
    *it = (ag_item){ .t = t, .shard = shard, .item = SIZE_MAX, .first = UINT64_MAX,
                     .first_scale = UINT64_MAX };
    if (!found)
        it->w = w;
    it->requant = requantizable(l);
    f->nrequant += it->requant;
    st = own(ctx, &f->ck_owned, &f->nck, ckcap, t->name);
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, sname, NULL);
    if (!st && s)
        st = own(ctx, &f->ck_owned, &f->nck, ckcap, s->name);
    /* NVFP4's second level, INT4's shape: found or not */
    const char *side[] = { l->global_suffix, l->shape_suffix };
    for (int k = 0; k < 2 && !st; k++) {
        const fp8_tensor_info *g =
            side[k] ? ck_find_with(v->ck, t->name, strlen(t->name) - strlen(l->weight_suffix),
                                   side[k], NULL)
                    : NULL;
        if (g)
            st = own(ctx, &f->ck_owned, &f->nck, ckcap, g->name);
    }
    const fp8_tensor_info *x = fp8_checkpoint_find(f->src, oname, NULL);
    if (!st && x)
        st = own(ctx, &f->src_owned, &f->nsrc, srccap, x->name);
    if (st || !it->w.l)
        goto out;
    if ((st = find_source(ctx, f, it)) || !it->x)
        goto out;
    if (it->part) /* SRC's fused tensor, which the weights written apart account for */
        st = own(ctx, &f->src_owned, &f->nsrc, srccap, it->part->fused->name);
    it->rows = it->w.rows;
    it->cols = it->w.cols;
    /* gpt-oss stores its experts transposed ([E, cols, rows] unpacked):
     * left out of the bound, with a note */
    it->bound = l->weight_rank == 2 && !l->transpose && fp8_scheme_has_group_bound(l->scheme);
    it->rule = (fp8_group_rule){ .scheme = l->scheme, .divides = l->global_divides,
                           .second = it->w.second ? it->w.global : 1 };
    for (int k = 0; it->requant && k <= f->nplans; k++) { /* its scheme's plan, in order */
        fp8_scheme sch = (fp8_scheme)(l->scheme - fp8_scheme_table), *at = &f->plan_scheme[k];
        if (k < f->nplans && *at == sch)
            break;
        if (k == f->nplans || *at > sch) {
            memmove(at + 1, at, (size_t)(f->nplans++ - k) * sizeof *at);
            *at = sch;
            break;
        }
    }
out:
    free(sname);
    free(oname);
    return st;
}

/* The layouts left out (quantize does not write them; gpt-oss's values are
 * stored transposed): one note each, naming the first weight. */
static fp8_status note_skipped(fp8_ctx *ctx, against *f)
{
    fp8_status st = FP8_OK;
    for (int id = 0; id < FP4_LAYOUT_COUNT && !st; id++) {
        const fp4_layout *l = fp4_layout_get((fp4_layout_id)id);
        size_t count = 0, unbound = 0;
        const ag_item *first = NULL;
        for (size_t i = 0; i < f->npacked; i++)
            if (f->items[i].w.l == l && f->items[i].x && !f->items[i].requant) {
                first = first ? first : &f->items[i];
                count++;
                unbound += !f->items[i].bound;
            }
        if (count)
            st = verify_add(ctx, f->v, FP8_SEV_NOTE, "against-skipped",
                            "%s: %s: %zu packed %s weight%s not re-quantized from %s: quantize "
                            "does not write that layout%s",
                            f->v->path, first->t->name, count, l->name, count == 1 ? "" : "s",
                            f->src_path,
                            unbound ? "; nor are their values checked against it (stored "
                                      "transposed)"
                                    : "");
    }
    return st;
}

void against_packed_free(against *f)
{
    for (size_t i = 0; i < f->npacked; i++) {
        fp4_weight_free(&f->items[i].w);
        quant_part_free(f->items[i].part);
    }
    cJSON_Delete(f->src_config);
    free(f->items);
    free(f->ck_owned);
    free(f->src_owned);
    for (int k = 0; k < f->nplans; k++)
        fp8_quant_plan_free(f->plans[k]);
}

/* The packed weights of v->ck that SRC does not hold as they are, each
 * with its logical weight in SRC (an against-set finding where there is
 * none; a note for the layouts quantize does not write). */
fp8_status against_packed_open(fp8_ctx *ctx, against *f)
{
    fp8_verify *v = f->v;
    if (fp8_checkpoint_is_directory(f->src)) { /* no config: no fused experts written apart */
        fp8_ctx *cctx = fp8_ctx_create();
        if (cctx && ck_config_read(cctx, f->src_path, &f->src_config))
            f->src_config = NULL;
        fp8_ctx_free(cctx);
    }
    size_t cap = 0, ckcap = 0, srccap = 0;
    fp8_status st = FP8_OK;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(v->ck) && !st; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &shard);
        st = collect_one(ctx, f, t, shard, &cap, &ckcap, &srccap);
    }
    if (f->nck)
        qsort(f->ck_owned, f->nck, sizeof *f->ck_owned, fp8_cmp_str);
    if (f->nsrc)
        qsort(f->src_owned, f->nsrc, sizeof *f->src_owned, fp8_cmp_str);
    return st ? st : note_skipped(ctx, f);
}

/* ---------------------------------------------------------------- re-quantization's plans */

typedef struct {
    const char **names; /* sorted */
    size_t n;
} wanted_by;

/* The source tensors a plan quantizes: the logical weights of the packed
 * weights of its scheme that are re-quantized. */
static bool wanted(void *user, const char *name)
{
    const wanted_by *w = user;
    return in_sorted(w->names, w->n, name);
}

/* Quantize's plan for SRC with options `o`, of the tensors `want` says (all
 * for NULL), with NVFP4's global pass when `globals`: *plan NULL when
 * quantize refuses SRC (then re-quantizing is not possible); an error only
 * when it cannot read SRC. */
fp8_status against_plan_make(fp8_ctx *ctx, const char *src_path, const fp8_quant_options *o,
                             bool (*want)(void *user, const char *name), void *user, bool globals,
                             fp8_quant_plan **plan)
{
    fp8_ctx *qctx = fp8_ctx_create();
    fp8_status st = qctx ? quant_plan_create_only(qctx, src_path, o, want, user, plan)
                         : FP8_ERR_NOMEM;
    if (!st && globals) {
        (*plan)->device = FP8_DEVICE_CPU;
        st = quant_plan_fp4_globals(qctx, *plan);
    }
    if (st == FP8_ERR_IO || st == FP8_ERR_NOMEM) {
        st = fp8_fail(ctx, st, "--against %s: %s", src_path,
                      qctx ? fp8_ctx_message(qctx) : "out of memory");
    } else if (st) {
        fp8_quant_plan_free(*plan);
        *plan = NULL;
        st = FP8_OK;
    }
    fp8_ctx_free(qctx);
    return st;
}

/* Quantize's plan for SRC with each FP4 scheme the checkpoint holds,
 * compressed-tensors' (the ModelOpt twin's codes and group scales are the
 * same; its second level is the reciprocal), quantizing what the
 * checkpoint holds packed; then NVFP4's global pass.  What quantize refuses
 * (an f16 weight, a NaN) makes re-quantizing impossible.  With `profile`'s
 * numerics; called again (--profile auto) it replaces the plans. */
fp8_status against_packed_plans(fp8_ctx *ctx, against *f, fp8_profile profile, int threads,
                                const volatile sig_atomic_t *cancel)
{
    f->fp4_impossible = false;
    for (size_t i = 0; i < f->npacked; i++) {
        f->items[i].item = SIZE_MAX;
        f->items[i].differs[0] = false;
    }
    for (int k = 0; k < f->nplans; k++) {
        fp8_quant_plan_free(f->plans[k]);
        f->plans[k] = NULL;
        fp8_quant_options o = FP8_QUANT_OPTIONS_INIT;
        o.scheme = f->plan_scheme[k];
        o.profile = profile;
        o.format = FP8_FORMAT_COMPRESSED_TENSORS;
        o.no_default_ignore = true;
        o.threads = threads;
        o.device = FP8_DEVICE_CPU;
        o.cancel = cancel;
        wanted_by w = { fp8_xcalloc(f->npacked + 1, sizeof *w.names), 0 };
        for (size_t i = 0; w.names && i < f->npacked; i++)
            if (f->items[i].requant && f->items[i].x && plan_of(f, &f->items[i]) == k) {
                w.names[w.n++] = f->items[i].x->name;
                if (fp8_scheme_get(o.scheme)->run_alt) /* the group the checkpoint chose (INT4) */
                    o.block_cols = f->items[i].w.run;
            }
        if (w.names)
            qsort(w.names, w.n, sizeof *w.names, fp8_cmp_str);
        fp8_status st = w.names ? against_plan_make(ctx, f->src_path, &o, wanted, &w, true, &f->plans[k])
                                : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        free(w.names);
        if (st)
            return st;
        f->fp4_impossible |= !f->plans[k];
    }
    for (size_t i = 0; i < f->npacked; i++) {
        ag_item *it = &f->items[i];
        const fp8_quant_plan *p = it->requant && it->x ? f->plans[plan_of(f, it)] : NULL;
        if (p)
            it->item = quant_plan_find(p, it->x->name);
        it->plan = p;
        if (it->item == SIZE_MAX) {
            it->differs[0] = true;
            continue;
        }
        /* the stored second level: compressed-tensors' global, or ModelOpt's
         * fp32 reciprocal of it (convert --format modelopt's) */
        if (it->w.second) {
            float g = p->entries[it->item].global, want = it->w.l->global_divides ? g : 1.0f / g;
            it->differs[0] = fp8_f32_bits(want) != fp8_f32_bits(it->w.global);
        }
    }
    return FP8_OK;
}


/* ---------------------------------------------------------------- packed weights */

/* Adds a group's verdict to its weight's totals; `at` is its first
 * element's flat index, `g` the group's. */
static void group_add(against *a, ag_item *it, const fp8_group_bound *r, const void *x,
                      const uint8_t *packed, uint8_t scale, uint64_t at, uint64_t g)
{
    if (r->clipped)
        __atomic_add_fetch(&it->clipped, r->clipped, __ATOMIC_RELAXED);
    if (r->bad)
        __atomic_add_fetch(&it->bad, r->bad, __ATOMIC_RELAXED);
    if (r->bad_scale)
        __atomic_add_fetch(&it->bad_scales, 1, __ATOMIC_RELAXED);
    if (!r->bad && !r->bad_scale)
        return;
    uint32_t run = it->w.run;
    double m = 0, s = fp8_elem_get(it->rule.scheme->scale_elem[0])->decode(scale);
    double d = fp8_group_divisor(&it->rule, scale);
    for (uint32_t i = 0; i < run; i++) {
        double ax = fabs((double)fp8_load_f32(it->x->dtype, x, i));
        m = ax > m ? ax : m;
    }
    pthread_mutex_lock(&a->lock);
    if (r->bad_scale && g < it->first_scale) {
        it->first_scale = g;
        it->first_m = m;
        it->first_s = s;
    }
    if (r->bad && at + r->first_bad < it->first) {
        it->first = at + r->first_bad;
        it->first_x = fp8_load_f32(it->x->dtype, x, r->first_bad);
        it->first_d = d;
        it->first_code = packed[r->first_bad / 2] >> (4 * (r->first_bad & 1)) & 0xF;
    }
    pthread_mutex_unlock(&a->lock);
}

/* The bound and the re-quantization of rows [row0, row0 + nrows) of a
 * packed weight, read as against_one reads every band. */
void against_packed_band(against *a, ag_item *it, uint64_t row0, uint64_t nrows,
                         const unsigned char *src, const uint8_t *codes, const uint8_t *scales,
                         uint8_t *q, uint8_t *sq, float *qbuf, fp8_quality *quality)
{
    uint32_t run = it->w.run;
    uint64_t n = nrows * it->cols, at = row0 * it->cols, xs = fp8_dtype_bits(it->x->dtype) / 8;
    /* each row's values: an E2M1 code times its group's divisor (a NaN
     * scale: NaN); INT4's as its dequantizer reads them */
    const fp8_elem_traits *ce = fp8_elem_get(it->rule.scheme->elem),
                          *se = fp8_elem_get(it->rule.scheme->scale_elem[0]);
    bool e2m1 = fp8_scheme_has_group_bound(it->rule.scheme);
    float value[16];
    for (unsigned c = 0; e2m1 && c < 16; c++)
        value[c] = ce->decode((uint8_t)c);
    uint64_t sb = fp8_dtype_bits(it->s->dtype) / 8, bad_at;
    bool once = !a->fp4_pass; /* the quality and the bound: the main pass's */
    for (uint64_t r = 0; once && run && r < nrows; r++) {
        float *y = qbuf + it->cols;
        double d = 0;
        for (uint64_t c0 = 0, i = r * it->cols; e2m1 && c0 < it->cols; c0 += run, i += run) {
            uint8_t sc = scales[i / run]; /* a row is whole groups, of an even run */
            d = se->is_nan(sc) ? 0.0 / 0.0 : fp8_group_divisor(&it->rule, sc);
            for (uint64_t k = 0; k < run; k += 2) {
                uint8_t b = codes[(i + k) / 2];
                y[c0 + k] = (float)(value[b & 0xF] * d);
                y[c0 + k + 1] = (float)(value[b >> 4] * d);
            }
        }
        if (!e2m1 && fp8_int4_dequant_row(codes + r * it->cols / 2, scales + r * it->cols / run * sb,
                                          it->s->dtype, it->cols, run, FP8_DTYPE_F32, y,
                                          &bad_at) == FP8_INT4_DEQ_BAD_SCALE)
            for (uint64_t c = 0; c < it->cols; c++)
                y[c] = 0.0f / 0.0f;
        diff_to_f32(it->x->dtype, src + r * it->cols * xs, it->cols, qbuf); /* a row a span */
        diff_quality_values(qbuf, y, it->cols, quality);
    }
    for (uint64_t g = 0; once && it->bound && g < n / run; g++) {
        fp8_group_bound r;
        const unsigned char *x = src + g * run * xs;
        fp8_e2m1_bound_group_ref(&it->rule, it->x->dtype, x, codes + g * run / 2, run, scales[g], &r);
        group_add(a, it, &r, x, codes + g * run / 2, scales[g], at + g * run, at / run + g);
    }
    if (it->item == SIZE_MAX)
        return;
    /* quantize's band of the plan: the scheme's row, its second level */
    fp8_band b;
    uint64_t first, where;
    fp8_quant_plan_band(it->plan, it->item, 0, row0, nrows, 0, it->cols, &b, &first);
    if (fp8_band_quantize(&b, src, q, sq, &where) != FP8_BAND_OK)
        __atomic_store_n(&a->fp4_impossible, true, __ATOMIC_RELAXED);
    else if (memcmp(q, codes, n / 2) != 0 ||
             memcmp(sq, scales, n / run * (fp8_dtype_bits(it->s->dtype) / 8)) != 0)
        __atomic_store_n(&it->differs[0], true, __ATOMIC_RELAXED);
}

/* A packed weight's findings: against-scale, against-bound, against-clipped. */
fp8_status against_packed_report(fp8_ctx *ctx, const against *f, const ag_item *it)
{
    fp8_verify *v = f->v;
    fp8_status st = FP8_OK;
    if (!it->bound || !it->x)
        return FP8_OK;
    uint64_t elems = it->rows * it->cols, run = it->w.run;
    bool pow2 = it->rule.scheme->pow2_scales;
    const char *d = pow2               ? "d = 2^(scale - 127)"
                    : it->rule.divides ? "d = scale / global"
                                       : "d = scale * weight_scale_2";
    const char *serves = pow2 ? "largest / d in [3, 8)"
                         : it->rule.divides
                             ? "within one E4M3 code of largest * global / 6"
                             : "within one E4M3 code of largest / (6 * weight_scale_2)";
    if (it->bad_scales)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "against-scale",
                        "%s: %s: %llu of %llu group scales of %s do not serve their group's "
                        "largest element of %s (wanted: %s); first: group %llu (row %llu, columns "
                        "%llu..%llu), largest |x| = %.9g, scale = %.9g",
                        v->path, it->w.scale->name, (unsigned long long)it->bad_scales,
                        (unsigned long long)(elems / run), it->t->name, f->src_path, serves,
                        (unsigned long long)it->first_scale,
                        (unsigned long long)(it->first_scale * run / it->cols),
                        (unsigned long long)(it->first_scale * run % it->cols),
                        (unsigned long long)(it->first_scale * run % it->cols + run - 1),
                        it->first_m, it->first_s);
    if (!st && it->bad)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "against-bound",
                        "%s: %s: %llu of %llu elements are not the E2M1 value nearest x / d "
                        "of %s (%s, their group's divisor); first at %llu (row %llu, column "
                        "%llu): x = %.9g, x / d = %.9g, code %u = %g",
                        v->path, it->t->name, (unsigned long long)it->bad,
                        (unsigned long long)elems, f->src_path, d,
                        (unsigned long long)it->first,
                        (unsigned long long)(it->first / it->cols),
                        (unsigned long long)(it->first % it->cols), it->first_x,
                        it->first_x / it->first_d, it->first_code,
                        (double)fp8_elem_get(it->rule.scheme->elem)->decode((uint8_t)it->first_code));
    /* a scale that serves its group may still clip: E4M3's subnormal
     * steps (2^-9) are coarse, so t rounded down leaves largest / d past
     * 7; no fault of the checkpoint, said as a note */
    if (!st && it->clipped)
        st = verify_add(ctx, v, FP8_SEV_NOTE, "against-clipped",
                        "%s: %s: %llu element%s of %s beyond 7 * d (%s) clipped to +-6 under "
                        "group scales that serve their groups",
                        v->path, it->t->name, (unsigned long long)it->clipped,
                        it->clipped == 1 ? "" : "s", f->src_path, d);
    return st;
}
