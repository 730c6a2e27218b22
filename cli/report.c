/*
 * report.c - pieces of the text and JSON reports that commands share.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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

void cli_human_bytes(uint64_t bytes, char *buf, size_t cap)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, cap, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
}

static void clock_text(double s, char *buf, size_t cap)
{
    long t = s < 0 ? 0 : (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, cap, "%ld:%02ld", t / 60, t % 60);
}

void cli_show_progress(void *user, uint64_t done, uint64_t total, const char *tensor)
{
    cli_progress_state *p = user;
    double t = cli_now();
    if (!p->start)
        p->start = t;
    p->total = total;
    if (t - p->last < 0.1 && p->shown)
        return;
    p->last = t;
    p->shown = true;
    double el = t - p->start, frac = total ? (double)done / (double)total : 0;
    char d[32], tot[32], rate[32], elapsed[64], eta[64] = "?";
    cli_human_bytes(done, d, sizeof d);
    cli_human_bytes(total, tot, sizeof tot);
    if (el > 0.2)
        cli_human_bytes((uint64_t)((double)done / el), rate, sizeof rate);
    else
        snprintf(rate, sizeof rate, "?");
    clock_text(el, elapsed, sizeof elapsed);
    if (frac > 0.01 && el > 0.2)
        clock_text(el * (1 - frac) / frac, eta, sizeof eta);
    /* the files after the tensors are still to write: 99% until the end */
    int pct = (int)(frac * 100);
    char line[256];
    int n = snprintf(line, sizeof line, "%s: %3d%% %s of %s, %s%s, %s elapsed, ETA %s", p->label,
                     pct > 99 ? 99 : pct, d, tot, rate, strcmp(rate, "?") ? "/s" : " B/s",
                     elapsed, eta);
    /* the tensor, its tail kept, within 96 columns; spaces wipe what is
     * left of a longer line before */
    size_t used = n > 0 ? (size_t)n : 0, len = tensor ? strlen(tensor) : 0;
    size_t room = used < 94 ? 94 - used : 0;
    fprintf(stderr, "\r%s", line);
    if (tensor && room > 8) {
        fputs("  ", stderr);
        if (len > room)
            fputs("...", stderr);
        cli_put_text(stderr, len > room ? tensor + len - (room - 3) : tensor);
        used += 2 + (len > room ? room : len);
    }
    fprintf(stderr, "%*s", p->width > used ? (int)(p->width - used) : 0, "");
    p->width = used;
}

void cli_progress_end(cli_progress_state *p, bool ok)
{
    if (!p->shown)
        return;
    double el = cli_now() - p->start;
    char tot[32], rate[32], elapsed[64];
    cli_human_bytes(p->total, tot, sizeof tot);
    cli_human_bytes(el > 0 ? (uint64_t)((double)p->total / el) : 0, rate, sizeof rate);
    clock_text(el, elapsed, sizeof elapsed);
    if (ok) {
        int n = fprintf(stderr, "\r%s: done: %s in %s (%.1f s), %s/s", p->label, tot, elapsed, el,
                        rate);
        size_t used = n > 1 ? (size_t)n - 1 : 0; /* less the \r */
        fprintf(stderr, "%*s\n", p->width > used ? (int)(p->width - used) : 0, "");
    }
    else
        fputc('\n', stderr);
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
    }
    return -1;
}
