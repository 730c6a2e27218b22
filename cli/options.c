/*
 * options.c - reading the command line: the options every command takes,
 * the layout options quantize and convert share, --part/--finish/--resume/
 * --page-cache, choices and block sizes, and each command's --help.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

const char cli_common_help[] =
    "Common options:\n"
    "  --device auto|cpu|cuda     where to compute (default auto, which is the CPU: faster\n"
    "                             than the GPU path as measured); cuda without a GPU exits 5\n"
    "  -j, --threads N            worker threads (default: all cores)\n"
    "      --json                 one JSON document on stdout instead of the text report\n"
    "  -q, --quiet                no report, only errors\n"
    "      --progress auto|always|never\n"
    "                             progress bar on stderr (auto: when stderr is a terminal)\n"
    "  -h, --help                 this help\n";

const struct option cli_common_options[] = {
    { "device", required_argument, NULL, 'd' },
    { "threads", required_argument, NULL, 'j' },
    { "json", no_argument, NULL, 'J' },
    { "quiet", no_argument, NULL, 'q' },
    { "progress", required_argument, NULL, 'P' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

void cli_command_usage(const cli_command *cmd, FILE *out)
{
    fprintf(out,
            "usage: fp8conv %s [OPTIONS] %s\n\n%s.\n\n%s\n"
            "Common options: --device, -j/--threads, --json, -q/--quiet, --progress, -h\n"
            "(fp8conv --help says what they do).\n\n"
            "Examples:\n%s\n"
            "Exit status: %s.\n"
            "See fp8conv(1).\n",
            cmd->name, cmd->args, cmd->summary, cmd->options, cmd->examples, cmd->exits);
}

static bool parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > 4096)
        return false;
    *out = (int)v;
    return true;
}

/* Option values that name one of a few choices; the index is the enum value. */
static const char *const device_names[] = { "auto", "cpu", "cuda", NULL };
static const char *const progress_names[] = { "auto", "always", "never", NULL };

bool cli_choice(const char *option, const char *value, const char *const *names, int *choice)
{
    char list[256] = "";
    for (int i = 0; names[i]; i++) {
        if (strcmp(value, names[i]) == 0) {
            *choice = i;
            return true;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 i == 0 ? "" : names[i + 1] ? ", " : " or ", names[i]);
    }
    cli_error("%s: '%s' is not one of %s", option, value, list);
    return false;
}

/* Edits (insert, delete, replace) from a to b, both short. */
static size_t edit_distance(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b), row[64];
    if (na >= 63 || nb >= 63)
        return 99;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* The long option closest to a mistyped `--word[=value]`: at most two
 * edits away (NULL when none is). */
static const char *closest_option(const struct option *opts, const char *arg)
{
    if (strncmp(arg, "--", 2) != 0)
        return NULL;
    arg += 2;
    size_t n = strcspn(arg, "="), best = 3;
    const char *name = NULL;
    for (; opts->name; opts++) {
        size_t d = edit_distance(arg, n, opts->name);
        if (d < best)
            best = d, name = opts->name;
    }
    return name;
}

/* A missing operand that looks like a Hugging Face Hub id (owner/name). */
static bool looks_like_hub_id(const char *s)
{
    const char *slash = strchr(s, '/');
    static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
    return slash && slash > s && slash[1] && !strchr(slash + 1, '/') && s[0] != '.' &&
           slash[1] != '.' && strspn(s, ok) == (size_t)(slash - s) &&
           strspn(slash + 1, ok) == strlen(slash + 1) && !strstr(slash, ".safetensors") &&
           !strstr(slash, ".json");
}

