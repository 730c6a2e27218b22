/*
 * probe.cu - device discovery and a launch round trip, so that --device auto
 * picks CUDA only when this build can really run on the GPU present.
 */
#include <cuda_runtime.h>
#include <string.h>

#include "fp8_kernels.h"

extern "C" int fp8k_device_count(int *count)
{
    *count = 0;
    cudaError_t err = cudaGetDeviceCount(count);
    if (err != cudaSuccess)
        *count = 0;
    return (int)err;
}

extern "C" int fp8k_device_props(int device, char *name, size_t name_cap, int *major, int *minor,
                                 uint64_t *memory_bytes)
{
    cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess)
        return (int)err;
    strncpy(name, prop.name, name_cap - 1);
    name[name_cap - 1] = '\0';
    *major = prop.major;
    *minor = prop.minor;
    *memory_bytes = prop.totalGlobalMem;
    return 0;
}

__global__ void fp8k_probe_kernel(int *out)
{
    *out = 0x5A17;
}

extern "C" int fp8k_device_probe(int device)
{
    int *d = NULL, h = 0;
    cudaError_t err = cudaSetDevice(device);
    if (err == cudaSuccess)
        err = cudaMalloc(&d, sizeof *d);
    if (err == cudaSuccess) {
        fp8k_probe_kernel<<<1, 1>>>(d);
        err = cudaGetLastError();
    }
    if (err == cudaSuccess)
        err = cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost);
    if (d)
        cudaFree(d);
    if (err == cudaSuccess && h != 0x5A17)
        err = cudaErrorUnknown;
    return (int)err;
}

extern "C" const char *fp8k_error_string(int err)
{
    return cudaGetErrorString((cudaError_t)err);
}

extern "C" void fp8k_clear_error(void)
{
    (void)cudaGetLastError();
}
