/*
 * fp8conv.c - main: global options, the command table, common options,
 * library status to exit code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The help of --part, --finish, --resume and --page-cache (cli/part.c). */
#define RUN_HELP                                                                             \
    "      --part I/N             write part I of N (its share of the shards, by bytes)\n"   \
    "                             into .OUTPUT.parts beside OUTPUT; publish nothing\n"      \
    "      --finish               check every part's shards, write the rest, publish OUTPUT\n" \
    "      --resume               continue the run on OUTPUT that died, keeping the\n"      \
    "                             shards it finished (not after a --no-sync run)\n"         \
    "      --page-cache auto|keep|drop\n"                                                    \
    "                             drop what was read and written from the page cache\n"     \
    "                             as it goes (auto: when the input passes half the RAM)\n"

static const cli_command commands[] = {
    { "inspect", "PATH", "list the tensors of a checkpoint, file or directory", cmd_inspect,
      "Options:\n"
      "      --hash                 also read the data: XXH3-128 of every tensor, and the\n"
      "                             checkpoint's digest (independent of sharding)\n",
      "  fp8conv inspect testdata/deepseek-moe-tiny\n"
      "  fp8conv inspect --json model/ | jq .summary.bytes_by_dtype\n"
      "  fp8conv inspect -q model/ && echo valid\n",
      "0 read; 2 usage error; 3 not a valid checkpoint; 4 I/O error",
      cli_inspect_options },
    { "quantize", "INPUT OUTPUT", "convert a bf16/f16/f32 checkpoint to FP8", cmd_quantize,
      "Options:\n"
      "      --scheme block|channel|tensor|mxfp8\n"
      "                             scaling granularity (default block)\n"
      "      --format hf-fp8|compressed-tensors|modelopt\n"
      "                             output layout (default: hf-fp8 for block and tensor,\n"
      "                             compressed-tensors for channel and mxfp8)\n"
      "      --block RxC            block size for --scheme block (default 128x128)\n"
      "      --scale-fmt float|ue8m0\n"
      "                             block scales as computed, or rounded up to powers of two\n"
      "                             (hf-fp8 only; default float)\n"
      "      --mx-rounding rceil|floor\n"
      "                             MX scale exponent rounding (default rceil)\n"
      "      --ignore REGEX         keep tensors whose name matches REGEX (POSIX extended,\n"
      "                             unanchored) unquantized; repeatable\n"
      "      --no-default-ignore    quantize embeddings, lm_head, routers, ... too\n"
      "      --like PATH            the layout of a reference FP8 checkpoint (or its\n"
      "                             config.json): scheme, format, block, scale_fmt, and its\n"
      "                             ignore list mapped onto INPUT's modules\n"
      "      --force                replace OUTPUT if it exists\n"
      "      --no-sync              do not fsync the output (faster; a power loss soon\n"
      "                             after can leave it damaged)\n"
      RUN_HELP
      "  -n, --dry-run              print the plan, write nothing\n",
      "  fp8conv quantize --dry-run Llama-3.1-8B Llama-3.1-8B-FP8\n"
      "  fp8conv quantize Llama-3.1-8B Llama-3.1-8B-FP8\n"
      "  fp8conv quantize --scheme mxfp8 --format modelopt model/ model-mxfp8/\n",
      "0 written; 2 usage error, OUTPUT exists, or --finish with a part missing;\n"
      "3 bad input (already FP8, NaN or inf); "
      "4 I/O error or interrupted; 5 device error",
      cli_quantize_options },
    { "dequantize-for-export", "INPUT OUTPUT", "convert an FP8 checkpoint back to bf16/f16/f32",
      cmd_dequantize,
      "Options:\n"
      "      --dtype bf16|f16|f32   the output dtype of dequantized weights (default bf16)\n"
      "      --force                replace OUTPUT if it exists\n"
      "      --no-sync              do not fsync the output (faster; a power loss soon\n"
      "                             after can leave it damaged)\n"
      RUN_HELP,
      "  fp8conv dequantize-for-export model-fp8/ model-bf16/\n"
      "  fp8conv dequantize-for-export --dtype f32 model-fp8/ model-f32/\n",
      "0 written; 2 usage error, OUTPUT exists, or --finish with a part missing;\n"
      "3 bad input (not FP8, a bad scale); "
      "4 I/O error or interrupted; 5 device error",
      cli_dequantize_options },
    { "convert", "INPUT OUTPUT", "convert an FP8 checkpoint into another FP8 layout", cmd_convert,
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
      "      --exact                fail rather than re-quantize a weight from its values\n"
      "      --like PATH            the layout of a reference FP8 checkpoint (or its\n"
      "                             config.json): scheme, format, block, scale_fmt\n"
      "      --force                replace OUTPUT if it exists\n"
      "      --no-sync              do not fsync the output (faster; a power loss soon\n"
      "                             after can leave it damaged)\n",
      "  fp8conv convert --block 16x16 model-fp8/ model-fp8-16/\n"
      "  fp8conv convert --format compressed-tensors model-fp8/ model-ct/\n",
      "0 written; 2 usage error, OUTPUT exists, or --exact and a weight is not exact;\n"
      "3 bad input (not FP8, a bad scale or code); 4 I/O error or interrupted; 5 device error",
      cli_convert_options },
    { "verify", "CHECKPOINT", "check an FP8 checkpoint offline (exit 1 on a problem)", cmd_verify,
      "Options:\n"
      "      --strict               warnings fail too (exit 1)\n"
      "      --no-values            check headers and config only, not the tensor data\n"
      "      --tp N                 report every layer that would not load at tensor-\n"
      "                             parallel size N (vLLM/SGLang partitions)\n"
      "      --ep M                 MoE experts spread whole over M expert-parallel ranks\n"
      "      --against SRC          compare with the bf16 source: E4M3 error bound, and\n"
      "                             whether re-quantizing SRC reproduces the FP8 bytes\n"
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
      "                             quantization_config; every difference is an error\n",
      "  fp8conv verify model-fp8/ || exit 1\n"
      "  fp8conv verify --no-values --tp 8 model-fp8/\n"
      "  fp8conv verify --strict --json model-fp8/ | jq .findings\n",
      "0 no problem found; 1 a problem (an error, or with --strict a warning);\n"
      "2 usage error; 4 I/O error or interrupted",
      cli_verify_options },
    { "diff", "A B", "compare two checkpoints tensor by tensor (exit 1 if they differ)", cmd_diff,
      "Options:\n"
      "      --dequant              compare FP8 weights by dequantized value (q * scale)\n",
      "  fp8conv diff a/ b/ && echo same\n"
      "  fp8conv diff --dequant model-fp8/ model-f32/ && echo same values\n",
      "0 identical; 1 different; 2 usage error; 3 bad input; 4 I/O error",
      cli_diff_options },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char common_help[] =
    "Common options:\n"
    "  --device auto|cpu|cuda     where to compute (default auto: CUDA when a usable GPU is\n"
    "                             present, else CPU); cuda without a GPU exits 5\n"
    "  -j, --threads N            worker threads (default: all cores)\n"
    "      --json                 one JSON document on stdout instead of the text report\n"
    "  -q, --quiet                no report, only errors\n"
    "      --progress auto|always|never\n"
    "                             progress bar on stderr (auto: when stderr is a terminal)\n"
    "  -h, --help                 this help\n";

static const struct option common_opts[] = {
    { "device", required_argument, NULL, 'd' },
    { "threads", required_argument, NULL, 'j' },
    { "json", no_argument, NULL, 'J' },
    { "quiet", no_argument, NULL, 'q' },
    { "progress", required_argument, NULL, 'P' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

static const char exit_help[] =
    "Exit status: 0 success; 1 verify found a problem or diff found a difference;\n"
    "2 usage error; 3 bad input; 4 I/O or system error; 5 device error.\n";

void cli_error(const char *fmt, ...)
{
    va_list ap;
    char *text;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    fputs("fp8conv: ", stderr);
    if (n >= 0) {
        cli_put_text(stderr, text);
        free(text);
    }
    fputc('\n', stderr);
}

int cli_exit_code(fp8_status st)
{
    switch (st) {
    case FP8_OK: return EXIT_OK;
    case FP8_ERR_USAGE:
    case FP8_ERR_EXISTS: return EXIT_USAGE;
    case FP8_ERR_BAD_INPUT: return EXIT_BAD_INPUT;
    case FP8_ERR_IO:
    case FP8_ERR_NOMEM: return EXIT_IO;
    case FP8_ERR_DEVICE: return EXIT_DEVICE;
    }
    return EXIT_IO;
}

int cli_fail(fp8_ctx *ctx, fp8_status st)
{
    const char *msg = fp8_ctx_message(ctx);
    cli_error("%s", *msg ? msg : fp8_status_str(st));
    return cli_exit_code(st);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fp8conv [--version] [--help] COMMAND [OPTIONS] ARGS\n"
            "\n"
            "Convert, inspect and check FP8 safetensors checkpoints.\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-22s %-13s %s\n", commands[i].name, commands[i].args,
                commands[i].summary);
    fprintf(out, "  %-22s %-13s %s\n  %-22s %-13s %s\n", "help", "[COMMAND]",
            "this help, or a command's (examples, exit statuses)", "completion", "bash",
            "a bash completion script (make install installs it)");
    fprintf(out,
            "\n"
            "Global options:\n"
            "  -h, --help                 this help; a command's: fp8conv help COMMAND\n"
            "  -V, --version              version, compiled backends, visible GPUs\n"
            "\n%s\n%s"
            "See fp8conv(1).\n",
            common_help, exit_help);
}

static const cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    return NULL;
}

static void command_usage(const cli_command *cmd, FILE *out)
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

static int version(void)
{
    printf("fp8conv %s\n", FP8CONV_VERSION);
    printf("cpu: %s\n", fp8_cpu_paths());
    if (!fp8_cuda_compiled()) {
        printf("cuda: not compiled (built with HAVE_CUDA=0)\n");
        return EXIT_OK;
    }
    printf("cuda: compiled for %s\n", fp8_cuda_architectures());
    fp8_gpu_info gpus[16];
    int n = 0;
    fp8_ctx *ctx = fp8_ctx_create();
    fp8_status st = ctx ? fp8_cuda_devices(ctx, gpus, 16, &n) : FP8_ERR_NOMEM;
    if (st) {
        int rc = cli_fail(ctx, st);
        fp8_ctx_free(ctx);
        return rc;
    }
    fp8_ctx_free(ctx);
    if (n == 0)
        printf("gpus: none visible\n");
    for (int i = 0; i < n; i++)
        printf("gpu %d: %s (sm_%d%d, %.1f GiB)\n", i, gpus[i].name, gpus[i].major, gpus[i].minor,
               (double)gpus[i].memory_bytes / (1024.0 * 1024 * 1024));
    return EXIT_OK;
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

int cli_parse(const char *command, int *argc, char **argv, cli_common *common,
              const cli_options *own)
{
    enum { NCOMMON = sizeof common_opts / sizeof common_opts[0] - 1, MAXOPTS = 32 };
    struct option longopts[NCOMMON + MAXOPTS + 1];
    size_t n_opts = NCOMMON;
    memcpy(longopts, common_opts, sizeof common_opts);
    for (size_t i = 0; own && own->longopts[i].name && n_opts < NCOMMON + MAXOPTS; i++)
        longopts[n_opts++] = own->longopts[i];
    longopts[n_opts] = (struct option){ NULL, 0, NULL, 0 };

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
            command_usage(find_command(command), stdout);
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
            cli_error("%s: unknown option '%s' (see fp8conv %s --help)", command,
                      argv[optind - 1], command);
            return EXIT_USAGE;
        }
    }
    while (optind < *argc) /* operands after "--" */
        argv[n++] = argv[optind++];
    *argc = n;
    /* as many operands as the synopsis names */
    const cli_command *cmd = find_command(command);
    int want = 0;
    for (const char *a = cmd->args; *a; a++)
        want += *a != ' ' && (a == cmd->args || a[-1] == ' ');
    if (n - 1 != want) {
        cli_error("%s: expected %s, got %d operand%s (see fp8conv %s --help)", command, cmd->args,
                  n - 1, n == 2 ? "" : "s", command);
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

/* A report that did not reach stdout (a full disk, a closed descriptor) is
 * an I/O error, whatever the command found. */
static int finish_stdout(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
        cli_error("cannot write the report to standard output: %s", strerror(errno));
        return EXIT_IO;
    }
    return rc;
}

/* A descriptor 0, 1 or 2 closed by the caller would be taken by the next
 * file opened, and a report written into it: hold each with /dev/null,
 * opened read-only so that writing the report still fails. */
static void hold_std_fds(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int got = open("/dev/null", O_RDONLY);
            if (got >= 0 && got != fd) {
                dup2(got, fd);
                close(got);
            }
        }
}

