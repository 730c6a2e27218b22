#!/usr/bin/env bash
# Where the time of one GPU export goes (Nsight Systems is not on the lent
# machines; KINDS.md of the device library): on a GPU machine, with the kit
# that make gpu-kit builds,
#   1. the start: fp8conv --version, which opens the CUDA driver and lists the
#      devices (three runs);
#   2. dequantize-for-export of a ~1 GB NVFP4 (ModelOpt) model, page cache
#      warm, --device cuda and --device cpu at -j 1, 4 and 16: wall, user and
#      system seconds of each (best wall of two), and the bytes compared;
#   3. the slots: the driver's start, and making and freeing 2 and 16 of
#      the per-thread slots (a stream, pinned and device buffers) of a job's
#      sizes (bench/gpu_bench slots);
#   4. the kernels' share: the same export under ncu, every kernel's
#      gpu__time_duration summed, against the wall time of step 2;
#   5. where the threads wait: the export at -j 4 on each device, sampled
#      (state, system call, kernel stack) by bench/proc_sample.py.
#
#   bench/gpu_where.sh KIT_DIR        (from the repository's root)
set -uo pipefail
K=$(cd "${1:?usage: gpu_where.sh KIT_DIR}" && pwd)
F=$K/fp8conv
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
TIMEFORMAT='%R %U %S'

# timed CMD...: "wall user sys" of one run of CMD, its output dropped
timed() { { time "$@" >/dev/null 2>&1; } 2>&1 | tail -1; }

echo "== 1. start: fp8conv --version (wall user sys)"
for _ in 1 2 3; do timed "$F" --version; done

"$K/bench/make_fp4_model" "$w/m" nvfp4-modelopt >/dev/null || exit 2
in=$(cat "$w"/m/*.safetensors | wc -c)
"$F" dequantize-for-export -q --no-sync --device cpu "$w/m" "$w/ref" || exit 2
out=$(cat "$w"/ref/*.safetensors | wc -c)
echo
echo "== 2. dequantize-for-export, NVFP4 ModelOpt, $in bytes in, $out out, best wall of 2"
printf '%-6s %3s %8s %8s %8s  %s\n' device j wall user sys bytes
for dev in cpu cuda; do
    for j in 1 4 16; do
        best=
        for _ in 1 2; do
            rm -rf "$w/out"
            cat "$w"/m/* >/dev/null
            r=$(timed "$F" dequantize-for-export --no-sync --device $dev -j $j "$w/m" "$w/out")
            if [ -z "$best" ] || awk -v a="${r%% *}" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
                best=$r
            fi
        done
        same=$(cmp -s "$w/ref/model.safetensors" "$w/out/model.safetensors" && echo same || echo OTHER)
        read -r wall user sys <<<"$best"
        printf '%-6s %3s %8s %8s %8s  %s\n' $dev "$j" "$wall" "$user" "$sys" "$same"
    done
done

echo
echo "== 3. the slots (host clock)"
for n in 2 16; do "$K/bench/gpu_bench" slots $n $((2 << 20)) $((256 << 10)) $((8 << 20)); done
"$K/bench/gpu_bench" slots 16 $((4 << 20)) $((256 << 10)) $((16 << 20))

echo
echo "== 4. the kernels' share (ncu --clock-control none, gpu__time_duration.sum)"
rm -rf "$w/out"
: >"$w/ncu.csv"
: >"$w/ncu.err"
command -v ncu >/dev/null || echo "ncu: not available"
command -v ncu >/dev/null && ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "$F" dequantize-for-export -q --no-sync --device cuda -j 16 "$w/m" "$w/out" >"$w/ncu.csv" 2>"$w/ncu.err"
echo "ncu exit $?"
awk -F'","' '/gpu__time_duration.sum/ {
        gsub(/"/, "", $NF); gsub(/,/, "", $NF); unit = $(NF - 1)
        v = $NF + 0; if (unit == "usecond") v *= 1e3; else if (unit == "msecond") v *= 1e6
        n++; s += v; k[$5]++ }
    END { printf "%d kernels, %.3f ms of kernel time\n", n, s / 1e6
          for (x in k) printf "  %5d x %s\n", k[x], x }' "$w/ncu.csv"
tail -3 "$w/ncu.err"

echo
echo "== 5. where the threads wait (-j 4, three runs each)"
for dev in cuda cpu; do
    echo "-- --device $dev"
    python3 bench/proc_sample.py --repeat 3 --top 15 -- sh -c \
        "rm -rf '$w/out'; exec '$F' dequantize-for-export -q --no-sync --device $dev -j 4 '$w/m' '$w/out'"
done
