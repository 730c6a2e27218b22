/*
 * convert_nvfp4.c - convert's two casts to NVFP4 (fp8conv(1) convert,
 * CASTS; fp8conv-formats(5), Casts, which give the sources; the plan they
 * fill and its writer are convert_cast.c's): NVFP4 between ModelOpt and
 * compressed-tensors, which keeps every code and group scale, and
 * compressed-tensors MXFP4 to NVFP4, which keeps every value.  Each
 * section below says how.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fp8_math.h"
#include "io/checkpoint.h"
#include "layout/formats.h"
#include "layout/fp4.h"
#include "layout/kvscale.h"
#include "ops/convert_items.h"
#include "ops/convert_nvfp4.h"

/* ---------------------------------------------------------------- NVFP4 */

/*
 * NVFP4 between ModelOpt and compressed-tensors (fp4.h's two NVFP4 rows):
 * the codes and the E4M3 group scales are copied, renamed; the second
 * level (and the activations', W4A4) is a multiplier in ModelOpt and a
 * divisor in compressed-tensors, so each becomes its fp32 reciprocal:
 * exact when the scale is a power of two, else the nearest (a change of at
 * most 2^-24 of each value), counted in the report; --exact refuses it.
 */

/* A second-level scale item: its reciprocal, under the target's name and
 * rank; *rounded when the reciprocal is not exact. */
static fp8_status plan_recip(fp8_ctx *ctx, cast_plan *p, cast_item *it, const char *stem_name,
                             size_t stem, const char *suffix, int rank, bool exact)
{
    const char *file = fp8_checkpoint_shard_name(p->ck, it->shard);
    float g;
    if (it->t->dtype != FP8_DTYPE_F32 || it->t->elements != 1 || it->t->rank > 1)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': an NVFP4 second-level scale must be one F32", file,
                        it->t->name);
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->shard), it->t, 0, &g, 4);
    if (st)
        return st;
    if (!(g > 0) || !isfinite(g))
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': %g is not a finite positive scale", file, it->t->name,
                        (double)g);
    *it = (cast_item){ .t = it->t, .shard = it->shard, .kind = CAST_RECIP, .value = 1.0f / g,
                       .out_dtype = FP8_DTYPE_F32, .out_rank = rank, .out_shape = { 1, 1 } };
    if (asprintf(&it->out_name, "%.*s%s", (int)stem, stem_name, suffix) < 0) {
        it->out_name = NULL;
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    }
    /* a product of two 24-bit significands is exact in double */
    if (isfinite(it->value) && it->value > 0 && (double)it->value * (double)g == 1.0)
        return FP8_OK;
    if (!isfinite(it->value) || !(it->value > 0))
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor '%s': its reciprocal 1 / %g is beyond fp32", file,
                        it->t->name, (double)g);
    if (exact)
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: tensor '%s': --exact: its reciprocal 1 / %.9g is no fp32 value (the "
                        "scale is not a power of two): as '%s' it would change every value it "
                        "scales by up to 2^-24 of itself",
                        file, it->t->name, (double)g, it->out_name);
    p->rounded++;
    return FP8_OK;
}

/* What else a cast to NVFP4 would carry over unread: another quantized
 * tensor (`what`: the weights the cast reads). */
static fp8_status check_carried(fp8_ctx *ctx, const cast_plan *p, const char *what)
{
    fp8_status st = FP8_OK;
    for (size_t i = 0; !st && i < p->n; i++) {
        const cast_item *it = &p->items[i];
        long layer;
        if (it->kind != CAST_COPY || it->out_name)
            continue;
        if (kv_naming_of(it->t->name, &layer) ||
            (fp8_dtype_holds_codes(it->t->dtype) && !fp4_is_group_scale(p->ck, it->t->name)))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': the cast to NVFP4 carries %s weights only (an FP8 "
                          "weight or KV-cache scale beside them is not converted)",
                          fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name, what);
    }
    return st;
}

