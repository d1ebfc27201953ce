#!/usr/bin/env bash
# 1b-serve's /v1/completions takes OpenAI's batch of prompts: "prompt" as a string, an array of
# strings, an array of token ids or an array of arrays of token ids. Each prompt is its own
# sequence and its own choice (index = its place), usage is summed, echo and logprobs apply to
# each; every choice has the bits of its prompt sent alone (at --parallel 1, and at --parallel 2
# with more prompts than slots); empty, mixed and oversized batches are 400s naming the field;
# a streamed batch names each chunk's choice and reassembles to the whole answer; the openai
# SDK's completions.create takes a list of strings and a list of token lists.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_p1 URL_p2  # set by name (printf -v), which shellcheck cannot see
plan 11
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
# p1: one slot, 5 places (parallel + queue); p2: two slots, a small context and small limits
serve_start p1 -m "$S" --parallel 1 --queue 4 -t 1 &&
    serve_start p2 -m "$S" --parallel 2 --ctx 64 -t 1 --max-prompts 6 --max-request-tokens 120
ok $? "two servers up: --parallel 1 --queue 4 at $URL_p1, --parallel 2 --ctx 64 at $URL_p2"

post() { curl -s "$1/v1/completions" -H 'Content-Type: application/json' -d "$2"; }
P='"Once upon a time","The cat","Lily was","A big red","One day"'
opts='"max_tokens":8,"temperature":0,"logprobs":2,"echo":true'

# each form: choices in order, each with its index; usage summed
post "$URL_p1" "{\"prompt\":\"The cat\",\"max_tokens\":4}" > s.json
post "$URL_p1" "{\"prompt\":[\"The cat\",\"One day\",\"The cat\"],\"max_tokens\":4}" > a.json
post "$URL_p1" "{\"prompt\":[1,400,300],\"max_tokens\":4}" > i.json
post "$URL_p1" "{\"prompt\":[[1,400,300],[1,50],[7]],\"max_tokens\":4}" > ii.json
jq -e '.choices | map(.index) == [0]' s.json > /dev/null &&
    jq -e '.choices | map(.index) == [0,1,2]' a.json > /dev/null &&
    jq -e '.choices | map(.index) == [0]' i.json > /dev/null &&
    jq -e '.choices | map(.index) == [0,1,2]' ii.json > /dev/null &&
    [ "$(jq -c '.choices[0] | del(.index)' s.json)" = "$(jq -c '.choices[2] | del(.index)' a.json)" ] &&
    [ "$(jq -c '.choices[0]' i.json)" = "$(jq -c '.choices[0]' ii.json)" ] &&
    jq -e '.usage.prompt_tokens == 3 + 2 + 1 and .usage.completion_tokens == 12
           and .usage.total_tokens == 18' ii.json > /dev/null
ok $? "a string, strings, token ids, token-id lists: one choice per prompt, index = place, usage summed" ||
    head -c 600 a.json ii.json | sed 's/^/# /'

# bitwise: each choice of a batch = its prompt alone (text, echo, logprobs JSON byte for byte)
bad=0
for i in 0 1 2 3 4; do
    p=$(jq -c ".[$i]" <<<"[$P]")
    post "$URL_p1" "{\"prompt\":$p,$opts}" | jq -c '.choices[0] | del(.index)' > one$i.json
done
post "$URL_p1" "{\"prompt\":[$P],$opts}" > b1.json
post "$URL_p2" "{\"prompt\":[$P],$opts}" > b2.json
for i in 0 1 2 3 4; do
    for b in b1 b2; do
        jq -e ".choices[$i].index == $i" $b.json > /dev/null || bad=1
        jq -c ".choices[$i] | del(.index)" $b.json > c.json
        cmp -s c.json one$i.json || { bad=1; echo "# $b choice $i differs from the prompt alone"; }
    done
done
jq -e '.choices[0].logprobs.token_logprobs | length > 8' b1.json > /dev/null || bad=1
ok $bad "5 prompts with echo and logprobs 2, at --parallel 1 and 2: every choice is its prompt alone, byte for byte"

# the same for token-id lists, and a sampled batch (temperature 1, seed): each its own stream
post "$URL_p1" '{"prompt":[1,400,300],"max_tokens":6,"temperature":1,"seed":3,"logprobs":1}' | jq -c '.choices[0] | del(.index)' > t0.json
post "$URL_p1" '{"prompt":[7,8],"max_tokens":6,"temperature":1,"seed":3,"logprobs":1}' | jq -c '.choices[0] | del(.index)' > t1.json
post "$URL_p2" '{"prompt":[[1,400,300],[7,8],[1,400,300]],"max_tokens":6,"temperature":1,"seed":3,"logprobs":1}' > tb.json
[ "$(jq -c '.choices[0] | del(.index)' tb.json)" = "$(cat t0.json)" ] &&
    [ "$(jq -c '.choices[1] | del(.index)' tb.json)" = "$(cat t1.json)" ] &&
    [ "$(jq -c '.choices[2] | del(.index)' tb.json)" = "$(cat t0.json)" ]
ok $? "sampled token-id prompts in a batch of 3 at --parallel 2 = each alone (ids, text, logprobs)"

# refusals: 400 invalid_request_error naming the field
J=(-H 'Content-Type: application/json')
cx 400 prompt invalid_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":[]}' &&
    cx 400 prompt invalid_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":["a",1]}' &&
    grep -q "mixes strings and token ids" cx.out &&
    cx 400 prompt invalid_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":[[1,2],"a"]}' &&
    cx 400 prompt invalid_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":[1,[2]]}' &&
    cx 400 'prompt[1]' invalid_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":[[1,2],[]]}' &&
    cx 400 prompt invalid_type "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":[null]}' &&
    cx 400 'prompt[1]' invalid_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":[[1,2],[1,2.5]]}' &&
    cx 400 'prompt[1]' invalid_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":[[1,2],[1,99999]]}' &&
    grep -q "'prompt\[1\]\[1\]' = 99999" cx.out &&
    cx 400 n unsupported_value "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":["a","b"],"n":2}'