int cli_parse(const cli_command *cmd, int *argc, char **argv, cli_common *common,
              const cli_options *own)
{
    enum { NCOMMON = sizeof cli_common_options / sizeof cli_common_options[0] - 1, MAXOPTS = 32 };
    struct option longopts[NCOMMON + MAXOPTS + 1];
    size_t n_opts = NCOMMON;
    memcpy(longopts, cli_common_options, sizeof cli_common_options);
    for (size_t i = 0; own && own->longopts[i].name && n_opts < NCOMMON + MAXOPTS; i++)
        longopts[n_opts++] = own->longopts[i];
    longopts[n_opts] = (struct option){ NULL, 0, NULL, 0 };

    const char *command = cmd->name;
    int c, n = 1, choice;
    opterr = 0;
    optind = 1;
    /* A leading '-' makes getopt return operands in place (as 1) without
     * permuting argv, so they are moved down to argv[1..] as they come. */
    while ((c = getopt_long(*argc, argv, "-:j:qhn", longopts, NULL)) != -1) {
        switch (c) {
        case 1:
            argv[n++] = optarg;
            break;
        case 'd':
            if (!cli_choice("--device", optarg, device_names, &choice))
                return EXIT_USAGE;
            common->device = (fp8_device)choice;
            break;
        case 'j':
            if (!parse_int(optarg, &common->threads)) {
                cli_error("--threads: '%s' is not a thread count from 1 to 4096", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'J': common->json = true; break;
        case 'q': common->quiet = true; break;
        case 'P':
            if (!cli_choice("--progress", optarg, progress_names, &choice))
                return EXIT_USAGE;
            common->progress = (cli_progress)choice;
            break;
        case 'h':
            cli_command_usage(cmd, stdout);
            return EXIT_OK;
        case ':':
            cli_error("%s: option '%s' needs a value", command, argv[optind - 1]);
            return EXIT_USAGE;
        default:
            if (c >= CLI_OPT_FIRST || (c == 'n' && own)) {
                int rc = own ? own->take(c, optarg, own->state) : EXIT_USAGE;
                if (rc >= 0)
                    return rc;
                break;
            }
            const char *near = closest_option(longopts, argv[optind - 1]);
            if (near)
                cli_error("%s: unknown option '%s'; did you mean '--%s'? (see fp8conv %s --help)",
                          command, argv[optind - 1], near, command);
            else
                cli_error("%s: unknown option '%s' (see fp8conv %s --help)", command,
                          argv[optind - 1], command);
            return EXIT_USAGE;
        }
    }
    while (optind < *argc) /* operands after "--" */
        argv[n++] = argv[optind++];
    *argc = n;
    /* as many operands as the synopsis names */
    int want = 0;
    for (const char *a = cmd->args; *a; a++)
        want += *a != ' ' && (a == cmd->args || a[-1] == ' ');
    if (n - 1 != want) {
        cli_error("%s: expected %s, got %d operand%s (see fp8conv %s --help)", command, cmd->args,
                  n - 1, n == 2 ? "" : "s", command);
        return EXIT_USAGE;
    }
    /* an input named as on the Hub: fp8conv reads local files only */
    for (int i = 1; i <= want; i++) {
        struct stat sb;
        bool output = i == 2 && strcmp(cmd->args, "INPUT OUTPUT") == 0;
        if (!output && lstat(argv[i], &sb) != 0 && looks_like_hub_id(argv[i])) {
            const char *name = strchr(argv[i], '/') + 1;
            cli_error("%s: cannot open: no such file or directory; if it is a Hugging Face Hub "
                      "id, fp8conv reads local files: hf download %s --local-dir %s, and "
                      "give fp8conv %s", argv[i], argv[i], name, name);
            return EXIT_IO;
        }
    }
    /* OUTPUT is a directory (or a .safetensors file) built beside its
     * place and renamed: '-' would make one named '-', not write to
     * standard output */
    if (strcmp(cmd->args, "INPUT OUTPUT") == 0 && strcmp(argv[2], "-") == 0) {
        cli_error("%s: OUTPUT '-': fp8conv writes a checkpoint directory, not to standard "
                  "output; name the directory (./- for one named '-')", command);
        return EXIT_USAGE;
    }
    if (common->device == FP8_DEVICE_CUDA) {
        fp8_ctx *ctx = fp8_ctx_create();
        fp8_device dev;
        fp8_status st = ctx ? fp8_device_resolve(ctx, FP8_DEVICE_CUDA, &dev) : FP8_ERR_NOMEM;
        int rc = st ? cli_fail(ctx, st) : -1;
        fp8_ctx_free(ctx);
        return rc;
    }
    return -1;
}


/* "RxC" with 1 <= R, C <= 4096. */
bool cli_parse_block(const char *s, uint32_t *rows, uint32_t *cols)
{
    char *end;
    unsigned long r = strtoul(s, &end, 10);
    if (end == s || *end != 'x' || s[0] == '-' || s[0] == '+')
        return false;
    const char *c_at = end + 1;
    unsigned long c = strtoul(c_at, &end, 10);
    if (end == c_at || *end || *c_at == '-' || *c_at == '+' || r < 1 || r > 4096 || c < 1 ||
        c > 4096)
        return false;
    *rows = (uint32_t)r;
    *cols = (uint32_t)c;
    return true;
}

fp8_status cli_like_open(fp8_ctx *ctx, const char *ref, const char *input,
                         const cli_common *common, fp8_quant_options *o, fp8_like **out)
{
    fp8_status st = fp8_like_open(ctx, ref, input, out);
    if (st)
        return st;
    fp8_like_apply(*out, o);
    for (size_t i = 0; !common->quiet && i < fp8_like_note_count(*out); i++)
        cli_error("warning: %s", fp8_like_note(*out, i));
    return FP8_OK;
}

int cli_layout_option(int code, const char *value, fp8_quant_options *o, cli_layout_given *given)
{
    static const char *const scale_fmt_names[] = { "float", "ue8m0", NULL };
    static const char *const mx_names[] = { "rceil", "floor", NULL };
    int choice;
    switch (code) {
    case CLI_OPT_SCHEME:
        if (!cli_choice("--scheme", value, fp8_scheme_names, &choice))
            return EXIT_USAGE;
        o->scheme = (fp8_scheme)choice;
        given->scheme = true;
        break;
    case CLI_OPT_FORMAT:
        if (!cli_choice("--format", value, fp8_format_names, &choice))
            return EXIT_USAGE;
        o->format = (fp8_format)(choice + 1);
        given->format = true;
        break;
    case CLI_OPT_BLOCK:
        if (!cli_parse_block(value, &o->block_rows, &o->block_cols)) {
            cli_error("--block: '%s' is not ROWSxCOLS with each from 1 to 4096 (e.g. 128x128)",
                      value);
            return EXIT_USAGE;
        }
        given->block = true;
        break;
    case CLI_OPT_SCALE_FMT:
        if (!cli_choice("--scale-fmt", value, scale_fmt_names, &choice))
            return EXIT_USAGE;
        o->scale_ue8m0 = choice == 1;
        given->scale_fmt = true;
        break;
    case CLI_OPT_MX_ROUNDING:
        if (!cli_choice("--mx-rounding", value, mx_names, &choice))
            return EXIT_USAGE;
        o->mx_rounding = (fp8_mx_rounding)choice;
        given->mx = true;
        break;
    case CLI_OPT_PROFILE:
        if (!cli_choice("--profile", value, fp8_profile_names, &choice))
            return EXIT_USAGE;
        o->profile = (fp8_profile)choice;
        given->profile = true;
        break;
    case CLI_OPT_GROUP: { /* a run along a row: carried as the block's columns */
        char *end;
        unsigned long g = strtoul(value, &end, 10);
        if (*end || value[0] < '1' || value[0] > '9' || g > 4096) {
            cli_error("--group: '%s' is not a group size (32 or 128)", value);
            return EXIT_USAGE;
        }
        o->block_cols = (uint32_t)g;
        given->group = true;
        break;
    }
    }
    return -1;
}

/* ---------------------------------------------------------------- --part, --finish, --resume, --page-cache */

#define MAX_PARTS 100000

static const char *const cache_names[] = { "auto", "keep", "drop", NULL };

static int take_part(const char *value, fp8_run_options *run)
{
    char *end;
    unsigned long i = strtoul(value, &end, 10), n = 0;
    if (end != value && *end == '/' && end[1] >= '0' && end[1] <= '9')
        n = strtoul(end + 1, &end, 10);
    if (*end || value[0] < '0' || value[0] > '9' || i < 1 || n < i || n > MAX_PARTS) {
        cli_error("--part: '%s' is not I/N with 1 <= I <= N <= %d (part I of N, e.g. 2/8)",
                  value, MAX_PARTS);
        return EXIT_USAGE;
    }
    run->part = (unsigned)i;
    run->parts = (unsigned)n;
    return -1;
}

int cli_run_take(int code, const char *value, fp8_run_options *run)
{
    int choice;
    switch (code) {
    case CLI_OPT_PART: return take_part(value, run);
    case CLI_OPT_FINISH: run->finish = true; break;
    case CLI_OPT_RESUME: run->resume = true; break;
    case CLI_OPT_PAGE_CACHE:
        if (!cli_choice("--page-cache", value, cache_names, &choice))
            return EXIT_USAGE;
        run->cache = (fp8_cache)choice;
        break;
    default:
        cli_error("unknown option (see fp8conv COMMAND --help)");
        return EXIT_USAGE;
    }
    return -1;
}

int cli_run_check(const fp8_run_options *run)
{
    if (run->parts && run->finish)
        cli_error("--part and --finish: a part writes its shards, --finish publishes them all; "
                  "run each on its own");
    else if (run->resume && (run->parts || run->finish))
        cli_error("--resume with --part or --finish: parts always keep the shards they finished");
    else
        return -1;
    return EXIT_USAGE;
}
