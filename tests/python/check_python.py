#!/usr/bin/env python3
"""The wheel, installed (make check-python; tests/python/run.sh installs it
in a fresh venv and runs this with that venv's Python): the fp8conv command
on the venv's PATH, the bundled binary's libraries from the wheel, the
manylinux tag auditwheel gives it, and every function of the file API
against the CLI (BUILD/fp8conv, what make builds) on testdata/llama-tiny:
the same JSON report for the same command (but the run's "seconds" and the
directory each ran in), byte-identical outputs, verdicts returned and
failures raised as the Error subclass of their exit status; and README.md's
From Python block, run.

usage: check_python.py --cli BUILD/fp8conv --venv VENV --wheel WHEEL --auditwheel AUDITWHEEL
       (from the repository root)
"""
import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile

import fp8conv

ROOT = os.getcwd()
SAMPLE = os.path.join(ROOT, "testdata", "llama-tiny")
results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print("%s %s%s" % ("ok      " if ok else "FAILED  ", name,
                       "" if ok or not detail else "\n         " + str(detail)[:2000]))


def cli_json(cli, args, cwd):
    r = subprocess.run([cli] + args + ["--json"], cwd=cwd, capture_output=True, text=True)
    return r.returncode, (json.loads(r.stdout) if r.stdout else None), r.stderr


def normalized(report, root):
    """The report with the run's own: its time, and the directory it ran in."""
    if isinstance(report, dict):
        return {k: normalized(v, root) for k, v in report.items() if k != "seconds"}
    if isinstance(report, list):
        return [normalized(v, root) for v in report]
    if isinstance(report, str):
        return report.replace(root, "<dir>")
    return report


def tree(path):
    """Every file under path (or the file itself): relative name -> bytes."""
    if os.path.isfile(path):
        return {"": open(path, "rb").read()}
    out = {}
    for base, _, names in os.walk(path):
        for n in names:
            full = os.path.join(base, n)
            out[os.path.relpath(full, path)] = open(full, "rb").read()
    return out


def first_difference(a, b):
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            return name
    return None


def api_call(cli_words, operands, options):
    """The API function of the CLI's command (cli_words[0]: "dequantize-for-export" is
    fp8conv.dequantize_for_export) on the CLI's operands, with options."""
    return getattr(fp8conv, cli_words[0].replace("-", "_"))(*operands, **options)


def versus_cli(cli, label, opts, src, dst, api):
    """`cli quantize -q OPTS src dst` and api(): api()'s result when both
    succeed; else None, after checking that the API refuses what the CLI
    refuses, with its exit status (and that it refuses nothing else)."""
    r = subprocess.run([cli, "quantize", "-q"] + cli_args(opts) + [src, dst],
                       capture_output=True, text=True)
    try:
        got, err = api(), None
    except fp8conv.Error as e:
        got, err = None, e
    if r.returncode != 0:
        check("%s: refused as the CLI refuses it (exit %d)" % (label, r.returncode),
              err is not None and err.exit_code == r.returncode,
              "CLI: %s; API: %r" % (r.stderr.strip(), err))
        return None
    if err is not None:
        check(label, False, "the CLI quantized it, the API raised %r" % err)
    return got


def refuses(api, cases):
    """Each (label, call, exception class): call() raises that class, with a message."""
    for label, fn, exc in cases:
        try:
            fn()
            got = None
        except Exception as e:  # noqa: BLE001 - the class is what is checked
            got = e
        check("%s refuses %s: %s" % (api, label, type(got).__name__),
              isinstance(got, exc) and str(got), repr(got))


