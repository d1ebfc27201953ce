#!/usr/bin/env bash
# 1b-serve against slow clients (slowloris): an attacker on 127.0.0.2 that opens hundreds of
# connections and sends its headers one byte a second holds at most
# --max-connections-per-client of them (default 128) while a client on 127.0.0.1 gets /health
# at once; every such connection is shut down at its --header-timeout deadline although it
# never stops sending (libmicrohttpd's own timeout only counts silence). Without the limit per
# address the attacker can take every connection, but only until the deadline. A body sent
# one byte at a time is cut at --body-timeout, a later request on a kept-alive connection has
# its own header deadline, and a client at a normal pace is served. Cuts are logged and
# counted in /metrics.
# tests/run: alone (its deadlines and "/health at once" are timed: nothing beside it)
. "$(dirname "$0")/lib.sh"
. "$OB_TOP/tests/py/serve_env.sh"
declare URL_a PID_a URL_b PID_b URL_c PID_c  # set by name (printf -v), which shellcheck cannot see
plan 12
S=$SHARED/models/stories260K.gguf
cd "$T" || exit 1

# slow.py PORT N SECONDS: open N connections from 127.0.0.2, each sending a request line and
# then one header byte a second for SECONDS; meanwhile GET /health from 127.0.0.1 every 0.25 s.
# Prints one JSON object: how many connections the server held after 0.5 s, when the last was
# closed, and the slowest /health.
cat > slow.py <<'EOF'
import json, socket, sys, threading, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
conns = []
t0 = time.time()
for i in range(n):
    s = socket.socket()
    s.bind(("127.0.0.2", 0))
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    conns.append([s, None])        # socket, when the server closed it

def health():
    t = time.time()
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        ok = c.recv(100).startswith(b"HTTP/1.1 200")
        c.close()
    except OSError:
        ok = False
    return time.time() - t, ok

def poll(now):
    for k in conns:
        if k[1] is not None:
            continue
        try:
            if k[0].recv(100) == b"":
                k[1] = now
        except BlockingIOError:
            pass
        except OSError:
            k[1] = now

sent_line = False
held = None
lat = []
first = None                       # the first /health, taken while the attack holds
while time.time() - t0 < secs:
    now = time.time() - t0
    for k in conns:
        if k[1] is None:
            try:
                k[0].send(b"X" if sent_line else b"GET /health HTTP/1.1\r\nHost: x\r\n")
            except OSError:
                pass
    sent_line = True
    for _ in range(4):
        time.sleep(0.25)
        poll(time.time() - t0)
        if held is None:
            if time.time() - t0 >= 0.5:
                held = sum(k[1] is None for k in conns)
                first = health()
        else:
            lat.append(health())
closed = [k[1] for k in conns if k[1] is not None]
print(json.dumps({"held": held, "open_at_end": sum(k[1] is None for k in conns),
                  "last_closed": max(closed) if closed else None,
                  "first_health": first[0], "first_ok": first[1],
                  "max_health": max(l[0] for l in lat), "all_ok": all(l[1] for l in lat)}))
EOF

