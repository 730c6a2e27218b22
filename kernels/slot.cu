/*
 * slot.cu - one host thread's share of the GPU: a stream, pinned host
 * buffers and device buffers of fixed sizes (so GPU memory is bounded by the
 * number of threads times a job's size, never by the model), and the round
 * trip copy in, kernel, copy out, wait.  (tests/kernels_emu.cpp compiles it
 * for the CPU too, over a host-memory stand-in for the runtime.)
 */
#ifndef FP8K_LAUNCH
#include <cuda_runtime.h>
#endif
#include <stdlib.h>

#include "fp8_kernels.h"

struct fp8k_slot {
    int device;
    cudaStream_t stream;
    void *host[3], *dev[3];
    unsigned *hword, *dword; /* the flags or amax word, pinned and on the device */
};

#define TRY(call)                                                                          \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            (void)cudaGetLastError();                                                      \
            return (int)err_;                                                              \
        }                                                                                  \
    } while (0)

extern "C" void fp8k_slot_free(fp8k_slot *s)
{
    if (!s)
        return;
    cudaSetDevice(s->device);
    if (s->stream)
        cudaStreamSynchronize(s->stream);
    for (int i = 0; i < 3; i++) {
        cudaFreeHost(s->host[i]);
        cudaFree(s->dev[i]);
    }
    cudaFreeHost(s->hword);
    cudaFree(s->dword);
    if (s->stream)
        cudaStreamDestroy(s->stream);
    (void)cudaGetLastError();
    free(s);
}

static int slot_init(fp8k_slot *s, const size_t bytes[3])
{
    TRY(cudaSetDevice(s->device));
    TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 3; i++) {
        size_t n = bytes[i] ? bytes[i] : 1;
        TRY(cudaHostAlloc(&s->host[i], n, cudaHostAllocDefault));
        TRY(cudaMalloc(&s->dev[i], n));
    }
    TRY(cudaHostAlloc((void **)&s->hword, sizeof *s->hword, cudaHostAllocDefault));
    TRY(cudaMalloc((void **)&s->dword, sizeof *s->dword));
    return 0;
}

extern "C" int fp8k_slot_create(int device, const size_t bytes[3], fp8k_slot **slot,
                                void *host[3])
{
    fp8k_slot *s = (fp8k_slot *)calloc(1, sizeof *s);
    *slot = NULL;
    if (!s)
        return (int)cudaErrorMemoryAllocation;
    s->device = device;
    int err = slot_init(s, bytes);
    if (err) {
        fp8k_slot_free(s);
        return err;
    }
    for (int i = 0; i < 3; i++)
        host[i] = s->host[i];
    *slot = s;
    return 0;
}

static int copy_in(fp8k_slot *s, int i, size_t n)
{
    return n ? (int)cudaMemcpyAsync(s->dev[i], s->host[i], n, cudaMemcpyHostToDevice, s->stream)
             : 0;
}

static int copy_out(fp8k_slot *s, int i, size_t n)
{
    return n ? (int)cudaMemcpyAsync(s->host[i], s->dev[i], n, cudaMemcpyDeviceToHost, s->stream)
             : 0;
}

/* The word back, and the wait for everything queued on the stream. */
static int finish(fp8k_slot *s, unsigned *word)
{
    TRY(cudaMemcpyAsync(s->hword, s->dword, sizeof *s->hword, cudaMemcpyDeviceToHost,
                        s->stream));
    TRY(cudaStreamSynchronize(s->stream));
    *word = *s->hword;
    return 0;
}

static size_t type_size(fp8k_type t) { return t == FP8K_F32 ? 4 : 2; }

extern "C" int fp8k_slot_quantize(fp8k_slot *s, const fp8k_band *b, unsigned *bad)
{
    uint64_t n = b->rows * b->cols;
    uint64_t nscales = b->fixed ? 0
                                : fp8_ceil_div(b->rows, b->group_rows) * fp8_ceil_div(b->cols, b->group_cols);
    TRY(cudaSetDevice(s->device));
    TRY((cudaError_t)copy_in(s, 0, n * type_size(b->src)));
    TRY(cudaMemsetAsync(s->dword, 0, sizeof *s->dword, s->stream));
    TRY((cudaError_t)fp8k_launch_quantize(b, s->dev[0], (uint8_t *)s->dev[1], s->dev[2],
                                          s->dword, s->stream));
    TRY((cudaError_t)copy_out(s, 1, n));
    TRY((cudaError_t)copy_out(s, 2, nscales * fp8_scale_size(b->kind)));
    return finish(s, bad);
}

