/*
 * report.c - pieces of the text and JSON reports that commands share.
 */
#include <inttypes.h>
#include <stdio.h>

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
