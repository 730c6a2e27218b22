/*
 * convert_fp4.c - convert's casts of packed-FP4 weights (fp8conv(1)
 * convert, CASTS; fp8conv-formats(5), 2026 LAYOUTS): DeepSeek-V4's MXFP4
 * routed experts (fp4.h's FP4_LAYOUT_DSV4: I8 [out, in / 2] E2M1 codes, an
 * F8_E8M0 scale per 32 elements of a row) become FP8 E4M3 [out, in] with
 * one scale per 128x128 tile, as DeepSeek's own cast does it
 * (deepseek-ai DeepSeek-V4-Flash-0731 inference/convert.py
 * cast_e2m1fn_to_e4m3fn, quoted in radixark/miles
 * tools/convert_mxfp4_to_fp8.py): the tile's scale is the largest group
 * scale of the tile over 2^6, and each E2M1 value times 2^(group exponent
 * - tile exponent) is the E4M3 code.  E2M1's largest value 6 times 2^6 is
 * 384, inside E4M3; the cast is exact while each such product is an E4M3
 * value, which holds for every element while the group exponents of a tile
 * spread by 14 or less (0.5 * 2^(6 - 14) = 2^-9, E4M3's smallest
 * subnormal).  An element whose product is not an E4M3 value is refused,
 * with its tensor, tile and spread: the cast never rounds.  Every other
 * tensor is copied as it is (the trunk's FP8 weights and their .scale
 * keep their bytes), and config.json says expert_dtype "fp8": vLLM reads a
 * missing expert_dtype as "fp4" (vllm/models/deepseek_v4,
 * DeepseekV4ForCausalLM.__init__: getattr(config, "expert_dtype", "fp4")),
 * and with "fp8" maps every .scale to weight_scale_inv, which its block FP8
 * MoE method reads (_make_deepseek_v4_weights_mapper).
 *
 * Every FP8 scale of the output is F32 (the tile scales, and the trunk's
 * .scale, whose E8M0 bytes become the same powers of two), as
 * DeepSeek-V4-Flash-Base, the release with FP8 experts, stores them and as
 * vLLM reads them under expert_dtype "fp8" (models/deepseek_v4
 * quant_config.py: is_scale_e8m0 only for "fp4", else float32 scale
 * parameters): its DeepseekV4Model.load_weights views every float8_e8m0fnu
 * expert weight_scale as uint8 bytes, right for the FP4 experts' uint8
 * parameter, so an E8M0 tile scale would land in the float32 parameter as
 * its byte (vLLM PR 51946: "fluent-looking token salad").  DeepSeek's own
 * cast writes E8M0 tile scales; verify's e8m0-expert-scale names them.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __SSE2__
#include <immintrin.h>
#endif

#include "common/fp8_math.h"
#include "io/checkpoint.h"
#include "io/output.h"
#include "layout/fp4.h"
#include "layout/formats.h"
#include "layout/kvscale.h"

#define TILE 128u        /* DeepSeek's fp8_block_size */
#define TILE_OFFSET 6    /* log2 of its max_offset 2^6: E2M1's 6 * 2^6 = 384 <= 448 */

/* COPY: the bytes as they are, under the item's output name; WEIGHT, SCALE:
 * a DeepSeek-V4 expert's codes, F32 tile scales; TRUNK_SCALE: a trunk FP8
 * weight's E8M0 .scale as F32; RECIP: an NVFP4 second-level scale, its
 * reciprocal (`value`, computed when planned). */
typedef enum {
    CAST_COPY, CAST_WEIGHT, CAST_SCALE, CAST_TRUNK_SCALE, CAST_RECIP,
    CAST_MX_SCALE /* an MXFP4 weight's E8M0 group scales as NVFP4 E4M3 ones */
} cast_kind;

typedef struct {
    const fp8_tensor_info *t; /* the input's tensor */
    size_t shard;
    cast_kind kind;
    /* an expert (both its weight's item and its scale's): */
    const fp8_tensor_info *w, *s;
    size_t wshard, sshard;
    uint64_t rows, cols;   /* unpacked: [rows, cols] */
    fp8_dtype out_dtype;
    int out_rank;
    uint64_t out_shape[2];
    char *out_name;        /* NULL: the input's name */
    float value;           /* RECIP */
    int mx_m;              /* MX_SCALE: the NVFP4 global scale's exponent m */
    unsigned mx_most;      /* MX_SCALE: the largest E8M0 byte of the weight's scale */
    bool mx_fused;         /* MX_SCALE: m is a fused layer's (fp4_fused_parts) */
} cast_item;

typedef struct {
    fp8_checkpoint *ck;
    const char *input;
    cast_item *items; /* in the checkpoint's (name) order */
    size_t *by_out;   /* items by output name */
    size_t n, experts, nvfp4, rounded, mxfp4;
    char **names;     /* output shard names */
    bool no_sync;
    uint64_t threads; /* for an expert's bands */
    const volatile sig_atomic_t *cancel;
} cast_plan;

static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

static uint64_t out_bytes(const cast_item *it)
{
    if (it->kind == CAST_COPY)
        return fp8_tensor_nbytes(it->t);
    if (it->kind == CAST_RECIP)
        return 4;
    if (it->kind == CAST_TRUNK_SCALE)
        return it->t->elements * 4;
    return it->out_shape[0] * it->out_shape[1] * (it->kind == CAST_SCALE ? 4 : 1);
}

static const char *out_name(const cast_item *it) { return it->out_name ? it->out_name : it->t->name; }

