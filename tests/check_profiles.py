#!/usr/bin/env python3
"""Engine profiles, certified (issue 47): quantize --profile NAME against each row's rule.

Each profile of fp8conv-formats(5), PROFILES, is transcribed here step by step from the engine's
own code (the citations are the rows' in lib/common/types.c), with GPU semantics: every step one
fp32 operation rounded to nearest (float32 numpy ops and CUDA's non-fast-math ops are IEEE-rounded),
and torch's CUDA idioms spelled out: `t / 448.0` is t * fl(1/448) (a CPU scalar divisor becomes its
reciprocal), `c / t` is fl(1/t) * c (Tensor.__rdiv__), a tensor divided by a tensor is a division.
Triton's fp32 division is approximate on GPUs (div.full.f32): the slime row is transcribed with the
IEEE division, which only a check on a GPU can confirm (a GPU-kit check, not done here).

The transcriptions are written from the engines' steps, not from fp8conv's code: fp32 arithmetic is
Python's double rounded once to fp32 (exact for one +, *, /: 53 >= 2 * 24 + 2 bits), and E4M3 is
the nearest of its 253 finite values, ties to the even code, saturating (the engines clamp to
+-448, then cast).  With numpy and ml_dtypes importable (not needed), the same steps run again in
numpy float32 with ml_dtypes' float8_e4m3fn cast, and must agree.

For every profile and scheme it defines, bf16 weights (realistic: normal with heavy tails, whole and
partial 128x128 blocks) and edge classes (an all-zero tile, tiles under each amax floor, E4M3
midpoints under amax 448, huge values up to bf16's largest) are quantized by `fp8conv quantize
--profile` and its codes and F32 scales compared byte for byte (0 differing bytes); a group no
profile scale serves (transformers: amax below 448 / FLT_MAX) is refused (exit 3).  The default
profile (no --profile, and --profile fp8conv) is checked against fp8conv's own rule too, and the
engine profiles are checked to differ from it somewhere (each row's rule matters).  Each output is
given to `verify --against SRC --profile auto`, which must name the profile that wrote it (alone,
for the block scheme, where the edge tiles tell every row apart) among those it tried (every
profile that defines the scheme).

llm-compressor is checked against compressed-tensors itself too (tests/profiles_ct.py, run with
$PROFILES_ENGINE_PY or BUILD/venv-loaders/bin/python where it has torch and compressed_tensors):
every code and scale equal, but for -0 against its +0 where its CPU bf16 cast flushes a subnormal
quotient (counted and said).

usage: check_profiles.py BUILD    (BUILD/fp8conv is the binary: make's build dir)
       check_profiles.py --measure  (fp8conv-formats(5), PROFILES, its figures: the share of codes
                                     and of scales each row changes against fp8conv's rule)
Python 3 standard library only.
"""
import bisect
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
BF16_MAX = struct.unpack("<f", b"\x00\x00\x7f\x7f")[0]  # 0x1.FEp127
INF = float("inf")


def f32(x):
    """x rounded to fp32 (to nearest even), overflow to infinity."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return INF if x > 0 else -INF


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def bf16_bits(x):
    """x (an fp32 value) to bf16 bits, to nearest even."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def e4m3_decode(c):
    e, m = (c >> 3) & 15, c & 7
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if c & 0x80 else v


E4M3_POS = [e4m3_decode(c) for c in range(0x7F)]  # codes 0x00..0x7E, increasing


def nearest(v, pos, sign_bit):
    """The code of the value of `pos` (a format's magnitudes by code, increasing) nearest |v|,
    ties to the even code, saturating at the largest; sign_bit set where v is negative, -0
    too (v not NaN)."""
    a, sign = abs(v), sign_bit if math.copysign(1.0, v) < 0 else 0
    if a >= pos[-1]:
        return sign | len(pos) - 1
    i = bisect.bisect_left(pos, a)
    if pos[i] == a:
        return sign | i
    lo = i - 1
    dl, dh = a - pos[lo], pos[i] - a
    return sign | (lo if dl < dh or (dl == dh and lo % 2 == 0) else i)


def e4m3(x):
    """The E4M3 code nearest x, ties to the even code, saturating at +-448 (x not NaN)."""
    return nearest(x, E4M3_POS, 0x80)


# ---------------------------------------------------------------- the rows, transcribed
# Each takes a group's amax (fp32, >= 0) and returns (stored scale, element -> code), or None
# where the engine's arithmetic gives no finite scale (fp8conv refuses the group).

def rule_fp8conv(a):
    # fp8conv-formats(5), SCHEMES: s = amax / 448 (1 for zero, 2^-149 for an underflow); x / s
    s = 1.0 if a == 0 else f32(a / 448) or 2.0 ** -149
    return s, lambda x: e4m3(f32(x / s))


def rule_vllm(a):
    # per_block_cast_to_fp8: x_amax.clamp(1e-4); sf = x_amax / 448.0 (CUDA: * fl(1/448));
    # (x_view * (1.0 / sf)).to(float8_e4m3fn)
    a = max(a, f32(1e-4))
    sf = f32(a * f32(1 / 448))
    r = f32(1 / sf)
    return sf, lambda x: e4m3(f32(x * r))


def rule_vllm_tensor(a):
    # csrc/quantization/w8a8/fp8/common.cu (096d3dc) dynamic_scaled_fp8_quant:
    # segmented_max_reduction_strided: scale = amax / 448 (a CUDA C++ division, no floor);
    # scaled_fp8_quant_kernel_strided_dynamic: x * (1.0f / scale), fmax/fmin clamp, cast.
    # amax 0: 1/0 is inf, 0 * inf NaN, which fminf/fmaxf clamp to 448 (code 0x7E), scale 0:
    # fp8conv stores scale 1 and codes 0 there (said in PROFILES; checked apart below)
    s = f32(a / 448)
    if a == 0:
        return 0.0, lambda x: 0x7E
    r = f32(1 / s) if s else INF
    if r == INF:
        return None
    return s, lambda x: e4m3(f32(x * r))


def rule_vllm_channel(a):
    # same file, dynamic_per_token_scaled_fp8_quant_kernel_strided: scale =
    # fmaxf(amax / 448, min_scaling_factor = 1.0f / (448 * 512.0f)); x / scale (no reciprocal:
    # "to match FBGemm"; csrc/quantization/fp8/common.cu at 006ccf0 multiplied by 1.0f / scale)
    s = max(f32(a / 448), f32(1 / f32(448 * 512.0)))
    return s, lambda x: e4m3(f32(x / s))


def rule_sglang(a):
    # sgl-kernel per_token_group_quant_8bit_kernel (00568d9): local_absmax = fmaxf(1e-10f, |x|...);
    # calculate_fp8_scales (no ROUND_SCALE): scale_inv = amax * MAX_8BIT_INV (1.0f / 448, a
    # constant), scale = 448 / amax (precise math: the sm100 build); output_s = scale_inv;
    # __fmul2_rn(x, scale) then __nv_cvt_float2_to_fp8x2(..., __NV_SATFINITE, __NV_E4M3)
    a = max(a, f32(1e-10))
    k = f32(448 / a)
    return f32(a * f32(1 / 448)), lambda x: e4m3(f32(x * k))


def rule_llm_compressor(a):
    # compressed-tensors 0.17.0 (llm-compressor's torch path), bf16 weights:
    # calculate_qparams: scales = max_val_pos / (896 / 2), a bf16 tensor (fp32 quotient rounded
    # to bf16); scales == 0 -> _get_dtype_eps(bf16) = 2^-7; _quantize: x / scale, a bf16
    # tensor; round_to_quantized_type_args: clamp(+-448).to(float8_e4m3fn)
    s = bf16_value(bf16_bits(f32(a / 448))) or 2.0 ** -7
    return s, lambda x: e4m3(bf16_value(bf16_bits(f32(x / s))))


rule_llm_compressor.bf16 = True  # its scales are bf16 (the weight's dtype)


