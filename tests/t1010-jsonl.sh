#!/usr/bin/env bash
# Records: exact float32/float64 text round trips over millions of values, non-finite values
# as strings, the line reader's errors and line numbers, ob_json_parse refusing what cJSON
# would cut short (\u0000, bad escapes, raw control bytes, ill-formed UTF-8) and carrying the
# rest whole, the writer's output always valid UTF-8.
. "$(dirname "$0")/lib.sh"
plan 1
out=$("$UNIT/jsonl" "$T" 2>&1); rc=$?
ok $rc "unit: records and exact floats ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
grep '^#' <<<"$out" || true
