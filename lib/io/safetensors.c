/*
 * safetensors.c - the safetensors container: validating reader and writer.
 *
 * The reader applies every rule of the reference Rust reader
 * (huggingface/safetensors, src/tensor.rs) and a few it leaves implicit; the
 * writer lays files out byte for byte as the reference writer does.  See
 * fp8conv-formats(5), CONTAINER.  This file is the only user of cJSON for headers.
 *
 * cJSON builds the tree but is lenient where RFC 8259 is strict (it skips any
 * byte <= 0x20 as whitespace, accepts "+1" and "01", raw control characters
 * in strings, and stores numbers as doubles, which cannot hold a 64-bit
 * offset).  So a strict lexer runs first: it rejects what JSON forbids and
 * records the text of every number, which is then read back exactly.
 */
#define _GNU_SOURCE /* qsort_r */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "io/zio.h"

#define ST_MAX_HEADER 100000000ull /* the reference reader's MAX_HEADER_SIZE */
#define ST_MAX_DEPTH 128           /* serde_json's recursion limit */

fp8_status st_tensor_size(const uint64_t *shape, int rank, fp8_dtype dtype, uint64_t *elements,
                          uint64_t *nbytes, const char **why)
{
    uint64_t n = 1, bits;
    for (int i = 0; i < rank; i++) {
        if (!fp8_mul_u64(n, shape[i], &n)) {
            *why = "the element count overflows 64 bits";
            return FP8_ERR_BAD_INPUT;
        }
    }
    if (!fp8_mul_u64(n, fp8_dtype_bits(dtype), &bits)) {
        *why = "the size in bits overflows 64 bits";
        return FP8_ERR_BAD_INPUT;
    }
    if (bits % 8) {
        *why = "the size is not a whole number of bytes";
        return FP8_ERR_BAD_INPUT;
    }
    *elements = n;
    *nbytes = bits / 8;
    return FP8_OK;
}

/* ------------------------------------------------------------------ text */

bool st_utf8_valid(const unsigned char *s, size_t n, size_t *bad)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            len = 2, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            goto invalid;
        }
        if (n - i < len)
            goto invalid;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                goto invalid;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            goto invalid; /* overlong, out of range, or a surrogate */
        i += len;
    }
    return true;
invalid:
    *bad = i;
    return false;
}

static size_t esc_len(unsigned char c) { return c < 0x20 || c == 0x7F ? 4 : 1; }

/* Writes `s` for a message: printable ASCII and UTF-8 as is, other bytes as
 * \xNN; a name longer than the buffer keeps its start and its end, "..."
 * between, cut on UTF-8 character bounds. */
