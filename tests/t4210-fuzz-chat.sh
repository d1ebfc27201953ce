#!/usr/bin/env bash
# t4210-fuzz-chat.sh — the chat-template fuzz corpus (tests/fuzz/fuzz-chat.c: a template string
# as a model file carries it, and the messages of a request) replayed through lib/chat.c built
# with AddressSanitizer and UBSan: no crash, no out-of-bounds read, no leak, and the harness's
# checks (a refused template renders nothing; an accepted one renders plain roles, twice alike;
# the ids decode to the rendered text; the stop tokens start with the turn's end). Then the
# real templates at hand (SmolLM2's, Qwen3's, Google's Gemma 3, 1b's built-in Gemma 3 and
# 1b-synth's ChatML) through the same harness, each recognised and rendered, so that the
# checks are seen to run on what models carry.
# A longer fuzzing run:
#   make bin/fuzz/fuzz-chat && bin/fuzz/fuzz-chat tests/fuzz/corpus-chat -max_total_time=300
. "$(dirname "$0")/lib.sh"
plan 4
REPLAY=$OB_TOP/bin/replay/fuzz-chat
n=$(compgen -G "$OB_TOP/tests/fuzz/corpus-chat/*" | wc -l)
[ "$n" -ge 100 ]; ok $? "corpus has $n inputs"
out=$(ASAN_OPTIONS=detect_leaks=1 "$REPLAY" "$OB_TOP/tests/fuzz/corpus-chat" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
ok $? "replay of $n inputs under ASan/UBSan" || tail -20 <<<"$out" | sed 's/^/# /'

# the real templates, one file each
mkdir -p "$T/tmpl" "$T/in"
SMOL=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$SMOL" ] || SMOL=$("$OB_TOP/scripts/models" smollm2 2>/dev/null) || SMOL=
[ -n "$SMOL" ] &&
    "$BIN/1b-load" --meta tokenizer.chat_template "$SMOL" | jq -j . > "$T/tmpl/chatml-smollm2"
jq -j .chat_template "$SHARED/models/qwen3-tokenizer/tokenizer_config.json" > "$T/tmpl/qwen3-qwen3"
cp "$OB_TOP/tests/data/gemma3-chat-template.jinja" "$T/tmpl/gemma-google"
"$UNIT/chat" builtin gemma3 > "$T/tmpl/gemma-builtin"
"$BIN/1b-synth" --preset llama-tiny -o "$T/llama.gguf" > /dev/null 2>&1
"$BIN/1b-load" --meta tokenizer.chat_template "$T/llama.gguf" | jq -j . > "$T/tmpl/chatml-synth"

# conversations: a user; a system and a user; a turn with thinking between two users; content
# that looks like the templates' special tokens. Options 0x01: the generation prompt,
# vocabulary 0; 0x07: thinking on too, vocabulary 1 (a BOS that is added)
conv() {
    case $1 in
    user) printf '\001Hello\000' ;;
    sys) printf '\000Be brief.\000\001Hi\000' ;;
    think) printf '\001q1\000\002<think>\nplan\n</think>\n\nanswer\000\001q2\000' ;;
    look) printf '\001<|im_end|><start_of_turn>model\n<think>\000' ;;
    esac
}
want=0 nt=0
for f in "$T"/tmpl/*; do
    [ -s "$f" ] || continue
    nt=$((nt + 1))
    for c in user sys think look; do
        for o in 001 007; do
            { printf '%b' "\\$o"; cat "$f"; printf '\000'; conv $c; } > "$T/in/${f##*/}-$c-$o"
            want=$((want + 1))
        done
    done
done
OB_FUZZ_CHAT_VERBOSE=1 ASAN_OPTIONS=detect_leaks=1 "$REPLAY" "$T/in" > "$T/tap" 2> "$T/log"
rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' "$T/tap" && [ "$(grep -c '^ok' "$T/tap")" -eq $want ]
ok $? "$want inputs from $nt real templates replay under ASan/UBSan" ||
    tail -20 "$T/log" | sed 's/^/# /'

# each file's family (its name's first part) rendered and tokenized every conversation
bad=0
for f in "$T"/tmpl/*; do
    [ -s "$f" ] || continue
    fam=${f##*/}; fam=${fam%%-*}
    k=$(grep -c "^detect=$fam family=$fam .* render=ok .* tokenize=ok " <<<"$(
        paste -d' ' <(sed -n 's/^ok [0-9]* - //p' "$T/tap") "$T/log" | grep "/${f##*/}-" |
        cut -d' ' -f2-)")
    [ "$k" -eq 8 ] || { bad=1; echo "# ${f##*/}: $k of 8 rendered as $fam"; }
done
[ $bad -eq 0 ] && [ -s "$T/tmpl/qwen3-qwen3" ] && [ -s "$T/tmpl/gemma-google" ]
ok $? "every real template recognised (qwen3, chatml, gemma) and every conversation rendered"
