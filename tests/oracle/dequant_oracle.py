#!/usr/bin/env python3
"""Independent oracle for `fp8conv dequantize-for-export`: the exact expected output, as goldens.

Usage:
  dequant_oracle.py CASES_JSON OUTDIR
      write OUTDIR/<case>.json for every case of CASES_JSON (tests/oracle/dequant_cases.json)
  dequant_oracle.py --convert [--dtype bf16|f16|f32] INPUT_DIR OUTPUT_DIR
      dequantize one checkpoint directory and write the result (a reference output to diff
      against, by hand; the goldens never depend on it)

CASES_JSON is a JSON array of {"name": N, "input": I, "args": [CLI args of
`fp8conv dequantize-for-export`]}, where I is
  {"quant_case": Q}  the FP8 checkpoint that case Q of tests/oracle/quant_cases.json gives: built
                     in memory by tests/oracle/quant_oracle.py's own functions (never by the C
                     tool), written to a temporary directory exactly as `fp8conv quantize` lays it
                     out (shards, index, config.json, hf_quant_config.json, copied files), and its
                     shard hashes checked against testdata/golden/quant/Q.json when that exists;
  {"dir": D}         the checkpoint directory D (relative to the repository root).
Each golden, json.dumps(obj, indent=1, sort_keys=True) plus a newline (byte-stable), is

  {"case", "input", "args",
   "tensors": {NAME: {"dtype", "shape", "shard", "xxh3_128"}}   every output tensor; the hash is
              xxhash.xxh3_128 (canonical big-endian hex) of its little-endian data bytes,
   "files": {SHARD: xxh3_128 of the whole output shard file},
   "index": null | {"metadata": {"total_size"}, "weight_map"},
   "config": null | the output config.json object (compare as parsed objects),
   "copied_files": sorted names of the other top-level files copied byte for byte}

The contract (fp8conv-formats(5), DEQUANTIZATION, and the decisions of the brief that introduced this file):
- Every F8_E4M3 tensor W has exactly one scale tensor, W + "_scale_inv" or W + "_scale", looked up
  by name across all shards (it may sit in another shard than W). None or both: bad input.
- Scale kind, from W's shape ([M, N], or [E, M, N]: each expert independently, E prepended to every
  scale shape) and the scale's dtype/shape:
    U8 [M, N/32]                      mxfp8: value 2^(byte - 127) (byte 0: fp32 subnormal 2^-127);
                                      byte 0xFF is bad input; needs N % 32 == 0
    F32/BF16/F16, exact value as fp32:
      [] or [1]                       per-tensor
      [M] or [M, 1]                   per-channel (row i uses s[i])
      [ceil(M/R), ceil(N/C)]          block: element (i, j) uses s[i // R, j // C]
  (R, C) = quantization_config.weight_block_size (hf-fp8), else
  quantization_config.config_groups.group_0.weights.block_structure (compressed-tensors), else
  128 x 128. The kinds are tried in the order block, channel, tensor; where a shape fits two of them
  (M = 1, R = 1, or a single block) both give the same values. Anything else: bad input.
- y = fp32(E4M3(q)) * fp32(s), ONE fp32 multiplication (numpy float32 arrays; no FTZ), then RNE to
  the output dtype: bf16 by ml_dtypes.bfloat16, f16 by numpy float16, f32 as is. A NaN code
  (0x7F/0xFF) is bad input. A non-finite result is reported as an error of the case (the fixtures
  never overflow; the contract does not say what a converter must do then).
- Output shards have the input shard names; each holds the tensors its input shard held minus every
  scale consumed above and every tensor whose last '.'-separated name component is input_scale,
  k_scale or v_scale. Dequantized weights keep name and shape, with the output dtype; every other
  tensor is copied bit for bit. Shards are written by the reference writer (quant_oracle.write_shard:
  safetensors.serialize with metadata {"format": "pt"}, cross-checked with the model of fp8conv-formats(5), CONTAINER).
- Index iff the input had one or several shards: total_size = sum of the output tensors' data bytes,
  weight_map = every output tensor.
- config.json: the input object minus "quantization_config", "torch_dtype" set to
  bfloat16/float16/float32 (in place when present, else appended last), "dtype" set the same way
  when present; everything else unchanged.
- Copied: every other regular top-level file (not a symlink) except the shards, the index,
  config.json, hf_quant_config.json and dotfiles. Shards: the index's weight_map values when there is
  an index, else every *.safetensors file.

Before any golden is written, self_test() checks the E4M3 decoding of all 256 codes against an exact
pure-Python decoder, the fp32 product and the bf16/f16 rounding against exact Fraction arithmetic
(every non-NaN code times a few dozen scales, hand-picked bf16 results, a double-rounding case), and
the vectorized dequantization of every scale kind against an element-by-element Fraction reference.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import quant_oracle  # noqa: E402  (read_shard, write_shard, hexhash, and the quantize oracle)

from quant_oracle import BF16, E4M3, F32, INDEX_NAME  # noqa: E402
SCALE_DTYPES = {"F32": np.dtype("<f4"), "BF16": np.dtype(BF16), "F16": np.dtype("<f2")}
OUT_DTYPES = {  # --dtype -> (safetensors code, numpy dtype, config torch_dtype)
    "bf16": ("BF16", np.dtype(BF16), "bfloat16"),
    "f16": ("F16", np.dtype("<f2"), "float16"),
    "f32": ("F32", np.dtype("<f4"), "float32"),
}
DROPPED_COMPONENTS = {"input_scale", "k_scale", "v_scale"}
QUANT_CASES = os.path.join(HERE, "quant_cases.json")
QUANT_GOLDEN = os.path.join(ROOT, "testdata", "golden", "quant")


class OracleError(Exception):
    pass


# ============================================================================================
# numerics


def decode_e4m3(codes):
    """uint8 codes -> fp32 values (ml_dtypes float8_e4m3fn, exact); NaN codes are bad input."""
    codes = np.asarray(codes, dtype=np.uint8)
    bad = np.flatnonzero((codes & 0x7F) == 0x7F)
    if bad.size:
        raise OracleError("E4M3 NaN code 0x%02X at flat index %d (bad input)"
                          % (codes.flat[bad[0]], bad[0]))
    x = codes.view(E4M3).astype(F32)
    assert x.dtype == F32
    return x


def scale_values(t):
    """A scale tensor record -> its values as fp32 (exact)."""
    if t["dtype"] == "U8":
        b = np.frombuffer(t["data"], dtype=np.uint8).reshape(t["shape"])
        bad = np.flatnonzero(b == 0xFF)
        if bad.size:
            raise OracleError("%s: E8M0 byte 0xFF (NaN) at flat index %d (bad input)" % (t["name"], bad[0]))
        s = np.ldexp(np.ones(b.shape, dtype=np.float64), b.astype(np.int64) - 127).astype(F32)
        assert np.all(s > 0)  # byte 0 -> 2^-127, an fp32 subnormal, exact
        return s
    if t["dtype"] not in SCALE_DTYPES:
        raise OracleError("%s: scale dtype %s is not F32, BF16, F16 or U8 (bad input)" % (t["name"], t["dtype"]))
    return np.frombuffer(t["data"], dtype=SCALE_DTYPES[t["dtype"]]).reshape(t["shape"]).astype(F32)


def block_size(config):
    qc = (config or {}).get("quantization_config") or {}
    rc = qc.get("weight_block_size")
    if rc is None:
        rc = (((qc.get("config_groups") or {}).get("group_0") or {}).get("weights") or {}).get("block_structure")
    if rc is None:
        return (128, 128)
    if (not isinstance(rc, list) or len(rc) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in rc)):
        raise OracleError("config.json: bad block size %r" % (rc,))
    return tuple(rc)


def scale_kind(wshape, sdtype, sshape, block):
    """-> "mx" | "block" | "channel" | "tensor" for one weight [.., M, N] and its scale, or None."""
    lead, (m, n) = list(wshape[:-2]), wshape[-2:]
    if sdtype == "U8":
        return "mx" if n % 32 == 0 and sshape == lead + [m, n // 32] else None
    r, c = block
    if sshape == lead + [-(-m // r), -(-n // c)]:
        return "block"
    if sshape in (lead + [m], lead + [m, 1]):
        return "channel"
    if sshape in (lead + [1], lead if lead else []):   # [] / [1]; 3-D: [E] / [E, 1]
        return "tensor"
    return None


def expand_matrix(s, kind, shape, block):
    """One matrix's scale values (fp32) -> per-element fp32 scales of shape [M, N]."""
    m, n = shape
    if kind == "tensor":
        return np.broadcast_to(s.reshape(()), shape)
    if kind == "channel":
        return np.broadcast_to(s.reshape(m, 1), shape)
    if kind == "mx":
        return np.repeat(s.reshape(m, n // 32), 32, axis=1)
    r, c = block
    return np.repeat(np.repeat(s, r, axis=0), c, axis=1)[:m, :n]


def dequant_values(q, s, kind, block):
    """q: uint8 codes [M, N] or [E, M, N]; s: fp32 scale values -> fp32 y = x * s (one multiply)."""
    x = decode_e4m3(q)
    if x.ndim == 2:
        scale = expand_matrix(s, kind, x.shape, block)
    else:
        scale = np.stack([expand_matrix(s[e], kind, x.shape[1:], block) for e in range(x.shape[0])])
    y = x * np.ascontiguousarray(scale, dtype=F32)
    assert y.dtype == F32 and y.shape == x.shape
    return y


def to_out_dtype(y, dtype):
    out = y.astype(OUT_DTYPES[dtype][1])
    bad = np.flatnonzero(~np.isfinite(out.astype(F32)))
    if bad.size:
        raise OracleError("non-finite dequantized value at flat index %d (overflow in the fixture)" % bad[0])
    return out


# ============================================================================================
# checkpoint


def load_checkpoint(indir):
    names = sorted(os.listdir(indir))
    files = [f for f in names if os.path.isfile(os.path.join(indir, f))
             and not os.path.islink(os.path.join(indir, f))]
    has_index = INDEX_NAME in files
    if has_index:
        with open(os.path.join(indir, INDEX_NAME), "rb") as f:
            shards = sorted(set(json.loads(f.read().decode("utf-8"))["weight_map"].values()))
    else:
        shards = [f for f in files if f.endswith(".safetensors")]
    if not shards:
        raise OracleError("%s: no shard" % indir)
    config = None
    if "config.json" in files:
        with open(os.path.join(indir, "config.json"), "rb") as f:
            config = json.loads(f.read().decode("utf-8"))
    skip = set(shards) | {INDEX_NAME, "config.json", "hf_quant_config.json"}
    copied = [f for f in files if f not in skip and not f.startswith(".")]
    data = {s: quant_oracle.read_shard(os.path.join(indir, s)) for s in shards}
    where = {}
    for s in shards:
        for name in data[s]:
            if name in where:
                raise OracleError("%s: tensor %s in two shards" % (indir, name))
            where[name] = s
    return {"dir": indir, "shards": shards, "has_index": has_index, "config": config,
            "copied": copied, "data": data, "where": where}


def find_scale(ckpt, name):
    found = [name + suffix for suffix in ("_scale_inv", "_scale") if name + suffix in ckpt["where"]]
    if len(found) != 1:
        raise OracleError("%s: F8_E4M3 tensor with %s scale (%s_scale_inv / %s_scale): bad input"
                          % (name, "no" if not found else "more than one", name, name))
    sname = found[0]
    return ckpt["data"][ckpt["where"][sname]][sname]


def dequantize_tensor(t, st, block, dtype):
    if len(t["shape"]) not in (2, 3):
        raise OracleError("%s: F8_E4M3 tensor of rank %d (bad input)" % (t["name"], len(t["shape"])))
    kind = scale_kind(t["shape"], st["dtype"], st["shape"], block)
    if kind is None:
        raise OracleError("%s: scale %s %s %r does not fit %r with block %r (bad input)"
                          % (t["name"], st["name"], st["dtype"], st["shape"], t["shape"], block))
    q = np.frombuffer(t["data"], dtype=np.uint8).reshape(t["shape"])
    y = to_out_dtype(dequant_values(q, scale_values(st), kind, block), dtype)
    return quant_oracle.record(t["name"], OUT_DTYPES[dtype][0], y), kind


def dropped(name):
    return name.split(".")[-1] in DROPPED_COMPONENTS


def output_config(config, dtype):
    if config is None:
        return None
    out = {k: v for k, v in config.items() if k != "quantization_config"}
    out["torch_dtype"] = OUT_DTYPES[dtype][2]  # keeps its position when present, else appended
    if "dtype" in out:
        out["dtype"] = OUT_DTYPES[dtype][2]
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise OracleError("bad args: " + message)


def parse_args(args):
    p = _Parser(prog="fp8conv dequantize-for-export", allow_abbrev=False, add_help=False)
    p.add_argument("--dtype", choices=tuple(OUT_DTYPES), default="bf16")
    return p.parse_args(args).dtype


def convert(ckpt, dtype):
    """-> (records per output shard, {weight: scale kind})"""
    block = block_size(ckpt["config"])
    consumed, kinds, fp8 = set(), {}, []
    for shard in ckpt["shards"]:
        for t in ckpt["data"][shard].values():
            if t["dtype"] == "F8_E4M3":
                fp8.append(t)
            elif t["dtype"].startswith("F8_") or t["dtype"] in ("F4", "F6_E2M3", "F6_E3M2"):
                raise OracleError("%s: %s tensor: outside the contract (bad input)" % (t["name"], t["dtype"]))
    scales = {t["name"]: find_scale(ckpt, t["name"]) for t in fp8}
    for st in scales.values():
        consumed.add(st["name"])
    out = {}
    for shard in ckpt["shards"]:
        recs = []
        for t in ckpt["data"][shard].values():
            if t["name"] in consumed or dropped(t["name"]):
                continue
            if t["dtype"] == "F8_E4M3":
                rec, kinds[t["name"]] = dequantize_tensor(t, scales[t["name"]], block, dtype)
                recs.append(rec)
            else:
                recs.append(t)
        out[shard] = recs
    return out, kinds


def dequantize_dir(indir, dtype):
    """-> result dict (golden without case/input/args) plus the shard bytes."""
    ckpt = load_checkpoint(indir)
    shards, kinds = convert(ckpt, dtype)
    tensors, files, blobs, weight_map, total = {}, {}, {}, {}, 0
    for shard, recs in shards.items():
        blobs[shard] = quant_oracle.write_shard(recs)
        files[shard] = quant_oracle.hexhash(blobs[shard])
        for r in recs:
            tensors[r["name"]] = {"dtype": r["dtype"], "shape": r["shape"], "shard": shard,
                                  "xxh3_128": quant_oracle.hexhash(r["data"])}
            weight_map[r["name"]] = shard
            total += len(r["data"])
    index = None
    if ckpt["has_index"] or len(ckpt["shards"]) > 1:
        index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    result = {"tensors": tensors, "files": files, "index": index,
              "config": output_config(ckpt["config"], dtype), "copied_files": ckpt["copied"]}
    return result, blobs, kinds


def write_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_quantized(qcase, outdir):
    """Lay out the FP8 checkpoint of quantize case qcase in outdir, from quant_oracle's own
    functions, as `fp8conv quantize` does. -> {shard: xxh3_128 of the shard file}."""
    plan = quant_oracle.parse_args(qcase["args"])
    indir = os.path.join(ROOT, qcase["input"])
    ckpt = quant_oracle.load_checkpoint(indir)
    shards, ignored = quant_oracle.convert(ckpt, plan)
    files, weight_map, total = {}, {}, 0
    for shard, recs in shards.items():
        blob = quant_oracle.write_shard(recs)
        with open(os.path.join(outdir, shard), "wb") as f:
            f.write(blob)
        files[shard] = quant_oracle.hexhash(blob)
        for r in recs:
            weight_map[r["name"]] = shard
            total += len(r["data"])
    if ckpt["has_index"] or len(ckpt["shards"]) > 1:
        write_json(os.path.join(outdir, INDEX_NAME),
                   {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))})
    if ckpt["config"] is not None:
        config = dict(ckpt["config"])
        config["quantization_config"] = quant_oracle.quantization_config(plan, ignored)
        write_json(os.path.join(outdir, "config.json"), config)
    hq = quant_oracle.hf_quant_config(plan, ignored)
    if hq is not None:
        write_json(os.path.join(outdir, "hf_quant_config.json"), hq)
    for f in ckpt["copied"]:
        shutil.copyfile(os.path.join(indir, f), os.path.join(outdir, f))
    return files


