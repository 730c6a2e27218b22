/*
 * check_checkpoint.c - checkpoint directories: the index both ways, shards
 * without an index, single files, config.json.
 */
#include "testutil.h"

static fp8_checkpoint *open_ck(const char *path, fp8_status expect, const char *msg_part)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck = NULL;
    fp8_status st = fp8_checkpoint_open(ctx, path, &ck);
    ck_assert_msg(st == expect, "%s: status %d: %s", path, st, fp8_ctx_message(ctx));
    if (msg_part)
        ck_assert_msg(strstr(fp8_ctx_message(ctx), msg_part), "%s", fp8_ctx_message(ctx));
    if (st)
        ck_assert_ptr_null(ck);
    fp8_ctx_free(ctx);
    return ck;
}

START_TEST(test_indexed_directory)
{
    fp8_checkpoint *ck = open_ck("testdata/llama-tiny", FP8_OK, NULL);
    ck_assert(fp8_checkpoint_is_directory(ck) && fp8_checkpoint_has_index(ck));
    ck_assert_uint_eq(fp8_checkpoint_shard_count(ck), 2);
    ck_assert_str_eq(fp8_checkpoint_shard_name(ck, 0), "model-00001-of-00002.safetensors");
    ck_assert_uint_eq(fp8_checkpoint_tensor_count(ck), 21);
    uint64_t total = 0, declared;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++)
        total += fp8_tensor_nbytes(fp8_checkpoint_tensor(ck, i, NULL));
    ck_assert(fp8_checkpoint_index_total_size(ck, &declared));
    ck_assert_uint_eq(total, declared);
    size_t shard;
    ck_assert_ptr_nonnull(fp8_checkpoint_find(ck, "lm_head.weight", &shard));
    ck_assert_str_eq(fp8_checkpoint_shard_name(ck, shard), "model-00002-of-00002.safetensors");
    ck_assert_ptr_null(fp8_checkpoint_find(ck, "nope", NULL));
    ck_assert(fp8_checkpoint_has_config(ck) && !fp8_checkpoint_has_quant_config(ck));
    fp8_checkpoint_close(ck);
}
END_TEST

START_TEST(test_single_file_and_unindexed_directory_agree)
{
    fp8_checkpoint *dir = open_ck("testdata/deepseek-moe-tiny", FP8_OK, NULL);
    fp8_checkpoint *file = open_ck("testdata/deepseek-moe-tiny/model.safetensors", FP8_OK, NULL);
    ck_assert(!fp8_checkpoint_has_index(dir) && fp8_checkpoint_is_directory(dir));
    ck_assert(!fp8_checkpoint_is_directory(file) && !fp8_checkpoint_has_config(file));
    ck_assert_uint_eq(fp8_checkpoint_tensor_count(dir), fp8_checkpoint_tensor_count(file));
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(dir); i++)
        ck_assert_str_eq(fp8_checkpoint_tensor(dir, i, NULL)->name,
                         fp8_checkpoint_tensor(file, i, NULL)->name);
    fp8_checkpoint_close(dir);
    fp8_checkpoint_close(file);
}
END_TEST

START_TEST(test_resharded_copy_has_same_tensors)
{
    /* the two llama shards, copied into a directory without an index */
    char *dir = tu_tmpdir(), cmd[512];
    snprintf(cmd, sizeof cmd, "cp testdata/llama-tiny/*.safetensors %s/", dir);
    ck_assert_int_eq(system(cmd), 0);
    fp8_checkpoint *a = open_ck("testdata/llama-tiny", FP8_OK, NULL);
    fp8_checkpoint *b = open_ck(dir, FP8_OK, NULL);
    ck_assert(!fp8_checkpoint_has_index(b));
    ck_assert_uint_eq(fp8_checkpoint_tensor_count(a), fp8_checkpoint_tensor_count(b));
    fp8_checkpoint_close(a);
    fp8_checkpoint_close(b);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_malformed_directories)
{
    open_ck("testdata/malformed/dir_index_missing_tensor", FP8_ERR_BAD_INPUT, "does not hold it");
    open_ck("testdata/malformed/dir_unmapped_tensor", FP8_ERR_BAD_INPUT, "but not in");
    open_ck("testdata/malformed/dir_index_missing_shard", FP8_ERR_BAD_INPUT, "does not exist");
    open_ck("testdata/malformed/dir_duplicate_across_shards", FP8_ERR_BAD_INPUT, "is in both");
    open_ck("testdata/malformed/dir_empty", FP8_ERR_BAD_INPUT, "no *.safetensors");
    open_ck("/nonexistent-dir", FP8_ERR_IO, "cannot open");
}
END_TEST

START_TEST(test_config_with_bad_json_is_bad_input)
{
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "cp testdata/deepseek-moe-tiny/model.safetensors %s/", dir);
    ck_assert_int_eq(system(path), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    tu_spit(path, "{\"a\": ", 6);
    open_ck(dir, FP8_ERR_BAD_INPUT, "config.json: not valid JSON");
    tu_spit(path, "{\"quantization_config\": null}", 29);
    fp8_checkpoint *ck = open_ck(dir, FP8_OK, NULL);
    ck_assert(!fp8_checkpoint_has_quant_config(ck));
    fp8_checkpoint_close(ck);
    tu_tmpdir_free(dir);
}
END_TEST

/* fuzz_dir found it: an index whose weight_map is empty names no shard, and
 * opening sorted the NULL list of shard names (qsort(NULL, 0): UBSan). */
START_TEST(test_index_mapping_no_tensor_opens_empty)
{
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    tu_spit(path, "{\"metadata\":{},\"weight_map\":{}}", 31);
    fp8_checkpoint *ck = open_ck(dir, FP8_OK, NULL);
    ck_assert(fp8_checkpoint_has_index(ck));
    ck_assert_uint_eq(fp8_checkpoint_shard_count(ck), 0);
    ck_assert_uint_eq(fp8_checkpoint_tensor_count(ck), 0);
    fp8_checkpoint_close(ck);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_device_resolution_never_fails_for_cpu_or_auto)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_device d;
    ck_assert_int_eq(fp8_device_resolve(ctx, FP8_DEVICE_CPU, &d), FP8_OK);
    ck_assert_int_eq(d, FP8_DEVICE_CPU);
    ck_assert_int_eq(fp8_device_resolve(ctx, FP8_DEVICE_AUTO, &d), FP8_OK);
    fp8_gpu_info gpus[4];
    int n = -1;
    ck_assert_int_eq(fp8_cuda_devices(ctx, gpus, 4, &n), FP8_OK);
    ck_assert_int_ge(n, 0);
    /* cuda: available exactly when auto picked it */
    fp8_status st = fp8_device_resolve(ctx, FP8_DEVICE_CUDA, &d);
    ck_assert_int_eq(st, n > 0 && fp8_cuda_compiled() ? FP8_OK : FP8_ERR_DEVICE);
    fp8_ctx_free(ctx);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_indexed_directory);
    tcase_add_test(tc, test_single_file_and_unindexed_directory_agree);
    tcase_add_test(tc, test_resharded_copy_has_same_tensors);
    tcase_add_test(tc, test_malformed_directories);
    tcase_add_test(tc, test_config_with_bad_json_is_bad_input);
    tcase_add_test(tc, test_index_mapping_no_tensor_opens_empty);
    tcase_add_test(tc, test_device_resolution_never_fails_for_cpu_or_auto);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
