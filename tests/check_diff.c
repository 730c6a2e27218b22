/*
 * check_diff.c - fp8conv diff and inspect --hash: independent of sharding,
 * finds and names a one-bit change, reports each kind of difference, and
 * --dequant compares FP8 weights by value; the fast statistics give the
 * reference's on every dtype and tricky value, and the report is the same
 * for any thread count.
 */
#include "golden.h"

#include <float.h>
#include <math.h>
#include <xxhash.h>

#include "compute/diff_cpu.h"
#include "fill.h"

/* Copies the tensors of `from` into `nshards` shard files under dir/name (an
 * index when nshards > 1), tensor i going to shard i % nshards; with
 * `flip` >= 0, bit 0 of byte `flip` of tensor `flip_name` is flipped. */
static char *reshard(const char *dir, const char *name, const char *from, int nshards,
                     const char *flip_name, long flip)
{
    char *out, path[600];
    ck_assert(asprintf(&out, "%s/%s", dir, name) > 0);
    ck_assert(mkdir(out, 0755) == 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    ck_assert(fp8_checkpoint_open(ctx, from, &ck) == FP8_OK);
    size_t n = fp8_checkpoint_tensor_count(ck);
    FILE *index = NULL;
    if (nshards > 1) {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", out);
        index = fopen(path, "w");
        ck_assert(index);
        fprintf(index, "{\"metadata\": {}, \"weight_map\": {");
    }
    for (int s = 0; s < nshards; s++) {
        fp8_writer *w;
        snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", out, s + 1, nshards);
        ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
        for (size_t i = s; i < n; i += (size_t)nshards) {
            const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
            ck_assert(fp8_writer_add_tensor(ctx, w, t->name, t->dtype, t->rank, t->shape) == FP8_OK);
            if (index)
                fprintf(index, "%s\"%s\": \"model-%05d-of-%05d.safetensors\"",
                        i == (size_t)s && s == 0 ? "" : ", ", t->name, s + 1, nshards);
        }
        ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
        for (size_t k = 0; k < fp8_writer_tensor_count(w); k++) {
            size_t shard;
            const fp8_tensor_info *t = fp8_checkpoint_find(ck, fp8_writer_tensor(w, k)->name, &shard);
            size_t len = (size_t)fp8_tensor_nbytes(t);
            unsigned char *buf = malloc(len + 1);
            ck_assert(fp8_file_read(ctx, fp8_checkpoint_shard(ck, shard), t, 0, buf, len) == FP8_OK);
            if (flip_name && strcmp(t->name, flip_name) == 0)
                buf[flip] ^= 1;
            ck_assert(fp8_writer_write(ctx, w, buf, len) == FP8_OK);
            free(buf);
        }
        ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
        fp8_writer_free(w);
    }
    if (index) {
        fprintf(index, "}}\n");
        fclose(index);
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    return out;
}

static cJSON *diff_json(const char *a, const char *b, const char *extra, int *rc)
{
    char *args, *out;
    ck_assert(asprintf(&args, "diff --json %s '%s' '%s'", extra, a, b) > 0);
    *rc = tu_run(args, &out, NULL);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(j != NULL, "not JSON: %s", out);
    free(out);
    free(args);
    return j;
}

START_TEST(test_one_file_and_four_shards_are_identical)
{
    char *dir = tu_tmpdir();
    char *one = reshard(dir, "one", "testdata/llama-tiny", 1, NULL, -1);
    char *four = reshard(dir, "four", "testdata/llama-tiny", 4, NULL, -1);
    int rc;
    cJSON *j = diff_json(one, four, "", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(j, "identical")));
    ck_assert_str_eq(cJSON_GetObjectItem(j, "digest_a")->valuestring,
                     cJSON_GetObjectItem(j, "digest_b")->valuestring);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "tensors")->valueint, 21);
    /* the original two-shard layout too, and inspect --hash agrees */
    cJSON_Delete(j);
    j = diff_json("testdata/llama-tiny", four, "-j 1", &rc);
    ck_assert_int_eq(rc, 0);
    char *args, *out;
    ck_assert(asprintf(&args, "inspect --hash --json '%s'", four) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 0);
    cJSON *ins = cJSON_Parse(out);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(ins, "summary"), "digest")->valuestring,
                     cJSON_GetObjectItem(j, "digest_a")->valuestring);
    cJSON_Delete(ins);
    cJSON_Delete(j);
    free(out);
    free(args);
    free(one);
    free(four);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_one_bit_change_is_found_and_named)
{
    char *dir = tu_tmpdir();
    /* byte 2001 of a bf16 tensor: the low mantissa bit of element 1000 */
    char *changed = reshard(dir, "changed", "testdata/llama-tiny", 1,
                            "model.layers.1.mlp.up_proj.weight", 2000);
    int rc;
    cJSON *j = diff_json("testdata/llama-tiny", changed, "", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(j, "identical")));
    const cJSON *diffs = cJSON_GetObjectItem(j, "differences");
    ck_assert_int_eq(cJSON_GetArraySize(diffs), 1);
    const cJSON *d = cJSON_GetArrayItem(diffs, 0);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "name")->valuestring,
                     "model.layers.1.mlp.up_proj.weight");
    ck_assert_str_eq(cJSON_GetObjectItem(d, "kind")->valuestring, "values");
    ck_assert_int_eq(cJSON_GetObjectItem(d, "differing")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "first_index")->valueint, 1000);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "max_ulp")->valueint, 1);
    ck_assert(cJSON_GetObjectItem(d, "max_abs_diff")->valuedouble > 0);
    ck_assert_str_ne(cJSON_GetObjectItem(j, "digest_a")->valuestring,
                     cJSON_GetObjectItem(j, "digest_b")->valuestring);
    cJSON_Delete(j);
    /* the text report names it too; -q says it by the exit status alone */
    char *args, *out;
    ck_assert(asprintf(&args, "diff testdata/llama-tiny '%s'", changed) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    ck_assert_msg(strstr(out, "values differ: model.layers.1.mlp.up_proj.weight: 1 of 104448 "
                              "elements, first at 1000"),
                  "%s", out);
    free(out);
    free(args);
    ck_assert(asprintf(&args, "diff -q testdata/llama-tiny '%s'", changed) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    ck_assert_str_eq(out, "");
    free(out);
    free(args);
    free(changed);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_missing_tensors_and_mismatches_are_reported)
{
    int rc;
    /* llama-tiny vs its quantized self: FP8 weights (dtype), scales (only in B) */
    char *dir = tu_tmpdir(), *args = quantize_into(dir, "", "testdata/llama-tiny");
    cJSON *j = diff_json("testdata/llama-tiny", args, "", &rc);
    ck_assert_int_eq(rc, 1);
    int only_b = 0, dtype = 0, other = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(j, "differences"))
    {
        const char *kind = cJSON_GetObjectItem(d, "kind")->valuestring;
        only_b += strcmp(kind, "only_in_b") == 0;
        dtype += strcmp(kind, "dtype") == 0;
        other += strcmp(kind, "only_in_b") != 0 && strcmp(kind, "dtype") != 0;
    }
    ck_assert_int_eq(only_b, 14); /* the _scale_inv tensors */
    ck_assert_int_eq(dtype, 14);  /* BF16 in A, F8_E4M3 in B */
    ck_assert_int_eq(other, 0);
    cJSON_Delete(j);
    /* reversed: only in A */
    j = diff_json(args, "testdata/llama-tiny", "", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "differences"), 0),
                                         "kind")->valuestring,
                     "dtype");
    cJSON_Delete(j);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_shape_mismatch_is_reported)
{
    char *dir = tu_tmpdir(), pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/a.safetensors", dir);
    snprintf(pb, sizeof pb, "%s/b.safetensors", dir);
    const char *paths[2] = { pa, pb };
    uint64_t shapes[2][2] = { { 2, 3 }, { 3, 2 } };
    fp8_ctx *ctx = fp8_ctx_create();
    for (int s = 0; s < 2; s++) {
        fp8_writer *w;
        unsigned char zero[12] = { 0 };
        ck_assert(fp8_writer_create(ctx, paths[s], &w) == FP8_OK);
        ck_assert(fp8_writer_add_tensor(ctx, w, "t", FP8_DTYPE_BF16, 2, shapes[s]) == FP8_OK);
        ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
        ck_assert(fp8_writer_write(ctx, w, zero, 12) == FP8_OK);
        ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
        fp8_writer_free(w);
    }
    fp8_ctx_free(ctx);
    char *args, *out;
    ck_assert(asprintf(&args, "diff '%s' '%s'", pa, pb) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    ck_assert_msg(strstr(out, "shape differs: t: [2, 3] in A, [3, 2] in B"), "%s", out);
    free(out);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dequant_compares_fp8_by_value)
{
    char *dir = tu_tmpdir(), *args, *fp8, *f32;
    ck_assert(asprintf(&fp8, "%s/fp8", dir) > 0);
    ck_assert(asprintf(&f32, "%s/f32", dir) > 0);
    ck_assert(asprintf(&args, "quantize -q --scheme channel testdata/llama-tiny %s && %s "
                              "dequantize-for-export -q --dtype f32 %s %s",
                       fp8, FP8CONV_BIN, fp8, f32) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    int rc;
    cJSON *j = diff_json(fp8, f32, "--dequant", &rc);
    ck_assert_msg(rc == 0, "the f32 export holds exactly q * s");
    cJSON_Delete(j);
    j = diff_json(fp8, f32, "", &rc); /* by bytes they differ */
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
    /* against the bf16 source: the quantization error shows, by value */
    j = diff_json(fp8, "testdata/llama-tiny", "--dequant", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "differences"), 0);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(d, "dequantized")));
    ck_assert_str_eq(cJSON_GetObjectItem(d, "kind")->valuestring, "values");
    cJSON_Delete(j);
    free(fp8);
    free(f32);
    tu_tmpdir_free(dir);
}
END_TEST

