/*
 * cmd_convert.c - fp8conv convert INPUT OUTPUT: an FP8 checkpoint into
 * another FP8 layout; per FP8 weight, whether it was copied exactly or
 * re-quantized from its values, and how much the values changed.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CONVERT_JSON_VERSION 1

enum { OPT_EXACT = CLI_OPT_LAYOUT_END, OPT_FORCE, OPT_NO_SYNC, OPT_LIKE, OPT_KV_NAMES };

typedef struct {
    fp8_convert_options opts;
    cli_layout_given given;
    const char *like;
} convert_args;

static int take_option(int code, const char *value, void *state)
{
    convert_args *args = state;
    fp8_convert_options *a = &args->opts;
    fp8_quant_options *o = &a->target;
    if (code >= CLI_OPT_FIRST && code < CLI_OPT_LAYOUT_END) {
        int rc = cli_layout_option(code, value, o, &args->given);
        a->scheme_set = args->given.scheme;
        a->block_set = args->given.block;
        a->scale_fmt_set = args->given.scale_fmt;
        return rc;
    }
    switch (code) {
    case OPT_EXACT: a->exact = true; break;
    case OPT_FORCE: o->force = true; break;
    case OPT_NO_SYNC: o->no_sync = true; break;
    case OPT_LIKE: args->like = value; break;
    case OPT_KV_NAMES: a->kv_names = value; break;
    }
    return -1;
}

static int print_json(const fp8_convert *c, const fp8_convert_report *r, const char *in,
                      const char *out, double seconds)
{
    const fp8_quant_plan *plan = fp8_convert_plan(c);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "convert_version", CONVERT_JSON_VERSION);
    cJSON_AddStringToObject(root, "input", in);
    cJSON_AddStringToObject(root, "output", out);
    if (r->cast)
        cJSON_AddStringToObject(root, "cast", r->cast);
    if (!r->to_nvfp4) {
        cJSON_AddStringToObject(root, "scheme", fp8_scheme_name(r->scheme));
        if (fp8_scheme_options(r->scheme) & FP8_SCHEME_TAKES_BLOCK) {
            int b[2] = { (int)r->block_rows, (int)r->block_cols };
            cJSON_AddItemToObject(root, "block", cJSON_CreateIntArray(b, 2));
        }
    }
    cJSON_AddStringToObject(root, "format", r->format);
    if (fp8_convert_target(c)->profile)
        cJSON_AddStringToObject(root, "profile", fp8_profile_name(fp8_convert_target(c)->profile));
    if (r->to_nvfp4) {
        cJSON_AddNumberToObject(root, "nvfp4_weights", (double)r->nvfp4);
        cJSON_AddNumberToObject(root, "reciprocals_rounded", (double)r->rounded);
    } else if (r->cast)
        cJSON_AddNumberToObject(root, "experts_cast", (double)r->experts);
    if (r->cast) {
        cJSON_AddNumberToObject(root, "copied", (double)r->copied);
        cJSON_AddNumberToObject(root, "seconds", seconds);
        return cli_print_json(root);
    }
    cJSON *weights = cJSON_AddArrayToObject(root, "weights");
    for (size_t i = 0; i < fp8_convert_weight_count(c); i++) {
        const fp8_convert_weight *w = fp8_convert_weight_at(c, i);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "name", w->name);
        cJSON_AddStringToObject(j, "path", w->exact ? "exact" : "values");
        if (!w->exact)
            cJSON_AddStringToObject(j, "why", w->why);
        cJSON_AddItemToObject(j, "elements", cli_json_u64(w->elements));
        cJSON_AddItemToObject(j, "codes_changed", cli_json_u64(w->codes_changed));
        cJSON_AddItemToObject(j, "changed", cli_json_u64(w->changed));
        cJSON_AddNumberToObject(j, "max_change", w->max_change);
        cJSON_AddItemToArray(weights, j);
    }
    cJSON_AddNumberToObject(root, "exact", (double)r->exact);
    cJSON_AddNumberToObject(root, "requantized", (double)r->requantized);
    cJSON_AddNumberToObject(root, "activation_scales", (double)r->act_scales);
    cJSON_AddNumberToObject(root, "activation_scales_dropped", (double)r->dropped);
    cJSON_AddNumberToObject(root, "kv_cache_scales", (double)r->kv_scales);
    cJSON_AddNumberToObject(root, "kv_cache_scales_renamed", (double)r->kv_renamed);
    cJSON *warn = cJSON_AddArrayToObject(root, "warnings");
    for (size_t i = 0; i < fp8_quant_plan_warning_count(plan); i++)
        cJSON_AddItemToArray(warn, cJSON_CreateString(fp8_quant_plan_warning(plan, i)));
    cJSON_AddStringToObject(root, "device", fp8_device_name(fp8_quant_plan_device(plan)));
    cJSON_AddNumberToObject(root, "seconds", seconds);
    return cli_print_json(root);
}

static void print_report(const fp8_convert *c, const fp8_convert_report *r, const char *out,
                         double seconds)
{
    const fp8_quant_options *o = fp8_convert_target(c);
    if (r->to_nvfp4 && !strcmp(r->cast, "mxfp4-to-nvfp4"))
        cli_printf("wrote %s: NVFP4 (weight-only), format %s\n%zu MXFP4 weights cast exactly: "
                   "codes kept, each group scale 2^k two E4M3 scales 2^(k - m) under a "
                   "global scale 2^m; %zu tensors copied; %.2f s on cpu\n",
                   cli_esc(out), r->format, r->nvfp4, r->copied, seconds);
    else if (r->to_nvfp4)
        cli_printf("wrote %s: NVFP4, format %s\n%zu NVFP4 weights: codes and group scales "
                   "copied, second-level scales inverted (%zu rounded to the nearest fp32, "
                   "the rest exact); %zu tensors copied; %.2f s on cpu\n",
                   cli_esc(out), r->format, r->nvfp4, r->rounded, r->copied, seconds);
    else if (r->cast)
        cli_printf("wrote %s: DeepSeek-V4 MXFP4 experts cast to FP8 (scheme block 128x128 "
                   "ue8m0, expert_dtype fp8)\n%zu expert weights cast exactly, %zu tensors "
                   "copied; %.2f s on cpu\n",
                   cli_esc(out), r->experts, r->copied, seconds);
    if (r->cast)
        return;
    for (size_t i = 0; i < fp8_convert_weight_count(c); i++) {
        const fp8_convert_weight *w = fp8_convert_weight_at(c, i);
        if (w->exact)
            cli_printf("exact     %s\n", cli_esc(w->name));
        else
            cli_printf("values    %s: %llu of %llu codes and %llu values changed, largest "
                       "change %g (%s)\n",
                       cli_esc(w->name), (unsigned long long)w->codes_changed,
                       (unsigned long long)w->elements, (unsigned long long)w->changed,
                       w->max_change, cli_esc(w->why));
    }
    cli_printf("wrote %s: scheme %s", cli_esc(out), fp8_scheme_name(o->scheme));
    if (fp8_scheme_options(o->scheme) & FP8_SCHEME_TAKES_BLOCK)
        cli_printf(" %ux%u%s", o->block_rows, o->block_cols, o->scale_ue8m0 ? " ue8m0" : "");
    cli_printf(", format %s", r->format);
    if (o->profile)
        cli_printf(", profile %s", fp8_profile_name(o->profile));
    cli_printf("\n");
    cli_printf("FP8 weights: %zu exact (codes copied), %zu re-quantized from their values",
               r->exact, r->requantized);
    if (r->act_scales)
        cli_printf(", %zu static activation scales kept", r->act_scales);
    if (r->dropped)
        cli_printf(", %zu activation scales dropped", r->dropped);
    if (r->kv_scales)
        cli_printf(", %zu KV-cache scales kept (%zu renamed to the %s naming)", r->kv_scales,
                   r->kv_renamed, r->kv_names ? r->kv_names : "input's");
    cli_printf("; %.2f s on %s\n", seconds,
               fp8_device_name(fp8_quant_plan_device(fp8_convert_plan(c))));
}

static const struct option cli_convert_options[] = {
    { "scheme", required_argument, NULL, CLI_OPT_SCHEME },
    { "format", required_argument, NULL, CLI_OPT_FORMAT },
    { "block", required_argument, NULL, CLI_OPT_BLOCK },
    { "scale-fmt", required_argument, NULL, CLI_OPT_SCALE_FMT },
    { "mx-rounding", required_argument, NULL, CLI_OPT_MX_ROUNDING },
    { "profile", required_argument, NULL, CLI_OPT_PROFILE },
    { "exact", no_argument, NULL, OPT_EXACT },
    { "force", no_argument, NULL, OPT_FORCE },
    { "no-sync", no_argument, NULL, OPT_NO_SYNC },
    { "like", required_argument, NULL, OPT_LIKE },
    { "kv-names", required_argument, NULL, OPT_KV_NAMES },
    { NULL, 0, NULL, 0 },
};

static int cmd_convert(int argc, char **argv, cli_common *common)
{
    convert_args args = { .opts = FP8_CONVERT_OPTIONS_INIT };
    fp8_convert_options *o = &args.opts;
    cli_options own = { cli_convert_options, take_option, &args };
    int rc = cli_parse(&cli_cmd_convert, &argc, argv, common, &own);
    if (rc >= 0)
        return rc;
    if (args.like && (o->scheme_set || o->block_set || o->scale_fmt_set || args.given.format)) {
        cli_error("--like copies the layout: it cannot go with --scheme, --format, --block or "
                  "--scale-fmt");
        return EXIT_USAGE;
    }
    const char *in = argv[1], *out = argv[2];
    o->target.threads = common->threads;
    o->target.device = common->device;
    o->target.cancel = cli_catch_signals();
    cli_progress_state prog = { .label = "convert" };
    if (cli_progress_wanted(common)) {
        o->target.progress = cli_show_progress;
        o->target.progress_user = &prog;
    }
    fp8_ctx *ctx = cli_ctx_create();
    if (!ctx)
        return EXIT_IO;
    fp8_convert *c = NULL;
    double t0 = cli_now();
    fp8_status st = FP8_OK;
    fp8_like *like = NULL;
    if (args.like && !(st = cli_like_open(ctx, args.like, in, common, &o->target, &like))) {
        o->scheme_set = o->scale_fmt_set = true;
        /* a block size only where REF's scheme has one (per-tensor Mistral) */
        o->block_set = fp8_scheme_options(o->target.scheme) & FP8_SCHEME_TAKES_BLOCK;
        /* the set of FP8 weights stays the input's: the reference's ignore
         * list only where it has the same FP8 weights (else it could name
         * one); its scale dtype where a scale's values are exact in it */
        o->target.declare_ignore = fp8_like_same_weights(like);
        if (!o->kv_names) /* --kv-names wins */
            o->kv_names = fp8_like_kv_names(like);
        o->act_name = fp8_like_act_name(like);
    }
    if (!st)
        st = fp8_convert_create(ctx, in, o, &c);
    const fp8_quant_plan *plan = c ? fp8_convert_plan(c) : NULL;
    size_t said = plan ? fp8_quant_plan_warning_count(plan) : 0;
    for (size_t i = 0; !common->quiet && i < said; i++)
        fprintf(stderr, "fp8conv: warning: %s\n", cli_esc(fp8_quant_plan_warning(plan, i)));
    if (!st)
        st = fp8_convert_run(ctx, c, out);
    cli_progress_end(&prog, st == FP8_OK);
    for (size_t i = said; !st && !common->quiet && plan && i < fp8_quant_plan_warning_count(plan);
         i++) /* the run's */
        fprintf(stderr, "fp8conv: warning: %s\n", fp8_quant_plan_warning(plan, i));
    fp8_convert_report r = { 0 };
    if (!st)
        fp8_convert_get_report(c, &r);
    if (!st && !common->quiet && o->target.profile && !r.requantized) /* not an error */
        fprintf(stderr, "fp8conv: note: --profile %s: convert re-quantized no value (every "
                "weight %s exactly), so the profile changed no byte\n",
                fp8_profile_name(o->target.profile), r.cast ? "cast" : "copied");
    if (st)
        rc = cli_fail(ctx, st);
    else if (common->quiet)
        rc = EXIT_OK;
    else if (common->json)
        rc = print_json(c, &r, in, out, cli_now() - t0);
    else
        print_report(c, &r, out, cli_now() - t0), rc = EXIT_OK;
    fp8_convert_free(c);
    fp8_like_free(like);
    fp8_ctx_free(ctx);
    return rc;
}

