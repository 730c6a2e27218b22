/*
 * types.c - the rows every command reads (types.h): the element types and
 * the schemes, with the schemes' names, and safetensors' dtypes.
 */
#include "common/types.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/fp8_math.h"

static bool e4m3_nan(uint8_t b) { return (b & 0x7F) == 0x7F; }
static float e4m3_decode(uint8_t b) { return fp8_e4m3_to_f32(b); }

static bool e5m2_nan(uint8_t b) { return (b & 0x7F) > 0x7C; }
static float e5m2_decode(uint8_t b) { return fp8_f16_to_f32((uint16_t)(b << 8)); }

/* the low nibble: sign, 2 exponent bits (bias 1), 1 mantissa bit */
static float e2m1_decode(uint8_t b)
{
    static const float v[8] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6 };
    return b & 8 ? -v[b & 7] : v[b & 7];
}

static bool e8m0_nan(uint8_t b) { return b == 0xFF; }
static float e8m0_decode(uint8_t b)
{
    return b == 0xFF ? fp8_f32_from_bits(0x7FC00000) : fp8_pow2((int)b - 127);
}

/* compressed-tensors pack_to_int32 stores q + 8 (helpers.py: "Convert to
 * unsigned range for packing"); unpack_from_int32 subtracts it back */
static float i4_decode(uint8_t b) { return (float)((int)(b & 15) - 8); }

const fp8_elem_traits fp8_elem_table[FP8_ELEM_COUNT] = {
    [FP8_ELEM_E4M3] = { "e4m3", 8, 1, 448.0f, e4m3_decode, e4m3_nan,
                        .dtype = FP8_DTYPE_F8_E4M3, .deq_product = "q * scale" },
    [FP8_ELEM_E5M2] = { "e5m2", 8, 1, 57344.0f, e5m2_decode, e5m2_nan,
                        .dtype = FP8_DTYPE_F8_E5M2 },
    [FP8_ELEM_E2M1] = { "e2m1", 4, 2, 6.0f, e2m1_decode, NULL, .dtype = FP8_DTYPE_F4,
                        .deq_product = "e2m1 * scales" },
    [FP8_ELEM_E8M0] = { "e8m0", 8, 1, 1.7014118346046923e38f, e8m0_decode, e8m0_nan,
                        .dtype = FP8_DTYPE_F8_E8M0 },
    [FP8_ELEM_F32] = { "f32", 32, 0, 3.4028234663852886e38f, NULL, NULL,
                       .dtype = FP8_DTYPE_F32 },
    [FP8_ELEM_I4] = { "int4", 4, 2, 7.0f, i4_decode, NULL, .dtype = FP8_DTYPE_I32,
                      .deq_product = "q * scale", .most_negative = -8.0f },
};

bool fp8_elem_scale_ok(const fp8_elem_traits *e, uint8_t b)
{
    float v = e->decode(b);
    return v == v && !signbit(v);
}

uint8_t fp8_elem_largest_code(const fp8_elem_traits *e)
{
    uint8_t most = 0;
    for (unsigned c = 0; c < 1u << e->bits; c++) {
        float a = fabsf(e->decode((uint8_t)c));
        most = a == a && a > fabsf(e->decode(most)) ? (uint8_t)c : most;
    }
    return most;
}

bool fp8_elem_shift_e4m3(const fp8_elem_traits *e, uint8_t c, int k, uint8_t *q)
{
    float v = e->decode(c);
    if (v == 0) {
        *q = signbit(v) ? 0x80 : 0x00;
        return true;
    }
    if (isnan(v) || k < -24) /* below 2^-24 * 2^-9... : far under E4M3's 2^-9 */
        return false;
    float x = v * fp8_pow2(k); /* exact: a few significant bits, exponent >= -33 */
    *q = fp8_f32_to_e4m3(x);
    return fp8_e4m3_to_f32(*q) == x;
}

void fp8_elem_shift_rows(const fp8_elem_traits *e, int k0, int rows, unsigned codes, uint8_t *t)
{
    for (int k = k0; k < k0 + rows; k++)
        for (unsigned c = 0; c < codes; c++, t++)
            if (!fp8_elem_shift_e4m3(e, (uint8_t)c, k, t))
                *t = FP8_NO_SHIFT;
}

