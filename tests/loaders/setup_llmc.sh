#!/usr/bin/env bash
# Installs (or reuses) llm-compressor's model_free_ptq, the FP4 reference quantizer of
# tests/loaders/fp4_quant_ref.py, in build/venv-loaders/llmc: the packages pinned in
# tests/loaders/requirements-llmc.txt, with --no-deps, in a directory of their own that only that
# script puts first on sys.path (llmcompressor pins a compressed-tensors other than vLLM's; the
# file says why each package is there). Run after tests/loaders/setup.sh; a rebuilt venv drops
# the directory with its stamp, and this installs it again. It leaves the venv's own stamp and
# packages alone, so adding it does not rebuild the venv (about 270 MB, under a minute).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${VENV_LOADERS:-$root/build/venv-loaders}
site=$venv/llmc
req=$here/requirements-llmc.txt
stamp=$site/.fp8conv-ready
want=$(cat "$req" "$0" | sha256sum | cut -c1-16)
[ -x "$venv/bin/python" ] || { echo "llmc: $venv is missing: run tests/loaders/setup.sh first" >&2; exit 2; }
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "llmc: $site ready"; exit 0
fi
t0=$SECONDS
echo "llmc: installing llm-compressor's model_free_ptq into $site"
rm -rf "$site"
"$venv/bin/python" -m pip --disable-pip-version-check --no-cache-dir -q install --no-deps \
    --target "$site" -r "$req"
PYTHONPATH=$site "$venv/bin/python" -c '
import llmcompressor, compressed_tensors, ml_dtypes
from llmcompressor.entrypoints.model_free import model_free_ptq
print("llmc: llmcompressor", llmcompressor.__version__, "compressed-tensors", compressed_tensors.__version__)' \
    2>&1 | grep -v "No accelerator available"
echo "$want" > "$stamp"
echo "llmc: ready in $((SECONDS - t0)) s, $(du -sm "$site" | cut -f1) MB"
