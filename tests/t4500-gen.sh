#!/usr/bin/env bash
# 1b-gen on real models: the stories260K golden continuation (byte-identical records, timing
# aside), repetition, --repeat numbering, chat records, stop strings, bad records with line and
# id, --keep-going, exit statuses, and a write error; every failure is one line on standard
# error that names the input and the problem (unreadable operands, NaN logits, control bytes).
. "$(dirname "$0")/lib.sh"
plan 37
S=$SHARED/models/stories260K.gguf
untimed() { jq -c 'del(.timing)'; }
cd "$T" || exit 1

echo '{"id":"once","prompt":"Once upon a time","max_tokens":64,"top_logprobs":3}' > once.jsonl
1b-gen -m "$S" < once.jsonl | untimed > got.jsonl
check_same "stories260K: greedy continuation of \"Once upon a time\" is the golden record" \
    "$OB_TOP/tests/golden/gen-stories260K.jsonl" got.jsonl
jq -r .text got.jsonl | grep -q "^, there was a little girl named Lily"; ok $? "and it is TinyStories English"

# repetition: five runs, identical bits
for _ in 1 2 3 4 5; do 1b-gen -m "$S" -t 2 < once.jsonl | untimed; done > five.jsonl
[ "$(sort -u five.jsonl | wc -l)" -eq 1 ]; ok $? "the same request 5 times gives identical records"
1b-gen -m "$S" --repeat 3 < once.jsonl | untimed > rep.jsonl
[ "$(jq -r .repeat rep.jsonl | tr '\n' ' ')" = "0 1 2 " ] && [ "$(jq -c 'del(.repeat, .cached_tokens)' rep.jsonl | sort -u | wc -l)" -eq 1 ] && [ "$(jq -r .cached_tokens rep.jsonl | tr '\n' ' ')" = "0 4 4 " ]
ok $? "--repeat 3: numbered 0 1 2, the later ones from the prompt cache, otherwise identical"

# record fields
r=$(1b-gen -m "$S" < once.jsonl)
jq -e '.route == "cpu" and .model.sha256 == "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d"
       and .prompt_tokens == 5 and (.prompt_ids | length) == 5 and .completion_tokens == 64
       and .finish_reason == "length" and (.tokens | length) == 64
       and (.tokens[0] | .id == 432 and .text == "," and .bytes == [44] and (.top | length) == 3)
       and .timing.decode_tps > 0' <<<"$r" > /dev/null
ok $? "result fields: route, model sha256, prompt and completion counts, tokens with bytes and top"
jq -r '.tokens[] | [.logprob, .bits] | @tsv' <<<"$r" | python3 -c '
import struct, sys
for line in sys.stdin:
    lp, bits = line.split()
    assert struct.pack(">f", float(lp)).hex() == bits, line
' 2>&1
ok $? "every logprob decimal reads back to its bits"
jq -e '.extra == {"kept": [1, 2]}' <<<"$(echo '{"id":"x","prompt":"Hi","max_tokens":1,"extra":{"kept":[1,2]}}' | 1b-gen -m "$S")" > /dev/null
ok $? "unknown fields pass through"

# stop strings and max_tokens 0
r=$(echo '{"id":"s","prompt":"Once upon a time","max_tokens":64,"stop":["Lily"]}' | 1b-gen -m "$S")
[ "$(jq -r .finish_reason <<<"$r")" = stop ] && [ "$(jq -r .text <<<"$r")" = ", there was a little girl named " ]
ok $? "a stop string ends generation and is cut from the text"
# the token " there" completes both: "t" starts first, though listed second
r=$(echo '{"id":"s2","prompt":"Once upon a time","max_tokens":64,"stop":["re","t"]}' | 1b-gen -m "$S")
[ "$(jq -r .text <<<"$r")" = ", " ]
ok $? "with several stop strings the one that starts earliest in the text ends it ($(jq -c .text <<<"$r"))"
r=$(echo '{"id":"z","prompt":"Once upon a time","max_tokens":0}' | 1b-gen -m "$S")
[ "$(jq -r '.completion_tokens' <<<"$r")" = 0 ] || [ "$(jq -r '.tokens|length' <<<"$r")" = 1 ]
ok $? "max_tokens 0 is accepted"

# sampling is reproducible
echo '{"id":"t","prompt":"Once upon a time","max_tokens":32,"temperature":0.9,"seed":42}' > samp.jsonl
a=$(1b-gen -m "$S" < samp.jsonl | untimed); b=$(1b-gen -m "$S" -t 1 < samp.jsonl | untimed)
[ "$a" = "$b" ] && [ "$(jq -r .text <<<"$a")" != "$(jq -r .text got.jsonl)" ]
ok $? "temperature 0.9 with a seed: the same tokens every run, not the greedy ones"

# chat records on a model with a template (SmolLM2) and on the template-less stories260K
M=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$M" ]; then
    r=$(echo '{"id":"c","messages":[{"role":"user","content":"Say hi."}],"max_tokens":8}' | 1b-gen -m "$M")
    jq -e '.prompt_ids[0:1] == [1] and .completion_tokens > 0' <<<"$r" > /dev/null
    ok $? "messages on SmolLM2: ChatML prompt (starts with <|im_start|> = 1), generates"
