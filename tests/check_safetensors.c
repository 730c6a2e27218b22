/*
 * check_safetensors.c - the container: reader rules, accepted edge cases,
 * the writer against the reference package's goldens, zstd input, atomicity.
 * (Every malformed fixture is run through the binary in check_cli.c.)
 */
#include "testutil.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <zstd.h>

static fp8_file *open_ok(const char *path)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f = NULL;
    fp8_status st = fp8_file_open(ctx, path, &f);
    ck_assert_msg(st == FP8_OK, "%s: %s", path, fp8_ctx_message(ctx));
    fp8_ctx_free(ctx);
    return f;
}

START_TEST(test_accept_zero_sized_tensors)
{
    fp8_file *f = open_ok("testdata/accepted/zero_sized_tensor.safetensors");
    int empty = 0;
    for (size_t i = 0; i < fp8_file_tensor_count(f); i++) {
        const fp8_tensor_info *t = fp8_file_tensor(f, i);
        if (t->elements == 0) {
            ck_assert_uint_eq(t->begin, t->end);
            empty++;
        }
    }
    ck_assert_int_eq(empty, 2);
    fp8_file_close(f);
}
END_TEST

START_TEST(test_accept_scalar_0d)
{
    fp8_file *f = open_ok("testdata/accepted/scalar_0d.safetensors");
    const fp8_tensor_info *t = fp8_file_tensor(f, 0);
    ck_assert_int_eq(t->rank, 0);
    ck_assert_uint_eq(t->elements, 1);
    ck_assert_uint_eq(fp8_tensor_nbytes(t), 4);
    fp8_file_close(f);
}
END_TEST

START_TEST(test_accept_metadata_null_and_absent)
{
    fp8_file *f = open_ok("testdata/accepted/metadata_null.safetensors");
    ck_assert(!fp8_file_has_metadata(f));
    fp8_file_close(f);
    f = open_ok("testdata/accepted/metadata_absent.safetensors");
    ck_assert(!fp8_file_has_metadata(f));
    fp8_file_close(f);
    f = open_ok("testdata/llama-tiny/model-00001-of-00002.safetensors");
    ck_assert_str_eq(fp8_file_metadata_get(f, "format"), "pt");
    fp8_file_close(f);
}
END_TEST

START_TEST(test_accept_leading_whitespace_and_no_padding)
{
    fp8_file_close(open_ok("testdata/accepted/leading_whitespace.safetensors"));
    fp8_file *f = open_ok("testdata/accepted/no_padding.safetensors");
    ck_assert_uint_ne(fp8_file_header_size(f) % 8, 0);
    fp8_file_close(f);
}
END_TEST

START_TEST(test_accept_every_dtype)
{
    fp8_file *f = open_ok("testdata/accepted/every_dtype.safetensors");
    bool seen[FP8_DTYPE_COUNT] = { 0 };
    for (size_t i = 0; i < fp8_file_tensor_count(f); i++)
        seen[fp8_file_tensor(f, i)->dtype] = true;
    for (int d = 0; d < FP8_DTYPE_COUNT; d++)
        ck_assert_msg(seen[d], "dtype %s missing", fp8_dtype_name((fp8_dtype)d));
    fp8_file_close(f);
}
END_TEST

START_TEST(test_accept_unicode_names_and_unknown_fields)
{
    fp8_file *f = open_ok("testdata/accepted/unicode_names.safetensors");
    bool found = false;
    for (size_t i = 0; i < fp8_file_tensor_count(f); i++)
        found |= strstr(fp8_file_tensor(f, i)->name, "\xc3\xa9") != NULL; /* é, from \u00e9 */
    ck_assert(found);
    fp8_file_close(f);
    fp8_file_close(open_ok("testdata/accepted/unknown_entry_field.safetensors"));
    fp8_file_close(open_ok("testdata/accepted/empty_no_tensors.safetensors"));
}
END_TEST

