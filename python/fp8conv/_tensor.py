"""The tensor API: one tensor in memory quantized through libfp8conv
(fp8conv.h, "tensors in memory"), with the bytes ``fp8conv quantize`` writes.

Loaded with ctypes from the libfp8conv.so bundled with the package
(``FP8CONV_LIBRARY`` names another).  ctypes releases the GIL for the
length of each call, so other Python threads run while a tensor is
quantized.  numpy and ml_dtypes are needed for numpy inputs, torch for torch
ones; neither is a requirement of the package.
"""
import ctypes
import itertools
import os
import threading
from typing import Any, Dict, Optional, Sequence, Tuple, Union

__all__ = ["QuantizedTensor", "quantize_tensor", "dequantize_tensor", "cuda_compiled"]

# FP8_PART_CODES, FP8_PART_SCALE, FP8_PART_SCALE2: QuantizedTensor's attributes
_PART_NAMES = ("codes", "scale", "scale2")
_PARTS = len(_PART_NAMES)


class _Options(ctypes.Structure):
    _fields_ = [("scheme", ctypes.c_int), ("format", ctypes.c_int),
                ("block_rows", ctypes.c_uint32), ("block_cols", ctypes.c_uint32),
                ("scale_ue8m0", ctypes.c_bool), ("mx_rounding", ctypes.c_int),
                ("threads", ctypes.c_int), ("profile", ctypes.c_int)]


class _Part(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 40), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_uint64 * 3), ("nbytes", ctypes.c_uint64)]


class _Layout(ctypes.Structure):
    _fields_ = [("format", ctypes.c_int), ("part", _Part * _PARTS)]


_lock = threading.Lock()
_lib: Any = None
# FP8_SCHEME_TAKES_*: the options a scheme takes beyond scheme=
_TAKES_BLOCK, _TAKES_SCALE_FMT, _TAKES_MX_ROUNDING, _TAKES_GROUP = 1, 2, 4, 8
# The enums the options name, read from the library's own names: lib.ATTR =
# {name: value} for each value from FIRST on that FUNCTION names (it gives NULL
# or "?" past the last); fp8_format's 0, FP8_FORMAT_DEFAULT, has no spelling.
_NAMES = (("dtypes", "fp8_dtype_name", 0), ("schemes", "fp8_scheme_name", 0),
          ("profiles", "fp8_profile_name", 0), ("formats", "fp8_format_name", 1))


def library_path() -> str:
    """The libfp8conv.so the tensor API loads: ``FP8CONV_LIBRARY``, else the
    package's own."""
    return os.environ.get("FP8CONV_LIBRARY") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "_lib", "libfp8conv.so")


def _load() -> Any:
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        lib = ctypes.CDLL(library_path())
        c = ctypes
        lib.fp8_ctx_create.restype = c.c_void_p
        lib.fp8_ctx_free.argtypes = [c.c_void_p]
        lib.fp8_ctx_message.restype = c.c_char_p
        lib.fp8_ctx_message.argtypes = [c.c_void_p]
        lib.fp8_scheme_options.restype = c.c_uint
        lib.fp8_scheme_options.argtypes = [c.c_int]
        shape = c.POINTER(c.c_uint64)
        lib.fp8_tensor_layout_get.argtypes = [c.c_void_p, c.POINTER(_Options), c.c_int, c.c_int,
                                              shape, c.POINTER(_Layout)]
        lib.fp8_tensor_quantize.argtypes = [c.c_void_p, c.POINTER(_Options), c.c_int, c.c_int,
                                            shape, c.c_void_p, c.c_void_p * _PARTS]
        lib.fp8_tensor_dequantize.argtypes = [c.c_void_p, c.POINTER(_Options), c.c_int, c.c_int,
                                              shape, c.c_void_p * _PARTS, c.c_int, c.c_void_p]
        lib.fp8_cuda_compiled.restype = c.c_bool
        lib.fp8_cuda_compiled.argtypes = []
        lib.fp8_tensor_quantize_cuda.argtypes = lib.fp8_tensor_quantize.argtypes + [c.c_void_p]
        for f in ("fp8_tensor_layout_get", "fp8_tensor_quantize", "fp8_tensor_dequantize",
                  "fp8_tensor_quantize_cuda"):
            getattr(lib, f).restype = c.c_int
        for attr, f, first in _NAMES:
            fn = getattr(lib, f)
            fn.restype, fn.argtypes = c.c_char_p, [c.c_int]
            setattr(lib, attr, _names(fn, first))
        _lib = lib
        return lib


