/*
 * cli.h - what the command files share: common options, messages, exit codes.
 */
#ifndef FP8_CLI_H
#define FP8_CLI_H

#include <cjson/cJSON.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "fp8conv.h"

/* Exit status, for every command (fp8conv(1), EXIT STATUS lists them). */
enum {
    EXIT_OK = 0,
    EXIT_FOUND = 1,  /* verify found a problem; diff found a difference */
    EXIT_USAGE = 2,
    EXIT_BAD_INPUT = 3,
    EXIT_IO = 4,
    EXIT_DEVICE = 5,
};

typedef enum { PROGRESS_AUTO, PROGRESS_ALWAYS, PROGRESS_NEVER } cli_progress;

/* Options every command takes. */
typedef struct {
    fp8_device device;
    int threads;  /* 0: all cores */
    bool json;
    bool quiet;
    cli_progress progress;
} cli_common;

typedef struct {
    const char *name;
    const char *args;    /* synopsis after the name */
    const char *summary; /* one line */
    int (*run)(int argc, char **argv, cli_common *common);
    const char *options; /* the command's own options, for --help */
    const char *examples; /* two or three, as in the man page's EXAMPLES */
    const char *exits;    /* the exit statuses this command uses */
    const struct option *longopts; /* its getopt table, also read by completion */
} cli_command;

/* The commands, each defined in its cli/cmd_<name>.c. */
extern const cli_command cli_cmd_inspect, cli_cmd_quantize, cli_cmd_dequantize, cli_cmd_convert,
    cli_cmd_verify, cli_cmd_diff;

/* The options every command takes, and their --help text (cli/options.c). */
extern const struct option cli_common_options[];
extern const char cli_common_help[];
/* A command's --help: synopsis, its options, examples, exit statuses. */
void cli_command_usage(const cli_command *cmd, FILE *out);

/* A command's own options: getopt_long entries (codes from CLI_OPT_FIRST up),
 * and the function that takes each; it returns -1 to go on, or an exit code. */
#define CLI_OPT_FIRST 256
typedef struct {
    const struct option *longopts;
    int (*take)(int code, const char *value, void *state);
    void *state;
} cli_options;

/* Parses the common options, the command's own (`own`, may be NULL) and
 * --help out of a command's argv, leaving the operands in argv[1..] in order
 * and checking there are as many as the command's synopsis names; returns -1
 * when done, an exit code to stop with otherwise. */
int cli_parse(const cli_command *cmd, int *argc, char **argv, cli_common *common,
              const cli_options *own);
/* Picks `value` out of NULL-terminated `names` (the index is the enum value);
 * on failure says so, naming `option` and the choices. */
bool cli_choice(const char *option, const char *value, const char *const *names, int *choice);
/* "fp8conv: " + message on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A name or path for a text report or message (not JSON): control
 * characters (newline, return and tab too), DEL, C1 controls and bytes that
 * are not UTF-8 shown as \xNN.  Names come from the checkpoint, and a
 * terminal or a script reading the report must not take them for rows or
 * commands.  Returns s itself when it needs nothing, else a copy that lives
 * until eight more calls on the thread. */
const char *cli_esc(const char *s);
/* printf to stdout with control characters but the format's newlines and
 * tabs shown as \xNN (a safety net: pass names through cli_esc). */
int cli_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A library context, or NULL after saying "out of memory" (then exit EXIT_IO). */
fp8_ctx *cli_ctx_create(void);
/* A u64 as an exact JSON number (cJSON numbers are doubles), and a shape. */
cJSON *cli_json_u64(uint64_t v);
cJSON *cli_json_shape(int rank, const uint64_t *shape);
/* Quality numbers (fp8_quality): ", rel error R, cosine C, SNR S dB" on
 * stdout, and an object {rel_error, cosine, snr_db, elements} (null for a
 * number that is not finite); nothing, and NULL, when nothing was compared. */
void cli_print_quality(const fp8_quality *q);
cJSON *cli_json_quality(const fp8_quality *q);
/* SIGINT and SIGTERM set the flag returned (the library then stops cleanly,
 * removing what it wrote). */
const volatile sig_atomic_t *cli_catch_signals(void);
/* Prints the document on stdout and frees it; EXIT_OK, or EXIT_IO when out of memory. */
int cli_print_json(cJSON *root);
/* "RxC" with 1 <= R, C <= 4096 (--scheme and --format take the lib's
 * fp8_scheme_names and fp8_format_names). */
