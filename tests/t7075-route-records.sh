#!/usr/bin/env bash
# A server URL is one more route behind the same options and the same record writer: the same
# requests through -d cpu and through -d URL of a 1b-serve on cpu (--alias: the model named as
# in process) give byte-identical records apart from the route (and the timing, which is
# measured, not computed); --url URL is -d URL; the options only an in-process route takes
# are refused with a URL, naming the first one. The request interface under them
# (tests/unit/client.c) on both routes: submit, cancel, refusals, scoring, the barrier.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/fixture_env.sh"
plan 7
cd "$T" || exit 1
S=$SHARED/models/stories260K.gguf

port=$(free_port)
# named as in process (the model's own name, not the file's): a server's name for its model
# is what its records carry
1b-serve -m "$S" --port "$port" --parallel 2 -t 1 --alias llama 2> serve.log &
_fx_pids+=("$!")
URL=http://127.0.0.1:$port

# prompt text and ids, no log-probabilities, a stop string, the most alternatives, a seed;
# no prompt cache, whose hits depend on what ran before (as the timing does)
cat > p.jsonl <<'EOF'
{"id":"a","prompt":"Once upon a time","max_tokens":12,"top_logprobs":3,"cache_prompt":false}
{"id":"b","prompt":[1,403,407],"max_tokens":5,"logprobs":false,"cache_prompt":false,"extra":{"kept":[1,2]}}
{"id":"c","prompt":"Sam saw a bird","max_tokens":40,"stop":["."],"top_logprobs":20,"cache_prompt":false}
{"id":"d","prompt":"Lily had a red ball. She","max_tokens":16,"temperature":0.8,"seed":7,"top_logprobs":1,"cache_prompt":false}
EOF
untimed() { jq -c 'del(.route, .timing)' "$@"; }
1b-gen -m "$S" -d cpu < p.jsonl > cpu.jsonl; rc1=$?
1b-gen -d "$URL" --wait 30 --parallel 2 < p.jsonl > url.jsonl; rc2=$?
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ "$(wc -l < url.jsonl)" -eq 4 ]
ok $? "the same requests in process and through -d URL (exit $rc1, $rc2)"
untimed cpu.jsonl > a.txt
untimed url.jsonl > b.txt
check_same "byte-identical records apart from route and timing (fields, order, bits, model, prompt ids)" a.txt b.txt
jq -e -s --arg u "$URL" 'all(.[0:4][]; .route == "cpu") and all(.[4:][]; .route == $u)' cpu.jsonl url.jsonl > /dev/null
ok $? "the route field names each route"

out=$("$UNIT/client" "$S" "$URL" 2>&1); rc=$?
ok $rc "the request interface in process and on the server ($(grep -c '^ok' <<<"$out") checks)" ||
    grep -v '^ok' <<<"$out" | head -20 | sed 's/^/# /'

1b-gen --url "$URL" < p.jsonl | untimed > c.txt
check_same "--url URL is -d URL" b.txt c.txt

bad=0
for o in "-t 2" "--gpu 1" "--ctx 64" "--spec ngram"; do
    # shellcheck disable=SC2086  # the option and its value are two words
    1b-gen -d "$URL" $o < p.jsonl > /dev/null 2> err.txt; rc=$?
    [ $rc -eq 2 ] && grep -q -- "^1b-gen: ${o% *} applies to in-process routes, not to a server URL$" err.txt || { bad=1; sed 's/^/# /' err.txt; }
done
1b-logprobs --url "$URL" --parallel 2 < cpu.jsonl > /dev/null 2> err.txt; rc=$?
[ $rc -eq 2 ] && grep -q -- "--parallel applies to in-process routes" err.txt || bad=1
1b-batchrep -d "$URL" -t 1 -q > /dev/null 2> err.txt; rc=$?
[ $rc -eq 2 ] && grep -q -- "-t applies to in-process routes" err.txt || bad=1
ok $bad "in-process options with a URL: exit 2, one line naming the option (1b-gen, 1b-logprobs, 1b-batchrep)"
1b-serve -m "$S" -d "$URL" > /dev/null 2> err.txt; rc=$?
[ $rc -eq 2 ] && grep -q "a server URL is not a route 1b-serve can run" err.txt
ok $? "1b-serve -d URL: a usage error (exit $rc)"