serve_start a -m "$S" -t 1 --header-timeout 2
ok $? "server with the default connection limits and --header-timeout 2 at $URL_a"
PA=${URL_a##*:}
r=$(python3 slow.py "$PA" 300 4)
echo "# $r"
jq -e '.held == 128' <<<"$r" > /dev/null
ok $? "300 slow connections from 127.0.0.2: the server holds 128 (the default per address), closes the rest"
jq -e '.first_ok and .first_health < 1 and .all_ok and .max_health < 1' <<<"$r" > /dev/null
ok $? "meanwhile 127.0.0.1 gets /health at once ($(jq -c '[.first_health, .max_health]' <<<"$r") s)"
jq -e '.open_at_end == 0 and .last_closed < 3.2' <<<"$r" > /dev/null
ok $? "every slow connection, though it never stops sending, is shut down at its 2 s header deadline"
grep -q '"event":"timeout","remote":"127.0.0.2","phase":"headers"' a.log &&
    grep -q '^ob_connections_timed_out_total{phase="headers"} 128$' <<<"$(curl -s "$URL_a/metrics")"
ok $? "the cuts are logged (timeout events) and counted in /metrics"
n=$(grep -c '"event":"http"' a.log)
[ "$n" -lt 20 ]; ok $? "libmicrohttpd's repeated messages do not flood the log ($n lines)"

# without a limit per address the attacker takes every connection, until the deadline
serve_start b -m "$S" -t 1 --header-timeout 2 --max-connections 64 --max-connections-per-client 0
ok $? "server with --max-connections 64, no limit per address"
r=$(python3 slow.py "${URL_b##*:}" 100 4)
echo "# $r"
jq -e '.first_ok and .first_health > 1 and .first_health < 4 and .all_ok' <<<"$r" > /dev/null
ok $? "100 slow connections take all 64: /health waits, but only until the deadline frees them ($(jq .first_health <<<"$r") s)"

# bodies and kept-alive connections
serve_start c -m "$S" -t 1 --header-timeout 1 --body-timeout 1
ok $? "server with --header-timeout 1 --body-timeout 1"
out=$(python3 - "${URL_c##*:}" <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
body = b'{"prompt":"Once upon a time","max_tokens":2,"temperature":0}'
def post(s, pace):
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body))
    t0 = time.time()
    s.settimeout(pace)
    d = b""
    for ch in body:
        try:
            s.send(bytes([ch]))
        except OSError:
            return "cut", time.time() - t0
        try:
            d = s.recv(65536)
            if d == b"":
                return "cut", time.time() - t0
            break                  # the answer
        except socket.timeout:
            pass
        except OSError:
            return "cut", time.time() - t0
    s.settimeout(5)
    while b"\r\n\r\n" not in d:
        d += s.recv(65536)
    return d.split(b"\r\n")[0].decode(), time.time() - t0
# a body one byte each 0.1 s (6 s in all): cut at 1 s
s = socket.create_connection(("127.0.0.1", port))
what, t = post(s, 0.1)
print(f"slow-body {what} {t:.2f}")
ok1 = what == "cut" and 0.8 < t < 2.5
# a body at a normal pace: answered; then, on the same connection, a second request whose
# headers come one byte each 0.2 s after its request line: cut 1 s after the request line
s = socket.create_connection(("127.0.0.1", port))
what, t = post(s, 0.001)
print(f"fast-body {what} {t:.2f}")
ok2 = what == "HTTP/1.1 200 OK"
s.sendall(b"GET /health HTTP/1.1\r\n")
t0 = time.time()
s.settimeout(0.2)
cut = None
for i in range(30):
    try:
        s.send(b"X")
        if s.recv(100) == b"":
            cut = time.time() - t0
            break
    except socket.timeout:
        pass
    except OSError:
        cut = time.time() - t0
        break
print(f"keep-alive-headers cut {cut}")
ok3 = cut is not None and 0.8 < cut < 2.5
sys.exit(0 if ok1 and ok2 and ok3 else 1)
EOF
)
rc=$?
echo "$out" | sed 's/^/# /'
grep -q '^slow-body cut' <<<"$out" && grep -q '"end":"body_timeout"' c.log
ok $? "a body sent one byte at a time is cut at its 1 s deadline, logged body_timeout"
[ $rc = 0 ]; ok $? "a body at a normal pace is served; a later request on that connection has its own header deadline"
kill -TERM "$PID_a" "$PID_b" "$PID_c"
serve_wait_exit "$PID_a" 10; a=$RC; serve_wait_exit "$PID_b" 10; b=$RC; serve_wait_exit "$PID_c" 10
[ "$a" = 0 ] && [ "$b" = 0 ] && [ "$RC" = 0 ] && ! grep -qv '^{' a.log b.log c.log
ok $? "SIGTERM: all exit 0, stderr held only JSON lines"
