/*
 * cmd_quantize.c - fp8conv quantize INPUT OUTPUT: options, the plan report
 * (--dry-run, --json), progress, and SIGINT/SIGTERM turning into a clean stop.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define QUANTIZE_JSON_VERSION 1
#define MAX_IGNORE 64

enum {
    OPT_SCHEME = CLI_OPT_FIRST,
    OPT_FORMAT,
    OPT_BLOCK,
    OPT_SCALE_FMT,
    OPT_MX_ROUNDING,
    OPT_IGNORE,
    OPT_NO_DEFAULT_IGNORE,
    OPT_FORCE,
    OPT_NO_SYNC,
    OPT_DRY_RUN = 'n',
};

typedef struct {
    fp8_quant_options opts;
    const char *ignore[MAX_IGNORE];
    bool dry_run, block_given, mx_given, scale_fmt_given;
} quantize_args;

static const char *const scale_fmt_names[] = { "float", "ue8m0", NULL };
static const char *const mx_names[] = { "rceil", "floor", NULL };

static int take_option(int code, const char *value, void *state)
{
    quantize_args *a = state;
    fp8_quant_options *o = &a->opts;
    int choice;
    switch (code) {
    case OPT_SCHEME:
        if (!cli_choice("--scheme", value, cli_scheme_names, &choice))
            return EXIT_USAGE;
        o->scheme = (fp8_scheme)choice;
        break;
    case OPT_FORMAT:
        if (!cli_choice("--format", value, cli_format_names, &choice))
            return EXIT_USAGE;
        o->format = (fp8_format)(choice + 1);
        break;
    case OPT_BLOCK:
        if (!cli_parse_block(value, &o->block_rows, &o->block_cols)) {
            cli_error("--block: '%s' is not ROWSxCOLS with each from 1 to 4096 (e.g. 128x128)",
                      value);
            return EXIT_USAGE;
        }
        a->block_given = true;
        break;
    case OPT_SCALE_FMT:
        if (!cli_choice("--scale-fmt", value, scale_fmt_names, &choice))
            return EXIT_USAGE;
        o->scale_ue8m0 = choice == 1;
        a->scale_fmt_given = true;
        break;
    case OPT_MX_ROUNDING:
        if (!cli_choice("--mx-rounding", value, mx_names, &choice))
            return EXIT_USAGE;
        o->mx_rounding = (fp8_mx_rounding)choice;
        a->mx_given = true;
        break;
    case OPT_IGNORE:
        if (o->nignore == MAX_IGNORE) {
            cli_error("--ignore: at most %d patterns (combine them with '|')", MAX_IGNORE);
            return EXIT_USAGE;
        }
        a->ignore[o->nignore++] = value;
        break;
    case OPT_NO_DEFAULT_IGNORE: o->no_default_ignore = true; break;
    case OPT_FORCE: o->force = true; break;
    case OPT_NO_SYNC: o->no_sync = true; break;
    case OPT_DRY_RUN: a->dry_run = true; break;
    default: return cli_run_take(code, value, &o->run);
    }
    return -1;
}

/* Options that only make sense with another one are refused, not ignored. */
static int check_combinations(const quantize_args *a)
{
    const fp8_quant_options *o = &a->opts;
    if (a->block_given && o->scheme != FP8_SCHEME_BLOCK)
        cli_error("--block applies to --scheme block only");
    else if (a->mx_given && o->scheme != FP8_SCHEME_MXFP8)
        cli_error("--mx-rounding applies to --scheme mxfp8 only");
    else if (a->scale_fmt_given && o->scheme != FP8_SCHEME_BLOCK)
        cli_error("--scale-fmt applies to --scheme block only");
    else
        return cli_run_check(&o->run);
    return EXIT_USAGE;
}

/* ---------------------------------------------------------------- reports */

static size_t count_quantized(const fp8_quant_plan *plan)
{
    size_t n = 0;
    for (size_t i = 0; i < fp8_quant_plan_count(plan); i++)
        n += fp8_quant_plan_item(plan, i)->quantize;
    return n;
}

