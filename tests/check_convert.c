/*
 * check_convert.c - fp8conv convert end to end:
 *   - re-blocking to a finer block keeps every FP8 code, byte for byte, and
 *     gives each finer block its parent's scale; it makes a DeepSeek-V3
 *     shaped checkpoint with 128x128 blocks load at TP=32 (verify --tp);
 *   - re-labelling between hf-fp8, compressed-tensors and modelopt keeps
 *     the codes and the scales' values, under the target's names and shapes;
 *   - the value path writes the bytes quantize writes from the f32 export
 *     of the input, for every scheme and under engine profiles (--profile);
 *     the same bytes for every thread count;
 *   - the per-weight report says what diff --dequant says of the output, and
 *     counts the changed codes as a byte comparison does;
 *   - what cannot be done is refused, with the exit code of fp8conv(1),
 *     EXIT STATUS, and
 *     nothing is left behind.
 */
#include "golden.h"

#include <math.h>
#include <stdarg.h>

#define LLAMA "testdata/llama-tiny"
#define DEEPSEEK_FP8 "testdata/deepseek-fp8-tiny"

/* Runs fp8conv ARGS (a format, then values), which must exit `want`. */
__attribute__((format(printf, 2, 3)))
static void run_expect(int want, const char *fmt, ...)
{
    va_list ap;
    char *args, *err;
    va_start(ap, fmt);
    ck_assert(vasprintf(&args, fmt, ap) > 0);
    va_end(ap);
    int rc = tu_run(args, NULL, &err);
    ck_assert_msg(rc == want, "fp8conv %s: exit %d, expected %d: %s", args, rc, want, err);
    free(err);
    free(args);
}

/* The bytes of tensor `name` of checkpoint `path` (malloc'd); *t gets its info
 * when not NULL. */
static unsigned char *tensor_bytes(fp8_checkpoint *ck, const char *name, const fp8_tensor_info **t)
{
    fp8_ctx *ctx = fp8_ctx_create();
    size_t shard;
    const fp8_tensor_info *ti = fp8_checkpoint_find(ck, name, &shard);
    ck_assert_msg(ti != NULL, "no tensor %s", name);
    unsigned char *buf = malloc(fp8_tensor_nbytes(ti) + 1);
    ck_assert(fp8_file_read(ctx, fp8_checkpoint_shard(ck, shard), ti, 0, buf,
                            fp8_tensor_nbytes(ti)) == FP8_OK);
    fp8_ctx_free(ctx);
    if (t)
        *t = ti;
    return buf;
}

static fp8_checkpoint *open_ck(const char *path)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    ck_assert_msg(fp8_checkpoint_open(ctx, path, &ck) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_ctx_free(ctx);
    return ck;
}

static float scale_at(const fp8_tensor_info *t, const unsigned char *p, uint64_t i)
{
    if (t->dtype == FP8_DTYPE_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    ck_assert_int_eq(t->dtype, FP8_DTYPE_BF16);
    uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/*
 * Every F8_E4M3 weight of `in` is in `out` with the same codes, and each
 * scale of `out` (named weight + out_suffix, shape [M/r, N/c] or per
 * channel) is the scale of `in` (weight + in_suffix) of the group holding
 * it; in_rows x in_cols and out_rows x out_cols are the groups (0: the
 * whole dimension).  Returns how many weights were compared.
 */
static int expect_codes_kept(const char *in, const char *out, const char *in_suffix,
                             const char *out_suffix, uint64_t in_rows, uint64_t in_cols,
                             uint64_t out_rows, uint64_t out_cols)
{
    fp8_checkpoint *a = open_ck(in), *b = open_ck(out);
    int n = 0;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(a); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(a, i, NULL), *u, *sa, *sb;
        if (t->dtype != FP8_DTYPE_F8_E4M3)
            continue;
        unsigned char *qa = tensor_bytes(a, t->name, NULL), *qb = tensor_bytes(b, t->name, &u);
        ck_assert_int_eq(u->dtype, FP8_DTYPE_F8_E4M3);
        ck_assert_msg(fp8_tensor_nbytes(u) == fp8_tensor_nbytes(t) &&
                          memcmp(qa, qb, fp8_tensor_nbytes(t)) == 0,
                      "%s: codes changed", t->name);
        char name[512];
        snprintf(name, sizeof name, "%s%s", t->name, in_suffix);
        unsigned char *pa = tensor_bytes(a, name, &sa);
        snprintf(name, sizeof name, "%s%s", t->name, out_suffix);
        unsigned char *pb = tensor_bytes(b, name, &sb);
        uint64_t m = t->shape[0], k = t->shape[1];
        uint64_t ir = in_rows ? in_rows : m, ic = in_cols ? in_cols : k;
        uint64_t orow = out_rows ? out_rows : m, ocol = out_cols ? out_cols : k;
        uint64_t icols = (k + ic - 1) / ic, ocols = (k + ocol - 1) / ocol;
        ck_assert_int_eq(sb->elements, ((m + orow - 1) / orow) * ocols);
        for (uint64_t r = 0; r < m; r += orow)
            for (uint64_t c = 0; c < k; c += ocol) {
                float want = scale_at(sa, pa, r / ir * icols + c / ic);
                float got = scale_at(sb, pb, r / orow * ocols + c / ocol);
                ck_assert_msg(memcmp(&want, &got, 4) == 0, "%s: scale of (%llu, %llu): %g, not %g",
                              t->name, (unsigned long long)r, (unsigned long long)c, got, want);
            }
        free(qa);
        free(qb);
        free(pa);
        free(pb);
        n++;
    }
    fp8_checkpoint_close(a);
    fp8_checkpoint_close(b);
    return n;
}

/* Whether two files have the same bytes. */
static bool same_file(const char *x, const char *y)
{
    size_t nx, ny;
    char *a = tu_slurp(x, &nx), *b = tu_slurp(y, &ny);
    bool same = nx == ny && memcmp(a, b, nx) == 0;
    free(a);
    free(b);
    return same;
}

/* The shards of llama-tiny's outputs, the index, and config.json. */
static const char *const OUTPUT_FILES[] = { "model-00001-of-00002.safetensors",
                                            "model-00002-of-00002.safetensors",
                                            "model.safetensors.index.json", "config.json" };

/* The first n of OUTPUT_FILES have the same bytes in directories x and y. */
static void expect_same_files(const char *x, const char *y, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        char *a, *b;
        ck_assert(asprintf(&a, "%s/%s", x, OUTPUT_FILES[i]) > 0);
        ck_assert(asprintf(&b, "%s/%s", y, OUTPUT_FILES[i]) > 0);
        ck_assert_msg(same_file(a, b), "%s: %s differs", what, OUTPUT_FILES[i]);
        free(a);
        free(b);
    }
}

