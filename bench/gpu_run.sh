#!/usr/bin/env bash
# GPU benchmarks (make bench-gpu; needs an NVIDIA GPU):
#   1. each kernel on 256 MiB and 1 GiB bf16 tensors, as a fraction of the
#      same run's device-to-device copy bandwidth;
#   2. end to end: quantize and dequantize a GPU_LAYERS-layer Llama-shaped
#      checkpoint (4 GiB by default) from the page cache with --device cuda,
#      against the same run's pinned H2D / D2H copy of its bytes and cp -r of
#      the bf16 model (the host's floor), and with --device cpu for
#      comparison; and quantize it to NVFP4 and MXFP4, --device cuda against
#      --device cpu (time, and the bytes compared).
# GPU_BENCH_KERNELS=0 skips part 1 (the GPU kit times it as its own step).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
F=$BUILD/fp8conv
REPS=${REPS:-3}
LAYERS=${GPU_LAYERS:-8}
version=$("$F" --version)
if ! grep -q '^gpu 0: ' <<<"$version"; then
    echo "bench-gpu: fp8conv --version lists no GPU: nothing was measured" >&2
    exit 2
fi
echo "$version"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>/dev/null || true

if [ "${GPU_BENCH_KERNELS:-1}" != 0 ]; then
    echo
    echo "== kernels (best of 10, CUDA events)"
    "$BUILD/bench/gpu_bench" kernels 256 1024
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=$work/model
"$BUILD/bench/make_model" "$model" "$LAYERS" >/dev/null
in_bytes=$(cat "$model"/*.safetensors | wc -c)

best_s() { # best wall time of REPS runs of "$@", page cache warm
    local best=
    for _ in $(seq "$REPS"); do
        rm -rf "$work/out"
        cat "$model"/* "$work"/model-fp8/* >/dev/null 2>&1 || true
        local t0 t1
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        local s
        s=$(awk -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", ns / 1e9 }')
        if [ -z "$best" ] || awk -v a="$s" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$s; fi
    done
    echo "$best"
}

# copy_floor IN_BYTES OUT_BYTES: the pinned H2D/D2H copy bound, its lines on
# stderr and the seconds on stdout.  Not `tee /dev/stderr`: where stderr is a
# file (the kit's log), opening /dev/stderr truncates it (the H100 run lost
# its end-to-end lines so)
copy_floor() {
    local o
    o=$("$BUILD/bench/gpu_bench" copy "$1" "$2")
    echo "$o" >&2
    awk '/^copy_floor_s/ { print $2 }' <<<"$o"
}

echo
echo "== end to end: $LAYERS-layer model, $in_bytes bytes of bf16 tensors, page cache warm, best of $REPS"
q_cuda=$(best_s "$F" quantize --no-sync --device cuda "$model" "$work/out")
q_cpu=$(best_s "$F" quantize --no-sync --device cpu "$model" "$work/out")
"$F" quantize -q --no-sync --device cuda "$model" "$work/model-fp8"
out_bytes=$(cat "$work"/model-fp8/*.safetensors | wc -c)
d_cuda=$(best_s "$F" dequantize-for-export --no-sync --device cuda "$work/model-fp8" "$work/out")
d_cpu=$(best_s "$F" dequantize-for-export --no-sync --device cpu "$work/model-fp8" "$work/out")
q_floor=$(copy_floor "$in_bytes" "$out_bytes")
d_floor=$(copy_floor "$out_bytes" "$in_bytes")
# the host's floor, as make bench takes it for both: cp -r of the bf16 model
# (quantize's input, the export's output), page cache warm; the first GPU
# run found the page cache, not PCIe, the bound
cp_s=$(best_s cp -r "$model" "$work/out")
rm -rf "$work/out"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf 'quantize --device cuda   %7.3f s   %s x the larger pinned copy (%s s), %s x cp -r (%s s)\n' \
    "$q_cuda" "$(ratio "$q_cuda" "$q_floor")" "$q_floor" "$(ratio "$q_cuda" "$cp_s")" "$cp_s"
printf 'quantize --device cpu    %7.3f s   %s x cp -r (%d threads)\n' "$q_cpu" "$(ratio "$q_cpu" "$cp_s")" "$(nproc)"
printf 'dequantize --device cuda %7.3f s   %s x the larger pinned copy (%s s), %s x cp -r (%s s)\n' \
    "$d_cuda" "$(ratio "$d_cuda" "$d_floor")" "$d_floor" "$(ratio "$d_cuda" "$cp_s")" "$cp_s"
printf 'dequantize --device cpu  %7.3f s   %s x cp -r\n' "$d_cpu" "$(ratio "$d_cpu" "$cp_s")"

# FP4 quantize (issue 26): the same model to NVFP4 and MXFP4, --device cuda
# against --device cpu (time, and the bytes compared)
FP4_REPS=${FP4_REPS:-2}
echo
echo "== FP4 quantize: the $LAYERS-layer model, best of $FP4_REPS"
for s in nvfp4 mxfp4; do
    t_cuda=$(REPS=$FP4_REPS best_s "$F" quantize --no-sync --scheme $s --device cuda "$model" "$work/out")
    t_cpu=$(REPS=$FP4_REPS best_s "$F" quantize --no-sync --scheme $s --device cpu "$model" "$work/out")
    "$F" quantize -q --no-sync --scheme $s --device cpu "$model" "$work/q-cpu"
    "$F" quantize -q --no-sync --scheme $s --device cuda "$model" "$work/q-cuda"
    same=$(diff -r -q "$work/q-cpu" "$work/q-cuda" >/dev/null && echo "same bytes" || echo "OTHER BYTES")
    printf 'quantize --scheme %s --device cuda %7.3f s   %s x --device cpu; cuda vs cpu: %s\n' \
        "$s" "$t_cuda" "$(ratio "$t_cuda" "$t_cpu")" "$same"
    printf 'quantize --scheme %s --device cpu  %7.3f s   (%d threads)\n' "$s" "$t_cpu" "$(nproc)"
    rm -rf "$work/q-cpu" "$work/q-cuda"
    [ "$same" = "same bytes" ] || exit 1
done

# packed FP4 (issue 25): dequantize-for-export of an MXFP4 (gpt-oss) and an
# NVFP4 (ModelOpt) model of about 1 GB of bf16 out (bench/make_fp4_model.c),
# --device cuda and --device cpu, against the pinned D2H copy of the output
echo
echo "== packed FP4 dequantize-for-export, ~1 GB of bf16 out, best of $REPS"
for kind in gpt-oss nvfp4-modelopt; do
    rm -rf "$model" "$work/model-fp8"
    "$BUILD/bench/make_fp4_model" "$model" "$kind" >/dev/null
    "$F" dequantize-for-export -q --no-sync --device cpu "$model" "$work/exp"
    exp_bytes=$(cat "$work"/exp/*.safetensors | wc -c)
    in4=$(cat "$model"/*.safetensors | wc -c)
    f_cuda=$(best_s "$F" dequantize-for-export --no-sync --device cuda "$model" "$work/out")
    f_cpu=$(best_s "$F" dequantize-for-export --no-sync --device cpu "$model" "$work/out")
    rm -rf "$work/out" # best_s leaves its last output
    "$F" dequantize-for-export -q --no-sync --device cuda "$model" "$work/out"
    same=$(cmp -s "$work/exp/model.safetensors" "$work/out/model.safetensors" && echo "same bytes" || echo "OTHER BYTES")
    f_floor=$(copy_floor "$in4" "$exp_bytes")
    f_cp=$(best_s cp -r "$work/exp" "$work/out") # the floor bench/run.sh takes: cp -r of the export
    printf 'fp4 %-15s --device cuda %7.3f s   %s x the larger pinned copy (%s s), %s x cp -r (%s s); cuda vs cpu: %s\n' \
        "$kind" "$f_cuda" "$(ratio "$f_cuda" "$f_floor")" "$f_floor" "$(ratio "$f_cuda" "$f_cp")" "$f_cp" "$same"
    printf 'fp4 %-15s --device cpu  %7.3f s   %s x cp -r (%d threads)\n' "$kind" "$f_cpu" "$(ratio "$f_cpu" "$f_cp")" "$(nproc)"
    rm -rf "$work/exp" "$work/out"
    [ "$same" = "same bytes" ] || exit 1
done