/* The expert whose weight or scale `t` is, if any: fills the item. */
static fp8_status find_expert(fp8_ctx *ctx, cast_plan *p, cast_item *it)
{
    const fp4_layout *dsv4 = fp4_layout_get(FP4_LAYOUT_DSV4);
    const fp8_tensor_info *t = it->t;
    char *sname = NULL, *oname = NULL;
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
    const fp4_layout *l = w ? fp4_layout_match(p->ck, w->name, w->dtype, w->rank, &sname, &oname) : NULL;
    fp8_status st = FP8_OK;
    if (l == dsv4 && !sname)
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    if (!st && is_scale && w && w->dtype == FP8_DTYPE_F8_E4M3) { /* a trunk weight's */
        it->kind = CAST_TRUNK_SCALE;
        it->out_dtype = FP8_DTYPE_F32;
    }
    size_t sshard = 0;
    const fp8_tensor_info *s = l == dsv4 && sname ? fp8_checkpoint_find(p->ck, sname, &sshard) : NULL;
    if (!st && s) {
        uint64_t experts, rows, cols, sshape[3];
        int srank;
        const char *file = fp8_checkpoint_shard_name(p->ck, sshard);
        if (!fp4_layout_geometry(l, w->rank, w->shape, &experts, &rows, &cols, &srank, sshape))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': a %s weight needs whole groups of %u elements a row",
                          fp8_checkpoint_shard_name(p->ck, wshard), w->name, l->name,
                          l->scheme->run);
        else if (s->dtype != l->scale_dtype || s->rank != srank || s->shape[0] != sshape[0] ||
                 s->shape[1] != sshape[1])
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': the scale of %s weight '%s' must be F8_E8M0 "
                          "[%llu, %llu] (one per %u elements of a row)",
                          file, s->name, l->name, w->name, (unsigned long long)sshape[0],
                          (unsigned long long)sshape[1], l->scheme->run);
        else if (!is_scale || t == s) {
            it->kind = is_scale ? CAST_SCALE : CAST_WEIGHT;
            it->w = w;
            it->s = s;
            it->wshard = wshard;
            it->sshard = sshard;
            it->rows = rows;
            it->cols = cols;
            it->out_rank = 2;
            it->out_dtype = is_scale ? FP8_DTYPE_F32 : FP8_DTYPE_F8_E4M3;
            it->out_shape[0] = is_scale ? ceil_div(rows, TILE) : rows;
            it->out_shape[1] = is_scale ? ceil_div(cols, TILE) : cols;
        }
    }
    free(sname);
    free(oname);
    free(wbuf);
    return st;
}