else
    skip "messages on SmolLM2" "run scripts/models"
fi
# no template (stories260K, and a synthetic model written without one): messages are refused
# as a bad record (exit 3, one line naming the input, line and id), never joined as plain text;
# the records before it are written, --keep-going goes on to the prompts after it
printf '%s\n' '{"id":"ok1","prompt":"Once upon a time","max_tokens":2}' \
    '{"id":"chat","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4}' \
    '{"id":"ok2","prompt":"Once upon a time","max_tokens":2}' > chat.jsonl
1b-synth --preset llama-tiny --no-chat-template -o none.gguf
bad=""
for m in "$S" none.gguf; do
    1b-gen -m "$m" chat.jsonl > out.jsonl 2> err.txt; rc=$?
    [ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "ok1 " ] &&
        [ "$(cat err.txt)" = "1b-gen: chat.jsonl:2: id chat: the model has no chat template; send a plain prompt instead" ] ||
        bad="$bad [$m: exit $rc, $(jq -r .id out.jsonl | tr '\n' ' ')| $(tr '\n' '|' < err.txt)]"
    1b-gen -m "$m" --keep-going chat.jsonl > out.jsonl 2> err.txt; rc=$?
    [ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "ok1 ok2 " ] && [ "$(wc -l < err.txt)" -eq 1 ] ||
        bad="$bad [$m --keep-going: exit $rc, $(jq -r .id out.jsonl | tr '\n' ' ')]"
done
[ -z "$bad" ]; ok $? "messages to a model without a chat template: exit 3, one line, earlier records written, --keep-going reads on${bad:+:$bad}"
# 1b-synth's llama-tiny carries ChatML: BOS, <|im_start|> (id 1022) user ... <|im_end|> (1023),
# <|im_start|> assistant
1b-synth --preset llama-tiny -o chatml.gguf
r=$(sed -n 2p chat.jsonl | 1b-gen -m chatml.gguf)
jq -e '.prompt_ids[0:2] == [1, 1022] and ([.prompt_ids[] | select(. == 1022)] | length) == 2 and
       ([.prompt_ids[] | select(. == 1023)] | length) == 1' <<<"$r" > /dev/null
ok $? "messages on 1b-synth's llama-tiny: its ChatML template ($(jq -c '.prompt_ids' <<<"$r"))"

# bad records: line and id named, earlier results written, exit 3
printf '%s\n' '{"id":"ok1","prompt":"Hi","max_tokens":2}' '{"id":"bad","prompt":5}' \
    '{"id":"ok2","prompt":"Hi","max_tokens":2}' > mixed.jsonl
1b-gen -m "$S" < mixed.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "ok1 " ] && grep -q -- "-:2: id bad: field 'prompt'" err.txt
ok $? "a bad record stops the run with exit 3 after writing the earlier result ($(cat err.txt))"
1b-gen -m "$S" --keep-going < mixed.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl | tr '\n' ' ')" = "ok1 ok2 " ]
ok $? "--keep-going skips it, writes the rest, exits 3"
printf '%s\n' '{"id":"a","prompt":"Hi"' > broken.jsonl
check_exit 3 "invalid JSON" 1b-gen -m "$S" broken.jsonl
echo '{"id":"a","prompt":"Hi","messages":[]}' > both.jsonl
check_exit 3 "both prompt and messages" 1b-gen -m "$S" both.jsonl
echo '{"id":"a","prompt":"Hi","n":2}' > n2.jsonl
check_exit 3 "n = 2 is refused, not ignored" 1b-gen -m "$S" n2.jsonl
python3 -c 'print("{\"id\":\"long\",\"prompt\":\"" + "Once upon a time " * 300 + "\"}")' > long.jsonl
out=$(1b-gen -m "$S" --ctx 256 long.jsonl 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "context holds 256" <<<"$out"; ok $? "a prompt longer than the context: exit 3 ($out)"
check_exit 2 "no model" 1b-gen < once.jsonl
check_exit 4 "route hrx is not built in" 1b-gen -m "$S" -d hrx < once.jsonl
check_exit 3 "a model that is not one" 1b-gen -m /etc/hostname < once.jsonl
# a draft model of another vocabulary: exit 3, one line naming it and the first difference
# (the count: stories260K has 512 tokens, llama-tiny 1024; the text: a Qwen3 one of 1024)
1b-synth --preset qwen3-small --vocab 1024 --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" -o q1024.gguf
1b-gen -m chatml.gguf --draft "$S" < once.jsonl > out.jsonl 2> err.txt; rc=$?
1b-gen -m chatml.gguf --draft q1024.gguf < once.jsonl >> out.jsonl 2>> err.txt; rc2=$?
[ $rc = 3 ] && [ $rc2 = 3 ] && [ ! -s out.jsonl ] && [ "$(wc -l < err.txt)" = 2 ] &&
    grep -q "draft model .*stories260K.gguf: its vocabulary has 512 tokens, the model's 1024$" err.txt &&
    grep -q "draft model q1024.gguf: its vocabulary is not the model's: token 0 is \"!\", the model's is \"<unk>\"$" err.txt
ok $? "--draft of another vocabulary: exit 3, one line each ($rc, $rc2: $(tr '\n' '|' < err.txt))"
check_exit 2 "--spec draft without --draft" 1b-gen -m "$S" --spec draft < once.jsonl
check_exit 5 "a write error on stdout" sh -c "1b-gen -m '$S' < once.jsonl > /dev/full"

# every failure: one line naming the input and the problem, and the documented status
# (one_line FILE WANT: FILE holds exactly the line WANT)
one_line() { [ "$(wc -l < "$1")" -eq 1 ] && [ "$(cat "$1")" = "$2" ] || { sed 's/^/# got: /' "$1"; false; }; }
1b-gen -m "$S" < once.jsonl > /dev/full 2> err.txt; rc=$?
[ $rc -eq 5 ] && one_line err.txt "1b-gen: stdout: write: No space left on device"
ok $? "a write error on stdout: exit 5, one line naming stdout"
mkdir dir
1b-gen -m "$S" dir > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ ! -s out.jsonl ] && one_line err.txt "1b-gen: dir: is a directory"
ok $? "a directory operand: exit 3, one line"
1b-gen -m "$S" < dir > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && one_line err.txt "1b-gen: -: standard input is a directory"
ok $? "a directory as standard input: exit 3, one line"
1b-gen -m "$S" --keep-going dir nothere once.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl)" = once ] && [ "$(wc -l < err.txt)" -eq 2 ] &&
    grep -qx "1b-gen: nothere: No such file or directory" err.txt
