#!/usr/bin/env bash
# Replay the GGUF fuzz corpus (seeds + what libFuzzer found) through the reader built with
# AddressSanitizer and UBSan: no crash, no out-of-bounds read, no leak.
# A longer run: make fuzz && bin/fuzz/fuzz-gguf tests/fuzz/corpus-gguf
. "$(dirname "$0")/lib.sh"
plan 2
n=$(compgen -G "$OB_TOP/tests/fuzz/corpus-gguf/*" | wc -l)
[ "$n" -ge 10 ]; ok $? "corpus has $n inputs"
out=$(ASAN_OPTIONS=detect_leaks=1 "$OB_TOP/bin/replay/fuzz-gguf" "$OB_TOP/tests/fuzz/corpus-gguf" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
ok $? "replay of $n inputs under ASan/UBSan" || tail -20 <<<"$out" | sed 's/^/# /'
