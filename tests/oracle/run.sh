#!/bin/sh
# Oracles, all in the pinned venv build/venv-oracle (tests/oracle/requirements.txt):
#  1. writer goldens: regenerate testdata/golden/*.safetensors with the reference writer
#     (PyPI safetensors) and compare them byte for byte with the committed goldens;
#  2. quant-edge: regenerate testdata/quant-edge with testdata/gen_quant_edge.py and compare;
#  3. quantize goldens: run tests/oracle/quant_oracle.py on tests/oracle/quant_cases.json and
#     compare each testdata/golden/quant/<case>.json byte for byte with the committed one;
#  4. deepseek-fp8-tiny: regenerate testdata/deepseek-fp8-tiny with testdata/gen_deepseek_fp8.py
#     and compare;
#  5. dequantize goldens: run tests/oracle/dequant_oracle.py on tests/oracle/dequant_cases.json
#     and compare each testdata/golden/dequant/<case>.json byte for byte with the committed one;
#  6. verify fixtures: regenerate testdata/verify (FP8 checkpoints, clean and broken one way each,
#     and MANIFEST.tsv) with testdata/gen_verify_fixtures.py and compare every file, one level of
#     subdirectories deep, both ways;
#  7. only when $FP8CONV (default build/fp8conv) has `dequantize-for-export` (its --help exits 0):
#     run it on every dequant case (quant_case inputs made by `fp8conv quantize`), check that each
#     output loads (tests/oracle/dequant_load_check.py) and matches its committed golden
#     (tests/oracle/dequant_cli_check.py); otherwise print a SKIP line (not a failure);
#  8. likewise for `convert`: tests/oracle/convert_check.py compares its exact and value paths
#     with what dequant_oracle.py and quant_oracle.py compute from the input.
# (1-6 compare the oracles with the committed files, not with the fp8conv binary: the C
# tests compare fp8conv with the committed goldens.)
#
# Usage: tests/oracle/run.sh [--regenerate-quant] [--regenerate-dequant] [--regenerate-verify] [OUTDIR]
#   --regenerate-quant: first rewrite testdata/quant-edge and testdata/golden/quant/*.json in
#   place; --regenerate-dequant: first rewrite testdata/deepseek-fp8-tiny and
#   testdata/golden/dequant/*.json in place (after the quant ones when both are given);
#   --regenerate-verify: first remove and rewrite testdata/verify (after the others; then
#   check as usual). OUTDIR: where to write the regenerated files (default: a temporary
#   directory, removed afterwards). The venv is created if missing (needs PyPI the first time
#   only).
# Exit status: 0 all identical; 1 a difference or a missing/extra file; 2 setup error.
set -eu

regen_quant=0
regen_dequant=0
regen_verify=0
while [ $# -gt 0 ]; do
    case "$1" in
        --regenerate-quant) regen_quant=1; shift ;;
        --regenerate-dequant) regen_dequant=1; shift ;;
        --regenerate-verify) regen_verify=1; shift ;;
        *) break ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="$root/build/venv-oracle"
req="$here/requirements.txt"
golden="$root/testdata/golden"
qgolden="$golden/quant"
qedge="$root/testdata/quant-edge"
qcases="$here/quant_cases.json"
dgolden="$golden/dequant"
dsfp8="$root/testdata/deepseek-fp8-tiny"
dcases="$here/dequant_cases.json"
vfix="$root/testdata/verify"
fp8conv=${FP8CONV:-$root/build/fp8conv}
PYTHON=${PYTHON:-python3}

die() { echo "oracle: $*" >&2; exit 2; }

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (Debian: apt-get install python3)"

if [ ! -x "$venv/bin/python" ]; then
    if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
        die "'$PYTHON -m venv' is unavailable; install the Debian package python3-venv (apt-get install python3-venv)"
    fi
    echo "oracle: creating $venv"
    mkdir -p "$root/build"
    "$PYTHON" -m venv "$venv" || {
        rm -rf "$venv"
        die "'$PYTHON -m venv $venv' failed; on Debian install python3-venv (apt-get install python3-venv)"
    }
