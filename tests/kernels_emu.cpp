/*
 * kernels_emu.cpp - kernels/quantize.cu compiled for the CPU.  A launch runs
 * the CTAs of the grid one after another; a CTA's threads are fibers
 * (ucontext) on the calling thread, switched at every __syncthreads(), so a
 * barrier is "every fiber has reached it", and a warp shuffle is an
 * exchange between two barriers (the kernels call both with every thread of
 * the CTA; a fiber that ends while others wait at a barrier is reported as
 * the divergence it would be on a GPU).  The launch caps are set small, so
 * that the kernels' grid-stride loops run.
 *
 * kernels/slot.cu is compiled here too, over a stand-in for the CUDA
 * runtime in which "device" memory is host memory of its own (so a missing
 * copy shows), and fp8k_device_* report one emulated GPU: linked into
 * fp8conv instead of kernels/, this makes the fp8conv-emu that make check
 * runs with --device cuda, end to end.  Every emulation thread has its own
 * state, so the job engine's threads may launch at once.
 *
 * This tests the kernels' own logic (teams, groups, reductions, partial
 * edges, strides, flags) and the GPU path of lib/ against the reference
 * where there is no GPU; what nvcc makes of it for a real GPU is make
 * check-gpu's to test, and check-ptx's to inspect.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static thread_local dim3 threadIdx, blockIdx, gridDim, blockDim;
/* ---- a stand-in for the CUDA runtime: memory is host memory, streams are
 * synchronous */
typedef void *cudaStream_t;
typedef enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
} cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost };
enum { cudaStreamNonBlocking = 1, cudaHostAllocDefault = 0 };
static cudaError_t cudaGetLastError() { return cudaSuccess; }
static cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned)
{
    *s = (cudaStream_t)1;
    return cudaSuccess;
}
static cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
static cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
static cudaError_t emu_alloc(void **p, size_t n)
{
    return (*p = malloc(n)) ? cudaSuccess : cudaErrorMemoryAllocation;
}
static cudaError_t cudaMalloc(void **p, size_t n) { return emu_alloc(p, n); }
static cudaError_t cudaHostAlloc(void **p, size_t n, unsigned) { return emu_alloc(p, n); }
static cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
static cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
static cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return emu_alloc(p, n); }
static cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return cudaFree(p); }
static cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t)
{
    memcpy(d, s, n);
    return cudaSuccess;
}
static cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t)
{
    memset(d, v, n);
    return cudaSuccess;
}
using std::min;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __shared__ static thread_local /* one CTA runs at a time per thread */

enum { EMU_MAX_THREADS = 256, EMU_STACK = 64 << 10 };
static thread_local ucontext_t emu_scheduler, emu_fibers[EMU_MAX_THREADS];
static thread_local char *emu_stacks[EMU_MAX_THREADS]; /* kept for the thread's life */
static thread_local bool emu_ended[EMU_MAX_THREADS];
static thread_local void (*emu_body)(void *);
static thread_local void *emu_body_arg;

static void __syncthreads() { swapcontext(&emu_fibers[threadIdx.x], &emu_scheduler); }

static thread_local uint32_t emu_lanes[EMU_MAX_THREADS];
static uint32_t __shfl_xor_sync(unsigned mask, uint32_t v, int lane_mask)
{
    (void)mask;
    unsigned t = threadIdx.x;
    emu_lanes[t] = v;
    __syncthreads();
    uint32_t other = emu_lanes[(t & ~31u) | ((t & 31u) ^ (unsigned)lane_mask)];
    __syncthreads();
    return other;
}

static unsigned atomicOr(unsigned *p, unsigned v)
{
    unsigned old = *p;
    *p |= v;
    return old;
}

static unsigned atomicMax(unsigned *p, unsigned v)
{
    unsigned old = *p;
    *p = old > v ? old : v;
    return old;
}

static void emu_fiber_main()
{
    emu_body(emu_body_arg);
    emu_ended[threadIdx.x] = true; /* then back to the scheduler (uc_link) */
}

