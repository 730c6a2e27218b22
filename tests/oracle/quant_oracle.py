#!/usr/bin/env python3
"""Independent oracle for `fp8conv quantize`: compute the exact expected output and write goldens.

Usage: quant_oracle.py CASES_JSON OUTDIR

CASES_JSON is a JSON array of {"name": N, "input": DIR (relative to the repository root),
"args": [CLI args of `fp8conv quantize`]}. For every case the oracle converts the input checkpoint
in memory, exactly as fp8conv-formats(5) (ELEMENT TYPES, SCHEMES, FORMATS) and the
decisions below say, writes every output shard with the reference writer (PyPI safetensors,
`serialize` with TensorSpec and metadata {"format": "pt"}; the C writer is byte-identical to it)
and records the result in OUTDIR/<name>.json, written as json.dumps(obj, indent=1, sort_keys=True)
plus a newline (byte-stable):

  {"case", "input", "args",
   "tensors": {NAME: {"dtype", "shape", "shard", "xxh3_128"}}   every output tensor; the hash is
              xxhash.xxh3_128 (canonical big-endian hex) of its little-endian data bytes only,
   "files": {SHARD: xxh3_128 of the whole shard file},
   "index": null | {"metadata": {"total_size"}, "weight_map"},
   "config": null | input config.json plus "quantization_config" (added as the last key; the
             golden itself is written with sorted keys, so compare configs as parsed objects),
   "hf_quant_config": null | object (modelopt only),
   "ignored": sorted module names of the ignore list,
   "copied_files": sorted names of the other top-level files copied byte for byte}

It shares no code with the C implementation (it never reads lib/ or cli/); it reuses only
make_goldens.py (binding dtype names and its pure-Python model of the fp8conv-formats(5), CONTAINER writer, used
as a cross-check of every shard).

Decisions (beyond fp8conv-formats(5)):
- Output shards have the input shard names; each holds the converted versions of the tensors its
  input shard held plus their scales. The index is written iff the input had one or had several
  shards; total_size = sum of the data bytes of all output tensors; weight_map lists them all.
- Copied files: every regular top-level file except the shards, the index and config.json.
- Selected by default: dtype BF16/F16/F32 and (rank 2 and name ends with ".weight", or rank 3
  and name contains ".experts."), minus the default ignore list (dropped by --no-default-ignore):
  a '.'-component equal to embed_tokens, wte, wpe, tok_embeddings, lm_head or eh_proj, or ending
  in "embeddings"; the name "output.weight"; names containing "norm", "router" or
  "shared_expert_gate"; names ending in ".mlp.gate.weight" or ".block_sparse_moe.gate.weight" (Mixtral). Minus --ignore REGEX (re.search on the
  full name). mxfp8: a tensor with N % 32 != 0 (N = last dim) stays unquantized.
- Ignore list: sorted module names (name minus ".weight") of every rank-2 BF16/F16/F32 tensor
  named *.weight that was not quantized, for whatever reason (rank-3 tensors never appear).
- Scales (amax = max |x| per group, in fp32):
  f32 (hf-fp8 block/tensor, modelopt channel/tensor): s = fp32(amax) / fp32(448); amax 0 -> 1;
      s == 0 (underflow) -> 2^-149.
  ct (compressed-tensors block/channel/tensor): s = amax/448 in fp32, rounded RNE to the weight's
      dtype; amax 0 -> 1; rounded 0 -> smallest positive of that dtype (BF16 2^-133, F16 2^-24,
      F32 2^-149); a BF16/F16 value with amax > 464 * s (possible only when subnormal; 464 is
      the midpoint between 448 and 480) goes one step up, so that nothing saturates; F16 with
      amax/448 > 65504 is bad input. Quantize with the stored value.
  ue8m0 (hf-fp8 block + --scale-fmt ue8m0; stored F32): s = 2^E, E smallest integer with
      amax <= 448 * 2^E (exact, from frexp), E >= -149; amax 0 -> 1.
  mx (mxfp8, stored U8 = E + 127, E clamped to [-127, 127]): rceil E smallest with
      amax <= 448 * 2^E; floor E = floor(log2 amax) - 8 from frexp; amax 0 -> byte 0.
      s = 2^(byte - 127) in fp32 (byte 0: the fp32 subnormal 2^-127).
- q = E4M3(fp32(x) / fp32(s)): one fp32 division, clamp to [-448, 448], then ml_dtypes
  float8_e4m3fn (RNE; it would overflow to NaN without the clamp); -0 stays 0x80.
- Groups: block R x C tiles (partial edges), channel one per row, tensor one per matrix, mxfp8 32
  consecutive elements of a row; rank 3 [E, M, N]: each expert independently, E prepended to the
  scale shape. Scale names, dtypes and shapes: the table of fp8conv-formats(5), FORMATS.
- quantization_config / hf_quant_config.json: see quantization_config() and hf_quant_config()
  (modelopt producer version "0.1.0"; compressed-tensors block input_activations group_size = C).

Before any case runs, self_test() checks the numerics by hand-picked values and against a
pure-Python (Fraction) E4M3 encoder and a loop-by-loop reference of every scale kind.
"""