/* ---------------------------------------------------------------- exact paths */

START_TEST(test_reblock_keeps_every_code_and_replicates_scales)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA);
    run_expect(0, "convert -q --exact --block 16x8 '%s' '%s/c'", fp8, dir);
    char *out;
    ck_assert(asprintf(&out, "%s/c", dir) > 0);
    ck_assert_int_eq(expect_codes_kept(fp8, out, "_scale_inv", "_scale_inv", 32, 32, 16, 8), 14);
    run_expect(0, "diff -q --dequant '%s' '%s'", fp8, out); /* the same values, every one */
    char *cfg;
    ck_assert(asprintf(&cfg, "%s/config.json", out) > 0);
    cJSON *config = read_json(cfg);
    const cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(config, "quantization_config"),
                                         "weight_block_size");
    ck_assert_int_eq(cJSON_GetArrayItem(b, 0)->valueint, 16);
    ck_assert_int_eq(cJSON_GetArrayItem(b, 1)->valueint, 8);
    run_expect(0, "verify -q '%s'", out);
    cJSON_Delete(config);
    free(cfg);
    free(out);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* DeepSeek-V3 at TP=32: 18432 / 32 = 576 rows per rank, a multiple of 64
 * but not of 128; moe_intermediate 2048 / 32 = 64.  The same divisibility
 * at a small scale: intermediate 6144 / 32 = 192.  q_lora_rank 128, whole
 * blocks as V3's 1536 (off the block, vLLM's merged fused_qkv_a_proj loads
 * at no TP: tests/check_verify.c test_tp_mla_q_lora_off_the_block_is_named). */
static const char DEEPSEEK_CONFIG[] =
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"deepseek_v3\",\n"
    " \"hidden_size\": 256, \"intermediate_size\": 6144, \"moe_intermediate_size\": 2048,\n"
    " \"num_hidden_layers\": 1, \"num_attention_heads\": 128, \"num_key_value_heads\": 128,\n"
    " \"n_routed_experts\": 8, \"n_shared_experts\": 1, \"first_k_dense_replace\": 1,\n"
    " \"q_lora_rank\": 128, \"kv_lora_rank\": 64, \"qk_nope_head_dim\": 128,\n"
    " \"qk_rope_head_dim\": 64, \"v_head_dim\": 128, \"vocab_size\": 256,\n"
    " \"torch_dtype\": \"bfloat16\"}\n";
static const tu_tensor DEEPSEEK[] = {
    { "model.embed_tokens.weight", 2, { 256, 256 } },
    { "model.layers.0.mlp.gate_proj.weight", 2, { 6144, 256 } },
    { "model.layers.0.mlp.up_proj.weight", 2, { 6144, 256 } },
    { "model.layers.0.mlp.down_proj.weight", 2, { 256, 6144 } },
    { "model.norm.weight", 1, { 256 } },
};

START_TEST(test_reblock_128_to_64_makes_deepseek_layout_load_at_tp32)
{
    char *dir = tu_tmpdir();
    char *model = make_named_model(dir, "ds", DEEPSEEK_CONFIG, DEEPSEEK, 5);
    char *fp8 = quantize_into(dir, "--block 128x128", model);
    /* the source: 6144 / 32 = 192 rows per rank are not whole 128-row blocks */
    char *out, *report;
    ck_assert(asprintf(&out, "verify --no-values --tp 32 '%s'", fp8) > 0);
    int rc = tu_run(out, &report, NULL);
    ck_assert_msg(rc == 1 && strstr(report, "TP=32") && strstr(report, "192"),
                  "source at TP=32: exit %d: %s", rc, report);
    free(out);
    free(report);
    run_expect(0, "verify --tp 8 '%s'", fp8);
    run_expect(0, "convert -q --exact --block 64x64 '%s' '%s/c64'", fp8, dir);
    ck_assert(asprintf(&out, "%s/c64", dir) > 0);
    ck_assert_int_eq(expect_codes_kept(fp8, out, "_scale_inv", "_scale_inv", 128, 128, 64, 64), 3);
    run_expect(0, "verify --tp 32 '%s'", out);
    run_expect(0, "verify --strict --no-values --tp 32 '%s'", out);
    free(out);
    free(fp8);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_relabel_block_hf_fp8_to_compressed_tensors_and_back)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA), *ct, *back;
    run_expect(0, "convert -q --exact --format compressed-tensors '%s' '%s/ct'", fp8, dir);
    ck_assert(asprintf(&ct, "%s/ct", dir) > 0);
    ck_assert_int_eq(expect_codes_kept(fp8, ct, "_scale_inv", "_scale", 32, 32, 32, 32), 14);
    run_expect(0, "verify -q '%s'", ct);
    /* and back: the same files as the first quantization */
    run_expect(0, "convert -q --exact --format hf-fp8 '%s' '%s/back'", ct, dir);
    ck_assert(asprintf(&back, "%s/back", dir) > 0);
    expect_same_files(fp8, back, 4, "hf-fp8 -> compressed-tensors -> hf-fp8");
    free(back);
    free(ct);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* DeepSeek-V3.1's release declares "scale_fmt": "ue8m0" (its config.json), and
 * vLLM takes its UE8M0 path only when the key is there; compressed-tensors has
 * no such key, so convert back to hf-fp8 finds it again from the scales, every
 * one a power of two: the round trip gives the same files.  Float scales get
 * no claim. */
