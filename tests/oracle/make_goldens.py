#!/usr/bin/env python3
"""Write the writer goldens with the reference safetensors writer.

Usage: make_goldens.py OUTDIR [CASES_JSON]

Reads testdata/golden/cases.json (or CASES_JSON), builds every tensor's bytes from
the deterministic pattern below, and writes each case with the reference writer
(`safetensors.serialize_file` of the PyPI package pinned in requirements.txt,
whose Rust core does the serialization) into OUTDIR/<case file>.

Tensor bytes: byte j (0-based) = (seed * 131 + j * 29 + (j >> 8)) & 0xFF, for
j in [0, element_count * bits / 8).

The binding takes numpy/torch-style dtype names, not the safetensors header codes,
through `TensorSpec(dtype=, shape=, data_ptr=, data_len=)` (safetensors >= 0.8;
the `{"dtype","shape","data"}` dict form of <= 0.7 is gone). F4 is passed as
`float4_e2m1fn_x2` with the packed (storage) shape; the binding doubles the last
dimension, so the header shows the logical shape given in cases.json.
F6_E2M3 and F6_E3M2 have no binding name: the reference Python writer cannot
write them, so they are not allowed in cases.json.

As a cross-check, every file is also compared with an independent pure-Python
model of the writer rules of fp8conv-formats(5), CONTAINER (order by dtype enum descending then
name bytewise, compact JSON, __metadata__ first, spaces to a multiple of 8) and
with `safetensors.serialize` (in-memory). Any mismatch is an error: it means the
reference and fp8conv-formats(5) disagree.
"""

import ctypes
import json
import os
import sys

import safetensors
from safetensors import TensorSpec, serialize, serialize_file

# fp8conv-formats(5), CONTAINER: dtype codes, in the reference Rust enum order (ascending).
DTYPE_ORDER = [
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
    "C64", "F64", "I64", "U64",
]
BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "F64": 64, "I64": 64, "U64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
# Header code -> name the Python binding accepts (bindings/python/src/lib.rs parse_dtype_str).
BINDING_NAME = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64",
    "F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64",
    "C64": "complex64", "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn",
    "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn_x2",
    # F6_E2M3, F6_E3M2: not writable through the Python binding.
}


def fail(msg):
    sys.stderr.write("make_goldens: error: %s\n" % msg)
    sys.exit(1)


def nbytes(case_file, t):
    n = 1
    for d in t["shape"]:
        if not isinstance(d, int) or d < 0:
            fail("%s: tensor %r: bad dimension %r" % (case_file, t["name"], d))
        n *= d
    bits = n * BITS[t["dtype"]]
    if bits % 8:
        fail("%s: tensor %r: %d bits is not a whole number of bytes" % (case_file, t["name"], bits))
    return bits // 8


def pattern(seed, size):
    return bytes((seed * 131 + j * 29 + (j >> 8)) & 0xFF for j in range(size))


