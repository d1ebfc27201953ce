#!/usr/bin/env bash
# Two 1b-serve replicas behind nginx (Debian nginx-light), configured from
# contrib/nginx/1b-serve.conf, on loopback: /health through it, answers through it equal to
# 1b-gen's bits, SSE streams pass chunk by chunk (proxy_buffering off), both replicas take
# requests, and when one drains (SIGTERM) or dies (SIGKILL) nginx sends everything to the
# other without a failed request. nginx runs as the test's user where it can, in a temporary
# prefix with its own pid file, logs and temp dirs.
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_r1 PID_r1 URL_r2 PID_r2  # set by name (printf -v), which shellcheck cannot see
plan 12
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
serve_start r1 -m "$S" -t 1 --parallel 4 && serve_start r2 -m "$S" -t 1 --parallel 4
ok $? "two replicas at $URL_r1 and $URL_r2"

# a free port for nginx
P=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
N=$T/nginx
mkdir -p "$N"
sed -e "s|@LISTEN@|127.0.0.1:$P|" -e "s|@REPLICA1@|${URL_r1#http://}|" -e "s|@REPLICA2@|${URL_r2#http://}|" \
    "$OB_TOP/contrib/nginx/1b-serve.conf" > "$N/1b-serve.conf"
{
    # as root, nginx's workers would switch to an unprivileged user that cannot enter $T
    [ "$(id -u)" = 0 ] && echo "user root;"
    cat <<EOF
worker_processes 1;
pid $N/nginx.pid;
error_log $N/error.log info;
events { worker_connections 512; }
http {
    access_log $N/access.log;
    client_body_temp_path $N/body;
    proxy_temp_path $N/proxy;
    fastcgi_temp_path $N/fastcgi;
    uwsgi_temp_path $N/uwsgi;
    scgi_temp_path $N/scgi;
    include $N/1b-serve.conf;
}
EOF
} > "$N/nginx.conf"
"$NGINX" -t -e "$N/error.log" -p "$N" -c "$N/nginx.conf" > "$N/t.out" 2>&1
ok $? "nginx -t accepts the contrib template ($(tail -n 1 "$N/t.out"))"
"$NGINX" -e "$N/error.log" -p "$N" -c "$N/nginx.conf" -g 'daemon off;' 2> "$N/stderr" &
ngx=$!
_serve_pids+=("$ngx")
G=http://127.0.0.1:$P
for _ in $(seq 1 100); do curl -s -o /dev/null "$G/livez" && break; sleep 0.05; done
[ "$(curl -s "$G/health")" = '{"status":"ok"}' ]
ok $? "nginx up on port $P; /health through it: 200"

echo '{"id":"a","prompt":"Once upon a time","max_tokens":48,"top_logprobs":3}' | 1b-gen -m "$S" > g.jsonl
sc_ok "an answer through nginx = 1b-gen, bit for bit" gen-match "$G" /v1/completions '{"prompt":"Once upon a time","max_tokens":48,"temperature":0,"logprobs":3}' g.jsonl
sc_ok "SSE through nginx = the whole answer" stream-match "$G" /v1/completions '{"prompt":"Once upon a time","max_tokens":60,"temperature":0,"logprobs":1}'
# chunks are not held back: the first event arrives long before the last, and the middle one
# before the last fifth (a buffering proxy delays events, it never hastens them: no lower bound
# on the middle one, which a loaded machine's uneven pace broke at 0.17 of the total)
python3 - "$G" <<'EOF' > sse.txt; rc=$?
import json, sys, time, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v1/completions", method="POST",
                             data=json.dumps({"prompt": "Once upon a time", "max_tokens": 900,
                                              "stream": True}).encode(),
                             headers={"Content-Type": "application/json"})
t0 = time.time()
times = []
with urllib.request.urlopen(req) as r:
    for line in r:
        if line.startswith(b"data: "):
            times.append(time.time() - t0)
total = time.time() - t0
first, mid = times[0], times[len(times) // 2]
print(f"first event after {first:.3f}s, the middle one after {mid:.3f}s, {len(times)} in {total:.3f}s")
sys.exit(0 if len(times) == 902 and first < total / 4 and mid < 0.8 * total else 1)
EOF
ok $rc "SSE is not buffered by nginx: $(cat sse.txt)"
for _ in $(seq 1 12); do curl -s -o /dev/null -w '%{http_code}\n' "$G/v1/completions" -d '{"prompt":"Hi","max_tokens":2}'; done > codes.txt
n1=$(grep -c '"path":"/v1/completions"' r1.log); n2=$(grep -c '"path":"/v1/completions"' r2.log)
[ "$(sort -u codes.txt)" = 200 ] && [ "$n1" -gt 0 ] && [ "$n2" -gt 0 ]
ok $? "requests go to both replicas ($n1 and $n2 completions)"

# one replica drains: its listener closes, nginx goes to the other
curl -s -o long.json "$G/v1/completions" -d '{"prompt":"Once upon a time","max_tokens":500}' &
cl=$!
sleep 0.3
kill -TERM "$PID_r1"
for _ in $(seq 1 20); do curl -s -o /dev/null -w '%{http_code}\n' "$G/v1/completions" -d '{"prompt":"Hi","max_tokens":2}'; done > codes.txt
[ "$(sort -u codes.txt)" = 200 ]
ok $? "replica 1 draining (SIGTERM): 20 requests through nginx, all 200 ($(sort < codes.txt | uniq -c | tr '\n' ' '))"
wait $cl
jq -e '.usage.completion_tokens == 500' long.json > /dev/null
ok $? "the request running when it was told to stop still completed"
serve_wait_exit "$PID_r1" 10
[ "$RC" = 0 ] && [ "$(curl -s "$G/health")" = '{"status":"ok"}' ]
ok $? "replica 1 exited 0; /health through nginx still 200 (replica 2)"
kill -9 "$PID_r2"; wait "$PID_r2" 2> /dev/null
code=$(curl -s -o /dev/null -w '%{http_code}' "$G/health")
[ "$code" = 502 ]; ok $? "both replicas gone: /health through nginx is $code"
kill -QUIT "$ngx"; serve_wait_exit "$ngx" 10
[ "$RC" = 0 ]; ok $? "nginx stops cleanly"
