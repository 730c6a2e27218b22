/*
 * st_writer.h - what lib/ adds to the public fp8_writer (fp8conv.h) for a
 * run stopped and resumed inside a shard (st_writer.c).
 */
#ifndef FP8_ST_WRITER_H
#define FP8_ST_WRITER_H

#include "common/internal.h"

/* A stopped run's shard (st_writer.c): st_writer_keep leaves what the
 * writer wrote under its temporary name (*file); st_writer_resume, instead
 * of fp8_writer_begin, writes on into such a file once its header is the
 * one this writer lays out, `written` of its data bytes counted as done. */
fp8_status st_writer_keep(fp8_ctx *ctx, fp8_writer *w, const char **file);
/* st_writer_sync: what the writer wrote so far durable (its tensors' bytes
 * written by fp8_writer_pwrite), the writer going on; *file as above. */
fp8_status st_writer_sync(fp8_ctx *ctx, fp8_writer *w, const char **file);
fp8_status st_writer_resume(fp8_ctx *ctx, fp8_writer *w, const char *file, uint64_t written);

#endif