START_TEST(test_dtype_names_round_trip)
{
    for (int d = 0; d < FP8_DTYPE_COUNT; d++) {
        fp8_dtype back;
        ck_assert(fp8_dtype_from_name(fp8_dtype_name((fp8_dtype)d), &back));
        ck_assert_int_eq(back, d);
    }
    fp8_dtype x;
    ck_assert(!fp8_dtype_from_name("bf16", &x));
    ck_assert(!fp8_dtype_from_name("F8_E4M3FN", &x));
    ck_assert_uint_eq(fp8_dtype_bits(FP8_DTYPE_F4), 4);
    ck_assert_uint_eq(fp8_dtype_bits(FP8_DTYPE_F6_E3M2), 6);
    ck_assert_uint_eq(fp8_dtype_bits(FP8_DTYPE_C64), 64);
}
END_TEST

START_TEST(test_header_only_scan_reads_no_tensor_data)
{
    fp8_file *f = open_ok("testdata/llama-tiny/model-00001-of-00002.safetensors");
    ck_assert_uint_gt(fp8_file_data_size(f), 1000000);
    ck_assert_uint_eq(fp8_file_bytes_read(f), 8 + fp8_file_header_size(f));
    fp8_file_close(f);
}
END_TEST

START_TEST(test_read_tensor_range_matches_file_bytes)
{
    const char *path = "testdata/llama-tiny/model-00001-of-00002.safetensors";
    size_t len;
    unsigned char *raw = (unsigned char *)tu_slurp(path, &len);
    fp8_file *f = open_ok(path);
    fp8_ctx *ctx = fp8_ctx_create();
    const fp8_tensor_info *t = fp8_file_find(f, "model.layers.0.mlp.up_proj.weight");
    ck_assert_ptr_nonnull(t);
    unsigned char buf[1000];
    ck_assert_int_eq(fp8_file_read(ctx, f, t, 4096, buf, sizeof buf), FP8_OK);
    ck_assert_mem_eq(buf, raw + 8 + fp8_file_header_size(f) + t->begin + 4096, sizeof buf);
    /* reading one slice never loads the shard */
    ck_assert_uint_eq(fp8_file_bytes_read(f), 8 + fp8_file_header_size(f) + sizeof buf);
    ck_assert_int_eq(fp8_file_read(ctx, f, t, fp8_tensor_nbytes(t) - 10, buf, 11),
                     FP8_ERR_USAGE);
    fp8_ctx_free(ctx);
    fp8_file_close(f);
    free(raw);
}
END_TEST

/* ---------------------------------------------------------------- writer */

/* Writes with our writer the tensors of one golden case, declared in reverse
 * of the case's (scrambled) order, and returns the path of the result. */
static void write_case(const cJSON *c, const char *golden, const char *out)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *g = open_ok(golden); /* exact u64 shapes (cJSON would round them) */
    fp8_writer *w;
    ck_assert_int_eq(fp8_writer_create(ctx, out, &w), FP8_OK);
    const cJSON *tensors = cJSON_GetObjectItem(c, "tensors");
    for (int i = cJSON_GetArraySize(tensors) - 1; i >= 0; i--) {
        const cJSON *tj = cJSON_GetArrayItem(tensors, i);
        const char *name = cJSON_GetObjectItem(tj, "name")->valuestring;
        const fp8_tensor_info *t = fp8_file_find(g, name);
        ck_assert_msg(t != NULL, "golden %s lacks %s", golden, name);
        fp8_dtype dtype;
        ck_assert(fp8_dtype_from_name(cJSON_GetObjectItem(tj, "dtype")->valuestring, &dtype));
        ck_assert_int_eq(dtype, t->dtype);
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(tj, "shape")), t->rank);
        ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, name, dtype, t->rank, t->shape), FP8_OK);
    }
    ck_assert_int_eq(fp8_writer_begin(ctx, w), FP8_OK);
    for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
        const fp8_tensor_info *t = fp8_writer_tensor(w, i);
        unsigned seed = 0;
        for (const cJSON *tj = tensors->child; tj; tj = tj->next)
            if (strcmp(cJSON_GetObjectItem(tj, "name")->valuestring, t->name) == 0)
                seed = (unsigned)cJSON_GetObjectItem(tj, "seed")->valueint;
        size_t n = (size_t)fp8_tensor_nbytes(t);
        unsigned char *data = malloc(n ? n : 1);
        tu_pattern(data, n, seed);
        ck_assert_int_eq(fp8_writer_write(ctx, w, data, n), FP8_OK);
        free(data);
    }
    ck_assert_msg(fp8_writer_commit(ctx, w) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_writer_free(w);
    fp8_file_close(g);
    fp8_ctx_free(ctx);
}

