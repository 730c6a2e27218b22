/*
 * zio.h - byte sources and atomic sinks: plain files, memory images and zstd
 * streams behind one interface.  zio.c is the only user of zstd.
 */
#ifndef FP8_ZIO_H
#define FP8_ZIO_H

#include "common/internal.h"

typedef struct zio_reader zio_reader;

/* Opens `path`; content starting with the zstd magic is decompressed. */
fp8_status zio_reader_open(fp8_ctx *ctx, const char *path, zio_reader **out);
fp8_status zio_reader_open_memory(fp8_ctx *ctx, const char *name, const void *data,
                                  size_t size, zio_reader **out);
void zio_reader_close(zio_reader *r);

const char *zio_reader_name(const zio_reader *r);
bool zio_reader_compressed(const zio_reader *r);
/* Size of the (decompressed) content.  For a zstd file this comes from the
 * frame header when the file is one frame that declares it; otherwise the
 * stream is decompressed once to count. */
fp8_status zio_reader_size(fp8_ctx *ctx, zio_reader *r, uint64_t *size);
/* Reads up to `len` bytes at `offset`; *got < len only at the end of content. */
fp8_status zio_reader_read(fp8_ctx *ctx, zio_reader *r, uint64_t offset, void *buf,
                           size_t len, size_t *got);
/* Bytes of content delivered so far; for a zstd file, the bytes
 * decompressed (a stream's skipped bytes included, a restart counted again). */
uint64_t zio_reader_bytes_read(const zio_reader *r);
/* The bytes every zstd reader of the process has decompressed. */
uint64_t zio_decompressed_total(void);

typedef struct zio_writer zio_writer;

/* Creates a temporary file beside `path`; a path ending in ".zst" compresses.
 * `content_size`, when not UINT64_MAX, is pledged to the zstd frame header. */
fp8_status zio_writer_create(fp8_ctx *ctx, const char *path, uint64_t content_size,
                             zio_writer **out);
fp8_status zio_writer_write(fp8_ctx *ctx, zio_writer *w, const void *data, size_t len);
/* Whether commit fsyncs the file and its directory (default true). */
void zio_writer_set_durable(zio_writer *w, bool durable);
/* Writes out what write() buffered; needed before pwrite. */
fp8_status zio_writer_flush(fp8_ctx *ctx, zio_writer *w);
/* Positioned write, thread-safe, for uncompressed outputs only (after a flush). */
fp8_status zio_writer_pwrite(fp8_ctx *ctx, zio_writer *w, uint64_t offset, const void *data,
                             size_t len);
/* Flushes, fsyncs, renames onto `path`, fsyncs the directory. */
fp8_status zio_writer_commit(fp8_ctx *ctx, zio_writer *w);
/* fsyncs directory `dir` (a rename into it durable), failing silently. */
void zio_sync_dir(const char *dir);
/* Removes the temporary file unless committed or kept. */
void zio_writer_free(zio_writer *w);
/* A stopped run's half-written file: flushed (and fsynced when durable),
 * left under its temporary name (*tmp) when freed. */
fp8_status zio_writer_keep(fp8_ctx *ctx, zio_writer *w, const char **tmp);
/* Makes what pwrite wrote so far durable (fdatasync; not compressed),
 * the writer going on; *tmp its temporary name. */
fp8_status zio_writer_sync(fp8_ctx *ctx, zio_writer *w, const char **tmp);
/* Writes on into `existing`, a file zio_writer_keep kept (not compressed);
 * commit renames it onto `path`. */
fp8_status zio_writer_reopen(fp8_ctx *ctx, const char *path, const char *existing,
                             zio_writer **out);

/* The page cache policy of the process (fp8_cache; AUTO decided by the
 * input's bytes): when dropping, every plain-file read lets go of the pages
 * it read and every committed output file of its own (posix_fadvise
 * DONTNEED); zio_drops_cache says whether it does. */
void zio_cache_policy(fp8_cache cache, uint64_t input_bytes);
bool zio_drops_cache(void);
/* When dropping: lets go of all the file's pages (a whole shard consumed).
 * Ranges dropped as they are read keep the large folios they cut through
 * (kernels since 6.x cache files in folios of up to megabytes); this does
 * not. */
void zio_reader_drop_cache(zio_reader *r);

#endif
