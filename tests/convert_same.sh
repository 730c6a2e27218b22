#!/bin/sh
# convert_same.sh OLD NEW [WORK]: every convert of every input class (the
# release copies, the old binary's quantize outputs of llama-tiny), with both
# binaries; compares exit status, stdout (seconds masked), stderr and every
# output byte.  Prints the differing cases and a count; exit 1 on a difference.
OLD=$1 NEW=$2 WORK=${3:-/tmp/convert_same.$$}
T=$(cd "$(dirname "$0")/.." && pwd)/testdata
rm -rf "$WORK"; mkdir -p "$WORK/in"
for s in block channel tensor mxfp8 nvfp4 mxfp4; do
  for f in hf-fp8 compressed-tensors modelopt; do
    "$OLD" quantize -q --scheme $s --format $f "$T/llama-tiny" "$WORK/in/q-$s-$f" 2>/dev/null
  done
done
for d in "$T"/releases/*/; do ln -s "$d" "$WORK/in/r-$(basename "$d")"; done
n=0 bad=0
run() { # name args...
  name=$1; shift
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    o=$WORK/$b/$name; mkdir -p "$o"
    rm -rf "$WORK/cur"; mkdir -p "$WORK/cur"
    "$bin" convert "$@" "$WORK/cur/out" >"$o/stdout" 2>"$o/stderr"; echo $? >"$o/rc"
    [ -e "$WORK/cur/out" ] && mv "$WORK/cur/out" "$o/out"
    sed -i 's/"seconds":[[:space:]0-9.e+-]*/"seconds":X/; s/[0-9.]* s on /X s on /' "$o/stdout"
  done
  n=$((n + 1))
  if ! diff -r "$WORK/old/$name" "$WORK/new/$name" >/dev/null 2>&1; then
    bad=$((bad + 1)); echo "DIFF $name: $*"
  fi
}
for i in "$WORK"/in/*; do
  base=$(basename "$i")
  k=0
  while IFS= read -r opts; do
    k=$((k + 1))
    # shellcheck disable=SC2086
    run "$base.$k" $opts "$i"
  done <<OPTS

--json
--exact
--format hf-fp8
--format compressed-tensors
--format modelopt
--format compressed-tensors --json
--format modelopt --json
--format modelopt --exact
--scheme block
--scheme channel
--scheme tensor
--scheme mxfp8
--scheme nvfp4
--scheme block --format compressed-tensors
--scheme tensor --format modelopt
--scheme channel --format compressed-tensors --exact
--scheme mxfp8 --format compressed-tensors
--block 64x64
--block 16x16 --exact
--block 128x128 --scale-fmt ue8m0
--scale-fmt ue8m0
--block 32x32 --scale-fmt ue8m0 --json
--kv-names modelopt
--kv-names llm-compressor --format compressed-tensors
--kv-names fused-qkv --json
--kv-names bogus
--scale-fmt float
--scheme block --block 128x128 --scale-fmt ue8m0 --format hf-fp8
-j 1 --format compressed-tensors
--like $T/releases/redhat-fp8-block
OPTS
done
echo "$n cases, $bad differ ($WORK)"
[ $bad = 0 ]
