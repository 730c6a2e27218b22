#!/usr/bin/env python3
"""The obvious peer of fp8conv's block kernel, for the GPU kit (bench/README.md).

The same blockwise quantization as `gpu_bench kernels` times ("quantize block
128x128"), written in PyTorch the way DeepSeek-V3's and vLLM's reference code
write it: per 128x128 block amax in fp32, scale = amax / 448 (1 for an
all-zero block), codes = (x / scale) clamped to +-448 and cast to
float8_e4m3fn.  Eager PyTorch, no torch.compile.  Tensors of MIB MiB of bf16,
8192 columns wide, as gpu_bench uses; best of 10 timed by CUDA events after a
warm-up.  Prints one line per size:

    torch quantize block 128x128 MIB MiB: MS ms

and "torch: not available (why)" with exit 3 when torch or a CUDA device is
missing.  --device cpu runs it on the CPU (the kit's emulated mode checks the
plumbing so; those times mean nothing).
"""
import sys


def main():
    args = sys.argv[1:]
    device = "cuda"
    if args[:1] == ["--device"]:
        device, args = args[1], args[2:]
    sizes = [int(a) for a in args] or [256, 1024]
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        print(f"torch: not available (import torch: {e.__class__.__name__}: {e})")
        return 3
    if device == "cuda" and not torch.cuda.is_available():
        print(f"torch: not available (torch {torch.__version__} sees no CUDA device)")
        return 3
    if not hasattr(torch, "float8_e4m3fn"):
        print(f"torch: not available (torch {torch.__version__} has no float8_e4m3fn)")
        return 3
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(0)})" if device == "cuda" else ""))

    def quantize(x, b=128):
        r, c = x.shape
        xb = x.view(r // b, b, c // b, b).float()
        amax = xb.abs().amax(dim=(1, 3), keepdim=True)
        scale = torch.where(amax == 0, torch.ones_like(amax), amax / 448.0)
        q = (xb / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        return q.view(r, c), scale.view(r // b, c // b)

    for mib in sizes:
        cols = 8192
        rows = (mib << 20) // 2 // cols
        g = torch.Generator(device=device).manual_seed(1)
        x = (torch.randn(rows, cols, device=device, generator=g) * 0.02).to(torch.bfloat16)
        reps = 10 if device == "cuda" else 1
        best = float("inf")
        quantize(x)  # warm-up
        for _ in range(reps):
            if device == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                quantize(x)
                b.record()
                b.synchronize()
                ms = a.elapsed_time(b)
            else:
                import time
                t0 = time.perf_counter()
                quantize(x)
                ms = (time.perf_counter() - t0) * 1e3
            best = min(best, ms)
        print(f"torch quantize block 128x128 {mib} MiB: {best:.3f} ms", flush=True)
        del x
        if device == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
