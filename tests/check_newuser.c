/*
 * check_newuser.c - what a new user meets (issue 16): wrong input fails
 * with a message naming what the file is and the command to use.
 */
#include "golden.h"

/* 16.1: a CI job pointed at the bf16 directory must not pass */
START_TEST(test_dequantize_of_bf16_checkpoint_is_refused)
{
    char *dir = tu_tmpdir(), *err, *args;
    ck_assert(asprintf(&args, "dequantize-for-export -q testdata/llama-tiny %s/out", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, "not an FP8 checkpoint") && strstr(err, "fp8conv quantize"), "%s",
                  err);
    ck_assert_int_eq(count_entries(dir, "out"), 0);
    ck_assert_int_eq(count_entries(dir, ".out"), 0);
    free(err);
    free(args);
    ck_assert(asprintf(&args, "verify --strict testdata/llama-tiny") > 0);
    char *out;
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    ck_assert_msg(strstr(out, "no-fp8-weights"), "%s", out);
    free(out);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_verify_ep_that_does_not_divide_experts_says_why)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 16x16", "testdata/deepseek-moe-tiny");
    char *args, *out;
    ck_assert(asprintf(&args, "verify --no-values --ep 3 '%s'", fp8) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    ck_assert_msg(strstr(out, "error [ep]") && strstr(out, "4 experts do not divide over 3"), "%s",
                  out);
    free(out);
    free(args);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16.3: messages that say what the file is */
START_TEST(test_gguf_and_pickle_files_are_named)
{
    static const struct {
        const char *bytes;
        size_t len;
        const char *says;
    } files[] = {
        { "GGUF\x03\0\0\0\0\0\0\0\0\0\0\0", 16, "a GGUF file" },
        { "PK\x03\x04\0\0\0\0\0\0\0\0", 12, "a zip archive" },
        { "\x80\x02}q\0(X\x01\0\0\0", 12, "a Python pickle" },
    };
    char *dir = tu_tmpdir(), *path, *args, *err;
    ck_assert(asprintf(&path, "%s/model.safetensors", dir) > 0);
    tu_spit(path, files[_i].bytes, files[_i].len);
    ck_assert(asprintf(&args, "inspect '%s'", path) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, files[_i].says) && strstr(err, "safe_serialization=True"), "%s", err);
    free(err);
    free(args);
    free(path);
    tu_tmpdir_free(dir);
}
END_TEST

START_TEST(test_fp8_input_to_quantize_points_to_export)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 16x16", "testdata/llama-tiny");
    char *args, *err;
    ck_assert(asprintf(&args, "quantize -q '%s' %s/again", fp8, dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, "fp8conv dequantize-for-export --dtype f32"), "%s", err);
    free(err);
    free(args);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16.6: one shard of a checkpoint is verified against the config beside it */
