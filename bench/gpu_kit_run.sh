#!/usr/bin/env bash
# run.sh of the GPU kit (make gpu-kit copies this file to build/gpu-kit/run.sh;
# bench/README.md).  On a GPU machine with no compiler, network or apt, in one
# command of at most 10 minutes, in this order:
#   1. nvidia-smi
#   2. e4m3 sweep: cvt.rn.satfinite.e4m3x2.f32 and the kernels' encoder on the
#      device against the reference (tests/gpu/check_e4m3_cvt.cu)
#   3. kernel cases: every case of tests/kernel_cases.h on the GPU (check_gpu)
#   4. end to end: --device cuda against --device cpu, byte for byte, every
#      scheme (NVFP4 and MXFP4 too), the fixtures and a generated 1 GiB
#      model, the packed-FP4 release copies and ~1 GB MXFP4 / NVFP4 models
#      (tests/gpu/run.sh)
#   5. bench kernels: each kernel on 256 MiB and 1 GiB bf16 tensors as a
#      fraction of the same run's device-to-device copy (bench/gpu_bench.cu)
#   6. bench end to end: quantize and dequantize a generated 4 GiB model
#      against pinned H2D/D2H copies of its bytes, FP4 quantize of it (NVFP4,
#      MXFP4) and dequantize-for-export of ~1 GB packed-FP4 models, cuda
#      against cpu (bench/gpu_run.sh)
#   7. tensor API: fp8conv.quantize_tensor of torch CUDA tensors (the kit's
#      python/fp8conv and lib/libfp8conv.so) = the CPU's bytes, every FP8 and
#      FP4 scheme, and its time on 1 GiB against the device copy and eager
#      torch (tests/gpu/tensor_cuda.py; needs torch with CUDA); the engines' own
#      quantizers that are importable against --profile (tests/gpu/engines_cuda.py)
#   8. torch peer: the same 128x128 block quantization in eager PyTorch on the
#      GPU (bench/torch_peer.py), as the ratio of times fp8conv / torch
# Each step has its own time limit, all of them together KIT_BUDGET_S (520 s);
# a step that fails or times out does not stop the others, and one the budget
# leaves no time for is reported "not run" (and fails the run).  Exit 0 when
# every step ran and passed.  Logs (9) and summary.txt go to OUTDIR
# (or $OUT; a new temporary directory when neither is given); the summary
# table is printed last.
#
#   run.sh [OUTDIR]                 on the GPU
#   run.sh --emulated [OUTDIR]      no GPU: steps 3 and 4 on the CPU emulation of
#                                   the kernels (tests/check_kernels,
#                                   tests/fp8conv-emu), step 7 only as far as
#                                   torch without a GPU goes ("not available"),
#                                   step 8 with torch on the CPU; the others are
#                                   reported "not run"
#   run.sh --emulated --quick       the same with a short step 4 (E2E_QUICK=1)
set -uo pipefail
K=$(cd "$(dirname "$0")" && pwd)
cd "$K" || exit 2
mode=gpu quick=0 out=
for a in "$@"; do
    case $a in
    --emulated) mode=emulated ;;
    --quick) quick=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $a (see run.sh --help)" >&2; exit 2 ;;
    *) out=$a ;;
    esac
done
out=${out:-${OUT:-}}
if [ -z "$out" ]; then out=$(mktemp -d); fi
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
BUDGET=${KIT_BUDGET_S:-520}
t_start=$(date +%s)
deadline=$((t_start + BUDGET))
export BUILD=.

names=() states=() times=() logs=() failed=0
record() { names+=("$1"); states+=("$2"); times+=("$3"); logs+=("$4"); }

