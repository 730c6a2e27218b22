/*
 * check_diff.c - fp8conv diff and inspect --hash: independent of sharding,
 * finds and names a one-bit change, reports each kind of difference, and
 * --dequant compares FP8 weights by value.
 */
#include "golden.h"

#include <xxhash.h>

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
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