/* n E8M0 bytes (no NaN) as the little-endian F32 of the same powers of two. */
static void e8m0_f32(const uint8_t *b, size_t n, uint8_t *f)
{
    float (*decode)(uint8_t) = fp8_elem_get(FP8_ELEM_E8M0)->decode;
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
    uint64_t tiles = ceil_div(it->cols, TILE);
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

/* E2M1 code c times 2^k as an E4M3 code; false when that product is no
 * E4M3 value (the cast would round it).  k <= 6 here. */
static bool e2m1_shift(unsigned c, int k, uint8_t *q)
{
    const fp8_elem_traits *e2m1 = fp8_elem_get(FP8_ELEM_E2M1);
    float v = e2m1->decode((uint8_t)c);
    if (v == 0) {
        *q = c & 8 ? 0x80 : 0x00; /* -0 stays -0: the decode's sign (scheme.c) */
        return true;
    }
    if (k < -24) /* below 2^-24 * 0.5: far under E4M3's 2^-9 */
        return false;
    float x = v * fp8_pow2(k); /* exact: 2 significant bits, exponent >= -25 */
    *q = fp8_f32_to_e4m3(x);
    return fp8_e4m3_to_f32(*q) == x;
}

/* The spread of group exponents in tile j of a band (for the message). */
static unsigned tile_spread(const cast_item *it, uint64_t nrows, const uint8_t *sc, uint64_t j)
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
 * the rule (e2m1_shift); it names the first element the cast would change. */
static fp8_status cast_band_ref(fp8_ctx *ctx, const cast_plan *p, const cast_item *it, uint64_t row0,
                            uint64_t nrows, const uint8_t *packed, const uint8_t *sc,
                            const uint8_t *tb, uint8_t *q)
{
    uint64_t groups = it->cols / FP8_MX_GROUP;
    for (uint64_t r = 0; r < nrows; r++)
        for (uint64_t i = 0; i < it->cols; i++) {
            unsigned byte = packed[r * (it->cols / 2) + i / 2];
            unsigned c = i & 1 ? byte >> 4 : byte & 15; /* element 2i in the low nibble */
            int k = (int)sc[r * groups + i / FP8_MX_GROUP] - (int)tb[i / TILE];
            if (!e2m1_shift(c, k, &q[r * it->cols + i]))
                return fp8_fail(
                    ctx, FP8_ERR_BAD_INPUT,
                    "%s: tensor '%s': element [%llu, %llu] (%g times 2^%d) is no E4M3 value "
                    "under its 128x128 tile's scale (tile [%llu, %llu]: its group exponents "
                    "spread by %u, more than the 14 E4M3 holds): the cast to FP8 would "
                    "change it; convert refuses (dequantize-for-export keeps every value)",
                    fp8_checkpoint_shard_name(p->ck, it->wshard), it->w->name,
                    (unsigned long long)(row0 + r), (unsigned long long)i,
                    (double)fp8_elem_get(FP8_ELEM_E2M1)->decode((uint8_t)c),
                    (int)sc[r * groups + i / FP8_MX_GROUP] - 127,
                    (unsigned long long)(row0 / TILE), (unsigned long long)(i / TILE),
                    tile_spread(it, nrows, sc, i / TILE));
        }
    return FP8_OK;
}

/* e2m1_shift tabulated for every shift k a tile can give (group byte -
 * tile byte: at most 6, at least -254) and every code; 0x7F, E4M3's NaN,
 * which no product is, where the product is no E4M3 value.  A row is 16
 * bytes, a pshufb table. */
enum { SHIFT_MIN = -255, SHIFT_COUNT = 6 - SHIFT_MIN + 1, NO_CODE = 0x7F };
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
DSV4_SSSE3 static unsigned cast_rows_ssse3(const uint8_t *packed, const uint8_t *sc,
                                           const uint8_t *tb, uint64_t nrows, uint64_t cols,
                                           uint8_t *q)
{
    uint64_t groups = cols / FP8_MX_GROUP;
    const __m128i nib = _mm_set1_epi8(0x0F);
    __m128i none = _mm_set1_epi8(NO_CODE), bad = _mm_setzero_si128();
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
static unsigned cast_rows_ssse3(const uint8_t *packed, const uint8_t *sc, const uint8_t *tb,
                                uint64_t nrows, uint64_t cols, uint8_t *q)
{
    return 1;
}
#endif

static void shift_table_init(void)
{
    for (int k = SHIFT_MIN; k < SHIFT_MIN + SHIFT_COUNT; k++)
        for (unsigned c = 0; c < 16; c++) {
            uint8_t q;
            shift_table[k - SHIFT_MIN][c] = e2m1_shift(c, k, &q) ? q : NO_CODE;
        }
    const char *want = getenv("FP8CONV_DSV4_CAST");
    band_path = cpu_has_ssse3() ? CAST_PATH_SSSE3 : CAST_PATH_TABLE;
    if (want && !strcmp(want, "ref"))
        band_path = CAST_PATH_REF;
    else if (want && !strcmp(want, "table"))
        band_path = CAST_PATH_TABLE;
}

/* cast_band_ref's bytes a group's table row at a time; nonzero when some
 * element has no code. */
static unsigned cast_rows_table(const uint8_t *packed, const uint8_t *sc, const uint8_t *tb,
                                uint64_t nrows, uint64_t cols, uint8_t *q)
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
                bad |= (dst[2 * b] == NO_CODE) | (dst[2 * b + 1] == NO_CODE);
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
                       ? cast_rows_ssse3(packed, sc, tb, nrows, it->cols, q)
                   : band_path == CAST_PATH_TABLE
                       ? cast_rows_table(packed, sc, tb, nrows, it->cols, q)
                       : 1;
    return bad ? cast_band_ref(ctx, p, it, row0, nrows, packed, sc, tb, q) : FP8_OK;
}

/* Bands id, id + n, id + 2n, ... (of 128 rows) of one expert's codes (a
 * weight item) or tile scales (a scale item), written where they belong;
 * *failed_row: the first row of the band that failed. */
static fp8_status expert_bands(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                               fp8_writer *out, const fp8_tensor_info *wt, uint64_t id,
                               uint64_t n, uint64_t *failed_row)
{
    uint64_t groups = it->cols / FP8_MX_GROUP, tiles = ceil_div(it->cols, TILE);
    uint8_t *sc = malloc(TILE * groups), *tb = malloc(tiles), *tf = malloc(tiles * 4);
    uint8_t *packed = it->kind == CAST_WEIGHT ? malloc(TILE * it->cols / 2) : NULL;
    uint8_t *q = it->kind == CAST_WEIGHT ? malloc(TILE * it->cols) : NULL;
    fp8_status st = sc && tb && tf && (it->kind != CAST_WEIGHT || (packed && q))
                        ? FP8_OK
                        : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    fp8_file *sf = fp8_checkpoint_shard(p->ck, it->sshard);
    fp8_file *wf = fp8_checkpoint_shard(p->ck, it->wshard);
    uint64_t row0 = id * TILE;
    pthread_once(&shift_once, shift_table_init);
    for (; !st && row0 < it->rows; row0 += n * TILE) {
        uint64_t nrows = it->rows - row0 < TILE ? it->rows - row0 : TILE;
        st = fp8_file_read(ctx, sf, it->s, row0 * groups, sc, nrows * groups);
        if (!st)
            st = band_path == CAST_PATH_REF ? tile_bytes_ref(ctx, p, it, row0, nrows, sc, tb)
                                            : tile_bytes(ctx, p, it, row0, nrows, sc, tb);
        if (!st && it->kind == CAST_SCALE) {
            e8m0_f32(tb, tiles, tf);
            st = fp8_writer_pwrite(ctx, out, wt, row0 / TILE * tiles * 4, tf, tiles * 4);
        }
        if (st || it->kind == CAST_SCALE)
            continue;
        st = fp8_file_read(ctx, wf, it->w, row0 * it->cols / 2, packed, nrows * it->cols / 2);
        if (!st)
            st = cast_band(ctx, p, it, row0, nrows, packed, sc, tb, q);
        if (!st)
            st = fp8_writer_pwrite(ctx, out, wt, row0 * it->cols, q, nrows * it->cols);
        if (!st && p->cancel && *p->cancel)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", p->input);
    }
    if (st)
        *failed_row = row0;
    free(sc);
    free(tb);
    free(tf);
    free(packed);
    free(q);
    return st;
}

typedef struct {
    const cast_plan *p;
    const cast_item *it;
    fp8_writer *out;
    const fp8_tensor_info *wt;
    uint64_t id, n, failed_row;
    fp8_ctx *ctx;
    fp8_status st;
} band_worker;

static void *band_thread(void *arg)
{
    band_worker *b = arg;
    b->st = b->ctx ? expert_bands(b->ctx, b->p, b->it, b->out, b->wt, b->id, b->n, &b->failed_row)
                   : FP8_ERR_NOMEM;
    return NULL;
}

/* One expert's codes or tile scales, its bands spread over the threads
 * (any count writes the same bytes); a failure is the first band's that
 * failed, whichever thread met it. */
static fp8_status write_expert(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                               fp8_writer *out, const fp8_tensor_info *wt)
{
    uint64_t bands = ceil_div(it->rows, TILE), n = p->threads, off;
    /* a compressed shard is a stream, read forward by one thread */
    if (ck_lane(p->ck, it->wshard, it->w, 0, 0, &off) != FP8_NO_LANE ||
        ck_lane(p->ck, it->sshard, it->s, 0, 0, &off) != FP8_NO_LANE)
        n = 1;
    n = n < bands ? n : bands;
    uint64_t failed;
    if (n <= 1)
        return expert_bands(ctx, p, it, out, wt, 0, 1, &failed);
    band_worker *w = fp8_xcalloc(n, sizeof *w);
    pthread_t *th = fp8_xcalloc(n, sizeof *th);
    bool *started = fp8_xcalloc(n, sizeof *started);
    fp8_status st = w && th && started ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; !st && i < n; i++) {
        w[i] = (band_worker){ .p = p, .it = it, .out = out, .wt = wt, .id = i, .n = n,
                              .failed_row = UINT64_MAX, .ctx = fp8_ctx_create() };
        started[i] = pthread_create(&th[i], NULL, band_thread, &w[i]) == 0;
        if (!started[i])
            band_thread(&w[i]); /* no thread: this one does its share */
    }
    const band_worker *first = NULL;
    for (uint64_t i = 0; w && started && i < n; i++) {
        if (started[i])
            pthread_join(th[i], NULL);
        if (!st && w[i].st && (!first || w[i].failed_row < first->failed_row))
            first = &w[i];
    }
    if (first)
        st = first->ctx ? fp8_fail(ctx, first->st, "%s", fp8_ctx_message(first->ctx))
                        : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; w && i < n; i++)
        fp8_ctx_free(w[i].ctx);
    free(w);
    free(th);
    free(started);
    return st;
}

