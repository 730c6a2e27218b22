/*
 * part.c - the options quantize and dequantize-for-export share to cut a
 * conversion into parts and to resume one: --part I/N, --finish, --resume.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_PARTS 100000

int cli_part_take(const char *value, unsigned *part, unsigned *parts)
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
    *part = (unsigned)i;
    *parts = (unsigned)n;
    return -1;
}

const char *const cli_cache_names[] = { "auto", "keep", "drop", NULL };

int cli_part_check(unsigned parts, bool finish, bool resume)
{
    if (parts && finish)
        cli_error("--part and --finish: a part writes its shards, --finish publishes them all; "
                  "run each on its own");
    else if (resume && (parts || finish))
        cli_error("--resume with --part or --finish: parts always keep the shards they finished");
    else
        return -1;
    return EXIT_USAGE;
}
