#!/usr/bin/env python3
"""The FP4 judges (issue 25, item 5): do the loaders' own FP4 decoders give the values
`fp8conv dequantize-for-export` writes?

    python fp4_check.py --fp8conv BIN --work DIR [--readme README.md [--update-readme]]
                        [--no-vllm]

Each copy (testdata/releases, written by testdata/gen_fp4.py, and stress copies this script
writes under WORK from them: every E2M1 code, code 8 (-0) included, every E8M0 scale byte a bf16
can hold the product of, random E4M3 block scales and full-mantissa fp32 global scales) is
exported to bf16 by fp8conv, and judged:

gpt-oss (quant_method mxfp4)
    transformers GptOssForCausalLM.from_pretrained(copy,
    quantization_config=Mxfp4Config(dequantize=True)) on the CPU, against the same class loading
    fp8conv's export as a plain bf16 checkpoint: every tensor of the two state dicts bit for bit
    (the experts' gate_up_proj [E, H, 2I] and down_proj [E, I, H] counted apart), no missing or
    unexpected key in either load, and both against this file's own decode (an independent
    numpy oracle).
compressed-tensors mxfp4-pack-quantized / nvfp4-pack-quantized
    the compressor registered for the config's format (BaseCompressor.get_value_from_registry),
    decompress({weight_packed, weight_scale[, weight_global_scale]}, scheme) per linear, on the CPU.
    MXFP4: bit for bit. NVFP4: compressed-tensors computes e2m1 * fp32(weight_scale /
    weight_global_scale) in fp32 and rounds that to bf16 (lifecycle/forward_helpers.py _dequantize:
    scale = scale / global_scale, then x_q.to(scale.dtype) * scale, then .to(dtype)); fp8conv
    rounds the exact value once (issue 25 item 2). Every element where the two differ is counted,
    must be 1 bf16 ulp apart, and must be one where the fp32 chain, recomputed here in numpy, is
    itself 1 ulp from the exact value (so the order explains it); elsewhere they must be equal.
    The judge's own output must equal that numpy chain everywhere (it computes what its source
    says), and fp8conv's the exact value everywhere.
vLLM's CPU build (vllm_check.py in a child process; unless --no-vllm)
    the gpt-oss copy and the NVFP4 copy as they are (vLLM 0.32's CPU build has no FP4 kernel
    for either on a CPU without AMX: the error is reported as the missing kernel, with the class
    that lacks it), vLLM's own name mapping for gpt-oss (GptOssForCausalLM.hf_to_vllm_mapper)
    over every tensor of the copy, the gpt-oss export (vLLM loads and generates with it), and
    the NVFP4 copies with VLLM_BATCH_INVARIANT=1, which makes vLLM take its emulation kernel:
    the weights its loaders fill (fused qkv / gate_up shards, each with its own global scale)
    are decoded exactly by vllm_check.py (Probe.nvfp4_linear) and must equal the export bit for
    bit; the model then cannot run here (batch-invariant mode calls Triton kernels), said as
    such. Both producers: compressed-tensors (CompressedTensorsW4A4Fp4: weight_packed,
    weight_global_scale a divisor) and ModelOpt (nvfp4-modelopt, nvfp4-modelopt-amax, and
    nvfp4-modelopt-stress, written here: 4 layers of random codes, E4M3 block scales and
    full-mantissa weight_scale_2 shared per fused layer;
    ModelOptNvFp4Config's ModelOptLinearMethod, weight and weight_scale_2 a multiplier; vLLM is
    their one judge here, transformers having no ModelOpt quantizer), with a negative control
    (one element 1 ulp off in k_proj and in up_proj: found in qkv_proj and gate_up_proj only).

fused 3-D experts (issue 26)
    fp8conv quantize --scheme nvfp4 / mxfp4 of a Qwen3-MoE model with transformers v5's fused
    experts [E, out, in] and of Llama-4's [E, in, out], written one weight per expert: the
    compressed-tensors judge above on the output, and judge_fused_source: the experts a loader
    rebuilds (transformers' own merge for Qwen3-MoE; vLLM llama4.py's rule, in numpy, for Llama-4)
    within each group's FP4 error bound of the fused source, with a control that must fail.

KNOWN: a copy fp8conv refuses today, with the reason; such a judge is reported KNOWN, not
failed, and the run fails when it passes (then take it out of KNOWN), as check_releases.py does.
Writes WORK/fp4.md (the README block loaders-fp4) and WORK/fp4.json; prints 'N passed, N failed';
exit 1 when a judge fails.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RELEASES = os.path.join(ROOT, "testdata", "releases")
SAMPLE = os.path.join(ROOT, "testdata", "llama-tiny")  # bf16, what quantize starts from
MOE_SAMPLE = os.path.join(ROOT, "testdata", "deepseek-moe-tiny")  # bf16, one weight per expert
PY = sys.executable
sys.path.insert(0, HERE)
import forkserver  # noqa: E402

VLLM = forkserver.Judge(os.path.join(HERE, "vllm_check.py"))  # its fork server

# copies fp8conv refuses today, with the reason (none: compressed-tensors mxfp4-pack-quantized,
# once KNOWN here, is read since fp4.c's row for it)
KNOWN = {}

# ------------------------------------------------------------------------------------------
# layout facts (each cited where it is used), decoded here in numpy, independently of fp8conv
# (lib/compute/fp4_ref.c) and of the loaders judged

# E2M1 codes 0-7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; 8-15 their negatives, code 8 = -0 (OCP MX spec
# v1.0 table; transformers integrations/mxfp4.py FP4_VALUES lists -0.0 for code 8;
# compressed-tensors compressors/nvfp4/helpers.py unpack_fp4_from_uint8 multiplies the magnitude
# by torch.where(sign, -1.0, 1.0), which gives -0.0 for code 8 too).
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def unpack_e2m1(packed):
    """U8 [..., n] -> codes [..., 2n]: element 2i in the low nibble, 2i+1 in the high one
    (transformers integrations/mxfp4.py _convert_moe_packed_tensors: sub[:, 0::2] = lut[blk &
    0x0F], sub[:, 1::2] = lut[blk >> 4]; compressed-tensors helpers.py unpack_fp4_from_uint8
    stacks (low, high))."""
    p = np.asarray(packed, np.uint8)
    return np.stack([p & 0x0F, p >> 4], axis=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)


def e8m0(b):
    """E8M0 byte b -> 2^(b - 127) (OCP MX spec; transformers mxfp4.py scales.to(int32) - 127;
    compressed-tensors compressors/mx_utils.py decompress_mx_scale, bias 127 since #538). 0xFF
    (NaN) never occurs in the copies judged here."""
    b = np.asarray(b, np.int64)
    assert not np.any(b == 255)
    return np.exp2((b - 127).astype(np.float64))


def e4m3(bytes_):
    """F8_E4M3 (fn: no infinities, 0x7F/0xFF NaN) bytes -> float64: bias 7, subnormals m/8 * 2^-6
    (OCP 8-bit floating point spec v1.0, E4M3; torch.float8_e4m3fn, which compressed-tensors'
    scale_dtype "torch.float8_e4m3fn" names)."""
    b = np.asarray(bytes_, np.uint8).astype(np.int64)
    s = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = (b & 7).astype(np.float64)
    assert not np.any((b & 0x7F) == 0x7F)
    return s * np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * np.exp2((e - 7).astype(np.float64)))


def f32_to_bf16_bits(x):
    """float32 -> bf16 bit patterns, round to nearest even (what torch's .to(bfloat16) does for
    finite values)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f64(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def exact_bf16_bits(num, den=None):
    """num / den (num, den float64 arrays, num exact: e2m1 * scale; den an fp32 value) rounded ONCE
    to bf16 (8 significant bits, subnormal quantum 2^-133). The float64 quotient q is within half
    a float64 ulp of the true one, so rounding q can be wrong only where q is exactly a bf16 tie;
    there t * den (t the tie point: 8 + 24 bits, exact in float64) is compared with num, exactly."""
    num = np.asarray(num, np.float64)
    q = num if den is None else num / np.asarray(den, np.float64)
    _, e = np.frexp(q)
    quantum = np.exp2(np.maximum(e - 8, -133).astype(np.float64))
    k = q / quantum                                  # exact: a power-of-two division
    r = np.rint(k)                                   # ties to even
    if den is not None:
        tie = np.abs(k - np.trunc(k)) == 0.5
        if np.any(tie):
            t = q[tie]                               # the tie point itself
            d = np.broadcast_to(np.asarray(den, np.float64), q.shape)[tie]
            prod = t * d                             # exact (8 + 24 significant bits)
            true_above = np.abs(num[tie]) > np.abs(prod)   # |true quotient| beyond the tie
            true_below = np.abs(num[tie]) < np.abs(prod)
            kt = k[tie]
            away = np.sign(kt) * np.ceil(np.abs(kt))
            toward = np.sign(kt) * np.floor(np.abs(kt))
            rt = r[tie]
            rt = np.where(true_above, away, np.where(true_below, toward, rt))
            r[tie] = rt
    v = (r * quantum).astype(np.float32)             # exact: at most 8 significant bits
    v = np.where(num == 0, np.copysign(np.float32(0), num), v).astype(np.float32)
    assert np.all(np.isfinite(v))
    return f32_to_bf16_bits(v)                       # exact too: v is a bf16 value


def fraction_bf16(num, den=1.0):
    """The same rounding by rational arithmetic, one element (a cross-check of exact_bf16_bits on
    a sample): num / den rounded to nearest even at 8 significant bits, quantum >= 2^-133."""
    from fractions import Fraction
    x = Fraction(float(num)) / Fraction(float(den))
    if x == 0:
        return float(num) * 0.0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1                                       # now 2^e <= a < 2^(e+1)
    quantum = Fraction(2) ** max(e - 7, -133)
    k = a / quantum
    n = k.numerator // k.denominator
    rem = k - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2):
        n += 1
    return float(n * quantum) * (1 if x > 0 else -1)


def ordered(bits):
    """bf16 bit patterns -> integers in value order (so neighbours are 1 apart, -0 = +0 - 1 ... a
    sign change counts through zero)."""
    b = np.asarray(bits, np.uint16).astype(np.int64)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


# ------------------------------------------------------------------------------------------
# helpers


def st_read(path):
    """safetensors -> {name: (dtype string, numpy array of the raw element type)}; F8 and BF16 as
    uint8 / uint16 bit patterns (numpy has neither). The format (huggingface/safetensors
    README.md): an 8-byte little-endian header length, a JSON header of {name: {dtype, shape,
    data_offsets}} (offsets from the end of the header) and an optional __metadata__, then data."""
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        base = 8 + n
        out = {}
        raw = {"U8": np.uint8, "I8": np.int8, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8,
               "BF16": np.uint16, "F16": np.float16, "F32": np.float32, "F64": np.float64,
               "I32": np.int32, "I64": np.int64}
        for k, v in head.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            f.seek(base + a)
            out[k] = (v["dtype"], np.frombuffer(f.read(b - a), raw[v["dtype"]]).reshape(v["shape"]))
    return out


def st_write(path, tensors):
    """{name: (dtype string, numpy array)} -> safetensors (sorted names, 8-byte aligned header)."""
    import struct
    head, off, blobs = {}, 0, []
    for k in sorted(tensors):
        dt, a = tensors[k]
        b = np.ascontiguousarray(a).tobytes()
        head[k] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    head["__metadata__"] = {"format": "pt"}
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def read_export(d):
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            out.update(st_read(os.path.join(d, f)))
    return out


def export(fp8conv, src, dst):
    """fp8conv dequantize-for-export SRC DST --dtype bf16 -> (ok, one line)."""
    shutil.rmtree(dst, ignore_errors=True)
    r = subprocess.run([fp8conv, "dequantize-for-export", src, dst, "--dtype", "bf16"],
                       capture_output=True, text=True)
    msg = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or [""])[-1]
    return r.returncode == 0, ("exit %d: %s" % (r.returncode, msg)) if r.returncode else "written"