def check_install(args):
    bindir = os.path.join(args.venv, "bin")
    exe = os.path.join(bindir, "fp8conv")
    check("fp8conv is imported from the venv, not the checkout",
          os.path.realpath(fp8conv.__file__).startswith(os.path.realpath(args.venv)), fp8conv.__file__)
    want = subprocess.run([args.cli, "--version"], capture_output=True, text=True).stdout
    for argv in ([exe, "--version"], [sys.executable, "-m", "fp8conv", "--version"]):
        r = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, PATH=bindir))
        check("%s runs: %s" % (" ".join(os.path.basename(a) for a in argv), r.stdout.split("\n")[0]),
              r.returncode == 0 and r.stdout.split("\n")[0] == want.split("\n")[0]
              == "fp8conv %s" % fp8conv.__version__, r.stdout + r.stderr)
    r = subprocess.run([exe, "inspect", "-q", "/nonexistent"], capture_output=True, text=True)
    check("the fp8conv command keeps the binary's exit status and messages (4)",
          r.returncode == 4 and r.stderr.startswith("fp8conv: /nonexistent"), r)
    # every library the bundled programs load, but the C library's, is the
    # wheel's own copy (auditwheel's fp8conv.libs), so no Debian package is needed
    libs = os.path.join(os.path.dirname(os.path.dirname(fp8conv.binary_path())), "..", "fp8conv.libs")
    libs = os.path.realpath(libs)
    for prog in (fp8conv.binary_path(), os.path.join(os.path.dirname(fp8conv.__file__), "_lib",
                                                     "libfp8conv.so")):
        r = subprocess.run(["ldd", prog], capture_output=True, text=True)
        found = re.findall(r"^\s*(\S+) => (\S+)", r.stdout, re.M)
        system = [(n, p) for n, p in found if not re.match(
            r"(libc|libm|libpthread|libdl|librt|ld-linux[-\w]*)\.so", n)]
        outside = [(n, p) for n, p in system if not os.path.realpath(p).startswith(libs + os.sep)]
        names = sorted(re.sub(r"-[0-9a-f]{8}\.so.*", "", n) for n, _ in system)
        check("%s loads %s from the wheel" % (os.path.basename(prog), ", ".join(names)),
              r.returncode == 0 and names == ["libcjson", "libxxhash", "libzstd"] and not outside
              and "not found" not in r.stdout, r.stdout)
    # and it runs with this machine's copies of them unloadable (each covered
    # by an empty file in a mount namespace; needs root, as CI has)
    hide = []
    for lib in ("libcjson.so.1", "libzstd.so.1", "libxxhash.so.0"):
        r = subprocess.run(["ldd", args.cli], capture_output=True, text=True)
        m = re.search(r"%s => (\S+)" % re.escape(lib), r.stdout)
        if m:
            hide.append(os.path.realpath(m.group(1)))
    script = "".join("mount --bind /dev/null %s && " % p for p in hide)
    script += '! %s --version >/dev/null 2>&1 && %s inspect -q testdata/llama-tiny' % (args.cli, exe)
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0 and len(hide) == 3:
        r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True)
        check("with the machine's libcjson, libzstd and libxxhash unloadable, BUILD/fp8conv "
              "fails and the wheel's runs", r.returncode == 0, r.stdout + r.stderr)
    else:
        print("not run  the wheel's binary without the machine's libraries "
              "(unshare -m needs root)")
    r = subprocess.run([args.auditwheel, "show", args.wheel], capture_output=True, text=True,
                       env=dict(os.environ, PATH=os.path.dirname(args.auditwheel) + os.pathsep
                                + os.environ["PATH"]))
    tag = re.search(r'platform tag:\s*"(manylinux_\d+_\d+_\w+)"', r.stdout)
    check("auditwheel show: %s" % (tag.group(1) if tag else "no manylinux tag"),
          r.returncode == 0 and tag and tag.group(1) in os.path.basename(args.wheel), r.stdout + r.stderr)


def check_api(args, top):
    cli_dir, api_dir = os.path.join(top, "cli"), os.path.join(top, "api")
    os.makedirs(cli_dir)
    os.makedirs(api_dir)
    api = lambda p: os.path.join(api_dir, p)

    def same(name, cli_line, operands, options, rc=0, written=False):
        """`fp8conv CLI_LINE OPERANDS` in cli_dir against the API function of its
        command on the operands with options in api_dir; written: the last
        operand, the output, byte for byte."""
        words = cli_line.split()
        code, want, err = cli_json(args.cli, words + operands, cli_dir)
        os.chdir(api_dir)  # the same relative paths as the CLI's
        try:
            got = api_call(words, operands, options)
        except fp8conv.Error as e:
            check(name, False, "raised %s (%d): %s" % (type(e).__name__, e.exit_code, e))
            return None
        finally:
            os.chdir(ROOT)
        ok = code == rc and normalized(got, api_dir) == normalized(want, cli_dir)
        detail = "CLI exit %d %s\nAPI %s\nCLI %s" % (code, err, json.dumps(normalized(got, api_dir))[:800],
                                                   json.dumps(normalized(want, cli_dir))[:800])
        check(name + ": the CLI's JSON" + (" (exit %d, returned)" % rc if rc else ""), ok, detail)
        for out in operands[-1:] if written else ():
            a, b = tree(api(out)), tree(os.path.join(cli_dir, out))
            diff = first_difference(a, b)
            check("%s: %s byte-identical to the CLI's (%d files)" % (name, out, len(a)),
                  a and diff is None, "differs: %r" % diff)
        return got

    q = same("quantize(block=(32, 32))", "quantize --block 32x32", [SAMPLE, "q"], {"block": (32, 32)},
             written=True)
    check("quantize's report says what it did", q and q["quantized"] == 14 and q["block"] == [32, 32])
    same("quantize(block='32x32', jobs=1, ignore=[2 regexes])",
         r"quantize --block 32x32 --threads 1 --ignore down_proj --ignore layers\.1\.", [SAMPLE, "q-ign"],
         {"block": "32x32", "jobs": 1, "ignore": ["down_proj", r"layers\.1\."]}, written=True)
    same("quantize(dry_run=True, scheme='channel', format='compressed-tensors')",
         "quantize --dry-run --scheme channel --format compressed-tensors", [SAMPLE, "dry"],
         {"dry_run": True, "scheme": "channel", "format": "compressed-tensors", "force": False})
    check("quantize(dry_run=True) writes nothing", not os.path.exists(api("dry")))
    for part, cli_part in (((1, 2), "1/2"), ("2/2", "2/2")):
        same("quantize(part=%r)" % (part,), "quantize --block 32x32 --part " + cli_part, [SAMPLE, "qp"],
             {"block": (32, 32), "part": part})
    same("quantize(finish=True) after the parts", "quantize --block 32x32 --finish", [SAMPLE, "qp"],
         {"block": (32, 32), "finish": True}, written=True)
    check("the parts' output is the plain run's, byte for byte",
          first_difference(tree(api("qp")), tree(api("q"))) is None)
    v = same("verify", "verify", ["q"], {})
    check("verify's verdict: ok", v and v["ok"] is True)
    v = same("verify(no_values=True, tp=8)", "verify --no-values --tp 8", ["q"],
             {"no_values": True, "tp": 8}, rc=1)
    check("verify's verdict at TP=8 (the sample's 3 heads): not ok, in the dict",
          v and v["ok"] is False and v["errors"] > 0)
    same("inspect", "inspect", ["q"], {})
    same("inspect(hash=True)", "inspect --hash", ["q"], {"hash": True})
    d = same("diff (identical)", "diff", [SAMPLE, SAMPLE], {})
    check("diff's verdict: identical", d and d["identical"] is True)
    d = same("diff (bf16 against FP8)", "diff", [SAMPLE, "q"], {}, rc=1)
    check("diff's verdict: different, in the dict", d and d["identical"] is False and d["differences"])
    same("convert(format='compressed-tensors')", "convert --format compressed-tensors", ["q", "ct"],
         {"format": "compressed-tensors"}, written=True)
    same("convert(exact=True, block=[16, 16])", "convert --exact --block 16x16", ["q", "q16"],
         {"exact": True, "block": [16, 16]}, written=True)
    same("convert(scheme='channel', profile='vllm')", "convert --scheme channel --profile vllm",
         ["q", "qch"], {"scheme": "channel", "profile": "vllm"}, written=True)
    same("dequantize_for_export", "dequantize-for-export", ["q", "bf"], {}, written=True)
    same("dequantize_for_export(dtype='f32')", "dequantize-for-export --dtype f32", ["q", "f32"],
         {"dtype": "f32"}, written=True)
    d = same("diff(dequant=True) of the FP8 and its f32 export", "diff --dequant", ["q", "f32"],
             {"dequant": True})
    check("diff(dequant=True): a checkpoint equals its own export", d and d["identical"] is True)
    return api_dir


