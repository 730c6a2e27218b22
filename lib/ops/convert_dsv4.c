/*
 * convert_dsv4.c - convert's cast of DeepSeek-V4's MXFP4 routed experts
 * (fp4.h's FP4_LAYOUT_DSV4: I8 [out, in / 2] E2M1 codes, an F8_E8M0 scale
 * per 32 elements of a row) to FP8 E4M3 [out, in] with an F32 scale per
 * 128x128 tile, as DeepSeek's own cast does it: a tile's exponent is its
 * largest group byte less 6 (not below 0), each code the E2M1 value times
 * 2^(group byte - tile byte), exact while a tile's group exponents spread
 * by 14 or less; an element whose product is no E4M3 value is refused,
 * never rounded.  Every other tensor is copied (the trunk's .scale as the
 * F32 of its E8M0 bytes), and config.json says expert_dtype "fp8".  Why,
 * with the sources (DeepSeek's convert.py, vLLM's loader and PR 51946):
 * fp8conv(1) convert, CASTS; fp8conv-formats(5), Casts.  The plan it fills
 * and its writer are convert_cast.c's.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "common/fp8_math.h"
#include "compute/jobs.h"
#include "io/checkpoint.h"
#include "layout/fp4.h"
#include "ops/convert_dsv4.h"
#include "ops/convert_items.h"

/* DeepSeek's fp8_block_size and max_offset: the cast's row (layout/fp4.h) */
#define TILE (p->cast->tile)
#define TILE_OFFSET ((unsigned)p->cast->shift)


/* The expert whose weight or scale `t` is, if any: fills the item. */
static fp8_status find_expert(fp8_ctx *ctx, cast_plan *p, cast_item *it)
{
    const fp4_layout *dsv4 = fp4_layout_get(p->cast->from);
    const fp8_tensor_info *t = it->t;
    const char *wname = t->name;
    char *wbuf = NULL;
    size_t tn = strlen(t->name), ss = strlen(dsv4->scale_suffix);
    bool is_scale = false;
    /* a scale names its weight: X.scale -> X.weight */
    if (tn > ss && !strcmp(t->name + tn - ss, dsv4->scale_suffix) && t->dtype == dsv4->scale_dtype) {
        if (asprintf(&wbuf, "%.*s%s", (int)(tn - ss), t->name, dsv4->weight_suffix) < 0)
            return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        wname = wbuf;
        is_scale = true;
    }
    size_t wshard = 0;
    const fp8_tensor_info *w = fp8_checkpoint_find(p->ck, wname, &wshard);
    const fp4_layout *l = NULL;
    const cast_item *sc = w ? cast_scale_of(p, w, &l) : NULL;
    const fp8_tensor_info *s = l == dsv4 && sc ? sc->t : NULL;
    fp8_status st = FP8_OK;
    if (is_scale && w && fp8_dtype_holds_codes(w->dtype)) { /* a trunk weight's */
        it->kind = CAST_TRUNK_SCALE;
        it->out_dtype = FP8_DTYPE_F32;
    }
    uint64_t rows, cols;
    if (s && !(st = cast_pair(ctx, p, l, w, wshard, s, sc->shard, &rows, &cols)) &&
        (!is_scale || t == s)) {
        fp8_dtype codes = fp8_elem_get(fp8_scheme_get(p->cast->scheme)->elem)->dtype;
        *it = (cast_item){ .t = t, .shard = it->shard, .kind = is_scale ? CAST_SCALE : CAST_WEIGHT,
                           .w = w, .s = s, .wshard = wshard, .sshard = sc->shard, .rows = rows,
                           .cols = cols, .out_rank = 2,
                           .out_dtype = is_scale ? FP8_DTYPE_F32 : codes,
                           .out_shape = { is_scale ? fp8_ceil_div(rows, TILE) : rows,
                                          is_scale ? fp8_ceil_div(cols, TILE) : cols } };
    }
    free(wbuf);
    return st;
}

/* n E8M0 bytes (no NaN), the layout's scales, as the little-endian F32 of
 * the same powers of two. */
