#!/usr/bin/env bash
# make bench-peers: fp8conv quantize against the tools it replaces, on the
# same models and the same cp -r floor, in one run: llm-compressor's
# model_free_ptq and oneshot (FP8_BLOCK), and a DeepSeek-style torch script
# (bench/peers/torch_block.py).  Installs them once in build/venv-peers
# (pinned in bench/peers/requirements.txt; about 1 GB from PyPI) and puts
# the table into bench/RESULTS.md between the "make bench-peers" markers.
#
# Knobs: PEER_SIZES (model sizes in GB, "1 4"), REPS (best of, 3), BUILD, BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${BIN:-$BUILD/fp8conv}
REPS=${REPS:-3}
PEER_SIZES=${PEER_SIZES:-1 4}
. bench/common.sh

venv=$BUILD/venv-peers
req=bench/peers/requirements.txt
stamp=$venv/.fp8conv-ready
want=$(cat "$req" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "bench-peers: creating $venv (one-time, about 1 GB from PyPI)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip --disable-pip-version-check --no-cache-dir -q install -r "$req"
    echo "$want" >"$stamp"
fi
py=$venv/bin/python
describe_machine
out '%s\n' "peers: $("$py" -c 'import importlib.metadata as m; print(", ".join(f"{p} {m.version(p)}" for p in ("llmcompressor", "torch", "transformers", "compressed-tensors")))')"

for gb in $PEER_SIZES; do
    m=$(model_of "$gb")
    warm "$m"/*
    out '\n== quantize to FP8 block 128x128: %s (%d bytes of bf16 tensors)\n' "$m" "$(cat "$m"/*.safetensors | wc -c)"
    row_header
    floor "cp -r" cp -r "$m" "$work/out"
    t_cp=$floor_s
    row "fp8conv quantize --no-sync -j $(nproc)" "cp -r" "$t_cp" - \
        "$BIN" quantize -q --progress never --no-sync "$m" "$work/out"
    row "fp8conv quantize -j $(nproc) (fsync)" "cp -r" "$t_cp" - \
        "$BIN" quantize -q --progress never "$m" "$work/out"
    row "llm-compressor model_free_ptq" "cp -r" "$t_cp" - \
        "$py" bench/peers/llmc_model_free.py "$m" "$work/out"
    row "llm-compressor oneshot" "cp -r" "$t_cp" - "$py" bench/peers/llmc_oneshot.py "$m" "$work/out"
    row "torch script (DeepSeek style)" "cp -r" "$t_cp" - \
        "$py" bench/peers/torch_block.py "$m" "$work/out"
done
write_results "make bench-peers"
