#!/usr/bin/env bash
# make bench-ab OLD=path/to/old/fp8conv: the commands a refactor touched, the
# old build against this one, each run interleaved with the other's and with
# a floor (cp -r of the same input), so that a slow spell of this shared
# machine falls on all three.  Prints, per command, the best of REPS for
# each binary, the ratio NEW/OLD and each against the floor; NEW slower than
# OLD by more than the runs' own spread shows as a ratio above 1 on every
# repetition of the table, not in one row.  Bytes are not compared here
# (tests/same_bytes.sh does that).
#
# ONLY='verify --against|diff' runs only the rows whose name it matches.
#
# Inputs (generated once, as make bench keeps them): the 1 GB bf16 model,
# the fused experts in both orientations (0.5 GB), the FP4 models of
# bench/make_fp4_model (about 1 GB of bf16 once exported).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
NEW=${NEW:-$BUILD/fp8conv}
OLD=${OLD:?set OLD to the fp8conv to compare against}
REPS=${REPS:-5}
BIN=$NEW
. bench/common.sh

# best_pair CMD_OLD CMD_NEW: REPS rounds of floor, OLD, NEW (sync before
# each, $work/out removed); prints "old_best new_best floor_best"
best_pair() {
    local fo="" fn="" ff="" t rss
    for _ in $(seq "$REPS"); do
        read -r t rss < <(run_once cp -r "$floor_in" "$work/out")
        ff=$(least "$ff" "$t")
        read -r t rss < <(run_once $1)
        fo=$(least "$fo" "$t")
        read -r t rss < <(run_once $2)
        fn=$(least "$fn" "$t")
    done
    echo "$fo $fn $ff"
}

# ab NAME ARGS...: fp8conv ARGS with each binary ($work/out is the output);
# with ONLY (an extended regex), only the rows whose NAME it matches
ab() {
    local name=$1 o n f
    shift
    if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then
        return 0
    fi
    read -r o n f < <(best_pair "$OLD $*" "$NEW $*")
    out '%-52s %7.3f %7.3f  %5s  %5s %5s\n' "$name" "$o" "$n" "$(ratio "$n" "$o")" \
        "$(ratio "$o" "$f")" "$(ratio "$n" "$f")"
}

header() {
    out '\n== %s (floor: cp -r of %s)\n' "$1" "$2"
    out '%-52s %7s %7s  %5s  %5s %5s\n' command old_s new_s new/old old/fl new/fl
}

q="-q --progress never --no-sync"
model=$(model_of 1)
for o in in-out out-in; do
    e=$BUILD/bench-experts-$o
    [ -f "$e/config.json" ] || "$BUILD/bench/make_model" "$e" experts "$o" >&2
done
for kind in gpt-oss nvfp4-modelopt nvfp4-ct deepseek-v4; do
    m=$BUILD/bench-fp4-$kind
    [ -f "$m/model.safetensors" ] || "$BUILD/bench/make_fp4_model" "$m" "$kind" >&2
done
"$OLD" quantize $q "$model" "$work/fp8"
"$OLD" quantize $q --scheme nvfp4 "$model" "$work/nvfp4"
"$OLD" quantize $q --scheme mxfp4 "$model" "$work/mxfp4"
sync
describe_machine
out 'OLD: %s\nNEW: %s\n' "$("$OLD" --version | head -1)" "$("$NEW" --version | head -1)"

floor_in=$model
warm "$model"/*
header "the 1 GB bf16 model" MODEL
for s in block channel tensor mxfp8 nvfp4 mxfp4; do
    ab "quantize --scheme $s" quantize $q --scheme $s "$model" "$work/out"
done
ab "verify --against MODEL FP8" verify -q --against "$model" "$work/fp8"
ab "verify --against MODEL NVFP4" verify -q --against "$model" "$work/nvfp4"
ab "diff --dequant FP8 MODEL" diff -q --dequant "$work/fp8" "$model"
ab "diff MODEL MODEL" diff -q "$model" "$model"
ab "verify FP8" verify -q "$work/fp8"
ab "verify NVFP4" verify -q "$work/nvfp4"
ab "inspect --hash FP8" inspect -q --hash "$work/fp8"
ab "convert FP8 --scheme mxfp8" convert $q --scheme mxfp8 "$work/fp8" "$work/out"
for o in in-out out-in; do
    floor_in=$BUILD/bench-experts-$o
    warm "$floor_in"/*
    header "fused experts $o" "the experts"
    for s in nvfp4 mxfp4; do
        ab "quantize --scheme $s experts $o" quantize $q --scheme $s "$floor_in" "$work/out"
    done
done
header "exports (floor: cp -r of the input)" INPUT
for src in fp8 nvfp4 mxfp4; do
    floor_in=$work/$src
    warm "$floor_in"/*
    ab "dequantize-for-export $src" dequantize-for-export $q "$floor_in" "$work/out"
done
for kind in gpt-oss nvfp4-modelopt nvfp4-ct; do
    floor_in=$BUILD/bench-fp4-$kind
    warm "$floor_in"/*
    ab "dequantize-for-export $kind" dequantize-for-export $q "$floor_in" "$work/out"
done
header "convert's casts (floor: cp -r of the input)" INPUT
floor_in=$BUILD/bench-fp4-deepseek-v4
warm "$floor_in"/*
ab "convert deepseek-v4 (to FP8 blocks)" convert $q "$floor_in" "$work/out"
floor_in=$BUILD/bench-fp4-nvfp4-modelopt
warm "$floor_in"/*
ab "convert nvfp4-modelopt --format compressed-tensors" convert $q --format compressed-tensors \
    "$floor_in" "$work/out"
