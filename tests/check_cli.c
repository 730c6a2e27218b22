/*
 * check_cli.c - the binary end to end: every malformed fixture refused with
 * exit 3 and a message naming the file and the rule, exit codes, the inspect
 * report and its JSON, and --help kept in step with the man page.
 */
#include "golden.h"

#include <cjson/cJSON.h>
#include <ctype.h>

/* fixture (under testdata/malformed/) -> a phrase its message must contain */
static const struct {
    const char *fixture, *rule;
} malformed[] = {
    { "too_short.safetensors", "shorter than 8 bytes" },
    { "header_length_zero.safetensors", "not strict JSON" },
    { "header_too_large.safetensors", "exceeds the limit of 100,000,000 bytes" },
    { "header_beyond_eof.safetensors", "runs past the end of the file" },
    { "header_not_utf8.safetensors", "not valid UTF-8" },
    { "header_overlong_utf8.safetensors", "not valid UTF-8" },
    { "header_utf8_bom.safetensors", "not strict JSON (RFC 8259): unexpected character" },
    { "header_not_json.safetensors", "not strict JSON" },
    { "header_truncated_json.safetensors", "not strict JSON (RFC 8259): syntax error" },
    { "header_trailing_comma.safetensors", "not strict JSON (RFC 8259): syntax error" },
    { "header_trailing_garbage.safetensors", "not strict JSON" },
    { "header_control_char_in_string.safetensors", "raw control character inside a string" },
    { "header_nul_escape_in_name.safetensors", "escaped NUL" },
    { "header_lone_surrogate_escape.safetensors", "a lone UTF-16 surrogate escape" },
    /* a high surrogate, then an escape that is not hex (fuzz_header, 2026-11-29: UB) */
    { "header_surrogate_then_bad_escape.safetensors", "a lone UTF-16 surrogate escape" },
    { "header_bad_whitespace.safetensors", "control character outside a string" },
    { "header_number_leading_zero.safetensors", "malformed number" },
    { "header_number_plus_sign.safetensors", "not strict JSON" },
    { "header_single_quotes.safetensors", "not strict JSON" },
    { "header_not_object.safetensors", "header is not a JSON object" },
    { "header_deep_nesting.safetensors", "nesting deeper than 128 levels" },
    { "entry_not_object.safetensors", "tensor 'w': entry is not an object" },
    { "entry_missing_dtype.safetensors", "missing field 'dtype'" },
    { "entry_missing_shape.safetensors", "missing field 'shape'" },
    { "entry_missing_data_offsets.safetensors", "missing field 'data_offsets'" },
    { "entry_duplicate_field.safetensors", "duplicate field 'dtype'" },
    { "data_offsets_three_values.safetensors", "data_offsets is not a list of two integers" },
    { "data_offsets_not_integer.safetensors", "data_offsets is not an integer" },
    { "data_offsets_exponent.safetensors", "data_offsets is not an integer" },
    { "data_offsets_negative.safetensors", "data_offsets is negative" },
    { "data_offsets_string.safetensors", "data_offsets is not a number" },
    { "data_offsets_exceed_u64.safetensors", "does not fit in 64 bits" },
    { "unknown_dtype.safetensors", "unknown dtype 'BF17'" },
    { "dtype_wrong_case.safetensors", "unknown dtype 'bf16'" },
    { "dtype_not_string.safetensors", "dtype is not a string" },
    { "shape_negative_dimension.safetensors", "shape[0] is negative" },
    { "shape_non_integer_dimension.safetensors", "shape[0] is not an integer" },
    { "shape_float_integral_dimension.safetensors", "shape[0] is not an integer" },
    { "shape_dimension_exceeds_u64.safetensors", "shape[0] does not fit in 64 bits" },
    { "shape_not_array.safetensors", "shape is not a list of integers" },
    { "metadata_not_object.safetensors", "__metadata__ is not an object of strings" },
    { "metadata_value_not_string.safetensors", "__metadata__ value of 'format' is not a string" },
    { "duplicate_tensor_name.safetensors", "appears twice" },
    { "duplicate_tensor_name_identical.safetensors", "appears twice" },
    { "offsets_not_starting_at_zero.safetensors", "does not start at offset 0" },
    { "offsets_gap.safetensors", "leave a gap of 4 bytes" },
    { "overlapping_offsets.safetensors", "overlap tensor 'a'" },
    { "offsets_end_before_begin.safetensors", "end before they begin" },
    { "element_count_overflow.safetensors", "element count overflows 64 bits" },
    { "element_bits_overflow.safetensors", "size in bits overflows 64 bits" },
    { "fractional_byte_size.safetensors", "not a whole number of bytes" },
    { "size_mismatch.safetensors", "span 4 bytes but 2 elements of F32 need 8" },
    { "trailing_bytes.safetensors", "trailing bytes after the last tensor" },
    { "missing_bytes.safetensors", "missing bytes" },
    { "offset_huge.safetensors", "overflows 64 bits" },
    { "offset_end_beyond_eof.safetensors", "missing bytes" },
    { "dir_index_missing_tensor", "'c.weight' is mapped to model-00002-of-00002.safetensors, which does not hold it" },
    { "dir_unmapped_tensor", "'c.weight' is in model-00002-of-00002.safetensors but not in model.safetensors.index.json" },
    { "dir_index_missing_shard", "shard model-00002-of-00002.safetensors is named by" },
    { "dir_duplicate_across_shards", "'a.weight' is in both" },
    { "dir_index_not_json", "model.safetensors.index.json: not valid JSON" },
    { "dir_index_no_weight_map", "no \"weight_map\" object" },
    { "dir_shard_malformed", "model-00002-of-00002.safetensors: tensor 'c.weight': data_offsets [4, 12] overlap" },
    { "dir_empty", "not a checkpoint: no *.safetensors file in it" },
};
#define NMALFORMED (sizeof malformed / sizeof malformed[0])