/* Packed sizes: a group's codes fill whole bytes (E2M1, two a byte) and an
 * INT4 group whole I32 words (eight a word), so no byte or word holds two
 * groups' codes (the packed readers and the kernels count on it). */
enum { NVFP4_RUN = 16, INT4_RUN = 128, INT4_RUN_ALT = 32 };
_Static_assert(NVFP4_RUN % 2 == 0 && FP8_MX_GROUP % 2 == 0, "E2M1 groups fill whole bytes");
_Static_assert(INT4_RUN % 8 == 0 && INT4_RUN_ALT % 8 == 0, "INT4 groups fill whole I32 words");

/* In fp8_scheme's order; fp8_scheme_names is the one list of their names. */
const fp8_scheme_traits fp8_scheme_table[] = {
    [FP8_SCHEME_BLOCK] = { .elem = FP8_ELEM_E4M3, .group = FP8_GROUP_TILE, .levels = 1,
                           .scale_elem = { FP8_ELEM_F32 } },
    [FP8_SCHEME_CHANNEL] = { .elem = FP8_ELEM_E4M3, .group = FP8_GROUP_ROW, .levels = 1,
                             .scale_elem = { FP8_ELEM_F32 } },
    [FP8_SCHEME_TENSOR] = { .elem = FP8_ELEM_E4M3, .group = FP8_GROUP_MATRIX, .levels = 1,
                            .scale_elem = { FP8_ELEM_F32 }, .fixed = true },
    [FP8_SCHEME_MXFP8] = { .elem = FP8_ELEM_E4M3, .group = FP8_GROUP_RUN, .run = FP8_MX_GROUP,
                           .levels = 1, .scale_elem = { FP8_ELEM_E8M0 }, .pow2_scales = true },
    /* NVFP4 as ModelOpt and compressed-tensors write it; its second level
     * comes from the matrix's amax, a pass over it first */
    [FP8_SCHEME_NVFP4] = { .elem = FP8_ELEM_E2M1, .group = FP8_GROUP_RUN, .run = NVFP4_RUN,
                           .levels = 2, .scale_elem = { FP8_ELEM_E4M3, FP8_ELEM_F32 } },
    /* MXFP4 as the OCP MX spec has it */
    [FP8_SCHEME_MXFP4] = { .elem = FP8_ELEM_E2M1, .group = FP8_GROUP_RUN, .run = FP8_MX_GROUP,
                           .levels = 1, .scale_elem = { FP8_ELEM_E8M0 }, .pow2_scales = true },
    /* INT4 weight-only as compressed-tensors packs it and llm-compressor's
     * W4A16 preset writes it: symmetric, a scale in the weight's dtype per
     * 128 (or --group 32) elements of a row (int4_ref.h) */
    [FP8_SCHEME_INT4] = { .elem = FP8_ELEM_I4, .group = FP8_GROUP_RUN, .run = INT4_RUN,
                          .levels = 1, .scale_elem = { FP8_ELEM_F32 }, .run_alt = INT4_RUN_ALT },
};

const char *const fp8_scheme_names[] = { "block", "channel", "tensor", "mxfp8", "nvfp4",
                                         "mxfp4", "int4", NULL };

#define NSCHEMES (sizeof fp8_scheme_table / sizeof *fp8_scheme_table)
_Static_assert(NSCHEMES == FP8_SCHEME_INT4 + 1 &&
                   sizeof fp8_scheme_names / sizeof *fp8_scheme_names == NSCHEMES + 1,
               "a row and a name per scheme");

const fp8_scheme_traits *fp8_scheme_get(fp8_scheme s)
{
    return (unsigned)s < NSCHEMES ? &fp8_scheme_table[s] : NULL;
}

unsigned fp8_scheme_options(fp8_scheme s)
{
    const fp8_scheme_traits *t = fp8_scheme_get(s);
    if (!t)
        return 0;
    return (t->group == FP8_GROUP_TILE ? FP8_SCHEME_TAKES_BLOCK | FP8_SCHEME_TAKES_SCALE_FMT : 0) |
           /* FP4's E8M0 scales follow its reference's one rounding */
           (t->pow2_scales && t->elem != FP8_ELEM_E2M1 ? FP8_SCHEME_TAKES_MX_ROUNDING : 0) |
           (t->run_alt ? FP8_SCHEME_TAKES_GROUP : 0);
}

