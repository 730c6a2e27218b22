/*
 * xxh.h - XXH3 from libxxhash for every hash fp8conv takes (hash.c, parts.c).
 * On x86-64 through the library's own run-time dispatch (xxh_x86dispatch.h:
 * its AVX2 or AVX-512 loop where the CPU has one, else SSE2, which is all
 * Debian's build of the plain entry points uses): the same hashes, about
 * four times as fast over a buffer in cache (20 -> 85 GB/s, 4 MiB, Zen 5).
 */
#ifndef FP8_XXH_H
#define FP8_XXH_H

#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif

#endif
