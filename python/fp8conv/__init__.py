"""fp8conv's file commands as Python functions, and one tensor or a state
dict in memory quantized as the file commands store it.

Each function runs the fp8conv binary bundled with this package (the same
program as the ``fp8conv`` command, fp8conv(1)) with ``--json`` and returns
its JSON report as a dict::

    import fp8conv
    report = fp8conv.quantize("model/", "model-fp8/", block=(32, 32))
    fp8conv.verify("model-fp8/")["ok"]                    # True
    fp8conv.diff("model-fp8/", "other-fp8/")["identical"]  # False: a verdict, not an error

Options are the command's long options with ``_`` for ``-``: ``True`` gives
the flag (``no_values=True`` is ``--no-values``), ``False`` and ``None``
leave it out, a list repeats the option (``ignore=["lm_head", "gate"]``),
``block`` takes ``"32x32"`` or ``(32, 32)`` and ``part`` ``"1/8"`` or
``(1, 8)``, ``jobs`` is ``--threads``; anything else is passed as its
``str()``.  An option the command does not take is the command's usage error
(``UsageError``).  ``json``, ``quiet`` and ``help`` are the API's to set.

A failure raises ``Error`` (a subclass per exit status: ``UsageError`` 2,
``BadInputError`` 3, ``IOSystemError`` 4, ``DeviceError`` 5) with the exit
status and fp8conv's message.  ``verify`` finding a problem and ``diff``
finding a difference (exit 1) are verdicts: the report says so (``"ok"``,
``"identical"``) and nothing is raised.

Nothing is written to standard output or error: progress goes to the
``progress`` callback when one is given (each line of the progress bar,
``"quantize:  31% 578 MiB of 1.75 GiB, ..."``, then the closing line), and
fp8conv's warnings and notes to the ``fp8conv`` logger (WARNING and INFO),
which has no handler of its own.

The tensor API quantizes one tensor held in memory, through the bundled
libfp8conv (ctypes, which releases the GIL during each call: no
subprocess, no file), into exactly the bytes ``fp8conv quantize`` writes for
it under the same options::

    q = fp8conv.quantize_tensor(w, scheme="block", block=(128, 128))
    q.codes, q.scale, q.names    # float8_e4m3fn, float32; ("weight", "weight_scale_inv", None)
    w2 = fp8conv.dequantize_tensor(q, dtype="bf16")   # dequantize-for-export's bytes

``w`` is a numpy array (bfloat16 from ml_dtypes, float16, float32) or a torch
CPU or CUDA tensor; the result is of the same kind and device (numpy with
ml_dtypes dtypes: float8_e4m3fn, float8_e8m0fnu; packed FP4 as uint8, INT4
as int32 words).  Zero copy: a contiguous input is read in place and the
outputs are arrays the package allocates and libfp8conv fills.  A torch
CUDA tensor is quantized on its device by the CUDA kernels, on the current
stream, when libfp8conv was built with CUDA (``fp8conv._tensor.cuda_compiled()``;
else ``DeviceError``); that path has run only under the kernels' CPU
emulation until the GPU kit runs it.  ``profile="vllm"`` (any name of
``quantize --profile``) gives that engine's bytes.

The state-dict API quantizes a model's tensors in memory into exactly the
tensors ``fp8conv quantize`` writes for that model, by quantize's own plan
(its ignore rules and built-in keeps, fused sets, experts), whole or one
layer at a time (a layerwise broadcast)::

    fp8 = fp8conv.quantize_state_dict(layer_tensors, config="model/", scheme="nvfp4")
    fp8.quantization_config       # what quantize writes into config.json, for these tensors
    fp8conv.quantization_config(all_tensors, config="model/", scheme="nvfp4")  # the model's
"""
import json
import logging
import os
import subprocess
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Union