static void e8m0_f32(const cast_plan *p, const uint8_t *b, size_t n, uint8_t *f)
{
    const fp8_scheme_traits *mx = fp4_layout_get(p->cast->from)->scheme;
    float (*decode)(uint8_t) = fp8_elem_get(mx->scale_elem[0])->decode;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = fp8_f32_bits(decode(b[i]));
        for (int k = 0; k < 4; k++)
            f[4 * i + k] = (uint8_t)(bits >> 8 * k);
    }
}

/* The tile exponent byte of the tiles of one band of rows, each the
 * largest group byte of its tile less 6 (not below 0: E8M0's smallest);
 * a NaN group scale is bad input (the first, tile by tile, row by row).
 * `sc` holds the band's group bytes, nrows rows of cols / 32. */
static fp8_status tile_bytes_ref(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                             uint64_t row0, uint64_t nrows, const uint8_t *sc, uint8_t *tb)
{
    uint64_t groups = it->cols / FP8_MX_GROUP, per_tile = TILE / FP8_MX_GROUP;
    uint64_t tiles = fp8_ceil_div(it->cols, TILE);
    for (uint64_t j = 0; j < tiles; j++) {
        unsigned most = 0;
        for (uint64_t r = 0; r < nrows; r++)
            for (uint64_t g = j * per_tile; g < groups && g < (j + 1) * per_tile; g++) {
                unsigned b = sc[r * groups + g];
                if (b == 0xFF)
                    return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                                    "%s: tensor '%s': element [%llu, %llu] is the E8M0 NaN "
                                    "byte 0xff; its group has no value to cast",
                                    fp8_checkpoint_shard_name(p->ck, it->sshard), it->s->name,
                                    (unsigned long long)(row0 + r), (unsigned long long)g);
                most = b > most ? b : most;
            }
        tb[j] = (uint8_t)(most > TILE_OFFSET ? most - TILE_OFFSET : 0);
    }
    return FP8_OK;
}

/* tile_bytes_ref's bytes, the band's rows folded into a column maximum
 * first (a loop the compiler vectorizes).  The NaN byte 0xFF is the
 * largest, so a tile holds one exactly when its maximum is 0xFF: then
 * tile_bytes_ref names the first. */
static fp8_status tile_bytes(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                             uint64_t row0, uint64_t nrows, const uint8_t *sc, uint8_t *tb)
{
    enum { CHUNK = 256 }; /* groups at a time, whole tiles of 4 */
    uint64_t groups = it->cols / FP8_MX_GROUP, per_tile = TILE / FP8_MX_GROUP;
    uint8_t most[CHUNK];
    for (uint64_t g0 = 0; g0 < groups; g0 += CHUNK) {
        uint64_t n = groups - g0 < CHUNK ? groups - g0 : CHUNK;
        memcpy(most, sc + g0, n);
        for (uint64_t r = 1; r < nrows; r++) {
            const uint8_t *s = sc + r * groups + g0;
            uint64_t g = 0;
#ifdef __SSE2__
            for (; g + 16 <= n; g += 16)
                _mm_storeu_si128((__m128i *)(most + g),
                                 _mm_max_epu8(_mm_loadu_si128((const __m128i *)(most + g)),
                                              _mm_loadu_si128((const __m128i *)(s + g))));
#endif
            for (; g < n; g++)
                most[g] = s[g] > most[g] ? s[g] : most[g];
        }
        for (uint64_t g = 0; g < n; g += per_tile) {
            unsigned m = 0;
            for (uint64_t k = g; k < n && k < g + per_tile; k++)
                m = most[k] > m ? most[k] : m;
            if (m == 0xFF)
                return tile_bytes_ref(ctx, p, it, row0, nrows, sc, tb);
            tb[(g0 + g) / per_tile] = (uint8_t)(m > TILE_OFFSET ? m - TILE_OFFSET : 0);
        }
    }
    return FP8_OK;
}