START_TEST(test_malformed_fixture_is_refused_with_exit_3)
{
    char args[512], *out, *err;
    snprintf(args, sizeof args, "inspect testdata/malformed/%s", malformed[_i].fixture);
    int rc = tu_run(args, &out, &err);
    ck_assert_msg(rc == 3, "%s: exit %d, stderr: %s", malformed[_i].fixture, rc, err);
    ck_assert_msg(strncmp(err, "fp8conv: testdata/malformed/", 28) == 0,
                  "%s: message does not name the file: %s", malformed[_i].fixture, err);
    ck_assert_msg(strstr(err, malformed[_i].rule), "%s: message lacks '%s': %s",
                  malformed[_i].fixture, malformed[_i].rule, err);
    ck_assert_msg(*out == '\0', "%s: printed a report on stdout", malformed[_i].fixture);
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "one line expected: %s", err);
    free(out);
    free(err);
}
END_TEST

/* Every fixture in MANIFEST.tsv is covered: by the table above or as accepted. */
START_TEST(test_every_manifest_fixture_is_covered)
{
    char *manifest = tu_slurp("testdata/malformed/MANIFEST.tsv", NULL);
    int lines = 0;
    for (char *line = strtok(manifest, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        ck_assert_ptr_nonnull(tab);
        *tab = '\0';
        lines++;
        if (strncmp(line, "testdata/accepted/", 18) == 0) {
            char args[512];
            snprintf(args, sizeof args, "inspect %s", line);
            ck_assert_msg(tu_run(args, NULL, NULL) == 0, "%s refused", line);
            continue;
        }
        const char *name = line + strlen("testdata/malformed/");
        size_t n = strlen(name);
        if (n && name[n - 1] == '/')
            n--;
        bool found = false;
        for (size_t i = 0; i < NMALFORMED && !found; i++)
            found = strlen(malformed[i].fixture) == n && !strncmp(malformed[i].fixture, name, n);
        ck_assert_msg(found, "%s has no expected message in check_cli.c", line);
    }
    ck_assert_int_ge(lines, 70);
    free(manifest);
}
END_TEST

START_TEST(test_inspect_sample_table_and_summary)
{
    char *out;
    ck_assert_int_eq(tu_run("inspect testdata/llama-tiny", &out, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "NAME"));
    ck_assert_ptr_nonnull(strstr(out, "model.layers.0.mlp.down_proj.weight"));
    ck_assert_ptr_nonnull(strstr(out, "[192, 544]"));
    ck_assert_ptr_nonnull(strstr(out, "model-00002-of-00002.safetensors"));
    ck_assert_ptr_nonnull(strstr(out, "tensors: 21  shards: 2 (indexed)  bytes: 2.30 MiB\n"));
    ck_assert_ptr_nonnull(strstr(out, "bytes by dtype: BF16 2.30 MiB (21 tensors)\n"));
    ck_assert_ptr_nonnull(strstr(out, "index total_size: 2416512\n"));
    ck_assert_ptr_nonnull(strstr(out, "config.json: no quantization_config"));
    free(out);
}
END_TEST

START_TEST(test_inspect_json_shape)
{
    char *out;
    ck_assert_int_eq(tu_run("inspect --json testdata/deepseek-moe-tiny", &out, NULL), 0);
    cJSON *root = cJSON_Parse(out);
    ck_assert_msg(root != NULL, "not JSON: %.200s", out);
    ck_assert_int_eq(cJSON_GetObjectItem(root, "inspect_version")->valueint, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(root, "kind")->valuestring, "directory");
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(root, "index")));
    cJSON *tensors = cJSON_GetObjectItem(root, "tensors");
    ck_assert_int_eq(cJSON_GetArraySize(tensors), 41);
    const char *prev = "";
    bool saw_bias = false;
    for (cJSON *t = tensors->child; t; t = t->next) {
        const char *name = cJSON_GetObjectItem(t, "name")->valuestring;
        ck_assert_msg(strcmp(prev, name) < 0, "tensors not sorted by name");
        prev = name;
        if (strstr(name, "e_score_correction_bias")) {
            saw_bias = true;
            ck_assert_str_eq(cJSON_GetObjectItem(t, "dtype")->valuestring, "F32");
            ck_assert_int_eq(cJSON_GetObjectItem(t, "bytes")->valueint, 16);
        }
        ck_assert_str_eq(cJSON_GetObjectItem(t, "file")->valuestring, "model.safetensors");
        ck_assert(cJSON_IsArray(cJSON_GetObjectItem(t, "shape")));
    }
    ck_assert(saw_bias);
    cJSON *shards = cJSON_GetObjectItem(root, "shards");
    ck_assert_int_eq(cJSON_GetArraySize(shards), 1);
    cJSON *meta = cJSON_GetObjectItem(shards->child, "metadata");
    ck_assert_str_eq(cJSON_GetObjectItem(meta, "format")->valuestring, "pt");
    cJSON *sum = cJSON_GetObjectItem(root, "summary");
    ck_assert_int_eq(cJSON_GetObjectItem(sum, "tensors")->valueint, 41);
    ck_assert_int_eq(cJSON_GetObjectItem(sum, "bytes")->valuedouble, 2954384);
    cJSON *by = cJSON_GetObjectItem(sum, "bytes_by_dtype");
    ck_assert_int_eq(cJSON_GetObjectItem(by, "F32")->valueint, 16);
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(sum, "index_total_size")));
    ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(sum, "config")));
    ck_assert(cJSON_IsFalse(cJSON_GetObjectItem(sum, "quantization_config")));
    ck_assert(cJSON_IsNull(cJSON_GetObjectItem(sum, "quant_method")));
    cJSON_Delete(root);
    free(out);
}
END_TEST