import argparse
import bisect
import ctypes
import json
import math
import os
import re
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import xxhash
from safetensors import TensorSpec, serialize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import make_goldens  # noqa: E402  (BINDING_NAME, model_bytes: the fp8conv-formats(5), CONTAINER writer model)

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
F32 = np.float32
FLOAT_DTYPES = {"BF16": np.dtype(BF16), "F16": np.dtype("<f2"), "F32": np.dtype("<f4")}
SMALLEST = {"BF16": 2.0 ** -133, "F16": 2.0 ** -24, "F32": 2.0 ** -149}
INDEX_NAME = "model.safetensors.index.json"
PRODUCER = {"name": "fp8conv", "version": "0.1.0"}

SCHEMES = ("block", "channel", "tensor", "mxfp8")
FORMATS = {  # fp8conv-formats(5), FORMATS: the allowed scheme/format pairs, first = default
    "block": ("hf-fp8", "compressed-tensors"),
    "channel": ("compressed-tensors", "modelopt"),
    # modelopt FP8 (per tensor) is refused: vLLM reads it as static activations
    "tensor": ("hf-fp8", "compressed-tensors"),
    "mxfp8": ("compressed-tensors", "modelopt"),
}
IGNORE_COMPONENTS = {"embed_tokens", "wte", "wpe", "tok_embeddings", "lm_head", "eh_proj"}


class OracleError(Exception):
    pass


# ============================================================================================
# numerics (fp8conv-formats(5), ELEMENT TYPES and SCHEMES)


def e4m3_codes(q):
    """fp32 array -> E4M3 byte codes: saturate to +-448, then RNE (ml_dtypes)."""
    assert q.dtype == F32
    q = np.clip(q, F32(-448.0), F32(448.0))
    assert q.dtype == F32
    return q.astype(E4M3).view(np.uint8)


def exp_ceil(amax):
    """Smallest integer E with amax <= 448 * 2^E, for amax > 0 (float64-exact, no log2).
    With amax = m * 2^e (frexp, 0.5 <= m < 1): 448 * 2^(e-10) < amax < 448 * 2^(e-8)."""
    a = np.asarray(amax, dtype=np.float64)
    _, e = np.frexp(a)
    e = e.astype(np.int64)
    return np.where(a <= np.ldexp(448.0, e - 9), e - 9, e - 8)


def exp_floor(amax):
    """floor(log2 amax) - 8 for amax > 0, exactly from the exponent (frexp)."""
    _, e = np.frexp(np.asarray(amax, dtype=np.float64))
    return e.astype(np.int64) - 1 - 8


def scale_f32(amax):
    """Plain fp32 scale: (stored F32, divisor F32)."""
    s = amax / F32(448.0)
    assert s.dtype == F32
    s = np.where(s == 0, F32(SMALLEST["F32"]), s).astype(F32)
    s = np.where(amax == 0, F32(1.0), s).astype(F32)
    return s, s


def scale_ct(amax, wdtype):
    """compressed-tensors scale in the weight's dtype: (stored, divisor F32)."""
    s32 = amax / F32(448.0)
    assert s32.dtype == F32
    if wdtype == "F16" and np.any(s32 > F32(65504.0)):
        raise OracleError("F16 scale overflow (amax/448 > 65504): bad input for compressed-tensors")
    st = s32.astype(FLOAT_DTYPES[wdtype])
    tiny = np.array(SMALLEST[wdtype]).astype(FLOAT_DTYPES[wdtype])
    one = np.array(1.0).astype(FLOAT_DTYPES[wdtype])
    st = np.where(st.astype(F32) == 0, tiny, st).astype(FLOAT_DTYPES[wdtype])
    # a (subnormal) scale so far below amax/448 that amax > 464 * s would saturate elements
    # (464: the midpoint between 448 and 480) goes one step up; float64 products are exact
    clips = (amax.astype(np.float64) > 464.0 * st.astype(np.float64)) & (wdtype != "F32")
    up = np.nextafter(st, np.array(np.inf, dtype=FLOAT_DTYPES[wdtype]))
    st = np.where(clips, up, st).astype(FLOAT_DTYPES[wdtype])
    st = np.where(amax == 0, one, st).astype(FLOAT_DTYPES[wdtype])
    return st, st.astype(F32)


