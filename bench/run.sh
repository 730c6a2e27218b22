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

# ---------------------------------------------------------------- quantize
# A 1.0 GiB bf16 Llama-shaped checkpoint (generated once, kept in the build
# directory), quantized with every scheme; the floor is `cp -r` of the same
# directory in the same run.  Page cache warm for both; best of $REPS.
BUILD=${BUILD:-build}
REPS=${REPS:-5}
model=${BENCH_MODEL:-$BUILD/bench-model-1g}
if [ ! -f "$model/config.json" ]; then
    echo "== generating $model (once)"
    rm -rf "$model"
    "$BUILD/bench/make_model" "$model" 2
fi
in_bytes=$(cat "$model"/*.safetensors | wc -c)
cat "$model"/* >/dev/null

# runs "$@" REPS times; prints "best_wall_seconds max_rss_kib"
measure() {
    local best= rss=0
    for _ in $(seq "$REPS"); do
        rm -rf "$work/out"
        local stat
        stat=$("$BUILD/bench/runstat" "$@" 2>&1 >/dev/null | tail -1)
        local wall=${stat% *} kib=${stat#* }
        best=$(awk -v a="$best" -v b="$wall" 'BEGIN { print (a == "" || b < a) ? b : a }')
        rss=$((kib > rss ? kib : rss))
    done
    rm -rf "$work/out"
    echo "$best $rss"
}

echo
echo "== quantize: $model ($in_bytes bytes of tensors, $(nproc) cores, best of $REPS)"
# Two floors: cp -r leaves writeback to the kernel, as quantize --no-sync
# does; by default quantize fsyncs its output, so it is also compared with
# a copy followed by sync.
read -r t_cp _ < <(measure cp -r "$model" "$work/out")
read -r t_cps _ < <(measure sh -c 'cp -r "$1" "$2" && sync' sh "$model" "$work/out")
gbs() { awk -v b="$in_bytes" -v t="$1" 'BEGIN { printf "%.2f", b / t / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-52s %7s %8s %6s %9s %9s\n' "" "wall s" "in GB/s" "x cp" "x cp+sync" "peak RSS"
printf '%-52s %7.3f %8s %6s %9s %9s\n' "floor: cp -r" "$t_cp" "$(gbs "$t_cp")" 1.00 - -
printf '%-52s %7.3f %8s %6s %9s %9s\n' "floor: cp -r && sync" "$t_cps" "$(gbs "$t_cps")" - 1.00 -
for scheme in "block" "block --scale-fmt ue8m0" "channel" "tensor" "mxfp8"; do
    for sync in "" "--no-sync"; do
        # shellcheck disable=SC2086
        read -r t rss < <(measure "$BIN" quantize -q --progress never $sync --scheme $scheme \
            "$model" "$work/out")
        printf '%-52s %7.3f %8s %6s %9s %5d MiB\n' "quantize --scheme $scheme $sync" "$t" \
            "$(gbs "$t")" "$(ratio "$t" "$t_cp")" "$(ratio "$t" "$t_cps")" $((rss / 1024))
    done
done

# ---------------------------------------------------------------- dequantize, diff
# The block-quantized model back to bf16, and diff of the model with a copy
# of itself (reads both, hashes both), against the same cp -r floor.
rm -rf "$work/fp8"
"$BIN" quantize -q --no-sync "$model" "$work/fp8"
cp -r "$model" "$work/copy"
echo
echo "== dequantize-for-export and diff (floor: cp -r of the bf16 model, $t_cp s)"
for sync in "" "--no-sync"; do
    read -r t rss < <(measure "$BIN" dequantize-for-export -q $sync "$work/fp8" "$work/out")
    printf '%-52s %7.3f %8s %6s %9s %5d MiB\n' "dequantize-for-export $sync" "$t" \
        "$(gbs "$t")" "$(ratio "$t" "$t_cp")" "$(ratio "$t" "$t_cps")" $((rss / 1024))
done
read -r t rss < <(measure "$BIN" diff -q "$model" "$work/copy")
printf '%-52s %7.3f %8s %6s %9s %5d MiB\n' "diff (identical copies)" "$t" "$(gbs "$t")" \
    "$(ratio "$t" "$t_cp")" - $((rss / 1024))

# verify reads the FP8 checkpoint (0.5 GB): the floor here is cp -r of it
read -r t_cp8 _ < <(measure cp -r "$work/fp8" "$work/out")
echo
echo "== verify the block FP8 checkpoint (floor: cp -r of it, $t_cp8 s)"
for args in "" "--no-values --tp 8" "--against $model"; do
    # shellcheck disable=SC2086
    read -r t rss < <(measure "$BIN" verify -q $args "$work/fp8")
    printf '%-52s %7.3f %8s %6s %9s %5d MiB\n' "verify ${args/$model/SRC}" "$t" "-" \
        "$(ratio "$t" "$t_cp8")" - $((rss / 1024))
done
rm -rf "$work/fp8" "$work/copy"