def raw_bits(t):
    """A tensor's bits, any dtype (bf16 has no numpy type: its 16 bits)."""
    import torch
    if t.dtype == torch.bfloat16:
        return torch_bits(t)
    return t.detach().contiguous().numpy().view(np.uint8)


def torch_bits(t):
    import torch
    assert t.dtype == torch.bfloat16, t.dtype
    return t.detach().contiguous().view(torch.int16).numpy().view(np.uint16)


@contextlib.contextmanager
def quiet():
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        yield buf


# ------------------------------------------------------------------------------------------
# stress copies: the release copies' names, shapes and configs with every code and a wide range
# of scales


NVFP4_STRESS_LAYERS = 16     # 16 x 64512 elements


def stress_gpt_oss(src, dst, seed=25):
    rng = np.random.default_rng(seed)
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dst)
    t = st_read(os.path.join(src, "model.safetensors"))
    for k, (dt, a) in list(t.items()):
        if k.endswith("_blocks"):
            t[k] = (dt, rng.integers(0, 256, a.shape, dtype=np.uint8))      # all 16 codes
        elif k.endswith("_scales"):
            # E8M0 bytes 0..252 (253 and up: 6 * 2^126 overflows bf16), in a shuffled sweep
            t[k] = (dt, rng.permutation(np.resize(np.arange(0, 253, dtype=np.uint8), a.size))
                    .reshape(a.shape).astype(np.uint8))
    st_write(os.path.join(dst, "model.safetensors"), t)


def stress_ct(src, dst, nvfp4, layers=1, seed=2525):
    """With layers > 1 the copy's one layer is repeated (num_hidden_layers in the config too),
    each with its own random codes and scales: the fp32 chain of NVFP4 is off the exact value
    rarely (see the global scale below); more layers, more (code, scale, global) triples."""
    rng = np.random.default_rng(seed)
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["num_hidden_layers"] = layers
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    t0 = st_read(os.path.join(src, "model.safetensors"))
    t = {}
    for k, v in t0.items():
        if k.startswith("model.layers.0."):
            for L in range(layers):
                t["model.layers.%d.%s" % (L, k[len("model.layers.0."):])] = v
        else:
            t[k] = v
    for k, (dt, a) in list(t.items()):
        if k.endswith(".weight_packed"):
            t[k] = (dt, rng.integers(0, 256, a.shape, dtype=np.uint8))
        elif k.endswith(".weight_scale") and nvfp4:
            # positive finite E4M3 (0x01..0x7E: subnormals and normals; 0x7F is NaN)
            t[k] = (dt, rng.integers(1, 0x7F, a.shape, dtype=np.uint8))
        elif k.endswith(".weight_scale"):
            t[k] = (dt, rng.permutation(np.resize(np.arange(0, 253, dtype=np.uint8), a.size))
                    .reshape(a.shape).astype(np.uint8))
        elif k.endswith(".weight_global_scale"):
            # a full 24-bit mantissa near 6 * 448 / amax of a real weight (~1e5), chosen so that
            # e2m1 * scale / global lands next to a bf16 rounding boundary for one (code, scale)
            # pair, and so for every element holding it: G = fp32(e0 * s0 / m0) (m0 a bf16
            # midpoint), sometimes moved by one fp32 ulp. With a random G the fp32 chain is off
            # the exact value about once in 2^16 elements at most (e2m1 * scale has some 16
            # distinct mantissas per tensor); here in a few percent.
            s0 = e4m3(np.uint8(rng.integers(0x08, 0x7F)))
            e0 = rng.choice([1.0, 1.5, 3.0, 6.0])
            m0 = 1 + (2 * int(rng.integers(0, 128)) + 1) / 256.0
            g = np.float32(e0 * float(s0) / m0 * 2.0 ** int(rng.integers(14, 18)))
            if rng.random() < 0.5:
                g = np.nextafter(g, np.float32(np.inf) if rng.random() < 0.5 else np.float32(0))
            t[k] = (dt, np.array([g], np.float32))
    st_write(os.path.join(dst, "model.safetensors"), t)


def stress_modelopt(src, dst, layers=4, seed=2526):
    """nvfp4-modelopt-amax's names, shapes and config with `layers` layers of random codes (all
    16), random positive finite E4M3 block scales (0x01..0x7E: subnormals and normals) and a
    full-mantissa fp32 weight_scale_2 per fused layer (q/k/v share one, gate/up one, as ModelOpt
    writes them: export/quant_utils.py preprocess_linear_fusion), for vLLM's ModelOpt judge."""
    rng = np.random.default_rng(seed)
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["num_hidden_layers"] = layers
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    shutil.copy(os.path.join(src, "hf_quant_config.json"), dst)
    t0 = st_read(os.path.join(src, "model.safetensors"))
    t = {}
    for k, v in t0.items():
        if k.startswith("model.layers.0."):
            for L in range(layers):
                t["model.layers.%d.%s" % (L, k[len("model.layers.0."):])] = v
        else:
            t[k] = v
    fused = {"q_proj": "qkv", "k_proj": "qkv", "v_proj": "qkv", "gate_proj": "gate_up",
             "up_proj": "gate_up"}
    g2 = {}
    for k, (dt, a) in sorted(t.items()):
        if k.endswith(".weight") and dt == "U8":
            t[k] = (dt, rng.integers(0, 256, a.shape, dtype=np.uint8))
        elif k.endswith(".weight_scale"):
            t[k] = (dt, rng.integers(1, 0x7F, a.shape, dtype=np.uint8))
        elif k.endswith(".weight_scale_2"):
            mod = k[: -len(".weight_scale_2")]
            layer, last = mod.rsplit(".", 1)
            key = (layer.rsplit(".", 1)[0], fused.get(last, last))
            if key not in g2:
                g2[key] = np.float32((1 + rng.random()) * 2.0 ** int(rng.integers(-12, -5)))
            t[k] = (dt, np.array(g2[key], np.float32).reshape(a.shape))
    st_write(os.path.join(dst, "model.safetensors"), t)


# ------------------------------------------------------------------------------------------
# judge: transformers' gpt-oss dequantizing load


