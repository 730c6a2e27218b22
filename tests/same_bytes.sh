#!/usr/bin/env bash
# tests/same_bytes.sh - proves that a refactor of fp8conv changed no output byte.
#
# usage: bash tests/same_bytes.sh OLD_FP8CONV NEW_FP8CONV [WORKDIR]
#        make check-same-bytes OLD=path/to/old/fp8conv     (NEW: $(BUILD)/fp8conv)
#
# Both binaries run the same few thousand commands on the same small inputs,
# each into its own tree (WORKDIR/old, WORKDIR/new); then every command's exit
# code, stdout and stderr and every file it wrote are compared, OLD against
# NEW.  A command is one check; it passes when all of that is the same.  One
# line per difference ("DIFF KIND/SUBJECT/LABEL: what"), then "same-bytes: N
# passed, M failed"; exit 1 if any failed (2: the script could not run).
#
# The commands (fp8conv(1)), each with --json where it has one:
#   quantize   every scheme (block with 128x128 and 32x32, float and ue8m0
#              scales; channel; tensor; mxfp8 rceil and floor; nvfp4; mxfp4)
#              x every format (the default, hf-fp8, compressed-tensors,
#              modelopt) of every bf16 input; a refusal is a result like any
#              other (its exit code and stderr compared); also --like of
#              every release copy, --dry-run, -j 1, 3 and 64, and option
#              pairs that do not exist (PROBES)
#   convert    every release copy and FP8/FP4 input, every layout quantize
#              wrote of llama-tiny and a few of the other inputs', into every
#              scheme x format that exists (the others: refused, once each),
#              with --exact where a path can be exact; packed FP4: its casts
#   dequantize-for-export  of every FP8/FP4 output of quantize, release copy
#              and input: --dtype bf16, f16, f32 (and of a bf16 input: refused)
#   diff, diff --dequant   output against its input, export against its
#              source, convert output against its source, each source against
#              the one before it (pairs), the NVFP4 copies that must agree
#   verify     every quantize output (and --against its input), convert
#              output, release copy and FP8/FP4 input; --like the releases
#   inspect --hash   every quantize output, bf16 export, release copy, input
#   and a text report (no --json) of each command on the samples.
# About 3,800 commands per binary: 1.5 to 3 minutes on 2 shared cores, most
# of it in starting processes (the inputs are small).
#
# Inputs, built once per run into WORKDIR/in, shared by both trees and made
# read-only (their checksums are compared after the run too: an input written
# to would show as a difference that is not one): bench/make_model's Llama
# (1 layer, hidden 160: 19 MB), its fused MoE experts in both orientations
# and make_fp4_model's four layouts, both shrunk (they take no size: see
# shrink below), copies of testdata/llama-tiny, deepseek-moe-tiny,
# deepseek-fp8-tiny, quant-edge and every folder of testdata/releases.
# testdata itself is only read.
#
# Paths: every command runs in its tree's folder with relative paths
# (../in/..., o/...), so that the two trees' reports name the same paths.
# Outputs are compared as the run goes and removed when the same (settle).
# WORKDIR: a new or empty folder, kept afterwards with the logs and the
# outputs that differed, to be looked at; one this script made before
# (marked by .same-bytes) is reused, clearing only its own in/ gen/ old/
# new/.  Without it a mktemp folder is made and removed at exit.  Nothing
# else is ever deleted.  --force is never passed: every output goes into a
# folder this run made new.
set -uo pipefail # not -e: refusals are expected results, recorded and compared
set -f           # no globbing: option strings are split into words on purpose