/* fuzz_dir found it: a scalar's hash read its shape text uninitialized (the
 * loop over no dimension wrote nothing), so it changed from run to run; a
 * tensor with a shape hashed just before leaves its text there. */
START_TEST(test_scalar_hash_is_of_the_empty_shape)
{
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "%s/scalar.safetensors", dir);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    const uint64_t shape[2] = { 123, 45 };
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "a", FP8_DTYPE_U8, 2, shape) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, w, "b", FP8_DTYPE_F32, 0, NULL) == FP8_OK);
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    unsigned char zeros[123 * 45] = { 0 };
    const float x = 3.5f;
    ck_assert(fp8_writer_write(ctx, w, &x, 4) == FP8_OK); /* F32 before U8 */
    ck_assert(fp8_writer_write(ctx, w, zeros, sizeof zeros) == FP8_OK);
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);

    /* name, dtype, the shape as text (empty), each with its NUL; the bytes */
    XXH3_state_t *h = XXH3_createState();
    XXH3_128bits_reset(h);
    XXH3_128bits_update(h, "b", 2);
    XXH3_128bits_update(h, "F32", 4);
    XXH3_128bits_update(h, "", 1);
    XXH3_128bits_update(h, &x, 4);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(h));
    XXH3_freeState(h);
    char want[33];
    for (int i = 0; i < 16; i++)
        snprintf(want + 2 * i, 3, "%02x", c.digest[i]);

    fp8_checkpoint *ck;
    ck_assert(fp8_checkpoint_open(ctx, path, &ck) == FP8_OK);
    for (int run = 0; run < 3; run++) {
        fp8_hash_hex hashes[2], digest;
        ck_assert(fp8_checkpoint_hash(ctx, ck, 1, hashes, digest) == FP8_OK);
        ck_assert_str_eq(hashes[1], want);
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_unreadable_or_malformed_input_exits_4_or_3)
{
    char *err;
    ck_assert_int_eq(tu_run("diff testdata/llama-tiny /nonexistent/x", NULL, &err), 4);
    ck_assert_msg(strstr(err, "/nonexistent/x"), "%s", err);
    free(err);
    ck_assert_int_eq(tu_run("diff testdata/llama-tiny testdata/malformed/header_truncated_json.safetensors",
                            NULL, &err),
                     3);
    free(err);
    ck_assert_int_eq(tu_run("diff testdata/llama-tiny", NULL, &err), 2);
    free(err);
}
END_TEST

/* ---------------------------------------------------------------- statistics: fast = reference */

static void expect_same_stats(const diff_stats *want, const diff_stats *got, const char *what)
{
    ck_assert_msg(want->differing == got->differing, "%s: differing %llu, want %llu", what,
                  (unsigned long long)got->differing, (unsigned long long)want->differing);
    if (want->differing)
        ck_assert_msg(want->first_index == got->first_index, "%s: first %llu, want %llu", what,
                      (unsigned long long)got->first_index, (unsigned long long)want->first_index);
    ck_assert_msg(want->max_ulp == got->max_ulp, "%s: max_ulp %llu, want %llu", what,
                  (unsigned long long)got->max_ulp, (unsigned long long)want->max_ulp);
    ck_assert_msg(want->sign_changes == got->sign_changes, "%s: sign_changes %llu, want %llu",
                  what, (unsigned long long)got->sign_changes,
                  (unsigned long long)want->sign_changes);
    ck_assert_msg(memcmp(&want->max_abs, &got->max_abs, sizeof want->max_abs) == 0 ||
                      (isnan(want->max_abs) && isnan(got->max_abs)),
                  "%s: max_abs %.17g, want %.17g", what, got->max_abs, want->max_abs);
}

/* The same quality sums, bit for bit (a NaN as any NaN). */
static void expect_same_quality(const fp8_quality *want, const fp8_quality *got, const char *what)
{
    const double w[3] = { want->ref_sq, want->out_sq, want->err_sq };
    const double g[3] = { got->ref_sq, got->out_sq, got->err_sq };
    ck_assert_msg(want->elements == got->elements, "%s: quality over %llu elements, want %llu",
                  what, (unsigned long long)got->elements, (unsigned long long)want->elements);
    for (int k = 0; k < 3; k++)
        ck_assert_msg(memcmp(&w[k], &g[k], sizeof w[k]) == 0 || (isnan(w[k]) && isnan(g[k])),
                      "%s: quality sum %d %.17g, want %.17g", what, k, g[k], w[k]);
}

/* The fast path over n elements of dt (whole, from another base index, and
 * cut in two at several places, the halves merged in either order) gives
 * the reference's statistics; returns them. */
static diff_stats expect_fast_bytes(fp8_dtype dt, const void *a, const void *b, uint64_t n)
{
    char what[64];
    snprintf(what, sizeof what, "%s, %llu elements", fp8_dtype_name(dt), (unsigned long long)n);
    unsigned size = diff_element_size(dt);
    diff_stats ref = DIFF_STATS_INIT, fast = DIFF_STATS_INIT;
    diff_bytes_ref(dt, a, b, n, 0, &ref);
    diff_bytes(dt, a, b, n, 0, &fast);
    expect_same_stats(&ref, &fast, what);
    fp8_quality q = { 0, 0, 0, 0 };
    if (diff_has_quality(dt))
        diff_quality_bytes_ref(dt, a, b, n, &q);
    expect_same_quality(&q, &fast.quality, what);
    diff_stats far = DIFF_STATS_INIT;
    diff_bytes(dt, a, b, n, 1000003, &far);
    far.first_index -= far.differing ? 1000003 : 0;
    expect_same_stats(&ref, &far, what);
    uint64_t cuts[] = { 1, 7, n / 3, n / 2 + 1, n - 1 };
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        uint64_t k = cuts[c] < n ? cuts[c] : n;
        const unsigned char *pa = a, *pb = b;
        diff_stats lo = DIFF_STATS_INIT, hi = DIFF_STATS_INIT;
        diff_bytes(dt, pa, pb, k, 0, &lo);
        diff_bytes(dt, pa + k * size, pb + k * size, n - k, k, &hi);
        diff_stats x = DIFF_STATS_INIT, y = DIFF_STATS_INIT;
        diff_stats_merge(&x, &lo);
        diff_stats_merge(&x, &hi);
        diff_stats_merge(&y, &hi);
        diff_stats_merge(&y, &lo);
        expect_same_stats(&ref, &x, what);
        expect_same_stats(&ref, &y, what);
    }
    return ref;
}

/* Each pair alone: repeated over 67 elements (the vector loop and its tail
 * both see it), so that no other pair's maximum hides a wrong one. */
