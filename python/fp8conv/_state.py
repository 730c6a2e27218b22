"""The state-dict API: a model's tensors in memory quantized into exactly the
tensors ``fp8conv quantize`` writes for that model (fp8conv.h, "a state dict
in memory").

Every decision is quantize's own plan, made in libfp8conv over the tensors'
names, dtypes and shapes and the model's config.json
(fp8_quant_plan_create_memory): what is kept and why (the ignore list, the
built-in keeps), each output tensor's name, dtype and shape, which weights
fused experts are written apart as, and which fused set (q/k/v, gate/up)
shares NVFP4's second level.  This module only moves data: it hands each
quantized item's weight (the input tensor, or the slice of fused experts the
plan names) to the tensor API's quantizer (fp8_quant_plan_item_quantize) and
passes kept tensors through.
"""
import ctypes
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._tensor import (_DTYPES, _Array, _Options, _call, _dtype_of, _is_torch, _lib_dtype_name,
                      _load, _numpy_dtype, _options, _ptr, _torch_dtype, _usage)

__all__ = ["QuantizedStateDict", "quantize_state_dict", "quantization_config"]

_ITEM_PARTS = 4  # FP8_ITEM_CODES, _SCALE, _SCALE2, _SHAPE


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_uint64)), ("elements", ctypes.c_uint64),
                ("begin", ctypes.c_uint64), ("end", ctypes.c_uint64)]


class _StateOptions(ctypes.Structure):
    _fields_ = [("tensor", _Options), ("ignore", ctypes.POINTER(ctypes.c_char_p)),
                ("nignore", ctypes.c_size_t), ("no_default_ignore", ctypes.c_bool),
                ("config_json", ctypes.c_char_p)]


class _Item(ctypes.Structure):  # fp8_quant_item
    _fields_ = [("tensor", ctypes.POINTER(_TensorInfo)), ("shard", ctypes.c_char_p),
                ("quantize", ctypes.c_bool), ("reason", ctypes.c_char_p), ("warn", ctypes.c_bool),
                ("scale_name", ctypes.c_char_p), ("scale_dtype", ctypes.c_int),
                ("scale_rank", ctypes.c_int), ("scale_shape", ctypes.c_uint64 * 3),
                ("packed_name", ctypes.c_char_p), ("global_name", ctypes.c_char_p),
                ("global_rank", ctypes.c_int), ("code_dtype", ctypes.c_int),
                ("code_shape", ctypes.c_uint64 * 3), ("shape_name", ctypes.c_char_p)]


class _Source(ctypes.Structure):  # fp8_item_source
    _fields_ = [("tensor", ctypes.c_char_p), ("apart", ctypes.c_bool), ("in_out", ctypes.c_bool),
                ("expert", ctypes.c_uint64), ("row0", ctypes.c_uint64), ("rows", ctypes.c_uint64),
                ("set", ctypes.c_char_p)]


def _declare(lib: Any) -> None:
    if getattr(lib, "state_declared", False):
        return
    c = ctypes
    lib.fp8_quant_plan_create_memory.argtypes = [c.c_void_p, c.POINTER(_StateOptions),
                                                 c.POINTER(_TensorInfo), c.c_size_t,
                                                 c.POINTER(c.c_void_p)]
    lib.fp8_quant_plan_free.argtypes = [c.c_void_p]
    lib.fp8_quant_plan_count.argtypes = [c.c_void_p]
    lib.fp8_quant_plan_count.restype = c.c_size_t
    lib.fp8_quant_plan_item.argtypes = [c.c_void_p, c.c_size_t]
    lib.fp8_quant_plan_item.restype = c.POINTER(_Item)
    lib.fp8_quant_plan_item_source.argtypes = [c.c_void_p, c.c_void_p, c.c_size_t,
                                               c.POINTER(_Source)]
    lib.fp8_quant_plan_quantization_config.argtypes = [c.c_void_p]
    lib.fp8_quant_plan_quantization_config.restype = c.c_void_p  # freed with free()
    lib.fp8_quant_plan_warning_count.argtypes = [c.c_void_p]
    lib.fp8_quant_plan_warning_count.restype = c.c_size_t
    lib.fp8_quant_plan_warning.argtypes = [c.c_void_p, c.c_size_t]
    lib.fp8_quant_plan_warning.restype = c.c_char_p
    lib.fp8_quant_plan_format.argtypes = [c.c_void_p]
    lib.fp8_quant_plan_item_amax.argtypes = [c.c_void_p, c.c_void_p, c.c_size_t, c.c_void_p,
                                             c.POINTER(c.c_float)]
    lib.fp8_quant_plan_item_quantize.argtypes = [c.c_void_p, c.c_void_p, c.c_size_t, c.c_void_p,
                                                 c.c_float, c.c_void_p * _ITEM_PARTS]
    for f in ("fp8_quant_plan_create_memory", "fp8_quant_plan_item_source",
              "fp8_quant_plan_item_amax", "fp8_quant_plan_item_quantize",
              "fp8_quant_plan_format"):
        getattr(lib, f).restype = c.c_int
    libc = c.CDLL(None)
    libc.free.argtypes = [c.c_void_p]
    lib.c_free = libc.free
    lib.state_declared = True