def _names(fn: Any, first: int) -> Dict[str, int]:
    names: Dict[str, int] = {}
    for i in itertools.count(first):
        name = fn(i)
        if name in (None, b"?"):
            break
        names[name.decode()] = i
    return names


# fp8_status -> the exit status the CLI gives it (its Error subclass: fp8conv._ERRORS)
_EXIT = {1: 2, 2: 3, 3: 4, 4: 4, 5: 5, 6: 2}


def _raise(status: int, message: str) -> None:
    from . import _ERRORS, Error
    code = _EXIT.get(status, 1)
    raise _ERRORS.get(code, Error)(message, code)


def _usage(message: str) -> None:
    _raise(1, message)


def _call(fn: Any, *args: Any) -> None:
    lib = _load()
    ctx = lib.fp8_ctx_create()
    if not ctx:
        raise MemoryError("fp8conv: out of memory")
    try:
        status = fn(ctx, *args)
        if status:
            _raise(status, lib.fp8_ctx_message(ctx).decode("utf-8", "replace"))
    finally:
        lib.fp8_ctx_free(ctx)


# safetensors dtype name -> (numpy's module, its dtype, torch's dtype)
_DTYPES = {"BF16": ("ml_dtypes", "bfloat16", "bfloat16"), "F16": ("numpy", "float16", "float16"),
           "F32": ("numpy", "float32", "float32"), "F64": ("numpy", "float64", "float64"),
           "F8_E4M3": ("ml_dtypes", "float8_e4m3fn", "float8_e4m3fn"),
           "F8_E8M0": ("ml_dtypes", "float8_e8m0fnu", "float8_e8m0fnu"),
           "U8": ("numpy", "uint8", "uint8"), "I8": ("numpy", "int8", "int8"),
           "I16": ("numpy", "int16", "int16"), "I32": ("numpy", "int32", "int32"),
           "I64": ("numpy", "int64", "int64"), "BOOL": ("numpy", "bool_", "bool")}


def _numpy_dtype(name: str) -> Any:
    module, attr, _ = _DTYPES[name]
    return getattr(__import__(module), attr)


def _torch_dtype(torch: Any, name: str) -> Any:
    dt = getattr(torch, _DTYPES[name][2], None)
    if dt is None:
        _raise(1, "torch %s has no dtype for %s" % (torch.__version__, name))
    return dt


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _dtype_of(x: Any) -> Optional[str]:
    """The safetensors name of a torch tensor's or an array's dtype; None
    for one _DTYPES lacks."""
    if _is_torch(x):
        torch_name = str(x.dtype).replace("torch.", "")
        return next((k for k, row in _DTYPES.items() if row[2] == torch_name), None)
    for name in _DTYPES:
        try:
            if x.dtype == _numpy_dtype(name):
                return name
        except (ImportError, AttributeError):
            continue
    return None


def cuda_compiled() -> bool:
    """Whether the libfp8conv the tensor API loads was built with CUDA (its
    ``fp8_cuda_compiled()``): then ``quantize_tensor`` takes torch CUDA
    tensors."""
    return bool(_load().fp8_cuda_compiled())