static fp8_status copy_tensor(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                              fp8_writer *out, const fp8_tensor_info *wt)
{
    enum { CHUNK = 1 << 20 };
    uint64_t n = fp8_tensor_nbytes(it->t);
    unsigned char *buf = malloc(CHUNK);
    fp8_status st = buf ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    for (uint64_t at = 0; !st && at < n; at += CHUNK) {
        size_t len = n - at < CHUNK ? (size_t)(n - at) : CHUNK;
        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->shard), it->t, at, buf, len);
        if (!st)
            st = fp8_writer_pwrite(ctx, out, wt, at, buf, len);
    }
    free(buf);
    return st;
}

/* A trunk weight's E8M0 .scale as F32; a NaN byte is bad input. */
static fp8_status write_trunk_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
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
            e8m0_f32(b, len, f);
            st = fp8_writer_pwrite(ctx, out, wt, at * 4, f, len * 4);
        }
    }
    free(b);
    free(f);
    return st;
}

static int cmp_by_out(const void *a, const void *b, void *arg)
{
    const cast_plan *p = arg;
    return strcmp(out_name(&p->items[*(const size_t *)a]), out_name(&p->items[*(const size_t *)b]));
}

/* The writer's order is not the plan's: by output name. */
static const cast_item *item_named(const cast_plan *p, const char *name)
{
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(out_name(&p->items[p->by_out[mid]]), name);
        if (!d)
            return &p->items[p->by_out[mid]];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static fp8_status write_recip(fp8_ctx *ctx, const cast_item *it, fp8_writer *out,
                              const fp8_tensor_info *wt)
{
    uint32_t bits = fp8_f32_bits(it->value);
    unsigned char le[4] = { (unsigned char)bits, (unsigned char)(bits >> 8),
                            (unsigned char)(bits >> 16), (unsigned char)(bits >> 24) };
    return fp8_writer_pwrite(ctx, out, wt, 0, le, 4);
}

static fp8_status write_mx_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                                 fp8_writer *out, const fp8_tensor_info *wt);

static fp8_status write_shard(fp8_ctx *ctx, const cast_plan *p, size_t s, const char *path)
{
    fp8_writer *out = NULL;
    fp8_status st = fp8_writer_create(ctx, path, &out);
    for (size_t i = 0; !st && i < p->n; i++) {
        const cast_item *it = &p->items[i];
        if (it->shard != s)
            continue;
        st = it->kind == CAST_COPY || it->kind == CAST_TRUNK_SCALE
                 ? fp8_writer_add_tensor(ctx, out, out_name(it),
                                         it->kind == CAST_COPY ? it->t->dtype : FP8_DTYPE_F32,
                                         it->t->rank, it->t->shape)
                 : fp8_writer_add_tensor(ctx, out, out_name(it), it->out_dtype, it->out_rank,
                                         it->out_shape);
    }
    if (!st) {
        fp8_writer_set_durable(out, !p->no_sync);
        st = fp8_writer_begin(ctx, out);
    }
    for (size_t k = 0; !st && k < fp8_writer_tensor_count(out); k++) {
        const fp8_tensor_info *wt = fp8_writer_tensor(out, k);
        const cast_item *it = item_named(p, wt->name);
        st = it->kind == CAST_COPY          ? copy_tensor(ctx, p, it, out, wt)
             : it->kind == CAST_RECIP       ? write_recip(ctx, it, out, wt)
             : it->kind == CAST_TRUNK_SCALE ? write_trunk_scale(ctx, p, it, out, wt)
             : it->kind == CAST_MX_SCALE    ? write_mx_scale(ctx, p, it, out, wt)
                                            : write_expert(ctx, p, it, out, wt);
    }
    if (!st)
        st = fp8_writer_commit(ctx, out);
    fp8_writer_free(out);
    return st;
}

static fp8_status write_index(fp8_ctx *ctx, const cast_plan *p, const char *dir)
{
    ck_index_entry *map = fp8_xcalloc(p->n + 1, sizeof *map);
    if (!map)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    uint64_t total = 0;
    for (size_t i = 0; i < p->n; i++) {
        map[i] = (ck_index_entry){ out_name(&p->items[i]), p->names[p->items[i].shard] };
        total += out_bytes(&p->items[i]);
    }
    fp8_status st = ck_index_write(ctx, dir, map, p->n, total);
    free(map);
    return st;
}

/* config.json with expert_dtype "fp8" wherever the input says "fp4" (top
 * level: V4; inside quantization_config: V4.1), and at the top level when
 * it says nothing: vLLM's default is "fp4". */
static fp8_status write_config(fp8_ctx *ctx, cJSON *config, const char *dir)
{
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

/* The options convert takes beside the cast's own target. */
static fp8_status check_options(fp8_ctx *ctx, const fp8_convert_options *o, const char *input)
{
    const fp8_quant_options *t = &o->target;
    bool block_ok = !o->block_set || (t->block_rows == TILE && t->block_cols == TILE);
    if ((o->scheme_set && t->scheme != FP8_SCHEME_BLOCK) || !block_ok ||
        (t->format != FP8_FORMAT_DEFAULT && t->format != FP8_FORMAT_HF_FP8) ||
        (o->scale_fmt_set && !t->scale_ue8m0) || o->kv_names)
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: DeepSeek-V4's MXFP4 experts cast to one layout only, DeepSeek's: "
                        "--scheme block --block 128x128 --scale-fmt ue8m0 --format hf-fp8 "
                        "(the trunk's; --kv-names does not apply)",
                        input);
    return FP8_OK;
}

/* ---------------------------------------------------------------- NVFP4 */

/*
 * NVFP4 between ModelOpt and compressed-tensors (fp4.h's two NVFP4 rows):
 * the codes (weight <-> weight_packed) and the E4M3 group scales
 * (weight_scale) are copied; the second level is a multiplier in ModelOpt
 * (weight_scale_2 F32 []) and a divisor in compressed-tensors
 * (weight_global_scale F32 [1]), so each becomes its reciprocal, and so do
 * the activations' (ModelOpt input_scale F32 [] <-> compressed-tensors
 * input_global_scale F32 [1]: vLLM compressed_tensors_w4a4_nvfp4.py takes
 * 1 / input_global_scale where ModelOptNvFp4LinearMethod takes input_scale;
 * testdata/gen_fp4.py).  Exact when the fp32 reciprocal is exact (the
 * scale a power of two): every value e2m1 * s * g = e2m1 * s / (1 / g).
 * Otherwise the fp32 reciprocal nearest 1 / g is written (a relative
 * change of at most 2^-24 to every value of the weight), counted in the
 * report; --exact refuses it.
 */