def rule_fp8conv_mx(a):
    # fp8conv-formats(5), SCHEMES, mxfp8 (rceil): the least E with amax <= 448 * 2^E, in
    # [-127, 127] (byte 0 for zero); x / 2^E
    e = -127
    if a > 0:
        e = math.frexp(a)[1] - 10
        while a > 448 * 2.0 ** e:
            e += 1
        if e > 127:  # no E8M0 scale serves: refused (exit 3)
            return None
        e = max(e, -127)
    s = 2.0 ** e
    if a > 0 and e4m3_decode(e4m3(f32(a / s))) * s > FLT_MAX:  # reads back infinite: refused
        return None
    return s, lambda x: e4m3(f32(x / s))


def rule_llm_compressor_mx(a):
    # compressed-tensors 0.17.0 mxfp_utils.py generate_mx_scales on the bf16 group amax:
    # round_to_power_2: (bits + (1 << (7 - 1 - 1))) & sign-and-exponent mask; then
    # 127 + floor(log2(p2)) - 8, clamped into uint8 (0 for log2(0) = -inf, 255 for infinity);
    # the scale 2^(byte - 127) in bf16; _quantize: x / scale, a bf16 tensor
    p2 = (bf16_bits(a) + 32) & 0xFF80
    if p2 >= 0x7F80:  # infinity: byte 255, a NaN scale; fp8conv refuses the group
        return None
    byte = 0 if p2 == 0 else min(max(127 + math.floor(math.log2(bf16_value(p2))) - 8, 0), 255)
    s = 2.0 ** (byte - 127)
    return s, lambda x: e4m3(bf16_value(bf16_bits(f32(x / s))))


rule_fp8conv_mx.e8m0 = rule_llm_compressor_mx.e8m0 = True  # E8M0 scale bytes


def rule_prime_rl(a):
    # quantize_to_fp8_blockwise: (max_abs / fp8_max).clamp(min=1e-12); (blocks.float() / scale)
    s = max(f32(a * f32(1 / 448)), f32(1e-12))
    return s, lambda x: e4m3(f32(x / s))


def rule_slime(a):
    # _blockwise_cast_to_fp8_triton: tl.maximum(amax, eps=1e-10); x_s = amax / fp8_max;
    # s_inv = 1.0 / x_s; x * s_inv (Triton's division: IEEE here, approximate on a GPU)
    a = max(a, f32(1e-10))
    s = f32(a / 448)
    r = f32(1 / s)
    return s, lambda x: e4m3(f32(x * r))


def rule_te(a):
    # compute_scale_from_amax: epsilon 0; amax 0 -> 1; __fdiv_rn(448, amax), inf -> FLT_MAX;
    # quantize_transpose_square_blockwise: x * scale, stored 1.0f / scale.  Current scaling
    # per tensor (TransformerEngine d0067d0): compute_scale_from_amax_kernel (amax_epsilon
    # 0.0, FLT_MAX for inf), the cast's x * scale (saturating), scale_inv = __frcp_rn(scale):
    # the same steps.  (The block kernels at d0067d0 take bf16's largest, not FLT_MAX, for a
    # bf16 weight's infinite scale: not this rule, said in PROFILES.)
    k = 1.0 if a == 0 else f32(448 / a)
    k = FLT_MAX if k == INF else k
    return f32(1 / k), lambda x: e4m3(f32(x * k))


def rule_te_block(a):
    # TE's block kernels (quantize_transpose_square_blockwise.cu, compute_scale_from_types at
    # d0067d0, since 1bbeab1): an infinite 448 / amax becomes the input dtype's largest finite
    # value, bf16's 0x1.FEp127 for these bf16 weights (FLT_MAX for an F32 input: rule_te)
    k = 1.0 if a == 0 else f32(448 / a)
    k = BF16_MAX if k == INF else k
    return f32(1 / k), lambda x: e4m3(f32(x * k))


def rule_transformers(a):
    # Fp8Quantize.convert: safe = where(max_abs > 0, max_abs, 1); scales = 448 / safe
    # (Tensor.__rdiv__: reciprocal, then * 448); where(max_abs > 0, scales, 1);
    # x * scales, clamp, cast; stored 1.0 / scales
    k = 1.0 if a == 0 else f32(f32(1 / a) * 448)
    if k == INF:
        return None
    return f32(1 / k), lambda x: e4m3(f32(x * k))


def ceil_to_ue8m0(s):
    """DeepGEMM's ceil_to_ue8m0 on fp32 s: its biased exponent, plus one for a nonzero
    mantissa, clamped to 1..254, as the exponent of a power of two."""
    u = struct.unpack("<I", struct.pack("<f", s))[0] & 0x7FFFFFFF
    e = min(max((u >> 23) + ((u & 0x7FFFFF) != 0), 1), 254)
    return struct.unpack("<f", struct.pack("<I", e << 23))[0]


def rule_deepgemm(a):
    # deep_gemm/utils/math.py per_block_cast_to_fp8(use_ue8m0=True) (DeepGEMM 38939a4):
    # x_amax.clamp(1e-4); sf = x_amax / 448.0 (CUDA: * fl(1/448)); sf = ceil_to_ue8m0(sf);
    # (x_view * (1.0 / sf)).to(float8_e4m3fn).  Near bf16's largest value the engine writes a
    # code whose value times sf is past fp32 (256 * 2^120): fp8conv refuses such a group.
    a = max(a, f32(1e-4))
    sf = ceil_to_ue8m0(f32(a * f32(1 / 448)))
    r = f32(1 / sf)
    if e4m3_decode(e4m3(f32(a * r))) * sf > FLT_MAX:
        return None
    return sf, lambda x: e4m3(f32(x * r))


def rule_sglang_ue8m0(a):
    # sgl-project/sglang python/sglang/srt/layers/quantization/fp8_utils.py (002ed7e)
    # per_block_cast_to_fp8 ("COPIED FROM DeepGEMM"), which requant_weight_ue8m0 runs on the
    # bf16 block_quant_dequant of an FP8 checkpoint's weights (Blackwell's UE8M0 path):
    # x_amax.clamp(1e-4); sf = ceil_to_ue8m0(x_amax / 448.0) with ceil_to_ue8m0 =
    # torch.pow(2.0, torch.ceil(torch.log2(x.abs()))); (x_view * (1.0 / sf)).to(e4m3).
    # log2 here is the double's, whose ceil is fp32's correctly rounded log2f's on every such
    # s (none is within 842 fp32 ulps above an integer); CUDA's log2f must give the exact
    # integer on the s that are powers of two (the GPU check)
    a = max(a, f32(1e-4))
    sf = 2.0 ** math.ceil(math.log2(f32(a * f32(1 / 448))))
    r = f32(1 / sf)
    if e4m3_decode(e4m3(f32(a * r))) * sf > FLT_MAX:
        return None
    return sf, lambda x: e4m3(f32(x * r))


PROFILES = {  # name: {scheme: rule}
    "fp8conv": {"block": rule_fp8conv, "tensor": rule_fp8conv, "channel": rule_fp8conv,
                "mxfp8": rule_fp8conv_mx},
    "vllm": {"block": rule_vllm, "tensor": rule_vllm_tensor, "channel": rule_vllm_channel},
    "deepgemm": {"block": rule_deepgemm},
    "sglang": {"block": rule_sglang},
    "prime-rl": {"block": rule_prime_rl},
    "slime": {"block": rule_slime},
    "te": {"block": rule_te_block, "tensor": rule_te},
    "transformers": {"block": rule_transformers, "tensor": rule_transformers},
    "llm-compressor": {"block": rule_llm_compressor, "channel": rule_llm_compressor,
                       "tensor": rule_llm_compressor, "mxfp8": rule_llm_compressor_mx},
}
PROFILE_FORMAT = {"llm-compressor": "compressed-tensors"}  # bf16 scales: the weight's dtype
FORMAT = {"block": "hf-fp8", "tensor": "hf-fp8", "channel": "modelopt",  # F32 scales each
          "mxfp8": "compressed-tensors"}  # E8M0 bytes
UNDEFINED = ()  # rows without schemes in this version


# ---------------------------------------------------------------- the same steps in numpy

