/*
 * gpu.c - the CUDA backend as lib/ sees it: kernels/ when compiled
 * with CUDA (FP8_HAVE_CUDA), answers of "not compiled" otherwise.  CUDA
 * errors are cleared and returned so that --device auto can fall back to
 * the CPU; a runtime error from device discovery means "no GPU" (that is
 * what a machine without a driver returns).
 *
 * FP8CONV_CUDA_FAULT=N makes the Nth GPU call of the process fail as a
 * failed launch would: make check-gpu uses it to check that a CUDA failure
 * mid-run is exit 5 and leaves nothing behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/gpu.h"

#ifndef FP8_CUDA_ARCHS
#define FP8_CUDA_ARCHS ""
#endif

#ifdef FP8_HAVE_CUDA
#include "../kernels/fp8_kernels.h"
#endif

bool fp8_cuda_compiled(void)
{
#ifdef FP8_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

const char *fp8_cuda_architectures(void)
{
    return FP8_CUDA_ARCHS;
}

const char *fp8_device_name(fp8_device d)
{
    return d == FP8_DEVICE_CPU ? "cpu" : d == FP8_DEVICE_CUDA ? "cuda" : "auto";
}

const char *fp8_cpu_paths(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    return "scalar, avx2, avx512 (picked at run time)";
#else
    return "scalar";
#endif
}

fp8_status fp8_cuda_devices(fp8_ctx *ctx, fp8_gpu_info *gpus, int max, int *count)
{
    *count = 0;
#ifdef FP8_HAVE_CUDA
    int n = 0;
    if (fp8k_device_count(&n) != 0) {
        fp8k_clear_error();
        return FP8_OK;
    }
    for (int i = 0; i < n && *count < max; i++) {
        fp8_gpu_info *g = &gpus[*count];
        int err = fp8k_device_props(i, g->name, sizeof g->name, &g->major, &g->minor,
                                    &g->memory_bytes);
        if (err) {
            fp8k_clear_error();
            return fp8_fail(ctx, FP8_ERR_DEVICE, "cuda: cannot query device %d: %s", i,
                            fp8k_error_string(err));
        }
        (*count)++;
    }
#else
    (void)ctx, (void)gpus, (void)max;
#endif
    return FP8_OK;
}

fp8_status fp8_device_resolve(fp8_ctx *ctx, fp8_device requested, fp8_device *resolved)
{
    *resolved = FP8_DEVICE_CPU;
    /* auto is the CPU: on the one GPU machine measured (an H200 beside 16
     * cores, bench/RESULTS.md) every command ran faster there, as the page
     * cache and not the arithmetic bounds them; the GPU is --device cuda */
    if (requested != FP8_DEVICE_CUDA)
        return FP8_OK;
#ifdef FP8_HAVE_CUDA
    int n = 0, err = fp8k_device_count(&n);
    if (err == 0 && n > 0 && (err = fp8k_device_probe(0)) == 0) {
        *resolved = FP8_DEVICE_CUDA;
        return FP8_OK;
    }
    fp8k_clear_error();
    if (err)
        return fp8_fail(ctx, FP8_ERR_DEVICE, "--device cuda: no usable GPU (%s)",
                        fp8k_error_string(err));
    return fp8_fail(ctx, FP8_ERR_DEVICE, "--device cuda: no GPU found");
#else
    return fp8_fail(ctx, FP8_ERR_DEVICE,
                    "--device cuda: this fp8conv was built without CUDA (make HAVE_CUDA=1)");
#endif
}

/* ---------------------------------------------------------------- work */

size_t fp8_gpu_dequant_prepare(const fp8_dequant_spec *d, unsigned char *dst)
{
    const fp4_table *t = d->table;
    if (!t || !dst)
        return t ? FP8_GPU_FP4_TABLE_BYTES : 0;
    /* the values (host byte order, as the device's: both little-endian),
     * then clean[b]: b is no NaN and no code overflows under it */
    memcpy(dst, t->value, 256 * 16 * 4);
    for (unsigned b = 0; b < 256; b++) {
        bool clean = !t->nan_scale[b];
        for (unsigned c = 0; c < 16; c++)
            clean = clean && !t->inf[b][c];
        dst[256 * 16 * 4 + b] = clean;
    }
    return FP8_GPU_FP4_TABLE_BYTES;
}

