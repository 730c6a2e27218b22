#!/bin/sh
# Writer-golden oracle: regenerate testdata/golden/*.safetensors with the reference
# writer (PyPI safetensors, pinned in tests/oracle/requirements.txt) and compare
# them byte for byte with the committed goldens.
#
# Usage: tests/oracle/run.sh [OUTDIR]
#   OUTDIR: where to write the regenerated files (default: a temporary directory,
#   removed afterwards). The venv lives in build/venv-oracle (created if missing;
#   needs PyPI the first time only).
# Exit status: 0 all identical; 1 a difference or a missing/extra file; 2 setup error.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv="$root/build/venv-oracle"
req="$here/requirements.txt"
golden="$root/testdata/golden"
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
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" \
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

"$venv/bin/python" "$here/make_goldens.py" "$out" "$golden/cases.json" \
    || { echo "oracle: FAIL: make_goldens.py failed" >&2; exit 1; }

bad=0
n=0
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
    exit 1
fi
echo "oracle: OK: $n goldens byte-identical to safetensors $("$venv/bin/python" -c 'import safetensors; print(safetensors.__version__)')"
