#!/usr/bin/env bash
# The measuring tools against a real server: 1b-serve --parallel 4 started here on 127.0.0.1.
# The URL route must be the in-process route to the bit (1b-gen, and 1b-agree says exact),
# batched copies must be one state (1b-batchrep), and scoring through the server must give the
# same bits as scoring in process (1b-logprobs --url, both wires, and --text).
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/fixture_env.sh"
declare URL_c URL_s PID_s  # set by name (printf -v), which shellcheck cannot see
if [ ! -x "$BIN/1b-serve" ]; then      # a missing binary is a failure, never a skip
    plan 1
    ok 1 "1b-serve end to end: $BIN/1b-serve is missing (make all)"
    exit 1
fi
plan 14
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf
M=$OB_TOP/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf

# a server on a free port; the clients wait for it (--wait) as they would for any server
serve() {
    local name=$1 port
    shift
    port=$(free_port)
    1b-serve --port "$port" "$@" 2> "$T/$name.serve.log" &
    _fx_pids+=("$!")
    printf -v "PID_$name" '%s' "$!"
    printf -v "URL_$name" 'http://127.0.0.1:%s' "$port"
}
serve s -m "$S" --parallel 4 -t 2

cat > p.jsonl <<'EOF'
{"id":"p1","prompt":"Once upon a time","max_tokens":48,"top_logprobs":3}
{"id":"p2","prompt":"The little dog","max_tokens":32,"top_logprobs":5}
{"id":"p3","prompt":"Tim and Sue went to the park.","max_tokens":40,"top_logprobs":2}
{"id":"p4","prompt":"Lily had a red ball. She","max_tokens":24,"temperature":0.8,"seed":7,"top_logprobs":1}
{"id":"p5","prompt":"One day, a big bear","max_tokens":64,"top_logprobs":0}
{"id":"p6","prompt":[1,403,407,261,378],"max_tokens":16,"top_logprobs":4}
{"id":"p7","prompt":"Sam saw a bird","max_tokens":40,"stop":["."],"top_logprobs":2}
{"id":"p8","prompt":"The sun was","max_tokens":20,"top_logprobs":20}
EOF
1b-gen -m "$S" -d cpu < p.jsonl | 1b-agree - <(1b-gen --url "$URL_s" --wait 30 --parallel 4 < p.jsonl) > agree.txt; rc=$?
ok $rc "1b-gen -d cpu | 1b-agree - <(1b-gen --url 1b-serve --parallel 4): exact (exit $rc)" || sed 's/^/# /' agree.txt
grep -q "^  A-B .* exact$" agree.txt; ok $? "the pair is reported exact"
1b-gen -m "$S" < p.jsonl > cpu.jsonl
1b-gen --url "$URL_s" --parallel 4 --repeat 3 < p.jsonl > url3.jsonl; rc=$?
1b-agree --json r.json url3.jsonl cpu.jsonl > /dev/null; rc2=$?
[ $rc -eq 0 ] && [ $rc2 -eq 0 ] && jq -e '.inputs[0].repeatable == true and .inputs[0].ids_repeated == 8
    and .inputs[0].nonf32_values == 0' r.json > /dev/null
ok $? "3 repeats of 8 requests, 4 at a time on the server: repeatable, all float32, exact vs cpu"
jq -e -s 'all(.[].tokens[]; has("id") and has("bits"))' url3.jsonl > /dev/null; ok $? "1b-serve reports ids and float32 values"

# batched copies: one state, and the state the in-process barrier gives (the field report's
# probe as a plain prompt: stories260K has no chat template)
PROBE="Explain in one paragraph why the sky appears blue."
1b-batchrep --url "$URL_s" --prompt "$PROBE" --width 4 --rounds 3 --max-tokens 32 --vs-solo --json b.json > b.txt; rc=$?
[ $rc -eq 0 ] && jq -e '.states == 1 and .vs_solo.identical == 12 and .round_to_round.identical == 8' b.json > /dev/null
ok $? "1b-batchrep --url against --parallel 4: one state, 12/12 identical to the solo answer" || sed 's/^/# /' b.txt
sed 's/^/# /' b.txt
1b-batchrep -m "$S" --prompt "$PROBE" --width 4 --rounds 1 --max-tokens 32 -q --json local.json
[ "$(jq -r '.state_list[0].fingerprint' b.json)" = "$(jq -r '.state_list[0].fingerprint' local.json)" ]
ok $? "the server's state is the in-process state (fingerprint $(jq -r '.state_list[0].fingerprint' b.json))"