fp8_status nv_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, bool *handled)
{
    *handled = true;
    fp8_status st = fp4_cast_pick(ctx, p->input, o, &p->cast, fp4_layout_get(p->cast->from));
    const fp4_layout *from = fp4_layout_get(p->cast->from), *to = fp4_layout_get(p->cast->to);
    for (size_t i = 0; !st && i < p->n; i++) {
        const fp4_layout *l;
        cast_item *it = &p->items[i], *sc = cast_scale_of(p, it->t, &l);
        if (!sc || l != from)
            continue;
        size_t stem = strlen(it->t->name) - strlen(from->weight_suffix);
        char *gname = NULL, *iname = NULL;
        if (asprintf(&gname, "%.*s%s", (int)stem, it->t->name, from->global_suffix) < 0 ||
            asprintf(&iname, "%.*s%s", (int)stem, it->t->name, from->input_suffix) < 0 ||
            asprintf(&it->out_name, "%.*s%s", (int)stem, it->t->name, to->weight_suffix) < 0)
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        cast_item *g = st ? NULL : cast_item_named(p, gname, false);
        cast_item *in = st ? NULL : cast_item_named(p, iname, false);
        if (!st && !g)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': an NVFP4 weight without its second-level scale '%s'",
                          fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name, gname);
        else if (!st && (p->nvfp4 ? (in != NULL) != p->acts : false))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': %s '%s', unlike the NVFP4 weights before it: the "
                          "cast takes weight-only NVFP4 (W4A16) or weights and activations in 4 "
                          "bits (W4A4), one for every weight",
                          fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name,
                          in ? "it has" : "no", iname);
        p->acts = p->nvfp4 ? p->acts : in != NULL;
        if (!st)
            st = plan_recip(ctx, p, g, it->t->name, stem, to->global_suffix,
                            to->global_rank, o->exact);
        if (!st && in)
            st = plan_recip(ctx, p, in, it->t->name, stem, to->input_suffix, to->global_rank,
                            o->exact);
        p->nvfp4++;
        free(gname);
        free(iname);
    }
    return st ? st : check_carried(ctx, p, "NVFP4");
}

/* The ignore list a config declares (compressed-tensors "ignore"; ModelOpt
 * "ignore" in config.json, "exclude_modules" in hf_quant_config.json:
 * formats.c ignore_keys), a copy; patterns of one format are not the other's. */
static fp8_status nv_ignore(fp8_ctx *ctx, const cJSON *qc, const cJSON *side, bool from_ct,
                            bool to_ct, const char *input, cJSON **out)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(
        qc, fmt_ignore_key(from_ct ? FP8_FORMAT_COMPRESSED_TENSORS : FP8_FORMAT_MODELOPT));
    if (!list && !from_ct && side)
        list = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(side, "quantization"), "exclude_modules");
    *out = list ? cJSON_Duplicate(list, true) : cJSON_CreateArray();
    const cJSON *e;
    cJSON_ArrayForEach(e, *out) {
        const char *v = cJSON_IsString(e) ? e->valuestring : NULL;
        /* compressed-tensors: "re:" regular expressions; ModelOpt: fnmatch wildcards */
        if (!v || (from_ct != to_ct && from_ct && !strncmp(v, "re:", 3)) ||
            (from_ct != to_ct && !from_ct && strpbrk(v, "*?[")))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: config.json: ignore entry %s: a pattern of the input's format, "
                            "which the other does not read alike; the NVFP4 cast copies module "
                            "names only",
                            input, v ? v : "(not a string)");
    }
    return FP8_OK;
}

/* config.json (and ModelOpt's hf_quant_config.json) of the NVFP4 target,
 * as testdata/gen_fp4.py writes each (compressed-tensors' NVFP4 or
 * NVFP4A16 preset; ModelOpt's export: fmt_modelopt_fp4_config and
 * fmt_modelopt_side say why that shape).  from_ct: the input's config is
 * compressed-tensors'; acts: the activations are NVFP4 too (W4A4), else
 * the weights alone (W4A16). */
