#!/usr/bin/env bash
# 1b-serve against bad and hostile clients: malformed JSON, wrong types (the error names the
# field), a huge body, invalid UTF-8, negative and absurd max_tokens, an unknown model, missing
# and wrong API keys, unknown paths and methods, prompts longer than the context, a full
# queue, the request time limit, a client that dribbles its body and clients that vanish
# mid-answer or half-close after their request (nothing is written back to them; the log
# says 499). Each gets its status and an OpenAI-style error body, and the server keeps
# serving (checked after every group).
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a PID_a URL_b PID_b  # set by name (printf -v), which shellcheck cannot see
plan 45
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
printf 'sekret-key-123\n' > key
serve_start a -m "$S" --parallel 2 -t 1 --api-key-file key --max-body 64K --max-tokens-cap 1000
ok $? "server with an API key, --max-body 64K, --max-tokens-cap 1000 at $URL_a"
U=$URL_a
K="Authorization: Bearer sekret-key-123"
C=/v1/completions
CH=/v1/chat/completions
# ck STATUS PARAM CODE PATH [CURL-ARGS...]: a request with the key, checked by cx
ck() { local st=$1 pa=$2 co=$3 path=$4; shift 4; cx "$st" "$pa" "$co" -H "$K" "$@" "$U$path"; }
alive() { ck 200 - - $C -d '{"prompt":"Once upon a time","max_tokens":4}'; }

# authentication
cx -H WWW-Authenticate 401 null invalid_api_key "$U$C" -d '{"prompt":"x"}'
ok $? "no Authorization header: 401 with WWW-Authenticate"
cx 401 - invalid_api_key -H "Authorization: Bearer sekret-key-12" "$U$C" -d '{"prompt":"x"}' &&
    cx 401 - - -H "Authorization: Bearer sekret-key-1234" "$U/v1/models" &&
    cx 401 - - -H "Authorization: Basic c2VrcmV0" "$U/metrics" &&
    cx 401 - - "$U/tokenize" -d '{"content":"x"}' &&
    cx 401 - - -H "Authorization: Bearer sekret-key-123x" "$U$CH" -d '{"messages":[]}'
ok $? "wrong keys (shorter, longer, not Bearer) and every endpoint but /health and /livez: 401"
cx 200 - - "$U/health" && cx 200 - - "$U/livez" && ck 200 - - /v1/models && ck 200 - - /metrics &&
    SC expect "$U" GET /v1/models 200 --header "Authorization: bearer   sekret-key-123  " > /dev/null
ok $? "/health and /livez need no key; the right key opens the rest (Python http.client too)"

# malformed bodies
ck 400 null invalid_json $C -d '{"prompt":"x",'
ok $? "truncated JSON: 400 invalid_json"
ck 400 - invalid_json $C -d '["prompt"]' && ck 400 - invalid_json $C -d '{"prompt":"x"} {}'
ok $? "not an object, or text after it: 400"
ck 400 - invalid_json $C -X POST -H 'Content-Length: 0'
ok $? "empty body: 400"
printf '{"prompt":"caf\xe9 \xff\xfe","max_tokens":2}' > bad-utf8.json
sc_ok "invalid UTF-8: 400 invalid_utf8" expect "$U" POST $C 400 --code invalid_utf8 --body-file bad-utf8.json --header "$K"
printf '{"prompt":"x","max_tokens":2,"pad":"%s"}' "$(head -c 70000 /dev/zero | tr '\0' a)" > big.json
ck 413 - request_too_large $C --data-binary @big.json
ok $? "a 70 KB body against --max-body 64K: 413"
code=$(curl -s -o chunked.out -w '%{http_code}' -H "$K" -H 'Transfer-Encoding: chunked' --data-binary @big.json "$U$C")
[ "$code" = 413 ]; ok $? "the same sent chunked (no Content-Length): 413 ($code)"
alive; ok $? "still serving"

# wrong types and values: 400 naming the field
bad=0
while IFS='|' read -r param body path; do
    ck 400 "$param" - "${path:-$C}" -d "$body" || { echo "# ($body)"; bad=1; }
