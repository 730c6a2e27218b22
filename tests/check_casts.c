/*
 * check_casts.c - convert's casts of packed-FP4 weights (fp8conv(1),
 * convert, CASTS), end to end:
 *   - DeepSeek-V4's MXFP4 routed experts become FP8 E4M3 with an F32
 *     scale per 128x128 tile (every FP8 scale F32, as vLLM reads them under
 *     expert_dtype "fp8") (DeepSeek inference/convert.py
 *     cast_e2m1fn_to_e4m3fn): the release copy and copies written here
 *     (partial tiles, group exponents spread by up to 14) export the same
 *     bytes as their input (dequantize-for-export of both), verify clean,
 *     keep every other tensor's bytes, and say expert_dtype "fp8";
 *   - an element the cast would change (0.5 under a tile whose groups
 *     spread by 15) is refused with tensor, element, tile and spread, exit
 *     3, nothing left (the first such element, whatever -j); the same
 *     spread with values E4M3 holds is cast; the same bytes for any -j;
 *   - a NaN group scale is bad input; another target layout a usage error;
 *   - every exact cast: diff --dequant of input and output finds no
 *     difference;
 *   - NVFP4 ModelOpt <-> compressed-tensors: the twin copies (one draw,
 *     power-of-two global scales) cast into each other: the twin's shard
 *     and config.json, verify clean, the same export as the input;
 *     amax-derived global scales (no exact
 *     reciprocal) are rounded and counted, and --exact refuses them (exit
 *     2, nothing left); no --format is a usage error;
 *   - compressed-tensors MXFP4 to NVFP4 (compressed-tensors, the default,
 *     or ModelOpt; NVIDIA Model-Optimizer PR #1372's closed form): the
 *     release copy keeps every code, each group scale 2^k becomes two E4M3
 *     scales 2^(k - m) under the global 2^m (2^-m: a divisor), m the
 *     largest k of the weight's fused layer less 8; verify clean, the same
 *     export, the weight-only NVFP4 config; the same bytes for any -j; a
 *     group spread of 17 is exact, 18 refused (exit 3, tensor, group and
 *     spread, no output) unless its codes are all zero, and across q_proj
 *     and k_proj (one global scale in vLLM) too; another target is a usage
 *     error, compressed-tensors' old bias 125 and a NaN scale bad input;
 *   - FP8 blocks with ue8m0 (F32 power-of-two) scales to MXFP8 take the
 *     exact path: every code kept, each MX group the E8M0 byte of its
 *     block's scale, the same export; blocks with other scales are refused
 *     under --exact.
 */
#include "golden.h"

#define DSV4_RELEASE "testdata/releases/deepseek-v4"

static const char dsv4_config[] =
    "{\"architectures\": [\"DeepseekV4ForCausalLM\"], \"model_type\": \"deepseek_v4\", "
    "\"hidden_size\": 192, \"n_routed_experts\": 1, \"torch_dtype\": \"bfloat16\", "
    "\"expert_dtype\": \"fp4\", \"quantization_config\": {\"quant_method\": \"fp8\", "
    "\"fmt\": \"e4m3\", \"scale_fmt\": \"ue8m0\", \"activation_scheme\": \"dynamic\", "
    "\"weight_block_size\": [128, 128]}}";

/* An expert of XR x XC: two tile rows (the second partial), two tile
 * columns (the second partial: 2 groups of 32). */
enum { XR = 200, XC = 192, XG = XC / 32, TR = 128, TC = 192 };

typedef struct {
    uint8_t x_w[XR * XC / 2], x_s[XR * XG], t_w[TR * TC], t_s[2];
    uint16_t norm[4];
} dsv4_copy;

/* Group exponents 120..134 (spread 14), patterned codes; `low`: tile
 * [0, 0] also holds a group at 120 - 1 (spread 15), whose codes are 0.5
 * (low == 1: no E4M3 value under the tile's scale) or 1 (low == 2: one);
 * low == 3: a NaN group scale instead. */
static char *write_dsv4(const char *dir, const char *sub, dsv4_copy *c, int low)
{
    tu_pattern(c->x_w, sizeof c->x_w, 7);
    tu_pattern(c->x_s, sizeof c->x_s, 8);
    for (size_t i = 0; i < sizeof c->x_s; i++)
        c->x_s[i] = (uint8_t)(120 + c->x_s[i] % 15);
    c->x_s[0 * XG + 1] = 134; /* every tile holds both ends of the range */
    c->x_s[1 * XG + 2] = 120;
    c->x_s[130 * XG + 4] = 134;
    c->x_s[131 * XG + 5] = 120;
    c->x_s[130 * XG + 1] = 134;
    c->x_s[131 * XG + 0] = 120;
    c->x_s[0 * XG + 4] = 134;
    c->x_s[1 * XG + 5] = 120;
    if (low == 3) /* a NaN group scale */
        c->x_s[150 * XG + 3] = 0xFF;
    else if (low) {
        c->x_s[5 * XG + 2] = 119;
        memset(c->x_w + 5 * XC / 2 + 2 * 16, low == 1 ? 0x11 : 0x22, 16);
        c->x_s[150 * XG + 2] = 119; /* the second band too: the first is named */
        memset(c->x_w + 150 * XC / 2 + 2 * 16, low == 1 ? 0x11 : 0x22, 16);
    }
    tu_pattern(c->t_w, sizeof c->t_w, 9);
    for (size_t i = 0; i < sizeof c->t_w; i++)
        if ((c->t_w[i] & 0x7F) == 0x7F)
            c->t_w[i] = 0x7E;
    c->t_s[0] = 120, c->t_s[1] = 121;
    for (int i = 0; i < 4; i++)
        c->norm[i] = 0x3F80;
    t_spec ts[] = {
        { "layers.0.ffn.experts.0.w1.weight", FP8_DTYPE_I8, 2, { XR, XC / 2 }, c->x_w },
        { "layers.0.ffn.experts.0.w1.scale", FP8_DTYPE_F8_E8M0, 2, { XR, XG }, c->x_s },
        { "layers.0.attn.wq_a.weight", FP8_DTYPE_F8_E4M3, 2, { TR, TC }, c->t_w },
        { "layers.0.attn.wq_a.scale", FP8_DTYPE_F8_E8M0, 2, { 1, 2 }, c->t_s },
        { "layers.0.attn_norm.weight", FP8_DTYPE_BF16, 1, { 4 }, c->norm },
    };
    return write_ck(dir, sub, ts, sizeof ts / sizeof *ts, dsv4_config);
}