bool cli_parse_block(const char *s, uint32_t *rows, uint32_t *cols);
/* Seconds on a monotonic clock. */
double cli_now(void);
/* A progress line on stderr, at most ten times a second, as tqdm and rsync
 * show it: percent, bytes done of total, rate, elapsed time and ETA; never
 * 100% before the command is done; cli_progress_end prints the closing line
 * (total, time, throughput) once the command returns.  The tensor last
 * worked on ends the line, shortened to its layer index and last
 * components; the line fits the terminal (TIOCGWINSZ, $COLUMNS, else 80). */
typedef struct {
    const char *label;
    double start, last;
    uint64_t total;
    size_t width; /* of the line last shown */
    bool shown;
} cli_progress_state;
bool cli_progress_wanted(const cli_common *common);
void cli_show_progress(void *user, uint64_t done, uint64_t total, const char *tensor);
void cli_progress_end(cli_progress_state *p, bool ok);
/* "1.75 GiB", "512 B": sizes for people (exact bytes go in --json). */
void cli_human_bytes(uint64_t bytes, char *buf, size_t cap);
/* --part I/N, --finish, --resume and --page-cache (quantize and
 * dequantize-for-export, cli/options.c): their getopt entries and codes, the
 * function that takes one (-1 to go on, or an exit code), and the check
 * that refuses the combinations that mean nothing. */
enum { CLI_OPT_PART = CLI_OPT_FIRST + 64, CLI_OPT_FINISH, CLI_OPT_RESUME, CLI_OPT_PAGE_CACHE };
#define CLI_RUN_OPTIONS                                                                      \
    { "part", required_argument, NULL, CLI_OPT_PART },                                     \
        { "finish", no_argument, NULL, CLI_OPT_FINISH },                                   \
        { "resume", no_argument, NULL, CLI_OPT_RESUME },                                   \
        { "page-cache", required_argument, NULL, CLI_OPT_PAGE_CACHE }
/* Their --help lines. */
#define CLI_RUN_HELP                                                                             \
    "      --part I/N             write part I of N (its share of the shards, by bytes)\n"   \
    "                             into .OUTPUT.parts beside OUTPUT; publish nothing\n"      \
    "      --finish               check every part's shards, write the rest, publish OUTPUT\n" \
    "      --resume               continue the run on OUTPUT that died, keeping the\n"      \
    "                             shards it finished (not after a --no-sync run)\n"         \
    "      --page-cache auto|keep|drop\n"                                                    \
    "                             drop what was read and written from the page cache\n"     \
    "                             as it goes (auto: when the input passes half the RAM)\n"
int cli_run_take(int code, const char *value, fp8_run_options *run);
int cli_run_check(const fp8_run_options *run);
/* The exit code for a library status, printing the context's message. */
int cli_fail(fp8_ctx *ctx, fp8_status st);
/* --json failures (fp8conv(1), JSON OUTPUT): cli_json_failures notes
 * whether the command line has --json; cli_json_failure(rc), called once
 * with the command's exit code, prints one JSON object on stdout for an
 * exit code from 2 on (exit_code, rule, file, tensor, message of the last
 * error said) unless the command printed its own document; returns rc. */
void cli_json_failures(int argc, char **argv);
int cli_json_failure(int rc);

/* The output layout options quantize and convert share, as the first codes
 * of their option enums, and which of them were given. */
enum { CLI_OPT_SCHEME = CLI_OPT_FIRST, CLI_OPT_FORMAT, CLI_OPT_BLOCK, CLI_OPT_SCALE_FMT,
       CLI_OPT_MX_ROUNDING, CLI_OPT_GROUP, CLI_OPT_PROFILE, CLI_OPT_LAYOUT_END };
typedef struct {
    bool scheme, format, block, scale_fmt, mx, group, profile;
} cli_layout_given;
/* --profile's --help lines (quantize, convert, verify). */
#define CLI_PROFILE_NAMES "fp8conv|vllm|deepgemm|sglang|prime-rl|slime|te|transformers|llm-compressor"
#define CLI_PROFILE_HELP                                                                       \
    "      --profile " CLI_PROFILE_NAMES "\n"                                                 \
    "                             the engine whose quantizer's bytes to write (default\n"    \
    "                             fp8conv; fp8conv-formats(5), PROFILES)\n"
/* Takes one of them into *o: -1 when taken, EXIT_USAGE (said) for a bad value. */
int cli_layout_option(int code, const char *value, fp8_quant_options *o, cli_layout_given *given);
/* --like REF for quantize and convert: REF's layout into *o (fp8_like_apply),
 * each note printed as a warning (unless --quiet). */
fp8_status cli_like_open(fp8_ctx *ctx, const char *ref, const char *input,
                         const cli_common *common, fp8_quant_options *o, fp8_like **out);

#endif
