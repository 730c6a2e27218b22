/*
 * quantize.cu - the quantize, amax, dequantize, packed-FP4 decode and FP4
 * quantize kernels.  Every number goes
 * through lib/common/fp8_math.h, the code the CPU reference uses, so the bytes are
 * the reference's: the scale is fp8_numerics_scale() of the group's amax
 * (fp8_scale_make() under fp8conv's own profile), each element is one IEEE
 * fp32 division, or one multiplication under a profile that multiplies
 * (nvcc's default -prec-div=true; the Makefile adds -fmad=false and no fast
 * math), and the same E4M3 rounding.
 *
 * A group (a block, a row, 32 elements) is handled by a team of threads: a
 * warp for groups up to 32 columns wide, else 128 or 256 threads.  The team
 * finds the largest magnitude as an integer maximum of the magnitude bits
 * (the IEEE order), every thread derives the same scale from it, and the team
 * quantizes the group, reading it a second time (from L2: a group is at most
 * a few hundred KiB).
 *
 * tests/kernels_emu.cpp compiles this file for the CPU, with FP8K_LAUNCH
 * running each CTA's threads as host threads, so that the kernels' indexing
 * and reductions are tested against the reference on machines without a GPU.
 */
#ifndef FP8K_LAUNCH
#include <cuda_runtime.h>
#define FP8K_LAUNCH(kernel, grid, stream, ...) kernel<<<grid, CTA, 0, stream>>>(__VA_ARGS__)
#endif

#include "fp8_kernels.h"

#define CTA 256
/* CTAs per launch (per grid dimension); the kernels' loops stride over the
 * rest.  The CPU emulation sets them small to run those loops. */
#ifndef FP8K_GROUP_CTAS
#define FP8K_GROUP_CTAS (1u << 20)
#define FP8K_AMAX_CTAS 4096u
#define FP8K_DQ_CTAS_X 1024u
#define FP8K_DQ_CTAS_Y 65535u
#endif

template <int SRC> struct src_traits;
template <> struct src_traits<FP8K_BF16> {
    typedef uint16_t bits;
    static constexpr uint32_t inf = 0x7F80, mag = 0x7FFF;
    static __device__ float f32(uint32_t b) { return fp8_bf16_to_f32((uint16_t)b); }
};
template <> struct src_traits<FP8K_F16> {
    typedef uint16_t bits;
    static constexpr uint32_t inf = 0x7C00, mag = 0x7FFF;
    static __device__ float f32(uint32_t b) { return fp8_f16_to_f32((uint16_t)b); }
};
template <> struct src_traits<FP8K_F32> {
    typedef uint32_t bits;
    static constexpr uint32_t inf = 0x7F800000, mag = 0x7FFFFFFF;
    static __device__ float f32(uint32_t b) { return fp8_f32_from_bits(b); }
};

/* The largest of the team's values; every thread of the CTA calls it.  A
 * team narrower than a warp is an aligned run of TEAM lanes, which the xor
 * shuffles below TEAM never leave. */
template <int TEAM> __device__ uint32_t team_max(uint32_t m, uint32_t *shared)
{
    for (int o = (TEAM < 32 ? TEAM : 32) / 2; o > 0; o >>= 1) {
        uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, m, o);
        m = other > m ? other : m;
    }
    if (TEAM <= 32)
        return m;
    constexpr int warps = TEAM / 32 > 0 ? TEAM / 32 : 1; /* a team's */
    int warp = threadIdx.x / 32, first = warp / warps * warps;
    if (threadIdx.x % 32 == 0)
        shared[warp] = m;
    __syncthreads();
    for (int k = 0; k < warps; k++)
        m = shared[first + k] > m ? shared[first + k] : m;
    __syncthreads(); /* before the next group writes `shared` again */
    return m;
}