/* dequantize-for-export (bf16) of `a` and of `b` give the same files. */
static void expect_same_export(const char *dir, const char *a, const char *b)
{
    char *ea, *eb, *err = NULL;
    ck_assert(asprintf(&ea, "%s/export-a", dir) > 0 && asprintf(&eb, "%s/export-b", dir) > 0);
    int rc = tu_run_fmt(&err, "dequantize-for-export -q '%s' '%s'", a, ea);
    ck_assert_msg(rc == 0, "export of %s: exit %d: %s", a, rc, err);
    free(err);
    rc = tu_run_fmt(&err, "dequantize-for-export -q '%s' '%s'", b, eb);
    ck_assert_msg(rc == 0, "export of %s: exit %d: %s", b, rc, err);
    free(err);
    char *cmd;
    ck_assert(asprintf(&cmd, "diff -r '%s' '%s' >/dev/null", ea, eb) > 0);
    ck_assert_msg(system(cmd) == 0, "the exports of %s and %s differ", a, b);
    free(cmd);
    /* and fp8conv's own judge: every weight by value, FP4 and FP8 alike */
    rc = tu_run_fmt(&err, "diff -q --dequant '%s' '%s'", a, b);
    ck_assert_msg(rc == 0, "diff --dequant %s %s: exit %d: %s", a, b, rc, err);
    free(err);
    tu_rmrf(ea);
    tu_rmrf(eb);
    free(ea);
    free(eb);
}

static void expect_verify_clean(const char *model)
{
    char *out = NULL;
    int rc = tu_run_fmt(NULL, "verify -q '%s'", model);
    if (rc) {
        char *args;
        ck_assert(asprintf(&args, "verify '%s'", model) > 0);
        tu_run(args, &out, NULL);
        free(args);
    }
    ck_assert_msg(rc == 0, "verify %s: exit %d: %s", model, rc, out ? out : "");
    free(out);
}

static void expect_expert_dtype_fp8(const char *model)
{
    char *path;
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    cJSON *config = read_json(path);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(config, "expert_dtype");
    ck_assert_msg(cJSON_IsString(e) && !strcmp(e->valuestring, "fp8"),
                  "%s: expert_dtype is not \"fp8\" (vLLM's default is \"fp4\")", path);
    cJSON_Delete(config);
    free(path);
}