START_TEST(test_ue8m0_survives_a_compressed_tensors_round_trip)
{
    char *dir = tu_tmpdir();
    char *u = quantize_into(dir, "--block 32x32 --scale-fmt ue8m0", LLAMA), *ct, *back, *text;
    run_expect(0, "convert -q --format compressed-tensors '%s' '%s/ct'", u, dir);
    ck_assert(asprintf(&ct, "%s/ct", dir) > 0);
    run_expect(0, "convert -q --format hf-fp8 '%s' '%s/back'", ct, dir);
    ck_assert(asprintf(&back, "%s/back", dir) > 0);
    expect_same_files(u, back, 4, "hf-fp8 ue8m0 -> compressed-tensors -> hf-fp8");
    ck_assert(asprintf(&text, "%s/config.json", back) > 0);
    char *config = tu_slurp(text, NULL);
    ck_assert_msg(strstr(config, "\"scale_fmt\": \"ue8m0\""), "%s", config);
    free(config);
    free(text);
    /* --scale-fmt float says otherwise */
    run_expect(0, "convert -q --scale-fmt float --format hf-fp8 '%s' '%s/float'", ct, dir);
    ck_assert(asprintf(&text, "%s/float/config.json", dir) > 0);
    config = tu_slurp(text, NULL);
    ck_assert_msg(!strstr(config, "scale_fmt"), "%s", config);
    free(config);
    free(text);
    free(back);
    free(ct);
    free(u);
    tu_tmpdir_free(dir);
}
END_TEST

/* compressed-tensors' per-channel BF16 [M, 1] scales widen exactly into
 * ModelOpt's F32 [M]. */
START_TEST(test_relabel_channel_bf16_scales_to_modelopt_f32)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--scheme channel", LLAMA), *mo;
    run_expect(0, "convert -q --exact --format modelopt '%s' '%s/mo'", fp8, dir);
    ck_assert(asprintf(&mo, "%s/mo", dir) > 0);
    ck_assert_int_eq(expect_codes_kept(fp8, mo, "_scale", "_scale", 1, 0, 1, 0), 14);
    run_expect(0, "diff -q --dequant '%s' '%s'", fp8, mo);
    fp8_checkpoint *ck = open_ck(mo);
    const fp8_tensor_info *s = fp8_checkpoint_find(ck, "model.layers.0.mlp.up_proj.weight_scale",
                                                   NULL);
    ck_assert(s && s->dtype == FP8_DTYPE_F32 && s->rank == 1);
    fp8_checkpoint_close(ck);
    char *hq;
    ck_assert(asprintf(&hq, "%s/hf_quant_config.json", mo) > 0);
    ck_assert(exists(hq));
    run_expect(0, "verify -q '%s'", mo);
    free(hq);
    free(mo);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- the value path */

static const char *const value_targets[] = {
    "--block 64x64",  "--block 48x32 --scale-fmt ue8m0", "--scheme channel",
    "--scheme tensor", "--scheme mxfp8", "--scheme channel --format modelopt",
    "--scheme mxfp8 --mx-rounding floor --format modelopt",
    /* an engine's arithmetic on the values (fp8conv-formats(5), PROFILES) */
    "--scheme channel --profile vllm", "--block 64x64 --profile te",
    "--scheme tensor --profile transformers", "--block 48x32 --profile deepgemm",
    "--scheme channel --profile llm-compressor",
};

/* convert of an FP8 checkpoint equals quantize of its f32 export, byte for
 * byte, in every shard and the index. */
START_TEST(test_value_path_equals_quantize_of_f32_export)
{
    const char *target = value_targets[_i];
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA);
    run_expect(0, "dequantize-for-export -q --dtype f32 '%s' '%s/f32'", fp8, dir);
    run_expect(0, "quantize -q %s '%s/f32' '%s/q'", target, dir, dir);
    run_expect(0, "convert -q %s '%s' '%s/c'", target, fp8, dir);
    char *q, *c;
    ck_assert(asprintf(&q, "%s/q", dir) > 0 && asprintf(&c, "%s/c", dir) > 0);
    /* config.json differs in torch_dtype only: the export's is float32 */
    expect_same_files(q, c, 3, target);
    free(q);
    free(c);
    /* llama-tiny's 544 rows are not whole 64-row blocks: verify says so (tp) */
    if (strncmp(target, "--block", 7) != 0)
        run_expect(0, "verify -q '%s/c'", dir);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* The library takes the profile in its options struct as the CLI does: a
 * scheme it does not define is FP8_ERR_USAGE naming those it does, before
 * anything is written; one it defines is kept in the resolved target. */
START_TEST(test_profile_in_the_options_struct)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_convert_options o = FP8_CONVERT_OPTIONS_INIT;
    fp8_convert *c = NULL;
    o.target.profile = FP8_PROFILE_TE;
    o.target.scheme = FP8_SCHEME_MXFP8;
    o.scheme_set = true;
    ck_assert_int_eq(fp8_convert_create(ctx, fp8, &o, &c), FP8_ERR_USAGE);
    ck_assert_msg(strstr(fp8_ctx_message(ctx), "--profile te does not define --scheme mxfp8 "
                                                "(it defines: block, tensor, nvfp4)"),
                  "%s", fp8_ctx_message(ctx));
    ck_assert_ptr_null(c);
    o.target.scheme = FP8_SCHEME_TENSOR;
    ck_assert_msg(fp8_convert_create(ctx, fp8, &o, &c) == FP8_OK, "%s", fp8_ctx_message(ctx));
    ck_assert_int_eq(fp8_convert_target(c)->profile, FP8_PROFILE_TE);
    fp8_convert_free(c);
    fp8_ctx_free(ctx);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_same_bytes_for_every_thread_count)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA);
    static const int threads[] = { 1, 2, 5 };
    for (int k = 0; k < 3; k++)
        run_expect(0, "convert -q -j %d --block 64x32 '%s' '%s/j%d'", threads[k], fp8, dir,
                   threads[k]);
    for (int k = 1; k < 3; k++)
        run_expect(0, "diff -q '%s/j1' '%s/j%d'", dir, dir, threads[k]);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* The report's counts are what diff --dequant finds between input and
 * output: elements whose value changed, and the largest change. */
START_TEST(test_report_matches_diff_dequant)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA), *out;
    ck_assert(asprintf(&out, "%s/c", dir) > 0);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_convert_options o = FP8_CONVERT_OPTIONS_INIT;
    o.target.scheme = FP8_SCHEME_CHANNEL;
    o.scheme_set = true;
    fp8_convert *c;
    ck_assert_msg(fp8_convert_create(ctx, fp8, &o, &c) == FP8_OK, "%s", fp8_ctx_message(ctx));
    ck_assert_int_eq(fp8_convert_target(c)->format, FP8_FORMAT_COMPRESSED_TENSORS);
    ck_assert_msg(fp8_convert_run(ctx, c, out) == FP8_OK, "%s", fp8_ctx_message(ctx));
    fp8_diff_options d = { .dequant = true };
    fp8_diff *diff;
    ck_assert(fp8_diff_run(ctx, fp8, out, &d, &diff) == FP8_OK);
    ck_assert_int_eq(fp8_convert_weight_count(c), 14);
    uint64_t changed = 0;
    fp8_checkpoint *in = open_ck(fp8), *res = open_ck(out);
    for (size_t i = 0; i < fp8_convert_weight_count(c); i++) {
        const fp8_convert_weight *w = fp8_convert_weight_at(c, i);
        ck_assert(!w->exact && w->why);
        /* codes: counted here byte by byte */
        const fp8_tensor_info *t;
        unsigned char *qa = tensor_bytes(in, w->name, &t), *qb = tensor_bytes(res, w->name, NULL);
        uint64_t codes = 0;
        for (uint64_t k = 0; k < t->elements; k++)
            codes += qa[k] != qb[k];
        ck_assert_msg(w->codes_changed == codes, "%s: %llu codes changed, %llu differ", w->name,
                      (unsigned long long)w->codes_changed, (unsigned long long)codes);
        free(qa);
        free(qb);
        const fp8_diff_entry *e = NULL;
        for (size_t k = 0; k < fp8_diff_count(diff); k++)
            if (strcmp(fp8_diff_entry_at(diff, k)->name, w->name) == 0)
                e = fp8_diff_entry_at(diff, k);
        ck_assert_msg(e != NULL, "%s not in the diff", w->name);
        uint64_t differing = e->kind == FP8_DIFF_VALUES ? e->differing : 0;
        double max_abs = e->kind == FP8_DIFF_VALUES ? e->max_abs : 0;
        ck_assert_msg(w->changed == differing, "%s: %llu changed, diff says %llu", w->name,
                      (unsigned long long)w->changed, (unsigned long long)differing);
        ck_assert_msg(w->max_change == max_abs, "%s: largest change %g, diff says %g", w->name,
                      w->max_change, max_abs);
        changed += w->changed;
    }
    ck_assert(changed > 0);
    fp8_checkpoint_close(in);
    fp8_checkpoint_close(res);
    fp8_diff_free(diff);
    fp8_convert_free(c);
    fp8_ctx_free(ctx);
    free(out);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_exact_weights_report_no_change)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA), *args, *json;
    ck_assert(asprintf(&args, "convert --json --block 16x16 '%s' '%s/c'", fp8, dir) > 0);
    ck_assert_int_eq(tu_run(args, &json, NULL), 0);
    cJSON *r = cJSON_Parse(json);
    ck_assert(r != NULL);
    ck_assert_int_eq(cJSON_GetObjectItem(r, "exact")->valueint, 14);
    ck_assert_int_eq(cJSON_GetObjectItem(r, "requantized")->valueint, 0);
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(r, "weights"))
    {
        ck_assert_str_eq(cJSON_GetObjectItem(w, "path")->valuestring, "exact");
        ck_assert_int_eq(cJSON_GetObjectItem(w, "changed")->valueint, 0);
        ck_assert_int_eq(cJSON_GetObjectItem(w, "codes_changed")->valueint, 0);
    }
    cJSON_Delete(r);
    free(json);
    free(args);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- refusals */

