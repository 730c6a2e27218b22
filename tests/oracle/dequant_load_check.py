#!/usr/bin/env python3
"""Check that a dequantized checkpoint (`fp8conv dequantize-for-export` output) loads as a plain
bf16/f16/f32 checkpoint with the reference reader.

Usage: dequant_load_check.py OUTPUT_DIR        exit 0: OK; 1: a problem (each one printed); 2: usage

Every shard (the index's weight_map values when model.safetensors.index.json exists, else every
*.safetensors file) is opened with safetensors.safe_open(path, framework="numpy") (PyPI safetensors
0.8.0; BF16 tensors load as ml_dtypes.bfloat16 once ml_dtypes is imported, which registers the
numpy dtype name "bfloat16"; F8_* tensors do not load in numpy, so the dtype is read with
get_slice(name).get_dtype() before get_tensor). Checks:
- __metadata__ == {"format": "pt"};
- every tensor loads (get_tensor) with the header's shape; no F8_* dtype; floating-point tensors
  are finite;
- no tensor whose name ends with _scale, _scale_inv, input_scale, k_scale or v_scale;
- the index, when present: {"metadata": {"total_size"}, "weight_map"}, total_size = the sum of
  the tensors' data bytes, weight_map names exactly the tensors of each shard; no *.safetensors
  file outside it;
- config.json (when present) has no "quantization_config" and no key containing "quant" at any
  depth; no hf_quant_config.json.
"""

import json
import os
import sys

import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16" dtype name, which safe_open uses)
import numpy as np
from safetensors import safe_open

INDEX_NAME = "model.safetensors.index.json"
SCALE_SUFFIXES = ("_scale", "_scale_inv", "input_scale", "k_scale", "v_scale")
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
        "F32": 32, "F64": 64, "I64": 64, "U64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}


def quant_keys(obj, path="config.json"):
    """Every key containing "quant" (case-insensitive) in a JSON value, with its path."""
    found = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = "%s.%s" % (path, k)
            if "quant" in k.lower():
                found.append(p)
            found += quant_keys(v, p)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += quant_keys(v, "%s[%d]" % (path, i))
    return found


def check_dir(outdir):
    problems = []
    files = sorted(os.listdir(outdir))
    index = None
    if INDEX_NAME in files:
        try:
            with open(os.path.join(outdir, INDEX_NAME), "rb") as f:
                index = json.loads(f.read().decode("utf-8"))
            weight_map = index["weight_map"]
            total_size = index["metadata"]["total_size"]
        except (ValueError, KeyError, TypeError) as e:
            return ["%s: not a valid index (%s)" % (INDEX_NAME, e)]
        shards = sorted(set(weight_map.values()))
        for f in files:
            if f.endswith(".safetensors") and f not in shards:
                problems.append("%s: a .safetensors file that the index does not name" % f)
    else:
        shards = [f for f in files if f.endswith(".safetensors")]
    if not shards:
        problems.append("%s: no shard" % outdir)

    total, seen = 0, {}
    for shard in shards:
        path = os.path.join(outdir, shard)
        if not os.path.isfile(path):
            problems.append("%s: named by the index but missing" % shard)
            continue
        try:
            with safe_open(path, framework="numpy") as st:
                meta = st.metadata()
                if meta != {"format": "pt"}:
                    problems.append('%s: __metadata__ is %r, want {"format": "pt"}' % (shard, meta))
                for name in st.keys():
                    seen[name] = shard
                    sl = st.get_slice(name)
                    dtype, shape = sl.get_dtype(), list(sl.get_shape())
                    total += int(np.prod(shape, dtype=object)) * BITS[dtype] // 8
                    if dtype.startswith("F8_"):
                        problems.append("%s: %s: dtype %s (still FP8)" % (shard, name, dtype))
                        continue
                    if name.endswith(SCALE_SUFFIXES):
                        problems.append("%s: %s: a scale tensor was left in the output" % (shard, name))
                    arr = st.get_tensor(name)
                    if list(arr.shape) != shape:
                        problems.append("%s: %s: loads with shape %r, header %r" % (shard, name, arr.shape, shape))
                    if dtype in FLOAT_DTYPES:
                        bad = np.flatnonzero(~np.isfinite(arr.astype(np.float64)))
                        if bad.size:
                            problems.append("%s: %s: %d non-finite values (first at flat index %d)"
                                            % (shard, name, bad.size, bad[0]))
        except Exception as e:  # the reference reader refuses the file
            problems.append("%s: the reference reader (safetensors safe_open) fails: %s" % (shard, e))

    if index is not None:
        if total_size != total:
            problems.append("%s: total_size %r, but the tensors hold %d bytes" % (INDEX_NAME, total_size, total))
        for name, shard in weight_map.items():
            if seen.get(name) != shard and os.path.isfile(os.path.join(outdir, shard)):
                problems.append("%s: maps %s to %s, which does not hold it" % (INDEX_NAME, name, shard))
        for name, shard in seen.items():
            if name not in weight_map:
                problems.append("%s: %s (in %s) is not in the weight_map" % (INDEX_NAME, name, shard))

    if "hf_quant_config.json" in files:
        problems.append("hf_quant_config.json was copied to the output")
    if "config.json" in files:
        try:
            with open(os.path.join(outdir, "config.json"), "rb") as f:
                config = json.loads(f.read().decode("utf-8"))
        except ValueError as e:
            problems.append("config.json: not valid JSON (%s)" % e)
        else:
            if not isinstance(config, dict):
                problems.append("config.json: not a JSON object")
            else:
                if "quantization_config" in config:
                    problems.append("config.json still has quantization_config")
                for p in quant_keys(config):
                    problems.append("config.json: key %s mentions quant" % p)
    return problems


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.stderr.write("usage: dequant_load_check.py OUTPUT_DIR\n")
        sys.exit(2)
    problems = check_dir(sys.argv[1])
    for p in problems:
        sys.stderr.write("dequant_load_check: %s: %s\n" % (sys.argv[1], p))
    if problems:
        sys.stderr.write("dequant_load_check: FAIL: %d problem(s) in %s\n" % (len(problems), sys.argv[1]))
        sys.exit(1)
    print("dequant_load_check: OK: %s" % sys.argv[1])


if __name__ == "__main__":
    main()
