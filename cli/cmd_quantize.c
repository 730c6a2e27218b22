/*
 * cmd_quantize.c - fp8conv quantize INPUT OUTPUT: options, the plan report
 * (--dry-run, --json), progress, and SIGINT/SIGTERM turning into a clean stop.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define QUANTIZE_JSON_VERSION 1
#define MAX_IGNORE 64

enum {
    OPT_IGNORE = CLI_OPT_LAYOUT_END,
    OPT_NO_DEFAULT_IGNORE,
    OPT_FORCE,
    OPT_NO_SYNC,
    OPT_LIKE,
    OPT_STRICT,
    OPT_DRY_RUN = 'n',
};

typedef struct {
    fp8_quant_options opts;
    const char *ignore[MAX_IGNORE];
    bool dry_run;
    cli_layout_given given;
    const char *like;
} quantize_args;

static int take_option(int code, const char *value, void *state)
{
    quantize_args *a = state;
    fp8_quant_options *o = &a->opts;
    if (code >= CLI_OPT_FIRST && code < CLI_OPT_LAYOUT_END)
        return cli_layout_option(code, value, o, &a->given);
    switch (code) {
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
    case OPT_LIKE: a->like = value; break;
    case OPT_STRICT: o->strict_ignore = true; break;
    case OPT_DRY_RUN: a->dry_run = true; break;
    default: return cli_run_take(code, value, &o->run);
    }
    return -1;
}

/* Options that only make sense with another one are refused, not ignored. */
static int check_combinations(const quantize_args *a)
{
    const fp8_quant_options *o = &a->opts;
    const cli_layout_given *g = &a->given;
    unsigned takes = fp8_scheme_options(o->scheme);
    if (a->like && (g->scheme || g->format || g->block || g->scale_fmt))
        cli_error("--like copies the layout: it cannot go with --scheme, --format, --block or "
                  "--scale-fmt");
    else if (g->block && !(takes & FP8_SCHEME_TAKES_BLOCK))
        cli_error("--block applies to --scheme block only");
    else if (g->mx && !(takes & FP8_SCHEME_TAKES_MX_ROUNDING))
        cli_error("--mx-rounding applies to --scheme mxfp8 only");
    else if (g->scale_fmt && !(takes & FP8_SCHEME_TAKES_SCALE_FMT))
        cli_error("--scale-fmt applies to --scheme block only");
    else if (g->group && !(takes & FP8_SCHEME_TAKES_GROUP))
        cli_error("--group applies to --scheme int4 only");
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
                      const char *out, uint64_t out_bytes, const fp8_copy_totals *copied,
                      double seconds)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "quantize_version", QUANTIZE_JSON_VERSION);
    cJSON_AddStringToObject(root, "input", in);
    cJSON_AddStringToObject(root, "output", out);
    cJSON_AddBoolToObject(root, "dry_run", a->dry_run);
    cJSON_AddStringToObject(root, "scheme", fp8_scheme_name(a->opts.scheme));
    if (fp8_scheme_options(a->opts.scheme) & FP8_SCHEME_TAKES_BLOCK) { /* as convert's */
        int b[2] = { (int)a->opts.block_rows, (int)a->opts.block_cols };
        cJSON_AddItemToObject(root, "block", cJSON_CreateIntArray(b, 2));
    }
    cJSON_AddStringToObject(root, "format", fp8_format_name(fp8_quant_plan_format(plan)));
    if (a->opts.profile)
        cJSON_AddStringToObject(root, "profile", fp8_profile_name(a->opts.profile));
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
            if (it->packed_name) { /* codes under a layout's own name */
                uint64_t one = 1;
                cJSON *k = cJSON_AddObjectToObject(o, "packed");
                cJSON_AddStringToObject(k, "name", it->packed_name);
                cJSON_AddStringToObject(k, "dtype", fp8_dtype_name(it->code_dtype));
                cJSON_AddItemToObject(k, "shape", cli_json_shape(it->tensor->rank, it->code_shape));
                if (it->global_name) {
                    cJSON *g = cJSON_AddObjectToObject(o, "global_scale");
                    cJSON_AddStringToObject(g, "name", it->global_name);
                    cJSON_AddStringToObject(g, "dtype", "F32");
                    cJSON_AddItemToObject(g, "shape", cli_json_shape(it->global_rank, &one));
                }
            }
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
    cJSON *c = cJSON_AddObjectToObject(root, "copied");
    cJSON_AddItemToObject(c, "files", cli_json_u64(copied->files));
    cJSON_AddItemToObject(c, "bytes", cli_json_u64(copied->bytes));
    cJSON *folders = cJSON_AddArrayToObject(c, "folders");
    for (const char *f = copied->folder_names; *f; f += strspn(f, " ")) {
        size_t n = strcspn(f, " ");
        char name[sizeof copied->folder_names];
        snprintf(name, sizeof name, "%.*s", (int)n, f);
        cJSON_AddItemToArray(folders, cJSON_CreateString(name));
        f += n;
    }
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
        fp8_shape_text(it->tensor->rank, it->tensor->shape, shape, sizeof shape);
        if (it->quantize && it->packed_name) {
            char pk[128];
            fp8_shape_text(it->tensor->rank, it->code_shape, pk, sizeof pk);
            fp8_shape_text(it->scale_rank, it->scale_shape, sshape, sizeof sshape);
            cli_printf("quantize  %s %s %s -> %s %s %s + %s %s %s", cli_esc(it->tensor->name),
                       fp8_dtype_name(it->tensor->dtype), shape, cli_esc(it->packed_name),
                       fp8_dtype_name(it->code_dtype), pk, cli_esc(it->scale_name),
                       fp8_dtype_name(it->scale_dtype), sshape);
            if (it->global_name)
                cli_printf(" + %s F32 %s", cli_esc(it->global_name), it->global_rank ? "[1]" : "[]");
            cli_printf("\n");
        } else if (it->quantize) {
            fp8_shape_text(it->scale_rank, it->scale_shape, sshape, sizeof sshape);
            cli_printf("quantize  %s %s %s -> %s + %s %s %s\n", cli_esc(it->tensor->name),
                       fp8_dtype_name(it->tensor->dtype), shape, fp8_dtype_name(it->code_dtype),
                       cli_esc(it->scale_name), fp8_dtype_name(it->scale_dtype), sshape);
        } else {
            cli_printf("keep      %s %s %s: %s\n", cli_esc(it->tensor->name),
                       fp8_dtype_name(it->tensor->dtype), shape, cli_esc(it->reason));
        }
    }
}