/* INT4 has no kernel (issue 42: the CPU path at its floor is enough); the
 * FP4 kernel reads BF16 and F32, all that the FP4 schemes take. */
const char *fp8_gpu_dev_no_kernel(const fp8_numerics *num, fp8_scheme s, fp8_dtype src)
{
    fp8_elem e = fp8_scheme_get(s)->elem;
    if (e == FP8_ELEM_I4)
        return "scheme int4 has no CUDA kernel; quantize it on the CPU";
    if (e == FP8_ELEM_E2M1 && num->fp4_f32)
        return "the FP4 kernel computes in the weight's dtype, not the profile's fp32 steps "
               "(fp8conv-formats(5), PROFILES); quantize it on the CPU";
    return e == FP8_ELEM_E2M1 && src == FP8_DTYPE_F16 ? "the FP4 kernel reads bf16 and f32" : NULL;
}

#ifdef FP8_HAVE_CUDA
struct fp8_gpu {
    fp8k_slot *slot;
};

static fp8k_type ktype(fp8_dtype d)
{
    return d == FP8_DTYPE_F32 ? FP8K_F32 : d == FP8_DTYPE_F16 ? FP8K_F16 : FP8K_BF16;
}

/* The injected fault, when this is the call FP8CONV_CUDA_FAULT names. */
static bool injected_fault(void)
{
    static unsigned long calls;
    const char *n = getenv("FP8CONV_CUDA_FAULT");
    return n && *n && __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) == strtoul(n, NULL, 10);
}

static fp8_status cuda_fail(fp8_ctx *ctx, const char *what, int err)
{
    return fp8_fail(ctx, FP8_ERR_DEVICE, "cuda: %s failed: %s", what,
                    err ? fp8k_error_string(err) : "fault injected by FP8CONV_CUDA_FAULT");
}

fp8_status fp8_gpu_create(fp8_ctx *ctx, const size_t bytes[3], fp8_gpu **gpu,
                          unsigned char *host[3])
{
    void *h[3] = { 0 };
    *gpu = calloc(1, sizeof **gpu);
    if (!*gpu)
        return fp8_fail(ctx, FP8_ERR_NOMEM, "out of memory");
    int err = fp8k_slot_create(0, bytes, &(*gpu)->slot, h);
    if (err) {
        free(*gpu);
        *gpu = NULL;
        return fp8_fail(ctx, FP8_ERR_DEVICE,
                        "cuda: cannot allocate %zu bytes of pinned and device buffers: %s",
                        bytes[0] + bytes[1] + bytes[2], fp8k_error_string(err));
    }
    for (int i = 0; i < 3; i++)
        host[i] = h[i];
    return FP8_OK;
}

void fp8_gpu_free(fp8_gpu *gpu)
{
    if (gpu)
        fp8k_slot_free(gpu->slot);
    free(gpu);
}

fp8_status fp8_gpu_quantize(fp8_ctx *ctx, fp8_gpu *gpu, const fp8_band *b, bool *bad)
{
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_E2M1) { /* whole rows: one run */
        /* no FP4 kernel for a profile's fp32 steps (fp4_f32): *bad sends the band to
         * the CPU's fp8_band_quantize (quantize says so in a note) */
        if (b->num.fp4_f32) {
            *bad = true;
            return FP8_OK;
        }
        return fp8_gpu_fp4_quantize(ctx, gpu, b->scheme, b->src, b->rows * b->cols, b->global,
                                    bad);
    }
    /* no INT4 kernel (issue 42: the CPU path at its floor is enough): *bad
     * sends the band to the CPU's fp8_band_quantize, which writes its bytes */
    if (fp8_scheme_get(b->scheme)->elem == FP8_ELEM_I4) {
        *bad = true;
        return FP8_OK;
    }
    fp8k_band kb = { ktype(b->src), b->kind, b->rows, b->cols, b->group_rows, b->group_cols,
                     b->fixed, b->scale, b->num };
    unsigned flags = 0;
    int err = injected_fault() ? -1 : fp8k_slot_quantize(gpu->slot, &kb, &flags);
    if (err)
        return cuda_fail(ctx, "the quantize kernel", err < 0 ? 0 : err);
    *bad = flags != 0;
    return FP8_OK;
}

