#!/usr/bin/env python3
"""Generate the malformed and edge-case safetensors fixtures.

Run from the repository root:

    python3 testdata/malformed/make_fixtures.py

Writes, deterministically (same bytes on every run), using the Python 3
standard library only:

  testdata/malformed/NAME.safetensors   one file per defect
  testdata/malformed/NAME/              malformed checkpoint directories
  testdata/accepted/NAME.safetensors    valid edge cases that must load
  testdata/malformed/MANIFEST.tsv       path<TAB>rule, one line per fixture

Every header is built by hand as bytes, never through the json module, so
that each file breaks exactly the one rule it is named after and is
otherwise valid: an 8-byte little-endian header length N, N bytes of
header (padded with spaces to a multiple of 8 unless the fixture is about
that), then a data buffer covered exactly by the tensors' data_offsets.
"""

import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MALFORMED = os.path.join(ROOT, "testdata", "malformed")
ACCEPTED = os.path.join(ROOT, "testdata", "accepted")

U64_MAX = 2**64 - 1

# Every dtype string of SPEC section 2, with its size in bits.
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "F64": 64, "I64": 64, "U64": 64,
    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6,
    "F6_E3M2": 6, "C64": 64, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
}

# The reference writer's layout order: this enum order, sorted descending.
DTYPE_ORDER = [
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3",
    "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16",
    "I32", "U32", "F32", "C64", "F64", "I64", "U64",
]

MANIFEST = []  # (path relative to the repository root, rule)


# --------------------------------------------------------------------------
# Building blocks

def b(text):
    """UTF-8 bytes of a str; bytes pass through unchanged."""
    return text if isinstance(text, bytes) else text.encode("utf-8")


def pad8(header):
    """Pad a header with spaces (0x20) to a multiple of 8, as the reference writer does."""
    return header + b" " * ((8 - len(header) % 8) % 8)


def container(header, data=b"", pad=True, n=None):
    """8-byte LE length, header, data. n overrides the stored header length."""
    header = b(header)
    if pad:
        header = pad8(header)
    if n is None:
        n = len(header)
    return struct.pack("<Q", n) + header + data


def entry(dtype, shape, offsets):
    """One compact tensor entry, keys in the reference writer's order."""
    shape_txt = ",".join(str(d) for d in shape)
    return '{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}' % (
        dtype, shape_txt, offsets[0], offsets[1])


def obj(*members):
    """A compact JSON object from already-encoded 'key:value' members."""
    return b"{" + b",".join(b(m) for m in members) + b"}"


def member(name, value):
    """'"name":value'; name may be bytes (for invalid UTF-8) or str."""
    return b'"' + b(name) + b'":' + b(value)


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def pattern(nbytes, seed=1):
    """Deterministic non-zero filler bytes."""
    return bytes(((i * 37 + seed * 11) & 0xFF) or 1 for i in range(nbytes))


META = member("__metadata__", '{"format":"pt"}')


def relpath(path):
    return os.path.relpath(path, ROOT).replace(os.sep, "/")


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content)


def bad(name, content, rule):
    path = os.path.join(MALFORMED, name + ".safetensors")
    write(path, content)
    MANIFEST.append((relpath(path), rule))


def good(name, content, what):
    path = os.path.join(ACCEPTED, name + ".safetensors")
    write(path, content)
    MANIFEST.append((relpath(path), "accepted: " + what))


def valid_file(tensors, metadata=True):
    """A valid file laid out as the reference writer would.

    tensors: list of (name, dtype, shape, data bytes). Returns the bytes.
    """
    order = sorted(tensors, key=lambda t: (-DTYPE_ORDER.index(t[1]), b(t[0])))
    members = [META] if metadata else []
    data = b""
    for name, dtype, shape, payload in order:
        members.append(member(name, entry(dtype, shape, (len(data), len(data) + len(payload)))))
        data += payload
    return container(obj(*members), data)


# --------------------------------------------------------------------------
# Malformed single files

