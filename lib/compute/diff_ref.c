/*
 * diff_ref.c - the reference of diff's statistics (diff_cpu.c is the fast
 * path, tests/check_diff.c compares the two): one element at a time, through
 * doubles.
 */
#include <math.h>
#include <string.h>

#include "compute/diff_ref.h"
#include "compute/quant_ref.h"

unsigned diff_element_size(fp8_dtype dt)
{
    unsigned bits = fp8_dtype_bits(dt);
    return bits >= 8 && dt != FP8_DTYPE_C64 ? bits / 8 : 1;
}

/* An element's value and its position on the ordered line of its dtype (so
 * that the distance of two positions counts ULPs); false for dtypes without
 * numeric values here (F4, F6, C64, FNUZ). */
static bool element(fp8_dtype dt, const unsigned char *p, double *v, int64_t *ord)
{
    uint64_t u = 0;
    unsigned size = diff_element_size(dt); /* what the caller holds: a byte of C64 */
    for (unsigned i = 0; i < size; i++)
        u |= (uint64_t)p[i] << (8 * i);
    uint64_t sign = u >> (8 * size - 1), mag = u & ~(sign << (8 * size - 1));
    *ord = sign ? -(int64_t)mag : (int64_t)mag;
    switch (dt) {
    case FP8_DTYPE_F32: *v = fp8_f32_from_bits((uint32_t)u); return true;
    case FP8_DTYPE_BF16: *v = fp8_bf16_to_f32((uint16_t)u); return true;
    case FP8_DTYPE_F16: *v = fp8_f16_to_f32((uint16_t)u); return true;
    case FP8_DTYPE_F8_E4M3: *v = fp8_e4m3_to_f32((uint8_t)u); return true;
    case FP8_DTYPE_F8_E5M2: *v = fp8_f16_to_f32((uint16_t)(u << 8)); return true;
    case FP8_DTYPE_F64: memcpy(v, &u, 8); return true;
    case FP8_DTYPE_F8_E8M0:
        *v = u == 0xFF ? 0.0 / 0.0 : (double)fp8_pow2((int)u - 127);
        *ord = (int64_t)u;
        return true;
    case FP8_DTYPE_BOOL: case FP8_DTYPE_U8: case FP8_DTYPE_U16: case FP8_DTYPE_U32:
    case FP8_DTYPE_U64:
        *ord = (int64_t)u;
        *v = (double)u;
        return true;
    case FP8_DTYPE_I8: case FP8_DTYPE_I16: case FP8_DTYPE_I32: case FP8_DTYPE_I64:
        *ord = size == 8 ? (int64_t)u : (int64_t)(u << (64 - 8 * size)) >> (64 - 8 * size);
        *v = (double)*ord;
        return true;
    default: return false;
    }
}

static uint64_t distance(int64_t a, int64_t b)
{
    int64_t d;
    if (__builtin_sub_overflow(a, b, &d))
        return UINT64_MAX;
    return d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
}

/* Folds one differing element into the statistics; `sm`: a sign-magnitude
 * float dtype, whose values of opposite signs count as sign changes. */
static void count_difference(diff_stats *s, uint64_t index, bool numeric, bool sm, double va,
                             double vb, int64_t oa, int64_t ob)
{
    if (s->differing++ == 0)
        s->first_index = index;
    if (!numeric)
        return;
    double d = fabs(va - vb); /* +0 for +0 against -0, never -0 */
    if (d == d && (s->max_abs != s->max_abs || d > s->max_abs))
        s->max_abs = d;
    if (sm && ((oa < 0 && ob > 0) || (oa > 0 && ob < 0))) {
        s->sign_changes++;
        return;
    }
    uint64_t u = distance(oa, ob);
    s->max_ulp = u > s->max_ulp ? u : s->max_ulp;
}

static bool sign_magnitude(fp8_dtype dt)
{
    return fp8_dtype_inf_bits(dt) || dt == FP8_DTYPE_F8_E4M3 || dt == FP8_DTYPE_F8_E5M2;
}

void diff_bytes_ref(fp8_dtype dt, const void *a, const void *b, uint64_t n, uint64_t base,
                    diff_stats *s)
{
    unsigned size = diff_element_size(dt);
    const unsigned char *pa = a, *pb = b;
    for (uint64_t i = 0; i < n; i++, pa += size, pb += size) {
        if (memcmp(pa, pb, size) == 0)
            continue;
        double va = 0, vb = 0;
        int64_t oa = 0, ob = 0;
        bool numeric = element(dt, pa, &va, &oa) && element(dt, pb, &vb, &ob);
        count_difference(s, base + i, numeric, sign_magnitude(dt), va, vb, oa, ob);
    }
}

/* The code of x in dt (F32, BF16 or F16), which holds it exactly, as the
 * little-endian bytes element() reads. */