static void expect_each_pair(fp8_dtype dt, const void *a, const void *b, uint64_t n)
{
    unsigned size = diff_element_size(dt);
    unsigned char ra[67 * 8], rb[67 * 8];
    for (uint64_t i = 0; i < n; i++) {
        for (int k = 0; k < 67; k++) {
            memcpy(ra + k * size, (const unsigned char *)a + i * size, size);
            memcpy(rb + k * size, (const unsigned char *)b + i * size, size);
        }
        diff_stats ref = DIFF_STATS_INIT, fast = DIFF_STATS_INIT;
        diff_bytes_ref(dt, ra, rb, 67, 0, &ref);
        diff_bytes(dt, ra, rb, 67, 0, &fast);
        char what[64];
        snprintf(what, sizeof what, "%s, element %llu", fp8_dtype_name(dt), (unsigned long long)i);
        expect_same_stats(&ref, &fast, what);
    }
}

/* Element i of an array of `size`-byte codes. */
static void put_code(void *p, unsigned size, uint64_t i, uint64_t code)
{
    memcpy((unsigned char *)p + i * size, &code, size); /* little-endian */
}

static uint64_t next_u64(void) { return (uint64_t)next_u32() << 32 | next_u32(); }

/* Codes worth comparing with each other, per dtype: zeros of both signs,
 * subnormals, the largest finite, infinities, NaNs of several payloads. */
static size_t special_codes(fp8_dtype dt, uint64_t *c)
{
    static const uint64_t bf16[] = { 0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80,
                                     0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x7FC1, 0xFFC0, 0x7F81 };
    static const uint64_t f16[] = { 0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
                                    0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x7E01, 0xFE00, 0x7C01 };
    static const uint64_t f32[] = { 0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF,
                                    0x00800000, 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF,
                                    0x7F800000, 0xFF800000, 0x7FC00000, 0x7FC00001, 0xFFC00000,
                                    0x7F800001 };
    static const uint64_t wide[] = { 0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF,
                                     0x80000000, 0xFFFFFFFF, 0x7FFFFFFFFFFFFFFF,
                                     0x8000000000000000, 0xFFFFFFFFFFFFFFFF, 0x7FF0000000000000,
                                     0xFFF0000000000000, 0x7FF8000000000000, 0x7FF8000000000001,
                                     0x3FF0000000000000, 0x0000000000000001 };
    const uint64_t *from = dt == FP8_DTYPE_BF16 ? bf16 : dt == FP8_DTYPE_F16 ? f16
                           : dt == FP8_DTYPE_F32 ? f32 : wide;
    size_t n = dt == FP8_DTYPE_BF16 ? 16 : dt == FP8_DTYPE_F16 ? 16 : dt == FP8_DTYPE_F32 ? 16 : 21;
    unsigned bits = 8 * diff_element_size(dt);
    for (size_t i = 0; i < n; i++)
        c[i] = bits == 64 ? from[i] : from[i] & ((1ull << bits) - 1);
    return n;
}

/* a and b: every pair of special codes, then random pairs (equal, a few
 * ULPs apart, of opposite signs, unrelated), then the pairs again at an odd
 * offset; n is not a multiple of any vector width or block. */
static uint64_t fill_pairs(fp8_dtype dt, unsigned char *a, unsigned char *b, uint64_t n)
{
    unsigned size = diff_element_size(dt);
    uint64_t sp[32], keep = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
    size_t ns = special_codes(dt, sp);
    uint64_t i = 0;
    for (size_t x = 0; x < ns; x++)
        for (size_t y = 0; y < ns; y++, i++) {
            put_code(a, size, i, sp[x]);
            put_code(b, size, i, sp[y]);
        }
    for (; i < n; i++) {
        uint64_t u = next_u64() & keep, v = u, r = next_u32() % 8;
        if (r == 1 || r == 2)
            v = (u + 1 + next_u32() % 4) & keep;
        else if (r == 3)
            v = u ^ (1ull << (8 * size - 1)); /* the same magnitude across zero */
        else if (r == 4)
            v = next_u64() & keep;
        put_code(a, size, i, u);
        put_code(b, size, i, v);
    }
    for (size_t x = 0; x < ns && n > 5000 + x; x++) {
        put_code(a, size, n - 5000 + x, sp[x]);
        put_code(b, size, n - 5000 + x, sp[ns - 1 - x]);
    }
    return n;
}

static const fp8_dtype every_dtype[] = {
    FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32, FP8_DTYPE_F8_E4M3, FP8_DTYPE_F8_E5M2,
    FP8_DTYPE_F8_E8M0, FP8_DTYPE_F64, FP8_DTYPE_I8, FP8_DTYPE_I16, FP8_DTYPE_I32, FP8_DTYPE_I64,
    FP8_DTYPE_U8, FP8_DTYPE_U16, FP8_DTYPE_U32, FP8_DTYPE_U64, FP8_DTYPE_BOOL, FP8_DTYPE_C64,
};

START_TEST(test_fast_stats_equal_reference_on_every_dtype)
{
    uint64_t n = 3 * 4096 + 1234 + 37;
    unsigned char *a = malloc(n * 8), *b = malloc(n * 8);
    for (size_t d = 0; d < sizeof every_dtype / sizeof *every_dtype; d++) {
        fill_pairs(every_dtype[d], a, b, n);
        diff_stats s = expect_fast_bytes(every_dtype[d], a, b, n);
        ck_assert_msg(s.differing > 0, "%s", fp8_dtype_name(every_dtype[d]));
        expect_each_pair(every_dtype[d], a, b, n);
    }
    free(a);
    free(b);
}
END_TEST

START_TEST(test_fast_stats_equal_reference_on_every_pair_of_byte_codes)
{
    const fp8_dtype bytes[] = { FP8_DTYPE_F8_E4M3, FP8_DTYPE_F8_E5M2, FP8_DTYPE_F8_E8M0,
                                FP8_DTYPE_U8, FP8_DTYPE_I8 };
    unsigned char a[65536], b[65536];
    for (unsigned i = 0; i < 65536; i++)
        a[i] = (unsigned char)(i >> 8), b[i] = (unsigned char)i;
    for (size_t d = 0; d < sizeof bytes / sizeof *bytes; d++) {
        expect_fast_bytes(bytes[d], a, b, 65536);
        expect_each_pair(bytes[d], a, b, 65536);
    }
}
END_TEST

/* One pair of elements of dt, by both paths: the statistics are `want`'s. */
static void expect_pair_x(fp8_dtype dt, uint64_t ca, uint64_t cb, uint64_t differing,
                          double max_abs, uint64_t max_ulp, uint64_t sign_changes)
{
    unsigned char a[8], b[8];
    unsigned size = diff_element_size(dt);
    put_code(a, size, 0, ca);
    put_code(b, size, 0, cb);
    diff_stats want = { differing, 0, max_abs, max_ulp, sign_changes, { 0, 0, 0, 0 } };
    diff_stats ref = DIFF_STATS_INIT, fast = DIFF_STATS_INIT;
    diff_bytes_ref(dt, a, b, 1, 0, &ref);
    diff_bytes(dt, a, b, 1, 0, &fast);
    expect_same_stats(&want, &ref, "reference");
    expect_same_stats(&want, &fast, "fast");
}

/* A pair of the same sign (or a zero): no sign change. */
static void expect_pair(fp8_dtype dt, uint64_t ca, uint64_t cb, uint64_t differing, double max_abs,
                        uint64_t max_ulp)
{
    expect_pair_x(dt, ca, cb, differing, max_abs, max_ulp, 0);
}