static void print_summary(const quantize_args *a, const fp8_quant_plan *plan, const char *out,
                          uint64_t out_bytes, const fp8_copy_totals *copied, double seconds)
{
    size_t q = count_quantized(plan), n = fp8_quant_plan_count(plan);
    if (a->opts.run.parts)
        cli_printf("%s part %u of %u of ", a->dry_run ? "would write" : "wrote",
                   a->opts.run.part, a->opts.run.parts);
    else
        cli_printf("%s ", a->dry_run ? "would write" : "wrote");
    cli_printf("%s: scheme %s", cli_esc(out), fp8_scheme_name(a->opts.scheme));
    unsigned takes = fp8_scheme_options(a->opts.scheme);
    if (takes & FP8_SCHEME_TAKES_BLOCK)
        cli_printf(" %ux%u%s", a->opts.block_rows, a->opts.block_cols,
               a->opts.scale_ue8m0 ? " ue8m0" : "");
    if (takes & FP8_SCHEME_TAKES_MX_ROUNDING)
        cli_printf(" %s", a->opts.mx_rounding == FP8_MX_FLOOR ? "floor" : "rceil");
    if (a->opts.profile)
        cli_printf(", profile %s", fp8_profile_name(a->opts.profile));
    cli_printf(", format %s\n", fp8_format_name(fp8_quant_plan_format(plan)));
    cli_printf("tensors: %zu quantized, %zu kept\n", q, n - q);
    cli_printf("not converted:");
    for (size_t i = 0; i < fp8_quant_plan_ignored_count(plan); i++)
        cli_printf(" %s", cli_esc(fp8_quant_plan_ignored(plan, i)));
    cli_printf("%s\n", fp8_quant_plan_ignored_count(plan) ? "" : " (none)");
    char inb[32], outb[32], cb[32];
    if (copied->files || copied->folders) {
        cli_human_bytes(copied->bytes, cb, sizeof cb);
        cli_printf("%s as they are: %llu file%s, %s", a->dry_run ? "to copy" : "copied",
                   (unsigned long long)copied->files, copied->files == 1 ? "" : "s", cb);
        if (copied->folders)
            cli_printf(" (with the folder%s %s whole, not converted)",
                       copied->folders == 1 ? "" : "s", cli_esc(copied->folder_names));
        cli_printf("\n");
    }
    cli_human_bytes(fp8_quant_plan_input_bytes(plan), inb, sizeof inb);
    cli_human_bytes(out_bytes + copied->bytes, outb, sizeof outb);
    cli_printf("bytes: %s of tensors in, %s of files out", inb, outb);
    if (!a->dry_run)
        cli_printf(", %.2f s on %s", seconds, fp8_device_name(fp8_quant_plan_device(plan)));
    cli_printf("\n");
}

