/*
 * report.c - what commands say: messages and exit codes, text and JSON
 * reports, progress, signals.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <math.h>
#include <unistd.h>

#include "cli.h"

/* The failure --json reports (cli_json_failure): the last error said, and
 * the library's status, file and tensor when it came from cli_fail. */
static struct {
    bool json, done;
    const char *command;
    char *message;
    fp8_status status;
    bool has_status;
    char *file, *tensor;
} failure;

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

void cli_print_quality(const fp8_quality *q)
{
    fp8_quality_numbers r = fp8_quality_of(q);
    if (q->elements)
        cli_printf(", rel error %.4g, cosine %.6f, SNR %.2f dB", r.rel_error, r.cosine, r.snr_db);
}

static void add_finite(cJSON *o, const char *key, double x)
{
    if (isfinite(x))
        cJSON_AddNumberToObject(o, key, x);
    else
        cJSON_AddNullToObject(o, key);
}

cJSON *cli_json_quality(const fp8_quality *q)
{
    if (!q->elements)
        return NULL;
    fp8_quality_numbers r = fp8_quality_of(q);
    cJSON *o = cJSON_CreateObject();
    add_finite(o, "rel_error", r.rel_error);
    add_finite(o, "cosine", r.cosine);
    add_finite(o, "snr_db", r.snr_db);
    cJSON_AddItemToObject(o, "elements", cli_json_u64(q->elements));
    return o;
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

/* The columns of the terminal on stderr: TIOCGWINSZ, else $COLUMNS, else 80. */
static size_t terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *env = getenv("COLUMNS");
    long n = env ? strtol(env, NULL, 10) : 0;
    return n > 0 && n < 10000 ? (size_t)n : 80;
}