const char *fp8_scheme_name(fp8_scheme s)
{
    return (unsigned)s < NSCHEMES ? fp8_scheme_names[s] : "?";
}


void fp8_scheme_geometry(fp8_scheme s, uint32_t block_rows, uint32_t block_cols, uint64_t rows,
                         uint64_t cols, fp8_geometry *g)
{
    const fp8_scheme_traits *t = fp8_scheme_get(s);
    /* an empty dimension still has one group, so that indices stay defined */
    uint64_t n = cols ? cols : 1;
    switch (t ? t->group : FP8_GROUP_MATRIX) {
    case FP8_GROUP_TILE:
        *g = (fp8_geometry){ block_rows, block_cols, fp8_ceil_div(rows, block_rows),
                             fp8_ceil_div(cols, block_cols) };
        break;
    case FP8_GROUP_ROW: *g = (fp8_geometry){ 1, n, rows, 1 }; break;
    case FP8_GROUP_RUN: /* N is a multiple of the run where it matters; else as N / run */
        *g = (fp8_geometry){ 1, fp8_scheme_run(t, block_cols), rows,
                             cols / fp8_scheme_run(t, block_cols) };
        break;
    case FP8_GROUP_MATRIX: /* every row: rows of any matrix of the tensor map to it */
        *g = (fp8_geometry){ UINT64_MAX, n, 1, 1 };
        break;
    }
}

/* ------------------------------------------------------------------ dtypes
 * safetensors' dtypes: their names and widths (the public fp8_dtype). */

static const struct {
    const char *name;
    unsigned bits;
    bool float8; /* an 8-bit float: a quantized checkpoint's codes or scales */
    uint64_t inf; /* a weight dtype's infinity: magnitude bits at or above it are not finite */
} dtype_table[FP8_DTYPE_COUNT] = {
    [FP8_DTYPE_BOOL] = { "BOOL", 8 },
    [FP8_DTYPE_F4] = { "F4", 4 },
    [FP8_DTYPE_F6_E2M3] = { "F6_E2M3", 6 },
    [FP8_DTYPE_F6_E3M2] = { "F6_E3M2", 6 },
    [FP8_DTYPE_U8] = { "U8", 8 },
    [FP8_DTYPE_I8] = { "I8", 8 },
    [FP8_DTYPE_F8_E5M2] = { "F8_E5M2", 8, true },
    [FP8_DTYPE_F8_E4M3] = { "F8_E4M3", 8, true },
    [FP8_DTYPE_F8_E8M0] = { "F8_E8M0", 8, true },
    [FP8_DTYPE_F8_E4M3FNUZ] = { "F8_E4M3FNUZ", 8, true },
    [FP8_DTYPE_F8_E5M2FNUZ] = { "F8_E5M2FNUZ", 8, true },
    [FP8_DTYPE_I16] = { "I16", 16 },
    [FP8_DTYPE_U16] = { "U16", 16 },
    [FP8_DTYPE_F16] = { "F16", 16, .inf = 0x7C00 },
    [FP8_DTYPE_BF16] = { "BF16", 16, .inf = 0x7F80 },
    [FP8_DTYPE_I32] = { "I32", 32 },
    [FP8_DTYPE_U32] = { "U32", 32 },
    [FP8_DTYPE_F32] = { "F32", 32, .inf = 0x7F800000 },
    [FP8_DTYPE_C64] = { "C64", 64 },
    [FP8_DTYPE_F64] = { "F64", 64, .inf = 0x7FF0000000000000 },
    [FP8_DTYPE_I64] = { "I64", 64 },
    [FP8_DTYPE_U64] = { "U64", 64 },
};

const char *fp8_dtype_name(fp8_dtype dtype)
{
    return (unsigned)dtype < FP8_DTYPE_COUNT ? dtype_table[dtype].name : NULL;
}

bool fp8_dtype_from_name(const char *name, fp8_dtype *dtype)
{
    for (int i = 0; i < FP8_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_table[i].name) == 0) {
            *dtype = (fp8_dtype)i;
            return true;
        }
    }
    return false;
}

bool fp8_dtype_holds_codes(fp8_dtype d)
{
    for (unsigned s = 0; s < NSCHEMES; s++) {
        const fp8_elem_traits *e = fp8_elem_get(fp8_scheme_table[s].elem);
        if (e->per_byte == 1 && e->dtype == d)
            return true;
    }
    return false;
}