fi

# (Re)install the pins when requirements.txt changed since the last install.
stamp="$venv/.oracle-requirements"
if ! cmp -s "$req" "$stamp" 2>/dev/null; then
    echo "oracle: installing $(grep -v '^#' "$req" | tr '\n' ' ')"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r "$req" \
        || die "pip install -r $req failed (needs PyPI once; then the venv is reused offline)"
    cp "$req" "$stamp"
fi

if [ $# -ge 1 ]; then
    out=$1
    mkdir -p "$out"
else
    out=$(mktemp -d "${TMPDIR:-/tmp}/fp8conv-oracle.XXXXXX")
    trap 'rm -rf "$out"' EXIT INT TERM
fi

if [ "$regen_quant" -eq 1 ]; then
    echo "oracle: regenerating testdata/quant-edge and testdata/golden/quant in place"
    "$venv/bin/python" "$root/testdata/gen_quant_edge.py" "$qedge" \
        || { echo "oracle: FAIL: gen_quant_edge.py failed" >&2; exit 1; }
    rm -f "$qgolden"/*.json
    "$venv/bin/python" "$here/quant_oracle.py" "$qcases" "$qgolden" \
        || { echo "oracle: FAIL: quant_oracle.py failed" >&2; exit 1; }
fi
if [ "$regen_dequant" -eq 1 ]; then
    echo "oracle: regenerating testdata/deepseek-fp8-tiny and testdata/golden/dequant in place"
    "$venv/bin/python" "$root/testdata/gen_deepseek_fp8.py" "$dsfp8" \
        || { echo "oracle: FAIL: gen_deepseek_fp8.py failed" >&2; exit 1; }
    mkdir -p "$dgolden"
    rm -f "$dgolden"/*.json
    "$venv/bin/python" "$here/dequant_oracle.py" "$dcases" "$dgolden" \
        || { echo "oracle: FAIL: dequant_oracle.py failed" >&2; exit 1; }
fi
if [ "$regen_verify" -eq 1 ]; then
    echo "oracle: regenerating testdata/verify in place"
    rm -rf "$vfix"
    "$venv/bin/python" "$root/testdata/gen_verify_fixtures.py" "$vfix" \
        || { echo "oracle: FAIL: gen_verify_fixtures.py failed" >&2; exit 1; }
fi

status=0

# --- 1. writer goldens -------------------------------------------------------------------
bad=0
n=0
if ! "$venv/bin/python" "$here/make_goldens.py" "$out" "$golden/cases.json"; then
    echo "oracle: FAIL: make_goldens.py failed" >&2
    bad=1
fi
for f in "$golden"/*.safetensors; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    n=$((n + 1))
    if [ ! -e "$out/$b" ]; then
        echo "oracle: FAIL: $b is committed in testdata/golden but no case in cases.json produces it" >&2
        bad=1
    elif ! cmp "$out/$b" "$f" >&2; then
        echo "oracle: FAIL: testdata/golden/$b differs from the reference writer's output ($out/$b)" >&2
        bad=1
    fi
done
for f in "$out"/*.safetensors; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    if [ ! -e "$golden/$b" ]; then
        echo "oracle: FAIL: cases.json produces $b but testdata/golden/$b is not committed" >&2
        bad=1
    fi
done
[ "$n" -gt 0 ] || { echo "oracle: FAIL: no goldens in $golden" >&2; bad=1; }

if [ "$bad" -ne 0 ]; then
    echo "oracle: FAIL: writer goldens do not match the reference writer" >&2
    echo "oracle: (regenerate with: $venv/bin/python tests/oracle/make_goldens.py testdata/golden)" >&2
    status=1
else
    echo "oracle: OK: $n goldens byte-identical to safetensors $("$venv/bin/python" -c 'import safetensors; print(safetensors.__version__)')"
fi

# check_generated LABEL WANT GOT WHAT HINT COMMAND...: runs COMMAND, which writes the
# directory GOT, and compares it with the committed WANT: every file, subdirectories included,
# byte for byte and both ways (diff -r names what is missing, extra or different).
check_generated() {
    label=$1 want=$2 got=$3 what=$4 hint=$5
    shift 5
    mkdir -p "$got"
    if ! "$@"; then
        echo "oracle: FAIL: the $what failed" >&2
        status=1
    elif [ -z "$(ls -A "$want" 2>/dev/null)" ]; then
        echo "oracle: FAIL: nothing committed in ${want#"$root"/}" >&2
        status=1
    elif ! diff -r --brief "$want" "$got" >"$got.diff"; then
        sed "s|^|oracle: FAIL: |" "$got.diff" >&2
        echo "oracle: FAIL: $label does not match the $what" >&2
        echo "oracle: (regenerate with: $hint)" >&2
        status=1
    else
        echo "oracle: OK: $label byte-identical to the $what's output"
    fi
}

# --- 2-5. sample checkpoints and goldens of the quantize and dequantize oracles ----------
check_generated "testdata/quant-edge" "$qedge" "$out/quant-edge" \
    "generator testdata/gen_quant_edge.py" "tests/oracle/run.sh --regenerate-quant" \
    "$venv/bin/python" "$root/testdata/gen_quant_edge.py" "$out/quant-edge"
check_generated "$(ls "$qgolden"/*.json | wc -l | tr -d ' ') quantize goldens" "$qgolden" \
    "$out/quant" "quantize oracle tests/oracle/quant_oracle.py" \
    "tests/oracle/run.sh --regenerate-quant" \
    "$venv/bin/python" "$here/quant_oracle.py" "$qcases" "$out/quant"
check_generated "testdata/deepseek-fp8-tiny" "$dsfp8" "$out/deepseek-fp8-tiny" \
    "generator testdata/gen_deepseek_fp8.py" "tests/oracle/run.sh --regenerate-dequant" \
    "$venv/bin/python" "$root/testdata/gen_deepseek_fp8.py" "$out/deepseek-fp8-tiny"
check_generated "$(ls "$dgolden"/*.json | wc -l | tr -d ' ') dequantize goldens" "$dgolden" \
    "$out/dequant" "dequantize oracle tests/oracle/dequant_oracle.py" \
    "tests/oracle/run.sh --regenerate-dequant" \
    "$venv/bin/python" "$here/dequant_oracle.py" "$dcases" "$out/dequant"

# --- 6. verify fixtures --------------------------------------------------------------------
rm -rf "$out/verify"
check_generated "$(ls -d "$vfix"/*/ 2>/dev/null | wc -l | tr -d ' ') verify fixtures (testdata/verify)" "$vfix" \
    "$out/verify" "generator testdata/gen_verify_fixtures.py" \
    "tests/oracle/run.sh --regenerate-verify" \
    "$venv/bin/python" "$root/testdata/gen_verify_fixtures.py" "$out/verify"

# --- 7. fp8conv dequantize-for-export against the dequantize goldens ---------------------
if [ -x "$fp8conv" ] && "$fp8conv" dequantize-for-export --help >/dev/null 2>&1; then
    mkdir -p "$out/dequant-cli"
    if ! "$venv/bin/python" "$here/dequant_cli_check.py" "$fp8conv" "$dcases" "$dgolden" "$out/dequant-cli"; then
        status=1
    fi
else
    echo "oracle: SKIP: dequantize-for-export not built"
fi

# --- 8. fp8conv convert against the quantize and dequantize oracles ----------------------
if [ -x "$fp8conv" ] && "$fp8conv" convert --help >/dev/null 2>&1; then
    mkdir -p "$out/convert"
    if ! "$venv/bin/python" "$here/convert_check.py" "$fp8conv" "$out/convert"; then
        status=1
    fi
else
    echo "oracle: SKIP: convert not built"
fi

exit "$status"
