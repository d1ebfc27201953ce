#!/usr/bin/env bash
# Replay the GGUF fuzz corpus (seeds + what libFuzzer found) through the reader built with
# AddressSanitizer and UBSan: no crash, no out-of-bounds read, no leak; the harness also builds
# each file's tokenizer and renders its chat template as a command would (seeds tok-*: small
# vocabularies, real-shaped and hostile, written with the gguf package), and scans each input
# and its prefixes as archive extraction does (ob_gguf_scan: a prefix that scans gives the
# whole file's size; one refused outright is refused whole).
# A longer run: make fuzz && bin/fuzz/fuzz-gguf tests/fuzz/corpus-gguf
. "$(dirname "$0")/lib.sh"
plan 4
n=$(compgen -G "$OB_TOP/tests/fuzz/corpus-gguf/*" | wc -l)
[ "$n" -ge 10 ]; ok $? "corpus has $n inputs"
out=$(ASAN_OPTIONS=detect_leaks=1 "$OB_TOP/bin/replay/fuzz-gguf" "$OB_TOP/tests/fuzz/corpus-gguf" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
ok $? "replay of $n inputs under ASan/UBSan" || tail -20 <<<"$out" | sed 's/^/# /'
# the tokenizer seeds reach the tokenizer and the chat template (the replay's checks run there)
log=$(OB_FUZZ_GGUF_VERBOSE=1 "$OB_TOP/bin/replay/fuzz-gguf" "$OB_TOP"/tests/fuzz/corpus-gguf/tok-* 2>&1 >/dev/null)
b=$(grep -c '^tokenizer: built$' <<<"$log"); c=$(grep -c '^chat: tokenized$' <<<"$log")
[ "$b" -ge 8 ] && [ "$c" -ge 3 ]
ok $? "tokenizers built from $b seeds, chat templates tokenized from $c"
# the scan's checks run on headers it accepts, not only on refusals
s=$(OB_FUZZ_GGUF_VERBOSE=1 "$OB_TOP/bin/replay/fuzz-gguf" "$OB_TOP/tests/fuzz/corpus-gguf" 2>&1 >/dev/null |
    grep -c '^scan: sized$')
[ "$s" -ge 100 ]; ok $? "the scan sized $s of the $n inputs (and their prefixes were checked against them)"