START_TEST(test_inspect_reports_quant_method)
{
    char *dir = tu_tmpdir(), path[512], *out;
    snprintf(path, sizeof path, "cp testdata/deepseek-moe-tiny/model.safetensors %s/", dir);
    ck_assert_int_eq(system(path), 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *cfg = "{\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\"}}";
    tu_spit(path, cfg, strlen(cfg));
    snprintf(path, sizeof path, "inspect %s", dir);
    ck_assert_int_eq(tu_run(path, &out, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "config.json: quantization_config, quant_method fp8"));
    free(out);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_large_offsets_printed_exactly)
{
    /* a zero-sized tensor with a dimension of 2^64-1: JSON must carry it exactly */
    char *out;
    ck_assert_int_eq(tu_run("inspect --json testdata/golden/zero_sized_huge_dims.safetensors", &out,
                            NULL),
                     0);
    ck_assert_ptr_nonnull(strstr(out, "18446744073709551615"));
    free(out);
}
END_TEST

START_TEST(test_usage_errors_exit_2)
{
    static const char *cases[] = {
        "",                                 /* no command */
        "frobnicate",                       /* unknown command */
        "inspect",                          /* missing PATH */
        "inspect a b",                      /* two PATHs */
        "inspect --bogus testdata/llama-tiny",
        "inspect --device gpu testdata/llama-tiny",
        "inspect -j 0 testdata/llama-tiny",
        "inspect -j many testdata/llama-tiny",
        "inspect --progress sometimes testdata/llama-tiny",
        "inspect testdata/llama-tiny --threads",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *err;
        int rc = tu_run(cases[i], NULL, &err);
        ck_assert_msg(rc == 2, "'%s': exit %d", cases[i], rc);
        ck_assert_msg(strstr(err, "fp8conv: ") || strstr(err, "usage:"), "'%s': %s", cases[i], err);
        free(err);
    }
}
END_TEST

START_TEST(test_options_anywhere_and_double_dash)
{
    ck_assert_int_eq(tu_run("inspect testdata/llama-tiny --json -j 2 --progress never", NULL, NULL),
                     0);
    ck_assert_int_eq(tu_run("inspect -q -- testdata/llama-tiny", NULL, NULL), 0);
}
END_TEST


/* issue 45: a mistyped long option gets the nearest one; a Hub id given
 * for a path that does not exist gets the download command (exit 4 as any
 * path that cannot be opened); an existing owner/name path is read. */
START_TEST(test_mistyped_option_and_hub_id_are_explained)
{
    char *err;
    ck_assert_int_eq(tu_run("quantize --blok 64x64 a b", NULL, &err), 2);
    ck_assert_msg(strstr(err, "unknown option '--blok'; did you mean '--block'?"), "%s", err);
    free(err);
    ck_assert_int_eq(tu_run("verify --stirct testdata/llama-tiny", NULL, &err), 2);
    ck_assert_msg(strstr(err, "did you mean '--strict'?"), "%s", err);
    free(err);
    ck_assert_int_eq(tu_run("inspect --zzzzzz testdata/llama-tiny", NULL, &err), 2);
    ck_assert_msg(!strstr(err, "did you mean"), "%s", err);
    free(err);
    ck_assert_int_eq(tu_run("quantize meta-llama/Llama-3.1-8B out", NULL, &err), 4);
    ck_assert_msg(strstr(err, "meta-llama/Llama-3.1-8B: cannot open: no such file or directory; "
                              "if it is a Hugging Face Hub id") &&
                  strstr(err, "hf download meta-llama/Llama-3.1-8B --local-dir Llama-3.1-8B"),
                  "%s", err);
    free(err);
    ck_assert_int_eq(tu_run("inspect testdata/llama-tiny", NULL, &err), 0);
    free(err);
    ck_assert_int_eq(tu_run("inspect no/model.safetensors", NULL, &err), 4);
    ck_assert_msg(!strstr(err, "hf download"), "%s", err);
    free(err);
}
END_TEST


/* issue 45: the build says one short line a step, the whole command with
 * V=1 (built into a scratch BUILD). */
START_TEST(test_build_lines_are_short_unless_v1)
{
    char *dir = tu_tmpdir(), *cmd, *out;
    for (int v = 0; v <= 1; v++) {
        ck_assert(asprintf(&cmd, "env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory "
                                 "-B BUILD=%s HAVE_CUDA=0 V=%d %s/lib/common/status.o > %s/log 2>&1",
                           dir, v, dir, dir) > 0);
        ck_assert_msg(system(cmd) == 0, "%s", cmd);
        free(cmd);
        ck_assert(asprintf(&cmd, "%s/log", dir) > 0);
        out = tu_slurp(cmd, NULL);
        free(cmd);
        char want[600];
        snprintf(want, sizeof want, "  CC      %s/lib/common/status.o\n", dir);
        ck_assert_msg(v ? !strstr(out, want) && strstr(out, "-Wall")
                        : strstr(out, want) && !strstr(out, "-Wall"), "V=%d: %s", v, out);
        free(out);
    }
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_unreadable_path_exit_4)
{
    char *err;
    ck_assert_int_eq(tu_run("inspect /nonexistent/model.safetensors", NULL, &err), 4);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/model.safetensors: cannot open"));
    free(err);
}
END_TEST

/* Whether --version lists a GPU: then --device cuda runs on it. */
static bool gpu_visible(void)
{
    char *out;
    ck_assert_int_eq(tu_run("--version", &out, NULL), 0);
    ck_assert_ptr_nonnull(strstr(out, "fp8conv " FP8CONV_VERSION));
    bool gpu = strstr(out, "\ngpu 0: ") != NULL;
    free(out);
    return gpu;
}

START_TEST(test_device_cuda_without_gpu_exit_5)
{
    int rc = tu_run("inspect --device cuda testdata/llama-tiny", NULL, NULL);
    ck_assert_int_eq(rc, gpu_visible() ? 0 : 5);
    ck_assert_int_eq(tu_run("inspect --device cpu testdata/llama-tiny", NULL, NULL), 0);
    ck_assert_int_eq(tu_run("inspect --device auto testdata/llama-tiny", NULL, NULL), 0);
}
END_TEST

START_TEST(test_convert_on_cuda_without_gpu_exit_5_leaves_nothing)
{
    static const char *const commands[] = {
        "quantize --device cuda testdata/llama-tiny",
        "dequantize-for-export --device cuda testdata/deepseek-fp8-tiny",
    };
    bool gpu = gpu_visible();
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        char *dir = tu_tmpdir(), *args, *err;
        ck_assert(asprintf(&args, "%s %s/out", commands[i], dir) > 0);
        int rc = tu_run(args, NULL, &err);
        if (gpu) { /* the same command does the work on a GPU machine */
            ck_assert_msg(rc == 0, "%s: %s", args, err);
            ck_assert_int_eq(count_entries(dir, "out"), 1);
        } else {
            ck_assert_int_eq(rc, 5);
            ck_assert_msg(strstr(err, "--device cuda: ") != NULL, "%s", err);
            ck_assert_int_eq(count_entries(dir, "out") + count_entries(dir, ".out"), 0);
        }
        free(err);
        free(args);
        tu_tmpdir_free(dir);
    }
}
END_TEST

