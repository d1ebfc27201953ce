#!/usr/bin/env bash
# The thread pool under stress: every task of every run exactly once, on pools with more
# threads than cores (tests/unit/pool.c).
. "$(dirname "$0")/lib.sh"
plan 1
out=$("$UNIT/pool" 2>&1); rc=$?
ok $rc "unit: thread pool ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^ok' <<<"$out" | sed 's/^/#   /'
