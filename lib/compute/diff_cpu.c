/*
 * diff_cpu.c - the fast path of diff's statistics.  The same numbers as the
 * reference in diff_ref.c (tests/check_diff.c compares them on every dtype and
 * the tricky values); faster because
 *   - blocks whose bytes are equal are skipped by memcmp;
 *   - the per-element loops are branch-free over integer lanes, so the
 *     compiler vectorizes them, and are compiled for AVX2 and AVX-512 too:
 *     ULP distances are differences of sign-magnitude integers, and the
 *     largest |a - b| is an integer maximum over the bits of the double
 *     (non-negative doubles order as their bits), with 0 for "no value";
 *   - the first differing element is looked for only in the first block
 *     that has one.
 * |a - b| is still one double subtraction per element, as in the reference.
 * The quality sums (fp8_quality) go over every block of the span, equal ones
 * too, in DIFF_LANES lanes carried from block to block (BLOCK_BYTES holds a
 * multiple of DIFF_LANES elements of every dtype), as diff_ref.c's.
 */
#include <math.h>
#include <string.h>

#include "compute/diff_cpu.h"
#include "compute/lanes.h"
#include "compute/quant_cpu.h"

/* Bytes of a block: memcmp skips equal ones, the lanes sum one at a time. */
#define BLOCK_BYTES 4096

/* What a block's lanes found. */
typedef struct {
    uint32_t count, ulp, crossings;
    uint64_t key; /* 0: no value; else the bits of the largest |a - b|, plus one */
} lanes;

static inline uint64_t f64_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double f64_from_bits(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* |a - b| as a key ordered like its value: 0 when the elements are equal or
 * the difference is NaN (the reference leaves those out), else its bits + 1.
 * A mask, not a choice: gcc (12) makes `c ? k : 0` feeding a maximum into a
 * conditional reduction, which it does not vectorize. */
static inline uint64_t abs_key(bool differ, double va, double vb)
{
    uint64_t bits = f64_bits(fabs(va - vb));
    return (bits + 1) & -(uint64_t)(differ & (bits <= 0x7FF0000000000000u));
}

/* 1 when two sign-magnitude codes (sign: the sign bit) lie on either side
 * of zero, neither of them a zero: a sign change, with no ULP distance; else
 * 0 (bitwise, no branch: see mask()). */
static inline uint32_t crosses(uint32_t ua, uint32_t ub, uint32_t sign)
{
    return (((ua ^ ub) & sign) != 0) & ((ua & (sign - 1)) != 0) & ((ub & (sign - 1)) != 0);
}

/* Distance of two sign-magnitude codes on the ordered line: |ma - mb| (a
 * zero of either sign is 0), 0 for a sign change `cross`. */
static inline uint32_t ulp_distance(uint32_t ua, uint32_t ub, uint32_t sign, uint32_t cross)
{
    uint32_t ma = ua & (sign - 1), mb = ub & (sign - 1);
    uint32_t near = ma > mb ? ma - mb : mb - ma;
    return near & (cross - 1);
}

/* All ones when c, else zero: selects as masks, so that no branch is left for
 * the compiler to keep (it will not speculate the fp32 multiply of a
 * subnormal out of one under -ftrapping-math, and then vectorizes nothing). */
static inline uint32_t mask(bool c) { return -(uint32_t)c; }

/* Decoders without branches, equal to fp8_math.h's for every code (NaN
 * payloads included): subnormals are m * 2^-k, exact in fp32. */
static inline float f16_value(uint32_t h)
{
    uint32_t sign = (h & 0x8000) << 16, mag = h & 0x7FFF;
    uint32_t sub = fp8_f32_bits((float)(int32_t)mag * 0x1p-24f);
    uint32_t special = mag >= 0x7C00, normal = !special & (mag >= 0x400);
    uint32_t bits = (((mag << 13) | 0x7F800000) & mask(special)) |
                    (((mag << 13) + (112u << 23)) & mask(normal)) |
                    (sub & mask(!special & !normal));
    return fp8_f32_from_bits(bits | sign);
}

static inline float e4m3_value(uint32_t c)
{
    uint32_t sign = (c & 0x80) << 24, mag = c & 0x7F;
    uint32_t sub = fp8_f32_bits((float)(int32_t)mag * 0x1p-9f);
    uint32_t nan = mag == 0x7F, normal = !nan & (mag >= 8);
    uint32_t bits = (0x7FC00000 & mask(nan)) | (((mag << 20) + (120u << 23)) & mask(normal)) |
                    (sub & mask(!nan & !normal));
    return fp8_f32_from_bits(bits | sign);
}

/* Element i of a same-dtype pair: its code and its value. */
static inline uint32_t code_at(fp8_dtype dt, const void *p, size_t i)
{
    return dt == FP8_DTYPE_F32                               ? ((const uint32_t *)p)[i]
           : dt == FP8_DTYPE_BF16 || dt == FP8_DTYPE_F16     ? ((const uint16_t *)p)[i]
                                                             : ((const uint8_t *)p)[i];
}

static inline float value_of(fp8_dtype dt, uint32_t u)
{
    return dt == FP8_DTYPE_F32    ? fp8_f32_from_bits(u)
           : dt == FP8_DTYPE_BF16 ? fp8_f32_from_bits(u << 16)
           : dt == FP8_DTYPE_F16  ? f16_value(u)
           : dt == FP8_DTYPE_F8_E5M2 ? f16_value(u << 8)
                                  : e4m3_value(u);
}

static inline uint32_t sign_bit(fp8_dtype dt)
{
    return dt == FP8_DTYPE_F32 ? 0x80000000u
           : dt == FP8_DTYPE_BF16 || dt == FP8_DTYPE_F16 ? 0x8000u
                                                         : 0x80u;
}

/* The loop of every fast dtype; each caller below passes a constant dtype,
 * so the one it inlines is specialized for it. */
static inline __attribute__((always_inline)) lanes lanes_of(fp8_dtype dt, const void *a,
                                                            const void *b, size_t n)
{
    uint32_t count = 0, ulp = 0, crossings = 0, sign = sign_bit(dt);
    uint64_t key = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t ua = code_at(dt, a, i), ub = code_at(dt, b, i);
        bool differ = ua != ub;
        count += differ;
        uint32_t cross = crosses(ua, ub, sign); /* never for equal codes */
        crossings += cross;
        uint32_t u = ulp_distance(ua, ub, sign, cross); /* 0 for equal codes */
        ulp = u > ulp ? u : ulp;
        uint64_t k = abs_key(differ, value_of(dt, ua), value_of(dt, ub));
        key = k > key ? k : key;
    }
    return (lanes){ count, ulp, crossings, key };
}

