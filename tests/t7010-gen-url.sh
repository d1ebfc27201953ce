#!/usr/bin/env bash
# 1b-gen --url against canned replies (tests/py/fixture_server.py replaying
# tests/fixtures/url/*.json, shaped like llama-server's and OpenAI's documented formats): the
# result records (golden), the request sent, readiness (503 while loading, "stalled", no
# health route, never ready, unreachable, a server that comes up late), retries on connection
# errors only, --parallel keeping input order, servers without ids, values that are not
# float32, replies without log-probabilities and failed requests, each with its exit status;
# replies cut short (in the headers or the body: one status), binary, with ill-formed UTF-8 or
# \u0000; URLs checked up front, credentials kept out of records and messages, OB_API_KEY
# without control characters, --timeout always a limit.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/fixture_env.sh"
# the servers' addresses and pids, set by name (printf -v), which shellcheck cannot see
declare URL_broken URL_cuth URL_dead URL_flaky URL_gone PID_gone URL_inj URL_late URL_llama \
    URL_loading URL_nolp URL_nonf32 URL_openai URL_score URL_slow URL_stalled
plan 42
cd "$T" || exit 1
FX=$OB_TOP/tests/fixtures/url
G=$OB_TOP/tests/golden
REQ=$FX/requests.jsonl
# what does not depend on the run: the route is the URL (its port), timings vary
stable() { jq -c 'del(.route, .timing)' "$@"; }

fixture_start llama "$FX/llama.json"
1b-gen --url "$URL_llama" --wait 10 < "$REQ" > llama.jsonl 2> err.txt; rc=$?
ok $rc "llama-server-shaped replies: exit 0"
stable llama.jsonl > got.jsonl
check_same "result records are the golden ones (ids, bytes, float32 bits, top 2)" "$G/url-llama.jsonl" got.jsonl
jq -e --arg u "$URL_llama" -s 'all(.route == $u) and all(has("nonf32_values") | not) and all(.timing.attempts == 1)' llama.jsonl > /dev/null
ok $? "route is the URL, no value off float32, one attempt each"
# the requests: readiness first, then what the records asked for, and the wire's extras
[ "$(jq -r '.method + " " + .path' "$T/llama.log" | head -4 | tr '\n' ',')" = "GET /health,GET /health,GET /health,GET /v1/models," ]
ok $? "health polled until 200 (two 503 while loading), then /v1/models for the model name"
jq -e -s '.[4].body == {"model":"qwen3-0.6b-q4_k_m.gguf","messages":[{"role":"user","content":"Why is the sky blue?"}],
           "max_tokens":4,"temperature":0,"seed":0,"logprobs":true,"top_logprobs":2,"cache_prompt":false,
           "chat_template_kwargs":{"enable_thinking":false},"stream":false}
          and .[5].path == "/v1/completions" and .[5].body.prompt == "Once upon a time"
          and .[5].body.logprobs == 2 and .[5].body.cache_prompt == false' "$T/llama.log" > /dev/null
ok $? "chat: logprobs, top_logprobs, cache_prompt false, enable_thinking; completions: logprobs N"

# OpenAI-shaped: no ids, legacy completions arrays, no health route
fixture_start openai "$FX/openai.json"
1b-gen --url "$URL_openai" < "$REQ" > openai.jsonl 2> err.txt; rc=$?
stable openai.jsonl > got.jsonl
[ $rc -eq 0 ] && cmp -s "$G/url-openai.jsonl" got.jsonl; ok $? "OpenAI-shaped replies: golden records without ids" || diff "$G/url-openai.jsonl" got.jsonl | head -5
grep -q "has no /health or /v1/health; /v1/models answers" err.txt; ok $? "no health route: /v1/models, with a warning"
jq -e -s 'all(.[].tokens[]; has("id") | not) and all(.[].tokens[].top[]; has("id") | not)' openai.jsonl > /dev/null
ok $? "no ids anywhere (tokens and top lists)"
check_exit 1 "by id, the id-less route matches nothing" 1b-agree llama.jsonl openai.jsonl
check_exit 0 "by text, it is the same stream to the bit" 1b-agree --match-by text llama.jsonl openai.jsonl