ok $? "400s: empty array, strings mixed with ids, ids mixed with lists, an empty list, null, a bad id (prompt[1][1]), n 2"

long=$(printf 'x %.0s' $(seq 80))
cx 400 prompt too_many_prompts "$URL_p2/v1/completions" "${J[@]}" -d '{"prompt":["a","b","c","d","e","f","g"]}' &&
    grep -q -- "--max-prompts" cx.out &&
    cx 400 prompt too_many_prompts "$URL_p1/v1/completions" "${J[@]}" -d '{"prompt":["a","b","c","d","e","f"]}' &&
    grep -q "at most 5 sequences" cx.out &&
    cx 400 'prompt[1]' context_length_exceeded "$URL_p2/v1/completions" "${J[@]}" -d "{\"prompt\":[\"a\",\"$long\"]}" &&
    grep -q "'prompt\[1\]'" cx.out &&
    cx 400 prompt too_many_tokens "$URL_p2/v1/completions" "${J[@]}" \
        -d "{\"prompt\":[$(printf '[%s],' $(seq -s, 1 50) $(seq -s, 1 50) $(seq -s, 1 50) | sed 's/,$//')],\"max_tokens\":0}" &&
    grep -q -- "--max-request-tokens" cx.out
ok $? "400s: more prompts than --max-prompts, than parallel + queue can hold, a prompt past the context (named), more than --max-request-tokens"

# chat stays one conversation; a plain string prompt still works as before
cx 400 - - "$URL_p1/v1/chat/completions" "${J[@]}" -d '{"messages":[[{"role":"user","content":"a"}]]}' &&
    [ "$(post "$URL_p1" '{"prompt":"The cat","max_tokens":4}' | jq -c '.choices[0] | del(.index)')" = "$(jq -c '.choices[0] | del(.index)' s.json)" ]
ok $? "chat takes one conversation (an array of conversations is a 400); a single prompt is unchanged"

# streaming 3 prompts: every chunk names one choice; texts reassemble to the whole answer
post "$URL_p2" '{"prompt":["Once upon a time","The cat","One day"],"max_tokens":12,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}' > st.txt
post "$URL_p2" '{"prompt":["Once upon a time","The cat","One day"],"max_tokens":12,"temperature":0}' > whole.json
grep '^data: {' st.txt | sed 's/^data: //' > ev.jsonl
jq -s -e 'map(select(.choices | length > 0)) | all(.choices | length == 1 and (.[0].index | IN(0,1,2)))' ev.jsonl > /dev/null &&
    [ "$(grep -c '^data: \[DONE\]' st.txt)" = 1 ] && [ "$(grep '^data: ' st.txt | tail -n 1)" = 'data: [DONE]' ] &&
    [ "$(jq -s -c '[range(3) as $i | map(.choices[] | select(.index == $i) | .text) | add]' ev.jsonl)" = \
      "$(jq -c '[.choices[].text]' whole.json)" ] &&
    [ "$(jq -s -c '[range(3) as $i | map(.choices[] | select(.index == $i and .finish_reason != null)) | length]' ev.jsonl)" = '[1,1,1]' ] &&
    [ "$(jq -s -c 'map(select(.usage)) | .[0].usage | [.prompt_tokens, .completion_tokens]' ev.jsonl)" = \
      "$(jq -c '.usage | [.prompt_tokens, .completion_tokens]' whole.json)" ]
ok $? "a streamed batch of 3: each chunk one choice with its index, one finish each, texts = the whole answer's, usage summed, one [DONE]" ||
    head -c 800 st.txt | sed 's/^/# /'

# a stream whose batch has a bad prompt is refused before it starts
cx 400 'prompt[2]' - "$URL_p2/v1/completions" "${J[@]}" -d '{"prompt":[[1],[2],[]],"stream":true}'
ok $? "a streamed batch with an empty token list: 400 before any event"

# the log says how many prompts a request carried; the server's places are all free again
sleep 0.2
grep -q '"prompts":5' "$T/p1.log" && curl -s "$URL_p1/metrics" | grep -q '^ob_requests_in_flight 0$'
ok $? "the log line counts the prompts; nothing left in flight"

# the openai SDK: completions.create with a list of strings and a list of token lists
if need_python openai; then
    "$PY" - "$URL_p2" <<'EOF'
import sys, openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="none", max_retries=0)
def one(p):
    return c.completions.create(model="stories260K.gguf", prompt=p, max_tokens=6, temperature=0, logprobs=1)
for batch in (["Once upon a time", "The cat"], [[1, 400, 300], [1, 50]]):
    r = c.completions.create(model="stories260K.gguf", prompt=batch, max_tokens=6, temperature=0, logprobs=1)
    assert [x.index for x in r.choices] == [0, 1], r
    for i, p in enumerate(batch):
        a = one(p).choices[0]
        assert r.choices[i].text == a.text and r.choices[i].logprobs == a.logprobs, (i, r, a)
    assert r.usage.prompt_tokens == sum(one(p).usage.prompt_tokens for p in batch), r.usage
EOF
    ok $? "openai SDK: completions.create(prompt=[two strings]) and (prompt=[two token lists]): choices in order = each alone"
else
    skip "openai SDK batches" "python module openai missing"
fi
