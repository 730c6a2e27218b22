/*
 * text.h - a growable text buffer, JSON string quoting and shapes as text (text.c).
 */
#ifndef FP8_TEXT_H
#define FP8_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable text buffer; `oom` records a failed allocation (checked once,
 * at the end).  Start with fp8_text t = { 0 }; free(t.p) when done. */
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} fp8_text;

void fp8_text_put(fp8_text *b, const char *s, size_t n);
void fp8_text_str(fp8_text *b, const char *s);
void fp8_text_u64(fp8_text *b, uint64_t v);
/* A JSON string as serde_json writes it: escapes for '"', '\\' and control
 * characters only (short forms where JSON has them), UTF-8 as is. */
void fp8_text_json_string(fp8_text *b, const char *s);

/* The index of `key` among n names in strcmp order, name(arg, i) the
 * i-th; n when it is not there. */
size_t fp8_name_find(const char *key, size_t n, const char *(*name)(const void *arg, size_t i),
                     const void *arg);
/* The same for the name whose first `keep` bytes are key's and whose rest
 * is suffix (a scale's name from its weight's), built nowhere: names as long
 * as a header allows need no buffer. */
size_t fp8_name_find_with(const char *key, size_t keep, const char *suffix, size_t n,
                          const char *(*name)(const void *arg, size_t i), const void *arg);
/* strcmp of the char * a and b point to (or that the structs they point to
 * begin with): qsort and bsearch by name or key. */
int fp8_cmp_str(const void *a, const void *b);
/* Frees the n strings of v, then v (NULL: nothing). */
void fp8_strings_free(char **v, size_t n);
/* Whether s ends in suffix. */
bool fp8_has_suffix(const char *s, const char *suffix);
/* The first `keep` bytes of name, then suffix: a scale's name from its
 * weight's, malloc'ed (NULL when out of memory), as long as the names are. */
char *fp8_name_with(const char *name, size_t keep, const char *suffix);
/* dir/name, malloc'ed (NULL when out of memory), dir's trailing slashes
 * dropped (all but a lone "/"). */
char *fp8_path_join(const char *dir, const char *name);

#endif
