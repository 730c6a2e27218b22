/*
 * part.c - the options quantize and dequantize-for-export share to cut a
 * conversion into parts, to resume one, and to spare the page cache:
 * --part I/N, --finish, --resume, --page-cache (fp8_run_options).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

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
