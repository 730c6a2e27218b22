/*
 * gpu.h - the CUDA backend as the job engines see it (gpu.c, over
 * kernels/).  Each worker thread owns an fp8_gpu: its stream, its pinned
 * buffers (which are the worker's buffers) and their device twins.  Every
 * call fails with FP8_ERR_DEVICE, and a message, when CUDA does; a build
 * without CUDA never creates one (fp8_device_resolve gives the CPU).
 */
#ifndef FP8_GPU_H
#define FP8_GPU_H

#include "compute/fp4_ref.h"
#include "compute/quant_ref.h"

typedef struct fp8_gpu fp8_gpu;

/* host[i] gets a pinned buffer of bytes[i] bytes, freed by fp8_gpu_free. */
fp8_status fp8_gpu_create(fp8_ctx *ctx, const size_t bytes[3], fp8_gpu **gpu,
                          unsigned char *host[3]);
void fp8_gpu_free(fp8_gpu *gpu);

/*
 * The band in host[0] quantized into host[1] (codes) and host[2] (scales),
 * as fp8_band_quantize would (an E2M1 scheme's by fp8_gpu_fp4_quantize).  *bad: the band has a NaN or infinity, or a
 * scale its kind cannot store, or an element with no kernel (INT4); the
 * caller then runs the CPU path, which says what and where (or quantizes).
 */
fp8_status fp8_gpu_quantize(fp8_ctx *ctx, fp8_gpu *gpu, const fp8_band *b, bool *bad);
/* The largest magnitude of n elements in host[0]; *bad on a NaN or infinity. */
fp8_status fp8_gpu_amax(fp8_ctx *ctx, fp8_gpu *gpu, fp8_dtype src, uint64_t n, float *amax,
                        bool *bad);

/*
 * Dequantization of any element row (quant_ref.h, fp8_dequant_spec): rows
 * [row0, row0 + rows) of a matrix of `cols` values, their codes in host[0];
 * host[1] holds what fp8_gpu_dequant_prepare wrote and after it the scales
 * as fp8_dequant takes them (a grid of group_rows x group_cols groups,
 * starting at the scale row of row0).  Columns [c0, c0 + width) land in
 * host[2] as `out`, [rows, width], or [width, rows] with `transpose` (a
 * packed element; a one-byte element's band is all the columns).  upload
 * false: another band of the rows the last call uploaded.  The bytes are
 * fp8_dequant's.  *bad: a NaN code or scale, or a value that is not
 * finite; the caller redoes the band on the CPU, which says what and where.
 */
typedef struct {
    fp8_dtype out;
    uint64_t rows, cols, row0, group_rows, group_cols, nscales;
    uint64_t c0, width;
    bool transpose, upload;
    fp8_elem elem; /* the codes' element row */
} fp8_gpu_dequant;
fp8_status fp8_gpu_dequantize(fp8_ctx *ctx, fp8_gpu *gpu, const fp8_gpu_dequant *d, bool *bad);
/* What the device reads before the scales in host[1] (d->table as the
 * device reads it, FP8_GPU_FP4_TABLE_BYTES; nothing without a table),
 * written into dst when not NULL; its size. */
size_t fp8_gpu_dequant_prepare(const fp8_dequant_spec *d, unsigned char *dst);
#define FP8_GPU_FP4_TABLE_BYTES (256 * 16 * 4 + 256)
#define FP8_GPU_DEQUANT_PREP_MAX FP8_GPU_FP4_TABLE_BYTES
/*
 * Packed-FP4 quantization on the GPU: the n elements (whole rows, n a
 * multiple of the scheme's run) of dtype src (BF16 or F32) in host[0] to
 * n / 2 packed bytes in host[1] and n / run scale bytes in host[2], as
 * fp4_quantize_row gives them under the second level `global` (NVFP4).
 * *bad: a NaN or infinity, an E8M0 overflow, or (MXFP4 from BF16) a
 * quotient at or below 2^-126; the caller then runs the CPU path, which
 * says what and where (or writes the same bytes).
 */
fp8_status fp8_gpu_fp4_quantize(fp8_ctx *ctx, fp8_gpu *gpu, fp8_scheme scheme, fp8_dtype src,
                                uint64_t n, float global, bool *bad);

/*
 * The caller's device memory, on the caller's stream (a cudaStream_t; NULL:
 * the legacy default stream), queued without a wait unless said
 * (fp8_tensor_quantize_cuda).  fp8_gpu_dev_words: n device words, zeroed;
 * the launches OR the kernels' flags into *flags, raise *amax_bits to the
 * largest magnitude bits (the source's own format) of x's n elements.
 */
fp8_status fp8_gpu_dev_words(fp8_ctx *ctx, size_t n, void *stream, unsigned **words);
void fp8_gpu_dev_words_free(unsigned *words, void *stream);
/* NULL when a band of scheme s from src under numerics num has a kernel,
 * else why not. */
const char *fp8_gpu_dev_no_kernel(const fp8_numerics *num, fp8_scheme s, fp8_dtype src);
/* Band b (whole rows) of device memory x into q and scales, as
 * fp8_band_quantize writes them; a flag set: redo it on the CPU. */
fp8_status fp8_gpu_dev_quantize(fp8_ctx *ctx, const fp8_band *b, const void *x, void *q,
                                void *scales, unsigned *flags, void *stream);
fp8_status fp8_gpu_dev_amax(fp8_ctx *ctx, fp8_dtype src, const void *x, uint64_t n,
                            unsigned *amax_bits, void *stream);
/* n bytes from src to dst (to_host: device to host), then, with wait, a
 * wait for the stream. */
fp8_status fp8_gpu_dev_copy(fp8_ctx *ctx, void *dst, const void *src, size_t n, bool to_host,
                            bool wait, void *stream);

#endif