def quant_case(name):
    with open(QUANT_CASES, "rb") as f:
        for c in json.loads(f.read().decode("utf-8")):
            if c["name"] == name:
                return c
    raise OracleError("no quantize case %r in %s" % (name, QUANT_CASES))


def run_case(case):
    dtype = parse_args(case["args"])
    inp = case["input"]
    if "quant_case" in inp:
        qcase = quant_case(inp["quant_case"])
        with tempfile.TemporaryDirectory(prefix="dequant-oracle-") as tmp:
            files = write_quantized(qcase, tmp)
            golden = os.path.join(QUANT_GOLDEN, qcase["name"] + ".json")
            if os.path.exists(golden):
                with open(golden, "rb") as f:
                    want = json.loads(f.read().decode("utf-8"))["files"]
                if want != files:
                    raise OracleError("the quantize oracle's shards for %s differ from %s: regenerate "
                                      "the quantize goldens first" % (qcase["name"], golden))
            result, _, kinds = dequantize_dir(tmp, dtype)
    else:
        result, _, kinds = dequantize_dir(os.path.join(ROOT, inp["dir"]), dtype)
    if not kinds:
        raise OracleError("case %s dequantizes nothing" % case["name"])
    out = {"case": case["name"], "input": inp, "args": case["args"]}
    out.update(result)
    return out, kinds


