/*
 * types.h - the tables of lib/'s lowest layer, which every command reads:
 * safetensors' dtypes (their names and widths, the public fp8_dtype), and
 * what an element type and a scaling scheme are, in one table
 * each (as ggml keeps type_traits[]): code bits and packing, code -> value,
 * NaN and the largest finite value per element type; per scheme the group
 * of elements that shares a scale, how many scale levels there are and each
 * level's element type.  fp8_scheme_geometry() gives a matrix's groups and
 * scale indices; the rest of lib/ asks it instead of testing the scheme.
 */
#ifndef FP8_TYPES_H
#define FP8_TYPES_H

#include "common/fp8_math.h"
#include "common/internal.h"

/* Whether a safetensors dtype is an 8-bit float (F8_*): what a quantized
 * checkpoint holds. */
bool fp8_dtype_is_float8(fp8_dtype dtype);

/* Whether tensors of dtype d are a scheme's codes as themselves, one a byte
 * (F8_E4M3: an FP8 weight): a scheme row's element is of that dtype.
 * Packed codes (E2M1, INT4) are their layout rows' to find. */
bool fp8_dtype_holds_codes(fp8_dtype d);

/* Whether d is a weight's float dtype: BF16, F16 or F32. */
bool fp8_dtype_is_float(fp8_dtype d);

/* The bits of +infinity in d (F64, F32, BF16 or F16: a weight's or an
 * output's dtype); a magnitude's bits at or above them are not finite. */
uint64_t fp8_dtype_inf_bits(fp8_dtype d);

/* Whether stored scales of dtype d are E8M0 bytes, each a power of two:
 * F8_E8M0, or U8 as compressed-tensors' MXFP8 writes them. */
bool fp8_dtype_holds_pow2_scales(fp8_dtype d);

/* Elements of an OCP MX block: one E8M0 scale per 32 consecutive elements
 * of a row. */
#define FP8_MX_GROUP 32

/* Element types a code or a stored scale can have. */
typedef enum {
    FP8_ELEM_E4M3, /* OCP E4M3: one byte, NaN 0x7F/0xFF, largest 448 */
    FP8_ELEM_E5M2, /* OCP E5M2: one byte, IEEE-like (room for it: no scheme uses it yet) */
    FP8_ELEM_E2M1, /* OCP E2M1 (FP4): two per byte, no NaN, largest 6 (NVFP4, next) */
    FP8_ELEM_E8M0, /* OCP E8M0: one byte, 2^(b - 127), NaN 0xFF (MX scales) */
    FP8_ELEM_F32,  /* a float scale (F32, or the model's dtype: see fmt_scale_dtype) */
    FP8_ELEM_I4,   /* signed 4-bit integer stored offset by 8, eight to an I32 word (element
                    * 2i in the low nibble of byte i): -8..7, no NaN (compressed-tensors
                    * pack-quantized) */
    FP8_ELEM_COUNT
} fp8_elem;

typedef struct {
    const char *name;
    unsigned bits;     /* bits of one element */
    unsigned per_byte; /* elements packed in one byte (0: wider than a byte) */
    float max_finite;  /* the largest finite magnitude */
    /* the value of a code (NULL for F32); NaN for a NaN code */
    float (*decode)(uint8_t code);
    /* whether a code is NaN (NULL when the type has none) */
    bool (*is_nan)(uint8_t code);
    /* the safetensors dtype that holds it as itself (a layout may pack it
     * in another: E2M1 codes two to a U8; INT4 has none, I32 words hold it) */
    fp8_dtype dtype;
    /* how dequantize's overflow message names a value of codes of this type */
    const char *deq_product;
    /* appended: the most negative value where it is not -max_finite (INT4:
     * -8 against 7); 0 for the symmetric types */
    float most_negative;
} fp8_elem_traits;

/* The rows, in fp8_elem's order; fp8_elem_get (inline: the bounds' inner loops call it). */
extern const fp8_elem_traits fp8_elem_table[FP8_ELEM_COUNT];
static inline const fp8_elem_traits *fp8_elem_get(fp8_elem e)
{
    return (unsigned)e < FP8_ELEM_COUNT ? &fp8_elem_table[e] : NULL;
}