static const char *printable(const char *s, char *buf, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    const unsigned char *head = end, *tail = end; /* the part left out: [head, tail) */
    size_t total = 0, room = (cap - 4) / 2, h = 0, t = 0, o = 0;
    for (const unsigned char *q = p; q < end; q++)
        total += esc_len(*q);
    if (total >= cap) {
        for (head = p; head < end && h + esc_len(*head) <= room; head++)
            h += esc_len(*head);
        while (head > p && (*head & 0xC0) == 0x80)
            head--;
        for (tail = end; tail > head && t + esc_len(tail[-1]) <= room; tail--)
            t += esc_len(tail[-1]);
        while (tail < end && (*tail & 0xC0) == 0x80)
            tail++;
    }
    for (const unsigned char *q = p; q < end; q++) {
        if (q == head && tail > head) {
            memcpy(buf + o, "...", 3);
            o += 3;
            q = tail - 1;
        } else if (esc_len(*q) == 4) {
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", *q);
        } else {
            buf[o++] = (char)*q;
        }
    }
    buf[o] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ strict lexer */

typedef struct {
    const char *text;
    size_t len;
} num_token;

typedef struct {
    fp8_ctx *ctx;
    const char *path;
    num_token *nums;
    size_t nnums, cap;
    const char *subject; /* "the header" or "the file", for messages */
} lexer;

static fp8_status lex_fail(lexer *lx, size_t at, const char *what)
{
    const char *subject = lx->subject ? lx->subject : "the header";
    return fp8_fail(lx->ctx, FP8_ERR_BAD_INPUT,
                    "%s: %s is not strict JSON (RFC 8259): %s at byte %zu of %s", lx->path,
                    subject + 4, what, at, subject);
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, exactly. */
static bool number_valid(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i < n && s[i] == '0')
        i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        while (i < n && is_digit(s[i]))
            i++;
    else
        return false;
    if (i < n && s[i] == '.') {
        if (++i >= n || !is_digit(s[i]))
            return false;
        while (i < n && is_digit(s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || !is_digit(s[i]))
            return false;
        while (i < n && is_digit(s[i]))
            i++;
    }
    return i == n;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static fp8_status lex(lexer *lx, const char *s, size_t n)
{
    int depth = 0;
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        switch (c) {
        case ' ': case '\t': case '\n': case '\r': case ',': case ':':
            i++;
            break;
        case '{': case '[':
            if (++depth > ST_MAX_DEPTH)
                return lex_fail(lx, i, "nesting deeper than 128 levels");
            i++;
            break;
        case '}': case ']':
            depth--;
            i++;
            break;
        case '"':
            for (i++;; i++) {
                if (i >= n)
                    return lex_fail(lx, n, "unterminated string");
                unsigned char u = (unsigned char)s[i];
                if (u == '"')
                    break;
                if (u < 0x20)
                    return lex_fail(lx, i, "raw control character inside a string");
                if (u != '\\')
                    continue;
                if (++i >= n)
                    return lex_fail(lx, n, "unterminated string");
                if (s[i] == 'u') {
                    int v = 0;
                    for (int k = 1; k <= 4; k++) {
                        int h = i + k < n ? hexval(s[i + k]) : -1;
                        if (h < 0)
                            return lex_fail(lx, i, "bad \\u escape");
                        v = v << 4 | h;
                    }
                    /* A NUL would silently cut the C string short. */
                    if (v == 0)
                        return lex_fail(lx, i - 1, "escaped NUL (\\u0000) inside a string");
                    /* a UTF-16 surrogate is half a character: a high one
                     * needs a low one next; serde_json, which the
                     * safetensors library reads headers with, refuses
                     * either alone ("lone leading surrogate") */
                    int lo = v >= 0xD800 && v < 0xDC00 && i + 10 < n && s[i + 5] == '\\' &&
                                     s[i + 6] == 'u'
                                 ? 0
                                 : -1; /* the next escape's value; -1: none, or not hex */
                    for (int k = 7; lo >= 0 && k <= 10; k++)
                        lo = hexval(s[i + k]) < 0 ? -1 : lo << 4 | hexval(s[i + k]);
                    if ((v >= 0xD800 && v < 0xDC00 && !(lo >= 0xDC00 && lo < 0xE000)) ||
                        (v >= 0xDC00 && v < 0xE000))
                        return lex_fail(lx, i - 1,
                                        "a lone UTF-16 surrogate escape (\\ud800 to \\udfff "
                                        "without its pair), half a character, inside a string");
                    i += v >= 0xD800 && v < 0xDC00 ? 10 : 4;
                } else if (!strchr("\"\\/bfnrt", s[i])) {
                    return lex_fail(lx, i - 1, "invalid escape sequence");
                }
            }
            i++;
            break;
        case 't': case 'f': case 'n': {
            const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
            size_t wl = strlen(word);
            if (n - i < wl || memcmp(s + i, word, wl) != 0)
                return lex_fail(lx, i, "unexpected character");
            i += wl;
            break;
        }
        default:
            if (c == '-' || is_digit(c)) {
                size_t start = i;
                while (i < n && (is_digit(s[i]) || strchr("+-.eE", s[i])))
                    i++;
                if (!number_valid(s + start, i - start))
                    return lex_fail(lx, start, "malformed number");
                if (lx->nnums == lx->cap) {
                    size_t cap = lx->cap ? lx->cap * 2 : 64;
                    num_token *p = fp8_xreallocarray(lx->nums, cap, sizeof *p);
                    if (!p)
                        return fp8_fail(lx->ctx, FP8_ERR_NOMEM, "%s: out of memory", lx->path);
                    lx->nums = p;
                    lx->cap = cap;
                }
                lx->nums[lx->nnums++] = (num_token){ s + start, i - start };
                break;
            }
            return lex_fail(lx, i, (unsigned char)c < 0x20 ? "control character outside a string"
                                                           : "unexpected character");
        }
    }
    return FP8_OK;
}

/* cJSON keeps a number only as a double; tag each number item with the index
 * of its token (numbers appear in the tree in document order, as in the text).
 * valueint is otherwise unused by this file. */
static void tag_numbers(cJSON *item, size_t *next)
{
    for (; item; item = item->next) {
        if (cJSON_IsNumber(item))
            item->valueint = (int)(*next)++;
        tag_numbers(item->child, next);
    }
}

/* Turns every number item into a raw item holding its source text. */
static bool keep_number_text(cJSON *item, const lexer *lx, size_t *next)
{
    for (; item; item = item->next) {
        if (cJSON_IsNumber(item)) {
            const num_token *t = &lx->nums[(*next)++];
            char *text = strndup(t->text, t->len);
            if (!text)
                return false;
            item->type = cJSON_Raw;
            item->valuestring = text;
        }
        if (!keep_number_text(item->child, lx, next))
            return false;
    }
    return true;
}

fp8_status st_json_parse_exact(fp8_ctx *ctx, const char *path, const char *text, size_t len,
                               cJSON **root)
{
    lexer lx = { ctx, path, NULL, 0, 0, "the file" };
    size_t bad, next = 0;
    fp8_status st = FP8_OK;
    *root = NULL;
    if (!st_utf8_valid((const unsigned char *)text, len, &bad))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: not valid UTF-8 (byte %zu)", path, bad);
    else if (!(st = lex(&lx, text, len)) && !(*root = cJSON_ParseWithLength(text, len)))
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: not valid JSON", path);
    else if (!st && !keep_number_text(*root, &lx, &next))
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", path);
    if (st) {
        cJSON_Delete(*root);
        *root = NULL;
    }
    free(lx.nums);
    return st;
}

typedef enum { UINT_OK, UINT_NEGATIVE, UINT_NOT_INTEGER, UINT_TOO_BIG, UINT_NOT_NUMBER } uint_result;

static uint_result read_uint(const lexer *lx, const cJSON *item, uint64_t *out)
{
    if (!cJSON_IsNumber(item))
        return UINT_NOT_NUMBER;
    const num_token *t = &lx->nums[item->valueint];
    if (t->text[0] == '-')
        return UINT_NEGATIVE;
    uint64_t v = 0;
    for (size_t i = 0; i < t->len; i++) {
        if (!is_digit(t->text[i]))
            return UINT_NOT_INTEGER;
        if (!fp8_mul_u64(v, 10, &v) || !fp8_add_u64(v, (uint64_t)(t->text[i] - '0'), &v))
            return UINT_TOO_BIG;
    }
    *out = v;
    return UINT_OK;
}

static const char *uint_problem(uint_result r)
{
    switch (r) {
    case UINT_NEGATIVE: return "is negative";
    case UINT_NOT_INTEGER: return "is not an integer";
    case UINT_TOO_BIG: return "does not fit in 64 bits";
    case UINT_NOT_NUMBER: return "is not a number";
    default: return "is invalid";
    }
}

/* ------------------------------------------------------------------ reader */

typedef struct {
    char *key, *value;
} st_meta;

struct fp8_file {
    zio_reader *src;
    char *path;
    uint64_t header_size, data_size;
    size_t ntensors;
    fp8_tensor_info *tensors; /* buffer order */
    uint64_t *dims;           /* every tensor's shape, concatenated */
    char *names;              /* every tensor's name, NUL-separated */
    size_t *by_name;          /* tensor indices sorted by name */
    bool has_metadata;
    size_t nmeta;
    st_meta *meta;
};

static fp8_status tensor_fail(fp8_ctx *ctx, const char *path, const char *name, const char *fmt,
                              ...) FP8_PRINTF(4, 5);
static fp8_status tensor_fail(fp8_ctx *ctx, const char *path, const char *name, const char *fmt,
                              ...)
{
    char *what, shown[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&what, fmt, ap);
    va_end(ap);
    fp8_status st = fp8_fail(ctx, n < 0 ? FP8_ERR_NOMEM : FP8_ERR_BAD_INPUT, "%s: tensor '%s': %s",
                             path, printable(name, shown, sizeof shown),
                             n < 0 ? "out of memory" : what);
    if (n >= 0)
        free(what);
    return st;
}

static int cmp_offsets(const void *a, const void *b)
{
    const fp8_tensor_info *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_index_by_name(const void *a, const void *b, void *tensors)
{
    const fp8_tensor_info *t = tensors;
    return strcmp(t[*(const size_t *)a].name, t[*(const size_t *)b].name);
}

/* f->by_name: the indices of f->tensors in name order. */
static void index_names(fp8_file *f)
{
    for (size_t i = 0; i < f->ntensors; i++)
        f->by_name[i] = i;
    qsort_r(f->by_name, f->ntensors, sizeof *f->by_name, cmp_index_by_name, f->tensors);
}

static const char *by_name(const void *arg, size_t i)
{
    const fp8_file *f = arg;
    return f->tensors[f->by_name[i]].name;
}

static fp8_status parse_metadata(fp8_ctx *ctx, fp8_file *f, const cJSON *m)
{
    if (cJSON_IsNull(m))
        return FP8_OK;
    if (!cJSON_IsObject(m))
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: __metadata__ is not an object of strings (nor null)", f->path);
    size_t n = (size_t)cJSON_GetArraySize(m);
    f->meta = fp8_xcalloc(n, sizeof *f->meta);
    if (!f->meta)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", f->path);
    f->has_metadata = true;
    for (const cJSON *e = m->child; e; e = e->next) {
        if (!cJSON_IsString(e))
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: __metadata__ value of '%s' is not a string", f->path, e->string);
        st_meta *slot = &f->meta[f->nmeta++];
        if (!(slot->key = fp8_strdup(e->string)) || !(slot->value = fp8_strdup(e->valuestring)))
            return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", f->path);
    }
    qsort(f->meta, f->nmeta, sizeof *f->meta, fp8_cmp_str);
    for (size_t i = 1; i < f->nmeta; i++)
        if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0)
            return fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: __metadata__ key '%s' appears twice",
                            f->path, f->meta[i].key);
    return FP8_OK;
}

/* Fills t (name, dtype, shape, offsets) from one header entry; dims go to *dims. */
static fp8_status parse_entry(fp8_ctx *ctx, const lexer *lx, fp8_file *f, const cJSON *e,
                              fp8_tensor_info *t, uint64_t **dims, size_t *ndims, size_t *dimcap)
{
    const char *name = t->name;
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    if (!cJSON_IsObject(e))
        return tensor_fail(ctx, f->path, name, "entry is not an object");
    for (const cJSON *field = e->child; field; field = field->next) {
        const cJSON **slot = strcmp(field->string, "dtype") == 0          ? &dtype
                             : strcmp(field->string, "shape") == 0        ? &shape
                             : strcmp(field->string, "data_offsets") == 0 ? &offs
                                                                          : NULL;
        if (!slot)
            continue; /* the reference reader ignores unknown fields */
        if (*slot)
            return tensor_fail(ctx, f->path, name, "duplicate field '%s'", field->string);
        *slot = field;
    }
    if (!dtype || !shape || !offs)
        return tensor_fail(ctx, f->path, name, "missing field '%s'",
                           !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dtype))
        return tensor_fail(ctx, f->path, name, "dtype is not a string");
    if (!fp8_dtype_from_name(dtype->valuestring, &t->dtype)) {
        char shown[64];
        return tensor_fail(ctx, f->path, name, "unknown dtype '%s'",
                           printable(dtype->valuestring, shown, sizeof shown));
    }
    if (!cJSON_IsArray(shape))
        return tensor_fail(ctx, f->path, name, "shape is not a list of integers");
    t->rank = 0;
    for (const cJSON *d = shape->child; d; d = d->next, t->rank++) {
        uint64_t v;
        uint_result r = read_uint(lx, d, &v);
        if (r != UINT_OK)
            return tensor_fail(ctx, f->path, name, "shape[%d] %s", t->rank, uint_problem(r));
        if (*ndims == *dimcap) {
            size_t cap = *dimcap ? *dimcap * 2 : 256;
            uint64_t *p = fp8_xreallocarray(*dims, cap, sizeof *p);
            if (!p)
                return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", f->path);
            *dims = p;
            *dimcap = cap;
        }
        (*dims)[(*ndims)++] = v;
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
        return tensor_fail(ctx, f->path, name, "data_offsets is not a list of two integers");
    uint_result r = read_uint(lx, offs->child, &t->begin);
    if (r == UINT_OK)
        r = read_uint(lx, offs->child->next, &t->end);
    if (r != UINT_OK)
        return tensor_fail(ctx, f->path, name, "data_offsets %s", uint_problem(r));
    return FP8_OK;
}

/* Rules that concern each tensor alone, then the layout of the whole buffer. */
static fp8_status check_layout(fp8_ctx *ctx, fp8_file *f)
{
    for (size_t i = 0; i < f->ntensors; i++) {
        fp8_tensor_info *t = &f->tensors[i];
        uint64_t nbytes;
        const char *why;
        if (st_tensor_size(t->shape, t->rank, t->dtype, &t->elements, &nbytes, &why))
            return tensor_fail(ctx, f->path, t->name, "%s shape: %s", fp8_dtype_name(t->dtype),
                               why);
        if (t->end < t->begin)
            return tensor_fail(ctx, f->path, t->name,
                               "data_offsets [%llu, %llu] end before they begin",
                               (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->end - t->begin != nbytes)
            return tensor_fail(ctx, f->path, t->name,
                               "data_offsets [%llu, %llu] span %llu bytes but %llu elements of "
                               "%s need %llu",
                               (unsigned long long)t->begin, (unsigned long long)t->end,
                               (unsigned long long)(t->end - t->begin),
                               (unsigned long long)t->elements, fp8_dtype_name(t->dtype),
                               (unsigned long long)nbytes);
    }
    qsort(f->tensors, f->ntensors, sizeof *f->tensors, cmp_offsets);
    uint64_t expected = 0;
    for (size_t i = 0; i < f->ntensors; i++) {
        const fp8_tensor_info *t = &f->tensors[i], *prev = i ? t - 1 : NULL;
        if (t->begin > expected && !prev)
            return tensor_fail(ctx, f->path, t->name,
                               "data_offsets [%llu, %llu]: the first tensor does not start at "
                               "offset 0",
                               (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->begin > expected)
            return tensor_fail(ctx, f->path, t->name,
                               "data_offsets [%llu, %llu] leave a gap of %llu bytes after "
                               "tensor '%s'",
                               (unsigned long long)t->begin, (unsigned long long)t->end,
                               (unsigned long long)(t->begin - expected), prev->name);
        if (t->begin < expected)
            return tensor_fail(ctx, f->path, t->name,
                               "data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]",
                               (unsigned long long)t->begin, (unsigned long long)t->end,
                               prev->name, (unsigned long long)prev->begin,
                               (unsigned long long)prev->end);
        expected = t->end;
    }
    if (expected > f->data_size)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: tensor data needs %llu bytes but the file holds only %llu after "
                        "the header (missing bytes: the file is truncated)",
                        f->path, (unsigned long long)expected, (unsigned long long)f->data_size);
    if (expected < f->data_size)
        return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                        "%s: %llu trailing bytes after the last tensor (the data buffer must be "
                        "covered exactly)",
                        f->path, (unsigned long long)(f->data_size - expected));
    return FP8_OK;
}

static fp8_status parse_header(fp8_ctx *ctx, fp8_file *f, const char *hdr, size_t n)
{
    fp8_status st;
    lexer lx = { ctx, f->path, NULL, 0, 0, NULL };
    cJSON *root = NULL;
    uint64_t *dims = NULL;
    size_t ndims = 0, dimcap = 0, bad;

    if (!st_utf8_valid((const unsigned char *)hdr, n, &bad)) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: header is not valid UTF-8 (byte %zu)", f->path,
                      bad);
        goto out;
    }
    if ((st = lex(&lx, hdr, n)))
        goto out;
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(hdr, n, &end, false);
    if (!root) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: header is not strict JSON (RFC 8259): syntax error at byte %zu of "
                      "the header",
                      f->path, end ? (size_t)(end - hdr) : n);
        goto out;
    }
    for (; end < hdr + n; end++) {
        if (!strchr(" \t\n\r", *end)) {
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: header is not strict JSON (RFC 8259): trailing characters at byte "
                          "%zu of the header",
                          f->path, (size_t)(end - hdr));
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: header is not a JSON object", f->path);
        goto out;
    }
    size_t next = 0;
    tag_numbers(root, &next);

    size_t members = (size_t)cJSON_GetArraySize(root), names_len = 0;
    for (const cJSON *e = root->child; e; e = e->next)
        names_len += strlen(e->string) + 1;
    f->tensors = fp8_xcalloc(members, sizeof *f->tensors);
    f->names = malloc(names_len + 1);
    if (!f->tensors || !f->names) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", f->path);
        goto out;
    }
    bool seen_metadata = false;
    char *name_at = f->names;
    size_t *dim_start = fp8_xcalloc(members, sizeof *dim_start);
    if (!dim_start) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", f->path);
        goto out;
    }
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (seen_metadata)
                st = fp8_fail(ctx, FP8_ERR_BAD_INPUT, "%s: __metadata__ appears twice", f->path);
            else
                st = parse_metadata(ctx, f, e);
            seen_metadata = true;
        } else {
            fp8_tensor_info *t = &f->tensors[f->ntensors];
            t->name = strcpy(name_at, e->string);
            name_at += strlen(e->string) + 1;
            dim_start[f->ntensors++] = ndims;
            st = parse_entry(ctx, &lx, f, e, t, &dims, &ndims, &dimcap);
        }
        if (st) {
            free(dim_start);
            goto out;
        }
    }
    /* shapes point into dims only now that it no longer moves */
    for (size_t i = 0; i < f->ntensors; i++)
        f->tensors[i].shape = dims ? dims + dim_start[i] : NULL;
    free(dim_start);
    f->dims = dims;
    dims = NULL;

    f->by_name = fp8_xcalloc(f->ntensors, sizeof *f->by_name);
    if (!f->by_name) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", f->path);
        goto out;
    }
    index_names(f);
    for (size_t i = 1; i < f->ntensors; i++) {
        const char *a = f->tensors[f->by_name[i - 1]].name, *b = f->tensors[f->by_name[i]].name;
        if (strcmp(a, b) == 0) {
            st = tensor_fail(ctx, f->path, b, "the name appears twice in the header");
            goto out;
        }
    }
    if ((st = check_layout(ctx, f)))
        goto out;
    /* check_layout reordered the tensors: rebuild the name index */
    index_names(f);
