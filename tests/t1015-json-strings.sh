#!/usr/bin/env bash
# JSON text that cJSON 1.7 would silently cut or pass into invalid output — "\u0000", "\uZZZZ",
# unpaired surrogates, raw control bytes in strings, ill-formed UTF-8, numbers beyond a double
# — is refused by every reader (ob_json_parse), never truncated: 1b-gen exits 3 naming the
# file and line and writes nothing for the record, 1b-serve answers 400, 1b-logprobs and
# 1b-batchrep refuse it too. What is valid is carried whole, and every output line is valid
# JSON in valid UTF-8. The JSON fuzz corpus replays under ASan/UBSan.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a  # set by name (printf -v), which shellcheck cannot see
plan 21
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1

# strict: every line is JSON read as UTF-8 without replacement, with no raw control byte
strict_jsonl() {
    "$PY" -c '
import json, sys
for line in open(sys.argv[1], "rb").read().split(b"\n")[:-1]:
    json.loads(line.decode("utf-8", "strict"), strict=True)
' "$1"
}

good='{"id":"ok","prompt":"Once upon","max_tokens":2}'
# name | a record that must be refused | what the message says
cases=(
    'nul-prompt|{"id":"b","prompt":"Once\u0000 upon","max_tokens":2}|\u0000 at byte 25: text with a NUL character is not supported'
    'nul-field|{"id":"b","prompt":"Once","keep":"x\u0000y"}|\u0000 at byte 36'
    'nul-key|{"id":"b","prompt":"Once","k\u0000":1}|\u0000 at byte 29'
    'bad-hex|{"id":"b","prompt":"Once\uZZZZ upon"}|invalid JSON at byte 25: \u without 4 hex digits'
    'lone-surrogate|{"id":"b","prompt":"Once \ud800 upon"}|invalid JSON at byte 26: unpaired surrogate \ud800'
    'bad-escape|{"id":"b","prompt":"Once \q"}|invalid JSON at byte 26: \q is not an escape'
    'huge-number|{"id":"b","prompt":"Once","keep":1e400}|a number out of range at byte 34'
)
for c in "${cases[@]}"; do
    IFS='|' read -r name rec want <<<"$c"
    printf '%s\n%s\n%s\n' "$good" "$rec" "$good" > in.jsonl
    1b-gen -m "$S" in.jsonl > out.jsonl 2> err.txt; rc=$?
    [ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl)" = ok ] && grep -qF "in.jsonl:2: $want" err.txt
    ok $? "1b-gen: $name refused (exit 3, in.jsonl:2, the record before it written, nothing cut)" ||
        sed 's/^/# /' err.txt
done
printf '%s\n{"id":"b","prompt":"Once\001 upon"}\n{"id":"c","prompt":"Once\t upon"}\n' "$good" > ctl.jsonl
1b-gen -m "$S" --keep-going ctl.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl)" = ok ] && grep -qF "ctl.jsonl:2: invalid JSON at byte 25: raw control byte 0x01 in a string" err.txt &&
    grep -qF "ctl.jsonl:3: invalid JSON at byte 25: raw control byte 0x09" err.txt
ok $? "1b-gen: raw control bytes in strings refused, as JSON says (exit 3)" || sed 's/^/# /' err.txt
printf '%s\n{"id":"b","prompt":"caf\xe9"}\n{"id":"c","prompt":"\xc0\xaf"}\n{"id":"d","prompt":"\xed\xa0\x80"}\n' "$good" > utf.jsonl
1b-gen -m "$S" --keep-going utf.jsonl > out.jsonl 2> err.txt; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .id out.jsonl)" = ok ] && [ "$(grep -c 'invalid UTF-8 at byte' err.txt)" -eq 3 ] &&
    strict_jsonl out.jsonl
ok $? "1b-gen: ill-formed UTF-8 (stray byte, overlong, encoded surrogate) refused; the output is valid JSON" ||
    sed 's/^/# /' err.txt

# what is valid is carried whole: escapes, a surrogate pair, U+10FFFF, big and small numbers
printf '%s\n' '{"id":"w","prompt":"Once \ud83d\ude00 upon","max_tokens":2,"keep":"a\u0001b\u00e9\"\\\/\t\udbff\udfff","n2":1e308,"k":{"x\u00e9":[1,"\u0002"]}}' > whole.jsonl
1b-gen -m "$S" whole.jsonl > out.jsonl; rc=$?
[ $rc -eq 0 ] && strict_jsonl out.jsonl && "$PY" -c '
import json, sys
r = json.loads(open("out.jsonl", encoding="utf-8").read())
assert r["prompt"] == "Once \U0001F600 upon", r["prompt"]
assert r["keep"] == "a\x01b\u00e9\"\\/\t\U0010FFFF", r["keep"]
assert r["n2"] == 1e308 and r["k"] == {"x\u00e9": [1, "\x02"]}
'
ok $? "valid escapes, a surrogate pair, U+10FFFF and nested pass-through fields are carried whole"