static void code_of(fp8_dtype dt, float x, unsigned char p[4])
{
    uint32_t u = dt == FP8_DTYPE_F32    ? fp8_f32_bits(x)
                 : dt == FP8_DTYPE_BF16 ? fp8_f32_bits(x) >> 16
                                        : fp8_f32_to_f16(x);
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)(u >> (8 * k));
}

void diff_values_ref(fp8_dtype dt, const float *a, const float *b, uint64_t n, uint64_t base,
                     diff_stats *s)
{
    for (uint64_t i = 0; i < n; i++) {
        if (a[i] == b[i] || (a[i] != a[i] && b[i] != b[i]))
            continue;
        double va, vb;
        int64_t oa, ob;
        unsigned char ca[4], cb[4];
        code_of(dt, a[i], ca);
        code_of(dt, b[i], cb);
        element(dt, ca, &va, &oa);
        element(dt, cb, &vb, &ob);
        count_difference(s, base + i, true, true, va, vb, oa, ob);
    }
}

void diff_to_f32_ref(fp8_dtype dt, const void *x, uint64_t n, float *y)
{
    for (uint64_t i = 0; i < n; i++)
        y[i] = fp8_load_f32(dt, x, i);
}

void diff_stats_merge(diff_stats *into, const diff_stats *from)
{
    fp8_quality_add(&into->quality, &from->quality);
    if (!from->differing)
        return;
    if (!into->differing || from->first_index < into->first_index)
        into->first_index = from->first_index;
    into->differing += from->differing;
    double d = from->max_abs; /* NaN: none, as in count_difference */
    if (d == d && (into->max_abs != into->max_abs || d > into->max_abs))
        into->max_abs = d;
    into->max_ulp = from->max_ulp > into->max_ulp ? from->max_ulp : into->max_ulp;
    into->sign_changes += from->sign_changes;
}

/* ---- quality sums (fp8_quality) */

bool diff_has_quality(fp8_dtype dt)
{
    return dt == FP8_DTYPE_F32 || dt == FP8_DTYPE_BF16 || dt == FP8_DTYPE_F16 ||
           dt == FP8_DTYPE_F8_E4M3 || dt == FP8_DTYPE_F8_E5M2;
}

/* Element i of a span into its lane: a and b are floats, so their squares
 * are exact in doubles; (a - b)^2 rounds twice, as in the fast path (no FMA:
 * the Makefile's -ffp-contract=off). */
static void lane_add(diff_lanes *l, uint64_t i, double a, double b)
{
    double d = a - b;
    l->ref_sq[i % DIFF_LANES] += a * a;
    l->out_sq[i % DIFF_LANES] += b * b;
    l->err_sq[i % DIFF_LANES] += d * d;
}

void diff_lanes_end(const diff_lanes *l, uint64_t n, fp8_quality *q)
{
    fp8_quality s = { 0, 0, 0, n };
    for (int k = 0; k < DIFF_LANES; k++) {
        s.ref_sq += l->ref_sq[k];
        s.out_sq += l->out_sq[k];
        s.err_sq += l->err_sq[k];
    }
    fp8_quality_add(q, &s);
}

void diff_quality_bytes_ref(fp8_dtype dt, const void *a, const void *b, uint64_t n,
                            fp8_quality *q)
{
    unsigned size = diff_element_size(dt);
    diff_lanes l = { { 0 }, { 0 }, { 0 } };
    for (uint64_t i = 0; i < n; i++) {
        double va, vb;
        int64_t oa, ob;
        element(dt, (const unsigned char *)a + i * size, &va, &oa);
        element(dt, (const unsigned char *)b + i * size, &vb, &ob);
        lane_add(&l, i, va, vb);
    }
    diff_lanes_end(&l, n, q);
}

void diff_quality_values_ref(const float *a, const float *b, uint64_t n, fp8_quality *q)
{
    diff_lanes l = { { 0 }, { 0 }, { 0 } };
    for (uint64_t i = 0; i < n; i++)
        lane_add(&l, i, a[i], b[i]);
    diff_lanes_end(&l, n, q);
}

void fp8_quality_add(fp8_quality *into, const fp8_quality *from)
{
    into->ref_sq += from->ref_sq;
    into->out_sq += from->out_sq;
    into->err_sq += from->err_sq;
    into->elements += from->elements;
}

fp8_quality_numbers fp8_quality_of(const fp8_quality *q)
{
    fp8_quality_numbers r = { 0.0 / 0.0, 0.0 / 0.0, 0.0 / 0.0 };
    if (!q->elements)
        return r;
    if (q->ref_sq > 0)
        r.rel_error = sqrt(q->err_sq / q->ref_sq);
    if (q->ref_sq > 0 && q->out_sq > 0) /* <a, b> = (|a|^2 + |b|^2 - |a - b|^2) / 2 */
        r.cosine = (q->ref_sq + q->out_sq - q->err_sq) / (2 * sqrt(q->ref_sq) * sqrt(q->out_sq));
    r.snr_db = q->err_sq > 0 ? 10 * log10(q->ref_sq / q->err_sq) : 1.0 / 0.0;
    return r;
}