/*
 * E4M3 of two fp32 values, lo in the low byte.  On sm_89 and newer the
 * hardware's cvt.rn.satfinite.e4m3x2.f32, which the GPU kit's sweep
 * (tests/gpu/check_e4m3_cvt.cu) found equal to fp8_f32_to_e4m3 on all 2^32
 * fp32 patterns on an H200 (bench/RESULTS.md); elsewhere, and in the CPU
 * emulation, the reference itself.
 */
__device__ __forceinline__ uint32_t e4m3_pair(float lo, float hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return fp8_f32_to_e4m3(lo) | (uint32_t)fp8_f32_to_e4m3(hi) << 8;
#endif
}

/* 8 elements of 2 bytes (one 16-byte load), and their 8 codes */
struct alignas(16) vec8_in {
    uint32_t w[4];
};
struct alignas(8) vec8_out {
    uint32_t w[2];
};

/* Values i..i+7 of y (16-byte aligned there) get v[0..7], OUT's bits each
 * (the low 16 for bf16 and f16): one 16-byte store, two for F32. */
template <int OUT> __device__ __forceinline__ void store8(void *y, uint64_t i, const uint32_t v[8])
{
    if (OUT == FP8K_F32) {
        ((vec8_in *)y)[i / 4] = vec8_in{ { v[0], v[1], v[2], v[3] } };
        ((vec8_in *)y)[i / 4 + 1] = vec8_in{ { v[4], v[5], v[6], v[7] } };
    } else {
        uint32_t w[4];
        for (int k = 0; k < 4; k++) /* the low 16 bits of each value */
            w[k] = (v[2 * k] & 0xFFFF) | v[2 * k + 1] << 16;
        ((vec8_in *)y)[i / 8] = vec8_in{ { w[0], w[1], w[2], w[3] } };
    }
}

struct band_args {
    fp8k_band b;
    uint64_t gcols, ngroups;
};

/*
 * VEC (2-byte sources whose rows and groups are whole multiples of 8
 * elements, src 16-byte and q 8-byte aligned): a thread takes 8 consecutive
 * elements at a time, with one 16-byte load and one 8-byte store, in the
 * same order of groups and the same arithmetic; a team's 8-element units
 * run along the group's rows.
 */