static const struct {
    int exit;
    const char *options, *input, *needle;
} refusals[] = {
    /* 48 rows do not nest in 32-row blocks: --exact refuses the value path */
    { 2, "--exact --block 48x32", "fp8", "does not lie inside one 32x32 group" },
    { 2, "--exact --scheme mxfp8", "fp8", "MX scales are powers of two" },
    { 2, "--exact --block 32x32 --scale-fmt ue8m0", "fp8", "ue8m0" },
    { 2, "--scheme channel --format hf-fp8", "fp8", "cannot be written" },
    { 2, "--scheme channel --block 16x16", "fp8", "--block applies to --scheme block only" },
    /* down_proj [256, 300]: 300 is not a multiple of 32 */
    { 3, "--scheme mxfp8", DEEPSEEK_FP8, "multiple of 32" },
    { 3, "", LLAMA, "not an FP8 checkpoint" },
};

START_TEST(test_refusals_exit_with_the_reason_and_write_nothing)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA), *args, *err;
    const char *input = strcmp(refusals[_i].input, "fp8") == 0 ? fp8 : refusals[_i].input;
    ck_assert(asprintf(&args, "convert %s '%s' '%s/out'", refusals[_i].options, input, dir) > 0);
    int rc = tu_run(args, NULL, &err);
    ck_assert_msg(rc == refusals[_i].exit, "%s: exit %d: %s", args, rc, err);
    ck_assert_msg(strstr(err, refusals[_i].needle) && strncmp(err, "fp8conv: ", 9) == 0,
                  "%s: %s", args, err);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    ck_assert_int_eq(count_entries(dir, ".out"), 0);
    free(err);
    free(args);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_existing_output_needs_force)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA);
    run_expect(0, "convert -q --block 16x16 '%s' '%s/c'", fp8, dir);
    run_expect(2, "convert -q --block 16x16 '%s' '%s/c'", fp8, dir);
    run_expect(0, "convert -q --force --block 8x8 '%s' '%s/c'", fp8, dir);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* ---------------------------------------------------------------- --like */

/* verify --json's findings, counted by rule. */
static int count_rule(const cJSON *report, const char *rule)
{
    int n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(report, "findings"))
        n += strcmp(cJSON_GetObjectItem(f, "rule")->valuestring, rule) == 0;
    return n;
}

static cJSON *verify_like(const char *ref, const char *path, int want)
{
    char *args, *out;
    ck_assert(asprintf(&args, "verify --json --no-values --like '%s' '%s'", ref, path) > 0);
    int rc = tu_run(args, &out, NULL);
    ck_assert_msg(rc == want, "%s: exit %d: %s", args, rc, out);
    cJSON *r = cJSON_Parse(out);
    ck_assert(r != NULL);
    free(out);
    free(args);
    return r;
}

START_TEST(test_verify_like_lists_every_difference)
{
    char *dir = tu_tmpdir(), *a = quantize_into(dir, "--block 32x32", LLAMA);
    run_expect(0, "quantize -q --block 16x16 --ignore 'layers\\.0\\.mlp' %s '%s/b'", LLAMA, dir);
    char *b;
    ck_assert(asprintf(&b, "%s/b", dir) > 0);
    cJSON *r = verify_like(a, b, 1);
    ck_assert_int_eq(count_rule(r, "like-dtype"), 3);   /* layer 0's MLP: BF16, not F8_E4M3 */
    ck_assert_int_eq(count_rule(r, "like-tensors"), 3); /* their scales are missing */
    ck_assert_int_eq(count_rule(r, "like-shape"), 11);  /* the other scales: 16x16 blocks */
    ck_assert_int_eq(count_rule(r, "like-config"), 4);  /* the block size, 3 ignored modules */
    cJSON_Delete(r);
    /* against its own config.json: the config only */
    char *cfg;
    ck_assert(asprintf(&cfg, "%s/config.json", a) > 0);
    r = verify_like(cfg, b, 1);
    ck_assert_int_eq(count_rule(r, "like-config"), 4);
    ck_assert_int_eq(count_rule(r, "like-dtype") + count_rule(r, "like-shape"), 0);
    cJSON_Delete(r);
    cJSON_Delete(verify_like(a, a, 0));
    free(cfg);
    free(b);
    free(a);
    tu_tmpdir_free(dir);
}
END_TEST

/* quantize --like REF of REF's own source is REF, byte for byte. */
START_TEST(test_quantize_like_reproduces_the_reference)
{
    static const char *const refs[] = {
        "--block 16x16 --format compressed-tensors --ignore 'layers\\.1\\.self_attn'",
        "--scheme channel --format modelopt",
        "--block 32x64 --scale-fmt ue8m0 --ignore 'up_proj'",
    };
    char *dir = tu_tmpdir(), *ref = quantize_into(dir, refs[_i], LLAMA);
    run_expect(0, "quantize -q --like '%s' %s '%s/q'", ref, LLAMA, dir);
    char *q;
    ck_assert(asprintf(&q, "%s/q", dir) > 0);
    expect_same_files(ref, q, 4, refs[_i]);
    cJSON_Delete(verify_like(ref, q, 0));
    free(q);
    free(ref);
    tu_tmpdir_free(dir);
}
END_TEST

