#!/usr/bin/env python3
"""compressed-tensors' own quantizer run for real, for tests/check_profiles.py (issue 47).

Run with a python that has torch and compressed_tensors (build/venv-loaders: compressed-tensors
0.17.0, llm-compressor's torch path): every BF16 matrix of SRC quantized to FP8 E4M3 with
QuantizationArgs(num_bits=8, type=float, symmetric) for each of block (128 x 128), channel and
tensor, and mxfp8 (groups of 32, uint8 scale_dtype: generate_mx_scales), its scales from
compressed-tensors' calculate_qparams and its codes from its quantize; the min and max it is
given are the observer's (memoryless_minmax: torch.amin / amax over each group, edge tiles
padded with zeros as compressed-tensors pads them: 0 is in every range).
Writes OUT as JSON: {scheme: {name: [codes hex, scales hex]}}: the weight dtype's bits, for
mxfp8 the E8M0 bytes (log2 of its 2^E scale plus 127; 255 for its infinite one).

usage: profiles_ct.py SRC.safetensors OUT.json
"""
import json
import os
import struct
import sys

import torch
from compressed_tensors.quantization import QuantizationArgs
from compressed_tensors.quantization.lifecycle.forward import quantize
from compressed_tensors.quantization.utils.helpers import calculate_qparams

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_profiles import read_st  # noqa: E402  (standard library only)


def groups_minmax(w, scheme):
    rows, cols = w.shape
    if scheme == "tensor":
        return w.amin().reshape(1), w.amax().reshape(1)
    if scheme == "channel":
        return w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)
    if scheme == "mxfp8":
        v = w.view(rows, cols // 32, 32)
        return v.amin(dim=2), v.amax(dim=2)
    pr, pc = -(-rows // 128) * 128, -(-cols // 128) * 128
    p = torch.zeros(pr, pc, dtype=w.dtype)
    p[:rows, :cols] = w
    v = p.view(pr // 128, 128, pc // 128, 128)
    return v.amin(dim=(1, 3)), v.amax(dim=(1, 3))


def main():
    src, out = sys.argv[1:3]
    result = {}
    for scheme in ("block", "channel", "tensor", "mxfp8"):
        kw = {"block_structure": [128, 128]} if scheme == "block" else {}
        if scheme == "mxfp8":
            kw = {"strategy": "group", "group_size": 32, "scale_dtype": torch.uint8,
                  "zp_dtype": torch.float8_e4m3fn}
        args = QuantizationArgs(num_bits=8, type="float", symmetric=True,
                                **dict({"strategy": scheme}, **kw))
        result[scheme] = {}
        for name, (dtype, shape, raw) in read_st(src).items():
            if dtype != "BF16" or (scheme == "mxfp8" and shape[1] % 32):
                continue  # (fp8conv keeps a matrix MX groups do not divide)
            w = torch.frombuffer(bytearray(raw), dtype=torch.bfloat16).view(*shape)
            mn, mx = groups_minmax(w, scheme)
            scale, zp = calculate_qparams(mn, mx, args)
            q = quantize(w, scale, zp, args, dtype=torch.float8_e4m3fn)
            if scheme == "mxfp8":
                e8m0 = (torch.log2(scale.float()) + 127).clamp(0, 255).to(torch.uint8)
                sbytes = e8m0.contiguous().numpy().tobytes()
            else:
                sbytes = scale.contiguous().view(torch.int16).numpy().tobytes()
            result[scheme][name] = [q.view(torch.uint8).numpy().tobytes().hex(), sbytes.hex()]
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