/* --device auto is the CPU (fp8conv(1), GPU: the CPU path was faster where
 * measured) and --device cuda, where there is a GPU, writes exactly what
 * --device cpu writes; the JSON report says where the math ran. */
START_TEST(test_device_auto_writes_the_cpu_bytes)
{
    static const char *const commands[] = {
        "quantize testdata/quant-edge",
        "quantize --scheme block --block 64x32 --scale-fmt ue8m0 testdata/quant-edge",
        "quantize --scheme channel testdata/quant-edge",
        "quantize --scheme tensor testdata/quant-edge",
        "quantize --scheme mxfp8 testdata/quant-edge",
        "quantize --scheme mxfp8 --mx-rounding floor testdata/quant-edge",
        "quantize --scheme tensor --format compressed-tensors testdata/deepseek-moe-tiny",
        "dequantize-for-export testdata/deepseek-fp8-tiny",
        "dequantize-for-export --dtype f16 testdata/deepseek-fp8-tiny",
        "dequantize-for-export --dtype f32 testdata/deepseek-fp8-tiny",
    };
    bool gpu = gpu_visible();
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        char *dir = tu_tmpdir(), *args, *out, *cmd;
        const char *devices[] = { "cpu", "auto", "cuda" };
        for (int d = 0; d < (gpu ? 3 : 2); d++) {
            ck_assert(asprintf(&args, "%s %s/%s --json -j 1 --device %s", commands[i], dir,
                               devices[d], devices[d]) > 0);
            ck_assert_msg(tu_run(args, &out, NULL) == 0, "%s", args);
            const char *want = d < 2 ? "\"device\":\t\"cpu\"" : "\"device\":\t\"cuda\"";
            ck_assert_msg(strstr(out, want) != NULL, "%s: no %s in %s", args, want, out);
            free(out);
            free(args);
        }
        ck_assert(asprintf(&cmd, "diff -r %s/cpu %s/auto >/dev/null", dir, dir) > 0);
        ck_assert_msg(system(cmd) == 0, "%s: --device auto and cpu differ", commands[i]);
        free(cmd);
        if (gpu) {
            ck_assert(asprintf(&cmd, "diff -r %s/cpu %s/cuda >/dev/null", dir, dir) > 0);
            ck_assert_msg(system(cmd) == 0, "%s: --device cuda and cpu differ", commands[i]);
            free(cmd);
        }
        tu_tmpdir_free(dir);
    }
}
END_TEST