typedef struct {
    const fp4_layout *l;
    const char *input_suffix; /* the activations' second level (not in fp4.h's table yet) */
    int global_rank;          /* 0: [], 1: [1] */
} nv_side;

static const nv_side nv_modelopt = { NULL, ".input_scale", 0 };
static const nv_side nv_ct = { NULL, ".input_global_scale", 1 };

static cast_item *item_of(cast_plan *p, const char *name)
{
    size_t shard;
    const fp8_tensor_info *t = fp8_checkpoint_find(p->ck, name, &shard);
    for (size_t lo = 0, hi = p->n; t && lo < hi;) { /* items are in name order */
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(p->items[mid].t->name, name);
        if (!d)
            return &p->items[mid];
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

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
    it->kind = CAST_RECIP;
    it->value = 1.0f / g;
    it->out_dtype = FP8_DTYPE_F32;
    it->out_rank = rank;
    it->out_shape[0] = 1;
    it->out_shape[1] = 1;
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

static fp8_status check_carried(fp8_ctx *ctx, const cast_plan *p, const char *what);

static fp8_status plan_nvfp4(fp8_ctx *ctx, cast_plan *p, const nv_side *from, const nv_side *to,
                             bool exact)
{
    fp8_status st = FP8_OK;
    for (size_t i = 0; !st && i < p->n; i++) {
        cast_item *it = &p->items[i];
        char *sname = NULL, *oname = NULL;
        const fp4_layout *l = fp4_layout_match(p->ck, it->t->name, it->t->dtype, it->t->rank, &sname,
                                               &oname);
        cast_item *sc = l == from->l && sname ? item_of(p, sname) : NULL;
        free(sname);
        free(oname);
        if (!sc)
            continue;
        size_t stem = strlen(it->t->name) - strlen(from->l->weight_suffix);
        char *gname = NULL, *iname = NULL;
        if (asprintf(&gname, "%.*s%s", (int)stem, it->t->name, from->l->global_suffix) < 0 ||
            asprintf(&iname, "%.*s%s", (int)stem, it->t->name, from->input_suffix) < 0)
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        cast_item *g = st ? NULL : item_of(p, gname), *in = st ? NULL : item_of(p, iname);
        if (!st && !g)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': an NVFP4 weight without its second-level scale '%s'",
                          fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name, gname);
        else if (!st && !in)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': no '%s': the NVFP4 cast takes weights and "
                          "activations in 4 bits (NVFP4 W4A4) only",
                          fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name, iname);
        if (!st && asprintf(&it->out_name, "%.*s%s", (int)stem, it->t->name,
                            to->l->weight_suffix) < 0) {
            it->out_name = NULL;
            st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        }
        if (!st)
            st = plan_recip(ctx, p, g, it->t->name, stem, to->l->global_suffix, to->global_rank,
                            exact);
        if (!st)
            st = plan_recip(ctx, p, in, it->t->name, stem, to->input_suffix, to->global_rank,
                            exact);
        p->nvfp4++;
        free(gname);
        free(iname);
    }
    return st ? st : check_carried(ctx, p, "NVFP4");
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
            (it->t->dtype == FP8_DTYPE_F8_E4M3 && !fp4_is_group_scale(p->ck, it->t->name)))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': the cast to NVFP4 carries %s weights only (an FP8 "
                          "weight or KV-cache scale beside them is not converted)",
                          fp8_checkpoint_shard_name(p->ck, it->shard), it->t->name, what);
    }
    return st;
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

/* config.json (and ModelOpt's hf_quant_config.json) of the NVFP4 target:
 * as testdata/gen_fp4.py writes each (compressed-tensors quant_scheme.py
 * NVFP4 preset; ModelOpt's NVFP4 export read by vLLM modelopt.py
 * ModelOptNvFp4Config.from_config: hf_quant_config.json's "quantization"
 * with exclude_modules, and config.json's quantization_config in the shape
 * ModelOpt's export converts it to, modelopt/torch/export/convert_hf_config.py
 * convert_hf_quant_config_format: config_groups, "ignore", quant_algo,
 * quant_method.  vLLM reads config.json's alone when there is one
 * (model_loader/weight_utils.py get_quant_config) and its exclude list from
 * "ignore" alone (ModelOptQuantConfigBase.from_config): a flat
 * "exclude_modules" there leaves lm_head quantized, and the bf16 lm_head
 * does not load).  from_ct: the input's config is
 * compressed-tensors'; acts: the activations are NVFP4 too (W4A4), else
 * the weights alone (W4A16: compressed-tensors' NVFP4A16 preset,
 * input_activations null; ModelOpt's quant_algo W4A16_NVFP4,
 * export/model_config.py QUANTIZATION_W4A16_NVFP4). */
static fp8_status write_nv_config(fp8_ctx *ctx, const cast_plan *p, cJSON *config, bool from_ct,
                                  bool to_ct, bool acts, const char *dir)
{
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
    cJSON *q = cJSON_CreateObject();
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
        cJSON *a = cJSON_Duplicate(w, true); /* dynamic "local": a per-group scale made at run time */
        cJSON_ReplaceItemInObjectCaseSensitive(a, "dynamic", cJSON_CreateString("local"));
        if (acts)
            cJSON_AddItemToObject(g0, "input_activations", a);
        else {
            cJSON_Delete(a);
            cJSON_AddNullToObject(g0, "input_activations");
        }
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
    } else {
        side = cJSON_CreateObject();
        cJSON *producer = cJSON_AddObjectToObject(side, "producer");
        cJSON_AddStringToObject(producer, "name", "fp8conv");
        cJSON_AddStringToObject(producer, "version", FP8CONV_VERSION);
        cJSON *sq = cJSON_AddObjectToObject(side, "quantization");
        cJSON_AddItemToObject(sq, "exclude_modules", cJSON_Duplicate(ignore, true));
        cJSON_AddNumberToObject(sq, "group_size", 16);
        cJSON_AddNullToObject(sq, "kv_cache_quant_algo");
        cJSON_AddStringToObject(sq, "quant_algo", acts ? "NVFP4" : "W4A16_NVFP4");
        cJSON *g0 = cJSON_AddObjectToObject(cJSON_AddObjectToObject(q, "config_groups"), "group_0");
        cJSON *w = cJSON_CreateObject();
        cJSON_AddFalseToObject(w, "dynamic");
        cJSON_AddNumberToObject(w, "group_size", 16);
        cJSON_AddNumberToObject(w, "num_bits", 4);
        cJSON_AddStringToObject(w, "type", "float");
        if (acts)
            cJSON_AddItemToObject(g0, "input_activations", cJSON_Duplicate(w, true));
        else /* vLLM ModelOptNvFp4Config._from_config: null activations in every group: W4A16 */
            cJSON_AddNullToObject(g0, "input_activations");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(g0, "targets"), cJSON_CreateString("Linear"));
        cJSON_AddItemToObject(g0, "weights", w);
        cJSON_AddItemToObject(q, fmt_ignore_key(FP8_FORMAT_MODELOPT), ignore);
        cJSON_AddStringToObject(q, "quant_algo", acts ? "NVFP4" : "W4A16_NVFP4");
        cJSON_AddStringToObject(q, "quant_method", "modelopt");
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