/* ---------------------------------------------------------------- progress, signals */

/* The command's own long options (getopt, --help, bash completion). */
static const struct option cli_quantize_options[] = {
    { "scheme", required_argument, NULL, CLI_OPT_SCHEME },
    { "format", required_argument, NULL, CLI_OPT_FORMAT },
    { "block", required_argument, NULL, CLI_OPT_BLOCK },
    { "scale-fmt", required_argument, NULL, CLI_OPT_SCALE_FMT },
    { "mx-rounding", required_argument, NULL, CLI_OPT_MX_ROUNDING },
    { "group", required_argument, NULL, CLI_OPT_GROUP },
    { "profile", required_argument, NULL, CLI_OPT_PROFILE },
    { "ignore", required_argument, NULL, OPT_IGNORE },
    { "no-default-ignore", no_argument, NULL, OPT_NO_DEFAULT_IGNORE },
    { "force", no_argument, NULL, OPT_FORCE },
    { "no-sync", no_argument, NULL, OPT_NO_SYNC },
    CLI_RUN_OPTIONS,
    { "dry-run", no_argument, NULL, OPT_DRY_RUN },
    { "like", required_argument, NULL, OPT_LIKE },
    { "strict", no_argument, NULL, OPT_STRICT },
    { NULL, 0, NULL, 0 },
};

static int cmd_quantize(int argc, char **argv, cli_common *common)
{
    quantize_args a = { .opts = FP8_QUANT_OPTIONS_INIT };
    cli_options own = { cli_quantize_options, take_option, &a };
    int rc = cli_parse(&cli_cmd_quantize, &argc, argv, common, &own);
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
    fp8_like *like = NULL;
    const char **ignore = NULL;
    if (!ctx)
        return EXIT_IO;

    uint64_t out_bytes = 0;
    fp8_copy_totals copied = { 0 };
    double t0 = cli_now();
    fp8_status st = FP8_OK;
    if (a.like && !(st = cli_like_open(ctx, a.like, in, common, &a.opts, &like))) {
        /* REF's ignore list, mapped onto INPUT, after --ignore's */
        size_t n = a.opts.nignore + fp8_like_ignore_count(like);
        if (!(ignore = calloc(n ? n : 1, sizeof *ignore)))
            st = FP8_ERR_NOMEM;
        for (size_t i = 0; ignore && i < n; i++)
            ignore[i] = i < a.opts.nignore ? a.ignore[i]
                                           : fp8_like_ignore(like, i - a.opts.nignore);
        a.opts.ignore = ignore;
        a.opts.nignore = n;
        a.opts.nignore_like = fp8_like_ignore_count(like);
    }
    if (!st)
        st = fp8_quant_plan_create(ctx, in, &a.opts, &plan);
    if (!st)
        st = fp8_quant_plan_output_bytes(ctx, plan, &out_bytes);
    if (!st)
        st = fp8_quant_plan_copied(ctx, plan, &copied);
    if (!st && !common->quiet) {
        for (size_t i = 0; i < fp8_quant_plan_count(plan); i++) {
            const fp8_quant_item *it = fp8_quant_plan_item(plan, i);
            if (it->warn)
                fprintf(stderr, "fp8conv: warning: %s: tensor '%s' stays %s: %s\n",
                        cli_esc(it->shard), cli_esc(it->tensor->name),
                        fp8_dtype_name(it->tensor->dtype), cli_esc(it->reason));
        }
        for (size_t i = 0; i < fp8_quant_plan_warning_count(plan); i++)
            fprintf(stderr, "fp8conv: warning: %s\n", cli_esc(fp8_quant_plan_warning(plan, i)));
        struct stat sb;
        if (a.dry_run && lstat(out, &sb) == 0 && !a.opts.run.resume && !a.opts.run.finish)
            fprintf(stderr, "fp8conv: warning: %s: exists; %s\n", cli_esc(out),
                    a.opts.force ? "--force would replace it only if fp8conv wrote all of it"
                                 : "the run would refuse it (--force replaces what fp8conv wrote)");
    }
    size_t said = plan ? fp8_quant_plan_warning_count(plan) : 0;
    if (!st && !a.dry_run)
        st = fp8_quant_plan_run(ctx, plan, out);
    cli_progress_end(&prog, st == FP8_OK);
    for (size_t i = said; !st && !common->quiet && i < fp8_quant_plan_warning_count(plan); i++)
        fprintf(stderr, "fp8conv: warning: %s\n", fp8_quant_plan_warning(plan, i)); /* the run's */
    if (st) {
        rc = cli_fail(ctx, st);
    } else if (common->quiet) {
        rc = EXIT_OK;
    } else if (common->json) {
        rc = print_json(&a, plan, in, out, out_bytes, &copied, cli_now() - t0);
    } else {
        if (a.dry_run)
            print_plan(plan);
        print_summary(&a, plan, out, out_bytes, &copied, cli_now() - t0);
        rc = EXIT_OK;
    }
    fp8_quant_plan_free(plan);
    fp8_like_free(like);
    free(ignore);
    fp8_ctx_free(ctx);
    return rc;
}