fp8_status nv_write_config(fp8_ctx *ctx, const cast_plan *p, const char *dir)
{
    cJSON *config = p->config;
    bool from_ct = p->cast->input_format == FP8_FORMAT_COMPRESSED_TENSORS;
    bool to_ct = p->cast->format == FP8_FORMAT_COMPRESSED_TENSORS, acts = p->acts;
    cJSON *side = NULL, *ignore = NULL;
    fp8_status st = ck_json_read(ctx, p->input, HF_QUANT_CONFIG, &side);
    const cJSON *qc = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    if (!st) {
        const cJSON *kv = cJSON_GetObjectItemCaseSensitive(qc, from_ct ? "kv_cache_scheme"
                                                                       : "kv_cache_quant_algo");
        if (kv && !cJSON_IsNull(kv))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: config.json: a quantized KV cache: the NVFP4 cast does not convert "
                          "it",
                          p->input);
    }
    if (!st)
        st = nv_ignore(ctx, qc, side, from_ct, to_ct, p->input, &ignore);
    cJSON_Delete(side);
    side = NULL;
    if (st) {
        cJSON_Delete(ignore);
        return st;
    }
    cJSON *q = to_ct ? cJSON_CreateObject() : fmt_modelopt_fp4_config(ignore, acts);
    if (!to_ct) /* its side file's list a copy of the one q now holds */
        side = fmt_modelopt_side(acts ? "NVFP4" : "W4A16_NVFP4", cJSON_Duplicate(ignore, true),
                                 fp8_scheme_get(p->cast->scheme)->run, false);
    if (to_ct) {
        cJSON *groups = cJSON_AddObjectToObject(q, "config_groups");
        cJSON *g0 = cJSON_AddObjectToObject(groups, "group_0");
        cJSON *w = cJSON_CreateObject();
        cJSON_AddNullToObject(w, "actorder");
        cJSON_AddNullToObject(w, "block_structure");
        cJSON_AddFalseToObject(w, "dynamic");
        cJSON_AddNumberToObject(w, "group_size", 16);
        cJSON_AddNumberToObject(w, "num_bits", 4);
        cJSON_AddStringToObject(w, "observer", "minmax");
        cJSON_AddObjectToObject(w, "observer_kwargs");
        cJSON_AddStringToObject(w, "scale_dtype", "torch.float8_e4m3fn");
        cJSON_AddStringToObject(w, "strategy", "tensor_group");
        cJSON_AddTrueToObject(w, "symmetric");
        cJSON_AddStringToObject(w, "type", "float");
        cJSON_AddNullToObject(w, "zp_dtype");
        cJSON *a = acts ? cJSON_Duplicate(w, true) : cJSON_CreateNull();
        if (acts) /* dynamic "local": a per-group scale made at run time */
            cJSON_ReplaceItemInObjectCaseSensitive(a, "dynamic", cJSON_CreateString("local"));
        cJSON_AddItemToObject(g0, "input_activations", a);
        cJSON_AddNullToObject(g0, "output_activations");
        cJSON *targets = cJSON_AddArrayToObject(g0, "targets");
        cJSON_AddItemToArray(targets, cJSON_CreateString("Linear"));
        cJSON_AddItemToObject(g0, "weights", w);
        cJSON_AddStringToObject(q, "format", "nvfp4-pack-quantized");
        cJSON_AddNullToObject(q, "global_compression_ratio");
        cJSON_AddItemToObject(q, "ignore", ignore);
        cJSON_AddNullToObject(q, "kv_cache_scheme");
        cJSON_AddStringToObject(q, "quant_method", "compressed-tensors");
        cJSON_AddStringToObject(q, "quantization_status", "compressed");
    }
    if (cJSON_GetObjectItemCaseSensitive(config, "quantization_config"))
        cJSON_ReplaceItemInObjectCaseSensitive(config, "quantization_config", q);
    else
        cJSON_AddItemToObject(config, "quantization_config", q);
    st = ck_json_write(ctx, dir, "config.json", config);
    if (!st && side)
        st = ck_json_write(ctx, dir, HF_QUANT_CONFIG, side);
    cJSON_Delete(side);
    return st;
}

/* -------------------------------------------------------- MXFP4 -> NVFP4 */

/*
 * compressed-tensors MXFP4 (fp4.h's FP4_LAYOUT_MXFP4_CT: E8M0 group bytes
 * 2^(b - 127)) to NVFP4 by the closed form of NVIDIA Model-Optimizer PR
 * #1372: the E2M1 codes are kept; each MXFP4 group of 32 with scale 2^k_j
 * becomes two NVFP4 groups of 16 with the E4M3 scale 2^(k_j - m), under one
 * global scale 2^m (ModelOpt's weight_scale_2 = 2^m, compressed-tensors'
 * weight_global_scale = 2^-m), so every value is the same.  m = k_max - 8
 * (E4M3's powers of two run 2^-9 .. 2^8), kept >= -126 (2^m and 2^-m normal
 * fp32), k_max the tensor's, or its fused layer's (q/k/v, gate/up: one
 * global scale in vLLM).  A group more than 17 below k_max is refused,
 * unless its 16 codes of that half are all zero (then 2^-9 is written).
 * The target is weight-only (W4A16), as the input.
 */
#define MX_NV_BOTTOM -9 /* log2 of its smallest, the subnormal 2^-9 */
#define MX_NV_GLOBAL_MIN -126 /* 2^m and 2^-m normal fp32 */

/* The largest E8M0 byte of an MXFP4 weight's scale (a NaN byte is bad
 * input). */