# ============================================================================================
# self-tests (run before any golden is written)

FORMATS = {  # p (significant bits), emin (minimum normal exponent), emax
    "F32": (24, -126, 127), "BF16": (8, -126, 127), "F16": (11, -14, 15)}
OUT_FMT = {"bf16": "BF16", "f16": "F16", "f32": "F32"}


def e4m3_decode_ref(b):
    """Pure-Python E4M3 (OCP fn) decoder: (sign bit, exact Fraction magnitude) or None for NaN."""
    e, m = (b >> 3) & 0xF, b & 7
    if e == 15 and m == 7:
        return None
    mag = Fraction(m, 512) if e == 0 else (1 + Fraction(m, 8)) * Fraction(2) ** (e - 7)
    return (b >> 7, mag)


def rne(a, fmt):
    """Exact RNE of the non-negative Fraction a into fmt (subnormals kept; overflow -> None = inf)."""
    return quant_oracle.exact_rne(a, *FORMATS[fmt])


def ref_dequant(code, s, out):
    """(sign bit, magnitude) of the contract's result for one code and fp32 scale value s > 0."""
    sign, mag = e4m3_decode_ref(code)
    y32 = rne(mag * Fraction(float(s)), "F32")
    return sign, None if y32 is None else rne(y32, OUT_FMT[out])


