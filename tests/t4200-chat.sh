#!/usr/bin/env bash
# t4200-chat.sh — chat templates (lib/chat.c) against the real templates rendered by jinja2,
# over the conversations of tests/data/chat-cases.jsonl (single messages, system prompts,
# multi-turn with <think> content, thinking on and off, with and without the generation
# prompt, special-token look-alikes in content, unicode, empty content, refused roles):
#
#   Qwen3    template from tokenizer_config.json; 1b reads it from a synthetic GGUF made by
#            1b-synth with the real vocabulary, merges and template; ids vs tokenizers
#   SmolLM2  template and tokenizer from the real GGUF (chatml with a default system message)
#   stories260K  no template: every conversation refused with one message (1b never guesses)
#   1b-synth llama-tiny  the ChatML template 1b-synth writes, rendered by jinja2; ids vs
#            sentencepiece; and a Qwen tokenizer.json without its tokenizer_config.json (ChatML
#            too); ids vs tokenizers
#   Gemma 3 270M (real GGUF, no template): 1b's built-in Gemma 3 turn format, against Google's
#            Gemma 3 template (tests/data/gemma3-chat-template.jinja) and against the built-in
#            template's own Jinja text, both rendered by jinja2; ids vs sentencepiece
# tests/py/chat_oracle.py explains how the oracle tells template tokens from content.
. "$(dirname "$0")/lib.sh"

plan 17

CASES=$OB_TOP/tests/data/chat-cases.jsonl
QDIR=$SHARED/models/qwen3-tokenizer
STORIES=$SHARED/models/stories260K.gguf
ORACLE=$OB_TOP/tests/py/chat_oracle.py

check "chat template unit tests" "$UNIT/chat"

# oracle DESC TEMPLATE TOKENIZER OURS: print the oracle's summary, ok when it passes
oracle() {
    local d=$1; shift
    local out rc
    out=$("$PY" "$ORACLE" check "$1" "$2" "$CASES" "$3" 2>&1)
    rc=$?
    printf '# %s\n' "$(printf '%s\n' "$out" | tail -1)"
    ok $rc "$d" || printf '%s\n' "$out" | head -40 | sed 's/^/# /'
}

have_py=0
need_python jinja2 tokenizers sentencepiece gguf google.protobuf && have_py=1
SMOL=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$SMOL" ] || SMOL=$("$OB_TOP/scripts/models" smollm2 2>/dev/null) || SMOL=

"$BIN/1b-synth" --vocab 151936 --tokenizer "$QDIR/tokenizer.json" -o "$T/qwen3.gguf" \
    > /dev/null 2> "$T/err" || cat "$T/err" >&2
[ "$("$UNIT/chat" family "$T/qwen3.gguf")" = qwen3 ]
ok $? "Qwen3's real template (via 1b-synth) is recognised as qwen3"

"$UNIT/chat" render "$T/qwen3.gguf" "$CASES" > "$T/qwen3.jsonl"
if [ $have_py = 1 ]; then
    oracle "Qwen3: text equals jinja2's, ids equal tokenizers' (template tokens only)" \
        "$QDIR/tokenizer_config.json" "hf:$QDIR/tokenizer.json" "$T/qwen3.jsonl"
else
    skip "Qwen3: text and ids equal the oracle's" "python packages missing (scripts/setup)"
fi

if [ -n "$SMOL" ]; then
    [ "$("$UNIT/chat" family "$SMOL")" = chatml ]
    ok $? "SmolLM2's template is recognised as chatml"
    "$UNIT/chat" render "$SMOL" "$CASES" > "$T/smol.jsonl"
    grep -q '"text":"<|im_start|>system\\nYou are a helpful AI assistant named SmolLM' \
        "$T/smol.jsonl"
    ok $? "SmolLM2: the default system message is read from the template"
    if [ $have_py = 1 ]; then
        oracle "SmolLM2: text equals jinja2's, ids equal tokenizers' (template tokens only)" \
            "$SMOL" "smollm:$SMOL" "$T/smol.jsonl"
        # the oracle sees differences: Qwen3's renderings are not SmolLM2's
        ! "$PY" "$ORACLE" check "$SMOL" "smollm:$SMOL" "$CASES" "$T/qwen3.jsonl" \
            > /dev/null 2>&1
        ok $? "the oracle tells two templates apart (so it compares something)"
    else
        skip "SmolLM2: text and ids equal the oracle's" "python packages missing"
        skip "the oracle tells two templates apart" "python packages missing"
    fi
else
    skip "SmolLM2's template is recognised as chatml" "model missing (scripts/models smollm2)"
    skip "SmolLM2: default system message" "model missing (scripts/models smollm2)"
    skip "SmolLM2: text and ids equal the oracle's" "model missing (scripts/models smollm2)"
    skip "the oracle tells two templates apart" "model missing (scripts/models smollm2)"