def make_malformed():
    A = entry("F32", [2], (0, 8))
    DATA = f32(1.0, 2.0)
    ok_header = obj(META, member("a", A))

    # Framing.
    bad("too_short", b"\x08\x00\x00\x00\x00", "file shorter than 8 bytes")
    bad("header_length_zero", struct.pack("<Q", 0), "header length N is 0 (empty header is not JSON)")
    bad("header_too_large", container(ok_header, DATA, n=100_000_001),
        "header length N > 100000000")
    bad("header_beyond_eof", container(ok_header, DATA, n=len(pad8(ok_header)) + len(DATA) + 1),
        "8 + N beyond the end of the file")

    # Encoding.
    bad("header_not_utf8", container(obj(META, member(b"a\xffb", A)), DATA),
        "header not UTF-8 (0xFF byte in a tensor name)")
    bad("header_overlong_utf8", container(obj(META, member(b"a\xc0\xafb", A)), DATA),
        "header not UTF-8 (overlong encoding C0 AF in a tensor name)")
    bad("header_utf8_bom", container(b"\xef\xbb\xbf" + ok_header, DATA),
        "header not strict JSON (UTF-8 byte-order mark before {)")

    # JSON syntax (RFC 8259).
    bad("header_not_json", container(b"this is not json", b""), "header not JSON")
    bad("header_truncated_json", container('{"a": {"dtype":', b""), "header not JSON (truncated)")
    bad("header_trailing_comma", container(obj(META, member("a", A)) [:-1] + b",}", DATA),
        "header not strict JSON (trailing comma in object)")
    bad("header_trailing_garbage", container(ok_header + b"x", DATA),
        "header not strict JSON (non-whitespace after the top-level object)")
    bad("header_control_char_in_string", container(obj(META, member("a\x01b", A)), DATA),
        "header not strict JSON (raw control character 0x01 in a string)")
    bad("header_nul_escape_in_name", container(obj(META, member("a\\u0000b", A)), DATA),
        "tensor name contains NUL (\\u0000 escape)")
    bad("header_lone_surrogate_escape", container(obj(META, member("a\\ud800b", A)), DATA),
        "header not strict JSON (unpaired surrogate \\ud800 in a string)")
    bad("header_bad_whitespace",
        container(b'{"__metadata__":{"format":"pt"},\x0c"a":' + b(A) + b"}", DATA),
        "header not strict JSON (form feed 0x0C is not JSON whitespace)")
    bad("header_number_leading_zero",
        container(obj(META, member("a", '{"dtype":"F32","shape":[02],"data_offsets":[0,8]}')), DATA),
        "header not strict JSON (number with a leading zero: 02)")
    bad("header_number_plus_sign",
        container(obj(META, member("a", '{"dtype":"F32","shape":[+2],"data_offsets":[0,8]}')), DATA),
        "header not strict JSON (number with a plus sign: +2)")
    bad("header_single_quotes",
        container(obj(META, member("a", "{'dtype':\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}")), DATA),
        "header not strict JSON (single-quoted string)")
    bad("header_not_object", container("[1,2]", b""), "header not a JSON object")

    # Nesting deep enough to exhaust a recursive parser: 100000 '[' in a
    # shape, closed again, so the text is otherwise syntactically complete.
    depth = 100_000
    deep = '{"dtype":"F32","shape":' + "[" * depth + "]" * depth + ',"data_offsets":[0,0]}'
    bad("header_deep_nesting", container(obj(META, member("a", deep))),
        "header nested too deeply (100000 nested arrays in a shape)")

    # Tensor entries.
    bad("entry_not_object", container(obj(META, member("a", A), member("w", "5")), DATA),
        "tensor entry not an object")
    bad("entry_missing_dtype",
        container(obj(META, member("a", '{"shape":[2],"data_offsets":[0,8]}')), DATA),
        "tensor entry missing dtype")
    bad("entry_missing_shape",
        container(obj(META, member("a", '{"dtype":"F32","data_offsets":[0,8]}')), DATA),
        "tensor entry missing shape")
    bad("entry_missing_data_offsets",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2]}')), DATA),
        "tensor entry missing data_offsets")
    bad("entry_duplicate_field",
        container(obj(META, member("a", '{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}')), DATA),
        "tensor entry has a duplicate field (dtype twice)")

    # data_offsets.
    bad("data_offsets_three_values",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}')), DATA),
        "data_offsets not two integers (three values)")
    bad("data_offsets_not_integer",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2],"data_offsets":[0,1.5]}')), DATA),
        "data_offsets not integers (1.5)")
    bad("data_offsets_exponent",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2],"data_offsets":[0,8e0]}')), DATA),
        "data_offsets not integers (8e0, a float in exponent form)")
    bad("data_offsets_negative",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}')), DATA),
        "data_offsets negative")
    bad("data_offsets_string",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2],"data_offsets":["0","8"]}')), DATA),
        "data_offsets not integers (strings)")
    bad("data_offsets_exceed_u64",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2],"data_offsets":[0,%d]}' % (2**64 + 8))), DATA),
        "data_offsets integer out of u64 range (2^64+8, which wraps to 8)")

    # dtype.
    bad("unknown_dtype", container(obj(META, member("a", entry("BF17", [2], (0, 8)))), DATA),
        "unknown dtype (BF17)")
    bad("dtype_wrong_case", container(obj(META, member("a", entry("bf16", [4], (0, 8)))), DATA),
        "unknown dtype (bf16: dtype strings are case-sensitive)")
    bad("dtype_not_string",
        container(obj(META, member("a", '{"dtype":16,"shape":[4],"data_offsets":[0,8]}')), DATA),
        "dtype not a string (16)")

    # shape.
    bad("shape_negative_dimension",
        container(obj(META, member("a", '{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}')), DATA),
        "shape has a negative dimension")
    bad("shape_non_integer_dimension",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}')), DATA),
        "shape has a non-integer dimension (2.5)")
    bad("shape_float_integral_dimension",
        container(obj(META, member("a", '{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}')), DATA),
        "shape has a non-integer dimension (2.0, a float literal)")
    bad("shape_dimension_exceeds_u64",
        container(obj(META, member("a", '{"dtype":"F32","shape":[%d],"data_offsets":[0,8]}' % (2**64 + 2))), DATA),
        "shape dimension out of u64 range (2^64+2, which wraps to 2)")
    bad("shape_not_array",
        container(obj(META, member("a", '{"dtype":"F32","shape":2,"data_offsets":[0,8]}')), DATA),
        "shape not an array")

    # __metadata__.
    bad("metadata_not_object", container(obj(member("__metadata__", "5"), member("a", A)), DATA),
        "__metadata__ not an object")
    bad("metadata_value_not_string",
        container(obj(member("__metadata__", '{"format":1}'), member("a", A)), DATA),
        "__metadata__ value not a string")

    # Duplicate tensor names. Read as two tensors, each layout is valid.
    B4 = f32(3.0)
    bad("duplicate_tensor_name",
        container(obj(META, member("a", entry("F32", [1], (0, 4))), member("a", entry("F32", [1], (4, 8)))),
                  f32(1.0, 2.0)),
        "duplicate tensor name (two entries \"a\", [0,4] and [4,8])")
    bad("duplicate_tensor_name_identical",
        container(obj(META, member("a", entry("F32", [1], (0, 4))), member("a", entry("F32", [1], (0, 4)))),
                  B4),
        "duplicate tensor name (two identical entries \"a\" [0,4])")

    # Layout of the data buffer (after sorting by (begin, end)).
    bad("offsets_not_starting_at_zero",
        container(obj(META, member("a", entry("F32", [1], (4, 8)))), f32(0.0, 1.0)),
        "data_offsets: first tensor does not start at 0")
    bad("offsets_gap",
        container(obj(META, member("a", entry("F32", [1], (0, 4))), member("b", entry("F32", [1], (8, 12)))),
                  f32(1.0, 0.0, 2.0)),
        "data_offsets: gap between tensors")
    bad("overlapping_offsets",
        container(obj(META, member("a", entry("F32", [2], (0, 8))), member("b", entry("F32", [2], (4, 12)))),
                  f32(1.0, 2.0, 3.0)),
        "data_offsets overlap")
    bad("offsets_end_before_begin",
        container(obj(META, member("a", entry("F32", [1], (0, 4))), member("b", entry("F32", [1], (4, 0)))),
                  f32(1.0)),
        "data_offsets end < begin")

    # Sizes.
    bad("element_count_overflow",
        container(obj(META, member("a", entry("F32", [4294967296, 4294967296, 16], (0, 0))))),
        "element count overflows 64 bits (shape [2^32, 2^32, 16])")
    bad("element_bits_overflow",
        container(obj(META, member("a", entry("F32", [2**61], (0, 0))))),
        "element count x element bits overflows 64 bits (F32 shape [2^61])")
    bad("fractional_byte_size",
        container(obj(META, member("a", entry("F4", [3], (0, 2)))), b"\x21\x03"),
        "byte size not whole (F4 shape [3] is 12 bits)")
    bad("size_mismatch",
        container(obj(META, member("a", entry("F32", [2], (0, 4)))), f32(1.0)),
        "end - begin differs from the tensor's byte size (F32 [2] in 4 bytes)")
    bad("trailing_bytes", container(ok_header, DATA + b"\x00\x00\x00\x00"),
        "data buffer longer than the last tensor's end (trailing bytes)")
    bad("missing_bytes", container(ok_header, DATA[:6]),
        "file ends before the last tensor's end (missing bytes)")
    # end = 2^64-1: no shape can match it without its bit count overflowing
    # (8 * (2^64-1) > 2^64), so this one breaks two rules; the reference
    # reports the overflow. offset_end_beyond_eof isolates the missing bytes.
    bad("offset_huge",
        container(obj(META, member("a", entry("U8", [U64_MAX], (0, U64_MAX)))), b"\x00" * 8),
        "data_offsets end 2^64-1 beyond the end of the file (shape U8 [2^64-1]: its bit count also overflows 64 bits)")
    bad("offset_end_beyond_eof",
        container(obj(META, member("a", entry("U8", [2**61 - 1], (0, 2**61 - 1)))), b"\x00" * 8),
        "data_offsets end 2^61-1 beyond the end of the file (size matches shape U8 [2^61-1])")