def check_errors(args, api_dir):
    malformed = os.path.abspath("testdata/malformed/overlapping_offsets.safetensors")
    cuda = "not compiled" in subprocess.run([fp8conv.binary_path(), "--version"],
                                            capture_output=True, text=True).stdout
    q, x = os.path.join(api_dir, "q"), os.path.join(api_dir, "x")
    cases = [  # (label, class, exit status, CLI command and options, operands, API options)
        ("an output that exists", fp8conv.UsageError, 2, "quantize --block 32x32", [SAMPLE, q],
         {"block": (32, 32)}),
        ("an option quantize does not take", fp8conv.UsageError, 2, "quantize --bogus-option=1",
         [SAMPLE, x], {"bogus_option": 1}),
        ("a bad option value", fp8conv.UsageError, 2, "quantize --block 32x0", [SAMPLE, x],
         {"block": (32, 0)}),
        ("a malformed file", fp8conv.BadInputError, 3, "inspect", [malformed], {}),
        ("an FP8 checkpoint to quantize", fp8conv.BadInputError, 3, "quantize", [q, x], {}),
        ("a path that does not exist", fp8conv.IOSystemError, 4, "verify", ["/nonexistent/model"], {}),
    ]
    if cuda:
        cases.append(("device='cuda' in a wheel built without CUDA", fp8conv.DeviceError, 5,
                      "dequantize-for-export --device cuda", [q, x], {"device": "cuda"}))
    for name, cls, code, cli_line, operands, options in cases:
        # --device cuda: the wheel's own binary (CPU only) is the CLI to match;
        # args.cli may be built with CUDA (CI has nvcc) and say another thing
        cli = fp8conv.binary_path() if code == 5 else args.cli
        r = subprocess.run([cli] + cli_line.split() + operands, capture_output=True, text=True)
        want = r.stderr.strip().replace("fp8conv: ", "", 1)
        try:
            api_call(cli_line.split(), operands, options)
            check("%s raises %s" % (name, cls.__name__), False, "nothing raised")
        except fp8conv.Error as e:
            check("%s raises %s (exit %d), the CLI's message" % (name, cls.__name__, code),
                  type(e) is cls and e.exit_code == code == r.returncode and e.message == want
                  and str(e) == want and isinstance(e, fp8conv.Error) and e.argv,
                  "%s %d %r; the CLI: %d %r" % (type(e).__name__, e.exit_code, e.message,
                                               r.returncode, want))
    check("no output left by the failures", not os.path.exists(os.path.join(api_dir, "x")))
    for bad in ({"json": True}, {"quiet": True}, {"progress": "always"}):
        try:
            fp8conv.inspect(SAMPLE, **bad)
            check("inspect(%s) is refused" % bad, False)
        except TypeError as e:
            check("inspect(%s) is refused: %s" % (list(bad)[0], e), True)