# values on the wire that are not float32
fixture_start nonf32 "$FX/nonf32.json"
1b-gen --url "$URL_nonf32" < "$REQ" > nonf32.jsonl 2> err.txt; rc=$?
[ $rc -eq 0 ] && grep -q "3 log-probabilities on the wire were not float32" err.txt &&
    jq -e -s '.[0].nonf32_values == 3 and (.[1] | has("nonf32_values") | not)
              and .[0].tokens[1].logprob == -0.1 and .[0].tokens[1].bits == "bdcccccd"
              and .[0].tokens[1].wire_logprob == -0.1' nonf32.jsonl > /dev/null
ok $? "-0.1 on the wire: rounded to float32 bdcccccd, counted (3 in all), kept as wire_logprob"
1b-agree --json nf.json llama.jsonl nonf32.jsonl > /dev/null; rc=$?
[ $rc -eq 1 ] && jq -e '.inputs[1].nonf32_values == 3 and .pairs[0].common == 7 and .pairs[0].exact_bits == 6' nf.json > /dev/null
ok $? "1b-agree reports the 3 values and the one position whose bits differ"

# no log-probabilities, a failed request
fixture_start nolp "$FX/nolp.json"
1b-gen --url "$URL_nolp" < "$REQ" > nolp.jsonl 2> err.txt; rc=$?
[ $rc -eq 5 ] && jq -e -s '.[0].error == "the server returned no log-probabilities" and .[0].finish_reason == "error"
                and .[1].error == "HTTP 500: slot crashed"' nolp.jsonl > /dev/null &&
    grep -q "id p1: the server returned no log-probabilities" err.txt
ok $? "no logprobs and a 500: both written as error records, exit 5 for the 500 ($rc)"
head -1 "$REQ" | 1b-gen --url "$URL_nolp" > nolp1.jsonl 2> /dev/null; rc=$?
[ $rc -eq 3 ] && [ "$(jq -r .error nolp1.jsonl)" = "the server returned no log-probabilities" ]
ok $? "a reply without log-probabilities alone: exit 3"
check_exit 1 "1b-agree: a route without log-probabilities differs" 1b-agree llama.jsonl nolp.jsonl

# readiness
fixture_start stalled "$FX/stalled.json"
1b-gen --url "$URL_stalled" --wait 30 < "$REQ" > st.jsonl 2> err.txt; rc=$?
[ $rc -eq 0 ] && [ "$(jq -s length st.jsonl)" = 2 ] && grep -q 'reports "stalled"' err.txt &&
    [ "$(grep -c '"GET", "path": "/health"' "$T/stalled.log")" -eq 1 ]
ok $? "an idle server reporting 503 \"stalled\" is taken as ready at once"
fixture_start loading "$FX/loading.json"
1b-gen --url "$URL_loading" --wait 1 < "$REQ" > ld.jsonl 2> err.txt; rc=$?
[ $rc -eq 0 ] && [ "$(jq -s length ld.jsonl)" = 2 ] && grep -q "still answers 503 after 1 s; /v1/models answers" err.txt
ok $? "503 loading until --wait: /v1/models alive, going on with a warning"
fixture_start dead "$FX/dead.json"
out=$(1b-gen --url "$URL_dead" --wait 1 < "$REQ" 2>&1 >/dev/null); rc=$?
[ $rc -eq 4 ] && grep -q "not ready after 1 s" <<<"$out"; ok $? "never ready: exit 4 ($out)"
port=$(free_port)
out=$(1b-gen --url "http://127.0.0.1:$port" --wait 0 < "$REQ" 2>&1 >/dev/null); rc=$?
[ $rc -eq 4 ] && grep -q "unreachable" <<<"$out"; ok $? "nothing listening: exit 4, unreachable ($out)"
port=$(free_port)
jq '. + {"start_delay": 1.0}' "$FX/llama.json" > late.json
fixture_start late late.json --port "$port"
1b-gen --url "$URL_late" --wait 20 < "$REQ" > late.jsonl 2> /dev/null; rc=$?
[ $rc -eq 0 ] && [ "$(stable late.jsonl | md5sum)" = "$(md5sum < "$G/url-llama.jsonl")" ]
ok $? "a server that starts listening a second late: waited for, same records"

