/*
 * cmd_dequantize.c - fp8conv dequantize-for-export INPUT OUTPUT: an FP8
 * checkpoint back to bf16 (or f16/f32), with a clean config.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define DEQUANTIZE_JSON_VERSION 1

enum { OPT_DTYPE = CLI_OPT_FIRST, OPT_FORCE, OPT_NO_SYNC };

static const char *const dtype_names[] = { "bf16", "f16", "f32", NULL };
static const fp8_dtype dtypes[] = { FP8_DTYPE_BF16, FP8_DTYPE_F16, FP8_DTYPE_F32 };

static int take_option(int code, const char *value, void *state)
{
    fp8_dequant_options *o = state;
    int choice;
    switch (code) {
    case OPT_DTYPE:
        if (!cli_choice("--dtype", value, dtype_names, &choice))
            return EXIT_USAGE;
        o->dtype = dtypes[choice];
        break;
    case OPT_FORCE: o->force = true; break;
    case OPT_NO_SYNC: o->no_sync = true; break;
    default: return cli_run_take(code, value, &o->run);
    }
    return -1;
}

static int report(const cli_common *common, const char *in, const char *out,
                  const fp8_dequant_options *o, const fp8_dequant_report *r, double seconds)
{
    if (common->quiet)
        return EXIT_OK;
    if (!common->json) {
        if (o->run.parts)
            cli_printf("wrote part %u of %u of ", o->run.part, o->run.parts);
        else
            cli_printf("wrote ");
        cli_printf("%s: %zu tensors dequantized to %s, %zu scales dropped, %zu copied\n",
                   cli_esc(out),
                   r->dequantized, fp8_dtype_name(o->dtype), r->dropped, r->copied);
        if (r->kv_dropped)
            cli_printf("%zu FP8 KV-cache scales dropped: a %s export has no FP8 KV cache\n",
                       r->kv_dropped, fp8_dtype_name(o->dtype));
        char inb[32], outb[32];
        cli_human_bytes(r->input_bytes, inb, sizeof inb);
        cli_human_bytes(r->output_bytes, outb, sizeof outb);
        cli_printf("bytes: %s of tensors in, %s out, %.2f s on %s\n", inb, outb, seconds,
                   fp8_device_name(r->device));
        return EXIT_OK;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "dequantize_version", DEQUANTIZE_JSON_VERSION);
    cJSON_AddStringToObject(root, "input", in);
    cJSON_AddStringToObject(root, "output", out);
    cJSON_AddStringToObject(root, "dtype", fp8_dtype_name(o->dtype));
    cJSON_AddNumberToObject(root, "dequantized", (double)r->dequantized);
    cJSON_AddNumberToObject(root, "dropped", (double)r->dropped);
    cJSON_AddNumberToObject(root, "kv_cache_scales_dropped", (double)r->kv_dropped);
    cJSON_AddNumberToObject(root, "copied", (double)r->copied);
    cJSON_AddItemToObject(root, "input_bytes", cli_json_u64(r->input_bytes));
    cJSON_AddItemToObject(root, "output_bytes", cli_json_u64(r->output_bytes));
    cJSON_AddStringToObject(root, "device", fp8_device_name(r->device));
    cJSON_AddNumberToObject(root, "seconds", seconds);
    return cli_print_json(root);
}

/* The command's own long options (getopt, --help, bash completion). */
static const struct option cli_dequantize_options[] = {
    { "dtype", required_argument, NULL, OPT_DTYPE },
    { "force", no_argument, NULL, OPT_FORCE },
    { "no-sync", no_argument, NULL, OPT_NO_SYNC },
    CLI_RUN_OPTIONS,
    { NULL, 0, NULL, 0 },
};

static int cmd_dequantize(int argc, char **argv, cli_common *common)
{
    fp8_dequant_options opts = FP8_DEQUANT_OPTIONS_INIT;
    cli_options own = { cli_dequantize_options, take_option, &opts };
    int rc = cli_parse(&cli_cmd_dequantize, &argc, argv, common, &own);
    if (rc >= 0 || (rc = cli_run_check(&opts.run)) >= 0)
        return rc;
    opts.threads = common->threads;
    opts.device = common->device;
    opts.cancel = cli_catch_signals();
    cli_progress_state prog = { 0 };
    if (cli_progress_wanted(common)) {
        opts.progress = cli_show_progress;
        opts.progress_user = &prog;
        prog.label = "dequantize";
    }

    fp8_ctx *ctx = cli_ctx_create();
    if (!ctx)
        return EXIT_IO;
    fp8_dequant_report r;
    double t0 = cli_now();
    fp8_status st = fp8_dequantize(ctx, argv[1], argv[2], &opts, &r);
    cli_progress_end(&prog, st == FP8_OK);
    rc = st ? cli_fail(ctx, st) : report(common, argv[1], argv[2], &opts, &r, cli_now() - t0);
    fp8_ctx_free(ctx);
    return rc;
}

/* The command: its synopsis, --help text, examples and exit statuses
 * (fp8conv help dequantize-for-export), and its options for getopt and completion. */
const cli_command cli_cmd_dequantize = { "dequantize-for-export", "INPUT OUTPUT", "convert an FP8 checkpoint back to bf16/f16/f32",
  cmd_dequantize,
  "Options:\n"
  "      --dtype bf16|f16|f32   the output dtype of dequantized weights (default bf16)\n"
  "      --force                replace OUTPUT if it exists\n"
  "      --no-sync              do not fsync the output (faster; a power loss soon\n"
  "                             after can leave it damaged)\n"
  CLI_RUN_HELP,
  "  fp8conv dequantize-for-export model-fp8/ model-bf16/\n"
  "  fp8conv dequantize-for-export --dtype f32 model-fp8/ model-f32/\n",
  "0 written; 2 usage error, OUTPUT exists, or --finish with a part missing;\n"
  "3 bad input (not FP8, a bad scale); "
  "4 I/O error; 5 device error; 128+N stopped by signal N (130 SIGINT, 143 SIGTERM)",
  cli_dequantize_options };