def check(cond, what):
    if not cond:
        raise OracleError("self-test failed: " + what)


def same(y, want, what):
    """y: numpy scalar of the output dtype; want: (sign bit, Fraction magnitude or None = inf)."""
    sign, mag = want
    v = float(np.asarray(y).astype(np.float64))
    if mag is None:
        ok = np.isinf(v) and bool(np.signbit(v)) == bool(sign)
    else:
        ok = np.isfinite(v) and Fraction(abs(v)) == mag and bool(np.signbit(v)) == bool(sign)
    check(ok, "%s: got %r, want %s%s" % (what, v, "-" if sign else "+", mag if mag is None else float(mag)))


def test_decode():
    got = decode_e4m3(np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8))
    got_all = np.arange(256, dtype=np.uint8).view(E4M3).astype(F32)
    for c in range(256):
        ref = e4m3_decode_ref(c)
        v = float(got_all[c])
        if ref is None:
            check(np.isnan(v), "E4M3 0x%02X must be NaN" % c)
            continue
        check(Fraction(abs(v)) == ref[1] and bool(np.signbit(v)) == bool(ref[0]),
              "E4M3 0x%02X: ml_dtypes %r, reference %s%s" % (c, v, "-" if ref[0] else "", ref[1]))
    check(got.size == 254 and float(got[0x7E]) == 448.0 and float(got[0x7F]) == -0.0
          and np.signbit(got[0x7F]), "decode_e4m3 order")
    for bad in (0x7F, 0xFF):
        try:
            decode_e4m3(np.array([0x38, bad], dtype=np.uint8))
        except OracleError:
            continue
        raise OracleError("self-test failed: NaN code 0x%02X accepted" % bad)


