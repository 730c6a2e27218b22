#!/usr/bin/env python3
"""INT4 weight-only goldens from compressed-tensors' own code (issue 42 item 5).

For each case (seeded bf16/f16/f32 weights, edge classes included), runs
compressed-tensors 0.19.0 on the CPU, as llm-compressor's W4A16 preset does:
  observer   per-group torch.amin / torch.amax over [rows, cols/G, G]
             (llm-compressor's min/max observer: its reduction is exact in any dtype)
  qparams    quantization/utils/helpers.py calculate_qparams (the preset's
             QuantizationArgs, group_size G)
  compress   compressors/pack_quantized/base.py PackedQuantizationCompressor.compress
             (forward_helpers.py _quantize, helpers.py pack_to_int32)
  decompress PackedQuantizationCompressor.decompress (unpack_from_int32, _dequantize)
and writes testdata/int4/goldens.bin, which tests/check_int4.c reads:
  "INT4GLD1", u32 ncases, then per case u32 dtype (0 BF16, 1 F16, 2 F32),
  u32 rows, u32 cols, u32 group, u32 quantized (1: x went through compress;
  0: a decompress-only case, x zero), then x [rows*cols] in dtype,
  weight_packed [rows, cols/8] I32, weight_scale [rows, cols/G] in dtype,
  decompressed weight [rows*cols] in dtype; all little-endian.
Also checks weight_shape (I64 [2]) and the packed shape.

usage: build/venv-int4/bin/python tests/oracle/int4_oracle.py OUT.bin
tests/oracle/int4_goldens.sh makes the venv (its pins: torch 2.15.0, compressed-tensors
0.19.0), runs this and compares OUT with the committed goldens (--write replaces them).
"""
import struct
import sys

import torch
from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
from compressed_tensors.quantization.quant_scheme import preset_name_to_scheme
from compressed_tensors.quantization.utils.helpers import calculate_qparams

DT = {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}


def scheme(group):
    s = preset_name_to_scheme("W4A16", ["Linear"])
    s.weights.group_size = group
    return s


def raw(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes() if t.dtype != torch.int32 \
        else t.contiguous().numpy().astype("<i4").tobytes()


def quantized_case(x, group):
    sch = scheme(group)
    rows, cols = x.shape
    xg = x.reshape(rows, cols // group, group)
    scale, zp = calculate_qparams(torch.amin(xg, dim=-1), torch.amax(xg, dim=-1), sch.weights)
    assert scale.dtype == x.dtype, scale.dtype
    comp = PackedQuantizationCompressor.compress(
        {"weight": x, "weight_scale": scale, "weight_zero_point": zp}, sch)
    assert set(comp) == {"weight_packed", "weight_scale", "weight_shape"}, set(comp)
    assert comp["weight_packed"].dtype == torch.int32
    assert tuple(comp["weight_packed"].shape) == (rows, cols // 8)
    assert comp["weight_shape"].dtype == torch.int64 and comp["weight_shape"].tolist() == [rows, cols]
    dec = PackedQuantizationCompressor.decompress(comp, sch)["weight"]
    assert dec.dtype == x.dtype
    return (struct.pack("<5I", DT[x.dtype], rows, cols, group, 1) + raw(x) +
            raw(comp["weight_packed"]) + raw(comp["weight_scale"]) + raw(dec))


def dequant_case(q, scale, group):
    sch = scheme(group)
    rows, cols = q.shape
    packed = pack_to_int32(q, 4)
    comp = {"weight_packed": packed, "weight_scale": scale,
            "weight_shape": torch.tensor([rows, cols])}
    dec = PackedQuantizationCompressor.decompress(comp, sch)["weight"]
    x = torch.zeros(rows, cols, dtype=scale.dtype)
    return (struct.pack("<5I", DT[scale.dtype], rows, cols, group, 0) + raw(x) + raw(packed) +
            raw(scale) + raw(dec))


def edges(dtype, group):
    """One row per edge class, `group`-wide groups, four groups a row."""
    g = torch.Generator().manual_seed(7)
    rows = []
    def row(*groups):
        rows.append(torch.cat([t.to(torch.float32) for t in groups]))
    r = lambda: torch.randn(group, generator=g)
    zeros = torch.zeros(group)
    negz = -torch.zeros(group)
    info = torch.finfo(dtype)
    tiny = torch.full((group,), info.smallest_normal) * torch.linspace(-1, 1, group)
    sub = torch.full((group,), info.smallest_normal / 64) * torch.linspace(-3, 3, group)
    # ties: amax 7.5 gives scale 1 exactly; then x = k + 1/2 are ties of torch.round
    ties = torch.tensor([7.5, -7.5] + [k + 0.5 for k in range(-8, 7)] * group)[:group]
    ties2 = ties * 2  # scale 2: the same quotients
    big = torch.full((group,), info.max) * torch.sign(r())
    big[0] = -info.max
    negmax = r().abs().neg()
    negmax[3] = -5 * negmax.abs().max()  # the group's amax from its minimum
    row(zeros, negz, tiny, sub)
    row(ties, ties2, -ties, big)
    row(negmax, r() * 1e-3, r() * 1e4, torch.linspace(-1, 1, group))
    # near-ties: quotients just off k + 1/2, where rounding x / s to the dtype decides
    s = torch.tensor(1.0)
    near = (torch.arange(group) % 15 - 7 + 0.5) * (1 + torch.randn(group, generator=g) * 2e-3)
    near[0] = 7.5
    row(near, near * 3, near / 5, -near)
    return torch.stack(rows).to(dtype)


def main():
    out = sys.argv[1]
    cases = []
    g = torch.Generator().manual_seed(42)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for group in (128, 32):
            x = (torch.randn(8, 256, generator=g) * 0.02).to(dtype)
            x[:, 7] *= 40  # outliers set some groups' scales
            cases.append(quantized_case(x, group))
            cases.append(quantized_case(edges(dtype, group), group))
    for dtype in (torch.bfloat16, torch.float32):
        q = torch.randint(-8, 8, (4, 256), generator=g, dtype=torch.int8)
        s = (torch.rand(4, 256 // 32, generator=g) * 3).to(dtype)
        s[0, 0] = torch.finfo(dtype).smallest_normal / 16  # subnormal scale
        s[1, 1] = torch.finfo(dtype).max / 16  # products near the top of the range
        cases.append(dequant_case(q, s, 32))
    with open(out, "wb") as f:
        f.write(b"INT4GLD1" + struct.pack("<I", len(cases)) + b"".join(cases))
    print(f"int4_oracle: {len(cases)} cases, torch {torch.__version__}, compressed-tensors "
          f"{__import__('compressed_tensors').__version__} -> {out}")


if __name__ == "__main__":
    main()