def gpt_oss_oracle(q):
    """{bf16 name: bf16 bits} from the copy's blocks/scales: value = e2m1 * 2^(scale - 127)
    (exact in bf16 for the scale bytes used), [E, rows, G, 16] -> [E, rows, G*32] -> transposed
    to [E, in, rows] (transformers mxfp4.py _convert_moe_packed_tensors: out.reshape(*prefix, G *
    B * 2).transpose(1, 2); gate and up stay interleaved in the columns: GptOssExperts reads
    gate_up[..., ::2] as gate, [..., 1::2] as up, models/gpt_oss/modeling_gpt_oss.py)."""
    out = {}
    for k, (dt, a) in q.items():
        if not k.endswith("_blocks"):
            continue
        base = k[: -len("_blocks")]
        codes = unpack_e2m1(a)                                    # [E, rows, G, 32]
        v = E2M1[codes] * e8m0(q[base + "_scales"][1])[..., None]
        v = v.reshape(a.shape[0], a.shape[1], -1).transpose(0, 2, 1)
        out[base] = exact_bf16_bits(v)
    return out


def judge_gpt_oss(name, copy, exp):
    import torch
    from transformers import GptOssForCausalLM, Mxfp4Config
    res = {"copy": name, "layout": "gpt-oss MXFP4 experts (quant_method mxfp4)",
           "judge": "transformers GptOssForCausalLM + Mxfp4Config(dequantize=True)"}
    with quiet():
        m, info = GptOssForCausalLM.from_pretrained(
            copy, quantization_config=Mxfp4Config(dequantize=True), dtype=torch.bfloat16,
            output_loading_info=True)
        e, info_e = GptOssForCausalLM.from_pretrained(exp, dtype=torch.bfloat16,
                                                      output_loading_info=True)
    problems = []
    for who, inf in (("dequantizing load", info), ("export load", info_e)):
        for kind in ("missing_keys", "unexpected_keys", "mismatched_keys"):
            if inf.get(kind):
                problems.append("%s: %s %s" % (who, kind, sorted(inf[kind])[:4]))
    sd, sde = m.state_dict(), e.state_dict()
    oracle = gpt_oss_oracle(st_read(os.path.join(copy, "model.safetensors")))
    n_t = n_el = n_exp = 0
    for k in sorted(set(sd) | set(sde)):
        if k not in sd or k not in sde:
            problems.append("%s only in one state dict" % k)
            continue
        a, b = torch_bits(sd[k]), torch_bits(sde[k])
        n_t += 1
        if a.shape != b.shape or not np.array_equal(a, b):
            d = "shape %s vs %s" % (a.shape, b.shape) if a.shape != b.shape else \
                "%d of %d elements differ" % (int(np.sum(a != b)), a.size)
            problems.append("%s: transformers' dequantizing load vs the export: %s" % (k, d))
            continue
        n_el += a.size
        if k.endswith(".mlp.experts.gate_up_proj") or k.endswith(".mlp.experts.down_proj"):
            n_exp += a.size
            o = oracle.get(k)
            if o is None or o.shape != a.shape or not np.array_equal(o, a):
                problems.append("%s: differs from this file's own decode" % k)
    if not any(k.endswith("experts.gate_up_proj") for k in sd):
        problems.append("no expert weight in the dequantizing load")
    res.update(ok=not problems, problems=problems, tensors=n_t, elements=n_el,
               expert_elements=n_exp,
               result="bit-equal: %d tensors, %d elements (%d in experts)" % (n_t, n_el, n_exp)
               if not problems else "; ".join(problems[:3]))
    return res


