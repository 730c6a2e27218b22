#!/usr/bin/env python3
"""make bench's tensor API section (bench/run.sh tensor_section): the
Python package's quantize_tensor on one 1 GiB bf16 tensor [16384, 32768]
(block 128x128, hf-fp8: E4M3 codes and F32 scales) against its memory floor,
a numpy copy of the same bytes into a preallocated array (a memcpy), for
quantize_tensor(out=) whose targets are preallocated too, and x.copy() (a
memcpy into new pages, which the kernel zeroes first) for a fresh call,
which writes new pages as well; all measured in turns (best of REPS each, so that a slow spell of the
shared machine falls on both); its peak RSS; and, where torch is
importable, eager torch's block quantization (amax per tile, scale =
amax / 448, x / scale cast to float8_e4m3fn) on the same cores.

Then quantize_state_dict over the 1 GB bench model's tensors held in memory
(read once from MODEL) against the CLI's quantize of the same model, file
to file from a warm page cache (--no-sync): the same plan and quantizer,
without the files.

usage: tensor_bench.py REPS [MODEL CLI]   (the package importable: make check-python's venv)
"""
import json
import os
import subprocess
import tempfile
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
    t_q, t_copy, t_out, t_fresh = [], [], [], []
    for _ in range(reps):
        t_copy.append(best(lambda: np.copyto(dst, x), 1))
        t_q.append(best(lambda: fp8conv.quantize_tensor(x), 1))
        t_out.append(best(lambda: fp8conv.quantize_tensor(x, out=q), 1))
        t_fresh.append(best(lambda: x.copy(), 1))
    tq, tc, to, tf = min(t_q), min(t_copy), min(t_out), min(t_fresh)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gib = x.nbytes / 2**30
    print("quantize_tensor, 1 GiB bf16 [%d, %d], block 128x128: %8.1f ms  (%.2f GiB/s)"
          % (ROWS, COLS, tq * 1e3, gib / tq))
    print("floor: numpy copy of the same bytes:              %8.1f ms  (%.2f GiB/s)"
          % (tc * 1e3, gib / tc))
    print("quantize_tensor(out=q), its arrays reused:        %8.1f ms  (%.2f GiB/s)"
          % (to * 1e3, gib / to))
    print("floor of a fresh call: x.copy(), its 1 GiB new: %8.1f ms" % (tf * 1e3))
    print("quantize_tensor(out=q) / copy = %.2fx (goal 1.5; both targets preallocated); a fresh "
          "call / x.copy() = %.2fx (both write new pages; quantize_tensor / copy = %.2fx)"
          % (to / tc, tq / tf, tq / tc))
    print("peak RSS %.2f GiB: before the first call %.2f GiB (input, copy target), outputs "
          "%.2f GiB" % (peak / 2**20, rss0 / 2**20, (q.codes.nbytes + q.scale.nbytes) / 2**30))
    try:
        import torch
    except ImportError:
        print("eager torch: not run (torch is not importable here)")
        return
    t = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16)
    del dst

    def torch_block():
        tiles = t.view(ROWS // 128, 128, COLS // 128, 128).float()
        amax = tiles.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-12)
        scale = amax / 448.0
        codes = (tiles / scale).to(torch.float8_e4m3fn)
        return codes, scale

    tt = best(torch_block, max(1, reps // 2))
    print("eager torch block quantization (%d threads):     %8.1f ms  (quantize_tensor is %.1fx "
          "faster)" % (torch.get_num_threads(), tt * 1e3, tt / tq))


def state_dict_section(reps, model, cli):
    """quantize_state_dict of MODEL's tensors in memory against the CLI's run."""
    sd, config = {}, json.load(open(os.path.join(model, "config.json")))
    for name in sorted(os.listdir(model)):
        if not name.endswith(".safetensors"):
            continue
        raw = open(os.path.join(model, name), "rb").read()
        n = int.from_bytes(raw[:8], "little")
        for k, v in json.loads(raw[8:8 + n]).items():
            if k != "__metadata__":
                a, b = v["data_offsets"]
                dt = {"BF16": ml_dtypes.bfloat16, "F32": np.float32, "F16": np.float16}[v["dtype"]]
                sd[k] = np.frombuffer(raw, dtype=dt, count=(b - a) // np.dtype(dt).itemsize,
                                      offset=8 + n + a).reshape(v["shape"])
    nbytes = sum(v.nbytes for v in sd.values())
    fp8conv.quantize_state_dict(sd, config=config)  # warm
    out = tempfile.mkdtemp(prefix="fp8conv-bench-sd-")
    t_sd, t_cli = [], []
    for _ in range(reps):
        subprocess.run(["rm", "-rf", os.path.join(out, "q")], check=True)
        t = time.perf_counter()
        subprocess.run([cli, "quantize", "-q", "--progress", "never", "--no-sync", model,
                        os.path.join(out, "q")], check=True)
        t_cli.append(time.perf_counter() - t)
        t = time.perf_counter()
        fp8conv.quantize_state_dict(sd, config=config)
        t_sd.append(time.perf_counter() - t)
    subprocess.run(["rm", "-rf", out], check=True)
    ts, tc = min(t_sd), min(t_cli)
    print("quantize_state_dict, %s (%.2f GB of bf16 in memory): %8.1f ms"
          % (os.path.basename(model), nbytes / 1e9, ts * 1e3))
    print("the CLI's quantize --no-sync of the same model:        %8.1f ms  (state dict / CLI = %.2fx)"
          % (tc * 1e3, ts / tc))


if __name__ == "__main__":
    main()
    if len(sys.argv) > 3:
        state_dict_section(int(sys.argv[1]), sys.argv[2], sys.argv[3])
