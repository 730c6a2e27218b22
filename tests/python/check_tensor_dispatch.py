#!/usr/bin/env python3
"""quantize_tensor's routing of torch tensors by device (python/fp8conv/_tensor.py),
with fake torch tensors (a stand-in torch module: no torch, no GPU here) and the
real libfp8conv.so: a CUDA tensor goes to fp8_tensor_quantize_cuda when the
library was built with CUDA, with outputs made by torch on the input's device,
that device made current and its current stream passed; a CPU tensor goes to
fp8_tensor_quantize; a library built without CUDA, another device, or
dequantize_tensor of CUDA tensors is a DeviceError (exit status 5) saying why.
The library's two quantizers are replaced by recorders here (the fake
pointers must not be read): only the routing and the errors are checked, no
bytes. The bytes of the CUDA path: tests/check_tensor_cuda.c (emulated) and
the GPU kit's tests/gpu/tensor_cuda.py (a real GPU).

usage: check_tensor_dispatch.py LIBFP8CONV.SO   (from the repository root)
"""
import ctypes
import os
import sys
import types

os.environ["FP8CONV_LIBRARY"] = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print("%s %s%s" % ("ok      " if ok else "FAILED  ", name, "" if ok else "  " + str(detail)))


# ---- a stand-in for torch: devices, dtypes, tensors that are only a pointer
class Device:
    def __init__(self, spec):
        self.type, _, index = str(spec).partition(":")
        self.index = int(index or 0)

    def __eq__(self, other):
        return str(self) == str(other)

    def __str__(self):
        return "%s:%d" % (self.type, self.index) if self.type != "cpu" else "cpu"


class Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


torch = types.ModuleType("torch")
torch.__version__ = "fake"
for n in ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e8m0fnu", "uint8"):
    setattr(torch, n, getattr(torch, n, None) or Dtype(n))
next_ptr = [0x10000]


class Tensor:
    def __init__(self, shape, dtype, device):
        self.shape, self.dtype, self.device = tuple(shape), dtype, Device(device)
        self.ptr = next_ptr[0]
        next_ptr[0] += 0x10000

    def data_ptr(self):
        return self.ptr

    def contiguous(self):
        return self

    def is_contiguous(self):
        return True


Tensor.__module__ = "torch"
torch.Tensor = Tensor
torch.empty = lambda shape, dtype=None, device="cpu": Tensor(shape, dtype, device)
current = []  # the device made current around the call
cuda = types.SimpleNamespace()


class _DeviceScope:
    def __init__(self, d):
        self.d = d

    def __enter__(self):
        current.append(self.d)

    def __exit__(self, *exc):
        current.pop()


cuda.device = _DeviceScope
cuda.current_stream = lambda d: types.SimpleNamespace(cuda_stream=0xC0DA0000 + Device(d).index)
torch.cuda = cuda
sys.modules["torch"] = torch

import fp8conv  # noqa: E402
from fp8conv import _tensor  # noqa: E402

lib = _tensor._load()
built_with_cuda = bool(lib.fp8_cuda_compiled())
calls = []


def recorder(name):
    def fn(ctx, opts, dtype, rank, dims, x, parts, *stream):
        calls.append((name, x.value, [parts[k] for k in range(3)], stream[0].value if stream
                      else None, list(current)))
        return 0
    return fn


def raises(f):
    try:
        f()
    except fp8conv.Error as e:
        return e
    return None


# the library's own answer without CUDA, through ctypes (it reads no pointer then)
if not built_with_cuda:
    ctx = lib.fp8_ctx_create()
    o = _tensor._options("block", None, None, None, None, None, None, None)
    dims = (ctypes.c_uint64 * 2)(256, 256)
    st = lib.fp8_tensor_quantize_cuda(ctx, ctypes.byref(o), lib.dtypes["BF16"], 2, dims, None,
                                      (ctypes.c_void_p * 3)(), None)
    msg = lib.fp8_ctx_message(ctx).decode()
    lib.fp8_ctx_free(ctx)
    check("libfp8conv without CUDA: fp8_tensor_quantize_cuda is FP8_ERR_DEVICE, saying so",
          st == 5 and "built without it" in msg, (st, msg))
    e = raises(lambda: fp8conv.quantize_tensor(Tensor((256, 256), torch.bfloat16, "cuda:0")))
    check("a CUDA tensor, libfp8conv without CUDA: DeviceError (exit 5) naming the build",
          isinstance(e, fp8conv.DeviceError) and e.exit_code == 5 and
          "built without CUDA" in str(e) and "cuda:0" in str(e), repr(e))

lib.fp8_tensor_quantize = recorder("cpu")
lib.fp8_tensor_quantize_cuda = recorder("cuda")
lib.fp8_cuda_compiled = lambda: False
e = raises(lambda: fp8conv.quantize_tensor(Tensor((256, 256), torch.bfloat16, "cuda:1")))
check("a CUDA tensor, a library without CUDA: DeviceError, nothing called",
      isinstance(e, fp8conv.DeviceError) and not calls, repr(e))
lib.fp8_cuda_compiled = lambda: True

for scheme, parts in (("block", 2), ("tensor", 2), ("nvfp4", 3)):
    del calls[:]
    x = Tensor((256, 256), torch.bfloat16, "cuda:1")
    q = fp8conv.quantize_tensor(x, scheme=scheme)
    outs = [q.codes, q.scale, q.scale2]
    name, xp, ptrs, stream, scope = calls[0] if calls else (None,) * 5
    check("%s, a CUDA tensor: fp8_tensor_quantize_cuda on its pointer, its device current, "
          "its current stream" % scheme,
          len(calls) == 1 and name == "cuda" and xp == x.ptr and stream == 0xC0DA0001 and
          scope == ["cuda:1"], calls)
    check("%s, a CUDA tensor: the outputs made on its device and passed" % scheme,
          all(t.device == x.device for t in outs[:parts]) and
          ptrs == [t.ptr if t is not None else None for t in outs] and
          (parts == 3) == (q.scale2 is not None), (ptrs, [str(t.device) for t in outs[:parts]]))
    codes = q.codes
    again = fp8conv.quantize_tensor(x, scheme=scheme, out=q)
    check("%s, a CUDA tensor: out= reused" % scheme,
          again is q and q.codes is codes and calls[-1][2][0] == codes.ptr)
    e = raises(lambda: fp8conv.quantize_tensor(Tensor((256, 256), torch.bfloat16, "cuda:0"),
                                               scheme=scheme, out=q))
    check("%s: out= on another device is a UsageError" % scheme,
          isinstance(e, fp8conv.UsageError), repr(e))

del calls[:]
q = fp8conv.quantize_tensor(Tensor((256, 256), torch.float32, "cpu"))
check("a CPU tensor: fp8_tensor_quantize, outputs on the CPU",
      [c[0] for c in calls] == ["cpu"] and q.codes.device.type == "cpu", calls)
e = raises(lambda: fp8conv.quantize_tensor(Tensor((256, 256), torch.float32, "mps:0")))
check("a tensor on another device: DeviceError", isinstance(e, fp8conv.DeviceError), repr(e))
q = fp8conv.quantize_tensor(Tensor((256, 256), torch.bfloat16, "cuda:0"))
e = raises(lambda: fp8conv.dequantize_tensor(q))
check("dequantize_tensor of CUDA tensors: DeviceError (no CUDA path)",
      isinstance(e, fp8conv.DeviceError) and "no CUDA path" in str(e), repr(e))
print("check_tensor_dispatch: %d passed, %d failed" % (sum(results), len(results) - sum(results)))
sys.exit(0 if all(results) else 1)
