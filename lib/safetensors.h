/*
 * safetensors.h - container helpers shared inside lib/.
 */
#ifndef FP8_SAFETENSORS_H
#define FP8_SAFETENSORS_H

#include "internal.h"

/* Element count and byte size of a tensor; on failure *why says which rule
 * (overflow, or a size that is not whole bytes). */
fp8_status st_tensor_size(const uint64_t *shape, int rank, fp8_dtype dtype, uint64_t *elements,
                          uint64_t *nbytes, const char **why);

/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
 * on failure *bad is the offset of the first bad sequence. */
bool st_utf8_valid(const unsigned char *s, size_t n, size_t *bad);

#endif