def scale_ue8m0(amax):
    """Power-of-two fp32 scale 2^E, E = exp_ceil(amax) >= -149; amax 0 -> 1."""
    pos = amax > 0
    e = np.where(pos, np.maximum(exp_ceil(np.where(pos, amax, F32(1.0))), -149), 0)
    s = np.ldexp(np.ones(e.shape), e).astype(F32)
    return s, s


def scale_mx(amax, rounding):
    """E8M0 scale byte (U8) = E + 127, E clamped to [-127, 127]; amax 0 -> byte 0."""
    pos = amax > 0
    safe = np.where(pos, amax, F32(1.0))
    e = exp_ceil(safe) if rounding == "rceil" else exp_floor(safe)
    byte = np.where(pos, np.clip(e, -127, 127) + 127, 0).astype(np.uint8)
    s = np.ldexp(np.ones(byte.shape), byte.astype(np.int64) - 127).astype(F32)
    return byte, s


def make_scale(amax, plan, wdtype):
    kind = plan["kind"]
    if kind == "f32":
        return scale_f32(amax)
    if kind == "ct":
        return scale_ct(amax, wdtype)
    if kind == "ue8m0":
        return scale_ue8m0(amax)
    return scale_mx(amax, plan["mx_rounding"])


# ============================================================================================
# groups


