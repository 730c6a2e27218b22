/*
 * oracle_cuda_fp8.cpp - NVIDIA's host implementation of the FP8/BF16/F16
 * conversions (cuda_fp8.h, cuda_bf16.h, cuda_fp16.h from the CUDA toolkit),
 * compiled for the CPU by the host C++ compiler and exposed to the C tests.
 * An independent oracle: none of fp8conv's code is involved.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

extern "C" unsigned char nv_f32_to_e4m3_satfinite(float x)
{
    return (unsigned char)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}

extern "C" float nv_e4m3_to_f32(unsigned char b)
{
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3);
    return __half2float(__half(h));
}

extern "C" unsigned short nv_f32_to_bf16_rn(float x)
{
    __nv_bfloat16_raw r = __nv_bfloat16_raw(__float2bfloat16_rn(x));
    return r.x;
}

extern "C" float nv_f16_to_f32(unsigned short bits)
{
    __half_raw h;
    h.x = bits;
    return __half2float(__half(h));
}

extern "C" unsigned short nv_f32_to_f16_rn(float x)
{
    __half_raw r = __half_raw(__float2half_rn(x));
    return r.x;
}
