/*
 * check_checkpoint.c - checkpoint directories: the index both ways, shards
 * without an index, single files, config.json.
 */
#include "testutil.h"

#include <sys/resource.h>
#include <zstd.h>

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

/* Mistral's native format (params.json, no config.json) is refused when
 * opened, naming the format; with a config.json beside it the directory is
 * an HF-format checkpoint and opens (issue 44). */
START_TEST(test_mistral_native_is_refused_by_name)
{
    char *dir = tu_tmpdir(), path[512];
    snprintf(path, sizeof path, "cp testdata/deepseek-moe-tiny/model.safetensors %s/", dir);
    ck_assert_int_eq(system(path), 0);
    snprintf(path, sizeof path, "%s/params.json", dir);
    tu_spit(path, "{\"dim\": 64}", 11);
    open_ck(dir, FP8_ERR_BAD_INPUT, "this is Mistral's native format");
    snprintf(path, sizeof path, "%s/config.json", dir);
    tu_spit(path, "{}", 2);
    fp8_checkpoint_close(open_ck(dir, FP8_OK, NULL));
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

/* ---------------------------------------------------------------- zstd shards */

/* A copy of checkpoint directory `from` in `to` with every shard compressed
 * (NAME.safetensors.zst, the index naming them); returns the bytes of the
 * shards' content. */
static uint64_t compressed_copy(const char *from, const char *to)
{
    char *cmd;
    ck_assert(asprintf(&cmd, "cp -r %s %s && sed -i 's/\\.safetensors\"/.safetensors.zst\"/g' "
                             "%s/model.safetensors.index.json",
                       from, to, to) > 0);
    ck_assert(system(cmd) == 0);
    free(cmd);
    fp8_checkpoint *ck = open_ck(from, FP8_OK, NULL);
    uint64_t content = 0;
    for (size_t s = 0; s < fp8_checkpoint_shard_count(ck); s++) {
        char plain[512], zst[600];
        snprintf(plain, sizeof plain, "%s/%s", to, fp8_checkpoint_shard_name(ck, s));
        snprintf(zst, sizeof zst, "%s.zst", plain);
        size_t n;
        char *raw = tu_slurp(plain, &n);
        size_t cap = ZSTD_compressBound(n);
        char *z = malloc(cap);
        size_t zn = ZSTD_compress(z, cap, raw, n, 3);
        ck_assert(!ZSTD_isError(zn));
        tu_spit(zst, z, zn);
        ck_assert(unlink(plain) == 0);
        content += n;
        free(raw);
        free(z);
    }
    fp8_checkpoint_close(ck);
    return content;
}

/* What one command decompressed, against the shards' content. */
static void assert_read_once(const char *what, uint64_t before, uint64_t content, double bound)
{
    uint64_t used = fp8_zstd_bytes_decompressed() - before;
    ck_assert_msg(used >= content && (double)used <= bound * (double)content,
                  "%s decompressed %llu bytes of %llu-byte shards (%.2fx)", what,
                  (unsigned long long)used, (unsigned long long)content,
                  (double)used / (double)content);
}

/* Issue 11 (13): every command read a compressed shard's tensors in name
 * order from several threads, and each backward read restarted the stream
 * (26x the data for inspect --hash).  Each now reads a shard once, in file
 * order (deepseek-fp8-tiny's shards put the F32 scales first, as the
 * reference writer does, so name order is not file order). */
START_TEST(test_zstd_shard_read_once_in_file_order)
{
    char *dir = tu_tmpdir(), fp8[512], bf16[512], out[512];
    snprintf(fp8, sizeof fp8, "%s/fp8", dir);
    snprintf(bf16, sizeof bf16, "%s/bf16", dir);
    uint64_t fp8_size = compressed_copy("testdata/deepseek-fp8-tiny", fp8);
    uint64_t bf16_size = compressed_copy("testdata/llama-tiny", bf16);
    fp8_ctx *ctx = fp8_ctx_create();

    uint64_t before = fp8_zstd_bytes_decompressed();
    fp8_checkpoint *ck = open_ck(fp8, FP8_OK, NULL);
    fp8_hash_hex *hashes = calloc(fp8_checkpoint_tensor_count(ck), sizeof *hashes), digest;
    ck_assert_int_eq(fp8_checkpoint_hash(ctx, ck, 2, hashes, digest), FP8_OK);
    fp8_checkpoint_close(ck);
    free(hashes);
    assert_read_once("hash", before, fp8_size, 1.1);

    before = fp8_zstd_bytes_decompressed();
    fp8_diff *d = NULL;
    fp8_diff_options dopts = { .threads = 2 };
    ck_assert_int_eq(fp8_diff_run(ctx, fp8, "testdata/deepseek-fp8-tiny", &dopts, &d), FP8_OK);
    ck_assert(fp8_diff_identical(d));
    fp8_diff_free(d);
    assert_read_once("diff", before, fp8_size, 1.1);

    /* by value: the hashes, then the values (two runs, each in file order) */
    before = fp8_zstd_bytes_decompressed();
    dopts.dequant = true;
    ck_assert_int_eq(fp8_diff_run(ctx, fp8, "testdata/deepseek-fp8-tiny", &dopts, &d), FP8_OK);
    fp8_diff_free(d);
    assert_read_once("diff --dequant", before, fp8_size, 2.2);

    before = fp8_zstd_bytes_decompressed();
    fp8_verify *v = NULL;
    fp8_verify_options vopts = FP8_VERIFY_OPTIONS_INIT;
    vopts.threads = 2;
    ck_assert_int_eq(fp8_verify_run(ctx, fp8, &vopts, &v), FP8_OK);
    fp8_verify_free(v);
    assert_read_once("verify", before, fp8_size, 1.1);

    before = fp8_zstd_bytes_decompressed();
    fp8_dequant_options qo = FP8_DEQUANT_OPTIONS_INIT;
    qo.threads = 2;
    qo.no_sync = true;
    snprintf(out, sizeof out, "%s/dq", dir);
    ck_assert_int_eq(fp8_dequantize(ctx, fp8, out, &qo, NULL), FP8_OK);
    assert_read_once("dequantize-for-export", before, fp8_size, 1.1);

    before = fp8_zstd_bytes_decompressed();
    fp8_quant_options o = FP8_QUANT_OPTIONS_INIT;
    o.threads = 2;
    o.no_sync = true;
    fp8_quant_plan *plan = NULL;
    snprintf(out, sizeof out, "%s/q", dir);
    ck_assert_int_eq(fp8_quant_plan_create(ctx, bf16, &o, &plan), FP8_OK);
    ck_assert_msg(fp8_quant_plan_run(ctx, plan, out) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_quant_plan_free(plan);
    assert_read_once("quantize", before, bf16_size, 1.1);

    fp8_ctx_free(ctx);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- descriptors */

/* `n` one-tensor shards (no index) in `dir`. */
static void many_shards(const char *dir, int n, unsigned seed)
{
    fp8_ctx *ctx = fp8_ctx_create();
    ck_assert(mkdir(dir, 0755) == 0);
    for (int i = 0; i < n; i++) {
        char path[512], name[64];
        snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, i + 1, n);
        snprintf(name, sizeof name, "layers.%d.weight", i);
        unsigned char data[64];
        tu_pattern(data, sizeof data, seed + (unsigned)i);
        uint64_t shape[2] = { 8, 4 };
        fp8_writer *w;
        ck_assert(fp8_writer_create(ctx, path, &w) == FP8_OK);
        fp8_writer_set_durable(w, false);
        ck_assert(fp8_writer_add_tensor(ctx, w, name, FP8_DTYPE_BF16, 2, shape) == FP8_OK);
        ck_assert(fp8_writer_begin(ctx, w) == FP8_OK);
        ck_assert(fp8_writer_write(ctx, w, data, sizeof data) == FP8_OK);
        ck_assert(fp8_writer_commit(ctx, w) == FP8_OK);
        fp8_writer_free(w);
    }
    fp8_ctx_free(ctx);
}

/* Issue 11 (14a): every shard kept its descriptor open, so a 600-shard diff
 * (both checkpoints open) failed under ulimit -n 1024.  Descriptors now come
 * from a pool bounded under RLIMIT_NOFILE; a shard replaced while its
 * descriptor was closed is still found out. */
START_TEST(test_many_shards_open_under_low_fd_limit)
{
    char *dir = tu_tmpdir(), a[512], b[512];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    many_shards(a, 150, 1);
    many_shards(b, 150, 1);
    struct rlimit rl = { 64, 64 };
    ck_assert(setrlimit(RLIMIT_NOFILE, &rl) == 0);

    fp8_ctx *ctx = fp8_ctx_create();
    fp8_diff *d = NULL;
    fp8_diff_options dopts = { .threads = 2 };
    ck_assert_msg(fp8_diff_run(ctx, a, b, &dopts, &d) == FP8_OK, "%s", fp8_ctx_message(ctx));
    ck_assert(fp8_diff_identical(d));
    ck_assert_uint_eq(fp8_diff_count(d), 150);
    fp8_diff_free(d);

    fp8_checkpoint *ck = open_ck(a, FP8_OK, NULL);
    fp8_hash_hex *hashes = calloc(150, sizeof *hashes), digest;
    ck_assert_int_eq(fp8_checkpoint_hash(ctx, ck, 2, hashes, digest), FP8_OK);
    /* the first shard's descriptor went back to the pool long ago: replace it */
    char first[600], cmd[4000];
    snprintf(first, sizeof first, "%s/model-00001-of-00150.safetensors", a);
    snprintf(cmd, sizeof cmd, "cp %s %s.new && touch -d '2001-01-01' %s.new && mv %s.new %s",
             first, first, first, first, first);
    ck_assert(system(cmd) == 0);
    ck_assert_int_eq(fp8_checkpoint_hash(ctx, ck, 2, hashes, digest), FP8_ERR_IO);
    ck_assert_msg(strstr(fp8_ctx_message(ctx), "changed since its header was read"), "%s",
                  fp8_ctx_message(ctx));
    fp8_checkpoint_close(ck);
    free(hashes);
    fp8_ctx_free(ctx);
    tu_tmpdir_free(dir);
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
    tcase_add_test(tc, test_mistral_native_is_refused_by_name);
    tcase_add_test(tc, test_index_mapping_no_tensor_opens_empty);
    tcase_add_test(tc, test_device_resolution_never_fails_for_cpu_or_auto);
    tcase_add_test(tc, test_zstd_shard_read_once_in_file_order);
    tcase_add_test(tc, test_many_shards_open_under_low_fd_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