/* Collects every "--word" token of `text` into `set` (space-separated). */
static void long_options(const char *text, char *set, size_t cap)
{
    set[0] = '\0';
    for (const char *p = text; (p = strstr(p, "--")); p += 2) {
        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '-'))
            continue;
        size_t n = 2;
        while (isalnum((unsigned char)p[n]) || p[n] == '-')
            n++;
        if (n == 2)
            continue;
        char word[64];
        snprintf(word, sizeof word, " %.*s ", (int)n, p);
        if (!strstr(set, word) && strlen(set) + strlen(word) < cap)
            strcat(set, word + (set[0] ? 1 : 0)), strcat(set, " ");
    }
}

START_TEST(test_help_and_man_page_agree)
{
    static const char *const commands[] = { "inspect", "quantize", "dequantize-for-export",
                                            "convert", "verify", "diff" };
    char *help, *man = tu_slurp("man/fp8conv.1", NULL);
    ck_assert_int_eq(tu_run("--help", &help, NULL), 0);
    char opts[4096], all[32768];
    size_t len = (size_t)snprintf(all, sizeof all, "%s", help);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char *sub, args[64], cm[96];
        snprintf(args, sizeof args, "%s --help", commands[i]);
        ck_assert_int_eq(tu_run(args, &sub, NULL), 0);
        len += (size_t)snprintf(all + len, sizeof all - len, "\n%s", sub);
        free(sub);
        /* every command is in --help and has its entry in the man page */
        ck_assert_msg(strstr(help, commands[i]), "--help lacks %s", commands[i]);
        snprintf(cm, sizeof cm, ".It Cm %s", commands[i]);
        ck_assert_msg(strstr(man, cm), "man page lacks the entry %s", cm);
    }
    ck_assert(len < sizeof all);
    long_options(all, opts, sizeof opts);
    ck_assert_ptr_nonnull(strstr(opts, "--device"));
    /* every option --help prints is documented (mdoc spells --x as "Fl -x") */
    for (char *o = strtok(opts, " "); o; o = strtok(NULL, " ")) {
        char fl[80];
        snprintf(fl, sizeof fl, "Fl %s", o + 1);
        ck_assert_msg(strstr(man, fl), "man page does not document %s", o);
    }
    /* every option the man page documents exists in --help */
    for (const char *p = man; (p = strstr(p, "Fl -")); p += 4) {
        size_t n = 0;
        while (isalnum((unsigned char)p[4 + n]) || p[4 + n] == '-')
            n++;
        if (n == 0)
            continue; /* ".Fl -" alone: the end of options, "--" */
        char opt[64];
        snprintf(opt, sizeof opt, "-%.*s", (int)n, p + 3);
        ck_assert_msg(strstr(all, opt), "man page documents %s, which --help lacks", opt);
    }

    /* and every exit code */
    for (int code = 0; code <= 5; code++) {
        char row[16];
        snprintf(row, sizeof row, ".It %d", code);
        ck_assert_msg(strstr(man, row), "man page lacks exit status %d", code);
    }
    free(help);
    free(man);
}
END_TEST


