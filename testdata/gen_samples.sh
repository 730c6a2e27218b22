#!/bin/sh
# Regenerate the sample checkpoints testdata/llama-tiny and testdata/deepseek-moe-tiny.
#
#   testdata/gen_samples.sh          # (re)write them in place
#   testdata/gen_samples.sh --check  # generate into a temporary directory and compare byte-for-byte
#                                    # with the committed files (exit 1 on any difference)
#
# Uses a virtualenv in build/venv-testdata with the pins of testdata/requirements.txt.
set -eu

cd "$(dirname "$0")/.."
VENV=build/venv-testdata

if [ ! -x "$VENV/bin/python" ]; then
    mkdir -p build
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r testdata/requirements.txt

case "${1:-}" in
"")
    "$VENV/bin/python" testdata/gen_samples.py testdata
    ;;
--check)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT INT TERM
    "$VENV/bin/python" testdata/gen_samples.py "$tmp"
    status=0
    for d in llama-tiny deepseek-moe-tiny; do
        diff -r "testdata/$d" "$tmp/$d" || status=1
    done
    if [ "$status" -eq 0 ]; then
        echo "gen_samples: testdata matches the generator byte-for-byte"
    else
        echo "gen_samples: testdata differs from the generator output" >&2
    fi
    exit "$status"
    ;;
*)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac
