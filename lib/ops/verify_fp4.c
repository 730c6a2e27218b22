/*
 * verify_fp4.c - verify's pass over the packed-FP4 weights (fp4.h;
 * fp8conv-formats(5), 2026 LAYOUTS): each has its scale, named, typed and
 * shaped as its layout's loaders read it, with no E8M0 NaN byte.  Rules:
 * missing-scale, fp4-shape, scale-dtype, scale-shape, bad-scale (NVFP4's
 * second-level F32 too); and the
 * E8M0 NaN bytes of DeepSeek-V4's FP8 block scales (X.scale), which the
 * values pass (verify_values.c) does not read.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/verify.h"
#include "io/checkpoint.h"
#include "layout/fp4.h"

/* The first NaN byte of scale tensor `s` (elements of type `e`: E8M0 0xFF,
 * E4M3 0x7F and 0xFF), read a MiB at a time; *at its index, or UINT64_MAX
 * for none. */
static fp8_status find_nan(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *s, size_t shard,
                           fp8_elem e, uint64_t *at)
{
    bool (*is_nan)(uint8_t) = fp8_elem_get(e)->is_nan;
    enum { CHUNK = 1 << 20 };
    uint64_t n = fp8_tensor_nbytes(s);
    unsigned char *buf = malloc(CHUNK);
    *at = UINT64_MAX;
    if (!buf)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_status st = FP8_OK;
    for (uint64_t off = 0; off < n && !st && *at == UINT64_MAX; off += CHUNK) {
        uint64_t len = n - off < CHUNK ? n - off : CHUNK;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, off, buf, len);
        for (uint64_t k = 0; !st && k < len && *at == UINT64_MAX; k++)
            if (is_nan(buf[k]))
                *at = off + k;
    }
    free(buf);
    return st;
}

/* NVFP4's second level: one finite positive F32 beside the weight. */
static fp8_status check_global(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                               const fp8_tensor_info *t, const char *file)
{
    char name[1024];
    size_t shard;
    float g;
    snprintf(name, sizeof name, "%.*s%s", (int)(strlen(t->name) - strlen(l->weight_suffix)),
             t->name, l->global_suffix);
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, name, &shard);
    if (!s)
        return verify_add(ctx, v, FP8_SEV_ERROR, "missing-scale",
                          "%s: %s: packed %s, but no second-level scale '%s'; the loader cannot "
                          "dequantize it (%s)",
                          file, t->name, l->name, name, l->source);
    const char *sfile = fp8_checkpoint_shard_name(v->ck, shard);
    if (s->dtype != FP8_DTYPE_F32)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-dtype",
                          "%s: %s: dtype %s, but %s's second-level scale is F32 (%s)", sfile,
                          s->name, fp8_dtype_name(s->dtype), l->name, l->source);
    if (s->elements != 1)
        return verify_add(ctx, v, FP8_SEV_ERROR, "scale-shape",
                          "%s: %s: %llu elements, but %s's second-level scale is one (%s)", sfile,
                          s->name, (unsigned long long)s->elements, l->name, l->source);
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, 0, &g, 4);
    if (!st && !(g > 0 && g <= 3.4028234663852886e38f))
        st = verify_add(ctx, v, FP8_SEV_ERROR, "bad-scale",
                        "%s: %s: %g is not a finite positive scale", sfile, s->name, (double)g);
    return st;
}

/* The F32 of second-level scale `name`; *g NaN when it is not one F32
 * (check_global's finding). */
static fp8_status read_global(fp8_ctx *ctx, fp8_verify *v, const char *name, float *g)
{
    size_t shard;
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, name, &shard);
    *g = __builtin_nanf("");
    if (!s || s->dtype != FP8_DTYPE_F32 || s->elements != 1)
        return FP8_OK;
    return fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, shard), s, 0, g, 4);
}

/* A later part of a fused layer (fp4.h's fp4_fused_parts) whose
 * second-level scale is not the first part's.  Each later part is
 * compared with the first. */
