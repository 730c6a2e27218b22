/*
 * output.h - an output directory or file built beside its final path and
 * published at once (output.c), shard by shard with --part, --finish and
 * --resume (parts.c keeps the records).
 */
#ifndef FP8_OUTPUT_H
#define FP8_OUTPUT_H

#include "common/internal.h"
#include "io/checkpoint.h"

/*
 * An output (a directory or a file) built in a temporary directory beside
 * its final path (.NAME.tmp-XXXXXX, same file system, holding a record of
 * its owner) and published by fp8_output_commit; fp8_output_end removes
 * whatever is left.  output.c says what may be replaced and how.
 *
 * With work (fp8_output_open), a directory output is written shard by
 * shard, each finished one recorded (parts.c): --part I/N writes its share
 * of the shards into .NAME.parts beside OUTPUT, which every part shares,
 * and publishes nothing; --finish checks that every shard there is
 * recorded and whole and publishes that directory; a durable run records
 * its shards in its temporary directory, which --resume adopts after the
 * run died.
 */
typedef struct {
    const fp8_checkpoint *ck; /* the input */
    char *const *names;       /* the output shard names, by input shard */
    const char *options;      /* what the bytes depend on, one "--option value" line each */
    fp8_run_options run;      /* --part I/N, --finish, --resume */
    bool unresumable;         /* a command without --resume (convert): a stop keeps nothing */
} fp8_output_work;

typedef struct {
    char *path, *tmp;
    const char *base;
    int dirlen;
    bool exists, is_dir, durable;
    fp8_output_work work;
    char *records;   /* where finished shards are recorded; NULL: nowhere */
    bool *todo;      /* by input shard: whether this run writes it */
    bool staged;     /* tmp is the shared .NAME.parts: kept unless published */
    bool committed;
    bool recheck;    /* --resume on an existing OUTPUT: built again, then compared */
    bool complete;   /* ... and found the same: OUTPUT left as it was */
    size_t finished; /* shards recorded as finished (kept or written by this run) */
    size_t partial_shards, partial_items; /* stopped: shards kept half written, their items */
    bool keep;       /* interrupted: tmp stays for --resume */
    int lock;        /* --finish: .NAME.parts, locked while this run finishes it */
    bool locked;     /* lock is open */
} fp8_output;

/* Checks OUTPUT (a name, not empty, "." or ".."; not existing unless
 * `force`, and then only what fp8conv wrote; neither INPUT, inside it, nor
 * holding it; a file output not .zst), removes the temporary directories of
 * dead runs on the same OUTPUT (saying so through fp8_notify), and creates
 * this run's. */
fp8_status fp8_output_begin(fp8_ctx *ctx, fp8_output *o, const char *input, const char *output,
                            bool is_dir, bool force, bool durable);
/* The same with work (NULL: as fp8_output_begin); then only the shards
 * o->todo names are to be written, each passed to fp8_output_shard_done once
 * committed.  A --part or --finish whose options differ from those recorded
 * fails with FP8_ERR_USAGE naming the option; a --finish with shards missing
 * fails with FP8_ERR_USAGE naming them and their parts (FP8_ERR_IO when
 * all are there but some do not match their records). */
fp8_status fp8_output_open(fp8_ctx *ctx, fp8_output *o, const char *input, const char *output,
                           bool is_dir, bool force, bool durable, const fp8_output_work *work);
/* Records input shard s's output as finished (a no-op without records). */
fp8_status fp8_output_shard_done(fp8_ctx *ctx, fp8_output *o, size_t s);
/* An interrupted run (SIGINT, SIGTERM, ...): a whole run that recorded
 * finished shards keeps its temporary directory for --resume, and says so
 * through fp8_notify; anything else is removed by fp8_output_end as on any
 * failure. */
void fp8_output_interrupted(fp8_ctx *ctx, fp8_output *o);
/* Whether this run publishes OUTPUT (a --part does not: --finish does). */
bool fp8_output_publishes(const fp8_output *o);
/* Where to write `name` (a directory output) or the file (a file output;
 * `name` unused); NULL when out of memory. */
char *fp8_output_file(const fp8_output *o, const char *name);
/* Publishes the result: OUTPUT is at every moment absent, the old output or
 * the new one (never replaced unless `force`). */
fp8_status fp8_output_commit(fp8_ctx *ctx, fp8_output *o);
void fp8_output_end(fp8_output *o);

#endif
