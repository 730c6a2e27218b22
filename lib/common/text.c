/*
 * text.c - a growable text buffer, for the JSON lib/ formats by hand (the
 * safetensors header, config.json and the index).
 */
#define _GNU_SOURCE /* asprintf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

void fp8_text_put(fp8_text *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void fp8_text_str(fp8_text *b, const char *s) { fp8_text_put(b, s, strlen(s)); }

void fp8_text_u64(fp8_text *b, uint64_t v)
{
    char num[24];
    fp8_text_put(b, num, (size_t)snprintf(num, sizeof num, "%llu", (unsigned long long)v));
}

void fp8_text_json_string(fp8_text *b, const char *s)
{
    fp8_text_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': fp8_text_str(b, "\\\""); break;
        case '\\': fp8_text_str(b, "\\\\"); break;
        case '\b': fp8_text_str(b, "\\b"); break;
        case '\f': fp8_text_str(b, "\\f"); break;
        case '\n': fp8_text_str(b, "\\n"); break;
        case '\r': fp8_text_str(b, "\\r"); break;
        case '\t': fp8_text_str(b, "\\t"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                fp8_text_str(b, esc);
            } else {
                fp8_text_put(b, (const char *)p, 1);
            }
        }
    }
    fp8_text_put(b, "\"", 1);
}

void fp8_shape_text(int rank, const uint64_t *shape, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < rank && o < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", d ? ", " : "",
                              (unsigned long long)shape[d]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

size_t fp8_name_find(const char *key, size_t n, const char *(*name)(const void *arg, size_t i),
                     const void *arg)
{
    return fp8_name_find_with(key, strlen(key), "", n, name, arg);
}

/* strcmp(s, key's first keep bytes then suffix); key holds no NUL in them */
static int cmp_with(const char *s, const char *key, size_t keep, const char *suffix)
{
    int d = strncmp(s, key, keep);
    return d ? d : strcmp(s + keep, suffix);
}

size_t fp8_name_find_with(const char *key, size_t keep, const char *suffix, size_t n,
                          const char *(*name)(const void *arg, size_t i), const void *arg)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = cmp_with(name(arg, mid), key, keep, suffix);
        if (!d)
            return mid;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return n;
}

int fp8_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void fp8_strings_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

bool fp8_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

char *fp8_name_with(const char *name, size_t keep, const char *suffix)
{
    size_t m = strlen(suffix);
    char *s = malloc(keep + m + 1);
    if (s) {
        memcpy(s, name, keep);
        memcpy(s + keep, suffix, m + 1);
    }
    return s;
}

char *fp8_path_join(const char *dir, const char *name)
{
    char *p;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return asprintf(&p, "%.*s/%s", (int)n, dir, name) < 0 ? NULL : p;
}