out:
    cJSON_Delete(root);
    free(lx.nums);
    free(dims);
    return st;
}
/* What a file that is not safetensors is, when its first bytes say so. */
static const char *other_format(const unsigned char *b)
{
    return memcmp(b, "GGUF", 4) == 0           ? "a GGUF file (llama.cpp's format)"
           : memcmp(b, "PK\x03\x04", 4) == 0  ? "a zip archive (PyTorch's torch.save format?)"
           : b[0] == 0x80 && b[1] >= 2 && b[1] <= 5 ? "a Python pickle (PyTorch's .bin?)"
                                                  : NULL;
}

static fp8_status fail_other_format(fp8_ctx *ctx, const char *path, const unsigned char *b)
{
    return fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                    "%s: %s, not safetensors; fp8conv reads safetensors (transformers writes "
                    "them with save_pretrained(DIR, safe_serialization=True))",
                    path, other_format(b));
}


static fp8_status file_load(fp8_ctx *ctx, zio_reader *src, fp8_file **out)
{
    fp8_status st;
    char *hdr = NULL;
    uint64_t total;
    fp8_file *f = calloc(1, sizeof *f);
    *out = NULL;
    if (!f || !(f->path = fp8_strdup(zio_reader_name(src)))) {
        free(f);
        zio_reader_close(src);
        return fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory", zio_reader_name(src));
    }
    f->src = src;
    unsigned char len8[8];
    size_t got;
    if ((st = zio_reader_read(ctx, src, 0, len8, 8, &got)))
        goto out;
    if (got < 8) {
        st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                      "%s: file is shorter than 8 bytes (%zu): no header length", f->path, got);
        goto out;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    if (n > ST_MAX_HEADER) {
        if (other_format(len8))
            st = fail_other_format(ctx, f->path, len8);
        else
            st = fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                          "%s: header length %llu exceeds the limit of 100,000,000 bytes", f->path,
                          (unsigned long long)n);
        goto out;
    }
    hdr = malloc((size_t)n + 1);
    if (!hdr) {
        st = fp8_fail(ctx, FP8_ERR_NOMEM, "%s: out of memory for a %llu-byte header", f->path,
                      (unsigned long long)n);
        goto out;
    }
    if ((st = zio_reader_read(ctx, src, 8, hdr, (size_t)n, &got)))
        goto out;
    if (got < n) {
        st = other_format(len8)
                 ? fail_other_format(ctx, f->path, len8)
                 : fp8_fail(ctx, FP8_ERR_BAD_INPUT,
                            "%s: header length %llu runs past the end of the file (%llu bytes)",
                            f->path, (unsigned long long)n, (unsigned long long)(8 + got));
        goto out;
    }
    hdr[n] = '\0';
    if ((st = zio_reader_size(ctx, src, &total)))
        goto out;
    f->header_size = n;
    f->data_size = total - 8 - n;
    if ((st = parse_header(ctx, f, hdr, (size_t)n)))
        goto out;
