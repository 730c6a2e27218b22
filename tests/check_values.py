#!/usr/bin/env python3
"""The value rules, across verify, convert and dequantize-for-export (issue 43 points 1 to 4).

One judgement of a scale's value per element type and scale kind (fp8_dequant_judge for weight
scales, kv_scale_judge for KV-cache scales) is made by the three commands alike, so they cannot
disagree. This driver proves it as a property: for each scale kind of the release copies in
testdata/releases, it plants one scale value of each class (every E8M0 byte class, every E4M3 group
scale class, NVFP4's and compressed-tensors' F32 second levels, an FP8 model's F32 scales, INT4's
BF16 group scales (a copy quantize makes of testdata/llama-tiny), KV-cache scales of each value, dtype and shape) in a scratch copy, with the group's codes as the release
has them (nonzero) or all zero, and checks

    verify exits 1 with an error of a value rule     <=>  dequantize-for-export exits 3
                                                     <=>  convert exits 3

(KV-cache scales: the export drops them, so verify <=> convert only; a scale that is no scale:
diff --dequant exits 3 too), that each refusal names the
planted tensor's module, that the rule agrees (an overflow is called one by all three; a scale that
is no scale is bad-scale, and convert's KV refusal carries verify's rule name), that nothing is
left behind by a refusal, and that the class's expected outcome holds (a check per finding of issue
43: each fails on the fp8conv before it), and that convert names config.json, not an option the
user never gave, when the config declares NVFP4 over FP8 weights (point 8).

usage: check_values.py BUILD    (BUILD/fp8conv is the binary: make's build dir)
Python 3 standard library only.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

RELEASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata", "releases")
VALUE_RULES = ("overflow", "bad-scale", "kv-scale-value", "kv-scale-shape")
WIDTH = {"F32": 4, "BF16": 2, "F16": 2, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E8M0": 1}


def read_st(path):
    """A safetensors file as (metadata, {name: [dtype, shape, bytes]}) in file order."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        a, b = v["data_offsets"]
        tensors[name] = [v["dtype"], v["shape"], bytearray(data[8 + n + a:8 + n + b])]
    return meta, tensors


def write_st(path, meta, tensors):
    header, at, blobs = {}, 0, []
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(blob)]}
        at += len(blob)
        blobs.append(bytes(blob))
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def find(directory, name):
    for fn in sorted(os.listdir(directory)):
        if fn.endswith(".safetensors"):
            path = os.path.join(directory, fn)
            meta, tensors = read_st(path)
            if name in tensors:
                return path, meta, tensors
    raise SystemExit("check-values: no tensor %s in %s" % (name, directory))


def f32(x):
    return struct.pack("<f", x)


def bf16(x):
    return struct.pack("<f", x)[2:]


# ---------------------------------------------------------------- mutations of one tensor

def set_byte(b):
    """Every scale byte of the tensor set to b (so that every group, with its nonzero codes, has it)."""
    def m(t):
        t[2][:] = bytes([b]) * len(t[2])
    return m


def set_first_byte(b):
    def m(t):
        t[2][0] = b
    return m


