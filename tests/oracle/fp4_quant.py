#!/usr/bin/env python3
"""Independent numpy + ml_dtypes model of the named FP4 reference quantizer (issue 26 item 3).

The reference is llm-compressor 0.14.0.1's data-free path `model_free_ptq`
(llmcompressor/entrypoints/model_free/) with the preset schemes "NVFP4A16" and "MXFP4A16",
run on CPU with the compressed-tensors it pins, 0.19.0 (not the 0.17.0 vLLM 0.32.0 pins: the
model_free path imports compressed_tensors.entrypoints.convert.exec_jobs_dynamic and
TensorProfiler, which 0.17.0 does not have). Every step below names the file and function of
that pair it follows; tests/loaders/fp4_quant_ref.py checks this module byte for byte against
the real thing; fp8conv-formats(5), FP4 QUANTIZATION states the same steps in prose. It imports
neither torch nor compressed_tensors: numpy for the arithmetic, ml_dtypes for bfloat16 and
float8_e4m3fn (round to nearest even, as torch's casts).

The weight's dtype D (bfloat16, float16 or float32) matters: torch computes every op on D
tensors in float32 and rounds the result to D, so `_op` below does exactly that.

Public functions (w is a 2-D numpy array of dtype ml_dtypes.bfloat16, np.float16 or np.float32,
[N, K], K a multiple of the group size):
  absmax(w)                         -> the tensor's max |x|, in D (exact)
  nvfp4_quantize(w, fused_absmax)   -> (packed uint8 [N, K/2], scale float8_e4m3fn [N, K/16],
                                        global float32 [1]); fused_absmax: the max of absmax()
                                        over the fused set (q/k/v, gate/up, w1/w3,
                                        wq_a/wkv_a_with_mqa), or None for the tensor's own
  mxfp4_quantize(w)                 -> (packed uint8 [N, K/2], scale uint8 [N, K/32])
"""
import numpy as np
import ml_dtypes

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)

NVFP4_GROUP = 16
MXFP4_GROUP = 32
FP4_MAX = 6.0      # quant_args.py FP4_E2M1_DATA.max
E4M3_MAX = 448.0   # quant_args.py FP8_E4M3_DATA.max

# (mantissa bits, exponent bits, unsigned int view) of quant_args.py BFLOAT16_DATA,
# FLOAT16_DATA, FLOAT32_DATA, as mxfp_utils.py round_to_power_2 reads them.
# torch.finfo(D).tiny: the smallest normal
_TINY = {BF16: np.float32(2.0 ** -126), F16: np.float32(2.0 ** -14), F32: np.float32(2.0 ** -126)}
_BITS = {BF16: (7, 8, np.uint16), F16: (10, 5, np.uint16), F32: (23, 8, np.uint32)}


def _dtype(w):
    d = np.dtype(w.dtype)
    if d not in _BITS:
        raise TypeError(f"FP4 oracle: weight dtype {d} is not bfloat16, float16 or float32")
    return d


def _op(x, d):
    """A torch op on a D tensor: the float32 result rounded (RNE) to D."""
    return np.asarray(x, dtype=F32).astype(d)


def absmax(w):
    """observers/min_max.py _get_min_max (amin/amax) and observers/base.py get_global_scale:
    max(max_vals.max(), -min_vals.min()), exact in D."""
    return np.max(np.abs(w)).astype(_dtype(w))