class QuantizedStateDict(dict):
    """The tensors ``fp8conv quantize`` writes for the state dict given, by
    name, in the input's kind (numpy with ml_dtypes dtypes, or torch CPU),
    in name order; kept tensors are the input's own objects.  Also:
    ``quantization_config``, the dict quantize writes into config.json
    (for the tensors given: see ``quantization_config()`` for a layerwise
    loop's); ``kept``, each kept input tensor's reason; ``warnings``, the
    plan's warnings (a layer's call may warn that an ``ignore`` pattern
    matches none of its tensors); ``format``, the format written."""

    quantization_config: Dict[str, Any]
    kept: Dict[str, str]
    warnings: List[str]
    format: str


def _meta(x: Any) -> Tuple[str, Tuple[int, ...]]:
    """A tensor's (safetensors dtype name, shape), or a (dtype, shape) pair's."""
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str):
        return x[0].upper(), tuple(int(d) for d in x[1])
    if not _is_torch(x) and not (hasattr(x, "dtype") and hasattr(x, "shape")):
        raise TypeError("fp8conv: a state dict's values are numpy arrays or torch tensors "
                        "(or (dtype, shape) pairs for quantization_config), not %s"
                        % type(x).__name__)
    name = _dtype_of(x)
    if name is None:
        _usage("a tensor of %s: the state-dict API takes the dtypes of safetensors "
               "(%s)" % (x.dtype, ", ".join(_DTYPES)))
    return name, tuple(int(d) for d in x.shape)


class _Plan:
    """quantize's plan of the tensors named in `metas` (name -> (dtype, shape))."""

    def __init__(self, metas: Mapping[str, Tuple[str, Tuple[int, ...]]], config: Any,
                 o: _Options, ignore: Sequence[str], no_default_ignore: bool) -> None:
        lib = _load()
        _declare(lib)
        self.lib = lib
        names = list(metas)
        infos = (_TensorInfo * max(len(names), 1))()
        self._keep = []  # what the infos point into, alive through the call
        for i, name in enumerate(names):
            dtype, shape = metas[name]
            dims = (ctypes.c_uint64 * max(len(shape), 1))(*shape)
            raw = name.encode()
            self._keep += [dims, raw]
            infos[i] = _TensorInfo(name=raw, dtype=lib.dtypes[dtype], rank=len(shape), shape=dims)
        if isinstance(config, (str, os.PathLike)):
            path = os.fspath(config)
            with open(os.path.join(path, "config.json") if os.path.isdir(path) else path) as f:
                text = f.read()
        elif config is None:
            text = None
        elif isinstance(config, Mapping):
            text = json.dumps(config)
        else:
            raise TypeError("fp8conv: config= takes the model's config.json as a dict, its path "
                            "or its directory, or None; not %s" % type(config).__name__)
        pats = [p.encode() for p in ([ignore] if isinstance(ignore, str) else list(ignore or ()))]
        arr = (ctypes.c_char_p * max(len(pats), 1))(*pats)
        so = _StateOptions(tensor=o, ignore=arr, nignore=len(pats),
                           no_default_ignore=bool(no_default_ignore),
                           config_json=text.encode() if text is not None else None)
        plan = ctypes.c_void_p()
        _call(lib.fp8_quant_plan_create_memory, ctypes.byref(so), infos, len(names),
              ctypes.byref(plan))
        self.p = plan
        self.items = [lib.fp8_quant_plan_item(plan, i).contents
                      for i in range(lib.fp8_quant_plan_count(plan))]
        self.sources = []
        for i in range(len(self.items)):
            s = _Source()
            _call(lib.fp8_quant_plan_item_source, plan, i, ctypes.byref(s))
            self.sources.append(s)

    def __del__(self) -> None:
        if getattr(self, "p", None):
            self.lib.fp8_quant_plan_free(self.p)
            self.p = None

    def quantization_config(self) -> Dict[str, Any]:
        raw = self.lib.fp8_quant_plan_quantization_config(self.p)
        if not raw:
            raise MemoryError("fp8conv: out of memory")
        try:
            return json.loads(ctypes.string_at(raw).decode())
        finally:
            self.lib.c_free(raw)

    def warnings(self) -> List[str]:
        return [self.lib.fp8_quant_plan_warning(self.p, i).decode()
                for i in range(self.lib.fp8_quant_plan_warning_count(self.p))]

    def format(self) -> str:
        return self.lib.fp8_format_name(self.lib.fp8_quant_plan_format(self.p)).decode()