/* The NVFP4 layout of the input, if any: a weight of one NVFP4 row with
 * its group scale. */
static const fp4_layout *nv_layout_of(const cast_plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        char *sname = NULL, *oname = NULL;
        const fp8_tensor_info *t = p->items[i].t;
        const fp4_layout *l = fp4_layout_match(p->ck, t->name, t->dtype, t->rank, &sname, &oname);
        bool found = l && sname && l->global_suffix && fp8_checkpoint_find(p->ck, sname, NULL);
        free(sname);
        free(oname);
        if (found)
            return l;
    }
    return NULL;
}

static fp8_status check_nv_options(fp8_ctx *ctx, const fp8_convert_options *o, const char *input,
                                   const fp4_layout *from, bool *to_ct)
{
    const fp8_quant_options *t = &o->target;
    bool from_ct = from == fp4_layout_get(FP4_LAYOUT_NVFP4_CT);
    fp8_format want = from_ct ? FP8_FORMAT_MODELOPT : FP8_FORMAT_COMPRESSED_TENSORS;
    if (o->scheme_set || o->block_set || o->scale_fmt_set || o->kv_names || t->format != want)
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: an NVFP4 checkpoint (%s) converts to the other NVFP4 format only: "
                        "--format %s, without --scheme, --block, --scale-fmt or --kv-names",
                        input, from->name, fp8_format_name(want));
    *to_ct = !from_ct;
    return FP8_OK;
}

/* -------------------------------------------------------- MXFP4 -> NVFP4 */

/*
 * compressed-tensors MXFP4 (fp4.h's FP4_LAYOUT_MXFP4_CT: weight_packed U8
 * [N, K / 2], weight_scale U8 [N, K / 32], E8M0 bytes 2^(b - 127)) to NVFP4
 * (compressed-tensors nvfp4-pack-quantized, or ModelOpt), by the closed
 * form of NVIDIA Model-Optimizer PR #1372 (examples/llm_ptq/
 * cast_mxfp4_to_nvfp4.py, "Add closed-form MXFP4 -> NVFP4 weight cast")
 * and PR #1653 (the same numerics hoisted into modelopt/torch/quantization/
 * utils/numeric_utils.py, mxfp4_to_nvfp4_global_amax and
 * mxfp4_to_nvfp4_per_block_amax): the E2M1 codes are kept byte for byte;
 * each MXFP4 group of 32 with scale 2^k_j becomes two NVFP4 groups of 16
 * with the E4M3 scale 2^(k_j - m), under one global scale 2^m for the
 * tensor (ModelOpt weight_scale_2 = 2^m, a multiplier; compressed-tensors
 * weight_global_scale = 2^-m, a divisor: each the other's exact
 * reciprocal), so that scale times global is 2^k_j again and every value
 * is the same.  m = k_max - 8, k_max the largest group exponent of the
 * tensor, as the PR pins it: 2^8 = 256 is E4M3's largest power of two, so
 * the largest group sits at the top of E4M3's powers of two 2^-9 (its
 * smallest subnormal) .. 2^8, which covers every group within 17 of it,
 * the most any m covers while keeping the largest.  (m is kept >= -126, so
 * that 2^m and 2^-m are normal fp32; that covers every group too, as k_j >=
 * -127.)  A group whose exponent is more than 17 below k_max has no E4M3
 * scale 2^(k_j - m); where the PR falls back to a rounded amax, this cast
 * refuses (tensor, group, spread), unless the group's 16 codes of that half
 * are all zero (then any scale keeps them zero: 2^-9 is written).  The
 * activations stay bf16 (the MXFP4 input is weight-only, W4A16), so the
 * target is weight-only NVFP4 (no input scale).
 */
#define MX_NV_TOP 8     /* log2 of E4M3's largest power of two, 256 (448 = 1.75 * 2^8) */
#define MX_NV_BOTTOM -9 /* log2 of its smallest, the subnormal 2^-9 */
#define MX_NV_GLOBAL_MIN -126 /* 2^m and 2^-m normal fp32 */
#define NV_GROUP 16u

/* The weight of layout `l` whose scale is in the checkpoint: the first. */
static const fp4_layout *mx_layout_of(const cast_plan *p)
{
    const fp4_layout *mx = fp4_layout_get(FP4_LAYOUT_MXFP4_CT);
    for (size_t i = 0; i < p->n; i++) {
        char *sname = NULL, *oname = NULL;
        const fp8_tensor_info *t = p->items[i].t;
        const fp4_layout *l = fp4_layout_match(p->ck, t->name, t->dtype, t->rank, &sname, &oname);
        bool found = l == mx && sname && fp8_checkpoint_find(p->ck, sname, NULL);
        free(sname);
        free(oname);
        if (found)
            return l;
    }
    return NULL;
}

static fp8_status check_mx_options(fp8_ctx *ctx, const fp8_convert_options *o, const char *input,
                                   bool *to_ct)
{
    fp8_format f = o->target.format;
    if (o->scheme_set || o->block_set || o->scale_fmt_set || o->kv_names ||
        (f != FP8_FORMAT_DEFAULT && f != FP8_FORMAT_COMPRESSED_TENSORS && f != FP8_FORMAT_MODELOPT))
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: an MXFP4 checkpoint (compressed-tensors mxfp4) converts to NVFP4 "
                        "only: --format compressed-tensors (the default) or --format modelopt, "
                        "without --scheme, --block, --scale-fmt or --kv-names",
                        input);
    *to_ct = f != FP8_FORMAT_MODELOPT;
    return FP8_OK;
}

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

/* Plan the cast of every MXFP4 weight: its codes copied (renamed for
 * ModelOpt), its scale cast (CAST_MX_SCALE), and one new item each, the
 * global scale (CAST_RECIP's writer: one F32), after the input's items. */