def find_double_rounding(q, fmt):
    """An fp32 scale s with fp32(q * s) on an fmt rounding midpoint that q * s is not on, such that
    the contract's double rounding and a single rounding of q * s give different results."""
    p = FORMATS[fmt][0]
    for k in range(2 ** (p - 1)):
        mid = 1 + Fraction(2 * k + 1, 2 ** p)
        s = F32(float(mid / q))
        exact = q * Fraction(float(s))
        if rne(exact, "F32") == mid and exact != mid and rne(mid, fmt) != rne(exact, fmt):
            return s
    raise OracleError("self-test: no double-rounding scale found")


def test_hand_bf16():
    """bf16 bits of q * s by hand (sign, exponent field, 7 mantissa bits)."""
    cases = [
        (0x38, 1.0, 0x3F80), (0x39, 1.0, 0x3F90), (0x80, 3.0, 0x8000), (0x00, 3.0, 0x0000),
        (0xB8, 0.5, 0xBF00),
        (0x7E, 2.0 ** -130, 0x02E0),           # 448 * 2^-130 = 1.75 * 2^-122
        (0x7E, 2.0 ** -126, 0x04E0),           # 1.75 * 2^-118
        (0x01, 2.0 ** -149, 0x0000),           # 2^-158: fp32 underflow to +0
        (0xFE, 2.0 ** -149, 0x8000),           # -448 * 2^-149, fp32-exact, below bf16's 2^-134: -0
        (0x38, 3 * 2.0 ** -133, 0x0003),       # bf16 subnormal, exact
        (0x39, 2.0 ** -133, 0x0001),           # 1.125 * 2^-133 -> 2^-133
        (0x3C, 2.0 ** -133, 0x0002),           # 1.5 * 2^-133: tie -> even (2)
        (0x3A, 2.0 ** -133, 0x0001),           # 1.25 * 2^-133 -> 1
        (0x38, 1 + 2.0 ** -8, 0x3F80),         # tie between 1 and 1 + 2^-7 -> 1 (even)
        (0x38, 1 + 3 * 2.0 ** -8, 0x3F82),     # tie -> 1 + 2^-6 (even)
        (0x38, 1 + 2.0 ** -8 + 2.0 ** -23, 0x3F81),  # above the tie
        (0x7E, 127.99999237060547, 0x4760),   # 448 * (128 - 2^-17) -> 57344 = 0x4760
        (0x08, 2.0 ** -127, 0x0001),           # mx byte 0: 2^-6 * 2^-127 = 2^-133, bf16's smallest subnormal
    ]
    for code, s, bits in cases:
        y = (decode_e4m3(np.array([code], dtype=np.uint8)) * np.array([s], dtype=F32)).astype(BF16)
        got = int(y.view(np.uint16)[0])
        check(got == bits, "bf16(E4M3 0x%02X * %r) = 0x%04X, want 0x%04X" % (code, s, got, bits))
        ref_sign, ref_mag = ref_dequant(code, F32(s), "bf16")
        want = np.array([(-1.0 if ref_sign else 1.0) * float(ref_mag)], dtype=np.float64).astype(F32).astype(BF16)
        check(int(want.view(np.uint16)[0]) == bits, "Fraction reference for 0x%02X * %r" % (code, s))
    # double rounding: the contract rounds twice (fp32 product, then bf16/f16)
    for fmt, out in (("BF16", "bf16"), ("F16", "f16")):
        s = find_double_rounding(Fraction(9, 8), fmt)
        y = to_out_dtype(decode_e4m3(np.array([0x39], dtype=np.uint8)) * np.array([s], dtype=F32), out)
        exact = Fraction(9, 8) * Fraction(float(s))
        same(y[0], (0, rne(rne(exact, "F32"), fmt)), "double rounding %s" % fmt)
        check(Fraction(float(y[0])) != rne(exact, fmt), "double rounding must differ from single (%s)" % fmt)


