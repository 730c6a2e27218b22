#!/usr/bin/env python3
"""The layers of lib/ (README.md, "Layout"), checked.

lib/ has five folders, each a layer that uses only itself and the layers
below it (STYLE.md, as zstd's DAG):

    common   the element, scheme and dtype rows, bit-exact math, status, text
    io       compressed files, safetensors, checkpoints, outputs, --part records
    compute  the numerics (references and fast paths), the job engine, CUDA
    layout   the format table, release families, parallelism, --like
    ops      quantize, dequantize, convert, diff, hash, verify

io and compute stand side by side on common and never see each other.
lib/fp8conv.h, the public API, is below them all.  Checked here:
  1. every #include "..." in lib/ names a header of its own folder or of a
     layer below ("layer/name.h", or "fp8conv.h"); cli/ includes only the
     public API; kernels/ only common/;
  2. every source file's header is its own: lib/L/x.c's functions are
     declared in lib/L/x.h (or the public header), and every header but the
     shared ones (SHARED) has its source file;
  3. in the objects (nm): a file calls only files of its own folder or of a
     layer below, and no two files call each other, directly or round a
     cycle;
  4. rows, not branches: outside the codec and table files (ROW_FILES), at
     most PROXY_CAP lines ask a proxy "is this FP4?" (levels == 2, run ==
     16, ->packed, nv ?, a scheme's name...) and at most LITERAL_CAP name
     an element type (FP8_ELEM_E4M3, FP8_DTYPE_F8_E4M3...): a scheme is one
     row, and what an operation needs of it is a slot of the row.

usage: check_layers.py BUILD    (BUILD/lib holds the objects: make's build dir)
"""
import os
import re
import subprocess
import sys

LAYERS = ["common", "io", "compute", "layout", "ops"]
# io and compute share a rank: neither is below the other, so neither uses the other.
RANK = {"common": 1, "io": 2, "compute": 2, "layout": 3, "ops": 4}


def below_or_same(user, used):
    """Whether folder `user` may use folder `used`: itself, or a lower rank."""
    return user == used or RANK[used] < RANK[user]
# Headers with no source file of their own name, and why.
SHARED = {
    "common/internal.h": "the prelude every lib/ file includes: status.h, text.h, constants",
    "common/fp8_math.h": "header-only: the conversions, shared with the CUDA kernels",
    "common/fp4_math.h": "header-only: FP4 quantization's rules, shared with the CUDA kernels",
    "common/xxh.h": "header-only: libxxhash's XXH3, through its run-time dispatch on x86-64",
    "compute/codec.h": "header-only: what the element codecs share (the band, the dequantize spec, load and store)",
    "compute/lanes.h": "header-only: the quality sums' loop, inlined in diff_cpu.c's and quant_cpu.c's clones",
    "ops/verify_passes.h": "what verify's files share (verify*.c declare their passes here), below them all",
}
# The files that may name an element type or a scheme: the rows themselves,
# the codecs (a reference and its fast paths, dispatching on the element),
# and the tables of formats and layouts, whose rows name their dtypes.
ROW_FILES = {
    "lib/fp8conv.h", "lib/common/types.h", "lib/common/types.c", "lib/common/fp8_math.h",
    "lib/common/fp4_math.h", "lib/compute/quant_ref.h", "lib/compute/quant_ref.c",
    "lib/compute/quant_cpu.h", "lib/compute/quant_cpu.c", "lib/compute/fp4_ref.h",
    "lib/compute/fp4_ref.c", "lib/compute/fp4_cpu.h", "lib/compute/fp4_cpu.c",
    "lib/compute/diff_ref.c", "lib/compute/diff_cpu.c", "lib/compute/gpu.c",
    "lib/compute/int4_ref.h", "lib/compute/int4_ref.c", "lib/compute/codec.h",
    "lib/layout/formats.c", "lib/layout/fp4.c",
}
PROXY = re.compile(r"levels\s*[=!<>]=?\s*[12]\b|\brun\s*==\s*(16|32)\b|[.>]packed\b|scheme_is_fp4"
                   r"|\bnv\s*\?|->fp4\b|\bfp4\s*\?|FP8_SCHEME_(NVFP4|MXFP4|INT4)\b")
LITERAL = re.compile(r"FP8_DTYPE_F8_E4M3\b|FP8_DTYPE_F8_E8M0\b|FP8_ELEM_(E4M3|E2M1|E8M0|I4)\b")
# Issue 42 asks 5 of each; the caps come down as the twins fold.
PROXY_CAP, LITERAL_CAP = 0, 0
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

checks = {}  # rule -> its failures: each rule is one check, over every file


def check(ok, what, key):
    key = key[0]
    checks.setdefault(key, [])
    if not ok:
        checks[key].append(what)
        print("check-layers: FAIL: " + what)