static int print_json(const quantize_args *a, const fp8_quant_plan *plan, const char *in,
                      const char *out, uint64_t out_bytes, double seconds)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "quantize_version", QUANTIZE_JSON_VERSION);
    cJSON_AddStringToObject(root, "input", in);
    cJSON_AddStringToObject(root, "output", out);
    cJSON_AddBoolToObject(root, "dry_run", a->dry_run);
    cJSON_AddStringToObject(root, "scheme", fp8_scheme_name(a->opts.scheme));
    cJSON_AddStringToObject(root, "format", fp8_format_name(fp8_quant_plan_format(plan)));
    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (size_t i = 0; i < fp8_quant_plan_count(plan); i++) {
        const fp8_quant_item *it = fp8_quant_plan_item(plan, i);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", it->tensor->name);
        cJSON_AddStringToObject(o, "file", it->shard);
        cJSON_AddStringToObject(o, "dtype", fp8_dtype_name(it->tensor->dtype));
        cJSON_AddItemToObject(o, "shape", cli_json_shape(it->tensor->rank, it->tensor->shape));
        cJSON_AddStringToObject(o, "action", it->quantize ? "quantize" : "keep");
        if (it->quantize) {
            cJSON *s = cJSON_AddObjectToObject(o, "scale");
            cJSON_AddStringToObject(s, "name", it->scale_name);
            cJSON_AddStringToObject(s, "dtype", fp8_dtype_name(it->scale_dtype));
            cJSON_AddItemToObject(s, "shape", cli_json_shape(it->scale_rank, it->scale_shape));
        } else {
            cJSON_AddStringToObject(o, "reason", it->reason);
        }
        cJSON_AddItemToArray(tensors, o);
    }
    cJSON *ign = cJSON_AddArrayToObject(root, "ignored");
    for (size_t i = 0; i < fp8_quant_plan_ignored_count(plan); i++)
        cJSON_AddItemToArray(ign, cJSON_CreateString(fp8_quant_plan_ignored(plan, i)));
    cJSON *warn = cJSON_AddArrayToObject(root, "warnings");
    for (size_t i = 0; i < fp8_quant_plan_warning_count(plan); i++)
        cJSON_AddItemToArray(warn, cJSON_CreateString(fp8_quant_plan_warning(plan, i)));
    cJSON_AddNumberToObject(root, "quantized", (double)count_quantized(plan));
    cJSON_AddNumberToObject(root, "kept", (double)(fp8_quant_plan_count(plan) - count_quantized(plan)));
    cJSON_AddItemToObject(root, "input_bytes", cli_json_u64(fp8_quant_plan_input_bytes(plan)));
    cJSON_AddItemToObject(root, "output_bytes", cli_json_u64(out_bytes));
    if (!a->dry_run) {
        cJSON_AddStringToObject(root, "device", fp8_device_name(fp8_quant_plan_device(plan)));
        cJSON_AddNumberToObject(root, "seconds", seconds);
    }
    return cli_print_json(root);
}

static void print_plan(const fp8_quant_plan *plan)
{
    char shape[128], sshape[128];
    for (size_t i = 0; i < fp8_quant_plan_count(plan); i++) {
        const fp8_quant_item *it = fp8_quant_plan_item(plan, i);
        cli_shape_text(it->tensor->rank, it->tensor->shape, shape, sizeof shape);
        if (it->quantize) {
            cli_shape_text(it->scale_rank, it->scale_shape, sshape, sizeof sshape);
            cli_printf("quantize  %s %s %s -> F8_E4M3 + %s %s %s\n", it->tensor->name,
                   fp8_dtype_name(it->tensor->dtype), shape, it->scale_name,
                   fp8_dtype_name(it->scale_dtype), sshape);
        } else {
            cli_printf("keep      %s %s %s: %s\n", it->tensor->name, fp8_dtype_name(it->tensor->dtype),
                   shape, it->reason);
        }
    }
}

static void print_summary(const quantize_args *a, const fp8_quant_plan *plan, const char *out,
                          uint64_t out_bytes, double seconds)
{
    size_t q = count_quantized(plan), n = fp8_quant_plan_count(plan);
    if (a->opts.run.parts)
        cli_printf("%s part %u of %u of ", a->dry_run ? "would write" : "wrote",
                   a->opts.run.part, a->opts.run.parts);
    else
        cli_printf("%s ", a->dry_run ? "would write" : "wrote");
    cli_printf("%s: scheme %s", out, fp8_scheme_name(a->opts.scheme));
    if (a->opts.scheme == FP8_SCHEME_BLOCK)
        cli_printf(" %ux%u%s", a->opts.block_rows, a->opts.block_cols,
               a->opts.scale_ue8m0 ? " ue8m0" : "");
    if (a->opts.scheme == FP8_SCHEME_MXFP8)
        cli_printf(" %s", a->opts.mx_rounding == FP8_MX_FLOOR ? "floor" : "rceil");
    cli_printf(", format %s\n", fp8_format_name(fp8_quant_plan_format(plan)));
    cli_printf("tensors: %zu quantized, %zu kept\n", q, n - q);
    cli_printf("not converted:");
    for (size_t i = 0; i < fp8_quant_plan_ignored_count(plan); i++)
        cli_printf(" %s", fp8_quant_plan_ignored(plan, i));
    cli_printf("%s\n", fp8_quant_plan_ignored_count(plan) ? "" : " (none)");
    char inb[32], outb[32];
    cli_human_bytes(fp8_quant_plan_input_bytes(plan), inb, sizeof inb);
    cli_human_bytes(out_bytes, outb, sizeof outb);
    cli_printf("bytes: %s of tensors in, %s of files out", inb, outb);
    if (!a->dry_run)
        cli_printf(", %.2f s on %s", seconds, fp8_device_name(fp8_quant_plan_device(plan)));
    cli_printf("\n");
}