/* The command: its synopsis, --help text, examples and exit statuses
 * (fp8conv help convert), and its options for getopt and completion. */
const cli_command cli_cmd_convert = { "convert", "INPUT OUTPUT", "convert an FP8 checkpoint into another FP8 layout", cmd_convert,
  "Options:\n"
  "      --format hf-fp8|compressed-tensors|modelopt\n"
  "                             output layout (default: the input's, when it has the\n"
  "                             scheme)\n"
  "      --scheme block|channel|tensor|mxfp8\n"
  "                             scaling granularity (default: the input's)\n"
  "      --block RxC            block size (default: the input's); a block that divides\n"
  "                             the input's keeps every code\n"
  "      --scale-fmt float|ue8m0\n"
  "                             block scales as they are, or powers of two (hf-fp8)\n"
  "      --mx-rounding rceil|floor\n"
  "                             MX scale exponent rounding (default rceil)\n"
  CLI_PROFILE_HELP
  "                             for the weights re-quantized from their values\n"
  "      --exact                fail rather than re-quantize a weight from its values\n"
  "      --like PATH            the layout of a reference FP8 checkpoint (or its\n"
  "                             config.json): scheme, format, block, scale_fmt, its\n"
  "                             scale and KV-cache scale names, scale dtype\n"
  "      --kv-names modelopt|llm-compressor|fused-qkv|ct-output\n"
  "                             name the KV-cache scales so (default: the target\n"
  "                             format's naming when the format changes)\n"
  "      --force                replace OUTPUT if it exists\n"
  "      --no-sync              do not fsync the output (faster; a power loss soon\n"
  "                             after can leave it damaged)\n"
  "Packed FP4 input is cast, exactly or not at all: DeepSeek-V4's MXFP4 experts to\n"
  "FP8 128x128 blocks (F32 scales, expert_dtype \"fp8\"); NVFP4 between modelopt and\n"
  "compressed-tensors (--format, the other one; global scales inverted); compressed-\n"
  "tensors MXFP4 to NVFP4 (--format compressed-tensors or modelopt)\n",
  "  fp8conv convert --block 16x16 model-fp8/ model-fp8-16/\n"
  "  fp8conv convert --format compressed-tensors model-fp8/ model-ct/\n"
  "  fp8conv convert --scheme channel --profile vllm model-fp8/ model-ch/\n",
  "0 written; 2 usage error, OUTPUT exists, or --exact and a weight is not exact;\n"
  "3 bad input (not FP8, a bad scale or code, an FP4 cast that would change a value);\n"
  "4 I/O error; 5 device error; 128+N stopped by signal N (130 SIGINT, 143 SIGTERM)",
  cli_convert_options };