/* issue 45: each command's --help lists the exit codes it can give: every
 * command takes --device (the common options), and --device cuda without a
 * GPU exits 5, so each lists 5; every code listed is one of the man page's. */
START_TEST(test_help_exit_codes_are_the_commands)
{
    static const char *const commands[][2] = {
        { "inspect", "" }, { "verify", "" }, { "diff", " testdata/llama-tiny" },
        { "quantize", " OUT" }, { "dequantize-for-export", " OUT" }, { "convert", " OUT" },
    };
    char *man = tu_slurp("man/fp8conv.1", NULL);
    bool gpu = gpu_visible();
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        char *help, args[128];
        snprintf(args, sizeof args, "%s --help", commands[i][0]);
        ck_assert_int_eq(tu_run(args, &help, NULL), 0);
        char *exits = strstr(help, "Exit status: ");
        ck_assert_msg(exits, "%s", help);
        for (const char *p = exits + 12; *p && strncmp(p, "See ", 4); p++)
            if ((p[-1] == ' ' || p[-1] == '\n') && p[0] >= '0' && p[0] <= '9' && p[1] == ' ') {
                char row[16];
                snprintf(row, sizeof row, ".It %c\n", p[0]);
                ck_assert_msg(strstr(man, row), "%s: exit %c is not in the man page", args, p[0]);
            }
        ck_assert_msg(strstr(exits, "5 device error"), "%s", exits);
        if (!gpu) {
            char *err;
            snprintf(args, sizeof args, "%s --device cuda testdata/llama-tiny%s", commands[i][0],
                     commands[i][1]);
            ck_assert_int_eq(tu_run(args, NULL, &err), 5);
            free(err);
        }
        free(help);
    }
    free(man);
}
END_TEST

