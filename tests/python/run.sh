#!/usr/bin/env bash
# make check-python, after make wheel: the wheel in dist/ installed in a fresh
# venv (BUILD/venv-check-python: the wheel offline, it has no requirements;
# numpy and ml_dtypes for the tensor API's checks from PyPI), then
# tests/python/check_python.py run by that venv's Python against BUILD/fp8conv.
# usage: tests/python/run.sh BUILD WHEEL_VENV   (from the repository root)
set -euo pipefail
build=${1:-build}
wheel_venv=${2:-build/venv-wheel}
version=$(sed -n 's/^#define FP8CONV_VERSION "\([^"]*\)"$/\1/p' lib/fp8conv.h)
shopt -s nullglob
wheels=(dist/fp8conv-"$version"-*.whl)
[ ${#wheels[@]} = 1 ] || { echo "check-python: want one dist/fp8conv-$version-*.whl (make wheel), found ${#wheels[@]}" >&2; exit 1; }
venv=$build/venv-check-python
t0=$SECONDS
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-index "${wheels[0]}"
echo "check-python: ${wheels[0]} ($(du -k "${wheels[0]}" | cut -f1) KiB) installed in a fresh $venv in $((SECONDS - t0)) s"
# the tensor API's checks take numpy arrays (the wheel itself requires nothing)
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r tests/python/requirements-tensor.txt
"$venv/bin/python" tests/python/check_python.py --cli "$build/fp8conv" --venv "$venv" \
    --wheel "${wheels[0]}" --auditwheel "$wheel_venv/bin/auditwheel"
