#!/usr/bin/env bash
# The canonical scalar arithmetic (lib/arith/arith.h): exp/log ulp sweeps against float64, the fixed
# reduction shapes, norms, softmax, RoPE pairing, activation quantisation.
. "$(dirname "$0")/lib.sh"
plan 1
out=$("$UNIT/arith" 2>&1); rc=$?
ok $rc "unit: canonical arithmetic ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^#' <<<"$out" || true
