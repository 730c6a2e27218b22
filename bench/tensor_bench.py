#!/usr/bin/env python3
"""make bench's tensor API section (bench/run.sh tensor_section): the
Python package's quantize_tensor on one 1 GiB bf16 tensor [16384, 32768]
(block 128x128, hf-fp8: E4M3 codes and F32 scales) against its memory floor,
a numpy copy of the same bytes into a preallocated array (a memcpy), the
two measured in turns (best of REPS each, so that a slow spell of the
shared machine falls on both); its peak RSS; and, where torch is
importable, eager torch's block quantization (amax per tile, scale =
amax / 448, x / scale cast to float8_e4m3fn) on the same cores.

usage: tensor_bench.py REPS     (the package importable: make check-python's venv)
"""
import resource
import sys
import time

import ml_dtypes
import numpy as np

import fp8conv

ROWS, COLS = 16384, 32768  # 1 GiB of bf16


def best(fn, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rng = np.random.default_rng(1)
    x = np.empty((ROWS, COLS), dtype=ml_dtypes.bfloat16)
    for r in range(0, ROWS, 1024):  # in slices: no 4 GiB f32 temporary
        x[r:r + 1024] = rng.standard_normal((1024, COLS), dtype=np.float32)
    dst = np.empty_like(x)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    q = fp8conv.quantize_tensor(x)  # warm: the library loaded, the output pages touched
    t_q, t_copy = [], []
    for _ in range(reps):
        t_copy.append(best(lambda: np.copyto(dst, x), 1))
        t_q.append(best(lambda: fp8conv.quantize_tensor(x), 1))
    tq, tc = min(t_q), min(t_copy)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gib = x.nbytes / 2**30
    print("quantize_tensor, 1 GiB bf16 [%d, %d], block 128x128: %8.1f ms  (%.2f GiB/s)"
          % (ROWS, COLS, tq * 1e3, gib / tq))
    print("floor: numpy copy of the same bytes:              %8.1f ms  (%.2f GiB/s)"
          % (tc * 1e3, gib / tc))
    print("quantize_tensor / copy = %.2fx (goal 1.5)" % (tq / tc))
    print("peak RSS %.2f GiB: before the first call %.2f GiB (input, copy target), outputs "
          "%.2f GiB" % (peak / 2**20, rss0 / 2**20, (q.codes.nbytes + q.scale.nbytes) / 2**30))
    try:
        import torch
    except ImportError:
        print("eager torch: not run (torch is not importable here)")
        return
    t = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)

    def torch_block():
        tiles = t.view(ROWS // 128, 128, COLS // 128, 128).float()
        amax = tiles.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-12)
        scale = amax / 448.0
        codes = (tiles / scale).to(torch.float8_e4m3fn)
        return codes, scale

    tt = best(torch_block, max(1, reps // 2))
    print("eager torch block quantization (%d threads):     %8.1f ms  (quantize_tensor is %.1fx "
          "faster)" % (torch.get_num_threads(), tt * 1e3, tt / tq))


if __name__ == "__main__":
    main()