uint64_t fp8_dtype_inf_bits(fp8_dtype d) { return dtype_table[d].inf; }

bool fp8_dtype_is_float(fp8_dtype d)
{
    return d == FP8_DTYPE_BF16 || d == FP8_DTYPE_F16 || d == FP8_DTYPE_F32;
}

bool fp8_dtype_holds_pow2_scales(fp8_dtype d)
{
    return d == FP8_DTYPE_U8 || d == fp8_elem_table[FP8_ELEM_E8M0].dtype;
}

bool fp8_dtype_is_float8(fp8_dtype dtype)
{
    return (unsigned)dtype < FP8_DTYPE_COUNT && dtype_table[dtype].float8;
}

unsigned fp8_dtype_bits(fp8_dtype dtype)
{
    return (unsigned)dtype < FP8_DTYPE_COUNT ? dtype_table[dtype].bits : 0;
}

/* ------------------------------------------------------------------ profiles
 * Each row transcribes an engine's own code, read from its source (cited
 * file, function and the version read), with GPU semantics: on a CUDA
 * tensor torch computes `t / c` (a Python number c) as t * fl(1/c), and
 * `c / t` as fl(1/t) * c (Tensor.__rdiv__: reciprocal, then multiply);
 * tensor / tensor and the CUDA C++ kernels' `/` (no fast math) are IEEE
 * divisions.  Triton's fp32 `/` is approximate on GPUs (div.full.f32): the
 * Triton rows transcribe it as the IEEE division, which a GPU check (not
 * run here) must confirm.  A row without schemes is not established from
 * source yet (fp8conv-formats(5), PROFILES, says what is missing). */