def _outputs(it: _Item) -> List[Tuple[str, str, Tuple[int, ...]]]:
    """A quantized item's tensors (name, dtype, shape) by FP8_ITEM_* slot (None: none)."""
    t = it.tensor.contents
    codes = (it.packed_name or t.name).decode()
    out = [(codes, _lib_dtype_name(it.code_dtype), tuple(it.code_shape[k] for k in range(t.rank))),
           (it.scale_name.decode(), _lib_dtype_name(it.scale_dtype),
            tuple(it.scale_shape[k] for k in range(it.scale_rank))), None, None]
    if it.global_name:
        out[2] = (it.global_name.decode(), "F32", (1,) * it.global_rank)
    if it.shape_name:
        out[3] = (it.shape_name.decode(), "I64", (2,))
    return out


def _weight(x: Any, s: _Source) -> Any:
    """The item's weight: the input tensor, or its expert's slice of fused experts."""
    if not s.apart:
        return x
    w = x[s.expert, :, s.row0:s.row0 + s.rows] if s.in_out else x[s.expert, s.row0:s.row0 + s.rows]
    return w.T if s.in_out else w


def _empty(like: _Array, dtype: str, shape: Tuple[int, ...]) -> Any:
    if like.torch is not None:
        return like.torch.empty(shape, dtype=_torch_dtype(like.torch, dtype))
    import numpy
    return numpy.empty(shape, dtype=_numpy_dtype(dtype))