/* The spread of group exponents in tile j of a band (for the message). */
static unsigned tile_spread(const cast_plan *p, const cast_item *it, uint64_t nrows,
                            const uint8_t *sc, uint64_t j)
{
    uint64_t groups = it->cols / FP8_MX_GROUP, per_tile = TILE / FP8_MX_GROUP;
    unsigned lo = 255, hi = 0;
    for (uint64_t r = 0; r < nrows; r++)
        for (uint64_t g = j * per_tile; g < groups && g < (j + 1) * per_tile; g++) {
            unsigned b = sc[r * groups + g];
            lo = b < lo ? b : lo;
            hi = b > hi ? b : hi;
        }
    return hi - lo;
}

/* The E4M3 codes of one band of an expert's rows, element by element by
 * the rule (fp8_elem_shift_e4m3); it names the first element the cast would change. */
static fp8_status cast_band_ref(fp8_ctx *ctx, const cast_plan *p, const cast_item *it, uint64_t row0,
                            uint64_t nrows, const uint8_t *packed, const uint8_t *sc,
                            const uint8_t *tb, uint8_t *q)
{
    const fp8_elem_traits *e2m1 = fp8_elem_get(fp4_layout_get(p->cast->from)->scheme->elem);
    uint64_t groups = it->cols / FP8_MX_GROUP;
    for (uint64_t r = 0; r < nrows; r++)
        for (uint64_t i = 0; i < it->cols; i++) {
            unsigned byte = packed[r * (it->cols / 2) + i / 2];
            unsigned c = i & 1 ? byte >> 4 : byte & 15; /* element 2i in the low nibble */
            int k = (int)sc[r * groups + i / FP8_MX_GROUP] - (int)tb[i / TILE];
            if (!fp8_elem_shift_e4m3(e2m1, (uint8_t)c, k, &q[r * it->cols + i]))
                return fp8_fail(
                    ctx, FP8_ERR_BAD_INPUT,
                    "%s: tensor '%s': element [%llu, %llu] (%g times 2^%d) is no E4M3 value "
                    "under its %ux%u tile's scale (tile [%llu, %llu]: its group exponents "
                    "spread by %u, more than the 14 E4M3 holds): the cast to FP8 would "
                    "change it; convert refuses (dequantize-for-export keeps every value)",
                    fp8_checkpoint_shard_name(p->ck, it->wshard), it->w->name,
                    (unsigned long long)(row0 + r), (unsigned long long)i,
                    (double)e2m1->decode((uint8_t)c),
                    (int)sc[r * groups + i / FP8_MX_GROUP] - 127, TILE, TILE,
                    (unsigned long long)(row0 / TILE), (unsigned long long)(i / TILE),
                    tile_spread(p, it, nrows, sc, i / TILE));
        }
    return FP8_OK;
}

/* fp8_elem_shift_rows of E2M1 for every shift k a tile can give (group byte -
 * tile byte: at most 6, at least -254) and every code.  A row is 16 bytes,
 * a pshufb table. */
enum { SHIFT_MIN = -255, SHIFT_COUNT = 6 - SHIFT_MIN + 1 };
static uint8_t shift_table[SHIFT_COUNT][16] __attribute__((aligned(16)));

/* How cast_band gets its bytes, all byte-identical to cast_band_ref (which
 * names the element whenever one has no code): CAST_REF the reference
 * itself (and tile_bytes_ref for the tile bytes), CAST_TABLE a table row a
 * group, CAST_SSSE3 that row as a pshufb table, 32 codes at a time.  The
 * fastest the CPU runs, unless the environment's FP8CONV_DSV4_CAST says
 * ref or table (for tests/check_casts.c, which compares each with ref). */
typedef enum { CAST_PATH_REF, CAST_PATH_TABLE, CAST_PATH_SSSE3 } cast_path;
static cast_path band_path;
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) && defined(__GNUC__)
#define DSV4_SSSE3 __attribute__((target("ssse3")))
static bool cpu_has_ssse3(void) { return __builtin_cpu_supports("ssse3"); }

/* Each group's 16 bytes of codes: the low nibbles (elements 2b) and the
 * high ones (2b + 1) looked up in the group's table row, interleaved
 * back; nonzero when some element has no code. */
