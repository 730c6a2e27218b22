/*
 * cli.h - what the command files share: common options, messages, exit codes.
 */
#ifndef FP8_CLI_H
#define FP8_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "fp8conv.h"

/* Exit status, for every command (SPEC section 1; the man page lists them). */
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
} cli_command;

int cmd_inspect(int argc, char **argv, cli_common *common);

/* Parses the common options (and --help) out of a command's argv, leaving the
 * rest in order; returns -1 when done, an exit code to stop with otherwise. */
int cli_parse_common(const cli_command *cmd, int *argc, char **argv, cli_common *common);
/* "fp8conv: " + message on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The exit code for a library status, printing the context's message. */
int cli_fail(fp8_ctx *ctx, fp8_status st);
int cli_exit_code(fp8_status st);

#endif
