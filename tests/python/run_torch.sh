#!/usr/bin/env bash
# make check-python-torch (issue 46): the Python tensor and state-dict APIs on
# torch CPU tensors, in the loaders' venv (build/venv-loaders: its torch and
# numpy), without changing it: the wheel in dist/ and ml_dtypes (no deps: the
# venv's numpy) unpacked into BUILD/python-torch, put on PYTHONPATH, then
# tests/python/check_python.py --tensor-only --need-torch (torch missing is a
# failure, not "not run").
# usage: tests/python/run_torch.sh BUILD WHEEL_VENV   (from the repository root)
set -euo pipefail
build=${1:-build}
wheel_venv=${2:-build/venv-wheel}
py=build/venv-loaders/bin/python
version=$(sed -n 's/^#define FP8CONV_VERSION "\([^"]*\)"$/\1/p' lib/fp8conv.h)
shopt -s nullglob
wheels=(dist/fp8conv-"$version"-*.whl)
[ ${#wheels[@]} = 1 ] || { echo "check-python-torch: want one dist/fp8conv-$version-*.whl (make wheel), found ${#wheels[@]}" >&2; exit 1; }
dir=$build/python-torch
rm -rf "$dir"
"$py" -m pip install -q --disable-pip-version-check --no-deps --target "$dir" "${wheels[0]}" \
    "$(grep '^ml_dtypes==' tests/python/requirements-tensor.txt)"
echo "check-python-torch: ${wheels[0]} and ml_dtypes in $dir, on $("$py" -c 'import torch; print("torch", torch.__version__)')"
PYTHONPATH=$dir "$py" tests/python/check_python.py --cli "$build/fp8conv" --venv "$(dirname "$(dirname "$py")")" \
    --wheel "${wheels[0]}" --auditwheel "$wheel_venv/bin/auditwheel" --tensor-only --need-torch