# step NAME LOG LIMIT_S NOT_AVAILABLE_RC CMD...: runs CMD in the kit's root
# under `timeout`, output in $out/LOG.  NOT_AVAILABLE_RC: the exit status that
# means the tool is missing here (nvidia-smi: 127, torch: 3), which is said
# and is no failure; any other non-zero status is one.
step() {
    local name=$1 log=$2 limit=$3 na_rc=$4
    shift 4
    local left=$((deadline - $(date +%s)))
    if [ "$left" -lt 15 ]; then
        record "$name" "not run (the ${BUDGET} s budget was spent)" - -
        failed=1
        echo "== $name: not run (the ${BUDGET} s budget was spent)"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name (at most $limit s; $out/$log)"
    local t0 rc=0
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$out/$log" 2>&1 || rc=$?
    local dt=$(($(date +%s) - t0)) state
    case $rc in
    0) state=ok ;;
    124 | 137) state="failed: timed out after $limit s" ;;
    "$na_rc")
        # the tool is missing only where the log says so: fp8conv's own exit 2
        # (bad input) under a bench script is a failure
        local why
        why=$(grep -m1 -E 'not available|No such file|not found|nothing was' "$out/$log")
        if [ -n "$why" ]; then
            state="not available: $(sed 's/^.*not available[: ]*//' <<<"$why" | cut -c1-60)"
        else
            state="failed (exit $rc)"
        fi ;;
    *) state="failed (exit $rc$(grep -m1 -o -E 'nothing was (tested|measured)' "$out/$log" | sed 's/^/: /'))" ;;
    esac
    case $state in failed*) failed=1 ;; esac
    tail -n 4 "$out/$log" | sed 's/^/   /'
    record "$name" "$state" "$dt s" "$log"
}
not_run() { record "$1" "not run ($2)" - -; echo "== $1: not run ($2)"; }

echo "fp8conv GPU kit ($mode$([ $quick = 1 ] && echo ', quick')): $(head -1 VERSION 2>/dev/null)"
echo "logs: $out"
version=$(./fp8conv --version 2>&1) || failed=1
sed 's/^/   /' <<<"$version"

if [ $mode = gpu ]; then
    step "nvidia-smi" nvidia-smi.log 30 127 nvidia-smi
    step "e4m3 sweep on the device" e4m3-sweep.log 90 2 tests/gpu/check_e4m3_cvt
    step "kernel cases (check_gpu)" kernel-cases.log 200 2 env CK_DEFAULT_TIMEOUT=600 tests/gpu/check_gpu
    step "end to end cpu = cuda, 1 GiB" end-to-end.log 200 2 bash tests/gpu/run.sh
    step "bench: kernels" bench-kernels.log 90 2 bench/gpu_bench kernels 256 1024
    step "bench: end to end, 4 GiB" bench-end-to-end.log 200 2 env GPU_BENCH_KERNELS=0 bash bench/gpu_run.sh
    step "tensor API on CUDA tensors" tensor-cuda.log 90 3 python3 tests/gpu/tensor_cuda.py
    step "engines' own quantizers on CUDA" engines-cuda.log 90 3 python3 tests/gpu/engines_cuda.py ./fp8conv
    step "torch peer" torch-peer.log 90 3 python3 bench/torch_peer.py 256 1024
else
    not_run "nvidia-smi" "emulated"
    not_run "e4m3 sweep on the device" "emulated: needs a GPU"
    step "kernel cases (CPU emulation)" kernel-cases.log 300 2 tests/check_kernels
    step "end to end cpu = cuda (emulated)" end-to-end.log 600 2 env E2E_QUICK=$quick bash tests/gpu/run.sh --emulated
    not_run "bench: kernels" "emulated: times on the emulation mean nothing"
    not_run "bench: end to end, 4 GiB" "emulated: times on the emulation mean nothing"
    step "tensor API (no GPU: loads only)" tensor-cuda.log 60 3 python3 tests/gpu/tensor_cuda.py
    not_run "engines' own quantizers on CUDA" "emulated: needs a GPU (tests/gpu/engines_cuda.py)"
    step "torch peer (CPU, plumbing only)" torch-peer.log 120 3 python3 bench/torch_peer.py --device cpu 8
fi