def test_products():
    """Every non-NaN code times a few dozen scales, into every output dtype, against Fractions."""
    rng = np.random.default_rng(5)
    scales = [1.0, 2.0 ** -149, 3 * 2.0 ** -149, 2.0 ** -127, 2.0 ** -126, 2.0 ** -133, 0.5, 2.0 ** 100,
              float(np.nextafter(F32(128.0), F32(0))), float(np.array([0x00012345], np.uint32).view(F32)[0]),
              float(find_double_rounding(Fraction(9, 8), "BF16")), float(find_double_rounding(Fraction(15, 8), "F16")),
              float(F32(1.0) / F32(448.0)), 2.0 ** -24, 65504.0 / 448, 2.0 ** 127]
    scales += list(rng.uniform(1, 2, 24).astype(F32) * np.exp2(rng.integers(-140, 40, 24)).astype(F32))
    scales += list(np.array(rng.uniform(1, 2, 8) * np.exp2(rng.integers(-133, 20, 8))).astype(F32).astype(BF16).astype(F32))
    scales += list(np.array(rng.uniform(1, 2, 8) * np.exp2(rng.integers(-24, 10, 8))).astype(F32).astype(np.float16).astype(F32))
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], dtype=np.uint8)
    x = decode_e4m3(codes)
    for s in scales:
        s = F32(s)
        y32 = x * np.full(x.shape, s, dtype=F32)
        for out in ("bf16", "f16", "f32"):
            y = y32.astype(OUT_DTYPES[out][1])
            for c, v in zip(codes.tolist(), y):
                same(v, ref_dequant(c, s, out), "E4M3 0x%02X * %r -> %s" % (c, float(s), out))