def json_str(s):
    """serde_json string escaping: \" \\ and \\b \\f \\n \\r \\t short forms, other
    control characters as \\u00xx (lower-case hex); everything else (including '/',
    DEL and non-ASCII) raw UTF-8."""
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = ['"']
    for ch in s:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def model_bytes(metadata, tensors):
    """Independent model of the writer of fp8conv-formats(5), CONTAINER (what fp8conv must do)."""
    order = sorted(
        tensors,
        key=lambda t: (-DTYPE_ORDER.index(t["dtype"]), t["name"].encode("utf-8")),
    )
    parts = []
    if metadata is not None:
        # The reference iterates a HashMap; only one key is deterministic. fp8conv-formats(5): sorted.
        items = sorted(metadata.items(), key=lambda kv: kv[0].encode("utf-8"))
        parts.append('"__metadata__":{' + ",".join(json_str(k) + ":" + json_str(v) for k, v in items) + "}")
    offset = 0
    buf = []
    for t in order:
        data = t["_data"]
        parts.append(
            "%s:{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%d,%d]}"
            % (json_str(t["name"]), t["dtype"], ",".join(str(d) for d in t["shape"]), offset, offset + len(data))
        )
        offset += len(data)
        buf.append(data)
    header = ("{" + ",".join(parts) + "}").encode("utf-8")
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + b"".join(buf)


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: make_goldens.py OUTDIR [CASES_JSON]\n")
        sys.exit(2)
    outdir = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    cases_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(here, "..", "..", "testdata", "golden", "cases.json")
    with open(cases_path, "rb") as f:
        cases = json.loads(f.read().decode("utf-8"))
    os.makedirs(outdir, exist_ok=True)
    print("reference writer: safetensors %s (%s)" % (safetensors.__version__, os.path.dirname(safetensors.__file__)))

    seen_files = set()
    for case in cases:
        fname = case["file"]
        if "/" in fname or not fname.endswith(".safetensors") or fname in seen_files:
            fail("bad or duplicate case file name %r" % fname)
        seen_files.add(fname)
        metadata = case["metadata"]
        if metadata is not None:
            if len(metadata) > 1:
                # The reference keeps __metadata__ in a Rust std HashMap (random order per
                # process): more than one key would make the golden non-deterministic.
                fail("%s: metadata has %d keys; the reference writer orders them randomly "
                     "(HashMap), so only one key is allowed" % (fname, len(metadata)))
            for k, v in metadata.items():
                if not isinstance(k, str) or not isinstance(v, str):
                    fail("%s: metadata must map strings to strings" % fname)
        names = set()
        keep_alive = []
        specs = {}
        for t in case["tensors"]:
            name, dtype, shape = t["name"], t["dtype"], t["shape"]
            if name in names:
                fail("%s: duplicate tensor name %r" % (fname, name))
            names.add(name)
            if dtype not in BITS:
                fail("%s: tensor %r: unknown dtype %r" % (fname, name, dtype))
            if dtype not in BINDING_NAME:
                fail("%s: tensor %r: dtype %s cannot be written by the reference Python writer" % (fname, name, dtype))
            size = nbytes(fname, t)
            data = pattern(t["seed"], size)
            t["_data"] = data
            cbuf = ctypes.create_string_buffer(data, max(size, 1))  # never a NULL/dangling pointer
            keep_alive.append(cbuf)
            spec_shape = list(shape)
            if dtype == "F4":
                if not shape or shape[-1] % 2:
                    fail("%s: tensor %r: F4 needs an even last dimension" % (fname, name))
                spec_shape[-1] //= 2  # binding takes the packed shape and doubles it back
            specs[name] = TensorSpec(dtype=BINDING_NAME[dtype], shape=spec_shape,
                                     data_ptr=ctypes.addressof(cbuf), data_len=size)
            if list(specs[name].shape) != list(shape) or specs[name].dtype != dtype:
                fail("%s: tensor %r: binding maps it to %s %r" % (fname, name, specs[name].dtype, specs[name].shape))

        out = os.path.join(outdir, fname)
        if os.path.exists(out):
            os.remove(out)
        serialize_file(specs, out, metadata=metadata)
        os.chmod(out, 0o644)  # safetensors >= 0.8 writes through a 0600 temp file
        with open(out, "rb") as f:
            got = f.read()
        mem = bytes(serialize(specs, metadata=metadata))
        if mem != got:
            fail("%s: serialize() and serialize_file() disagree" % fname)
        want = model_bytes(metadata, case["tensors"])
        if want != got:
            n = int.from_bytes(got[:8], "little")
            fail("%s: reference output differs from the model of fp8conv-formats(5), CONTAINER\n  reference header: %r\n  model header:     %r"
                 % (fname, got[8:8 + n], want[8:8 + int.from_bytes(want[:8], 'little')]))
        n = int.from_bytes(got[:8], "little")
        pad = len(got[8:8 + n]) - len(got[8:8 + n].rstrip(b" "))
        print("  %-34s %6d bytes  header %5d  pad %d  tensors %d"
              % (fname, len(got), n, pad, len(case["tensors"])))
        del keep_alive
    print("wrote %d files into %s" % (len(cases), outdir))


if __name__ == "__main__":
    main()
