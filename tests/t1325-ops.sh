#!/usr/bin/env bash
# The cpu route's exp, swiglu and attention kernels at every SIMD level against arith.h, bit
# for bit (tests/unit/ops.c).
. "$(dirname "$0")/lib.sh"
plan 1
out=$("$UNIT/ops" 2>&1); rc=$?
ok $rc "unit: elementwise and attention kernels ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^ok' <<<"$out" | sed 's/^/#   /'