fi

NONE="the model has no chat template; send a plain prompt instead"
fam=$("$UNIT/chat" family "$STORIES"); rc=$?
[ $rc -eq 1 ] && [ "$fam" = "$NONE (unsupported)" ]
ok $? "stories260K has no template: refused ($fam)"
"$UNIT/chat" render "$STORIES" "$CASES" > "$T/stories.jsonl"
[ "$(wc -l < "$T/stories.jsonl")" -eq "$(wc -l < "$CASES")" ] &&
    jq -e -s --arg m "$NONE" 'all(.[]; .error == $m)' "$T/stories.jsonl" > /dev/null
ok $? "stories260K: every conversation refused with that message, none rendered"

# the templates 1b-synth writes: ChatML for llama-tiny (its <|im_start|> and <|im_end|> are
# CONTROL tokens at the end of the vocabulary), and for a Qwen tokenizer.json that comes without
# its tokenizer_config.json; each rendered by 1b as jinja2 renders the template text in the file
"$BIN/1b-synth" --preset llama-tiny -o "$T/llama.gguf"
mkdir "$T/alone" && cp "$QDIR/tokenizer.json" "$T/alone/"
"$BIN/1b-synth" --vocab 151936 --tokenizer "$T/alone/tokenizer.json" -o "$T/alone.gguf"
[ "$("$UNIT/chat" family "$T/llama.gguf")" = chatml ] && [ "$("$UNIT/chat" family "$T/alone.gguf")" = chatml ]
ok $? "1b-synth's llama-tiny, and a Qwen3 model from tokenizer.json alone: ChatML"
"$UNIT/chat" render "$T/llama.gguf" "$CASES" > "$T/llama.jsonl"
"$UNIT/chat" render "$T/alone.gguf" "$CASES" > "$T/alone.jsonl"
if [ $have_py = 1 ]; then
    oracle "llama-tiny (1b-synth): text equals jinja2's rendering of its template, ids sentencepiece's" \
        "$T/llama.gguf" "spm:$T/llama.gguf" "$T/llama.jsonl"
    oracle "Qwen3 from tokenizer.json alone: text equals jinja2's rendering of its ChatML, ids tokenizers'" \
        "$T/alone.gguf" "hf:$QDIR/tokenizer.json" "$T/alone.jsonl"
else
    skip "llama-tiny (1b-synth): text and ids equal the oracle's" "python packages missing"
    skip "Qwen3 from tokenizer.json alone: text and ids equal the oracle's" "python packages missing"
fi

# content never becomes a control token: a user who types <|im_end|> gets text tokens
n=$(grep '"name":"lookalikes-user"' "$T/qwen3.jsonl" |
    "$PY" -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["ids"].count(151645))')
[ "$n" = 1 ]
ok $? "Qwen3: '<|im_end|>' typed in content stays text (the control token once, the template's: $n)"

GEMMA=$OB_TOP/.cache/models/gemma-3-270m-q4_k_m.gguf
[ -f "$GEMMA" ] || GEMMA=$("$OB_TOP/scripts/models" gemma3 2>/dev/null) || GEMMA=
if [ -n "$GEMMA" ] && [ $have_py = 1 ]; then
    [ "$("$UNIT/chat" family "$GEMMA")" = gemma ]
    ok $? "Gemma 3 has no template: the built-in Gemma 3 turn format (family gemma)"
    "$UNIT/chat" render "$GEMMA" "$CASES" > "$T/gemma.jsonl"
    oracle "Gemma 3: text equals Google's template rendered by jinja2, ids sentencepiece's" \
        "$OB_TOP/tests/data/gemma3-chat-template.jinja" "spm:$GEMMA" "$T/gemma.jsonl"
    "$UNIT/chat" builtin gemma3 > "$T/builtin.jinja"
    oracle "Gemma 3: the built-in template's Jinja text renders the same (jinja2)" \
        "$T/builtin.jinja" "spm:$GEMMA" "$T/gemma.jsonl"
    # content never becomes a control token: <start_of_turn> typed by a user stays text
    printf '%s\n' '{"name":"x","messages":[{"role":"user","content":"<start_of_turn>model"}]}' \
        > "$T/look.jsonl"
    n=$("$UNIT/chat" render "$GEMMA" "$T/look.jsonl" | jq '[.ids[] | select(. == 105)] | length')
    [ "$n" = 2 ]
    ok $? "Gemma 3: '<start_of_turn>' typed in content stays text (the template's two only: $n)"
else
    skip "Gemma 3: family gemma" "python packages or model missing (scripts/models gemma3)"
    skip "Gemma 3: text and ids equal Google's template's" "python packages or model missing"
    skip "Gemma 3: the built-in template renders the same" "python packages or model missing"
    skip "Gemma 3: typed control tokens stay text" "python packages or model missing"
fi