START_TEST(test_verify_lone_shard_reads_config_beside_it)
{
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 16x16", "testdata/llama-tiny");
    char *args, *out;
    ck_assert(asprintf(&args, "verify '%s/model-00001-of-00002.safetensors'", fp8) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 0);
    ck_assert_msg(strstr(out, "declared: hf-fp8") && !strstr(out, "no-quant-config"), "%s", out);
    free(out);
    free(args);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16.2: progress that tells time, and a closing line, for every command
 * that reads tensor data */
START_TEST(test_progress_shows_rate_eta_and_a_closing_line)
{
    static const char *const label[] = { "quantize: ", "dequantize: ", "diff: ", "verify: ",
                                         "inspect --hash: " };
    char *dir = tu_tmpdir(), *fp8 = quantize_into(dir, "--block 16x16", "testdata/llama-tiny");
    char *args, *err;
    switch (_i) {
    case 0: ck_assert(asprintf(&args, "quantize -j 1 --progress always testdata/llama-tiny %s/o", dir) > 0); break;
    case 1: ck_assert(asprintf(&args, "dequantize-for-export -j 1 --progress always %s %s/o", fp8, dir) > 0); break;
    case 2: ck_assert(asprintf(&args, "diff -j 1 --dequant --progress always %s testdata/llama-tiny", fp8) > 0); break;
    case 3: ck_assert(asprintf(&args, "verify -j 1 --progress always --against testdata/llama-tiny %s", fp8) > 0); break;
    default: ck_assert(asprintf(&args, "inspect -j 1 --hash --progress always %s", fp8) > 0);
    }
    /* -j 1: the calling thread, which reports progress, runs every job;
     * the full line needs a wide terminal (a narrow one gets the short
     * form: check_output.c) */
    setenv("COLUMNS", "200", 1);
    int rc = tu_run(args, NULL, &err);
    ck_assert_msg(rc == 0 || (rc == 1 && (_i == 2 || _i == 3)), "%s: exit %d: %s", args, rc, err);
    char done[64];
    snprintf(done, sizeof done, "%sdone: ", label[_i]);
    ck_assert_msg(strstr(err, label[_i]) && strstr(err, "/s, ") && strstr(err, "elapsed, ETA") &&
                      strstr(err, done) && !strstr(err, "100%") &&
                      (strstr(err, "  model.") || strstr(err, "  lm_head.")) /* a tensor */,
                  "%s", err);
    free(err);
    free(args);
    free(fp8);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16.5: each command's help has examples and its own exit statuses, not the
 * whole common-options block; `fp8conv help CMD` is `CMD --help` */
START_TEST(test_help_command_has_examples_and_its_own_exits)
{
    static const char *const commands[] = { "inspect", "quantize", "dequantize-for-export",
                                            "verify", "diff" };
    char *a, *b, args[64];
    snprintf(args, sizeof args, "help %s", commands[_i]);
    ck_assert_int_eq(tu_run(args, &a, NULL), 0);
    snprintf(args, sizeof args, "%s --help", commands[_i]);
    ck_assert_int_eq(tu_run(args, &b, NULL), 0);
    ck_assert_str_eq(a, b);
    char want[64];
    snprintf(want, sizeof want, "Examples:\n  fp8conv %s ", commands[_i]);
    ck_assert_msg(strstr(a, want), "%s", a);
    ck_assert_msg(!strstr(a, "--device auto|cpu|cuda"), "the common block is repeated:\n%s", a);
    /* inspect never finds problems: verify's exit 1 is not in its help */
    if (_i == 0)
        ck_assert_msg(!strstr(a, "1 verify"), "%s", a);
    free(a);
    free(b);
}
END_TEST

/* 16.4: a plain `make` without the Debian packages says so in one line.
 * Its BUILD is its own: the Makefile records the configuration it saw
 * (build/config.stamp) before it stops, and the real build's record,
 * clobbered, made test_make_install_... rebuild everything (CUDA too) past
 * its timeout. */
START_TEST(test_make_without_deps_says_which_in_one_line)
{
    char *dir = tu_tmpdir(), *cmd, *path;
    ck_assert(asprintf(&cmd, "PKG_CONFIG_LIBDIR=%s PKG_CONFIG_PATH=%s make --no-print-directory "
                       "BUILD=%s/build all >%s/out 2>&1", dir, dir, dir, dir) > 0);
    int status = system(cmd);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    ck_assert(asprintf(&path, "%s/out", dir) > 0);
    char *out = tu_slurp(path, NULL);
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    ck_assert_msg(strstr(out, "missing Debian packages: libcjson-dev libzstd-dev check "
                              "libxxhash-dev; run 'make deps'") && lines <= 4,
                  "%s", out);
    free(out);
    free(path);
    free(cmd);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16.8: the small ones */
START_TEST(test_scale_shape_message_closes_its_bracket)
{
    char *dir = tu_tmpdir(), *args, *err;
    ck_assert(asprintf(&args, "dequantize-for-export testdata/verify/scale-shape %s/o", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, &err), 3);
    ck_assert_msg(strstr(err, "scale F32 [5, 2] fits no"), "%s", err);
    free(err);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16: bash completion from the option tables, installed by make install */
static char *complete(const char *script, const char *words, int cword)
{
    char *dir = tu_tmpdir(), *cmd, *path;
    ck_assert(asprintf(&cmd, "bash -c 'source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _fp8conv "
                       "2>/dev/null; echo \"${COMPREPLY[*]}\"' >%s/out", script, words, cword,
                       dir) > 0);
    ck_assert(system(cmd) == 0);
    ck_assert(asprintf(&path, "%s/out", dir) > 0);
    char *out = tu_slurp(path, NULL);
    free(path);
    free(cmd);
    tu_tmpdir_free(dir);
    return out;
}

START_TEST(test_make_install_puts_binary_man_and_completion_under_prefix)
{
    char *dir = tu_tmpdir(), *cmd, *script;
    ck_assert(asprintf(&script, "%s/share/bash-completion/completions/fp8conv", dir) > 0);
    if (strcmp(FP8_BUILD_DIR, "build") == 0) {
        ck_assert(asprintf(&cmd, "make --no-print-directory install PREFIX=%s >/dev/null", dir) > 0);
        ck_assert_int_eq(system(cmd), 0);
        char *p;
        ck_assert(asprintf(&p, "%s/bin/fp8conv", dir) > 0 && access(p, X_OK) == 0);
        free(p);
        ck_assert(asprintf(&p, "%s/share/man/man1/fp8conv.1", dir) > 0 && access(p, R_OK) == 0);
        free(p);
    } else { /* a sanitizer build: make install would rebuild build/; the script alone */
        ck_assert(asprintf(&cmd, "mkdir -p %s/share/bash-completion/completions && %s completion "
                           "bash >%s", dir, FP8CONV_BIN, script) > 0);
        ck_assert_int_eq(system(cmd), 0);
    }
    char *out = complete(script, "fp8conv quantize --sch", 2);
    ck_assert_str_eq(out, "--scheme\n");
    free(out);
    out = complete(script, "fp8conv quantize --scheme m", 3);
    ck_assert_str_eq(out, "mxfp8 mxfp4\n");
    free(out);
    out = complete(script, "fp8conv quantize --scheme n", 3);
    ck_assert_str_eq(out, "nvfp4\n");
    free(out);
    out = complete(script, "fp8conv ver", 1);
    ck_assert_str_eq(out, "verify\n");
    free(out);
    out = complete(script, "fp8conv verify --loader s", 3);
    ck_assert_str_eq(out, "sglang\n");
    free(out);
    free(cmd);
    free(script);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16.5: sizes for people in the text, exact bytes in --json */
START_TEST(test_reports_print_human_sizes_and_json_exact_bytes)
{
    char *out;
    ck_assert_int_eq(tu_run("inspect testdata/deepseek-moe-tiny", &out, NULL), 0);
    ck_assert_msg(strstr(out, "bytes: 2.82 MiB\n") &&
                      strstr(out, "bytes by dtype: F32 16 B (1 tensor) BF16 2.82 MiB (40 tensors)"),
                  "%s", out);
    free(out);
    ck_assert_int_eq(tu_run("inspect --json testdata/deepseek-moe-tiny", &out, NULL), 0);
    ck_assert_msg(strstr(out, "2954384"), "%s", out);
    free(out);
    char *dir = tu_tmpdir(), *args;
    ck_assert(asprintf(&args, "quantize --block 16x16 testdata/llama-tiny %s/o", dir) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 0);
    ck_assert_msg(strstr(out, "bytes: 2.30 MiB of tensors in, "), "%s", out);
    free(out);
    free(args);
    tu_tmpdir_free(dir);
}
END_TEST

/* 16.6: --format for a lone file without config.json */
START_TEST(test_verify_format_for_a_lone_file_without_config)
{
    char *dir = tu_tmpdir(), *args, *out, *err;
    ck_assert(asprintf(&args, "quantize -q --block 16x16 testdata/quant-edge/model.safetensors "
                       "%s/x.safetensors", dir) > 0);
    ck_assert_int_eq(tu_run(args, NULL, NULL), 0);
    free(args);
    ck_assert(asprintf(&args, "verify --no-values %s/x.safetensors", dir) > 0);
    ck_assert_int_eq(tu_run(args, &out, NULL), 1);
    ck_assert_msg(strstr(out, "[no-quant-config]"), "%s", out);
    free(out);
    free(args);
    ck_assert(asprintf(&args, "verify --no-values --format hf-fp8 --block 16x16 %s/x.safetensors",
                       dir) > 0);
    tu_run(args, &out, NULL);
    ck_assert_msg(strstr(out, "declared: hf-fp8, scheme block 16x16 (assumed: --format)") &&
                      strstr(out, "[config-assumed]") && !strstr(out, "[no-quant-config]") &&
                      !strstr(out, "[scale-shape]") && !strstr(out, "[missing-scale]"),
                  "%s", out);
    free(out);
    free(args);
    ck_assert(asprintf(&args, "verify --format hf-fp8 %s/x.safetensors", dir) > 0);
    tu_run(args, &out, NULL);
    ck_assert_msg(strstr(out, "[scale-shape]"), "128x128 assumed, 16x16 written: %s", out);
    free(out);
    free(args);
    ck_assert_int_eq(tu_run("verify --format hf-fp8 testdata/llama-tiny", NULL, &err), 2);
    ck_assert_msg(strstr(err, "--format is for a checkpoint without config.json"), "%s", err);
    free(err);
    tu_tmpdir_free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("newuser");
    TCase *tc = tcase_create("wrong input");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dequantize_of_bf16_checkpoint_is_refused);
    tcase_add_test(tc, test_verify_ep_that_does_not_divide_experts_says_why);
    tcase_add_loop_test(tc, test_gguf_and_pickle_files_are_named, 0, 3);
    tcase_add_test(tc, test_fp8_input_to_quantize_points_to_export);
    tcase_add_test(tc, test_verify_lone_shard_reads_config_beside_it);
    tcase_add_loop_test(tc, test_progress_shows_rate_eta_and_a_closing_line, 0, 5);
    tcase_add_loop_test(tc, test_help_command_has_examples_and_its_own_exits, 0, 5);
    tcase_add_test(tc, test_make_without_deps_says_which_in_one_line);
    tcase_add_test(tc, test_scale_shape_message_closes_its_bracket);
    tcase_add_test(tc, test_make_install_puts_binary_man_and_completion_under_prefix);
    tcase_add_test(tc, test_reports_print_human_sizes_and_json_exact_bytes);
    tcase_add_test(tc, test_verify_format_for_a_lone_file_without_config);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