static fp8_status plan_mx(fp8_ctx *ctx, cast_plan *p, bool to_ct)
{
    const fp4_layout *from = fp4_layout_get(FP4_LAYOUT_MXFP4_CT);
    const fp4_layout *to = fp4_layout_get(to_ct ? FP4_LAYOUT_NVFP4_CT : FP4_LAYOUT_NVFP4_MODELOPT);
    size_t n0 = p->n, extra = 0;
    fp8_status st = FP8_OK;
    for (size_t i = 0; !st && i < n0; i++) {
        cast_item *it = &p->items[i];
        char *sname = NULL, *oname = NULL;
        const fp4_layout *l = fp4_layout_match(p->ck, it->t->name, it->t->dtype, it->t->rank,
                                               &sname, &oname);
        cast_item *sc = l == from && sname ? item_of(p, sname) : NULL;
        free(sname);
        free(oname);
        if (!sc)
            continue;
        const char *wfile = fp8_checkpoint_shard_name(p->ck, it->shard);
        uint64_t experts, rows, cols, sshape[3];
        int srank;
        if (!fp4_layout_geometry(l, it->t->rank, it->t->shape, &experts, &rows, &cols, &srank,
                                 sshape) || experts != 1)
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': a %s weight needs whole groups of %u elements a row",
                          wfile, it->t->name, l->name, l->scheme->run);
        else if (sc->t->dtype != l->scale_dtype || sc->t->rank != srank ||
                 sc->t->shape[0] != sshape[0] || sc->t->shape[1] != sshape[1])
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: tensor '%s': the scale of %s weight '%s' must be U8 [%llu, %llu] "
                          "(one E8M0 byte per %u elements of a row)",
                          fp8_checkpoint_shard_name(p->ck, sc->shard), sc->t->name, l->name,
                          it->t->name, (unsigned long long)sshape[0],
                          (unsigned long long)sshape[1], l->scheme->run);
        if (st)
            break;
        size_t stem = strlen(it->t->name) - strlen(from->weight_suffix);
        *sc = (cast_item){ .t = sc->t, .shard = sc->shard, .kind = CAST_MX_SCALE, .w = it->t,
                           .s = sc->t, .wshard = it->shard, .sshard = sc->shard, .rows = rows,
                           .cols = cols, .out_dtype = FP8_DTYPE_F8_E4M3, .out_rank = 2,
                           .out_shape = { rows, cols / NV_GROUP } };
        if ((st = mx_max_byte(ctx, p, sc, &sc->mx_most)))
            break;
        cast_item *g = &p->items[n0 + extra++];
        *g = (cast_item){ .t = sc->t, .shard = sc->shard, .kind = CAST_RECIP,
                          .out_dtype = FP8_DTYPE_F32, .out_rank = to_ct ? 1 : 0,
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
        cast_item *g = &p->items[i], *sc = item_of(p, g->t->name);
        unsigned most = sc->mx_most;
        size_t stem = strlen(sc->t->name) - strlen(from->scale_suffix);
        for (size_t f = 0; f < FP4_FUSED_COUNT; f++)
            for (int j = 0; j < 3 && fp4_fused_parts[f][j]; j++) {
                size_t n = strlen(fp4_fused_parts[f][j]);
                if (stem <= n || sc->t->name[stem - n - 1] != '.' ||
                    strncmp(sc->t->name + stem - n, fp4_fused_parts[f][j], n))
                    continue;
                for (int k = 0; k < 3 && fp4_fused_parts[f][k]; k++) {
                    char *part = NULL;
                    if (asprintf(&part, "%.*s%s%s", (int)(stem - n), sc->t->name,
                                 fp4_fused_parts[f][k], from->scale_suffix) < 0) {
                        p->n = n0 + extra; /* the new items' names are freed with the rest */
                        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
                    }
                    const cast_item *peer = item_of(p, part);
                    free(part);
                    if (peer && peer->kind == CAST_MX_SCALE && peer != sc) {
                        most = peer->mx_most > most ? peer->mx_most : most;
                        sc->mx_fused = true;
                    }
                }
            }
        int m = (int)most - 127 - MX_NV_TOP;
        sc->mx_m = m < MX_NV_GLOBAL_MIN ? MX_NV_GLOBAL_MIN : m;
        g->value = fp8_pow2(to_ct ? -sc->mx_m : sc->mx_m);
    }
    p->n = n0 + extra;
    if (!st && !p->mxfp4)
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: no MXFP4 weight with its scale", p->input);
    return st ? st : check_carried(ctx, p, "MXFP4");
}

/* The E4M3 byte of 2^e, for e in MX_NV_BOTTOM..MX_NV_TOP: exact. */
static uint8_t e4m3_pow2(int e) { return fp8_f32_to_e4m3(fp8_pow2(e)); }

/* Whether the 16 codes of half h of group g of a packed row are all +-0. */
static bool mx_half_zero(const uint8_t *row, uint64_t g, unsigned h)
{
    const uint8_t *b = row + g * (FP8_MX_GROUP / 2) + h * (NV_GROUP / 2);
    for (unsigned i = 0; i < NV_GROUP / 2; i++)
        if (b[i] & 0x77) /* each nibble's magnitude bits */
            return false;
    return true;
}

/* An MXFP4 weight's group scales as NVFP4's: two E4M3 scales 2^(k_j - m)
 * per E8M0 byte, a band of rows at a time (one thread: any -j writes these
 * bytes); a half group no E4M3 power of two scales, with a nonzero code, is
 * refused. */
static fp8_status write_mx_scale(fp8_ctx *ctx, const cast_plan *p, const cast_item *it,
                                 fp8_writer *out, const fp8_tensor_info *wt)
{
    enum { BAND = 256 };
    uint64_t groups = it->cols / FP8_MX_GROUP;
    uint8_t *sc = malloc(BAND * groups), *q = malloc(BAND * groups * 2), *row = malloc(it->cols / 2);
    fp8_status st = sc && q && row ? FP8_OK : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    int m = it->mx_m;
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
                    if (e >= MX_NV_BOTTOM) { /* e <= MX_NV_TOP: m >= k_max - 8 */
                        *d = e4m3_pow2(e);
                        continue;
                    }
                    if (!have_row)
                        st = fp8_file_read(ctx, fp8_checkpoint_shard(p->ck, it->wshard), it->w,
                                           (row0 + r) * (it->cols / 2), row, it->cols / 2);
                    have_row = true;
                    if (!st && mx_half_zero(row, g, h))
                        *d = e4m3_pow2(MX_NV_BOTTOM); /* any scale keeps +-0 */
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
                            m + MX_NV_TOP - k, m + MX_NV_TOP,
                            it->mx_fused ? "the layer vLLM fuses it into (q/k/v or gate/up: one "
                                           "global scale)"
                                         : "the tensor",
                            MX_NV_BOTTOM, MX_NV_TOP, MX_NV_TOP - MX_NV_BOTTOM, m);
                }
            }
        }
        if (!st)
            st = fp8_writer_pwrite(ctx, out, wt, row0 * groups * 2, q, nrows * groups * 2);
        if (!st && p->cancel && *p->cancel)
            st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", p->input);
    }
    free(sc);
    free(q);
    free(row);
    return st;
}

