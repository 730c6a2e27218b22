/*
 * report.c - pieces of the text and JSON reports that commands share.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_shape_text(int rank, const uint64_t *shape, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRIu64, d ? ", " : "", shape[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

cJSON *cli_json_u64(uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    return cJSON_CreateRaw(num);
}

cJSON *cli_json_shape(int rank, const uint64_t *shape)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < rank; d++)
        cJSON_AddItemToArray(a, cli_json_u64(shape[d]));
    return a;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool cli_progress_wanted(const cli_common *common)
{
    return common->progress == PROGRESS_ALWAYS ||
           (common->progress == PROGRESS_AUTO && !common->quiet && isatty(STDERR_FILENO));
}

void cli_show_progress(void *user, uint64_t done, uint64_t total)
{
    cli_progress_state *p = user;
    double t = cli_now();
    if (done < total && t - p->last < 0.1)
        return;
    p->last = t;
    p->shown = true;
    fprintf(stderr, "\r%s: %3.0f%% (%.1f of %.1f MB)", p->label,
            total ? 100.0 * (double)done / (double)total : 100.0, (double)done / 1e6,
            (double)total / 1e6);
}

void cli_put_text(FILE *fp, const char *s)
{
    /* a tensor name or a path may hold control characters: shown as \xNN,
     * never sent raw to a terminal */
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c == 0x7F)
            fprintf(fp, "\\x%02x", c);
        else
            putc(c, fp);
    }
}

int cli_printf(const char *fmt, ...)
{
    char *text;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    cli_put_text(stdout, text);
    free(text);
    return n;
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* A closed terminal (SIGHUP) or a reader gone from a pipe on stdout or
 * stderr (SIGPIPE, as in `fp8conv quantize ... 2>&1 | head`) stops a run as
 * Ctrl-C does: cleanly, removing what it had written. */
const volatile sig_atomic_t *cli_catch_signals(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGPIPE };
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaction(sigs[i], &sa, NULL);
    return &interrupted;
}

int cli_print_json(cJSON *root)
{
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        cli_error("out of memory formatting JSON");
        return EXIT_IO;
    }
    puts(text);
    free(text);
    return EXIT_OK;
}

static void print_note(void *user, const char *message)
{
    (void)user;
    fprintf(stderr, "fp8conv: note: %s\n", message);
}

fp8_ctx *cli_ctx_create(void)
{
    fp8_ctx *ctx = fp8_ctx_create();
    if (!ctx)
        cli_error("out of memory");
    else
        fp8_ctx_set_notify(ctx, print_note, NULL);
    return ctx;
}
