#!/usr/bin/env bash
# One request, one verdict, on every route: the same fields with the same edge and
# out-of-range values go through the three readers of requests — records in process
# (1b-gen -m), 1b-serve's HTTP bodies (curl), and the URL route (1b-gen --url against that
# 1b-serve, which checks a record before it sends it) — and every one of them takes or refuses
# each exactly as the others do, and as the table says (the ranges of man/1b.7, lib/record.c).
#  - numbers: seed 2^53 - 1 (taken), 2^53 and 2^53 + 1 (read as 2^53: a double), 2^53 + 2, -1, 1.5, a
#    string; temperature -0, 100, 100.5, NaN (not JSON), "NaN", 1e400, 1e-400; max_tokens 0,
#    1e0, 2^24 + 1, 1e9, -1, 2.5; top_logprobs 20 and 21; top_k 2^31 - 1 and 2^31; null is
#    absent;
#  - the fields 1b does not implement, refused unless neutral (n 1, tool_choice "none",
#    response_format text, logit_bias {}), and stop strings;
#  - messages as OpenAI sends them: developer role, text parts, tool roles and calls refused;
#    chat_template_kwargs.enable_thinking, llama-server's name for "thinking";
#  - a key twice in one object (top level, nested, one of them escaped): refused everywhere, as
#    readers in front of 1b (Python, JavaScript, Go, jq keep the last) would see other values;
#  - exactly one of prompt and messages: both (sent to each endpoint), neither, either of the
#    wrong type; unknown fields are taken (passed through by 1b-gen, ignored by 1b-serve).
# 1b-serve's own limits (--max-tokens-cap) and what only its protocol has (echo, a legacy
# logprobs count, batched prompts) are not record fields and are not compared here.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a  # set by name (printf -v), which shellcheck cannot see
plan 6
cd "$T" || exit 1
# a model with a chat template (1b-synth's llama-tiny: ChatML), so that messages are judged by
# their fields alone (a model without one refuses every conversation: t4500, t6010)
1b-synth --preset llama-tiny -o llama.gguf
S=$T/llama.gguf
serve_start a -m "$S" -t 1
ok $? "server at $URL_a"

# id | the request's fields (raw JSON: some are not JSON at all) | take or refuse [| the
# endpoint: by default /v1/chat/completions for a record with "messages", else /v1/completions]
cases=$(cat <<'EOF'
seed-2p53-1|"seed":9007199254740991|take
seed-2p53|"seed":9007199254740992|refuse
seed-2p53+1|"seed":9007199254740993|refuse
seed-2p53+2|"seed":9007199254740994|refuse
seed-neg|"seed":-1|refuse
seed-frac|"seed":1.5|refuse
seed-str|"seed":"7"|refuse
seed-null|"seed":null|take
temp-negzero|"temperature":-0|take
temp-100|"temperature":100|take
temp-100.5|"temperature":100.5|refuse
temp-nan|"temperature":NaN|refuse
temp-nan-str|"temperature":"NaN"|refuse
temp-huge|"temperature":1e400|refuse
temp-tiny|"temperature":1e-400|take
max-0|"max_tokens":0|take
max-1e0|"max_tokens":1e0|take
max-2p24+1|"max_tokens":16777217|refuse
max-1e9|"max_tokens":1e9|refuse
max-neg|"max_tokens":-1|refuse
max-frac|"max_tokens":2.5|refuse
maxc-2p24+1|"max_completion_tokens":16777217|refuse
top-20|"top_logprobs":20|take
top-21|"top_logprobs":21|refuse
top-neg|"top_logprobs":-1|refuse
topk-max|"top_k":2147483647|take
topk-over|"top_k":2147483648|refuse
topp-over|"top_p":1.0000001|refuse
minp-neg|"min_p":-0.1|refuse
cache-str|"cache_prompt":"no"|refuse
cache-false|"cache_prompt":false|take
spec-ngram|"spec":"ngram"|take
spec-off|"spec":"off"|take
spec-bad|"spec":"fast"|refuse
spec-bool|"spec":true|refuse
spec-null|"spec":null|take
thinking-num|"thinking":1|refuse
stop-16|"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p"]|take
stop-17|"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]|refuse
stop-empty|"stop":""|refuse
stop-num|"stop":5|refuse
n-1|"n":1|take
n-2|"n":2|refuse
n-str|"n":"1"|refuse
presence-0|"presence_penalty":0|take
presence-half|"presence_penalty":0.5|refuse
bias-empty|"logit_bias":{}|take
bias-set|"logit_bias":{"5":1}|refuse
tool-choice-none|"tool_choice":"none"|take
tool-choice-req|"tool_choice":"required"|refuse
function-call|"function_call":"f"|refuse
format-text|"response_format":{"type":"text"}|take
format-json|"response_format":{"type":"json_object"}|refuse
stream|"stream":true|take
prompt-empty|"prompt":""|take
prompt-no-ids|"prompt":[]|refuse
prompt-vocab|"prompt":[1,99999]|refuse
prompt-null|"prompt":null,"messages":[{"role":"user","content":"Once"}]|take
msg-developer|"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"Once"}]|take
msg-parts|"messages":[{"role":"user","content":[{"type":"text","text":"Once "},{"type":"text","text":"upon"}]}]|take
msg-image|"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]|refuse
msg-tool|"messages":[{"role":"tool","content":"x"}]|refuse
msg-calls|"messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"1"}]},{"role":"user","content":"y"}]|refuse
msg-reasoning|"messages":[{"role":"assistant","content":"x","reasoning_content":5},{"role":"user","content":"y"}]|refuse
msg-null-content|"messages":[{"role":"user","content":null}]|refuse
kwargs-thinking|"messages":[{"role":"user","content":"Once"}],"chat_template_kwargs":{"enable_thinking":false}|take
kwargs-bad|"messages":[{"role":"user","content":"Once"}],"chat_template_kwargs":{"enable_thinking":"no"}|refuse
kwargs-array|"messages":[{"role":"user","content":"Once"}],"chat_template_kwargs":[]|refuse
dup-max|"max_tokens":2,"max_tokens":4096|refuse
dup-model|"model":"llama.gguf","model":"gpt-4"|refuse
dup-prompt|"prompt":"Once","prompt":"Twice"|refuse
dup-nested|"messages":[{"role":"user","content":"Once","role":"system"}]|refuse
dup-escaped|"temperature":0,"temperatur\u0065":1|refuse
both-chat|"prompt":"Once","messages":[{"role":"user","content":"Once"}]|refuse
both-completions|"prompt":"Once","messages":[{"role":"user","content":"Once"}]|refuse|/v1/completions
both-bad-prompt|"prompt":5,"messages":[{"role":"user","content":"Once"}]|refuse
neither|"prompt":null|refuse
neither-chat|"messages":null|refuse
prompt-num|"prompt":5|refuse
prompt-object|"prompt":{"text":"Once"}|refuse
msg-string|"messages":"Once"|refuse
msg-empty|"messages":[]|refuse
unknown-fields|"user":"u1","x_note":{"a":[1]}|take
EOF
)
: > all.jsonl
: > want.txt
declare -A endpoint
while IFS='|' read -r id fields verdict path; do
    rec="{\"id\":\"$id\""
    [[ $fields == *'"prompt"'* || $fields == *'"messages"'* ]] || rec+=',"prompt":"Once upon"'
    [[ $fields == *'max_tokens"'* || $fields == *'max_completion_tokens"'* ]] || rec+=',"max_tokens":1'
    rec+=",$fields}"
    [ -n "$path" ] || { path=/v1/completions; [[ $fields == *'"messages"'* ]] && path=/v1/chat/completions; }
    endpoint[$id]=$path
    printf '%s\n' "$rec" >> all.jsonl
    printf '%s %s\n' "$id" "$verdict" >> want.txt