START_TEST(test_writer_matches_reference_goldens)
{
    char *text = tu_slurp("testdata/golden/cases.json", NULL);
    cJSON *cases = cJSON_Parse(text);
    free(text);
    ck_assert(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) >= 10);
    char *dir = tu_tmpdir();
    int compared = 0;
    for (const cJSON *c = cases->child; c; c = c->next) {
        const char *file = cJSON_GetObjectItem(c, "file")->valuestring;
        char golden[512], out[512];
        snprintf(golden, sizeof golden, "testdata/golden/%s", file);
        snprintf(out, sizeof out, "%s/%s", dir, file);
        write_case(c, golden, out);
        size_t glen, olen;
        char *g = tu_slurp(golden, &glen), *o = tu_slurp(out, &olen);
        ck_assert_msg(glen == olen && memcmp(g, o, glen) == 0,
                      "%s: our writer's bytes differ from the reference's", file);
        free(g);
        free(o);
        compared++;
    }
    ck_assert_int_eq(compared, cJSON_GetArraySize(cases));
    tu_tmpdir_free(dir);
    cJSON_Delete(cases);
}
END_TEST

/* A writer for a fresh scratch directory's `name`; *dir and *ctx for the caller to free. */
static fp8_writer *scratch_writer(const char *name, char **dir, char *path, size_t cap,
                                  fp8_ctx **ctx)
{
    fp8_writer *w;
    *dir = tu_tmpdir();
    snprintf(path, cap, "%s/%s", *dir, name);
    *ctx = fp8_ctx_create();
    ck_assert_int_eq(fp8_writer_create(*ctx, path, &w), FP8_OK);
    return w;
}

START_TEST(test_writer_sorts_metadata_keys_and_escapes)
{
    char *dir, path[512];
    fp8_ctx *ctx;
    fp8_writer *w = scratch_writer("m.safetensors", &dir, path, sizeof path, &ctx);
    ck_assert_int_eq(fp8_writer_set_metadata(ctx, w, "zeta", "1"), FP8_OK);
    ck_assert_int_eq(fp8_writer_set_metadata(ctx, w, "alpha", "q\"\n\x01"), FP8_OK);
    uint64_t shape[1] = { 1 };
    ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, "t\\x", FP8_DTYPE_U8, 1, shape), FP8_OK);
    ck_assert_int_eq(fp8_writer_begin(ctx, w), FP8_OK);
    ck_assert_int_eq(fp8_writer_write(ctx, w, "A", 1), FP8_OK);
    ck_assert_int_eq(fp8_writer_commit(ctx, w), FP8_OK);
    fp8_writer_free(w);
    size_t len;
    char *bytes = tu_slurp(path, &len);
    const char *expect = "{\"__metadata__\":{\"alpha\":\"q\\\"\\n\\u0001\",\"format\":\"pt\","
                         "\"zeta\":\"1\"},\"t\\\\x\":{\"dtype\":\"U8\",\"shape\":[1],"
                         "\"data_offsets\":[0,1]}}";
    ck_assert_uint_eq((8 + strlen(expect) + 7) / 8 * 8 + 1, len);
    ck_assert_mem_eq(bytes + 8, expect, strlen(expect));
    /* and it reads back */
    fp8_file *f = open_ok(path);
    ck_assert_str_eq(fp8_file_metadata_get(f, "alpha"), "q\"\n\x01");
    ck_assert_ptr_nonnull(fp8_file_find(f, "t\\x"));
    fp8_file_close(f);
    free(bytes);
    fp8_ctx_free(ctx);
    tu_tmpdir_free(dir);
}
END_TEST

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.' || strstr(e->d_name, ".tmp-") != NULL;
    closedir(d);
    return n;
}