QUIET_RUN = r"""
import fp8conv, logging, sys
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append((record.levelname, record.getMessage()))
lines = []
fp8conv.quantize(sys.argv[1], sys.argv[2] + "/a", block=(32, 32), progress=lines.append)
fp8conv.quantize(sys.argv[1], sys.argv[2] + "/b")          # 128x128 on the sample: a warning
logging.getLogger("fp8conv").addHandler(Keep())
fp8conv.quantize(sys.argv[1], sys.argv[2] + "/c")
fp8conv.verify(sys.argv[2] + "/a", progress=lines.append)
assert lines and all("\r" not in l and "\n" not in l for l in lines), lines
assert lines[0].startswith("quantize: ") and any(l.startswith("quantize: done: ") for l in lines), lines
assert lines[-1].startswith("verify: done: "), lines
assert [l for l, _ in seen] == ["WARNING"] and "would not load" in seen[0][1], seen
"""


def check_quiet(top):
    r = subprocess.run([sys.executable, "-c", QUIET_RUN, SAMPLE, top], capture_output=True, text=True,
                       env=dict(os.environ, COLUMNS="200"))
    check("progress goes to the callback, line by line; warnings to the fp8conv logger; "
          "nothing to stdout or stderr", r.returncode == 0 and r.stdout == "" and r.stderr == "",
          "exit %d, stdout %r, stderr %r" % (r.returncode, r.stdout[-500:], r.stderr[-1500:]))


def check_readme(top):
    """README.md's From Python block, run verbatim where model/ is the sample."""
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text.split("### From Python", 1)[-1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    box = os.path.join(top, "readme")
    shutil.copytree(SAMPLE, os.path.join(box, "model"))
    for i, block in enumerate(blocks):
        r = subprocess.run([sys.executable, "-c", block], cwd=box, capture_output=True, text=True)
        check("README.md's From Python block %d runs: %s" % (i + 1, " / ".join(r.stdout.split("\n")[:3])),
              r.returncode == 0 and not r.stderr, r.stdout + r.stderr)
    check("README.md has a From Python block", blocks)


def check_readme_setup(args, top):
    """README.md's Set up block after "(below, From Python):", run verbatim
    in a folder whose dist/ holds the wheel just built (its venv is made
    there, not in the checkout)."""
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"\(below, From Python\):\n\n```\n(.*?)^```", text, re.M | re.S)
    check("README.md has the wheel's set-up block", block)
    if not block:
        return
    box = os.path.join(top, "setup")
    os.makedirs(os.path.join(box, "dist"))
    shutil.copy(args.wheel, os.path.join(box, "dist"))
    for line in block.group(1).splitlines():
        r = subprocess.run(line, shell=True, cwd=box, capture_output=True, text=True)
        check("README.md's set-up line runs: %s" % line, r.returncode == 0, r.stdout + r.stderr)


# ---------------------------------------------------------------- the tensor API

def st_write(path, tensors):
    """A .safetensors file of (name, dtype name, shape, bytes), as the format lays it out."""
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data)