START_TEST(test_tricky_pairs_give_the_documented_statistics)
{
    double none = 0.0 / 0.0;
    /* +0 against -0: the bytes differ, the values do not */
    expect_pair(FP8_DTYPE_BF16, 0x0000, 0x8000, 1, 0, 0);
    expect_pair(FP8_DTYPE_F32, 0x00000000, 0x80000000, 1, 0, 0);
    /* NaN against the same NaN: equal bytes; another payload: differing, no |a - b| */
    expect_pair(FP8_DTYPE_BF16, 0x7FC0, 0x7FC0, 0, none, 0);
    expect_pair(FP8_DTYPE_BF16, 0x7FC0, 0x7FC1, 1, none, 1);
    expect_pair_x(FP8_DTYPE_F16, 0x7E00, 0xFE00, 1, none, 0, 1);
    /* NaN against a number: ULPs, no |a - b| */
    expect_pair(FP8_DTYPE_F8_E4M3, 0x7F, 0x7E, 1, none, 1);
    expect_pair(FP8_DTYPE_F32, 0x7FC00000, 0x3F800000, 1, none, 0x7FC00000 - 0x3F800000);
    /* infinities */
    expect_pair_x(FP8_DTYPE_BF16, 0x7F80, 0xFF80, 1, INFINITY, 0, 1);
    expect_pair(FP8_DTYPE_F16, 0x7C00, 0x7BFF, 1, INFINITY, 1);
    /* subnormals; values of opposite signs are sign changes, with no ULP
     * distance (across zero it would be twice the codes' magnitudes: issue
     * 23); a zero of either sign is no sign */
    expect_pair_x(FP8_DTYPE_BF16, 0x0001, 0x8001, 1, 2 * 0x1p-133, 0, 1);
    expect_pair(FP8_DTYPE_F16, 0x0001, 0x0003, 1, 2 * 0x1p-24, 2);
    expect_pair_x(FP8_DTYPE_F8_E4M3, 0x01, 0x81, 1, 2 * 0x1p-9, 0, 1);
    expect_pair_x(FP8_DTYPE_F32, 0x7F7FFFFF, 0xFF7FFFFF, 1, 2.0 * FLT_MAX, 0, 1);
    expect_pair(FP8_DTYPE_BF16, 0x8000, 0x3F80, 1, 1, 0x3F80);
    expect_pair(FP8_DTYPE_F8_E5M2, 0x80, 0x01, 1, 0x1p-16, 1);
    expect_pair_x(FP8_DTYPE_F8_E5M2, 0x81, 0x01, 1, 2 * 0x1p-16, 0, 1);
    /* integers: ULPs are integer distances, saturated */
    expect_pair(FP8_DTYPE_I8, 0x80, 0x7F, 1, 255, 255);
    expect_pair(FP8_DTYPE_I64, 0x8000000000000000, 0x7FFFFFFFFFFFFFFF, 1, 0x1p64, UINT64_MAX);
    expect_pair(FP8_DTYPE_U16, 0, 0xFFFF, 1, 65535, 65535);
    /* E8M0: 0xFF is NaN, 0x7F is 1 */
    expect_pair(FP8_DTYPE_F8_E8M0, 0xFF, 0x7F, 1, none, 128);
    expect_pair(FP8_DTYPE_F8_E8M0, 0x80, 0x7F, 1, 1, 1);
}
END_TEST

START_TEST(test_first_difference_at_first_or_last_element_of_any_length)
{
    const fp8_dtype dts[] = { FP8_DTYPE_BF16, FP8_DTYPE_F32, FP8_DTYPE_F8_E4M3, FP8_DTYPE_F16,
                              FP8_DTYPE_I32 };
    const uint64_t lengths[] = { 1, 2, 15, 16, 17, 31, 33, 63, 65, 1023, 2047, 2048, 2049, 4095,
                                 4097, 3 * 4096 + 5 };
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
            uint64_t n = lengths[l];
            unsigned size = diff_element_size(dts[d]);
            unsigned char *a = calloc(n, size), *b = calloc(n, size);
            for (int where = 0; where < 2; where++) {
                memset(b, 0, n * size);
                uint64_t at = where ? n - 1 : 0;
                b[at * size] = 1; /* the smallest subnormal, or 1 */
                diff_stats s = expect_fast_bytes(dts[d], a, b, n);
                ck_assert_int_eq(s.differing, 1);
                ck_assert_int_eq(s.first_index, at);
                ck_assert_int_eq(s.max_ulp, 1);
                if (where == 1 && n > 1) { /* and one at the first element too */
                    b[0] = 2;
                    s = expect_fast_bytes(dts[d], a, b, n);
                    ck_assert_int_eq(s.differing, 2);
                    ck_assert_int_eq(s.first_index, 0);
                    ck_assert_int_eq(s.max_ulp, 2);
                    b[0] = 0;
                }
            }
            free(a);
            free(b);
        }
}
END_TEST

START_TEST(test_fast_values_equal_reference)
{
    /* every pair of special fp32 values, then random values nearly equal */
    uint64_t sp[32], n = 3 * 1024 + 517;
    size_t ns = special_codes(FP8_DTYPE_F32, sp);
    float *a = malloc(n * 4), *b = malloc(n * 4);
    uint64_t i = 0;
    for (size_t x = 0; x < ns; x++)
        for (size_t y = 0; y < ns; y++, i++) {
            a[i] = fp8_f32_from_bits((uint32_t)sp[x]);
            b[i] = fp8_f32_from_bits((uint32_t)sp[y]);
        }
    fill(FP8_DTYPE_F32, a + i, n - i);
    for (; i < n; i++) {
        uint32_t r = next_u32() % 4;
        b[i] = r == 0 ? fp8_f32_from_bits(fp8_f32_bits(a[i]) + 1 + next_u32() % 3)
               : r == 1 ? -a[i] : a[i];
    }
    diff_stats ref = DIFF_STATS_INIT, fast = DIFF_STATS_INIT;
    diff_values_ref(FP8_DTYPE_F32, a, b, n, 0, &ref);
    diff_values(FP8_DTYPE_F32, a, b, n, 0, &fast);
    expect_same_stats(&ref, &fast, "values");
    ck_assert(ref.differing > 0);
    fp8_quality q = { 0, 0, 0, 0 };
    diff_quality_values_ref(a, b, n, &q);
    expect_same_quality(&q, &fast.quality, "values");
    /* the numbers only (no infinity or NaN in the sums), from an odd element on */
    uint64_t from = ns * ns + 3;
    diff_stats finite = DIFF_STATS_INIT;
    diff_values(FP8_DTYPE_F32, a + from, b + from, n - from, 0, &finite);
    fp8_quality qf = { 0, 0, 0, 0 };
    diff_quality_values_ref(a + from, b + from, n - from, &qf);
    ck_assert(isfinite(qf.err_sq) && qf.err_sq > 0);
    expect_same_quality(&qf, &finite.quality, "finite values");
    for (uint64_t j = 0; j < ns * ns; j++) { /* each special pair alone (see expect_each_pair) */
        float ra[67], rb[67];
        for (int k = 0; k < 67; k++)
            ra[k] = a[j], rb[k] = b[j];
        diff_stats r1 = DIFF_STATS_INIT, f1 = DIFF_STATS_INIT;
        diff_values_ref(FP8_DTYPE_F32, ra, rb, 67, 0, &r1);
        diff_values(FP8_DTYPE_F32, ra, rb, 67, 0, &f1);
        expect_same_stats(&r1, &f1, "a special pair of values");
    }
    /* +0 against -0 and NaN against another NaN are no difference */
    float za[3] = { 0.0f, fp8_f32_from_bits(0x7FC00000), fp8_f32_from_bits(0x7F800001) };
    float zb[3] = { -0.0f, fp8_f32_from_bits(0xFFC00001), fp8_f32_from_bits(0x7FC00000) };
    diff_stats none = DIFF_STATS_INIT;
    diff_values(FP8_DTYPE_F32, za, zb, 3, 0, &none);
    ck_assert_int_eq(none.differing, 0);
    diff_values_ref(FP8_DTYPE_F32, za, zb, 3, 0, &none);
    ck_assert_int_eq(none.differing, 0);
    /* NaN against a number: counted, ULPs, no |a - b| */
    float na[2] = { 1.0f, fp8_f32_from_bits(0x7FC00000) }, nb[2] = { 1.0f, 1.0f };
    diff_stats want = { 1, 1, 0.0 / 0.0, 0x7FC00000 - 0x3F800000, 0, { 0, 0, 0, 0 } }, got = DIFF_STATS_INIT;
    diff_values(FP8_DTYPE_F32, na, nb, 2, 0, &got);
    expect_same_stats(&want, &got, "NaN against 1");
    free(a);
    free(b);
}
END_TEST

