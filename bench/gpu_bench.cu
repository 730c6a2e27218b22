/*
 * gpu_bench.cu - kernel throughput against the same run's device-to-device
 * copy, and pinned host<->device copy times (make bench-gpu).
 *
 *   gpu_bench kernels [MIB...]       each kernel on tensors of MIB MiB of bf16
 *   gpu_bench copy IN_BYTES OUT_BYTES  pinned H2D of IN_BYTES, D2H of OUT_BYTES
 *   gpu_bench slots N B0 B1 B2       the driver's start, then N of fp8conv's
 *                                    per-thread slots (a stream, pinned and
 *                                    device buffers of B0, B1 and B2 bytes)
 *                                    made and freed one after another and
 *                                    in N threads (host clock)
 *
 * Times are the best of REPS runs (GPU_BENCH_REPS, default 10), measured
 * with CUDA events.  A kernel's bandwidth counts the bytes it must move
 * (reads plus writes); the floor is cudaMemcpy device to device of the
 * input, which moves 2 x input bytes.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <thread>
#include <vector>

#include "../kernels/fp8_kernels.h"

/* timed runs a measurement (GPU_BENCH_REPS, default 10; a profiler's run takes 1) */
static int REPS = 10;

static void check(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "gpu_bench: %s: %s\n", what, cudaGetErrorString(err));
        exit(1);
    }
}

static void check_k(int err, const char *what) { check((cudaError_t)err, what); }