DSV4_SSSE3 static unsigned cast_rows_ssse3(const cast_plan *p, const uint8_t *packed,
                                           const uint8_t *sc, const uint8_t *tb, uint64_t nrows,
                                           uint64_t cols, uint8_t *q)
{
    uint64_t groups = cols / FP8_MX_GROUP;
    const __m128i nib = _mm_set1_epi8(0x0F);
    __m128i none = _mm_set1_epi8(FP8_NO_SHIFT), bad = _mm_setzero_si128();
    for (uint64_t r = 0; r < nrows; r++) {
        const uint8_t *s = sc + r * groups;
        const uint8_t *src = packed + r * (cols / 2);
        uint8_t *dst = q + r * cols;
        for (uint64_t g = 0; g < groups; g++, src += FP8_MX_GROUP / 2, dst += FP8_MX_GROUP) {
            int k = (int)s[g] - (int)tb[g * FP8_MX_GROUP / TILE];
            __m128i t = _mm_load_si128((const __m128i *)shift_table[k - SHIFT_MIN]);
            __m128i x = _mm_loadu_si128((const __m128i *)src);
            __m128i lo = _mm_shuffle_epi8(t, _mm_and_si128(x, nib));
            __m128i hi = _mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(x, 4), nib));
            _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi8(lo, hi));
            _mm_storeu_si128((__m128i *)(dst + 16), _mm_unpackhi_epi8(lo, hi));
            bad = _mm_or_si128(bad, _mm_or_si128(_mm_cmpeq_epi8(lo, none),
                                                 _mm_cmpeq_epi8(hi, none)));
        }
    }
    return (unsigned)_mm_movemask_epi8(bad);
}
#else
static bool cpu_has_ssse3(void) { return false; }
static unsigned cast_rows_ssse3(const cast_plan *p, const uint8_t *packed, const uint8_t *sc,
                                const uint8_t *tb, uint64_t nrows, uint64_t cols, uint8_t *q)
{
    return 1;
}
#endif

static void shift_table_init(void)
{
    fp8_elem_shift_rows(fp8_elem_get(fp4_layout_get(FP4_LAYOUT_DSV4)->scheme->elem), SHIFT_MIN,
                        SHIFT_COUNT, 16, shift_table[0]);
    const char *want = getenv("FP8CONV_DSV4_CAST");
    band_path = cpu_has_ssse3() ? CAST_PATH_SSSE3 : CAST_PATH_TABLE;
    if (want && !strcmp(want, "ref"))
        band_path = CAST_PATH_REF;
    else if (want && !strcmp(want, "table"))
        band_path = CAST_PATH_TABLE;
}

/* cast_band_ref's bytes a group's table row at a time; nonzero when some
 * element has no code. */
static unsigned cast_rows_table(const cast_plan *p, const uint8_t *packed, const uint8_t *sc,
                                const uint8_t *tb, uint64_t nrows, uint64_t cols, uint8_t *q)
{
    uint64_t groups = cols / FP8_MX_GROUP;
    unsigned bad = 0;
    for (uint64_t r = 0; r < nrows; r++)
        for (uint64_t g = 0; g < groups; g++) {
            int k = (int)sc[r * groups + g] - (int)tb[g * FP8_MX_GROUP / TILE];
            const uint8_t *row = shift_table[k - SHIFT_MIN];
            const uint8_t *src = packed + r * (cols / 2) + g * (FP8_MX_GROUP / 2);
            uint8_t *dst = q + r * cols + g * FP8_MX_GROUP;
            for (unsigned b = 0; b < FP8_MX_GROUP / 2; b++) { /* element 2b in the low nibble */
                dst[2 * b] = row[src[b] & 15];
                dst[2 * b + 1] = row[src[b] >> 4];
                bad |= (dst[2 * b] == FP8_NO_SHIFT) | (dst[2 * b + 1] == FP8_NO_SHIFT);
            }
        }
    return bad;
}

/* cast_band_ref's bytes by band_path; where some element has no code,
 * cast_band_ref says which. */