START_TEST(test_fast_conversion_to_f32_keeps_every_bf16_and_f16_code)
{
    uint16_t x[65536];
    float ref[65536], fast[65536];
    for (unsigned i = 0; i < 65536; i++)
        x[i] = (uint16_t)i;
    const fp8_dtype dts[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16 };
    for (int d = 0; d < 2; d++) {
        diff_to_f32_ref(dts[d], x, 65536, ref);
        diff_to_f32(dts[d], x, 65536, fast);
        for (unsigned i = 0; i < 65536; i++)
            ck_assert_msg(fp8_f32_bits(ref[i]) == fp8_f32_bits(fast[i]), "%s 0x%04x: %08x, want %08x",
                          fp8_dtype_name(dts[d]), i, fp8_f32_bits(fast[i]), fp8_f32_bits(ref[i]));
    }
    uint32_t w[4] = { 0x7F800001, 0xFFC00001, 0x80000000, 0x00000001 };
    diff_to_f32(FP8_DTYPE_F32, w, 4, fast);
    ck_assert(memcmp(w, fast, sizeof w) == 0);
}
END_TEST

/* ---------------------------------------------------------------- bands and threads */

typedef struct {
    const char *name;
    fp8_dtype dtype;
    uint64_t rows, cols;
    unsigned char *a, *b; /* the contents on each side */
} side_tensor;

static void write_side(const char *path, side_tensor *t, size_t n, int side)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *w;
    ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
    for (size_t i = 0; i < n; i++) {
        uint64_t shape[2] = { t[i].rows, t[i].cols };
        ck_assert(fp8_writer_add_tensor(ctx, w, t[i].name, t[i].dtype, 2, shape) == FP8_OK);
    }
    ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
    for (size_t k = 0; k < fp8_writer_tensor_count(w); k++) {
        const fp8_tensor_info *ti = fp8_writer_tensor(w, k);
        for (size_t i = 0; i < n; i++)
            if (strcmp(t[i].name, ti->name) == 0)
                ck_assert(fp8_writer_write(ctx, w, side ? t[i].b : t[i].a,
                                           (size_t)fp8_tensor_nbytes(ti)) == FP8_OK);
    }
    ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
    fp8_writer_free(w);
    fp8_ctx_free(ctx);
}

static char *diff_text(const char *a, const char *b, const char *extra, int *rc)
{
    char *args, *out;
    ck_assert(asprintf(&args, "diff --json %s '%s' '%s'", extra, a, b) > 0);
    *rc = tu_run(args, &out, NULL);
    free(args);
    return out;
}

START_TEST(test_report_is_the_same_for_any_thread_count)
{
    /* tensors of several bands (2 MiB a side), differing in some bands only */
    side_tensor t[] = {
        { "big.bf16", FP8_DTYPE_BF16, 2100, 2048, NULL, NULL },
        { "e4m3", FP8_DTYPE_F8_E4M3, 2500, 1001, NULL, NULL },
        { "f16", FP8_DTYPE_F16, 1000, 1100, NULL, NULL },
        { "f32", FP8_DTYPE_F32, 600, 1000, NULL, NULL },
        { "i32", FP8_DTYPE_I32, 1000, 700, NULL, NULL },
        { "same", FP8_DTYPE_BF16, 64, 64, NULL, NULL },
    };
    size_t nt = sizeof t / sizeof *t;
    for (size_t i = 0; i < nt; i++) {
        unsigned size = diff_element_size(t[i].dtype);
        uint64_t n = t[i].rows * t[i].cols;
        t[i].a = malloc(n * size);
        if (t[i].dtype == FP8_DTYPE_BF16 || t[i].dtype == FP8_DTYPE_F16 ||
            t[i].dtype == FP8_DTYPE_F32)
            fill(t[i].dtype, t[i].a, n);
        else
            for (uint64_t k = 0; k < n * size; k++)
                t[i].a[k] = (unsigned char)next_u32();
        t[i].b = malloc(n * size);
        memcpy(t[i].b, t[i].a, n * size);
    }
    uint16_t *big = (uint16_t *)(void *)t[0].b; /* from its second band on */
    for (uint64_t k = 1500000; k < 2100 * 2048; k += 997)
        big[k] ^= (uint16_t)(1 + k % 5);
    big[3000000] = 0x7FC0; /* NaN against a number */
    for (uint64_t k = 0; k < 2500 * 1001; k++) /* everywhere */
        t[1].b[k] ^= (unsigned char)(next_u32() % 3);
    ((uint16_t *)(void *)t[2].b)[1000 * 1100 - 1] ^= 0x8000; /* the last element only */
    for (uint64_t k = 7; k < 600 * 1000; k += 101)
        ((uint32_t *)(void *)t[3].b)[k] += 3;
    ((int32_t *)(void *)t[4].b)[699999] = INT32_MIN;
    ((int32_t *)(void *)t[4].a)[699999] = INT32_MAX;

    char *dir = tu_tmpdir(), pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/a.safetensors", dir);
    snprintf(pb, sizeof pb, "%s/b.safetensors", dir);
    write_side(pa, t, nt, 0);
    write_side(pb, t, nt, 1);
    int rc;
    char *one = diff_text(pa, pb, "-j 1", &rc);
    ck_assert_int_eq(rc, 1);
    const char *threads[] = { "-j 2", "-j 3", "-j 8", "-j 64" }; /* 64: bands of 128 KiB */
    for (int k = 0; k < 4; k++) {
        char *other = diff_text(pa, pb, threads[k], &rc);
        ck_assert_int_eq(rc, 1);
        ck_assert_msg(strcmp(one, other) == 0, "%s:\n%s\n-j 1:\n%s", threads[k], other, one);
        free(other);
    }
    /* and each tensor's statistics are the reference's over the whole tensor */
    cJSON *j = cJSON_Parse(one);
    const cJSON *diffs = cJSON_GetObjectItem(j, "differences");
    ck_assert_int_eq(cJSON_GetArraySize(diffs), (int)nt - 1);
    for (size_t i = 0; i < nt; i++) {
        diff_stats ref = DIFF_STATS_INIT;
        diff_bytes_ref(t[i].dtype, t[i].a, t[i].b, t[i].rows * t[i].cols, 0, &ref);
        const cJSON *d = NULL, *x;
        cJSON_ArrayForEach(x, diffs)
            if (strcmp(cJSON_GetObjectItem(x, "name")->valuestring, t[i].name) == 0)
                d = x;
        if (ref.differing == 0) {
            ck_assert_msg(!d, "%s", t[i].name);
            continue;
        }
        ck_assert_msg(d, "%s", t[i].name);
        ck_assert_double_eq(cJSON_GetObjectItem(d, "differing")->valuedouble, (double)ref.differing);
        ck_assert_double_eq(cJSON_GetObjectItem(d, "first_index")->valuedouble,
                            (double)ref.first_index);
        ck_assert_double_eq(cJSON_GetObjectItem(d, "max_ulp")->valuedouble, (double)ref.max_ulp);
        ck_assert_double_eq(cJSON_GetObjectItem(d, "max_abs_diff")->valuedouble, ref.max_abs);
    }
    ck_assert_int_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(diffs, 0), "first_index")->valueint,
                     1500000);
    cJSON_Delete(j);
    free(one);
    for (size_t i = 0; i < nt; i++) {
        free(t[i].a);
        free(t[i].b);
    }
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dequant_report_is_the_same_for_any_thread_count)
{
    /* 2100 rows of 2048: nine bands of whole rows */
    char *dir = tu_tmpdir(), *model = make_model(dir, "model", 2100, 2048, -1, 0);
    char *fp8 = quantize_into(dir, "", model);
    int rc;
    char *one = diff_text(fp8, model, "--dequant -j 1", &rc);
    ck_assert_int_eq(rc, 1);
    const char *threads[] = { "--dequant -j 2", "--dequant -j 3", "--dequant -j 8",
                              "--dequant -j 64" };
    for (int k = 0; k < 4; k++) {
        char *other = diff_text(fp8, model, threads[k], &rc);
        ck_assert_int_eq(rc, 1);
        ck_assert_msg(strcmp(one, other) == 0, "%s:\n%s\n-j 1:\n%s", threads[k], other, one);
        free(other);
    }
    cJSON *j = cJSON_Parse(one);
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "differences"), 0);
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(d, "dequantized")));
    ck_assert_double_eq(cJSON_GetObjectItem(d, "elements")->valuedouble, 2100.0 * 2048);
    cJSON_Delete(j);
    free(one);
    free(fp8);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST


