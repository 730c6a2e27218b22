/*
 * fp4_cpu.c - the fast path of the packed-FP4 decode (fp4_cpu.h).
 */
#include <string.h>

#include "compute/fp4_cpu.h"

void fp4_fast_init(fp4_fast *f, const fp4_table *t)
{
    f->t = t;
    for (unsigned b = 0; b < 256; b++) {
        bool clean = !t->nan_scale[b];
        for (unsigned c = 0; c < 16; c++) {
            f->v16[b][c] = (uint16_t)t->value[b][c];
            clean = clean && !t->inf[b][c];
        }
        f->clean[b] = clean;
    }
}

fp4_deq_result fp4_fast_row(const fp4_fast *f, const uint8_t *packed, const uint8_t *scales,
                            uint64_t n, void *y, uint64_t stride, uint64_t *where)
{
    const fp4_table *t = f->t;
    uint64_t groups = n / t->group, half = t->group / 2;
    for (uint64_t g = 0; g < groups; g++)
        if (!f->clean[scales[g]])
            return fp4_dequant_row(packed, scales, n, t, y, stride, where);
    if (t->out == FP8_DTYPE_F32) {
        uint32_t *o = y;
        for (uint64_t g = 0; g < groups; g++) {
            const uint32_t *v = t->value[scales[g]];
            const uint8_t *p = packed + g * half;
            uint32_t *og = o + g * t->group * stride;
            for (uint64_t k = 0; k < half; k++) {
                og[2 * k * stride] = v[p[k] & 15];
                og[(2 * k + 1) * stride] = v[p[k] >> 4];
            }
        }
        return FP4_DEQ_OK;
    }
    uint16_t *o = y;
    if (stride == 1) {
        for (uint64_t g = 0; g < groups; g++) {
            const uint16_t *v = f->v16[scales[g]];
            const uint8_t *p = packed + g * half;
            uint16_t *og = o + g * t->group;
            for (uint64_t k = 0; k < half; k++) {
                og[2 * k] = v[p[k] & 15];
                og[2 * k + 1] = v[p[k] >> 4];
            }
        }
        return FP4_DEQ_OK;
    }
    for (uint64_t g = 0; g < groups; g++) {
        const uint16_t *v = f->v16[scales[g]];
        const uint8_t *p = packed + g * half;
        uint16_t *og = o + g * t->group * stride;
        for (uint64_t k = 0; k < half; k++) {
            og[2 * k * stride] = v[p[k] & 15];
            og[(2 * k + 1) * stride] = v[p[k] >> 4];
        }
    }
    return FP4_DEQ_OK;
}

bool fp4_fast_cols(const fp4_fast *f, const uint8_t *packed, uint64_t ld_codes,
                   const uint8_t *scales, uint64_t ld_scales, uint64_t nr, uint64_t n, void *y,
                   uint64_t ld_out)
{
    const fp4_table *t = f->t;
    uint64_t groups = n / t->group, half = t->group / 2;
    for (uint64_t r = 0; r < nr; r++)
        for (uint64_t g = 0; g < groups; g++)
            if (!f->clean[scales[r * ld_scales + g]])
                return false;
    enum { TR = 32 };
    for (uint64_t r0 = 0; r0 < nr; r0 += TR) {
        uint64_t m = nr - r0 < TR ? nr - r0 : TR;
        for (uint64_t g = 0; g < groups; g++) {
            const uint8_t *p = packed + r0 * ld_codes + g * half;
            const uint8_t *s = scales + r0 * ld_scales + g;
            uint64_t c0 = g * t->group;
            if (t->out == FP8_DTYPE_F32) {
                const uint32_t *v[TR];
                for (uint64_t r = 0; r < m; r++)
                    v[r] = t->value[s[r * ld_scales]];
                uint32_t *o = (uint32_t *)y + c0 * ld_out + r0;
                for (uint64_t k = 0; k < half; k++, o += 2 * ld_out)
                    for (uint64_t r = 0; r < m; r++) {
                        unsigned b = p[r * ld_codes + k];
                        o[r] = v[r][b & 15];
                        o[ld_out + r] = v[r][b >> 4];
                    }
            } else {
                const uint16_t *v[TR];
                for (uint64_t r = 0; r < m; r++)
                    v[r] = f->v16[s[r * ld_scales]];
                uint16_t *o = (uint16_t *)y + c0 * ld_out + r0;
                for (uint64_t k = 0; k < half; k++, o += 2 * ld_out) {
                    const uint8_t *pk = p + k;
                    uint64_t r = 0;
                    for (; r + 2 <= m; r += 2) { /* two rows: a value pair a column */
                        unsigned b0 = pk[r * ld_codes], b1 = pk[(r + 1) * ld_codes];
                        uint16_t lo[2] = { v[r][b0 & 15], v[r + 1][b1 & 15] };
                        uint16_t hi[2] = { v[r][b0 >> 4], v[r + 1][b1 >> 4] };
                        memcpy(o + r, lo, 4);
                        memcpy(o + ld_out + r, hi, 4);
                    }
                    for (; r < m; r++) {
                        unsigned b = pk[r * ld_codes];
                        o[r] = v[r][b & 15];
                        o[ld_out + r] = v[r][b >> 4];
                    }
                }
            }
        }
    }
    return true;
}