def includes(path):
    with open(path, encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def layer_of(header):
    """The layer of an include spelled "layer/name.h"; 0 for the public header."""
    if header == "fp8conv.h":
        return 0
    parts = header.split("/")
    if len(parts) == 2 and parts[0] in RANK and os.path.isfile(os.path.join("lib", header)):
        return RANK[parts[0]]
    return None


def lib_files():
    for layer in LAYERS:
        for name in sorted(os.listdir(os.path.join("lib", layer))):
            if name.endswith((".c", ".h")):
                yield layer, name


def check_includes():
    stray = [n for n in os.listdir("lib") if os.path.isfile(os.path.join("lib", n)) and n != "fp8conv.h"]
    check(not stray, "lib/ holds only fp8conv.h and the layer folders, not %s" % stray, ("tree", "lib"))
    folders = sorted(n for n in os.listdir("lib") if os.path.isdir(os.path.join("lib", n)))
    check(folders == sorted(LAYERS), "lib/'s folders are the layers %s, not %s" % (LAYERS, folders), ("tree", "lib"))
    for layer, name in lib_files():
        path = "lib/%s/%s" % (layer, name)
        for h in includes(path):
            if layer == "compute" and h == "../kernels/fp8_kernels.h":
                continue  # the CUDA backend over kernels/ (compute)
            r = layer_of(h)
            check(r is not None, '%s: #include "%s" names no header of lib/ as "layer/name.h"' % (path, h), ("include", path))
            if r is not None and r > 0:
                check(below_or_same(layer, h.split("/")[0]),
                      '%s (layer %s) includes "%s", a layer above it or beside it' % (path, layer, h), ("include", path))
    for name in sorted(os.listdir("cli")):
        for h in includes(os.path.join("cli", name)):
            check(h in ("fp8conv.h", "cli.h"), 'cli/%s includes "%s": cli/ sees the public API only' % (name, h), ("include", name))
    for name in sorted(os.listdir("kernels")):
        for h in includes(os.path.join("kernels", name)):
            check(h.startswith("common/") or os.path.isfile(os.path.join("kernels", h)),
                  'kernels/%s includes "%s": the kernels use common/ only' % (name, h), ("include", name))


def symbols(obj):
    """(defined, used) global function and data names of an object."""
    out = subprocess.run(["nm", "-g", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "TDRBVWi" and "." not in p[2]:
            defined.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            used.add(p[1])
    return defined, used


def check_objects(build):
    objs = {}
    for layer, name in lib_files():
        if name.endswith(".c"):
            o = os.path.join(build, "lib", layer, name[:-2] + ".o")
            check(os.path.isfile(o), "%s: no object (build it first)" % o, ("object", o))
            if os.path.isfile(o):
                objs["%s/%s" % (layer, name[:-2])] = symbols(o)
    with open("lib/fp8conv.h", encoding="utf-8") as f:
        public = f.read()
    owner = {}
    for unit, (defined, _) in objs.items():
        for s in defined:
            owner[s] = unit
    # 2. one header per source file
    for unit, (defined, _) in sorted(objs.items()):
        own = "lib/%s.h" % unit
        decl = open(own, encoding="utf-8").read() if os.path.isfile(own) else ""
        if os.path.basename(unit).startswith("verify"):
            decl += open("lib/ops/verify_passes.h", encoding="utf-8").read()
        for s in sorted(defined):
            pat = re.compile(r"\b%s\b" % re.escape(s))
            check(pat.search(decl) or pat.search(public),
                  "lib/%s.c: %s is declared neither in %s nor in lib/fp8conv.h" % (unit, s, own), ("declared", unit))
    for layer, name in lib_files():
        if name.endswith(".h"):
            h = "%s/%s" % (layer, name)
            check(h in SHARED or os.path.isfile("lib/%s.c" % h[:-2]),
                  "lib/%s has no lib/%s.c: one header per source file" % (h, h[:-2]), ("header", h))
    # 3. calls go down or across, never up, and round no cycle
    calls = {}
    for unit, (_, used) in objs.items():
        calls[unit] = sorted({owner[s] for s in used if s in owner and owner[s] != unit})
        for callee in calls[unit]:
            check(below_or_same(unit.split("/")[0], callee.split("/")[0]),
                  "lib/%s.c calls lib/%s.c, a layer above it or beside it" % (unit, callee), ("calls", unit))
    state = {}

    def visit(u, path):
        state[u] = 1
        for w in calls[u]:
            if state.get(w) == 1:
                cycle = path[path.index(w):] + [w]
                check(False, "a call cycle: " + " -> ".join("lib/%s.c" % c for c in cycle), ("cycles", "lib"))
            elif w not in state:
                visit(w, path + [w])
        state[u] = 2

    check(True, "", ("cycles", "lib"))
    for u in sorted(calls):
        if u not in state:
            visit(u, [u])


def check_rows():
    proxies, literals = [], []
    for top in ("lib", "cli", "kernels"):
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                if not name.endswith((".c", ".h", ".cu")) or path in ROW_FILES:
                    continue
                with open(path, encoding="utf-8") as f:
                    for no, line in enumerate(f, 1):
                        code = re.sub(r"/\*.*?\*/|//.*$", "", line)
                        if PROXY.search(code):
                            proxies.append("%s:%d: %s" % (path, no, line.strip()))
                        if LITERAL.search(code):
                            literals.append("%s:%d: %s" % (path, no, line.strip()))
    for what, sites, cap in (("proxy branches", proxies, PROXY_CAP), ("element literals", literals, LITERAL_CAP)):
        check(len(sites) <= cap, "%d %s outside the row files (at most %d):\n  %s"
              % (len(sites), what, cap, "\n  ".join(sites)), ("rows", what))
    print("check-layers: %d proxy branches (cap %d), %d element literals (cap %d) outside the row files"
          % (len(proxies), PROXY_CAP, len(literals), LITERAL_CAP))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    check_includes()
    check_objects(sys.argv[1])
    check_rows()
    failed = sum(1 for v in checks.values() if v)
    print("check-layers end to end: %d passed, %d failed (%s)"
          % (len(checks) - failed, failed, ", ".join(sorted(checks))))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
