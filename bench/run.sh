#!/usr/bin/env bash
# Benchmarks.  Times are reported with a floor measured in the same run
# (copying the same bytes), since the machines are shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/fp8conv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# best of N wall-clock runs of a command, in milliseconds
best_ms() {
    local n=$1 best=
    shift
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        local ms=$(((t1 - t0) / 1000))
        if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
    done
    echo "$best"
}

echo "== inspect: a header with 10,000 tensors (header-only scan)"
python3 bench/make_wide.py "$work/wide.safetensors" 10000
hdr=$(python3 -c 'import struct,sys; print(struct.unpack("<Q", open(sys.argv[1],"rb").read(8))[0])' "$work/wide.safetensors")
head -c $((8 + hdr)) "$work/wide.safetensors" >"$work/header-only"
size=$(stat -c %s "$work/wide.safetensors")
t_inspect=$(best_ms 5 "$BIN" inspect "$work/wide.safetensors")
t_json=$(best_ms 5 "$BIN" inspect --json "$work/wide.safetensors")
t_floor=$(best_ms 5 cat "$work/header-only")
ms() { awk -v us="$1" 'BEGIN { printf "%.1f", us / 1000 }'; }
printf 'file %d bytes, header %d bytes\n' "$size" "$hdr"
printf 'inspect           %8s ms\n' "$(ms "$t_inspect")"
printf 'inspect --json    %8s ms\n' "$(ms "$t_json")"
printf 'floor: cat header %8s ms   (inspect / floor = %s)\n' "$(ms "$t_floor")" \
    "$(awk -v a="$t_inspect" -v b="$t_floor" 'BEGIN { printf "%.1fx", a / b }')"
