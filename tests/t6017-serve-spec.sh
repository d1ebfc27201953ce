#!/usr/bin/env bash
# Speculative decoding through 1b-serve: a server run with --spec ngram answers every request
# with the very answer a plain server gives (choices byte for byte, whole and streamed) and
# with 1b-gen's plain bits; "spec" per request turns it on (or off) against the server's
# default; /metrics counts drafted and accepted tokens, and both acceptance and rejection
# happened; a bad "spec" is a 400 naming it. A server with a draft model (--draft: the Q4_K_M
# copy of the model) answers the same bodies with the same bytes, whole and streamed, and
# "spec":"draft" is a 400 on a server without one. On a synthetic Qwen3 (its greedy text
# repeats, so drafts are taken) and, where scripts/models fetched it, SmolLM2 editing code.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_dr URL_pl URL_sm URL_sp  # set by name (printf -v), which shellcheck cannot see
plan 12
cd "$T" || exit 1
1b-synth --preset qwen3-small --vocab 8000 --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" \
    -o q.gguf 2> /dev/null
# --spec-fixed: drafts from acceptance alone (the counts below must not depend on the load)
serve_start sp -m q.gguf --parallel 4 -t 1 --spec ngram --spec-max 6 --spec-fixed &&
    serve_start pl -m q.gguf --parallel 4 -t 1
ok $? "servers up: --spec ngram at $URL_sp, plain at $URL_pl"

post() { curl -s "$1$2" -H 'Content-Type: application/json' -d "$3"; }
choices() { jq -c '{choices, usage}'; }
metric() { curl -s "$1/metrics" | awk -v k="$2" '$1 == k { print $2 }'; }
cat > bodies.txt <<'EOF2'
/v1/completions {"prompt":"Once upon a time","max_tokens":96,"temperature":0,"logprobs":3}
/v1/completions {"prompt":[1,400,300,42,400,300],"max_tokens":80,"temperature":0.9,"seed":5,"logprobs":2}
/v1/completions {"prompt":"The cat","max_tokens":120,"temperature":0,"logprobs":1,"stop":["ing"]}
/v1/chat/completions {"messages":[{"role":"user","content":"Hi"}],"max_tokens":120,"temperature":0,"logprobs":true,"top_logprobs":2}
/v1/chat/completions {"messages":[{"role":"user","content":"Say it twice"}],"max_tokens":64,"temperature":1,"seed":9,"logprobs":true,"chat_template_kwargs":{"enable_thinking":false}}
EOF2
bad=0
while read -r path body; do
    a=$(post "$URL_sp" "$path" "$body" | choices); b=$(post "$URL_pl" "$path" "$body" | choices)
    [ -n "$a" ] && [ "$a" = "$b" ] || { bad=1; echo "# $path $body: the answers differ"; }
done < bodies.txt
ok $bad "5 requests (greedy, sampled, a stop string, chat): --spec ngram answers = plain answers, byte for byte"

d=$(metric "$URL_sp" ob_spec_drafted_total); a=$(metric "$URL_sp" ob_spec_accepted_total)
[ "${d:-0}" -gt 0 ] && [ "${a:-0}" -gt 0 ] && [ "$a" -lt "$d" ] && [ "$(metric "$URL_pl" ob_spec_drafted_total)" = 0 ]
ok $? "/metrics: $d tokens drafted, $a accepted (both accepted and rejected); the plain server drafted none"

echo '{"id":"g","prompt":"Once upon a time","max_tokens":96,"top_logprobs":3}' | 1b-gen -m q.gguf -t 1 > g.jsonl
sc_ok "the speculating server = 1b-gen's plain record (ids, bits, top 3, text, usage)" gen-match "$URL_sp" /v1/completions \
    '{"prompt":"Once upon a time","max_tokens":96,"temperature":0,"logprobs":3}' g.jsonl
sc_ok "streamed = whole on the speculating server (completions, stop string)" stream-match "$URL_sp" /v1/completions \
    '{"prompt":"The cat","max_tokens":120,"temperature":0,"logprobs":1,"stop":["ing"]}'
sc_ok "streamed = whole on the speculating server (chat)" stream-match "$URL_sp" /v1/chat/completions \
    '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":120,"temperature":0,"logprobs":true,"top_logprobs":2}'