def quantize_state_dict(state_dict: Mapping[str, Any], config: Any = None, scheme: str = "block",
                        block: Union[str, Sequence[int], None] = None,
                        format: Optional[str] = None, ignore: Sequence[str] = (),
                        no_default_ignore: bool = False, scale_fmt: Optional[str] = None,
                        mx_rounding: Optional[str] = None, group: Optional[int] = None,
                        threads: Optional[int] = None,
                        profile: Optional[str] = None) -> QuantizedStateDict:
    """Quantize a model's tensors in memory into exactly the tensors (names,
    dtypes, shapes, bytes) ``fp8conv quantize`` writes for the same model
    under the same options, with quantize's own plan (libfp8conv, no
    subprocess, no file; the GIL released during each call).

    ``state_dict``: name -> numpy array (bfloat16 from ml_dtypes, float16,
    float32, or any safetensors dtype for tensors that are kept) or torch CPU
    tensor.  ``config``: the model's config.json (a dict, its path or its
    directory; None: none), which tells quantize the expert count, the
    hidden size and the model type its rules need.  Options as ``fp8conv
    quantize``'s: ``scheme``, ``block``, ``format``, ``ignore`` (its
    ``--ignore`` patterns), ``no_default_ignore``, ``scale_fmt``,
    ``mx_rounding``, ``group``; ``threads`` (None: one per CPU; the bytes do
    not depend on it); ``profile``: an engine's rounding rule, as quantize's
    ``--profile`` (None: fp8conv's own).

    One layer's tensors at a time give that layer's tensors of quantize's
    output (a layerwise broadcast), as long as the call holds each fused set
    whole (q/k/v, gate/up, a fused experts tensor with its bias).  What a
    partial call cannot know: the ignore list of the whole model (its
    ``quantization_config`` lists the modules it kept), and whether an
    ``ignore`` pattern matches another call's tensors (its ``warnings``
    say a pattern matched none of its own).  The whole model's
    ``quantization_config`` comes from ``quantization_config()`` over the
    names, dtypes and shapes of all its tensors (no data needed).

    Returns a ``QuantizedStateDict``.  A bad option raises ``UsageError``, a
    tensor the scheme cannot write or a NaN/infinity in a weight
    ``BadInputError``, a CUDA tensor ``DeviceError``.
    """
    o = _options(scheme, block, format, scale_fmt, mx_rounding, group, threads, profile)
    for name, x in state_dict.items():
        if _is_torch(x) and x.device.type != "cpu":
            _Array(x)  # raises DeviceError
    plan = _Plan({k: _meta(v) for k, v in state_dict.items()}, config, o, ignore,
                 no_default_ignore)
    lib = plan.lib
    made: Dict[int, List[Tuple[str, Any]]] = {}
    sets: Dict[str, List[int]] = {}
    for i, (it, s) in enumerate(zip(plan.items, plan.sources)):
        if it.quantize:
            sets.setdefault(s.set.decode(), []).append(i)
    for members in sets.values():
        arrays = [_Array(_weight(state_dict[plan.sources[i].tensor.decode()], plan.sources[i]))
                  for i in members]
        amax = 0.0
        for i, a in zip(members, arrays):
            if plan.items[i].global_name:  # NVFP4: the set's largest amax
                m = ctypes.c_float()
                _call(lib.fp8_quant_plan_item_amax, plan.p, i, ctypes.c_void_p(a.ptr),
                      ctypes.byref(m))
                amax = max(amax, m.value)
        for i, a in zip(members, arrays):
            outs = [(n, _empty(a, dt, sh)) if n else None
                    for n, dt, sh in (o_ or (None, None, None) for o_ in _outputs(plan.items[i]))]
            ptrs = (ctypes.c_void_p * _ITEM_PARTS)(*[_ptr(t[1]) if t else None for t in outs])
            _call(lib.fp8_quant_plan_item_quantize, plan.p, i, ctypes.c_void_p(a.ptr),
                  ctypes.c_float(amax), ptrs)
            # the order quantize declares them in: codes, second level, scale, shape
            made[i] = [t for t in (outs[0], outs[2], outs[1], outs[3]) if t]
    result = QuantizedStateDict()
    result.kept = {}
    for i, it in enumerate(plan.items):
        if it.quantize:
            result.update(made[i])
        else:
            name = it.tensor.contents.name.decode()
            result[name] = state_dict[name]
            result.kept[name] = it.reason.decode()
    result.quantization_config = plan.quantization_config()
    result.warnings = plan.warnings()
    result.format = plan.format()
    return result


def quantization_config(state_dict: Mapping[str, Any], config: Any = None, scheme: str = "block",
                        block: Union[str, Sequence[int], None] = None,
                        format: Optional[str] = None, ignore: Sequence[str] = (),
                        no_default_ignore: bool = False, scale_fmt: Optional[str] = None,
                        mx_rounding: Optional[str] = None, group: Optional[int] = None,
                        profile: Optional[str] = None) -> Dict[str, Any]:
    """The ``quantization_config`` ``fp8conv quantize`` writes into
    config.json for a model of these tensors under these options (the same
    as ``quantize_state_dict``'s), from their names, dtypes and shapes only:
    ``state_dict`` maps each name of the whole model to a tensor (numpy,
    torch on any device, torch's "meta" included) or to a ``(dtype,
    shape)`` pair (``("BF16", (4096, 4096))``).  A layerwise loop calls it
    once, for the config it sends with the weights."""
    o = _options(scheme, block, format, scale_fmt, mx_rounding, group, None, profile)
    plan = _Plan({k: _meta(v) for k, v in state_dict.items()}, config, o, ignore,
                 no_default_ignore)
    return plan.quantization_config()