def st_read(path):
    """name -> (dtype name, shape, bytes) of a .safetensors file."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: (v["dtype"], tuple(v["shape"]), raw[8 + n + v["data_offsets"][0]:
                                                   8 + n + v["data_offsets"][1]])
            for k, v in header.items()}


def tensor_cases(lib):
    """(label, rank-2 or -3 shape, API options, CLI args): every scheme in
    every format the format table has for it (and the pairs it refuses),
    shapes that are not multiples of a block."""
    schemes = [("block", (300, 200), {}), ("block", (300, 200), {"block": (32, 32)}),
               ("block", (260, 20000), {}),  # block rows wider than a job: cut by columns
               ("block", (300, 200), {"block": "32x32", "scale_fmt": "ue8m0"}),
               ("channel", (301, 200), {}), ("tensor", (301, 200), {}),
               ("mxfp8", (301, 96), {}), ("mxfp8", (301, 96), {"mx_rounding": "floor"}),
               ("nvfp4", (301, 96), {}), ("mxfp4", (301, 96), {}),
               ("mxfp4", (301, 96), {"mx_rounding": "floor"}),
               ("int4", (301, 256), {}), ("int4", (301, 96), {"group": 32})]
    for scheme, shape, opts in schemes:
        for fmt in ["hf-fp8", "compressed-tensors", "modelopt"]:
            yield scheme, shape, dict(opts, scheme=scheme, format=fmt)
    # stacked experts under the FP8 schemes (the FP4 ones take matrices)
    for scheme in ("block", "channel", "tensor", "mxfp8"):
        yield scheme, (3, 130, 96), {"scheme": scheme, "format": "compressed-tensors"}
        yield scheme, (3, 130, 96), {"scheme": scheme, "format": "hf-fp8"}
    # the engine profiles (fp8conv-formats(5), PROFILES), each on the schemes it defines
    for profile in ("vllm", "sglang", "prime-rl", "slime", "te", "transformers"):
        yield "block", (300, 200), {"scheme": "block", "format": "hf-fp8", "profile": profile}
    yield "tensor", (301, 200), {"scheme": "tensor", "format": "hf-fp8", "profile": "transformers"}
    yield "tensor", (301, 200), {"scheme": "tensor", "format": "hf-fp8", "profile": "vllm"}
    yield "channel", (301, 200), {"scheme": "channel", "format": "modelopt", "profile": "vllm"}
    for scheme, shape in (("block", (300, 200)), ("channel", (301, 200)), ("tensor", (301, 200)),
                          ("mxfp8", (301, 96))):  # bf16 scales, E8M0 for mxfp8
        yield scheme, shape, {"scheme": scheme, "format": "compressed-tensors",
                              "profile": "llm-compressor"}


def cli_args(opts):
    args = []
    for k, v in opts.items():
        if k == "block" and not isinstance(v, str):
            v = "%dx%d" % tuple(v)
        args.append("--%s=%s" % (k.replace("_", "-"), v))
    return args


def check_tensor(args, top):
    try:
        import numpy as np
        import ml_dtypes
    except ImportError as e:
        check("the tensor API's test needs numpy and ml_dtypes in the venv (tests/python/run.sh "
              "installs them)", False, e)
        return
    rng = np.random.default_rng(46)
    box = os.path.join(top, "tensor")
    passed_pairs = []
    for n, (scheme, shape, opts) in enumerate(tensor_cases(None)):
        label = "quantize_tensor %s %s" % (" ".join(cli_args(opts)), "x".join(map(str, shape)))
        name = ("model.layers.0.mlp.experts.down_proj" if len(shape) == 3
                else "model.layers.0.mlp.down_proj.weight")
        x = (rng.standard_normal(shape) * rng.uniform(0.01, 4)).astype(ml_dtypes.bfloat16)
        src, dst, deq = (os.path.join(box, "%d-%s" % (n, d)) for d in ("in", "out", "deq"))
        os.makedirs(src)
        st_write(os.path.join(src, "model.safetensors"), [(name, "BF16", shape, x.tobytes())])
        with open(os.path.join(src, "config.json"), "w") as f:
            json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, f)
        q = versus_cli(args.cli, label, opts, src, dst, lambda: fp8conv.quantize_tensor(x, **opts))
        if q is None:
            continue
        # names follow the module's; stacked experts' "weight" is the fused tensor's own name
        stem, last = name[:name.rindex(".") + 1], name[name.rindex(".") + 1:]
        out = st_read(os.path.join(dst, "model.safetensors"))
        parts = [(k, t) for k, t in zip(q.names, (q.codes, q.scale, q.scale2)) if k]
        bad = []
        for k, t in parts:
            dtype, oshape, raw = out.get(stem + k.replace("weight", last, 1), (None, None, None))
            if raw != t.tobytes() or oshape != t.shape:
                bad.append("%s: CLI %s %s, API %s %s, bytes %s" % (
                    k, dtype, oshape, t.dtype, t.shape, "same" if raw == t.tobytes() else "differ"))
        check("%s: %s byte-identical to the CLI's" % (label, ", ".join(k for k, _ in parts)),
              not bad and len(parts) >= 2, bad)
        for dt in ("bf16", "f32"):
            r = subprocess.run([args.cli, "dequantize-for-export", "-q", "--force", "--dtype=" + dt,
                                dst, deq], capture_output=True, text=True)
            y = fp8conv.dequantize_tensor(q, dtype=dt)
            got = st_read(os.path.join(deq, "model.safetensors")).get(name) if not r.returncode \
                else None
            check("%s: dequantize_tensor(dtype=%s) = dequantize-for-export's %s" % (label, dt, name),
                  got is not None and got[2] == y.tobytes() and got[1] == y.shape,
                  r.stderr if r.returncode else (got[:2] if got else None, y.shape))
        passed_pairs.append("%s/%s%s" % (scheme, q.format, "/" + opts["profile"]
                                         if "profile" in opts else ""))
        if n in (0, 25):  # out= (block; nvfp4 with its second level): the same arrays, bytes
            held = [t for t in (q.codes, q.scale, q.scale2) if t is not None]
            for t in held:
                t.view(np.uint8)[...] = 0xA5
            q3 = fp8conv.quantize_tensor(x, out=q, **opts)
            check("%s: out= writes the same bytes into the arrays it is given" % label,
                  q3 is q and all(a is b for a, b in zip(held, (q.codes, q.scale, q.scale2)))
                  and all(t.tobytes() == out[stem + k.replace("weight", last, 1)][2]
                          for k, t in parts))
        if n == 0:
            for threads in (1, 3):
                q2 = fp8conv.quantize_tensor(x, threads=threads, **opts)
                check("%s: the same bytes with threads=%d" % (label, threads),
                      q2.codes.tobytes() == q.codes.tobytes()
                      and q2.scale.tobytes() == q.scale.tobytes())
    print("         byte-checked against the CLI: %s" % " ".join(sorted(set(passed_pairs))))
    # bad input: each the Error subclass of the CLI's exit status for it
    m = np.ones((64, 64), dtype=ml_dtypes.bfloat16)
    refuses("quantize_tensor", [
        ("a rank-1 tensor", lambda: fp8conv.quantize_tensor(m[0]), fp8conv.UsageError),
        ("an int32 tensor", lambda: fp8conv.quantize_tensor(m.astype(np.int32)),
         fp8conv.UsageError),
        ("an unknown scheme", lambda: fp8conv.quantize_tensor(m, scheme="fp6"),
         fp8conv.UsageError),
        ("block= with scheme channel", lambda: fp8conv.quantize_tensor(
            m, scheme="channel", block=(32, 32)), fp8conv.UsageError),
        ("profile='vllm' with a scheme vllm does not define", lambda: fp8conv.quantize_tensor(
            m, scheme="mxfp8", profile="vllm"), fp8conv.UsageError),
        ("an unknown profile", lambda: fp8conv.quantize_tensor(m, profile="torch"),
         fp8conv.UsageError),
        ("mxfp8 with 48 columns", lambda: fp8conv.quantize_tensor(m[:, :48], scheme="mxfp8"),
         fp8conv.BadInputError),
        ("nvfp4 on f16 (its reference overflows f16)", lambda: fp8conv.quantize_tensor(
            m.astype(np.float16), scheme="nvfp4"), fp8conv.BadInputError),
        ("a NaN", lambda: fp8conv.quantize_tensor(
            np.where(np.arange(64 * 64).reshape(64, 64) == 77, np.nan, 1).astype(
                ml_dtypes.bfloat16)), fp8conv.BadInputError),
        ("an out= of another shape", lambda: fp8conv.quantize_tensor(
            m, out=fp8conv.quantize_tensor(m[:32])), fp8conv.UsageError),
        ("an out= of another scheme", lambda: fp8conv.quantize_tensor(
            m, out=fp8conv.quantize_tensor(m, scheme="nvfp4")), fp8conv.UsageError),
        ("a bad dtype= for dequantize_tensor", lambda: fp8conv.dequantize_tensor(
            fp8conv.quantize_tensor(m), dtype="f64"), fp8conv.UsageError),
    ])
    # a non-contiguous input is copied first: the same bytes as its copy
    big = (rng.standard_normal((128, 512))).astype(ml_dtypes.bfloat16)
    a, b = fp8conv.quantize_tensor(big[:, ::2]), fp8conv.quantize_tensor(big[:, ::2].copy())
    check("a non-contiguous input is quantized as its contiguous copy",
          a.codes.tobytes() == b.codes.tobytes() and a.scale.tobytes() == b.scale.tobytes())
    check_tensor_torch(x_np=big, np=np)


NEED_TORCH = False  # --need-torch (make check-python-torch, in the loaders' venv)


def check_tensor_torch(x_np, np):
    try:
        import torch
    except ImportError as e:
        if NEED_TORCH:
            check("the tensor API on torch tensors (--need-torch)", False, e)
        else:
            print("not run  the tensor API on torch tensors: torch is not installed in this venv")
        return
    t = torch.from_numpy(x_np.view(np.int16).copy()).view(torch.bfloat16)
    for opts in ({}, {"scheme": "mxfp8"}, {"scheme": "nvfp4"}):
        qt, qn = fp8conv.quantize_tensor(t, **opts), fp8conv.quantize_tensor(x_np, **opts)
        same = all((a is None and b is None) or
                   (a.contiguous().view(torch.uint8).numpy().tobytes() == b.tobytes()
                    and tuple(a.shape) == b.shape)
                   for a, b in zip((qt.codes, qt.scale, qt.scale2), (qn.codes, qn.scale, qn.scale2)))
        check("torch CPU %s: torch tensors, numpy's bytes" % (opts or "block"),
              same and isinstance(qt.codes, torch.Tensor))
        codes = qt.codes
        again = fp8conv.quantize_tensor(t, out=qt, **opts)
        check("torch CPU %s: out= writes into the torch tensors it is given" % (opts or "block"),
              again is qt and qt.codes is codes and
              qt.codes.contiguous().view(torch.uint8).numpy().tobytes() == qn.codes.tobytes())
        y = fp8conv.dequantize_tensor(qt)
        check("torch CPU %s: dequantize_tensor gives a torch bf16 tensor of numpy's bytes"
              % (opts or "block"), isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16 and
              y.view(torch.int16).numpy().tobytes() == fp8conv.dequantize_tensor(qn).tobytes())
    if torch.cuda.is_available():
        try:
            fp8conv.quantize_tensor(t.cuda())
            got = None
        except fp8conv.Error as e:
            got = e
        check("a CUDA tensor: DeviceError", isinstance(got, fp8conv.DeviceError), repr(got))


# ---------------------------------------------------------------- the state-dict API

def st_load(path, np):
    """Every tensor of a checkpoint (a directory's shards, or a file) as numpy
    arrays, read by st_read (safetensors.numpy, where a venv has it, has no
    numpy dtype for F8_E4M3 or BF16: ml_dtypes' are taken here)."""
    files = [path] if os.path.isfile(path) else sorted(
        os.path.join(path, n) for n in os.listdir(path) if n.endswith(".safetensors"))
    out = {}
    for f in files:
        for name, (dtype, shape, raw) in st_read(f).items():
            out[name] = np.frombuffer(raw, dtype=fp8conv._tensor._numpy_dtype(dtype)).reshape(shape)
    return out


def fused_experts_model(path, np, ml_dtypes, rng, in_out=False):
    """A Qwen3-MoE-like model whose experts are fused 3-D tensors [E, out, in]
    (transformers 5's layout), or a Llama-4-like one's [E, in, out] (in_out):
    FP4 schemes write them apart, one weight per expert (in_out: each the
    transpose of its slice); FP8 schemes quantize them as stacked experts."""
    h, i, e = 64, 96, 2
    shapes = {"model.embed_tokens.weight": (100, h), "lm_head.weight": (100, h),
              "model.norm.weight": (h,)}
    for n in range(2):
        p = "model.layers.%d." % n
        shapes.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                       p + "self_attn.q_proj.weight": (h, h), p + "self_attn.k_proj.weight": (32, h),
                       p + "self_attn.v_proj.weight": (32, h), p + "self_attn.o_proj.weight": (h, h),
                       p + "mlp.gate.weight": (e, h),
                       p + "mlp.experts.gate_up_proj": (e, h, 2 * i) if in_out else (e, 2 * i, h),
                       p + "mlp.experts.down_proj": (e, i, h) if in_out else (e, h, i)})
    tensors = []
    for k in sorted(shapes):
        x = (rng.standard_normal(shapes[k]) * rng.uniform(0.01, 2)).astype(ml_dtypes.bfloat16)
        tensors.append((k, "BF16", shapes[k], x.tobytes()))
    os.makedirs(path)
    st_write(os.path.join(path, "model.safetensors"), tensors)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"model_type": "llama4_text" if in_out else "qwen3_moe",
                   "architectures": ["Llama4ForCausalLM" if in_out else "Qwen3MoeForCausalLM"],
                   "hidden_size": h, "moe_intermediate_size": i, "num_experts": e,
                   "num_experts_per_tok": 1, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100}, f)