static fp8_status cast_band(fp8_ctx *ctx, const cast_plan *p, const cast_item *it, uint64_t row0,
                            uint64_t nrows, const uint8_t *packed, const uint8_t *sc,
                            const uint8_t *tb, uint8_t *q)
{
    pthread_once(&shift_once, shift_table_init);
    unsigned bad = band_path == CAST_PATH_SSSE3
                       ? cast_rows_ssse3(p, packed, sc, tb, nrows, it->cols, q)
                   : band_path == CAST_PATH_TABLE
                       ? cast_rows_table(p, packed, sc, tb, nrows, it->cols, q)
                       : 1;
    return bad ? cast_band_ref(ctx, p, it, row0, nrows, packed, sc, tb, q) : FP8_OK;
}

/* The output tensors [from, from + n) of `out`, experts' codes and tile
 * scales: a job of dsv4_write_experts' is a band of 128 rows of one, the
 * first of tensor i job first[i]. */
typedef struct {
    const cast_plan *p;
    fp8_writer *out;
    size_t from, n, *first;
} expert_run;

static const cast_item *expert_of(const expert_run *e, size_t j, const fp8_tensor_info **wt,
                                  uint64_t *row0)
{
    const cast_plan *p = e->p;
    size_t i = fp8_jobs_item_of(e->first, e->n, sizeof *e->first, 0, j);
    *wt = fp8_writer_tensor(e->out, e->from + i);
    *row0 = (j - e->first[i]) * TILE;
    return cast_item_named(e->p, (*wt)->name, true);
}

/* Band j of one expert's codes (a weight item) or tile scales (a scale
 * item), written where it belongs: the worker's buffers hold its group,
 * tile and F32 tile bytes, its packed codes and its E4M3 codes. */
static fp8_status expert_band(void *arg, fp8_worker *wk, size_t j)
{
    const expert_run *e = arg;
    const cast_plan *p = e->p;
    const fp8_tensor_info *wt;
    uint64_t row0;
    const cast_item *it = expert_of(e, j, &wt, &row0);
    fp8_ctx *ctx = wk->ctx;
    uint64_t groups = it->cols / FP8_MX_GROUP, tiles = fp8_ceil_div(it->cols, TILE);
    uint64_t nrows = it->rows - row0 < TILE ? it->rows - row0 : TILE;
    uint8_t *sc = wk->buf[0], *tb = sc + TILE * groups, *tf = tb + tiles;
    fp8_status st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->sshard), it->s,
                                  row0 * groups, sc, nrows * groups);
    if (!st)
        st = band_path == CAST_PATH_REF ? tile_bytes_ref(ctx, p, it, row0, nrows, sc, tb)
                                        : tile_bytes(ctx, p, it, row0, nrows, sc, tb);
    if (!st && it->kind == CAST_SCALE) {
        e8m0_f32(p, tb, tiles, tf);
        return fp8_writer_pwrite(ctx, e->out, wt, row0 / TILE * tiles * 4, tf, tiles * 4);
    }
    if (!st)
        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->wshard), it->w,
                           row0 * it->cols / 2, wk->buf[1], nrows * it->cols / 2);
    if (!st)
        st = cast_band(ctx, p, it, row0, nrows, wk->buf[1], sc, tb, wk->buf[2]);
    return st ? st : fp8_writer_pwrite(ctx, e->out, wt, row0 * it->cols, wk->buf[2],
                                       nrows * it->cols);
}

/* A compressed shard is a stream, read forward: its bands in order. */
static void expert_lane(void *arg, size_t j, fp8_job_info *info)
{
    const fp8_tensor_info *wt;
    uint64_t at;
    const cast_item *it = expert_of(arg, j, &wt, &at);
    const fp8_checkpoint *ck = ((const expert_run *)arg)->p->ck;
    info->offset = j;
    info->lane = ck_lane(ck, it->wshard, it->w, 0, 0, &at) != FP8_NO_LANE ||
                         ck_lane(ck, it->sshard, it->s, 0, 0, &at) != FP8_NO_LANE
                     ? 0
                     : FP8_NO_LANE;
}

/* Output tensors [from, to) of `out`, experts' codes or tile scales, their
 * bands run as one set of jobs, so that the workers' buffers are made once
 * (any thread count writes the same bytes; a failure is the first band's,
 * in the tensors' order). */