/* The best time of REPS runs of fn(arg), in milliseconds. */
template <class F> static float best_ms(F fn)
{
    cudaEvent_t a, b;
    check(cudaEventCreate(&a), "event");
    check(cudaEventCreate(&b), "event");
    fn(); /* warm up */
    float best = 1e30f;
    for (int i = 0; i < REPS; i++) {
        check(cudaEventRecord(a), "record");
        fn();
        check(cudaEventRecord(b), "record");
        check(cudaEventSynchronize(b), "sync");
        float ms;
        check(cudaEventElapsedTime(&ms, a, b), "elapsed");
        best = ms < best ? ms : best;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

/* Finite bf16 weights of a realistic spread, as bench/make_model writes. */
__global__ void fill_bf16(uint16_t *x, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        x[i] = (uint16_t)((h >> 63) << 15 | (117 + (h >> 40) % 8) << 7 | (h & 0x7F));
    }
}

static void report(const char *name, uint64_t moved, float ms, uint64_t copy_bytes, float copy_ms)
{
    double bw = moved / (ms * 1e-3) / 1e9, floor = 2.0 * copy_bytes / (copy_ms * 1e-3) / 1e9;
    printf("%-28s %9.3f ms %8.1f GB/s   %.2f x copy bandwidth\n", name, ms, bw, bw / floor);
}

static int kernels(int argc, char **argv)
{
    static const int default_mib[] = { 256, 1024 };
    int nsizes = argc > 0 ? argc : 2;
    for (int k = 0; k < nsizes; k++) {
        uint64_t mib = argc > 0 ? strtoull(argv[k], NULL, 10) : (uint64_t)default_mib[k];
        uint64_t bytes = mib << 20, n = bytes / 2, cols = 8192, rows = n / cols;
        n = rows * cols;
        void *x, *copy, *q, *s, *y;
        unsigned *word;
        check(cudaMalloc(&x, n * 2), "malloc");
        check(cudaMalloc(&copy, n * 2), "malloc");
        check(cudaMalloc(&q, n), "malloc");
        check(cudaMalloc(&s, n / 8), "malloc");
        check(cudaMalloc(&y, n * 2), "malloc");
        check(cudaMalloc((void **)&word, 4), "malloc");
        fill_bf16<<<4096, 256>>>((uint16_t *)x, n);
        check(cudaDeviceSynchronize(), "fill");
        float copy_ms = best_ms([&] { check(cudaMemcpyAsync(copy, x, n * 2, cudaMemcpyDeviceToDevice), "copy"); });
        printf("== %llu MiB of bf16 (%llu x %llu)\n", (unsigned long long)mib,
               (unsigned long long)rows, (unsigned long long)cols);
        report("floor: device copy", 2 * n * 2, copy_ms, n * 2, copy_ms);
        struct {
            const char *name;
            fp8_scale_kind kind;
            uint64_t gr, gc;
            int fixed;
        } cases[] = {
            { "quantize block 128x128", FP8_SCALE_F32, 128, 128, 0 },
            { "quantize channel", FP8_SCALE_F32, 1, cols, 0 },
            { "quantize tensor (pass 2)", FP8_SCALE_F32, 1, cols, 1 },
            { "quantize mxfp8 rceil", FP8_SCALE_E8M0_RCEIL, 1, 32, 0 },
        };
        for (auto &c : cases) {
            fp8k_band b = { FP8K_BF16, c.kind, rows, cols, c.gr, c.gc, c.fixed, 0.001f };
            uint64_t nscales = c.fixed ? 0 : (rows / c.gr) * (cols / c.gc);
            float ms = best_ms([&] {
                check_k(fp8k_launch_quantize(&b, x, (uint8_t *)q, s, word, 0), c.name);
            });
            report(c.name, n * 2 + n + nscales * fp8_scale_size(c.kind), ms, n * 2, copy_ms);
        }
        float ms = best_ms([&] {
            check(cudaMemsetAsync(word, 0, 4), "memset");
            check_k(fp8k_launch_amax(FP8K_BF16, x, n, word, 0), "amax");
        });
        report("amax (tensor pass 1)", n * 2, ms, n * 2, copy_ms);
        fp8k_dequant d = { FP8K_BF16, rows, cols, 0, 128, 128 };
        ms = best_ms([&] {
            check_k(fp8k_launch_dequantize(&d, (const uint8_t *)q, (const float *)s, y, word, 0),
                    "dequantize");
        });
        report("dequantize block -> bf16", n + n * 2 + (rows / 128) * (cols / 128) * 4, ms, n * 2,
               copy_ms);
        /* packed FP4 (issues 25, 26): bf16 -> NVFP4 / MXFP4 codes and scale
         * bytes, and MXFP4 codes -> bf16 through a table (its contents do not
         * change the work: a lookup a code) */
        for (int nv = 1; nv >= 0; nv--) {
            uint64_t g = nv ? 16 : 32;
            fp8k_fp4q f = { FP8K_BF16, nv, n, g, nv ? 0x1p-3f / (448.0f * 6.0f) : 0.0f };
            ms = best_ms([&] {
                check_k(fp8k_launch_fp4q(&f, x, (uint8_t *)q, (uint8_t *)s, word, 0),
                        nv ? "fp4q nvfp4" : "fp4q mxfp4");
            });
            report(nv ? "quantize nvfp4 (g16)" : "quantize mxfp4 (g32)", n * 2 + n / 2 + n / g, ms,
                   n * 2, copy_ms);
        }
        void *table;
        check(cudaMalloc(&table, FP8K_FP4_TABLE_BYTES), "malloc");
        check(cudaMemset(table, 1, FP8K_FP4_TABLE_BYTES), "memset");
        fp8k_fp4 d4 = { FP8K_BF16, rows, cols, 32, 0, cols, 0 };
        ms = best_ms([&] {
            check_k(fp8k_launch_fp4(&d4, (const uint8_t *)q, (const uint8_t *)s,
                                    (const uint8_t *)table, y, word, 0),
                    "fp4 decode");
        });
        report("dequantize mxfp4 -> bf16", n / 2 + n / 32 + n * 2, ms, n * 2, copy_ms);
        cudaFree(table);
        cudaFree(x);
        cudaFree(copy);
        cudaFree(q);
        cudaFree(s);
        cudaFree(y);
        cudaFree(word);
    }
    return 0;
}

static int copies(uint64_t in, uint64_t out)
{
    uint64_t big = in > out ? in : out;
    void *h, *d;
    check(cudaHostAlloc(&h, big, cudaHostAllocDefault), "pinned alloc");
    check(cudaMalloc(&d, big), "malloc");
    memset(h, 1, big);
    float h2d = best_ms([&] { check(cudaMemcpyAsync(d, h, in, cudaMemcpyHostToDevice), "h2d"); });
    float d2h = best_ms([&] { check(cudaMemcpyAsync(h, d, out, cudaMemcpyDeviceToHost), "d2h"); });
    printf("pinned H2D %llu bytes: %.3f s (%.1f GB/s)\n", (unsigned long long)in, h2d / 1e3,
           in / (h2d * 1e-3) / 1e9);
    printf("pinned D2H %llu bytes: %.3f s (%.1f GB/s)\n", (unsigned long long)out, d2h / 1e3,
           out / (d2h * 1e-3) / 1e9);
    printf("copy_floor_s %.4f\n", (h2d > d2h ? h2d : d2h) / 1e3);
    cudaFreeHost(h);
    cudaFree(d);
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* What fp8conv's jobs pay before and after the work on --device cuda: the
 * driver's start, and making and freeing one slot per thread. */
static int slots(int n, const size_t bytes[3])
{
    double t0 = now_ms();
    check(cudaFree(0), "the driver's start");
    double t1 = now_ms();
    printf("driver start (cudaFree(0)): %.1f ms\n", t1 - t0);
    std::vector<fp8k_slot *> s((size_t)n);
    std::vector<void *> h(3 * (size_t)n);
    for (int round = 0; round < 2; round++) {
        double a = now_ms();
        if (round == 0) {
            for (int i = 0; i < n; i++)
                check_k(fp8k_slot_create(0, bytes, &s[i], &h[3 * i]), "slot");
        } else {
            std::vector<std::thread> ts;
            for (int i = 0; i < n; i++)
                ts.emplace_back([&, i] { check_k(fp8k_slot_create(0, bytes, &s[i], &h[3 * i]), "slot"); });
            for (auto &t : ts)
                t.join();
        }
        double b = now_ms();
        for (int i = 0; i < n; i++)
            fp8k_slot_free(s[i]);
        double c = now_ms();
        printf("%d slots of %zu+%zu+%zu bytes, %s: made in %.1f ms (%.2f each), freed in %.1f ms\n", n,
               bytes[0], bytes[1], bytes[2], round ? "in as many threads" : "one after another",
               b - a, (b - a) / n, c - b);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *reps = getenv("GPU_BENCH_REPS");
    if (reps)
        REPS = atoi(reps) > 0 ? atoi(reps) : 1;
    if (argc >= 2 && strcmp(argv[1], "kernels") == 0)
        return kernels(argc - 2, argv + 2);
    if (argc == 4 && strcmp(argv[1], "copy") == 0)
        return copies(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
    if (argc == 6 && strcmp(argv[1], "slots") == 0) {
        size_t bytes[3] = { strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
                            strtoull(argv[5], NULL, 10) };
        return slots(atoi(argv[2]) > 0 ? atoi(argv[2]) : 1, bytes);
    }
    fprintf(stderr, "usage: gpu_bench kernels [MIB...] | gpu_bench copy IN_BYTES OUT_BYTES"
                    " | gpu_bench slots N B0 B1 B2\n");
    return 2;
}
