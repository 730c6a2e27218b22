/*
 * cmd_verify.c - fp8conv verify CHECKPOINT: every problem found, errors then
 * warnings; exit 1 on an error (or, with --strict, a warning).
 */
#include <stdlib.h>
#include <string.h>

#include <inttypes.h>

#include "cli.h"

#define VERIFY_JSON_VERSION 1

enum {
    OPT_STRICT = CLI_OPT_FIRST,
    OPT_NO_VALUES,
    OPT_TP,
    OPT_EP,
    OPT_AGAINST,
    OPT_LOADER,
    OPT_FORMAT,
    OPT_SCHEME,
    OPT_BLOCK,
    OPT_LIKE,
    OPT_PROFILE,
};

typedef struct {
    fp8_verify_options opts;
    bool strict;
} verify_args;

static int take_option(int code, const char *value, void *state)
{
    verify_args *a = state;
    if (code == OPT_TP || code == OPT_EP) {
        char *end;
        long n = strtol(value, &end, 10);
        if (!*value || *end || n < 1 || n > 1024) {
            cli_error("%s: '%s' is not a parallel size from 1 to 1024",
                      code == OPT_TP ? "--tp" : "--ep", value);
            return EXIT_USAGE;
        }
        *(code == OPT_TP ? &a->opts.tp : &a->opts.ep) = (int)n;
    } else if (code == OPT_AGAINST) {
        a->opts.against = value;
    } else if (code == OPT_LIKE) {
        a->opts.like = value;
    } else if (code == OPT_PROFILE) {
        /* the profiles' names, then "auto": try them all */
        static const char *names[FP8_PROFILE_COUNT + 2];
        int choice;
        for (int i = 0; i < FP8_PROFILE_COUNT; i++)
            names[i] = fp8_profile_names[i];
        names[FP8_PROFILE_COUNT] = "auto";
        if (!cli_choice("--profile", value, names, &choice))
            return EXIT_USAGE;
        a->opts.profile_auto = choice == FP8_PROFILE_COUNT;
        a->opts.profile = a->opts.profile_auto ? FP8_PROFILE_FP8CONV : (fp8_profile)choice;
    } else if (code == OPT_LOADER) {
        fp8_loader l;
        if (!fp8_loader_from_name(value, &l)) {
            cli_error("--loader: '%s' is not vllm, sglang or transformers", value);
            return EXIT_USAGE;
        }
        a->opts.require |= 1u << l;
    } else if (code == OPT_FORMAT || code == OPT_SCHEME) {
        int choice;
        if (code == OPT_FORMAT && !cli_choice("--format", value, fp8_format_names, &choice))
            return EXIT_USAGE;
        if (code == OPT_SCHEME && !cli_choice("--scheme", value, fp8_scheme_names, &choice))
            return EXIT_USAGE;
        if (code == OPT_FORMAT)
            a->opts.assume_format = (fp8_format)(choice + 1);
        else
            a->opts.assume_scheme = (fp8_scheme)choice;
    } else if (code == OPT_BLOCK) {
        if (!cli_parse_block(value, &a->opts.assume_block_rows, &a->opts.assume_block_cols)) {
            cli_error("--block: '%s' is not ROWSxCOLS with each from 1 to 4096 (e.g. 128x128)",
                      value);
            return EXIT_USAGE;
        }
    } else if (code == OPT_STRICT)
        a->strict = true;
    else if (code == OPT_NO_VALUES)
        a->opts.values = false;
    else
        return EXIT_USAGE;
    return -1;
}

/* The loaders that must load it: --loader's, or the serving stacks. */
static bool required(const verify_args *a, fp8_loader l)
{
    return (a->opts.require ? a->opts.require : FP8_LOADERS_SERVING) >> l & 1;
}

/* The command's own long options (getopt, --help, bash completion). */
static const struct option cli_verify_options[] = {
    { "strict", no_argument, NULL, OPT_STRICT },
    { "no-values", no_argument, NULL, OPT_NO_VALUES },
    { "tp", required_argument, NULL, OPT_TP },
    { "ep", required_argument, NULL, OPT_EP },
    { "against", required_argument, NULL, OPT_AGAINST },
    { "loader", required_argument, NULL, OPT_LOADER },
    { "format", required_argument, NULL, OPT_FORMAT },
    { "scheme", required_argument, NULL, OPT_SCHEME },
    { "block", required_argument, NULL, OPT_BLOCK },
    { "like", required_argument, NULL, OPT_LIKE },
    { "profile", required_argument, NULL, OPT_PROFILE },
    { NULL, 0, NULL, 0 },
};

