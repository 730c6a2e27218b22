#!/usr/bin/env bash
# The GPU kit (make gpu-kit, bench/README.md) as far as a machine without a GPU
# can check it, in make test: a copy of the kit moved away from the build tree
# is under the size cap, every program in it loads only libraries of the kit
# or of the C library and GCC's C++ runtime, its programs start and say that
# no GPU is visible, its scripts call nothing that needs a compiler or the
# network, and run.sh --emulated --quick runs its steps on the CPU emulation.
#
#   tests/check_gpu_kit.sh [KIT]     (default build/gpu-kit)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
KIT=${1:-build/gpu-kit}
MAX_MIB=${KIT_MAX_MIB:-60}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }

[ -x "$KIT/run.sh" ] || [ -f "$KIT/run.sh" ] || { echo "check-gpu-kit: no $KIT/run.sh: run make gpu-kit" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the copy: nothing may reach back into the build tree
cp -r "$KIT" "$work/kit"
k=$work/kit

mib=$(du -sm "$k" | cut -f1)
if [ "$mib" -le "$MAX_MIB" ]; then ok "size: $mib MiB (at most $MAX_MIB)"; else bad "size: $mib MiB, over $MAX_MIB"; fi

system='^/(usr/)?lib(64|/x86_64-linux-gnu|/aarch64-linux-gnu)?/(ld-linux[^/]*|libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so'
elfs=$(find "$k" -type f -perm -u+x -exec sh -c 'head -c 4 "$1" | grep -q ELF' _ {} \; -print | sort)
nelf=0 lddbad=0
for f in $elfs; do
    nelf=$((nelf + 1))
    while read -r line; do
        case $line in
        *"not found"*) echo "  $f: $line" >&2; lddbad=1 ;;
        *"=> /"*)
            p=$(awk '{ print $3 }' <<<"$line")
            r=$(realpath "$p")
            if [[ $r == "$k"/* ]] || grep -q -E "$system" <<<"$p"; then :; else
                echo "  $f: $line (neither in the kit nor a system library)" >&2
                lddbad=1
            fi ;;
        esac
    done < <(ldd "$f" 2>&1)
    if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -v -q -F '$ORIGIN/lib:$ORIGIN/../lib:$ORIGIN/../../lib'; then
        echo "  $f: $(readelf -d "$f" | grep -E 'R(UN)?PATH')" >&2
        lddbad=1
    fi
done
if [ "$nelf" -ge 7 ] && [ $lddbad = 0 ]; then
    ok "ldd: $nelf programs load only the kit's libraries ($(ls "$k/lib" | tr '\n' ' ')) and the system's"
else
    bad "ldd: $nelf programs (7 expected), or a library from outside the kit and the system"
fi

v=$("$k/fp8conv" --version 2>&1)
if grep -q '^gpus: none visible' <<<"$v" && grep -q '^cuda: compiled for .*sm_90a' <<<"$v"; then
    ok "fp8conv --version: $(grep '^cuda' <<<"$v"), $(grep '^gpus' <<<"$v")"
else
    bad "fp8conv --version: $v"
fi
# the GPU programs start, and refuse to pass without a GPU (exit 2)
started=1
for p in tests/gpu/check_gpu tests/gpu/check_e4m3_cvt; do
    out=$(cd "$k" && "./$p" 2>&1) && rc=0 || rc=$?
    if [ "$rc" != 2 ] || ! grep -q 'nothing was tested' <<<"$out"; then
        echo "  $p: exit $rc: $out" >&2
        started=0
    fi
done
out=$("$k/bench/gpu_bench" 2>&1) && rc=0 || rc=$?
grep -q '^usage: gpu_bench' <<<"$out" || { echo "  gpu_bench: exit $rc: $out" >&2; started=0; }
out=$("$k/bench/make_model" 2>&1) && rc=0 || rc=$?
grep -q -i 'usage' <<<"$out" || { echo "  make_model: exit $rc: $out" >&2; started=0; }
if [ $started = 1 ]; then ok "check_gpu, check_e4m3_cvt, gpu_bench and make_model start (no GPU: exit 2)"; else
    bad "a kit program did not start as expected"; fi

# no compiler, package manager or network in the kit's scripts (comments aside)
if cat "$k/run.sh" "$k/tests/gpu/run.sh" "$k/bench/gpu_run.sh" "$k/bench/torch_peer.py" \
    "$k/tests/gpu/tensor_cuda.py" "$k/tests/gpu/engines_cuda.py" |
    grep -v -E '^\s*#' | grep -n -E '(^|[;&|(`]|\$\(|\s)(make|apt-get|apt|nvcc|cc|gcc|g\+\+|curl|wget|pip3?|git|ssh|scp)(\s|$)'; then
    bad "a kit script calls a compiler, a package manager or the network (lines above)"
else
    ok "the kit's scripts call no compiler, package manager or network tool"
fi

# the kit's Python package loads the kit's libfp8conv.so, built with CUDA
if (cd "$k" && FP8CONV_LIBRARY="$k/lib/libfp8conv.so" python3 -c \
    'import sys; sys.path.insert(0, "python"); from fp8conv import _tensor; sys.exit(0 if _tensor.cuda_compiled() else 1)'); then
    ok "python/fp8conv loads lib/libfp8conv.so, which has the CUDA path (fp8_cuda_compiled)"
else
    bad "python/fp8conv with lib/libfp8conv.so: no CUDA path, or it does not load"
fi

# no script of the kit opens /dev/stdout or /dev/stderr: where the kit sends
# both to one log file, opening either truncates the log (the H100 run lost
# its end-to-end lines to a `tee /dev/stderr`)
if cat "$k/run.sh" "$k/tests/gpu/run.sh" "$k/bench/gpu_run.sh" | grep -v -E '^\s*#' | grep -n -F -e /dev/stderr -e /dev/stdout; then
    bad "a kit script opens /dev/stdout or /dev/stderr, which truncates a log file (lines above)"
else
    ok "the kit's scripts open no /dev/stdout or /dev/stderr"
fi

# run.sh --emulated --quick, without network where this machine lets us take it away
netns=()
if unshare -n true 2>/dev/null; then netns=(unshare -n); fi
"${netns[@]}" bash "$k/run.sh" --emulated --quick "$work/out" >"$work/run.log" 2>&1 && rc=0 || rc=$?
nfiles=$(find "$work/out" -type f | wc -l)
if [ "$rc" = 0 ] && grep -q -E '^kernel cases \(CPU emulation\) +[0-9]+ s +ok' "$work/out/summary.txt" &&
    grep -q -E '^end to end cpu = cuda \(emulated\) +[0-9]+ s +ok' "$work/out/summary.txt" &&
    [ "$(awk '/^step +time/ { t = 1; next } t && /^$/ { exit } t { n++ } END { print n }' "$work/out/summary.txt")" = 9 ] &&
    [ "$(tail -c 200 "$work/run.log")" = "$(tail -c 200 "$work/out/summary.txt")" ] &&
    [ "$nfiles" -le 9 ]; then
    ok "run.sh --emulated --quick${netns:+ (no network)}: 9 steps in the table, printed last, $nfiles files in OUT"
else
    bad "run.sh --emulated --quick: exit $rc, $nfiles files in OUT"
    cat "$work/run.log" >&2
fi

echo "check-gpu-kit end to end: $pass passed, $fail failed"
[ $fail = 0 ]