# --------------------------------------------------------------------------
# Malformed checkpoint directories

CONFIG = b'{"architectures":["LlamaForCausalLM"],"model_type":"llama","torch_dtype":"float32"}\n'


def index_json(weight_map, total_size):
    items = ",".join('"%s":"%s"' % (k, v) for k, v in sorted(weight_map.items()))
    return b('{"metadata":{"total_size":%d},"weight_map":{%s}}\n' % (total_size, items))


def make_dir(name, files, rule):
    path = os.path.join(MALFORMED, name)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    for fname, content in sorted(files.items()):
        write(os.path.join(path, fname), content)
    MANIFEST.append((relpath(path) + "/", rule))


def make_malformed_dirs():
    S1 = "model-00001-of-00002.safetensors"
    S2 = "model-00002-of-00002.safetensors"
    IDX = "model.safetensors.index.json"
    a = ("a.weight", "F32", [2, 2], f32(1.0, 2.0, 3.0, 4.0))
    b_ = ("b.weight", "F32", [2], f32(5.0, 6.0))
    c = ("c.weight", "F32", [2], f32(7.0, 8.0))

    make_dir("dir_index_missing_tensor", {
        "config.json": CONFIG,
        S1: valid_file([a]),
        S2: valid_file([b_]),
        IDX: index_json({"a.weight": S1, "b.weight": S2, "c.weight": S2}, 24),
    }, "index maps a tensor (c.weight) that is not in its shard")

    make_dir("dir_unmapped_tensor", {
        "config.json": CONFIG,
        S1: valid_file([a]),
        S2: valid_file([b_, c]),
        IDX: index_json({"a.weight": S1, "b.weight": S2}, 32),
    }, "a shard holds a tensor (c.weight) the index does not map")

    make_dir("dir_index_missing_shard", {
        "config.json": CONFIG,
        S1: valid_file([a]),
        IDX: index_json({"a.weight": S1, "b.weight": S2}, 24),
    }, "index names a shard file that does not exist")

    make_dir("dir_duplicate_across_shards", {
        "config.json": CONFIG,
        S1: valid_file([a, b_]),
        S2: valid_file([a, c]),
    }, "no index; tensor a.weight is in two shards")

    make_dir("dir_index_not_json", {
        "config.json": CONFIG,
        S1: valid_file([a]),
        S2: valid_file([b_]),
        IDX: b'{"metadata":{"total_size":24},"weight_map":{"a.weight":"%s",\n' % b(S1),
    }, "index file is not JSON (truncated)")

    make_dir("dir_index_no_weight_map", {
        "config.json": CONFIG,
        S1: valid_file([a]),
        S2: valid_file([b_]),
        IDX: b'{"metadata":{"total_size":24}}\n',
    }, "index has no weight_map")

    overlapping = container(
        obj(META, member("b.weight", entry("F32", [2], (0, 8))), member("c.weight", entry("F32", [2], (4, 12)))),
        f32(5.0, 6.0, 7.0))
    make_dir("dir_shard_malformed", {
        "config.json": CONFIG,
        S1: valid_file([a]),
        S2: overlapping,
        IDX: index_json({"a.weight": S1, "b.weight": S2, "c.weight": S2}, 32),
    }, "index is valid but one shard has overlapping data_offsets")

    make_dir("dir_empty", {"config.json": CONFIG},
             "directory holds no .safetensors file (only config.json)")