def layers_of(names):
    """The state dict's names by layer ("model.layers.N."), then the rest."""
    groups = {}
    for n in names:
        m = re.match(r"(.*?\.layers\.\d+\.)", n)
        groups.setdefault(m.group(1) if m else "", []).append(n)
    return [groups[k] for k in sorted(groups, key=lambda k: (k == "", k))]


def state_cases():
    """(scheme options, models): every scheme in the formats it has."""
    for scheme, opts in [("block", {}), ("block", {"block": (32, 32)}), ("channel", {}),
                         ("tensor", {}), ("mxfp8", {}), ("nvfp4", {}), ("mxfp4", {}),
                         ("int4", {"group": 32})]:
        for fmt in ("hf-fp8", "compressed-tensors", "modelopt"):
            yield dict(opts, scheme=scheme, format=fmt)
    # an engine profile's bytes (fp8conv-formats(5), PROFILES), as quantize --profile writes them
    yield {"scheme": "block", "format": "hf-fp8", "profile": "vllm"}
    yield {"scheme": "block", "format": "hf-fp8", "profile": "te"}


def check_state_dict(args, top):
    try:
        import numpy as np
        import ml_dtypes
    except ImportError as e:
        check("the state-dict API's test needs numpy and ml_dtypes", False, e)
        return
    rng = np.random.default_rng(4646)
    box = os.path.join(top, "state")
    fused, in_out = os.path.join(box, "fused-experts"), os.path.join(box, "fused-experts-in-out")
    fused_experts_model(fused, np, ml_dtypes, rng)
    fused_experts_model(in_out, np, ml_dtypes, rng, in_out=True)
    models = [SAMPLE, os.path.join(ROOT, "testdata", "deepseek-moe-tiny"), fused, in_out]
    checked = []
    for m, model in enumerate(models):
        sd = st_load(model, np)
        config = json.load(open(os.path.join(model, "config.json")))
        for n, opts in enumerate(state_cases()):
            label = "quantize_state_dict %s %s" % (os.path.basename(model), " ".join(cli_args(opts)))
            dst = os.path.join(box, "%d-%d" % (m, n))
            got = versus_cli(args.cli, label, opts, model, dst,
                             lambda: fp8conv.quantize_state_dict(sd, config=config, **opts))
            if got is None:
                continue
            want = st_load(dst, np)
            qc = json.load(open(os.path.join(dst, "config.json")))["quantization_config"]
            calls = [("whole", got)]
            layer = {}
            for names in layers_of(sd):
                part = fp8conv.quantize_state_dict({k: sd[k] for k in names}, config=config, **opts)
                overlap = set(layer) & set(part)
                layer.update(part)
                if overlap:
                    layer["<twice>"] = sorted(overlap)
            calls.append(("layer by layer", layer))
            for how, out in calls:
                bad = sorted(set(want) ^ set(out))[:4]
                for k in sorted(set(want) & set(out)):
                    a, b = want[k], out[k]
                    if (fp8conv._state._meta(a) != fp8conv._state._meta(b)
                            or a.tobytes() != b.tobytes()):
                        bad.append("%s: CLI %s, API %s%s" % (k, fp8conv._state._meta(a),
                                                             fp8conv._state._meta(b),
                                                             "" if a.tobytes() == b.tobytes()
                                                             else ", bytes differ"))
                check("%s (%s): the CLI's %d tensors, names, dtypes, shapes and bytes"
                      % (label, how, len(want)), not bad, bad[:6])
            check("%s: quantization_config = the CLI's config.json's" % label,
                  got.quantization_config == qc, (got.quantization_config, qc))
            whole = fp8conv.quantization_config(
                {k: (fp8conv._state._meta(v)) for k, v in sd.items()}, config=config, **opts)
            check("%s: quantization_config() of the names, dtypes and shapes = the CLI's" % label,
                  whole == qc, (whole, qc))
            if model in (fused, in_out) and opts["scheme"] in ("nvfp4", "mxfp4", "int4"):
                check("%s: fused experts written apart, one weight per expert%s" % (
                    label, " (each the transpose of its slice)" if model == in_out else ""),
                    "model.layers.1.mlp.experts.1.up_proj.weight_scale" in got, list(got)[:20])
            checked.append("%s/%s" % (opts["scheme"], got.format))
            shutil.rmtree(dst)
    print("         byte-checked against the CLI: %s" % " ".join(sorted(set(checked))))
    # nvfp4: the fused sets share their second level (their largest amax)
    sd = st_load(SAMPLE, np)
    p = "model.layers.0.self_attn."
    loud = dict(sd)  # k_proj 64 times larger: its amax is the set's
    loud[p + "k_proj.weight"] = (sd[p + "k_proj.weight"].astype(np.float32) * 64).astype(
        ml_dtypes.bfloat16)
    q = fp8conv.quantize_state_dict(loud, config=SAMPLE, scheme="nvfp4")
    g = [q[p + k + "_proj.weight_global_scale"].tobytes() for k in "qkv"]
    alone = [fp8conv.quantize_tensor(loud[p + k + "_proj.weight"], scheme="nvfp4").scale2.tobytes()
             for k in "qk"]
    check("nvfp4: q/k/v share one second level, k_proj's (the largest amax), not q_proj's own",
          g[0] == g[1] == g[2] == alone[1] != alone[0], (g, alone))
    # the options and inputs it refuses
    refuses("quantize_state_dict", [
        ("a config that is not JSON", lambda: fp8conv.quantize_state_dict(sd, config="/dev/null"),
         fp8conv.BadInputError),
        ("an FP8 tensor (already quantized)", lambda: fp8conv.quantize_state_dict(
            {"x.weight": np.zeros((4, 4), dtype=ml_dtypes.float8_e4m3fn)}), fp8conv.BadInputError),
        ("a model that has a quantization_config", lambda: fp8conv.quantize_state_dict(
            sd, config={"quantization_config": {"quant_method": "fp8"}}), fp8conv.BadInputError),
        ("a bad ignore pattern", lambda: fp8conv.quantize_state_dict(sd, ignore=["("]),
         fp8conv.UsageError),
        ("a list, not a dict", lambda: fp8conv.quantize_state_dict(
            sd, config=[1]), TypeError),
    ])
    check_state_dict_torch(sd, np)


