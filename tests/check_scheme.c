/*
 * check_scheme.c - the element and scheme tables of lib/common/types.c: each
 * element type's code -> value against fp8_math.h, and each scheme's group
 * geometry against the scale indices the layouts number (their shapes in
 * fp8conv-formats(5), FORMATS, read through the format table).
 */
#include "testutil.h"

#include "common/fp8_math.h"
#include "layout/formats.h"
#include "common/types.h"

START_TEST(test_e4m3_traits_decode_every_code)
{
    const fp8_elem_traits *t = fp8_elem_get(FP8_ELEM_E4M3);
    ck_assert_uint_eq(t->bits, 8);
    ck_assert_uint_eq(t->per_byte, 1);
    ck_assert(t->max_finite == 448.0f);
    for (unsigned b = 0; b < 256; b++) {
        float a = t->decode((uint8_t)b), e = fp8_e4m3_to_f32((uint8_t)b);
        ck_assert(t->is_nan((uint8_t)b) == (e != e));
        if (e == e)
            ck_assert_uint_eq(fp8_f32_bits(a), fp8_f32_bits(e));
        if (e == e)
            ck_assert(e <= t->max_finite && -e <= t->max_finite);
    }
}
END_TEST

START_TEST(test_e2m1_traits_two_codes_per_byte)
{
    const fp8_elem_traits *t = fp8_elem_get(FP8_ELEM_E2M1);
    ck_assert_uint_eq(t->bits, 4);
    ck_assert_uint_eq(t->per_byte, 2);
    ck_assert(t->is_nan == NULL);
    ck_assert(t->decode(0x7) == 6.0f && t->decode(0xF) == -6.0f && t->decode(0x1) == 0.5f);
}
END_TEST

/* E5M2 is the top byte of an IEEE f16. */
START_TEST(test_e5m2_traits_decode_as_f16)
{
    const fp8_elem_traits *t = fp8_elem_get(FP8_ELEM_E5M2);
    ck_assert(t->decode(0x3C) == 1.0f && t->decode(0xC0) == -2.0f);
    ck_assert(t->decode(0x7B) == t->max_finite && t->decode(0x01) == fp8_pow2(-16));
    ck_assert(t->is_nan(0x7D) && t->is_nan(0xFF) && !t->is_nan(0x7C) && !t->is_nan(0x7B));
    ck_assert(t->decode(0x7C) > t->max_finite); /* infinity */
}
END_TEST

START_TEST(test_e8m0_traits_are_powers_of_two)
{
    const fp8_elem_traits *t = fp8_elem_get(FP8_ELEM_E8M0);
    ck_assert(t->decode(127) == 1.0f && t->decode(0) == fp8_pow2(-127));
    ck_assert(t->is_nan(0xFF) && !t->is_nan(0xFE));
}
END_TEST

START_TEST(test_scheme_names_in_enum_order)
{
    ck_assert_str_eq(fp8_scheme_name(FP8_SCHEME_BLOCK), "block");
    ck_assert_str_eq(fp8_scheme_name(FP8_SCHEME_MXFP8), "mxfp8");
    ck_assert_str_eq(fp8_scheme_name((fp8_scheme)99), "?");
    size_t n = 0;
    while (fp8_scheme_names[n]) {
        ck_assert(fp8_scheme_get((fp8_scheme)n) != NULL);
        /* two levels: NVFP4's group and matrix scales */
        ck_assert_uint_eq(fp8_scheme_get((fp8_scheme)n)->levels, n == FP8_SCHEME_NVFP4 ? 2 : 1);
        n++;
    }
    ck_assert_uint_eq(n, 7);
    ck_assert_str_eq(fp8_scheme_name(FP8_SCHEME_INT4), "int4");
    ck_assert(fp8_scheme_get((fp8_scheme)n) == NULL);
    ck_assert_str_eq(fp8_format_name(FP8_FORMAT_DEFAULT), "default");
    ck_assert_str_eq(fp8_format_name(FP8_FORMAT_MODELOPT), "modelopt");
    ck_assert_str_eq(fp8_format_names[FP8_FORMAT_HF_FP8 - 1], "hf-fp8");
}
END_TEST

/* Every element's scale index lies inside the scale tensor the layout
 * writes, and a matrix's groups cover it exactly once each. */