class _Array:
    """An input's kind, dtype name, shape, contiguous storage and device
    (None: host memory; a torch CUDA device: the CUDA path)."""

    device: Any = None

    def __init__(self, x: Any) -> None:
        if _is_torch(x):
            import torch
            self.torch = torch
            if x.device.type != "cpu":
                from . import DeviceError
                if x.device.type != "cuda":
                    raise DeviceError("a tensor on %s: quantize_tensor takes CPU and CUDA "
                                      "tensors; move it to the CPU (x.cpu())" % x.device, 5)
                if not cuda_compiled():
                    raise DeviceError(
                        "a tensor on %s: this libfp8conv (%s) was built without CUDA, so it "
                        "cannot quantize device memory; build it with CUDA (make HAVE_CUDA=1, "
                        "or make wheel WHEEL_HAVE_CUDA=1), or move the tensor to the CPU "
                        "(x.cpu())" % (x.device, library_path()), 5)
                self.device = x.device
            self.dtype = _dtype_of(x)
            self.data = x.contiguous()  # a copy only when x is not contiguous
            self.ptr = self.data.data_ptr()
            self.shape = tuple(int(d) for d in x.shape)
            return
        self.torch = None
        try:
            import numpy
        except ImportError:
            raise TypeError("fp8conv: quantize_tensor takes a numpy array (numpy and ml_dtypes "
                            "not installed) or a torch tensor, not %s" % type(x).__name__)
        if not isinstance(x, numpy.ndarray):
            raise TypeError("fp8conv: quantize_tensor takes a numpy array or a torch tensor, "
                            "not %s" % type(x).__name__)
        self.dtype = _dtype_of(x)
        self.data = numpy.ascontiguousarray(x)  # a copy only when x is not C-contiguous
        self.ptr = self.data.__array_interface__["data"][0]
        self.shape = tuple(int(d) for d in x.shape)

    def empty(self, part: _Part) -> Any:
        name = _lib_dtype_name(part.dtype)
        shape = tuple(part.shape[k] for k in range(part.rank))
        if self.torch is not None:
            return self.torch.empty(shape, dtype=_torch_dtype(self.torch, name),
                                    device=self.device or "cpu")
        import numpy
        return numpy.empty(shape, dtype=_numpy_dtype(name))

    def fits(self, t: Any, part: _Part) -> bool:
        """Whether t could be empty(part)'s: the same kind, dtype and shape,
        C-contiguous, writable (quantize_tensor's out=)."""
        name = _lib_dtype_name(part.dtype)
        shape = tuple(part.shape[k] for k in range(part.rank))
        if self.torch is not None:
            return (isinstance(t, self.torch.Tensor) and
                    (t.device == self.device if self.device else t.device.type == "cpu") and
                    t.dtype == _torch_dtype(self.torch, name) and tuple(t.shape) == shape and
                    t.is_contiguous())
        import numpy
        return (isinstance(t, numpy.ndarray) and t.dtype == _numpy_dtype(name) and
                t.shape == shape and t.flags.c_contiguous and t.flags.writeable)


def _lib_dtype_name(i: int) -> str:
    return _load().fp8_dtype_name(i).decode()


def _ptr(a: Any) -> int:
    return a.data_ptr() if hasattr(a, "data_ptr") else a.__array_interface__["data"][0]


class QuantizedTensor:
    """A tensor quantized as ``fp8conv quantize`` stores it: ``codes`` (the
    weight: E4M3 codes, or FP4/INT4 codes packed as the format packs them),
    ``scale`` (its scales), ``scale2`` (NVFP4's second-level scale, else
    None), each with the dtype and shape the checkpoint gives it, in the
    input's kind (numpy with ml_dtypes dtypes, or torch).  ``names`` are the
    names the format stores them under after the module's name, e.g.
    ``("weight", "weight_scale_inv", None)``; ``scheme`` and ``format`` are
    the command-line spellings (the format resolved)."""

    __slots__ = ("codes", "scale", "scale2", "scheme", "format", "names", "shape", "dtype",
                 "_options")

    def __init__(self, codes: Any, scale: Any, scale2: Any, scheme: str, format: str,
                 names: Tuple[str, str, Optional[str]], shape: Tuple[int, ...], dtype: str,
                 options: Any) -> None:
        self.codes, self.scale, self.scale2 = codes, scale, scale2
        self.scheme, self.format, self.names = scheme, format, names
        self.shape, self.dtype = shape, dtype  # the source's shape and dtype ("BF16")
        self._options = options

    def __repr__(self) -> str:
        return "QuantizedTensor(scheme=%r, format=%r, shape=%r, names=%r)" % (
            self.scheme, self.format, self.shape, self.names)


