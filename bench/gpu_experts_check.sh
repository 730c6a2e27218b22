#!/usr/bin/env bash
# the GPU checks after the tiled transposed read (5f01b52): kernel cases, cuda = cpu end to end,
# and fused experts (Llama-4 Scout's sizes, both orientations) cuda against cpu, bytes and time
cd build/gpu-kit && export BUILD=. && TIMEFORMAT='%R'
env CK_DEFAULT_TIMEOUT=600 timeout 200 tests/gpu/check_gpu > /tmp/cg.log 2>&1; echo "check_gpu rc $?"; tail -1 /tmp/cg.log
timeout 200 bash tests/gpu/run.sh > /tmp/e2e.log 2>&1; echo "tests/gpu/run.sh rc $?"; tail -1 /tmp/e2e.log
for o in in-out out-in; do
    bench/make_model /tmp/x-$o experts $o >/dev/null || echo "make_model failed"
    cat /tmp/x-$o/* > /dev/null
    for s in nvfp4 mxfp4; do
        for d in cpu cuda; do
            best=
            for r in 1 2 3; do
                rm -rf /tmp/q-$d
                t=$( { time ./fp8conv quantize -q --no-sync --device $d --scheme $s /tmp/x-$o /tmp/q-$d; } 2>&1 | tail -1)
                [ -z "$best" ] || awk -v a=$t -v b=$best 'BEGIN{exit !(a<b)}' && best=$t
            done
            echo "experts $o $s --device $d: best of 3 $best s"
        done
        diff -r -q /tmp/q-cpu /tmp/q-cuda >/dev/null && echo "experts $o $s: cuda = cpu, same bytes" || echo "experts $o $s: OTHER BYTES"
    done
done