START_TEST(test_geometry_indexes_the_scale_tensor)
{
    static const uint64_t shapes[][2] = { { 300, 224 }, { 128, 128 }, { 1, 64 }, { 129, 96 } }; /* MX: whole runs */
    for (size_t s = 0; fp8_scheme_names[s]; s++)
        for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
            uint64_t m = shapes[k][0], n = shapes[k][1], w3[3] = { 3, m, n }, shape[3];
            int rank;
            fp8_geometry g;
            fp8_scheme_geometry((fp8_scheme)s, 64, 32, m, n, &g);
            const fmt_spec *f = fmt_spec_find(fp8_format_default((fp8_scheme)s), (fp8_scheme)s);
            if (!f && s == FP8_SCHEME_INT4)
                continue; /* its format row comes with the ops (issue 42 item 5) */
            ck_assert(f != NULL);
            fmt_scale_shape(f, 3, w3, 64, 32, &rank, shape);
            uint64_t total = 1;
            for (int d = 0; d < rank; d++)
                total *= shape[d];
            ck_assert_uint_eq(total, 3 * g.row_groups * g.col_groups);
            ck_assert_uint_eq(fp8_geometry_index(&g, 2, m - 1, n - 1), total - 1);
            ck_assert_uint_eq(fp8_geometry_index(&g, 1, 0, 0), total / 3);
            uint64_t first, count;
            fp8_geometry_span(&g, 2, 0, m, &first, &count);
            ck_assert_uint_eq(first, total / 3 * 2);
            ck_assert_uint_eq(count, total / 3);
        }
}
END_TEST

START_TEST(test_geometry_of_each_scheme)
{
    fp8_geometry g;
    fp8_scheme_geometry(FP8_SCHEME_BLOCK, 128, 64, 300, 200, &g);
    ck_assert(g.group_rows == 128 && g.group_cols == 64 && g.row_groups == 3 && g.col_groups == 4);
    fp8_scheme_geometry(FP8_SCHEME_CHANNEL, 128, 64, 300, 200, &g);
    ck_assert(g.group_rows == 1 && g.group_cols == 200 && g.row_groups == 300 && g.col_groups == 1);
    fp8_scheme_geometry(FP8_SCHEME_MXFP8, 128, 64, 300, 192, &g);
    ck_assert(g.group_rows == 1 && g.group_cols == FP8_MX_GROUP && g.row_groups == 300 &&
              g.col_groups == 192 / FP8_MX_GROUP);
    fp8_scheme_geometry(FP8_SCHEME_TENSOR, 128, 64, 300, 200, &g);
    ck_assert(g.row_groups == 1 && g.col_groups == 1 && g.group_cols == 200);
    uint64_t first, count;
    /* rows 100..299 of block rows 0..2: three rows of four blocks */
    fp8_scheme_geometry(FP8_SCHEME_BLOCK, 128, 64, 300, 200, &g);
    fp8_geometry_span(&g, 1, 100, 200, &first, &count);
    ck_assert_uint_eq(first, 12);
    ck_assert_uint_eq(count, 12);
}
END_TEST

START_TEST(test_format_defaults_and_pairs_from_the_table)
{
    ck_assert_int_eq(fp8_format_default(FP8_SCHEME_BLOCK), FP8_FORMAT_HF_FP8);
    ck_assert_int_eq(fp8_format_default(FP8_SCHEME_TENSOR), FP8_FORMAT_HF_FP8);
    ck_assert_int_eq(fp8_format_default(FP8_SCHEME_CHANNEL), FP8_FORMAT_COMPRESSED_TENSORS);
    ck_assert_int_eq(fp8_format_default(FP8_SCHEME_MXFP8), FP8_FORMAT_COMPRESSED_TENSORS);
    fp8_text t = { 0 };
    fmt_pairs_text(&t);
    ck_assert(!t.oom);
    ck_assert_str_eq(t.p, "block with hf-fp8 or compressed-tensors; channel with "
                          "compressed-tensors or modelopt; tensor with hf-fp8 or "
                          "compressed-tensors; mxfp8 with compressed-tensors or modelopt; "
                          "nvfp4 with compressed-tensors or modelopt; mxfp4 with compressed-tensors; "
                          "int4 with compressed-tensors");
    free(t.p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scheme");
    TCase *tc = tcase_create("tables");
    tcase_add_test(tc, test_e4m3_traits_decode_every_code);
    tcase_add_test(tc, test_e2m1_traits_two_codes_per_byte);
    tcase_add_test(tc, test_e5m2_traits_decode_as_f16);
    tcase_add_test(tc, test_e8m0_traits_are_powers_of_two);
    tcase_add_test(tc, test_scheme_names_in_enum_order);
    tcase_add_test(tc, test_geometry_indexes_the_scale_tensor);
    tcase_add_test(tc, test_geometry_of_each_scheme);
    tcase_add_test(tc, test_format_defaults_and_pairs_from_the_table);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