/* The same for a block of codes of dt (at most BLOCK_BYTES elements),
 * decoded first. */
static inline __attribute__((always_inline)) void sums_of(fp8_dtype dt, const void *a,
                                                          const void *b, size_t n,
                                                          diff_lanes *out)
{
    float fa[BLOCK_BYTES], fb[BLOCK_BYTES];
    for (size_t i = 0; i < n; i++) {
        fa[i] = value_of(dt, code_at(dt, a, i));
        fb[i] = value_of(dt, code_at(dt, b, i));
    }
    lanes_sums_f32(fa, fb, n, out);
}

FP8_CLONES static lanes lanes_bf16(const void *a, const void *b, size_t n)
{
    return lanes_of(FP8_DTYPE_BF16, a, b, n);
}

FP8_CLONES static lanes lanes_f16(const void *a, const void *b, size_t n)
{
    return lanes_of(FP8_DTYPE_F16, a, b, n);
}

FP8_CLONES static lanes lanes_f32(const void *a, const void *b, size_t n)
{
    return lanes_of(FP8_DTYPE_F32, a, b, n);
}

FP8_CLONES static lanes lanes_e4m3(const void *a, const void *b, size_t n)
{
    return lanes_of(FP8_DTYPE_F8_E4M3, a, b, n);
}

FP8_CLONES static lanes lanes_e5m2(const void *a, const void *b, size_t n)
{
    return lanes_of(FP8_DTYPE_F8_E5M2, a, b, n);
}

FP8_CLONES static void sums_bf16(const void *a, const void *b, size_t n, diff_lanes *l)
{
    sums_of(FP8_DTYPE_BF16, a, b, n, l);
}

FP8_CLONES static void sums_f16(const void *a, const void *b, size_t n, diff_lanes *l)
{
    sums_of(FP8_DTYPE_F16, a, b, n, l);
}