def numpy_agrees(rule, a_values, xs):
    """The rule's steps in numpy float32 with ml_dtypes' E4M3 cast, on amaxes and elements;
    None when numpy or ml_dtypes is missing."""
    try:
        import numpy as np
        import ml_dtypes
    except ImportError:
        return None
    f = np.float32
    name = rule.__name__[len("rule_"):].replace("_", "-")
    bad = 0
    for a in a_values:
        a32 = f(a)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if name == "vllm":
                sf = max(a32, f(1e-4)) * (f(1) / f(448))
                st, op = sf, lambda x: x * (f(1) / sf)
            elif name == "vllm-tensor":
                st = a32 / f(448)
                if a32 == 0 or np.isinf(f(1) / st):
                    continue  # the engine's 0x7E codes, and fp8conv's refusal: checked apart
                op = lambda x: x * (f(1) / st)
            elif name == "vllm-channel":
                st = max(a32 / f(448), f(1) / (f(448) * f(512)))
                op = lambda x: x / st
            elif name == "deepgemm":
                sf = max(a32, f(1e-4)) * (f(1) / f(448))
                u = int(np.array([sf], np.float32).view(np.uint32)[0]) & 0x7FFFFFFF
                e = min(max((u >> 23) + int(u & 0x7FFFFF != 0), 1), 254)
                sf = np.array([e << 23], np.uint32).view(np.float32)[0]
                st, op = sf, lambda x: x * (f(1) / sf)
            elif name == "sglang":
                a32 = max(a32, f(1e-10))
                k = f(448) / a32
                st, op = a32 * (f(1) / f(448)), lambda x: x * k
            elif name == "llm-compressor":
                if a32 == 0:
                    st = f(2.0 ** -7)
                else:
                    st = (a32 / f(448)).astype(ml_dtypes.bfloat16).astype(f)
                    st = f(2.0 ** -7) if st == 0 else st
                op = lambda x: (x / st).astype(ml_dtypes.bfloat16).astype(f)
            elif name == "prime-rl":
                st = max(a32 * (f(1) / f(448)), f(1e-12))
                op = lambda x: x / st
            elif name == "slime":
                s = max(a32, f(1e-10)) / f(448)
                st, op = s, lambda x: x * (f(1) / s)
            elif name in ("te", "te-block"):
                k = f(1) if a32 == 0 else f(448) / a32
                k = f(FLT_MAX if name == "te" else BF16_MAX) if np.isinf(k) else k
                st, op = f(1) / k, lambda x: x * k
            elif name == "transformers":
                k = f(1) if a32 == 0 else (f(1) / a32) * f(448)
                if np.isinf(k):
                    continue
                st, op = f(1) / k, lambda x: x * k
            else:
                s = f(1) if a32 == 0 else a32 / f(448)
                st, op = s, lambda x: x / s
        mine = rule(a)
        if mine is None and name == "deepgemm":  # fp8conv's refusal, not the engine's
            continue
        if mine is None or f(mine[0]) != st:
            bad += 1
            continue
        for x in xs:
            with np.errstate(over="ignore"):
                y = np.clip(op(f(x)), f(-448), f(448)).astype(ml_dtypes.float8_e4m3fn)
            bad += int(y.view(np.uint8)) != mine[1](x)
    return bad == 0




# ---------------------------------------------------------------- NVFP4 under te
# TransformerEngine's NVFP4 1-D (d0067d0; the row's citations in lib/common/types.c): every step
# one fp32 operation rounded to nearest, where fp8conv's default (compressed-tensors' steps)
# rounds m / 6 and the global to the weight's dtype and divides elements by scale / global.

E2M1_POS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e2m1(v):
    """cvt.rn.satfinite.e2m1x2.f32: the nearest of E2M1's values, ties to the even code,
    saturating at +-6, the sign bit v's (-0 keeps it)."""
    return nearest(v, E2M1_POS, 8)


def te_nvfp4_global(amax):
    # compute_global_encode_scaling_factor_FP4: 448 * 6 / amax (constants folded: 2688.0f / a),
    # fminf(FLT_MAX), 1 where amax is 0 (or the quotient 0)
    if amax == 0:
        return 1.0
    g = min(f32(2688.0 / amax), FLT_MAX)
    return 1.0 if g == 0 else g


def te_nvfp4_group(m, g):
    """(E4M3 scale byte, element factor) of a 16-element group of amax m under S_enc g."""
    # compute_decoding_scaling_factor: static_cast<fp8e4m3>(block_amax * (S_enc * (1.0f / 6.0f)))
    b = e4m3(f32(m * f32(g * f32(1 / 6))))
    # compute_scaling_coefficient<float>: S_dec = 1.0 / S_enc; fminf(1.0f / (scale * S_dec), FLT_MAX)
    d = f32(e4m3_decode(b) * f32(1 / g))
    k = FLT_MAX if d == 0 else min(f32(1 / d), FLT_MAX)
    return b, k