out:
    free(hdr);
    if (st)
        fp8_file_close(f);
    else
        *out = f;
    return st;
}

fp8_status fp8_file_open(fp8_ctx *ctx, const char *path, fp8_file **out)
{
    zio_reader *src;
    fp8_status st = zio_reader_open(ctx, path, &src);
    *out = NULL;
    return st ? st : file_load(ctx, src, out);
}

fp8_status fp8_file_open_memory(fp8_ctx *ctx, const char *name, const void *data, size_t size,
                                fp8_file **out)
{
    zio_reader *src;
    fp8_status st = zio_reader_open_memory(ctx, name, data, size, &src);
    *out = NULL;
    return st ? st : file_load(ctx, src, out);
}

void fp8_file_close(fp8_file *f)
{
    if (!f)
        return;
    zio_reader_close(f->src);
    for (size_t i = 0; i < f->nmeta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->meta);
    free(f->tensors);
    free(f->dims);
    free(f->names);
    free(f->by_name);
    free(f->path);
    free(f);
}

const char *fp8_file_path(const fp8_file *f) { return f->path; }
bool fp8_file_is_compressed(const fp8_file *f) { return zio_reader_compressed(f->src); }
uint64_t fp8_file_header_size(const fp8_file *f) { return f->header_size; }
uint64_t fp8_file_data_size(const fp8_file *f) { return f->data_size; }
size_t fp8_file_tensor_count(const fp8_file *f) { return f->ntensors; }
uint64_t fp8_file_bytes_read(const fp8_file *f) { return zio_reader_bytes_read(f->src); }
uint64_t fp8_zstd_bytes_decompressed(void) { return zio_decompressed_total(); }
bool fp8_file_has_metadata(const fp8_file *f) { return f->has_metadata; }
size_t fp8_file_metadata_count(const fp8_file *f) { return f->nmeta; }