/* A REF module is found under another prefix; one INPUT lacks is said. */
START_TEST(test_quantize_like_maps_module_names)
{
    char *dir = tu_tmpdir(), *cfg, *err, *args;
    ck_assert(asprintf(&cfg, "%s/ref.json", dir) > 0);
    static const char REF[] =
        "{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\",\n"
        " \"activation_scheme\": \"dynamic\", \"weight_block_size\": [32, 32],\n"
        " \"modules_to_not_convert\": [\"lm_head\", \"language_model.layers.0.mlp.down_proj\",\n"
        " \"visual.blocks.0.attn.qkv\"]}}\n";
    tu_spit(cfg, REF, strlen(REF));
    ck_assert(asprintf(&args, "quantize --like '%s' %s '%s/q'", cfg, LLAMA, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 0);
    ck_assert_msg(strstr(err, "warning: --like: the reference keeps module "
                              "'visual.blocks.0.attn.qkv' unquantized"), "%s", err);
    ck_assert_msg(!strstr(err, "down_proj"), "%s", err);
    char *q;
    ck_assert(asprintf(&q, "%s/q", dir) > 0);
    fp8_checkpoint *ck = open_ck(q);
    ck_assert_int_eq(fp8_checkpoint_find(ck, "model.layers.0.mlp.down_proj.weight", NULL)->dtype,
                     FP8_DTYPE_BF16);
    ck_assert_int_eq(fp8_checkpoint_find(ck, "model.layers.1.mlp.down_proj.weight", NULL)->dtype,
                     FP8_DTYPE_F8_E4M3);
    ck_assert_int_eq(fp8_checkpoint_find(ck, "model.layers.0.mlp.down_proj.weight_scale_inv",
                                         NULL) == NULL, 1);
    fp8_checkpoint_close(ck);
    free(q);
    free(err);
    free(args);
    free(cfg);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_like_refuses_static_activations_and_no_layout)
{
    static const char *const configs[] = {
        "{\"quantization_config\": {\"quant_method\": \"fp8\", \"activation_scheme\": "
        "\"static\", \"weight_block_size\": [128, 128]}}",
        "{\"model_type\": \"llama\"}",
    };
    char *dir = tu_tmpdir(), *cfg;
    ck_assert(asprintf(&cfg, "%s/ref.json", dir) > 0);
    tu_spit(cfg, configs[_i], strlen(configs[_i]));
    run_expect(3, "quantize -q --like '%s' %s '%s/q'", cfg, LLAMA, dir);
    run_expect(2, "quantize -q --like '%s' --block 16x16 %s '%s/q'", cfg, LLAMA, dir);
    ck_assert_int_eq(count_entries(dir, "q"), 0);
    free(cfg);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_convert_like_takes_the_reference_layout)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 32x32", LLAMA), *out;
    run_expect(0, "quantize -q --block 16x16 --format compressed-tensors %s '%s/ref'", LLAMA, dir);
    run_expect(0, "convert -q --exact --like '%s/ref/config.json' '%s' '%s/c'", dir, fp8, dir);
    ck_assert(asprintf(&out, "%s/c", dir) > 0);
    ck_assert_int_eq(expect_codes_kept(fp8, out, "_scale_inv", "_scale", 32, 32, 16, 16), 14);
    /* the scales are F32 (exact), the reference's BF16: that difference is all */
    char *ref;
    ck_assert(asprintf(&ref, "%s/ref", dir) > 0);
    cJSON *r = verify_like(ref, out, 1);
    ck_assert_int_eq(count_rule(r, "like-dtype"), 14);
    ck_assert_int_eq(count_rule(r, "like-config") + count_rule(r, "like-shape") +
                         count_rule(r, "like-tensors"), 0);
    cJSON_Delete(r);
    free(ref);
    free(out);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* DIR/config.json, as text (malloc'd). */
static char *tu_slurp_config(const char *dir)
{
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    return tu_slurp(path, NULL);
}

/* A convert of Mistral's FP8 layout (per-tensor weight_scale_inv, [] or [1];
 * fp8conv-formats(5), RELEASE FAMILIES) into the same layout keeps the
 * release's scale names and shapes and every code: vLLM, SGLang and
 * transformers read them under that name.  activation_scale stays too, as
 * it is, and the config written says activation_scheme static (fp8conv(1),
 * convert, ACTIVATION SCALES). */
START_TEST(test_convert_keeps_mistral_scale_names)
{
    char *dir = tu_tmpdir();
    for (int rank = 0; rank <= 1; rank++) {
        char name[32], out[600];
        snprintf(name, sizeof name, "ministral-%d", rank);
        char *model = make_mistral3_fp8(dir, name, rank);
        snprintf(out, sizeof out, "%s/c-%d", dir, rank);
        run_expect(0, "convert -q --exact '%s' '%s'", model, out);
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_checkpoint *ck;
        ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
        const fp8_tensor_info *s =
            fp8_checkpoint_find(ck, "model.layers.0.self_attn.q_proj.weight_scale_inv", NULL);
        ck_assert_msg(s && s->rank == rank && s->elements == 1, "rank %d", rank);
        ck_assert(!fp8_checkpoint_find(ck, "model.layers.0.self_attn.q_proj.weight_scale", NULL));
        s = fp8_checkpoint_find(ck, "model.layers.0.mlp.down_proj.activation_scale", NULL);
        ck_assert_msg(s && s->rank == rank && s->elements == 1, "rank %d", rank);
        fp8_checkpoint_close(ck);
        fp8_ctx_free(ctx);
        char *cfg = tu_slurp_config(out);
        cJSON *j = cJSON_Parse(cfg);
        ck_assert_msg(!strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "quantization_config"),
                                                  "activation_scheme")->valuestring, "static"),
                      "%s", cfg);
        cJSON_Delete(j);
        free(cfg);
        run_expect(0, "diff -q --dequant '%s' '%s'", model, out);
        run_expect(0, "verify -q --strict '%s'", out);
        free(model);
    }
    tu_tmpdir_free(dir);
}
END_TEST