# ------------------------------------------------------------------ summary
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "not measured"; else printf "%.2f", a / b }'; }
{
    echo "fp8conv GPU kit summary: $mode, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(($(date +%s) - t_start)) s of ${BUDGET} s"
    head -1 VERSION 2>/dev/null
    grep -E '^gpu|^gpus|^cuda' <<<"$version"
    echo
    printf '%-34s %-8s %s\n' "step" "time" "result (log)"
    for i in "${!names[@]}"; do
        printf '%-34s %-8s %s%s\n' "${names[$i]}" "${times[$i]}" "${states[$i]}" \
            "$([ "${logs[$i]}" != - ] && echo " (${logs[$i]})")"
    done
    echo
    # step 5: "quantize block 128x128     1.234 ms  1234.5 GB/s   0.91 x copy bandwidth"
    bk=$out/bench-kernels.log
    echo "kernels, bandwidth as a fraction of the same run's device-to-device copy (256 MiB, 1 GiB):"
    if [ -s "$bk" ] && grep -q 'x copy bandwidth' "$bk"; then
        awk '/^== [0-9]+ MiB/ { size = $2 } / x copy bandwidth$/ {
                 name = substr($0, 1, 28); sub(/ +$/, "", name)
                 for (i = 1; i <= NF; i++) if ($i == "x" && $(i+1) == "copy") r = $(i-1)
                 for (i = 1; i <= NF; i++) if ($i == "ms") ms = $(i-1)
                 if (!(name in seen)) { seen[name] = 1; order[++n] = name }
                 frac[name] = frac[name] sprintf("  %6s MiB: %s (%s ms)", size, r, ms) }
             END { for (i = 1; i <= n; i++) printf "  %-28s%s\n", order[i], frac[order[i]] }' "$bk"
    else
        echo "  not measured"
    fi
    be=$out/bench-end-to-end.log
    echo "end to end, page cache warm (time; x the larger pinned H2D/D2H copy, x cp -r of the bf16 model;"
    echo "FP4 quantize of the 4 GiB model; FP4 export of ~1 GB models):"
    if [ -s "$be" ] && grep -q -- '--device cuda' "$be"; then
        grep -E '^(quantize|dequantize) --(device|scheme)|^fp4 ' "$be" | sed 's/^/  /'
    else
        echo "  not measured"
    fi
    tp=$out/torch-peer.log
    echo "torch peer, quantize block 128x128, time ratio fp8conv / torch (below 1: fp8conv faster):"
    if [ $mode = gpu ] && [ -s "$tp" ] && grep -q '^torch quantize' "$tp"; then
        for mib in 256 1024; do
            t=$(awk -v m="$mib" '$0 ~ "^torch quantize block 128x128 " m " MiB:" { print $(NF-1) }' "$tp")
            f=$(awk -v m="$mib" '/^== [0-9]+ MiB/ { s = $2 } s == m && /^quantize block 128x128 / {
                    for (i = 1; i <= NF; i++) if ($i == "ms") print $(i-1) }' "$bk" 2>/dev/null | head -1)
            printf '  %4s MiB: fp8conv %s ms, torch %s ms: %s\n' "$mib" "${f:-?}" "${t:-?}" "$(ratio "$f" "$t")"
        done
    elif grep -q '^torch: not available' "$tp" 2>/dev/null; then
        echo "  $(grep -m1 '^torch: not available' "$tp")"
    else
        echo "  not measured$([ $mode = emulated ] && echo ' (emulated)')"
    fi
    echo "tensor API, quantize_tensor of torch CUDA tensors (tests/gpu/tensor_cuda.py):"
    tc=$out/tensor-cuda.log
    if grep -q -E '^tensor_cuda' "$tc" 2>/dev/null; then
        grep -E '^tensor_cuda' "$tc" | sed 's/^/  /'
    elif grep -q '^torch: not available' "$tc" 2>/dev/null; then
        echo "  $(grep -m1 '^torch: not available' "$tc")"
    else
        echo "  not measured"
    fi
} >"$out/summary.txt"
echo
cat "$out/summary.txt"
# exit 0 only when every step ran and passed (a missing nvidia-smi or torch aside)
exit $failed