# scoring through the server
1b-logprobs --url "$URL_s" < cpu.jsonl > sc.jsonl; rc=$?
[ $rc -eq 0 ] && 1b-agree cpu.jsonl sc.jsonl > /dev/null && cmp -s <(jq -c .tokens cpu.jsonl) <(jq -c .tokens sc.jsonl)
ok $? "1b-logprobs --url (forced_tokens): the same tokens and bits as generated in process"
1b-logprobs --url "$URL_s" --wire echo < cpu.jsonl > sce.jsonl; rc=$?
[ $rc -eq 0 ] && 1b-agree cpu.jsonl sce.jsonl > /dev/null; ok $? "1b-logprobs --url --wire echo: the same bits"
1b-logprobs -m "$S" -d ref < cpu.jsonl > ref.jsonl
1b-logprobs --url "$URL_s" < ref.jsonl > sc-ref.jsonl
check_exit 0 "records first scored on ref, rescored through the server: exactly cpu's bits" 1b-agree cpu.jsonl sc-ref.jsonl
printf '%s\n' 'Once upon a time, there was a little girl named Lily.' 'The cat sat on the mat.' > text.txt
1b-logprobs -m "$S" --text < text.txt > t-cpu.jsonl
1b-logprobs --url "$URL_s" --text < text.txt > t-url.jsonl; rc=$?
[ $rc -eq 0 ] && 1b-agree t-cpu.jsonl t-url.jsonl > /dev/null &&
    [ "$(jq -c '[.n_tokens, .logprob_sum]' t-cpu.jsonl)" = "$(jq -c '[.n_tokens, .logprob_sum]' t-url.jsonl)" ]
ok $? "--text through the server (it tokenizes, echo): the same tokens, bits and sum"

# chat to a model without a chat template through the server: its 400 is an error record for
# 1b-gen (as every error reply is: finish_reason "error", one line, exit 3, the record before it
# written), and exit 3 for 1b-batchrep's chat probe
printf '%s\n' '{"id":"a","prompt":"Once upon a time","max_tokens":2}' \
    '{"id":"b","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":2}' > chat.jsonl
1b-gen --url "$URL_s" chat.jsonl > out.jsonl 2> err.txt; rc=$?
1b-batchrep --url "$URL_s" --width 2 --rounds 1 --max-tokens 2 -q 2> err2.txt; rc2=$?
[ $rc -eq 3 ] && [ "$(jq -r '.id + ":" + .finish_reason' out.jsonl | tr '\n' ' ')" = "a:length b:error " ] &&
    [ "$(wc -l < err.txt)" -eq 1 ] &&
    grep -q "^1b-gen: $URL_s: id b: HTTP 400: the model has no chat template; send a plain prompt instead$" err.txt &&
    [ $rc2 -eq 3 ] && grep -q "no chat template" err2.txt
ok $? "messages to a template-less model through 1b-serve: exit 3 for 1b-gen and 1b-batchrep ($rc, $rc2: $(cat err.txt) | $(head -1 err2.txt))"

# a model with a chat template: messages and thinking through both routes
if [ -f "$M" ]; then
    serve c -m "$M" --parallel 4 -t 2
    printf '%s\n' '{"id":"c1","messages":[{"role":"user","content":"Say hi."}],"max_tokens":12,"top_logprobs":2}' \
        '{"id":"c2","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is 2+2?"}],"max_tokens":12,"thinking":false}' > c.jsonl
    1b-gen -m "$M" < c.jsonl > c-cpu.jsonl
    1b-gen --url "$URL_c" --wait 60 --parallel 2 < c.jsonl > c-url.jsonl
    check_exit 0 "SmolLM2 chat records (ChatML): the server's are cpu's to the bit" 1b-agree c-cpu.jsonl c-url.jsonl
else
    skip "SmolLM2 chat records" "run scripts/models"
fi

# the server goes away
kill "$PID_s"
wait "$PID_s" 2>/dev/null
out=$(1b-gen --url "$URL_s" --wait 0 < p.jsonl 2>&1 >/dev/null); rc=$?
[ $rc -eq 4 ] && grep -q unreachable <<<"$out"; ok $? "after the server stopped: exit 4 ($out)"
out=$(1b-batchrep --url "$URL_s" --wait 0 -q 2>&1); rc=$?
[ $rc -eq 4 ]; ok $? "1b-batchrep too: exit 4"
