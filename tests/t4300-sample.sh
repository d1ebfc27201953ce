#!/usr/bin/env bash
# t4300-sample.sh — log-probabilities and sampling (lib/sample.c):
#   the unit tests (greedy ties, top_logprobs order, filters on hand-made vocabularies, the
#   draw against its definition, determinism, chi-square of empirical distributions, both
#   compiled loop variants, speed on a 151936-token row), then tests/py/sample_oracle.py: the
#   pipeline of lib/sample.h in float64 with numpy on 3000 random rows (some of 151936
#   logits), which must agree on every token except where a decision sits within float32
#   rounding of a boundary, and on the log-probabilities.
. "$(dirname "$0")/lib.sh"

plan 5

ORACLE=$OB_TOP/tests/py/sample_oracle.py

check "sampling unit tests" "$UNIT/sample"
# bench/sample runs (its figures are bench/README's; here a small vocabulary, once)
out=$("$BIN/bench/sample" 4096 1 2>&1) && [ "$(grep -cE '^[a-zT].* [0-9]+\.[0-9]$' <<<"$out")" -eq 12 ]
ok $? "bench/sample: 12 configurations timed" || printf '%s\n' "$out" | head -5 | sed 's/^/# /'
OB_SIMD=scalar check "sampling unit tests, plain loops (OB_SIMD=scalar)" "$UNIT/sample"

if need_python numpy; then
    out=$("$PY" "$ORACLE" check "$UNIT/sample" --cases 3000 --seed 1 2>&1)
    rc=$?
    printf '# %s\n' "$(printf '%s\n' "$out" | tail -1)"
    ok $rc "tokens and logprobs agree with the float64 numpy oracle" ||
        printf '%s\n' "$out" | head -30 | sed 's/^/# /'
    ! "$PY" "$ORACLE" check "$UNIT/sample" --cases 300 --seed 3 --variant sorted-draw \
        > /dev/null 2>&1
    ok $? "the oracle tells a different draw order apart (so it compares something)"
else
    skip "tokens and logprobs agree with the float64 numpy oracle" "numpy missing (scripts/setup)"
    skip "the oracle tells a different draw order apart" "numpy missing (scripts/setup)"
fi
