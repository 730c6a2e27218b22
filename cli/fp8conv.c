/*
 * fp8conv.c - main: global options, the command table (each command's entry
 * sits in its cmd_<name>.c), help, --version and bash completion.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* The commands, in the order --help lists them. */
static const cli_command *const commands[] = {
    &cli_cmd_inspect, &cli_cmd_quantize, &cli_cmd_dequantize, &cli_cmd_convert,
    &cli_cmd_verify, &cli_cmd_diff,
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char exit_help[] =
    "Exit status: 0 success; 1 verify found a problem or diff found a difference;\n"
    "2 usage error; 3 bad input; 4 I/O or system error; 5 device error.\n";

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fp8conv [--version] [--help] COMMAND [OPTIONS] ARGS\n"
            "\n"
            "Convert, inspect and check FP8 safetensors checkpoints.\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-22s %-13s %s\n", commands[i]->name, commands[i]->args,
                commands[i]->summary);
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
            cli_common_help, exit_help);
}

static const cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i]->name) == 0)
            return commands[i];
    return NULL;
}

static int version(void)
{
    printf("fp8conv %s\n", FP8CONV_VERSION);
    printf("cpu: %s\n", fp8_cpu_paths());
    printf("int4: cpu only (no GPU kernel; --device cuda runs its bands on the CPU)\n");
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

/* A report that did not reach stdout (a full disk, a closed descriptor) is
 * an I/O error, whatever the command found.  It is known only once the
 * work is done: an OUTPUT is published by then, and kept (it is complete;
 * checking stdout first would not catch a disk that fills meanwhile). */
static int finish_stdout(int rc)
{
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
        cli_error("cannot write the report to standard output: %s%s", strerror(errno),
                  rc == EXIT_OK ? "; the command itself succeeded (an OUTPUT it wrote is "
                                  "complete): only this report was lost"
                                : "");
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

/* Whether an option of that name came in an earlier table (the command
 * tables share --scheme, --part, ...): a case label is written once. */
static bool seen_before(const struct option *const *tables, size_t t, const char *name)
{
    for (size_t i = 0; i < t; i++)
        for (const struct option *o = tables[i]; o->name; o++)
            if (strcmp(o->name, name) == 0)
                return true;
    return false;
}

static void complete_values(const struct option *const *tables, size_t t, const char *help)
{
    for (const struct option *o = tables[t]; o->name; o++) {
        if (seen_before(tables, t, o->name))
            continue;
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
        printf(" %s", commands[i]->name);
    printf("\" -- \"$cur\")); return\n"
           "    fi\n"
           "    case $prev in\n");
    const struct option *tables[NCOMMANDS + 1] = { cli_common_options };
    for (size_t i = 0; i < NCOMMANDS; i++)
        tables[i + 1] = commands[i]->longopts;
    complete_values(tables, 0, cli_common_help);
    for (size_t i = 0; i < NCOMMANDS; i++)
        complete_values(tables, i + 1, commands[i]->options);
    printf("        -j) return ;;\n"
           "    esac\n"
           "    local opts=\"");
    option_words(cli_common_options);
    printf("\"\n    case $cmd in\n");
    for (size_t i = 0; i < NCOMMANDS; i++) {
        printf("        %s) opts+=\"", commands[i]->name);
        option_words(commands[i]->longopts);
        printf("\" ;;\n");
    }
    printf("        help) COMPREPLY=($(compgen -W \"");
    for (size_t i = 0; i < NCOMMANDS; i++)
        printf("%s%s", i ? " " : "", commands[i]->name);
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

static int run(int argc, char **argv)
{
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
    bool asks_help = argc == 3 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0);
    if (strcmp(name, "completion") == 0) {
        if (asks_help) {
            printf("usage: fp8conv completion bash\n"
                   "\n"
                   "Print a bash completion script for fp8conv (make install installs it):\n"
                   "  source <(fp8conv completion bash)\n");
            return finish_stdout(EXIT_OK);
        }
        if (argc != 3) {
            cli_error("completion: expected a shell name: fp8conv completion bash");
            return EXIT_USAGE;
        }
        return finish_stdout(completion(argv[2]));
    }
    /* `fp8conv help [COMMAND]`, as git and cargo have it */
    if (strcmp(name, "help") == 0) {
        const cli_command *c = argc > 2 && !asks_help ? find_command(argv[2]) : NULL;
        if (argc > 3 || (argc == 3 && !c && asks_help)) {
            usage(stdout);
            return finish_stdout(EXIT_OK);
        }
        if (argc > 3 || (argc == 3 && !c)) {
            cli_error("help: expected no operand or one command name (see fp8conv --help)");
            return EXIT_USAGE;
        }
        if (c)
            cli_command_usage(c, stdout);
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
    return finish_stdout(cli_json_failure(cmd->run(argc - 1, argv + 1, &common)));
}

int main(int argc, char **argv)
{
    hold_std_fds();
    cli_json_failures(argc, argv);
    return cli_json_failure(run(argc, argv));
}