template <int SRC, int TEAM, bool VEC>
__global__ void __launch_bounds__(CTA)
    quantize_groups(band_args a, const void *__restrict__ src_, uint8_t *__restrict__ q,
                    void *__restrict__ scales, unsigned *bad)
{
    typedef src_traits<SRC> T;
    const typename T::bits *src = (const typename T::bits *)src_;
    __shared__ uint32_t shared[CTA / 32];
    const int teams = CTA / TEAM, team = threadIdx.x / TEAM, lane = threadIdx.x % TEAM;
    const fp8k_band &b = a.b;
    /* the loop runs the same number of times in every thread of the CTA, as
     * team_max's barriers need */
    for (uint64_t base = (uint64_t)blockIdx.x * teams; base < a.ngroups;
         base += (uint64_t)gridDim.x * teams) {
        uint64_t g = base + team;
        bool live = g < a.ngroups;
        uint64_t r0 = live ? g / a.gcols * b.group_rows : 0, c0 = live ? g % a.gcols * b.group_cols : 0;
        uint64_t r1 = live ? min(r0 + b.group_rows, b.rows) : 0, c1 = min(c0 + b.group_cols, b.cols);
        uint32_t m = 0;
        /* VEC: the group's 8-element units, upr a row */
        const uint32_t upr = (uint32_t)((c1 - c0) / 8), units = (uint32_t)(r1 - r0) * upr;
        if (!b.fixed && VEC)
            for (uint32_t u = lane; u < units; u += TEAM) {
                const vec8_in v = *(const vec8_in *)(src + (r0 + u / upr) * b.cols + c0 + u % upr * 8);
                for (int k = 0; k < 4; k++) {
                    uint32_t lo = v.w[k] & T::mag, hi = v.w[k] >> 16 & T::mag;
                    m = lo > m ? lo : m;
                    m = hi > m ? hi : m;
                }
            }
        else if (!b.fixed)
            for (uint64_t r = r0; r < r1; r++)
                for (uint64_t c = c0 + lane; c < c1; c += TEAM) {
                    uint32_t v = src[r * b.cols + c] & T::mag;
                    m = v > m ? v : m;
                }
        m = team_max<TEAM>(m, shared);
        if (!live)
            continue;
        if (m >= T::inf) { /* the CPU finds the first one */
            if (lane == 0)
                atomicOr(bad, FP8K_BAD_NONFINITE);
            continue;
        }
        float s = b.scale;
        if (!b.fixed) {
            uint32_t stored = 0;
            s = fp8_numerics_scale(&b.num, b.kind, T::f32(m), &stored);
            if (s == 0) {
                if (lane == 0)
                    atomicOr(bad, FP8K_BAD_SCALE);
                continue;
            }
            if (lane == 0)
                fp8_scale_store(scales, fp8_scale_size(b.kind), g, stored);
        }
        /* the profile's element operation: x / s, or x * s (fp8_numerics_mul);
         * fp8_numerics_value where its quotient is rounded to the scale's dtype */
        const bool mul = fp8_numerics_mul(&b.num), in_kind = b.num.in_kind != 0;
        bool nonfinite = false; /* only a fixed scale skipped the amax */
        if (VEC)
            for (uint32_t u = lane; u < units; u += TEAM) {
                uint64_t at = (r0 + u / upr) * b.cols + c0 + u % upr * 8;
                const vec8_in v = *(const vec8_in *)(src + at);
                vec8_out o;
                for (int k = 0; k < 4; k++) {
                    uint32_t lo = v.w[k] & 0xFFFF, hi = v.w[k] >> 16;
                    nonfinite |= (lo & T::mag) >= T::inf || (hi & T::mag) >= T::inf;
                    uint32_t pair =
                        in_kind ? e4m3_pair(fp8_numerics_value(&b.num, b.kind, T::f32(lo), s),
                                            fp8_numerics_value(&b.num, b.kind, T::f32(hi), s))
                        : mul   ? e4m3_pair(T::f32(lo) * s, T::f32(hi) * s)
                                : e4m3_pair(T::f32(lo) / s, T::f32(hi) / s);
                    o.w[k / 2] = k % 2 ? o.w[k / 2] | pair << 16 : pair;
                }
                *(vec8_out *)(q + at) = o;
            }
        else
            for (uint64_t r = r0; r < r1; r++)
                for (uint64_t c = c0 + lane; c < c1; c += TEAM) {
                    uint32_t v = src[r * b.cols + c];
                    nonfinite |= (v & T::mag) >= T::inf;
                    q[r * b.cols + c] = (uint8_t)e4m3_pair(
                        fp8_numerics_value(&b.num, b.kind, T::f32(v), s), 0.0f);
                }
        if (nonfinite)
            atomicOr(bad, FP8K_BAD_NONFINITE);
    }
}

static int launch_error(cudaError_t err)
{
    if (err != cudaSuccess)
        (void)cudaGetLastError();
    return (int)err;
}

template <int SRC, int TEAM, bool VEC>
static int launch_groups(const band_args &a, const void *src, uint8_t *q, void *scales,
                         unsigned *bad, cudaStream_t stream)
{
    uint64_t ctas = fp8_ceil_div(a.ngroups, CTA / TEAM);
    unsigned grid = (unsigned)(ctas < FP8K_GROUP_CTAS ? ctas : FP8K_GROUP_CTAS);
    FP8K_LAUNCH((quantize_groups<SRC, TEAM, VEC>), grid, stream, a, src, q, scales, bad);
    return launch_error(cudaGetLastError());
}

/* A team a group: for VEC, as many threads as the group has 8-element
 * units (4 for MX groups of 32, a warp up to 256 elements, else 256);
 * otherwise a thread a column, up to 256. */