def _options(scheme: str, block: Union[str, Sequence[int], None], format: Optional[str],
             scale_fmt: Optional[str], mx_rounding: Optional[str], group: Optional[int],
             threads: Optional[int], profile: Optional[str]) -> _Options:
    lib = _load()
    if profile is not None and profile not in lib.profiles:
        _usage("profile=%r: not one of %s" % (profile, ", ".join(lib.profiles)))
    if scheme not in lib.schemes:
        _usage("scheme=%r: not one of %s" % (scheme, ", ".join(lib.schemes)))
    o = _Options(scheme=lib.schemes[scheme], format=0, block_rows=128, block_cols=128,
                 scale_ue8m0=False, mx_rounding=0, threads=int(threads or 0),
                 profile=lib.profiles[profile or "fp8conv"])
    takes = lib.fp8_scheme_options(o.scheme)
    if format is not None:
        if format not in lib.formats:
            _usage("format=%r: not one of %s" % (format, ", ".join(lib.formats)))
        o.format = lib.formats[format]
    if block is not None:
        if not takes & _TAKES_BLOCK:
            _usage("block= applies to scheme=\"block\" only")
        if isinstance(block, str):
            parts = block.lower().split("x")
        else:
            parts = list(block)
        try:
            o.block_rows, o.block_cols = (int(v) for v in parts)
        except (TypeError, ValueError):
            _usage("block=%r: two sizes, (rows, cols) or \"RxC\"" % (block,))
    if scale_fmt is not None:
        if not takes & _TAKES_SCALE_FMT:
            _usage("scale_fmt= applies to scheme=\"block\" only")
        if scale_fmt not in ("float", "ue8m0"):
            _usage("scale_fmt=%r: \"float\" or \"ue8m0\"" % (scale_fmt,))
        o.scale_ue8m0 = scale_fmt == "ue8m0"
    if mx_rounding is not None:
        if not takes & _TAKES_MX_ROUNDING:
            _usage("mx_rounding= applies to the MX schemes only (mxfp8, mxfp4)")
        if mx_rounding not in ("rceil", "floor"):
            _usage("mx_rounding=%r: \"rceil\" or \"floor\"" % (mx_rounding,))
        o.mx_rounding = 1 if mx_rounding == "floor" else 0
    if group is not None:
        if not takes & _TAKES_GROUP:
            _usage("group= applies to scheme=\"int4\" only")
        o.block_cols = int(group)
    if o.threads < 0:
        _usage("threads=%d: 0 or more (0 or None: one per CPU)" % o.threads)
    return o


def _layout(o: _Options, dtype: int, shape: Tuple[int, ...]) -> _Layout:
    lib = _load()
    dims = (ctypes.c_uint64 * max(len(shape), 1))(*shape)
    lay = _Layout()
    _call(lib.fp8_tensor_layout_get, ctypes.byref(o), dtype, len(shape), dims, ctypes.byref(lay))
    return lay