/* ---------------------------------------------------------------- completion */

/* The values of a choice option, as its help line spells them
 * ("--scheme block|channel|tensor|mxfp8"), or "" when it has none. */
static void choices(const char *help, const char *name, char *out, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "--%s ", name);
    const char *p = strstr(help, key);
    size_t n = p ? strcspn(p + strlen(key), " \n") : 0;
    out[0] = '\0';
    if (p && memchr(p + strlen(key), '|', n))
        for (size_t i = 0, o = 0; i < n && o + 1 < cap; i++, out[o] = '\0') {
            char c = p[strlen(key) + i];
            out[o++] = c == '|' ? ' ' : c;
        }
}

/* Whether the option's value is a path, as its help line names it. */
static bool takes_path(const char *help, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "--%s ", name);
    const char *p = strstr(help, key);
    return p && (strncmp(p + strlen(key), "SRC", 3) == 0 || strncmp(p + strlen(key), "PATH", 4) == 0 ||
                 strncmp(p + strlen(key), "DIR", 3) == 0);
}

static void complete_values(const struct option *o, const char *help)
{
    for (; o->name; o++) {
        char values[256];
        choices(help, o->name, values, sizeof values);
        if (*values)
            printf("        --%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", o->name,
                   values);
        else if (o->has_arg == required_argument && takes_path(help, o->name))
            printf("        --%s) COMPREPLY=($(compgen -f -- \"$cur\")); compopt -o filenames; "
                   "return ;;\n", o->name);
        else if (o->has_arg == required_argument) /* a number, a regex: nothing to propose */
            printf("        --%s) return ;;\n", o->name);
    }
}

