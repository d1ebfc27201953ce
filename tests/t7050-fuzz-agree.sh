#!/usr/bin/env bash
# Replay the record-reader fuzz corpus (tests/fuzz/corpus-agree: seeds from the agree and URL
# fixtures, hostile values, and what libFuzzer found) through lib/agree.c and the URL route's
# reply reader, built with AddressSanitizer and UBSan: no crash, no out-of-bounds read, no leak.
# A longer run: make fuzz && bin/fuzz/fuzz-agree tests/fuzz/corpus-agree
. "$(dirname "$0")/lib.sh"
plan 2
R=$OB_TOP/bin/replay/fuzz-agree
# make check builds the replays; a plain `make` does not: bring it up to date here (a no-op
# when it is; the first build compiles the library with the sanitizers, minutes on 2 cores)
make -s -C "$OB_TOP" bin/replay/fuzz-agree > /dev/null 2>&1
n=$(compgen -G "$OB_TOP/tests/fuzz/corpus-agree/*" | wc -l)
[ "$n" -ge 16 ]; ok $? "corpus has $n inputs"
out=$(ASAN_OPTIONS=detect_leaks=1 "$R" "$OB_TOP/tests/fuzz/corpus-agree" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out" && [ "$(grep -c '^ok' <<<"$out")" -eq "$n" ]
ok $? "replay of $n inputs under ASan/UBSan" || tail -20 <<<"$out" | sed 's/^/# /'