/* Columns of UTF-8 text: one per character. */
static size_t text_cols(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* `name` (escaped: valid UTF-8) in at most `room` columns, into out (of
 * 4 * room + 1 bytes at least).  What identifies a tensor is its layer
 * index and its last components: "model.layers.12...mlp.down_proj.weight"
 * keeps the head up to the first numeric component (or less of it) and as
 * many whole components of the end as fit; else the end, cut between
 * characters. */
static void shorten_name(const char *name, size_t room, char *out)
{
    size_t len = strlen(name);
    if (text_cols(name, len) <= room) {
        memcpy(out, name, len + 1);
        return;
    }
    /* the first all-digit component: [idx, idx_end) */
    const char *idx = NULL, *idx_end = NULL;
    for (const char *c = name; *c; c = idx_end + (*idx_end == '.')) {
        idx_end = c + strcspn(c, ".");
        if (idx_end > c && strspn(c, "0123456789") == (size_t)(idx_end - c)) {
            idx = c;
            break;
        }
        if (!*idx_end)
            break;
    }
    /* heads, longest first: "model.layers.12", "layers.12", "12" */
    const char *heads[3] = { name, NULL, NULL };
    if (idx) {
        if (idx > name) {
            const char *prev = idx - 1;
            while (prev > name && prev[-1] != '.')
                prev--;
            heads[1] = prev;
        }
        heads[2] = idx;
    }
    for (int h = 0; idx && h < 3; h++) {
        if (!heads[h])
            continue;
        size_t head_cols = text_cols(heads[h], (size_t)(idx_end - heads[h]));
        if (head_cols + 3 >= room)
            continue;
        /* the longest tail of whole components, after the head, that fits */
        const char *tail = NULL;
        for (const char *t = name + len; t > idx_end + 1; t--)
            if (t[-1] == '.' && t != name + len) {
                if (head_cols + 3 + text_cols(t, (size_t)(name + len - t)) > room)
                    break;
                tail = t;
            }
        if (tail) {
            size_t hl = (size_t)(idx_end - heads[h]);
            memcpy(out, heads[h], hl);
            memcpy(out + hl, "...", 3);
            memcpy(out + hl + 3, tail, (size_t)(name + len - tail) + 1);
            return;
        }
    }
    /* "..." and the end, from a character's first byte */
    const char *t = name + len;
    for (size_t cols = 0; t > name && cols + 3 < room;) {
        t--;
        cols += ((unsigned char)*t & 0xC0) != 0x80;
    }
    while (((unsigned char)*t & 0xC0) == 0x80)
        t++;
    snprintf(out, 4 * room + 1, "...%s", t);
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
    pct = pct > 99 ? 99 : pct;
    /* one column less than the terminal's, so that the cursor never wraps;
     * one with less than 40 columns left for the tensor gets the short
     * form, then the line cut */
    size_t width = terminal_width() - 1;
    char line[256];
    int n = snprintf(line, sizeof line, "%s: %3d%% %s of %s, %s%s, %s elapsed, ETA %s", p->label,
                     pct, d, tot, rate, strcmp(rate, "?") ? "/s" : " B/s", elapsed, eta);
    if (n > 0 && (size_t)n + 2 + 40 > width)
        n = snprintf(line, sizeof line, "%s: %3d%% %s of %s, ETA %s", p->label, pct, d, tot, eta);
    size_t used = n > 0 ? (size_t)n : 0;
    if (used > width)
        line[used = width] = '\0';
    fprintf(stderr, "\r%s", line);
    /* the tensor, shortened to what identifies it; spaces wipe what is
     * left of a longer line before */
    size_t room = used + 2 < width ? width - used - 2 : 0;
    if (tensor && room > 8) {
        char shown[4 * 256 + 1];
        shorten_name(cli_esc(tensor), room < 256 ? room : 256, shown);
        fprintf(stderr, "  %s", shown);
        used += 2 + text_cols(shown, strlen(shown));
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

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no
 * overlong forms, surrogates or code points past U+10FFFF), 0 when there is
 * none; *cp gets its code point. */
static size_t utf8_len(const unsigned char *s, uint32_t *cp)
{
    size_t n = s[0] < 0x80   ? 1
               : s[0] < 0xC2 ? 0
               : s[0] < 0xE0 ? 2
               : s[0] < 0xF0 ? 3
               : s[0] < 0xF5 ? 4
                             : 0;
    *cp = n == 1 ? s[0] : s[0] & (0x7Fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        *cp = *cp << 6 | (s[i] & 0x3Fu);
    }
    bool overlong = (n == 3 && *cp < 0x800) || (n == 4 && *cp < 0x10000);
    if (overlong || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF))
        return 0;
    return n;
}

/* The length of the UTF-8 sequence at s when it is printable, 0 for C0
 * controls (newline and tab too), DEL, C1 controls (U+0080..U+009F) and
 * bytes that are not UTF-8. */
static size_t printable_len(const unsigned char *s)
{
    uint32_t cp;
    size_t n = utf8_len(s, &cp);
    return cp < 0x20 || (cp >= 0x7F && cp < 0xA0) ? 0 : n;
}

/* s with what printable_len refuses written as \xNN, into out (NULL: only
 * counted); returns the length. */
static size_t escape(const char *s, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = printable_len(p);
        if (n) {
            if (out)
                memcpy(out + o, p, n);
            o += n;
            p += n;
        } else {
            if (out)
                memcpy(out + o, (char[]){ '\\', 'x', hex[*p >> 4], hex[*p & 15] }, 4);
            o += 4;
            p++;
        }
    }
    if (out)
        out[o] = '\0';
    return o;
}