template <int SRC>
static int launch_src(const band_args &a, const void *src, uint8_t *q, void *scales,
                      unsigned *bad, cudaStream_t stream)
{
    uint64_t w = a.b.group_cols, units = a.b.group_rows * w / 8;
    if (SRC != FP8K_F32 && a.b.cols % 8 == 0 && w % 8 == 0 && (uintptr_t)src % 16 == 0 &&
        (uintptr_t)q % 8 == 0) {
        if (units <= 4)
            return launch_groups<SRC, 4, true>(a, src, q, scales, bad, stream);
        if (units <= 32)
            return launch_groups<SRC, 32, true>(a, src, q, scales, bad, stream);
        return launch_groups<SRC, 256, true>(a, src, q, scales, bad, stream);
    }
    if (w <= 32)
        return launch_groups<SRC, 32, false>(a, src, q, scales, bad, stream);
    if (w <= 128)
        return launch_groups<SRC, 128, false>(a, src, q, scales, bad, stream);
    return launch_groups<SRC, 256, false>(a, src, q, scales, bad, stream);
}

extern "C" int fp8k_launch_quantize(const fp8k_band *b, const void *src, uint8_t *q,
                                    void *scales, unsigned *bad, void *stream)
{
    band_args a = { *b, 0, 0 };
    if (b->rows == 0 || b->cols == 0)
        return 0;
    if (b->fixed) { /* groups of one row: the same bytes, more parallel work */
        a.b.group_rows = 1;
        a.b.group_cols = b->cols;
    }
    a.gcols = fp8_ceil_div(a.b.cols, a.b.group_cols);
    a.ngroups = fp8_ceil_div(a.b.rows, a.b.group_rows) * a.gcols;
    cudaStream_t st = (cudaStream_t)stream;
    switch (b->src) {
    case FP8K_BF16: return launch_src<FP8K_BF16>(a, src, q, scales, bad, st);
    case FP8K_F16: return launch_src<FP8K_F16>(a, src, q, scales, bad, st);
    case FP8K_F32: return launch_src<FP8K_F32>(a, src, q, scales, bad, st);
    }
    return (int)cudaErrorInvalidValue;
}

/* ---------------------------------------------------------------- amax */

/* VEC (a 2-byte source, 16-byte aligned): 8 elements a 16-byte load, the
 * last n % 8 one by one */
template <int SRC, bool VEC>
__global__ void __launch_bounds__(CTA) amax_kernel(const void *__restrict__ x_, uint64_t n,
                                                   unsigned *amax_bits)
{
    typedef src_traits<SRC> T;
    const typename T::bits *x = (const typename T::bits *)x_;
    __shared__ uint32_t shared[CTA / 32];
    uint32_t m = 0;
    const uint64_t first = (uint64_t)blockIdx.x * CTA + threadIdx.x, stride = (uint64_t)gridDim.x * CTA;
    const uint64_t vecs = n / 8;
    for (uint64_t i = first; VEC && i < vecs; i += stride) {
        const vec8_in v = ((const vec8_in *)x)[i];
        for (int k = 0; k < 4; k++) {
            uint32_t lo = v.w[k] & T::mag, hi = v.w[k] >> 16 & T::mag;
            m = lo > m ? lo : m;
            m = hi > m ? hi : m;
        }
    }
    for (uint64_t i = (VEC ? vecs * 8 : 0) + first; i < n; i += stride) {
        uint32_t v = x[i] & T::mag;
        m = v > m ? v : m;
    }
    m = team_max<CTA>(m, shared);
    if (threadIdx.x == 0)
        atomicMax(amax_bits, m);
}