START_TEST(test_writer_without_commit_leaves_nothing)
{
    char *dir, path[512];
    fp8_ctx *ctx;
    fp8_writer *w = scratch_writer("x.safetensors", &dir, path, sizeof path, &ctx);
    uint64_t shape[1] = { 4 };
    ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, "a", FP8_DTYPE_F32, 1, shape), FP8_OK);
    ck_assert_int_eq(fp8_writer_begin(ctx, w), FP8_OK);
    ck_assert_int_eq(fp8_writer_write(ctx, w, "12345678", 8), FP8_OK);
    ck_assert_int_eq(count_entries(dir), 1); /* the temporary file, under a hidden name */
    /* too few bytes: commit refuses, and the final name never appears */
    ck_assert_int_eq(fp8_writer_commit(ctx, w), FP8_ERR_USAGE);
    ck_assert_int_ne(access(path, F_OK), 0);
    fp8_writer_free(w);
    ck_assert_int_eq(count_entries(dir), 0);
    fp8_ctx_free(ctx);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_writer_rejects_duplicate_and_bad_names)
{
    char *dir, path[512];
    fp8_ctx *ctx;
    fp8_writer *w = scratch_writer("x.safetensors", &dir, path, sizeof path, &ctx);
    uint64_t shape[1] = { 1 };
    ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, "a", FP8_DTYPE_U8, 1, shape), FP8_OK);
    ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, "a", FP8_DTYPE_U8, 1, shape), FP8_OK);
    ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, "\xff", FP8_DTYPE_U8, 1, shape), FP8_ERR_USAGE);
    ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, "__metadata__", FP8_DTYPE_U8, 1, shape),
                     FP8_ERR_USAGE);
    ck_assert_int_eq(fp8_writer_begin(ctx, w), FP8_ERR_USAGE);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "'a' added twice"));
    fp8_writer_free(w);
    ck_assert_int_eq(count_entries(dir), 0);
    fp8_ctx_free(ctx);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- zstd */

/* Compresses `src` into `dst` as zstd frames of at most `frame` bytes each,
 * optionally without declaring the content size (as a pipe would). */
static void zstd_file(const char *src, const char *dst, size_t frame, bool declare_size)
{
    size_t len;
    char *raw = tu_slurp(src, &len);
    FILE *fp = fopen(dst, "wb");
    if (frame > len)
        frame = len;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t cap = ZSTD_compressBound(frame);
    char *buf = malloc(cap);
    for (size_t off = 0; off < len; off += frame) {
        size_t n = len - off < frame ? len - off : frame;
        ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1); /* as the zstd CLI does */
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, declare_size);
        ZSTD_inBuffer in = { raw + off, n, 0 };
        ZSTD_outBuffer out = { buf, cap, 0 };
        size_t left;
        do {
            out.pos = 0;
            left = ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end);
            ck_assert(!ZSTD_isError(left));
            fwrite(buf, 1, out.pos, fp);
        } while (left);
    }
    fclose(fp);
    ZSTD_freeCCtx(cctx);
    free(buf);
    free(raw);
}