static fp8_status mx_max_byte(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                              unsigned *most)
{
    enum { CHUNK = 1 << 16 };
    uint64_t n = it->s->elements, groups = it->cols / FP8_MX_GROUP;
    uint8_t *b = malloc(CHUNK);
    fp8_status st = b ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    *most = 0;
    for (uint64_t at = 0; !st && at < n; at += CHUNK) {
        size_t len = n - at < CHUNK ? (size_t)(n - at) : CHUNK;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->sshard), it->s, at, b, len);
        for (size_t i = 0; !st && i < len; i++) {
            if (b[i] == 0xFF)
                st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                              "%s: tensor '%s': element [%llu, %llu] is the E8M0 NaN byte 0xff; "
                              "its group has no value to cast",
                              fp8_checkpoint_shard_name(p->ck, it->sshard), it->s->name,
                              (unsigned long long)((at + i) / groups),
                              (unsigned long long)((at + i) % groups));
            *most = b[i] > *most ? b[i] : *most;
        }
    }
    free(b);
    return st;
}

/* Plan the cast of every MXFP4 weight (scales of another bias than 127
 * refused first): its codes copied (renamed for ModelOpt), its scale cast
 * (CAST_MX_SCALE), and one new item each, the global scale (CAST_RECIP's
 * writer: one F32), after the input's items. */
fp8_status mx_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, bool *handled)
{
    char why[1024];
    fp8_status st = FP8_OK;
    *handled = true;
    if (fp4_layout_bias_refused(fp4_layout_get(p->cast->from), p->config, why, sizeof why))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: %s", p->input, why);
    if (!st)
        st = fp4_cast_pick(ctx, p->input, o, &p->cast, fp4_layout_get(p->cast->from));
    const fp4_layout *from = fp4_layout_get(p->cast->from), *to = fp4_layout_get(p->cast->to);
    size_t n0 = p->n, extra = 0;
    for (size_t i = 0; !st && i < n0; i++) {
        const fp4_layout *l;
        cast_item *it = &p->items[i], *sc = cast_scale_of(p, it->t, &l);
        if (!sc || l != from)
            continue;
        uint64_t rows, cols;
        if ((st = cast_pair(ctx, p, l, it->t, it->shard, sc->t, sc->shard, &rows, &cols)))
            break;
        size_t stem = strlen(it->t->name) - strlen(from->weight_suffix);
        *sc = (cast_item){ .t = sc->t, .shard = sc->shard, .kind = CAST_MX_SCALE, .w = it->t,
                           .s = sc->t, .wshard = it->shard, .sshard = sc->shard, .rows = rows,
                           .cols = cols, .out_dtype = to->scale_dtype, .out_rank = 2,
                           .out_shape = { rows, cols / fp8_scheme_get(p->cast->scheme)->run } };
        if ((st = mx_max_byte(ctx, p, sc, &sc->mx_most)))
            break;
        cast_item *g = &p->items[n0 + extra++];
        *g = (cast_item){ .t = sc->t, .shard = sc->shard, .kind = CAST_RECIP,
                          .out_dtype = FP8_DTYPE_F32, .out_rank = to->global_rank,
                          .out_shape = { 1, 1 } };
        if (asprintf(&g->out_name, "%.*s%s", (int)stem, it->t->name, to->global_suffix) < 0 ||
            (strcmp(from->scale_suffix, to->scale_suffix) &&
             asprintf(&sc->out_name, "%.*s%s", (int)stem, it->t->name, to->scale_suffix) < 0) ||
            (strcmp(from->weight_suffix, to->weight_suffix) &&
             asprintf(&it->out_name, "%.*s%s", (int)stem, it->t->name, to->weight_suffix) < 0))
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        p->mxfp4++;
    }
    /* each global scale: m from the largest group scale of its weight, or
     * of the fused layer the weight is a part of (its parts one m, as vLLM
     * keeps one global scale for them) */
    for (size_t i = n0; !st && i < n0 + extra; i++) {
        cast_item *g = &p->items[i], *sc = cast_item_named(p, g->t->name, false);
        unsigned most = sc->mx_most;
        size_t f = 0, base = 0;
        char *stem = strndup(sc->t->name, strlen(sc->t->name) - strlen(from->scale_suffix));
        bool oom = !stem, fused = stem && fp4_fused_part(stem, &f, &base);
        free(stem);
        for (int k = 0; fused && k < 3 && fp4_fused_parts[f][k]; k++) {
            char *part = NULL;
            if ((oom = asprintf(&part, "%.*s%s%s", (int)base, sc->t->name, fp4_fused_parts[f][k],
                                from->scale_suffix) < 0))
                break;
            const cast_item *peer = cast_item_named(p, part, false);
            free(part);
            if (peer && peer->kind == CAST_MX_SCALE && peer != sc) {
                most = peer->mx_most > most ? peer->mx_most : most;
                sc->mx_fused = true;
            }
        }
        if (oom) {
            p->n = n0 + extra; /* the new items' names are freed with the rest */
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        }
        int m = (int)most - 127 - p->cast->shift;
        sc->mx_m = m < MX_NV_GLOBAL_MIN ? MX_NV_GLOBAL_MIN : m;
        g->value = fp8_pow2(to->global_divides ? -sc->mx_m : sc->mx_m);
    }
    p->n = n0 + extra;
    if (!st && !p->mxfp4)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: no MXFP4 weight with its scale", p->input);
    return st ? st : check_carried(ctx, p, "MXFP4");
}