fp8_status fp8_gpu_amax(fp8_ctx *ctx, fp8_gpu *gpu, fp8_dtype src, uint64_t n, float *amax,
                        bool *bad)
{
    unsigned bits = 0;
    int err = injected_fault() ? -1 : fp8k_slot_amax(gpu->slot, ktype(src), n, &bits);
    if (err)
        return cuda_fail(ctx, "the amax kernel", err < 0 ? 0 : err);
    *bad = bits >= fp8_dtype_inf_bits(src);
    *amax = src == FP8_DTYPE_F32   ? fp8_f32_from_bits(bits)
            : src == FP8_DTYPE_F16 ? fp8_f16_to_f32((uint16_t)bits)
                                   : fp8_bf16_to_f32((uint16_t)bits);
    return FP8_OK;
}

/* A packed element's codes are looked up in the table (the FP4 decode
 * kernel); a one-byte element's scaled by fp32 scales. */
fp8_status fp8_gpu_dequantize(fp8_ctx *ctx, fp8_gpu *gpu, const fp8_gpu_dequant *d, bool *bad)
{
    if (d->elem == FP8_ELEM_I4) { /* no INT4 kernel: *bad sends the band to the CPU's fp8_dequant */
        *bad = true;
        return FP8_OK;
    }
    bool packed = fp8_elem_get(d->elem)->per_byte > 1;
    unsigned flags = 0;
    fp8k_fp4 kf = { ktype(d->out), d->rows, d->cols, d->group_cols, d->c0, d->width,
                    d->transpose };
    fp8k_dequant kd = { ktype(d->out), d->rows, d->cols, d->row0, d->group_rows, d->group_cols };
    int err = injected_fault() ? -1
              : packed         ? fp8k_slot_fp4(gpu->slot, &kf, d->upload, &flags)
                               : fp8k_slot_dequantize(gpu->slot, &kd, d->nscales, &flags);
    if (err)
        return cuda_fail(ctx, packed ? "the FP4 decode kernel" : "the dequantize kernel",
                         err < 0 ? 0 : err);
    *bad = flags != 0;
    return FP8_OK;
}

fp8_status fp8_gpu_fp4_quantize(fp8_ctx *ctx, fp8_gpu *gpu, fp8_scheme scheme, fp8_dtype src,
                                uint64_t n, float global, bool *bad)
{
    const fp8_scheme_traits *t = fp8_scheme_get(scheme);
    fp8k_fp4q kd = { ktype(src), t->levels == 2, n, t->run, global };
    unsigned flags = 0;
    if (src != FP8_DTYPE_BF16 && src != FP8_DTYPE_F32) { /* not the kernel's */
        *bad = true;
        return FP8_OK;
    }
    int err = injected_fault() ? -1 : fp8k_slot_fp4q(gpu->slot, &kd, &flags);
    if (err)
        return cuda_fail(ctx, "the FP4 quantize kernel", err < 0 ? 0 : err);
    *bad = flags != 0;
    return FP8_OK;
}

/* ---------------------------------------------------------------- the caller's device memory */

fp8_status fp8_gpu_dev_words(fp8_ctx *ctx, size_t n, void *stream, unsigned **words)
{
    int err = injected_fault() ? -1 : fp8k_words_alloc(n, words, stream);
    return err ? cuda_fail(ctx, "allocating device memory", err < 0 ? 0 : err) : FP8_OK;
}

void fp8_gpu_dev_words_free(unsigned *words, void *stream)
{
    fp8k_words_free(words, stream);
}

