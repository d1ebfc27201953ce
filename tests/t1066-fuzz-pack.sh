#!/usr/bin/env bash
# Replay the Q4NX pack-manifest fuzz corpus (seeds: a valid manifest and the bad packs of
# t1065; plus what libFuzzer found) through the pack reader and the model loader built with
# AddressSanitizer and UBSan: no crash, no out-of-bounds read, no leak.
# A longer run: make bin/fuzz/fuzz-pack && bin/fuzz/fuzz-pack tests/fuzz/corpus-pack
. "$(dirname "$0")/lib.sh"
plan 2
n=$(compgen -G "$OB_TOP/tests/fuzz/corpus-pack/*" | wc -l)
[ "$n" -ge 10 ]; ok $? "corpus has $n inputs"
out=$(ASAN_OPTIONS=detect_leaks=1 "$OB_TOP/bin/replay/fuzz-pack" "$OB_TOP/tests/fuzz/corpus-pack" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
ok $? "replay of $n inputs under ASan/UBSan" || tail -20 <<<"$out" | sed 's/^/# /'