/* Whether stored scale byte b of element type e is a scale: a number
 * without a sign bit (E8M0: all but its NaN 0xFF; E4M3: 0x00 to 0x7E, 0
 * being an all-zero group's scale).  A NaN or negative one is verify's
 * bad-scale, and convert and dequantize-for-export refuse it
 * (fp8conv-formats(5), ELEMENT TYPES). */
bool fp8_elem_scale_ok(const fp8_elem_traits *e, uint8_t b);

/* The code of e of the largest finite magnitude (E4M3 0x7E, E2M1 6's,
 * INT4 -8's): under a scale, the first to overflow. */
uint8_t fp8_elem_largest_code(const fp8_elem_traits *e);

/* Code c of element type e times 2^k as an E4M3 code (a cast between scale
 * grids: DeepSeek's E2M1 experts into tiles, MX groups into ue8m0 blocks);
 * false when the product is no E4M3 value (it would round) or c is NaN.
 * A zero keeps its sign. */
bool fp8_elem_shift_e4m3(const fp8_elem_traits *e, uint8_t c, int k, uint8_t *q);
/* Its table: rows k = k0 .. k0 + rows - 1 of `codes` bytes, code c's shift
 * by k, or FP8_NO_SHIFT (E4M3's NaN, which no product is) where none. */
enum { FP8_NO_SHIFT = 0x7F };
void fp8_elem_shift_rows(const fp8_elem_traits *e, int k0, int rows, unsigned codes, uint8_t *t);

/* How a scheme's groups tile one [M, N] matrix. */
typedef enum {
    FP8_GROUP_TILE,   /* block_rows x block_cols tiles (partial at the edges) */
    FP8_GROUP_ROW,    /* one group per row */
    FP8_GROUP_MATRIX, /* one group per matrix: its scale comes from the matrix's amax */
    FP8_GROUP_RUN,    /* runs of `run` elements of a row (N a multiple of run) */
} fp8_group_shape;

typedef struct {
    fp8_elem elem;          /* the weight codes */
    fp8_group_shape group;
    uint32_t run;           /* FP8_GROUP_RUN: elements per group */
    unsigned levels;        /* scale levels: 1, or 2 (NVFP4: group and matrix) */
    fp8_elem scale_elem[2]; /* each level's stored element type */
    bool pow2_scales;       /* every scale a power of two (MX) */
    bool fixed;             /* the group is the matrix: a pass over it first (amax) */
    /* appended: FP8_GROUP_RUN, a second run an option may choose instead of
     * `run` (INT4: --group 32 against the default 128); 0: none.  The chosen
     * run travels as the block_cols of fp8_scheme_geometry and as the band's
     * group_cols (fp8_scheme_run). */
    uint32_t run_alt;
} fp8_scheme_traits;

/* The table, in fp8_scheme's order (for static tables that point at a row,
 * as fp4.c's layouts do); elsewhere fp8_scheme_get. */
extern const fp8_scheme_traits fp8_scheme_table[];

/* The scheme's row; NULL for a value outside fp8_scheme. */
const fp8_scheme_traits *fp8_scheme_get(fp8_scheme s);

/* Whether the scheme's second scale level, one per matrix (or fused set),
 * comes from the matrix's largest magnitude: a pass over the input first. */
static inline bool fp8_scheme_has_second_level(fp8_scheme s)
{
    const fp8_scheme_traits *t = fp8_scheme_get(s);
    return t && t->levels > 1;
}

/* Whether quantizing a matrix takes a pass over it first (its amax): its
 * one group is the matrix, or it has a second level. */
static inline bool fp8_scheme_reads_twice(fp8_scheme s)
{
    const fp8_scheme_traits *t = fp8_scheme_get(s);
    return t && (t->fixed || t->levels > 1);
}