/* ---------------------------------------------------------------- packed FP4 (issue 25) */

#define RELEASES "testdata/releases/"

/* The entry of `report` (diff --json) named `name`; NULL when none. */
static const cJSON *difference(const cJSON *report, const char *name)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(report, "differences"))
        if (strcmp(cJSON_GetObjectItem(x, "name")->valuestring, name) == 0)
            return x;
    return NULL;
}

/* ModelOpt NVFP4 (weight, weight_scale, weight_scale_2 = 2^-17) and its
 * compressed-tensors twin (weight_packed, weight_scale, weight_global_scale
 * = 2^17, a divisor): the same codes, the same values; neither side's
 * scales, global scales nor input scales are tensors of the other. */
START_TEST(test_dequant_nvfp4_modelopt_and_compressed_tensors_twins_are_identical)
{
    int rc;
    cJSON *j = diff_json(RELEASES "nvfp4-modelopt", RELEASES "nvfp4-ct", "--dequant", &rc);
    char *text = cJSON_Print(j);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "differences")), 0);
    /* the 7 linears by their unpacked names, 5 bf16 tensors; no scale */
    ck_assert_int_eq(cJSON_GetObjectItem(j, "tensors")->valueint, 12);
    cJSON_Delete(j);
    /* by bytes they are other tensors */
    j = diff_json(RELEASES "nvfp4-modelopt", RELEASES "nvfp4-ct", "", &rc);
    ck_assert_int_eq(rc, 1);
    cJSON_Delete(j);
}
END_TEST

/* compressed-tensors MXFP4 of 0.13.0 (scale bias 125): the export refuses
 * it (the bias rule is the export's), diff --dequant compares its weights
 * unpacked, as before the reader was shared. */
START_TEST(test_dequant_compares_the_old_bias_mxfp4_the_export_refuses)
{
    int rc;
    cJSON *j = diff_json(RELEASES "defect-mxfp4-ct-old-bias", RELEASES "defect-mxfp4-ct-old-bias",
                         "--dequant", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "differences")), 0);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "tensors")->valueint, 12);
    cJSON_Delete(j);
}
END_TEST

/* One E2M1 code changed (one nibble) is found, named by the unpacked
 * weight and its element there: the low nibble of byte 50 of row 1 of a
 * [128, 48] packed weight is element (1, 4). */
START_TEST(test_dequant_finds_one_changed_e2m1_code_and_names_its_element)
{
    char *dir = tu_tmpdir();
    char *ct = reshard(dir, "ct", RELEASES "nvfp4-ct/model.safetensors", 1,
                       "model.layers.0.mlp.up_proj.weight_packed", 50);
    int rc;
    cJSON *j = diff_json(RELEASES "nvfp4-modelopt", ct, "--dequant", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "differences")), 1);
    const cJSON *d = difference(j, "model.layers.0.mlp.up_proj.weight");
    ck_assert(d);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "kind")->valuestring, "values");
    ck_assert_str_eq(cJSON_GetObjectItem(d, "dtype_a")->valuestring, "F4");
    ck_assert_int_eq(cJSON_GetObjectItem(d, "differing")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "first_index")->valueint, 96 + 4);
    const cJSON *at = cJSON_GetObjectItem(d, "first_at");
    ck_assert_int_eq(cJSON_GetArrayItem(at, 0)->valueint, 1);
    ck_assert_int_eq(cJSON_GetArrayItem(at, 1)->valueint, 4);
    cJSON_Delete(j);
    /* the text report says it too */
    char *out, *args;
    ck_assert(asprintf(&args, "diff --dequant " RELEASES "nvfp4-modelopt '%s'", ct) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    ck_assert_msg(strstr(out, "values differ: model.layers.0.mlp.up_proj.weight: 1 of 12288 "
                              "elements (dequantized), first at 100 [1, 4]"),
                  "%s", out);
    free(out);
    free(args);
    /* gpt-oss: byte 100 of down_proj_blocks [2, 64, 3, 16] is expert 0, row
     * 2, codes 8 and 9 (bit 0: the low nibble, code 8); unpacked as
     * transformers does, [2, 96, 64] (transposed), that is (0, 8, 2) */
    char *g = reshard(dir, "g", RELEASES "gpt-oss/model.safetensors", 1,
                      "model.layers.0.mlp.experts.down_proj_blocks", 100);
    j = diff_json(RELEASES "gpt-oss", g, "--dequant", &rc);
    ck_assert_int_eq(rc, 1);
    d = difference(j, "model.layers.0.mlp.experts.down_proj");
    ck_assert(d && cJSON_GetArraySize(cJSON_GetObjectItem(j, "differences")) == 1);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "differing")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "first_index")->valueint, 8 * 64 + 2);
    at = cJSON_GetObjectItem(d, "first_at");
    ck_assert_int_eq(cJSON_GetArraySize(at), 3);
    ck_assert_int_eq(cJSON_GetArrayItem(at, 1)->valueint, 8);
    ck_assert_int_eq(cJSON_GetArrayItem(at, 2)->valueint, 2);
    cJSON_Delete(j);
    free(g);
    free(ct);
    tu_tmpdir_free(dir);
}
END_TEST

/* Every FP4 layout against its own export, in each dtype: the export holds
 * the exact value rounded once into its dtype, which is what diff compares
 * (each quantized value rounded once into the float side's dtype); the
 * consumed scales are in neither list. */
START_TEST(test_dequant_fp4_checkpoint_equals_its_export_in_every_dtype)
{
    static const char *const fams[] = { "gpt-oss", "deepseek-v4", "nvfp4-modelopt", "nvfp4-ct",
                                        "nvfp4-modelopt-amax", "nvfp4-ct-amax" };
    static const char *const dtypes[] = { "bf16", "f16", "f32" };
    char *dir = tu_tmpdir();
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++)
        for (int k = 0; k < 3; k++) {
            char out[512];
            snprintf(out, sizeof out, "%s/%s-%s", dir, fams[f], dtypes[k]);
            ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q --dtype %s " RELEASES
                                              "%s '%s'", dtypes[k], fams[f], out), 0);
            int rc;
            char src[256];
            snprintf(src, sizeof src, RELEASES "%s", fams[f]);
            cJSON *j = diff_json(src, out, "--dequant", &rc);
            char *text = cJSON_Print(j);
            ck_assert_msg(rc == 0, "%s against its %s export:\n%s", fams[f], dtypes[k], text);
            free(text);
            /* as many tensors as the export holds: no scale left over */
            fp8_ctx *ctx = fp8_ctx_create();
            fp8_checkpoint *ck;
            ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
            ck_assert_int_eq(cJSON_GetObjectItem(j, "tensors")->valueint,
                             (int)fp8_checkpoint_tensor_count(ck));
            fp8_checkpoint_close(ck);
            fp8_ctx_free(ctx);
            cJSON_Delete(j);
        }
    tu_tmpdir_free(dir);
}
END_TEST

/* An FP8 weight against a bf16 tensor is compared in bf16: its bf16 export
 * is identical; the bf16 source it was quantized from is not, by bf16 ulps. */
START_TEST(test_dequant_fp8_against_bf16_compares_in_bf16)
{
    char *dir = tu_tmpdir();
    ck_assert_int_eq(tu_run_fmt(NULL, "quantize -q --scheme block testdata/llama-tiny '%s/q' && "
                                      "%s dequantize-for-export -q '%s/q' '%s/bf'",
                                dir, FP8CONV_BIN, dir, dir), 0);
    char q[512], bf[512];
    snprintf(q, sizeof q, "%s/q", dir);
    snprintf(bf, sizeof bf, "%s/bf", dir);
    int rc;
    cJSON *j = diff_json(q, bf, "--dequant", &rc);
    ck_assert_int_eq(rc, 0);
    cJSON_Delete(j);
    j = diff_json(q, "testdata/llama-tiny", "--dequant", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "differences"), 0);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "compared")->valuestring, "BF16");
    ck_assert(cJSON_GetObjectItem(d, "max_ulp")->valuedouble < 65536);
    cJSON_Delete(j);
    /* against its F16 and F32 exports, in F16 and F32: identical too */
    for (int k = 0; k < 2; k++) {
        char out[512];
        snprintf(out, sizeof out, "%s/%s", dir, k ? "f32" : "f16");
        ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q --dtype %s '%s' '%s'",
                                    k ? "f32" : "f16", q, out), 0);
        j = diff_json(q, out, "--dequant", &rc);
        ck_assert_msg(rc == 0, "against its %s export", k ? "f32" : "f16");
        cJSON_Delete(j);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* Writes dir/NAME/model.safetensors with a weight [2, 16] of dtype dt (the
 * bytes `w`) and, when scale is not NULL, its F32 weight_scale. */