START_TEST(test_dsv4_release_copy_casts_exactly)
{
    char *dir = tu_tmpdir(), *out, *err = NULL;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert '%s' '%s'", DSV4_RELEASE, out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    expect_verify_clean(out);
    expect_same_export(dir, DSV4_RELEASE, out);
    expect_expert_dtype_fp8(out);
    fp8_tensor_info t;
    free(read_tensor_bytes(out, "layers.0.ffn.experts.1.w2.weight", &t));
    ck_assert_int_eq(t.dtype, FP8_DTYPE_F8_E4M3);
    ck_assert_int_eq(t.elements, 160 * 128);
    /* F32 scales, as vLLM reads them under expert_dtype "fp8"
     * (DeepSeek-V4-Flash-Base's layout): an E8M0 expert scale is read as its
     * byte there */
    free(read_tensor_bytes(out, "layers.0.ffn.experts.1.w2.scale", &t));
    ck_assert_int_eq(t.dtype, FP8_DTYPE_F32);
    ck_assert_int_eq(t.elements, 2 * 1);
    /* the trunk's scales: the same powers of two, F32 */
    fp8_tensor_info a, b;
    unsigned char *e = read_tensor_bytes(DSV4_RELEASE, "layers.0.attn.wkv.scale", &a);
    float *f = (float *)read_tensor_bytes(out, "layers.0.attn.wkv.scale", &b);
    ck_assert_int_eq(a.dtype, FP8_DTYPE_F8_E8M0);
    ck_assert_int_eq(b.dtype, FP8_DTYPE_F32);
    ck_assert_int_eq(a.elements, b.elements);
    for (uint64_t k = 0; k < a.elements; k++)
        ck_assert_msg(f[k] == ldexpf(1.0f, (int)e[k] - 127), "wkv.scale[%llu]: %g for byte %u",
                      (unsigned long long)k, (double)f[k], e[k]);
    free(e);
    free(f);
    /* the trunk's codes stay as they are */
    const char *kept[] = { "layers.0.attn.wkv.weight", "layers.0.hc_attn_fn",
                           "layers.0.ffn.gate.bias" };
    for (int i = 0; i < 3; i++) {
        fp8_tensor_info ta, tb;
        unsigned char *x = read_tensor_bytes(DSV4_RELEASE, kept[i], &ta);
        unsigned char *y = read_tensor_bytes(out, kept[i], &tb);
        ck_assert_msg(ta.dtype == tb.dtype && fp8_tensor_nbytes(&ta) == fp8_tensor_nbytes(&tb) &&
                          !memcmp(x, y, fp8_tensor_nbytes(&ta)),
                      "%s changed", kept[i]);
        free(x);
        free(y);
    }
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* _i: 0 spread 14, exact; 1 spread 15 with 0.5s, refused; 2 spread 15 with
 * 1s, which E4M3 holds at 2^-9: exact. */
START_TEST(test_dsv4_cast_exact_to_spread_14_and_refused_past_it)
{
    char *dir = tu_tmpdir(), *out, *err = NULL;
    dsv4_copy *c = calloc(1, sizeof *c);
    char *model = write_dsv4(dir, "dsv4", c, _i);
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert -j %d '%s' '%s'", 1 + _i % 2, model, out);
    if (_i == 1) {
        ck_assert_msg(rc == 3, "exit %d: %s", rc, err);
        ck_assert_msg(strstr(err, "layers.0.ffn.experts.0.w1.weight") &&
                          strstr(err, "element [5, 64]") && strstr(err, "tile [0, 0]") &&
                          strstr(err, "spread by 15"),
                      "%s", err);
        ck_assert(!exists(out));
        ck_assert_int_eq(count_entries(dir, ".out"), 0);
        /* --exact: the same refusal */
        free(err);
        rc = tu_run_fmt(&err, "convert --exact '%s' '%s'", model, out);
        ck_assert_msg(rc == 3 && !exists(out), "exit %d: %s", rc, err);
    } else {
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        expect_verify_clean(out);
        expect_same_export(dir, model, out);
        expect_expert_dtype_fp8(out);
        fp8_tensor_info t;
        float *s = (float *)read_tensor_bytes(out, "layers.0.ffn.experts.0.w1.scale", &t);
        ck_assert_int_eq(t.elements, 2 * 2);
        for (int k = 0; k < 4; k++) /* the largest group exponent, 134, less 6: 2^1 */
            ck_assert(s[k] == 2.0f);
        free(s);
    }
    free(err);
    free(c);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* Every band path (FP8CONV_DSV4_CAST: ref, the element-by-element
 * reference with tile_bytes_ref; table; the default, SSSE3 where the CPU
 * has it) writes the reference's bytes, codes and tile scales: every shift
 * -8 .. 6 meets every code in both nibbles (each group's low nibbles
 * 0..15, its high nibbles a rotation of them); a partial band and tile;
 * 260 groups a row (the fold of tile_bytes: 256 at a time, 16 a step, and
 * tails); a tile whose largest group is in its band's last row only; a
 * group at shift -9 whose codes E4M3 holds there; _i == 1: one code 0.5 in
 * that group, which every path refuses with the reference's message. */
enum { PR = 200, PC = 8320, PG = PC / 32 };
START_TEST(test_dsv4_cast_paths_write_the_reference_bytes)
{
    static uint8_t w[PR * PC / 2], sc[PR * PG];
    /* the codes E4M3 holds at shift -9: not +-0.5, +-1.5 */
    static const uint8_t held[12] = { 0, 2, 4, 5, 6, 7, 8, 10, 12, 13, 14, 15 };
    for (int r = 0; r < PR; r++)
        for (int g = 0; g < PG; g++) {
            sc[r * PG + g] = (uint8_t)(120 + (r + g) % 14);
            for (int b = 0; b < 16; b++)
                w[r * PC / 2 + g * 16 + b] = (uint8_t)(b | ((b + r + g) & 15) << 4);
        }
    /* tiles whose 134 (spread 14) is in the band's last row only */
    sc[127 * PG + 3] = sc[127 * PG + 256] = sc[199 * PG + 259] = 134;
    sc[7 * PG + 1] = 119; /* shift -9 under tile [0, 0]'s 134 */
    for (int b = 0; b < 16; b++)
        w[7 * PC / 2 + 16 + b] = (uint8_t)(held[b % 12] | held[(b + 5) % 12] << 4);
    if (_i == 1)
        w[7 * PC / 2 + 16 + 3] = 0x21; /* element [7, 38]: 0.5 * 2^-9 */
    uint16_t norm[4] = { 0x3F80, 0x3F80, 0x3F80, 0x3F80 };
    t_spec ts[] = {
        { "layers.0.ffn.experts.0.w1.weight", FP8_DTYPE_I8, 2, { PR, PC / 2 }, w },
        { "layers.0.ffn.experts.0.w1.scale", FP8_DTYPE_F8_E8M0, 2, { PR, PG }, sc },
        { "layers.0.attn_norm.weight", FP8_DTYPE_BF16, 1, { 4 }, norm },
    };
    char *dir = tu_tmpdir();
    char *model = write_ck(dir, "dsv4", ts, sizeof ts / sizeof *ts, dsv4_config);
    static const char *const paths[] = { "ref", "table", "ssse3" };
    char *first = NULL, *first_err = NULL;
    size_t n0 = 0;
    for (int k = 0; k < 3; k++) {
        char *out, *err = NULL;
        ck_assert(asprintf(&out, "%s/out-%s", dir, paths[k]) > 0);
        setenv("FP8CONV_DSV4_CAST", paths[k], 1);
        int rc = tu_run_fmt(&err, "convert -j %d '%s' '%s'", 1 + k % 2, model, out);
        unsetenv("FP8CONV_DSV4_CAST");
        if (_i == 1) {
            ck_assert_msg(rc == 3 && strstr(err, "element [7, 38]") && strstr(err, "spread by 15"),
                          "%s: exit %d: %s", paths[k], rc, err);
            ck_assert(!exists(out));
            if (!first_err)
                first_err = err;
            else {
                ck_assert_msg(!strcmp(err, first_err), "%s: '%s', the reference: '%s'", paths[k],
                              err, first_err);
                free(err);
            }
            free(out);
            continue;
        }
        ck_assert_msg(rc == 0, "%s: exit %d: %s", paths[k], rc, err);
        free(err);
        char *path;
        ck_assert(asprintf(&path, "%s/model.safetensors", out) > 0);
        size_t n;
        char *bytes = tu_slurp(path, &n);
        if (!first)
            first = bytes, n0 = n;
        else {
            ck_assert_msg(n == n0 && !memcmp(bytes, first, n),
                          "FP8CONV_DSV4_CAST=%s: other bytes than the reference's", paths[k]);
            free(bytes);
        }
        free(path);
        free(out);
    }
    if (_i == 0) { /* and the reference's bytes are the values */
        char *ref;
        ck_assert(asprintf(&ref, "%s/out-ref", dir) > 0);
        expect_same_export(dir, model, ref);
        free(ref);
    }
    free(first);
    free(first_err);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* verify under expert_dtype "fp8" (DeepSeek-V4-Flash-Base): FP8 scales are
 * F32, as vLLM reads them; an E8M0 expert scale, which vLLM reads as its
 * byte there, is e8m0-expert-scale, and an E8M0 trunk scale scale-dtype.
 * _i: 0 every scale F32 (clean); 1 the expert's E8M0; 2 the trunk's. */
START_TEST(test_dsv4_fp8_experts_take_f32_scales)
{
    static uint8_t w[TR * TC], e8[2] = { 120, 121 };
    static float f32[2] = { 0x1p-7f, 0x1p-6f };
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (uint8_t)(i % 0x7E);
    uint16_t norm[4] = { 0x3F80, 0x3F80, 0x3F80, 0x3F80 };
    t_spec ts[] = {
        { "layers.0.ffn.experts.0.w1.weight", FP8_DTYPE_F8_E4M3, 2, { TR, TC }, w },
        { "layers.0.ffn.experts.0.w1.scale", _i == 1 ? FP8_DTYPE_F8_E8M0 : FP8_DTYPE_F32, 2,
          { 1, 2 }, _i == 1 ? (void *)e8 : (void *)f32 },
        { "layers.0.attn.wq_a.weight", FP8_DTYPE_F8_E4M3, 2, { TR, TC }, w },
        { "layers.0.attn.wq_a.scale", _i == 2 ? FP8_DTYPE_F8_E8M0 : FP8_DTYPE_F32, 2, { 1, 2 },
          _i == 2 ? (void *)e8 : (void *)f32 },
        { "layers.0.attn_norm.weight", FP8_DTYPE_BF16, 1, { 4 }, norm },
    };
    char *config = strdup(dsv4_config), *at = strstr(config, "\"fp4\"");
    memcpy(at, "\"fp8\"", 5);
    char *dir = tu_tmpdir(), *out = NULL, *err = NULL;
    char *model = write_ck(dir, "fp8x", ts, sizeof ts / sizeof *ts, config);
    char *args;
    ck_assert(asprintf(&args, "verify '%s'", model) > 0);
    int rc = tu_run(args, &out, &err);
    free(args);
    const char *rule = _i == 1 ? "error [e8m0-expert-scale]" : "error [scale-dtype]";
    if (_i == 0)
        ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    else
        ck_assert_msg(rc == 1 && strstr(out, rule) &&
                          strstr(out, _i == 1 ? "experts.0.w1.scale" : "wq_a.scale"),
                      "exit %d: %s", rc, out);
    free(out);
    free(err);
    free(model);
    free(config);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dsv4_cast_same_bytes_for_any_thread_count)
{
    char *dir = tu_tmpdir(), *err = NULL;
    dsv4_copy *c = calloc(1, sizeof *c);
    char *model = write_dsv4(dir, "dsv4", c, 0);
    char *first = NULL;
    size_t n0 = 0;
    for (int j = 1; j <= 4; j++) {
        char *out, *path;
        ck_assert(asprintf(&out, "%s/out-%d", dir, j) > 0);
        int rc = tu_run_fmt(&err, "convert -j %d '%s' '%s'", j, model, out);
        ck_assert_msg(rc == 0, "-j %d: exit %d: %s", j, rc, err);
        free(err);
        ck_assert(asprintf(&path, "%s/model.safetensors", out) > 0);
        size_t n;
        char *bytes = tu_slurp(path, &n);
        if (!first)
            first = bytes, n0 = n;
        else {
            ck_assert_msg(n == n0 && !memcmp(bytes, first, n), "-j %d: other bytes than -j 1", j);
            free(bytes);
        }
        free(path);
        free(out);
    }
    free(first);
    free(c);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

/* V4.1 keeps expert_dtype inside quantization_config; a config without it
 * gets one at the top level (vLLM's default is "fp4") */
START_TEST(test_dsv4_cast_says_fp8_where_the_config_says_fp4)
{
    static const char *const configs[] = {
        "{\"model_type\": \"deepseek_v4\", \"quantization_config\": {\"quant_method\": \"fp8\", "
        "\"fmt\": \"e4m3\", \"scale_fmt\": \"ue8m0\", \"activation_scheme\": \"dynamic\", "
        "\"weight_block_size\": [128, 128], \"expert_dtype\": \"fp4\"}}",
        "{\"model_type\": \"deepseek_v4\", \"quantization_config\": {\"quant_method\": \"fp8\", "
        "\"fmt\": \"e4m3\", \"scale_fmt\": \"ue8m0\", \"activation_scheme\": \"dynamic\", "
        "\"weight_block_size\": [128, 128]}}",
    };
    char *dir = tu_tmpdir(), *out, *err = NULL, *path;
    dsv4_copy *c = calloc(1, sizeof *c);
    char *model = write_dsv4(dir, "dsv4", c, 0);
    ck_assert(asprintf(&path, "%s/config.json", model) > 0);
    tu_spit(path, configs[_i], strlen(configs[_i]));
    free(path);
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert '%s' '%s'", model, out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert(asprintf(&path, "%s/config.json", out) > 0);
    cJSON *config = read_json(path);
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(config, "expert_dtype");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(config, "quantization_config"), "expert_dtype");
    const cJSON *said = _i ? top : in;
    ck_assert_msg(cJSON_IsString(said) && !strcmp(said->valuestring, "fp8") && !(_i ? in : top),
                  "%s: expert_dtype not \"fp8\" where expected", path);
    cJSON_Delete(config);
    expect_verify_clean(out);
    free(path);
    free(err);
    free(c);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dsv4_nan_group_scale_is_bad_input)
{
    char *dir = tu_tmpdir(), *out, *err = NULL;
    dsv4_copy *c = calloc(1, sizeof *c);
    char *model = write_dsv4(dir, "dsv4-nan", c, 3);
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert '%s' '%s'", model, out);
    ck_assert_msg(rc == 3 && strstr(err, "NaN") && strstr(err, "layers.0.ffn.experts.0.w1.scale"),
                  "exit %d: %s", rc, err);
    ck_assert(!exists(out));
    free(err);
    free(c);
    free(out);
    free(model);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_dsv4_cast_to_another_layout_is_a_usage_error)
{
    static const char *const opts[] = { "--block 64x64", "--scheme channel",
                                        "--format compressed-tensors", "--scale-fmt float" };
    char *dir = tu_tmpdir(), *out, *err = NULL;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert %s '%s' '%s'", opts[_i], DSV4_RELEASE, out);
    ck_assert_msg(rc == 2 && strstr(err, "128x128"), "exit %d: %s", rc, err);
    ck_assert(!exists(out));
    free(err);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST


/* Every tensor of `twin` that is not BF16 is in `out` with the same dtype,
 * shape and bytes (the twins' unquantized tensors are separate draws). */
static void expect_quantized_as_twin(const char *out, const char *twin)
{
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_checkpoint *ck;
    ck_assert(fp8_checkpoint_open(ctx, twin, &ck) == FP8_OK);
    int n = 0;
    for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++) {
        const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
        if (t->dtype == FP8_DTYPE_BF16)
            continue;
        fp8_tensor_info a, b;
        unsigned char *x = read_tensor_bytes(twin, t->name, &a), *y = read_tensor_bytes(out, t->name, &b);
        ck_assert_msg(a.dtype == b.dtype && a.rank == b.rank && a.elements == b.elements &&
                          !memcmp(x, y, fp8_tensor_nbytes(&a)),
                      "%s: %s is not the twin's", out, t->name);
        free(x);
        free(y);
        n++;
    }
    ck_assert_int_eq(n, 7 * 4); /* 7 linears: codes, group scales, 2 second-level scales */
    fp8_checkpoint_close(ck);
    fp8_ctx_free(ctx);
}

/* config.json of `out` is the twin's, but for ModelOpt's producer (fp8conv
 * names itself in hf_quant_config.json and writes none in config.json). */
static void expect_config_as_twin(const char *out, const char *twin)
{
    char *pa, *pb;
    ck_assert(asprintf(&pa, "%s/config.json", out) > 0 && asprintf(&pb, "%s/config.json", twin) > 0);
    cJSON *a = read_json(pa), *b = read_json(pb);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(b, "quantization_config"),
                                            "producer");
    ck_assert_msg(cJSON_Compare(a, b, true), "%s differs from %s", pa, pb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(pa);
    free(pb);
}

/* _i: 0 ModelOpt -> compressed-tensors, 1 back */
START_TEST(test_nvfp4_twins_cast_into_each_other)
{
    static const char *const from[] = { "testdata/releases/nvfp4-modelopt",
                                        "testdata/releases/nvfp4-ct" };
    static const char *const fmt[] = { "compressed-tensors", "modelopt" };
    char *dir = tu_tmpdir(), *out, *err = NULL;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert --exact --format %s '%s' '%s'", fmt[_i], from[_i], out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    expect_verify_clean(out);
    expect_same_export(dir, from[_i], out);
    expect_quantized_as_twin(out, from[1 - _i]);
    expect_config_as_twin(out, from[1 - _i]);
    /* the twins draw their unquantized tensors alike: the whole shard is the twin's */
    char *cmd;
    ck_assert(asprintf(&cmd, "cmp -s '%s/model.safetensors' '%s/model.safetensors'", out,
                       from[1 - _i]) > 0);
    ck_assert_msg(system(cmd) == 0, "%s: not the twin's bytes", out);
    free(cmd);
    char *side;
    ck_assert(asprintf(&side, "%s/hf_quant_config.json", out) > 0);
    ck_assert_int_eq(exists(side), _i == 1);
    free(side);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* amax-derived global scales: 1 / g is no fp32 value */
START_TEST(test_nvfp4_inexact_reciprocal_rounded_or_refused)
{
    static const char *const from[] = { "testdata/releases/nvfp4-modelopt-amax",
                                        "testdata/releases/nvfp4-ct-amax" };
    static const char *const fmt[] = { "compressed-tensors", "modelopt" };
    char *dir = tu_tmpdir(), *out, *err = NULL, *stdout_ = NULL, *args;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert --exact --format %s '%s' '%s'", fmt[_i], from[_i], out);
    ck_assert_msg(rc == 2 && strstr(err, "--exact") && strstr(err, "no fp32 value") &&
                      strstr(err, _i ? ".weight_global_scale" : ".weight_scale_2"),
                  "exit %d: %s", rc, err);
    ck_assert(!exists(out));
    ck_assert_int_eq(count_entries(dir, ".out"), 0);
    free(err);
    ck_assert(asprintf(&args, "convert --json --format %s '%s' '%s'", fmt[_i], from[_i], out) > 0);
    rc = tu_run(args, &stdout_, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    cJSON *j = cJSON_Parse(stdout_);
    ck_assert(j);
    /* 7 weight scales rounded; the activations' 2^9 and 2^-9 invert exactly */
    ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(j, "reciprocals_rounded")->valueint, 7);
    cJSON_Delete(j);
    expect_verify_clean(out);
    /* the rounded reciprocals change values, as diff --dequant sees */
    free(err);
    rc = tu_run_fmt(&err, "diff -q --dequant '%s' '%s'", from[_i], out);
    ck_assert_msg(rc == 1, "diff --dequant: exit %d: %s", rc, err);
    free(stdout_);
    free(args);
    free(err);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_nvfp4_needs_the_other_format)
{
    static const char *const opts[] = { "", "--format modelopt", "--format hf-fp8",
                                        "--format compressed-tensors --block 64x64" };
    char *dir = tu_tmpdir(), *out, *err = NULL;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert %s testdata/releases/nvfp4-modelopt '%s'", opts[_i], out);
    ck_assert_msg(rc == 2 && strstr(err, "--format compressed-tensors"), "exit %d: %s", rc, err);
    ck_assert(!exists(out));
    free(err);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* _i: 0 ue8m0 block scales: exact; 1 float block scales: --exact refuses */
START_TEST(test_ue8m0_blocks_to_mxfp8_keep_every_code)
{
    char *dir = tu_tmpdir(), *q, *out, *err = NULL;
    ck_assert(asprintf(&q, "%s/q", dir) > 0 && asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "quantize -q --scheme block --scale-fmt %s testdata/llama-tiny '%s'",
                        _i ? "float" : "ue8m0", q);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    rc = tu_run_fmt(&err, "convert --exact --scheme mxfp8 '%s' '%s'", q, out);
    if (_i) {
        ck_assert_msg(rc == 2 && strstr(err, "MX scales are powers of two"), "exit %d: %s", rc,
                      err);
        ck_assert(!exists(out));
    } else {
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        expect_verify_clean(out);
        expect_same_export(dir, q, out);
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_checkpoint *ck;
        ck_assert(fp8_checkpoint_open(ctx, q, &ck) == FP8_OK);
        int n = 0;
        for (size_t i = 0; i < fp8_checkpoint_tensor_count(ck); i++) {
            const fp8_tensor_info *t = fp8_checkpoint_tensor(ck, i, NULL);
            if (t->dtype != FP8_DTYPE_F8_E4M3)
                continue;
            fp8_tensor_info a, b;
            unsigned char *x = read_tensor_bytes(q, t->name, &a), *y = read_tensor_bytes(out, t->name, &b);
            ck_assert_msg(b.dtype == FP8_DTYPE_F8_E4M3 && a.elements == b.elements &&
                              !memcmp(x, y, a.elements),
                          "%s: codes changed", t->name);
            free(x);
            free(y);
            n++;
        }
        ck_assert_int_gt(n, 0);
        fp8_checkpoint_close(ck);
        fp8_ctx_free(ctx);
    }
    free(err);
    free(q);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* _i: 0 ue8m0 blocks -> MXFP8 -> ue8m0 blocks: each group of a block has
 * the block's exponent, no code shifts, and the round trip gives the
 * same shards; 1 an MXFP8 copy of quantize's own (rceil scales per 32
 * elements): shifting a block's groups to its largest exponent loses bits,
 * and --exact refuses, naming the element */
START_TEST(test_mxfp8_to_ue8m0_blocks_shifts_codes_exactly)
{
    char *dir = tu_tmpdir(), *ue, *mx, *out, *err = NULL;
    ck_assert(asprintf(&ue, "%s/ue", dir) > 0 && asprintf(&mx, "%s/mx", dir) > 0 &&
              asprintf(&out, "%s/out", dir) > 0);
    int rc = _i ? tu_run_fmt(&err, "quantize -q --scheme mxfp8 testdata/llama-tiny '%s'", mx)
                : tu_run_fmt(&err, "quantize -q --scheme block --scale-fmt ue8m0 "
                                   "testdata/llama-tiny '%s'", ue);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    if (!_i) {
        rc = tu_run_fmt(&err, "convert --exact --scheme mxfp8 '%s' '%s'", ue, mx);
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        free(err);
    }
    rc = tu_run_fmt(&err, "convert --exact --scheme block --scale-fmt ue8m0 --format hf-fp8 "
                          "'%s' '%s'", mx, out);
    if (_i) {
        ck_assert_msg(rc == 2 && strstr(err, "--exact: element") && strstr(err, "loses a bit"),
                      "exit %d: %s", rc, err);
        ck_assert(!exists(out));
        ck_assert_int_eq(count_entries(dir, ".out"), 0);
    } else {
        ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
        /* (llama-tiny's 192-row q_proj loads at no TP in 128-row blocks: verify's [tp]
         * error is the input's too; the output is the input's bytes) */
        expect_same_export(dir, mx, out);
        const char *shards[] = { "config.json", "model-00001-of-00002.safetensors",
                                 "model-00002-of-00002.safetensors" };
        for (int k = 0; k < 3; k++) {
            char *a, *b, *cmd;
            ck_assert(asprintf(&a, "%s/%s", ue, shards[k]) > 0 &&
                      asprintf(&b, "%s/%s", out, shards[k]) > 0);
            ck_assert(asprintf(&cmd, "cmp -s '%s' '%s'", a, b) > 0);
            ck_assert_msg(system(cmd) == 0, "%s: not the same bytes after the round trip", b);
            free(cmd);
            free(a);
            free(b);
        }
    }
    free(err);
    free(ue);
    free(mx);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* ------------------------------------------------ MXFP4 -> NVFP4 (compressed-tensors MXFP4 in) */

#define MXCT_RELEASE "testdata/releases/mxfp4-ct"

/* The E4M3 value of byte b (tests: normal and subnormal powers of two). */
static double e4m3_value(unsigned b)
{
    unsigned e = (b >> 3) & 15, m = b & 7;
    return e ? ldexp(1.0 + m / 8.0, (int)e - 7) : ldexp(m, -9);
}

/* The F32 little-endian at p. */
static float f32_at(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Each MXFP4 weight X of `in` (weight_packed, weight_scale) is in `out` as
 * NVFP4 of `fmt`: the same code bytes, and for every MXFP4 group 2^k two
 * E4M3 group scales 2^(k - m) under the global 2^m (ModelOpt
 * weight_scale_2) or 2^-m (compressed-tensors weight_global_scale), m the
 * largest k of the weight's fused layer less 8. */
static void expect_mx_as_nvfp4(const char *in, const char *out, bool to_ct)
{
    static const char *const mods[] = { "self_attn.q_proj", "self_attn.k_proj",
                                        "self_attn.v_proj", "self_attn.o_proj",
                                        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };
    /* the fused layers' largest scale byte, by the first part's index */
    int fused[7] = { 0, 0, 0, 3, 4, 4, 6 };
    unsigned most[7] = { 0 };
    for (int i = 0; i < 7; i++) {
        char *sn;
        fp8_tensor_info st;
        ck_assert(asprintf(&sn, "model.layers.0.%s.weight_scale", mods[i]) > 0);
        unsigned char *s = read_tensor_bytes(in, sn, &st);
        for (uint64_t k = 0; k < st.elements; k++)
            most[fused[i]] = s[k] > most[fused[i]] ? s[k] : most[fused[i]];
        free(s);
        free(sn);
    }
    for (int i = 0; i < 7; i++) {
        char *wn, *sn, *ow, *og;
        ck_assert(asprintf(&wn, "model.layers.0.%s.weight_packed", mods[i]) > 0 &&
                  asprintf(&sn, "model.layers.0.%s.weight_scale", mods[i]) > 0 &&
                  asprintf(&ow, "model.layers.0.%s.%s", mods[i],
                           to_ct ? "weight_packed" : "weight") > 0 &&
                  asprintf(&og, "model.layers.0.%s.%s", mods[i],
                           to_ct ? "weight_global_scale" : "weight_scale_2") > 0);
        fp8_tensor_info a, b, s, q, g;
        unsigned char *x = read_tensor_bytes(in, wn, &a), *y = read_tensor_bytes(out, ow, &b);
        ck_assert_msg(b.dtype == FP8_DTYPE_U8 && a.elements == b.elements &&
                          !memcmp(x, y, a.elements),
                      "%s: codes changed", ow);
        unsigned char *e8 = read_tensor_bytes(in, sn, &s), *e4 = read_tensor_bytes(out, sn, &q);
        unsigned char *gl = read_tensor_bytes(out, og, &g);
        ck_assert(q.dtype == FP8_DTYPE_F8_E4M3 && q.elements == 2 * s.elements);
        ck_assert(g.dtype == FP8_DTYPE_F32 && g.elements == 1 && g.rank == (to_ct ? 1 : 0));
        int m = (int)most[fused[i]] - 127 - 8;
        ck_assert_msg(f32_at(gl) == (float)ldexp(1.0, to_ct ? -m : m), "%s: %g, m %d", og,
                      (double)f32_at(gl), m);
        for (uint64_t k = 0; k < s.elements; k++)
            for (int h = 0; h < 2; h++)
                ck_assert_msg(e4m3_value(e4[2 * k + h]) * ldexp(1.0, m) ==
                                  ldexp(1.0, (int)e8[k] - 127),
                              "%s: group %llu half %d: 0x%02x under 2^%d is not 2^%d", sn,
                              (unsigned long long)k, h, e4[2 * k + h], m, (int)e8[k] - 127);
        free(x);
        free(y);
        free(e8);
        free(e4);
        free(gl);
        free(wn);
        free(sn);
        free(ow);
        free(og);
    }
}

/* _i: 0 the default format (compressed-tensors), 1 --format
 * compressed-tensors, 2 --format modelopt: the release copy casts exactly */
START_TEST(test_mxfp4_ct_release_casts_to_nvfp4_exactly)
{
    static const char *const opt[] = { "", "--format compressed-tensors", "--format modelopt" };
    bool to_ct = _i < 2;
    char *dir = tu_tmpdir(), *out, *err = NULL, *path;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    int rc = tu_run_fmt(&err, "convert -q --exact %s '%s' '%s'", opt[_i], MXCT_RELEASE, out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    expect_verify_clean(out);
    expect_same_export(dir, MXCT_RELEASE, out);
    expect_mx_as_nvfp4(MXCT_RELEASE, out, to_ct);
    /* the NVFP4 copies' config (testdata/gen_fp4.py), weight-only */
    ck_assert(asprintf(&path, "%s/config.json", out) > 0);
    cJSON *c = read_json(path), *q = cJSON_GetObjectItemCaseSensitive(c, "quantization_config");
    if (to_ct) {
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(q, "format")->valuestring,
                         "nvfp4-pack-quantized");
        cJSON *g0 = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(q, "config_groups"), "group_0");
        cJSON *w = cJSON_GetObjectItemCaseSensitive(g0, "weights");
        ck_assert_int_eq(cJSON_GetObjectItemCaseSensitive(w, "group_size")->valueint, 16);
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(w, "strategy")->valuestring,
                         "tensor_group");
        ck_assert(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(g0, "input_activations")));
        ck_assert(!cJSON_GetObjectItemCaseSensitive(q, "version"));
    } else {
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(q, "quant_method")->valuestring,
                         "modelopt");
        ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(q, "quant_algo")->valuestring,
                         "W4A16_NVFP4");
    }
    /* config.json's list is "ignore" for both (ModelOpt's converted form, as vLLM reads it) */
    cJSON *ign = cJSON_GetObjectItemCaseSensitive(q, "ignore");
    ck_assert_msg(ign && !cJSON_GetObjectItemCaseSensitive(q, "exclude_modules"),
                  "config.json: no \"ignore\", or a flat exclude_modules");
    ck_assert_str_eq(cJSON_GetArrayItem(ign, 0)->valuestring, "lm_head");
    cJSON_Delete(c);
    free(path);
    ck_assert(asprintf(&path, "%s/hf_quant_config.json", out) > 0);
    ck_assert_int_eq(exists(path), !to_ct);
    free(path);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_mxfp4_to_nvfp4_same_bytes_for_any_thread_count)
{
    char *dir = tu_tmpdir(), *a, *b, *err = NULL, *cmd;
    ck_assert(asprintf(&a, "%s/a", dir) > 0 && asprintf(&b, "%s/b", dir) > 0);
    int rc = tu_run_fmt(&err, "convert -q -j 1 --format modelopt '%s' '%s'", MXCT_RELEASE, a);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    rc = tu_run_fmt(&err, "convert -q -j 7 --format modelopt '%s' '%s'", MXCT_RELEASE, b);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert(asprintf(&cmd, "cmp -s '%s/model.safetensors' '%s/model.safetensors'", a, b) > 0);
    ck_assert_msg(system(cmd) == 0, "-j 1 and -j 7 wrote other bytes");
    free(cmd);
    free(err);
    free(a);
    free(b);
    tu_tmpdir_free(dir);
}
END_TEST

static const char mxct_config[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", "
    "\"hidden_size\": 64, \"intermediate_size\": 64, \"num_hidden_layers\": 1, "
    "\"num_attention_heads\": 1, \"num_key_value_heads\": 1, \"head_dim\": 64, "
    "\"torch_dtype\": \"bfloat16\", \"quantization_config\": {\"config_groups\": {\"group_0\": "
    "{\"input_activations\": null, \"output_activations\": null, \"targets\": [\"Linear\"], "
    "\"weights\": {\"dynamic\": false, \"group_size\": 32, \"num_bits\": 4, "
    "\"scale_dtype\": \"torch.uint8\", \"strategy\": \"group\", \"symmetric\": true, "
    "\"type\": \"float\"}}}, \"format\": \"mxfp4-pack-quantized\", \"ignore\": [], "
    "\"kv_cache_scheme\": null, \"quant_method\": \"compressed-tensors\", "
    "\"quantization_status\": \"compressed\", \"version\": \"0.14.0\"}}";

/* Two MXFP4 linears [64, 64] (names a and b), group exponents 2^0 but
 * group [0, 1] of the low one's (b if low_is_b, else a), 2^-spread, or
 * every group of it when whole; codes nonzero throughout, but for that
 * group's when zero_low (+0 and -0 codes). */
static char *write_mx_pair(const char *dir, const char *a, const char *b, bool low_is_b,
                           int spread, bool whole, bool zero_low)
{
    enum { R = 64, C = 64 };
    static unsigned char codes[2][R * C / 2], scales[2][R * C / 32];
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < R * C / 2; i++)
            codes[t][i] = (unsigned char)((i * 37 + 11 + t) | 0x11); /* both nibbles nonzero */
        memset(scales[t], 127, sizeof scales[t]);
    }
    int lo = low_is_b ? 1 : 0;
    if (whole)
        memset(scales[lo], 127 - spread, sizeof scales[lo]);
    else
        scales[lo][1] = (unsigned char)(127 - spread); /* row 0, group 1 */
    if (zero_low)
        for (int i = 16; i < 32; i++)
            codes[lo][i] = i & 1 ? 0x88 : 0x08; /* -0 and +0 */
    char *wa, *sa, *wb, *sb;
    ck_assert(asprintf(&wa, "model.layers.0.%s.weight_packed", a) > 0 &&
              asprintf(&sa, "model.layers.0.%s.weight_scale", a) > 0 &&
              asprintf(&wb, "model.layers.0.%s.weight_packed", b) > 0 &&
              asprintf(&sb, "model.layers.0.%s.weight_scale", b) > 0);
    t_spec ts[] = {
        { wa, FP8_DTYPE_U8, 2, { R, C / 2 }, codes[0] },
        { sa, FP8_DTYPE_U8, 2, { R, C / 32 }, scales[0] },
        { wb, FP8_DTYPE_U8, 2, { R, C / 2 }, codes[1] },
        { sb, FP8_DTYPE_U8, 2, { R, C / 32 }, scales[1] },
    };
    char *model = write_ck(dir, "in", ts, 4, mxct_config);
    free(wa);
    free(sa);
    free(wb);
    free(sb);
    return model;
}

/* _i: 0 spread 17 in one tensor: exact; 1 spread 18: refused; 2 spread 18
 * where the low group's codes are all zero: exact; 3 spread 18 across
 * q_proj and k_proj, which vLLM fuses under one global scale: refused;
 * 4 the same across o_proj and down_proj (one global scale each): exact */
START_TEST(test_mxfp4_to_nvfp4_exact_to_spread_17_and_refused_past_it)
{
    static const struct {
        const char *a, *b;
        bool low_is_b;
        int spread;
        bool whole, zero_low, refused;
    } c[] = {
        { "self_attn.o_proj", "mlp.down_proj", false, 17, false, false, false },
        { "self_attn.o_proj", "mlp.down_proj", false, 18, false, false, true },
        { "self_attn.o_proj", "mlp.down_proj", false, 18, false, true, false },
        { "self_attn.q_proj", "self_attn.k_proj", true, 18, true, false, true },
        { "self_attn.o_proj", "mlp.down_proj", true, 18, true, false, false },
    };
    char *dir = tu_tmpdir(), *out, *err = NULL;
    char *in = write_mx_pair(dir, c[_i].a, c[_i].b, c[_i].low_is_b, c[_i].spread,
                             c[_i].whole, c[_i].zero_low);
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    for (int fmt = 0; fmt < 2; fmt++) {
        int rc = tu_run_fmt(&err, "convert -q --format %s '%s' '%s'",
                            fmt ? "modelopt" : "compressed-tensors", in, out);
        if (c[_i].refused) {
            char *who;
            ck_assert(asprintf(&who, "model.layers.0.%s.weight_packed'",
                               c[_i].low_is_b ? c[_i].b : c[_i].a) > 0);
            ck_assert_msg(rc == 3 && strstr(err, who) &&
                              strstr(err, c[_i].whole ? "group [0, 0]" : "group [0, 1]") &&
                              strstr(err, "lies 18 exponents below") &&
                              strstr(err, "spread of at most 17") &&
                              (_i != 3 || strstr(err, "fuses")),
                          "exit %d: %s", rc, err);
            ck_assert(!exists(out));
            ck_assert_int_eq(count_entries(dir, "out"), 0);
            free(who);
        } else {
            ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
            expect_same_export(dir, in, out);
            tu_rmrf(out);
        }
        free(err);
        err = NULL;
    }
    free(in);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

/* _i: another target (0 --format hf-fp8, 1 --scheme block): a usage
 * error; 2 scales written with compressed-tensors' old bias 125 (version
 * 0.13.0), 3 a NaN scale byte 0xff: bad input */
START_TEST(test_mxfp4_to_nvfp4_refusals)
{
    static const char *const args[] = {
        "--format hf-fp8 " MXCT_RELEASE, "--scheme block " MXCT_RELEASE,
        "testdata/releases/defect-mxfp4-ct-old-bias", NULL };
    char *dir = tu_tmpdir(), *out, *err = NULL;
    ck_assert(asprintf(&out, "%s/out", dir) > 0);
    /* 127 - (-128): group [0, 1] of o_proj's scale is 0xff */
    char *nan = _i == 3 ? write_mx_pair(dir, "self_attn.o_proj", "mlp.down_proj", false, -128,
                                        false, false)
                        : NULL;
    int rc = tu_run_fmt(&err, "convert %s '%s'", nan ? nan : args[_i], out);
    ck_assert_msg(_i < 2   ? rc == 2 && strstr(err, "converts to NVFP4 only")
                  : _i < 3 ? rc == 3 && strstr(err, "0.13.0")
                           : rc == 3 && strstr(err, "o_proj.weight_scale': element 1 is "
                                                    "the E8M0 NaN 0xff"),
                  "exit %d: %s", rc, err);
    free(nan);
    ck_assert(!exists(out));
    free(err);
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

static Suite *casts_suite(void)
{
    Suite *s = suite_create("casts");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_dsv4_release_copy_casts_exactly);
    tcase_add_loop_test(tc, test_dsv4_cast_exact_to_spread_14_and_refused_past_it, 0, 3);
    tcase_add_test(tc, test_dsv4_cast_same_bytes_for_any_thread_count);
    tcase_add_loop_test(tc, test_dsv4_cast_paths_write_the_reference_bytes, 0, 2);
    tcase_add_loop_test(tc, test_dsv4_fp8_experts_take_f32_scales, 0, 3);
    tcase_add_loop_test(tc, test_dsv4_cast_says_fp8_where_the_config_says_fp4, 0, 2);
    tcase_add_test(tc, test_dsv4_nan_group_scale_is_bad_input);
    tcase_add_loop_test(tc, test_dsv4_cast_to_another_layout_is_a_usage_error, 0, 4);
    tcase_add_loop_test(tc, test_nvfp4_twins_cast_into_each_other, 0, 2);
    tcase_add_loop_test(tc, test_nvfp4_inexact_reciprocal_rounded_or_refused, 0, 2);
    tcase_add_loop_test(tc, test_nvfp4_needs_the_other_format, 0, 4);
    tcase_add_loop_test(tc, test_ue8m0_blocks_to_mxfp8_keep_every_code, 0, 2);
    tcase_add_loop_test(tc, test_mxfp8_to_ue8m0_blocks_shifts_codes_exactly, 0, 2);
    tcase_add_loop_test(tc, test_mxfp4_ct_release_casts_to_nvfp4_exactly, 0, 3);
    tcase_add_test(tc, test_mxfp4_to_nvfp4_same_bytes_for_any_thread_count);
    tcase_add_loop_test(tc, test_mxfp4_to_nvfp4_exact_to_spread_17_and_refused_past_it, 0, 5);
    tcase_add_loop_test(tc, test_mxfp4_to_nvfp4_refusals, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run_suite(casts_suite()); }