fp8_status fp8_gpu_dev_quantize(fp8_ctx *ctx, const fp8_band *b, const void *x, void *q,
                                void *scales, unsigned *flags, void *stream)
{
    const fp8_scheme_traits *t = fp8_scheme_get(b->scheme);
    const char *why = fp8_gpu_dev_no_kernel(&b->num, b->scheme, b->src);
    if (why)
        return fp8_fail(ctx, FP8_ERR_DEVICE, "cuda: %s", why);
    fp8k_band kb = { ktype(b->src), b->kind, b->rows, b->cols, b->group_rows, b->group_cols,
                     b->fixed, b->scale, b->num };
    fp8k_fp4q kf = { ktype(b->src), t->levels == 2, b->rows * b->cols, t->run, b->global };
    int err = injected_fault()             ? -1
              : t->elem == FP8_ELEM_E2M1 ? fp8k_launch_fp4q(&kf, x, q, scales, flags, stream)
                                          : fp8k_launch_quantize(&kb, x, q, scales, flags, stream);
    return err ? cuda_fail(ctx, t->elem == FP8_ELEM_E2M1 ? "the FP4 quantize kernel"
                                                         : "the quantize kernel",
                           err < 0 ? 0 : err)
               : FP8_OK;
}

fp8_status fp8_gpu_dev_amax(fp8_ctx *ctx, fp8_dtype src, const void *x, uint64_t n,
                            unsigned *amax_bits, void *stream)
{
    int err = injected_fault() ? -1 : fp8k_launch_amax(ktype(src), x, n, amax_bits, stream);
    return err ? cuda_fail(ctx, "the amax kernel", err < 0 ? 0 : err) : FP8_OK;
}

fp8_status fp8_gpu_dev_copy(fp8_ctx *ctx, void *dst, const void *src, size_t n, bool to_host,
                            bool wait, void *stream)
{
    int err = injected_fault() ? -1 : fp8k_copy(dst, src, n, to_host, wait, stream);
    return err ? cuda_fail(ctx, to_host ? "a copy from the device" : "a copy to the device",
                           err < 0 ? 0 : err)
               : FP8_OK;
}

#else /* no CUDA: fp8_device_resolve never gives FP8_DEVICE_CUDA, so these are not reached */

static fp8_status not_compiled(fp8_ctx *ctx)
{
    return fp8_fail(ctx, FP8_ERR_DEVICE, "cuda: this fp8conv was built without CUDA");
}

fp8_status fp8_gpu_create(fp8_ctx *ctx, const size_t bytes[3], fp8_gpu **gpu,
                          unsigned char *host[3])
{
    *gpu = NULL;
    return not_compiled(ctx);
}

void fp8_gpu_free(fp8_gpu *gpu) { (void)gpu; }

fp8_status fp8_gpu_quantize(fp8_ctx *ctx, fp8_gpu *gpu, const fp8_band *b, bool *bad)
{
    return not_compiled(ctx);
}

fp8_status fp8_gpu_amax(fp8_ctx *ctx, fp8_gpu *gpu, fp8_dtype src, uint64_t n, float *amax,
                        bool *bad)
{
    return not_compiled(ctx);
}

fp8_status fp8_gpu_dequantize(fp8_ctx *ctx, fp8_gpu *gpu, const fp8_gpu_dequant *d, bool *bad)
{
    return not_compiled(ctx);
}

fp8_status fp8_gpu_fp4_quantize(fp8_ctx *ctx, fp8_gpu *gpu, fp8_scheme scheme, fp8_dtype src,
                                uint64_t n, float global, bool *bad)
{
    return not_compiled(ctx);
}

fp8_status fp8_gpu_dev_words(fp8_ctx *ctx, size_t n, void *stream, unsigned **words)
{
    *words = NULL;
    return not_compiled(ctx);
}

void fp8_gpu_dev_words_free(unsigned *words, void *stream) { (void)words; }

fp8_status fp8_gpu_dev_quantize(fp8_ctx *ctx, const fp8_band *b, const void *x, void *q,
                                void *scales, unsigned *flags, void *stream)
{
    return not_compiled(ctx);
}

fp8_status fp8_gpu_dev_amax(fp8_ctx *ctx, fp8_dtype src, const void *x, uint64_t n,
                            unsigned *amax_bits, void *stream)
{
    return not_compiled(ctx);
}

fp8_status fp8_gpu_dev_copy(fp8_ctx *ctx, void *dst, const void *src, size_t n, bool to_host,
                            bool wait, void *stream)
{
    return not_compiled(ctx);
}
#endif