__all__ = [
    "BadInputError",
    "DeviceError",
    "Error",
    "IOSystemError",
    "QuantizedStateDict",
    "QuantizedTensor",
    "UsageError",
    "binary_path",
    "convert",
    "dequantize_for_export",
    "dequantize_tensor",
    "diff",
    "inspect",
    "quantization_config",
    "quantize",
    "quantize_state_dict",
    "quantize_tensor",
    "verify",
]

try:
    from importlib.metadata import PackageNotFoundError, version as _version

    try:
        __version__ = _version("fp8conv")
    except PackageNotFoundError:  # imported from the source tree
        __version__ = "unknown"
except ImportError:  # pragma: no cover
    __version__ = "unknown"

_log = logging.getLogger("fp8conv")
_log.addHandler(logging.NullHandler())

PathArg = Union[str, os.PathLike[str]]
OptionValue = Union[str, int, float, bool, None, os.PathLike[str],
                    Sequence[Union[str, int, os.PathLike[str]]]]
ProgressCallback = Callable[[str], None]


class Error(Exception):
    """fp8conv failed.  ``exit_code`` is its exit status (fp8conv(1), EXIT
    STATUS; negative: killed by that signal), ``message`` what it said on
    standard error without its ``fp8conv: `` prefix, ``argv`` the command
    that ran."""

    exit_code: int
    message: str
    argv: List[str]

    def __init__(self, message: str, exit_code: int, argv: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.argv = list(argv)


class UsageError(Error):
    """Exit status 2: an unknown option or value, an output that exists
    without ``force=True``, ``part``/``finish`` options that differ from the
    recorded ones, ..."""


class BadInputError(Error):
    """Exit status 3: a malformed or unsupported checkpoint, non-finite
    values, an input already quantized, ..."""


class IOSystemError(Error):
    """Exit status 4: an I/O or system error: a path that cannot be read or
    written, a full disk, out of memory, an input cut short during the run.
    A run stopped by signal N exits 128 + N: a plain ``Error``."""


class DeviceError(Error):
    """Exit status 5: ``device="cuda"`` without a usable GPU, or a failed
    CUDA call."""


_ERRORS = {2: UsageError, 3: BadInputError, 4: IOSystemError, 5: DeviceError}
# Exit 1 is a verdict for these two, an error for no command.
_VERDICT = {"verify", "diff"}
# Options the API sets itself.
_RESERVED = {"json", "quiet", "help", "progress"}
_ALIASES = {"jobs": "threads"}
# Options whose value is a tuple of numbers: (32, 32) is 32x32.
_JOINED = {"block": "x", "part": "/"}


def binary_path() -> str:
    """The fp8conv binary the functions run: the one in this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "fp8conv")


def _word(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        raise TypeError("fp8conv: %r is not an option value" % (value,))
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _option_args(options: Dict[str, OptionValue]) -> List[str]:
    args: List[str] = []
    for key, value in options.items():
        if key in _RESERVED:
            raise TypeError("fp8conv: %s= is set by the API (progress: a callback)" % key)
        name = _ALIASES.get(key, key).replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append("--" + name)
        elif isinstance(value, (list, tuple)):
            if name in _JOINED:
                args.append("--%s=%s" % (name, _JOINED[name].join(_word(v) for v in value)))
            else:
                args += ["--%s=%s" % (name, _word(v)) for v in value]
        else:
            args.append("--%s=%s" % (name, _word(value)))
    return args


def _lines(buffer: str) -> Iterable[str]:
    """The complete lines of the progress bar and messages: a progress line
    is rewritten after a carriage return, a message ends in a newline."""
    return (part.rstrip() for part in buffer.replace("\r", "\n").split("\n"))


def _run(command: str, operands: Sequence[PathArg], options: Dict[str, OptionValue],
         progress: Optional[ProgressCallback]) -> Dict[str, Any]:
    if progress is not None and not callable(progress):
        raise TypeError("fp8conv: progress= takes a callable (each progress line), not %r"
                        % (progress,))
    exe = binary_path()
    if not os.access(exe, os.X_OK):
        raise FileNotFoundError("%s: no fp8conv binary here; install the package from its wheel "
                                "(make wheel) or with pip install ." % exe)
    argv = [exe, command, "--json", "--progress=" + ("always" if progress else "never")]
    argv += _option_args(options) + ["--"] + [os.fspath(p) for p in operands]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None
    out: List[bytes] = []
    messages: List[str] = []
    try:
        # stdout (one JSON document) is drained by a thread, so that the
        # callback runs on the caller's thread as stderr arrives.
        reader = threading.Thread(target=lambda: out.append(stdout.read()), daemon=True)
        reader.start()
        pending = b""
        while True:
            chunk = os.read(stderr.fileno(), 65536)
            pending += chunk
            cut = max(pending.rfind(b"\r"), pending.rfind(b"\n")) if chunk else len(pending)
            if cut < 0:
                continue
            for line in _lines(pending[:cut].decode("utf-8", "replace")):
                if progress is not None and line and not line.startswith("fp8conv: "):
                    progress(line)
                elif line:
                    messages.append(line)
            pending = pending[cut + 1:]
            if not chunk:
                break
        reader.join()
        rc = proc.wait()
    except BaseException:
        # interrupted (KeyboardInterrupt, a callback's exception): SIGTERM
        # makes fp8conv remove what it wrote, as it does for Slurm
        proc.terminate()
        proc.wait()
        raise
    finally:
        stdout.close()
        stderr.close()
    errors = []
    for line in messages:
        text = line[len("fp8conv: "):] if line.startswith("fp8conv: ") else line
        if text.startswith("warning: "):
            _log.warning("%s", text[len("warning: "):])
        elif text.startswith("note: "):
            _log.info("%s", text[len("note: "):])
        else:
            errors.append(text)
    if rc == 0 or (rc == 1 and command in _VERDICT):
        try:
            report = json.loads(b"".join(out).decode("utf-8"))
        except ValueError as e:
            raise Error("fp8conv %s: its report is not JSON (%s)" % (command, e), rc, argv)
        if not isinstance(report, dict):
            raise Error("fp8conv %s: its report is not a JSON object" % command, rc, argv)
        return report
    message = "\n".join(errors) or "fp8conv %s exited with status %d" % (command, rc)
    raise _ERRORS.get(rc, Error)(message, rc, argv)


def quantize(src: PathArg, dst: PathArg, *, progress: Optional[ProgressCallback] = None,
             **options: OptionValue) -> Dict[str, Any]:
    """Quantize a bf16/f16/f32 checkpoint (a directory, or one .safetensors
    file) into DST: ``fp8conv quantize [options] SRC DST``.

    Options (fp8conv(1), quantize): ``scheme`` (block, channel, tensor,
    mxfp8, nvfp4, mxfp4), ``format`` (hf-fp8, compressed-tensors, modelopt),
    ``block`` (``(128, 128)`` by default), ``scale_fmt``, ``mx_rounding``,
    ``profile`` (fp8conv-formats(5), PROFILES), ``ignore`` (a list of patterns: regular expressions searched in tensor
    names, or llm-compressor's ``"re:..."`` matched from the start of module
    names), ``strict`` (a pattern that matches nothing is an error),
    ``no_default_ignore``, ``like``, ``force``, ``dry_run``, ``part``/``finish``/``resume``,
    ``page_cache``, ``no_sync``, ``device``, ``jobs``.

    Returns the report: the plan per tensor (``"tensors"``: action, reason,
    scale), ``"warnings"`` (a layout no loader loads is a warning),
    ``"quantized"``, ``"kept"``, bytes in and out.  Raises ``Error``.
    """
    return _run("quantize", [src, dst], options, progress)


def convert(src: PathArg, dst: PathArg, *, progress: Optional[ProgressCallback] = None,
            **options: OptionValue) -> Dict[str, Any]:
    """Convert an FP8 (or packed FP4) checkpoint into another layout without
    a bf16 copy: ``fp8conv convert [options] SRC DST``.

    Options (fp8conv(1), convert): ``format``, ``scheme``, ``block``,
    ``scale_fmt``, ``mx_rounding``, ``profile`` (an engine's arithmetic for
    the weights re-quantized), ``exact`` (refuse any re-quantization),
    ``like``, ``kv_names``, ``force``, ``no_sync``, ``device``, ``jobs``.

    Returns the report: per weight the path it took (``"exact"`` or
    re-quantized) and what changed.  Raises ``Error``.
    """
    return _run("convert", [src, dst], options, progress)


def dequantize_for_export(src: PathArg, dst: PathArg, *,
                          progress: Optional[ProgressCallback] = None,
                          **options: OptionValue) -> Dict[str, Any]:
    """Turn an FP8 or packed-FP4 checkpoint back into bf16 (``dtype="f16"``,
    ``"f32"``): ``fp8conv dequantize-for-export [options] SRC DST``.

    Options (fp8conv(1), dequantize-for-export): ``dtype``, ``force``,
    ``part``/``finish``/``resume``, ``page_cache``, ``no_sync``, ``device``,
    ``jobs``.

    Returns the report: weights dequantized, scales dropped, bytes in and
    out.  Raises ``Error``.
    """
    return _run("dequantize-for-export", [src, dst], options, progress)


def verify(path: PathArg, *, progress: Optional[ProgressCallback] = None,
           **options: OptionValue) -> Dict[str, Any]:
    """Find what would break an FP8 checkpoint at load time, offline:
    ``fp8conv verify [options] PATH``.

    Options (fp8conv(1), verify): ``strict`` (warnings fail too),
    ``no_values`` (config and headers only), ``tp``, ``ep``, ``against`` (the
    source checkpoint), ``loader``, ``format``, ``scheme``, ``block``,
    ``like``, ``device``, ``jobs``.

    Returns the report; ``"ok"`` is the verdict (False where the command
    exits 1), ``"findings"`` each problem under its rule name, ``"loaders"``
    which loader loads it.  A problem found is not raised; ``Error`` is
    raised when verify cannot run (a usage error, an unreadable path, ...).
    """
    return _run("verify", [path], options, progress)


def inspect(path: PathArg, *, progress: Optional[ProgressCallback] = None,
            **options: OptionValue) -> Dict[str, Any]:
    """Validate a checkpoint (a directory, a .safetensors or .safetensors.zst
    file) and list its tensors: ``fp8conv inspect [options] PATH``.

    Options (fp8conv(1), inspect): ``hash`` (an XXH3-128 per tensor and one
    sharding-free digest; reads the data), ``device``, ``jobs``.

    Returns the report: ``"shards"``, ``"tensors"`` (name, dtype, shape,
    bytes, file), ``"summary"``.  A malformed checkpoint raises
    ``BadInputError``.
    """
    return _run("inspect", [path], options, progress)


def diff(a: PathArg, b: PathArg, *, progress: Optional[ProgressCallback] = None,
         **options: OptionValue) -> Dict[str, Any]:
    """Compare two checkpoints tensor by tensor, whatever their sharding:
    ``fp8conv diff [options] A B``.

    Options (fp8conv(1), diff): ``dequant`` (FP8 and FP4 weights compared by
    value), ``device``, ``jobs``.

    Returns the report; ``"identical"`` is the verdict (False where the
    command exits 1), ``"differences"`` each difference.  A difference is not
    raised; ``Error`` is raised when diff cannot run.
    """
    return _run("diff", [a, b], options, progress)


from ._tensor import QuantizedTensor, dequantize_tensor, quantize_tensor  # noqa: E402
from ._state import QuantizedStateDict, quantization_config, quantize_state_dict  # noqa: E402