const char *cli_esc(const char *s)
{
    static _Thread_local char *ring[8];
    static _Thread_local unsigned next;
    if (!s)
        return "(null)";
    size_t n = escape(s, NULL);
    if (n == strlen(s))
        return s; /* nothing to escape: the same bytes */
    char **slot = &ring[next++ % 8];
    free(*slot);
    if (!(*slot = malloc(n + 1)))
        return "(name not shown: out of memory)";
    escape(s, *slot);
    return *slot;
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
    /* a safety net under cli_esc: no escape sequence reaches the terminal
     * even from a name not passed through it (the format's own newlines
     * and tabs stay) */
    for (char *p = text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    free(text);
    return n;
}

static volatile sig_atomic_t interrupted; /* the signal that stopped the run, 0 none */

static void on_signal(int sig)
{
    interrupted = sig;
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

/* *text with every byte that is not UTF-8 replaced by U+FFFD (paths and
 * metadata may hold any bytes; JSON is UTF-8, RFC 8259); false when out of
 * memory. */
static bool json_utf8(char **text)
{
    uint32_t cp;
    size_t bad = 0;
    for (const unsigned char *p = (const unsigned char *)*text; *p;) {
        size_t n = utf8_len(p, &cp);
        bad += !n;
        p += n ? n : 1;
    }
    if (!bad)
        return true;
    char *fixed = malloc(strlen(*text) + 2 * bad + 1), *o = fixed;
    if (!fixed)
        return false;
    for (const unsigned char *p = (const unsigned char *)*text; *p;) {
        size_t n = utf8_len(p, &cp);
        memcpy(o, n ? (const char *)p : "\xEF\xBF\xBD", n ? n : 3);
        o += n ? n : 3;
        p += n ? n : 1;
    }
    *o = '\0';
    free(*text);
    *text = fixed;
    return true;
}

static bool json_tree_utf8(cJSON *item)
{
    for (; item; item = item->next) {
        if (item->string && !(item->type & cJSON_StringIsConst) && !json_utf8(&item->string))
            return false;
        if (cJSON_IsString(item) && item->valuestring && !json_utf8(&item->valuestring))
            return false;
        if (!json_tree_utf8(item->child))
            return false;
    }
    return true;
}

int cli_print_json(cJSON *root)
{
    failure.done = true; /* the command's own document: no second one */
    char *text = root && json_tree_utf8(root) ? cJSON_Print(root) : NULL;
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
    fprintf(stderr, "fp8conv: note: %s\n", cli_esc(message));
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


void cli_error(const char *fmt, ...)
{
    va_list ap;
    char *text;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    fputs("fp8conv: ", stderr);
    if (n >= 0) {
        fputs(cli_esc(text), stderr);
        if (strncmp(text, "warning: ", 9) != 0) {
            free(failure.message);
            failure.message = text;
            failure.has_status = false;
        } else {
            free(text);
        }
    }
    fputc('\n', stderr);
}

void cli_json_failures(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        failure.json |= strcmp(argv[i], "--json") == 0;
    failure.command = argc > 1 && argv[1][0] != '-' ? argv[1] : NULL; /* not an option */
}

static void add_text(cJSON *o, const char *key, const char *s)
{
    if (s && *s)
        cJSON_AddStringToObject(o, key, s);
    else
        cJSON_AddNullToObject(o, key);
}

int cli_json_failure(int rc)
{
    if (failure.done || !failure.json || rc < EXIT_USAGE) {
        failure.done = true;
        return rc;
    }
    failure.done = true;
    static const char *const rules[] = { [EXIT_USAGE] = "usage", [EXIT_BAD_INPUT] = "bad_input",
                                         [EXIT_IO] = "io", [EXIT_DEVICE] = "device" };
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "error_version", 1);
    add_text(o, "command", failure.command);
    cJSON_AddNumberToObject(o, "exit_code", rc);
    add_text(o, "rule", rc > 128                ? "interrupted"
                        : failure.has_status ? fp8_status_rule(failure.status)
                        : rc <= EXIT_DEVICE ? rules[rc] : NULL);
    add_text(o, "file", failure.has_status ? failure.file : NULL);
    add_text(o, "tensor", failure.has_status ? failure.tensor : NULL);
    add_text(o, "message", failure.message);
    cli_print_json(o);
    return rc;
}

static int exit_code(fp8_status st)
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
    free(failure.file);
    free(failure.tensor);
    failure.file = strdup(fp8_ctx_file(ctx));
    failure.tensor = strdup(fp8_ctx_tensor(ctx));
    failure.status = st;
    failure.has_status = true;
    /* stopped by a signal: 128 + its number, as a shell reports a command
     * the signal killed (130 Ctrl-C, 143 SIGTERM), so that a script or a
     * scheduler tells a stop from a failure */
    return interrupted ? 128 + interrupted : exit_code(st);
}