def loop_reference(q, s, kind, block, out):
    """Element-by-element reference: (sign, magnitude) per element, scale index in plain Python."""
    res = {}
    lead = q.shape[:-2]
    m, n = q.shape[-2:]
    r, c = block
    for idx in np.ndindex(*q.shape):
        e, (i, j) = idx[:-2], idx[-2:]
        sv = s[e] if lead else s
        sv = {"tensor": lambda: sv.reshape(-1)[0], "channel": lambda: sv.reshape(m)[i],
              "mx": lambda: sv[i, j // 32], "block": lambda: sv[i // r, j // c]}[kind]()
        res[idx] = ref_dequant(int(q[idx]), sv, out)
    return res


def test_kinds():
    rng = np.random.default_rng(9)

    def codes(shape):
        r = rng.integers(0, 254, shape)
        return (r + (r >= 0x7F)).astype(np.uint8)

    def scales(shape, dtype):
        v = (rng.uniform(1, 2, shape) * np.exp2(rng.integers(-140, 8, shape))).astype(F32)
        return v.astype(SCALE_DTYPES[dtype])

    block = (2, 32)
    for lead in ([], [2]):
        for kind, sshape, dtypes in (("block", [3, 3], ("F32", "BF16", "F16")), ("channel", [5], ("F32",)),
                                     ("channel", [5, 1], ("BF16", "F16")), ("tensor", [1], ("BF16",)),
                                     ("tensor", [], ("F32",)), ("mx", [5, 2], ("U8",))):
            n = 64 if kind == "mx" else 70
            wshape = lead + [5, n]
            for sdtype in dtypes:
                if sdtype == "U8":
                    sarr = rng.integers(0, 255, lead + sshape).astype(np.uint8)
                else:
                    sarr = scales(lead + sshape, sdtype)
                st = {"name": "w_scale", "dtype": sdtype, "shape": lead + sshape,
                      "data": np.ascontiguousarray(sarr).tobytes()}
                check(scale_kind(wshape, sdtype, lead + sshape, block) == kind,
                      "scale_kind %r %s %r" % (wshape, sdtype, sshape))
                q = codes(wshape)
                s = scale_values(st)
                if sdtype == "U8":
                    check(all(float(v) == 2.0 ** (int(b) - 127) for v, b in zip(s.reshape(-1), sarr.reshape(-1))),
                          "E8M0 values")
                y32 = dequant_values(q, s, kind, block)
                for out in ("bf16", "f16", "f32"):
                    y = y32.astype(OUT_DTYPES[out][1])
                    for idx, want in loop_reference(q, s, kind, block, out).items():
                        same(y[idx], want, "%s %s %r -> %s at %r" % (kind, sdtype, wshape, out, idx))
    check(scale_kind([5, 70], "F32", [3, 2], block) is None, "a wrong block shape is refused")
    check(scale_kind([5, 70], "U8", [5, 2], block) is None, "mxfp8 needs N % 32 == 0")
    check(scale_kind([2, 5, 70], "F32", [5], block) is None, "a 3-D weight needs a leading E")
    check(dropped("a.k_scale") and dropped("a.b.input_scale") and dropped("v_scale")
          and not dropped("a.weight_scale") and not dropped("a.k_scale.x") and not dropped("a.xk_scale"),
          "drop rule")
    cfg = {"a": 1, "quantization_config": {}, "torch_dtype": "bfloat16", "dtype": "bfloat16", "z": 2}
    check(list(output_config(cfg, "f16").items()) == [("a", 1), ("torch_dtype", "float16"),
                                                      ("dtype", "float16"), ("z", 2)], "config rewrite")
    check(list(output_config({"b": 1}, "bf16").items()) == [("b", 1), ("torch_dtype", "bfloat16")], "config append")


def self_test():
    check(sys.byteorder == "little", "little-endian host")
    with np.errstate(over="ignore"):  # the self-tests include products that overflow on purpose
        test_decode()
        test_hand_bf16()
        test_products()
        test_kinds()


# ============================================================================================


def valid_input(value):
    """A dequantize case's input: {"quant_case": NAME} or {"dir": PATH}."""
    return isinstance(value, dict) and len(value) == 1 and set(value) <= {"quant_case", "dir"}


def load_cases(path):
    try:
        cases = quant_oracle.load_cases(path, valid_input)
    except quant_oracle.OracleError as e:
        raise OracleError(str(e))
    for c in cases:
        parse_args(c["args"])
    return cases


dump = quant_oracle.dump


def write_output(indir, outdir, dtype):
    """--convert: write the dequantized checkpoint (shards, index, config.json, copies)."""
    if os.path.exists(outdir):
        raise OracleError("%s exists" % outdir)
    result, blobs, kinds = dequantize_dir(indir, dtype)
    os.makedirs(outdir)
    for shard, blob in blobs.items():
        with open(os.path.join(outdir, shard), "wb") as f:
            f.write(blob)
    if result["index"] is not None:
        write_json(os.path.join(outdir, INDEX_NAME), result["index"])
    if result["config"] is not None:
        write_json(os.path.join(outdir, "config.json"), result["config"])
    for f in result["copied_files"]:
        shutil.copyfile(os.path.join(indir, f), os.path.join(outdir, f))
    return result, kinds


def main():
    argv = sys.argv[1:]
    try:
        if argv and argv[0] == "--convert":
            p = _Parser(prog="dequant_oracle.py --convert", add_help=False)
            p.add_argument("--dtype", choices=tuple(OUT_DTYPES), default="bf16")
            p.add_argument("input")
            p.add_argument("output")
            o = p.parse_args(argv[1:])
            result, kinds = write_output(o.input, o.output, o.dtype)
            print("dequant_oracle: wrote %s (%d tensors, %d dequantized)" % (o.output, len(result["tensors"]), len(kinds)))
            return
        if len(argv) != 2:
            sys.stderr.write("usage: dequant_oracle.py CASES_JSON OUTDIR\n"
                             "       dequant_oracle.py --convert [--dtype bf16|f16|f32] INPUT_DIR OUTPUT_DIR\n")
            sys.exit(2)
        cases = load_cases(argv[0])
        self_test()
        print("dequant_oracle: self-test OK")
        os.makedirs(argv[1], exist_ok=True)
        for case in cases:
            result, kinds = run_case(case)
            with open(os.path.join(argv[1], case["name"] + ".json"), "w", encoding="utf-8") as f:
                f.write(dump(result))
            counts = {}
            for k in kinds.values():
                counts[k] = counts.get(k, 0) + 1
            print("  %-34s %3d tensors  dequantized %s  %s" % (
                case["name"], len(result["tensors"]),
                " ".join("%s:%d" % kv for kv in sorted(counts.items())), " ".join(case["args"])))
    except OracleError as e:
        sys.stderr.write("dequant_oracle: error: %s\n" % e)
        sys.exit(1)
    print("dequant_oracle: wrote %d goldens into %s" % (len(cases), argv[1]))


if __name__ == "__main__":
    main()