/* ---------------------------------------------------------------- --json failures */

/* fp8conv ARGS (--json among them) fails with `rc`: stdout is one JSON
 * object whose exit_code, rule, file and tensor are these (NULL: null) and
 * whose message is the text on stderr. */
static void expect_json_failure(const char *args, int rc, const char *command, const char *rule,
                                const char *file, const char *tensor)
{
    char *out, *err;
    ck_assert_msg(tu_run(args, &out, &err) == rc, "%s: want exit %d; %s", args, rc, err);
    cJSON *j = cJSON_Parse(out);
    ck_assert_msg(cJSON_IsObject(j), "%s: stdout is not one JSON object: %s", args, out);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "error_version")->valueint, 1);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "exit_code")->valueint, rc);
    const char *keys[] = { "command", "rule", "file", "tensor" };
    const char *want[] = { command, rule, file, tensor };
    for (int k = 0; k < 4; k++) {
        const cJSON *v = cJSON_GetObjectItem(j, keys[k]);
        if (want[k])
            ck_assert_msg(cJSON_IsString(v) && strcmp(v->valuestring, want[k]) == 0,
                          "%s: %s is not '%s': %s", args, keys[k], want[k], out);
        else
            ck_assert_msg(cJSON_IsNull(v), "%s: %s is not null: %s", args, keys[k], out);
    }
    const char *msg = cJSON_GetObjectItem(j, "message")->valuestring;
    char *line;
    ck_assert(asprintf(&line, "fp8conv: %s\n", msg) > 0);
    ck_assert_msg(strstr(err, line), "%s: message '%s' is not what stderr says: %s", args, msg, err);
    free(line);
    cJSON_Delete(j);
    free(out);
    free(err);
}