/* Runs one CTA: every fiber up to its next barrier, round after round. */
static void emu_run_cta(unsigned threads)
{
    for (unsigned t = 0; t < threads; t++) {
        if (!emu_stacks[t] && !(emu_stacks[t] = (char *)malloc(EMU_STACK)))
            abort();
        getcontext(&emu_fibers[t]);
        emu_fibers[t].uc_stack.ss_sp = emu_stacks[t];
        emu_fibers[t].uc_stack.ss_size = EMU_STACK;
        emu_fibers[t].uc_link = &emu_scheduler;
        makecontext(&emu_fibers[t], emu_fiber_main, 0);
        emu_ended[t] = false;
    }
    for (;;) {
        unsigned ended = 0;
        for (unsigned t = 0; t < threads; t++) {
            threadIdx = dim3(t);
            swapcontext(&emu_scheduler, &emu_fibers[t]);
            ended += emu_ended[t];
        }
        if (ended == threads)
            return;
        if (ended) {
            fprintf(stderr, "kernels_emu: %u of %u threads ended while others wait at a barrier\n",
                    ended, threads);
            abort();
        }
    }
}

template <class... P, class... A>
static void emu_launch(dim3 grid, unsigned block, void (*kernel)(P...), A... args)
{
    if (block > EMU_MAX_THREADS)
        abort();
    gridDim = grid;
    blockDim = dim3(block);
    auto body = [&] { kernel(args...); };
    emu_body = [](void *f) { (*(decltype(body) *)f)(); };
    emu_body_arg = &body;
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            blockIdx = dim3(bx, by);
            emu_run_cta(block);
        }
}

#define FP8K_LAUNCH(kernel, grid, stream, ...) \
    ((void)(stream), emu_launch(dim3(grid), CTA, kernel, __VA_ARGS__))
#define FP8K_GROUP_CTAS 3u
#define FP8K_AMAX_CTAS 3u
#define FP8K_DQ_CTAS_X 2u
#define FP8K_DQ_CTAS_Y 5u
#define fp8k_launch_quantize fp8k_emu_quantize
#define fp8k_launch_amax fp8k_emu_amax
#define fp8k_launch_dequantize fp8k_emu_dequantize
#define fp8k_launch_fp4 fp8k_emu_fp4
#define fp8k_launch_fp4q fp8k_emu_fp4q

#include "../kernels/quantize.cu"
#include "../kernels/slot.cu"

/* The launches under their own names too, as gpu.c's fp8_gpu_dev_* call
 * them on device memory (here host memory): a test links gpu.c compiled
 * with FP8_HAVE_CUDA over this file (check_tensor_cuda). */
#undef fp8k_launch_quantize
#undef fp8k_launch_amax
#undef fp8k_launch_fp4q
extern "C" int fp8k_launch_quantize(const fp8k_band *b, const void *src, uint8_t *q, void *scales,
                                    unsigned *bad, void *stream)
{
    return fp8k_emu_quantize(b, src, q, scales, bad, stream);
}
extern "C" int fp8k_launch_amax(fp8k_type src, const void *x, uint64_t n, unsigned *amax_bits,
                                void *stream)
{
    return fp8k_emu_amax(src, x, n, amax_bits, stream);
}
extern "C" int fp8k_launch_fp4q(const fp8k_fp4q *d, const void *src, uint8_t *packed,
                                uint8_t *scales, unsigned *bad, void *stream)
{
    return fp8k_emu_fp4q(d, src, packed, scales, bad, stream);
}

/* ---- one emulated device, as kernels/probe.cu reports real ones */

extern "C" int fp8k_device_count(int *count)
{
    *count = 1;
    return 0;
}

extern "C" int fp8k_device_props(int device, char *name, size_t name_cap, int *major, int *minor,
                                 uint64_t *memory_bytes)
{
    snprintf(name, name_cap, "CPU emulation of the fp8conv kernels");
    *major = *minor = 0;
    *memory_bytes = 0;
    return device == 0 ? 0 : (int)cudaErrorInvalidValue;
}

extern "C" int fp8k_device_probe(int device) { return device == 0 ? 0 : (int)cudaErrorInvalidValue; }
extern "C" const char *fp8k_error_string(int err) { return err ? "emulated CUDA error" : "no error"; }
extern "C" void fp8k_clear_error(void) {}