static fp8_status check_fused_global(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                                     const fp8_tensor_info *t, const char *file)
{
    size_t stem = strlen(t->name) - strlen(l->weight_suffix);
    for (size_t f = 0; f < FP4_FUSED_COUNT; f++)
        for (int j = 1; j < 3 && fp4_fused_parts[f][j]; j++) {
            size_t n = strlen(fp4_fused_parts[f][j]);
            if (stem <= n || t->name[stem - n - 1] != '.' ||
                strncmp(t->name + stem - n, fp4_fused_parts[f][j], n))
                continue;
            char mine[1024], first[1024];
            float a, b;
            snprintf(mine, sizeof mine, "%.*s%s", (int)stem, t->name, l->global_suffix);
            snprintf(first, sizeof first, "%.*s%s%s", (int)(stem - n), t->name,
                     fp4_fused_parts[f][0], l->global_suffix);
            fp8_status st = read_global(ctx, v, mine, &a);
            if (st || (st = read_global(ctx, v, first, &b)) || a != a || b != b ||
                !memcmp(&a, &b, 4))
                return st;
            return verify_add_for(ctx, v, BIT(FP8_LOADER_VLLM), "fused-global-scale",
                                  "%s: %s: second-level scale %s is %.9g, but %s is %.9g: vLLM "
                                  "loads %s with %s as one layer with one such scale (the "
                                  "largest; an MoE expert's gate's), so it computes other values "
                                  "than this checkpoint's for one of them; llm-compressor and "
                                  "ModelOpt give the parts one, from their largest amax",
                                  file, t->name, mine, (double)a, first, (double)b,
                                  fp4_fused_parts[f][j], fp4_fused_parts[f][0]);
        }
    return FP8_OK;
}

static fp8_status check_one(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                            const fp8_tensor_info *t, size_t shard, const char *sname)
{
    const char *file = fp8_checkpoint_shard_name(v->ck, shard);
    size_t sshard;
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, sname, &sshard);
    char want[96], got[96];
    uint64_t experts, rows, cols, sshape[3], at;
    int srank;
    if (!s)
        return verify_add(ctx, v, FP8_SEV_ERROR, "missing-scale",
                          "%s: %s: packed %s, but no scale '%s'; the loader cannot dequantize it "
                          "(%s)",
                          file, t->name, l->name, sname, l->source);
    v->fp4_weights++;
    if (!fp4_layout_geometry(l, t->rank, t->shape, &experts, &rows, &cols, &srank, sshape)) {
        fp8_shape_text(t->rank, t->shape, got, sizeof got);
        return verify_add(ctx, v, FP8_SEV_ERROR, "fp4-shape",
                          "%s: %s: packed shape %s is not %s's (%s%u; %s)", file, t->name, got,
                          l->name,
                          t->rank == 4 ? "[experts, rows, groups, 16], codes a group: "
                                       : "[rows, cols / 2], cols a multiple of ",
                          l->scheme->run, l->source);
    }
    const char *sfile = fp8_checkpoint_shard_name(v->ck, sshard);
    fp8_status st = FP8_OK;
    if (s->dtype != l->scale_dtype)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "scale-dtype",
                        "%s: %s: dtype %s, but %s scales are %s (%s; %s)", sfile, s->name,
                        fp8_dtype_name(s->dtype), l->name, fp8_dtype_name(l->scale_dtype),
                        l->scale_dtype == FP8_DTYPE_U8 ? "E8M0 bytes, as its loaders allocate them"
                                                       : fp8_elem_get(l->scheme->scale_elem[0])->name,
                        l->source);
    bool shape_ok = s->rank == srank;
    for (int d = 0; shape_ok && d < srank; d++)
        shape_ok = s->shape[d] == sshape[d];
    if (!st && !shape_ok) {
        fp8_shape_text(srank, sshape, want, sizeof want);
        fp8_shape_text(s->rank, s->shape, got, sizeof got);
        st = verify_add(ctx, v, FP8_SEV_ERROR, "scale-shape",
                        "%s: %s: shape %s, but %s expects %s for weight %s (one scale per %u "
                        "elements of a row)",
                        sfile, s->name, got, l->name, want, t->name, l->scheme->run);
    }
    fp8_elem se = l->scheme->scale_elem[0];
    uint8_t nan_byte = 0;
    if (!st && s->dtype == l->scale_dtype && shape_ok &&
        !(st = find_nan(ctx, v, s, sshard, se, &at)) && at != UINT64_MAX &&
        !(st = fp8_file_read(ctx, fp8_checkpoint_shard(v->ck, sshard), s, at, &nan_byte, 1)))
        st = verify_add(ctx, v, FP8_SEV_ERROR, "bad-scale",
                        "%s: %s: element %llu is 0x%02x, the %s NaN: the %u values it scales "
                        "are NaN",
                        sfile, s->name, (unsigned long long)at, nan_byte,
                        fp8_elem_get(se)->name, l->scheme->run);
    if (!st && l->global_suffix && !(st = check_global(ctx, v, l, t, file)))
        st = check_fused_global(ctx, v, l, t, file);
    return st;
}

