#!/usr/bin/env bash
# End-to-end half of make check-gpu: the binary with --device cuda writes
# the same files as with --device cpu (every scheme, the bundled fixtures and
# a generated 1 GiB model), reports bad input exactly as the CPU does, and a
# CUDA failure mid-run is exit 5 with nothing left behind.
#
#   run.sh              on the GPU, with $BUILD/fp8conv
#   run.sh --emulated   in make test: with $BUILD/tests/fp8conv-emu, whose
#                       "GPU" is the CPU emulation of the kernels
#                       (tests/kernels_emu.cpp); the bundled fixtures only
# E2E_QUICK=1 keeps one fixture, two schemes, one dequantize and one convert
# case (the GPU kit's own test runs its plumbing so, in seconds).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
F=$BUILD/fp8conv
emulated=${1:-}
if [ "$emulated" = --emulated ]; then F=$BUILD/tests/fp8conv-emu; fi
version=$("$F" --version)
if ! grep -q '^gpu 0: ' <<<"$version"; then
    echo "check-gpu: $F --version lists no GPU: nothing was tested" >&2
    exit 2
fi
grep '^gpu 0: ' <<<"$version"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
pass=0

same() { # NAME: $work/cpu and $work/cuda hold identical trees
    if diff -r "$work/cpu" "$work/cuda" >/dev/null; then
        pass=$((pass + 1))
    else
        echo "FAIL: $1: --device cuda and --device cpu differ" >&2
        fail=1
    fi
    rm -rf "$work/cpu" "$work/cuda"
}

quick=${E2E_QUICK:-0}
if [ "$quick" = 1 ]; then
    "$BUILD/bench/make_model" "$work/model" 1 640 >/dev/null
    models="testdata/llama-tiny"
elif [ "$emulated" = --emulated ]; then
    # the emulation is slow: a narrow model, whose down_proj (640 x 14336)
    # still spans three jobs, one a band that starts and ends mid block
    "$BUILD/bench/make_model" "$work/model" 1 640 >/dev/null
    models="testdata/llama-tiny testdata/deepseek-moe-tiny testdata/quant-edge"
    for s in "" "--scheme channel" "--scheme tensor"; do
        # shellcheck disable=SC2086
        "$BUILD/fp8conv" quantize -q --no-sync $s --device cpu "$work/model" "$work/cpu"
        # shellcheck disable=SC2086
        "$F" quantize -q --no-sync $s --device cuda "$work/model" "$work/cuda"
        same "quantize $s (narrow model, several jobs a tensor)"
    done
else
    "$BUILD/bench/make_model" "$work/model" 2 >/dev/null
    models="testdata/llama-tiny testdata/deepseek-moe-tiny testdata/quant-edge $work/model"
fi
schemes=("" "--scheme channel" "--scheme tensor" "--scheme mxfp8" "--scheme mxfp8 --mx-rounding floor"
    "--scale-fmt ue8m0" "--block 64x32" "--scheme channel --format compressed-tensors"
    "--scheme tensor --format compressed-tensors")
[ "$quick" = 1 ] && schemes=("" "--scheme mxfp8")
for m in $models; do
    for s in "${schemes[@]}"; do
        # shellcheck disable=SC2086
        "$BUILD/fp8conv" quantize -q --no-sync $s --device cpu "$m" "$work/cpu"
        # shellcheck disable=SC2086
        "$F" quantize -q --no-sync $s --device cuda "$m" "$work/cuda"
        same "quantize $s $m"
    done
done
# packed-FP4 quantize (issue 26): the kernel's bytes are fp4_quantize_row's;
# fp4-edge holds what the GPU hands back to the CPU (MXFP4 quotients from
# bf16 below 2^-126 beside a group max of 2^100) and E2M1 threshold ties,
# zeros, -0 and subnormals, in bf16 and f32
python3 - "$work/fp4-edge" <<'PY'
import json, os, random, struct, sys
os.makedirs(sys.argv[1])
random.seed(26)
ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0]
def row(k, n):
    out = []
    for i in range(n):
        s, u = random.choice((-1.0, 1.0)), random.random()
        if k == 0:
            out.append(2.0 ** 100 if i % 32 == 0 else s * 2.0 ** -random.randint(30, 41) * (1 + u))
        elif k == 1:
            out.append(6.0 if i % 16 == 0 else s * random.choice(ties) * random.choice((1.0, 0.5)))
        elif k == 2:
            out.append(random.choice((0.0, -0.0, s * u)))
        elif k == 3:
            out.append(s * u * 2.0 ** -random.randint(126, 141))
        else:
            out.append(s * u * 2.0 ** random.randint(-20, 12))
    return out