static void write_one(const char *dir, const char *name, fp8_dtype dt, const void *w,
                      const float *scale)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert(mkdir(path, 0755) == 0);
    strcat(path, "/model.safetensors");
    uint64_t shape[2] = { 2, 16 };
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_writer *wr;
    ck_assert(fp8_writer_create(ctx, path, &wr) == FP8_OK);
    ck_assert(fp8_writer_add_tensor(ctx, wr, "model.layers.0.mlp.up_proj.weight", dt, 2, shape) == FP8_OK);
    if (scale)
        ck_assert(fp8_writer_add_tensor(ctx, wr, "model.layers.0.mlp.up_proj.weight_scale",
                                         FP8_DTYPE_F32, 0, NULL) ==
                  FP8_OK);
    ck_assert(fp8_writer_begin(ctx, wr) == FP8_OK);
    for (size_t k = 0; k < fp8_writer_tensor_count(wr); k++) { /* in the writer's order */
        bool is_scale = fp8_writer_tensor(wr, k)->dtype == FP8_DTYPE_F32;
        ck_assert(fp8_writer_write(ctx, wr, is_scale ? (const void *)scale : w,
                                   is_scale ? 4 : 32 * (dt == FP8_DTYPE_BF16 ? 2 : 1)) == FP8_OK);
    }
    ck_assert(fp8_writer_commit(ctx, wr) == FP8_OK);
    fp8_writer_free(wr);
    fp8_ctx_free(ctx);
}

/* An FP8 value past BF16's largest (q * s finite in fp32: 448 x
 * 0x1.248p119 = 0x1.ffcp127, above the halfway 0x1.ffp127) is compared as
 * the infinity it rounds to, which the export refuses (exit 3): equal to a
 * bf16 infinity, not to bf16's largest finite. */
START_TEST(test_dequant_fp8_past_bf16_is_its_infinity)
{
    char *dir = tu_tmpdir(), a[512], b[512];
    uint8_t codes[32];
    memset(codes, 0x38, sizeof codes); /* 1.0 */
    codes[21] = 0x7E;                  /* 448, at [1, 5] */
    float s = 0x1.248p119f;
    uint16_t vals[32];
    for (int i = 0; i < 32; i++)
        vals[i] = fp8_f32_to_bf16(s);
    vals[21] = 0x7F80;
    write_one(dir, "fp8", FP8_DTYPE_F8_E4M3, codes, &s);
    write_one(dir, "inf", FP8_DTYPE_BF16, vals, NULL);
    vals[21] = 0x7F7F;
    write_one(dir, "max", FP8_DTYPE_BF16, vals, NULL);
    snprintf(a, sizeof a, "%s/fp8", dir);
    snprintf(b, sizeof b, "%s/inf", dir);
    int rc;
    cJSON *j = diff_json(a, b, "--dequant", &rc);
    char *text = cJSON_Print(j);
    ck_assert_msg(rc == 0, "%s", text);
    free(text);
    cJSON_Delete(j);
    snprintf(b, sizeof b, "%s/max", dir);
    j = diff_json(a, b, "--dequant", &rc);
    ck_assert_int_eq(rc, 1);
    const cJSON *d = difference(j, "model.layers.0.mlp.up_proj.weight");
    ck_assert(d);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "differing")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(d, "first_index")->valueint, 21);
    cJSON_Delete(j);
    ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q '%s' '%s/x'", a, dir), 3);
    tu_tmpdir_free(dir);
}
END_TEST

/* A NaN E8M0 scale of an MXFP4 expert is bad input (exit 3), named. */
START_TEST(test_dequant_nan_fp4_scale_is_bad_input)
{
    char *err = NULL;
    int rc = tu_run_fmt(&err, "diff -q --dequant " RELEASES "deepseek-v4 " RELEASES
                              "defect-deepseek-v4-nan-e8m0");
    ck_assert_int_eq(rc, 3);
    ck_assert_msg(strstr(err, "layers.0.ffn.experts.1.w2.scale") && strstr(err, "NaN"), "%s", err);
    free(err);
}
END_TEST

/* A gpt-oss-like MXFP4 expert tensor (unpacked transposed, [E, cols, rows])
 * larger than a band, whose bands start inside a group of 32 (96 rows: a
 * band of 32768 values is 341 unpacked rows) and cross experts: against its
 * f32 export it is identical at any -j, and a copy with codes changed in
 * every band gives the same report at any -j, each difference where the
 * reference over the whole export puts it. */
START_TEST(test_dequant_transposed_fp4_in_bands_is_the_same_for_any_thread_count)
{
    enum { E = 3, ROWS = 96, G = 40 };
    uint64_t bshape[4] = { E, ROWS, G, 16 }, sshape[3] = { E, ROWS, G };
    size_t nb = E * ROWS * G * 16, ns = E * ROWS * G;
    unsigned char *blocks = malloc(nb), *changed = malloc(nb), *scales = malloc(ns);
    for (size_t k = 0; k < nb; k++)
        blocks[k] = (unsigned char)next_u32();
    for (size_t k = 0; k < ns; k++)
        scales[k] = (unsigned char)(120 + next_u32() % 10);
    memcpy(changed, blocks, nb);
    for (size_t k = 5; k < nb; k += 4099)
        changed[k] ^= 0x30; /* the high nibble: an odd column */
    char *dir = tu_tmpdir(), pa[512], pb[512], px[512];
    const char *paths[2] = { pa, pb };
    snprintf(pa, sizeof pa, "%s/a", dir);
    snprintf(pb, sizeof pb, "%s/b", dir);
    snprintf(px, sizeof px, "%s/x", dir);
    for (int side = 0; side < 2; side++) {
        ck_assert(mkdir(paths[side], 0755) == 0);
        char path[600];
        snprintf(path, sizeof path, "%s/model.safetensors", paths[side]);
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_writer *w;
        ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
        ck_assert(fp8_writer_add_tensor(ctx, w, "model.layers.0.mlp.experts.down_proj_blocks",
                                        FP8_DTYPE_U8, 4, bshape) == FP8_OK);
        ck_assert(fp8_writer_add_tensor(ctx, w, "model.layers.0.mlp.experts.down_proj_scales",
                                        FP8_DTYPE_U8, 3, sshape) == FP8_OK);
        ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
        ck_assert(fp8_writer_write(ctx, w, side ? changed : blocks, nb) == FP8_OK);
        ck_assert(fp8_writer_write(ctx, w, scales, ns) == FP8_OK);
        ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
        fp8_writer_free(w);
        fp8_ctx_free(ctx);
    }
    ck_assert_int_eq(tu_run_fmt(NULL, "dequantize-for-export -q --dtype f32 '%s' '%s'", pa, px),
                     0);
    int rc;
    const char *threads[] = { "--dequant -j 1", "--dequant -j 3", "--dequant -j 64" };
    char *one = NULL;
    for (int k = 0; k < 3; k++) {
        char *same = diff_text(pa, px, threads[k], &rc);
        ck_assert_msg(rc == 0, "%s: %s", threads[k], same);
        free(same);
        char *other = diff_text(pb, px, threads[k], &rc);
        ck_assert_int_eq(rc, 1);
        if (!one)
            one = other;
        else {
            ck_assert_msg(strcmp(one, other) == 0, "%s:\n%s\n-j 1:\n%s", threads[k], other, one);
            free(other);
        }
    }
    /* the changes: byte k is expert x, row r, columns 2c and 2c + 1; the high
     * nibble is column 2c + 1, at unpacked (x, 2c + 1, r) */
    uint64_t count = 0, first = UINT64_MAX;
    for (size_t k = 5; k < nb; k += 4099) {
        uint64_t x = k / (ROWS * G * 16), r = k / (G * 16) % ROWS, c = 2 * (k % (G * 16)) + 1;
        uint64_t flat = (x * G * 32 + c) * ROWS + r;
        count++;
        first = flat < first ? flat : first;
    }
    cJSON *j = cJSON_Parse(one);
    const cJSON *d = difference(j, "model.layers.0.mlp.experts.down_proj");
    ck_assert(d);
    ck_assert_str_eq(cJSON_GetObjectItem(d, "compared")->valuestring, "F32");
    /* code c against c ^ 3: never the same value */
    ck_assert_double_eq(cJSON_GetObjectItem(d, "differing")->valuedouble, (double)count);
    ck_assert_double_eq(cJSON_GetObjectItem(d, "first_index")->valuedouble, (double)first);
    cJSON_Delete(j);
    free(one);
    free(blocks);
    free(changed);
    free(scales);
    tu_tmpdir_free(dir);
}
END_TEST