static int cmd_verify(int argc, char **argv, cli_common *common)
{
    verify_args a = { .opts = FP8_VERIFY_OPTIONS_INIT };
    cli_options own = { cli_verify_options, take_option, &a };
    int rc = cli_parse(&cli_cmd_verify, &argc, argv, common, &own);
    if (rc >= 0)
        return rc;
    a.opts.threads = common->threads;
    if (a.opts.against && !a.opts.values) {
        cli_error("verify: --against compares values; it cannot go with --no-values");
        return EXIT_USAGE;
    }
    if ((a.opts.profile || a.opts.profile_auto) && !a.opts.against) {
        cli_error("verify: --profile says how --against re-quantizes; it needs --against");
        return EXIT_USAGE;
    }
    if (a.opts.against)
        a.opts.cancel = cli_catch_signals();
    cli_progress_state prog = { .label = "verify" };
    if (cli_progress_wanted(common)) {
        a.opts.progress = cli_show_progress;
        a.opts.progress_user = &prog;
    }
    fp8_ctx *ctx = cli_ctx_create();
    fp8_verify *v = NULL;
    if (!ctx)
        return EXIT_IO;
    fp8_status st = fp8_verify_run(ctx, argv[1], &a.opts, &v);
    cli_progress_end(&prog, st == FP8_OK);
    if (st) {
        rc = cli_fail(ctx, st);
        fp8_ctx_free(ctx);
        return rc;
    }
    size_t count[3] = { 0 }, errors, warnings, notes;
    for (size_t i = 0; i < fp8_verify_count(v); i++)
        count[fp8_verify_finding(v, i)->severity]++;
    errors = count[FP8_SEV_ERROR];
    warnings = count[FP8_SEV_WARNING];
    notes = count[FP8_SEV_NOTE];
    rc = errors || (a.strict && warnings) ? EXIT_FOUND : EXIT_OK;
    long requantized, fp4 = fp8_verify_requantized_fp4(v);
    const char *miss;
    long reproduced = fp8_verify_reproduced(v, &requantized, &miss);
    if (common->json && !common->quiet) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddNumberToObject(root, "verify_version", VERIFY_JSON_VERSION);
        cJSON_AddStringToObject(root, "path", argv[1]);
        cJSON_AddStringToObject(root, "format", cli_esc(fp8_verify_format(v)));
        cJSON_AddNumberToObject(root, "fp8_weights", (double)fp8_verify_fp8_weights(v));
        cJSON_AddNumberToObject(root, "fp4_weights", (double)fp8_verify_fp4_weights(v));
        cJSON_AddItemToObject(root, "saturated_codes", cli_json_u64(fp8_verify_saturated(v)));
        cJSON_AddItemToObject(root, "saturated_packed_codes",
                              cli_json_u64(fp8_verify_saturated_packed(v)));
        cJSON_AddBoolToObject(root, "values_scanned", a.opts.values);
        cJSON_AddBoolToObject(root, "tp_dimensions_found", fp8_verify_tp_known(v));
        cJSON *sizes = cJSON_AddArrayToObject(root, "tp_sizes_that_load");
        for (int t = 1; t <= 64; t++)
            if (fp8_verify_tp_sizes(v) >> (t - 1) & 1)
                cJSON_AddItemToArray(sizes, cJSON_CreateNumber(t));
        if (a.opts.against && reproduced >= 0) {
            cJSON *r = cJSON_AddObjectToObject(root, "requantized");
            cJSON_AddNumberToObject(r, "fp8_weights", (double)(requantized - fp4));
            cJSON_AddNumberToObject(r, "fp4_weights", (double)fp4);
            cJSON_AddNumberToObject(r, "reproduced", (double)reproduced);
            if (a.opts.profile)
                cJSON_AddStringToObject(r, "profile", fp8_profile_name(a.opts.profile));
            unsigned tried;
            long found = fp8_verify_profiles(v, &tried);
            if (a.opts.profile_auto && found >= 0) {
                cJSON *o = cJSON_AddObjectToObject(r, "profiles");
                cJSON *yes = cJSON_AddArrayToObject(o, "reproduce");
                cJSON *all = cJSON_AddArrayToObject(o, "tried");
                for (int p = 0; p < FP8_PROFILE_COUNT; p++) {
                    if (found >> p & 1)
                        cJSON_AddItemToArray(yes, cJSON_CreateString(fp8_profile_name(p)));
                    if (tried >> p & 1)
                        cJSON_AddItemToArray(all, cJSON_CreateString(fp8_profile_name(p)));
                }
            }
            if (miss)
                cJSON_AddStringToObject(r, "first_difference", miss);
            else
                cJSON_AddNullToObject(r, "first_difference");
        } else {
            cJSON_AddNullToObject(root, "requantized");
        }
        fp8_quality q = fp8_verify_quality(v);
        if (q.elements)
            cJSON_AddItemToObject(root, "quality", cli_json_quality(&q));
        else
            cJSON_AddNullToObject(root, "quality");
        cJSON_AddNumberToObject(root, "errors", (double)errors);
        cJSON_AddNumberToObject(root, "warnings", (double)warnings);
        cJSON_AddNumberToObject(root, "notes", (double)notes);
        cJSON_AddBoolToObject(root, "ok", rc == EXIT_OK);
        cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
        for (size_t i = 0; i < fp8_verify_stats_count(v); i++) {
            const fp8_verify_stats *t = fp8_verify_stats_at(v, i);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "name", t->name);
            cJSON_AddItemToObject(o, "saturated_codes", cli_json_u64(t->saturated));
            cJSON_AddItemToObject(o, "zero_groups", cli_json_u64(t->zero_groups));
            cJSON_AddItemToObject(o, "groups", cli_json_u64(t->groups));
            if (t->quality.elements)
                cJSON_AddItemToObject(o, "quality", cli_json_quality(&t->quality));
            cJSON_AddItemToArray(tensors, o);
        }
        cJSON *loaders = cJSON_AddArrayToObject(root, "loaders");
        for (int l = 0; l < FP8_LOADER_COUNT; l++) {
            cJSON *o = cJSON_CreateObject(), *why = NULL;
            cJSON_AddStringToObject(o, "name", fp8_loader_name((fp8_loader)l));
            cJSON_AddBoolToObject(o, "required", required(&a, (fp8_loader)l));
            cJSON_AddBoolToObject(o, "loads", fp8_verify_loads(v, (fp8_loader)l));
            if (fp8_verify_condition(v, (fp8_loader)l))
                cJSON_AddStringToObject(o, "condition", fp8_verify_condition(v, (fp8_loader)l));
            why = cJSON_AddArrayToObject(o, "reasons");
            for (size_t i = 0; i < fp8_verify_count(v); i++) {
                const fp8_finding *f = fp8_verify_finding(v, i);
                if (!(f->loaders >> l & 1))
                    continue;
                cJSON *r = cJSON_CreateObject();
                cJSON_AddStringToObject(r, "rule", f->rule);
                cJSON_AddStringToObject(r, "message", f->message);
                cJSON_AddItemToArray(why, r);
            }
            cJSON_AddItemToArray(loaders, o);
        }
        cJSON *list = cJSON_AddArrayToObject(root, "findings");
        for (size_t i = 0; i < fp8_verify_count(v); i++) {
            const fp8_finding *f = fp8_verify_finding(v, i);
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "severity", fp8_severity_name(f->severity));
            cJSON_AddStringToObject(o, "rule", f->rule);
            cJSON_AddStringToObject(o, "message", f->message);
            cJSON *stops = cJSON_AddArrayToObject(o, "loaders");
            for (int l = 0; l < FP8_LOADER_COUNT; l++)
                if (f->loaders >> l & 1)
                    cJSON_AddItemToArray(stops, cJSON_CreateString(fp8_loader_name((fp8_loader)l)));
            cJSON_AddItemToArray(list, o);
        }
        if (cli_print_json(root))
            rc = EXIT_IO;
    } else if (!common->quiet) {
        for (size_t i = 0; i < fp8_verify_count(v); i++) {
            const fp8_finding *f = fp8_verify_finding(v, i);
            cli_printf("%s [%s] %s\n", fp8_severity_name(f->severity), f->rule,
                       cli_esc(f->message));
        }
        cli_printf("%s: %zu FP8 weights", cli_esc(argv[1]), fp8_verify_fp8_weights(v));
        if (fp8_verify_fp4_weights(v))
            cli_printf(", %zu packed 4-bit weights", fp8_verify_fp4_weights(v));
        cli_printf("; declared: %s\n", cli_esc(fp8_verify_format(v)));
        if (!fp8_verify_tp_known(v) && fp8_verify_fp8_weights(v)) {
            cli_printf("loads at TP: not computed (%s)\n",
                       strcmp(fp8_verify_format(v), "none") == 0
                           ? "no declared format"
                           : "the model's dimensions were not found in config.json: no "
                             "hidden_size and num_attention_heads, at its top level or under "
                             "text_config");
        } else if (fp8_verify_tp_sizes(v) || fp8_verify_fp8_weights(v)) {
            cli_printf("loads at TP (1..64%s):", a.opts.ep > 1 ? ", with --ep" : "");
            for (int t = 1; t <= 64; t++)
                if (fp8_verify_tp_sizes(v) >> (t - 1) & 1)
                    cli_printf(" %d", t);
            cli_printf("%s\n", fp8_verify_tp_sizes(v) ? "" : " none");
        }
        if (fp8_verify_fp8_weights(v) || fp8_verify_fp4_weights(v)) {
            cli_printf("loads in:");
            for (int l = 0; l < FP8_LOADER_COUNT; l++) {
                const char *when = fp8_verify_loads(v, (fp8_loader)l)
                                       ? fp8_verify_condition(v, (fp8_loader)l) : NULL;
                cli_printf("%s %s %s%s%s%s", l ? "," : "", fp8_loader_name((fp8_loader)l),
                       fp8_verify_loads(v, (fp8_loader)l) ? "yes" : "no", when ? " " : "",
                       when ? when : "", required(&a, (fp8_loader)l) ? " (required)" : "");
            }
            cli_printf("\n");
        }
        if (a.opts.values) {
            uint64_t zero = 0, groups = 0;
            for (size_t i = 0; i < fp8_verify_stats_count(v); i++) {
                zero += fp8_verify_stats_at(v, i)->zero_groups;
                groups += fp8_verify_stats_at(v, i)->groups;
            }
            /* each kind of weight's own largest codes: FP8's, packed ones' (E2M1, INT4) */
            if (fp8_verify_fp8_weights(v) || !fp8_verify_fp4_weights(v))
                cli_printf("codes at +-448: %llu%s", (unsigned long long)fp8_verify_saturated(v),
                           fp8_verify_fp4_weights(v) ? ", " : "");
            if (fp8_verify_fp4_weights(v))
                cli_printf("packed codes at their largest magnitude (E2M1 +-6, INT4 7 and -8): "
                           "%llu", (unsigned long long)fp8_verify_saturated_packed(v));
            cli_printf("; all-zero scale groups: %llu of %llu (per tensor: --json)\n",
                       (unsigned long long)zero, (unsigned long long)groups);
        }
        if (a.opts.against && reproduced < 0)
            cli_printf("re-quantizing %s: not possible with the declared scheme\n",
                       cli_esc(a.opts.against));
        else if (a.opts.against) {
            char kinds[96];
            if (!fp4)
                snprintf(kinds, sizeof kinds, "FP8 weights");
            else if (fp4 == requantized)
                snprintf(kinds, sizeof kinds, "packed 4-bit weights");
            else
                snprintf(kinds, sizeof kinds, "weights (%ld FP8, %ld packed 4-bit)",
                         requantized - fp4, fp4);
            cli_printf("re-quantizing %s%s%s reproduces %ld of %ld %s byte for byte%s%s\n",
                       cli_esc(a.opts.against), a.opts.profile ? " with profile " : "",
                       a.opts.profile ? fp8_profile_name(a.opts.profile) : "", reproduced,
                       requantized, kinds,
                       miss ? "; first that differs: " : "", miss ? cli_esc(miss) : "");
            unsigned tried;
            long found = fp8_verify_profiles(v, &tried);
            if (a.opts.profile_auto && found >= 0) {
                cli_printf("profiles whose bytes these are:");
                for (int p = 0; p < FP8_PROFILE_COUNT; p++)
                    if (found >> p & 1)
                        cli_printf(" %s", fp8_profile_name(p));
                cli_printf("%s (tried:", found ? "" : " none");
                for (int p = 0; p < FP8_PROFILE_COUNT; p++)
                    if (tried >> p & 1)
                        cli_printf(" %s", fp8_profile_name(p));
                cli_printf(")\n");
            }
        }
        fp8_quality q = fp8_verify_quality(v);
        if (q.elements) {
            /* the model's numbers, and the weight furthest from SRC (per tensor: --json) */
            const fp8_verify_stats *worst = NULL;
            for (size_t i = 0; i < fp8_verify_stats_count(v); i++) {
                const fp8_verify_stats *t = fp8_verify_stats_at(v, i);
                if (t->quality.elements &&
                    (!worst || !(fp8_quality_of(&t->quality).snr_db >=
                                 fp8_quality_of(&worst->quality).snr_db)))
                    worst = t;
            }
            cli_printf("quality against %s: %" PRIu64 " elements", cli_esc(a.opts.against),
                       q.elements);
            cli_print_quality(&q);
            if (worst) {
                cli_printf("; lowest SNR: %s", cli_esc(worst->name));
                cli_print_quality(&worst->quality);
            }
            cli_printf("\n");
        }
        if (!a.opts.values)
            cli_printf("values not scanned (--no-values)\n");
        cli_printf("%zu error%s, %zu warning%s", errors, errors == 1 ? "" : "s", warnings,
               warnings == 1 ? "" : "s");
        if (notes)
            cli_printf(", %zu note%s", notes, notes == 1 ? "" : "s");
        cli_printf(": %s\n", rc == EXIT_OK ? "ok" : "problems found");
    }
    fp8_verify_free(v);
    fp8_ctx_free(ctx);
    return rc;
}