done <<'EOF'
max_tokens|{"prompt":"x","max_tokens":"5"}
max_tokens|{"prompt":"x","max_tokens":2.5}
temperature|{"prompt":"x","temperature":"hot"}
top_p|{"prompt":"x","top_p":1.5}
top_k|{"prompt":"x","top_k":-1}
min_p|{"prompt":"x","min_p":[0.1]}
seed|{"prompt":"x","seed":-1}
stop|{"prompt":"x","stop":5}
stop|{"prompt":"x","stop":["a",""]}
stream|{"prompt":"x","stream":"true"}
logprobs|{"prompt":"x","logprobs":50}
top_logprobs|{"prompt":"x","top_logprobs":21}
echo|{"prompt":"x","echo":1}
prompt|{"prompt":{"text":"x"}}
prompt|{"prompt":["a",1]}
prompt|{"prompt":[1,-2]}
prompt|{"prompt":[1,99999]}
prompt|{"max_tokens":3}
forced_tokens|{"prompt":"x","forced_tokens":[1,512]}
forced_tokens|{"prompt":"x","forced_tokens":[]}
cache_prompt|{"prompt":"x","cache_prompt":"no"}
model|{"prompt":"x","model":7}
stream_options|{"prompt":"x","stream":true,"stream_options":true}
chat_template_kwargs.enable_thinking|{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":"no"}}|/v1/chat/completions
messages|{"messages":"hello"}|/v1/chat/completions
messages|{"messages":[]}|/v1/chat/completions
messages[0].content|{"messages":[{"role":"user","content":5}]}|/v1/chat/completions
messages[1].role|{"messages":[{"role":"user","content":"x"},{"content":"y"}]}|/v1/chat/completions
messages[0].role|{"messages":[{"role":"tool","content":"x"}]}|/v1/chat/completions
messages[0].content[1]|{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}|/v1/chat/completions
logprobs|{"messages":[{"role":"user","content":"x"}],"logprobs":3}|/v1/chat/completions
top_logprobs|{"messages":[{"role":"user","content":"x"}],"top_logprobs":3}|/v1/chat/completions
EOF
ok $bad "32 bodies with a wrong type or value: 400 with param naming the field"
bad=0
while IFS='|' read -r param body; do
    ck 400 "$param" - $C -d "$body" || { echo "# ($body)"; bad=1; }
done <<'EOF'
n|{"prompt":"x","n":2}
best_of|{"prompt":"x","best_of":3}
presence_penalty|{"prompt":"x","presence_penalty":0.5}
logit_bias|{"prompt":"x","logit_bias":{"50":10}}
tools|{"prompt":"x","tools":[{"type":"function"}]}
response_format|{"prompt":"x","response_format":{"type":"json_object"}}
suffix|{"prompt":"x","suffix":"end"}
EOF
ok $bad "fields 1b does not implement (n > 1, penalties, logit_bias, tools, json, suffix): 400, not ignored"
ck 200 - - $C -d '{"prompt":"x","max_tokens":2,"n":1,"presence_penalty":0,"logit_bias":{},"tools":[],"response_format":{"type":"text"},"user":"u1","unknown_field":{"a":[1]},"stream":null}'
ok $? "their neutral values, null, and unknown fields are accepted"

# max_tokens
ck 400 max_tokens - $C -d '{"prompt":"x","max_tokens":-1}' &&
    ck 400 max_tokens - $C -d '{"prompt":"x","max_tokens":1e12}' &&
    ck 400 max_completion_tokens - $CH -d '{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":1001}'
ok $? "negative max_tokens, 1e12, and 1001 above --max-tokens-cap 1000: 400"
r=$(curl -s -H "$K" "$U$C" -d '{"prompt":"Once upon a time","temperature":0}')
[ "$(jq .usage.completion_tokens <<<"$r")" = 16 ]
ok $? "no max_tokens on /v1/completions: 16, as OpenAI"
r=$(curl -s -H "$K" "$U$C" -d '{"prompt":"Once upon a time","max_tokens":0}')
jq -e '.choices[0].text == "" and .usage.completion_tokens == 0 and .choices[0].finish_reason == "length"' <<<"$r" > /dev/null
ok $? "max_tokens 0: an empty answer"

# model names, endpoints, methods
ck 404 null model_not_found $C -d '{"prompt":"x","model":"gpt-4o"}'
ok $? "an unknown model: 404 model_not_found"
sha=270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d
ck 200 - - $C -d '{"prompt":"x","max_tokens":1,"model":"stories260K.gguf"}' &&
    ck 200 - - $C -d "{\"prompt\":\"x\",\"max_tokens\":1,\"model\":\"$sha\"}" &&
    ck 200 - - $C -d '{"prompt":"x","max_tokens":1,"model":"llama"}' &&
    ck 200 - - $C -d '{"prompt":"x","max_tokens":1,"model":""}'
ok $? "the model's id, sha256, name, or an empty name: accepted"
ck 404 - not_found /v1/nothing && ck 404 - - /v2/completions -d '{}'
ok $? "unknown paths: 404"
cx -H Allow 405 - - -H "$K" "$U$C" && ck 405 - - /health -d x && ck 405 - - /v1/models -X DELETE
ok $? "wrong methods: 405 with Allow"
ck 200 - - /completions -d '{"prompt":"x","max_tokens":1}' &&
    ck 400 messages unsupported_value /chat/completions -d '{"messages":[{"role":"user","content":"x"}],"max_tokens":1}'
ok $? "the paths without /v1 work too (as llama-server; chat reaches the template check)"

# chat messages to a model without a chat template (stories260K has none): a 400 naming the
# field, as for a template 1b does not render, never the contents joined as plain text; the
# same streamed; the server serves on
ck 400 messages unsupported_value $CH -d '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":2}' &&
    jq -e '.error.type == "invalid_request_error" and
           .error.message == "the model has no chat template; send a plain prompt instead"' "$T/cx.out" > /dev/null &&
    ck 400 messages unsupported_value $CH -d '{"messages":[{"role":"user","content":"x"}],"stream":true}' && alive
ok $? "chat to a model without a chat template: 400 with the OpenAI error body, streamed too; serving on"

# the context
python3 -c 'import json; print(json.dumps({"prompt": "Once upon a time " * 700, "max_tokens": 2}))' > long.json
ck 400 - context_length_exceeded $C --data-binary @long.json
ok $? "a prompt longer than the context: 400 context_length_exceeded"
ck 400 - context_length_exceeded $C -d "{\"prompt\":[1],\"forced_tokens\":$(python3 -c 'print([5]*2048)')}"
ok $? "forced_tokens beyond the context: 400"
ck 400 tokens - /detokenize -d '{"tokens":[1,5000]}' && ck 400 content - /tokenize -d '{"text":"x"}'
ok $? "/tokenize and /detokenize check their fields"
alive; ok $? "still serving"

# a server with one slot, a queue of one, and a time limit
serve_start b -m "$S" --parallel 1 --queue 1 -t 1 --timeout 1.5 --idle-timeout 1
ok $? "server with --parallel 1 --queue 1 --timeout 1.5 --idle-timeout 1"
B=$URL_b
sc_ok "a client that dribbles its body a few bytes at a time: the others are served meanwhile" dribble "$B" --delay 0.05
# the queue: one running, one waiting, the third refused
curl -s -o q1.json "$B$C" -d '{"prompt":"Once upon a time","max_tokens":1500,"temperature":0}' &
q1=$!
sleep 0.3
curl -s -o q2.json "$B$C" -d '{"prompt":"Once upon a time","max_tokens":5,"temperature":0}' &
q2=$!
sleep 0.2
cx -H Retry-After 503 - overloaded "$B$C" -d '{"prompt":"x","max_tokens":2}'
ok $? "queue full (1 running, 1 waiting): 503 overloaded with Retry-After"
wait $q1 $q2
jq -e '.choices[0].finish_reason == "length" and .choices[0].timed_out == true
       and .usage.completion_tokens > 0 and .usage.completion_tokens < 1500' q1.json > /dev/null
ok $? "--timeout 1.5: the long request stops with what it has, finish_reason length, timed_out ($(jq -c .usage q1.json))"
jq -e '.usage.completion_tokens == 5 or .choices[0].timed_out == true' q2.json > /dev/null
ok $? "the queued request ran after it ($(jq -c '[.usage.completion_tokens, .choices[0].timed_out]' q2.json))"
grep -q '"end":"timeout"' b.log && grep -q '^ob_requests_cancelled_total{reason="timeout"} [1-9]' <<<"$(curl -s "$B/metrics")"
ok $? "timeouts are logged and counted"

# clients that vanish
sc_ok "a streaming client that resets the connection mid-stream: its sequence is cancelled, the slot freed" disconnect "$B" stream --tokens 1000
sc_ok "a client that vanishes while waiting for a whole answer: the same" disconnect "$B" wait --tokens 1000
# half-close: a whole request, then shutdown(SHUT_WR); the server counts the client as gone
# and cancels the request, and writes nothing back (its 499 is for the log only)
n499=$(grep -c '"status":499,.*"end":"client_abort"' b.log)
out=$(python3 - "$B" <<'EOF2'
import socket, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
bad = []
for stream in (False, False, False, False, True, True):
    body = b'{"prompt":"Once upon a time","max_tokens":1000,"stream":%s}' % (b"true" if stream else b"false")
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(5)
    got = b""
    try:
        while d := s.recv(65536):
            got += d
    except socket.timeout:
        bad.append("the connection stayed open")
    except OSError:
        pass
    s.close()
    # a whole answer: nothing at all; a stream: at most its 200 head and the tokens so far
    if (not stream and got) or b"499" in got or b"cancelled" in got:
        bad.append(repr(got[:120] + b"..." + got[-120:]))
print("; ".join(bad) or "nothing written back")
sys.exit(1 if bad else 0)
EOF2
)
rc=$?
sleep 0.1
[ $rc = 0 ] && [ "$(grep -c '"status":499,.*"end":"client_abort"' b.log)" = $((n499 + 4)) ] &&
    ! grep -q 'Application reported internal error' b.log
ok $? "4 whole requests and 2 streams half-closed after sending: $out; the log says 499 client_abort for the 4"
s=$(curl -sN "$B$C" -d '{"prompt":"Once upon a time","max_tokens":400,"stream":true}' | head -c 300)
grep -q '^data: {' <<<"$s"
ok $? "a client that reads a little of a stream and closes it (curl | head)"
for _ in 1 2 3; do
    timeout 0.2 curl -s "$B$C" -d '{"prompt":"Once upon a time","max_tokens":1000}' > /dev/null
done
sleep 0.3
m=$(curl -s "$B/metrics")
grep -q '^ob_slots_busy 0$' <<<"$m" && grep -q '^ob_requests_in_flight 0$' <<<"$m"
ok $? "three clients killed by timeout(1) while waiting: nothing left running"
python3 - "$B" <<'EOF'
import socket, sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
for junk in (b"GARBAGE\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\n{", b"\x00\xff" * 100):
    s = socket.create_connection((u.hostname, u.port))
    s.sendall(junk)
    s.close()
EOF
cx 200 - - "$B$C" -d '{"prompt":"Once upon a time","max_tokens":3}'
ok $? "garbage requests and half-sent bodies: the server still answers"
out=$(python3 - "$B" <<'EOF2'
import socket, sys, time, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
t0 = time.time()
s.settimeout(10)
d = s.recv(100)
print(f"{time.time() - t0:.2f}s {d[:40]!r}")
sys.exit(0 if time.time() - t0 < 4 else 1)
EOF2
)
rc=$?
sleep 0.1
[ $rc = 0 ] && grep -q '"end":"idle_timeout"' b.log
ok $? "a client that stops sending in the middle of its body is disconnected after --idle-timeout ($out)"
r=$(curl -s "$B$C" -d '{"prompt":"Once upon a time","max_tokens":3,"temperature":0}')
[ "$(jq -r .choices[0].text <<<"$r")" = ", there was" ]
ok $? "and its answers are still right"

kill -0 "$PID_a" && kill -0 "$PID_b"
ok $? "both servers still running"
alive; ok $? "still serving"
kill -TERM "$PID_a" "$PID_b"
serve_wait_exit "$PID_a" 10; a=$RC; serve_wait_exit "$PID_b" 10
[ "$a" = 0 ] && [ "$RC" = 0 ]; ok $? "SIGTERM: exit 0" || { echo "# a: $a, b: $RC"; tail -n 3 a.log b.log | sed 's/^/# /'; }
grep -v '^{' a.log b.log | head -5 | sed 's/^/# /'
! grep -qv '^{' a.log b.log && jq -e . a.log b.log > /dev/null
ok $? "stderr held only JSON lines"