extern "C" int fp8k_launch_amax(fp8k_type src, const void *x, uint64_t n, unsigned *amax_bits,
                                void *stream)
{
    if (n == 0)
        return 0;
    uint64_t ctas = fp8_ceil_div(n, CTA * 8);
    unsigned grid = (unsigned)(ctas < FP8K_AMAX_CTAS ? ctas : FP8K_AMAX_CTAS);
    cudaStream_t st = (cudaStream_t)stream;
    const bool vec = (uintptr_t)x % 16 == 0;
    switch (src) {
#define FP8K_AMAX(SRC)                                                        \
    (vec ? FP8K_LAUNCH((amax_kernel<SRC, true>), grid, st, x, n, amax_bits)   \
         : FP8K_LAUNCH((amax_kernel<SRC, false>), grid, st, x, n, amax_bits))
    case FP8K_BF16: FP8K_AMAX(FP8K_BF16); break;
    case FP8K_F16: FP8K_AMAX(FP8K_F16); break;
    case FP8K_F32: FP8K_LAUNCH((amax_kernel<FP8K_F32, false>), grid, st, x, n, amax_bits); break;
    default: return (int)cudaErrorInvalidValue;
    }
#undef FP8K_AMAX
    return launch_error(cudaGetLastError());
}

/* ---------------------------------------------------------------- dequantize */

/* One code under its scale, as fp8_dequant_row_ref: the output's bits, and
 * FP8K_BAD_* for a NaN code or a value OUT cannot hold (an infinite bf16 is
 * flagged). */
template <int OUT> __device__ __forceinline__ uint32_t dequant_one(uint8_t code, float s, unsigned &flags)
{
    flags |= (code & 0x7F) == 0x7F ? FP8K_BAD_NAN_CODE : 0;
    float v = fp8_e4m3_to_f32(code) * s;
    uint32_t u = fp8_f32_bits(v);
    if (OUT == FP8K_F32) {
        flags |= (u & 0x7F800000) == 0x7F800000 ? FP8K_BAD_OVERFLOW : 0;
        return u;
    }
    if (OUT == FP8K_BF16) {
        uint16_t h = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
        flags |= (h & 0x7F80) == 0x7F80 ? FP8K_BAD_OVERFLOW : 0;
        return h;
    }
    uint16_t h = fp8_f32_to_f16(v);
    flags |= (h & 0x7C00) == 0x7C00 ? FP8K_BAD_OVERFLOW : 0;
    return h;
}

/* VEC (cols and group_cols multiples of 8, q 8-byte and y 16-byte aligned):
 * a thread takes 8 codes of one group at a time, one 8-byte load and one
 * 16-byte store (two for F32). */
template <int OUT, bool VEC>
__global__ void __launch_bounds__(CTA)
    dequant_kernel(fp8k_dequant d, uint64_t gcols, const uint8_t *__restrict__ q,
                   const float *__restrict__ scales, void *__restrict__ y, unsigned *bad)
{
    unsigned flags = 0;
    const bool narrow = d.cols <= 0xFFFFFFFFu;
    const uint64_t step = VEC ? 8 : 1;
    for (uint64_t row = blockIdx.y; row < d.rows; row += gridDim.y) {
        const float *sr = scales + ((d.row0 + row) / d.group_rows - d.row0 / d.group_rows) * gcols;
        for (uint64_t c = ((uint64_t)blockIdx.x * CTA + threadIdx.x) * step; c < d.cols;
             c += (uint64_t)gridDim.x * CTA * step) {
            uint64_t i = row * d.cols + c;
            /* 32-bit division where it suffices: 64-bit division is slow on a GPU */
            uint64_t k = narrow ? (uint32_t)c / (uint32_t)d.group_cols : c / d.group_cols;
            if (!VEC) {
                uint32_t h = dequant_one<OUT>(q[i], sr[k], flags);
                if (OUT == FP8K_F32)
                    ((uint32_t *)y)[i] = h;
                else
                    ((uint16_t *)y)[i] = (uint16_t)h;
                continue;
            }
            const float s = sr[k];
            const vec8_out codes = *(const vec8_out *)(q + i);
            uint32_t o[8];
            for (int e = 0; e < 8; e++)
                o[e] = dequant_one<OUT>((uint8_t)(codes.w[e / 4] >> e % 4 * 8), s, flags);
            store8<OUT>(y, i, o);
        }
    }
    if (flags)
        atomicOr(bad, flags);
}