/* Whether the 16 codes of half h of group g of a packed row are all +-0. */
static bool mx_half_zero(const uint8_t *row, uint64_t g, unsigned h)
{
    const uint8_t *b = row + g * (FP8_MX_GROUP / 2) + h * (FP8_MX_GROUP / 4);
    for (unsigned i = 0; i < FP8_MX_GROUP / 4; i++)
        if (b[i] & 0x77) /* each nibble's magnitude bits */
            return false;
    return true;
}

/* An MXFP4 weight's group scales as NVFP4's: two E4M3 scales 2^(k_j - m)
 * per E8M0 byte, a band of rows at a time (one thread: any -j writes these
 * bytes); a half group no E4M3 power of two scales, with a nonzero code, is
 * refused. */
fp8_status mx_write_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it, fp8_writer *out,
                          const fp8_tensor_info *wt)
{
    enum { BAND = 256 };
    uint64_t groups = it->cols / FP8_MX_GROUP;
    uint8_t *sc = malloc(BAND * groups), *q = malloc(BAND * groups * 2), *row = malloc(it->cols / 2);
    fp8_status st = sc && q && row ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    int m = it->mx_m, top = p->cast->shift;
    for (uint64_t row0 = 0; !st && row0 < it->rows; row0 += BAND) {
        uint64_t nrows = it->rows - row0 < BAND ? it->rows - row0 : BAND;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->sshard), it->s, row0 * groups, sc,
                           nrows * groups);
        for (uint64_t r = 0; !st && r < nrows; r++) {
            bool have_row = false;
            for (uint64_t g = 0; !st && g < groups; g++) {
                int k = (int)sc[r * groups + g] - 127, e = k - m;
                for (unsigned h = 0; !st && h < 2; h++) {
                    uint8_t *d = &q[(r * groups + g) * 2 + h];
                    if (e >= MX_NV_BOTTOM) { /* e <= top: m >= k_max - top */
                        *d = fp8_f32_to_e4m3(fp8_pow2(e)); /* exact: e in range */
                        continue;
                    }
                    if (!have_row)
                        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->wshard), it->w,
                                           (row0 + r) * (it->cols / 2), row, it->cols / 2);
                    have_row = true;
                    if (!st && mx_half_zero(row, g, h))
                        *d = fp8_f32_to_e4m3(fp8_pow2(MX_NV_BOTTOM)); /* any scale keeps +-0 */
                    else if (!st)
                        st = fp8_fail(
                            ctx, FP8_ERR_BAD_INPUT,
                            "%s: tensor '%s': group [%llu, %llu] (scale 2^%d) lies %d "
                            "exponents below the largest group scale 2^%d of %s: NVFP4's E4M3 "
                            "group scale 2^(k - m) holds 2^%d..2^%d, a spread of at most %d, so "
                            "under the global scale 2^%d its values would change; convert "
                            "refuses (dequantize-for-export keeps every value)",
                            fp8_checkpoint_shard_name(p->ck, it->wshard), it->w->name,
                            (unsigned long long)(row0 + r), (unsigned long long)g, k,
                            m + top - k, m + top,
                            it->mx_fused ? "the layer vLLM fuses it into (q/k/v or gate/up: one "
                                           "global scale)"
                                         : "the tensor",
                            MX_NV_BOTTOM, top, top - MX_NV_BOTTOM, m);
                }
            }
        }
        if (!st)
            st = fp8_writer_pwrite(ctx, out, wt, row0 * groups * 2, q, nrows * groups * 2);
        if (!st && p->opts.target.cancel && *p->opts.target.cancel)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", p->input);
    }
    free(sc);
    free(q);
    free(row);
    return st;
}