def _group_absmax(w, g):
    """The observer's per-group statistics (observers/helpers.py _flatten_weight: value.unflatten(
    -1, (-1, group_size))), then calculate_qparams (compressed_tensors quantization/utils/
    helpers.py): max(|min(min_vals, 0)|, |max(max_vals, 0)|) = the group's max |x|, in D."""
    n, k = w.shape
    if k % g:
        raise ValueError(f"FP4 oracle: K={k} is not a multiple of the group size {g}")
    return np.max(np.abs(w.reshape(n, k // g, g)), axis=-1).astype(w.dtype)


def _e2m1_codes(q):
    """quant_args.py FP4_E2M1_DATA.cast_to_fp4 -> quantization/utils/fp4_utils.py cast_to_fp4
    (the CPU body: thresholds on |x|, ties to even: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2,
    3.5->4, 5->4), then compressors/nvfp4/helpers.py pack_fp4_to_uint8's index: magnitude code
    0..7 for 0, .5, 1, 1.5, 2, 3, 4, 6, and bit 3 = torch.signbit of the rounded value.
    The rounded value is |x| rounded times torch.sign(x): a negative x that rounds to 0 gives
    -0.0 (code 8); x = -0.0 gives torch.sign(-0.0) = 0, so +0.0 (code 0); both checked against
    torch by tests/loaders/fp4_quant_ref.py."""
    a = np.abs(q.astype(np.float64))
    mag = np.select(
        [a <= 0.25, a < 0.75, a <= 1.25, a < 1.75, a <= 2.5, a < 3.5, a <= 5.0],
        [0, 1, 2, 3, 4, 5, 6], 7).astype(np.uint8)
    neg = q.astype(np.float64) < 0   # -0.0 < 0 is False: sign(-0.0) = 0
    return mag | (neg.astype(np.uint8) << 3)


def _pack(codes):
    """compressors/nvfp4/helpers.py pack_fp4_to_uint8: pairs along K, the even element in the
    low nibble."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def nvfp4_global(a, d):
    """quantization/utils/helpers.py generate_gparam, called by observers/base.py get_global_scale
    with the fused absmax a (in D): a = clamp(a, min=finfo(D).tiny); g = 2688.0 / a, which torch
    evaluates as a.reciprocal() * 2688.0 (Tensor.__rtruediv__), each op rounded to D;
    nan_to_num(nan=posinf=neginf=1.0); .to(float32). For float16 2688/a overflows (-> 1.0)
    for every a below about 0.041."""
    with np.errstate(over="ignore", divide="ignore"):
        a = max(np.float32(a), _TINY[d])
        r = _op(np.float32(1.0) / np.float32(a), d)
        g = _op(np.float32(r) * np.float32(E4M3_MAX * FP4_MAX), d)
    g = np.float32(g)
    if not np.isfinite(g):
        g = np.float32(1.0)
    return np.array([g], dtype=F32)


def nvfp4_quantize(w, fused_absmax=None):
    d = _dtype(w)
    a = absmax(w) if fused_absmax is None else fused_absmax
    g = nvfp4_global(a, d)[0]
    m = _group_absmax(w, NVFP4_GROUP)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        # calculate_qparams step 1: max_val_pos / (bit_range.to(D) / 2), bit_range = 6 - (-6):
        # a D division by 6
        s = _op(m.astype(F32) / np.float32(6.0), d)
        # step 2: global_scale * scales: float32 [1] times D -> a float32 multiply
        s = np.float32(g) * s.astype(F32)
        # step 3: quant_args.py round_to_quantized_type_dtype(scales, float8_e4m3fn):
        # clamp to [-448, 448], cast RNE (back to float32)
        s = np.clip(s, -E4M3_MAX, E4M3_MAX).astype(E4M3)
        # step 5: scales == 0 -> _get_dtype_eps(float8_e4m3fn) = 0.125
        s = np.where(s.astype(F32) == 0, np.float32(0.125), s.astype(F32)).astype(E4M3)
        # compressors/nvfp4/base.py compress -> quantization/lifecycle/forward.py quantize ->
        # forward_helpers.py _process_group / _quantize: scale = scale / global_scale (float32:
        # the D weight_scale parameter holds the E4M3 value exactly, the global is float32),
        # then x / scale (D weight / float32 -> float32), clamp to [-6, 6], cast_to_fp4
        se = s.astype(F32) / np.float32(g)
        n, k = w.shape
        q = w.astype(F32).reshape(n, k // NVFP4_GROUP, NVFP4_GROUP) / se[:, :, None]
        q = np.clip(q, -FP4_MAX, FP4_MAX).reshape(n, k)
    return _pack(_e2m1_codes(q)), s, np.array([g], dtype=F32)


def _round_to_power_2(m, d):
    """quantization/utils/mxfp_utils.py round_to_power_2: on the bit pattern of D, add
    1 << (mantissa - FP4 mantissa - 1) = 1 << (mantissa - 2) and keep sign and exponent: a
    mantissa of .75 or more rounds up to the next power of two (the largest finite values
    to inf); subnormals go to 0 or to the smallest normal."""
    mant, expo, ut = _BITS[d]
    bits = m.view(ut).astype(np.int64)
    keep = ((1 << (expo + 1)) - 1) << mant
    return ((bits + (1 << (mant - 2))) & keep).astype(ut).view(d)


def mxfp4_quantize(w):
    d = _dtype(w)
    m = _group_absmax(w, MXFP4_GROUP)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        # mxfp_utils.py generate_mx_scales: 127 + floor(log2(round_to_power_2(m))) - 2
        # (offset floor(log2 6) = 2); exact in D (log2 of 0 -> -inf, of inf -> inf)
        p = _round_to_power_2(m, d).astype(np.float64)
        e = 127.0 + np.floor(np.log2(p)) - 2.0
        # quant_args.py round_to_quantized_type_dtype(scales, uint8): round(clamp(e, 0, 255))
        e = np.round(np.clip(e, 0, 255))
        # mxfp_utils.py maybe_convert_from_mx_exp: 2.0 ** (e - 127) in float32, then to D
        # (float16: 0 below 2^-24; e = 255: inf)
        s = _op(np.float32(2.0) ** (e - 127).astype(F32), d)
        # helpers.py calculate_qparams step 5: scales == 0 -> _get_dtype_eps(uint8) = 1
        s = np.where(s.astype(F32) == 0, np.float32(1.0), s.astype(F32)).astype(d)
        # compressors/mx_utils.py compress_mx_scale: 127 + floor(log2(scale)).to(int32), to
        # uint8; log2(inf) = inf, whose int32 cast on x86 is INT32_MIN: the byte is 127
        lg = np.floor(np.log2(s.astype(np.float64)))
        lg = np.where(np.isfinite(lg), lg, -2.0 ** 31).astype(np.int64)
        byte = ((127 + lg) & 0xFF).astype(np.uint8)
        # forward_helpers.py _quantize: x / scale, both D (float32 division rounded to D),
        # clamp to [-6, 6], cast_to_fp4
        n, k = w.shape
        q = _op(w.astype(F32).reshape(n, k // MXFP4_GROUP, MXFP4_GROUP) / s.astype(F32)[:, :, None], d)
        q = np.clip(q.astype(F32), -FP4_MAX, FP4_MAX).reshape(n, k)
    return _pack(_e2m1_codes(q)), byte