static void option_words(const struct option *o)
{
    for (; o->name; o++)
        printf(" --%s", o->name);
}

/* `fp8conv completion bash`: a bash completion script made from the same
 * option tables and help text as --help (make install puts it where
 * bash-completion looks). */
static int completion(const char *shell)
{
    if (strcmp(shell, "bash") != 0) {
        cli_error("completion: only bash is supported, not '%s'", shell);
        return EXIT_USAGE;
    }
    printf("# bash completion for fp8conv, made by `fp8conv completion bash` (fp8conv %s)\n"
           "_fp8conv() {\n"
           "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i\n"
           "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
           "        [[ ${COMP_WORDS[i]} == -* ]] || { cmd=${COMP_WORDS[i]}; break; }\n"
           "    done\n"
           "    if [[ -z $cmd ]]; then\n"
           "        COMPREPLY=($(compgen -W \"help completion --help --version",
           FP8CONV_VERSION);
    for (size_t i = 0; i < NCOMMANDS; i++)
        printf(" %s", commands[i].name);
    printf("\" -- \"$cur\")); return\n"
           "    fi\n"
           "    case $prev in\n");
    complete_values(common_opts, common_help);
    for (size_t i = 0; i < NCOMMANDS; i++)
        complete_values(commands[i].longopts, commands[i].options);
    printf("        -j) return ;;\n"
           "    esac\n"
           "    local opts=\"");
    option_words(common_opts);
    printf("\"\n    case $cmd in\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        printf("        %s) opts+=\"", commands[i].name);
        option_words(commands[i].longopts);
        printf("\" ;;\n");
    }
    printf("        help) COMPREPLY=($(compgen -W \"");
    for (size_t i = 0; i < NCOMMANDS; i++)
        printf("%s%s", i ? " " : "", commands[i].name);
    printf("\" -- \"$cur\")); return ;;\n"
           "        completion) COMPREPLY=($(compgen -W bash -- \"$cur\")); return ;;\n"
           "    esac\n"
           "    if [[ $cur == -* ]]; then\n"
           "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
           "    else\n"
           "        COMPREPLY=($(compgen -f -- \"$cur\")); compopt -o filenames\n"
           "    fi\n"
           "}\n"
           "complete -F _fp8conv fp8conv\n");
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    hold_std_fds();
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
        usage(stdout);
        return finish_stdout(EXIT_OK);
    }
    if (strcmp(name, "-V") == 0 || strcmp(name, "--version") == 0)
        return finish_stdout(version());
    if (strcmp(name, "completion") == 0) {
        if (argc != 3) {
            cli_error("completion: expected a shell name: fp8conv completion bash");
            return EXIT_USAGE;
        }
        return finish_stdout(completion(argv[2]));
    }
    /* `fp8conv help [COMMAND]`, as git and cargo have it */
    if (strcmp(name, "help") == 0) {
        const cli_command *c = argc > 2 ? find_command(argv[2]) : NULL;
        if (argc > 3 || (argc == 3 && !c)) {
            cli_error("help: expected no operand or one command name (see fp8conv --help)");
            return EXIT_USAGE;
        }
        if (c)
            command_usage(c, stdout);
        else
            usage(stdout);
        return finish_stdout(EXIT_OK);
    }
    const cli_command *cmd = find_command(name);
    if (!cmd) {
        cli_error("unknown command '%s' (see fp8conv --help)", name);
        return EXIT_USAGE;
    }
    cli_common common = { .device = FP8_DEVICE_AUTO, .progress = PROGRESS_AUTO };
    return finish_stdout(cmd->run(argc - 1, argv + 1, &common));
}