done <<<"$cases"
n=$(wc -l < want.txt)

# records in process: a refused record is skipped (--keep-going), a taken one is written
1b-gen -m "$S" -t 1 --keep-going all.jsonl > gen.jsonl 2> gen.err
jq -r .id gen.jsonl | sort > gen-taken.txt
# the URL route: refused before sending (not written), or by the server (an error record)
1b-gen --url "$URL_a" --keep-going all.jsonl > url.jsonl 2> url.err
jq -r 'select(has("error") | not) | .id' url.jsonl | sort > url-taken.txt
# the server itself, one body at a time
: > serve-taken.txt
while IFS= read -r rec; do
    id=$(sed 's/^{"id":"\([^"]*\)".*/\1/' <<<"$rec")
    code=$(curl -s -o /dev/null -w '%{http_code}' "$URL_a${endpoint[$id]}" --data-binary "$rec")
    [ "$code" = 200 ] && echo "$id" >> serve-taken.txt
    [ "$code" = 200 ] || [ "$code" = 400 ] || echo "# $id: HTTP $code"
done < all.jsonl
sort -o serve-taken.txt serve-taken.txt
awk '$2 == "take" {print $1}' want.txt | sort > want-taken.txt

check_same "records in process (1b-gen -m): $(wc -l < gen-taken.txt) of $n taken, as the table says" \
    want-taken.txt gen-taken.txt
check_same "1b-serve over HTTP: the same $(wc -l < serve-taken.txt) taken, the others 400" \
    want-taken.txt serve-taken.txt
check_same "the URL route (1b-gen --url against 1b-serve): the same taken" \
    want-taken.txt url-taken.txt
both='{"prompt":"Once","messages":[{"role":"user","content":"Once"}]}'
cx 400 prompt invalid_value "$URL_a/v1/chat/completions" -d "$both" &&
    jq -e '.error.type == "invalid_request_error" and (.error.message | test("exactly one of .prompt. and .messages."))' \
        "$T/cx.out" > /dev/null &&
    cx 400 messages invalid_value "$URL_a/v1/completions" -d "$both"
ok $? "prompt and messages together: 400 on either endpoint, naming the field it does not read ($(jq -r .error.message "$T/cx.out"))"

# the largest seed, 2^53 - 1, is the same seed on every route: the same tokens, echoed exactly
printf '%s\n' '{"id":"a","prompt":"Once upon","max_tokens":8,"temperature":1,"seed":9007199254740991}' > seeds.jsonl
1b-gen -m "$S" -t 1 seeds.jsonl > s-gen.jsonl && 1b-gen --url "$URL_a" seeds.jsonl > s-url.jsonl &&
    [ "$(grep -ho '"seed":[0-9]*' s-gen.jsonl s-url.jsonl | sort -u)" = '"seed":9007199254740991' ] &&
    1b-agree --match-by text s-gen.jsonl s-url.jsonl > /dev/null
ok $? "seed 2^53 - 1 in process and through the server: the same tokens, echoed as 9007199254740991"