START_TEST(test_json_failure_is_one_object_for_every_command_and_exit_code)
{
    char *dir = tu_tmpdir(), *args;
    const char *bad = "testdata/malformed/dtype_wrong_case.safetensors";
    /* the commands with INPUT OUTPUT, then those with one or two operands */
    const char *two[] = { "quantize", "convert", "dequantize-for-export" };
    for (int c = 0; c < 3; c++) {
        ck_assert(asprintf(&args, "%s --json --bogus model %s/out", two[c], dir) > 0);
        expect_json_failure(args, 2, two[c], "usage", NULL, NULL);
        free(args);
        ck_assert(asprintf(&args, "%s --json %s %s/out", two[c], bad, dir) > 0);
        expect_json_failure(args, 3, two[c], "bad_input", bad, "a");
        free(args);
        ck_assert(asprintf(&args, "%s --json /nonexistent/m %s/out", two[c], dir) > 0);
        expect_json_failure(args, 4, two[c], "io", "/nonexistent/m", NULL);
        free(args);
    }
    expect_json_failure("inspect --bogus --json x", 2, "inspect", "usage", NULL, NULL);
    expect_json_failure("inspect --json testdata/malformed/dtype_wrong_case.safetensors", 3,
                        "inspect", "bad_input", bad, "a");
    expect_json_failure("inspect --json /nonexistent/m", 4, "inspect", "io", "/nonexistent/m", NULL);
    expect_json_failure("diff --json testdata/llama-tiny", 2, "diff", "usage", NULL, NULL);
    expect_json_failure("diff --json testdata/llama-tiny testdata/malformed/dtype_wrong_case.safetensors",
                        3, "diff", "bad_input", bad, "a");
    expect_json_failure("diff --json testdata/llama-tiny /nonexistent/m", 4, "diff", "io",
                        "/nonexistent/m", NULL);
    expect_json_failure("verify --json --tp 0 testdata/verify/clean-block-hf-fp8", 2, "verify",
                        "usage", NULL, NULL);
    expect_json_failure("verify --json --against testdata/malformed/dtype_wrong_case.safetensors "
                        "testdata/verify/clean-block-hf-fp8", 3, "verify", "bad_input", bad, "a");
    expect_json_failure("verify --json /nonexistent/m", 4, "verify", "io", "/nonexistent/m", NULL);
    /* before the command's options are read: an unknown command, --json after it */
    expect_json_failure("bogus --json", 2, "bogus", "usage", NULL, NULL);
    expect_json_failure("--json --bogus", 2, NULL, "usage", NULL, NULL);
    /* a device the build lacks (exit 5 without CUDA) */
    ck_assert(asprintf(&args, "quantize --json --device cuda testdata/llama-tiny %s/gpu", dir) > 0);
    char *out;
    if (tu_run(args, &out, NULL) == 5)
        expect_json_failure(args, 5, "quantize", "device", NULL, NULL);
    free(out);
    free(args);
    /* without --json: nothing on stdout */
    ck_assert_int_eq(tu_run("inspect /nonexistent/m", &out, NULL), 4);
    ck_assert_str_eq(out, "");
    free(out);
    /* a verdict (exit 1) is the report, not a failure */
    ck_assert_int_eq(tu_run("diff --json testdata/quality/a.safetensors testdata/quality/b.safetensors",
                            &out, NULL), 1);
    ck_assert_msg(strstr(out, "\"diff_version\"") && !strstr(out, "error_version"), "%s", out);
    free(out);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("malformed");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_malformed_fixture_is_refused_with_exit_3, 0, (int)NMALFORMED);
    tcase_add_test(tc, test_every_manifest_fixture_is_covered);
    suite_add_tcase(s, tc);
    tc = tcase_create("inspect");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_inspect_sample_table_and_summary);
    tcase_add_test(tc, test_inspect_json_shape);
    tcase_add_test(tc, test_inspect_reports_quant_method);
    tcase_add_test(tc, test_large_offsets_printed_exactly);
    tcase_add_test(tc, test_usage_errors_exit_2);
    tcase_add_test(tc, test_options_anywhere_and_double_dash);
    tcase_add_test(tc, test_unreadable_path_exit_4);
    tcase_add_test(tc, test_device_cuda_without_gpu_exit_5);
    tcase_add_test(tc, test_convert_on_cuda_without_gpu_exit_5_leaves_nothing);
    tcase_add_test(tc, test_device_auto_writes_the_cpu_bytes);
    tcase_add_test(tc, test_help_and_man_page_agree);
    tcase_add_test(tc, test_mistyped_option_and_hub_id_are_explained);
    tcase_add_test(tc, test_build_lines_are_short_unless_v1);
    tcase_add_test(tc, test_help_exit_codes_are_the_commands);
    tcase_add_test(tc, test_json_failure_is_one_object_for_every_command_and_exit_code);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run_suite(suite());
}