FP8_CLONES static void sums_f32_codes(const void *a, const void *b, size_t n, diff_lanes *l)
{
    lanes_sums_f32(a, b, n, l);
}

FP8_CLONES static void sums_values(const float *a, const float *b, size_t n, diff_lanes *l)
{
    lanes_sums_f32(a, b, n, l);
}

FP8_CLONES static void sums_e4m3(const void *a, const void *b, size_t n, diff_lanes *l)
{
    sums_of(FP8_DTYPE_F8_E4M3, a, b, n, l);
}

FP8_CLONES static void sums_e5m2(const void *a, const void *b, size_t n, diff_lanes *l)
{
    sums_of(FP8_DTYPE_F8_E5M2, a, b, n, l);
}

/* The fast dtypes' kernels: statistics and quality sums. */
static const struct {
    fp8_dtype dt;
    lanes (*lanes)(const void *, const void *, size_t);
    void (*sums)(const void *, const void *, size_t, diff_lanes *);
} kernels[] = {
    { FP8_DTYPE_BF16, lanes_bf16, sums_bf16 },
    { FP8_DTYPE_F16, lanes_f16, sums_f16 },
    { FP8_DTYPE_F32, lanes_f32, sums_f32_codes },
    { FP8_DTYPE_F8_E4M3, lanes_e4m3, sums_e4m3 },
    { FP8_DTYPE_F8_E5M2, lanes_e5m2, sums_e5m2 },
};

/* fp32 values: equal when ==, or both NaN. */
static inline bool values_differ(float x, float y)
{
    return !((x == y) | ((x != x) & (y != y))); /* no branch: see mask() */
}

FP8_CLONES static lanes lanes_values(const void *pa, const void *pb, size_t n)
{
    const float *a = pa, *b = pb;
    uint32_t count = 0, ulp = 0, crossings = 0;
    uint64_t key = 0;
    for (size_t i = 0; i < n; i++) {
        bool differ = values_differ(a[i], b[i]);
        uint32_t ua = fp8_f32_bits(a[i]), ub = fp8_f32_bits(b[i]);
        count += differ;
        uint32_t cross = differ & crosses(ua, ub, 0x80000000u); /* NaN against NaN: none */
        crossings += cross;
        uint32_t u = ulp_distance(ua, ub, 0x80000000u, cross) & -(uint32_t)differ;
        ulp = u > ulp ? u : ulp;
        uint64_t k = abs_key(differ, a[i], b[i]);
        key = k > key ? k : key;
    }
    return (lanes){ count, ulp, crossings, key };
}

/* Folds a block's lanes into s; `first` finds the block's first differing
 * element, asked only when s has none before the block. */
static void fold(diff_stats *s, const lanes *l, uint64_t at, const void *a, const void *b,
                 size_t n, size_t (*first)(const void *, const void *, size_t, unsigned),
                 unsigned size)
{
    if (!l->count)
        return;
    diff_stats block = { l->count, at, l->key ? f64_from_bits(l->key - 1) : 0.0 / 0.0, l->ulp,
                         l->crossings, { 0, 0, 0, 0 } };
    if (s->differing == 0 || s->first_index > at) /* else s's first comes before */
        block.first_index += first(a, b, n, size);
    diff_stats_merge(s, &block);
}

static size_t first_bytes(const void *a, const void *b, size_t n, unsigned size)
{
    size_t i = 0;
    while (i < n && memcmp((const char *)a + i * size, (const char *)b + i * size, size) == 0)
        i++;
    return i;
}

static size_t first_value(const void *a, const void *b, size_t n, unsigned size)
{
    size_t i = 0;
    while (i < n && !values_differ(((const float *)a)[i], ((const float *)b)[i]))
        i++;
    return i;
}