/* ---------------------------------------------------------------- progress, signals */

/* The command's own long options (getopt, --help, bash completion). */
const struct option cli_quantize_options[] = {
    { "scheme", required_argument, NULL, OPT_SCHEME },
    { "format", required_argument, NULL, OPT_FORMAT },
    { "block", required_argument, NULL, OPT_BLOCK },
    { "scale-fmt", required_argument, NULL, OPT_SCALE_FMT },
    { "mx-rounding", required_argument, NULL, OPT_MX_ROUNDING },
    { "ignore", required_argument, NULL, OPT_IGNORE },
    { "no-default-ignore", no_argument, NULL, OPT_NO_DEFAULT_IGNORE },
    { "force", no_argument, NULL, OPT_FORCE },
    { "no-sync", no_argument, NULL, OPT_NO_SYNC },
    CLI_RUN_OPTIONS,
    { "dry-run", no_argument, NULL, OPT_DRY_RUN },
    { NULL, 0, NULL, 0 },
};

int cmd_quantize(int argc, char **argv, cli_common *common)
{
    quantize_args a = { .opts = FP8_QUANT_OPTIONS_INIT };
    cli_options own = { cli_quantize_options, take_option, &a };
    int rc = cli_parse("quantize", &argc, argv, common, &own);
    if (rc >= 0 || (rc = check_combinations(&a)) >= 0)
        return rc;
    const char *in = argv[1], *out = argv[2];
    a.opts.ignore = a.ignore;
    a.opts.threads = common->threads;
    a.opts.device = common->device;
    a.opts.cancel = cli_catch_signals();
    cli_progress_state prog = { .label = "quantize" };
    if (cli_progress_wanted(common)) {
        a.opts.progress = cli_show_progress;
        a.opts.progress_user = &prog;
    }

    fp8_ctx *ctx = cli_ctx_create();
    fp8_quant_plan *plan = NULL;
    if (!ctx)
        return EXIT_IO;

    uint64_t out_bytes = 0;
    double t0 = cli_now();
    fp8_status st = fp8_quant_plan_create(ctx, in, &a.opts, &plan);
    if (!st)
        st = fp8_quant_plan_output_bytes(ctx, plan, &out_bytes);
    if (!st && !common->quiet) {
        for (size_t i = 0; i < fp8_quant_plan_count(plan); i++) {
            const fp8_quant_item *it = fp8_quant_plan_item(plan, i);
            if (it->warn)
                fprintf(stderr, "fp8conv: warning: %s: tensor '%s' stays %s: %s\n", it->shard,
                        it->tensor->name, fp8_dtype_name(it->tensor->dtype), it->reason);
        }
        for (size_t i = 0; i < fp8_quant_plan_warning_count(plan); i++)
            fprintf(stderr, "fp8conv: warning: %s\n", fp8_quant_plan_warning(plan, i));
    }
    if (!st && !a.dry_run)
        st = fp8_quant_plan_run(ctx, plan, out);
    cli_progress_end(&prog, st == FP8_OK);
    if (st) {
        rc = cli_fail(ctx, st);
    } else if (common->quiet) {
        rc = EXIT_OK;
    } else if (common->json) {
        rc = print_json(&a, plan, in, out, out_bytes, cli_now() - t0);
    } else {
        if (a.dry_run)
            print_plan(plan);
        print_summary(&a, plan, out, out_bytes, cli_now() - t0);
        rc = EXIT_OK;
    }
    fp8_quant_plan_free(plan);
    fp8_ctx_free(ctx);
    return rc;
}