extern "C" int fp8k_launch_dequantize(const fp8k_dequant *d, const uint8_t *q,
                                      const float *scales, void *y, unsigned *bad, void *stream)
{
    if (d->rows == 0 || d->cols == 0)
        return 0;
    const bool vec = d->cols % 8 == 0 && d->group_cols % 8 == 0 && (uintptr_t)q % 8 == 0 &&
                     (uintptr_t)y % 16 == 0;
    uint64_t gx = fp8_ceil_div(d->cols, CTA * (vec ? 8 : 1)), gcols = fp8_ceil_div(d->cols, d->group_cols);
    dim3 grid((unsigned)(gx < FP8K_DQ_CTAS_X ? gx : FP8K_DQ_CTAS_X),
              (unsigned)(d->rows < FP8K_DQ_CTAS_Y ? d->rows : FP8K_DQ_CTAS_Y));
    cudaStream_t st = (cudaStream_t)stream;
#define FP8K_DQ(OUT)                                                                             \
    (vec ? FP8K_LAUNCH((dequant_kernel<OUT, true>), grid, st, *d, gcols, q, scales, y, bad)      \
         : FP8K_LAUNCH((dequant_kernel<OUT, false>), grid, st, *d, gcols, q, scales, y, bad))
    switch (d->out) {
    case FP8K_BF16: FP8K_DQ(FP8K_BF16); break;
    case FP8K_F16: FP8K_DQ(FP8K_F16); break;
    case FP8K_F32: FP8K_DQ(FP8K_F32); break;
    default: return (int)cudaErrorInvalidValue;
    }
#undef FP8K_DQ
    return launch_error(cudaGetLastError());
}

/* ---------------------------------------------------------------- packed FP4 */

/* A thread a byte of codes: its two values looked up in the host's table
 * (fp8k_fp4), so they are the reference's bits by construction.  VEC (not
 * transposed, cols, width and group multiples of 8, q 4-byte and y 16-byte
 * aligned): 4 bytes of codes at a time, 8 values of one group, with one
 * 4-byte load and one 16-byte store (two for F32). */
template <int OUT, bool VEC>
__global__ void __launch_bounds__(CTA)
    fp4_kernel(fp8k_fp4 d, const uint8_t *__restrict__ q, const uint8_t *__restrict__ scales,
               const uint8_t *__restrict__ table, void *__restrict__ y, unsigned *bad)
{
    const uint32_t *value = (const uint32_t *)table;
    const uint8_t *clean = table + 256 * 16 * 4;
    unsigned flags = 0;
    const uint64_t step = VEC ? 4 : 1; /* bytes of codes a thread takes at a time */
    uint64_t half = d.width / 2, per_row = d.cols / d.group;
    for (uint64_t row = blockIdx.y; row < d.rows; row += gridDim.y) {
        const uint8_t *qr = q + row * (d.cols / 2) + d.c0 / 2;
        const uint8_t *sr = scales + row * per_row + d.c0 / d.group;
        for (uint64_t k = ((uint64_t)blockIdx.x * CTA + threadIdx.x) * step; k < half;
             k += (uint64_t)gridDim.x * CTA * step) {
            unsigned sb = sr[2 * k / d.group]; /* group even: 2k, 2k + 1 share it */
            flags |= clean[sb] ? 0 : FP8K_BAD_FP4;
            const uint32_t *vs = value + sb * 16;
            if (VEC) {
                uint32_t b4 = *(const uint32_t *)(qr + k), o[8];
                for (int e = 0; e < 8; e++)
                    o[e] = vs[b4 >> 4 * e & 15];
                store8<OUT>(y, row * d.width + 2 * k, o);
                continue;
            }
            unsigned b = qr[k];
            uint32_t lo = vs[b & 15], hi = vs[b >> 4];
            uint64_t i0 = d.transpose ? 2 * k * d.rows + row : row * d.width + 2 * k;
            uint64_t i1 = d.transpose ? i0 + d.rows : i0 + 1;
            if (OUT == FP8K_F32) {
                ((uint32_t *)y)[i0] = lo;
                ((uint32_t *)y)[i1] = hi;
            } else {
                ((uint16_t *)y)[i0] = (uint16_t)lo;
                ((uint16_t *)y)[i1] = (uint16_t)hi;
            }
        }
    }
    if (flags)
        atomicOr(bad, flags);
}