vals = [v for r in range(40) for v in row(r % 5, 256)]
f32 = struct.pack("<%df" % len(vals), *vals)
bf16 = b"".join(f32[i + 2:i + 4] for i in range(0, len(f32), 4))  # truncated: exact bf16 values
hdr, data = {}, b""
for name, dt, b in (("model.layers.0.mlp.down_proj.weight", "BF16", bf16),
                    ("model.layers.0.mlp.up_proj.weight", "F32", f32)):
    hdr[name] = {"dtype": dt, "shape": [40, 256], "data_offsets": [len(data), len(data) + len(b)]}
    data += b
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(os.path.join(sys.argv[1], "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + data)
json.dump({"model_type": "llama", "hidden_size": 256}, open(os.path.join(sys.argv[1], "config.json"), "w"))
PY
# fused 3-D MoE experts, written one weight per expert: stored [E, in, out]
# (Llama-4, read transposed: on the GPU in whole bands, on the CPU in tiles)
# and [E, out, in] (Qwen3-MoE in transformers v5, row slices); the names
# and the hidden size that tells the two apart are fp8conv-formats(5)'s
python3 - "$work" <<'PY'
import json, os, random, struct, sys
random.seed(27)
E, H, I = 2, 256, 384
for d, stem, t, shapes in (
        ("experts-in-out", "language_model.model.layers.0.feed_forward.experts",
         {"model_type": "llama4", "text_config": {"model_type": "llama4_text", "hidden_size": H}},
         ((E, H, 2 * I), (E, I, H))),
        ("experts-out-in", "model.layers.0.mlp.experts",
         {"model_type": "qwen3_moe", "hidden_size": H}, ((E, 2 * I, H), (E, H, I)))):
    hdr, data = {}, b""
    for name, shape in ((stem + ".gate_up_proj", shapes[0]), (stem + ".down_proj", shapes[1])):
        n = shape[0] * shape[1] * shape[2]
        f32 = struct.pack("<%df" % n, *(random.gauss(0, 0.02) for _ in range(n)))
        b = b"".join(f32[i + 2:i + 4] for i in range(0, len(f32), 4))  # truncated: exact bf16
        hdr[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(os.path.join(sys.argv[1], d))
    open(os.path.join(sys.argv[1], d, "model.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + data)
    json.dump(t, open(os.path.join(sys.argv[1], d, "config.json"), "w"))
PY
fp4q_models=(testdata/llama-tiny "$work/fp4-edge" "$work/model" "$work/experts-in-out"
    "$work/experts-out-in")
[ "$quick" = 1 ] && fp4q_models=(testdata/llama-tiny)
for m in "${fp4q_models[@]}"; do
    for s in nvfp4 mxfp4; do
        "$BUILD/fp8conv" quantize -q --no-sync --scheme $s --device cpu "$m" "$work/cpu"
        "$F" quantize -q --no-sync --scheme $s --device cuda "$m" "$work/cuda"
        same "quantize --scheme $s $m"
    done
done
"$BUILD/fp8conv" quantize -q --no-sync --device cpu "$work/model" "$work/model-fp8"
"$BUILD/fp8conv" quantize -q --no-sync --device cpu --scheme mxfp8 "$work/model" "$work/model-mx"
dq_models=(testdata/deepseek-fp8-tiny "$work/model-fp8" "$work/model-mx") dq_dtypes="bf16 f16 f32"
[ "$quick" = 1 ] && dq_models=(testdata/deepseek-fp8-tiny) dq_dtypes=bf16
for m in "${dq_models[@]}"; do
    for d in $dq_dtypes; do
        "$BUILD/fp8conv" dequantize-for-export -q --no-sync --dtype $d --device cpu "$m" "$work/cpu"
        "$F" dequantize-for-export -q --no-sync --dtype $d --device cuda "$m" "$work/cuda"
        same "dequantize-for-export --dtype $d $m"
    done
done
# packed FP4 (issue 25): the release copies, and on a GPU generated models of
# about 1 GB of bf16 out (bench/make_fp4_model.c), each exported to every
# dtype on both devices; the FP4 kernel's bytes are the reference's
fp4_models=(testdata/releases/gpt-oss testdata/releases/deepseek-v4 testdata/releases/nvfp4-modelopt
    testdata/releases/nvfp4-ct testdata/releases/nvfp4-modelopt-amax testdata/releases/nvfp4-ct-amax)
if [ "$quick" = 1 ]; then
    fp4_models=(testdata/releases/gpt-oss testdata/releases/nvfp4-ct)
elif [ "$emulated" != --emulated ]; then
    "$BUILD/bench/make_fp4_model" "$work/gpt-oss" gpt-oss >/dev/null
    "$BUILD/bench/make_fp4_model" "$work/nvfp4" nvfp4-modelopt >/dev/null
    fp4_models+=("$work/gpt-oss" "$work/nvfp4")
fi
for m in "${fp4_models[@]}"; do
    for d in $dq_dtypes; do
        "$BUILD/fp8conv" dequantize-for-export -q --no-sync --dtype $d --device cpu "$m" "$work/cpu"
        "$F" dequantize-for-export -q --no-sync --dtype $d --device cuda "$m" "$work/cuda"
        same "dequantize-for-export (packed FP4) --dtype $d $m"
    done
done
rm -rf "$work/gpt-oss" "$work/nvfp4"
# an E8M0 NaN scale of an FP4 expert: the same exit 3 and message on both devices
for dev in cpu cuda; do
    bin=$F
    [ $dev = cpu ] && bin=$BUILD/fp8conv
    "$bin" dequantize-for-export --device $dev testdata/releases/defect-deepseek-v4-nan-e8m0 \
        "$work/out-$dev" 2>"$work/err-$dev" && rc=0 || rc=$?
    echo "$rc" >>"$work/err-$dev"
done
if cmp -s "$work/err-cpu" "$work/err-cuda" && grep -q '^3$' "$work/err-cuda" && [ ! -e "$work/out-cuda" ]; then
    pass=$((pass + 1))
else
    echo "FAIL: FP4 NaN scale: cpu and cuda disagree:" >&2
    cat "$work/err-cpu" "$work/err-cuda" >&2
    fail=1
fi

# convert's value path quantizes on the device too (its exact path copies); small
# inputs, as the emulation is slow
"$BUILD/fp8conv" quantize -q --no-sync --device cpu --block 32x32 testdata/llama-tiny \
    "$work/llama-fp8"
cv_models=(testdata/deepseek-fp8-tiny "$work/llama-fp8")
cv_schemes=("--scheme channel" "--block 256x128" "--scheme tensor --format compressed-tensors")
[ "$quick" = 1 ] && cv_models=(testdata/deepseek-fp8-tiny) cv_schemes=("--scheme channel")
for m in "${cv_models[@]}"; do
    for s in "${cv_schemes[@]}"; do
        # shellcheck disable=SC2086
        "$BUILD/fp8conv" convert -q --no-sync $s --device cpu "$m" "$work/cpu"
        # shellcheck disable=SC2086
        "$F" convert -q --no-sync $s --device cuda "$m" "$work/cuda"
        same "convert $s $m"
    done
done

# bad input: the same exit status and message on both devices
python3 - "$work/nan.safetensors" <<'EOF'
import json, struct, sys
data = bytearray(struct.pack("<H", 0x3F80) * 4096)
struct.pack_into("<H", data, 2 * 3001, 0x7FC0)  # a NaN at row 23, column 57
hdr = json.dumps({"w.weight": {"dtype": "BF16", "shape": [32, 128], "data_offsets": [0, len(data)]}}).encode()
hdr += b" " * (-len(hdr) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hdr)) + hdr + data)
EOF
for s in "" "--scheme tensor" "--scheme mxfp8" "--scheme nvfp4" "--scheme mxfp4"; do
    for dev in cpu cuda; do
        bin=$F
        [ $dev = cpu ] && bin=$BUILD/fp8conv
        # shellcheck disable=SC2086
        "$bin" quantize $s --device $dev "$work/nan.safetensors" "$work/out-$dev.safetensors" \
            2>"$work/err-$dev" && rc=0 || rc=$?
        echo "$rc" >>"$work/err-$dev"
    done
    if cmp -s "$work/err-cpu" "$work/err-cuda" && grep -q '^3$' "$work/err-cuda" &&
        [ ! -e "$work/out-cuda.safetensors" ]; then
        pass=$((pass + 1))
    else
        echo "FAIL: NaN input, $s: cpu and cuda disagree:" >&2
        cat "$work/err-cpu" "$work/err-cuda" >&2
        fail=1
    fi
done

# a CUDA failure mid-run (the 5th GPU call fails): exit 5, nothing left
for cmd in "quantize $work/model" "dequantize-for-export $work/model-fp8" \
    "dequantize-for-export testdata/releases/deepseek-v4" "quantize --scheme mxfp4 $work/model"; do
    mkdir -p "$work/fault"
    # shellcheck disable=SC2086
    FP8CONV_CUDA_FAULT=5 "$F" $cmd --device cuda "$work/fault/out" 2>"$work/err" && rc=0 || rc=$?
    if [ "$rc" = 5 ] && grep -q 'cuda: ' "$work/err" && [ -z "$(ls -A "$work/fault")" ]; then
        pass=$((pass + 1))
    else
        echo "FAIL: injected CUDA fault in $cmd: exit $rc, left: $(ls -A "$work/fault")" >&2
        cat "$work/err" >&2
        fail=1
    fi
    rm -rf "$work/fault"
done

echo "check-gpu end to end${emulated:+ ($emulated)}$([ "$quick" = 1 ] && echo ' (quick)'): $pass passed, $([ $fail = 0 ] && echo 0 || echo some) failed"
exit $fail