fp8_status fp8_convert_fp4(fp8_ctx *ctx, const char *input, const char *output,
                           const fp8_convert_options *opts, bool *handled,
                           fp8_convert_fp4_report *report)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cast_plan p = { .input = input, .no_sync = opts->target.no_sync,
                    .threads = opts->target.threads > 0 ? (uint64_t)opts->target.threads
                               : cpus > 0                ? (uint64_t)cpus
                                                         : 1,
                    .cancel = opts->target.cancel };
    cJSON *config = NULL;
    fp8_output out = { 0 };
    *handled = false;
    fp8_status st = fp8_checkpoint_open(ctx, input, &p.ck);
    if (st)
        return st;
    if (!fp8_checkpoint_is_directory(p.ck) || (st = ck_config_read(ctx, input, &config)) || !config)
        goto out;
    p.n = fp8_checkpoint_tensor_count(p.ck);
    /* room for one new item a weight (MXFP4 -> NVFP4: the global scale) */
    if (!(p.items = fp8_xcalloc(p.n ? 2 * p.n : 1, sizeof *p.items)) ||
        !(p.by_out = fp8_xcalloc(p.n ? 2 * p.n : 1, sizeof *p.by_out))) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < p.n; i++) {
        p.items[i].t = fp8_checkpoint_tensor(p.ck, i, &p.items[i].shard);
        p.by_out[i] = i;
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(config, "model_type");
    const fp4_layout *nv = NULL, *mx = NULL;
    bool to_ct = false;
    if (fp4_layout_of_model(cJSON_IsString(mt) ? mt->valuestring : NULL) ==
        fp4_layout_get(FP4_LAYOUT_DSV4)) {
        for (size_t i = 0; !st && i < p.n; i++) {
            st = find_expert(ctx, &p, &p.items[i]);
            p.experts += p.items[i].kind == CAST_WEIGHT;
        }
        if (st || !p.experts)
            goto out;
        *handled = true;
        st = check_options(ctx, opts, input);
    } else if ((nv = nv_layout_of(&p))) {
        *handled = true;
        nv_side from = nv == fp4_layout_get(FP4_LAYOUT_NVFP4_CT) ? nv_ct : nv_modelopt;
        nv_side to = nv == fp4_layout_get(FP4_LAYOUT_NVFP4_CT) ? nv_modelopt : nv_ct;
        from.l = nv;
        to.l = fp4_layout_get(nv == fp4_layout_get(FP4_LAYOUT_NVFP4_CT)
                                  ? FP4_LAYOUT_NVFP4_MODELOPT
                                  : FP4_LAYOUT_NVFP4_CT);
        st = check_nv_options(ctx, opts, input, nv, &to_ct);
        if (!st)
            st = plan_nvfp4(ctx, &p, &from, &to, opts->exact);
    } else if ((mx = mx_layout_of(&p))) {
        char why[1024];
        *handled = true;
        if (fp4_layout_bias_refused(mx, config, why, sizeof why))
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: %s", input, why);
        if (!st)
            st = check_mx_options(ctx, opts, input, &to_ct);
        if (!st)
            st = plan_mx(ctx, &p, to_ct);
        for (size_t i = 0; i < p.n; i++)
            p.by_out[i] = i;
    } else
        goto out;
    qsort_r(p.by_out, p.n, sizeof *p.by_out, cmp_by_out, &p);
    if (st || (st = ck_output_names(ctx, p.ck, &p.names)) ||
        (st = fp8_output_begin(ctx, &out, input, output, true, opts->target.force,
                               !opts->target.no_sync)))
        goto out;
    for (size_t s = 0; !st && s < fp8_checkpoint_shard_count(p.ck); s++) {
        char *path = fp8_output_file(&out, p.names[s]);
        st = path ? write_shard(ctx, &p, s, path) : fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
        free(path);
    }
    const char *skip[] = { "config.json", HF_QUANT_CONFIG, NULL };
    if (!st && (fp8_checkpoint_has_index(p.ck) || fp8_checkpoint_shard_count(p.ck) > 1))
        st = write_index(ctx, &p, out.tmp);
    if (!st)
        st = nv   ? write_nv_config(ctx, &p, config, !to_ct, to_ct, true, out.tmp)
             : mx ? write_nv_config(ctx, &p, config, true, to_ct, false, out.tmp)
                  : write_config(ctx, config, out.tmp);
    if (!st)
        st = ck_copy_other_files(ctx, p.ck, out.tmp, skip, opts->target.cancel);
    if (!st && opts->target.cancel && *opts->target.cancel)
        st = fp8_fail(ctx, FP8_ERR_IO, "%s: interrupted", input);
    if (!st)
        st = fp8_output_commit(ctx, &out);
    if (!st && report) {
        *report = (fp8_convert_fp4_report){ .experts = p.experts, .nvfp4 = p.nvfp4 + p.mxfp4,
                                            .rounded = p.rounded, .from_mxfp4 = mx != NULL,
                                            .to = nv || mx ? (to_ct ? "compressed-tensors"
                                                                    : "modelopt")
                                                           : NULL };
        for (size_t i = 0; i < p.n; i++) {
            report->copied += p.items[i].kind == CAST_COPY;
            report->output_bytes += out_bytes(&p.items[i]);
        }
    }
out:
    fp8_output_end(&out);
    ck_output_names_free(p.names, p.ck ? fp8_checkpoint_shard_count(p.ck) : 0);
    for (size_t i = 0; p.items && i < p.n; i++)
        free(p.items[i].out_name);
    free(p.items);
    free(p.by_out);
    cJSON_Delete(config);
    fp8_checkpoint_close(p.ck);
    return st;
}