const fp8_tensor_info *fp8_file_tensor(const fp8_file *f, size_t index)
{
    return index < f->ntensors ? &f->tensors[index] : NULL;
}

const fp8_tensor_info *fp8_file_find(const fp8_file *f, const char *name)
{
    size_t i = fp8_name_find(name, f->ntensors, by_name, f);
    return i < f->ntensors ? &f->tensors[f->by_name[i]] : NULL;
}

void fp8_file_metadata(const fp8_file *f, size_t index, const char **key, const char **value)
{
    *key = index < f->nmeta ? f->meta[index].key : NULL;
    *value = index < f->nmeta ? f->meta[index].value : NULL;
}

const char *fp8_file_metadata_get(const fp8_file *f, const char *key)
{
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}

void st_file_drop_cache(fp8_file *f) { zio_reader_drop_cache(f->src); }

fp8_status fp8_file_read(fp8_ctx *ctx, fp8_file *f, const fp8_tensor_info *t, uint64_t offset,
                         void *buf, size_t len)
{
    uint64_t nbytes = fp8_tensor_nbytes(t);
    if (offset > nbytes || len > nbytes - offset)
        return fp8_fail(ctx, FP8_ERR_USAGE,
                        "%s: tensor '%s': read of %zu bytes at %llu is outside its %llu bytes",
                        f->path, t->name, len, (unsigned long long)offset,
                        (unsigned long long)nbytes);
    size_t got;
    fp8_status st = zio_reader_read(ctx, f->src, 8 + f->header_size + t->begin + offset, buf, len,
                                    &got);
    /* a plain file's size was checked against its header when it was opened:
     * one that ends early now was cut during the run (I/O); a zstd stream's
     * size is known only when it ends (bad input) */
    char shown[256];
    if (!st && got < len && !fp8_file_is_compressed(f))
        st = fp8_fail(ctx, FP8_ERR_IO,
                      "%s: tensor '%s': the file ended while reading its data: it is shorter "
                      "than when it was opened (changed during the run)",
                      f->path, printable(t->name, shown, sizeof shown));
    else if (!st && got < len)
        st = tensor_fail(ctx, f->path, t->name, "the file ended while reading its data");
    return st;
}
