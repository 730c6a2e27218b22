/*
 * backend_cuda.c - the CUDA backend as lib/ sees it: kernels/ when compiled
 * with CUDA (FP8_HAVE_CUDA), answers of "not compiled" otherwise.  CUDA
 * errors are cleared and returned so that --device auto can fall back to
 * the CPU; a runtime error from device discovery means "no GPU" (that is
 * what a machine without a driver returns).
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

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
    if (requested == FP8_DEVICE_CPU)
        return FP8_OK;
#ifdef FP8_HAVE_CUDA
    int n = 0, err = fp8k_device_count(&n);
    if (err == 0 && n > 0 && (err = fp8k_device_probe(0)) == 0) {
        *resolved = FP8_DEVICE_CUDA;
        return FP8_OK;
    }
    fp8k_clear_error();
    if (requested == FP8_DEVICE_AUTO)
        return FP8_OK;
    if (err)
        return fp8_fail(ctx, FP8_ERR_DEVICE, "--device cuda: no usable GPU (%s)",
                        fp8k_error_string(err));
    return fp8_fail(ctx, FP8_ERR_DEVICE, "--device cuda: no GPU found");
#else
    if (requested == FP8_DEVICE_AUTO)
        return FP8_OK;
    return fp8_fail(ctx, FP8_ERR_DEVICE,
                    "--device cuda: this fp8conv was built without CUDA (make HAVE_CUDA=1)");
#endif
}