# retries on connection errors; --parallel keeps input order
fixture_start flaky "$FX/flaky.json"
1b-gen --url "$URL_flaky" --parallel 2 < "$REQ" > fl.jsonl 2> err.txt; rc=$?
[ $rc -eq 0 ] && [ "$(jq -r .id fl.jsonl | tr '\n' ' ')" = "p1 p2 " ] &&
    [ "$(jq -s '[.[].timing.attempts] | add' fl.jsonl)" = 4 ] &&
    [ "$(stable fl.jsonl | md5sum)" = "$(md5sum < "$G/url-llama.jsonl")" ]
ok $? "two connections closed without a reply: retried (4 attempts), same records, input order"
1b-gen --url "$URL_flaky" --parallel 2 --unordered < "$REQ" > un.jsonl 2> /dev/null
[ "$(jq -r .id un.jsonl | tr '\n' ' ')" = "p2 p1 " ]; ok $? "--unordered: the slow first request is written last"
1b-gen --url "$URL_llama" --parallel 2 --repeat 3 < "$REQ" > rep.jsonl; rc=$?
[ $rc -eq 0 ] && [ "$(jq -r '"\(.id)#\(.repeat)"' rep.jsonl | tr '\n' ' ')" = "p1#0 p1#1 p1#2 p2#0 p2#1 p2#2 " ]
ok $? "--repeat 3 with --parallel 2: numbered, in input order"
check_exit 0 "and 1b-agree finds the route repeatable" 1b-agree rep.jsonl

# a server that goes away in the middle: exit 4 after the records before it
fixture_start gone "$FX/llama.json"
{ head -1 "$REQ"; sleep 0.6; kill "$PID_gone"; sleep 0.3; tail -1 "$REQ"; } |
    1b-gen --url "$URL_gone" --retries 1 > gone.jsonl 2> err.txt; rc=$?
[ $rc -eq 4 ] && [ "$(jq -r .id gone.jsonl)" = p1 ] && grep -q "unreachable" err.txt
ok $? "the server goes away: its earlier record written, then exit 4 ($(tail -1 err.txt))"

# records and usage
printf '%s\n' '{"id":"x","prompt":"Hi","n":2}' > bad.jsonl
out=$(1b-gen --url "$URL_llama" bad.jsonl 2>&1); rc=$?
[ $rc -eq 3 ] && grep -q "bad.jsonl:1: id x: field 'n' is not supported" <<<"$out"; ok $? "a record 1b refuses: exit 3 ($out)"
check_exit 2 "--url with -d" 1b-gen --url "$URL_llama" -d cpu < "$REQ"
check_exit 2 "a URL that is not http" 1b-gen --url "ftp://127.0.0.1/" < "$REQ"

out=$("$UNIT/http" 2>&1); rc=$?
ok $rc "unit: URLs through curl_url, the route without credentials, API keys, error text" ||
    grep -v '^ok' <<<"$out" | sed 's/^/# /'

# replies cut short, binary, with ill-formed UTF-8 or \u0000 (tests/fixtures/url/broken.json)
fixture_start broken "$FX/broken.json"
one() { printf '{"id":"%s","prompt":"%s","max_tokens":1,"top_logprobs":2}\n' "$1" "$1"; }
strict_jsonl() {
    "$PY" -c '
import json, sys
for line in open(sys.argv[1], "rb").read().split(b"\n")[:-1]:
    json.loads(line.decode("utf-8", "strict"), strict=True)
' "$1"
}
one cut-head | 1b-gen --url "$URL_broken" --retries 0 > ch.jsonl 2> ch.txt; rc1=$?
one cut-body | 1b-gen --url "$URL_broken" --retries 0 > cb.jsonl 2> cb.txt; rc2=$?
[ $rc1 -eq 5 ] && [ $rc2 -eq 5 ] && grep -q "the reply was cut short (in its headers)" ch.txt &&
    grep -q "the reply was cut short (in its body" cb.txt && jq -e '.finish_reason == "error"' ch.jsonl cb.jsonl > /dev/null
ok $? "a reply cut in its headers and one cut in its body: the same failure, exit 5 ($rc1, $rc2)"
one binary | 1b-gen --url "$URL_broken" > bin.jsonl 2> /dev/null; rc=$?
[ $rc -eq 5 ] && [ "$(jq -r .error bin.jsonl)" = "HTTP 500: (a binary reply of 8 bytes)" ]
ok $? "a binary error body is named as such, not \"(empty reply)\" ($(jq -r .error bin.jsonl))"
{ one partial; one legacy; } | 1b-gen --url "$URL_broken" > part.jsonl 2> /dev/null; rc=$?
[ $rc -eq 0 ] && strict_jsonl part.jsonl && "$PY" -c '
import json
a, b = [json.loads(l) for l in open("part.jsonl", encoding="utf-8")]
t = a["tokens"][0]
assert t["bytes"] == [226, 130] and t["text"] == "\ufffd\ufffd" and a["text"] == "\ufffd\ufffd", t
assert a["finish_reason"] == "len\ufffdgth", a["finish_reason"]
assert [x["text"] for x in t["top"]] == ["\ufffd\ufffd", "\ufffd"] and a["model"]["name"] == "m\ufffd\ufffd"
assert [x["bytes"] for x in b["tokens"]] == [[97], [226]] and b["tokens"][1]["text"] == "\ufffd"
assert [x["text"] for x in b["tokens"][1]["top"]] == ["\ufffd", "\ufffd\ufffd\ufffd"]
'
ok $? "token text that is part of a character: valid JSON, U+FFFD in text (and finish_reason), the exact bytes in bytes (both wire forms)"
one nul | 1b-gen --url "$URL_broken" > nul.jsonl 2> nul.txt; rc=$?
[ $rc -eq 3 ] && jq -e '.error | startswith("the reply cannot be read: \\u0000 at byte")' nul.jsonl > /dev/null &&
    jq -e '.tokens == []' nul.jsonl > /dev/null
ok $? "a reply with \\u0000 in a token: refused (exit 3), not cut to \"a\" ($(jq -r .error nul.jsonl))"
one errtext | 1b-gen --url "$URL_broken" > et.jsonl 2> et.txt; rc=$?
[ $rc -eq 3 ] && strict_jsonl et.jsonl && [ "$(jq -r .error et.jsonl)" = "HTTP 400: bad $(printf '\xef\xbf\xbd') [31m red line" ] &&
    [ "$(wc -l < et.txt)" -eq 1 ] && ! grep -q "$(printf '\033')" et.txt
ok $? "an error message with ill-formed UTF-8, ESC and a newline: one clean line ($(cat et.txt))"

printf '%s\n' '{"health": [{"raw": "HTTP/1.1 200 OK\r\nContent-Le"}], "models": {"status": 404, "body": {}}}' > cuth.json
fixture_start cuth cuth.json
out=$(1b-gen --url "$URL_cuth" --wait 1 < "$REQ" 2>&1 >/dev/null); rc=$?
[ $rc -eq 4 ] && grep -q "not ready after 1 s: .*/health: the reply was cut short (in its headers)" <<<"$out"
ok $? "a health probe cut in its headers is no answer, and the message says so ($out)"

# credentials in the URL: sent (basic auth), never copied into records or messages
cred=http://user:secret@${URL_nolp#http://}
1b-gen --url "$cred" < "$REQ" > cred.jsonl 2> cred.txt; rc=$?
[ $rc -eq 5 ] && jq -e -s --arg u "$URL_nolp" 'length == 2 and all(.route == $u + "/")' cred.jsonl > /dev/null &&
    ! grep -q secret cred.jsonl cred.txt && grep -q "id p1" cred.txt
ok $? "1b-gen: user:password stripped from route and messages ($(jq -r .route cred.jsonl | head -1))"
port=$(free_port)
out=$(1b-gen --url "http://user:secret@127.0.0.1:$port" --wait 0 < "$REQ" 2>&1); rc=$?
[ $rc -eq 4 ] && ! grep -q secret <<<"$out"; ok $? "nor in an unreachable message ($out)"
echo '{"id":"s","prompt_ids":[1,2,3],"tokens":[{"id":11},{"id":1052},{"id":572}],"top_logprobs":2}' > s.jsonl
jq '{health: [{"status": 200, "body": {"status": "ok"}}], models: .models,
     completions: [.completions[1] | .match = ""]}' "$FX/llama.json" > score.json