# per request: on against the plain server's default, off against the speculating one's
b='{"prompt":"Once upon a time","max_tokens":96,"temperature":0,"logprobs":3}'
d0=$(metric "$URL_pl" ob_spec_drafted_total); s0=$(metric "$URL_sp" ob_spec_drafted_total)
x=$(post "$URL_pl" /v1/completions "${b%\}},\"spec\":\"ngram\"}" | choices)
y=$(post "$URL_sp" /v1/completions "${b%\}},\"spec\":\"off\"}" | choices)
z=$(post "$URL_pl" /v1/completions "$b" | choices)
[ "$x" = "$z" ] && [ "$y" = "$z" ] && [ "$(metric "$URL_pl" ob_spec_drafted_total)" -gt "$d0" ] &&
    [ "$(metric "$URL_sp" ob_spec_drafted_total)" = "$s0" ]
ok $? "\"spec\":\"ngram\" speculates on the plain server, \"spec\":\"off\" not on the other; the answers are the same"

J=(-H 'Content-Type: application/json')
cx 400 spec invalid_value "$URL_sp/v1/completions" "${J[@]}" -d '{"prompt":"a","spec":"fast"}' &&
    cx 400 spec invalid_type "$URL_sp/v1/chat/completions" "${J[@]}" -d '{"messages":[{"role":"user","content":"a"}],"spec":true}' &&
    cx 200 - - "$URL_sp/v1/completions" "${J[@]}" -d '{"prompt":"a","spec":null,"max_tokens":1}'
ok $? "400s: \"spec\":\"fast\", \"spec\":true; null is absent"

# a draft model: the same answers, streamed too; "spec":"draft" needs one
1b-synth --preset qwen3-small --vocab 8000 --type q4_k_m \
    --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" -o qd.gguf 2> /dev/null
# --spec-fixed: how much is drafted from acceptance alone, not from the timed costs (on a
# loaded machine those can leave too few drafts for both outcomes below to be seen)
serve_start dr -m q.gguf --parallel 4 -t 1 --draft qd.gguf --spec-fixed
bad=0   # the plain server's cache is warm by now: cached_tokens differ, nothing else may
while read -r path body; do
    a=$(post "$URL_dr" "$path" "$body" | choices | jq -c 'del(.usage.prompt_tokens_details)')
    b=$(post "$URL_pl" "$path" "$body" | choices | jq -c 'del(.usage.prompt_tokens_details)')
    [ -n "$a" ] && [ "$a" = "$b" ] || { bad=1; echo "# $path $body: the answers differ"; }
done < bodies.txt
d=$(metric "$URL_dr" ob_spec_drafted_total); a=$(metric "$URL_dr" ob_spec_accepted_total)
[ $bad = 0 ] && [ "${a:-0}" -gt 0 ] && [ "$a" -lt "${d:-0}" ]
ok $? "--draft (the model in Q4_K_M): the 5 answers = plain answers, byte for byte ($a of $d drafts accepted)"
sc_ok "streamed = whole on the drafting server (chat)" stream-match "$URL_dr" /v1/chat/completions \
    '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":120,"temperature":0,"logprobs":true,"top_logprobs":2}'
out=$(curl -s -w '\n%{http_code}' "$URL_pl/v1/completions" "${J[@]}" -d '{"prompt":"a","spec":"draft"}')
[ "$(tail -n1 <<<"$out")" = 400 ] && grep -q 'no draft model' <<<"$out"
ok $? "\"spec\":\"draft\" on a server without --draft: 400 ($(head -n1 <<<"$out" | head -c 160))"

# a real model editing code: drafts taken, the plain bits
M=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -f "$M" ]; then
    serve_start sm -m "$M" --parallel 2 -t 2 --spec ngram
    req='{"id":"c","messages":[{"role":"user","content":"Rename total to acc and print the function again:\n\ndef add_all(values):\n    total = 0\n    for v in values:\n        total = total + v\n    return total\n"}],"max_tokens":64,"top_logprobs":2}'
    echo "$req" | 1b-gen -m "$M" -t 2 > gs.jsonl
    body=$(jq -c '{messages, max_tokens, temperature: 0, logprobs: true, top_logprobs: 2}' <<<"$req")
    out=$(SC gen-match "$URL_sm" /v1/chat/completions "$body" gs.jsonl 2>&1); rc=$?
    a=$(metric "$URL_sm" ob_spec_accepted_total)
    [ $rc = 0 ] && [ "${a:-0}" -gt 0 ]
    ok $? "SmolLM2 editing code with --spec ngram: 1b-gen's plain bits, $a drafted tokens accepted" || echo "# $out"
else
    skip "SmolLM2 with --spec ngram" "run scripts/models"
fi
