#!/usr/bin/env bash
# GGUF reader and writer: unit tests (round trip, truncations, hostile headers), and
# interoperability with the independent gguf Python package in both directions, on files
# exercising every metadata type and on real models.
. "$(dirname "$0")/lib.sh"
plan 7

out=$("$UNIT/gguf" "$T" 2>&1); rc=$?
ok $rc "unit: reader and writer ($(grep -c '^ok' <<<"$out") checks)" || grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'

if need_python gguf numpy; then
    dump_same() {   # label file
        "$UNIT/gguf-dump" "$2" > "$T/ours.json" 2>"$T/err" && "$PY" "$OB_TOP/tests/py/gguf_dump.py" "$2" > "$T/theirs.json" 2>>"$T/err"
        local rc=$?
        [ $rc -eq 0 ] && cmp -s "$T/ours.json" "$T/theirs.json"
        ok $? "$1" || { head -5 "$T/err" | sed 's/^/# /'; diff <(tr ',' '\n' <"$T/ours.json") <(tr ',' '\n' <"$T/theirs.json") | head -10 | sed 's/^/# /'; }
    }
    "$UNIT/gguf-dump" --write-all "$T/ours.gguf"
    dump_same "a file we write reads identically with the gguf package" "$T/ours.gguf"
    "$PY" "$OB_TOP/tests/py/gguf_dump.py" --write-all "$T/theirs.gguf"
    dump_same "a file the gguf package writes reads identically with ours" "$T/theirs.gguf"
    dump_same "real model stories260K reads identically" "$SHARED/models/stories260K.gguf"
    if [ -f "$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
        dump_same "real model SmolLM2-135M Q4_1 reads identically" "$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    else
        skip "real model SmolLM2-135M Q4_1 reads identically" "run scripts/models"
    fi
    "$BIN/1b-synth" --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" --vocab 4000 -o "$T/syn.gguf"
    dump_same "a synthetic qwen3 model reads identically" "$T/syn.gguf"
else
    for i in 1 2 3 4 5; do skip "gguf package interop $i" "python gguf package missing (scripts/setup)"; done
fi

# a file rejected by the reader gets a located message, not a crash
head -c 5000 "$SHARED/models/stories260K.gguf" > "$T/cut.gguf"
out=$("$UNIT/gguf-dump" "$T/cut.gguf" 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "offset [0-9]*:" <<<"$out"; ok $? "truncated real model: exit 3 with a byte offset ($out)"