/* Every tensor of checkpoint a is b's: name, dtype, shape and bytes. */
static void expect_same_tensors(const char *a, const char *b)
{
    fp8_checkpoint *x = open_ck(a), *y = open_ck(b);
    ck_assert_int_eq(fp8_checkpoint_tensor_count(x), fp8_checkpoint_tensor_count(y));
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(x); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(x, i, NULL), *u;
        unsigned char *p = tensor_bytes(x, t->name, NULL), *q = tensor_bytes(y, t->name, &u);
        ck_assert_msg(u->dtype == t->dtype && u->rank == t->rank &&
                          !memcmp(u->shape, t->shape, (size_t)t->rank * sizeof *t->shape) &&
                          !memcmp(p, q, fp8_tensor_nbytes(t)),
                      "%s: %s differs in %s", a, t->name, b);
        free(p);
        free(q);
    }
    fp8_checkpoint_close(x);
    fp8_checkpoint_close(y);
}

/* Static activation scales (fp8conv(1), convert, ACTIVATION SCALES): Mistral's
 * per-tensor FP8 to compressed-tensors (input_scale [1], input_activations
 * dynamic false, strategy tensor) to ModelOpt (input_scale [], quant_algo
 * FP8, which needs them) and back with --like the original: every tensor,
 * weights, scales and activation scales, byte for byte, and verify finds
 * each output whole. */
START_TEST(test_static_activation_scales_round_trip)
{
    char *dir = tu_tmpdir(), ct[600], mo[600], back[600];
    char *model = make_mistral3_fp8(dir, "ministral", 0);
    snprintf(ct, sizeof ct, "%s/ct", dir);
    snprintf(mo, sizeof mo, "%s/mo", dir);
    snprintf(back, sizeof back, "%s/back", dir);
    run_expect(0, "convert -q --exact --format compressed-tensors '%s' '%s'", model, ct);
    run_expect(0, "convert -q --exact --format modelopt '%s' '%s'", ct, mo);
    run_expect(0, "convert -q --exact --like '%s' '%s' '%s'", model, mo, back);
    expect_same_tensors(model, back);
    static const char *const scale = "model.layers.0.mlp.down_proj.input_scale";
    fp8_checkpoint *c = open_ck(ct), *m = open_ck(mo);
    ck_assert_int_eq(fp8_checkpoint_find(c, scale, NULL)->rank, 1);
    ck_assert_int_eq(fp8_checkpoint_find(m, scale, NULL)->rank, 0);
    fp8_checkpoint_close(c);
    fp8_checkpoint_close(m);
    char *cfg = tu_slurp_config(ct);
    cJSON *j = cJSON_Parse(cfg), *q = cJSON_GetObjectItem(j, "quantization_config");
    const cJSON *a = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(q, "config_groups"), "group_0"), "input_activations");
    ck_assert_msg(cJSON_IsFalse(cJSON_GetObjectItem(a, "dynamic")) &&
                      !strcmp(cJSON_GetObjectItem(a, "strategy")->valuestring, "tensor"), "%s", cfg);
    cJSON_Delete(j);
    free(cfg);
    cfg = tu_slurp_config(mo);
    j = cJSON_Parse(cfg);
    q = cJSON_GetObjectItem(j, "quantization_config");
    ck_assert_msg(!strcmp(cJSON_GetObjectItem(q, "quant_algo")->valuestring, "FP8"), "%s", cfg);
    cJSON_Delete(j);
    free(cfg);
    const char *outs[] = { ct, mo, back };
    for (int k = 0; k < 3; k++) {
        int rc;
        cJSON *r = verify_json(outs[k], "", &rc);
        ck_assert_msg(rc == 0 && !verify_finding(r, "input-scale"), "verify %s: %d", outs[k], rc);
        cJSON_Delete(r);
    }
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* A static input with an FP8 weight that has no activation scale: a target
 * declaring static activations is refused naming the weight, nothing left
 * behind; a per-channel target (dynamic per-token activations) drops them,
 * counted; verify names the gap ([input-scale]) as vLLM reads the config. */