ok $? "--keep-going goes past a directory and a missing operand to the next, exit 3"
1b-gen -m "$S" --ctx 256 long.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && one_line err.txt "1b-gen: long.jsonl:1: id long: the prompt has 1202 tokens; the context holds 256 (one more is needed to generate)"
ok $? "a prompt longer than the context is reported once, with its line and id"
printf '{"id":"n",\0"prompt":"x"}\n' > nul.jsonl
1b-gen -m "$S" nul.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && one_line err.txt "1b-gen: nul.jsonl:1: a NUL byte at byte 11 of the line"
ok $? "a line with a NUL byte is reported once"

# NaN logits (a NaN written into output_norm.weight): the result record says why, and so
# does one line on standard error
cp "$S" nan.gguf
off=$(1b-load --tensors nan.gguf | grep '"output_norm.weight"' | grep -o '"offset":[0-9]*' | cut -d: -f2)
printf '\x00\x00\xc0\x7f' | dd of=nan.gguf bs=1 seek="$off" conv=notrunc status=none
printf '%s\n' '{"id":"a","prompt":"Once upon a time","max_tokens":4}' '{"id":"b","prompt":"Hi","max_tokens":4}' > two.jsonl
1b-gen -m nan.gguf two.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 5 ] && [ "$(jq -r '[.id, .finish_reason, .error] | join(" ")' out.jsonl | tr '\n' ';')" = "a error logit of token 0 is NaN;b error logit of token 0 is NaN;" ] &&
    [ "$(cat err.txt)" = "$(printf '%s\n' '1b-gen: two.jsonl:1: id a: logit of token 0 is NaN' '1b-gen: two.jsonl:2: id b: logit of token 0 is NaN')" ]
ok $? "NaN logits: error records, one line each naming the input, line and id, exit 5 ($(head -1 err.txt))"

# bytes that are not text are escaped in messages: an architecture name with a newline and
# an escape character, a file name with a newline, a record id with a control character
"$PY" - "$S" arch.gguf <<'PYEOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b.index(b"general.architecture") + len("general.architecture") + 4 + 8
assert b[k:k + 5] == b"llama"
b[k:k + 5] = b"ll\nm\x1b"
open(sys.argv[2], "wb").write(b)
PYEOF
1b-gen -m arch.gguf < once.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -qF "general.architecture" err.txt &&
    ! LC_ALL=C grep -q "$(printf '\033')" err.txt
ok $? "an architecture name with control bytes: one line naming the key, no raw bytes ($(head -c 80 err.txt))"
# a tensor name is echoed in the message that refuses it: its control bytes are escaped
"$PY" - "$S" tname.gguf <<'PYEOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
k = b.index(b"output_norm.weight")
b[k + 16:k + 18] = b"\n\x1b"
open(sys.argv[2], "wb").write(b)
PYEOF
1b-gen -m tname.gguf < once.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -qF "'output_norm.weig\\x0a\\x1b'" err.txt
ok $? "a tensor name with control bytes: one line, escaped ($(head -c 100 err.txt))"
1b-gen -m "$S" "$(printf 'no\nsuch')" > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && one_line err.txt '1b-gen: no\x0asuch: No such file or directory'
ok $? "a file name with a newline: one line, escaped"
printf '{"id":"x\\u0007y","prompt":5}\n' > ctl.jsonl
1b-gen -m "$S" ctl.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(wc -l < err.txt)" -eq 1 ] && grep -qF 'id x\x07y:' err.txt
ok $? "a record id with a control character: escaped in the message"