def quantize_tensor(x: Any, scheme: str = "block",
                    block: Union[str, Sequence[int], None] = None,
                    format: Optional[str] = None, scale_fmt: Optional[str] = None,
                    mx_rounding: Optional[str] = None, group: Optional[int] = None,
                    threads: Optional[int] = None,
                    profile: Optional[str] = None,
                    out: Optional[QuantizedTensor] = None) -> QuantizedTensor:
    """Quantize one tensor in memory into the bytes ``fp8conv quantize``
    writes for it under the same options: the same plan and quantizer, in
    libfp8conv, on the CPU, by ``threads`` threads (None: one per CPU; the
    bytes do not depend on it).  The GIL is released during the call.

    ``x``: a numpy array (bfloat16 from ml_dtypes, float16, float32) or a
    torch CPU or CUDA tensor, a matrix [rows, cols] or, for the FP8 schemes, stacked
    experts [experts, rows, cols]; read in place when contiguous (else a
    contiguous copy is made first).  Options as ``fp8conv quantize``'s:
    ``scheme`` (block, channel, tensor, mxfp8, nvfp4, mxfp4, int4),
    ``block`` (``(128, 128)`` by default, or ``"32x32"``), ``format``
    (hf-fp8, compressed-tensors, modelopt; None: the scheme's default),
    ``scale_fmt`` ("ue8m0"), ``mx_rounding`` ("rceil", "floor"), ``group``
    (int4: 128 or 32).  ``profile``: an engine's rounding rule, as
    ``fp8conv quantize --profile`` (fp8conv-formats(5), PROFILES: "vllm",
    "te", ...; None: fp8conv's own); a scheme the profile does not define is
    a ``UsageError`` naming those it does.

    NVFP4's second level comes from this tensor alone (quantize gives a
    fused layer's tensors, q/k/v or gate/up, the largest of their amaxes);
    INT4's ``weight_shape`` tensor is the caller's to write.

    ``out``: a ``QuantizedTensor`` an earlier call returned for a tensor of
    the same kind, dtype and shape under the same options; its arrays are
    written over and it is returned (a loop that quantizes each step's
    weights then allocates nothing: fresh arrays cost a page fault per 4
    KiB).  Arrays that do not fit are a ``UsageError``, before anything is
    written.

    A torch CUDA tensor, when the library was built with CUDA
    (``cuda_compiled()``), is quantized on its device by libfp8conv's
    ``fp8_tensor_quantize_cuda``: the CUDA kernels read it in place and
    write outputs torch allocates on that device (or ``out``'s, on the same
    device), queued on the device's current stream
    (``torch.cuda.current_stream(x.device)``), which the call waits for at
    the end; the bytes are the CPU's.  ``threads`` does not apply there.
    This CUDA path has run only under the kernels' CPU emulation
    (tests/check_tensor_cuda.c) until the GPU kit's tests/gpu/tensor_cuda.py
    runs on a GPU.

    Returns a ``QuantizedTensor``.  A bad option or shape raises
    ``UsageError``, a tensor the scheme cannot write or a NaN/infinity
    ``BadInputError``; a CUDA tensor with a library built without CUDA, a
    scheme without a kernel (int4) or another device ``DeviceError``.
    """
    lib = _load()
    o = _options(scheme, block, format, scale_fmt, mx_rounding, group, threads, profile)
    a = _Array(x)
    if a.dtype is None:
        _usage("a tensor of %s: quantize takes bf16, f16 or f32" % (x.dtype,))
    dtype = lib.dtypes[a.dtype]
    lay = _layout(o, dtype, a.shape)
    if out is None:
        outs = [a.empty(lay.part[k]) if lay.part[k].name else None for k in range(_PARTS)]
    else:
        outs = [getattr(out, k) for k in _PART_NAMES]
        for k, t in enumerate(outs):
            if (t is None) != (not lay.part[k].name) or (t is not None and not a.fits(t, lay.part[k])):
                _usage("out=: its %s does not fit this call's (kind, dtype, shape, C order)"
                       % _PART_NAMES[k])
    ptrs = (ctypes.c_void_p * _PARTS)(*[_ptr(t) if t is not None else None for t in outs])
    dims = (ctypes.c_uint64 * len(a.shape))(*a.shape)
    if a.device is None:
        _call(lib.fp8_tensor_quantize, ctypes.byref(o), dtype, len(a.shape), dims,
              ctypes.c_void_p(a.ptr), ptrs)
    else:  # the CUDA kernels on the tensor's memory, queued on its device's current stream
        torch = a.torch
        with torch.cuda.device(a.device):
            stream = torch.cuda.current_stream(a.device).cuda_stream
            _call(lib.fp8_tensor_quantize_cuda, ctypes.byref(o), dtype, len(a.shape), dims,
                  ctypes.c_void_p(a.ptr), ptrs, ctypes.c_void_p(stream))
    names = tuple(lay.part[k].name.decode() or None for k in range(_PARTS))
    q = QuantizedTensor(outs[0], outs[1], outs[2], scheme,
                        lib.fp8_format_name(lay.format).decode(), names, a.shape, a.dtype, o)
    if out is not None:
        for slot in QuantizedTensor.__slots__:
            setattr(out, slot, getattr(q, slot))
        return out
    return q