#define SCHEME_BIT(s) (1u << FP8_SCHEME_##s)
static const fp8_profile_traits profile_table[FP8_PROFILE_COUNT] = {
    [FP8_PROFILE_FP8CONV] = { .schemes = ~0u }, /* s = amax / 448, x / s: every scheme */
    /* vllm-project/vllm vllm/utils/deep_gemm.py per_block_cast_to_fp8 (779d1fc, taken from
     * DeepGEMM dd6ed14 deep_gemm/utils/math.py), use_ue8m0 off: amax.clamp(1e-4);
     * sf = amax / 448.0; (x * (1.0 / sf)).to(e4m3), as eager torch on CUDA computes it;
     * vLLM wraps it in torch.compile (Inductor's Triton division: not read, a GPU check).
     * tensor: csrc/quantization/w8a8/fp8/common.cu (096d3dc) dynamic_scaled_fp8_quant, the
     * online per-tensor weight quantization (ops.scaled_fp8_quant, scale None):
     * segmented_max_reduction_strided s = amax / 448, no floor (all zero: the engine's s is
     * 0 and its codes 0x7E, fp8conv's s is 1); scaled_fp8_quant_kernel_strided_dynamic
     * x * (1.0f / s).  channel: dynamic_per_token_scaled_fp8_quant_kernel_strided (same
     * file): s = fmaxf(amax / 448, min_scaling_factor 1.0f / (448 * 512.0f)); x / s (the
     * older csrc/quantization/fp8/common.cu, 006ccf0, multiplied by 1.0f / s) */
    [FP8_PROFILE_VLLM] = {
        .num = { FP8_RULE_MUL_RECIP, 1, 1e-4f, 0 },
        .schemes = SCHEME_BIT(BLOCK) | SCHEME_BIT(CHANNEL) | SCHEME_BIT(TENSOR),
        .own = SCHEME_BIT(CHANNEL) | SCHEME_BIT(TENSOR),
        .by_scheme = { [FP8_SCHEME_CHANNEL] = { FP8_RULE_DIV, 0, 0, 1.0f / (448.0f * 512.0f) },
                       [FP8_SCHEME_TENSOR] = { FP8_RULE_DIV, 1, 0, 0 } },
    },
    /* deepseek-ai/DeepGEMM deep_gemm/utils/math.py per_block_cast_to_fp8 with use_ue8m0
     * (38939a4): amax.clamp(1e-4); sf = amax / 448.0; ceil_to_ue8m0 (exponent bits plus one
     * for a nonzero mantissa); x * (1.0 / sf): --scale-fmt ue8m0's rule of the floored amax */
    [FP8_PROFILE_DEEPGEMM] = { { FP8_RULE_DIV, 0, 1e-4f, 0 }, SCHEME_BIT(BLOCK), true },
    /* sgl-project/sglang sgl-kernel/csrc/gemm/per_token_group_quant_8bit.cu (00568d9)
     * per_token_group_quant_8bit_kernel, its online FP8 group quantization, without
     * SCALE_UE8M0: local_absmax starts at 1e-10; calculate_fp8_scales stores
     * amax * (1.0f / 448) and multiplies by 448 / amax (__fmul2_rn, satfinite cast), each
     * group a block here.  sgl-kernel/CMakeLists.txt (00390b8) builds it with precise math
     * for sm100 and with -use_fast_math for sm90 (an approximate 448 / amax: a GPU check) */
    [FP8_PROFILE_SGLANG] = { { FP8_RULE_INV_APART, 0, 1e-10f, 0 }, SCHEME_BIT(BLOCK) },
    /* PrimeIntellect-ai/prime-rl src/prime_rl/trainer/models/fp8.py quantize_to_fp8_blockwise
     * (2026; fp8_block_quantize, conversions/fp8_blockwise.py and tools/convert_bf16_to_fp8.py
     * call it): (amax / 448).clamp(min=1e-12); (x.float() / s).clamp(+-448).to(e4m3) */
    [FP8_PROFILE_PRIME_RL] = { { FP8_RULE_MUL_RECIP, 0, 0, 1e-12f }, SCHEME_BIT(BLOCK) },
    /* THUDM/slime slime/utils/fp8_kernel.py _blockwise_cast_to_fp8_triton (fe5eb23; formerly
     * slime/backends/megatron_utils/kernels/fp8_kernel.py), eps 1e-10, force_pow_2_scale off:
     * max(amax, eps) / 448; s_inv = 1.0 / s; x * s_inv (miles and verl carry the same kernel) */
    [FP8_PROFILE_SLIME] = { { FP8_RULE_DIV, 1, 1e-10f, 0 }, SCHEME_BIT(BLOCK) },
    /* NVIDIA/TransformerEngine common/recipe/recipe_common.cuh compute_scale_from_amax
     * (__fdiv_rn(448, amax), 1 for amax 0; epsilon 0) and
     * common/transpose/quantize_transpose_square_blockwise.cu: x * scale, stored
     * 1.0f / scale: Float8BlockScaling's 128x128 weight tiles with FP32 scales.  An
     * infinite 448 / amax becomes the input dtype's largest finite value
     * (compute_scale_from_types, since 1bbeab1, read at d0067d0: bf16's for a bf16 weight,
     * FLT_MAX for an F32 one; fp8_quant_plan_band sets it).  tensor: current
     * scaling, Float8CurrentScalingQuantizer::quantize_impl (pytorch/csrc/quantizer.cpp,
     * d0067d0): nvte_compute_amax, then common/recipe/current_scaling.cu
     * compute_scale_from_amax_kernel (amax_epsilon 0.0, FLT_MAX for infinity), then the cast
     * (util/vectorized_pointwise.h unary_kernel, cast/fp8/quantize_fp8.cuh): x * scale, a
     * saturating E4M3 cast, scale_inv = __frcp_rn(scale) (utils.cuh reciprocal<float>):
     * the same arithmetic, and tests/pytorch/references/ref_per_tensor_cs.py agrees.
     * nvfp4 (NVFP4 1-D, miles' NVFP4 weight sync; d0067d0): common/cast/nvfp4/core_nvfp4.cuh
     * compute_global_encode_scaling_factor_FP4 (S_enc = 448 * 6 / amax, FLT_MAX for inf, 1
     * for amax 0), compute_decoding_scaling_factor (static_cast<fp8e4m3>(block_amax *
     * (S_enc * (1.0f / 6.0f)))), compute_scaling_coefficient<float> (fminf(1.0f / (scale *
     * S_dec), FLT_MAX)); quantize_transpose_nvfp4.cuh S_dec = 1.0 / S_enc (double rounding
     * innocuous: 53 >= 2 * 24 + 2); util/ptx_arch_spec.cuh mul_cvt_bf16_to_fp4_4x_with_rn
     * (mul.f32x2, cvt.rn.satfinite.e2m1x2.f32): fp4_f32, every step in fp32 */
    [FP8_PROFILE_TE] = {
        .num = { .rule = FP8_RULE_INV_DIV, .inf_src = 1 },
        .schemes = SCHEME_BIT(BLOCK) | SCHEME_BIT(TENSOR) | SCHEME_BIT(NVFP4),
        .own = SCHEME_BIT(TENSOR) | SCHEME_BIT(NVFP4),
        .by_scheme = { [FP8_SCHEME_TENSOR] = { .rule = FP8_RULE_INV_DIV }, /* FLT_MAX */
                       [FP8_SCHEME_NVFP4] = { .fp4_f32 = 1 } },
    },
    /* huggingface/transformers Fp8Quantize.convert (finegrained FP8, v5 weight loading ops):
     * 448.0 / amax (1 for amax 0); (x * scale).clamp(+-448).to(e4m3); stored 1.0 / scale;
     * without weight_block_size: the whole matrix */
    [FP8_PROFILE_TRANSFORMERS] = { { FP8_RULE_INV_RECIP, 0, 0, 0 },
                                   SCHEME_BIT(BLOCK) | SCHEME_BIT(TENSOR) },
    /* neuralmagic/compressed-tensors 0.17.0 (llm-compressor's torch path, on a CPU or, up to
     * 0.18, any GPU) quantization/utils/helpers.py calculate_qparams: scales = max_val_pos /
     * (896 / 2) in the weight's dtype, a 0 replaced by that dtype's eps (_get_dtype_eps);
     * lifecycle/forward_helpers.py _quantize: x / scale, a tensor in the weight's dtype,
     * then round_to_quantized_type_args: clamp(+-448), cast to e4m3.  mxfp8:
     * quantization/utils/mxfp_utils.py generate_mx_scales: round_to_power_2 (the bits plus a
     * quarter of the mantissa's range, masked to the exponent), 127 + floor(log2) - 8.  Run
     * for real by tests/profiles_ct.py */
    [FP8_PROFILE_LLM_COMPRESSOR] = {
        .num = { .rule = FP8_RULE_DIV, .in_kind = 1 },
        .schemes = SCHEME_BIT(BLOCK) | SCHEME_BIT(CHANNEL) | SCHEME_BIT(TENSOR) |
                   SCHEME_BIT(MXFP8),
        .own = SCHEME_BIT(MXFP8),
        .by_scheme = { [FP8_SCHEME_MXFP8] = { .rule = FP8_RULE_DIV, .mx_up = 1 } },
    },
};

