#!/usr/bin/env python3
"""Generate testdata/quality: two small checkpoints A and B and the quality numbers of B
against A that `fp8conv diff` must report (fp8conv(1), diff), computed here by numpy in
float64, an independent reference.

Usage (from the repository root, with numpy and ml_dtypes installed):
    python3 testdata/gen_quality.py testdata/quality [build/fp8conv]

Writes OUTDIR/a.safetensors, OUTDIR/b.safetensors and OUTDIR/expected.json:
  {"tensors": {NAME: {"rel_error": R, "cosine": C, "snr_db": S, "elements": N}, ...},
   "model": {...the same over every tensor whose bytes differ...}}
with rel_error = ||a - b|| / ||a||, cosine = <a, b> / (||a|| ||b||) and
snr_db = 10 log10(sum a^2 / sum (a - b)^2), the values decoded from their dtype to float64.
Tensors (odd shapes, so that no length is a multiple of the lanes or blocks): one per dtype
diff sums the quality of (BF16, F16, F32, F8_E4M3, F8_E5M2), B = A plus noise of a few
percent rounded to the dtype, and one BF16 tensor equal on both sides (no numbers: its bytes
are equal).  Values: numpy's default_rng(45), N(0, 0.02) for A.

With a fp8conv binary, also OUTDIR/verify_expected.json: for each recipe of VERIFY (a
quantize command line on testdata/llama-tiny), the numbers `verify --against
testdata/llama-tiny` must report, per weight and for the model, numpy decoding the checkpoint
the binary writes (quantize is deterministic; tests/check_verify.c runs the same line):
  FP8 blocks   value = E4M3 code (ml_dtypes) times its block's F32 weight_scale_inv, in fp32;
  MXFP4        value = E2M1 code (0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 the sign; element 2i in
               the low nibble of byte i) times 2^(E8M0 scale - 127), one scale per 32.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

DTYPES = [("w_bf16", "BF16", ml_dtypes.bfloat16, (37, 53)),
          ("w_e4m3", "F8_E4M3", ml_dtypes.float8_e4m3fn, (64, 33)),
          ("w_e5m2", "F8_E5M2", ml_dtypes.float8_e5m2, (101,)),
          ("w_f16", "F16", np.float16, (9, 130)),
          ("w_f32", "F32", np.float32, (1031,))]


def write(path, tensors):
    header, blobs, at = {}, [], 0
    for name, dt, arr in tensors:
        raw = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def numbers(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    aa, bb, dd = np.sum(a * a), np.sum(b * b), np.sum((a - b) ** 2)
    return {"rel_error": float(np.sqrt(dd / aa)),
            "cosine": float(np.dot(a, b) / (np.sqrt(aa) * np.sqrt(bb))),
            "snr_db": float(10 * np.log10(aa / dd)), "elements": int(a.size)}


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(45)
    ta, tb, expected, all_a, all_b = [], [], {}, [], []
    for name, dt, np_dt, shape in DTYPES:
        scale = 1.0 if dt.startswith("F8") else 0.02  # FP8: values of the codes' range
        a = rng.normal(0, scale, shape).astype(np_dt)
        b = (a.astype(np.float64) * (1 + rng.normal(0, 0.05, shape))).astype(np_dt)
        ta.append((name, dt, a))
        tb.append((name, dt, b))
        expected[name] = numbers(a, b)
        all_a.append(a.astype(np.float64).ravel())
        all_b.append(b.astype(np.float64).ravel())
    same = rng.normal(0, 0.02, (4, 5)).astype(ml_dtypes.bfloat16)
    ta.append(("w_same", "BF16", same))
    tb.append(("w_same", "BF16", same))
    write(os.path.join(out, "a.safetensors"), ta)
    write(os.path.join(out, "b.safetensors"), tb)
    model = numbers(np.concatenate(all_a), np.concatenate(all_b))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"tensors": expected, "model": model}, f, indent=1, sort_keys=True)
        f.write("\n")


VERIFY = {"fp8-block-32x32": ["quantize", "-q", "--block", "32x32"],
          "mxfp4": ["quantize", "-q", "--scheme", "mxfp4"]}
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def read_dir(path):
    """Every tensor of a checkpoint directory, as numpy arrays of its stored dtype."""
    np_dt = {"BF16": ml_dtypes.bfloat16, "F32": np.float32, "F8_E4M3": ml_dtypes.float8_e4m3fn,
             "U8": np.uint8}
    out = {}
    for name in sorted(os.listdir(path)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(path, name), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for k, v in header.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            out[k] = np.frombuffer(data[a:b], dtype=np_dt[v["dtype"]]).reshape(v["shape"])
    return out


def dequantized(recipe, ck):
    """Each quantized weight's values (by its stored name, as verify names it)."""
    out = {}
    for k, q in ck.items():
        if recipe.startswith("fp8") and q.dtype == ml_dtypes.float8_e4m3fn:
            s = ck[k + "_scale_inv"]
            full = np.repeat(np.repeat(s, 32, 0), 32, 1)[:q.shape[0], :q.shape[1]]
            out[k] = (q.astype(np.float32) * full).astype(np.float32)
        elif recipe == "mxfp4" and k.endswith(".weight_packed"):
            codes = np.stack([q & 0xF, q >> 4], axis=-1).reshape(q.shape[0], -1)
            s = ck[k[:-len("_packed")] + "_scale"].astype(np.float64)
            out[k] = E2M1[codes] * np.repeat(2.0 ** (s - 127), 32, 1)
    return out


def verify_expected(out, binary):
    src = read_dir("testdata/llama-tiny")
    expected = {}
    for recipe, args in VERIFY.items():
        with tempfile.TemporaryDirectory() as tmp:
            dst = os.path.join(tmp, "out")
            subprocess.run([binary] + args + ["testdata/llama-tiny", dst], check=True)
            values = dequantized(recipe, read_dir(dst))
        tensors, all_a, all_b = {}, [], []
        for k in sorted(values):
            x = src[k[:-len("_packed")] if k.endswith("_packed") else k]
            tensors[k] = numbers(x, values[k])
            all_a.append(x.astype(np.float64).ravel())
            all_b.append(values[k].astype(np.float64).ravel())
        expected[recipe] = {"command": " ".join(args), "tensors": tensors,
                            "model": numbers(np.concatenate(all_a), np.concatenate(all_b))}
    with open(os.path.join(out, "verify_expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
    if len(sys.argv) > 2:
        verify_expected(sys.argv[1], sys.argv[2])