def judge_transformers_ct(name, copy, exp):
    """fp8conv quantize's FP4 output through transformers' compressed-tensors quantizer
    (quantizers/quantizer_compressed_tensors.py, CompressedTensorsConfig(run_compressed=False):
    decompressed at load), against the same class loading fp8conv's export: every weight of the
    two state dicts bit for bit (the decompressed model keeps its now unused weight_scale /
    weight_global_scale parameters beside them: those are not weights), no missing or
    unexpected key, and the logits of one prompt bit for bit."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils.quantization_config import CompressedTensorsConfig
    res = {"copy": name, "judge": "transformers AutoModelForCausalLM + CompressedTensorsConfig"
                                  "(run_compressed=False)"}
    with quiet():
        m, info = AutoModelForCausalLM.from_pretrained(
            copy, dtype=torch.bfloat16, output_loading_info=True,
            quantization_config=CompressedTensorsConfig(run_compressed=False))
        e, info_e = AutoModelForCausalLM.from_pretrained(exp, dtype=torch.bfloat16,
                                                         output_loading_info=True)
    problems = ["%s: %s %s" % (who, kind, sorted(inf[kind])[:4])
                for who, inf in (("decompressing load", info), ("export load", info_e))
                for kind in ("missing_keys", "unexpected_keys", "mismatched_keys") if inf.get(kind)]
    sd, sde = m.state_dict(), e.state_dict()
    n_t = n_el = 0
    for k in sorted(set(sd) | set(sde)):
        if k not in sde and (k.endswith("_scale") or k.endswith("_global_scale")):
            continue
        if k not in sd or k not in sde:
            problems.append("%s only in one state dict" % k)
            continue
        a, b = raw_bits(sd[k]), raw_bits(sde[k])
        if sd[k].dtype != sde[k].dtype:
            problems.append("%s: %s vs %s" % (k, sd[k].dtype, sde[k].dtype))
        elif a.shape != b.shape or not np.array_equal(a, b):
            problems.append("%s: %s" % (k, "shape %s vs %s" % (a.shape, b.shape) if a.shape != b.shape
                                        else "%d of %d elements differ" % (int(np.sum(a != b)), a.size)))
        n_t += 1
        n_el += a.size
    x = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        la, lb = m(x).logits, e(x).logits
    if not torch.equal(la, lb):
        problems.append("logits differ from the export's")
    res.update(ok=not problems, problems=problems,
               result="bit-equal: %d tensors, %d elements; logits of a prompt equal" % (n_t, n_el)
               if not problems else "; ".join(problems[:3]))
    return res


# ------------------------------------------------------------------------------------------
# judge: compressed-tensors' own decompressors


def judge_ct(name, copy, exp):
    import torch
    from compressed_tensors.compressors import BaseCompressor
    from compressed_tensors.quantization import QuantizationConfig
    cfg = json.load(open(os.path.join(copy, "config.json")))
    qconf = QuantizationConfig.model_validate(cfg["quantization_config"])
    fmt = qconf.format
    nvfp4 = fmt == "nvfp4-pack-quantized"
    comp = BaseCompressor.get_value_from_registry(fmt)
    # the one config group targets Linear (testdata/gen_fp4.py ct_fp4_config)
    (scheme,) = qconf.config_groups.values()
    q = read_export(copy)  # every shard
    e = read_export(exp) if exp else None
    res = {"copy": name, "layout": "compressed-tensors %s" % fmt,
           "judge": "compressed-tensors %s.decompress" % comp.__name__}
    problems, per = [], {}
    tot = diff = chain_off = checked = 0
    rng_pick = np.random.default_rng(7)
    for k in sorted(q):
        if not k.endswith(".weight_packed"):
            continue
        mod = k[: -len(".weight_packed")]
        packed = q[k][1]
        sd = {"weight_packed": torch.from_numpy(packed.copy())}
        if nvfp4:
            # weight_scale F8_E4M3 [N, K/16], weight_global_scale F32 [1], a divisor (issue 25;
            # compressed-tensors lifecycle/forward_helpers.py _dequantize: scale / global_scale)
            sd["weight_scale"] = torch.from_numpy(q[mod + ".weight_scale"][1].copy()).view(
                torch.float8_e4m3fn)
            sd["weight_global_scale"] = torch.from_numpy(q[mod + ".weight_global_scale"][1].copy())
        else:
            # weight_scale U8 [N, K/32], E8M0 bias 127 (compressors/mx_utils.py)
            sd["weight_scale"] = torch.from_numpy(q[mod + ".weight_scale"][1].copy())
        got = torch_bits(comp.decompress(sd, scheme)["weight"])
        codes = unpack_e2m1(packed)
        g = 16 if nvfp4 else 32
        if nvfp4:
            s = e4m3(q[mod + ".weight_scale"][1])
            G = np.float32(q[mod + ".weight_global_scale"][1].reshape(()))
            sv = np.repeat(s, g, axis=-1)
            exact = exact_bf16_bits(E2M1[codes] * sv, np.full(sv.shape, float(G)))
            # compressed-tensors' order, in fp32: scale = fp32(s / G); fp32(e2m1 * scale); bf16
            step = (sv.astype(np.float32) / G).astype(np.float32)
            chain = f32_to_bf16_bits((E2M1[codes].astype(np.float32) * step).astype(np.float32))
        else:
            sv = np.repeat(e8m0(q[mod + ".weight_scale"][1]), g, axis=-1)
            exact = exact_bf16_bits(E2M1[codes] * sv)
            chain = exact                              # a power-of-two scale: exact in any order
        n = got.size
        tot += n
        # the vectorized oracle against rational arithmetic: every element where the chain is
        # off, and 64 more at random
        num = E2M1[codes] * sv
        den = float(G) if nvfp4 else 1.0
        pick = np.flatnonzero(chain != exact)[:256]
        pick = np.concatenate([pick, rng_pick.choice(n, 64, replace=False)])
        for i in pick:
            want = fraction_bf16(num.flat[i], den)
            if bf16_bits_to_f64(exact.flat[i]) != want or np.isnan(want):
                raise AssertionError("harness: exact_bf16_bits disagrees with fractions at %s "
                                     "element %d" % (mod, i))
        checked += len(pick)
        row = {"elements": n, "chain_not_exact": int(np.sum(chain != exact))}
        chain_off += row["chain_not_exact"]
        if not np.array_equal(got, chain):
            problems.append("%s: compressed-tensors' output is not its own fp32 order recomputed "
                            "here (%d elements)" % (mod, int(np.sum(got != chain))))
        if e is not None:
            name_w = mod + ".weight"
            if name_w not in e or e[name_w][0] != "BF16" or e[name_w][1].shape != got.shape:
                problems.append("%s: the export has no BF16 %s of shape %s" % (mod, name_w, got.shape))
            else:
                mine = e[name_w][1]
                if not np.array_equal(mine, exact):
                    problems.append("%s: fp8conv's export is not the exact value rounded once "
                                    "(%d elements)" % (mod, int(np.sum(mine != exact))))
                d = mine != got
                ulp = np.abs(ordered(mine) - ordered(got))
                row["differ"] = int(np.sum(d))
                row["max_ulp"] = int(ulp.max()) if n else 0
                diff += row["differ"]
                if not nvfp4 and row["differ"]:
                    problems.append("%s: %d elements differ from compressed-tensors' MXFP4 "
                                    "decompression (bit for bit expected)" % (mod, row["differ"]))
                if row["max_ulp"] > 1:
                    problems.append("%s: up to %d ulp from compressed-tensors" % (mod, row["max_ulp"]))
                unexplained = d & (chain == exact)
                if np.any(unexplained):
                    problems.append("%s: %d elements differ where the fp32 chain is exact "
                                    "(not the order: a bug)" % (mod, int(np.sum(unexplained))))
        per[mod] = row
    if not per:
        problems.append("no weight_packed tensor in the copy")
    if name.endswith("-stress") and nvfp4 and not (chain_off and diff):
        problems.append("the stress copy did not put the fp32 chain off the exact value: the "
                        "1-ulp rule was not exercised")
    res.update(per_linear=per, elements=tot, differ=diff, chain_not_exact=chain_off,
               oracle_checked_by_fractions=checked,
               problems=problems, ok=not problems and e is not None)
    if e is None:
        res["result"] = "compressed-tensors' own order reproduced on %d elements%s" % (
            tot, "" if not problems else "; " + "; ".join(problems[:2]))
    elif problems:
        res["result"] = "; ".join(problems[:3])
    elif nvfp4:
        res["result"] = ("within 1 ulp: %d of %d elements differ, each one where compressed-"
                         "tensors' fp32 chain is 1 ulp from the exact value (%d such)"
                         % (diff, tot, chain_off)) if diff else \
            "bit-equal: %d elements (its fp32 chain is exact on this copy)" % tot
    else:
        res["result"] = "bit-equal: %d elements" % tot
    return res


# ------------------------------------------------------------------------------------------
# negative controls: each judge must fail on an export with one planted change


# ------------------------------------------------------------------------------------------
# judge: fused 3-D experts written one weight per expert (issue 26), against their source


def qwen3_moe_fused_source(dst, seed=2626):
    """A Qwen3-MoE checkpoint with its experts fused as transformers v5 holds them
    (models/qwen3_moe/modeling_qwen3_moe.py Qwen3MoeExperts: gate_up_proj [E, 2I, H], gate rows
    first, and down_proj [E, H, I]): the state dict of a seeded Qwen3MoeForCausalLM built from a
    config, written with safetensors as it is in memory (save_pretrained would split the experts
    back, conversion_mapping.py's revert). 2I = 192, H = 64, I = 96: no axis is ambiguous."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
    torch.manual_seed(seed)
    cfg = Qwen3MoeConfig(hidden_size=64, intermediate_size=128, moe_intermediate_size=96,
                         num_experts=4, num_experts_per_tok=2, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=128,
                         max_position_embeddings=64, tie_word_embeddings=False)
    m = Qwen3MoeForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():  # norms of ones would hide nothing; give them a spread
        for k, v in m.state_dict().items():
            if k.endswith("norm.weight"):
                v.copy_(1 + 0.1 * torch.randn_like(v))
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    st_write(os.path.join(dst, "model.safetensors"),
             {k: ("BF16", torch_bits(v)) for k, v in m.state_dict().items()})
    cfg.torch_dtype = "bfloat16"
    cfg.to_json_file(os.path.join(dst, "config.json"))
    return dst


def llama4_fused_source(dst, seed=2627):
    """Llama-4's text model with its experts fused [E, in, out], bf16: transformers'
    Llama4TextExperts holds gate_up_proj [E, H, 2I] (gate columns first) and down_proj [E, I, H]
    (models/llama4/modeling_llama4.py), the names and config as tests/loaders/fp4_quant_ref.py
    model_llama4_fused writes them. H = 64, I = 96: no axis is ambiguous."""
    import torch
    g = torch.Generator().manual_seed(seed)
    H, I, E, V = 64, 96, 4, 128

    def rnd(*shape, std=0.02, mean=0.0):
        return ("BF16", torch_bits((mean + std * torch.randn(*shape, generator=g)).to(torch.bfloat16)))

    p = "language_model.model.layers.0."
    t = {"language_model.model.embed_tokens.weight": rnd(V, H, std=1.0),
         p + "feed_forward.router.weight": rnd(E, H, std=0.1),
         p + "feed_forward.experts.gate_up_proj": rnd(E, H, 2 * I),
         p + "feed_forward.experts.down_proj": rnd(E, I, H),
         p + "feed_forward.shared_expert.gate_proj.weight": rnd(I, H),
         p + "feed_forward.shared_expert.up_proj.weight": rnd(I, H),
         p + "feed_forward.shared_expert.down_proj.weight": rnd(H, I),
         p + "self_attn.q_proj.weight": rnd(H, H),
         p + "self_attn.o_proj.weight": rnd(H, H),
         p + "input_layernorm.weight": rnd(H, std=0.1, mean=1.0),
         "language_model.model.norm.weight": rnd(H, std=0.1, mean=1.0),
         "language_model.lm_head.weight": rnd(V, H)}
    tc = {"model_type": "llama4_text", "hidden_size": H, "intermediate_size": I,
          "intermediate_size_mlp": 2 * I, "num_local_experts": E, "num_hidden_layers": 1,
          "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 16, "vocab_size": V}
    cfg = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
           "text_config": tc, "torch_dtype": "bfloat16"}
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    st_write(os.path.join(dst, "model.safetensors"), t)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return dst


def bf16_f64(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def group_bound_check(got, want, group, what):
    """Every element of an FP4 round trip within a quarter of its group's amax of the source
    (NVFP4: the group scale is amax / 6 within E4M3's 2^-4, and the largest E2M1 step is 2, so an
    element is off by at most about amax / 5.6; MXFP4: the E8M0 scale s has amax in [4s, 8s) and
    6s the largest code, so at most 2s <= amax / 4, as a rounding or as saturation), plus the
    export's bf16 rounding. got, want: float64 [..., K], groups along the last axis (the input
    axis). -> (worst ratio of error to bound, relative Frobenius error)"""
    g = want.reshape(want.shape[:-1] + (want.shape[-1] // group, group))
    amax = np.abs(g).max(axis=-1, keepdims=True)
    err = np.abs(got.reshape(g.shape) - g)
    bound = amax / 4 * (1 + 2.0 ** -7) + np.abs(got.reshape(g.shape)) * 2.0 ** -8 + 1e-30
    return float((err / bound).max()), float(np.linalg.norm(got - want) / np.linalg.norm(want))


def judge_fused_source(name, src, exp, scheme):
    """The experts that a loader rebuilds from fp8conv's per-expert FP4 output, against the fused
    source they were quantized from: each element within its group's FP4 error bound
    (group_bound_check), and a control that the check can fail (the source with its experts
    rolled by one must be out of bound).

    Qwen3-MoE: transformers loads the export (bf16, one weight per expert) with
    Qwen3MoeForCausalLM, whose conversion mapping (conversion_mapping.py "qwen2_moe", used for
    qwen3_moe) merges mlp.experts.N.gate_proj / up_proj.weight into mlp.experts.gate_up_proj by
    MergeModulelist(dim=0) then Concatenate(dim=1), and down_proj by MergeModulelist(dim=0): the
    loader's own fused tensors are compared to the source's, with no missing or unexpected key.
    Llama-4: transformers 5.19 has no such merge for llama4 (its checkpoints are fused), and vLLM's
    Llama4ForConditionalGeneration cannot be built here, so vLLM's rule is applied in numpy
    (models/llama4.py load_moe_expert_weights: gate_up_proj [E, H, 2I] chunk(2, dim=-1), then
    transpose(-1, -2) per expert): the export's experts.N.gate_proj.weight against
    gate_up_proj[N, :, :I].T."""
    group = 16 if scheme == "nvfp4" else 32
    s = read_export(src)
    e = read_export(exp)
    problems, worst, rel, n = [], 0.0, 0.0, 0
    pairs = []  # (label, got [E, out, in], want [E, out, in])
    if "qwen3" in name or "moe-fused" in name:
        import torch
        from transformers import AutoModelForCausalLM
        with quiet():
            m, info = AutoModelForCausalLM.from_pretrained(exp, dtype=torch.bfloat16,
                                                           output_loading_info=True)
        problems += ["export load: %s %s" % (kind, sorted(info[kind])[:4])
                     for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")
                     if info.get(kind)]
        sd = m.state_dict()
        judge = "transformers Qwen3MoeForCausalLM (conversion mapping merges the experts)"
        for k in sorted(s):
            if k.endswith(".experts.gate_up_proj") or k.endswith(".experts.down_proj"):
                if k not in sd:
                    problems.append("%s: not in the loaded model" % k)
                    continue
                pairs.append((k, bf16_f64(torch_bits(sd[k])), bf16_f64(s[k][1])))
    else:
        judge = "vLLM llama4.py's expert rule (chunk, transpose), in numpy"
        for k in sorted(s):
            if not k.endswith(".experts.gate_up_proj") and not k.endswith(".experts.down_proj"):
                continue
            p = k[: -len("gate_up_proj")] if k.endswith("gate_up_proj") else k[: -len("down_proj")]
            w = bf16_f64(s[k][1])  # [E, in, out]
            E = w.shape[0]
            if k.endswith("gate_up_proj"):
                I = w.shape[2] // 2
                parts = (("gate_proj", w[:, :, :I]), ("up_proj", w[:, :, I:]))
            else:
                parts = (("down_proj", w),)
            for part, src_w in parts:
                names = ["%s%d.%s.weight" % (p, x, part) for x in range(E)]
                if any(nm not in e for nm in names):
                    problems.append("%s: not in the export" % names[0])
                    continue
                got = np.stack([bf16_f64(e[nm][1]) for nm in names])
                pairs.append(("%s*.%s" % (p, part), got, np.swapaxes(src_w, 1, 2)))
    for label, got, want in pairs:
        if got.shape != want.shape:
            problems.append("%s: shape %s, the source's %s" % (label, got.shape, want.shape))
            continue
        w_, r_ = group_bound_check(got, want, group, label)
        c_, _ = group_bound_check(got, np.roll(want, 1, axis=0), group, label)
        if w_ > 1:
            problems.append("%s: an element %.2fx its group's bound from the source" % (label, w_))
        if c_ <= 1:
            problems.append("%s: the control (experts rolled by one) is within bound" % label)
        worst, rel, n = max(worst, w_), max(rel, r_), n + got.size
    if not pairs:
        problems.append("no fused experts judged")
    res = {"copy": name, "judge": judge, "ok": not problems, "problems": problems,
           "result": ("%d expert tensors, %d elements: within their groups' FP4 bound of the fused "
                      "source (worst %.2f of it; relative error %.3f); experts rolled by one: out "
                      "of bound" % (len(pairs), n, worst, rel)) if not problems
           else "; ".join(problems[:3])}
    return res


def planted(exp, dst, tensor, change):
    """A copy of export EXP with change(bits) applied to TENSOR's bf16 bits (in place)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(exp, dst)
    for f in sorted(os.listdir(dst)):
        if f.endswith(".safetensors"):
            t = st_read(os.path.join(dst, f))
            if tensor in t:
                bits = t[tensor][1].copy()
                change(bits)
                t[tensor] = ("BF16", bits)
                st_write(os.path.join(dst, f), t)
                return dst
    raise SystemExit("harness: %s not in %s" % (tensor, exp))


def negative_controls(work, copies, exports):
    rows = []
    e = exports.get("gpt-oss")
    if e:
        def flip(b):
            b.flat[1234] ^= 1                        # one element 1 ulp off
        bad = planted(e, os.path.join(work, "neg-gpt-oss"),
                      "model.layers.0.mlp.experts.gate_up_proj", flip)
        r = judge_gpt_oss("gpt-oss", copies["gpt-oss"], bad)
        rows.append(("gpt-oss: gate_up_proj element 1234 1 ulp off", r))
    e = exports.get("nvfp4-ct-stress")
    if e:
        c = copies["nvfp4-ct-stress"]
        q = st_read(os.path.join(c, "model.safetensors"))
        for k in sorted(q):                          # the first linear where the chain is off
            if not k.endswith(".weight_packed"):
                continue
            mod = k[: -len(".weight_packed")]
            codes = unpack_e2m1(q[mod + ".weight_packed"][1])
            sv = np.repeat(e4m3(q[mod + ".weight_scale"][1]), 16, axis=-1)
            G = np.float32(q[mod + ".weight_global_scale"][1].reshape(()))
            exact = exact_bf16_bits(E2M1[codes] * sv, np.full(sv.shape, float(G)))
            chain = f32_to_bf16_bits((E2M1[codes].astype(np.float32) *
                                      (sv.astype(np.float32) / G).astype(np.float32))
                                     .astype(np.float32))
            same = np.flatnonzero((chain == exact) & (exact & 0x7FFF != 0))
            off = np.flatnonzero(chain != exact)
            if len(off):
                break

        def flip(b):
            b.flat[same[0]] ^= 1                     # 1 ulp where the order explains nothing
        r = judge_ct("nvfp4-ct-stress", c, planted(e, os.path.join(work, "neg-nvfp4-1"),
                                                   mod + ".weight", flip))
        rows.append(("nvfp4-ct-stress: 1 ulp off where the fp32 chain is exact", r))
        if len(off):
            def as_chain(b):
                b.flat[off] = chain.flat[off]        # fp8conv computing the fp32 chain instead
            r = judge_ct("nvfp4-ct-stress", c, planted(e, os.path.join(work, "neg-nvfp4-2"),
                                                       mod + ".weight", as_chain))
            rows.append(("nvfp4-ct-stress: %s rounded by compressed-tensors' fp32 chain "
                         "(%d elements)" % (mod, len(off)), r))
    return rows


# ------------------------------------------------------------------------------------------
# vLLM's CPU build


def vllm_mapper_check(copy):
    """vLLM's own gpt-oss name mapping (models/gpt_oss.py GptOssForCausalLM.hf_to_vllm_mapper)
    over every tensor name of the copy: each must map, the MXFP4 experts to the fused-MoE
    parameters w13_weight / w2_weight (+ _scale, _bias)."""
    with quiet():
        from vllm.model_executor.models.gpt_oss import GptOssForCausalLM
    mp = GptOssForCausalLM.hf_to_vllm_mapper
    names = sorted(st_read(os.path.join(copy, "model.safetensors")))
    want = {"gate_up_proj_blocks": "w13_weight", "gate_up_proj_scales": "w13_weight_scale",
            "down_proj_blocks": "w2_weight", "down_proj_scales": "w2_weight_scale",
            "gate_up_proj_bias": "w13_bias", "down_proj_bias": "w2_bias"}
    problems, mapped = [], {}
    for n in names:
        v = mp._map_name(n)
        mapped[n] = v
        if v is None:
            problems.append("%s maps to nothing" % n)
            continue
        for suf, to in want.items():
            if n.endswith("." + suf) and not v.endswith("." + to):
                problems.append("%s -> %s (want .%s)" % (n, v, to))
    return {"ok": not problems, "problems": problems, "names": len(names), "mapped": mapped}


def vllm_run(model, exp, work, tag, env=None):
    out = os.path.join(work, "vllm-%s.json" % tag)
    log = os.path.join(work, "vllm-%s.log" % tag)
    rc = VLLM.run(["--model", model, "--export", exp, "--json", out, "--prompts", "1",
                   "--no-emulate"], log, env=env, cwd=HERE, timeout=900)
    if rc != 0 or not os.path.exists(out):
        return {"ok": False, "loaded": False, "error": "vllm_check.py exit %s: %s"
                % (rc, (forkserver.tail(log).strip().splitlines() or [""])[-1])}
    return json.load(open(out))


def short(err, n=300):
    err = (err or "").strip()
    return err if len(err) <= n else err[:n] + "..."


def judge_vllm(work, exports):
    rows = []
    t = time.time()
    # gpt-oss, as it is: vLLM 0.32's fused-MoE oracle (model_executor/layers/fused_moe/oracle/
    # mxfp4.py) tries its MXFP4 backends; the CPU one, CPUExpertsMxfp4
    # (fused_moe/experts/cpu_moe.py), needs AMX tiles (_supports_current_device:
    # torch.cpu._is_amx_tile_supported()); EMULATION needs the amd-quark package
    r = vllm_run(os.path.join(RELEASES, "gpt-oss"), exports["gpt-oss"], work, "gpt-oss")
    import torch
    amx = bool(torch.cpu._is_amx_tile_supported())
    rows.append(_vllm_row("gpt-oss", "vLLM GptOssForCausalLM, quant_method mxfp4", r, amx,
                          "CPUExpertsMxfp4 (fused_moe/experts/cpu_moe.py) needs AMX tiles, "
                          "this CPU has none; the EMULATION backend needs amd-quark"))
    m = vllm_mapper_check(os.path.join(RELEASES, "gpt-oss"))
    rows.append({"copy": "gpt-oss", "judge": "vLLM GptOssForCausalLM.hf_to_vllm_mapper",
                 "ok": m["ok"], "result": ("every one of %d tensor names maps; experts to "
                                            "w13_weight/w2_weight (+ _scale, _bias)" % m["names"])
                 if m["ok"] else "; ".join(m["problems"][:3])})
    # fp8conv's gpt-oss export, a plain bf16 gpt-oss: vLLM loads it and generates
    r = vllm_run(exports["gpt-oss"], exports["gpt-oss"], work, "gpt-oss-export")
    # (vllm_check.py compares that run with itself: only that it loads and generates is learnt
    # here, through vLLM's unquantized fused-MoE path; the values are transformers' judgement)
    ok = bool(r.get("loaded")) and bool((r.get("generation") or {}).get("pass"))
    rows.append({"copy": "gpt-oss export", "judge": "vLLM GptOssForCausalLM (bf16)", "ok": ok,
                 "result": "loads and generates (unquantized fused MoE; values not compared "
                           "here)" if ok else "fails: %s" % short(r.get("error")) or "no generation"})
    # NVFP4 compressed-tensors: CompressedTensorsW4A4Fp4 asks init_nvfp4_linear_kernel
    # (model_executor/kernels/linear/__init__.py), whose _POSSIBLE_NVFP4_KERNELS has no CPU entry
    r = vllm_run(os.path.join(RELEASES, "nvfp4-ct"), exports["nvfp4-ct"], work, "nvfp4-ct")
    rows.append(_vllm_row("nvfp4-ct", "vLLM CompressedTensorsW4A4Fp4", r, None,
                          "init_nvfp4_linear_kernel: _POSSIBLE_NVFP4_KERNELS "
                          "(model_executor/kernels/linear/__init__.py) lists no CPU kernel"))
    # ... but VLLM_BATCH_INVARIANT=1 forces EmulationNvFp4LinearKernel (init_nvfp4_linear_kernel;
    # its is_supported is always true): vLLM's weight loaders then fill weight_packed,
    # weight_scale and the per-shard weight_global_scale, which vllm_check.py
    # (Probe.nvfp4_linear) decodes exactly and compares with fp8conv's export bit for bit,
    # fused qkv_proj / gate_up_proj shards included. The model cannot run: batch-invariant mode
    # calls Triton kernels (model_executor/determinism/batch_invariant.py), absent here.
    for c in ("nvfp4-ct", "nvfp4-ct-amax"):
        if exports.get(c):
            rows.append(vllm_emulation_row(work, c, os.path.join(RELEASES, c), exports[c],
                                           "EmulationNvFp4LinearKernel"))
    # fp8conv quantize --scheme nvfp4, weight-only: vLLM's CompressedTensorsW4A16Fp4
    # (compressed_tensors/schemes/compressed_tensors_w4a16_nvfp4.py) forces
    # MarlinNvFp4LinearKernel, a CUDA kernel: as it is, vLLM's CPU build cannot load it. Its
    # emulation kernel is W4A4 only ("EmulationNvFp4LinearKernel does not support W4A16"), so
    # the same tensors declared W4A4 (w4a4_twin) go through vLLM's CompressedTensorsW4A4Fp4
    # weight loaders, which the probe judges: every weight bit-equal to the export, fused qkv
    # and gate_up shards with one global scale (the activation scales added are not judged)
    c = "quantize-nvfp4"
    if exports.get(c):
        r = vllm_run(os.path.join(work, c), exports[c], work, c)
        rows.append(dict(_vllm_row(c, "vLLM CompressedTensorsW4A16Fp4", r, None,
                                   "CompressedTensorsW4A16Fp4 forces MarlinNvFp4LinearKernel, "
                                   "CUDA only"), fp8conv="written"))
        twin = os.path.join(work, c + "-w4a4")
        w4a4_twin(os.path.join(work, c), twin)
        rows.append(dict(vllm_emulation_row(work, c + " as W4A4", twin, exports[c],
                                            "EmulationNvFp4LinearKernel", tag=c + "-w4a4"),
                         fp8conv="written"))
    # fp8conv quantize --scheme nvfp4 --format modelopt: ModelOpt's weight-only layout
    # (quant_algo W4A16_NVFP4), which vLLM's ModelOptNvFp4Config reads as W4A16
    # (quantization/modelopt.py LINEAR_ALGOS, use_a16): a Marlin kernel, CUDA only, as it is;
    # the same tensors declared W4A4 (modelopt_w4a4_twin: quant_algo NVFP4, input_scale 1)
    # go through ModelOptLinearMethod's loaders under the emulation kernel, judged bit for bit
    c = "quantize-nvfp4-modelopt"
    d = os.path.join(work, c)
    shutil.rmtree(d, ignore_errors=True)
    subprocess.run([exports["_fp8conv"], "quantize", "-q", "--scheme", "nvfp4", "--format",
                    "modelopt", SAMPLE, d], check=True)
    exp = os.path.join(work, c + ".bf16")
    ok, msg = export(exports["_fp8conv"], d, exp)
    if not ok:
        rows.append({"copy": c, "fp8conv": "written", "judge": "vLLM ModelOptNvFp4Config",
                     "ok": False, "result": "fp8conv's export refuses: %s" % short(msg)})
    else:
        r = vllm_run(d, exp, work, c)
        rows.append(dict(_vllm_row(c, "vLLM ModelOptNvFp4Config, quant_algo W4A16_NVFP4", r, None,
                                   "W4A16 NVFP4 runs on a Marlin kernel, CUDA only"),
                         fp8conv="written"))
        twin = os.path.join(work, c + "-w4a4")
        modelopt_w4a4_twin(d, twin)
        rows.append(dict(vllm_emulation_row(work, c + " as W4A4", twin, exp,
                                            "ModelOptLinearMethod, EmulationNvFp4LinearKernel",
                                            tag=c + "-w4a4"), fp8conv="written"))
    # ModelOpt NVFP4 (quant_method modelopt, quant_algo NVFP4): vLLM's ModelOptNvFp4Config gives
    # each linear ModelOptLinearMethod, whose NVFP4 weight scheme (quantization/modelopt.py
    # KNvfp4Static) asks the same init_nvfp4_linear_kernel: no CPU kernel as it is; under
    # VLLM_BATCH_INVARIANT=1 its loaders fill weight, weight_scale and the per-shard
    # weight_scale_2 (a multiplier), which vllm_check.py (Probe.nvfp4_linear, modelopt) decodes
    # exactly. transformers 5.19 has no ModelOpt quantizer (quantizers/auto.py), so vLLM is the
    # one loader judging these copies here. Exported here: no other judge reads them.
    stress = os.path.join(work, "nvfp4-modelopt-stress")
    shutil.rmtree(stress, ignore_errors=True)
    stress_modelopt(os.path.join(RELEASES, "nvfp4-modelopt-amax"), stress)
    for c in ("nvfp4-modelopt", "nvfp4-modelopt-amax", "nvfp4-modelopt-stress"):
        src = stress if c == "nvfp4-modelopt-stress" else os.path.join(RELEASES, c)
        exp = os.path.join(work, c + ".bf16")
        ok, msg = export(exports["_fp8conv"], src, exp)
        exports[c] = exp if ok else None
        if not ok:
            rows.append({"copy": c, "judge": "vLLM ModelOptNvFp4Config", "ok": False,
                         "result": "fp8conv refuses: %s" % short(msg)})
            continue
        if c == "nvfp4-modelopt":
            r = vllm_run(os.path.join(RELEASES, c), exp, work, c)
            rows.append(_vllm_row(c, "vLLM ModelOptNvFp4Config (ModelOptLinearMethod)", r, None,
                                  "init_nvfp4_linear_kernel: _POSSIBLE_NVFP4_KERNELS "
                                  "(model_executor/kernels/linear/__init__.py) lists no CPU "
                                  "kernel"))
        rows.append(dict(vllm_emulation_row(work, c, src, exp,
                                            "ModelOptLinearMethod, EmulationNvFp4LinearKernel"),
                         fp8conv="written"))
    # negative control: the ModelOpt judge must find one element 1 ulp off in the middle shard
    # of qkv_proj (k_proj) and one in the second of gate_up_proj (up_proj), in those fused
    # layers and nowhere else: the shards' rows and global scales are placed as vLLM's loaders
    # place them
    c = "nvfp4-modelopt-amax"
    if exports.get(c):
        def flip(b):
            b.flat[777] ^= 1
        p = "model.layers.0."
        d1 = planted(exports[c], os.path.join(work, "neg-modelopt-1"), p + "self_attn.k_proj.weight",
                     flip)
        bad = planted(d1, os.path.join(work, "neg-modelopt-2"), p + "mlp.up_proj.weight", flip)
        r = vllm_emulation_row(work, c, os.path.join(RELEASES, c), bad,
                               "ModelOptLinearMethod, EmulationNvFp4LinearKernel", tag="neg-" + c)
        per = {x["name"]: (x.get("loaded") or {}).get("n_diff")
               for x in (r.get("weights") or {}).get("per_layer", [])
               if str(x.get("layout", "")).startswith("nvfp4")}
        want = {p + "self_attn.qkv_proj": 1, p + "self_attn.o_proj": 0,
                p + "mlp.gate_up_proj": 1, p + "mlp.down_proj": 0}
        caught = not r["ok"] and per == want
        rows.append({"copy": "negative control", "fp8conv": "planted", "judge": r["judge"],
                     "ok": caught, "result": "%s: k_proj and up_proj element 777 1 ulp off: %s"
                     % (c, "caught, in qkv_proj and gate_up_proj only (%s)" % short(r["result"], 200)
                        if caught else "NOT caught as planted: differing elements per layer %s"
                        % per)})
    print("fp4: vLLM part %.0f s" % (time.time() - t), flush=True)
    return rows


def w4a4_twin(src, dst):
    """fp8conv's weight-only NVFP4 `src`, declared W4A4 in `dst` for vLLM's emulation kernel:
    the nvfp4-ct release copy's input_activations (testdata/gen_fp4.py, as llm-compressor's
    NVFP4 scheme writes them) and an input_global_scale of 1 beside each weight_global_scale.
    The weight tensors are src's bytes."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    rel = json.load(open(os.path.join(RELEASES, "nvfp4-ct", "config.json")))
    cfg = json.load(open(os.path.join(dst, "config.json")))
    act = rel["quantization_config"]["config_groups"]["group_0"]["input_activations"]
    cfg["quantization_config"]["config_groups"]["group_0"]["input_activations"] = act
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    add_beside(dst, "weight_global_scale", "input_global_scale", np.ones(1, np.float32))


def add_beside(d, suffix, new_suffix, value):
    """In checkpoint directory `d`, an F32 tensor `value` named X.new_suffix beside every
    X.suffix (same shard; the index too)."""
    index = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(index)) if os.path.exists(index) else None
    for f in sorted(os.listdir(d)):
        if not f.endswith(".safetensors"):
            continue
        t = st_read(os.path.join(d, f))
        for k in [k for k in t if k.endswith("." + suffix)]:
            name = k[: -len(suffix)] + new_suffix
            t[name] = ("F32", value)
            if idx:
                idx["weight_map"][name] = f
        st_write(os.path.join(d, f), t)
    if idx:
        json.dump(idx, open(index, "w"), indent=2)


def modelopt_w4a4_twin(src, dst):
    """fp8conv's weight-only ModelOpt NVFP4 `src` (quant_algo W4A16_NVFP4), declared W4A4 in
    `dst`: quant_algo NVFP4 in config.json and hf_quant_config.json, the nvfp4-modelopt release
    copy's input_activations (testdata/gen_fp4.py) in its config group, and an input_scale of 1
    (F32 []) beside each weight_scale_2. The weight tensors are src's bytes."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    rel = json.load(open(os.path.join(RELEASES, "nvfp4-modelopt", "config.json")))
    cfg = json.load(open(os.path.join(dst, "config.json")))
    q = cfg["quantization_config"]
    q["quant_algo"] = "NVFP4"
    act = rel["quantization_config"]["config_groups"]["group_0"]["input_activations"]
    q["config_groups"]["group_0"]["input_activations"] = act
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    side = os.path.join(dst, "hf_quant_config.json")
    hq = json.load(open(side))
    hq["quantization"]["quant_algo"] = "NVFP4"
    json.dump(hq, open(side, "w"), indent=2)
    add_beside(dst, "weight_scale_2", "input_scale", np.ones((), np.float32))


def vllm_emulation_row(work, c, copy, exp, kernel, tag=None):
    """vLLM's weight loaders under VLLM_BATCH_INVARIANT=1 on NVFP4 copy `copy` (either producer),
    judged by vllm_check.py's probe against export `exp`: every NVFP4 layer bit-equal."""
    r = vllm_run(copy, exp, work, (tag or c) + "-emulation", env={"VLLM_BATCH_INVARIANT": "1"})
    w = r.get("weights") or {}
    nv = [x for x in w.get("per_layer", []) if str(x.get("layout", "")).startswith("nvfp4")]
    ok = bool(r.get("loaded")) and nv and not w.get("bad") and w.get("exact") == w.get("layers")
    el = sum((x.get("loaded") or {}).get("elements", 0) for x in nv)
    maxg = sum(x.get("vllm_max_global_differs", 0) for x in nv)
    nmax = sum(1 for x in nv if "vllm_max_global_differs" in x)
    err = r.get("error") or ""
    if "'function' object is not subscriptable" in err and "batch_invariant" in \
            (r.get("traceback_tail") or "batch_invariant"):
        err += " (model_executor/determinism/batch_invariant.py calls a Triton kernel, " \
               "which the CPU build has not)"
    note = ("; %d fused layers hold shards with different global scales, which vLLM's "
            "process_weights_after_loading replaces by their largest: it would compute %d "
            "elements other than the checkpoint's values (llm-compressor and ModelOpt share one "
            "global scale per fused layer for vLLM: modifiers/utils/helpers.py "
            "update_fused_layer_weight_global_scales, export/quant_utils.py "
            "preprocess_linear_fusion; this copy does not)" % (nmax, maxg)) if nmax else ""
    diffs = [x for x in nv if (x.get("loaded") or {}).get("n_diff")]
    return {"copy": c, "judge": "vLLM weight loaders (VLLM_BATCH_INVARIANT=1: %s)" % kernel,
            "ok": bool(ok), "weights": w,
            "result": ("weights loaded bit-equal to the export: %d NVFP4 layers (fused qkv and "
                       "gate_up shards included), %d elements; it cannot compute here: %s%s"
                       % (len(nv), el, short(err, 260), note)) if ok else
            "fails: %s; bad %s; %s" % (short(r.get("error")), w.get("bad"),
                                       "; ".join("%s: %d of %d elements differ" % (
                                           x["name"], x["loaded"]["n_diff"],
                                           x["loaded"]["elements"]) for x in diffs)
                                       or "no layer differs")}


def _vllm_row(copy, judge, r, amx, why):
    err = r.get("error") or ""
    if r.get("ok"):
        return {"copy": copy, "judge": judge, "ok": True, "result": "loads, weights and generation ok"}
    missing = ("No MXFP4 MoE backend" in err and "CPU, reason: kernel does not support current "
               "device cpu" in err) or "Failed to find a kernel that can implement the NVFP4" in err \
        or "MarlinNvFp4LinearKernel is not supported" in err
    if missing and amx is not True:
        return {"copy": copy, "judge": judge, "ok": True, "known_missing_kernel": True,
                "result": "no kernel on this CPU: %s: %s" % (why, short(err.split(". Candidate")[0]
                                                                   .split(" Reasons:")[0], 200))}
    if r.get("loaded") and amx:
        # a CPU with AMX tiles has CPUExpertsMxfp4: vLLM loads the experts; vllm_check.py's probe
        # does not decode MXFP4 MoE parameters, so only the load is learnt (not seen here: this
        # CPU family has no AMX)
        gen = (r.get("generation") or {}).get("pass")
        return {"copy": copy, "judge": judge, "ok": bool(gen), "result": "loads with AMX "
                "(CPUExpertsMxfp4)%s; expert values not compared by the probe" %
                (", generates" if gen else ", generation fails: %s" % short(err))}
    return {"copy": copy, "judge": judge, "ok": False, "result": "fails: %s" % short(err)}


# ------------------------------------------------------------------------------------------


def table(rows, versions):
    md = [versions + ". `make check-loaders-fp4` (tests/loaders/fp4_check.py) writes this table; "
          "the stress copies are the release copies with every E2M1 code and a wide range of "
          "scales, written by the script.", "",
          "| copy | fp8conv export (bf16) | judge | verdict |", "|---|---|---|---|"]
    for r in rows:
        verdict = ("ok: " if r["ok"] else "KNOWN: " if r.get("known") else "FAILS: ") + r["result"]
        md.append("| %s | %s | %s | %s |" % (r["copy"], r.get("fp8conv", "—"), r["judge"],
                                             verdict.replace("|", "\\|")))
    return "\n".join(md) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fp8conv", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--readme")
    ap.add_argument("--readme-block", default="loaders-fp4")
    ap.add_argument("--update-readme", action="store_true")
    ap.add_argument("--no-vllm", action="store_true")
    a = ap.parse_args(argv)
    t0 = time.time()
    fp8conv = os.path.abspath(a.fp8conv)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    copies = [("gpt-oss", os.path.join(RELEASES, "gpt-oss")),
              ("gpt-oss-stress", os.path.join(work, "gpt-oss-stress")),
              ("mxfp4-ct", os.path.join(RELEASES, "mxfp4-ct")),
              ("mxfp4-ct-stress", os.path.join(work, "mxfp4-ct-stress")),
              ("nvfp4-ct", os.path.join(RELEASES, "nvfp4-ct")),
              ("nvfp4-ct-amax", os.path.join(RELEASES, "nvfp4-ct-amax")),
              ("nvfp4-ct-stress", os.path.join(work, "nvfp4-ct-stress"))]
    for d in ("gpt-oss-stress", "mxfp4-ct-stress", "nvfp4-ct-stress"):
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)
    # fp8conv's own FP4 (issue 26): quantize --scheme nvfp4 / mxfp4 of the bf16 sample
    for s, model, tag in (("nvfp4", SAMPLE, ""), ("mxfp4", SAMPLE, ""),
                          ("nvfp4", MOE_SAMPLE, "-moe")):
        d = os.path.join(work, "quantize-" + s + tag)
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([fp8conv, "quantize", "-q", "--scheme", s, model, d], check=True)
        copies.append(("quantize-" + s + tag, d))
    # fused 3-D experts written one weight per expert (issue 26): transformers v5's Qwen3-MoE
    # [E, out, in] and Llama-4's [E, in, out]
    fused_src = {"quantize-nvfp4-moe-fused": qwen3_moe_fused_source(os.path.join(work, "src-qwen3-moe-fused")),
                 "quantize-nvfp4-llama4-fused": llama4_fused_source(os.path.join(work, "src-llama4-fused"))}
    fused_src["quantize-mxfp4-moe-fused"] = fused_src["quantize-nvfp4-moe-fused"]
    fused_src["quantize-mxfp4-llama4-fused"] = fused_src["quantize-nvfp4-llama4-fused"]
    for name in sorted(fused_src):
        d = os.path.join(work, name)
        shutil.rmtree(d, ignore_errors=True)
        subprocess.run([fp8conv, "quantize", "-q", "--scheme", name.split("-")[1], fused_src[name], d],
                       check=True)
        copies.append((name, d))
    stress_gpt_oss(os.path.join(RELEASES, "gpt-oss"), os.path.join(work, "gpt-oss-stress"))
    stress_ct(os.path.join(RELEASES, "mxfp4-ct"), os.path.join(work, "mxfp4-ct-stress"), False)
    stress_ct(os.path.join(RELEASES, "nvfp4-ct-amax"), os.path.join(work, "nvfp4-ct-stress"), True,
              layers=NVFP4_STRESS_LAYERS)
    rows, exports, failed = [], {"_fp8conv": fp8conv}, []
    for name, copy in copies:
        t = time.time()
        exp = os.path.join(work, name + ".bf16")
        ok, msg = export(fp8conv, copy, exp)
        exports[name] = exp if ok else None
        try:
            r = (judge_gpt_oss if name.startswith("gpt-oss") else judge_ct)(name, copy, exp if ok else None)
            if not ok:
                r["ok"] = False
                r["result"] = "fp8conv refuses (%s); the judge alone: %s" % (short(msg, 200),
                                                                             r["result"])
        except Exception as e:  # a loader's failure is a verdict, reported as such
            r = {"copy": name, "judge": "(raised)", "ok": False,
                 "result": "%s: %s" % (type(e).__name__, short(str(e))),
                 "traceback": traceback.format_exc()[-2000:]}
        r["fp8conv"] = "written" if ok else "refused"
        if not r["ok"] and name in KNOWN and not ok:
            r["known"] = KNOWN[name]
        elif r["ok"] and name in KNOWN:
            r["ok"] = False
            r["result"] = "passes now (%s), but is KNOWN in fp4_check.py: take it out of " \
                "KNOWN" % r["result"]
        rows.append(r)
        print("fp4: %-16s %-8s %s: %s (%.1f s)" % (name, r["fp8conv"],
              "ok" if r["ok"] else "KNOWN" if r.get("known") else "FAIL", r["result"],
              time.time() - t), flush=True)
    # the experts a loader rebuilds from the fused sources' per-expert output (issue 26)
    for name in sorted(fused_src):
        t = time.time()
        if not exports.get(name):
            r = {"copy": name, "judge": "fused source", "ok": False, "result": "no export"}
        else:
            try:
                r = judge_fused_source(name, fused_src[name], exports[name], name.split("-")[1])
            except Exception as e:  # a loader's failure is a verdict, reported as such
                r = {"copy": name, "judge": "fused source (raised)", "ok": False,
                     "result": "%s: %s" % (type(e).__name__, short(str(e)))}
        r["fp8conv"] = "written"
        rows.append(r)
        print("fp4: %-16s %-8s %s: %s (%.1f s)" % (name, "written", "ok" if r["ok"] else "FAIL",
                                                  r["result"], time.time() - t), flush=True)
    # transformers loading fp8conv quantize's FP4 output (issue 26 item 5)
    for name, copy in copies:
        if not name.startswith("quantize-") or not exports.get(name) or name in fused_src:
            continue
        t = time.time()
        try:
            r = judge_transformers_ct(name, copy, exports[name])
        except Exception as e:  # a loader's failure is a verdict, reported as such
            r = {"copy": name, "judge": "transformers (raised)", "ok": False,
                 "result": "%s: %s" % (type(e).__name__, short(str(e)))}
        r["fp8conv"] = "written"
        if name.endswith("-moe") and "nvfp4" in name:
            # transformers 5.19 loads NVFP4 experts wrongly (fp4.c experts_refuses): the judge
            # must find it, and fp8conv's verify must say so for transformers
            v = subprocess.run([fp8conv, "verify", "--json", copy], capture_output=True, text=True)
            try:
                lo = {x["name"]: x for x in json.loads(v.stdout).get("loaders", [])}
            except (ValueError, AttributeError):
                lo = {}
            said = not lo.get("transformers", {}).get("loads", True) and any(
                x.get("rule") == "loader-layout" for x in lo.get("transformers", {}).get("reasons", []))
            r = dict(r, ok=not r["ok"] and said,
                     result=("transformers computes other expert values (%s), as fp8conv verify "
                             "says (loader-layout: transformers no)" % short(r["result"], 200))
                     if not r["ok"] and said else "judge %s, verify %s: %s" % (
                         "passes" if r["ok"] else "fails", "says so" if said else "does not",
                         short(r["result"], 200)))
        rows.append(r)
        print("fp4: %-16s %-8s %s: %s (%.1f s)" % (name, "written", "ok" if r["ok"] else "FAIL",
                                                  r["result"], time.time() - t), flush=True)
    copy_dirs = dict(copies)
    for what, r in negative_controls(work, copy_dirs, exports):
        caught = not r["ok"]
        rows.append({"copy": "negative control", "fp8conv": "planted", "judge": r["judge"],
                     "ok": caught, "result": "%s: %s" % (what, "caught (%s)" % short(r["result"], 160)
                                                         if caught else "NOT caught")})
        print("fp4: negative control %s: %s" % (what, "caught" if caught else "NOT CAUGHT"),
              flush=True)
    if not a.no_vllm:
        for r in judge_vllm(work, exports):
            r.setdefault("fp8conv", "—")
            rows.append(r)
            print("fp4: vLLM %-16s %s: %s" % (r["copy"], "ok" if r["ok"] else "FAIL", r["result"]),
                  flush=True)
    import compressed_tensors
    import torch
    import transformers
    versions = "Tested with torch %s, transformers %s, compressed-tensors %s" % (
        torch.__version__.split("+")[0], transformers.__version__, compressed_tensors.__version__)
    if not a.no_vllm:
        import vllm
        versions += ", vLLM %s (CPU build; CPU AMX tiles: %s)" % (
            vllm.__version__, "yes" if torch.cpu._is_amx_tile_supported() else "no")
    md = table(rows, versions)
    with open(os.path.join(work, "fp4.md"), "w") as f:
        f.write(md)
    with open(os.path.join(work, "fp4.json"), "w") as f:
        json.dump(rows, f, indent=1, default=str)
    print(md)
    if a.readme:
        text = open(a.readme).read()
        B, E = "<!-- %s:begin -->" % a.readme_block, "<!-- %s:end -->" % a.readme_block
        i, j = text.find(B), text.find(E)
        if i < 0 or j < i:
            raise SystemExit("harness: %s has no %s ... %s block" % (a.readme, B, E))
        if a.update_readme:
            with open(a.readme, "w") as f:
                f.write(text[:i + len(B)] + "\n" + md + text[j:])
        elif text[i + len(B):j].strip() + "\n" != md:
            print("fp4: NOTE: the FP4 table in %s is not this run's "
                  "(make check-loaders UPDATE_README=1 rewrites it)" % a.readme)
    bad = [r for r in rows if not r["ok"] and not r.get("known")]
    known = [r for r in rows if r.get("known")]
    for r in known:
        print("KNOWN %s: %s" % (r["copy"], r["known"]))
    for r in bad:
        print("fp4: FAIL: %s (%s): %s" % (r["copy"], r["judge"], r["result"]))
    print("fp4: %d judges, %d KNOWN, %.0f s" % (len(rows), len(known), time.time() - t0))
    print("%d passed, %d failed" % (len(rows) - len(bad) - len(known), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