# a writer whose strings come from a file: 1b-load's model name (GGUF strings are bytes)
"$PY" -c '
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"general.name") + len(b"general.name") + 4 + 8
assert b[i:i + 5] == b"llama"
b[i + 2] = 0xff
open("bad-name.gguf", "wb").write(b)
' "$S"
1b-load bad-name.gguf > load.jsonl 2> /dev/null && strict_jsonl load.jsonl &&
    jq -e -s 'any(.[]; .name == "ll\ufffdma")' load.jsonl > /dev/null
ok $? "1b-load: a model name with ill-formed UTF-8 is written as valid JSON (U+FFFD)"

# 1b-serve: the same texts are a 400, never a cut prompt
serve_start a -m "$S" -t 1
ok $? "server at $URL_a"
U=$URL_a
cx 400 null invalid_json "$U/v1/completions" -d '{"prompt":"Once\u0000 upon","max_tokens":2}' &&
    grep -qF '\\u0000 at byte 16' "$T/cx.out" &&
    cx 400 null invalid_json "$U/v1/completions" -d '{"prompt":"Once upon","max_tokens":2,"user":"a\u0000b"}'
ok $? "\\u0000 in the prompt or in any other field: 400 invalid_json naming it"
cx 400 null invalid_json "$U/v1/completions" -d '{"prompt":"Once\uZZZZ upon","max_tokens":2}' &&
    cx 400 null invalid_json "$U/v1/chat/completions" -d '{"messages":[{"role":"user","content":"a\ud800"}]}' &&
    cx 400 null invalid_json "$U/v1/completions" -d "$(printf '{"prompt":"Once\001 upon","max_tokens":2}')"
ok $? "\\uZZZZ, an unpaired surrogate, a raw control byte: 400"
cx 400 null invalid_json "$U/tokenize" -d '{"content":"a\u0000b"}' &&
    cx 400 null invalid_json "$U/detokenize" -d '{"tokens":[1],"x":"\u0000"}'
ok $? "/tokenize and /detokenize: the same rule"
cx 200 - - "$U/v1/completions" -d '{"prompt":"Once \ud83d\ude00 upon","max_tokens":2}'
ok $? "the server lives on, and takes valid escapes"

# 1b-logprobs --text and 1b-batchrep --messages
printf '{"id":"t","text":"Once\\u0000 upon"}\n' > t1.jsonl
out=$(1b-logprobs -m "$S" --text t1.jsonl 2>&1 >/dev/null); rc=$?
[ $rc -eq 3 ] && grep -qF 't1.jsonl:1: \u0000 at byte' <<<"$out"; ok $? "1b-logprobs --text: a record with \\u0000 is refused, exit 3 ($out)"
printf 'Once\000 upon a time\n' > t2.txt
out=$(1b-logprobs -m "$S" --text t2.txt 2>&1 >/dev/null); rc=$?
[ $rc -eq 3 ] && grep -qF 't2.txt:1: a NUL byte at byte 5 of the line' <<<"$out"; ok $? "1b-logprobs --text: a raw line with a NUL byte is refused, not cut ($out)"
out=$(1b-batchrep -m "$S" --messages '[{"role":"user","content":"a\u0000b"}]' 2>&1); rc=$?
[ $rc -eq 2 ] && grep -qF -- '--messages: \u0000 at byte' <<<"$out"; ok $? "1b-batchrep --messages with \\u0000: a usage error naming it ($(head -1 <<<"$out"))"

# the JSON fuzz corpus (ob_json_parse, the line reader, the URL route's mapping) under ASan
n=$(compgen -G "$OB_TOP/tests/fuzz/corpus-jsonl/*" | wc -l)
[ "$n" -ge 30 ]; ok $? "corpus-jsonl has $n inputs"
out=$(ASAN_OPTIONS=detect_leaks=1 "$OB_TOP/bin/replay/fuzz-jsonl" "$OB_TOP/tests/fuzz/corpus-jsonl" 2>&1); rc=$?
[ $rc -eq 0 ] && ! grep -q '^not ok' <<<"$out"
ok $? "replay of $n inputs under ASan/UBSan" || tail -20 <<<"$out" | sed 's/^/# /'