void diff_bytes(fp8_dtype dt, const void *a, const void *b, uint64_t n, uint64_t base,
                diff_stats *s)
{
    size_t kind = 0;
    while (kind < sizeof kernels / sizeof *kernels && kernels[kind].dt != dt)
        kind++;
    bool fast = kind < sizeof kernels / sizeof *kernels;
    unsigned size = diff_element_size(dt);
    size_t per = BLOCK_BYTES / size ? BLOCK_BYTES / size : 1;
    const unsigned char *pa = a, *pb = b;
    diff_lanes sums = { { 0 }, { 0 }, { 0 } };
    for (uint64_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? (size_t)(n - i) : per;
        const unsigned char *xa = pa + i * size, *xb = pb + i * size;
        if (fast) /* every block: the span's sums, equal blocks too */
            kernels[kind].sums(xa, xb, k, &sums);
        if (memcmp(xa, xb, k * size) == 0)
            continue;
        if (!fast) { /* the rare dtypes: the reference, on differing blocks only */
            diff_bytes_ref(dt, xa, xb, k, base + i, s);
            continue;
        }
        lanes l = kernels[kind].lanes(xa, xb, k);
        fold(s, &l, base + i, xa, xb, k, first_bytes, size);
    }
    if (fast)
        diff_lanes_end(&sums, n, &s->quality);
}

/* A block of one side as fp32: its own elements where it is stored as
 * fp32 (a dequantized side), else converted into buf (exact: BF16 and F16
 * fit in fp32), so that a band of it is never written whole as fp32. */
static const float *block_f32(fp8_dtype stored, const void *x, uint64_t i, size_t k, float *buf)
{
    if (stored == FP8_DTYPE_F32)
        return (const float *)x + i;
    diff_to_f32(stored, (const char *)x + i * (fp8_dtype_bits(stored) / 8), k, buf);
    return buf;
}

/* BF16 values held as fp32 have their low 16 bits zero: their distance in
 * fp32 codes is 2^16 times theirs.  F16's is no multiple (its subnormals
 * are fp32 normals): the reference takes its differing blocks, which only
 * a comparison with an f16 tensor has. */
void diff_values_stored(fp8_dtype dt, fp8_dtype da, const void *a, fp8_dtype db, const void *b,
                        uint64_t n, uint64_t base, diff_stats *s)
{
    enum { PER = BLOCK_BYTES / sizeof(float) };
    float ta[PER], tb[PER];
    diff_lanes sums = { { 0 }, { 0 }, { 0 } };
    for (uint64_t i = 0; i < n; i += PER) {
        size_t k = n - i < PER ? (size_t)(n - i) : PER;
        const float *fa = block_f32(da, a, i, k, ta), *fb = block_f32(db, b, i, k, tb);
        sums_values(fa, fb, k, &sums);
        if (memcmp(fa, fb, k * sizeof *fa) == 0)
            continue;
        if (dt == FP8_DTYPE_F16) {
            diff_values_ref(dt, fa, fb, k, base + i, s);
            continue;
        }
        lanes l = lanes_values(fa, fb, k);
        if (dt == FP8_DTYPE_BF16)
            l.ulp >>= 16;
        fold(s, &l, base + i, fa, fb, k, first_value, sizeof *fa);
    }
    diff_lanes_end(&sums, n, &s->quality);
}

void diff_values(fp8_dtype dt, const float *a, const float *b, uint64_t n, uint64_t base,
                 diff_stats *s)
{
    diff_values_stored(dt, FP8_DTYPE_F32, a, FP8_DTYPE_F32, b, n, base, s);
}

FP8_CLONES static void bf16_to_f32(const uint16_t *x, size_t n, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fp8_f32_from_bits((uint32_t)x[i] << 16);
}

FP8_CLONES static void f16_to_f32(const uint16_t *x, size_t n, float *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = f16_value(x[i]);
}

void diff_to_f32(fp8_dtype dt, const void *x, uint64_t n, float *y)
{
    if (dt == FP8_DTYPE_BF16)
        bf16_to_f32(x, n, y);
    else if (dt == FP8_DTYPE_F16)
        f16_to_f32(x, n, y);
    else
        memmove(y, x, n * sizeof *y);
}

void diff_quality_values(const float *a, const float *b, uint64_t n, fp8_quality *q)
{
    diff_lanes sums = { { 0 }, { 0 }, { 0 } };
    for (uint64_t i = 0; i < n; i += BLOCK_BYTES) /* a multiple of DIFF_LANES */
        sums_values(a + i, b + i, n - i < BLOCK_BYTES ? (size_t)(n - i) : BLOCK_BYTES, &sums);
    diff_lanes_end(&sums, n, q);
}