/* The E8M0 scale X.scale of FP8 weight X.weight in a family that names
 * scales so (DeepSeek-V4): a NaN byte makes 128 x 128 values NaN.  Its name,
 * dtype and shape are verify_rules.c's check_weight's to judge. */
static fp8_status check_module_scale(fp8_ctx *ctx, fp8_verify *v, const fp8_tensor_info *t)
{
    char name[1024];
    size_t shard;
    uint64_t at;
    snprintf(name, sizeof name, "%.*s%s", (int)strlen(t->name) - 7, t->name,
             v->family->trunk_scale_suffix);
    const fp8_tensor_info *s = fp8_checkpoint_find(v->ck, name, &shard);
    if (!s || s->dtype != FP8_DTYPE_F8_E8M0)
        return FP8_OK;
    fp8_status st = find_nan(ctx, v, s, shard, FP8_ELEM_E8M0, &at);
    if (!st && at != UINT64_MAX)
        st = verify_add(ctx, v, FP8_SEV_ERROR, "bad-scale",
                        "%s: %s: element %llu is 0xff, the E8M0 NaN: the block of %s it scales "
                        "is NaN",
                        fp8_checkpoint_shard_name(v->ck, shard), s->name, (unsigned long long)at,
                        t->name);
    return st;
}

/* The layouts whose scales config.json's producer version says hold
 * another bias (fp4.h, fp4_layout_bias_refused): one finding per layout,
 * naming its first weight and how many there are; none when `config` is
 * NULL (no config.json, or one read_declaration reported). */
static fp8_status check_bias(fp8_ctx *ctx, fp8_verify *v, const cJSON *config,
                             const fp4_layout *l, const fp8_tensor_info *first, size_t shard,
                             size_t count)
{
    char why[1024], more[64] = "";
    if (!count || !fp4_layout_bias_refused(l, config, why, sizeof why))
        return FP8_OK;
    if (count > 1)
        snprintf(more, sizeof more, " (this weight and %zu more)", count - 1);
    return verify_add(ctx, v, FP8_SEV_ERROR, "scale-bias", "%s: %s: %s%s",
                      fp8_checkpoint_shard_name(v->ck, shard), first->name, why, more);
}

/* Per loader, whether it loads the packed weights of layout `l` (fp4.h's
 * loaders column): a finding that stops that loader only, naming the
 * layout's first weight and the loader's rule, for each one that does not. */
static fp8_status check_loaders(fp8_ctx *ctx, fp8_verify *v, const fp4_layout *l,
                                const fp8_tensor_info *first, size_t shard, size_t count,
                                const fp8_tensor_info *expert, size_t eshard, size_t experts)
{
    fp8_status st = FP8_OK;
    for (int k = 0; k < FP8_LOADER_COUNT && experts && !st; k++)
        if (l->loaders[k].experts_refuses && !l->loaders[k].refuses)
            st = verify_add_for(ctx, v, BIT(k), "loader-layout",
                                "%s: %s: %s does not load MoE experts as %s weights: %s (%zu "
                                "expert weight%s)",
                                fp8_checkpoint_shard_name(v->ck, eshard), expert->name,
                                fmt_loader_title((fp8_loader)k), l->name,
                                l->loaders[k].experts_refuses, experts, experts == 1 ? "" : "s");
    for (int k = 0; k < FP8_LOADER_COUNT && count && !st; k++)
        if (l->loaders[k].refuses)
            st = verify_add_for(ctx, v, BIT(k), "loader-layout",
                                "%s: %s: %s does not load %s weights: %s (%zu packed "
                                "weight%s)",
                                fp8_checkpoint_shard_name(v->ck, shard), first->name,
                                fmt_loader_title((fp8_loader)k), l->name, l->loaders[k].refuses,
                                count, count == 1 ? "" : "s");
    return st;
}

/* What config.json declares, for messages: "quant_method X (format Y,
 * quant_algo Z)" or "no quantization_config". */
static void declaration_text(const cJSON *config, char *buf, size_t n)
{
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(q, "quant_method");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(q, "format");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(q, "quant_algo");
    if (!cJSON_IsString(m)) {
        snprintf(buf, n, "no quantization_config with a quant_method");
        return;
    }
    snprintf(buf, n, "quant_method %s%s%s%s%s", m->valuestring,
             cJSON_IsString(f) ? ", format " : "", cJSON_IsString(f) ? f->valuestring : "",
             cJSON_IsString(a) ? ", quant_algo " : "", cJSON_IsString(a) ? a->valuestring : "");
}

/* config.json's declaration against the packed tensors (fp4.h's decl_
 * fields): each layout present must be declared, and a declaration that
 * names one layout alone needs some of its tensors.  Not without a
 * config.json. */
