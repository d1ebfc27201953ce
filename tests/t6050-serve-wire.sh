#!/usr/bin/env bash
# 1b-serve's wire layer without a server (lib/net/oai-server.c): the unit tests (every float32
# logprob reads back to its bits from the JSON text, streamed pieces equal the whole text,
# JSON escaping of any bytes, request fields and errors), then the request-body fuzz corpus
# (seeds + what libFuzzer found) replayed through the body parser, prompt tokenizer and answer
# formatter built with AddressSanitizer and UBSan: no crash, no out-of-bounds access, no leak,
# every answer and stream chunk valid JSON, streamed text equal to the whole text.
# A longer fuzzing run:
#   make bin/fuzz/fuzz-serve && bin/fuzz/fuzz-serve tests/fuzz/corpus-serve -max_total_time=180
. "$(dirname "$0")/lib.sh"
plan 3
out=$("$UNIT/serve" 2>&1); rc=$?
ok $rc "unit tests ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'
n=$(compgen -G "$OB_TOP/tests/fuzz/corpus-serve/*" | wc -l)
[ "$n" -ge 20 ]; ok $? "corpus has $n inputs"
out=$(ASAN_OPTIONS=detect_leaks=1 "$OB_TOP/bin/replay/fuzz-serve" "$OB_TOP/tests/fuzz/corpus-serve" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
ok $? "replay of $n inputs under ASan/UBSan" || tail -20 <<<"$out" | sed 's/^/# /'