def check_state_dict_torch(sd, np):
    try:
        import torch
    except ImportError as e:
        if NEED_TORCH:
            check("the state-dict API on torch tensors (--need-torch)", False, e)
        else:
            print("not run  the state-dict API on torch tensors: torch is not installed in this venv")
        return
    t = {k: torch.from_numpy(v.view(np.uint8).copy()).view(fp8conv._tensor._torch_dtype(
        torch, fp8conv._state._meta(v)[0])).reshape(v.shape) for k, v in sd.items()}
    for opts in ({}, {"scheme": "nvfp4"}):
        a = fp8conv.quantize_state_dict(t, config=SAMPLE, **opts)
        b = fp8conv.quantize_state_dict(sd, config=SAMPLE, **opts)
        check("torch CPU state dict %s: torch tensors, numpy's names and bytes" % (opts or "block"),
              list(a) == list(b) and all(isinstance(v, torch.Tensor) for v in a.values()) and
              all(a[k].contiguous().view(torch.uint8).numpy().tobytes() == b[k].tobytes()
                  for k in a))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--venv", required=True)
    ap.add_argument("--wheel", required=True)
    ap.add_argument("--auditwheel", required=True)
    ap.add_argument("--tensor-only", action="store_true", help="only the tensor API's checks")
    ap.add_argument("--state-only", action="store_true", help="only the state-dict API's checks")
    ap.add_argument("--need-torch", action="store_true",
                    help="torch must be importable: its checks fail rather than not run")
    args = ap.parse_args()
    global NEED_TORCH
    NEED_TORCH = args.need_torch
    args.cli = os.path.abspath(args.cli)
    top = tempfile.mkdtemp(prefix="fp8conv-python-")
    try:
        if args.state_only:
            check_state_dict(args, top)
            return finish()
        check_tensor(args, top)
        check_state_dict(args, top)
        if args.tensor_only:
            return finish()
        check_install(args)
        api_dir = check_api(args, top)
        check_errors(args, api_dir)
        check_quiet(top)
        check_readme(top)
        check_readme_setup(args, top)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return finish()


def finish():
    failed = results.count(False)
    print("check-python end to end: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