const char *const fp8_profile_names[] = { "fp8conv", "vllm", "deepgemm", "sglang", "prime-rl",
                                          "slime", "te", "transformers", "llm-compressor", NULL };
_Static_assert(sizeof fp8_profile_names / sizeof *fp8_profile_names == FP8_PROFILE_COUNT + 1,
               "a name per profile");

const fp8_profile_traits *fp8_profile_get(fp8_profile p)
{
    return (unsigned)p < FP8_PROFILE_COUNT ? &profile_table[p] : NULL;
}

const fp8_numerics *fp8_profile_numerics(fp8_profile p, fp8_scheme s)
{
    const fp8_profile_traits *t = fp8_profile_get(p);
    if (!t)
        t = &profile_table[FP8_PROFILE_FP8CONV];
    return (unsigned)s < NSCHEMES && t->own >> s & 1 ? &t->by_scheme[s] : &t->num;
}

const char *fp8_profile_name(fp8_profile p)
{
    return (unsigned)p < FP8_PROFILE_COUNT ? fp8_profile_names[p] : "?";
}

bool fp8_profile_defines(fp8_profile p, fp8_scheme s, char *defined, size_t cap)
{
    const fp8_profile_traits *t = fp8_profile_get(p);
    unsigned bits = t ? t->schemes : 0;
    if (defined && cap) {
        size_t n = 0;
        defined[0] = 0;
        for (unsigned k = 0; k < NSCHEMES; k++)
            if (bits >> k & 1 && n < cap)
                n += (size_t)snprintf(defined + n, cap - n, "%s%s", n ? ", " : "",
                                      fp8_scheme_names[k]);
        if (!n)
            snprintf(defined, cap, "none");
    }
    return (unsigned)s < NSCHEMES && bits >> s & 1;
}