/* A RUN scheme's run given an option's choice `want` (the block_cols its
 * callers carry): `want` where the row allows it as its alternative run,
 * else the row's run. */
static inline uint32_t fp8_scheme_run(const fp8_scheme_traits *t, uint64_t want)
{
    return t->run_alt && want == t->run_alt ? t->run_alt : t->run;
}

/* Bytes of n codes of the scheme's element type (two E2M1 or INT4 codes a byte). */
static inline uint64_t fp8_scheme_code_bytes(fp8_scheme s, uint64_t n)
{
    return n * fp8_elem_get(fp8_scheme_get(s)->elem)->bits / 8;
}

/* Bytes of one stored scale of the scheme's first level: a float scale's
 * by the kind it is stored as, else its element type's. */
static inline unsigned fp8_scheme_scale_size(fp8_scheme s, fp8_scale_kind kind)
{
    const fp8_elem_traits *e = fp8_elem_get(fp8_scheme_get(s)->scale_elem[0]);
    return e->per_byte ? e->bits / 8 : fp8_scale_size(kind);
}

/* Whether the scheme's groups are block_rows x block_cols tiles: the block
 * size (--block, weight_block_size) and ue8m0 scales apply to it. */
static inline bool fp8_scheme_has_block(fp8_scheme s)
{
    const fp8_scheme_traits *t = fp8_scheme_get(s);
    return t && t->group == FP8_GROUP_TILE;
}

/*
 * The groups of one [rows, cols] matrix under a scheme: each group is
 * group_rows x group_cols elements (partial at the right and bottom edges),
 * and the matrix has row_groups x col_groups scales, numbered row-major,
 * the matrices of a 3-D tensor one after the other.  block_rows and
 * block_cols are the block scheme's.
 */
typedef struct {
    uint64_t group_rows, group_cols;
    uint64_t row_groups, col_groups;
} fp8_geometry;

void fp8_scheme_geometry(fp8_scheme s, uint32_t block_rows, uint32_t block_cols, uint64_t rows,
                         uint64_t cols, fp8_geometry *g);

/* The index of the scale of element (r, c) of matrix x. */
static inline uint64_t fp8_geometry_index(const fp8_geometry *g, uint64_t x, uint64_t r,
                                          uint64_t c)
{
    return (x * g->row_groups + r / g->group_rows) * g->col_groups + c / g->group_cols;
}

/* The scales rows [row0, row0 + nrows) of matrix x use (nrows >= 1): the
 * first one's index and how many, whole rows of groups. */
static inline void fp8_geometry_span(const fp8_geometry *g, uint64_t x, uint64_t row0,
                                     uint64_t nrows, uint64_t *first, uint64_t *count)
{
    *first = (x * g->row_groups + row0 / g->group_rows) * g->col_groups;
    *count = ((row0 + nrows - 1) / g->group_rows - row0 / g->group_rows + 1) * g->col_groups;
}


/* ---------------------------------------------- engine profiles (fp8conv-formats(5), PROFILES)
 * One row per engine: its scale and element arithmetic (fp8_math.h's
 * fp8_numerics, all zero for fp8conv's own) and the schemes it defines. */
typedef struct {
    fp8_numerics num;
    unsigned schemes; /* bit 1 << fp8_scheme */
    bool ue8m0;       /* its block scales are --scale-fmt ue8m0's, of the floored amax */
    /* the schemes (bit 1 << fp8_scheme) whose arithmetic is by_scheme's, not num's: an
     * engine that quantizes a tensor or a row with another kernel than its blocks */
    unsigned own;
    fp8_numerics by_scheme[FP8_SCHEME_INT4 + 1];
} fp8_profile_traits;

/* The profile's row; NULL for a value outside fp8_profile. */
const fp8_profile_traits *fp8_profile_get(fp8_profile p);

/* The arithmetic profile p's row gives scheme s (by_scheme's where it has
 * its own, else the row's); fp8conv's own for a value outside fp8_profile. */
const fp8_numerics *fp8_profile_numerics(fp8_profile p, fp8_scheme s);


#endif
