#!/usr/bin/env bash
# 1b-serve's life cycle: /health says "loading" until the model is in, then "ok"; SIGTERM
# during a request lets it finish (whole or streamed) and exits 0 within --grace, refusing new
# connections meanwhile; past the grace period (or on a second signal) running requests are
# cancelled cleanly (503, or an error event in a stream) and it still exits 0; every 503 while
# loading or draining carries Retry-After; a signal during the load stops it at once; a client
# still sending its body does not hold the drain up; SIGHUP and SIGQUIT drain as SIGTERM does
# (SIGHUP stays ignored under nohup), SIGUSR1, SIGUSR2 and SIGALRM are logged and ignored; the
# exit statuses of a bad command line, a bad model, an unknown route and a port in use.
# Run under nohup (SIGHUP ignored), every server would inherit the ignored SIGHUP and keep it
# so, as checked below: the test then runs itself again with SIGHUP's default disposition.
if [ -z "${OB_T6030_HUP:-}" ] && [ -r /proc/$$/status ] &&
    (( 0x$(awk '/^SigIgn:/ { print $2 }' /proc/$$/status) & 1 )); then
    OB_T6030_HUP=1 exec env --default-signal=HUP bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
# the servers' addresses and pids, set by name (printf -v), which shellcheck cannot see
declare URL_a PID_a URL_b PID_b URL_c PID_c URL_d PID_d PID_e URL_f PID_f URL_g PID_g URL_h PID_h \
    URL_i PID_i PID_j URL_k PID_k
plan 25
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
C=/v1/completions
LONG='{"prompt":"Once upon a time","max_tokens":600,"temperature":0}'

# loading: a FIFO holds the model open until something is written to it
mkfifo model.fifo
1b-serve --port 0 -m model.fifo 2> f.log &
fp=$!
_serve_pids+=("$fp")
for _ in $(seq 1 100); do grep -q listening f.log && break; sleep 0.05; done
F=http://127.0.0.1:$(grep -m1 listening f.log | jq -r .port)
[ "$(curl -s -w ' %{http_code}' "$F/health")" = '{"status":"loading"} 503' ] && cx 503 null loading "$F/v1/models" &&
    cx 503 - loading "$F$C" -d '{"prompt":"x"}' && cx 200 - - "$F/livez"
ok $? "while the model loads: /health 503 loading, the API 503, /livez 200"
curl -s -o /dev/null -D health.hdr "$F/health" && grep -q '^HTTP/1.1 503' health.hdr &&
    grep -qi '^Retry-After: 1' health.hdr && cx -H Retry-After 503 - loading "$F/tokenize" -d '{"content":"x"}'
ok $? "every 503 while loading carries Retry-After, /health's too"
( trap '' PIPE; echo "not a model" > model.fifo ) 2> /dev/null
serve_wait_exit "$fp" 10
[ "$RC" = 3 ] && grep -q "1b-serve: model.fifo" f.log; ok $? "then a bad model: exit 3 ($(grep -v '^{' f.log))"
# a signal while the model loads (here: forever) stops the server at once
1b-serve --port 0 -m model.fifo 2> f2.log &
fp=$!
_serve_pids+=("$fp")
for _ in $(seq 1 100); do grep -q loading f2.log && break; sleep 0.05; done
kill -TERM "$fp"
serve_wait_exit "$fp" 5
[ "$RC" = 0 ] && grep -q '"event":"stopped",.*"signal":"SIGTERM","while":"loading"' f2.log
ok $? "SIGTERM while the model loads: exit 0 at once ($RC after ${WAITED}s), logged"

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

# draining: on a connection kept alive from before the signal, /health and the API answer 503
# with Retry-After (and the API's closes the connection). The drain lasts while a stream of
# several MB is not read by its client.
serve_start g -m "$S" -t 1 --grace 10
out=$(python3 - "${URL_g##*:}" "$PID_g" <<'EOF'
import http.client, json, os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
keep = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
keep.request("GET", "/health")
r = keep.getresponse(); r.read()
assert r.status == 200
long = socket.create_connection(("127.0.0.1", port))
b = json.dumps({"prompt": "Once upon a time", "max_tokens": 2000, "temperature": 0, "stream": True,
                "logprobs": 20}).encode()
long.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
time.sleep(0.3)
os.kill(pid, signal.SIGTERM)
time.sleep(0.3)
res = []
keep.request("GET", "/health")
r = keep.getresponse(); body = r.read()
res.append((r.status, body.decode(), r.getheader("Retry-After")))
keep.request("POST", "/v1/completions", body=b'{"prompt":"x","max_tokens":1}')
r = keep.getresponse(); body = r.read()
res.append((r.status, json.loads(body)["error"]["code"], r.getheader("Retry-After"), r.getheader("Connection")))
long.settimeout(20)
d = b""
while b"data: [DONE]" not in d[-100:]:
    x = long.recv(1 << 20)
    if not x:
        break
    d += x
res.append(d.split(b"\r\n")[0].decode() + (" [DONE]" if b"data: [DONE]" in d[-100:] else ""))
print(json.dumps(res))
EOF
)
serve_wait_exit "$PID_g" 10
echo "# $out"
[ "$out" = '[[503, "{\"status\":\"draining\"}", "1"], [503, "shutting_down", "1", "close"], "HTTP/1.1 200 OK [DONE]"]' ] && [ "$RC" = 0 ]
ok $? "draining: /health 503 draining and the API 503 shutting_down, both with Retry-After, on an open connection; the running request completes"