/* Values held as fp32, or as their BF16 or F16 codes, compared in BF16 or
 * F16: the fast statistics are the reference's, ULPs of that dtype. */
START_TEST(test_fast_values_in_bf16_and_f16_equal_reference)
{
    static const fp8_dtype dts[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16 };
    for (int t = 0; t < 2; t++) {
        uint64_t n = 3 * 1024 + 517;
        uint16_t *ca = malloc(n * 2), *cb = malloc(n * 2);
        float *a = malloc(n * 4), *b = malloc(n * 4);
        fill(dts[t], ca, n);
        for (uint64_t i = 0; i < n; i++) {
            uint32_t r = next_u32() % 4;
            cb[i] = r == 0 ? (uint16_t)(ca[i] + 1 + next_u32() % 3)
                    : r == 1 ? (uint16_t)(ca[i] ^ 0x8000) : ca[i];
        }
        diff_to_f32_ref(dts[t], ca, n, a);
        diff_to_f32_ref(dts[t], cb, n, b);
        diff_stats ref = DIFF_STATS_INIT, fast = DIFF_STATS_INIT, codes = DIFF_STATS_INIT;
        diff_values_ref(dts[t], a, b, n, 0, &ref);
        diff_values(dts[t], a, b, n, 0, &fast);
        expect_same_stats(&ref, &fast, dts[t] == FP8_DTYPE_BF16 ? "bf16 values" : "f16 values");
        fp8_quality q = { 0, 0, 0, 0 };
        diff_quality_values_ref(a, b, n, &q);
        expect_same_quality(&q, &fast.quality, "bf16 or f16 values");
        /* each side as stored (diff --dequant's band: one side dequantized
         * to fp32, the other its BF16 or F16 codes), read a block at a time */
        for (int side = 0; side < 3; side++) {
            diff_stats st = DIFF_STATS_INIT;
            diff_values_stored(dts[t], side == 1 ? FP8_DTYPE_F32 : dts[t], side == 1 ? (void *)a : ca,
                               side == 2 ? FP8_DTYPE_F32 : dts[t], side == 2 ? (void *)b : cb, n, 0,
                               &st);
            expect_same_stats(&ref, &st, "values as stored");
            expect_same_quality(&q, &st.quality, "values as stored");
        }
        ck_assert(ref.differing > 0);
        /* the ulps of the codes themselves */
        diff_bytes_ref(dts[t], ca, cb, n, 0, &codes);
        ck_assert_uint_eq(ref.max_ulp, codes.max_ulp);
        free(ca);
        free(cb);
        free(a);
        free(b);
    }
}
END_TEST

/* Each number within 1e-9 of numpy's (testdata/gen_quality.py, float64). */
static void expect_numbers(const cJSON *got, const cJSON *want, const char *what)
{
    static const char *const keys[] = { "rel_error", "cosine", "snr_db", "elements" };
    ck_assert_msg(got && cJSON_IsObject(got), "%s: no quality", what);
    for (int k = 0; k < 4; k++) {
        double g = cJSON_GetObjectItem(got, keys[k])->valuedouble;
        double w = cJSON_GetObjectItem(want, keys[k])->valuedouble;
        ck_assert_msg(fabs(g - w) <= 1e-9 * fabs(w), "%s: %s %.17g, numpy %.17g", what, keys[k],
                      g, w);
    }
}

START_TEST(test_quality_numbers_equal_numpy)
{
    char *text = tu_slurp("testdata/quality/expected.json", NULL);
    cJSON *want = cJSON_Parse(text);
    ck_assert(want);
    int rc;
    cJSON *j = diff_json("testdata/quality/a.safetensors", "testdata/quality/b.safetensors", "",
                         &rc);
    ck_assert_int_eq(rc, 1);
    expect_numbers(cJSON_GetObjectItem(j, "quality"), cJSON_GetObjectItem(want, "model"), "model");
    const cJSON *x, *tensors = cJSON_GetObjectItem(want, "tensors");
    int n = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "differences")) {
        const char *name = cJSON_GetObjectItem(x, "name")->valuestring;
        expect_numbers(cJSON_GetObjectItem(x, "quality"), cJSON_GetObjectItem(tensors, name), name);
        n++;
    }
    ck_assert_int_eq(n, cJSON_GetArraySize(tensors)); /* w_same: equal bytes, no numbers */
    cJSON_Delete(j);
    cJSON_Delete(want);
    free(text);
    /* the text report: each tensor's and the model's */
    char *out;
    ck_assert_int_eq(tu_run("diff testdata/quality/a.safetensors testdata/quality/b.safetensors",
                            &out, NULL), 1);
    ck_assert_msg(strstr(out, "w_f32: 1031 of 1031 elements, first at 0, max |a - b| "), "%s", out);
    ck_assert_msg(strstr(out, "rel error 0.04868, cosine 0.998815, SNR 26.25 dB\n"), "%s", out);
    ck_assert_msg(strstr(out, "quality: 6375 elements compared by value, rel error 0.05576, "
                              "cosine 0.998447, SNR 25.07 dB\n"), "%s", out);
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("diff");
    TCase *tc = tcase_create("diff");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_one_file_and_four_shards_are_identical);
    tcase_add_test(tc, test_one_bit_change_is_found_and_named);
    tcase_add_test(tc, test_missing_tensors_and_mismatches_are_reported);
    tcase_add_test(tc, test_shape_mismatch_is_reported);
    tcase_add_test(tc, test_dequant_compares_fp8_by_value);
    tcase_add_test(tc, test_scalar_hash_is_of_the_empty_shape);
    tcase_add_test(tc, test_unreadable_or_malformed_input_exits_4_or_3);
    tcase_add_test(tc, test_fast_stats_equal_reference_on_every_dtype);
    tcase_add_test(tc, test_fast_stats_equal_reference_on_every_pair_of_byte_codes);
    tcase_add_test(tc, test_tricky_pairs_give_the_documented_statistics);
    tcase_add_test(tc, test_first_difference_at_first_or_last_element_of_any_length);
    tcase_add_test(tc, test_fast_values_equal_reference);
    tcase_add_test(tc, test_fast_conversion_to_f32_keeps_every_bf16_and_f16_code);
    tcase_add_test(tc, test_report_is_the_same_for_any_thread_count);
    tcase_add_test(tc, test_dequant_report_is_the_same_for_any_thread_count);
    tcase_add_test(tc, test_dequant_nvfp4_modelopt_and_compressed_tensors_twins_are_identical);
    tcase_add_test(tc, test_dequant_finds_one_changed_e2m1_code_and_names_its_element);
    tcase_add_test(tc, test_dequant_fp4_checkpoint_equals_its_export_in_every_dtype);
    tcase_add_test(tc, test_dequant_fp8_against_bf16_compares_in_bf16);
    tcase_add_test(tc, test_dequant_fp8_past_bf16_is_its_infinity);
    tcase_add_test(tc, test_dequant_nan_fp4_scale_is_bad_input);
    tcase_add_test(tc, test_dequant_compares_the_old_bias_mxfp4_the_export_refuses);
    tcase_add_test(tc, test_dequant_transposed_fp4_in_bands_is_the_same_for_any_thread_count);
    tcase_add_test(tc, test_fast_values_in_bf16_and_f16_equal_reference);
    tcase_add_test(tc, test_quality_numbers_equal_numpy);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
