/*
 * parts.h - records of finished output shards, the options they were made
 * with, and the split of a conversion into parts (parts.c says how).
 */
#ifndef FP8_PARTS_H
#define FP8_PARTS_H

#include "common/internal.h"

/* The records directory inside a directory of output shards. */
#define FP8_RECORDS ".fp8conv-parts"

/* Which part (1..parts) converts input shard s of n, by their bytes. */
unsigned fp8_part_of(const uint64_t *bytes, size_t n, size_t s, unsigned parts);

/* Creates dir/.fp8conv-parts if needed (another part may have: fine);
 * *records gets its path (the caller frees it, also on failure). */
fp8_status fp8_records_dir(fp8_ctx *ctx, const char *dir, char **records);

/* Records dir/name as finished: its size and XXH3-128, read back from the
 * file (after its fsync, when durable). */
fp8_status fp8_record_write(fp8_ctx *ctx, const char *records, const char *dir, const char *name,
                            bool durable);

typedef enum {
    FP8_RECORD_NONE, /* not recorded */
    FP8_RECORD_OK,   /* recorded, and the file has the recorded size and hash */
    FP8_RECORD_BAD,  /* recorded, but the file is missing, or its size or hash differs */
} fp8_record_state;
fp8_record_state fp8_record_check(fp8_ctx *ctx, const char *records, const char *dir,
                                  const char *name);
void fp8_record_remove(const char *records, const char *name);

/* A shard a stopped run left half written (SHARD.partial): `text` as the
 * run writes it (parts.c says nothing of its lines), read back whole
 * (NULL: none), removed once the shard is finished. */
fp8_status fp8_partial_write(fp8_ctx *ctx, const char *records, const char *name,
                             const char *text, bool durable);
char *fp8_partial_read(const char *records, const char *name);
void fp8_partial_remove(const char *records, const char *name);

/* Compares `mine` (the options, one "--option value" line each) with those
 * recorded in `records`, recording them first when none are and `create`.
 * With `what` (the OUTPUT, for the message), a difference fails with
 * FP8_ERR_USAGE naming the first differing option; without, *matches says.
 * `skip_parts`: the --parts line is not compared (--finish has none). */
fp8_status fp8_options_check(fp8_ctx *ctx, const char *records, const char *mine, bool create,
                             bool skip_parts, const char *what, bool *matches);

/* The part count the recorded options name; 0 when none. */
unsigned fp8_options_parts(const char *records);

/* Appends what every command's options share: the part count (none when
 * 0), and the input's identity: each shard's name, size, modification time
 * and a hash of a sample of its content (parts.c, sample_hash), and a hash
 * of config.json. */
fp8_status fp8_options_common(fp8_ctx *ctx, const fp8_checkpoint *ck, unsigned parts, fp8_text *t);

#endif