def set_value(pack, x):
    def m(t):
        w = len(pack(0.0))
        t[2][:] = pack(x) * (len(t[2]) // w)
    return m


def retype(dtype, shape, fill=b"\x01"):
    def m(t):
        n = WIDTH[dtype] * max(1, math.prod(shape))
        t[0], t[1], t[2][:] = dtype, shape, fill * n
    return m


# family -> (convert options or None when convert takes no such input)
CONVERT = {"deepseek-v4": [], "mxfp4-ct": ["--format", "modelopt"], "gpt-oss": None,
           "nvfp4-modelopt": ["--format", "compressed-tensors"],
           "nvfp4-ct": ["--format", "modelopt"],
           "deepseek-v3": ["--format", "compressed-tensors"],
           "redhat-fp8-dynamic": ["--format", "modelopt"]}

# inputs made by quantize here (no release copy holds them): an INT4 pack-quantized llama-tiny,
# whose BF16 group scales multiply codes -8..7 (convert takes no INT4 input)
MADE = {"int4": (os.path.join(RELEASES, "..", "llama-tiny"), ["--scheme", "int4", "--group", "32"])}
CONVERT["int4"] = None
INT4 = ("model.layers.0.mlp.down_proj.weight_packed", "model.layers.0.mlp.down_proj.weight_scale")
FP8CONV = None

DSV4_TRUNK = ("layers.0.attn.wq_a.weight", "layers.0.attn.wq_a.scale")
DSV4_EXPERT = ("layers.0.ffn.experts.0.w1.weight", "layers.0.ffn.experts.0.w1.scale")
MXCT = ("model.layers.0.mlp.down_proj.weight_packed", "model.layers.0.mlp.down_proj.weight_scale")
GPTOSS = ("model.layers.0.mlp.experts.down_proj_blocks",
          "model.layers.0.mlp.experts.down_proj_scales")
NVMO = ("model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.down_proj.weight_scale")
NVMO2 = ("model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.down_proj.weight_scale_2")
NVCT = ("model.layers.0.mlp.down_proj.weight_packed", "model.layers.0.mlp.down_proj.weight_scale")
NVCT2 = ("model.layers.0.mlp.down_proj.weight_packed",
         "model.layers.0.mlp.down_proj.weight_global_scale")
DSV3 = ("model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.o_proj.weight_scale_inv")
KV = (None, "model.layers.0.self_attn.k_scale")

# E8M0 byte classes: the smallest, 1.0, a large normal, the last two under which the largest code
# stays finite or not, 0xFE (2^127), 0xFF (NaN)
E8M0 = [(0x00, None), (0x7F, None), (0xF0, None), (0xFD, "overflow"), (0xFE, "overflow"),
        (0xFF, "bad-scale")]
# E4M3 group-scale classes of NVFP4: 0, the smallest subnormal, 1.0, 448, NaN, -0, -1, -448, -NaN
E4M3 = [(0x00, None), (0x01, None), (0x38, None), (0x7E, None), (0x7F, "bad-scale"),
        (0x80, "bad-scale"), (0xB8, "bad-scale"), (0xFE, "bad-scale"), (0xFF, "bad-scale")]
# F32 second levels: ModelOpt multiplies by weight_scale_2, compressed-tensors divides by
# weight_global_scale.  ModelOpt's 1e-45 and 1e-40 are good values (tiny weights), but the cast
# to compressed-tensors writes their reciprocal, past fp32: convert refuses that target alone
# (TARGET below), as fp8conv(1), convert says
SECOND = [(1.0, None, None), (3e38, "overflow", None), (1e-45, None, "overflow"),
          (1e-40, None, "overflow"), (0.0, "bad-scale", "bad-scale"),
          (-1.0, "bad-scale", "bad-scale"), (float("nan"), "bad-scale", "bad-scale"),
          (float("inf"), "bad-scale", "bad-scale")]
# an FP8 model's F32 block scales (codes up to 448): 3e38 and one whose 448 * s is finite in
# fp32 but rounds to inf in bf16, the model's dtype
FP8_F32 = [(1e-45, None), (3e38, "overflow"), (7.585e35, "overflow"), (-1.0, "bad-scale"),
           (0.0, "bad-scale"), (float("nan"), "bad-scale"), (float("inf"), "bad-scale")]
# KV-cache scales (BF16 [1] in the copy)
KV_VALUES = [(1.0, None), (float("nan"), "kv-scale-value"), (0.0, "kv-scale-value"),
             (-1.0, "kv-scale-value"), (float("inf"), "kv-scale-value")]
KV_TYPES = [("U8", [2]), ("F8_E4M3", [2]), ("BF16", [2]), ("F32", [1, 2])]


# labels whose input is clean but whose cast target cannot hold a value: convert alone refuses,
# exit 3, with this phrase
TARGET = {"weight_scale_2 1e-45": "is beyond fp32", "weight_scale_2 1e-40": "is beyond fp32"}


def cases():
    """(label, family, (weight, tensor), mutation, the expected rule or None)."""
    for b, rule in E8M0:
        yield "e8m0 0x%02x dsv4-trunk" % b, "deepseek-v4", DSV4_TRUNK, set_byte(b), rule
        yield "e8m0 0x%02x dsv4-expert" % b, "deepseek-v4", DSV4_EXPERT, set_byte(b), rule
        yield "e8m0 0x%02x mxfp4-ct" % b, "mxfp4-ct", MXCT, set_byte(b), rule
        yield "e8m0 0x%02x gpt-oss" % b, "gpt-oss", GPTOSS, set_byte(b), rule
    for b, rule in E4M3:
        yield "e4m3 0x%02x nvfp4-modelopt" % b, "nvfp4-modelopt", NVMO, set_first_byte(b), rule
        yield "e4m3 0x%02x nvfp4-ct" % b, "nvfp4-ct", NVCT, set_first_byte(b), rule
    for x, mo, ct in SECOND:
        yield "weight_scale_2 %g" % x, "nvfp4-modelopt", NVMO2, set_value(f32, x), mo
        yield "weight_global_scale %g" % x, "nvfp4-ct", NVCT2, set_value(f32, x), ct
    for x, rule in FP8_F32:
        yield "fp8 f32 scale %g" % x, "deepseek-v3", DSV3, set_value(f32, x), rule
    for x, rule in [(1.0, None), (3e38, "overflow"), (-1.0, "bad-scale"), (float("nan"), "bad-scale")]:
        yield "int4 bf16 scale %g" % x, "int4", INT4, set_value(bf16, x), rule
    for x, rule in KV_VALUES:
        yield "k_scale %g" % x, "redhat-fp8-dynamic", KV, set_value(bf16, x), rule
    for dtype, shape in KV_TYPES:
        yield "k_scale %s %s" % (dtype, shape), "redhat-fp8-dynamic", KV, retype(dtype, shape), \
            "kv-scale-shape"


def zero_codes(weight):
    """The weight's codes all zero: no product overflows, whatever the scale."""
    def m(t):
        t[2][:] = bytes(len(t[2]))
    return weight, m


# a scale whose products would overflow, over codes that are all zero: all three accept
ZERO_CODE_CASES = [("e8m0 0xfe over zero codes dsv4-trunk", "deepseek-v4", DSV4_TRUNK, set_byte(0xFE)),
                   ("e8m0 0xfe over zero codes mxfp4-ct", "mxfp4-ct", MXCT, set_byte(0xFE)),
                   ("weight_scale_2 3e38 over zero codes", "nvfp4-modelopt", NVMO2,
                    set_value(f32, 3e38))]


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def plant(tmp, family, name, mutation, zero=None):
    d = os.path.join(tmp, "in")
    shutil.rmtree(tmp, ignore_errors=True)
    if family in MADE:
        os.makedirs(tmp)
        rc, out = run([FP8CONV, "quantize", "-q"] + MADE[family][1] + [MADE[family][0], d])
        if rc:
            raise SystemExit("check-values: making %s: %s" % (family, out))
    else:
        shutil.copytree(os.path.join(RELEASES, family), d)
    for tensor, m in ([(name, mutation)] + ([zero] if zero else [])):
        path, meta, tensors = find(d, tensor)
        m(tensors[tensor])
        write_st(path, meta, tensors)
    return d


def one(fp8conv, tmp, label, family, names, mutation, want, zero=False):
    weight, tensor = names
    d = plant(tmp, family, tensor, mutation, zero_codes(weight) if zero else None)
    module = tensor.rsplit(".", 1)[0] + "." if weight is None else \
        os.path.commonprefix([weight, tensor])
    rv, out_v = run([fp8conv, "verify", d])
    errors = [ln for ln in out_v.splitlines() if ln.startswith("error [")]
    rules = sorted({ln.split("]")[0][7:] for ln in errors})
    re_, out_e = run([fp8conv, "dequantize-for-export", "-q", d, os.path.join(tmp, "exp")])
    opts = CONVERT[family]
    rc, out_c = run([fp8conv, "convert", "-q"] + opts + [d, os.path.join(tmp, "conv")]) \
        if opts is not None else (None, "")
    problems = []
    if label in TARGET:
        if rv != 0 or re_ != 0 or rc != 3 or TARGET[label] not in out_c:
            problems.append("verify %s, export %s, convert %s (want 0, 0, 3 '%s'): %s" % (
                rv, re_, rc, TARGET[label], out_c.strip()[:200]))
        rc = None
    elif want is None:
        if rv != 0 or re_ != 0 or (rc not in (None, 0)):
            problems.append("clean, but verify %s (%s), export %s, convert %s: %s" % (
                rv, ",".join(rules), re_, rc, (out_e.strip() or out_c.strip())[:200]))
    else:
        hit = [ln for ln in errors if ln.startswith("error [%s]" % want) and module in ln]
        if rv != 1 or not hit:
            problems.append("verify exit %s, rules %s: no [%s] naming %s" % (
                rv, rules, want, module))
        kv = want.startswith("kv-")
        if not kv and (re_ != 3 or module not in out_e):
            problems.append("export exit %s: %s" % (re_, out_e.strip()[:200]))
        if not kv and re_ == 3 and ("overflows" in out_e) != (want == "overflow"):
            problems.append("export's reason is not verify's %s: %s" % (want, out_e.strip()[:200]))
        if kv and re_ != 0:
            problems.append("export (which drops KV-cache scales) exit %s: %s" % (
                re_, out_e.strip()[:200]))
        if want == "bad-scale":  # diff --dequant has no value to compare either
            rd, out_d = run([fp8conv, "diff", "-q", "--dequant", os.path.join(RELEASES, family), d]) \
                if family not in MADE else (3, "")
            if rd != 3:
                problems.append("diff --dequant exit %s: %s" % (rd, out_d.strip()[:200]))
        if rc is not None and (rc != 3 or module not in out_c):
            problems.append("convert exit %s: %s" % (rc, out_c.strip()[:200]))
        if rc == 3 and not kv and ("overflows" in out_c) != (want == "overflow"):
            problems.append("convert's reason is not verify's %s: %s" % (want, out_c.strip()[:200]))
        if rc == 3 and kv and "(verify: %s)" % want not in out_c:
            problems.append("convert's message lacks verify's rule %s: %s" % (want, out_c.strip()))
        left = [n for n in os.listdir(tmp) if n != "in" and not (n == "exp" and re_ == 0)]
        if left:
            problems.append("a refusal left files behind: %s" % sorted(left))
    # the property itself, whatever the class
    if any(r in VALUE_RULES for r in rules) != (re_ == 3 or want is not None and want.startswith("kv-")):
        problems.append("verify's value rules %s but export exit %s" % (rules, re_))
    return problems


def declared_nvfp4(fp8conv, tmp):
    """issue 43 point 8: an FP8 checkpoint whose config.json declares NVFP4: convert (no option
    given) names config.json, exit 3, and no option the user never gave; --scheme block converts."""
    d = plant(tmp, "redhat-fp8-dynamic", KV[1], lambda t: None)
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(RELEASES, "nvfp4-ct", "config.json"), encoding="utf-8") as f:
        config["quantization_config"] = json.load(f)["quantization_config"]
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    rc, out = run([fp8conv, "convert", "-q", d, os.path.join(tmp, "conv")])
    problems = []
    if rc != 3 or "config.json: quantization_config declares nvfp4" not in out or "--scheme nvfp4" in out:
        problems.append("convert exit %s: %s" % (rc, out.strip()[:200]))
    if os.path.exists(os.path.join(tmp, "conv")):
        problems.append("a refusal left files behind")
    rc, out = run([fp8conv, "convert", "-q", "--scheme", "block", d, os.path.join(tmp, "ok")])
    if rc != 0:
        problems.append("convert --scheme block exit %s: %s" % (rc, out.strip()[:200]))
    return problems


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    global FP8CONV
    fp8conv = FP8CONV = os.path.join(sys.argv[1], "fp8conv")
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="fp8conv-values-") as top:
        tmp = os.path.join(top, "case")
        todo = [(label, fam, names, m, want, False) for label, fam, names, m, want in cases()]
        todo += [(label, fam, names, m, None, True) for label, fam, names, m in ZERO_CODE_CASES]
        for label, fam, names, m, want, zero in todo:
            problems = one(fp8conv, tmp, label, fam, names, m, want, zero)
            if problems:
                failed += 1
                print("FAIL %s (%s): %s" % (label, want or "clean", "; ".join(problems)))
            else:
                passed += 1
                print("ok   %s (%s)" % (label, want or "clean"))
        problems = declared_nvfp4(fp8conv, tmp)
        print(("FAIL %s: %s" % ("config declares nvfp4", "; ".join(problems))) if problems
              else "ok   config declares nvfp4 over FP8 weights")
        passed, failed = passed + (not problems), failed + bool(problems)
    print("check-values end to end: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
