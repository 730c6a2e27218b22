#!/usr/bin/env bash
# The arithmetic nvcc emitted for the kernels (PTX file $1) is the IEEE
# arithmetic of the CPU reference: every fp32 division div.rn, every
# multiplication mul.rn, no fma (contraction), no .ftz, no approximations.
set -euo pipefail
ptx=$1
fail=0
bad() { echo "check-ptx: $ptx: $1:" >&2; grep -n -m5 -E "$2" "$ptx" >&2; fail=1; }
grep -q -E '\bdiv\.rn\.f32\b' "$ptx" || { echo "check-ptx: no div.rn.f32 in $ptx" >&2; fail=1; }
! grep -q -E '\.ftz\b' "$ptx" || bad "flush-to-zero arithmetic" '\.ftz\b'
! grep -q -E '\bfma\.[a-z]+\.f32\b' "$ptx" || bad "fused multiply-add" '\bfma\.[a-z]+\.f32\b'
! grep -q -E '\b(div\.(approx|full)|rcp\.approx|ex2\.approx|lg2\.approx)' "$ptx" ||
    bad "approximate arithmetic" '\b(div\.(approx|full)|rcp\.approx|ex2\.approx|lg2\.approx)'
! grep -q -E '\b(add|sub|mul)\.f32\b' "$ptx" || bad "arithmetic without an explicit .rn" '\b(add|sub|mul)\.f32\b'
[ $fail = 0 ] && echo "check-ptx: $ptx: IEEE fp32 only ($(grep -c -E '\bdiv\.rn\.f32\b' "$ptx") div.rn.f32, $(grep -c -E '\bmul\.rn\.f32\b' "$ptx") mul.rn.f32)"
exit $fail
