#!/usr/bin/env bash
# Regenerates testdata/int4/goldens.bin with compressed-tensors' own code
# (tests/oracle/int4_oracle.py) and compares it with the committed file:
# the goldens tests/check_int4.c reads are what that code writes.
# Creates (or reuses) build/venv-int4 with the pins below: torch from PyPI
# (several GB with its CUDA libraries; the oracle runs on the CPU).
# usage: bash tests/oracle/int4_goldens.sh [--write]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${VENV_INT4:-$root/build/venv-int4}
pins=(torch==2.15.0 compressed-tensors==0.19.0 transformers==5.24.0 pydantic==2.14.4
      loguru==0.7.3 numpy==2.4.6 safetensors==0.8.0)
stamp=$venv/.fp8conv-ready
want=$(printf '%s\n' "${pins[@]}" | sha256sum | cut -c1-16)
if ! [ -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "int4: creating $venv (one-time)"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip --disable-pip-version-check --no-cache-dir -q install "${pins[@]}"
    echo "$want" > "$stamp"
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$venv/bin/python" "$root/tests/oracle/int4_oracle.py" "$out"
if [ "${1:-}" = --write ]; then
    cp "$out" "$root/testdata/int4/goldens.bin"
    echo "int4: wrote testdata/int4/goldens.bin"
elif cmp "$out" "$root/testdata/int4/goldens.bin"; then
    echo "int4: 1 passed, 0 failed (compressed-tensors writes testdata/int4/goldens.bin)"
else
    echo "int4: 0 passed, 1 failed (compressed-tensors' output differs from the goldens)"
    exit 1
fi