extern "C" int fp8k_launch_fp4(const fp8k_fp4 *d, const uint8_t *q, const uint8_t *scales,
                               const uint8_t *table, void *y, unsigned *bad, void *stream)
{
    if (d->rows == 0 || d->width == 0)
        return 0;
    if (d->group % 2 || d->width % d->group || d->c0 % d->group || d->c0 + d->width > d->cols)
        return (int)cudaErrorInvalidValue;
    const bool vec = !d->transpose && d->cols % 8 == 0 && d->width % 8 == 0 && d->group % 8 == 0 &&
                     (uintptr_t)q % 4 == 0 && (uintptr_t)y % 16 == 0;
    uint64_t gx = fp8_ceil_div(d->width / 2, CTA * (vec ? 4 : 1));
    dim3 grid((unsigned)(gx < FP8K_DQ_CTAS_X ? gx : FP8K_DQ_CTAS_X),
              (unsigned)(d->rows < FP8K_DQ_CTAS_Y ? d->rows : FP8K_DQ_CTAS_Y));
    cudaStream_t st = (cudaStream_t)stream;
#define FP8K_FP4(OUT)                                                                         \
    (vec ? FP8K_LAUNCH((fp4_kernel<OUT, true>), grid, st, *d, q, scales, table, y, bad)       \
         : FP8K_LAUNCH((fp4_kernel<OUT, false>), grid, st, *d, q, scales, table, y, bad))
    if (d->out == FP8K_F32)
        FP8K_FP4(FP8K_F32);
    else
        FP8K_FP4(FP8K_BF16);
#undef FP8K_FP4
    return launch_error(cudaGetLastError());
}

/* ---------------------------------------------------------------- FP4 quantize */

/* A thread a group (fp8k_fp4q): its largest magnitude as the integer
 * maximum of the magnitude bits, its scale and each element's code by
 * lib/common/fp4_math.h, the rules fp4_quantize_row calls.  G (0: d.group):
 * a BF16 group of G = 16 or 32 elements read with G / 8 16-byte loads into
 * registers and its G / 2 bytes written with G / 16 8-byte stores (src
 * 16-byte and packed 8-byte aligned). */
