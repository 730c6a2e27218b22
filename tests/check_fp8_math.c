/*
 * check_fp8_math.c - lib/common/fp8_math.h against NVIDIA's host implementation
 * (tests/oracle_cuda_fp8.cpp, built from the CUDA toolkit's cuda_fp8.h):
 * every bf16 and f16 input, every E4M3 code, and a large sample of fp32
 * values with the ties, subnormals and overflows spelled out.
 */
#include "testutil.h"

#include "common/fp8_math.h"
#include "compute/quant_cpu.h"

unsigned char nv_f32_to_e4m3_satfinite(float x);
float nv_e4m3_to_f32(unsigned char b);
unsigned short nv_f32_to_bf16_rn(float x);
float nv_f16_to_f32(unsigned short bits);
unsigned short nv_f32_to_f16_rn(float x);

static void expect_e4m3(float x)
{
    uint8_t ours = fp8_f32_to_e4m3(x), nv = nv_f32_to_e4m3_satfinite(x);
    ck_assert_msg(ours == nv, "e4m3(%a = 0x%08x): ours 0x%02x, cuda_fp8.h 0x%02x", (double)x,
                  fp8_f32_bits(x), ours, nv);
}

START_TEST(test_e4m3_every_bf16_input_matches_nvidia)
{
    for (uint32_t b = 0; b < 65536; b++)
        expect_e4m3(fp8_bf16_to_f32((uint16_t)b));
}
END_TEST

START_TEST(test_e4m3_every_f16_input_matches_nvidia)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float ours = fp8_f16_to_f32((uint16_t)h), nv = nv_f16_to_f32((unsigned short)h);
        ck_assert_msg(fp8_f32_bits(ours) == fp8_f32_bits(nv) || (ours != ours && nv != nv),
                      "f16 0x%04x: ours %a, cuda_fp16.h %a", h, (double)ours, (double)nv);
        expect_e4m3(ours);
    }
}
END_TEST

/* every midpoint between neighbouring E4M3 values, and one fp32 ulp either side */
START_TEST(test_e4m3_ties_and_neighbours_match_nvidia)
{
    for (int code = 0; code < 0x7E; code++) {
        float lo = fp8_e4m3_to_f32((uint8_t)code), hi = fp8_e4m3_to_f32((uint8_t)(code + 1));
        float mid = lo + (hi - lo) / 2; /* exact: both are short binary fractions */
        uint32_t m = fp8_f32_bits(mid);
        for (int d = -2; d <= 2; d++) {
            expect_e4m3(fp8_f32_from_bits(m + (uint32_t)d));
            expect_e4m3(-fp8_f32_from_bits(m + (uint32_t)d));
        }
        ck_assert_uint_eq(fp8_f32_to_e4m3(mid), (code & 1) ? code + 1 : code); /* to even */
    }
    /* saturation and the specials */
    float specials[] = { 448.0f, 449.0f, 463.99f, 464.0f, 480.0f, 1e30f, __builtin_inff(),
                         0x1p-9f, 0x1p-10f, 0x1.000002p-10f, 0x1p-149f, 0.0f };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        expect_e4m3(specials[i]);
        expect_e4m3(-specials[i]);
    }
    ck_assert_uint_eq(fp8_f32_to_e4m3(1e30f), 0x7E);
    ck_assert_uint_eq(fp8_f32_to_e4m3(-__builtin_inff()), 0xFE);
    ck_assert_uint_eq(fp8_f32_to_e4m3(-0.0f), 0x80);
    ck_assert_uint_eq(fp8_f32_to_e4m3(0x1p-10f), 0x00);        /* tie: to even, zero */
    ck_assert_uint_eq(fp8_f32_to_e4m3(0x1.000002p-10f), 0x01); /* just above: 2^-9 */
    expect_e4m3(__builtin_nanf(""));
}
END_TEST

/* xorshift: a fixed sequence, so a failure names a reproducible input */
static uint32_t next_u32(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}

START_TEST(test_e4m3_random_fp32_matches_nvidia)
{
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 4000000; i++) {
        uint32_t u = next_u32(&s);
        expect_e4m3(fp8_f32_from_bits(u));
        /* and the same mantissa moved into the interesting exponents (2^-12 .. 2^10) */
        uint32_t e = 115 + (u >> 27) % 22;
        expect_e4m3(fp8_f32_from_bits((u & 0x807FFFFF) | e << 23));
    }
}
END_TEST

START_TEST(test_e4m3_decode_every_code_matches_nvidia)
{
    for (int b = 0; b < 256; b++) {
        float ours = fp8_e4m3_to_f32((uint8_t)b), nv = nv_e4m3_to_f32((unsigned char)b);
        if ((b & 0x7F) == 0x7F) {
            ck_assert(ours != ours && nv != nv);
            continue;
        }
        ck_assert_msg(fp8_f32_bits(ours) == fp8_f32_bits(nv), "code 0x%02x: ours %a, nv %a", b,
                      (double)ours, (double)nv);
        ck_assert_uint_eq(fp8_f32_to_e4m3(ours), b); /* decode then encode is the identity */
    }
    ck_assert(fp8_e4m3_to_f32(0x7E) == 448.0f);
    ck_assert(fp8_e4m3_to_f32(0x01) == 0x1p-9f);
}
END_TEST