def te_nvfp4(vals, rows, cols):
    """(packed codes, E4M3 scales, global) of one matrix, as TE quantizes it row-wise."""
    g = te_nvfp4_global(max(abs(v) for v in vals))
    codes, scales = bytearray(rows * cols // 2), bytearray()
    for g0 in range(0, rows * cols, 16):
        b, k = te_nvfp4_group(max(abs(v) for v in vals[g0:g0 + 16]), g)
        scales.append(b)
        for i in range(g0, g0 + 16):  # mul.f32x2, then the cvt
            codes[i // 2] |= e2m1(f32(vals[i] * k)) << (4 * (i & 1))
    return bytes(codes), bytes(scales), g


def own_nvfp4(vals, rows, cols):
    """fp8conv's own NVFP4 (fp8conv-formats(5), FP4 QUANTIZATION; compressed-tensors' steps) of a
    bf16 matrix, for --measure: the global bf16(bf16(1 / amax) * 2688), a group's E4M3 of
    global * bf16(m / 6) (clamped to 448; 0 becomes 0.125), elements x / (scale / global)."""
    def b16(x):
        return bf16_value(bf16_bits(x))
    a = max(max(abs(v) for v in vals), 2.0 ** -126)
    g = b16(f32(b16(f32(1 / a)) * 2688))
    g = 1.0 if g == INF else g
    codes, scales = bytearray(rows * cols // 2), bytearray()
    for g0 in range(0, rows * cols, 16):
        s = f32(g * b16(f32(max(abs(v) for v in vals[g0:g0 + 16]) / 6)))
        b = e4m3(min(s, 448.0)) or e4m3(0.125)
        scales.append(b)
        d = f32(e4m3_decode(b) / g)
        for i in range(g0, g0 + 16):
            q = f32(vals[i] / d)
            codes[i // 2] |= (e2m1(abs(q)) | (8 if q < 0 else 0)) << (4 * (i & 1))
    return bytes(codes), bytes(scales), g


def measure_nvfp4(vals):
    """te's nvfp4 against fp8conv's own on the --measure weights as 8 matrices of 96 x 2048."""
    codes = scales = globs = 0
    for t in range(8):
        v = vals[t * 96 * 2048:(t + 1) * 96 * 2048]
        c0, s0, g0 = own_nvfp4(v, 96, 2048)
        c1, s1, g1 = te_nvfp4(v, 96, 2048)
        codes += sum((x & 15) != (y & 15) for x, y in zip(c0, c1)) + sum((x >> 4) != (y >> 4) for x, y in zip(c0, c1))
        scales += sum(x != y for x, y in zip(s0, s1))
        globs += g0 != g1
    n = len(vals)
    print("%-13s %-8s codes %.3f%%  scales %.2f%% (%d groups), globals %d of 8" % (
        "te", "nvfp4", 100.0 * codes / n, 100.0 * scales / (n // 16), n // 16, globs))


def te_nvfp4_numpy(vals, rows, cols):
    """The same steps in numpy float32 with ml_dtypes' float8_e4m3fn and float4_e2m1fn casts;
    None when they are missing."""
    try:
        import numpy as np
        import ml_dtypes
    except ImportError:
        return None
    f = np.float32
    x = np.array(vals, f).reshape(-1, 16)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        a = np.abs(x).max()
        g = f(1) if a == 0 else np.minimum(f(448) * f(6) / a, f(FLT_MAX))
        g = f(1) if g == 0 else g
        s = np.abs(x).max(axis=1) * (g * (f(1) / f(6)))
        b = np.clip(s, f(-448), f(448)).astype(ml_dtypes.float8_e4m3fn)
        k = np.minimum(f(1) / (b.astype(f) * (f(1) / g)), f(FLT_MAX))
        y = x * k[:, None]
        q = np.clip(y, f(-6), f(6)).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 7
        q = (q | np.where(np.signbit(y), 8, 0)).astype(np.uint8).reshape(-1)
    packed = (q[0::2] | (q[1::2] << 4)).astype(np.uint8)
    return packed.tobytes(), b.view(np.uint8).tobytes(), float(g)


def te_nvfp4_weights(rng):
    """bf16 weights of the edge classes, a name each, rows x cols (cols a multiple of 16)."""
    mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.0, -0.25, -0.75, -1.25, -1.75, -2.5, -3.5,
            -5.0, -0.0]
    out = {}
    # realistic, odd shapes (a row of one group, rows of 17 groups)
    out["model.layers.0.mlp.down_proj.weight"] = (40, 272, realistic(rng, 40, 272))
    out["model.layers.1.mlp.down_proj.weight"] = (3, 16, realistic(rng, 3, 16))
    # amax 2688: S_enc 1, a group of amax 6 gets scale 1 and factor 1, so the E2M1 midpoints
    # are exact midpoints; an all-zero group, -0 elements, tiny groups (scale 0: factor
    # FLT_MAX, codes +-6), subnormal E4M3 scales
    v = []
    for r in range(8):
        for c in range(64):
            grp, i = c // 16, c % 16
            if r == 0 and c == 63:
                v.append(2688.0)
            elif grp == 0:
                v.append(6.0 if i == 1 else mids[i])
            elif grp == 1:
                v.append(0.0 if r % 2 else -0.0)
            elif grp == 2:
                v.append((1e-3 + r * 1e-4) * (i - 8) / 8)  # scale E4M3 0 or subnormal
            else:
                v.append((0.01 * (r + 1)) * ((i * 7 + r) % 13 - 6) / 6)  # subnormal scales
    out["model.layers.0.self_attn.o_proj.weight"] = (8, 64, [bf16_bits(x) for x in v])
    # huge: bf16's largest value, and groups of ordinary values beside it
    v = [(BF16_MAX if (r + c) % 37 == 0 else -3e38 if c % 16 == 5 else 0.02 * ((r * c) % 11 - 5))
         for r in range(4) for c in range(48)]
    out["model.layers.1.self_attn.o_proj.weight"] = (4, 48, [bf16_bits(x) for x in v])
    # bf16 subnormals only: 2688 / amax is infinite, S_enc is FLT_MAX
    v = [2.0 ** -133 * ((r + 3 * c) % 5 - 2) for r in range(2) for c in range(32)]
    out["model.layers.2.self_attn.o_proj.weight"] = (2, 32, [bf16_bits(x) for x in v])
    # an all-zero matrix: S_enc 1
    out["model.layers.2.mlp.down_proj.weight"] = (2, 32, [0] * 64)
    return out


def check_te_nvfp4(binary, tmp, check):
    """quantize --scheme nvfp4 --profile te against te_nvfp4 (and numpy's steps) on the edge
    classes; fp8conv's own nvfp4 differs; both fast path and the reference agree; verify
    --against --profile auto names te (alone); the default's bytes are unchanged."""
    weights = te_nvfp4_weights(random.Random(53))
    src = os.path.join(tmp, "nvfp4-in.safetensors")
    write_st(src, {n: ("BF16", [r, c], struct.pack("<%dH" % len(b), *b))
                   for n, (r, c, b) in weights.items()})
    outs = {}
    for fmt in ("compressed-tensors", "modelopt"):
        out = outs[fmt] = os.path.join(tmp, "nvfp4-te-%s.safetensors" % fmt)
        p = run(binary, ["quantize", "--scheme", "nvfp4", "--profile", "te", "--format", fmt, src, out])
        check(p.returncode == 0 and "fp8conv: note: --profile te: scheme nvfp4 runs the reference "
              "quantizer" in p.stderr,
              "quantize --scheme nvfp4 --profile te --format %s: exit %d, the note: %s" % (
                  fmt, p.returncode, p.stderr.strip()))
        got = read_st(out) if p.returncode == 0 else {}
        for n, (r, c, b) in weights.items():
            vals = [bf16_value(x) for x in b]
            codes, scales, g = te_nvfp4(vals, r, c)
            base = n[:-len(".weight")] + ".weight"
            raw = got.get(base + "_packed", got.get(base, (0, 0, b"")))[2]
            sraw = got.get(base + "_scale", (0, 0, b""))[2]
            graw = (got.get(base + "_global_scale") or got.get(base + "_scale_2") or (0, 0, b""))[2]
            gwant = struct.pack("<f", g if fmt == "compressed-tensors" else f32(1 / g))
            check(raw == codes and sraw == scales and graw == gwant,
                  "nvfp4 --profile te --format %s: %s: %d code bytes, %d scales differ, global %s" % (
                      fmt, n, sum(x != y for x, y in zip(raw, codes)) + abs(len(raw) - len(codes)),
                      sum(x != y for x, y in zip(sraw, scales)) + abs(len(sraw) - len(scales)),
                      "equal" if graw == gwant else "%r != %r" % (graw, gwant)))
            npy = te_nvfp4_numpy(vals, r, c)
            if npy is not None:
                check(npy == (codes, scales, g), "nvfp4 te: %s: numpy's float32 steps agree" % n)
    # the edge classes are exercised: midpoints, tiny groups at codes +-6, -0, a FLT_MAX S_enc
    _, _, b = weights["model.layers.0.self_attn.o_proj.weight"]
    codes, scales, g = te_nvfp4([bf16_value(x) for x in b], 8, 64)
    check(g == 1.0 and scales[0] == 0x38 and codes[:8] == bytes([0x70, 0x42, 0x64, 0x06, 0xA8, 0xCA, 0xEC, 0x8E])
          and scales[2] == 0 and codes[16:20] == b"\xff\xff\xff\xff" and codes[20] == 0x70 and 0 < scales[7] < 8,
          "nvfp4 te: the edge classes: scale 1 at midpoints, scale 0 with codes +-6 (%s, %s)" % (
              scales[:8].hex(), codes[:8].hex()))
    check(te_nvfp4_global(2.0 ** -133) == FLT_MAX and te_nvfp4_global(0.0) == 1.0,
          "nvfp4 te: S_enc is FLT_MAX where 2688 / amax is infinite, 1 for amax 0")
    # fp8conv's own nvfp4 gives other bytes on realistic weights (the row matters) and is
    # unchanged by the row (--profile fp8conv and none)
    own = [os.path.join(tmp, "nvfp4-own-%d.safetensors" % k) for k in range(2)]
    for k, extra in enumerate(([], ["--profile", "fp8conv"])):
        run(binary, ["quantize", "-q", "--scheme", "nvfp4"] + extra + [src, own[k]])
    a, b2 = read_st(own[0]), read_st(own[1])
    check(a and a == b2 and a != read_st(outs["compressed-tensors"]),
          "nvfp4: the default and --profile fp8conv agree, and differ from --profile te")
    # verify --against --profile auto names te alone for te's bytes, fp8conv for its own
    for out, want in ((outs["compressed-tensors"], ["te"]), (outs["modelopt"], ["te"]), (own[0], ["fp8conv"])):
        p = run(binary, ["verify", "--json", "--against", src, "--profile", "auto", out])
        found = (json.loads(p.stdout or "{}").get("requantized") or {}).get("profiles") or {}
        check(found.get("reproduce") == want and  # (exit 1: the odd shapes load nowhere)
              sorted(found.get("tried", [])) == ["fp8conv", "te"],
              "nvfp4: verify --against --profile auto on %s finds %s of %s (exit %d %s)" % (
                  os.path.basename(out), found.get("reproduce"), found.get("tried"), p.returncode,
                  p.stderr.strip()))


# ---------------------------------------------------------------- inputs

def realistic(rng, rows, cols):
    """bf16 bits of a weight: normal(0, 0.02) with a few outliers 10-50x."""
    out = []
    for _ in range(rows * cols):
        v = rng.gauss(0, 0.02)
        if rng.random() < 0.002:
            v *= rng.uniform(10, 50)
        out.append(bf16_bits(v))
    return out


def with_tiles(bits, cols, tiles):
    """bits with tile (tr, tc) of 128 x 128 replaced by fn(rng, r, c) values."""
    rows = len(bits) // cols
    for (tr, tc), fn in tiles.items():
        for r in range(tr * 128, min(rows, tr * 128 + 128)):
            for c in range(tc * 128, min(cols, tc * 128 + 128)):
                bits[r * cols + c] = bf16_bits(fn(r, c))
    return bits


def midpoint(r, c):
    """E4M3 midpoints scaled so that the tile's amax is 448 (its (0, 0) element)."""
    if r % 128 == 0 and c % 128 == 0:
        return 448.0
    k = (r * 7 + c) % 125 + 1
    return (E4M3_POS[k] + E4M3_POS[k + 1]) / 2 * (-1 if c % 3 == 0 else 1)


def edge_weight(rng, tiny_ok, huge):
    """A 384 x 640 weight (partial tiles at neither edge) with one tile of each edge class."""
    bits = realistic(rng, 384, 640)
    tiles = {
        (0, 0): lambda r, c: 0.0,                                     # all zero
        (0, 1): lambda r, c: 5e-5 * ((r + c) % 7 - 3) / 3,            # under vLLM's 1e-4
        (0, 2): lambda r, c: 5e-11 * ((r + c) % 5 - 2) / 2,           # under slime's, sglang's 1e-10
        (0, 3): lambda r, c: 1e-10 * ((r * c) % 9 - 4) / 4,           # prime-rl: s under 1e-12
        (1, 0): midpoint,
        (1, 1): lambda r, c: huge * (1 if (r + c) % 2 else -0.75),  # bf16 max, or 3e38
        (1, 2): lambda r, c: 1e30 * rng.uniform(-1, 1),
        (2, 4): lambda r, c: 2.0 ** -120 * ((r + c) % 5),
    }
    if tiny_ok:  # bf16 subnormals: transformers gives them no finite scale (refused)
        tiles[(2, 3)] = lambda r, c: 2.0 ** -133 * ((r + 2 * c) % 5)
    return with_tiles(bits, 640, tiles)


def edge_rows(rng, tiny_ok, huge):
    """A 24 x 256 weight, a row of each edge class (the per-row scheme's edge tiles)."""
    mids = [(E4M3_POS[k] + E4M3_POS[k + 1]) / 2 for k in range(1, 126)]
    classes = [lambda c: 0.0,                                  # all zero
               lambda c: 1e-3 * ((c % 7) - 3) / 3,             # under vLLM's per-row floor 1/512
               lambda c: 5e-5 * ((c % 7) - 3) / 3,             # under vLLM's block 1e-4
               lambda c: 5e-11 * ((c % 5) - 2) / 2,            # under slime's 1e-10
               lambda c: 448.0 if c == 0 else mids[c % 125] * (-1 if c % 3 == 0 else 1),
               lambda c: huge * (1 if c % 2 else -0.75),
               lambda c: 1e30 * rng.uniform(-1, 1),
               lambda c: 2.0 ** -120 * (c % 5)]
    if tiny_ok:
        classes.append(lambda c: 2.0 ** -133 * ((2 * c) % 5))  # bf16 subnormals
    bits = realistic(rng, 24, 256)
    for r, fn in enumerate(classes):
        for c in range(256):
            bits[r * 256 + c] = bf16_bits(fn(c))
    return bits


# ---------------------------------------------------------------- safetensors

def write_st(path, tensors):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def read_st(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], blob[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


# ---------------------------------------------------------------- the oracle

def expected(rule, bits, rows, cols, scheme, vals=None):
    """Codes (bytes) and F32 scales (bytes) of one matrix under `rule` (its bf16 bits, or its
    fp32 values), or None (refused)."""
    vals = vals or [bf16_value(b) for b in bits]
    br, bc = {"block": (128, 128), "channel": (1, cols), "tensor": (rows, cols), "mxfp8": (1, 32)}[scheme]
    codes = bytearray(rows * cols)
    scales = b""
    for r0 in range(0, rows, br):
        for c0 in range(0, cols, bc):
            idx = [r * cols + c for r in range(r0, min(rows, r0 + br)) for c in range(c0, min(cols, c0 + bc))]
            a = max(abs(vals[i]) for i in idx)
            got = rule(a)
            if got is None:
                return None
            s, code = got
            scales += (struct.pack("<B", round(math.log2(s)) + 127) if getattr(rule, "e8m0", False) else
                       struct.pack("<H", bf16_bits(s)) if getattr(rule, "bf16", False) else struct.pack("<f", s))
            for i in idx:
                codes[i] = code(vals[i])
    return bytes(codes), scales


def measure():
    """The figures of fp8conv-formats(5), PROFILES: seeded normal(0, 0.02) bf16 weights with 0.2%
    outliers, 96 blocks of 128 x 128 (768 x 2048), through each row's transcription (certified
    above against quantize's bytes) and fp8conv's rule; the share of codes and of scales that
    differ.  Blocks, rows, and the matrix as 8 tensors of 96 x 2048.  deepgemm is measured against
    --scale-fmt ue8m0 (s = 2^E, the least with amax <= 448 * 2^E; x / s), the rule it shares;
    llm-compressor against fp8conv's bf16 scales (--format compressed-tensors from bf16)."""
    def rule_ue8m0(a):
        s = 1.0 if a == 0 else ceil_to_ue8m0(f32(a / 448))
        return s, lambda x: e4m3(f32(x / s))

    def rule_bf16(a):  # fp8conv-formats(5), SCHEMES: bf16 scales, one step up where 464 s < amax
        b = 0x3F80 if a == 0 else bf16_bits(f32(a / 448)) or 1
        b += a > 464 * bf16_value(b)
        s = bf16_value(b)
        return s, lambda x: e4m3(f32(x / s))

    vals = [bf16_value(b) for b in realistic(random.Random(47), 768, 2048)]
    for name, schemes in PROFILES.items():
        for scheme, rule in schemes.items():
            if name == "fp8conv":
                continue
            groups = ([[r * 2048 + c for r in range(r0, r0 + 128) for c in range(c0, c0 + 128)]
                       for r0 in range(0, 768, 128) for c0 in range(0, 2048, 128)] if scheme == "block"
                      else [list(range(r * 2048, r * 2048 + 2048)) for r in range(768)] if scheme == "channel"
                      else [list(range(g * 32, g * 32 + 32)) for g in range(768 * 2048 // 32)] if scheme == "mxfp8"
                      else [list(range(t * 96 * 2048, (t + 1) * 96 * 2048)) for t in range(8)])
            codes = scales = 0
            for g in groups:
                a = max(abs(vals[i]) for i in g)
                ref = (rule_fp8conv_mx if scheme == "mxfp8" else
                       {"deepgemm": rule_ue8m0, "llm-compressor": rule_bf16}.get(name, rule_fp8conv))
                (s0, c0), (s1, c1) = ref(a), rule(a)
                scales += s0 != s1
                codes += sum(c0(vals[i]) != c1(vals[i]) for i in g)
            print("%-13s %-8s codes %.3f%%  scales %.0f%% (%d groups)" % (
                name, scheme, 100.0 * codes / len(vals), 100.0 * scales / len(groups), len(groups)))
    measure_nvfp4(vals)


ENGINE = {}


def engine_bytes(src, tmp):
    """compressed-tensors' own bytes for src (tests/profiles_ct.py), run with the python of
    PROFILES_ENGINE_PY or BUILD/venv-loaders (make check-loaders makes it); {} where neither
    has torch and compressed_tensors (said once, not a failure)."""
    if src not in ENGINE:
        py = os.environ.get("PROFILES_ENGINE_PY") or os.path.join(sys.argv[1], "venv-loaders", "bin", "python")
        out = os.path.join(tmp, "engine.json")
        ok = os.path.exists(py) and subprocess.run(
            [py, os.path.join(os.path.dirname(os.path.abspath(__file__)), "profiles_ct.py"), src, out],
            capture_output=True).returncode == 0
        if not ok and not ENGINE:
            print("compressed-tensors not runnable with %s: llm-compressor is checked against its "
                  "transcription only (said, not a failure)" % py)
        ENGINE[src] = json.load(open(out)) if ok else {}
        ENGINE["ran"] = ENGINE.get("ran", 0) + ok
    return ENGINE[src]


def engine_diff(codes, eng, scales, bits, rows, cols, scheme):
    """Code bytes that differ from the engine's, and those that differ only where torch's CPU
    bf16 cast flushes a subnormal fp32 quotient x / s (x < 0) to +0: fp8conv's -0 (0x80), its
    0x00, the same value (on a GPU, __float2bfloat16_rn keeps the sign: fp8conv's bytes)."""
    nb = -(-cols // 128)
    ediff = flushed = 0
    for i, (x, y) in enumerate(zip(codes, eng)):
        if x == y:
            continue
        r, c = divmod(i, cols)
        g = {"block": r // 128 * nb + c // 128, "channel": r, "tensor": 0,
             "mxfp8": r * (cols // 32) + c // 32}[scheme]
        s = (2.0 ** (scales[g] - 127) if scheme == "mxfp8" else
             bf16_value(struct.unpack_from("<H", scales, 2 * g)[0]))
        v = bf16_value(bits[i])
        if x == 0x80 and y == 0 and v < 0 and abs(f32(v / s)) < 2.0 ** -126:
            flushed += 1
        else:
            ediff += 1
    return ediff, flushed


def run(binary, args):
    return subprocess.run([binary] + args, capture_output=True, text=True)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    if sys.argv[1] == "--measure":
        measure()
        return
    binary = os.path.join(sys.argv[1], "fp8conv")
    rng = random.Random(47)
    passed, failed = 0, []

    def check(ok, what):
        nonlocal passed
        if ok:
            passed += 1
        else:
            failed.append(what)
            print("FAIL", what)

    shapes = {"model.layers.0.mlp.down_proj.weight": (256, 384),   # whole blocks
              "model.layers.0.mlp.up_proj.weight": (200, 300),     # partial blocks
              "model.layers.0.self_attn.o_proj.weight": (384, 640),  # the edge classes
              "model.layers.0.self_attn.k_proj.weight": (24, 256)}  # the edge classes, by row
    with tempfile.TemporaryDirectory(prefix="check_profiles.") as tmp:
        # bf16's largest value, and 3e38 (deepgemm: its 2^120 scale reads back finite)
        # and 2.9e38, under 1.75 * 2^127 (llm-compressor's mxfp8: from there on an infinite scale)
        for tiny_ok, huge in ((True, 3.3895313892515355e38), (False, 3.3895313892515355e38),
                              (False, 3e38), (False, 2.9e38)):
            weights = {}
            for name, (r, c) in shapes.items():
                weights[name] = (r, c, edge_weight(rng, tiny_ok, huge) if r == 384 else
                                 edge_rows(rng, tiny_ok, huge) if r == 24 else realistic(rng, r, c))
            src = os.path.join(tmp, "in-%d-%g.safetensors" % (tiny_ok, huge))
            write_st(src, {n: ("BF16", [r, c], struct.pack("<%dH" % len(b), *b))
                           for n, (r, c, b) in weights.items()})
            for name, schemes in PROFILES.items():
                for scheme, rule in schemes.items():
                    runs = [["--profile", name]] + ([[]] if name == "fp8conv" else [])
                    fmt = FORMAT[scheme] if scheme == "mxfp8" else PROFILE_FORMAT.get(name, FORMAT[scheme])
                    sw = 1 if getattr(rule, "e8m0", False) else 2 if getattr(rule, "bf16", False) else 4
                    for extra in runs:
                        out = os.path.join(tmp, "out.safetensors")
                        if os.path.exists(out):
                            os.remove(out)
                        want = {n: expected(rule, b, r, c, scheme) for n, (r, c, b) in weights.items()
                                if scheme != "mxfp8" or c % 32 == 0}  # (a matrix MX groups do not divide: kept)
                        refused = any(w is None for w in want.values())
                        what = "%s --scheme %s%s, huge %g" % (" ".join(extra) or "(no --profile)", scheme,
                                                              "" if tiny_ok else " (no subnormal tile)", huge)
                        p = run(binary, ["quantize", "-q", "--scheme", scheme, "--format", fmt] +
                                extra + [src, out])
                        if refused:
                            check(p.returncode == 3 and ("profile's rule" in p.stderr or "read back as infinity" in p.stderr)
                                  and not os.path.exists(out),
                                  "%s: refused (exit 3, nothing left): exit %d %s" % (what, p.returncode, p.stderr.strip()))
                            continue
                        if p.returncode != 0:
                            check(False, "%s: exit %d: %s" % (what, p.returncode, p.stderr.strip()))
                            continue
                        got = read_st(out)
                        for n, (codes, scales) in want.items():
                            dt, _, raw = got[n]
                            # hf-fp8: block scales X_scale_inv, a per-tensor scale X_scale
                            sdt, _, sraw = got.get(n + "_scale_inv") or got[n + "_scale"]
                            diff = sum(x != y for x, y in zip(raw, codes)) + abs(len(raw) - len(codes))
                            sdiff = sum(sraw[i:i + sw] != scales[i:i + sw] for i in range(0, max(len(sraw), len(scales)), sw))
                            check(dt == "F8_E4M3" and sdt == {1: "U8", 2: "BF16", 4: "F32"}[sw] and diff == 0 and sdiff == 0,
                                  "%s: %s: %d code bytes and %d scales differ" % (what, n, diff, sdiff))
                            # the engine's own code, run for real (compressed-tensors on torch CPU)
                            eng = engine_bytes(src, tmp).get(scheme, {}).get(n) if name == "llm-compressor" else None
                            if eng is not None:
                                r, c, b = weights[n]
                                ediff, flushed = engine_diff(raw, bytes.fromhex(eng[0]), sraw, b, r, c, scheme)
                                check(ediff == 0 and bytes.fromhex(eng[1]) == sraw,
                                      "%s: %s: compressed-tensors' own quantize: %d code bytes differ%s" % (
                                          what, n, ediff, "" if bytes.fromhex(eng[1]) == sraw else ", scales differ"))
                                ENGINE["flushed"] = ENGINE.get("flushed", 0) + flushed
                        # verify --against --profile auto names the profile that wrote it
                        # (alone, for blocks: the edge tiles tell every block row apart)
                        p = run(binary, ["verify", "--json", "--format", fmt, "--scheme", scheme,
                                         "--against", src, "--profile", "auto", out])
                        found = (json.loads(p.stdout or "{}").get("requantized") or {}).get("profiles") or {}
                        tried = sorted(n for n, sch in PROFILES.items() if scheme in sch)
                        # alone for blocks and rows (the edge tiles and rows tell every row apart)
                        ok = sorted(found.get("tried", [])) == tried and (
                            found.get("reproduce") == [name] if scheme != "tensor" else name in found.get("reproduce", []))
                        check(ok, "%s: verify --profile auto finds %s of %s" % (what, found.get("reproduce"), found.get("tried")))
        # each engine row differs from the default somewhere (its rule is exercised)
        vals = [bf16_value(b) for b in realistic(random.Random(1), 64, 512)]
        # (vLLM's per-row rule only on rows under its floor: amax below 1/512)
        for name, schemes in PROFILES.items():
            for scheme, rule in schemes.items():
                if name == "fp8conv":
                    continue
                differs = False
                n = 32 if scheme == "mxfp8" else 128
                for g in range(0, len(vals), n):
                    grp = vals[g:g + n]
                    if rule is rule_vllm_channel:
                        grp = [v / 64 for v in grp]
                    a = max(abs(v) for v in grp)
                    mine, ref = rule(a), (rule_fp8conv_mx if scheme == "mxfp8" else rule_fp8conv)(a)
                    differs |= mine[0] != ref[0] or any(mine[1](v) != ref[1](v) for v in grp)
                check(differs, "%s %s: its rule differs from fp8conv's on realistic groups" % (name, scheme))
        # a scheme a profile does not define, and the rows not established: exit 2 naming them
        # deepgemm is --scale-fmt ue8m0 on groups of amax 1e-4 and above (the realistic weights),
        # not on the all-zero and tiny tiles (its 1e-4 floor: 2^-22 where fp8conv stores 1)
        for src, same in ((os.path.join(tmp, "in-0-3e+38.safetensors"), False),
                          (os.path.join(tmp, "real.safetensors"), True)):
            if same:
                bits = realistic(random.Random(5), 256, 384)
                write_st(src, {"model.layers.0.mlp.down_proj.weight": ("BF16", [256, 384],
                                                                       struct.pack("<%dH" % len(bits), *bits))})
            outs = []
            for args in (["--profile", "deepgemm"], ["--scale-fmt", "ue8m0"]):
                outs.append(os.path.join(tmp, "ue8m0-%d.safetensors" % len(outs)))
                p = run(binary, ["quantize", "-q"] + args + [src, outs[-1]])
                check(p.returncode == 0, "quantize %s: exit %d %s" % (" ".join(args), p.returncode, p.stderr.strip()))
            check((read_st(outs[0]) == read_st(outs[1])) == same,
                  "--profile deepgemm and --scale-fmt ue8m0 on %s: equal %s" % (src, not same))
            for o in outs:
                os.remove(o)
        src = os.path.join(tmp, "in-1-3.38953e+38.safetensors")
        for name, args, says in (("vllm", ["--scheme", "mxfp8"], "(it defines: block, channel, tensor)"),
                                 ("vllm", ["--scale-fmt", "ue8m0"], "--scale-fmt ue8m0 is fp8conv's"),
                                 ("deepgemm", ["--format", "compressed-tensors"], "--format hf-fp8 only"),
                                 ("te", ["--scheme", "mxfp8"], "(it defines: block, tensor, nvfp4)")) + tuple(
                                     (u, [], "(it defines: none)") for u in UNDEFINED):
            out = os.path.join(tmp, "refused.safetensors")
            p = run(binary, ["quantize", "-q", "--profile", name] + args + [src, out])
            check(p.returncode == 2 and says in p.stderr and not os.path.exists(out),
                  "--profile %s %s: exit %d %s" % (name, " ".join(args), p.returncode, p.stderr.strip()))
        # vLLM's per-tensor kernel on an all-zero matrix writes scale 0 and codes 0x7E (NaN,
        # clamped): fp8conv writes scale 1 and codes 0 (PROFILES); on one of bf16 subnormals it
        # has no finite 1 / scale: fp8conv refuses (exit 3)
        check(rule_vllm_tensor(0.0)[0] == 0 and rule_vllm_tensor(0.0)[1](0.0) == 0x7E,
              "vllm tensor: the engine's all-zero matrix is scale 0, codes 0x7E")
        for fill, code, want in ((0.0, 0, (b"\0" * 64, struct.pack("<f", 1.0))),
                                 (2.0 ** -133, 3, None)):
            zsrc, out = os.path.join(tmp, "flat.safetensors"), os.path.join(tmp, "flat-out.safetensors")
            write_st(zsrc, {"model.layers.0.mlp.down_proj.weight": (
                "BF16", [4, 16], struct.pack("<64H", *[bf16_bits(fill)] * 64))})
            p = run(binary, ["quantize", "-q", "--profile", "vllm", "--scheme", "tensor", zsrc, out])
            got = read_st(out) if p.returncode == 0 else {}
            pair = (got["model.layers.0.mlp.down_proj.weight"][2],
                    got["model.layers.0.mlp.down_proj.weight_scale"][2]) if got else None
            check(p.returncode == code and pair == want and (code == 0 or not os.path.exists(out)),
                  "--profile vllm --scheme tensor, all %g: exit %d %s" % (fill, p.returncode, p.stderr.strip()))
            if os.path.exists(out):
                os.remove(out)
        # verify: --profile needs --against; a profile that does not define the declared scheme
        out = os.path.join(tmp, "tensor.safetensors")
        run(binary, ["quantize", "-q", "--scheme", "tensor", src, out])
        for args, code, says in ((["--profile", "vllm"], 2, "it needs --against"),
                                 (["--profile", "auto"], 2, "it needs --against"),
                                 (["--against", src, "--profile", "vllms"], 2, "not one of"),
                                 (["--against", src, "--profile", "sglang"], 2,
                                  "does not define the tensor scheme it declares (it defines: block)")):
            p = run(binary, ["verify", "--format", "hf-fp8", "--scheme", "tensor"] + args + [out])
            check(p.returncode == code and says in p.stderr,
                  "verify %s: exit %d %s" % (" ".join(args), p.returncode, p.stderr.strip()))
        # convert --profile: every weight re-quantized from its values q * s (the "values" path)
        # takes the profile's rule on those fp32 values; one copied exactly keeps its bytes; a
        # convert that re-quantizes nothing says so (a note, exit 0) and writes the bytes it
        # writes without --profile; a scheme the profile lacks, or an input's ue8m0 claim an F32
        # profile cannot keep, is refused (exit 2, nothing left)
        src = os.path.join(tmp, "in-0-3e+38.safetensors")
        fp8 = {}
        for scheme, fmt in (("block", "hf-fp8"), ("channel", "modelopt")):
            fp8[scheme] = os.path.join(tmp, "fp8-%s.safetensors" % scheme)
            run(binary, ["quantize", "-q", "--scheme", scheme, "--format", fmt, src, fp8[scheme]])
        def values_of(path, n, rows, cols):  # q * s in fp32, as convert's values path reads them
            got = read_st(path)
            q = got[n][2]
            sraw = (got.get(n + "_scale_inv") or got[n + "_scale"])[2]
            sc = struct.unpack("<%df" % (len(sraw) // 4), sraw)
            nb = -(-cols // 128)
            return [f32(e4m3_decode(q[i]) * (sc[i // cols] if len(sc) == rows else
                                             sc[i // cols // 128 * nb + i % cols // 128]))
                    for i in range(rows * cols)]
        inputs = {k: {n: values_of(v, n, r, c) for n, (r, c) in shapes.items()} for k, v in fp8.items()}
        for name, schemes in PROFILES.items():
            for scheme, rule in schemes.items():
                if name in ("fp8conv", "llm-compressor") or scheme == "mxfp8":
                    continue  # (llm-compressor's rule here is its bf16 one; convert's values are F32)
                frm = "channel" if scheme == "block" else "block"  # groups that do not nest
                out = os.path.join(tmp, "conv.safetensors")
                if os.path.exists(out):
                    os.remove(out)
                p = run(binary, ["convert", "--json", "--scheme", scheme, "--format", FORMAT[scheme],
                                 "--profile", name, fp8[frm], out])
                what = "convert --profile %s --scheme %s from %s" % (name, scheme, frm)
                rule = rule_te if rule is rule_te_block else rule  # F32 values: TE's FLT_MAX
                want = {n: expected(rule, None, r, c, scheme, inputs[frm][n]) for n, (r, c) in shapes.items()}
                if any(w is None for w in want.values()):
                    check(p.returncode == 3 and not os.path.exists(out),
                          "%s: refused (exit 3, nothing left): exit %d %s" % (what, p.returncode, p.stderr.strip()))
                    continue
                j = json.loads(p.stdout or "{}")
                check(p.returncode == 0 and j.get("profile") == name and
                      all(w["path"] == "values" for w in j.get("weights", [])),
                      "%s: exit %d, json profile %s %s" % (what, p.returncode, j.get("profile"), p.stderr.strip()))
                got = read_st(out) if p.returncode == 0 else {}
                counts = {w["name"]: (w["changed"], w["max_change"]) for w in j.get("weights", [])}
                for n, (codes, scales) in want.items():
                    # its counts: values q * s (s as stored) that changed, the largest change
                    r, c = shapes[n]
                    sc = struct.unpack("<%df" % (len(scales) // 4), scales)
                    g = {"block": lambda i: i // c // 128 * -(-c // 128) + i % c // 128,
                         "channel": lambda i: i // c, "tensor": lambda i: 0}[scheme]
                    ys = [f32(e4m3_decode(codes[i]) * sc[g(i)]) for i in range(r * c)]
                    xs = inputs[frm][n]
                    check(counts.get(n) == (sum(y != x for y, x in zip(ys, xs)),
                                            max(abs(y - x) for y, x in zip(ys, xs))),
                          "%s: %s: json changed, max_change %s" % (what, n, counts.get(n)))
                    raw = got.get(n, (0, 0, b""))[2]
                    sraw = (got.get(n + "_scale_inv") or got.get(n + "_scale") or (0, 0, b""))[2]
                    check(raw == codes and sraw == scales, "%s: %s: %d code bytes differ, scales %s" % (
                        what, n, sum(x != y for x, y in zip(raw, codes)) + abs(len(raw) - len(codes)),
                        "equal" if sraw == scales else "differ"))
        # nothing re-quantized: the note, and the bytes convert writes without --profile
        outs = [os.path.join(tmp, "same-%d" % k) for k in range(2)]
        p = run(binary, ["convert", "--json", "--profile", "vllm", fp8["block"], outs[0]])
        q = run(binary, ["convert", "-q", fp8["block"], outs[1]])
        check(p.returncode == 0 and q.returncode == 0 and "fp8conv: note: --profile vllm: convert "
              "re-quantized no value" in p.stderr and json.loads(p.stdout)["requantized"] == 0 and
              read_st(outs[0]) == read_st(outs[1]),
              "convert --profile vllm, every weight exact: exit %d, the note: %s" % (p.returncode, p.stderr.strip()))
        # deepgemm makes hf-fp8 blocks ue8m0: float-scale blocks, block for block, re-quantized
        p = run(binary, ["convert", "--json", "--profile", "deepgemm", fp8["block"], outs[0] + "-dg"])
        j = json.loads(p.stdout or "{}")
        check(p.returncode == 0 and j.get("weights") and all(
            w["path"] == "values" and "ue8m0" in w["why"] for w in j["weights"]),
              "convert --profile deepgemm: float blocks re-quantized to ue8m0: exit %d %s" % (p.returncode, p.stderr.strip()))
        bf16_dir, ue8m0 = os.path.join(tmp, "bf16-dir"), os.path.join(tmp, "ue8m0-dir")
        os.mkdir(bf16_dir)  # a directory: its config.json declares scale_fmt ue8m0
        os.link(src, os.path.join(bf16_dir, "model.safetensors"))
        with open(os.path.join(bf16_dir, "config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, f)
        run(binary, ["quantize", "-q", "--scale-fmt", "ue8m0", bf16_dir, ue8m0])
        for args, says in ((["--profile", "te", "--scheme", "mxfp8", fp8["block"]], "does not define --scheme mxfp8 (it defines: block"),
                           (["--profile", "vllm", "--block", "64x256", ue8m0], "the input declares scale_fmt ue8m0")):
            out = os.path.join(tmp, "refused-convert")
            p = run(binary, ["convert"] + args + [out])
            check(p.returncode == 2 and says in p.stderr and not os.path.exists(out),
                  "convert %s: exit %d %s" % (" ".join(args), p.returncode, p.stderr.strip()))
        # ... but ue8m0 blocks copied exactly (finer blocks that nest) keep it under any profile
        out = os.path.join(tmp, "ue8m0-64")
        p = run(binary, ["convert", "--profile", "vllm", "--block", "64x64", ue8m0, out])
        q = run(binary, ["convert", "-q", "--block", "64x64", ue8m0, out + "-own"])
        check(p.returncode == 0 and "re-quantized no value" in p.stderr and all(
            read_st(os.path.join(out, f)) == read_st(os.path.join(out + "-own", f))
            for f in os.listdir(out) if f.endswith(".safetensors")),
              "convert --profile vllm --block 64x64 of ue8m0 blocks: exact, exit %d %s" % (
                  p.returncode, p.stderr.strip()))
        # SGLang's UE8M0 path (torch.log2 and torch.ceil) is --profile deepgemm's rule on every
        # bf16 amax (and the 1e-4 floor) ...
        amaxes = [bf16_value(b) for b in range(0, 0x7F80)] + [f32(1e-4)]
        same = [a for a in amaxes if (lambda x, y: x is None and y is None or (
            x and y and x[0] == y[0]))(rule_sglang_ue8m0(a), rule_deepgemm(a))]
        check(len(same) == len(amaxes), "sglang's log2/ceil ue8m0 scale is deepgemm's on %d of %d "
              "bf16 amaxes" % (len(same), len(amaxes)))
        # ... and its requantization of an FP8 checkpoint (block_quant_dequant to bf16, then
        # per_block_cast_to_fp8) is dequantize-for-export --dtype bf16, quantize --profile deepgemm
        dq, rq = os.path.join(tmp, "dq.safetensors"), os.path.join(tmp, "rq.safetensors")
        p = run(binary, ["dequantize-for-export", "-q", "--dtype", "bf16", fp8["block"], dq])
        q = run(binary, ["quantize", "-q", "--profile", "deepgemm", dq, rq])
        got = read_st(rq) if p.returncode == 0 and q.returncode == 0 else {}
        for n, (r, c) in shapes.items():
            bits = [bf16_bits(v) for v in inputs["block"][n]]
            want = expected(rule_sglang_ue8m0, bits, r, c, "block")
            check(got and want and (got[n][2], got[n + "_scale_inv"][2]) == want,
                  "sglang's requant_weight_ue8m0 of %s: dequantize-for-export --dtype bf16, quantize "
                  "--profile deepgemm: %s" % (n, "refused" if not want else "differs" if got else p.stderr + q.stderr))
        # numpy float32 and ml_dtypes, where present, take the same steps
        amaxes = [f32(a) for a in (0.0, 1e-39, 5e-11, 1e-10, 5e-5, 0.0123, 1.0, 448.0, 3.3895313892515355e38)]
        xs = [bf16_value(bf16_bits(v)) for v in (0.0, -0.0, 1e-3, -0.05, 0.0123, 2.5, -448.0, 3e38)]
        for rule in sorted({r for sch in PROFILES.values() for r in sch.values()
                            if not getattr(r, "e8m0", False)}, key=lambda r: r.__name__):
            agree = numpy_agrees(rule, amaxes, xs)
            if agree is None:
                print("numpy/ml_dtypes not importable: the numpy cross-check is not run (said, not a failure)")
                break
            check(agree, "%s: the numpy float32 / ml_dtypes steps agree" % rule.__name__)
        check_te_nvfp4(binary, tmp, check)
    # the GPU kit's check of the engines' own quantizers (tests/gpu/engines_cuda.py: it runs only
    # where a CUDA GPU and torch are) at least compiles here
    gpu = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu", "engines_cuda.py")
    try:
        compile(open(gpu).read(), gpu, "exec")
        check(True, "")
    except SyntaxError as e:
        check(False, "tests/gpu/engines_cuda.py does not compile: %s" % e)
    if ENGINE.get("ran"):
        print("compressed-tensors run for real on %d inputs: %d codes differ only as -0 against its +0 "
              "(a subnormal quotient its CPU bf16 cast flushed)" % (ENGINE["ran"], ENGINE.get("flushed", 0)))
    print("check-profiles end to end: %d passed, %d failed" % (passed, len(failed)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
