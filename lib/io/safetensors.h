/*
 * safetensors.h - container helpers shared inside lib/.
 */
#ifndef FP8_SAFETENSORS_H
#define FP8_SAFETENSORS_H

#include <cjson/cJSON.h>

#include "common/internal.h"

/* Element count and byte size of a tensor; on failure *why says which rule
 * (overflow, or a size that is not whole bytes). */
fp8_status st_tensor_size(const uint64_t *shape, int rank, fp8_dtype dtype, uint64_t *elements,
                          uint64_t *nbytes, const char **why);

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
 * on failure *bad is the offset of the first bad sequence. */
bool st_utf8_valid(const unsigned char *s, size_t n, size_t *bad);

/* Parses a strict JSON text (the header's rules) with every number turned
 * into a raw item holding its source text, so that printing the tree gives
 * back each number exactly ("10000.0" stays "10000.0"). */
fp8_status st_json_parse_exact(fp8_ctx *ctx, const char *path, const char *text, size_t len,
                               cJSON **root);

/* Lets go of the file's pages in the page cache, when the process drops
 * them (zio_cache_policy): its tensors are all read. */
void st_file_drop_cache(fp8_file *f);


#endif