fp8_status dsv4_write_experts(fp8_ctx *ctx, const cast_plan *p, fp8_writer *out, size_t from,
                              size_t to)
{
    expert_run e = { p, out, from, to - from, fp8_xcalloc(to - from, sizeof *e.first) };
    fp8_jobs spec = { .threads = p->opts.target.threads, .device = FP8_DEVICE_CPU,
                      .run = expert_band, .arg = &e, .what = p->input,
                      .cancel = p->opts.target.cancel, .describe = expert_lane, .nlanes = 1 };
    for (size_t i = 0; e.first && i < e.n; i++) {
        const cast_item *it = cast_item_named(p, fp8_writer_tensor(out, from + i)->name, true);
        uint64_t band = it->kind == CAST_WEIGHT ? TILE * it->cols : 0, b[3] = {
            TILE * (it->cols / FP8_MX_GROUP) + fp8_ceil_div(it->cols, TILE) * 5, band / 2, band };
        for (int k = 0; k < 3; k++)
            spec.bufsize[k] = b[k] > spec.bufsize[k] ? b[k] : spec.bufsize[k];
        e.first[i] = spec.njobs;
        spec.njobs += fp8_ceil_div(it->rows, TILE);
    }
    pthread_once(&shift_once, shift_table_init);
    fp8_status st = e.first ? fp8_jobs_run(ctx, &spec)
                            : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    free(e.first);
    return st;
}

/* A trunk weight's E8M0 .scale as F32; a NaN byte is bad input. */
fp8_status dsv4_write_trunk_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                                  fp8_writer *out, const fp8_tensor_info *wt)
{
    enum { CHUNK = 1 << 16 };
    uint64_t n = it->t->elements;
    uint8_t *b = malloc(CHUNK), *f = malloc(CHUNK * 4);
    fp8_status st = b && f ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t at = 0; !st && at < n; at += CHUNK) {
        size_t len = n - at < CHUNK ? (size_t)(n - at) : CHUNK;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->shard), it->t, at, b, len);
        for (size_t i = 0; !st && i < len; i++)
            if (b[i] == 0xFF)
                st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                              "%s: tensor '%s': element %llu is the E8M0 NaN byte 0xff; its "
                              "block has no scale to write",
                              fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name,
                              (unsigned long long)(at + i));
        if (!st) {
            e8m0_f32(p, b, len, f);
            st = fp8_writer_pwrite(ctx, out, wt, at * 4, f, len * 4);
        }
    }
    free(b);
    free(f);
    return st;
}

/* config.json with expert_dtype "fp8" wherever the input says "fp4" (top
 * level: V4; inside quantization_config: V4.1), and at the top level when
 * it says nothing: vLLM's default is "fp4". */
fp8_status dsv4_write_config(fp8_ctx *ctx, const cast_plan *p, const char *dir)
{
    cJSON *config = p->config;
    cJSON *qc = cJSON_GetObjectItemCaseSensitive(config, "quantization_config");
    bool said = false;
    cJSON *where[2] = { config, cJSON_IsObject(qc) ? qc : NULL };
    for (int i = 0; i < 2; i++)
        if (where[i] && cJSON_GetObjectItemCaseSensitive(where[i], "expert_dtype")) {
            cJSON_ReplaceItemInObjectCaseSensitive(where[i], "expert_dtype",
                                                   cJSON_CreateString("fp8"));
            said = true;
        }
    if (!said && !cJSON_AddStringToObject(config, "expert_dtype", "fp8"))
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    return ck_json_write(ctx, dir, "config.json", config);
}

fp8_status dsv4_plan(fp8_ctx *ctx, cast_plan *p, const fp8_convert_options *o, bool *handled)
{
    fp8_status st = FP8_OK;
    for (size_t i = 0; !st && i < p->n; i++) {
        st = find_expert(ctx, p, &p->items[i]);
        p->experts += p->items[i].kind == CAST_WEIGHT;
    }
    if (st || !p->experts)
        return st;
    *handled = true;
    return fp4_cast_pick(ctx, p->input, o, &p->cast, fp4_layout_get(p->cast->from));
}
