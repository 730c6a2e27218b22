"""Writes a safetensors file with N small tensors (a wide header), stdlib only.

Usage: python3 bench/make_wide.py OUT N
Names look like a large MoE checkpoint's; each tensor is BF16 [4, 8].
"""
import json
import struct
import sys

out, n = sys.argv[1], int(sys.argv[2])
names = sorted(f"model.layers.{i // 300}.mlp.experts.{i % 300}.down_proj.weight" for i in range(n))
nbytes = 4 * 8 * 2
header = {"__metadata__": {"format": "pt"}}
for k, name in enumerate(names):
    header[name] = {"dtype": "BF16", "shape": [4, 8], "data_offsets": [k * nbytes, (k + 1) * nbytes]}
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(text)))
    f.write(text)
    f.write(bytes(nbytes * n))