def dequantize_tensor(q: QuantizedTensor, dtype: str = "bf16",
                      threads: Optional[int] = None) -> Any:
    """A ``QuantizedTensor`` back to values, the bytes ``fp8conv
    dequantize-for-export --dtype DTYPE`` writes for the weight: y = q * s in
    fp32, rounded to nearest even into ``dtype`` ("bf16", "f16", "f32"), in
    the kind of ``q.codes`` (numpy or torch), of the source's shape.  The GIL
    is released during the call.  A NaN code, a bad scale or an f16 overflow
    raises ``BadInputError``; CUDA tensors ``DeviceError`` (no CUDA path:
    move them to the CPU)."""
    lib = _load()
    if not isinstance(q, QuantizedTensor):
        raise TypeError("fp8conv: dequantize_tensor takes a QuantizedTensor, not %s"
                        % type(q).__name__)
    if _is_torch(q.codes) and q.codes.device.type != "cpu":
        from . import DeviceError
        raise DeviceError("dequantize_tensor: q is on %s; it has no CUDA path: move q's "
                          "tensors to the CPU first" % q.codes.device, 5)
    out = {"bf16": "BF16", "f16": "F16", "f32": "F32"}.get(dtype)
    if out is None:
        _usage("dtype=%r: \"bf16\", \"f16\" or \"f32\"" % (dtype,))
    o = _Options.from_buffer_copy(q._options)
    if threads is not None:
        o.threads = int(threads)
    parts = [getattr(q, k) for k in _PART_NAMES]
    lay = _layout(o, lib.dtypes[q.dtype], q.shape)
    for k, t in enumerate(parts):
        if lay.part[k].name and (t is None or _nbytes(t) != lay.part[k].nbytes
                                 or not _contiguous(t)):
            _usage("dequantize_tensor: q.%s is not the contiguous %d bytes its layout has"
                   % (_PART_NAMES[k], lay.part[k].nbytes))
    kind = _Array.__new__(_Array)
    kind.torch = None
    if _is_torch(q.codes):
        import torch
        kind.torch = torch
    y = kind.empty(_Part(dtype=lib.dtypes[out], rank=len(q.shape),
                         shape=(ctypes.c_uint64 * 3)(*q.shape)))
    ptrs = (ctypes.c_void_p * _PARTS)(*[_ptr(t) if t is not None else None for t in parts])
    dims = (ctypes.c_uint64 * len(q.shape))(*q.shape)
    _call(lib.fp8_tensor_dequantize, ctypes.byref(o), lib.dtypes[q.dtype], len(q.shape), dims,
          ptrs, lib.dtypes[out], ctypes.c_void_p(_ptr(y)))
    return y


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size() if hasattr(t, "element_size") else t.nbytes


def _contiguous(t: Any) -> bool:
    return t.is_contiguous() if hasattr(t, "is_contiguous") else t.flags["C_CONTIGUOUS"]