static void assert_same_tensors(const char *plain, const char *zst)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *a = open_ok(plain), *b = open_ok(zst);
    ck_assert(!fp8_file_is_compressed(a) && fp8_file_is_compressed(b));
    ck_assert_uint_eq(fp8_file_tensor_count(a), fp8_file_tensor_count(b));
    /* backwards, so the stream has to restart */
    for (size_t i = fp8_file_tensor_count(a); i-- > 0;) {
        const fp8_tensor_info *ta = fp8_file_tensor(a, i), *tb = fp8_file_tensor(b, i);
        ck_assert_str_eq(ta->name, tb->name);
        size_t n = (size_t)fp8_tensor_nbytes(ta);
        char *x = malloc(n + 1), *y = malloc(n + 1);
        ck_assert_int_eq(fp8_file_read(ctx, a, ta, 0, x, n), FP8_OK);
        ck_assert_msg(fp8_file_read(ctx, b, tb, 0, y, n) == FP8_OK, "%s", fp8_ctx_message(ctx));
        ck_assert_mem_eq(x, y, n);
        free(x);
        free(y);
    }
    fp8_file_close(a);
    fp8_file_close(b);
    fp8_ctx_free(ctx);
}

START_TEST(test_zst_input_equals_plain_input)
{
    const char *plain = "testdata/llama-tiny/model-00002-of-00002.safetensors";
    char *dir = tu_tmpdir(), zst[512];
    snprintf(zst, sizeof zst, "%s/one_frame.safetensors.zst", dir);
    zstd_file(plain, zst, SIZE_MAX / 2, true);
    assert_same_tensors(plain, zst);
    /* a declared single frame: opening reads only the header's worth */
    fp8_file *f = open_ok(zst);
    ck_assert_uint_eq(fp8_file_bytes_read(f), 8 + fp8_file_header_size(f));
    fp8_file_close(f);
    snprintf(zst, sizeof zst, "%s/no_size.safetensors.zst", dir);
    zstd_file(plain, zst, SIZE_MAX / 2, false);
    assert_same_tensors(plain, zst);
    snprintf(zst, sizeof zst, "%s/frames.safetensors.zst", dir);
    zstd_file(plain, zst, 100000, true);
    assert_same_tensors(plain, zst);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_zst_truncated_or_corrupt_is_bad_input)
{
    const char *plain = "testdata/llama-tiny/model-00002-of-00002.safetensors";
    char *dir = tu_tmpdir(), zst[512], cut[512];
    snprintf(zst, sizeof zst, "%s/a.safetensors.zst", dir);
    snprintf(cut, sizeof cut, "%s/cut.safetensors.zst", dir);
    zstd_file(plain, zst, SIZE_MAX / 2, false);
    size_t len;
    char *bytes = tu_slurp(zst, &len);
    tu_spit(cut, bytes, len / 2);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *f = NULL;
    ck_assert_int_eq(fp8_file_open(ctx, cut, &f), FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "truncated"));
    /* corrupt data: found by opening (this frame declares no size, so the
     * stream is decompressed to count) or at the latest by reading */
    bytes[len / 2] ^= 0x55;
    bytes[len / 2 + 1] ^= 0x55;
    tu_spit(cut, bytes, len);
    fp8_status st = fp8_file_open(ctx, cut, &f);
    for (size_t i = 0; !st && i < fp8_file_tensor_count(f); i++) {
        const fp8_tensor_info *t = fp8_file_tensor(f, i);
        char *buf = malloc((size_t)fp8_tensor_nbytes(t) + 1);
        st = fp8_file_read(ctx, f, t, 0, buf, (size_t)fp8_tensor_nbytes(t));
        free(buf);
    }
    ck_assert_int_eq(st, FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "zstd"));
    fp8_file_close(f);
    fp8_ctx_free(ctx);
    free(bytes);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_writer_zst_output_reads_back_equal)
{
    const char *plain = "testdata/llama-tiny/model-00001-of-00002.safetensors";
    char *dir = tu_tmpdir(), out[512], out_plain[512];
    snprintf(out, sizeof out, "%s/copy.safetensors.zst", dir);
    snprintf(out_plain, sizeof out_plain, "%s/copy.safetensors", dir);
    fp8_ctx *ctx = fp8_ctx_create();
    for (int pass = 0; pass < 2; pass++) {
        fp8_file *in = open_ok(plain);
        fp8_writer *w;
        ck_assert_int_eq(fp8_writer_create(ctx, pass ? out : out_plain, &w), FP8_OK);
        for (size_t i = 0; i < fp8_file_tensor_count(in); i++) {
            const fp8_tensor_info *t = fp8_file_tensor(in, i);
            ck_assert_int_eq(fp8_writer_add_tensor(ctx, w, t->name, t->dtype, t->rank, t->shape),
                             FP8_OK);
        }
        ck_assert_int_eq(fp8_writer_begin(ctx, w), FP8_OK);
        for (size_t i = 0; i < fp8_writer_tensor_count(w); i++) {
            const fp8_tensor_info *t = fp8_file_find(in, fp8_writer_tensor(w, i)->name);
            size_t n = (size_t)fp8_tensor_nbytes(t);
            char *buf = malloc(n);
            ck_assert_int_eq(fp8_file_read(ctx, in, t, 0, buf, n), FP8_OK);
            ck_assert_int_eq(fp8_writer_write(ctx, w, buf, n), FP8_OK);
            free(buf);
        }
        ck_assert_int_eq(fp8_writer_commit(ctx, w), FP8_OK);
        fp8_writer_free(w);
        fp8_file_close(in);
    }
    /* the input was written by the reference writer: a copy is byte-identical */
    size_t a, b;
    char *x = tu_slurp(plain, &a), *y = tu_slurp(out_plain, &b);
    ck_assert_uint_eq(a, b);
    ck_assert_mem_eq(x, y, a);
    free(x);
    free(y);
    assert_same_tensors(out_plain, out);
    fp8_ctx_free(ctx);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_open_memory_matches_open_file)
{
    size_t len;
    char *bytes = tu_slurp("testdata/accepted/every_dtype.safetensors", &len);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_file *m = NULL;
    ck_assert_int_eq(fp8_file_open_memory(ctx, "mem", bytes, len, &m), FP8_OK);
    ck_assert_uint_eq(fp8_file_tensor_count(m), FP8_DTYPE_COUNT);
    fp8_file_close(m);
    ck_assert_int_eq(fp8_file_open_memory(ctx, "mem", bytes, len - 1, &m), FP8_ERR_BAD_INPUT);
    ck_assert_ptr_nonnull(strstr(fp8_ctx_message(ctx), "mem: "));
    fp8_ctx_free(ctx);
    free(bytes);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_accept_zero_sized_tensors);
    tcase_add_test(tc, test_accept_scalar_0d);
    tcase_add_test(tc, test_accept_metadata_null_and_absent);
    tcase_add_test(tc, test_accept_leading_whitespace_and_no_padding);
    tcase_add_test(tc, test_accept_every_dtype);
    tcase_add_test(tc, test_accept_unicode_names_and_unknown_fields);
    tcase_add_test(tc, test_dtype_names_round_trip);
    tcase_add_test(tc, test_header_only_scan_reads_no_tensor_data);
    tcase_add_test(tc, test_read_tensor_range_matches_file_bytes);
    tcase_add_test(tc, test_writer_matches_reference_goldens);
    tcase_add_test(tc, test_writer_sorts_metadata_keys_and_escapes);
    tcase_add_test(tc, test_writer_without_commit_leaves_nothing);
    tcase_add_test(tc, test_writer_rejects_duplicate_and_bad_names);
    tcase_add_test(tc, test_zst_input_equals_plain_input);
    tcase_add_test(tc, test_zst_truncated_or_corrupt_is_bad_input);
    tcase_add_test(tc, test_writer_zst_output_reads_back_equal);
    tcase_add_test(tc, test_open_memory_matches_open_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
