#!/usr/bin/env bash
# vLLM's prompt_logprobs on 1b-serve, and scoring equals generation: a completion generated
# greedy and seeded-sampled, then scored as a prompt (prompt_logprobs, and echo with logprobs),
# has at every completion position the very bits the generation reported — the token's logprob
# and its alternatives — alone, among concurrent requests and inside a batch of prompts
# (tests/py/score_gen.py). Bad values are 400s naming the field; records refuse the field; the
# openai SDK sends it in extra_body and reads it back from each choice.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_qw URL_s  # set by name (printf -v), which shellcheck cannot see
plan 9
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
1b-synth --preset qwen3-small --vocab 8000 --tokenizer "$SHARED/models/qwen3-tokenizer/tokenizer.json" \
    -o q.gguf 2> /dev/null
serve_start s -m "$S" --parallel 4 -t 2 && serve_start qw -m q.gguf --parallel 2 -t 1
ok $? "1b-serve up: stories260K --parallel 4 at $URL_s, synthetic qwen3 at $URL_qw"

SG() { "$PY" "$OB_TOP/tests/py/score_gen.py" "$URL_s" "$@"; }
SG shape
ok $? "prompt_logprobs: [null, {id: {logprob, rank, decoded_token}}...], the prompt's token first, alternatives and ranks = echo's top list; 0 alternatives; [null] for one token"
"$PY" "$OB_TOP/tests/py/score_gen.py" "$URL_qw" chat
ok $? "chat (qwen3): prompt_logprobs beside the choices = the templated tokens' as a completion prompt"
SG equal greedy
ok $? "greedy: prompt_logprobs and echo over prompt + completion = the generation's logprobs and alternatives, bit for bit; every rank 1"
SG equal sampled
ok $? "seeded sampling (T 0.9, top_p 0.95): the same, bit for bit"
SG crowd
ok $? "the scores alone = among 7 concurrent requests (twice) = inside a batch of 3 prompts; a generation among them = alone"

J=(-H 'Content-Type: application/json')
cx 400 prompt_logprobs invalid_value "$URL_s/v1/completions" "${J[@]}" -d '{"prompt":"a","prompt_logprobs":-1}' &&
    cx 400 prompt_logprobs invalid_value "$URL_s/v1/completions" "${J[@]}" -d '{"prompt":"a","prompt_logprobs":21}' &&
    cx 400 prompt_logprobs invalid_type "$URL_s/v1/completions" "${J[@]}" -d '{"prompt":"a","prompt_logprobs":"2"}' &&
    cx 400 prompt_logprobs invalid_value "$URL_s/v1/completions" "${J[@]}" -d '{"prompt":"a","prompt_logprobs":1,"stream":true}' &&
    grep -q "not available with" cx.out &&
    cx 400 prompt_logprobs invalid_value "$URL_s/v1/chat/completions" "${J[@]}" -d '{"messages":[{"role":"user","content":"a"}],"prompt_logprobs":1.5}' &&
    cx 200 - - "$URL_s/v1/completions" "${J[@]}" -d '{"prompt":"a","prompt_logprobs":null,"max_tokens":1}' &&
    ! grep -q prompt_logprobs cx.out
ok $? "400s: -1, 21, a string, with stream, 1.5 on chat; null is absent"

# a record is not a request of 1b-serve's protocol: prompt_logprobs there is refused by name, in
# process and on the URL route alike (as echo is), rather than silently left out
rec='{"id":"r","prompt":"a","max_tokens":1,"prompt_logprobs":2}'
echo "$rec" | 1b-gen -m "$S" > /dev/null 2> e1.txt; r1=$?
echo "$rec" | 1b-gen --url "$URL_s" > /dev/null 2> e2.txt; r2=$?
[ $r1 = 3 ] && [ $r2 = 3 ] && grep -q "field 'prompt_logprobs' is not supported here" e1.txt &&
    grep -q "field 'prompt_logprobs' is not supported here" e2.txt &&
    echo '{"id":"r","prompt":"a","max_tokens":1,"prompt_logprobs":null}' | 1b-gen -m "$S" > /dev/null
ok $? "records: prompt_logprobs refused (exit 3, named) in process and through --url; null is absent" ||
    cat e1.txt e2.txt | sed 's/^/# /'

# the openai SDK: prompt_logprobs through extra_body, read back from the choice
if need_python openai; then
    "$PY" - "$URL_s" <<'PYEOF'
import json, sys, urllib.request, openai
c = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="none", max_retries=0)
r = c.completions.create(model="stories260K.gguf", prompt=[[1, 400, 300], [1, 50]], max_tokens=2,
                         temperature=0, extra_body={"prompt_logprobs": 2})
body = json.dumps({"prompt": [[1, 400, 300], [1, 50]], "max_tokens": 2, "temperature": 0,
                   "prompt_logprobs": 2}).encode()
raw = json.loads(urllib.request.urlopen(urllib.request.Request(
    sys.argv[1] + "/v1/completions", data=body, headers={"Content-Type": "application/json"})).read())
for i in range(2):
    got = r.choices[i].model_extra["prompt_logprobs"]
    assert got == raw["choices"][i]["prompt_logprobs"] and got[0] is None and len(got) == 3 - i, got
PYEOF
    ok $? "openai SDK: completions.create(extra_body={prompt_logprobs: 2}) on a batch: each choice carries them"
else
    skip "openai SDK prompt_logprobs" "python module openai missing"
fi