/* The command: its synopsis, --help text, examples and exit statuses
 * (fp8conv help verify), and its options for getopt and completion. */
const cli_command cli_cmd_verify = { "verify", "CHECKPOINT", "check an FP8 checkpoint offline (exit 1 on a problem)", cmd_verify,
  "Options:\n"
  "      --strict               warnings fail too (exit 1)\n"
  "      --no-values            check headers and config only, not the tensor data\n"
  "      --tp N                 report every layer that would not load at tensor-\n"
  "                             parallel size N (vLLM/SGLang partitions)\n"
  "      --ep M                 MoE experts spread whole over M expert-parallel ranks\n"
  "      --against SRC          compare with the bf16 source: the FP8 or FP4 error\n"
  "                             bound, and whether re-quantizing SRC reproduces the\n"
  "                             bytes\n"
  "      --loader vllm|sglang|transformers\n"
  "                             require that loader too (repeatable; default vllm and\n"
  "                             sglang)\n"
  "      --format hf-fp8|compressed-tensors|modelopt\n"
  "                             for a file without config.json: check it against this\n"
  "                             layout, as quantize declares it\n"
  "      --scheme block|channel|tensor|mxfp8\n"
  "                             with --format (default block)\n"
  "      --block RxC            with --format --scheme block (default 128x128)\n"
  "      --like PATH            compare the layout with a reference checkpoint (or its\n"
  "                             config.json): tensors, dtypes, scale shapes and\n"
  "                             quantization_config; every difference is an error\n"
  "      --profile " CLI_PROFILE_NAMES "|auto\n"
  "                             with --against: re-quantize SRC as that engine does\n"
  "                             (fp8conv-formats(5), PROFILES); auto: with each profile\n"
  "                             that defines the scheme, and say which reproduce it\n",
  "  fp8conv verify model-fp8/ || exit 1\n"
  "  fp8conv verify --no-values --tp 8 model-fp8/   # the sample (3 heads): exit 1\n"
  "  fp8conv verify --strict --json model-fp8/ | jq .findings\n",
  "0 no problem found; 1 a problem (an error, or with --strict a warning);\n"
  "2 usage error; 4 I/O error; 5 device error; 128+N --against stopped by signal N (130 SIGINT)",
  cli_verify_options };
