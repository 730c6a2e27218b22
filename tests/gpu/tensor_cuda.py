#!/usr/bin/env python3
"""The tensor API's CUDA path on a real GPU, for the GPU kit (bench/gpu_kit_run.sh,
run from the kit's root): fp8conv.quantize_tensor of torch CUDA tensors
(libfp8conv's fp8_tensor_quantize_cuda, the CUDA kernels on the tensor's own
memory and the current stream) gives the bytes of quantize_tensor of the same
tensor on the CPU, part by part, for block, channel, tensor, mxfp8, nvfp4,
mxfp4 and a profile, bf16 and f32, matrices and stacked experts, on the
default stream and on a side stream; a NaN is a BadInputError naming it.  Then
its time on a 1 GiB bf16 tensor [65536, 8192] (block 128x128, out= reused,
best of 10 by CUDA events) against the same run's device-to-device copy of the
tensor (the issue's goal: copy / quantize_tensor at least 0.8) and eager
torch's block quantization (bench/torch_peer.py's).

Loads the kit's python/fp8conv with the kit's lib/libfp8conv.so
(FP8CONV_LIBRARY).  Exit 0: all equal; 1: a difference; 2: the kit's library
has no CUDA; 3: "torch: not available (why)" (no torch, or no CUDA device).
This has not run on a GPU yet (issue 46): the first GPU run is its test.
"""
import os
import sys

os.environ.setdefault("FP8CONV_LIBRARY", os.path.abspath("lib/libfp8conv.so"))
sys.path.insert(0, os.path.abspath("python"))
import fp8conv  # noqa: E402
from fp8conv import _tensor  # noqa: E402

results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print("%s %s%s" % ("ok      " if ok else "FAILED  ", name, "" if ok else "  " + str(detail)),
          flush=True)


def raw(torch, t):
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def main():
    if not _tensor.cuda_compiled():
        print("tensor_cuda: %s was built without CUDA: nothing was tested" % _tensor.library_path())
        return 2
    try:
        import torch
    except Exception as e:
        print("torch: not available (import torch: %s: %s)" % (e.__class__.__name__, e))
        return 3
    if not torch.cuda.is_available():
        print("torch: not available (torch %s sees no CUDA device)" % torch.__version__)
        return 3
    print("torch %s, %s; %s" % (torch.__version__, torch.cuda.get_device_name(0),
                                _tensor.library_path()), flush=True)
    g = torch.Generator().manual_seed(46)
    cases = [("block", {}, (300, 260)), ("block", {"block": (32, 64)}, (3, 130, 256)),
             ("block", {"profile": "vllm"}, (256, 384)), ("channel", {}, (257, 200)),
             ("channel", {}, (2, 33, 96)), ("tensor", {}, (130, 70)), ("tensor", {}, (4, 40, 64)),
             ("mxfp8", {}, (40, 96)), ("nvfp4", {}, (48, 96)), ("mxfp4", {}, (48, 96))]
    for dtype in (torch.bfloat16, torch.float32):
        for scheme, opts, shape in cases:
            x = (torch.randn(*shape, generator=g) * 0.02 * 2.0 ** torch.randint(
                -8, 8, shape, generator=g)).to(dtype)
            qc = fp8conv.quantize_tensor(x, scheme=scheme, **opts)
            qg = fp8conv.quantize_tensor(x.cuda(), scheme=scheme, **opts)
            same = all((a is None) == (b is None) and (a is None or raw(torch, a) == raw(torch, b))
                       for a, b in zip((qc.codes, qc.scale, qc.scale2),
                                       (qg.codes, qg.scale, qg.scale2)))
            check("%s %s %s %s: CUDA tensor = CPU bytes, outputs on the device" % (
                scheme, opts or "", str(dtype)[6:], shape),
                same and qg.codes.device.type == "cuda")
    x = (torch.randn(512, 1024, generator=g) * 0.02).to(torch.bfloat16)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        xg = x.cuda()
        qg = fp8conv.quantize_tensor(xg)
    side.synchronize()
    qc = fp8conv.quantize_tensor(x)
    check("block on a side stream: CPU bytes",
          raw(torch, qg.codes) == raw(torch, qc.codes) and raw(torch, qg.scale) == raw(torch, qc.scale))
    xg[1, 5] = float("nan")
    try:
        fp8conv.quantize_tensor(xg)
        err = None
    except fp8conv.Error as e:
        err = e
    check("a NaN: BadInputError naming element 1029", isinstance(err, fp8conv.BadInputError) and
          "element 1029 (row 1, column 5) is NaN" in str(err), repr(err))

    # speed: 1 GiB of bf16
    def best(f, reps=10):
        f()
        ms = float("inf")
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f()
            b.record()
            b.synchronize()
            ms = min(ms, a.elapsed_time(b))
        return ms

    def eager(x, b=128):
        r, c = x.shape
        xb = x.view(r // b, b, c // b, b).float()
        amax = xb.abs().amax(dim=(1, 3), keepdim=True)
        scale = torch.where(amax == 0, torch.ones_like(amax), amax / 448.0)
        q = (xb / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
        return q.view(r, c), scale.view(r // b, c // b)

    x = (torch.randn(65536, 8192, device="cuda") * 0.02).to(torch.bfloat16)
    y = torch.empty_like(x)
    q = fp8conv.quantize_tensor(x)
    t_q = best(lambda: fp8conv.quantize_tensor(x, out=q))
    t_copy = best(lambda: y.copy_(x))
    t_torch = best(lambda: eager(x)) if hasattr(torch, "float8_e4m3fn") else float("nan")
    print("tensor_cuda quantize_tensor block 128x128 1024 MiB bf16: %.3f ms; device copy %.3f ms "
          "(copy / quantize_tensor %.2f, goal 0.8); eager torch %.3f ms (%.1fx quantize_tensor)"
          % (t_q, t_copy, t_copy / t_q, t_torch, t_torch / t_q), flush=True)
    print("tensor_cuda: %d passed, %d failed" % (sum(results), len(results) - sum(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