template <int SRC, int NV, int G>
__global__ void __launch_bounds__(CTA)
    fp4q_kernel(fp8k_fp4q d, const void *__restrict__ src_, uint8_t *__restrict__ packed,
                uint8_t *__restrict__ scales, unsigned *bad)
{
    typedef src_traits<SRC> T;
    const typename T::bits *src = (const typename T::bits *)src_;
    const int bf16 = SRC == FP8K_BF16;
    const uint64_t group = G ? G : d.group;
    unsigned flags = 0;
    uint64_t groups = d.n / group;
    for (uint64_t g = (uint64_t)blockIdx.x * CTA + threadIdx.x; g < groups;
         g += (uint64_t)gridDim.x * CTA) {
        const typename T::bits *x = src + g * group;
        uint32_t w[G ? G / 2 : 1]; /* G: the group, two elements a word */
        for (int j = 0; j < G / 8; j++) {
            const vec8_in v = ((const vec8_in *)x)[j];
            for (int k = 0; k < 4; k++)
                w[4 * j + k] = v.w[k];
        }
        auto at = [&](uint64_t k) -> uint32_t { return G ? w[k / 2] >> k % 2 * 16 & 0xFFFF : x[k]; };
        uint32_t m = 0;
        for (uint64_t k = 0; k < group; k++) {
            uint32_t v = at(k) & T::mag;
            m = v > m ? v : m;
        }
        if (m >= T::inf) { /* the CPU finds the first one */
            flags |= FP8K_BAD_NONFINITE;
            continue;
        }
        float dv;
        if (NV) {
            scales[g] = fp4_nv_scale(bf16, T::f32(m), d.global, &dv);
        } else {
            int b = fp4_mx_scale(bf16, T::f32(m), &dv);
            if (b > 255) {
                flags |= FP8K_BAD_SCALE;
                continue;
            }
            scales[g] = (uint8_t)b;
        }
        bool tiny = false;
        uint8_t *p = packed + g * group / 2;
        uint32_t out[G ? G / 8 : 1] = { 0 }; /* G: the packed bytes, four a word */
        for (uint64_t k = 0; k < group; k += 2) {
            uint32_t b0 = at(k), b1 = at(k + 1);
            float v0 = fp4_quotient(NV, bf16, T::f32(b0), dv);
            float v1 = fp4_quotient(NV, bf16, T::f32(b1), dv);
            if (!NV && bf16) /* the CPU's tiny quotients, and a few more */
                tiny = tiny || ((b0 & T::mag) && (fp8_f32_bits(v0) & 0x7FFFFFFF) <= 0x00800000) ||
                       ((b1 & T::mag) && (fp8_f32_bits(v1) & 0x7FFFFFFF) <= 0x00800000);
            uint32_t byte = fp4_e2m1_code(v0) | fp4_e2m1_code(v1) << 4;
            if (G)
                out[k / 8] |= byte << (k / 2 % 4 * 8);
            else
                p[k / 2] = (uint8_t)byte;
        }
        for (int j = 0; j < G / 16; j++)
            ((vec8_out *)p)[j] = vec8_out{ { out[2 * j], out[2 * j + 1] } };
        if (tiny)
            flags |= FP8K_BAD_TINY;
    }
    if (flags)
        atomicOr(bad, flags);
}

template <int SRC, int NV, int G>
static int launch_fp4q(const fp8k_fp4q *d, const void *src, uint8_t *packed, uint8_t *scales,
                       unsigned *bad, cudaStream_t stream)
{
    uint64_t ctas = fp8_ceil_div(d->n / d->group, CTA);
    unsigned grid = (unsigned)(ctas < FP8K_GROUP_CTAS ? ctas : FP8K_GROUP_CTAS);
    FP8K_LAUNCH((fp4q_kernel<SRC, NV, G>), grid, stream, *d, src, packed, scales, bad);
    return launch_error(cudaGetLastError());
}

extern "C" int fp8k_launch_fp4q(const fp8k_fp4q *d, const void *src, uint8_t *packed,
                                uint8_t *scales, unsigned *bad, void *stream)
{
    if (d->n == 0)
        return 0;
    if (d->group == 0 || d->group % 2 || d->n % d->group)
        return (int)cudaErrorInvalidValue;
    cudaStream_t st = (cudaStream_t)stream;
    bool vec = (uintptr_t)src % 16 == 0 && (uintptr_t)packed % 8 == 0;
    if (d->src == FP8K_BF16 && vec && d->nvfp4 && d->group == 16)
        return launch_fp4q<FP8K_BF16, 1, 16>(d, src, packed, scales, bad, st);
    if (d->src == FP8K_BF16 && vec && !d->nvfp4 && d->group == 32)
        return launch_fp4q<FP8K_BF16, 0, 32>(d, src, packed, scales, bad, st);
    if (d->src == FP8K_BF16)
        return d->nvfp4 ? launch_fp4q<FP8K_BF16, 1, 0>(d, src, packed, scales, bad, st)
                        : launch_fp4q<FP8K_BF16, 0, 0>(d, src, packed, scales, bad, st);
    if (d->src == FP8K_F32)
        return d->nvfp4 ? launch_fp4q<FP8K_F32, 1, 0>(d, src, packed, scales, bad, st)
                        : launch_fp4q<FP8K_F32, 0, 0>(d, src, packed, scales, bad, st);
    return (int)cudaErrorInvalidValue;
}
