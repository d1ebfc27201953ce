#!/usr/bin/env bash
# t4100-tok.sh — the tokenizer against reference implementations, on a corpus of tricky text
# (tests/data/tok-corpus.jsonl: numbers, contractions, whitespace runs, scripts, emoji,
# combining marks, code, special-token look-alikes, long runs, invalid UTF-8).
#
#   Qwen3     (gpt2/qwen2, tokenizer.json)  vs tokenizers loading the same tokenizer.json
#   Qwen3     written as a GGUF (151936 tokens, padded like llama.cpp's converter): same ids
#   SmolLM2   (gpt2/smollm, real GGUF)      vs tokenizers built from the GGUF's vocabulary
#   stories260K (llama/SPM, real GGUF)      vs sentencepiece built from the GGUF's vocabulary
#   Gemma 3 270M (llama/SPM, real GGUF, 262144 tokens: user-defined whitespace runs, newline
#               runs and HTML tags matched always)  vs sentencepiece built from the GGUF
# Each comparison covers parse_special off ("plain") and on ("special"); then round trips,
# a speed check, and the fuzz corpus replay. tests/py/tok_oracle.py explains each oracle.
. "$(dirname "$0")/lib.sh"

plan 15

CORPUS=$OB_TOP/tests/data/tok-corpus.jsonl
QWEN=$SHARED/models/qwen3-tokenizer/tokenizer.json
STORIES=$SHARED/models/stories260K.gguf
ORACLE=$OB_TOP/tests/py/tok_oracle.py

check "tokenizer unit tests" "$UNIT/tok"

# oracle NAME KIND SRC CORPUS OURS [flags]: print the oracle's report, ok when it passes
oracle() {
    local d=$1; shift
    local out rc
    out=$("$PY" "$ORACLE" check "$@" 2>&1)
    rc=$?
    printf '%s\n' "$out" | tail -1
    ok $rc "$d" || printf '%s\n' "$out" | head -40
}

have_py=0
need_python tokenizers sentencepiece gguf google.protobuf && have_py=1
SMOL=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$SMOL" ] || SMOL=$("$OB_TOP/scripts/models" smollm2 2>/dev/null) || SMOL=

Q=qwen2:$QWEN
"$UNIT/tok" dump "$Q" "$CORPUS" > "$T/qwen.jsonl" 2> "$T/err" || cat "$T/err" >&2
if [ $have_py = 1 ]; then
    # 1b does not normalize (GGUF carries no normalizer; llama.cpp does not either), so the
    # raw corpus is compared with the tokenizer.json minus its NFC normalizer ...
    oracle "Qwen3: same ids as tokenizers (normalizer removed)" \
        hf "$QWEN" "$CORPUS" "$T/qwen.jsonl" --drop-normalizer
    # ... and NFC-normalized text with the tokenizer.json as shipped
    "$PY" "$ORACLE" nfc "$CORPUS" > "$T/nfc.jsonl"
    "$UNIT/tok" dump "$Q" "$T/nfc.jsonl" > "$T/qwen-nfc.jsonl"
    oracle "Qwen3: NFC text, same ids as tokenizers with its NFC normalizer" \
        hf "$QWEN" "$CORPUS" "$T/qwen-nfc.jsonl"
    # the oracle sees differences: the raw corpus has lines that NFC changes
    ! "$PY" "$ORACLE" check hf "$QWEN" "$CORPUS" "$T/qwen.jsonl" > /dev/null 2>&1
    ok $? "Qwen3: the oracle tells apart text that NFC changes (so it compares something)"
else
    skip "Qwen3: same ids as tokenizers (normalizer removed)" "python packages missing"
    skip "Qwen3: NFC text, same ids as tokenizers" "python packages missing"
    skip "Qwen3: the oracle tells apart text that NFC changes" "python packages missing"
fi

"$UNIT/tok" mkgguf "$QWEN" qwen2 151936 "$T/qwen3.gguf" &&
    "$UNIT/tok" dump "$T/qwen3.gguf" "$CORPUS" > "$T/qwen-gguf.jsonl"
check_same "Qwen3 as a GGUF (151936 tokens): same ids as from tokenizer.json" \
    "$T/qwen.jsonl" "$T/qwen-gguf.jsonl"

if [ $have_py = 1 ] && [ -n "$SMOL" ]; then
    "$UNIT/tok" dump "$SMOL" "$CORPUS" > "$T/smol.jsonl"
    oracle "SmolLM2 (smollm pre-tokenizer): same ids as tokenizers" \
        smollm "$SMOL" "$CORPUS" "$T/smol.jsonl"
else
    skip "SmolLM2: same ids as tokenizers" "python packages or model missing (scripts/models)"
fi

if [ $have_py = 1 ] && [ -f "$STORIES" ]; then
    "$UNIT/tok" dump "$STORIES" "$CORPUS" > "$T/stories.jsonl"
    oracle "stories260K (SentencePiece BPE): same ids as sentencepiece" \
        spm "$STORIES" "$CORPUS" "$T/stories.jsonl"
else
    skip "stories260K: same ids as sentencepiece" "python packages or model missing"
fi

GEMMA=$OB_TOP/.cache/models/gemma-3-270m-q4_k_m.gguf
[ -f "$GEMMA" ] || GEMMA=$("$OB_TOP/scripts/models" gemma3 2>/dev/null) || GEMMA=
if [ $have_py = 1 ] && [ -n "$GEMMA" ]; then
    "$UNIT/tok" dump "$GEMMA" "$CORPUS" > "$T/gemma.jsonl"
    oracle "Gemma 3 (SentencePiece BPE, user-defined pieces): same ids as sentencepiece" \
        spm "$GEMMA" "$CORPUS" "$T/gemma.jsonl"
else
    skip "Gemma 3: same ids as sentencepiece" "python packages or model missing (scripts/models gemma3)"
fi
if [ -n "$GEMMA" ]; then
    check "Gemma 3: decode(encode(x)) == x" "$UNIT/tok" roundtrip "$GEMMA" "$CORPUS"
else
    skip "Gemma 3: decode(encode(x)) == x" "model missing (scripts/models gemma3)"
fi

check "Qwen3 tokenizer.json: decode(encode(x)) == x" "$UNIT/tok" roundtrip "$Q" "$CORPUS"
check "Qwen3 GGUF: decode(encode(x)) == x" "$UNIT/tok" roundtrip "$T/qwen3.gguf" "$CORPUS"
if [ -n "$SMOL" ]; then
    check "SmolLM2: decode(encode(x)) == x (bytes it has no token for dropped)" \
        "$UNIT/tok" roundtrip "$SMOL" "$CORPUS"
else
    skip "SmolLM2: decode(encode(x)) == x" "model missing (scripts/models smollm2)"
fi
check "stories260K: decode(encode(x)) == space prefix + x" \
    "$UNIT/tok" roundtrip "$STORIES" "$CORPUS"

out=$("$UNIT/tok" perf "$T/qwen3.gguf" "$CORPUS" 2>&1)
ok $? "Qwen3 GGUF loads in under 1 s and encodes faster than 1 MB/s" || true
printf '# %s\n' "$out"

check "fuzz corpus replays without a crash or a round-trip failure" \
    "$OB_TOP/bin/replay/fuzz-tok" "$OB_TOP/tests/fuzz/corpus-tok"