fixture_start score score.json
1b-logprobs --url "http://user:secret@${URL_score#http://}" < s.jsonl > sc.jsonl 2> sc.txt; rc=$?
1b-batchrep --url "http://user:secret@${URL_llama#http://}" --width 1 --rounds 1 --prompt "Once upon a time" \
    --max-tokens 3 --top-logprobs 2 -q --json br.json > /dev/null 2> br.txt; rc2=$?
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && ! grep -q secret sc.jsonl sc.txt br.json br.txt &&
    jq -e '.route | startswith("http://127.0.0.1:")' sc.jsonl br.json > /dev/null
ok $? "1b-logprobs and 1b-batchrep: the same ($rc, $rc2)"

# OB_API_KEY with CR/LF would add headers to every request: refused before anything is sent
fixture_start inj "$FX/llama.json"
bad=0
for tool in "1b-gen --url $URL_inj" "1b-logprobs --url $URL_inj" "1b-batchrep --url $URL_inj -q"; do
    out=$(OB_API_KEY=$'k\r\nX-Injected: 1' $tool < "$REQ" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && grep -q "OB_API_KEY holds a control character (0x0d at byte 2)" <<<"$out" || { bad=1; break; }
done
[ $bad -eq 0 ] && [ ! -s "$T/inj.log" ]
ok $? "OB_API_KEY with CR/LF: usage error in every --url tool, nothing sent (${tool%% *}: $rc, $out)"

# URLs checked up front, --timeout always a limit
bad=0
for tool in 1b-gen 1b-logprobs 1b-batchrep; do
    t0=$SECONDS
    out=$($tool --url 'http://[::1' --wait 30 < "$REQ" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && [ $((SECONDS - t0)) -le 5 ] && grep -q -- "--url: not a valid URL" <<<"$out" || { bad=1; break; }
done
ok $bad "--url 'http://[::1': a usage error at once in every --url tool ($tool: $rc, $(head -1 <<<"$out"))"
bad=0
for tool in 1b-gen 1b-logprobs 1b-batchrep; do
    out=$($tool --url "$URL_llama" --timeout 0 < "$REQ" 2>&1 >/dev/null); rc=$?
    [ $rc -eq 2 ] && grep -q -- "--timeout: '0' is not a number in \[0.001, 86400\]" <<<"$out" || { bad=1; break; }
done
ok $bad "--timeout 0 is refused (it would mean no limit) in every --url tool ($tool: $rc)"
slow=$(jq '.completions[1].replies[0].delay = 3' "$FX/llama.json")
printf '%s\n' "$slow" > slow.json
fixture_start slow slow.json
t0=$SECONDS
tail -1 "$REQ" | 1b-gen --url "$URL_slow" --timeout 0.5 > /dev/null 2> slow.txt; rc=$?
[ $rc -eq 5 ] && [ $((SECONDS - t0)) -lt 3 ] && grep -qi "timed out" slow.txt; ok $? "--timeout 0.5 cuts a 3 s reply: exit 5 ($(cat slow.txt))"