/* The command: its synopsis, --help text, examples and exit statuses
 * (fp8conv help quantize), and its options for getopt and completion. */
const cli_command cli_cmd_quantize = { "quantize", "INPUT OUTPUT", "convert a bf16/f16/f32 checkpoint to FP8 (or FP4)", cmd_quantize,
  "Options:\n"
  "      --scheme block|channel|tensor|mxfp8|nvfp4|mxfp4|int4\n"
  "                             scaling granularity (default block); nvfp4 and mxfp4\n"
  "                             write weight-only packed FP4 (bf16 or f32 input), int4\n"
  "                             weight-only INT4 (compressed-tensors pack-quantized)\n"
  "      --format hf-fp8|compressed-tensors|modelopt\n"
  "                             output layout (default: hf-fp8 for block and tensor,\n"
  "                             compressed-tensors for the others; nvfp4 also as\n"
  "                             modelopt, weight-only W4A16_NVFP4)\n"
  "      --block RxC            block size for --scheme block (default 128x128)\n"
  "      --group 32|128         elements of a row sharing a scale, --scheme int4\n"
  "                             (default 128)\n"
  "      --scale-fmt float|ue8m0\n"
  "                             block scales as computed, or rounded up to powers of two\n"
  "                             (hf-fp8 only; default float)\n"
  "      --mx-rounding rceil|floor\n"
  "                             MX scale exponent rounding (default rceil)\n"
  CLI_PROFILE_HELP
  "      --ignore PATTERN       keep unquantized the tensors whose name matches PATTERN\n"
  "                             (POSIX extended, unanchored), or whose module's name\n"
  "                             matches re:REGEX from its start (llm-compressor's form);\n"
  "                             repeatable; no back-references\n"
  "      --strict               an --ignore that matches no tensor is an error (exit 2),\n"
  "                             not a warning\n"
  "      --no-default-ignore    quantize embeddings, lm_head, routers, ... too\n"
  "      --like PATH            the layout of a reference FP8 checkpoint (or its\n"
  "                             config.json): scheme, format, block, scale_fmt, and its\n"
  "                             ignore list mapped onto INPUT's modules\n"
  "      --force                replace OUTPUT if it exists\n"
  "      --no-sync              do not fsync the output (faster; a power loss soon\n"
  "                             after can leave it damaged)\n"
  CLI_RUN_HELP
  "  -n, --dry-run              print the plan, write nothing\n",
  "  fp8conv quantize --dry-run Llama-3.1-8B Llama-3.1-8B-FP8\n"
  "  fp8conv quantize Llama-3.1-8B Llama-3.1-8B-FP8\n"
  "  fp8conv quantize --scheme mxfp8 --format modelopt model/ model-mxfp8/\n"
  "  fp8conv quantize --scheme nvfp4 model/ model-nvfp4/\n",
  "0 written; 2 usage error, OUTPUT exists, --finish with a part missing or on an\n"
  "output made with other options, or --strict and an --ignore that matches nothing;\n"
  "3 bad input (already FP8, NaN or inf; FP4: f16, gpt-oss's interleaved experts,\n"
  "fused experts without a config.json); "
  "4 I/O error; 5 device error; 128+N stopped by signal N (130 SIGINT, 143 SIGTERM)",
  cli_quantize_options };
