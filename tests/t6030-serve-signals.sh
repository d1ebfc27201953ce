#!/usr/bin/env bash
# 1b-serve's life cycle: /health says "loading" until the model is in, then "ok"; SIGTERM
# during a request lets it finish (whole or streamed) and exits 0 within --grace, refusing new
# connections meanwhile; past the grace period (or on a second signal) running requests are
# cancelled cleanly (503, or an error event in a stream) and it still exits 0; the exit
# statuses of a bad command line, a bad model, an unknown route and a port in use.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
plan 17
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
C=/v1/completions
LONG='{"prompt":"Once upon a time","max_tokens":600,"temperature":0}'

# loading: a FIFO holds the model open until something is written to it
mkfifo model.fifo
1b-serve --port 0 -m model.fifo 2> f.log &
fp=$!
_serve_pids+=("$fp")
for i in $(seq 1 100); do grep -q listening f.log && break; sleep 0.05; done
F=http://127.0.0.1:$(grep -m1 listening f.log | jq -r .port)
[ "$(curl -s -w ' %{http_code}' "$F/health")" = '{"status":"loading"} 503' ] && cx 503 null loading "$F/v1/models" &&
    cx 503 - loading "$F$C" -d '{"prompt":"x"}' && cx 200 - - "$F/livez"
ok $? "while the model loads: /health 503 loading, the API 503, /livez 200"
( trap '' PIPE; echo "not a model" > model.fifo ) 2> /dev/null
serve_wait_exit "$fp" 10
[ "$RC" = 3 ] && grep -q "1b-serve: model.fifo" f.log; ok $? "then a bad model: exit 3 ($(grep -v '^{' f.log))"

# SIGTERM during a whole answer: it completes, the server exits 0
serve_start a -m "$S" -t 1 --grace 10
curl -s -o r1.json "$URL_a$C" -d "$LONG" &
c1=$!
sleep 0.4
kill -TERM "$PID_a"
sleep 0.3
curl -s -m 2 "$URL_a/health" > /dev/null; refused=$?
wait $c1
serve_wait_exit "$PID_a" 10
[ "$RC" = 0 ] && jq -e '.usage.completion_tokens == 600 and .choices[0].finish_reason == "length"' r1.json > /dev/null
ok $? "SIGTERM during a request: the request completes (600 tokens), exit 0 after ${WAITED}s"
[ "$refused" = 7 ]; ok $? "meanwhile new connections are refused (curl exit $refused)"
grep -q '"event":"draining"' a.log && grep -q '"event":"stopped","cancelled":0' a.log
ok $? "draining and stopped are logged"

# the same with a stream
serve_start b -m "$S" -t 1 --grace 10
curl -sN -o s1.txt "$URL_b$C" -d "${LONG%\}},\"stream\":true}" &
c1=$!
sleep 0.4
kill -TERM "$PID_b"
wait $c1
serve_wait_exit "$PID_b" 10
[ "$RC" = 0 ] && [ "$(grep -c '^data: {' s1.txt)" = 601 ] && [ "$(tail -n 2 s1.txt | head -n 1)" = "data: [DONE]" ]
ok $? "SIGTERM during a stream: all 600 tokens and [DONE] arrive, exit 0 after ${WAITED}s"

# past the grace period: cancelled cleanly
serve_start c -m "$S" -t 1 --grace 0.5
curl -s -o r2.json -w '%{http_code}' "$URL_c$C" -d '{"prompt":"Once upon a time","max_tokens":1800}' > r2.code &
c1=$!
curl -sN -o s2.txt "$URL_c$C" -d '{"prompt":"Once upon a time","max_tokens":1800,"stream":true}' &
c2=$!
sleep 0.4
kill -TERM "$PID_c"
wait $c1 $c2
serve_wait_exit "$PID_c" 10
[ "$RC" = 0 ] && awk -v w="$WAITED" 'BEGIN { exit !(w < 3) }'
ok $? "--grace 0.5 with two long requests: exit 0 after ${WAITED}s"
[ "$(cat r2.code)" = 503 ] && jq -e '.error.code == "shutting_down"' r2.json > /dev/null
ok $? "the whole-answer request gets 503 shutting_down ($(cat r2.code))"
grep -q '^data: {"error":{.*"code":"shutting_down"' s2.txt && [ "$(tail -n 2 s2.txt | head -n 1)" = "data: [DONE]" ]
ok $? "the stream gets an error event, then [DONE]"
grep -q '"event":"cancelling","in_flight":2' c.log; ok $? "the cancellation is logged"

# a second signal does not wait for the grace period
serve_start d -m "$S" -t 1 --grace 60
curl -s -o r3.json "$URL_d$C" -d '{"prompt":"Once upon a time","max_tokens":1800}' &
c1=$!
sleep 0.4
kill -TERM "$PID_d"; sleep 0.2; kill -INT "$PID_d"
wait $c1
serve_wait_exit "$PID_d" 10
[ "$RC" = 0 ] && awk -v w="$WAITED" 'BEGIN { exit !(w < 3) }' && jq -e '.error.code == "shutting_down"' r3.json > /dev/null
ok $? "SIGTERM then SIGINT: cancelled at once, exit 0 after ${WAITED}s"
serve_start e -m "$S" -t 1
kill -INT "$PID_e"; serve_wait_exit "$PID_e" 5
[ "$RC" = 0 ]; ok $? "SIGINT on an idle server: exit 0"

# exit statuses
serve_start f -m "$S" -t 1
port=${URL_f##*:}
1b-serve -m "$S" --port "$port" 2> inuse.txt; rc=$?
[ $rc = 5 ] && grep -q "1b-serve: cannot listen on 127.0.0.1 port $port" inuse.txt
ok $? "port in use: exit 5 ($(grep -v '^{' inuse.txt))"
kill -TERM "$PID_f"
check_exit 3 "a model that is not one: exit 3" 1b-serve -m /etc/hostname --port 0
check_exit 4 "route hrx is not built in: exit 4" 1b-serve -m "$S" -d hrx --port 0
check_exit 3 "a missing --api-key-file: exit 3" 1b-serve -m "$S" --api-key-file "$T/nokey" --port 0
bad=0
for args in "" "-m $S --port 70000" "-m $S --parallel 0" "-m $S --grace x" "-m $S --max-body 5Q" \
    "-m $S --api-key k --api-key-file f" "-m $S extra"; do
    # shellcheck disable=SC2086
    1b-serve $args > /dev/null 2>&1; rc=$?
    [ $rc = 2 ] || { echo "# '$args': exit $rc"; bad=1; }
done
ok $bad "usage errors (no model, bad port, parallel, grace, size, both keys, extra argument): exit 2"