START_TEST(test_bf16_rounding_matches_nvidia)
{
    uint64_t s = 12345;
    for (int i = 0; i < 2000000; i++) {
        float x = fp8_f32_from_bits(next_u32(&s));
        uint16_t ours = fp8_f32_to_bf16(x), nv = nv_f32_to_bf16_rn(x);
        if (x != x)
            ck_assert((ours & 0x7F80) == 0x7F80 && (ours & 0x7F));
        else
            ck_assert_msg(ours == nv, "bf16(%a): ours 0x%04x, nv 0x%04x", (double)x, ours, nv);
    }
    ck_assert_uint_eq(fp8_f32_to_bf16(fp8_f32_from_bits(0x3F808000)), 0x3F80); /* tie: even */
    ck_assert_uint_eq(fp8_f32_to_bf16(fp8_f32_from_bits(0x3F818000)), 0x3F82); /* tie: even */
}
END_TEST

/*
 * The fast CPU path's branch-free encoder (quant_cpu.c) against NVIDIA on
 * every upper half of an fp32 (every sign, exponent and top 7 mantissa bits)
 * combined with low halves that decide ties and sticky bits; NaN aside,
 * which the fast loops never encode (their amax pass sends it to the
 * reference).
 */
START_TEST(test_fast_e4m3_matches_nvidia)
{
    static const uint32_t lows[] = { 0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF };
    uint64_t s = 777, checked = 0;
    float xs[16];
    uint8_t want[16], got[16];
    int nx = 0;
    bool avx512 = false;
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (size_t k = 0; k < 8; k++) {
            uint32_t lo = k < 6 ? lows[k] : next_u32(&s) & 0xFFFF;
            float x = fp8_f32_from_bits(hi << 16 | lo);
            if (x != x)
                continue;
            uint8_t fast = fp8_e4m3_fast(x), nv = nv_f32_to_e4m3_satfinite(x);
            ck_assert_msg(fast == nv, "e4m3(0x%08x): fast 0x%02x, cuda_fp8.h 0x%02x",
                          hi << 16 | lo, fast, nv);
            /* and the AVX-512 encoder, 16 inputs at a time, where the CPU has it */
            xs[nx] = x;
            want[nx++] = nv;
            if (nx == 16) {
                avx512 = fp8_e4m3_fast16(xs, got);
                for (int i = 0; avx512 && i < 16; i++)
                    ck_assert_msg(got[i] == want[i], "e4m3(0x%08x): avx512 0x%02x, cuda_fp8.h 0x%02x",
                                  fp8_f32_bits(xs[i]), got[i], want[i]);
                checked += avx512 ? 16 : 0;
                nx = 0;
            }
        }
    }
    if (avx512)
        ck_assert_uint_gt(checked, 65536 * 7);
    else
        printf("test_fast_e4m3_matches_nvidia: this CPU has no AVX-512: its encoder not checked here\n");
}
END_TEST

START_TEST(test_f16_rounding_matches_nvidia)
{
    uint64_t s = 4242;
    for (uint32_t hi = 0; hi < 65536; hi++) {
        for (int k = 0; k < 4; k++) {
            uint32_t lo = k == 0 ? 0 : k == 1 ? 0xFFFF : next_u32(&s) & 0xFFFF;
            float x = fp8_f32_from_bits(hi << 16 | lo);
            uint16_t ours = fp8_f32_to_f16(x), nv = nv_f32_to_f16_rn(x);
            if (x != x)
                ck_assert((ours & 0x7C00) == 0x7C00 && (ours & 0x3FF));
            else
                ck_assert_msg(ours == nv, "f16(%a): ours 0x%04x, nv 0x%04x", (double)x, ours, nv);
        }
    }
    /* ties at the f16 grid: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 */
    ck_assert_uint_eq(fp8_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
    ck_assert_uint_eq(fp8_f32_to_f16(65520.0f), 0x7C00);
    ck_assert_uint_eq(fp8_f32_to_f16(0x1p-25f), 0x0000);
    ck_assert_uint_eq(fp8_f32_to_f16(0x1.8p-25f), 0x0001);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("fp8_math");
    TCase *tc = tcase_create("vs cuda_fp8.h");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_e4m3_every_bf16_input_matches_nvidia);
    tcase_add_test(tc, test_e4m3_every_f16_input_matches_nvidia);
    tcase_add_test(tc, test_e4m3_ties_and_neighbours_match_nvidia);
    tcase_add_test(tc, test_e4m3_random_fp32_matches_nvidia);
    tcase_add_test(tc, test_e4m3_decode_every_code_matches_nvidia);
    tcase_add_test(tc, test_bf16_rounding_matches_nvidia);
    tcase_add_test(tc, test_fast_e4m3_matches_nvidia);
    tcase_add_test(tc, test_f16_rounding_matches_nvidia);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