die() {
    echo "same-bytes: $*" >&2
    exit 2
}
[ $# -eq 2 ] || [ $# -eq 3 ] || die "usage: bash tests/same_bytes.sh OLD_FP8CONV NEW_FP8CONV [WORKDIR]"
OLD=$(readlink -f -- "$1")
NEW=$(readlink -f -- "$2")
for b in "$OLD" "$NEW"; do
    if [ ! -f "$b" ] || [ ! -x "$b" ]; then die "$b: not an executable file"; fi
done
REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
CC=${CC:-cc}
# The environment fp8conv reads (cli/report.c, lib/compute/gpu.c,
# lib/ops/convert_dsv4.c), set the same for both, whatever the caller's.
export COLUMNS=100 LC_ALL=C
unset FP8CONV_CUDA_FAULT FP8CONV_DSV4_CAST

# ---------------------------------------------------------------- WORKDIR
MARK=.same-bytes
made_workdir=0
tree_pids=()
cleanup() {
    local p
    for p in "${tree_pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ "$made_workdir" = 1 ]; then
        chmod -R u+w -- "$W/in" 2>/dev/null # made read-only
        rm -rf -- "$W"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ $# -eq 3 ]; then
    W=$3
    if [ -e "$W" ] && [ ! -e "$W/$MARK" ] && [ -n "$(ls -A -- "$W" 2>/dev/null)" ]; then
        die "$W: not empty and not made by this script (no $MARK): give a new or empty folder"
    fi
    mkdir -p -- "$W" || die "$W: cannot make it"
    W=$(cd -- "$W" && pwd) || die "$W: cannot enter it"
    : >"$W/$MARK"
    chmod -R u+w -- "$W/in" 2>/dev/null
    rm -rf -- "$W/in" "$W/gen" "$W/old" "$W/new" # this script's own, from an earlier run
else
    W=$(mktemp -d "${TMPDIR:-/tmp}/same-bytes.XXXXXX") || die "mktemp failed"
    made_workdir=1
fi
mkdir -p "$W/in" "$W/gen" "$W/old" "$W/new"

# ---------------------------------------------------------------- the generators
# bench/make_model's experts form and make_fp4_model take no size: at their
# real sizes (Llama-4 Scout's experts, 0.5 GB; gpt-oss-20b's, Llama-3-8B's
# and DeepSeek-V3's dimensions) they would take minutes here.  Copies of
# their sources with smaller dimensions (the same code otherwise) are built
# instead; shrink fails, naming the line, if the source no longer has it.
# shrink IN OUT FROM TO [FROM TO ...]: IN with each FROM (literal) put as TO
shrink() {
    local in=$1 out=$2 text
    text=$(<"$in") || die "$in: cannot read it"
    shift 2
    while [ $# -ge 2 ]; do
        [[ $text == *"$1"* ]] || die "$in no longer has '$1': update shrink in tests/same_bytes.sh"
        text=${text//"$1"/"$2"}
        shift 2
    done
    printf '%s\n' "$text" >"$out"
}
shrink "$REPO/bench/make_model.c" "$W/gen/make_model.c" \
    'enum { E = 2, H = 5120, I = 8192 };' 'enum { E = 2, H = 640, I = 1024 };'
shrink "$REPO/bench/make_fp4_model.c" "$W/gen/make_fp4_model.c" \
    'const uint64_t H = 2880, I = 2880;' 'const uint64_t H = 1440, I = 1440;' \
    '\"hidden_size\": 2880,\n  \"intermediate_size\": 2880,' \
    '\"hidden_size\": 1440,\n  \"intermediate_size\": 1440,' \
    'const uint64_t H = 4096, KV = 1024, INTER = 14336;' 'const uint64_t H = 512, KV = 128, INTER = 1792;' \
    '\"hidden_size\": 4096,\n  \"intermediate_size\": 14336,' \
    '\"hidden_size\": 512,\n  \"intermediate_size\": 1792,' \
    'const uint64_t H = 7168, I = 2048;' 'const uint64_t H = 1792, I = 512;' \
    '\"hidden_size\": 7168,\n  \"moe_intermediate_size\": 2048,' \
    '\"hidden_size\": 1792,\n  \"moe_intermediate_size\": 512,'

# They link against libfp8conv (its safetensors writer), as the Makefile's
# $(BUILD)/bench/% rule builds them.  lib/ may be half-way through the
# refactor, so the library built beside OLD is tried first (then NEW's: a
# build folder holds fp8conv and libfp8conv.a, its lib/ one level up), and
# only then the sources of lib/ here, compiled whole.  Which one does not
# matter to the comparison: both trees read the same generated inputs.
LIBS=$(pkg-config --libs libcjson libzstd libxxhash 2>/dev/null) || LIBS="-lcjson -lzstd -lxxhash"
CFLAGS_GEN="-std=c11 -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -O2 -ffp-contract=off $(pkg-config --cflags libcjson libzstd libxxhash 2>/dev/null)"
build_generators() { # build_generators INCLUDE_DIR LIBRARY_OR_SOURCES...
    local inc=$1 g
    shift
    for g in make_model make_fp4_model; do
        # shellcheck disable=SC2086
        $CC $CFLAGS_GEN -I"$inc" "$W/gen/$g.c" "$@" $LIBS -lm -lpthread -o "$W/gen/$g" \
            2>>"$W/gen/cc.log" || return 1
    done
}
built=
for b in "$OLD" "$NEW"; do
    d=$(dirname -- "$b")
    for inc in "$d/../lib" "$d/../../lib"; do
        if [ -z "$built" ] && [ -f "$d/libfp8conv.a" ] && [ -f "$inc/fp8conv.h" ] &&
            build_generators "$inc" "$d/libfp8conv.a"; then
            built="$d/libfp8conv.a"
        fi
    done
done
if [ -z "$built" ]; then
    set +f
    srcs=("$REPO"/lib/*/*.c)
    set -f
    build_generators "$REPO/lib" "${srcs[@]}" || die "cannot build the generators (see $W/gen/cc.log)"
    built="$REPO/lib/*/*.c"
fi
echo "same-bytes: generators built against $built"

# ---------------------------------------------------------------- the inputs
cd "$W/in" || die "$W/in"
gen() { "$@" >/dev/null 2>>"$W/gen/gen.log" || die "failed: $* (see $W/gen/gen.log)"; }
gen ../gen/make_model bench 1 160 # 19 MB: its MLP weights 4.6 MB, two 4 MiB jobs (jobs.c); 160 = 128 + 32
gen ../gen/make_model experts-in-out experts in-out
gen ../gen/make_model experts-out-in experts out-in
gen ../gen/make_fp4_model fp4-gpt-oss gpt-oss 2
gen ../gen/make_fp4_model fp4-nvfp4-modelopt nvfp4-modelopt 2
gen ../gen/make_fp4_model fp4-nvfp4-ct nvfp4-ct 2
gen ../gen/make_fp4_model fp4-deepseek-v4 deepseek-v4 2
for t in llama-tiny deepseek-moe-tiny deepseek-fp8-tiny quant-edge; do
    cp -r -- "$REPO/testdata/$t" "$t" || die "cannot copy testdata/$t"
done
RELEASES=()
set +f
for r in "$REPO"/testdata/releases/*/; do
    r=${r%/}
    cp -r -- "$r" "rel-${r##*/}" || die "cannot copy $r"
    RELEASES+=("rel-${r##*/}")
done
set -f
[ ${#RELEASES[@]} -gt 0 ] || die "no folder in testdata/releases"
chmod -R a-w "$W/in"
inputs_sum() { (cd "$W" && find in -type f -print0 | sort -z | xargs -0 cksum); }
inputs_sum >"$W/gen/inputs.cksum"
cd "$W" || die "$W"

# ---------------------------------------------------------------- the commands
# quantize's schemes and formats (LABEL:OPTIONS): every pair is run, those
# fp8conv refuses included
SCHEMES=(
    "block:--scheme block"
    "block32:--scheme block --block 32x32"
    "block-ue8m0:--scheme block --scale-fmt ue8m0"
    "block32-ue8m0:--scheme block --block 32x32 --scale-fmt ue8m0"
    "channel:--scheme channel"
    "tensor:--scheme tensor"
    "mxfp8-rceil:--scheme mxfp8 --mx-rounding rceil"
    "mxfp8-floor:--scheme mxfp8 --mx-rounding floor"
    "nvfp4:--scheme nvfp4"
    "mxfp4:--scheme mxfp4"
)
FORMATS=("default:" "hf-fp8:--format hf-fp8" "ct:--format compressed-tensors" "modelopt:--format modelopt")
QUANT_INPUTS=(bench experts-in-out experts-out-in llama-tiny deepseek-moe-tiny quant-edge deepseek-fp8-tiny)
# convert's targets from an FP8 checkpoint: every scheme with every format
# that can write it (fp8conv-formats(5); the pairs that cannot are refused
# before any input is read: PROBES runs them once), --exact where a path
# can be exact (the same layout, a relabelling, a block dividing the
# input's, 128x128 ue8m0 to mxfp8); and from a packed-FP4 one: its casts
TARGETS_FP8=(
    "same:" "exact:--exact"
    "hf-fp8:--format hf-fp8" "ct:--format compressed-tensors" "modelopt:--format modelopt"
    "block.hf-fp8:--scheme block --format hf-fp8"
    "block32.ct:--scheme block --block 32x32 --format compressed-tensors"
    "block64-exact.hf-fp8:--scheme block --block 64x64 --exact --format hf-fp8"
    "block-ue8m0.hf-fp8:--scheme block --scale-fmt ue8m0 --format hf-fp8"
    "channel.ct:--scheme channel --format compressed-tensors"
    "channel.modelopt:--scheme channel --format modelopt"
    "tensor.hf-fp8:--scheme tensor --format hf-fp8"
    "tensor.ct:--scheme tensor --format compressed-tensors"
    "mxfp8-rceil.ct:--scheme mxfp8 --mx-rounding rceil --format compressed-tensors"
    "mxfp8-floor.modelopt:--scheme mxfp8 --mx-rounding floor --format modelopt"
    "mxfp8-exact.ct:--scheme mxfp8 --exact --format compressed-tensors"
)
TARGETS_FP4=(
    "same:" "exact:--exact" "hf-fp8:--format hf-fp8"
    "ct:--format compressed-tensors" "modelopt:--format modelopt"
    "exact.ct:--exact --format compressed-tensors" "exact.modelopt:--exact --format modelopt"
)
# The quantize outputs convert starts from (INPUT:SCHEME.FORMAT ...): all
# of llama-tiny's layouts, and a few of the others' (their sizes, edge
# values, MoE names); dequantize-for-export and the checks take every one.
CONVERT_FROM=" llama-tiny:block.hf-fp8 llama-tiny:block32.ct llama-tiny:block-ue8m0.hf-fp8
    llama-tiny:block32-ue8m0.hf-fp8 llama-tiny:channel.modelopt llama-tiny:tensor.ct
    llama-tiny:mxfp8-rceil.ct llama-tiny:mxfp8-floor.modelopt llama-tiny:nvfp4.ct
    llama-tiny:nvfp4.modelopt llama-tiny:mxfp4.ct
    bench:block.hf-fp8 bench:block-ue8m0.hf-fp8 bench:channel.ct bench:nvfp4.modelopt
    quant-edge:block.hf-fp8 quant-edge:mxfp8-rceil.ct deepseek-moe-tiny:block.hf-fp8
    experts-in-out:block.hf-fp8 experts-in-out:nvfp4.modelopt
    experts-out-in:block.hf-fp8 experts-out-in:nvfp4.modelopt "
# Refusals of option pairs that do not exist, once each (LABEL:COMMAND).
PROBES=(
    "quantize-mxfp4-floor:quantize --scheme mxfp4 --mx-rounding floor ../in/llama-tiny"
    "quantize-ue8m0-channel:quantize --scheme channel --scale-fmt ue8m0 ../in/llama-tiny"
    "quantize-block-bad:quantize --block 0x32 ../in/llama-tiny"
    "convert-block.modelopt:convert --scheme block --format modelopt o/quantize/llama-tiny/block.hf-fp8"
    "convert-channel.hf-fp8:convert --scheme channel --format hf-fp8 o/quantize/llama-tiny/block.hf-fp8"
    "convert-tensor.modelopt:convert --scheme tensor --format modelopt o/quantize/llama-tiny/block.hf-fp8"
    "convert-mxfp8.hf-fp8:convert --scheme mxfp8 --format hf-fp8 o/quantize/llama-tiny/block.hf-fp8"
    "convert-ue8m0.ct:convert --scheme block --scale-fmt ue8m0 --format compressed-tensors o/quantize/llama-tiny/block.hf-fp8"
    "convert-nvfp4:convert --scheme nvfp4 o/quantize/llama-tiny/block.hf-fp8"
    "dequant-f8:dequantize-for-export --dtype f8 o/quantize/llama-tiny/block.hf-fp8"
)
DTYPES=(bf16 f16 f32)
J="--json --progress never"

# c NAME ARGS...: one check.  Runs $BIN ARGS in the tree's folder; its exit
# code, stdout and stderr go to log/NAME.{rc,out,err}.  NAME is always
# KIND/SUBJECT/LABEL; a command that writes, writes into o/NAME.
# (Starting a process is what a check costs most here, a few ms on a VM:
# the folders are made once each, not by a mkdir per check.)
declare -A made=()
c() {
    local name=$1
    shift
    if [ -z "${made[${name%/*}]:-}" ]; then
        mkdir -p "log/${name%/*}" "o/${name%/*}"
        made[${name%/*}]=1
    fi
    "$BIN" "$@" >"log/$name.out" 2>"log/$name.err"
    echo $? >"log/$name.rc"
}

# What each binary runs, in its own tree (the cwd), on ../in; $J and the
# OPTIONS strings are split into words on purpose (set -f).
# shellcheck disable=SC2086
first_commands() { # all but the per-source ones
    local i s f a rel t q
    # quantize: every scheme x format, every bf16 input (and an FP8 one)
    for i in "${QUANT_INPUTS[@]}"; do
        for s in "${SCHEMES[@]}"; do
            for f in "${FORMATS[@]}"; do
                q=quantize/$i/${s%%:*}.${f%%:*}
                c "$q" quantize $J --no-sync ${s#*:} ${f#*:} "../in/$i" "o/$q"
            done
        done
    done
    # the same bytes for any -j (64 threads: jobs of a sixteenth of the
    # 4 MiB chunk, lib/compute/jobs.c); the plan; the layout of a release
    for a in 1 3 64; do
        for s in "${SCHEMES[@]}"; do
            q=quantize-j/bench/${s%%:*}.j$a
            c "$q" quantize $J --no-sync -j "$a" ${s#*:} ../in/bench "o/$q"
        done
        c "dequant-j/bench.block.hf-fp8/j$a" dequantize-for-export $J --no-sync -j "$a" \
            o/quantize/bench/block.hf-fp8 "o/dequant-j/bench.block.hf-fp8/j$a"
    done
    for s in "${SCHEMES[@]}"; do
        c "plan/llama-tiny/${s%%:*}" quantize $J --dry-run ${s#*:} ../in/llama-tiny "o/plan/llama-tiny/${s%%:*}"
    done
    for rel in "${RELEASES[@]}"; do
        c "quantize-like/llama-tiny/$rel" quantize $J --no-sync --like "../in/$rel" ../in/llama-tiny "o/quantize-like/llama-tiny/$rel"
        c "verify-like/llama-tiny/$rel" verify $J --no-values --like "../in/$rel" "o/quantize-like/llama-tiny/$rel"
    done
    for s in "${PROBES[@]}"; do
        c "probe/refused/${s%%:*}" ${s#*:} "o/probe/refused/${s%%:*}"
    done
    for i in llama-tiny deepseek-moe-tiny quant-edge bench experts-in-out; do
        c "inspect/$i/hash" inspect $J --hash "../in/$i"
        c "dequant/$i/not-fp8" dequantize-for-export $J --no-sync "../in/$i" "o/dequant/$i/not-fp8"
    done
    # the NVFP4 pairs that must be identical by value
    c "diff-dequant/pairs/nvfp4" diff $J --dequant ../in/rel-nvfp4-ct ../in/rel-nvfp4-modelopt
    c "diff-dequant/pairs/nvfp4-amax" diff $J --dequant ../in/rel-nvfp4-ct-amax ../in/rel-nvfp4-modelopt-amax
    c "diff-dequant/pairs/fp4-nvfp4" diff $J --dequant ../in/fp4-nvfp4-ct ../in/fp4-nvfp4-modelopt

    # the text reports (no --json), on the samples
    for s in "${SCHEMES[@]}"; do
        q=text-quantize/llama-tiny/${s%%:*}
        c "$q" quantize --progress never --no-sync ${s#*:} ../in/llama-tiny "o/$q"
        [ -f "o/$q/config.json" ] || continue
        c "text-verify/llama-tiny/${s%%:*}" verify --progress never --against ../in/llama-tiny "o/$q"
        c "text-inspect/llama-tiny/${s%%:*}" inspect --progress never --hash "o/$q"
        c "text-diff/llama-tiny/${s%%:*}" diff --progress never ../in/llama-tiny "o/$q"
        c "text-diff-dequant/llama-tiny/${s%%:*}" diff --progress never --dequant "o/$q" ../in/llama-tiny
        c "text-dequant/llama-tiny/${s%%:*}" dequantize-for-export --progress never --no-sync "o/$q" "o/text-dequant/llama-tiny/${s%%:*}"
        c "text-convert/llama-tiny.${s%%:*}/same" convert --progress never --no-sync "o/$q" "o/text-convert/llama-tiny.${s%%:*}/same"
    done
    for t in "${TARGETS_FP8[@]}"; do
        c "text-convert/llama-tiny.block32/${t%%:*}" convert --progress never --no-sync ${t#*:} \
            o/text-quantize/llama-tiny/block32 "o/text-convert/llama-tiny.block32/${t%%:*}"
    done
    for rel in "${RELEASES[@]}" deepseek-fp8-tiny fp4-deepseek-v4 fp4-gpt-oss; do
        c "text-verify/$rel/plain" verify --progress never "../in/$rel"
        c "text-inspect/$rel/plain" inspect --progress never "../in/$rel"
        c "text-convert/$rel/same" convert --progress never --no-sync "../in/$rel" "o/text-convert/$rel/same"
        c "text-dequant/$rel/bf16" dequantize-for-export --progress never --no-sync "../in/$rel" "o/text-dequant/$rel/bf16"
    done
}

# shellcheck disable=SC2086
source_commands() { # source_commands K ID:PATH [PREVIOUS_ID:PATH]: one FP8/FP4 source
    local k=$1 id=${2%%:*} q=${2#*:} prev=${3:-} i s t dt o targets
    i=${id#q.} i=${i%%.*} s=${id#q."$i".} # a quantize output's input, and its SCHEME.FORMAT
    # convert into every target (for packed FP4: the casts)
    case $id in
    q.*nvfp4* | q.*mxfp4* | fp4-* | rel-*nvfp4* | rel-*mxfp4* | rel-*gpt-oss* | rel-*deepseek-v4*)
        targets=("${TARGETS_FP4[@]}") ;;
    *) targets=("${TARGETS_FP8[@]}") ;;
    esac
    if [[ $id == q.* && $CONVERT_FROM != *[[:space:]]"$i:$s"[[:space:]]* ]]; then
        targets=()
    fi
    for t in "${targets[@]}"; do
        o=convert/$id/${t%%:*}
        c "$o" convert $J --no-sync ${t#*:} "$q" "o/$o"
        [ -f "o/$o/config.json" ] || continue
        c "verify/$id/convert.${t%%:*}" verify $J "o/$o"
        c "diff-dequant/$id/convert.${t%%:*}" diff $J --dequant "$q" "o/$o"
    done
    # dequantize-for-export into every dtype; the export against its source
    # (and a bf16 one against the model it was quantized from)
    for dt in "${DTYPES[@]}"; do
        o=dequant/$id/$dt
        c "$o" dequantize-for-export $J --no-sync --dtype "$dt" "$q" "o/$o"
        [ -f "o/$o/config.json" ] || continue
        c "diff-dequant/$id/dequant.$dt" diff $J --dequant "$q" "o/$o"
        [ "$dt" = bf16 ] || continue
        c "inspect/$id/dequant.$dt" inspect $J --hash "o/$o"
        if [[ $id == q.* ]]; then
            c "diff/$id/dequant.bf16-vs-input" diff $J "../in/$i" "o/$o"
        fi
    done
    # the source itself, against its input, and against the source before it
    # in the list (the same input's outputs one after another; the releases)
    c "verify/$id/plain" verify $J "$q"
    c "inspect/$id/hash" inspect $J --hash "$q"
    if [[ $id == q.* ]]; then
        c "verify/$id/against" verify $J --against "../in/$i" "$q"
        c "diff/$id/vs-input" diff $J "../in/$i" "$q"
        c "diff-dequant/$id/vs-input" diff $J --dequant "$q" "../in/$i"
    fi
    if [ -n "$prev" ]; then
        c "diff/pairs/$k.${prev%%:*}~$id" diff $J "${prev#*:}" "$q"
        c "diff-dequant/pairs/$k.${prev%%:*}~$id" diff $J --dequant "${prev#*:}" "$q"
    fi
}

# What varies from run to run, masked in both trees' logs alike (every other
# byte of a report is compared):
#   "seconds": N          the wall time in quantize's, convert's (its casts'
#                         too) and dequantize-for-export's --json
#   N.NN s on DEVICE      the same in their text reports
# Nothing else: progress bars (rates, elapsed, ETA) are off (--progress
# never), and every path is relative to the tree's folder, so that no report
# names WORKDIR/old or WORKDIR/new (a run masking those too, and the
# .OUTPUT.tmp-XXXXXX folders of lib/io/output.c, found none of either).
mask_logs() {
    find log -type f \( -name '*.out' -o -name '*.err' \) -print0 | xargs -0 -r sed -i -E \
        -e 's/("seconds":[[:space:]]*)[-+0-9.eE]+/\1<masked>/' \
        -e 's/[0-9]+\.[0-9]+ s on ([a-z]+)/<masked> s on \1/g'
}

both() { # both FUNCTION ARGS...: FUNCTION in each tree at once (a core each,
    # as far as they go; they share only the read-only inputs), with its binary
    (cd "$W/old" && BIN=$OLD && "$@") &
    tree_pids=($!)
    (cd "$W/new" && BIN=$NEW && "$@") &
    tree_pids+=($!)
    wait "${tree_pids[@]}"
    tree_pids=()
}

# ---------------------------------------------------------------- compare
# A check's outputs are compared by diff -r -q: it lists what is in one tree
# only and compares every file present in both byte for byte, as cmp does
# (one process for a whole folder instead of one per file); cmp then gives
# the first differing byte of each file found different.  compare reads
# diff's lines and prints one line per difference.
declare -A failed=() failed_under=() said=()
ndiff=0 nstray=0 nseen=0 # differences said; of them not a check's; met (said or not)
say() { # say NAME TEXT: NAME's check fails (said once: a check whose outputs
    # were kept to be looked at is met again by the last comparison)
    failed[$1]=1
    nseen=$((nseen + 1))
    [ -z "${said["$1: $2"]:-}" ] || return 0
    said["$1: $2"]=1
    ndiff=$((ndiff + 1))
    printf 'DIFF %s: %s\n' "$1" "$2"
}
snippet() { # the first line at which two logs differ, shortened
    local l
    l=$(cmp -- "$1" "$2" 2>&1 | sed -n 's/.* line \([0-9]*\).*/\1/p')
    [ -n "$l" ] || l=1
    printf 'line %s: OLD "%.120s" NEW "%.120s"' "$l" "$(sed -n "${l}p" "$1")" "$(sed -n "${l}p" "$2")"
}
check_of() { # the check a path under log/ or o/ belongs to: KIND/SUBJECT/LABEL
    local p=${1#*/} a b rest
    p=${p%.rc} p=${p%.out} p=${p%.err}
    IFS=/ read -r a b rest <<<"$p"
    printf '%s/%s/%s' "$a" "$b" "${rest%%/*}"
}
compare() { # reads diff -r -q old/X new/X lines (cwd: WORKDIR)
    local line p side rel k a b
    while IFS= read -r line; do
        case $line in
        "Only in "*) # Only in old/log/quantize/bench: block.ct.rc
            p=${line#Only in } side=OLD
            [ "${p%%/*}" = old ] || side=NEW
            p=${p#*/} p=${p%%: *}/${p#*: }
            rel=${p#*/} # KIND[/SUBJECT[/LABEL...]]
            if [ "$(tr -cd / <<<"$rel" | wc -c)" -lt 2 ]; then
                # a whole KIND or KIND/SUBJECT in one tree only: each check in it
                rel=${rel%.rc}
                failed_under[$rel]=1
                say "$rel/*" "${p%%/*}/$rel only in $side"
                continue
            fi
            k=$(check_of "$p")
            case $p in
            log/*.rc) say "$k" "ran in $side only" ;;
            log/*) ;; # the .rc said it
            "o/$k") say "$k" "output folder only in $side" ;;
            *) say "$k" "${p#o/"$k"/} only in $side" ;;
            esac
            ;;
        "Files "*" differ") # Files old/o/X and new/o/X differ
            a=${line#Files } a=${a%% and *}
            b=${line#* and } b=${b% differ}
            p=${a#old/}
            k=$(check_of "$p")
            case $p in
            log/*.rc) say "$k" "exit code $(<"$a") (OLD) vs $(<"$b") (NEW)" ;;
            log/*.out) say "$k" "stdout differs at $(snippet "$a" "$b")" ;;
            log/*.err) say "$k" "stderr differs at $(snippet "$a" "$b")" ;;
            *) say "$k" "${p#o/"$k"/} differs ($(cmp -- "$a" "$b" 2>&1 | sed 's/^[^:]*: *//'))" ;;
            esac
            ;;
        *) # anything else diff says (a file where the other tree has a folder, ...)
            nseen=$((nseen + 1))
            [ -n "${said[$line]:-}" ] && continue
            said[$line]=1
            nstray=$((nstray + 1))
            ndiff=$((ndiff + 1))
            printf 'DIFF %s\n' "$line"
            ;;
        esac
    done
}
diff_part() { # diff_part P: diff -r -q of WORKDIR/{old,new}/P, either side missing
    if [ -e "old/$1" ] && [ -e "new/$1" ]; then
        diff -r -q "old/$1" "new/$1" 2>&1
    elif [ -e "old/$1" ]; then
        echo "Only in old/${1%/*}: ${1##*/}"
    elif [ -e "new/$1" ]; then
        echo "Only in new/${1%/*}: ${1##*/}"
    fi
}
# settle P...: compares o/P in both trees and, when all the same, removes
# them: outputs written and deleted within seconds never reach the disk (the
# run writes GBs; keeping them all, the kernel's writeback took most of the
# run).  A difference keeps both trees' copies, to be looked at (the first
# 20 such: a bug that changes everything would keep GBs).
kept=0
settle() {
    local before=$nseen p
    compare < <(for p in "$@"; do diff_part "o/$p"; done)
    if [ "$nseen" != "$before" ] && [ $((kept += 1)) -le 20 ]; then return; fi
    for p in "$@"; do rm -rf "old/o/$p" "new/o/$p"; done
}

# ---------------------------------------------------------------- run, compare
cd "$W" || die "$W"
echo "same-bytes: inputs built in $SECONDS s; running OLD ($OLD) and NEW ($NEW) in $W"
both first_commands

# The FP8/FP4 sources, as ID:PATH: the quantize outputs either tree wrote
# (the default format's: the same bytes as one of these), the FP8 and FP4
# inputs.  A source in one tree only fails its commands in the other.
sources=()
for i in "${QUANT_INPUTS[@]}"; do
    for s in "${SCHEMES[@]}"; do
        for f in hf-fp8 ct modelopt; do
            q=o/quantize/$i/${s%%:*}.$f
            if [ -f "old/$q/config.json" ] || [ -f "new/$q/config.json" ]; then
                sources+=("q.$i.${s%%:*}.$f:$q")
            fi
        done
    done
done
for i in deepseek-fp8-tiny fp4-gpt-oss fp4-nvfp4-modelopt fp4-nvfp4-ct fp4-deepseek-v4 "${RELEASES[@]}"; do
    sources+=("$i:../in/$i")
done
# What first_commands wrote that no source needs, settled now: every kind
# but quantize, and quantize's default-format outputs.
for kind in $( (ls old/o; ls new/o) 2>/dev/null | sort -u); do
    [ "$kind" = quantize ] || settle "$kind"
done
for i in "${QUANT_INPUTS[@]}"; do
    for s in "${SCHEMES[@]}"; do settle "quantize/$i/${s%%:*}.default"; done
done
# One source at a time in both trees, then its convert and export outputs
# settled, and the source before it (the pairs needed it until now).
prev=
for k in "${!sources[@]}"; do
    both source_commands "$k" "${sources[k]}" "$prev"
    settle "convert/${sources[k]%%:*}" "dequant/${sources[k]%%:*}"
    [[ $prev != q.* ]] || settle "${prev#*:o/}"
    prev=${sources[k]}
done
[[ $prev != q.* ]] || settle "${prev#*:o/}"
both mask_logs
echo "same-bytes: both trees written at $SECONDS s; comparing"

# Everything else: every check's log, and the outputs not compared above.
declare -A checks=()
while read -r name; do checks[$name]=1; done < <(
    for t in old new; do (cd "$t" && find log -name '*.rc' | sed 's|^log/||; s|\.rc$||'); done)
[ ${#checks[@]} -gt 0 ] || die "no command ran"
compare < <(diff_part log
    for kind in $( (ls old/o; ls new/o) 2>/dev/null | sort -u); do diff_part "o/$kind"; done)
# an input changed (by root, whom chmod does not stop): no check's fault
while IFS= read -r line; do
    nstray=$((nstray + 1))
    ndiff=$((ndiff + 1))
    printf 'DIFF input changed during the run: %s\n' "$line"
done < <(inputs_sum | diff "$W/gen/inputs.cksum" - | sed -n 's/^[<>] [0-9]* [0-9]* //p' | sort -u)
for rel in "${!failed_under[@]}"; do
    for name in "${!checks[@]}"; do [[ $name != "$rel"/* ]] || failed[$name]=1; done
done

nfailed=0
for name in "${!checks[@]}"; do [ -z "${failed[$name]:-}" ] || nfailed=$((nfailed + 1)); done
echo "same-bytes: ${#checks[@]} commands per binary, $ndiff differences, $SECONDS s in all"
echo "same-bytes: $((${#checks[@]} - nfailed)) passed, $((nfailed + nstray)) failed"
[ $((nfailed + nstray)) -eq 0 ]
