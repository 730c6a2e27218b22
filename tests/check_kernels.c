/*
 * check_kernels.c - the kernels of kernels/quantize.cu, run by their CPU
 * emulation (tests/kernels_emu.cpp), against the CPU reference: the cases of
 * kernel_cases.h.  This checks the kernels' logic in every build; the GPU's
 * own run of the same cases is make check-gpu.
 */
#include "kernel_cases.h"

#include "../kernels/fp8_kernels.h"

int fp8k_emu_quantize(const fp8k_band *b, const void *src, uint8_t *q, void *scales,
                      unsigned *bad, void *stream);
int fp8k_emu_amax(fp8k_type src, const void *x, uint64_t n, unsigned *amax_bits, void *stream);
int fp8k_emu_dequantize(const fp8k_dequant *d, const uint8_t *q, const float *scales, void *y,
                        unsigned *bad, void *stream);
int fp8k_emu_fp4(const fp8k_fp4 *d, const uint8_t *q, const uint8_t *scales,
                 const uint8_t *table, void *y, unsigned *bad, void *stream);
int fp8k_emu_fp4q(const fp8k_fp4q *d, const void *src, uint8_t *packed, uint8_t *scales,
                  unsigned *bad, void *stream);

static fp8k_type ktype(fp8_dtype d)
{
    return d == FP8_DTYPE_F32 ? FP8K_F32 : d == FP8_DTYPE_F16 ? FP8K_F16 : FP8K_BF16;
}

static bool emu_quantize(const fp8_band *b, const void *x, uint8_t *q, void *scales)
{
    fp8k_band kb = { ktype(b->src), b->kind, b->rows, b->cols, b->group_rows, b->group_cols,
                     b->fixed, b->scale, b->num };
    unsigned bad = 0;
    ck_assert_int_eq(fp8k_emu_quantize(&kb, x, q, scales, &bad, NULL), 0);
    return bad != 0;
}

static bool emu_amax(fp8_dtype src, const void *x, uint64_t n, float *amax)
{
    unsigned bits = 0;
    ck_assert_int_eq(fp8k_emu_amax(ktype(src), x, n, &bits, NULL), 0);
    *amax = src == FP8_DTYPE_F32   ? fp8_f32_from_bits(bits)
            : src == FP8_DTYPE_F16 ? fp8_f16_to_f32((uint16_t)bits)
                                   : fp8_bf16_to_f32((uint16_t)bits);
    return bits >= (src == FP8_DTYPE_F32 ? 0x7F800000u : src == FP8_DTYPE_F16 ? 0x7C00u : 0x7F80u);
}

static bool emu_dequantize(const fp8_gpu_dequant *d, const uint8_t *q, const float *sf, void *y)
{
    fp8k_dequant kd = { ktype(d->out), d->rows, d->cols, d->row0, d->group_rows, d->group_cols };
    unsigned bad = 0;
    ck_assert_int_eq(fp8k_emu_dequantize(&kd, q, sf, y, &bad, NULL), 0);
    return bad != 0;
}

static bool emu_fp4(const fp8_gpu_fp4_band *d, fp8_dtype out, const uint8_t *q,
                    const unsigned char *table, const uint8_t *scales, void *y)
{
    fp8k_fp4 kd = { ktype(out), d->rows, d->cols, d->group, d->c0, d->width, d->transpose };
    unsigned bad = 0;
    ck_assert_int_eq(fp8k_emu_fp4(&kd, q, scales, table, y, &bad, NULL), 0);
    return bad != 0;
}

static bool emu_fp4q(fp8_scheme scheme, fp8_dtype src, const void *x, uint64_t n, float global,
                     uint8_t *packed, uint8_t *scales)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    fp8k_fp4q kd = { ktype(src), t->levels == 2, n, t->run, global };
    unsigned bad = 0;
    ck_assert_int_eq(fp8k_emu_fp4q(&kd, x, packed, scales, &bad, NULL), 0);
    return bad != 0;
}

static const kc_engine engine = { emu_quantize, emu_amax, emu_dequantize, true, emu_fp4, emu_fp4q };

int main(void)
{
    Suite *s = suite_create("kernels (CPU emulation)");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 600);
    kc_add_tests(tc, &engine);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