# --------------------------------------------------------------------------
# Accepted edge cases

def make_accepted():
    good("zero_sized_tensor",
         container(obj(META,
                       member("a", entry("F32", [2], (0, 8))),
                       member("empty_1d", entry("F32", [0], (8, 8))),
                       member("empty_2d", entry("BF16", [4, 0], (8, 8)))),
                   f32(1.0, 2.0)),
         "zero-sized tensors (shape [0] and [4,0]) with empty offsets [8,8], two sharing them")

    good("scalar_0d", valid_file([("s", "F32", [], f32(3.5))]),
         "0-d tensor (shape []) of 4 bytes")

    good("metadata_null",
         container(obj(member("__metadata__", "null"), member("a", entry("F32", [2], (0, 8)))), f32(1.0, 2.0)),
         "__metadata__ is null")

    good("metadata_absent", valid_file([("a", "F32", [2], f32(1.0, 2.0))], metadata=False),
         "no __metadata__ key")

    good("leading_whitespace",
         container(b" \n\t\r " + obj(META, member("a", entry("F32", [2], (0, 8)))), f32(1.0, 2.0)),
         "JSON whitespace (space, LF, tab, CR) before the opening {")

    tensors = []
    for i, dtype in enumerate(DTYPE_ORDER):
        if dtype == "F4":
            shape = [2]
        elif dtype.startswith("F6_"):
            shape = [4]
        else:
            shape = [2]
        nbits = DTYPE_BITS[dtype]
        for d in shape:
            nbits *= d
        assert nbits % 8 == 0
        payload = b"\x01\x00" if dtype == "BOOL" else pattern(nbits // 8, i + 1)
        tensors.append(("t." + dtype.lower(), dtype, shape, payload))
    good("every_dtype", valid_file(tensors),
         "one tensor of each of the 22 dtypes (F4 [2], F6 [4], C64 8 bytes per element)")

    # Names as they appear in the JSON text (raw UTF-8 or escaped), and the
    # names they decode to, which fix the reference writer's layout order.
    names = [
        ("w.caf\u00e9", "w.caf\u00e9"),                       # raw 2-byte UTF-8
        ("\u6743\u91cd", "\u6743\u91cd"),                     # raw 3-byte UTF-8
        ("\U0001F600.raw", "\U0001F600.raw"),                 # raw 4-byte UTF-8
        ("w.\\u00e9t\\u00e9", "w.\u00e9t\u00e9"),             # escaped BMP
        ("\\ud83d\\ude00.esc", "\U0001F600.esc"),             # escaped surrogate pair
    ]
    names.sort(key=lambda n: n[1].encode("utf-8"))
    members = [META]
    data = b""
    for i, (text, _) in enumerate(names):
        members.append(member(text, entry("F32", [1], (4 * i, 4 * i + 4))))
        data += f32(float(i + 1))
    good("unicode_names", container(obj(*members), data),
         "tensor names with raw multi-byte UTF-8 and \\u00e9 / \\ud83d\\ude00 escapes")

    good("unknown_entry_field",
         container(obj(META, member("a", '{"dtype":"F32","shape":[2],"data_offsets":[0,8],"foo":1}')),
                   f32(1.0, 2.0)),
         "unknown extra key \"foo\" in a tensor entry is ignored")

    hdr = obj(META, member("ab", entry("F32", [2], (0, 8))))
    if len(hdr) % 8 == 0:
        hdr = obj(META, member("abc", entry("F32", [2], (0, 8))))
    assert len(hdr) % 8 != 0
    good("no_padding", container(hdr, f32(1.0, 2.0), pad=False),
         "header length N not a multiple of 8 (no padding)")

    good("empty_no_tensors", container(b"{}"), "header {} with no tensors and no data")


def main():
    os.makedirs(MALFORMED, exist_ok=True)
    os.makedirs(ACCEPTED, exist_ok=True)
    make_malformed()
    make_malformed_dirs()
    make_accepted()
    with open(os.path.join(MALFORMED, "MANIFEST.tsv"), "w", encoding="utf-8", newline="\n") as f:
        for path, rule in MANIFEST:
            assert "\t" not in rule and "\n" not in rule
            f.write("%s\t%s\n" % (path, rule))
    print("wrote %d fixtures" % len(MANIFEST), file=sys.stderr)


if __name__ == "__main__":
    main()