extern "C" int fp8k_slot_amax(fp8k_slot *s, fp8k_type src, uint64_t n, unsigned *amax_bits)
{
    TRY(cudaSetDevice(s->device));
    TRY((cudaError_t)copy_in(s, 0, n * type_size(src)));
    TRY(cudaMemsetAsync(s->dword, 0, sizeof *s->dword, s->stream));
    TRY((cudaError_t)fp8k_launch_amax(src, s->dev[0], n, s->dword, s->stream));
    return finish(s, amax_bits);
}

extern "C" int fp8k_slot_dequantize(fp8k_slot *s, const fp8k_dequant *d, uint64_t nscales,
                                    unsigned *bad)
{
    uint64_t n = d->rows * d->cols;
    TRY(cudaSetDevice(s->device));
    TRY((cudaError_t)copy_in(s, 0, n));
    TRY((cudaError_t)copy_in(s, 1, nscales * sizeof(float)));
    TRY(cudaMemsetAsync(s->dword, 0, sizeof *s->dword, s->stream));
    TRY((cudaError_t)fp8k_launch_dequantize(d, (const uint8_t *)s->dev[0],
                                            (const float *)s->dev[1], s->dev[2], s->dword,
                                            s->stream));
    TRY((cudaError_t)copy_out(s, 2, n * type_size(d->out)));
    return finish(s, bad);
}

extern "C" int fp8k_slot_fp4(fp8k_slot *s, const fp8k_fp4 *d, int upload, unsigned *bad)
{
    TRY(cudaSetDevice(s->device));
    if (upload) {
        TRY((cudaError_t)copy_in(s, 0, d->rows * d->cols / 2));
        TRY((cudaError_t)copy_in(s, 1, FP8K_FP4_TABLE_BYTES + d->rows * d->cols / d->group));
    }
    TRY(cudaMemsetAsync(s->dword, 0, sizeof *s->dword, s->stream));
    const uint8_t *dev1 = (const uint8_t *)s->dev[1];
    TRY((cudaError_t)fp8k_launch_fp4(d, (const uint8_t *)s->dev[0], dev1 + FP8K_FP4_TABLE_BYTES,
                                     dev1, s->dev[2], s->dword, s->stream));
    TRY((cudaError_t)copy_out(s, 2, d->rows * d->width * (d->out == FP8K_F32 ? 4 : 2)));
    return finish(s, bad);
}

extern "C" int fp8k_slot_fp4q(fp8k_slot *s, const fp8k_fp4q *d, unsigned *bad)
{
    if (d->group == 0)
        return (int)cudaErrorInvalidValue;
    TRY(cudaSetDevice(s->device));
    TRY((cudaError_t)copy_in(s, 0, d->n * type_size(d->src)));
    TRY(cudaMemsetAsync(s->dword, 0, sizeof *s->dword, s->stream));
    TRY((cudaError_t)fp8k_launch_fp4q(d, s->dev[0], (uint8_t *)s->dev[1], (uint8_t *)s->dev[2],
                                      s->dword, s->stream));
    TRY((cudaError_t)copy_out(s, 1, d->n / 2));
    TRY((cudaError_t)copy_out(s, 2, d->n / d->group));
    return finish(s, bad);
}

/* ---- the caller's device memory on the caller's stream (gpu.c, fp8_gpu_dev_*) */

extern "C" int fp8k_words_alloc(size_t n, unsigned **words, void *stream)
{
    *words = NULL;
    TRY(cudaMallocAsync((void **)words, n * sizeof **words, (cudaStream_t)stream));
    TRY(cudaMemsetAsync(*words, 0, n * sizeof **words, (cudaStream_t)stream));
    return 0;
}

extern "C" void fp8k_words_free(unsigned *words, void *stream)
{
    if (words)
        cudaFreeAsync(words, (cudaStream_t)stream);
    (void)cudaGetLastError();
}

extern "C" int fp8k_copy(void *dst, const void *src, size_t n, int to_host, int wait,
                         void *stream)
{
    TRY(cudaMemcpyAsync(dst, src, n, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                        (cudaStream_t)stream));
    if (wait)
        TRY(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}