static fp8_status check_declaration(fp8_ctx *ctx, fp8_verify *v, const cJSON *config,
                                    const fp8_tensor_info *const *first,
                                    const size_t *first_shard, const size_t *count)
{
    char decl[256];
    fp8_status st = FP8_OK;
    if (!config) /* no config.json (or one read_declaration reported): nothing declared */
        return FP8_OK;
    declaration_text(config, decl, sizeof decl);
    size_t present = 0;
    for (int i = 0; i < FP4_LAYOUT_COUNT && !st; i++) {
        const fp4_layout *l = fp4_layout_get(i);
        present += count[i];
        if (count[i] && !fp4_layout_declared(l, config))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "format-mismatch",
                            "%s: %s: %zu packed %s weight%s, but config.json declares %s, not "
                            "quant_method %s%s%s%s%s: the loaders dispatch on the declaration "
                            "and would not read them as %s (%s)",
                            fp8_checkpoint_shard_name(v->ck, first_shard[i]), first[i]->name,
                            count[i], l->name, count[i] == 1 ? "" : "s", decl, l->decl_method,
                            l->decl_key ? ", " : "", l->decl_key ? l->decl_key : "",
                            l->decl_key ? " " : "", l->decl_key ? l->decl_value : "", l->name,
                            l->source);
    }
    for (int i = 0; i < FP4_LAYOUT_COUNT && !st; i++) {
        const fp4_layout *l = fp4_layout_get(i);
        /* with packed weights of another layout, the finding above names them */
        if (l->decl_exclusive && !present && fp4_layout_declared(l, config))
            st = verify_add(ctx, v, FP8_SEV_ERROR, "format-mismatch",
                            "%s: config.json declares %s (%s), but no tensor is a packed %s "
                            "weight: the loader would look for tensors that are not there (%s)",
                            v->path, decl, l->name, l->name, l->source);
    }
    return st;
}

fp8_status verify_check_fp4(fp8_ctx *ctx, fp8_verify *v)
{
    fp8_status st = FP8_OK;
    cJSON *config = NULL;
    const fp8_tensor_info *first[FP4_LAYOUT_COUNT] = { 0 }, *expert[FP4_LAYOUT_COUNT] = { 0 };
    size_t count[FP4_LAYOUT_COUNT] = { 0 }, first_shard[FP4_LAYOUT_COUNT] = { 0 };
    size_t experts[FP4_LAYOUT_COUNT] = { 0 }, expert_shard[FP4_LAYOUT_COUNT] = { 0 };
    /* a config.json no loader parses is read_declaration's finding */
    if (v->config_dir && fmt_config_read(ctx, v->config_dir, &config, NULL))
        config = NULL;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(v->ck) && !st; i++) {
        size_t shard;
        const fp8_tensor_info *t = fp8_checkpoint_tensor(v->ck, i, &shard);
        char *sname, *oname;
        if (t->dtype == FP8_DTYPE_F8_E4M3 && v->family && v->family->trunk_scale_suffix &&
            fp8_has_suffix(t->name, ".weight")) {
            st = check_module_scale(ctx, v, t);
            continue;
        }
        const fp4_layout *l = fp4_layout_match(v->ck, t->name, t->dtype, t->rank, &sname, &oname);
        if (!l)
            continue;
        if (!sname) {
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
            break;
        }
        /* an I8 expert weight is packed FP4 in the family that says so, or
         * when its scale is there; else an int8 checkpoint's, not ours */
        if (!l->by_name && l != v->family && !fp8_checkpoint_find(v->ck, sname, NULL)) {
            free(sname);
            free(oname);
            continue;
        }
        st = check_one(ctx, v, l, t, shard, sname);
        size_t id = (size_t)(l - fp4_layout_get(FP4_LAYOUT_GPT_OSS)); /* the table's row */
        if (!count[id]++)
            first[id] = t, first_shard[id] = shard;
        if (fmt_is_expert(t->name) && !experts[id]++)
            expert[id] = t, expert_shard[id] = shard;
        free(sname);
        free(oname);
    }
    if (!st)
        st = check_declaration(ctx, v, config, first, first_shard, count);
    for (int i = 0; i < FP4_LAYOUT_COUNT && !st; i++)
        if (!(st = check_bias(ctx, v, config, fp4_layout_get(i), first[i], first_shard[i],
                              count[i])))
            st = check_loaders(ctx, v, fp4_layout_get(i), first[i], first_shard[i], count[i],
                               expert[i], expert_shard[i], experts[i]);
    cJSON_Delete(config);
    return st;
}