# a client still sending its body does not hold the drain up (it would only get 503)
serve_start h -m "$S" -t 1 --grace 5
python3 - "${URL_h##*:}" > dribble.out <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
s.settimeout(0.2)
t0 = time.time()
for i in range(200):
    try:
        s.send(b" ")
        if s.recv(100) == b"":
            break
    except socket.timeout:
        pass
    except OSError:
        break
print(f"closed after {time.time() - t0:.1f}s")
EOF
dp=$!
sleep 0.5
kill -TERM "$PID_h"
serve_wait_exit "$PID_h" 15
wait $dp
[ "$RC" = 0 ] && awk -v w="$WAITED" 'BEGIN { exit !(w < 2) }' && grep -q '"end":"shutdown"' h.log
ok $? "SIGTERM with a client dribbling its body (--grace 5): its connection is closed, exit 0 after ${WAITED}s ($(cat dribble.out))"

# the other signals
serve_start i -m "$S" -t 1 --grace 10
curl -sN -o s3.txt "$URL_i$C" -d "${LONG%\}},\"stream\":true}" &
c1=$!
sleep 0.4
kill -HUP "$PID_i"
wait $c1
serve_wait_exit "$PID_i" 10
[ "$RC" = 0 ] && [ "$(grep -c '^data: {' s3.txt)" = 601 ] && [ "$(tail -n 2 s3.txt | head -n 1)" = "data: [DONE]" ] &&
    grep -q '"event":"draining","signal":"SIGHUP"' i.log
ok $? "SIGHUP during a stream drains as SIGTERM: all 600 tokens and [DONE], exit 0 ($RC)"
serve_start j -m "$S" -t 1
kill -QUIT "$PID_j"; serve_wait_exit "$PID_j" 5
[ "$RC" = 0 ] && grep -q '"event":"draining","signal":"SIGQUIT"' j.log
ok $? "SIGQUIT drains too: exit 0 ($RC), no core"
serve_start k -m "$S" -t 1
kill -USR1 "$PID_k"; kill -USR2 "$PID_k"; kill -ALRM "$PID_k"; kill -PIPE "$PID_k"; kill -XFSZ "$PID_k"
sleep 0.3
kill -0 "$PID_k" && cx 200 - - "$URL_k$C" -d '{"prompt":"Once upon a time","max_tokens":3}' &&
    [ "$(grep -c '"event":"signal",.*"action":"ignored"' k.log)" = 3 ]
ok $? "SIGUSR1, SIGUSR2, SIGALRM (logged), SIGPIPE and SIGXFSZ: the server serves on"
kill -TERM "$PID_k"; serve_wait_exit "$PID_k" 5
# as nohup starts it: SIGHUP ignored, and so it stays
( trap '' HUP; exec 1b-serve --port 0 -m "$S" -t 1 2> l.log ) &
lp=$!
_serve_pids+=("$lp")
for _ in $(seq 1 100); do grep -q '"event":"ready"' l.log && break; sleep 0.05; done
kill -HUP "$lp"; sleep 0.3
kill -0 "$lp" && ! grep -q draining l.log
a=$?
kill -TERM "$lp"; serve_wait_exit "$lp" 5
[ $a = 0 ] && [ "$RC" = 0 ]
ok $? "started with SIGHUP ignored (nohup): SIGHUP still ignored, SIGTERM drains (exit $RC)"

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
    # shellcheck disable=SC2086  # a command line's arguments, a word each
    1b-serve $args > /dev/null 2>&1; rc=$?
    [ $rc = 2 ] || { echo "# '$args': exit $rc"; bad=1; }
done
ok $bad "usage errors (no model, bad port, parallel, grace, size, both keys, extra argument): exit 2"
