#!/usr/bin/env bash
# fuzz_dir_seeds.sh FUZZ_DIR OUTDIR - seed inputs for tests/fuzz_dir.c: every
# checkpoint directory of testdata/ (and the packed-FP4 release copies)
# encoded by the target's own encoder
# (structured shards, tensors past the fuzz build's element budget left out),
# once as it is and once with its first shard zstd-compressed, plus the
# target's built-in synthetic seeds.
set -euo pipefail
bin=$1 out=$2
mkdir -p "$out"
cd "$(dirname "$0")/.."
n=0
for d in testdata/llama-tiny testdata/deepseek-fp8-tiny testdata/deepseek-moe-tiny \
         testdata/quant-edge testdata/verify/*/ testdata/malformed/dir_*/ \
         testdata/releases/deepseek-v4 testdata/releases/gpt-oss testdata/releases/nvfp4-* \
         testdata/releases/mxfp4-ct testdata/releases/defect-*/; do
    [ -d "$d" ] || continue
    name=$(echo "${d%/}" | tr '/' '_')
    FUZZ_DIR_ENCODE=1 "$bin" "$out/$name" "$d"
    FUZZ_DIR_ENCODE=1 FUZZ_DIR_ZST=1 "$bin" "$out/$name.zst" "$d"
    n=$((n + 2))
done
for i in 0 1 2; do
    FUZZ_DIR_ENCODE=1 "$bin" "$out/synthetic-$i" "synthetic:$i"
    n=$((n + 1))
done
echo "fuzz_dir_seeds: $n seeds in $out"