START_TEST(test_static_activations_need_one_per_weight)
{
    const tu_typed_tensor t[] = {
        { "lm_head.weight", FP8_DTYPE_BF16, 2, { 64, 256 } },
        { "model.embed_tokens.weight", FP8_DTYPE_BF16, 2, { 64, 256 } },
        { "model.layers.0.mlp.down_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.mlp.down_proj.weight_scale_inv", FP8_DTYPE_F32, 0, { 1 } },
        { "model.layers.0.self_attn.q_proj.activation_scale", FP8_DTYPE_F32, 0, { 1 } },
        { "model.layers.0.self_attn.q_proj.weight", FP8_DTYPE_F8_E4M3, 2, { 256, 256 } },
        { "model.layers.0.self_attn.q_proj.weight_scale_inv", FP8_DTYPE_F32, 0, { 1 } },
    };
    char *dir = tu_tmpdir(), *err, *args, *json;
    char *model = make_typed_model(dir, "gap", TU_MISTRAL3_FP8_CONFIG, t, sizeof t / sizeof *t);
    ck_assert(asprintf(&args, "convert --format compressed-tensors '%s' '%s/out'", model, dir) > 0);
    int rc = tu_run(args, NULL, &err);
    ck_assert_msg(rc == 3 && strstr(err, "'model.layers.0.mlp.down_proj.weight'") &&
                      strstr(err, "static"), "exit %d: %s", rc, err);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    ck_assert_int_eq(count_entries(dir, ".out"), 0);
    free(err);
    free(args);
    ck_assert(asprintf(&args, "convert --json --scheme channel '%s' '%s/ch'", model, dir) > 0);
    ck_assert_int_eq(tu_run(args, &json, NULL), 0);
    cJSON *r = cJSON_Parse(json);
    ck_assert_int_eq(cJSON_GetObjectItem(r, "activation_scales_dropped")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(r, "activation_scales")->valueint, 0);
    cJSON_Delete(r);
    free(json);
    free(args);
    /* a stray input_scale beside dynamic activations (the input declares
     * them: its loaders read none) is dropped, as before */
    ck_assert(asprintf(&args, "convert --json --scheme tensor %s '%s/t'", DEEPSEEK_FP8, dir) > 0);
    ck_assert_int_eq(tu_run(args, &json, NULL), 0);
    r = cJSON_Parse(json);
    ck_assert_int_eq(cJSON_GetObjectItem(r, "activation_scales_dropped")->valueint, 1);
    cJSON_Delete(r);
    free(json);
    free(args);
    r = verify_json(model, "", &rc);
    const cJSON *f = verify_finding(r, "input-scale");
    ck_assert_msg(f && strstr(cJSON_GetObjectItem(f, "message")->valuestring, "down_proj"),
                  "verify: no [input-scale] on down_proj");
    cJSON_Delete(r);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* A block scale's _scale_inv is the block layout's own name, not Mistral's
 * per-tensor one: hf-fp8 block to per tensor writes weight_scale, the name
 * vLLM's Fp8Config reads (a regression of the Mistral change, caught by
 * comparing outputs with the build before it). */
START_TEST(test_block_to_tensor_writes_the_per_tensor_name)
{
    char *dir = tu_tmpdir(), out[600];
    char *model = make_model(dir, "m", 256, 256, -1, 0);
    char *fp8 = quantize_into(dir, "--scheme block --format hf-fp8", model);
    snprintf(out, sizeof out, "%s/t", dir);
    run_expect(0, "convert -q --scheme tensor '%s' '%s'", fp8, out);
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    ck_assert(fp8_checkpoint_open(ctx, out, &ck) == FP8_OK);
    /* o_proj [64, 96] is one block, so it takes the exact path; down_proj
     * [256, 256] the value path */
    static const char *const w[] = { "model.layers.0.self_attn.o_proj",
                                     "model.layers.0.mlp.down_proj" };
    for (int k = 0; k < 2; k++) {
        char name[128];
        snprintf(name, sizeof name, "%s.weight_scale", w[k]);
        const fp8_tensor_info *sc = fp8_checkpoint_find(ck, name, NULL);
        ck_assert_msg(sc && sc->elements == 1, "%s", name);
        snprintf(name, sizeof name, "%s.weight_scale_inv", w[k]);
        ck_assert_msg(!fp8_checkpoint_find(ck, name, NULL), "%s", name);
    }
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
    free(fp8);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("convert");
    TCase *tc = tcase_create("convert");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_reblock_keeps_every_code_and_replicates_scales);
    tcase_add_test(tc, test_reblock_128_to_64_makes_deepseek_layout_load_at_tp32);
    tcase_add_test(tc, test_relabel_block_hf_fp8_to_compressed_tensors_and_back);
    tcase_add_test(tc, test_relabel_channel_bf16_scales_to_modelopt_f32);
    tcase_add_loop_test(tc, test_value_path_equals_quantize_of_f32_export, 0,
                        sizeof value_targets / sizeof *value_targets);
    tcase_add_test(tc, test_profile_in_the_options_struct);
    tcase_add_test(tc, test_same_bytes_for_every_thread_count);
    tcase_add_test(tc, test_report_matches_diff_dequant);
    tcase_add_test(tc, test_exact_weights_report_no_change);
    tcase_add_loop_test(tc, test_refusals_exit_with_the_reason_and_write_nothing, 0,
                        sizeof refusals / sizeof *refusals);
    tcase_add_test(tc, test_existing_output_needs_force);
    tcase_add_test(tc, test_verify_like_lists_every_difference);
    tcase_add_loop_test(tc, test_quantize_like_reproduces_the_reference, 0, 3);
    tcase_add_test(tc, test_quantize_like_maps_module_names);
    tcase_add_loop_test(tc, test_like_refuses_static_activations_and_no_layout, 0, 2);
    tcase_add_test(tc, test_convert_like_takes_the_reference_layout);
    tcase_add_test(tc, test_ue8m0_survives_a_compressed_tensors_round_trip);
    tcase_add_test(tc, test_convert_keeps_mistral_scale_names);
    tcase_add_test(tc, test_block_to_tensor_writes_the_per_tensor_name);
    tcase_add_test(tc, test_static_activation_scales_round_trip);
    tcase_add_test(tc, test_static_activations_need_one_per_weight);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