def group_amax(a, plan):
    """a = |x| as fp32 [M, N] -> amax per group (fp32)."""
    m, n = a.shape
    scheme = plan["scheme"]
    if scheme == "block":
        r, c = plan["block"]
        bm, bn = -(-m // r), -(-n // c)
        padded = np.zeros((bm * r, bn * c), dtype=F32)
        padded[:m, :n] = a
        return padded.reshape(bm, r, bn, c).max(axis=(1, 3))
    if scheme == "channel":
        return a.max(axis=1)
    if scheme == "tensor":
        return np.array(a.max(), dtype=F32)
    return a.reshape(m, n // 32, 32).max(axis=2)


def expand(div, plan, shape):
    """Per-group divisor -> per-element divisor of the matrix shape."""
    m, n = shape
    scheme = plan["scheme"]
    if scheme == "block":
        r, c = plan["block"]
        return np.repeat(np.repeat(div, r, axis=0), c, axis=1)[:m, :n]
    if scheme == "channel":
        return np.broadcast_to(div[:, None], shape)
    if scheme == "tensor":
        return np.broadcast_to(div, shape)
    return np.repeat(div, 32, axis=1)


def stored_shape(stored, plan):
    """fp8conv-formats(5), FORMATS: the shape of one matrix's scale."""
    scheme, fmt = plan["scheme"], plan["format"]
    if scheme == "channel" and fmt == "compressed-tensors":
        return stored.reshape(-1, 1)
    if scheme == "tensor" and fmt == "compressed-tensors":
        return stored.reshape(1)
    return stored


def quantize_matrix(x, plan, wdtype):
    """x: fp32 [M, N] -> (E4M3 codes uint8 [M, N], stored scale array)."""
    amax = group_amax(np.abs(x), plan)
    stored, div = make_scale(amax, plan, wdtype)
    q = x / expand(div, plan, x.shape)
    assert q.dtype == F32
    return e4m3_codes(q), stored_shape(stored, plan)


def scale_name_dtype(name, wdtype, plan):
    if plan["scheme"] == "mxfp8":
        return name + "_scale", "U8"
    if plan["format"] == "hf-fp8":
        return name + ("_scale_inv" if plan["scheme"] == "block" else "_scale"), "F32"
    if plan["format"] == "compressed-tensors":
        return name + "_scale", wdtype
    return name + "_scale", "F32"


def to_f32(t):
    arr = np.frombuffer(t["data"], dtype=FLOAT_DTYPES[t["dtype"]]).reshape(t["shape"])
    x = arr.astype(F32)
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise OracleError("%s: non-finite value at flat index %d (bad input)" % (t["name"], bad[0]))
    return x


def quantize_tensor(t, plan):
    """Quantize one selected tensor (rank 2, or rank 3 per expert) -> [weight, scale] records."""
    x = to_f32(t)
    mats = [x] if x.ndim == 2 else list(x)
    parts = [quantize_matrix(m, plan, t["dtype"]) for m in mats]
    q = np.stack([p[0] for p in parts]) if x.ndim == 3 else parts[0][0]
    s = np.stack([p[1] for p in parts]) if x.ndim == 3 else parts[0][1]
    sname, sdtype = scale_name_dtype(t["name"], t["dtype"], plan)
    assert s.dtype == {"U8": np.dtype(np.uint8), "F32": np.dtype(F32)}.get(sdtype, FLOAT_DTYPES.get(sdtype))
    return [record(t["name"], "F8_E4M3", q), record(sname, sdtype, s)]


def record(name, dtype, arr):
    return {"name": name, "dtype": dtype, "shape": list(arr.shape),
            "data": np.ascontiguousarray(arr).tobytes()}


# ============================================================================================
# selection and options


def default_ignored(name):
    parts = name.split(".")
    if any(p in IGNORE_COMPONENTS or p.endswith("embeddings") for p in parts):
        return True
    if name == "output.weight" or name.endswith((".mlp.gate.weight", ".block_sparse_moe.gate.weight")):
        return True
    return any(s in name for s in ("norm", "router", "shared_expert_gate"))


def is_candidate(t):
    rank = len(t["shape"])
    return t["dtype"] in FLOAT_DTYPES and (
        (rank == 2 and t["name"].endswith(".weight")) or (rank == 3 and ".experts." in t["name"]))


def selected(t, plan):
    if not is_candidate(t):
        return False
    if not plan["no_default_ignore"] and default_ignored(t["name"]):
        return False
    if any(re.search(rx, t["name"]) for rx in plan["ignore"]):
        return False
    if plan["scheme"] == "mxfp8" and t["shape"][-1] % 32:
        return False
    return True


def in_ignore_list(t, quantized):
    return (not quantized and len(t["shape"]) == 2 and t["dtype"] in FLOAT_DTYPES
            and t["name"].endswith(".weight"))


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise OracleError("bad args: " + message)


def parse_args(args):
    p = _Parser(prog="fp8conv quantize", allow_abbrev=False, add_help=False)
    p.add_argument("--scheme", choices=SCHEMES, default="block")
    p.add_argument("--format", choices=("hf-fp8", "compressed-tensors", "modelopt"))
    p.add_argument("--block")
    p.add_argument("--scale-fmt", choices=("ue8m0",))
    p.add_argument("--mx-rounding", choices=("rceil", "floor"))
    p.add_argument("--ignore", action="append", default=[])
    p.add_argument("--no-default-ignore", action="store_true")
    o = p.parse_args(args)
    fmt = o.format or FORMATS[o.scheme][0]
    if fmt not in FORMATS[o.scheme]:
        raise OracleError("scheme %s has no format %s" % (o.scheme, fmt))
    if o.block is not None and o.scheme != "block":
        raise OracleError("--block needs --scheme block")
    if o.scale_fmt and (o.scheme, fmt) != ("block", "hf-fp8"):
        raise OracleError("--scale-fmt ue8m0 needs block + hf-fp8")
    if o.mx_rounding and o.scheme != "mxfp8":
        raise OracleError("--mx-rounding needs --scheme mxfp8")
    m = re.fullmatch(r"([1-9][0-9]*)x([1-9][0-9]*)", o.block or "128x128")
    if not m:
        raise OracleError("bad --block %r" % o.block)
    kind = ("mx" if o.scheme == "mxfp8" else "ct" if fmt == "compressed-tensors"
            else "ue8m0" if o.scale_fmt else "f32")
    return {"scheme": o.scheme, "format": fmt, "block": (int(m.group(1)), int(m.group(2))),
            "scale_fmt": o.scale_fmt, "mx_rounding": o.mx_rounding or "rceil", "kind": kind,
            "ignore": o.ignore, "no_default_ignore": o.no_default_ignore}


# ============================================================================================
# config files (fp8conv-formats(5), FORMATS)


def weight_args(plan):
    scheme = plan["scheme"]
    w = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": False}
    if scheme == "block":
        w.update(strategy="block", block_structure=list(plan["block"]))
    elif scheme == "mxfp8":
        w.update(strategy="group", group_size=32, scale_dtype="torch.uint8")
    else:
        w["strategy"] = scheme
    return w


def activation_args(plan):
    scheme = plan["scheme"]
    a = {"num_bits": 8, "type": "float", "symmetric": True, "dynamic": True}
    if scheme == "block":
        a.update(strategy="group", group_size=plan["block"][1])
    elif scheme == "mxfp8":
        a.update(strategy="group", group_size=32, scale_dtype="torch.uint8")
    else:
        # vLLM's compressed-tensors FP8 MoE method takes tensor weights only with
        # tensor activations, channel weights only with token activations
        a["strategy"] = "tensor" if scheme == "tensor" else "token"
    return a


MODELOPT_ALGO = {"tensor": "FP8", "channel": "FP8_PER_CHANNEL_PER_TOKEN", "mxfp8": "MXFP8"}


def quantization_config(plan, ignored):
    fmt = plan["format"]
    if fmt == "hf-fp8":
        qc = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic"}
        if plan["scheme"] == "block":
            qc["weight_block_size"] = list(plan["block"])
        if plan["scale_fmt"]:
            qc["scale_fmt"] = plan["scale_fmt"]
        qc["modules_to_not_convert"] = ignored
        return qc
    if fmt == "compressed-tensors":
        group = {"targets": ["Linear"], "weights": weight_args(plan),
                 "input_activations": activation_args(plan)}
        return {"quant_method": "compressed-tensors",
                "format": "mxfp8-quantized" if plan["scheme"] == "mxfp8" else "float-quantized",
                "quantization_status": "compressed", "config_groups": {"group_0": group},
                "ignore": ignored, "kv_cache_scheme": None}
    return {"quant_method": "modelopt", "quant_algo": MODELOPT_ALGO[plan["scheme"]], "ignore": ignored}


def hf_quant_config(plan, ignored):
    if plan["format"] != "modelopt":
        return None
    q = {"quant_algo": MODELOPT_ALGO[plan["scheme"]], "exclude_modules": ignored}
    if plan["scheme"] == "mxfp8":
        q["group_size"] = 32
    return {"producer": dict(PRODUCER), "quantization": q}


# ============================================================================================
# checkpoint I/O


def read_shard(path):
    """Minimal safetensors reader -> {name: {"name", "dtype", "shape", "data"}} (file order)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        out[name] = {"name": name, "dtype": e["dtype"], "shape": list(e["shape"]),
                     "data": raw[base + begin:base + end]}
    return out


def load_checkpoint(indir):
    files = sorted(f for f in os.listdir(indir) if os.path.isfile(os.path.join(indir, f))
                   and not os.path.islink(os.path.join(indir, f)))
    has_index = INDEX_NAME in files
    if has_index:
        with open(os.path.join(indir, INDEX_NAME), "rb") as f:
            shards = sorted(set(json.loads(f.read())["weight_map"].values()))
    else:
        shards = [f for f in files if f.endswith(".safetensors")]
    config = None
    if "config.json" in files:
        with open(os.path.join(indir, "config.json"), "rb") as f:
            config = json.loads(f.read().decode("utf-8"))
        if "quantization_config" in config:
            raise OracleError("%s: config.json already has a quantization_config" % indir)
    copied = [f for f in files if f not in shards and f not in (INDEX_NAME, "config.json")]
    data = {s: read_shard(os.path.join(indir, s)) for s in shards}
    return {"shards": shards, "has_index": has_index, "config": config, "copied": copied, "data": data}


def hexhash(b):
    return xxhash.xxh3_128(b).hexdigest()


def write_shard(records, metadata={"format": "pt"}):
    """Shard bytes from the reference writer, cross-checked with make_goldens' model of fp8conv-formats(5), CONTAINER
    (metadata None: a header without __metadata__)."""
    keep, specs = [], {}
    for r in records:
        buf = ctypes.create_string_buffer(r["data"], max(len(r["data"]), 1))
        keep.append(buf)
        specs[r["name"]] = TensorSpec(dtype=make_goldens.BINDING_NAME[r["dtype"]], shape=r["shape"],
                                      data_ptr=ctypes.addressof(buf), data_len=len(r["data"]))
        assert specs[r["name"]].dtype == r["dtype"] and list(specs[r["name"]].shape) == r["shape"]
    got = bytes(serialize(specs, metadata=metadata))
    model = make_goldens.model_bytes(metadata, [dict(r, _data=r["data"]) for r in records])
    if got != model:
        raise OracleError("reference writer and the fp8conv-formats(5), CONTAINER model disagree")
    return got


# ============================================================================================
# one case


def convert(ckpt, plan):
    """-> (records per shard, sorted ignore list)."""
    out, ignored = {}, []
    for shard in ckpt["shards"]:
        recs = []
        for t in ckpt["data"][shard].values():
            quantized = selected(t, plan)
            recs += quantize_tensor(t, plan) if quantized else [t]
            if in_ignore_list(t, quantized):
                ignored.append(t["name"][:-len(".weight")])
        out[shard] = recs
    return out, sorted(ignored)


def run_case(case):
    plan = parse_args(case["args"])
    ckpt = load_checkpoint(os.path.join(ROOT, case["input"]))
    shards, ignored = convert(ckpt, plan)
    tensors, files, weight_map, total = {}, {}, {}, 0
    for shard, recs in shards.items():
        files[shard] = hexhash(write_shard(recs))
        for r in recs:
            if r["name"] in tensors:
                raise OracleError("tensor %s written twice" % r["name"])
            tensors[r["name"]] = {"dtype": r["dtype"], "shape": r["shape"], "shard": shard,
                                  "xxh3_128": hexhash(r["data"])}
            weight_map[r["name"]] = shard
            total += len(r["data"])
    index = None
    if ckpt["has_index"] or len(ckpt["shards"]) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    config = None
    if ckpt["config"] is not None:
        config = dict(ckpt["config"])
        config["quantization_config"] = quantization_config(plan, ignored)
    return {"case": case["name"], "input": case["input"], "args": case["args"],
            "tensors": tensors, "files": files, "index": index, "config": config,
            "hf_quant_config": hf_quant_config(plan, ignored), "ignored": ignored,
            "copied_files": ckpt["copied"]}


# ============================================================================================
# self-tests (run before any golden is written)

E4M3_POS = [Fraction(0)] + [Fraction(k, 512) for k in range(1, 8)] + [
    Fraction(8 + m, 8) * Fraction(2) ** (e - 7) for e in range(1, 16) for m in range(8)
    if not (e == 15 and m == 7)]  # index == byte code, 0x00 .. 0x7E


def e4m3_ref(x):
    """Pure-Python E4M3 encoder: exact RNE on the value, saturating, sign of zero kept."""
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(Fraction(x))
    if a >= E4M3_POS[-1]:
        return sign | 0x7E
    i = bisect.bisect_right(E4M3_POS, a) - 1      # E4M3_POS[i] <= a < E4M3_POS[i + 1]
    lo, hi = a - E4M3_POS[i], E4M3_POS[i + 1] - a
    code = i if lo < hi or (lo == hi and i % 2 == 0) else i + 1
    return sign | code


def check(cond, what):
    if not cond:
        raise OracleError("self-test failed: " + what)


def test_e4m3_values():
    cases = [(1.0625, 0x38), (1.1875, 0x3A), (17.0, 0x58), (448.0, 0x7E), (480.0, 0x7E),
             (1e30, 0x7E), (-480.0, 0xFE), (-0.0, 0x80), (0.0, 0x00), (2.0 ** -10, 0x00),
             (3 * 2.0 ** -10, 0x02), (0.0068359375, 0x04), (2.0 ** -9, 0x01), (-(2.0 ** -6), 0x88),
             (464.0, 0x7E), (2.0 ** -149, 0x00), (1.0, 0x38), (0.015625, 0x08)]
    got = e4m3_codes(np.array([c[0] for c in cases], dtype=F32))
    for (x, want), g in zip(cases, got):
        check(int(g) == want, "E4M3(%r) = 0x%02X, want 0x%02X" % (x, g, want))
        check(e4m3_ref(float(F32(x))) == want, "e4m3_ref(%r) != 0x%02X" % (x, want))


def test_e4m3_exhaustive():
    """ml_dtypes + clamp == the Fraction encoder on every finite bf16 value, on every E4M3
    midpoint +- 1 fp32 ulp, and on fp32 values of every binade."""
    bf = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(BF16).astype(F32)
    mids = np.array([float((a + b) / 2) for a, b in zip(E4M3_POS, E4M3_POS[1:])], dtype=F32)
    near = np.concatenate([mids, np.nextafter(mids, F32(0)), np.nextafter(mids, F32(1000))])
    rng = np.random.default_rng(7)
    rand = (rng.uniform(1, 2, 20000) * np.exp2(rng.integers(-150, 20, 20000))).astype(F32)
    xs = np.concatenate([bf, near, -near, rand, -rand])
    xs = xs[np.isfinite(xs)]
    got = e4m3_codes(xs)
    for x, g in zip(xs.tolist(), got.tolist()):
        if e4m3_ref(x) != g:
            raise OracleError("self-test failed: E4M3(%r): ml_dtypes 0x%02X, reference 0x%02X"
                              % (x, g, e4m3_ref(x)))


def test_exponents():
    a = np.array([448.0, 449.0, 224.0, 224.00002, 1.0, 1.9, 1.75, 2.0 ** -140, 3.5], dtype=F32)
    check(exp_ceil(a).tolist() == [0, 1, -1, 0, -8, -7, -8, -148, -7], "exp_ceil %r" % exp_ceil(a))
    check(exp_floor(a).tolist() == [0, 0, -1, -1, -8, -8, -8, -148, -7], "exp_floor %r" % exp_floor(a))
    byte, s = scale_mx(np.array([0.0, 2.0 ** -140, 1.9, 448.0, 3e38], dtype=F32), "rceil")
    check(byte.tolist() == [0, 0, 120, 127, 247], "mx rceil bytes %r" % byte)
    check(s[0] == F32(2.0 ** -127) and s[0] > 0, "byte 0 -> 2^-127")
    byte, _ = scale_mx(np.array([1.9, 0.0], dtype=F32), "floor")
    check(byte.tolist() == [119, 0], "mx floor bytes %r" % byte)
    s, _ = scale_ue8m0(np.array([0.0, 448.0, 449.0, 2.0 ** -149], dtype=F32))
    check(s.tolist() == [1.0, 1.0, 2.0, 2.0 ** -149], "ue8m0 %r" % s)


def test_scales():
    s, _ = scale_f32(np.array([0.0, 448.0, 2.0 ** -149, 7 * 2.0 ** -149, 1.0], dtype=F32))
    check(s.tolist() == [1.0, 1.0, 2.0 ** -149, 2.0 ** -149, float(F32(1.0) / F32(448.0))], "f32 %r" % s)
    st, d = scale_ct(np.array([0.0, 3 * 2.0 ** -133, 448.0, 1.0], dtype=F32), "BF16")
    check(st.dtype == BF16 and d.tolist() == [1.0, 2.0 ** -133, 1.0, 0.002227783203125], "ct bf16 %r" % d)
    st, d = scale_ct(np.array([3 * 2.0 ** -24, 0.0], dtype=F32), "F16")
    check(st.dtype == np.float16 and d.tolist() == [2.0 ** -24, 1.0], "ct f16 %r" % d)


def loop_reference(x, plan, wdtype):
    """Element-by-element reference of one matrix (slow; small inputs only)."""
    m, n = x.shape
    scheme = plan["scheme"]
    r, c = {"block": plan["block"], "channel": (1, n), "tensor": (m, n), "mxfp8": (1, 32)}[scheme]
    q = np.zeros((m, n), dtype=np.uint8)
    scales = {}
    for i0 in range(0, m, r):
        for j0 in range(0, n, c):
            amax = max(abs(float(x[i, j])) for i in range(i0, min(i0 + r, m)) for j in range(j0, min(j0 + c, n)))
            div = loop_scale(amax, plan, wdtype)
            scales[(i0 // r, j0 // c)] = div
            for i in range(i0, min(i0 + r, m)):
                for j in range(j0, min(j0 + c, n)):
                    q[i, j] = e4m3_ref(float(F32(x[i, j]) / F32(div)))
    return q, scales


def loop_scale(amax, plan, wdtype):
    """Scalar scale divisor, computed with Python ints/floats (not the vectorized helpers)."""
    kind = plan["kind"]
    if kind in ("ue8m0", "mx") and amax == 0:
        return 1.0 if kind == "ue8m0" else 2.0 ** -127
    if kind in ("ue8m0", "mx"):
        mant, e = math.frexp(amax)
        if kind == "mx" and plan["mx_rounding"] == "floor":
            big_e = e - 9
        else:
            big_e = e - 9 if amax <= 448.0 * 2.0 ** (e - 9) else e - 8
        big_e = max(big_e, -149) if kind == "ue8m0" else min(max(big_e, -127), 127)
        return 2.0 ** big_e
    if amax == 0:
        return 1.0
    s = float(F32(amax) / F32(448.0))
    if kind == "ct":
        d = FLOAT_DTYPES[wdtype]
        h = np.array(s, dtype=F32).astype(d)
        h = h if float(h) != 0 else np.array(SMALLEST[wdtype]).astype(d)
        if wdtype != "F32" and Fraction(amax) > 464 * Fraction(float(h)):  # saturates: step up
            h = np.nextafter(h, np.array(np.inf, dtype=d))
        return float(h)
    return s if s != 0 else SMALLEST["F32"]


def test_against_loops():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((37, 64)) * np.exp2(rng.integers(-20, 8, (37, 1)))).astype(F32)
    x[3] = 0.0
    x[5, :32] = -0.0
    x[7] = (rng.integers(-3, 4, 64) * 2.0 ** -133).astype(F32)
    x[9, 0] = 448.0 * 1.9
    plans = [parse_args(a) for a in (
        ["--scheme", "block", "--format", "hf-fp8", "--block", "8x16"],
        ["--scheme", "block", "--format", "hf-fp8", "--block", "5x7", "--scale-fmt", "ue8m0"],
        ["--scheme", "block", "--format", "compressed-tensors", "--block", "16x32"],
        ["--scheme", "channel", "--format", "compressed-tensors"],
        ["--scheme", "channel", "--format", "modelopt"],
        ["--scheme", "tensor", "--format", "hf-fp8"],
        ["--scheme", "mxfp8", "--format", "compressed-tensors"],
        ["--scheme", "mxfp8", "--format", "modelopt", "--mx-rounding", "floor"])]
    for wdtype in ("BF16", "F16", "F32"):
        xw = x.astype(FLOAT_DTYPES[wdtype]).astype(F32)
        for plan in plans:
            q, stored = quantize_matrix(xw, plan, wdtype)
            q_ref, _ = loop_reference(xw, plan, wdtype)
            check(np.array_equal(q, q_ref), "vectorized != loop reference for %s %s %s"
                  % (wdtype, plan["scheme"], plan["kind"]))


def self_test():
    check(sys.byteorder == "little", "little-endian host")
    test_e4m3_values()
    test_e4m3_exhaustive()
    test_exponents()
    test_scales()
    test_against_loops()


# ============================================================================================


def dump(obj):
    return json.dumps(obj, indent=1, sort_keys=True) + "\n"


def load_cases(path, valid_input=lambda value: isinstance(value, str)):
    """A case list: objects with exactly name, input and args, unique names; `valid_input`
    says which inputs the calling oracle takes (a path here)."""
    with open(path, "rb") as f:
        cases = json.loads(f.read().decode("utf-8"))
    names = set()
    for c in cases:
        if (set(c) != {"name", "input", "args"} or not re.fullmatch(r"[A-Za-z0-9._-]+", c["name"])
                or not valid_input(c["input"])):
            raise OracleError("bad case %r" % (c,))
        if c["name"] in names:
            raise OracleError("duplicate case name %r" % c["name"])
        names.add(c["name"])
    return cases


def exact_rne(x, p, emin, emax=None):
    """Exact round-to-nearest-even of the Fraction x to a binary format with p significant bits
    and minimum normal exponent emin, subnormals kept; None when |result| exceeds the largest
    finite value of exponent emax (when given)."""
    if x == 0:
        return Fraction(0)
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, emin) - p + 1)
    n = a / quantum
    fl = n.numerator // n.denominator
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    r = fl * quantum
    if emax is not None and r > (2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax:
        return None
    return r if x > 0 else -r


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: quant_oracle.py CASES_JSON OUTDIR\n")
        sys.exit(2)
    try:
        cases = load_cases(sys.argv[1])
        self_test()
        print("quant_oracle: self-test OK")
        os.makedirs(sys.argv[2], exist_ok=True)
        for case in cases:
            result = run_case(case)
            with open(os.path.join(sys.argv[2], case["name"] + ".json"), "w", encoding="utf-8") as f:
                f.write(dump(result))
            print("  %-30s %3d tensors  %2d ignored  %s" % (
                case["name"], len(result["tensors"]), len(result["ignored"]), " ".join(case["args"])))
    except OracleError as e:
        sys.stderr.write("quant_oracle: error: %s\n" % e)
        sys.exit(1)
    print("quant_oracle: wrote %d goldens into %s" % (len(cases), sys.argv[2]))


if __name__ == "__main__":
    main()
